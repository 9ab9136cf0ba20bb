"""What the vLLM and SGLang plugins patch and rely on, per engine version: the one list.

The plugins (``graphcheck.integrations.vllm`` and ``graphcheck.integrations.sglang``) patch
by the names below and log what they patched and what they could not find; the ``compat``
test tier (tests/compat, docs/compat.md) reads the same names from the released wheels'
sources and checks that every class, method, constant and call is where this file says, with
the parameters the plugins assume. A release that moves one fails that tier with the name of
what moved.

Every entry was read from the released wheels, not from a source tree: ``seen`` gives the
file and line in the :data:`NEWEST_CHECKED` release, and ``since``/``until`` the releases
between which it holds (``until`` excluded; ``None`` where it holds for every release checked,
from :data:`OLDEST_CHECKED` on).

Kinds of entries:

- :class:`MethodTarget`: a method the plugin patches (``action`` is one of
  :attr:`Action.REGISTER_MODEL`, :attr:`Action.CHECK_CAPTURE`, :attr:`Action.NEW_EPOCH`) or
  calls (:attr:`Action.READ`), with the parameters it relies on (:class:`Param`).
- :class:`AttributeTarget`: a class attribute, dataclass field or ``self.<name>`` the plugin
  reads.
- :class:`ConstantTarget`: a module constant with its value (the entry-point group names).
- :class:`CallTarget`: a call the engine makes in a given function: where it loads plugins,
  where it captures graphs (:attr:`Action.CAPTURE_SITE`: ``graphcheck.watch``'s hook on
  ``torch.cuda.CUDAGraph`` capture must see those).

``need`` says what the plugin does when an entry is missing at run time:
:attr:`Need.REQUIRED` entries are the capture check itself (register the model, check after
capture): without one the plugin logs an error naming it and stays inert.
:attr:`Need.OPTIONAL` entries are the later check points and the configuration routes: the
plugin logs a warning naming what it could not find and keeps the rest. The compat tier
fails on either kind for the pinned releases.

Plain data and the two helpers both sides need (:func:`compare_params`, :func:`parse_version`);
no import of vllm, sglang or torch. Immutable: safe to share between threads.
"""

from __future__ import annotations

import enum
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ENTRY_POINTS",
    "NEWEST_CHECKED",
    "OLDEST_CHECKED",
    "SGLANG_TARGETS",
    "TARGETS",
    "VLLM_TARGETS",
    "Action",
    "AttributeTarget",
    "CallTarget",
    "ConstantTarget",
    "EntryPoint",
    "Framework",
    "MethodTarget",
    "Need",
    "Param",
    "ParamKind",
    "Target",
    "compare_params",
    "entry_point",
    "format_params",
    "params_from_signature",
    "parse_version",
    "patch_points",
    "targets_for",
]


class Framework(enum.Enum):
    """A serving engine; the value is its distribution name on PyPI."""

    VLLM = "vllm"
    SGLANG = "sglang"


class Need(enum.Enum):
    """What the plugin does when an entry is missing (module docstring)."""

    REQUIRED = "required"
    OPTIONAL = "optional"


class Action(enum.Enum):
    """What the plugin does at an entry."""

    LOAD_PLUGIN = "load-plugin"
    """Engine code that discovers and runs the plugin's entry point; not patched."""
    REGISTER_MODEL = "register-model"
    """Patched: after it returns, the engine's model is registered with graphcheck."""
    CHECK_CAPTURE = "check-capture"
    """Patched: after it returns, every graph it captured is checked."""
    NEW_EPOCH = "new-epoch"
    """Patched: after it returns (wake-up, weight reload), a new epoch is recorded and every
    watched graph is checked against it."""
    READ = "read"
    """The plugin calls or reads it (model accessor, configuration, hook API)."""
    CAPTURE_SITE = "capture-site"
    """Not patched: the engine captures graphs here, and ``graphcheck.watch``'s hook on
    ``torch.cuda.CUDAGraph`` capture must see it."""

    @property
    def patched(self) -> bool:
        """Whether the plugin wraps the target (as opposed to reading or relying on it)."""
        return self in (Action.REGISTER_MODEL, Action.CHECK_CAPTURE, Action.NEW_EPOCH)


class ParamKind(enum.Enum):
    """The kind of a parameter, as :class:`inspect.Parameter` has them."""

    POSITIONAL_ONLY = "positional-only"
    POSITIONAL = "positional-or-keyword"
    VAR_POSITIONAL = "*args"
    KEYWORD = "keyword-only"
    VAR_KEYWORD = "**kwargs"


@dataclass(frozen=True)
class Param:
    """One parameter a plugin relies on (expected) or a method has (actual).

    Attributes:
        name: the parameter's name (ignored for the variadic kinds).
        kind: how it is passed.
        default: expected: the plugin relies on it having a default (it may omit it);
            actual: it has one.
    """

    name: str
    kind: ParamKind = ParamKind.POSITIONAL
    default: bool = False

    def __str__(self) -> str:
        if self.kind is ParamKind.VAR_POSITIONAL:
            return f"*{self.name}"
        if self.kind is ParamKind.VAR_KEYWORD:
            return f"**{self.name}"
        return f"{self.name}=..." if self.default else self.name


