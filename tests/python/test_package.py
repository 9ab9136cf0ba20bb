"""The package's shape (issue 21): its public names, the watch's modules, the error rule and
the one rule for which stack frames are graphcheck's own."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import graphcheck
from graphcheck import _utils, integrations
from graphcheck._watch.allocator_history import frame_label

PACKAGE = Path(graphcheck.__file__).resolve().parent

# --- exported members -----------------------------------------------------------------------

# What `from graphcheck import *` gives: pinned, so that a name is added or removed on purpose.
GRAPHCHECK_ALL = {
    # the checker and its formats (graphcheck._core)
    "ACCESSES", "FINDING_VERDICTS", "NODE_TYPES", "OWNER_KINDS", "REPORT_VERSION",
    "SNAPSHOT_VERSION", "VERDICTS", "Allocation", "Epoch", "Finding", "GraphRecord",
    "KernelParam", "Node", "Operand", "Producer", "Report", "Snapshot", "Span", "__version__",
    "check", "format_address", "parse_address", "parse_report", "parse_snapshot",
    "read_allowlist", "read_snapshot", "write_snapshot",
    # errors
    "GraphcheckError", "GraphcheckKeyError", "GraphcheckTypeError", "GraphcheckValueError",
    # the registration contract
    "CONSTANT_BUFFERS_ATTR", "HELD_PREFIX", "Rebind", "StorageView", "TensorHolder",
    "dataclass_tensors", "held_tensors", "holder_tensors", "is_constant_buffer", "is_holder",
    "register_constant_buffer", "register_held_tensors", "reload_in_place",
    "set_derived_buffer", "storage_views",
    # the census
    "RUNTIME_STATE_ATTRS", "Census", "CensusEntry", "census",
    # capture, arena, graph-replay test, the pytest fixture's type
    "Capture", "capture", "WeightsArena", "GraphReplayResult", "ReplayStep",
    "check_graph_replay", "record_sites", "GraphcheckFixture",
    # the server debug flag
    "CheckResult", "FindingsError", "Watch", "checkpoint", "current_watch", "watch",
    # submodules
    "arena", "contract", "integrations", "reference", "testing",
}  # fmt: skip

INTEGRATIONS_ALL = {
    # events an engine reports
    "model_loaded", "graphs_captured", "new_epoch", "tags_label", "profiling_captures",
    # patching an engine's methods
    "AfterHook", "PatchPoint", "PatchReport", "patch_methods", "points_from_targets",
    "resolve_method", "run_hook", "signature_problems", "engine_version",
    # the vocabulary of patch points
    "Action", "Need", "Param", "ParamKind", "ARGS", "KWARGS", "SELF", "kw", "pos",
    # settings and the post-import hook
    "Settings", "settings_from", "settings_from_env", "flag_on", "when_imported",
}  # fmt: skip


@pytest.mark.parametrize(
    ("module", "expected"), [(graphcheck, GRAPHCHECK_ALL), (integrations, INTEGRATIONS_ALL)]
)
def test_exported_members_are_pinned(module: object, expected: set[str]) -> None:
    exported = module.__all__  # type: ignore[attr-defined]
    assert len(exported) == len(set(exported)), "a name is exported twice"
    assert set(exported) == expected
    assert [name for name in exported if not hasattr(module, name)] == []
    # Public names are what users reach for: none of them comes from a name users cannot
    # import (a private module is fine as the home, never as the name).
    assert not [name for name in exported if name.startswith("_") and name != "__version__"]


def test_census_capture_and_watch_are_the_functions() -> None:
    model = torch.nn.Linear(2, 2)
    model.kept = torch.ones(3)  # type: ignore[assignment]
    assert graphcheck.census(model).paths == ["kept"]
    assert isinstance(graphcheck.census(model), graphcheck.Census)
    assert callable(graphcheck.capture) and callable(graphcheck.watch)
    assert graphcheck.Census.__module__ == "graphcheck._census"


def test_integrations_import_neither_torch_nor_an_engine() -> None:
    code = (
        "import sys, graphcheck.integrations, graphcheck.integrations.targets; "
        "print(sorted(m for m in ('torch', 'vllm', 'sglang', 'graphcheck._torch') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == "[]"


# --- the watch subpackage -------------------------------------------------------------------

WATCH = PACKAGE / "_watch"
# Down this order only (the subpackage's docstring): a module imports none listed before it.
WATCH_ORDER = [
    "process", "watch", "results", "graphs", "graph_pools", "registry", "cuda_capture",
    "allocator_history", "cuda_hooks", "writer", "quiet", "output", "index_page", "profiling",
    "import_hook", "settings",
]  # fmt: skip


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside functions, absolute names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path.name}: relative import of {node.module}"
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("graphcheck._watch.")
        ):
            found.add(node.value)  # a module imported by name (the import hook's)
    return found


def test_the_watch_modules_import_down_the_list_only() -> None:
    modules = sorted(p.stem for p in WATCH.glob("*.py") if p.stem != "__init__")
    assert sorted(WATCH_ORDER) == modules, "a new module of graphcheck._watch: place it"
    assert _imports(WATCH / "__init__.py") == set()
    edges = {
        name: [m for m in WATCH_ORDER if f"graphcheck._watch.{m}" in _imports(WATCH / f"{name}.py")]
        for name in WATCH_ORDER
    }
    upward = [
        f"{name} -> {target}"
        for name, targets in edges.items()
        for target in targets
        if WATCH_ORDER.index(target) <= WATCH_ORDER.index(name)
    ]
    # The one edge up: the import hook starts the watch by name once torch is imported. No
    # module imports the hook, so that edge closes no circle.
    assert upward == ["import_hook -> process"]
    assert [name for name, targets in edges.items() if "import_hook" in targets] == []


def test_each_watch_module_imports_alone_in_a_fresh_interpreter() -> None:
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-I", "-c", f"import graphcheck._watch.{name}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in WATCH_ORDER
    }
    failed = {}
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        if proc.returncode != 0:
            failed[name] = err.strip().splitlines()[-1:]
    assert failed == {}


def test_the_settings_and_the_hook_import_no_torch() -> None:
    code = (
        "import sys, graphcheck._watch.import_hook, graphcheck._watch.settings; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == "False"


# --- the error rule -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (graphcheck.GraphcheckTypeError, TypeError),
        (graphcheck.GraphcheckValueError, ValueError),
        (graphcheck.GraphcheckKeyError, KeyError),
    ],
)
def test_each_error_is_a_graphcheck_error_and_its_builtin(
    error: type[Exception], builtin: type[Exception]
) -> None:
    assert issubclass(error, graphcheck.GraphcheckError) and issubclass(error, builtin)
    assert error.__module__ == "graphcheck" and error.__doc__
    assert str(error("names the cause\nand the fix")) == "names the cause\nand the fix"


def test_misuse_raises_by_the_rule() -> None:
    with pytest.raises(graphcheck.GraphcheckTypeError, match="model must be a torch.nn.Module"):
        graphcheck.census("not a model")  # type: ignore[arg-type]
    with pytest.raises(graphcheck.GraphcheckValueError, match="max_depth"):
        graphcheck.census(torch.nn.Linear(1, 1), max_depth=0)
    with pytest.raises(graphcheck.GraphcheckKeyError, match="has no buffer slot 'gone'"):
        graphcheck.set_derived_buffer(torch.nn.Linear(1, 1), "gone", torch.ones(1))
    with graphcheck.Watch(cuda_hooks=False, allocator_history=False) as watch:
        with pytest.raises(graphcheck.GraphcheckValueError, match="mode must be one of"):
            watch.mode = "loud"
        with pytest.raises(graphcheck.GraphcheckValueError, match="non-empty label"):
            watch.checkpoint("")


# Modules outside the rule: the zoo (a command whose failures are rows of its table) and the
# target tables (plain data the compat tier loads without the package: built-ins there).
_RULE_EXEMPT = ("zoo", os.path.join("integrations", "targets"))


def test_no_module_raises_a_bare_builtin_for_misuse() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = str(path.relative_to(PACKAGE))
        if relative.startswith(_RULE_EXEMPT):
            continue
        tree = ast.parse(path.read_text())
        # A module's or class's __getattr__ raises AttributeError by protocol, not for misuse.
        protocol = {
            id(raised)
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for raised in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in protocol:
                continue
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                name = getattr(node.exc.func, "id", "")
                if name in {"TypeError", "ValueError", "KeyError", "AttributeError"}:
                    offenders.append(f"{relative}:{node.lineno} raises {name}")
    assert offenders == []


# --- which stack frames are graphcheck's own ------------------------------------------------


def _frame(path: Path) -> dict[str, object]:
    return {"filename": str(path), "line": 7, "name": "f"}


def test_one_rule_for_graphcheck_frames() -> None:
    internal = _utils.internal_prefixes()
    assert str(Path(torch.__file__).resolve().parent) + os.sep in internal
    own = [PACKAGE / "_capture.py", PACKAGE / "_watch" / "watch.py", PACKAGE / "zoo" / "x.py"]
    for path in own:
        assert _utils.is_internal_file(str(path), internal), path
        assert frame_label([_frame(path)], internal) is None
    model = PACKAGE / "reference.py"  # the models graphcheck ships allocate like a user's
    assert not _utils.is_internal_file(str(model), internal)
    assert frame_label([_frame(PACKAGE / "_capture.py"), _frame(model)], internal) == (
        f"{model}:7 in f"
    )
    assert _utils.is_internal_file("<frozen importlib._bootstrap>", internal)
    assert not _utils.is_internal_file("<string>", internal)


def test_the_arena_labels_the_reference_models_frames_as_sites() -> None:
    from graphcheck.reference import build_reference_model

    arena = graphcheck.WeightsArena(1 << 28)
    model = build_reference_model(arena=arena)
    labels = {a.label for a in arena.allocations()}
    assert any("graphcheck/reference.py:" in label for label in labels), labels
    assert not any(f"{os.sep}_" in label.split(":")[0] for label in labels if label), labels
    del model
