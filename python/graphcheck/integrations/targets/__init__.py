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

One subpackage: the data is split by engine (:mod:`.vllm`, :mod:`.sglang`), the vocabulary
and helpers both share live in :mod:`.vocabulary`; this package is the one place to import
them from. It imports nothing outside itself (the compat tier loads it by file path).
"""

from __future__ import annotations

from .sglang import SGLANG_TARGETS
from .vllm import VLLM_TARGETS
from .vocabulary import (
    ARGS,
    KWARGS,
    SELF,
    Action,
    AttributeTarget,
    CallTarget,
    ConstantTarget,
    EntryPoint,
    Framework,
    MethodTarget,
    Need,
    Param,
    ParamKind,
    Target,
    compare_params,
    format_params,
    kw,
    params_from_signature,
    parse_version,
    pos,
)

__all__ = [
    "ARGS",
    "ENTRY_POINTS",
    "KWARGS",
    "NEWEST_CHECKED",
    "OLDEST_CHECKED",
    "SELF",
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
    "kw",
    "params_from_signature",
    "parse_version",
    "patch_points",
    "pos",
    "targets_for",
]

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