def _pos(name: str, *, default: bool = False) -> Param:
    return Param(name, ParamKind.POSITIONAL, default)


def _kw(name: str, *, default: bool = False) -> Param:
    return Param(name, ParamKind.KEYWORD, default)


_SELF = _pos("self")
_ARGS = Param("args", ParamKind.VAR_POSITIONAL)
_KWARGS = Param("kwargs", ParamKind.VAR_KEYWORD)


def format_params(params: Sequence[Param]) -> str:
    """Renders parameters as a signature: ``(self, recv_req, *, tags=...)``."""
    parts: list[str] = []
    star_done = any(p.kind is ParamKind.VAR_POSITIONAL for p in params)
    slash_pending = False
    for param in params:
        if param.kind is ParamKind.POSITIONAL_ONLY:
            slash_pending = True
        elif slash_pending:
            parts.append("/")
            slash_pending = False
        if param.kind is ParamKind.KEYWORD and not star_done:
            parts.append("*")
            star_done = True
        parts.append(str(param))
    if slash_pending:
        parts.append("/")
    return "(" + ", ".join(parts) + ")"


_INSPECT_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: ParamKind.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: ParamKind.POSITIONAL,
    inspect.Parameter.VAR_POSITIONAL: ParamKind.VAR_POSITIONAL,
    inspect.Parameter.KEYWORD_ONLY: ParamKind.KEYWORD,
    inspect.Parameter.VAR_KEYWORD: ParamKind.VAR_KEYWORD,
}


def params_from_signature(signature: inspect.Signature) -> tuple[Param, ...]:
    """The actual parameters of a live callable, for :func:`compare_params`.

    Take the signature of the function itself (``Class.__dict__[name]``, unwrapped from
    ``classmethod``/``staticmethod``), not of a bound method: bound methods drop ``self``.
    """
    return tuple(
        Param(p.name, _INSPECT_KINDS[p.kind], p.default is not inspect.Parameter.empty)
        for p in signature.parameters.values()
    )


def _positional(params: Sequence[Param]) -> list[Param]:
    return [p for p in params if p.kind in (ParamKind.POSITIONAL_ONLY, ParamKind.POSITIONAL)]


def compare_params(
    expected: Sequence[Param], actual: Sequence[Param], *, called_by_plugin: bool = False
) -> list[str]:
    """What differs between the parameters a plugin relies on and a method's parameters.

    Positional parameters must have the expected name and kind at the expected position
    (hooks receive the original call's arguments as passed, and read them by position or
    name); keyword-only ones must exist as keyword-only; expected ``*args``/``**kwargs``
    must exist. Further parameters are allowed, except, when the plugin calls the method
    itself (``called_by_plugin``), further parameters without a default.

    Returns:
        One sentence per difference; empty when the method fits.
    """
    problems: list[str] = []
    by_name = {p.name: p for p in actual}
    actual_pos = _positional(actual)
    matched: set[str] = set()
    for index, want in enumerate(_positional(expected)):
        got = actual_pos[index] if index < len(actual_pos) else None
        if got is not None and got.name == want.name:
            matched.add(got.name)
            if got.kind is not want.kind:
                problems.append(
                    f"parameter '{want.name}' is {got.kind.value}, expected {want.kind.value}"
                )
        else:
            where = f"position {index + 1}"
            found = "nothing" if got is None else f"'{got.name}'"
            moved = by_name.get(want.name)
            if moved is not None:
                matched.add(moved.name)
                elsewhere = (
                    f"position {actual_pos.index(moved) + 1}"
                    if moved in actual_pos
                    else moved.kind.value
                )
                problems.append(
                    f"parameter '{want.name}' moved from {where} to {elsewhere} "
                    f"({found} at {where})"
                )
            else:
                problems.append(f"parameter '{want.name}' missing: {found} at {where}")
            continue
        if want.default and not got.default:
            problems.append(f"parameter '{want.name}' lost its default")
    for want in expected:
        if want.kind is ParamKind.KEYWORD:
            got = by_name.get(want.name)
            if got is None:
                problems.append(f"keyword-only parameter '{want.name}' missing")
                continue
            matched.add(got.name)
            if got.kind is not ParamKind.KEYWORD:
                problems.append(
                    f"parameter '{want.name}' is {got.kind.value}, expected keyword-only"
                )
            elif want.default and not got.default:
                problems.append(f"parameter '{want.name}' lost its default")
        elif want.kind in (ParamKind.VAR_POSITIONAL, ParamKind.VAR_KEYWORD):
            if not any(p.kind is want.kind for p in actual):
                problems.append(
                    f"no {want.kind.value} (the plugin passes further arguments through)"
                )
    if called_by_plugin:
        for got in actual:
            if got.name in matched or got.default:
                continue
            if got.kind in (ParamKind.VAR_POSITIONAL, ParamKind.VAR_KEYWORD):
                continue
            problems.append(f"new required parameter '{got.name}' (the plugin calls this)")
    return problems


