"""The zoo's allowlist: reading, matching labels, and writing one from a run's findings.

Format (``--allow``, ``--write-allowlist``): one entry per line,
``Arch:path-glob``; blank lines and lines starting with ``#`` are comments.
``Arch`` is an architecture name or an fnmatch glob over names
(``LlamaModel@rope_type=*``, ``*``); ``path-glob`` is a census path glob as
:func:`graphcheck.census` takes it (``*`` and ``?``, brackets literal:
``experts[*].weight``), or a capture's allocation label
(:func:`is_allocation_label`). The file the tool writes groups the entries by
architecture, one glob per site, each under a comment naming the class and
attribute that keep the tensor and the file that defines it.

Which entries apply, and when one is stale, is :func:`graphcheck.zoo.report.evaluate`'s.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from graphcheck._utils import glob_regex
from graphcheck.zoo.sites import generalize, is_allocation_label, owner_entry

__all__ = [
    "AllowEntry",
    "allowlist_text",
    "is_allocation_label",
    "read_zoo_allowlist",
    "site_globs",
    "write_allowlist",
]

Result = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class AllowEntry:
    """One allowlist line: architecture glob, census path glob, and where it was read."""

    arch: str
    path: str
    line: int = 0

    def __str__(self) -> str:
        return f"{self.arch}:{self.path}"


def read_zoo_allowlist(path: str | Path) -> list[AllowEntry]:
    """Parses a zoo allowlist file. Raises ``ValueError`` naming the file and line of a bad entry.

    The zoo's format (``Arch:path-glob`` lines, the module docstring), not the one glob per
    line that :func:`graphcheck.read_allowlist` reads for the checker.
    """
    entries: list[AllowEntry] = []
    text = Path(path).read_text(encoding="utf-8")
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        arch, sep, glob = line.partition(":")
        if not sep or not arch.strip() or not glob.strip():
            raise ValueError(
                f"{path}:{number}: expected 'Arch:path-glob' (e.g. "
                f"'EsmModel@rotary:encoder.layer.*.rotary_embeddings._cos_cached'), found {line!r}"
            )
        entries.append(AllowEntry(arch.strip(), glob.strip(), number))
    return entries


def site_globs(paths: Iterable[str]) -> list[str]:
    """The globs covering the paths of one site: one ``prefix*suffix`` by path components.

    Numeric components become ``*`` first (:func:`~graphcheck.zoo.sites.generalize`);
    paths that still differ keep their common leading and trailing components
    around one ``*`` (``encoder.a.padding_left`` and ``decoder.b.c.padding_left``
    give ``*.padding_left``; ``*`` matches across dots). Paths without a common
    trailing component keep one glob each (a bare ``*`` would allow anything).
    """
    globs = sorted({generalize(p) for p in paths})
    if len(globs) == 1:
        return globs
    split = [[part for part in re.split(r"(?=[.\[])", g) if part] for g in globs]
    head: list[str] = []
    for column in zip(*split, strict=False):
        if len(set(column)) != 1:
            break
        head.append(column[0])
    tail: list[str] = []
    for column in zip(*(parts[len(head) :][::-1] for parts in split), strict=False):
        if len(set(column)) != 1:
            break
        tail.insert(0, column[0])
    while tail and tail[0] in (".*", "[*]"):
        tail.pop(0)  # the joining '*' covers them
    while head and head[-1] in (".*", "[*]", "*"):
        head.pop()
    if not tail:
        return globs
    rest = [parts[len(head)] for parts in split if len(parts) > len(head)]
    dot = "." if head and rest and all(part.startswith(".") for part in rest) else ""
    return ["".join(head) + dot + "*" + "".join(tail)]


def allowlist_text(
    results: Mapping[str, Result],
    version: str,
    header: Iterable[str] = (),
    *,
    engine: str = "transformers",
) -> str:
    """The baseline text: every finding of every built architecture, one glob per site.

    A site is the class that holds the tensor and its attribute; its glob
    covers every path where that architecture keeps one (all layers).
    """
    lines = [
        f"# graphcheck.zoo baseline allowlist for {engine} {version}",
        "# Format: Arch:census-path-glob, one glob per site (see docs/zoo.md). Written by",
        "#   python -m graphcheck.zoo --write-allowlist FILE",
        *(f"# {h}" for h in header),
    ]
    for name, result in results.items():
        owners = (result.get("capture") or {}).get("unregistered") or []
        if result.get("status") != "built" or not (result.get("findings") or owners):
            continue
        lines += ["", f"# === {name} ({result.get('model_type')})"]
        by_site: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for f in result["findings"]:
            site = f.get("site", {})
            key = (str(site.get("owner", "?")), str(site.get("attribute", "?")))
            by_site.setdefault(key, []).append(f)
        written: list[str] = []
        for (owner, attribute), found in by_site.items():
            file = found[0].get("site", {}).get("file") or "?"
            phases = sorted({str(f.get("phase", "static")) for f in found})
            lines.append(
                f"# {owner}.{attribute} ({file}): {len(found)} storage(s), {', '.join(phases)}"
            )
            globs = site_globs(f["path"] for f in found)
            written += globs
            lines += [f"{name}:{g}" for g in globs]
        lines += _capture_lines(name, result, written)
    return "\n".join(lines) + "\n"


def _capture_lines(name: str, result: Result, written: list[str]) -> list[str]:
    """Entries for the capture's unregistered owners that no census glob already covers."""
    patterns = [glob_regex(g) for g in written]
    owners = (result.get("capture") or {}).get("unregistered") or []
    extra = dict(owner_entry(o) for o in owners if not any(p.fullmatch(o) for p in patterns))
    lines: list[str] = []
    for glob, kind in sorted(extra.items()):
        lines.append(f"# unregistered owner at capture ({kind}), not reached by the census")
        lines.append(f"{name}:{glob}")
    return lines


def write_allowlist(
    path: str | Path,
    results: Mapping[str, Result],
    version: str,
    header: Iterable[str] = (),
    *,
    engine: str = "transformers",
) -> None:
    """Writes :func:`allowlist_text` to ``path``."""
    text = allowlist_text(results, version, header, engine=engine)
    Path(path).write_text(text, encoding="utf-8")
