"""Config table: embedding, classification and late-interaction architectures.

Encoders with rotary positions (``bert_with_rope.py``) and the ColBERT heads
(``colbert.py``) read fields the hub's remote-code configs carry; vLLM's
``model_executor/models/config.py`` checks some of them by class name
(``NewConfig``, ``XLMRobertaFlashConfig``) and rewrites them before the build.
"""

from __future__ import annotations

from typing import Any

from graphcheck.zoo.vllm_engine.tables import GEMMA3_TOKENS, QWEN_OMNI_TOKENS, Dict, Entry
from graphcheck.zoo.vllm_engine.tables.multimodal import _intern_vl
from graphcheck.zoo.vllm_engine.tables.towers import SIGLIP_VISION

_ROPE = {"rope_type": "default", "rope_theta": 10000.0}
_BERT_WITH_ROPE = "vllm/model_executor/models/bert_with_rope.py, config.py"

# The GTE "new" encoder (Alibaba-NLP/gte-*-v1.5): the hub's NewConfig, rotary positions;
# GteNewModelConfig asserts the class name and hidden_act == "gelu" (it makes it geglu).
_GTE_NEW = Entry(
    _BERT_WITH_ROPE,
    base="bert",
    remote="NewConfig",
    model_type="new",
    fields={
        "hidden_act": "gelu",
        "position_embedding_type": "rope",
        "rope_parameters": _ROPE,
        "type_vocab_size": 2,
        "num_labels": 2,
    },
)

# Late-interaction (ColBERT) heads on four encoders: colbert.py reads colbert_dim (or dim,
# projection_dim) with a default; the encoders read their own configs.
_JINA = Entry(
    "vllm/model_executor/models/colbert.py, bert_with_rope.py (JinaRobertaModel), config.py",
    base="xlm-roberta",
    remote="XLMRobertaFlashConfig",
    model_type="xlm-roberta",
    fields={"position_embedding_type": "rotary", "rope_parameters": _ROPE, "colbert_dim": 32},
)


def _nemotron_vl(text_arch: str, **text: Any) -> Entry:
    """Llama-Nemotron VL's embedding and reranking models (nemotron_vl.py:405-640).

    The InternVL layout (the hub's config: a SigLIP tower, the chat config's tiling) over a
    bidirectional Llama, ``text_arch``, as the checkpoints' ``llm_config`` names it; vLLM's
    config hook asks the pooling (model_executor/models/config.py:633-668), and the model
    the image placeholder's id (nemotron_vl.py:507): the zoo tokenizer's ``<IMG_CONTEXT>``.
    """
    chat = _intern_vl("llama", SIGLIP_VISION)

    def fix(d: Dict) -> None:
        from graphcheck.zoo.vllm_engine.tokenizer import top_id

        chat(d)
        d["text_config"].update(architectures=[text_arch], pooling="avg", **text)
        d["img_context_token_id"] = top_id("<IMG_CONTEXT>", d["text_config"]["vocab_size"])

    return Entry(
        "vllm/model_executor/models/nemotron_vl.py, config.py",
        base="llama",
        remote="LlamaNemotronVLConfig",
        model_type="llama_nemotron_vl",
        fields={"pooling": "avg"},
        fix=fix,
    )


_COLQWEN3 = Entry("vllm/model_executor/models/colqwen3.py", processor="qwen3_vl")

