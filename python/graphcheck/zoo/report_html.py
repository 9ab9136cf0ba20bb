"""The zoo's HTML page (``--html FILE``): the ``--json`` document as one self-contained page.

The page (``report_page/``: ``page.html`` and its scripts) holds the whole
document that :func:`graphcheck.zoo.report.to_json` makes, as JSON in a
``<script type="application/json" id="zoo-data">`` element, and builds
everything from it in the browser: the summary figures, the corpus table (a
row per architecture, sortable, filtered by text and by "with findings",
"failures" or "what fails the run"), the sites, build failures and stale
allowlist entries, and a details section per architecture (``#arch-<name>``)
that its row links to. Rows are made by the script rather than written as
HTML, so the file is the JSON document plus a fixed ~30 kB, and the full
corpus (1,600 rows) loads as one ``JSON.parse``. Nothing is fetched: no
network, no CDN.

It imports nothing of graphcheck (the standard library only), so the browser
tier loads this file by its path and renders a page without the compiled
modules (tests/browser/browser_check.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["embed_json", "to_html", "write_html"]

_PAGE = Path(__file__).with_name("report_page")
# The scripts in the order they run: the model first (helpers, one record per architecture),
# the entry (main(), at the end of details.js) last.
_SCRIPTS = ("model.js", "table.js", "details.js")
_DATA_MARK = "@ZOO_DATA@"
_SCRIPT_MARK = "/*@ZOO_SCRIPT@*/"


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float as its text (``"nan"``, ``"inf"``).

    ``json.dumps`` writes them as ``NaN``/``Infinity``, which ``JSON.parse`` rejects; a
    step's ``max_abs_diff`` can be one (outputs that are NaN after a step).
    """
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def embed_json(value: Any) -> str:
    r"""``value`` as JSON that can sit inside a ``<script>`` element.

    ASCII only, and every ``<``, ``>`` and ``&`` written ``\u003c``, ``\u003e``,
    ``\u0026``: no string of the data (an error message holding ``</script>`` or
    ``<!--``) can end the element or open a comment in it, and ``JSON.parse``
    reads the same strings back.
    """
    text = json.dumps(_finite(value), ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def to_html(doc: Mapping[str, Any]) -> str:
    """The page of one zoo run; ``doc`` is the ``--json`` document (:func:`report.to_json`)."""
    page = (_PAGE / "page.html").read_text(encoding="utf-8")
    script = "\n".join((_PAGE / name).read_text(encoding="utf-8") for name in _SCRIPTS)
    # The data goes in last, so that nothing in it is taken for a mark.
    head, mark, tail = page.partition(_DATA_MARK)
    if not mark or _SCRIPT_MARK not in tail:
        raise ValueError(f"{_PAGE / 'page.html'} lacks {_DATA_MARK} or {_SCRIPT_MARK}")
    return head + embed_json(doc) + tail.replace(_SCRIPT_MARK, script, 1)


def write_html(path: str | Path, doc: Mapping[str, Any]) -> None:
    """Writes :func:`to_html` of ``doc`` to ``path``."""
    Path(path).write_text(to_html(doc), encoding="utf-8")
