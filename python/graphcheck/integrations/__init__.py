"""Wire graphcheck into a serving engine: the public API the vLLM and SGLang plugins use.

An engine (vLLM, SGLang, or your own server: examples/server/) tells graphcheck three things,
usually from hooks run after its own methods:

- :func:`model_loaded`: the model to check (a module or a getter) and the engine objects whose
  other tensors are runtime state (a model runner's static inputs, KV caches);
- :func:`graphs_captured`: the engine captured its CUDA graphs; check them (``capture``);
- :func:`new_epoch`: a wake-up or a weight reload ended; check every graph again;
- :func:`profiling_captures`: graphs captured inside only measure memory; none is watched.

:func:`patch_methods` wraps an engine's methods by name with such hooks (:class:`PatchPoint`
says where and what, :class:`PatchReport` what was patched and what could not be found);
:func:`settings_from_env` and :func:`settings_from` read a watch's :class:`Settings` (from
``GRAPHCHECK_*`` or an engine's own configuration), :func:`flag_on` whether ``GRAPHCHECK``
is on, and :func:`when_imported` runs a callback once a module is imported (to patch an
engine's worker lazily). :mod:`graphcheck.integrations.targets` names, per engine release,
every method the plugins patch (plain data, checked by the ``compat`` tier).

Importing this package imports neither torch nor an engine. Thread safety: the events go to
the process's watch under its lock; :func:`patch_methods` patches under a lock, but patching
while another thread calls the engine's methods is the engine author's to avoid.
"""

from __future__ import annotations

from graphcheck._watch.import_hook import when_imported
from graphcheck._watch.settings import Settings, flag_on, settings_from, settings_from_env
from graphcheck.integrations._wiring import (
    AfterHook,
    PatchPoint,
    PatchReport,
    engine_version,
    graphs_captured,
    model_loaded,
    new_epoch,
    patch_methods,
    points_from_targets,
    profiling_captures,
    resolve_method,
    run_hook,
    signature_problems,
    tags_label,
)
from graphcheck.integrations.targets import (
    ARGS,
    KWARGS,
    SELF,
    Action,
    Need,
    Param,
    ParamKind,
    kw,
    pos,
)

__all__ = [
    "ARGS",
    "KWARGS",
    "SELF",
    "Action",
    "AfterHook",
    "Need",
    "Param",
    "ParamKind",
    "PatchPoint",
    "PatchReport",
    "Settings",
    "engine_version",
    "flag_on",
    "graphs_captured",
    "kw",
    "model_loaded",
    "new_epoch",
    "patch_methods",
    "points_from_targets",
    "pos",
    "profiling_captures",
    "resolve_method",
    "run_hook",
    "settings_from",
    "settings_from_env",
    "signature_problems",
    "tags_label",
    "when_imported",
]
