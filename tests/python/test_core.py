"""Tests of graphcheck._core: snapshots, check(), reports and errors, through the package."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import graphcheck
from graphcheck import (
    Allocation,
    Epoch,
    GraphcheckError,
    GraphRecord,
    KernelParam,
    Node,
    Operand,
    Producer,
    Snapshot,
    Span,
    _core,
)

WEIGHTS = 0x7F3A00000000
WORKSPACE = 0x7F7000000000


def pointer(address: int) -> bytes:
    return address.to_bytes(8, "little")


def small_snapshot() -> Snapshot:
    """A registered weight and an unregistered workspace, each read by one node."""
    capture = Epoch(
        "capture",
        spans=[Span(WEIGHTS, 4096, "parameter", "layers.0.weight")],
        allocations=[
            Allocation(WEIGHTS, 4096, "weights", 1),
            Allocation(WORKSPACE, 1024, "default", 1, "layers.0.quant.workspace"),
        ],
    )
    gemm = Node(
        0,
        "kernel",
        "gemm_kernel",
        params=[KernelParam(0, pointer(WEIGHTS + 64)), KernelParam(8, pointer(WORKSPACE))],
    )
    mm = Node(
        1,
        "op",
        "aten::mm",
        operands=[Operand("reads[0]", WORKSPACE + 512, 256, "read")],
    )
    return Snapshot(
        producer=Producer("synthetic", "test_core.py"),
        epochs=[capture],
        graphs=[GraphRecord(1, "capture", [gemm, mm])],
    )


# --- the installed package ---------------------------------------------------------------


def test_imports_the_installed_package_not_the_source_tree() -> None:
    package = Path(graphcheck.__file__).resolve().parent
    site = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    assert package.parent in site, f"graphcheck imported from {package}, not site-packages"
    assert (package / "py.typed").is_file()
    assert (package / "_core.pyi").is_file()
    assert Path(graphcheck._core.__file__).resolve().parent == package


def test_import_does_not_import_torch() -> None:
    code = "import sys, graphcheck; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-I", "-c", code], check=True, capture_output=True, text=True
    )
    assert out.stdout.strip() == "False"


def test_every_public_name_resolves() -> None:
    missing = [name for name in graphcheck.__all__ if not hasattr(graphcheck, name)]
    assert missing == []
    assert len(set(graphcheck.__all__)) == len(graphcheck.__all__)


def test_lazy_names_match_their_modules() -> None:
    from graphcheck import _census, contract

    assert set(graphcheck._LAZY_MODULES) == {
        "graphcheck.contract",
        "graphcheck._capture",
        "graphcheck._census",
        "graphcheck._sites",
        "graphcheck.arena",
        "graphcheck.testing",
        "graphcheck._watch.output",
        "graphcheck._watch.process",
        "graphcheck._watch.watch",
        "graphcheck.pytest_plugin",
    }
    assert set(graphcheck._LAZY_MODULES["graphcheck.contract"]) == set(contract.__all__)
    assert set(graphcheck._LAZY_MODULES["graphcheck._census"]) == set(_census.__all__)
    assert graphcheck.set_derived_buffer is contract.set_derived_buffer
    assert graphcheck.census is _census.census and callable(graphcheck.census)


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        _ = graphcheck.nonexistent


def test_constants() -> None:
    assert graphcheck.VERDICTS == (
        "registered",
        "runtime",
        "graph",
        "input",
        "allowed",
        "unregistered",
        "dangling",
        "stale",
        "lost",
    )
    assert graphcheck.FINDING_VERDICTS == ("unregistered", "dangling", "stale", "lost")
    assert graphcheck.OWNER_KINDS == ("parameter", "buffer", "runtime", "graph", "input")
    assert graphcheck.ACCESSES == ("unknown", "read", "write", "read-write")
    assert "kernel" in graphcheck.NODE_TYPES
    assert "op" in graphcheck.NODE_TYPES
    assert graphcheck.SNAPSHOT_VERSION == 1
    assert graphcheck.REPORT_VERSION == 1
    assert graphcheck.__version__.count(".") == 2


def test_error_class() -> None:
    assert issubclass(GraphcheckError, RuntimeError)
    assert GraphcheckError.__module__ == "graphcheck"
    assert GraphcheckError.__doc__


# --- the example snapshots and their expect blocks ------------------------------------------


def data_files() -> list[Path]:
    data = Path(__file__).resolve().parents[1] / "data"
    return sorted(data.glob("*.json")) + sorted((data / "gpu").glob("*.json"))


def expectations(path: Path) -> list[dict]:
    doc = json.loads(path.read_text())
    return [doc["expect"], *doc.get("expect_epochs", [])]


@pytest.mark.parametrize("path", data_files(), ids=lambda p: p.name)
def test_example_snapshot_matches_its_expect_blocks(path: Path) -> None:
    for expect in expectations(path):
        report = graphcheck.check(path, epoch=expect["epoch"])
        summary = report.summary
        for key, count in expect["summary"].items():
            assert summary[key] == count, f"{path.name} {expect['epoch']}: {key}"
        if "stale_allow" in expect:
            assert report.stale_allow == expect["stale_allow"]
        assert report.epoch == expect["epoch"]
        finding_count = sum(summary[v] for v in graphcheck.FINDING_VERDICTS)
        assert len(report.findings) == finding_count
        assert report.ok == (finding_count == 0)


def test_there_are_example_snapshots() -> None:
    assert len(data_files()) >= 20


def test_check_accepts_a_snapshot_a_str_or_a_path(data_dir: Path) -> None:
    path = data_dir / "verdict_stale.json"
    by_path = graphcheck.check(path)
    assert graphcheck.check(str(path)) == by_path
    assert graphcheck.check(graphcheck.read_snapshot(path)) == by_path
    assert by_path.summary["stale"] == 2
    assert by_path.epoch == "after_reload"
    assert by_path.baseline == "capture"


def test_check_in_an_earlier_epoch_and_against_a_baseline(data_dir: Path) -> None:
    snapshot = graphcheck.read_snapshot(data_dir / "verdict_stale.json")
    assert graphcheck.check(snapshot, epoch="capture").ok
    report = graphcheck.check(snapshot, epoch="after_reload", baseline="capture")
    assert report.baseline == "capture"
    assert [f.verdict for f in report.findings] == ["stale", "stale"]


def test_summary_has_every_key_in_report_order(data_dir: Path) -> None:
    summary = graphcheck.check(data_dir / "decode_step.json").summary
    assert list(summary) == ["graphs", "nodes", "references", *graphcheck.VERDICTS]
    assert sum(summary[v] for v in graphcheck.VERDICTS) == summary["references"]
    assert summary["graphs"] == 1
    assert summary["nodes"] == 613


# --- findings ------------------------------------------------------------------------------


def test_findings_of_a_snapshot_built_in_python() -> None:
    report = graphcheck.check(small_snapshot())
    assert report.summary["registered"] == 1
    assert report.summary["unregistered"] == 2
    assert not report.ok
    kernel, op = report.findings
    assert kernel.verdict == "unregistered"
    assert kernel.owner == "layers.0.quant.workspace"
    assert kernel.owner_kind is None
    assert (kernel.graph, kernel.node, kernel.node_type) == (1, 0, "kernel")
    assert kernel.kernel == "gemm_kernel"
    assert (kernel.param, kernel.offset) == (1, 0)
    assert kernel.operand == ""
    assert kernel.address == WORKSPACE
    assert kernel.access == "unknown"
    assert (kernel.range_begin, kernel.range_size) == (0, 0)
    assert kernel.detail
    assert kernel.fix
    assert op.node_type == "op"
    assert op.kernel == "aten::mm"
    assert (op.param, op.offset) == (None, None)
    assert op.operand == "reads[0]"
    assert op.access == "read"
    assert op.address == WORKSPACE + 512
    assert (op.range_begin, op.range_size) == (WORKSPACE + 512, 256)
    assert "unregistered" in repr(kernel)


def test_allow_turns_findings_into_allowed_and_reports_stale_globs(tmp_path: Path) -> None:
    report = graphcheck.check(small_snapshot(), allow=["layers.*.quant.workspace", "gone.*"])
    assert report.ok
    assert report.summary["allowed"] == 2
    assert report.stale_allow == ["gone.*"]
    globs = tmp_path / "allow.txt"
    globs.write_text("# known sites\n\n  layers.*.quant.workspace  \n")
    assert graphcheck.read_allowlist(globs) == ["layers.*.quant.workspace"]
    assert graphcheck.check(small_snapshot(), allow=graphcheck.read_allowlist(globs)).ok
    # '*' stays within one path component, '**' crosses them (docs/verdicts.md).
    assert not graphcheck.check(small_snapshot(), allow=["layers.*.workspace"]).ok
    assert graphcheck.check(small_snapshot(), allow=["layers.**.workspace"]).ok


def test_allow_must_be_an_iterable_of_str() -> None:
    with pytest.raises(TypeError, match="found a single string"):
        graphcheck.check(small_snapshot(), allow="layers.*")
    with pytest.raises(TypeError, match=r"allow\[1\]: expected a str glob, found int"):
        graphcheck.check(small_snapshot(), allow=["a", 3])
    assert graphcheck.check(small_snapshot(), allow=(g for g in ["layers.**"])).ok


def test_threads_leave_the_report_as_it_is(data_dir: Path) -> None:
    one = graphcheck.read_snapshot(data_dir / "decode_step.json")
    graph = one.graphs[0]
    many = Snapshot(  # a check point of four graphs (one per batch size)
        producer=one.producer,
        epochs=one.epochs,
        graphs=[GraphRecord(i, graph.epoch, graph.nodes) for i in range(1, 5)],
        allow=one.allow,
    )
    expected = graphcheck.check(many, threads=1)
    assert expected.summary["graphs"] == 4 and not expected.ok
    for threads in (0, 2, 4):
        assert graphcheck.check(many, threads=threads) == expected
    session = _core.CheckSession(many)  # what a Capture's checks go through
    assert session.check(threads=3) == expected
    assert graphcheck.check(data_dir / "decode_step.json", threads=2) == graphcheck.check(one)


def test_threads_must_be_an_int_from_0_to_256() -> None:
    with pytest.raises(ValueError, match=r"threads: expected an int from 0 to 256, found -1"):
        graphcheck.check(small_snapshot(), threads=-1)
    with pytest.raises(ValueError, match=r"found 257"):
        graphcheck.check(small_snapshot(), threads=257)
    with pytest.raises(ValueError, match=r"found 18446744073709551616"):
        graphcheck.check(small_snapshot(), threads=2**64)
    for wrong, name in ((2.0, "float"), ("2", "str"), (True, "bool"), (None, "NoneType")):
        with pytest.raises(TypeError, match=rf"expected an int from 0 to 256, found {name}$"):
            graphcheck.check(small_snapshot(), threads=wrong)  # type: ignore[arg-type]
    assert graphcheck.check(small_snapshot(), threads=256).summary["graphs"] == 1


# --- reports -------------------------------------------------------------------------------


def test_report_json_round_trips(data_dir: Path) -> None:
    for name in ("decode_step.json", "verdict_lost.json", "node_op.json"):
        report = graphcheck.check(data_dir / name)
        text = report.to_json()
        assert graphcheck.parse_report(text) == report
        assert graphcheck.parse_report(report.to_json(indent=-1)) == report
        assert "\n" not in report.to_json(indent=-1)
        doc = json.loads(text)
        assert doc["format"] == "graphcheck-report"
        assert doc["version"] == graphcheck.REPORT_VERSION
        assert doc["summary"] == report.summary
        assert len(doc["findings"]) == len(report.findings)


def test_report_html_embeds_the_report_and_the_map(data_dir: Path) -> None:
    snapshot = graphcheck.read_snapshot(data_dir / "decode_step.json")
    report = graphcheck.check(snapshot)
    page = report.to_html(snapshot)
    assert page.startswith("<!DOCTYPE html>")
    start = page.index('id="graphcheck-data">') + len('id="graphcheck-data">')
    data = json.loads(page[start : page.index("</script>", start)])
    assert graphcheck.parse_report(json.dumps(data["report"])) == report
    refs = sum(len(graph["refs"]) for graph in data["snapshot"]["graphs"])
    assert refs == report.summary["references"]
    # Without the snapshot: counts and findings only, no map data.
    bare = report.to_html()
    start = bare.index('id="graphcheck-data">') + len('id="graphcheck-data">')
    assert json.loads(bare[start : bare.index("</script>", start)])["snapshot"] is None


def test_report_json_fields_match_the_finding() -> None:
    report = graphcheck.check(small_snapshot())
    first = json.loads(report.to_json())["findings"][0]
    finding = report.findings[0]
    assert first["verdict"] == finding.verdict
    assert first["owner"] == finding.owner
    assert first["address"] == graphcheck.format_address(finding.address)
    assert first["kernel"] == finding.kernel
    assert first["param"] == finding.param


def test_str_is_the_text_report_and_matches_the_cli(cli: Path, data_dir: Path) -> None:
    path = data_dir / "verdict_unregistered.json"
    report = graphcheck.check(path)
    text = subprocess.run([cli, "check", path], capture_output=True, text=True)
    assert text.returncode == 1
    assert str(report) == text.stdout
    assert "UNREGISTERED" in str(report)
    as_json = subprocess.run([cli, "check", path, "--format", "json"], capture_output=True)
    assert graphcheck.parse_report(as_json.stdout.decode()) == report
    assert "findings=1" in repr(report)


# --- snapshots -----------------------------------------------------------------------------


def test_snapshot_json_and_file_round_trip(tmp_path: Path) -> None:
    snapshot = small_snapshot()
    assert graphcheck.parse_snapshot(snapshot.to_json()) == snapshot
    path = tmp_path / "small.json"
    graphcheck.write_snapshot(snapshot, path)
    assert graphcheck.read_snapshot(path) == snapshot
    assert graphcheck.check(path) == graphcheck.check(snapshot)


def test_snapshot_members(data_dir: Path) -> None:
    snapshot = graphcheck.read_snapshot(data_dir / "node_kernel.json")
    assert snapshot.producer.backend == "synthetic"
    assert [e.label for e in snapshot.epochs] == ["capture"]
    capture = snapshot.find_epoch("capture")
    assert capture == snapshot.epochs[0]
    assert snapshot.find_epoch("nope") is None
    node = snapshot.graphs[0].nodes[0]
    assert node.type == "kernel"
    assert isinstance(node.params[0].data, bytes)
    span = capture.spans[0]
    assert span.end == span.begin + span.size
    assert span.contains(span.begin)
    assert not span.contains(span.end)
    assert "Span(begin=0x" in repr(span)


def test_list_members_are_copies_and_assignment_replaces_them() -> None:
    snapshot = small_snapshot()
    snapshot.epochs[0].spans.append(Span(1, 1))  # changes a copy
    assert len(snapshot.epochs[0].spans) == 1
    epoch = snapshot.epochs[0]
    epoch.spans = [*epoch.spans, Span(WORKSPACE, 1024, "runtime", "ws", "scratch")]
    snapshot.epochs = [epoch]
    assert len(snapshot.epochs[0].spans) == 2
    report = graphcheck.check(snapshot)
    assert report.summary["runtime"] == 2
    assert report.ok


def test_enum_spellings_are_checked() -> None:
    with pytest.raises(ValueError, match=r"Span.kind: expected one of 'parameter'.*found 'param'"):
        Span(0, 1, "param")
    with pytest.raises(ValueError, match="Node.type: expected one of 'kernel'"):
        Node(0, "kernal")
    operand = Operand("src", 0, 8)
    with pytest.raises(ValueError, match="Operand.access: expected one of 'unknown'"):
        operand.access = "rw"
    assert operand.access == "unknown"
    operand.access = "read-write"
    assert operand.access == "read-write"


# --- errors --------------------------------------------------------------------------------


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "missing.json"
    with pytest.raises(GraphcheckError, match="missing.json: cannot read the snapshot file"):
        graphcheck.read_snapshot(path)
    with pytest.raises(GraphcheckError, match="missing.json"):
        graphcheck.check(path)
    with pytest.raises(GraphcheckError, match="allowlist .*missing.json: cannot be read"):
        graphcheck.read_allowlist(path)


def test_bad_field_names_its_json_path(data_dir: Path) -> None:
    doc = json.loads((data_dir / "verdict_stale.json").read_text())
    doc["epochs"][0]["spans"][1]["size"] = "big"
    with pytest.raises(GraphcheckError) as error:
        graphcheck.parse_snapshot(json.dumps(doc), source="mine.json")
    assert str(error.value) == (
        'mine.json: epochs[0].spans[1].size: expected a positive integer, found "big"'
    )


def test_bad_json_and_bad_report() -> None:
    with pytest.raises(GraphcheckError, match="snapshot: not valid JSON"):
        graphcheck.parse_snapshot("{")
    with pytest.raises(GraphcheckError, match='report: top level: missing required key "format"'):
        graphcheck.parse_report("{}")


def test_unknown_epoch_lists_the_labels(data_dir: Path) -> None:
    path = data_dir / "verdict_stale.json"
    with pytest.raises(GraphcheckError, match=r'epoch "later" .*\(it has: capture, after_reload\)'):
        graphcheck.check(path, epoch="later")
    with pytest.raises(GraphcheckError, match='baseline "before"'):
        graphcheck.check(path, baseline="before")


def test_writing_a_broken_snapshot_names_the_field(tmp_path: Path) -> None:
    broken = Snapshot(epochs=[Epoch("a"), Epoch("a")])
    with pytest.raises(GraphcheckError, match=r"epochs\[1\].label"):
        broken.to_json()
    with pytest.raises(GraphcheckError, match=r"epochs\[1\].label"):
        graphcheck.write_snapshot(broken, tmp_path / "broken.json")
    assert not (tmp_path / "broken.json").exists()


def test_wrong_argument_types_raise_type_error() -> None:
    with pytest.raises(
        TypeError, match=r"(?s)check\(\): incompatible function arguments.*snapshot"
    ):
        graphcheck.check(3)
    with pytest.raises(TypeError, match=r"(?s)Span\(begin: .*Invoked with: -1, 1"):
        Span(-1, 1)


def test_addresses() -> None:
    assert graphcheck.format_address(WEIGHTS) == "0x7f3a00000000"
    assert graphcheck.parse_address("0x7F3A00000000") == WEIGHTS
    assert graphcheck.parse_address("7f3a") is None


def test_owner_families_compact_numbered_owners_as_the_text_report_does() -> None:
    from graphcheck import _core

    owners = [
        "layers.0.mlp.alpha",
        "layers.0.rope",
        "layers.1.mlp.alpha",
        "layers.3.mlp.alpha",
        "lm_head.\x1bws",
    ]
    assert _core.owner_families(owners) == [
        ("layers.{0-1,3}.mlp.alpha", 3),
        ("layers.0.rope", 1),
        ("lm_head.\\x1bws", 1),  # escaped as every report escapes names
    ]
    assert _core.owner_families([]) == []
    with pytest.raises(graphcheck.GraphcheckTypeError, match=r"owners\[1\]"):
        _core.owner_families(["a", 3])  # type: ignore[list-item]