_VERSION = re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[.-]?(?P<pre>a|b|rc|c|alpha|beta)[.-]?(?P<pre_n>\d*))?"
    r"(?:[.-]?post[.-]?(?P<post>\d*))?"
    r"(?:[.-]?dev[.-]?(?P<dev>\d*))?"
    r"(?:\+[a-z0-9.]+)?$",
    re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2}


def parse_version(text: str) -> tuple[int, ...]:
    """A sort key for a release version (PEP 440 order for the forms engines publish).

    ``0.5.15.post1`` sorts after ``0.5.15``, ``0.34.0rc1`` and ``0.34.0.dev3`` before
    ``0.34.0``; a local part (``+cu128``) is ignored.

    Raises:
        ValueError: the text is not a version.
    """
    match = _VERSION.match(text.strip())
    if match is None:
        raise ValueError(f"not a release version: {text!r} (expected e.g. 0.33.0 or 0.5.15.post1)")
    release = [int(part) for part in match["release"].split(".")]
    release += [0] * (6 - len(release))
    if match["pre"]:
        pre = (_PRE_RANK[match["pre"].lower()], int(match["pre_n"] or 0))
    elif match["dev"] is not None and match["post"] is None:
        pre = (-1, 0)  # X.devN comes before X.a0
    else:
        pre = (3, 0)
    post = int(match["post"] or 0) + 1 if match["post"] is not None else 0
    dev = (0, int(match["dev"] or 0)) if match["dev"] is not None else (1, 0)
    return (*release, *pre, post, *dev)


