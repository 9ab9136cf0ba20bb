"""The command line of the gpu tier's Python smokes: ``--out DIR``, and a SKIP without CUDA.

Each smoke prints one line and exits 0 with ``SKIP`` where torch sees no CUDA device
(scripts/gpu-check.sh calls that a failure on a GPU machine).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch


def out_dir_or_skip(name: str, description: str) -> Path | None:
    """The ``--out`` folder, or None (after printing ``<name>: SKIP``) without a CUDA device."""
    parser = argparse.ArgumentParser(description=description.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(f"{name}: SKIP (no CUDA device)")
        return None
    out: Path = args.out
    return out
