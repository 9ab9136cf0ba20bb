"""graphcheck.integrations.targets itself: its data is coherent and its helpers right."""

from __future__ import annotations

import ast
import re

import pytest

from compat_check import TARGET_MODULES, T

P, K = T.Param, T.ParamKind

# Releases the version ranges are checked over (those compat ran against when targets.py was
# written, plus the edges of every range).
SAMPLES = {
    T.Framework.VLLM: ["0.22.0", "0.25.0", "0.30.0", "0.32.0", "0.33.0"],
    T.Framework.SGLANG: [f"0.5.{n}" for n in range(11, 24)],
}


def test_keys_are_unique_and_name_their_engine() -> None:
    keys = [t.key for t in T.TARGETS]
    assert len(keys) == len(set(keys))
    for target in T.TARGETS:
        assert target.key.startswith(target.framework.value + "."), target.key


def test_paths_are_dotted_identifiers() -> None:
    identifier = r"[A-Za-z_][A-Za-z0-9_]*"
    for target in T.TARGETS:
        assert re.fullmatch(rf"{identifier}(\.{identifier})*", target.dotted), target.key
        assert target.module.split(".")[0] == target.framework.value, target.key
        assert target.why.strip() and not target.why.endswith(" "), target.key


def test_version_ranges_are_ordered_and_parse() -> None:
    for target in T.TARGETS:
        if target.since and target.until:
            assert T.parse_version(target.since) < T.parse_version(target.until), target.key
        for version in (target.since, target.until):
            if version:
                T.parse_version(version)


def test_seen_is_given_exactly_for_the_entries_of_the_newest_release() -> None:
    for target in T.TARGETS:
        newest = T.NEWEST_CHECKED[target.framework]
        if target.applies_to(newest):
            assert re.fullmatch(r"[\w/.]+\.py:\d+", target.seen), target.key
            assert target.seen.startswith(target.framework.value + "/"), target.key
        else:
            assert target.seen == "", target.key


@pytest.mark.parametrize("framework", list(T.Framework))
def test_every_release_has_exactly_one_model_registration_and_capture_check(
    framework: object,
) -> None:
    for version in SAMPLES[framework]:  # type: ignore[index]
        points = T.patch_points(framework, version)
        required = [t for t in points if t.need is T.Need.REQUIRED]
        assert [t.action for t in required].count(T.Action.REGISTER_MODEL) == 1, version
        assert [t.action for t in required].count(T.Action.CHECK_CAPTURE) == 1, version


@pytest.mark.parametrize("framework", list(T.Framework))
def test_alternatives_never_overlap(framework: object) -> None:
    # Two entries patching the same method would wrap it twice.
    for version in SAMPLES[framework]:  # type: ignore[index]
        dotted = [t.dotted for t in T.patch_points(framework, version)]
        assert len(dotted) == len(set(dotted)), version


def test_issue_hook_points_are_covered_for_the_newest_releases() -> None:
    # Issue 11, sections 2 and 3, as the released wheels have them (docs/compat.md).
    vllm = {t.qualname: t.action for t in T.patch_points(T.Framework.VLLM, "0.33.0")}
    assert vllm == {
        "Worker.load_model": T.Action.REGISTER_MODEL,
        "Worker.compile_or_warm_up_model": T.Action.CHECK_CAPTURE,
        "Worker.wake_up": T.Action.NEW_EPOCH,
        "Worker.reload_weights": T.Action.NEW_EPOCH,
        "Worker.finish_weight_update": T.Action.NEW_EPOCH,
        # Issue 18: the graphs of vLLM's memory profiling are not watched.
        "Worker.determine_available_memory": T.Action.PROFILE_CAPTURES,
        # The CPU build's worker (issue 19: the flag's CPU mode).
        "CPUWorker.compile_or_warm_up_model": T.Action.CHECK_CAPTURE,
        "CPUWorker.wake_up": T.Action.NEW_EPOCH,
    }
    sglang = {t.qualname: t.action for t in T.patch_points(T.Framework.SGLANG, "0.5.23")}
    manager = "SchedulerWeightUpdaterManager"
    assert sglang == {
        "ModelRunner.load_model": T.Action.REGISTER_MODEL,
        "ModelRunner.init_cuda_graphs": T.Action.CHECK_CAPTURE,
        "ModelRunner.init_decode_cuda_graph": T.Action.CHECK_CAPTURE,
        "ModelRunner.init_prefill_cuda_graph": T.Action.CHECK_CAPTURE,
        f"{manager}.resume_memory_occupation": T.Action.NEW_EPOCH,
        f"{manager}.update_weights_from_disk": T.Action.NEW_EPOCH,
        f"{manager}.update_weights_from_ipc": T.Action.NEW_EPOCH,
        f"{manager}.end_weight_update": T.Action.NEW_EPOCH,
    }
    before_sessions = {t.qualname for t in T.patch_points(T.Framework.SGLANG, "0.5.20")}
    assert f"{manager}.update_weights_from_tensor" in before_sessions
    assert f"{manager}.update_weights_from_distributed" in before_sessions
    assert f"{manager}.end_weight_update" not in before_sessions
    mixin = {t.qualname for t in T.patch_points(T.Framework.SGLANG, "0.5.12")}
    assert "ModelRunner.init_device_graphs" in mixin
    assert "SchedulerUpdateWeightsMixin.resume_memory_occupation" in mixin


