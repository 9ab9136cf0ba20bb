"""Graphs an engine captures only to measure memory: :class:`ProfilingCaptures`.

vLLM (0.32, 0.33) captures graphs inside ``Worker.determine_available_memory``
(``profile_cudagraph_memory``) to estimate what its real captures will take, then frees them
and the minimal KV cache they read, before its capture check point. Watching them would be
wrong twice: a check would judge them against a KV cache the engine freed, and the watch's own
work during the capture would enter the engine's estimate. While a profiling window is open the
watch records no capture at all (a CUDA capture's hooks return at once), and the next check
point notes how many graphs went unwatched and why.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator

__all__ = ["ProfilingCaptures"]

log = logging.getLogger("graphcheck.watch")


class ProfilingCaptures:
    """The profiling windows of one watch and the captures they skipped.

    Thread safety: every method may be called from any thread; a window is process-wide
    (vLLM profiles before any other capture runs, so a capture on another thread during the
    window is profiling too). Windows nest; the outermost names what a note reports.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._what = ""
        self._skipped = 0
        self._notes: list[str] = []

    @contextlib.contextmanager
    def window(self, what: str) -> Iterator[None]:
        """Captures that begin inside are not recorded; ``what`` names the engine's step."""
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                self._what, self._skipped = what, 0
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                done = self._depth == 0
                skipped, outer = self._skipped, self._what
                if done and skipped:
                    self._notes.append(
                        f"{skipped} graph(s) captured during {outer} (the engine's memory "
                        "profiling, freed before it serves) were not watched"
                    )
            if done and skipped:
                log.info(
                    "graphcheck: %d graph(s) captured during %s are the engine's memory "
                    "profiling: not watched",
                    skipped,
                    outer,
                )

    def skip(self) -> bool:
        """Whether a capture beginning now is profiling (and count it if so)."""
        with self._lock:
            if self._depth == 0:
                return False
            self._skipped += 1
            return True

    def take_notes(self) -> tuple[str, ...]:
        """The notes of the windows closed since the last call (for the next check point)."""
        with self._lock:
            notes, self._notes = tuple(self._notes), []
        return notes
