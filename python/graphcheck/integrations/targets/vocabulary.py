"""The vocabulary of :mod:`graphcheck.integrations.targets`: entry kinds and shared helpers.

The plugins (``graphcheck.integrations.vllm``, ``graphcheck.integrations.sglang``) and the
``compat`` test tier (tests/compat) share these: the enums (:class:`Framework`,
:class:`Need`, :class:`Action`, :class:`ParamKind`), the entry kinds (:class:`MethodTarget`,
:class:`AttributeTarget`, :class:`ConstantTarget`, :class:`CallTarget`), the entry point
(:class:`EntryPoint`), and the helpers :func:`compare_params`, :func:`params_from_signature`,
:func:`format_params` and :func:`parse_version`. The per-engine data lives in
:mod:`.vllm` and :mod:`.sglang`; import everything from ``graphcheck.integrations.targets``.

Plain data; no import of vllm, sglang, torch or graphcheck (the compat tier loads this folder
by path, as a package of its own, without the graphcheck package: errors here are the
built-ins). Immutable: safe to share between threads.
"""

from __future__ import annotations

import enum
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ARGS",
    "KWARGS",
    "SELF",
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
    "format_params",
    "kw",
    "params_from_signature",
    "parse_version",
    "pos",
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
    PROFILE_CAPTURES = "profile-captures"
    """Patched: graphs captured while it runs only measure memory (vLLM's
    ``profile_cudagraph_memory``) and are freed before the engine serves; the watch records
    none of them."""
    CAPTURE_SITE = "capture-site"
    """Not patched: the engine captures graphs here, and ``graphcheck.watch``'s hook on
    ``torch.cuda.CUDAGraph`` capture must see it."""

    @property
    def patched(self) -> bool:
        """Whether the plugin wraps the target (as opposed to reading or relying on it)."""
        return self in (
            Action.REGISTER_MODEL,
            Action.CHECK_CAPTURE,
            Action.NEW_EPOCH,
            Action.PROFILE_CAPTURES,
        )


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


def pos(name: str, *, default: bool = False) -> Param:
    """A positional-or-keyword parameter the plugin relies on."""
    return Param(name, ParamKind.POSITIONAL, default)


def kw(name: str, *, default: bool = False) -> Param:
    """A keyword-only parameter the plugin relies on."""
    return Param(name, ParamKind.KEYWORD, default)


SELF = pos("self")
"""``self``, first of every method entry."""
ARGS = Param("args", ParamKind.VAR_POSITIONAL)
"""``*args``: the plugin passes further positional arguments through."""
KWARGS = Param("kwargs", ParamKind.VAR_KEYWORD)
"""``**kwargs``: the plugin passes further keyword arguments through."""


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
        ValueError: the text is not a version (a plain ``ValueError``: this folder is
            loaded without the graphcheck package, see the module docstring).
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
