"""A Mistral (tekken) tokenizer for a tiny config, written as the checkpoint's ``tekken.json``.

Some of vLLM's Mistral models read mistral_common's tokenizer, not a transformers one, while
the engine starts (Voxtral Realtime takes its audio encoder's delay off
``tokenizer.instruct.audio_encoder``, voxtral_realtime.py:263). The zoo writes the file
mistral_common loads (``Tekkenizer.from_file``): the 256 byte tokens after the special tokens,
its special tokens (mistral_common's named ones first, fillers after), as long as the
config's vocabulary, and the sections the entry gives (``audio``; Pixtral's ``image``, the
image encoder's config).
"""

from __future__ import annotations

import base64
import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["write_tekken"]

_BYTES = 256
# mistral_common's tokenizer version with streaming transcription and no model settings.
_VERSION = "v13"


def write_tekken(folder: Path, vocab: int, sections: Mapping[str, Any]) -> Path:
    """Writes ``folder/tekken.json`` of ``vocab`` ids with the given extra ``sections``."""
    # mistral_common comes with vLLM (its environment, not the one the type check runs in).
    special: Any = importlib.import_module("mistral_common.tokens.tokenizers.base").SpecialTokens
    specials = vocab - _BYTES
    names = [str(token.value) for token in special]
    if specials < len(names):
        raise ValueError(
            f"tekken: a vocabulary of {vocab} leaves {specials} special ids; "
            f"mistral_common names {len(names)} (expected a vocab_size >= {_BYTES + len(names)})"
        )
    special_tokens = [
        {"rank": rank, "token_str": name, "is_control": True} for rank, name in enumerate(names)
    ]
    byte_tokens = [
        {"rank": b, "token_bytes": base64.b64encode(bytes([b])).decode(), "token_str": None}
        for b in range(_BYTES)
    ]
    data = {
        "config": {
            "pattern": r"\s+|\S+",
            "num_vocab_tokens": _BYTES,
            "default_vocab_size": vocab,
            "default_num_special_tokens": specials,
            "version": _VERSION,
        },
        "vocab": byte_tokens,
        "special_tokens": special_tokens,
        **{key: dict(value) for key, value in sections.items()},
    }
    path = folder / "tekken.json"
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path
