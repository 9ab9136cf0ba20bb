"""vLLM's entries of :mod:`graphcheck.integrations.targets` (import them from there).

Read from the released wheels: ``seen`` is where, in the release
``targets.NEWEST_CHECKED`` names. Plain data, no import of vllm or torch.
"""

from __future__ import annotations

from .vocabulary import (
    ARGS,
    KWARGS,
    SELF,
    Action,
    AttributeTarget,
    CallTarget,
    ConstantTarget,
    Framework,
    MethodTarget,
    Need,
    Target,
    kw,
    pos,
)

__all__ = ["VLLM_TARGETS"]

_V = Framework.VLLM
_REQ = Need.REQUIRED
_OPT = Need.OPTIONAL

_VLLM_WORKER = "vllm.v1.worker.gpu_worker"
#: The CPU build's worker (a Worker subclass): it captures no CUDA graphs and does not sleep.
_VLLM_CPU_WORKER = "vllm.v1.worker.cpu_worker"

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
        params=(SELF, kw("load_dummy_weights", default=True)),
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
        params=(SELF,),
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
        params=(SELF,),
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
        params=(SELF,),
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
        params=(SELF,),
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
    # Memory profiling: graphs captured only to measure what the real captures will take.
    MethodTarget(
        key="vllm.worker.determine_available_memory",
        framework=_V,
        point="profile",
        module=_VLLM_WORKER,
        qualname="Worker.determine_available_memory",
        params=(SELF,),
        action=Action.PROFILE_CAPTURES,
        need=_OPT,
        why="Profiles memory before the KV cache exists, capturing graphs into a temporary "
        "pool against a minimal KV cache it frees afterwards: the watch records none of them "
        "(no check against freed memory, nothing of graphcheck's in vLLM's estimate).",
        seen="vllm/v1/worker/gpu_worker.py:641",
    ),
    CallTarget(
        key="vllm.worker.profiling_captures",
        framework=_V,
        point="profile",
        module=_VLLM_WORKER,
        function="Worker.determine_available_memory",
        callee="self.model_runner.profile_cudagraph_memory",
        action=Action.CAPTURE_SITE,
        need=_OPT,
        why="The profiling captures happen in the runner's profile_cudagraph_memory (both "
        "runners), called from determine_available_memory.",
        seen="vllm/v1/worker/gpu_worker.py:717",
    ),
    # The CPU build (the flag's CPU mode, docs/server.md): CPUWorker overrides the warm-up and
    # the sleep methods; the model, the reloads and get_model are Worker's.
    MethodTarget(
        key="vllm.cpu_worker.compile_or_warm_up_model",
        framework=_V,
        point="capture",
        module=_VLLM_CPU_WORKER,
        qualname="CPUWorker.compile_or_warm_up_model",
        params=(SELF,),
        action=Action.CHECK_CAPTURE,
        need=_OPT,
        why="The CPU worker's warm-up, where a GPU worker captures its graphs; after it the "
        "plugin captures the engine's own warm-up forward in the ATen window (the CPU twin) "
        "and checks it.",
        seen="vllm/v1/worker/cpu_worker.py:265",
    ),
    MethodTarget(
        key="vllm.cpu_worker.wake_up",
        framework=_V,
        point="wake",
        module=_VLLM_CPU_WORKER,
        qualname="CPUWorker.wake_up",
        params=(SELF, pos("tags", default=True)),
        action=Action.NEW_EPOCH,
        need=_OPT,
        why="A no-op on the CPU (sleep mode is not supported there): the plugin says so in "
        "the log instead of checking an epoch nothing changed.",
        seen="vllm/v1/worker/cpu_worker.py:170",
    ),
    MethodTarget(
        key="vllm.runner_v1.dummy_run",
        framework=_V,
        point="capture",
        module="vllm.v1.worker.gpu_model_runner",
        qualname="GPUModelRunner._dummy_run",
        params=(
            SELF,
            pos("num_tokens"),
            pos("cudagraph_runtime_mode", default=True),
            pos("force_attention", default=True),
        ),
        action=Action.READ,
        need=_OPT,
        why="The CPU twin runs the runner's own dummy batch (the batch a GPU worker warms up "
        "and captures with; CPUModelRunner inherits it) to record the model's forward "
        "arguments and forward context.",
        seen="vllm/v1/worker/gpu_model_runner.py:5447",
    ),
    # New epochs: wake-up and weight reloads.
    MethodTarget(
        key="vllm.worker.wake_up",
        framework=_V,
        point="wake",
        module=_VLLM_WORKER,
        qualname="Worker.wake_up",
        params=(SELF, pos("tags", default=True)),
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
        params=(SELF, ARGS, KWARGS),
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
        params=(SELF,),
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
