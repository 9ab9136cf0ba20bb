"""graphcheck.zoo: every architecture of Hugging Face transformers, tiny, through the census.

``python -m graphcheck.zoo`` enumerates every model class the installed
``transformers`` auto tables list (:mod:`~graphcheck.zoo.catalog`), builds
each from a tiny config (:mod:`~graphcheck.zoo.tiny_config`,
:mod:`~graphcheck.zoo.overrides`, :mod:`~graphcheck.zoo.variants`) in its own
worker process (:mod:`~graphcheck.zoo.runner`), takes the census of
unregistered tensors before and after a warm-up forward
(:mod:`~graphcheck.zoo.worker`), and prints the validation table and writes
the JSON report and the baseline allowlist (:mod:`~graphcheck.zoo.report`).
See docs/zoo.md.

``transformers`` is an optional extra (``pip install 'graphcheck[zoo]'``);
importing this package does not import it, nor torch.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BASELINE"]

#: The baseline allowlist for the pinned transformers release (docs/zoo.md).
BASELINE = Path(__file__).with_name("baseline_allow.txt")
