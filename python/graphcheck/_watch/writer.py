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
when the check point is made, the files follow in order once the burst of captures ended
(:class:`~graphcheck._watch.quiet.QuietWorker`), and ``index.html`` is rewritten once per
burst instead of once per check point. :meth:`BackgroundWriter.flush`
writes at once and waits for them; the watch flushes before every other check point (which
records epochs the pending pages must not show), before raising in ``error`` mode, at close
and at exit.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from graphcheck._watch.index_page import index_html, set_navigation
from graphcheck._watch.output import CheckResult, printable, safe_label
from graphcheck._watch.quiet import QuietWorker

if TYPE_CHECKING:
    from graphcheck._capture import Capture

__all__ = ["BackgroundWriter", "ReportWriter"]


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
        # The page draws one graph's memory map: with one graph checked, its snapshot; with
        # more, the page says so and how to draw one (a review looked for the map in vain).
        one = snapshots[0][1].snapshot if len(snapshots) == 1 else None
        header = result.header().splitlines()
        if len(snapshots) > 1:
            graph_id = snapshots[0][0]
            snapshot = Path(files[f"snapshot:{graph_id}"]).name
            epoch = result.epochs.get(graph_id, result.label)
            header.append(
                f"address-space map: a page draws one graph's, and this check point covers "
                f"{len(snapshots)}; for graph {graph_id}'s, in this folder: graphcheck check "
                f"{shlex.quote(snapshot)} --epoch {shlex.quote(printable(epoch))} --format html "
                f"--output graph{graph_id}.html"
            )
        who = printable(result.role) or f"pid {result.pid}"
        _atomic_write(
            files["report_html"],
            result.report.to_html(
                one,
                subject=f"{printable(result.model) or 'model'} \u00b7 {who} #{result.seq}",
                header=header,
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


class BackgroundWriter:
    """A :class:`ReportWriter` whose files are written in order on a thread of its own.

    The thread is a :class:`~graphcheck._watch.quiet.QuietWorker`'s (``graphcheck-writer``):
    it writes once no check point was queued for :data:`~graphcheck._watch.quiet.QUIET_S`,
    and ``index.html`` once per burst. Thread safety: every method may be called from any
    thread. Lifetime: the thread starts with the writer and ends at :meth:`close`; the exit
    hook flushes every live writer, and in a child made by ``fork`` the parent's pending
    files are the parent's. A failure to write is logged (``graphcheck.watch``), never
    raised: the reports stay in memory (:attr:`Watch.results <graphcheck.Watch.results>`).
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.writer = ReportWriter(folder)
        self._worker = QuietWorker(
            "graphcheck-writer", f"graphcheck: could not write reports to {self.writer.folder}"
        )

    @property
    def folder(self) -> Path:
        """The folder written to."""
        return self.writer.folder

    def submit(
        self, result: CheckResult, snapshots: Sequence[tuple[int, Capture]], allow: Iterable[str]
    ) -> dict[str, str]:
        """Queue ``result``'s files; returns their paths (written soon: :meth:`flush`)."""
        kept, globs = list(snapshots), tuple(allow)

        def write(last: bool) -> None:  # the end of a burst: the index once for all of it
            self.writer.write(result, kept, globs, index=last)

        self._worker.submit(write)
        return self.writer.names(result, (graph_id for graph_id, _ in kept))

    def flush(self) -> None:
        """Wait until every queued check point's files are written."""
        self._worker.drain()

    def close(self) -> None:
        """Write what is queued and end the thread (a later :meth:`submit` starts another)."""
        self._worker.close()
