"""A thread that runs queued work once a burst of captures ends: :class:`QuietWorker`.

An engine captures its graphs back to back, one per batch size. Work a capture queues (a
check point's files, a check at capture in ``warn`` mode) must not run beside the next
capture: it would take the interpreter's lock from it. The worker waits until nothing was
queued for :data:`QUIET_S`, then runs the queue in order; :meth:`QuietWorker.drain` runs it
at once and waits. The exit hook drains every live worker until none has work left (a check
queues files for another worker), and a forked child's workers start empty: the parent's
work is the parent's; the locks their jobs take are renewed there (:func:`renew_after_fork`).
"""

from __future__ import annotations

import atexit
import collections
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable

__all__ = ["QUIET_S", "QuietWorker", "renew_after_fork"]

log = logging.getLogger("graphcheck.watch")

#: Seconds without new work before a worker starts on the queued work.
QUIET_S = 0.2

#: A unit of work; its argument says whether the queue was empty when it started (the end of
#: a burst: a writer rewrites its folder's index once for all of it).
Job = Callable[[bool], object]


class QuietWorker:
    """Runs queued jobs in order on a thread of its own, after a quiet spell or on demand.

    ``name`` names the thread; ``failed`` begins the log line of a job that raised (the
    exception follows): logged, never raised, and the jobs after it still run.
    Thread safety: every method may be called from any thread; :meth:`drain` must not be
    called while holding a lock a job takes. Lifetime: the thread starts with the worker
    (again at the first submit after :meth:`close`, or in a forked child) and ends at
    :meth:`close`; it is a daemon thread, drained by the exit hook.
    """

    def __init__(self, name: str, failed: str) -> None:
        self.name = name
        self._failed = failed
        self._reset()
        _LIVE.add(self)
        with self._cond:  # now, not inside the first capture that queues work
            self._start()

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._jobs: collections.deque[Job] = collections.deque()
        self._busy = False
        self._last_submit = 0.0
        self._draining = 0  # threads in drain(): run without waiting for quiet
        self._closing = False  # the thread ends once the queue is empty
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> int:
        """Jobs queued or running now."""
        with self._cond:
            return len(self._jobs) + self._busy

    @property
    def waiting(self) -> int:
        """Jobs queued and not started (:attr:`pending` counts the running one too)."""
        with self._cond:
            return len(self._jobs)

    @property
    def running(self) -> bool:
        """Whether a job runs now."""
        with self._cond:
            return self._busy

    def submit(self, job: Job) -> None:
        """Queue ``job``; it runs once nothing was queued for :data:`QUIET_S`, or at a drain."""
        with self._cond:
            self._jobs.append(job)
            self._last_submit = time.monotonic()
            self._start()
            if len(self._jobs) == 1:  # else the thread waits for quiet: it looks again then
                self._cond.notify_all()

    def drain(self) -> None:
        """Wait until every queued job ran (at once: no quiet spell). No-op on the thread."""
        with self._cond:
            if self._thread is threading.current_thread():
                return  # called from a job: nothing can finish while it waits
            self._draining += 1
            if self._jobs:
                self._start()  # a thread ended by a BaseException from a job: another
            self._cond.notify_all()
            try:
                while self._jobs or self._busy:
                    self._cond.wait()
            finally:
                self._draining -= 1

    def close(self) -> None:
        """Run what is queued and end the thread (a later :meth:`submit` starts another)."""
        self.drain()
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _start(self) -> None:
        # Under the condition's lock. Again after close() or a fork (the child has no thread).
        self._closing = False
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _next(self) -> tuple[Job, bool] | None:
        """The next job once it may run, and whether it is the last queued (None: the end)."""
        while True:
            if not self._jobs:
                if self._closing:
                    self._thread = None
                    return None
                self._cond.wait()
                continue
            quiet = self._last_submit + QUIET_S - time.monotonic()
            if quiet <= 0 or self._draining:
                self._busy = True
                job = self._jobs.popleft()
                return job, not self._jobs
            self._cond.wait(quiet)

    def _run(self) -> None:
        while True:
            with self._cond:
                taken = self._next()
            if taken is None:
                return
            job, last = taken
            try:
                job(last)
            except BaseException as exc:  # one failed job (even a SystemExit) stops no other
                log.error("%s: %s", self._failed, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


_LIVE: weakref.WeakSet[QuietWorker] = weakref.WeakSet()
# (owner, attribute, factory) of the locks a forked child gets anew (renew_after_fork).
_RENEWED: list[tuple[weakref.ref[object], str, Callable[[], object]]] = []
_RENEWED_LOCK = threading.Lock()


def renew_after_fork(owner: object, attribute: str, factory: Callable[[], object]) -> None:
    """In a forked child, ``owner.<attribute>`` becomes ``factory()`` (a fresh lock).

    A worker holds its owner's lock while it runs a job; forked then, the child's copy of the
    lock belongs to a thread the child does not have, and the child's first use of it waits
    forever (found by a review). Thread-safe; the owner is weakly held.
    """
    with _RENEWED_LOCK:
        _RENEWED[:] = [entry for entry in _RENEWED if entry[0]() is not None]
        _RENEWED.append((weakref.ref(owner), attribute, factory))


def _drain_all() -> None:
    # Until none has work: a check drained here queues its files on a writer drained before.
    while True:
        busy = [worker for worker in list(_LIVE) if worker.pending]
        if not busy:
            return
        for worker in busy:
            worker.drain()


def _after_fork_in_child() -> None:
    global _RENEWED_LOCK
    _RENEWED_LOCK = threading.Lock()
    for worker in list(_LIVE):
        worker._reset()
    for ref, attribute, factory in _RENEWED:
        owner = ref()
        if owner is not None:
            setattr(owner, attribute, factory())


atexit.register(_drain_all)
os.register_at_fork(after_in_child=_after_fork_in_child)
