"""Config table: multimodal architectures (see :mod:`graphcheck.zoo.vllm_engine.tables`)."""

from __future__ import annotations

from graphcheck.zoo.vllm_engine.tables import Entry

TABLE: dict[str, Entry] = {}