@dataclass(frozen=True, kw_only=True)
class Target:
    """An entry common to every kind.

    Attributes:
        key: unique, stable name (``vllm.worker.load_model``); tests and logs use it.
        framework: the engine.
        point: the logical hook point it serves (``capture``, ``wake``, ...); version
            alternatives of one point share it.
        module: dotted module the entry lives in, as the engine imports it.
        action: what the plugin does there.
        need: what the plugin does when it is missing.
        why: what the plugin does there and why, in one or two sentences.
        since: first release it holds for (included); ``None``: every release checked.
        until: first release it no longer holds for (excluded); ``None``: still holds.
        seen: where it was read: ``path:line`` in the :data:`NEWEST_CHECKED` release (empty
            when the entry does not hold for that release).
    """

    key: str
    framework: Framework
    point: str
    module: str
    action: Action
    need: Need
    why: str
    since: str | None = None
    until: str | None = None
    seen: str = ""

    def applies_to(self, version: str) -> bool:
        """Whether the entry holds for this engine release."""
        key = parse_version(version)
        if self.since is not None and key < parse_version(self.since):
            return False
        return self.until is None or key < parse_version(self.until)

    @property
    def dotted(self) -> str:
        """The entry's dotted path (for methods, the path SGLang's HookRegistry takes)."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class MethodTarget(Target):
    """A method (or module function) the plugin patches or calls.

    Attributes:
        qualname: ``Class.method``, or ``function`` for a module function.
        params: the parameters the plugin relies on, in order (``self``/``cls`` included).
    """

    qualname: str
    params: tuple[Param, ...]

    @property
    def dotted(self) -> str:
        """``module.Class.method``."""
        return f"{self.module}.{self.qualname}"


@dataclass(frozen=True, kw_only=True)
class AttributeTarget(Target):
    """A class attribute the plugin reads.

    Found as a class-body assignment, a dataclass or struct field, an enum member, or
    ``self.<name> = ...`` in one of the class's methods (or in a base class).

    Attributes:
        qualname: ``Class.attribute``.
    """

    qualname: str

    @property
    def dotted(self) -> str:
        """``module.Class.attribute``."""
        return f"{self.module}.{self.qualname}"


@dataclass(frozen=True, kw_only=True)
class ConstantTarget(Target):
    """A module-level constant and the value the plugin relies on.

    Attributes:
        name: the constant's name.
        value: its expected value.
    """

    name: str
    value: str

    @property
    def dotted(self) -> str:
        """``module.NAME``."""
        return f"{self.module}.{self.name}"


@dataclass(frozen=True, kw_only=True)
class CallTarget(Target):
    """A call the engine makes inside a function.

    Attributes:
        function: ``Class.method`` or ``function`` that makes the call.
        callee: the called expression as written, or its trailing part
            (``capture_model`` matches ``self.model_runner.capture_model``).
        positional: leading positional arguments, as Python source (``"'wake_up'"``).
        keywords: keyword arguments that must be present, as ``name`` or ``name=source``,
            or ``**source``.
        depth: also look in methods of the same class that ``function`` calls as
            ``self.<method>(...)``, this many levels down (the call is *reached* from
            ``function``).
    """

    function: str
    callee: str
    positional: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    depth: int = 0

    @property
    def dotted(self) -> str:
        """``module.function``."""
        return f"{self.module}.{self.function}"


@dataclass(frozen=True)
class EntryPoint:
    """An entry point graphcheck's distribution declares for an engine's plugin loader.

    Attributes:
        framework: the engine that loads it.
        group: the entry-point group the engine reads.
        name: the entry point's name (what ``VLLM_PLUGINS``/``SGLANG_PLUGINS`` allow-list).
        value: ``module:function``; the engine calls the function with no argument.
    """

    framework: Framework
    group: str
    name: str
    value: str


ENTRY_POINTS: tuple[EntryPoint, ...] = (
    EntryPoint(
        Framework.VLLM,
        "vllm.general_plugins",
        "graphcheck",
        "graphcheck.integrations.vllm:register",
    ),
    EntryPoint(
        Framework.SGLANG,
        "sglang.srt.plugins",
        "graphcheck",
        "graphcheck.integrations.sglang:register",
    ),
)

OLDEST_CHECKED: dict[Framework, str] = {
    Framework.VLLM: "0.22.0",
    Framework.SGLANG: "0.5.11",
}
"""The oldest release each engine's entries were checked against. SGLang has no plugin
group before 0.5.11; vLLM 0.22.0 is the oldest release with a manylinux_2_28 wheel."""

NEWEST_CHECKED: dict[Framework, str] = {
    Framework.VLLM: "0.33.0",
    Framework.SGLANG: "0.5.23",
}
"""The release the ``seen`` locations were read from (the compat tier checks them there)."""

_V = Framework.VLLM
_S = Framework.SGLANG
_REQ = Need.REQUIRED
_OPT = Need.OPTIONAL

_VLLM_WORKER = "vllm.v1.worker.gpu_worker"

VLLM_TARGETS: tuple[Target, ...] = (
    # Plugin loading: every process, workers included, runs the general plugins.
    ConstantTarget(
        key="vllm.plugins.group",
        framework=_V,
        point="plugin",
        module="vllm.plugins",
        name="DEFAULT_PLUGINS_GROUP",
        value="vllm.general_plugins",
        action=Action.LOAD_PLUGIN,
        need=_REQ,
        why="The entry-point group graphcheck declares its vLLM plugin in.",
        seen="vllm/plugins/__init__.py:18",
    ),
    CallTarget(
        key="vllm.plugins.discover",
        framework=_V,
        point="plugin",
        module="vllm.plugins",
        function="load_plugins_by_group",
        callee="entry_points",
        keywords=("group=group",),
        action=Action.LOAD_PLUGIN,
        need=_REQ,
        why="vLLM reads the group with importlib.metadata.entry_points (VLLM_PLUGINS "
        "allow-lists names).",
        seen="vllm/plugins/__init__.py:42",
    ),
    CallTarget(
        key="vllm.plugins.general",
        framework=_V,
        point="plugin",
        module="vllm.plugins",
        function="load_general_plugins",
        callee="load_plugins_by_group",
        keywords=("group=DEFAULT_PLUGINS_GROUP",),
        action=Action.LOAD_PLUGIN,
        need=_REQ,
        why="The general plugins are loaded and each called with no argument, once per process.",
        seen="vllm/plugins/__init__.py:87",
    ),
    CallTarget(
        key="vllm.plugins.worker",
        framework=_V,
        point="plugin",
        module="vllm.v1.worker.worker_base",
        function="WorkerWrapperBase.init_worker",
        callee="load_general_plugins",
        action=Action.LOAD_PLUGIN,
        need=_REQ,
        why="Each worker process loads the general plugins before it resolves and builds "
        "its worker class, so the patches on Worker are in place before the model loads.",
        seen="vllm/v1/worker/worker_base.py:289",
    ),
    # The capture check: register the model, check after capture.
    MethodTarget(
        key="vllm.worker.load_model",
        framework=_V,
        point="load",
        module=_VLLM_WORKER,
        qualname="Worker.load_model",
        params=(_SELF, _kw("load_dummy_weights", default=True)),
        action=Action.REGISTER_MODEL,
        need=_REQ,
        why="After the model runner (V1 or V2) loads the model, the plugin registers it "
        "(Worker.get_model()).",
        seen="vllm/v1/worker/gpu_worker.py:594",
    ),
    MethodTarget(
        key="vllm.worker.get_model",
        framework=_V,
        point="load",
        module=_VLLM_WORKER,
        qualname="Worker.get_model",
        params=(_SELF,),
        action=Action.READ,
        need=_REQ,
        why="The plugin's model: both runners return the raw nn.Module (V1 unwraps "
        "CUDAGraphWrapper, UBatchWrapper and BreakableCUDAGraphWrapper).",
        seen="vllm/v1/worker/gpu_worker.py:1161",
    ),
    MethodTarget(
        key="vllm.worker.compile_or_warm_up_model",
        framework=_V,
        point="capture",
        module=_VLLM_WORKER,
        qualname="Worker.compile_or_warm_up_model",
        params=(_SELF,),
        action=Action.CHECK_CAPTURE,
        need=_REQ,
        why="Warm-up captures every graph of either runner (model_runner.capture_model); "
        "after it the plugin checks every graph captured.",
        seen="vllm/v1/worker/gpu_worker.py:933",
    ),
    CallTarget(
        key="vllm.worker.captures",
        framework=_V,
        point="capture",
        module=_VLLM_WORKER,
        function="Worker.compile_or_warm_up_model",
        callee="self.model_runner.capture_model",
        depth=1,
        action=Action.CAPTURE_SITE,
        need=_REQ,
        why="The capture the check follows happens inside compile_or_warm_up_model (since "
        "0.33.0 in its helper _compile_or_warm_up_model), for both runners.",
        seen="vllm/v1/worker/gpu_worker.py:994",
    ),
    MethodTarget(
        key="vllm.runner_v1.capture_model",
        framework=_V,
        point="capture",
        module="vllm.v1.worker.gpu_model_runner",
        qualname="GPUModelRunner.capture_model",
        params=(_SELF,),
        action=Action.CAPTURE_SITE,
        need=_REQ,
        why="Model Runner V1's capture: graphs through CUDAGraphWrapper (FULL, PIECEWISE) "
        "and BreakableCUDAGraphWrapper.",
        seen="vllm/v1/worker/gpu_model_runner.py:6417",
    ),
    MethodTarget(
        key="vllm.runner_v2.capture_model",
        framework=_V,
        point="capture",
        module="vllm.v1.worker.gpu.model_runner",
        qualname="GPUModelRunner.capture_model",
        params=(_SELF,),
        action=Action.CAPTURE_SITE,
        need=_REQ,
        why="Model Runner V2's capture (the default runner where it supports the model): "
        "CudaGraphManager captures FULL graphs itself, outside CUDAGraphWrapper.",
        seen="vllm/v1/worker/gpu/model_runner.py:1086",
    ),
    CallTarget(
        key="vllm.capture.wrapper",
        framework=_V,
        point="capture",
        module="vllm.compilation.cuda_graph",
        function="CUDAGraphWrapper.__call__",
        callee="torch.cuda.graph",
        action=Action.CAPTURE_SITE,
        need=_REQ,
        why="V1's FULL and PIECEWISE graphs; the only replay-time address assertion vLLM "
        "has (input addresses, debug logging only) lives here.",
        seen="vllm/compilation/cuda_graph.py:314",
    ),
    CallTarget(
        key="vllm.capture.v2_full",
        framework=_V,
        point="capture",
        module="vllm.v1.worker.gpu.cudagraph_utils",
        function="CudaGraphManager.capture",
        callee="torch.cuda.graph",
        action=Action.CAPTURE_SITE,
        need=_REQ,
        why="Model Runner V2's FULL graphs: torch.cuda.graph directly, replayed by "
        "run_fullgraph with no address assertion, so only graphcheck sees them move.",
        seen="vllm/v1/worker/gpu/cudagraph_utils.py:498",
    ),
    CallTarget(
        key="vllm.capture.breakable",
        framework=_V,
        point="capture",
        module="vllm.compilation.breakable_cudagraph",
        function="BreakableCUDAGraphCapture._begin_segment",
        callee="capture_begin",
        action=Action.CAPTURE_SITE,
        need=_REQ,
        why="Breakable graphs call CUDAGraph.capture_begin/capture_end directly, not "
        "torch.cuda.graph: graphcheck.watch must hook CUDAGraph capture, not the context "
        "manager.",
        seen="vllm/compilation/breakable_cudagraph.py:180",
    ),
    # New epochs: wake-up and weight reloads.
    MethodTarget(
        key="vllm.worker.wake_up",
        framework=_V,
        point="wake",
        module=_VLLM_WORKER,
        qualname="Worker.wake_up",
        params=(_SELF, _pos("tags", default=True)),
        action=Action.NEW_EPOCH,
        need=_OPT,
        why="Resumes the sleep-mode memory, then copies back the named_buffers (and the "
        "preserved parameters) saved at level-2 sleep; after it the plugin checks a new "
        "epoch ('tags' names what woke).",
        seen="vllm/v1/worker/gpu_worker.py:341",
    ),
    MethodTarget(
        key="vllm.worker.reload_weights",
        framework=_V,
        point="reload",
        module=_VLLM_WORKER,
        qualname="Worker.reload_weights",
        params=(_SELF, _ARGS, _KWARGS),
        action=Action.NEW_EPOCH,
        need=_OPT,
        why="In-place weight reload through the model runner; after it, a new epoch.",
        seen="vllm/v1/worker/gpu_worker.py:636",
    ),
    MethodTarget(
        key="vllm.worker.finish_weight_update",
        framework=_V,
        point="reload",
        module=_VLLM_WORKER,
        qualname="Worker.finish_weight_update",
        params=(_SELF,),
        action=Action.NEW_EPOCH,
        need=_OPT,
        why="Ends a weight-transfer session (start_weight_update, update_weights chunks, "
        "finish); the chunks are not check points, the finish is.",
        seen="vllm/v1/worker/gpu_worker.py:1633",
    ),
    # --additional-config '{"graphcheck": {...}}': read in the worker, per engine.
    AttributeTarget(
        key="vllm.worker.vllm_config",
        framework=_V,
        point="config",
        module=_VLLM_WORKER,
        qualname="Worker.vllm_config",
        action=Action.READ,
        need=_OPT,
        why="The patched Worker methods read self.vllm_config.additional_config['graphcheck'] "
        "(set by WorkerBase.__init__): the plugin's register() runs with no argument, before "
        "any config exists.",
        seen="vllm/v1/worker/worker_base.py:69",
    ),
    AttributeTarget(
        key="vllm.config.additional_config",
        framework=_V,
        point="config",
        module="vllm.config.vllm",
        qualname="VllmConfig.additional_config",
        action=Action.READ,
        need=_OPT,
        why="--additional-config's dict; it is part of the compile-cache hash, so turning "
        "graphcheck on there recompiles (GRAPHCHECK=1 does not).",
        seen="vllm/config/vllm.py:429",
    ),
    CallTarget(
        key="vllm.cli.additional_config",
        framework=_V,
        point="config",
        module="vllm.engine.arg_utils",
        function="EngineArgs.add_cli_args",
        callee="add_argument",
        positional=("'--additional-config'",),
        action=Action.READ,
        need=_OPT,
        why="The command-line flag.",
        seen="vllm/engine/arg_utils.py:1899",
    ),
    CallTarget(
        key="vllm.engine.additional_config",
        framework=_V,
        point="config",
        module="vllm.engine.arg_utils",
        function="EngineArgs.create_engine_config",
        callee="VllmConfig",
        keywords=("additional_config=self.additional_config",),
        action=Action.READ,
        need=_OPT,
        why="The flag's value reaches the VllmConfig the workers get.",
        seen="vllm/engine/arg_utils.py:2883",
    ),
)

_SGL_RUNNER = "sglang.srt.model_executor.model_runner"
_SGL_MIXIN = "sglang.srt.managers.scheduler_update_weights_mixin"
_SGL_MANAGER = "sglang.srt.managers.scheduler_components.weight_updater"
_SGL_IO = "sglang.srt.managers.io_struct"
_RECV_REQ = (_SELF, _pos("recv_req"))


_WHY_RESUME = (
    "Resumes the paused memory (weights, KV cache, graphs) and restores the model's static "
    "state: a new epoch."
)
_WHY_DISK = (
    "In-place reload from disk (the model runner may recapture the decode graphs): a new "
    "epoch when it succeeded."
)
_WHY_IPC = "Checkpoint-engine reload over IPC: a new epoch when it succeeded."
_WHY_TENSOR = "Weights from tensors: a new epoch (before 0.5.21; since, a session chunk)."
_WHY_DISTRIBUTED = (
    "Weights broadcast by a trainer: a new epoch (before 0.5.21; since, a session chunk)."
)


def _sglang_scheduler_hooks() -> tuple[Target, ...]:
    """The scheduler-side request handlers that end a wake-up or a weight update.

    One scheduler per TP rank handles each request for every model runner of its process
    (target and draft): the plugin checks every runner it registered in that process.
    Before 0.5.13 the handlers are methods of SchedulerUpdateWeightsMixin (a base of
    Scheduler), since then of SchedulerWeightUpdaterManager (Scheduler.weight_updater).
    Since 0.5.21 tensor and distributed updates are chunks of a session that
    end_weight_update closes (it post-processes the weights): the session end is the check
    point, not the chunks.
    """
    handlers = (  # (point, method, until, why, line in NEWEST_CHECKED)
        ("wake", "resume_memory_occupation", None, _WHY_RESUME, 383),
        ("reload", "update_weights_from_disk", None, _WHY_DISK, 138),
        ("reload", "update_weights_from_ipc", None, _WHY_IPC, 265),
        ("reload", "update_weights_from_tensor", "0.5.21", _WHY_TENSOR, 232),
        ("reload", "update_weights_from_distributed", "0.5.21", _WHY_DISTRIBUTED, 187),
    )
    out: list[Target] = []
    for point, method, until, why, line in handlers:
        out.append(
            MethodTarget(
                key=f"sglang.mixin.{method}",
                framework=_S,
                point=point,
                module=_SGL_MIXIN,
                qualname=f"SchedulerUpdateWeightsMixin.{method}",
                params=_RECV_REQ,
                action=Action.NEW_EPOCH,
                need=_OPT,
                why=why,
                until="0.5.13",
            )
        )
        out.append(
            MethodTarget(
                key=f"sglang.manager.{method}",
                framework=_S,
                point=point,
                module=_SGL_MANAGER,
                qualname=f"SchedulerWeightUpdaterManager.{method}",
                params=_RECV_REQ,
                action=Action.NEW_EPOCH,
                need=_OPT,
                why=why,
                since="0.5.13",
                until=until,
                seen=""
                if until
                else f"sglang/srt/managers/scheduler_components/weight_updater.py:{line}",
            )
        )
    out.append(
        MethodTarget(
            key="sglang.manager.end_weight_update",
            framework=_S,
            point="reload",
            module=_SGL_MANAGER,
            qualname="SchedulerWeightUpdaterManager.end_weight_update",
            params=_RECV_REQ,
            action=Action.NEW_EPOCH,
            need=_OPT,
            why="Closes a weight-update session (tensor or distributed chunks) after "
            "post-processing the weights: a new epoch when it succeeded.",
            since="0.5.21",
            seen="sglang/srt/managers/scheduler_components/weight_updater.py:323",
        )
    )
    return tuple(out)


def _sglang_outputs() -> tuple[Target, ...]:
    """The request and output fields the plugin's AFTER hooks read."""
    success = "Check only after a successful update."
    fields = (  # (Class.field, since, why, line in NEWEST_CHECKED)
        ("ResumeMemoryOccupationReqInput.tags", None, "What woke (None: all); the label.", 2190),
        ("UpdateWeightFromDiskReqOutput.success", None, success, 1996),
        ("UpdateWeightsFromIPCReqOutput.success", None, success, 2084),
        ("UpdateWeightsFromTensorReqOutput.success", None, success, 2051),
        ("UpdateWeightsFromDistributedReqOutput.success", None, success, 2023),
        ("EndWeightUpdateReqOutput.success", "0.5.21", success, 2213),
    )
    return tuple(
        AttributeTarget(
            key=f"sglang.io.{qualname}",
            framework=_S,
            point="io",
            module=_SGL_IO,
            qualname=qualname,
            action=Action.READ,
            need=_OPT,
            why=why,
            since=since,
            seen=f"sglang/srt/managers/io_struct.py:{line}",
        )
        for qualname, since, why, line in fields
    )


