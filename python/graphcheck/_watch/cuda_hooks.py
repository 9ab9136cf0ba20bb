"""The hooks :func:`graphcheck.watch` puts on CUDA graph capture, and the allocator's history.

Every ``torch.cuda.graph`` capture, and every direct
``torch.cuda.CUDAGraph.capture_begin``/``capture_end`` pair (vLLM's breakable
graphs call them directly), must reach the watch, and so must the captures of
``torch.accelerator.Graph`` (torch 2.13), a class of its own. Where PyTorch has global
capture hooks (a ``register_capture_begin_hook`` and a
``register_capture_end_hook`` in ``torch.cuda.graphs``, found with ``hasattr``),
they are used; otherwise ``capture_begin`` and ``capture_end`` of
``torch.cuda.CUDAGraph`` (a Python class) are wrapped. torch 2.13 has no such
hooks: the wrapping is what runs there.

The watch opens the ATen capture window right after ``capture_begin``
succeeded, on the capturing thread (the window is thread-local, as a stream
capture is), reads the graph's own nodes right before ``capture_end`` (the
``on_ending`` hook: the graph under capture is complete then, and destroyed by
``capture_end`` under torch's default ``keep_graph=False``), and finishes the
window right after ``capture_end`` succeeded; a ``capture_end`` that raises
closes the window and nothing is recorded. With global capture hooks,
``on_ending`` runs in the end hook, right before ``on_end``, whenever torch
calls it. The
CUDA path has not run on a GPU (unverified); the CPU tier drives these
hooks with a stand-in graph class.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

import torch

from graphcheck._errors import GraphcheckError

__all__ = ["CaptureHooks", "at_cuda_initialization", "capture_device"]

log = logging.getLogger("graphcheck.watch")

_ORIGINAL = "__graphcheck_original__"
Hook = Callable[[Any], None]


def _not_raised(exc: BaseException, propagating: BaseException) -> None:
    """Logs findings ``exc`` that are not raised: the capture's own ``propagating`` must be."""
    log.warning(
        "graphcheck: not raised while the capture's own %s propagates: %s",
        type(propagating).__name__,
        exc,
    )


def _global_hook_api(module: Any) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    begin = getattr(module, "register_capture_begin_hook", None)
    end = getattr(module, "register_capture_end_hook", None)
    if callable(begin) and callable(end):
        return begin, end
    return None


def _graph_argument(args: tuple[Any, ...], kwargs: dict[str, Any], graph_class: type) -> Any:
    for value in (*args, *kwargs.values()):
        if isinstance(value, graph_class):
            return value
    return None