def test_patched_methods_take_self_first() -> None:
    for target in T.TARGETS:
        if isinstance(target, T.MethodTarget) and target.action.patched:
            assert target.params[0] == P("self"), target.key


def test_entry_points() -> None:
    vllm = T.entry_point(T.Framework.VLLM)
    assert (vllm.group, vllm.name, vllm.value) == (
        "vllm.general_plugins",
        "graphcheck",
        "graphcheck.integrations.vllm:register",
    )
    sglang = T.entry_point(T.Framework.SGLANG)
    assert (sglang.group, sglang.name, sglang.value) == (
        "sglang.srt.plugins",
        "graphcheck",
        "graphcheck.integrations.sglang:register",
    )
    for point in T.ENTRY_POINTS:
        # The engine's group constant is one of the checked targets, with the same value.
        constants = [
            t
            for t in T.targets_for(point.framework)
            if isinstance(t, T.ConstantTarget) and t.action is T.Action.LOAD_PLUGIN
        ]
        assert [c.value for c in constants] == [point.group]


def test_targets_module_imports_no_engine_and_no_torch() -> None:
    for path in TARGET_MODULES:
        tree = ast.parse(path.read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.ImportFrom):  # relative: only the targets' own modules
                assert node.level == 1 and (node.module or "") in {
                    p.stem for p in TARGET_MODULES
                }, f"{path.name} imports .{node.module} (outside the targets modules)"
        allowed = {"__future__", "collections", "dataclasses", "enum", "inspect", "re"}
        assert imported <= allowed, f"{path.name} imports {sorted(imported - allowed)}"


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("0.5.9", "0.5.10"),
        ("0.5.15", "0.5.15.post1"),
        ("0.34.0rc1", "0.34.0"),
        ("0.34.0.dev3", "0.34.0rc1"),
        ("0.34.0a1", "0.34.0b1"),
        ("0.33.0", "0.33.0.post1"),
        ("0.9", "0.10.0"),
        ("1.0", "1.0.0.1"),
    ],
)
def test_parse_version_orders_releases(older: str, newer: str) -> None:
    assert T.parse_version(older) < T.parse_version(newer)


def test_parse_version_equalities_and_errors() -> None:
    assert T.parse_version("0.33") == T.parse_version("0.33.0")
    assert T.parse_version("0.33.0+cu128") == T.parse_version("0.33.0")
    with pytest.raises(ValueError, match=r"not a release version: 'latest' \(expected e\.g\."):
        T.parse_version("latest")


def test_applies_to_is_half_open() -> None:
    target = next(t for t in T.TARGETS if t.key == "sglang.runner.init_cuda_graphs")
    assert (target.since, target.until) == ("0.5.14", None)
    assert not target.applies_to("0.5.13")
    assert target.applies_to("0.5.14")
    old = next(t for t in T.TARGETS if t.key == "sglang.runner.init_device_graphs")
    assert old.applies_to("0.5.13") and not old.applies_to("0.5.14")


def test_compare_params_reports_each_kind_of_change() -> None:
    expected = (P("self"), P("tags", default=True))
    assert (
        T.compare_params(expected, (P("self"), P("tags", default=True), P("x", default=True))) == []
    )
    assert T.compare_params(expected, (P("self"),)) == [
        "parameter 'tags' missing: nothing at position 2"
    ]
    assert T.compare_params(expected, (P("self"), P("tags", K.KEYWORD, True))) == [
        "parameter 'tags' moved from position 2 to keyword-only (nothing at position 2)"
    ]
    assert T.compare_params(expected, (P("self"), P("tags", K.POSITIONAL_ONLY, True))) == [
        "parameter 'tags' is positional-only, expected positional-or-keyword"
    ]
    keyword = (P("self"), P("level", K.KEYWORD))
    assert T.compare_params(keyword, (P("self"),)) == ["keyword-only parameter 'level' missing"]
    called = T.compare_params((P("self"),), (P("self"), P("n")), called_by_plugin=True)
    assert called == ["new required parameter 'n' (the plugin calls this)"]
    assert (
        T.compare_params((P("self"),), (P("self"), P("a", K.VAR_POSITIONAL)), called_by_plugin=True)
        == []
    )


def test_format_params() -> None:
    params = (P("a", K.POSITIONAL_ONLY), P("self"), P("k", K.KEYWORD, True), P("kw", K.VAR_KEYWORD))
    assert T.format_params(params) == "(a, /, self, *, k=..., **kw)"
    assert T.format_params(()) == "()"
