"""graphcheck.zoo's vLLM engine: every architecture vLLM registers, tiny, through graphcheck.

``python -m graphcheck.zoo --engine vllm`` (run with the vLLM environment's
python: ``scripts/bootstrap.sh vllm``) enumerates ``ModelRegistry``
(:mod:`~graphcheck.zoo.vllm_engine.catalog`), writes a tiny config for each
architecture (:mod:`~graphcheck.zoo.vllm_engine.configs`), and in its own
worker process builds the model with dummy weights through vLLM's own engine
on the CPU (``LLM(...)``: load, ``process_weights_after_loading``, KV cache,
exactly what the CPU worker serves), then takes the census, captures the
engine's own forward (the model runner's dummy batch, with attention metadata)
in the ATen window and checks it, reloads new weights through vLLM's own
in-place reload and checks and replays again
(:mod:`~graphcheck.zoo.vllm_engine.worker`). Memory torch does not own (the
oneDNN handles of the CPU linear layers and the emptied weight parameters
they replace) is its own kind of finding
(:mod:`~graphcheck.integrations._vllm_foreign`). See docs/vllm-zoo.md.

Importing this package imports neither vLLM nor torch.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BASELINE"]

#: The baseline allowlist for the pinned vLLM release (docs/vllm-zoo.md).
BASELINE = Path(__file__).with_name("baseline_allow.txt")
