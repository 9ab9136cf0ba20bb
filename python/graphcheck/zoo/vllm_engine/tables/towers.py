"""Tiny vision towers the multimodal table's hub configs hold (one module per concept).

Each is the dict of fields vLLM's tower reads, at the zoo's tiny sizes (width 64, two heads,
one layer, 32- or 64-pixel images of 16-pixel patches), citing the vLLM file it was read from.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "EVA2CLIP",
    "INTERN_VIT",
    "PERCEPTION_ENCODER",
    "SIGLIP2_NAVIT",
    "SIGLIP_VISION",
    "TINY_VIT",
]

#: The sizes of a ViT tower under transformers' names: one layer of width 64 over a
#: 32-pixel image of four 16-pixel patches.
TINY_VIT: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "image_size": 32,
    "patch_size": 16,
}

#: InternViT (intern_vit.py): what InternVisionModel reads, at the zoo's tiny sizes.
INTERN_VIT: dict[str, Any] = {
    "model_type": "intern_vit_6b",
    **TINY_VIT,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-6,
    "norm_type": "layer_norm",
    "qk_normalization": False,
    "qkv_bias": True,
    "initializer_factor": 1.0,
}

#: SigLIP's vision tower at the InternViT tower's tiny sizes (Eagle 2.5's chat config).
SIGLIP_VISION: dict[str, Any] = {"model_type": "siglip_vision_model", **TINY_VIT}

#: Ovis 2.5's SigLIP2-NaViT tower (siglip2navit.py), tiny: 16 patches of 16 pixels in a
#: 64-pixel image, merged 2x2 (hidden_stride), full attention in its one layer.
SIGLIP2_NAVIT: dict[str, Any] = {
    "model_type": "siglip2_navit",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_hidden_layers": 1,
    "num_channels": 3,
    "image_size": 64,
    "patch_size": 16,
    "num_patches": 16,
    "preserve_original_pe": True,
    "hidden_stride": 2,
    "temporal_patch_size": 1,
    "attention_dropout": 0.0,
    "use_rope": True,
    "hidden_act": "gelu_pytorch_tanh",
    "layer_norm_eps": 1e-6,
    "window_size": 112,
    "fullatt_block_indexes": None,
}

#: GLM-4V's EVA2-CLIP tower (glm4v.py:81-348, a dict its processor indexes): one layer over
#: a 32-pixel image of four 16-pixel patches and the class token.
EVA2CLIP: dict[str, Any] = {
    "image_size": 32,
    "patch_size": 16,
    "in_channels": 3,
    "hidden_size": 64,
    "num_heads": 2,
    "num_positions": 5,
    "dropout_prob": 0.0,
    "hidden_act": "gelu",
    "intermediate_size": 128,
    "layer_norm_eps": 1e-6,
    "num_hidden_layers": 1,
    "scaling_factor": 8.0,
}

#: StepFun's Perception Encoder (step_vl.py:349-400, which refuses it without 2-D RoPE), as
#: the hub's checkpoints name its fields: one layer of two 32-wide heads over a 2x2 patch grid.
PERCEPTION_ENCODER: dict[str, Any] = {
    "model_type": "perception_encoder",
    "width": 64,
    "layers": 1,
    "heads": 2,
    "mlp_ratio": 2.0,
    "ls_init_value": None,
    "patch_size": 16,
    "image_size": 32,
    "output_dim": None,
    "use_rope2d": True,
    "use_cls_token": False,
    "use_abs_posemb": True,
    "use_ln_pre": True,
    "use_ln_post": False,
    "hidden_act": "gelu",
}
