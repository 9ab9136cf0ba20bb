"""The files of a watch's check points: :class:`ReportWriter` and :class:`BackgroundWriter`.

:class:`ReportWriter` writes each check point's JSON and text report, one pair per check
point, named by time so that the last one sorts last, appends a line to ``index.jsonl``,
rewrites each graph's snapshot (all its epochs so far), writes the check point's
self-contained HTML page (``Report.to_html``: what to fix first, the header of the text
report, with the graph's memory map and every epoch's report when it checked one graph,
linked to the previous and next check point of its process) and ``index.html`` listing every
check point of the folder (:mod:`graphcheck._watch.index_page`).

:class:`BackgroundWriter` runs a :class:`ReportWriter` on a thread of its own, so that a
check at capture does not write files inside the engine's capture (2-4 ms per check point
on the reference model, and ``index.html`` grows with the folder): the file names are known
when the check point is made, the files follow in order once no check point was queued for
:data:`QUIET_S` (an engine captures its graphs back to back: the writer waits for the burst to
end instead of taking the interpreter's lock from the next capture), and ``index.html`` is
rewritten once per burst instead of once per check point. :meth:`BackgroundWriter.flush`
writes at once and waits for them; the watch flushes before every other check point (which
records epochs the pending pages must not show), before raising in ``error`` mode, at close
and at exit.
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from graphcheck._watch.index_page import index_html, set_navigation
from graphcheck._watch.output import CheckResult, printable, safe_label

if TYPE_CHECKING:
    from graphcheck._capture import Capture

__all__ = ["BackgroundWriter", "ReportWriter"]

log = logging.getLogger("graphcheck.watch")

#: Seconds without a new check point before the background writer starts on the queued ones.
QUIET_S = 0.2


class ReportWriter:
    """Writes check points into one folder, shared by every process of a run.

    Names: ``<UTC time>-[<role>-]p<pid>-<seq>-<label>.report.{json,txt,html}`` (sorting by
    name sorts by time, across processes and ranks), ``p<pid>-graph<id>.snapshot.json``
    (rewritten at each check point), ``index.jsonl`` (one line per check point, appended)
    and ``index.html`` (rewritten: :func:`~graphcheck._watch.index_page.index_html`). Each
    page links the index and the previous check point of this process, and the previous
    page gains its link to the new one (rewritten in place: :func:`set_navigation`).
    Not thread-safe: one thread at a time (the watch's lock, or the background writer's).
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self._previous_page: str | None = None
        self._previous_of_previous: str | None = None

    def names(self, result: CheckResult, graph_ids: Iterable[int]) -> dict[str, str]:
        """The files :meth:`write` writes for ``result`` (known before they are written)."""
        t = time.gmtime(result.time)
        millis = int((result.time % 1) * 1000)
        stamp = time.strftime("%Y%m%dT%H%M%S", t) + f"{millis:03d}Z"
        role = f"{safe_label(result.role)}-" if result.role else ""
        stem = f"{stamp}-{role}p{result.pid}-{result.seq:03d}-{safe_label(result.label)}"
        files = {
            "report_json": str(self.folder / f"{stem}.report.json"),
            "report_text": str(self.folder / f"{stem}.report.txt"),
            "report_html": str(self.folder / f"{stem}.report.html"),
        }
        for graph_id in graph_ids:
            path = str(self.folder / f"p{result.pid}-graph{graph_id}.snapshot.json")
            files[f"snapshot:{graph_id}"] = path
        return files

    def write(
        self,
        result: CheckResult,
        snapshots: Sequence[tuple[int, Capture]],
        allow: Iterable[str] = (),
        *,
        index: bool = True,
    ) -> dict[str, str]:
        """Write ``result``'s files and the graphs' snapshots; returns what was written.

        ``allow``: the globs the check used (the page checks its other epochs with them).
        ``index``: rewrite ``index.html`` now (else :meth:`write_index` does, later).
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        files = self.names(result, (graph_id for graph_id, _ in snapshots))
        _atomic_write(files["report_json"], result.report.to_json() + "\n")
        _atomic_write(files["report_text"], result.text() + "\n")
        page = Path(files["report_html"]).name
        previous = self._previous_page
        # The page draws one graph's memory map: with one graph checked, its snapshot.
        one = snapshots[0][1].snapshot if len(snapshots) == 1 else None
        who = printable(result.role) or f"pid {result.pid}"
        _atomic_write(
            files["report_html"],
            result.report.to_html(
                one,
                subject=f"{printable(result.model) or 'model'} \u00b7 {who} #{result.seq}",
                header=result.header().splitlines(),
                allow=allow,
                navigation={"index": "index.html", "previous": previous, "next": None},
            ),
        )
        if previous is not None and (self.folder / previous).is_file():
            set_navigation(
                self.folder / previous,
                {"index": "index.html", "previous": self._previous_of_previous, "next": page},
            )
        self._previous_of_previous = previous
        self._previous_page = page
        for graph_id, capture in snapshots:
            path = files[f"snapshot:{graph_id}"]
            capture.save(path + ".tmp")
            os.replace(path + ".tmp", path)
        entry = {**dataclasses.replace(result, files=files).to_dict()}
        with open(self.folder / "index.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")
        if index:
            self.write_index()
        return files

    def write_index(self) -> None:
        """Rewrite ``index.html`` from ``index.jsonl`` as it is now."""
        _atomic_write(str(self.folder / "index.html"), index_html(self.folder))


def _atomic_write(path: str, text: str) -> None:
    # Per process: every process of a server writes into the same folder.
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(tmp, path)


@dataclasses.dataclass
class _Job:
    result: CheckResult
    snapshots: list[tuple[int, Capture]]
    allow: tuple[str, ...]


class BackgroundWriter:
    """A :class:`ReportWriter` whose files are written in order on a thread of its own.

    Thread safety: every method may be called from any thread. Lifetime: the thread starts
    with the writer (in a forked child, at its first :meth:`submit`) and waits for work until
    :meth:`close`; it is a daemon thread, and the exit hook flushes every live writer before
    the interpreter stops it. In a child made by ``fork`` the parent's pending files are the
    parent's: the child starts empty.
    A failure to write is logged (``graphcheck.watch``), never raised: the reports stay in
    memory (:attr:`Watch.results <graphcheck.Watch.results>`).
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.writer = ReportWriter(folder)
        self._reset()
        _LIVE.add(self)
        with self._cond:  # now, not inside the first capture that queues a check point
            self._start()

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._jobs: collections.deque[_Job] = collections.deque()
        self._busy = False
        self._last_submit = 0.0
        self._flushing = 0  # threads in flush(): write without waiting for quiet
        self._closing = False  # the thread ends once the queue is empty
        self._thread: threading.Thread | None = None

    @property
    def folder(self) -> Path:
        """The folder written to."""
        return self.writer.folder

    def submit(
        self, result: CheckResult, snapshots: Sequence[tuple[int, Capture]], allow: Iterable[str]
    ) -> dict[str, str]:
        """Queue ``result``'s files; returns their paths (written soon: :meth:`flush`)."""
        job = _Job(result, list(snapshots), tuple(allow))
        with self._cond:
            self._jobs.append(job)
            self._last_submit = time.monotonic()
            self._start()
            if len(self._jobs) == 1:  # else the writer is waiting for quiet: it looks again then
                self._cond.notify_all()
        return self.writer.names(result, (graph_id for graph_id, _ in job.snapshots))

    def close(self) -> None:
        """Write what is queued and end the thread (a later :meth:`submit` starts another)."""
        self.flush()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _start(self) -> None:
        # Under the condition's lock. Again after a fork (the child's writer has no thread).
        self._closing = False
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="graphcheck-writer", daemon=True)
            self._thread.start()

    def flush(self) -> None:
        """Wait until every queued check point's files are written."""
        with self._cond:
            if self._thread is threading.current_thread():
                return  # called from a write: nothing can finish while it waits
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._jobs or self._busy:
                    self._cond.wait()
            finally:
                self._flushing -= 1

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    if not self._jobs:
                        if self._closing:
                            self._thread = None
                            return
                        self._cond.wait()
                        continue
                    quiet = self._last_submit + QUIET_S - time.monotonic()
                    if quiet <= 0 or self._flushing:
                        break
                    self._cond.wait(quiet)
                job = self._jobs.popleft()
                self._busy = True
                last = not self._jobs  # the end of a burst: the index once for all of it
            try:
                self.writer.write(job.result, job.snapshots, job.allow, index=last)
            except Exception as exc:  # a report that cannot be written must not stop the rest
                log.error("graphcheck: could not write reports to %s: %s", self.folder, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


_LIVE: weakref.WeakSet[BackgroundWriter] = weakref.WeakSet()


def _flush_all() -> None:
    for writer in list(_LIVE):
        writer.flush()


def _after_fork_in_child() -> None:
    for writer in list(_LIVE):
        writer._reset()


atexit.register(_flush_all)
os.register_at_fork(after_in_child=_after_fork_in_child)
