"""Hostile values for the flag's settings tests (issue 34): random bytes, environments and
configuration values, seeded so that a failure replays."""

from __future__ import annotations

import os
import random
from pathlib import Path

#: The variables of the server flag.
VARIABLES = (b"GRAPHCHECK", b"GRAPHCHECK_MODE", b"GRAPHCHECK_DIR", b"GRAPHCHECK_ALLOW")


def one_printable_line(text: str) -> bool:
    """No control character, no surrogate, no newline: what a log line may hold."""
    return text.isprintable()


def random_bytes(rng: random.Random, *, nul: bool = True) -> bytes:
    """A few pieces a terminal or a decoder trips on, and a few random bytes."""
    pieces = [
        b"\xff",
        b"\xfe",
        b"\x1b[31m",
        b"\n",
        b"\r",
        b"\x7f",
        b"\xc2\x9b",
        b"/",
        b".",
        b"1",
        b"on",
        b"error",
        b"warn",
        b"model.*",
        "é".encode(),
        b"\\",
    ]
    out = b"".join(rng.choice(pieces) for _ in range(rng.randrange(6)))
    out += bytes(rng.randrange(256) for _ in range(rng.randrange(4)))
    return out if nul else out.replace(b"\0", b"")


def random_env(seed: int, folder: Path) -> dict[bytes, bytes]:
    """Random GRAPHCHECK_* values (no NUL: an environment cannot hold one) and allowlist."""
    rng = random.Random(seed)
    allow = folder / "fuzz-allow.txt"
    allow.write_bytes(random_bytes(rng) + b"\n" + random_bytes(rng))
    env = {name: random_bytes(rng, nul=False) for name in VARIABLES}
    env[b"GRAPHCHECK"] = b"1"
    env[b"GRAPHCHECK_DIR"] = os.fsencode(folder) + b"/" + env[b"GRAPHCHECK_DIR"].replace(b"/", b"")
    if rng.random() < 0.5:
        env[b"GRAPHCHECK_ALLOW"] = os.fsencode(allow)
    return env


def random_value(rng: random.Random, depth: int = 0) -> object:
    """A configuration value of any type: text, bytes, numbers, lists and mappings."""
    kind = rng.randrange(8 if depth < 2 else 5)
    if kind == 0:
        return random_bytes(rng).decode("utf-8", "surrogateescape")
    if kind == 1:
        return rng.choice([None, True, False, 0, -1, 3.5, float("nan")])
    if kind == 2:
        return random_bytes(rng)
    if kind == 3:
        return "".join(chr(rng.randrange(0x110000)) for _ in range(rng.randrange(5)))
    if kind == 4:
        return rng.choice(["warn", "error", "ERROR", "", "/tmp", "allow.txt"])
    if kind == 5:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {str(random_value(rng, depth + 1)): random_value(rng, depth + 1) for _ in range(3)}