SGLANG_TARGETS: tuple[Target, ...] = (
    # Plugin loading: the scheduler process, where the model runners live, loads the plugins
    # and applies the hooks they registered before it builds the Scheduler.
    ConstantTarget(
        key="sglang.plugins.group",
        framework=_S,
        point="plugin",
        module="sglang.srt.plugins",
        name="GENERAL_PLUGINS_GROUP",
        value="sglang.srt.plugins",
        action=Action.LOAD_PLUGIN,
        need=_REQ,
        why="The entry-point group graphcheck declares its SGLang plugin in.",
        seen="sglang/srt/plugins/__init__.py:29",
    ),
    CallTarget(
        key="sglang.plugins.discover",
        framework=_S,
        point="plugin",
        module="sglang.srt.plugins",
        function="load_plugins_by_group",
        callee="entry_points",
        keywords=("group=group",),
        action=Action.LOAD_PLUGIN,
        need=_REQ,
        why="SGLang reads the group with importlib.metadata.entry_points (SGLANG_PLUGINS "
        "allow-lists names).",
        seen="sglang/srt/plugins/__init__.py:57",
    ),
    CallTarget(
        key="sglang.plugins.general",
        framework=_S,
        point="plugin",
        module="sglang.srt.plugins",
        function="load_plugins",
        callee="load_plugins_by_group",
        positional=("GENERAL_PLUGINS_GROUP",),
        action=Action.LOAD_PLUGIN,
        need=_REQ,
        why="Each general plugin is called with no argument, once per process.",
        seen="sglang/srt/plugins/__init__.py:124",
    ),
    CallTarget(
        key="sglang.plugins.apply_hooks",
        framework=_S,
        point="plugin",
        module="sglang.srt.plugins",
        function="load_plugins",
        callee="HookRegistry.apply_hooks",
        action=Action.LOAD_PLUGIN,
        need=_REQ,
        why="After the plugins ran, the hooks they registered are applied (a target that "
        "fails to resolve is logged by SGLang, not raised).",
        seen="sglang/srt/plugins/__init__.py:141",
    ),
    CallTarget(
        key="sglang.plugins.scheduler",
        framework=_S,
        point="plugin",
        module="sglang.srt.managers.scheduler",
        function="run_scheduler_process",
        callee="load_plugins",
        action=Action.LOAD_PLUGIN,
        need=_REQ,
        why="The scheduler process loads the plugins first, so the hooks are applied before "
        "its ModelRunner exists.",
        seen="sglang/srt/managers/scheduler.py:6323",
    ),
    # SGLang's hook API, as the plugin uses it.
    MethodTarget(
        key="sglang.hooks.register",
        framework=_S,
        point="hooks",
        module="sglang.srt.plugins.hook_registry",
        qualname="HookRegistry.register",
        params=(_pos("cls"), _pos("target"), _pos("hook"), _pos("hook_type", default=True)),
        action=Action.READ,
        need=_REQ,
        why="HookRegistry.register(target, hook, HookType.AFTER) with a dotted target "
        "(MethodTarget.dotted), resolved when the hooks are applied.",
        seen="sglang/srt/plugins/hook_registry.py:84",
    ),
    AttributeTarget(
        key="sglang.hooks.after",
        framework=_S,
        point="hooks",
        module="sglang.srt.plugins.hook_registry",
        qualname="HookType.AFTER",
        action=Action.READ,
        need=_REQ,
        why="The hook type the plugin registers.",
        seen="sglang/srt/plugins/hook_registry.py:64",
    ),
    CallTarget(
        key="sglang.hooks.after_arguments",
        framework=_S,
        point="hooks",
        module="sglang.srt.plugins.hook_registry",
        function="_wrap_fn",
        callee="hook",
        positional=("result", "*args"),
        keywords=("**kwargs",),
        action=Action.READ,
        need=_REQ,
        why="An AFTER hook is called as hook(result, *args, **kwargs) with the original "
        "call's arguments (self first); returning None keeps the result.",
        seen="sglang/srt/plugins/hook_registry.py:378",
    ),
    # The capture check.
    MethodTarget(
        key="sglang.runner.load_model",
        framework=_S,
        point="load",
        module=_SGL_RUNNER,
        qualname="ModelRunner.load_model",
        params=(_SELF,),
        action=Action.REGISTER_MODEL,
        need=_REQ,
        why="After it the plugin registers the runner (target and draft runners alike) and "
        "its model.",
        seen="sglang/srt/model_executor/model_runner.py:1270",
    ),
    AttributeTarget(
        key="sglang.runner.model",
        framework=_S,
        point="load",
        module=_SGL_RUNNER,
        qualname="ModelRunner.model",
        action=Action.READ,
        need=_REQ,
        why="The plugin reads runner.model at each check: a weight update may rebind it "
        "(update_model_fields).",
        seen="sglang/srt/model_executor/model_runner.py:1321",
    ),
    MethodTarget(
        key="sglang.runner.init_device_graphs",
        framework=_S,
        point="capture",
        module=_SGL_RUNNER,
        qualname="ModelRunner.init_device_graphs",
        params=(_SELF,),
        action=Action.CHECK_CAPTURE,
        need=_REQ,
        why="Builds the graph runner, which captures: after it the plugin checks every "
        "graph captured.",
        until="0.5.14",
    ),
    MethodTarget(
        key="sglang.runner.init_cuda_graphs",
        framework=_S,
        point="capture",
        module=_SGL_RUNNER,
        qualname="ModelRunner.init_cuda_graphs",
        params=(_SELF, _pos("capture_decode_cuda_graph", default=True)),
        action=Action.CHECK_CAPTURE,
        need=_REQ,
        why="Builds the eager, prefill and decode graph runners, which capture (the "
        "scheduler calls it through TpModelWorker.init_cuda_graphs after the model loads): "
        "after it the plugin checks every graph captured.",
        since="0.5.14",
        seen="sglang/srt/model_executor/model_runner.py:1170",
    ),
    MethodTarget(
        key="sglang.runner.init_decode_cuda_graph",
        framework=_S,
        point="capture",
        module=_SGL_RUNNER,
        qualname="ModelRunner.init_decode_cuda_graph",
        params=(_SELF,),
        action=Action.CHECK_CAPTURE,
        need=_OPT,
        why="Recaptures the decode graphs (a weight update with recapture_cuda_graph, the "
        "PD role switch): after it, a check.",
        since="0.5.14",
        seen="sglang/srt/model_executor/model_runner.py:1605",
    ),
    MethodTarget(
        key="sglang.runner.init_prefill_cuda_graph",
        framework=_S,
        point="capture",
        module=_SGL_RUNNER,
        qualname="ModelRunner.init_prefill_cuda_graph",
        params=(_SELF, _pos("force_for_draft_worker", default=True)),
        action=Action.CHECK_CAPTURE,
        need=_OPT,
        why="Captures prefill graphs outside init_cuda_graphs (EAGLE v2 draft runners): "
        "after it, a check.",
        since="0.5.14",
        seen="sglang/srt/model_executor/model_runner.py:1678",
    ),
    *_sglang_scheduler_hooks(),
    *_sglang_outputs(),
)

TARGETS: tuple[Target, ...] = VLLM_TARGETS + SGLANG_TARGETS
"""Every entry, vLLM first."""


def targets_for(framework: Framework, version: str | None = None) -> tuple[Target, ...]:
    """The entries of one engine, limited to those that hold for ``version`` when given."""
    return tuple(
        t
        for t in TARGETS
        if t.framework is framework and (version is None or t.applies_to(version))
    )


def patch_points(framework: Framework, version: str) -> tuple[MethodTarget, ...]:
    """The methods the plugin wraps for this engine release, in order."""
    return tuple(
        t
        for t in targets_for(framework, version)
        if isinstance(t, MethodTarget) and t.action.patched
    )


def entry_point(framework: Framework) -> EntryPoint:
    """The entry point graphcheck declares for this engine."""
    return next(e for e in ENTRY_POINTS if e.framework is framework)
