"""Config table: multimodal composites whose towers vLLM reads in names of its own.

The config class transformers or the registry gives these architectures holds a tower
config in transformers' names (Step 3.7's ``step3p5_vision``), or none of the composite's
(Pixtral's is the vision tower alone), where vLLM's model reads the checkpoint's: each
entry gives the composite the way vLLM's own loader or the hub's checkpoint writes it, at
the zoo's tiny sizes (one tower layer of width 64, two heads, 32-pixel images of 16-pixel
patches). Split from :mod:`.multimodal` and :mod:`.hub_vlm` to keep each module small.
"""

from __future__ import annotations

from graphcheck.zoo.vllm_engine.tables import Dict, Entry
from graphcheck.zoo.vllm_engine.tables.moe import TABLE as MOE
from graphcheck.zoo.vllm_engine.tables.multimodal import tiny_text
from graphcheck.zoo.vllm_engine.tables.towers import PERCEPTION_ENCODER

_M = "vllm/model_executor/models/"


def _pixtral(d: Dict) -> None:
    # vLLM's Mistral-format loader makes Pixtral's config a plain composite of model type
    # "pixtral" (transformers_utils/configs/mistral.py:96-111): the Mistral text config
    # beside the vision encoder's args, which pixtral.py:383-388 reads into
    # VisionEncoderArgs (pixtral.py:656-669).
    d["text_config"] = {**tiny_text("mistral"), "architectures": ["MistralForCausalLM"]}
    d["vision_config"] = {
        "hidden_size": 64,
        "num_channels": 3,
        "image_size": 32,
        "patch_size": 16,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "rope_theta": 10000.0,
        "image_token_id": 10,
        "adapter_bias": True,
        "spatial_merge_size": 1,
    }


def _step3p7(d: Dict) -> None:
    d["vision_config"] = dict(PERCEPTION_ENCODER)
    # The language model in vLLM's Step3p5Config's names (att_impl_type, moe_every_n_layer...),
    # which transformers' Step 3.7 text class keeps beside its own.
    text = tiny_text("step3p5", vllm=True, **MOE["Step3p5ForCausalLM"].fields)
    d["text_config"] = {**text, "architectures": ["Step3p5ForCausalLM"]}


TABLE: dict[str, Entry] = {
    "PixtralForConditionalGeneration": Entry(
        _M + "pixtral.py, vllm/transformers_utils/configs/mistral.py",
        base="llama",
        remote="PixtralConfig",
        model_type="pixtral",
        fix=_pixtral,
    ),
    # Step 3.7: the hub's class (transformers' Step3p7Config reads the tower's checkpoint
    # names width/layers/heads into its own and drops them, which vLLM then reads:
    # step_vl.py:361). Its tower is vLLM's Perception Encoder (step3p7.py:53-66), its language
    # model Step 3.5's, built off text_config (step3p7.py:68-73) by the architecture named
    # there, with the fields vLLM's Step3p5 model reads.
    "Step3p7ForConditionalGeneration": Entry(
        _M + "step3p7.py, step_vl.py, step3p5.py",
        base="step3p7",
        remote="Step3p7Config",
        model_type="step3p7",
        fields={"projector_bias": False, "image_token_id": 510},
        fix=_step3p7,
    ),
}
