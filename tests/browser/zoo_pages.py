"""The zoo's HTML page in the browser tier: making pages and what they must show.

The page is made by graphcheck.zoo.report_html, loaded from the source tree by its path: that
module uses the standard library only, so the tier needs neither the compiled modules nor an
installed package. What the page must show is computed here from the JSON document alone,
with the definitions docs/zoo.md gives ("HTML page"), not read from the page's script.
"""

from __future__ import annotations

import copy
import fnmatch
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RENDERER = REPO / "python" / "graphcheck" / "zoo" / "report_html.py"

Doc = dict[str, Any]


def renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("zoo_report_html", RENDERER)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {RENDERER}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_page(doc: Doc, page: Path) -> None:
    renderer().write_html(page, doc)


def big_corpus(doc: Doc, count: int) -> Doc:
    """``doc`` with its architectures repeated under new names up to ``count`` rows.

    The summary stays the original's: the page shows it as given, and what is compared with
    the rows is computed from the architectures.
    """
    out = copy.deepcopy(doc)
    source = list(doc["architectures"].items())
    out["architectures"] = {}
    for i in range(count):
        name, arch = source[i % len(source)]
        out["architectures"][f"{name}{i // len(source)}"] = copy.deepcopy(arch)
    return out


def _stale_archs(doc: Doc) -> list[str]:
    return [entry.split(":", 1)[0] for entry in doc["summary"].get("stale_allow", [])]


def _has_findings(name: str, a: dict[str, Any], doc: Doc) -> bool:
    return bool(a.get("findings") or (a.get("capture") or {}).get("unregistered"))


def _failure(name: str, a: dict[str, Any], doc: Doc) -> bool:
    status = str(a.get("capture_status") or "")
    capture_failed = status not in ("", "ran") and not status.startswith("not ")
    forward = a.get("forward") or {}
    no_forward = a.get("status") == "built" and forward.get("eligible") and not forward.get("ran")
    return a.get("status") != "built" or bool(no_forward) or capture_failed


def _fails_run(name: str, a: dict[str, Any], doc: Doc) -> bool:
    stale = any(fnmatch.fnmatchcase(name, arch) for arch in _stale_archs(doc))
    return bool(a.get("new_findings") or a.get("capture_new_findings") or stale)


# The page's filters (?only=...) and their counts (#count-rows-<name>).
FILTERS: dict[str, Callable[[str, dict[str, Any], Doc], bool]] = {
    "findings": _has_findings,
    "failures": _failure,
    "new": _fails_run,
}


def filtered_rows(doc: Doc, only: str) -> int:
    keep = FILTERS[only]
    return sum(1 for name, a in doc["architectures"].items() if keep(name, a, doc))


def expected_counts(doc: Doc) -> dict[str, str]:
    """Element id -> the text the page must show in it."""
    summary = doc["summary"]
    rows = len(doc["architectures"])
    counts = {
        f"summary-{key}": str(value)
        for key, value in summary.items()
        if isinstance(value, int) and not isinstance(value, bool)
    }
    fails = any(_fails_run(n, a, doc) for n, a in doc["architectures"].items())
    counts.update(
        {
            "summary-stale_allow": str(len(summary.get("stale_allow", []))),
            "count-stale-allow": str(len(summary.get("stale_allow", []))),
            "count-unverified-allow": str(len(summary.get("unverified_allow", []))),
            "count-sites": str(len(summary.get("sites", {}))),
            "count-failure-reasons": str(len(summary.get("failures_by_reason", []))),
            "count-rows": str(rows),
            "count-rows-shown": str(rows),
            "count-details": str(rows),
            "count-rows-linked": str(rows),
            "zoo-status": "fails" if fails or summary.get("stale_allow") else "passes",
        }
    )
    counts.update({f"count-rows-{only}": str(filtered_rows(doc, only)) for only in FILTERS})
    return counts