TABLE: dict[str, Entry] = {
    # SnowflakeGteNewModelConfig (config.py) asserts GteConfig and gelu; the model reads
    # position_embedding_type, which transformers' GteConfig no longer has.
    "GteModel": Entry(
        _BERT_WITH_ROPE,
        fields={"position_embedding_type": "rope", "hidden_act": "gelu", "rope_parameters": _ROPE},
    ),
    "GteNewModel": _GTE_NEW,
    "GteNewForSequenceClassification": _GTE_NEW,
    # NomicBertModelConfig (config.py:758) maps nomic's names onto BERT's and asserts these.
    "NomicBertModel": Entry(
        _BERT_WITH_ROPE,
        fields={
            "activation_function": "swiglu",
            "mlp_fc1_bias": False,
            "mlp_fc2_bias": False,
            "qkv_proj_bias": False,
            "rotary_emb_scale_base": None,
            "rotary_emb_interleaved": False,
            "position_embedding_type": "rope",
            # nomic's names for BERT's width, FFN, layers and epsilon (config.py maps them).
            "n_embd": 64,
            "n_inner": 128,
            "n_layer": 2,
            "layer_norm_epsilon": 1e-12,
        },
    ),
    # XLM-R with absolute positions: roberta.py reads position_embedding_type, which
    # transformers 5's XLMRobertaConfig dropped.
    "XLMRobertaModel": Entry(
        "vllm/model_executor/models/roberta.py", fields={"position_embedding_type": "absolute"}
    ),
    # LlamaBidirectionalModel: vLLM refuses to guess the pooling of a bidirectional Llama
    # (model_executor/models/config.py); the checkpoints name it.
    "LlamaBidirectionalModel": Entry(
        "vllm/model_executor/models/llama.py, config.py", fields={"pooling": "avg"}
    ),
    "LlamaBidirectionalForSequenceClassification": Entry(
        "vllm/model_executor/models/llama.py, config.py", fields={"pooling": "avg", "num_labels": 2}
    ),
    # vLLM checks these configs' classes: Qwen2-VL's and Qwen3-Omni's for the models built
    # on them.
    # vLLM's ColQwen3 processor (transformers_utils/processor.py:247) loads Qwen3-VL's image
    # processor by AutoImageProcessor: the checkpoints ship its preprocessor_config.json.
    "ColQwen3": _COLQWEN3,
    "OpsColQwen3Model": _COLQWEN3,
    "Qwen3VLNemotronEmbedModel": _COLQWEN3,
    # ColQwen3.5: Qwen3.5's config (no class names the architecture); vLLM forces Qwen3-VL's
    # processor (colqwen3_5.py:57-61) and its config hook asks the checkpoint's attention
    # contract (model_executor/models/config.py:986-1003).
    "ColQwen3_5": Entry(
        "vllm/model_executor/models/colqwen3_5.py, config.py",
        base="qwen3_5",
        processor="qwen3_vl",
        fields={"retrieval_attention_contract": "causal"},
    ),
    # vLLM's ColModernVBertConfig is registered under the checkpoint's model type, modernvbert
    # (transformers_utils/config.py:85), and colmodernvbert.py:109 asks for that class, not
    # transformers' colmodernvbert one; its processor loads Idefics3's image processor
    # (colmodernvbert.py:179-181).
    "ColModernVBertForRetrieval": Entry(
        "vllm/model_executor/models/colmodernvbert.py, transformers_utils/config.py",
        base="modernvbert",
        remote="ColModernVBertConfig",
        model_type="modernvbert",
        processor="idefics3",
    ),
    # ColPali runs PaliGemma's processing, which looks the newline word up in the vocabulary
    # (paligemma.py:218): Gemma's tokenizer has it.
    "ColPaliForRetrieval": Entry(
        "vllm/model_executor/models/colpali.py, paligemma.py", tokens={"newline_token": "\n"}
    ),
    "LlamaNemotronVLModel": _nemotron_vl("LlamaBidirectionalModel"),
    "LlamaNemotronVLForSequenceClassification": _nemotron_vl(
        "LlamaBidirectionalForSequenceClassification", num_labels=1
    ),
    "JinaVLForRanking": Entry("vllm/model_executor/models/jina_vl.py", base="qwen2_vl"),
    # With the image processor and feature extractor their processors load.
    "ClefOmniForJointSchema": Entry(
        "vllm/model_executor/models/clef_omni.py",
        base="qwen3_omni_moe",
        processor="qwen3_omni_moe",
        processor_class=True,
        # Qwen3-Omni's thinker (qwen3_omni_moe_thinker.py:772) reads the tower's image size.
        fields={
            "thinker_config": {
                "vision_config": {"image_size": 64, "apply_vit_abs_pos_embed": True},
                "text_config": {"tie_word_embeddings": False},
            },
            # JointSchemaHead's arguments (clef_omni.py:115, read at clef_omni.py:420).
            "joint_head_config": {
                "hidden_size": 64,
                "width": 64,
                "routing_layers": 1,
                "layers": 1,
                "heads": 2,
                "feedforward": 128,
            },
        },
        tokens=QWEN_OMNI_TOKENS,
    ),
    "Qwen3ASRForcedAlignerForTokenClassification": Entry(
        "vllm/transformers_utils/configs/qwen3_asr.py",
        base="qwen3_asr",
        processor="whisper",
        tokens=QWEN_OMNI_TOKENS,
        # The time-bin classifier's width (qwen3_asr_forced_aligner.py:78); the default
        # leaves it unset.
        fields={"thinker_config": {"classify_num": 64}},
    ),
    # EmbeddingGemma 2 (transformers' class, served whole): its processor is Gemma 3's kind.
    "EmbeddingGemma2Model": Entry(
        "vllm/model_executor/models/transformers/pooling.py",
        processor="embedding_gemma2",
        processor_class=True,
        tokens=GEMMA3_TOKENS,
    ),
    # The original ColBERT checkpoints (HF_ColBERT) keep the projection's width in ColBERT's
    # own metadata, not in config.json: vLLM then builds no projection at init and makes it
    # from the checkpoint's linear.weight while loading (colbert.py:79-85, 160-172). A config
    # that names the width reaches colbert.py:84 before Module.__init__ (a reason of vLLM's).
    "HF_ColBERT": Entry("vllm/model_executor/models/colbert.py", base="bert"),
    "ColBERTModernBertModel": Entry(
        "vllm/model_executor/models/colbert.py, modernbert.py",
        base="modernbert",
        fields={"colbert_dim": 32},
    ),
    "ColBERTJinaRobertaModel": _JINA,
    "ColBERTLfm2Model": Entry(
        "vllm/model_executor/models/colbert.py, lfm2.py",
        base="lfm2",
        fields={"colbert_dim": 32, "block_dim": 64},
    ),
}
