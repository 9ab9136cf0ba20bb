"""A watch's check points: :class:`CheckPoints` keeps them, has their files written, logs them.

The files go through a :class:`~graphcheck._watch.writer.BackgroundWriter` (a check at capture
does not wait for them; every other check point does), and the log gets each check point's
line, with its text report when no file was written, once per set of verdicts and owners
(:func:`~graphcheck._watch.output.finding_key`): an engine's graphs of one model find the same
tensors, and a server's log should say so once, not once per batch size.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import threading
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from graphcheck._errors import GraphcheckTypeError, GraphcheckValueError
from graphcheck._watch.graphs import check_point
from graphcheck._watch.output import (
    CheckResult,
    FindingsError,
    census_result,
    finding_key,
    log_result,
)
from graphcheck._watch.quiet import renew_after_fork
from graphcheck._watch.settings import text_problem
from graphcheck._watch.writer import BackgroundWriter

if TYPE_CHECKING:
    from graphcheck._capture import Capture
    from graphcheck._census import CensusEntry
    from graphcheck._watch.graph_pools import GraphPools
    from graphcheck._watch.graphs import WatchedGraph

__all__ = ["CheckPoints", "Settings"]


class Settings(NamedTuple):
    """The watch's settings a check point is made with, taken when it is asked for.

    A check at capture queued in ``warn`` mode takes them at its capture (a later
    ``graphcheck.watch(allow=...)`` is not its). ``notes``: the profiling windows' notes.
    """

    mode: str
    allow: tuple[str, ...]
    role: str
    notes: tuple[str, ...] = ()


class CheckPoints:
    """The check points of one watch, in order, with their files and log lines.

    Thread safety: every method may be called from any thread. Lifetime: the writer's thread
    runs from :meth:`set_folder` to :meth:`close` (or the next :meth:`set_folder`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        renew_after_fork(self, "_lock", threading.Lock)
        self._seq = itertools.count(1)  # the check points' numbers, under the watch's lock
        self._items: list[CheckResult] = []
        self._logged: dict[frozenset[tuple[str, str]], int] = {}  # findings -> first seq logged
        self._writer: BackgroundWriter | None = None

    @property
    def folder(self) -> str | None:
        """The folder the files go to, or None."""
        writer = self._writer
        return None if writer is None else str(writer.folder)

    def set_folder(self, value: str | os.PathLike[str] | None) -> None:
        """Write the next check points' files into ``value`` (None: none).

        The old folder's pending files are written first. Raises
        :class:`~graphcheck.GraphcheckTypeError` for a value that is no path and
        :class:`~graphcheck.GraphcheckValueError` for a path that is not UTF-8 text, before
        changing anything.
        """
        folder = None if value is None else _folder_path(value)
        if self._writer is not None:
            self._writer.close()
        self._writer = None if folder is None else BackgroundWriter(os.path.abspath(folder))

    def flush(self) -> None:
        """Wait until the files of every check point so far are written."""
        writer = self._writer
        if writer is not None:
            writer.flush()

    def close(self) -> None:
        """Write the pending files and end the writer's thread (a later check point restarts it)."""
        writer = self._writer
        if writer is not None:
            writer.close()

    def all(self) -> list[CheckResult]:
        """Every check point so far, in order."""
        with self._lock:
            return list(self._items)

    def last(self) -> CheckResult | None:
        """The last check point, or None."""
        with self._lock:
            return self._items[-1] if self._items else None

    def check(
        self,
        label: str,
        graphs: list[WatchedGraph],
        *,
        fresh: bool,
        pools: GraphPools,
        settings: Settings,
        background: bool,
    ) -> CheckResult:
        """Checks ``graphs`` as the next check point (:func:`check_point`) and records it.

        Call it under the watch's lock (the numbers follow the order of the calls);
        :meth:`finish` it after.
        """
        start = time.perf_counter()
        result = check_point(
            next(self._seq), label, graphs, fresh=fresh, allow=settings.allow, pools=pools,
            notes=settings.notes, role=settings.role, start=start,
        )  # fmt: skip
        snapshots = [(g.id, g.capture) for g in graphs if g.id in result.graphs]
        return self.record(
            result, snapshots, allow=settings.allow, mode=settings.mode, background=background
        )

    def census(
        self,
        label: str,
        entries: Iterable[CensusEntry],
        model: str,
        settings: Settings,
        start: float,
    ) -> CheckResult:
        """Records the census ``entries`` of ``model`` as the next check point (no graph).

        ``start``: when the census began. Call it under the watch's lock; :meth:`finish` it
        after.
        """
        seconds = time.perf_counter() - start
        result = census_result(next(self._seq), label, entries, model, settings.role, seconds)
        return self.record(result, [], allow=settings.allow, mode=settings.mode, background=False)

    def record(
        self,
        result: CheckResult,
        snapshots: Sequence[tuple[int, Capture]],
        *,
        allow: Iterable[str],
        mode: str,
        background: bool,
    ) -> CheckResult:
        """Queues ``result``'s files and keeps it; returns it with the names of its files.

        ``background``: the files may follow (a check at capture); else they are written,
        after every pending one, before this returns (and in ``error`` mode's findings too,
        before the error is raised). A failure to write is logged, never raised.
        """
        writer = self._writer
        if writer is not None:
            files = writer.submit(result, snapshots, allow)
            result = dataclasses.replace(result, files=files)
            if not background or (mode == "error" and not result.ok):
                writer.flush()
        with self._lock:
            self._items.append(result)
        return result

    def finish(self, result: CheckResult, mode: str) -> CheckResult:
        """Logs ``result`` as ``mode`` says; raises :class:`FindingsError` in ``error`` mode."""
        same_as = None
        if not result.ok:  # the owners (and the text without a folder) are logged once
            with self._lock:
                same_as = self._logged.setdefault(finding_key(result), result.seq)
            same_as = None if same_as == result.seq else same_as
        log_result(result, mode, same_as)
        if mode == "error" and not result.ok:
            raise FindingsError(result)
        return result


def _folder_path(value: str | os.PathLike[str]) -> str:
    """``value`` as a path of text, or an error naming it.

    Every file name the watch writes goes into its reports, ``index.jsonl`` and pages as
    text: a path that is not UTF-8 made an index the CLI could not read (its lines held
    surrogate escapes: a hostile tester's finding).
    """
    try:
        path = os.fspath(value)
    except TypeError:
        raise GraphcheckTypeError(
            f"watch: out_dir: expected a str or os.PathLike folder, found {type(value).__name__}"
        ) from None
    if not isinstance(path, str):
        raise GraphcheckTypeError(
            "watch: out_dir: expected a str or os.PathLike[str] folder, found "
            f"{type(path).__name__}"
        )
    problem = text_problem(path)
    if problem is not None:
        raise GraphcheckValueError(
            f"watch: out_dir {path!r}: {problem}; pick a folder whose path is UTF-8 text (its "
            "file names go into the reports and index.jsonl)"
        )
    return path
