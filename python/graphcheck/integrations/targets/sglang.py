"""SGLang's entries of :mod:`graphcheck.integrations.targets` (import them from there).

Read from the released wheels: ``seen`` is where, in the release
``targets.NEWEST_CHECKED`` names. Plain data, no import of sglang or torch.
"""

from __future__ import annotations

from .vocabulary import (
    SELF,
    Action,
    AttributeTarget,
    CallTarget,
    ConstantTarget,
    Framework,
    MethodTarget,
    Need,
    Target,
    pos,
)

__all__ = ["SGLANG_TARGETS"]

_S = Framework.SGLANG
_REQ = Need.REQUIRED
_OPT = Need.OPTIONAL

_SGL_RUNNER = "sglang.srt.model_executor.model_runner"
_SGL_MIXIN = "sglang.srt.managers.scheduler_update_weights_mixin"
_SGL_MANAGER = "sglang.srt.managers.scheduler_components.weight_updater"
_SGL_IO = "sglang.srt.managers.io_struct"
_RECV_REQ = (SELF, pos("recv_req"))


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
        params=(pos("cls"), pos("target"), pos("hook"), pos("hook_type", default=True)),
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
        params=(SELF,),
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
        params=(SELF,),
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
        params=(SELF, pos("capture_decode_cuda_graph", default=True)),
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
        params=(SELF,),
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
        params=(SELF, pos("force_for_draft_worker", default=True)),
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
