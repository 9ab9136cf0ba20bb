"""Config table: speech models whose hub configs hold their audio encoder's arguments.

FireRedASR2 and Fun-ASR are a Qwen language model beside an audio encoder that vLLM builds
from the keyword arguments the checkpoint's config gives as a dict (``audio_encoder_conf``),
at the zoo's tiny sizes: one encoder layer of width 64 (Fun-ASR's adaptor fixes the
encoder's width at 512). Split from :mod:`.multimodal` to keep each module small.
"""

from __future__ import annotations

from graphcheck.zoo.vllm_engine.tables import Entry

_M = "vllm/model_executor/models/"

TABLE: dict[str, Entry] = {
    # FireRedASR2: ConformerEncoder(**audio_encoder_conf) (fireredasr2.py:121-145,
    # conformer_encoder.py:299-320) over 80 mel bins, its frames merged by
    # encoder_downsample_rate before the projector; the decoder is Qwen2.
    "FireRedASR2ForConditionalGeneration": Entry(
        _M + "fireredasr2.py, conformer_encoder.py",
        base="qwen2",
        fields={
            "audio_encoder_conf": {
                "idim": 80,
                "n_layers_enc": 1,
                "n_head": 2,
                "d_model": 64,
                "kernel_size": 33,
                "pe_maxlen": 512,
            },
            "encoder_downsample_rate": 2,
        },
    ),
    # Fun-ASR: SenseVoiceEncoderSmall(input_size=560, **audio_encoder_conf)
    # (funasr.py:299-370, 633-650); its adaptor takes a 512-wide encoder (funasr.py:640-648).
    # The decoder is Qwen3.
    "FunASRForConditionalGeneration": Entry(
        _M + "funasr.py",
        base="qwen3",
        fields={
            "audio_encoder_conf": {
                "output_size": 512,
                "attention_heads": 4,
                "linear_units": 128,
                "num_blocks": 1,
                "tp_blocks": 0,
                "kernel_size": 11,
                "sanm_shift": 0,
            },
        },
    ),
}
