"""Speculative-decoding architectures: a draft model is checked beside the target it serves.

vLLM builds a draft architecture (EAGLE, EAGLE-3, Medusa, multi-token
prediction layers) only as the ``drafter`` of a target model's runner
(``speculative_config``). The zoo builds the target from a tiny config and the
draft from its own (EAGLE, Medusa) or from the target's (MTP: the target's
``num_nextn_predict_layers``), then checks both as one model
(:class:`TargetAndDraft`: ``model.*`` and ``draft_model.*``, as the server
flag names them), capturing the draft's forward in the runner's dummy batch.
A draft is a model to check, never runtime state of the runner.

:data:`DRAFTS` lists the drafts whose targets vLLM builds on the CPU; the
others are reported with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from graphcheck.integrations._vllm_forward import TargetAndDraft

__all__ = ["DRAFTS", "Draft", "TargetAndDraft"]


@dataclasses.dataclass(frozen=True)
class Draft:
    """How vLLM serves a draft architecture: the method and the target architecture.

    ``own_config``: the draft has its own checkpoint folder (EAGLE, Medusa);
    otherwise it is the target's own MTP layers (``num_nextn_predict_layers``).
    """

    method: str
    target: str
    own_config: bool = True
    #: More ``speculative_config`` entries (the hidden-states extractor's layers).
    spec: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: Fields the target's config gets when it serves this draft, beside an MTP draft's
    #: ``num_nextn_predict_layers`` (Inkling's ``mtp_config``).
    target_fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)


DRAFTS: dict[str, Draft] = {
    "EagleLlamaForCausalLM": Draft("eagle", "LlamaForCausalLM"),
    "EagleMistralForCausalLM": Draft("eagle", "MistralForCausalLM"),
    "Eagle3LlamaForCausalLM": Draft("eagle3", "LlamaForCausalLM"),
    "LlamaForCausalLMEagle3": Draft("eagle3", "LlamaForCausalLM"),
    "Eagle3Qwen3ForCausalLM": Draft("eagle3", "Qwen3ForCausalLM"),
    "Eagle3DeepseekV2ForCausalLM": Draft("eagle3", "DeepseekV2ForCausalLM"),
    "Eagle3DeepseekV3ForCausalLM": Draft("eagle3", "DeepseekV3ForCausalLM"),
    "MedusaModel": Draft("medusa", "LlamaForCausalLM"),
    # Cohere 2's drafts (cohere_eagle.py:66-77 prepends the target's layer_types, which
    # Cohere 1's config has none of).
    "EagleCohereForCausalLM": Draft("eagle", "Cohere2ForCausalLM"),
    "EagleLlama4ForCausalLM": Draft("eagle", "Llama4ForCausalLM"),
    "EagleMiniCPMForCausalLM": Draft("eagle", "MiniCPMForCausalLM"),
    "EagleMistralLarge3ForCausalLM": Draft("eagle", "MistralLarge3ForCausalLM"),
    "EagleDeepSeekMTPModel": Draft("eagle", "DeepseekV3ForCausalLM"),
    "PEagleDraftModel": Draft("eagle3", "LlamaForCausalLM"),
    "PeagleLlamaForCausalLM": Draft("eagle3", "LlamaForCausalLM"),
    "PeagleQwen3ForCausalLM": Draft("eagle3", "Qwen3ForCausalLM"),
    "Eagle3MiniMaxM2ForCausalLM": Draft("eagle3", "MiniMaxM2ForCausalLM"),
    "Eagle3Qwen2_5vlForCausalLM": Draft("eagle3", "Qwen2_5_VLForConditionalGeneration"),
    "Eagle3Qwen3vlForCausalLM": Draft("eagle3", "Qwen3VLForConditionalGeneration"),
    "DFlashDraftModel": Draft("dflash", "Qwen3ForCausalLM"),
    "DFlash2DraftModel": Draft("dflash", "Qwen3ForCausalLM"),
    "LiLiCorrDraftModel": Draft("dflash", "Qwen3ForCausalLM"),
    "MuseGlimmerAssistantModel": Draft("dflash", "MuseGlimmerForCausalLM"),
    "DFlashMuseGlimmerAssistantModel": Draft("dflash", "MuseGlimmerForCausalLM"),
    "DFlashLagunaForCausalLM": Draft("dflash", "LagunaForCausalLM"),
    "Qwen3DSparkModel": Draft("dspark", "Qwen3ForCausalLM"),
    "Gemma4DSparkModel": Draft("dspark", "Gemma4ForCausalLM"),
    # Gemma 4's assistant checkpoint (model type gemma4_assistant), which vLLM serves as the
    # MTP draft (config/speculative.py:1019-1028).
    "Gemma4MTPModel": Draft("mtp", "Gemma4ForCausalLM"),
    # vLLM makes the extractor from the target's config and this dict (config/speculative.py:1242).
    "ExtractHiddenStatesModel": Draft(
        "extract_hidden_states",
        "LlamaForCausalLM",
        own_config=False,
        spec={"draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [0, 1]}}},
    ),
    "DeepSeekMTPModel": Draft("mtp", "DeepseekV3ForCausalLM", own_config=False),
    "ErnieMTPModel": Draft("mtp", "Ernie4_5_MoeForCausalLM", own_config=False),
    "MiMoMTPModel": Draft("mtp", "MiMoForCausalLM", own_config=False),
    "ExaoneMoeMTP": Draft("mtp", "ExaoneMoeForCausalLM", own_config=False),
    "Qwen3NextMTP": Draft("mtp", "Qwen3NextForCausalLM", own_config=False),
    "Qwen3_5MTP": Draft("mtp", "Qwen3_5ForCausalLM", own_config=False),
    "Qwen3_5MoeMTP": Draft("mtp", "Qwen3_5MoeForCausalLM", own_config=False),
    "InternS2MobiusMTP": Draft("mtp", "InternS2MobiusForConditionalGeneration", own_config=False),
    "Glm4MoeMTPModel": Draft("mtp", "Glm4MoeForCausalLM", own_config=False),
    "Glm4MoeLiteMTPModel": Draft("mtp", "Glm4MoeLiteForCausalLM", own_config=False),
    "MiMoV2MTPModel": Draft("mtp", "MiMoV2FlashForCausalLM", own_config=False),
    # config/speculative.py:736-758 maps MiMo-V2-Omni's own config to its MTP.
    "MiMoV2OmniMTPModel": Draft("mtp", "MiMoV2OmniForCausalLM", own_config=False),
    "GlmOcrMTPModel": Draft("mtp", "GlmOcrForConditionalGeneration", own_config=False),
    "Exaone4_5_MTP": Draft("mtp", "Exaone4_5_ForConditionalGeneration", own_config=False),
    "HYV3MTPModel": Draft("mtp", "HYV3ForCausalLM", own_config=False),
    "Step3p5MTP": Draft("mtp", "Step3p5ForCausalLM", own_config=False),
    # config/speculative.py:1000-1006 and 715-720 map the targets' model types to their MTP's.
    # Inkling's checkpoint counts its MTP layers in mtp_config (config/speculative.py:1000-1004).
    "InklingMTPModel": Draft(
        "mtp",
        "InklingForCausalLM",
        own_config=False,
        target_fields={"mtp_config": {"num_nextn_predict_layers": 1}},
    ),
    "KimiK3MTPModel": Draft("mtp", "KimiK3ForConditionalGeneration", own_config=False),
    "OpenPanguMTPModel": Draft("mtp", "PanguUltraMoEForCausalLM", own_config=False),
    # The MTP modules are the VL checkpoint's (config/speculative.py:1030-1047 promotes its
    # text config to the MTP's).
    "MiniMaxM3MTP": Draft("mtp", "MiniMaxM3SparseForConditionalGeneration", own_config=False),
    "BailingMoeV25MTPModel": Draft("mtp", "BailingMoeV2_5ForCausalLM", own_config=False),
    "BailingMoeV3MTPModel": Draft("mtp", "BailingMoeV3ForCausalLM", own_config=False),
    "LongCatFlashMTPModel": Draft("mtp", "LongcatFlashForCausalLM", own_config=False),
    # vLLM turns the composite's config (model type glm5_next) into the MTP's
    # (config/speculative.py:1059); the text model's config it leaves a text model.
    "Glm5NextMTPModel": Draft("mtp", "Glm5NextForConditionalGeneration", own_config=False),
    "Qwen4ExpMTP": Draft("mtp", "Qwen4ExpForCausalLM", own_config=False),
    "NemotronHMTPModel": Draft("mtp", "NemotronHForCausalLM", own_config=False),
    "Dots3NoteMTPModel": Draft("mtp", "Dots3NoteForCausalLM", own_config=False),
    "HYV4MTPModel": Draft("mtp", "HYV4ForCausalLM", own_config=False),
    "DeepseekV32MTPModel": Draft("mtp", "DeepseekV32ForCausalLM", own_config=False),
    "Qwen3OmniDSparkModel": Draft("dspark", "Qwen3OmniMoeForConditionalGeneration"),
    "DSparkV41DraftModel": Draft("dspark", "DeepseekV41ForCausalLM"),
}