class CaptureHooks:
    """Calls ``on_begin(graph)`` after each capture begins and ``on_end(graph)`` after it ends.

    ``on_abort(graph)`` runs when ``capture_end`` raised; ``on_ending(graph)`` (optional)
    right before ``capture_end`` runs, and never raises out of the hook (a failure is
    logged). ``graph_class`` is
    the class whose methods are wrapped (default ``torch.cuda.CUDAGraph``);
    ``hooks_module`` the module probed for global capture hooks (default
    ``torch.cuda.graphs``; ``None`` probes nothing). The hooks never raise
    from ``on_begin`` (a failure is logged and that graph is not recorded).
    From ``on_end`` only the exceptions in ``raises`` leave the hook (a watch in ``error``
    mode raises its findings there, after the capture completed), and not while another
    exception propagates through ``capture_end`` (the body of a ``torch.cuda.graph`` raised:
    its exception is the one the caller must see); anything else is logged. The capture
    itself succeeded by then. ``torch.cuda.graph`` restores the caller's stream only after
    ``capture_end`` returns, so its ``__exit__`` is wrapped too: inside it, such an exception
    is held and raised once the stream is restored. Install once; not thread-safe to install
    or remove while another thread captures.
    """

    def __init__(
        self,
        on_begin: Hook,
        on_end: Hook,
        on_abort: Hook,
        *,
        on_ending: Hook | None = None,
        graph_class: type | None = None,
        hooks_module: Any = "default",
        raises: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._on_begin = on_begin
        self._on_end = on_end
        self._raises = raises
        self._on_abort = on_abort
        self._on_ending = on_ending
        self._graph_class = graph_class
        self._hooks_module = hooks_module
        self._handles: list[Any] = []
        self._wrapped: list[tuple[type, str, bool]] = []  # (class, name, was in its __dict__)
        self._exits = threading.local()  # .deferred: findings held for torch.cuda.graph's exit
        self.how = "not installed"

    def install(self) -> str:
        """Installs the hooks; returns how (``"global capture hooks"`` or the wrapped methods)."""
        graph_class = self._graph_class
        if graph_class is None:
            graph_class = torch.cuda.CUDAGraph
        module = self._hooks_module
        if module == "default":
            module = getattr(torch.cuda, "graphs", None)
        api = _global_hook_api(module) if module is not None else None
        if api is not None:
            self._install_global(api, graph_class)
            self._wrap_context_exit()
            self.how = f"global capture hooks of {getattr(module, '__name__', module)}"
            return self.how
        classes = [graph_class]
        if self._graph_class is None:
            classes += _accelerator_graph_classes()
        try:
            for wrapped in classes:
                self._wrap(wrapped)
            self._wrap_context_exit()
        except BaseException:
            self.remove()  # nothing half installed
            raise
        names = [f"{c.__module__}.{c.__qualname__}" for c in classes]
        self.how = f"{names[0]}.capture_begin/capture_end wrapped"
        if len(names) > 1:
            self.how += f" (and {', '.join(names[1:])}'s)"
        return self.how

    def _install_global(self, api: tuple[Callable[..., Any], ...], graph_class: type) -> None:
        register_begin, register_end = api

        def begin(*args: Any, **kwargs: Any) -> None:
            self._begin(_graph_argument(args, kwargs, graph_class))

        def end(*args: Any, **kwargs: Any) -> None:
            graph = _graph_argument(args, kwargs, graph_class)
            self._ending(graph)
            self._end(graph)

        self._handles = [register_begin(begin), register_end(end)]

    def _wrap(self, graph_class: type) -> None:
        """Wraps ``graph_class``'s two methods; adds them to what :meth:`remove` restores."""
        begin = graph_class.capture_begin  # type: ignore[attr-defined]
        end = graph_class.capture_end  # type: ignore[attr-defined]
        if getattr(begin, _ORIGINAL, None) is not None:
            raise GraphcheckError(
                f"graphcheck.watch: {graph_class.__qualname__}.capture_begin is wrapped already "
                f"(another watch is installed); close it first"
            )
        hooks = self

        @functools.wraps(begin)
        def capture_begin(graph: Any, *args: Any, **kwargs: Any) -> Any:
            result = begin(graph, *args, **kwargs)
            hooks._begin(graph)
            return result

        @functools.wraps(end)
        def capture_end(graph: Any, *args: Any, **kwargs: Any) -> Any:
            hooks._ending(graph)
            try:
                result = end(graph, *args, **kwargs)
            except BaseException:
                hooks._on_abort(graph)
                raise
            hooks._end(graph)
            return result

        setattr(capture_begin, _ORIGINAL, begin)
        setattr(capture_end, _ORIGINAL, end)
        self._wrapped += [
            (graph_class, name, name in graph_class.__dict__)
            for name in ("capture_begin", "capture_end")
        ]
        graph_class.capture_begin = capture_begin  # type: ignore[attr-defined]
        graph_class.capture_end = capture_end  # type: ignore[attr-defined]

    def _wrap_context_exit(self) -> None:
        """Wraps ``torch.cuda.graph.__exit__``: findings raised at ``capture_end`` leave after it.

        It calls ``capture_end`` and then restores the caller's stream, which an error raised
        out of ``capture_end`` skipped (the thread went on capturing nothing, on the capture's
        side stream). Nothing where torch has no such class.
        """
        context = getattr(torch.cuda, "graph", None)
        exit_ = getattr(context, "__exit__", None) if isinstance(context, type) else None
        if context is None or exit_ is None or getattr(exit_, _ORIGINAL, None) is not None:
            return
        hooks = self

        @functools.wraps(exit_)
        def __exit__(ctx: Any, *args: Any) -> Any:
            outer = getattr(hooks._exits, "deferred", None)
            deferred: list[BaseException] = []
            hooks._exits.deferred = deferred
            try:
                result = exit_(ctx, *args)
            except BaseException as own:
                for exc in deferred:
                    _not_raised(exc, own)
                raise
            finally:
                hooks._exits.deferred = outer
            if deferred:
                raise deferred[0]
            return result

        setattr(__exit__, _ORIGINAL, exit_)
        self._wrapped.append((context, "__exit__", "__exit__" in context.__dict__))
        context.__exit__ = __exit__

    def _begin(self, graph: Any) -> None:
        try:
            self._on_begin(graph)
        except Exception:
            log.exception("graphcheck: recording a CUDA graph capture failed; it is not watched")

    def _end(self, graph: Any) -> None:
        propagating = sys.exc_info()[1]
        try:
            self._on_end(graph)
        except self._raises as exc:
            if propagating is None:
                deferred = getattr(self._exits, "deferred", None)
                if deferred is None:
                    raise
                deferred.append(exc)  # torch.cuda.graph.__exit__'s wrapper raises it
                return
            _not_raised(exc, propagating)
        except Exception:
            log.exception(
                "graphcheck: recording or checking a CUDA graph after its capture failed (the "
                "capture itself succeeded; the graph may be unwatched or unchecked)"
            )

    def _ending(self, graph: Any) -> None:
        if self._on_ending is None:
            return
        try:
            self._on_ending(graph)
        except Exception:
            log.exception("graphcheck: reading a CUDA graph before its capture ended failed")

    def remove(self) -> None:
        """Removes the hooks (restores the wrapped methods it wrapped). Idempotent."""
        for handle in self._handles:
            remove = getattr(handle, "remove", None)
            if callable(remove):
                remove()
        self._handles = []
        for owner, name, own in self._wrapped:
            original = getattr(owner.__dict__.get(name), _ORIGINAL, None)
            if original is None:
                continue  # someone wrapped it after us: leave their wrapper in place
            if own:
                setattr(owner, name, original)
            else:
                delattr(owner, name)
        self._wrapped = []
        self.how = "not installed"


def _accelerator_graph_classes() -> list[type]:
    """``torch.accelerator.Graph`` (torch 2.13), a second graph class an engine may capture with.

    Its ``capture_begin``/``capture_end`` go to ``torch._C._acceleratorGraph``, not through
    ``torch.cuda.CUDAGraph``, so wrapping only the latter would miss its captures. Empty where
    it does not exist (torch 2.11) or is a subclass of ``torch.cuda.CUDAGraph`` already.
    """
    graph = getattr(getattr(torch, "accelerator", None), "Graph", None)
    if not isinstance(graph, type) or issubclass(graph, torch.cuda.CUDAGraph):
        return []
    if not all(callable(getattr(graph, m, None)) for m in ("capture_begin", "capture_end")):
        return []
    return [graph]


def at_cuda_initialization(call: Callable[[], None]) -> bool:
    """Runs ``call`` when CUDA initializes (now, if it has), never initializing it itself.

    Through ``torch.cuda._lazy_call``: a process that forks workers must have no CUDA context
    before the fork. False (nothing queued) where this torch has no such hook.
    """
    lazy_call = getattr(torch.cuda, "_lazy_call", None)
    if not callable(lazy_call):
        return False
    lazy_call(call)
    return True


def capture_device(graph: Any) -> torch.device:
    """The device a real CUDA graph captures on: the current CUDA device."""
    return torch.device("cuda", torch.cuda.current_device())
