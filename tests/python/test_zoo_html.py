"""Tests of the zoo's HTML page (graphcheck.zoo.report_html, ``python -m graphcheck.zoo --html``).

The page's data block must be the ``--json`` document, read back exactly, whatever its
strings hold; the page must fetch nothing. The browser tier renders it
(tests/browser/browser_check.py, case ``zoo``). The run through the real zoo is skipped when
transformers (the ``zoo`` extra) is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from graphcheck.zoo import report as rep
from graphcheck.zoo.report_html import embed_json, to_html

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
PAGE_DIR = Path(rep.__file__).with_name("report_page")
ANALYSIS = ("allowlisted", "new_findings", "capture_allowlisted", "capture_new_findings")


class Scripts(HTMLParser):
    """Every <script> element: its attributes and its text, as the browser reads them."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._inside: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._inside = dict(attrs)
            self.scripts.append((self._inside, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._inside = None

    def handle_data(self, data: str) -> None:
        if self._inside is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)


def scripts_of(page: str) -> list[tuple[dict[str, str | None], str]]:
    parser = Scripts()
    parser.feed(page)
    parser.close()
    return parser.scripts


def data_of(page: str) -> Any:
    """The document in the page's data block (strict JSON: no NaN or Infinity)."""
    blocks = [text for attrs, text in scripts_of(page) if attrs.get("id") == "zoo-data"]
    assert len(blocks) == 1
    assert attrs_of_data(page) == {"type": "application/json", "id": "zoo-data"}

    def reject(constant: str) -> Any:
        raise AssertionError(f"{constant} in the data block")

    return json.loads(blocks[0], parse_constant=reject)


def attrs_of_data(page: str) -> dict[str, str | None]:
    return next(attrs for attrs, _ in scripts_of(page) if attrs.get("id") == "zoo-data")


def as_page_writes(value: Any) -> Any:
    """``value`` with NaN and infinite floats as text, as the page's data block holds them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: as_page_writes(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_page_writes(v) for v in value]
    return value


def fixture(data_dir: Path, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((data_dir / "zoo" / name).read_text(encoding="utf-8"))
    return doc


# ------------------------------------------------------------------ the real zoo


@pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers (the zoo extra) is not installed")
def test_html_holds_the_json_document(tmp_path: Path) -> None:
    json_path, html_path = tmp_path / "zoo.json", tmp_path / "zoo.html"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphcheck.zoo",
            "--only",
            "BertModel",
            "--only",
            "LevitModel",
            "--baseline",
            "--jobs",
            "1",
            "--timeout",
            "120",
            "--no-progress",
            "--json",
            str(json_path),
            "--html",
            str(html_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    data = data_of(html_path.read_text(encoding="utf-8"))
    assert data == as_page_writes(doc)
    arch = data["architectures"]
    assert sorted(arch) == ["BertModel", "LevitModel"]
    # Levit's cached attention biases are on the baseline: findings, all allowlisted.
    assert arch["LevitModel"]["allowlisted"] and not arch["LevitModel"]["new_findings"]
    assert not arch["BertModel"]["findings"]


# ------------------------------------------------------------------ escaping


HOSTILE = "</script><script>document.title='pwned'</script><!-- </SCRIPT > & \u2028 \u00e9"


def hostile_doc() -> dict[str, Any]:
    return {
        "engine": "transformers",
        "transformers": HOSTILE,
        "summary": {"enumerated": 1, "stale_allow": [f"Evil*:{HOSTILE}"]},
        "architectures": {
            f"Evil{HOSTILE}": {
                "status": "failed",
                "error": HOSTILE,
                "findings": [{"path": HOSTILE, "site": {"owner": HOSTILE}}],
            }
        },
    }


def test_no_string_can_end_the_data_block() -> None:
    doc = hostile_doc()
    page = to_html(doc)
    template = (PAGE_DIR / "page.html").read_text(encoding="utf-8")
    # As many script elements as the template has, every one closed where the template closes
    # it, and the data read back exactly.
    assert len(scripts_of(page)) == template.lower().count("<script")
    assert page.lower().count("</script") == template.lower().count("</script")
    assert page.count("<!--") == template.count("<!--")
    assert data_of(page) == doc
    block = embed_json(doc)
    assert block.isascii() and not set(block) & set("<>&")


def test_non_finite_floats_are_written_as_text() -> None:
    doc = {"architectures": {"A": {"steps": [{"max_abs_diff": math.nan}, {"x": -math.inf}]}}}
    data = data_of(to_html(doc))
    assert data["architectures"]["A"]["steps"] == [{"max_abs_diff": "nan"}, {"x": "-inf"}]


# ------------------------------------------------------------------ self-contained


@pytest.mark.parametrize("name", ["transformers_small.json", "vllm_small.json"])
def test_page_fetches_nothing(data_dir: Path, name: str) -> None:
    doc = fixture(data_dir, name)
    page = to_html(doc)
    # vllm_small.json has a step whose max_abs_diff is NaN (its outputs were NaN).
    assert data_of(page) == as_page_writes(doc)
    rest = page.replace(embed_json(doc), "")
    assert not re.search(r"\b(?:https?|ftp):|//[a-z0-9.-]+\.[a-z]{2,}/", rest, re.IGNORECASE)
    # No external script, style sheet, image or frame; no CSS import or url().
    assert not re.search(r"<(?:link|img|iframe|object|embed)\b", rest, re.IGNORECASE)
    assert not re.search(r"\bsrc\s*=", rest, re.IGNORECASE)
    assert "@import" not in rest and "url(" not in rest
    assert all(text.strip() for attrs, text in scripts_of(page) if "src" not in attrs)
    for path in PAGE_DIR.iterdir():
        text = path.read_text(encoding="utf-8")
        assert text.isascii(), path
        if path.suffix == ".js":
            assert "</script" not in text.lower() and "<!--" not in text, path


# ------------------------------------------------------------------ the fixtures


@pytest.mark.parametrize("name", ["transformers_small.json", "vllm_small.json"])
def test_fixtures_are_shaped_as_the_zoo_writes_them(data_dir: Path, name: str) -> None:
    """The browser tier's fixtures: their summaries are what report.summarize gives for them.

    Only the keys both have are compared, so that a figure the summary gains later does not
    make the fixture wrong; a figure whose meaning changes does.
    """
    doc = fixture(data_dir, name)
    arch = doc["architectures"]
    results = {n: {k: v for k, v in a.items() if k not in ANALYSIS} for n, a in arch.items()}
    built = [n for n, a in arch.items() if a["status"] == "built"]
    captured = [n for n in built if isinstance(arch[n].get("capture"), dict)]

    def entries(texts: list[str]) -> list[rep.AllowEntry]:
        return [rep.AllowEntry(*t.split(":", 1)) for t in texts]

    evaluation = rep.Evaluation(
        allowed={n: arch[n]["allowlisted"] for n in built},
        new={n: arch[n]["new_findings"] for n in built},
        stale=entries(doc["summary"]["stale_allow"]),
        unverified=entries(doc["summary"]["unverified_allow"]),
        capture_allowed={n: arch[n]["capture_allowlisted"] for n in captured},
        capture_new={n: arch[n]["capture_new_findings"] for n in captured},
    )
    seconds = doc["summary"]["seconds"]
    summary = rep.summarize(results, evaluation, seconds["wall"], seconds["jobs"])
    shared = summary.keys() & doc["summary"].keys()
    assert {"enumerated", "built", "failed", "seconds"} <= shared  # the zoo's own keys
    differ = {k for k in shared if summary[k] != doc["summary"][k]}
    assert not differ
    engine = doc["engine"]
    top = (engine, "engine", "summary", "architectures")
    extra = {k: v for k, v in doc.items() if k not in top}
    again = rep.to_json(results, evaluation, doc["summary"], doc[engine], extra, engine=engine)
    assert again == doc
