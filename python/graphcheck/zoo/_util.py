"""Small helpers shared by the zoo's modules."""

from __future__ import annotations


def error_line(exc: BaseException) -> str:
    """``"ValueError: first line of the message"`` (the class alone when the message is empty)."""
    lines = str(exc).strip().splitlines()
    first = lines[0].strip() if lines else ""
    if len(first) > 300:
        first = first[:297] + "..."
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
