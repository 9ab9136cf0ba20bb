"""Small helpers shared by the zoo's modules."""

from __future__ import annotations

import os
import re
import traceback
from typing import Any

_VALIDATION = re.compile(r"\d+ validation errors? for \w+")
# pydantic's echo of the input after the message: "[type=value_error, input_value=...]".
_PYDANTIC_TAIL = re.compile(r"\s*\[type=.*$")


def error_line(exc: BaseException) -> str:
    """``"ValueError: first line of the message"``.

    An exception with an empty message (a bare ``assert``) is named by where it
    was raised instead: ``"AssertionError at vllm/.../mla_attention.py:412"``.
    """
    lines = str(exc).strip().splitlines()
    first = lines[0].strip() if lines else ""
    if _VALIDATION.fullmatch(first) and len(lines) > 1:
        # pydantic: "1 validation error for ModelConfig", then the field and the message.
        detail = " ".join(
            ln.strip() for ln in lines[1:3] if ln.strip() and "errors.pydantic" not in ln
        )
        first = f"{first}: {_PYDANTIC_TAIL.sub('', detail)}"
    if len(first) > 300:
        first = first[:297] + "..."
    if first:
        return f"{type(exc).__name__}: {first}"
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return type(exc).__name__
    where = frames[-1].filename
    marker = f"{os.sep}site-packages{os.sep}"
    where = where.split(marker, 1)[1] if marker in where else os.path.basename(where)
    return f"{type(exc).__name__} at {where}:{frames[-1].lineno}"


def layer_count(config: dict[str, Any]) -> int:
    """The layer count a config dict names (``num_hidden_layers``, ...), else 2."""
    for key in ("num_hidden_layers", "num_layers", "n_layer"):
        if isinstance(config.get(key), int):
            return int(config[key])
    return 2
