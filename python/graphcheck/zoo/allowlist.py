"""The zoo's allowlist: reading, matching labels, and writing one from a run's findings.

Format (``--allow``, ``--write-allowlist``): one entry per line,
``Arch:path-glob``, optionally led by conditions: ``[cpu=avx512_bf16,amx]`` (the
capabilities of :mod:`graphcheck.zoo.cpu` on which the site exists: on another CPU the entry
is neither required nor stale) and ``[verdict=dangling]`` (the entry allows that verdict of
the owner after the capture, a reload's, instead of a census finding or an unregistered owner
at capture); blank lines and lines starting with ``#`` are comments.
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

from graphcheck._utils import PathGlob
from graphcheck.zoo.cpu import LEVELS
from graphcheck.zoo.sites import generalize, is_allocation_label, is_op_label, owner_entry

__all__ = [
    "LATER_VERDICTS",
    "AllowEntry",
    "allowlist_text",
    "is_allocation_label",
    "read_entries",
    "read_zoo_allowlist",
    "site_globs",
    "write_allowlist",
]

Result = dict[str, Any]


#: The verdicts of a later epoch (after a reload) that an entry must name to allow them.
LATER_VERDICTS = ("dangling", "stale", "lost")


@dataclasses.dataclass(frozen=True)
class AllowEntry:
    """One allowlist line: architecture glob, census path glob, and where it was read.

    ``cpus`` are the CPU capabilities (:data:`graphcheck.zoo.cpu.LEVELS`) the entry holds on;
    empty: every CPU. ``verdict`` (one of :data:`LATER_VERDICTS`) makes it allow an owner
    with that verdict after the capture (a reload) instead of a census finding or an
    unregistered owner at capture.
    """

    arch: str
    path: str
    line: int = 0
    cpus: tuple[str, ...] = ()
    verdict: str = ""

    def __str__(self) -> str:
        condition = f"[cpu={','.join(self.cpus)}] " if self.cpus else ""
        condition += f"[verdict={self.verdict}] " if self.verdict else ""
        return f"{condition}{self.arch}:{self.path}"

    def holds_on(self, cpu: str) -> bool:
        """Whether the entry applies on a CPU of capability ``cpu``."""
        return not self.cpus or cpu in self.cpus


_CONDITION = re.compile(r"\[(cpu|verdict)=([^\]]*)\]\s*")
_EXAMPLE = "'[cpu=avx512_bf16,amx] Arch:path-glob' or '[verdict=dangling] Arch:path-glob'"


def _conditions(line: str, where: str) -> tuple[tuple[str, ...], str, str]:
    """``(cpus, verdict, rest)`` of a line that may start with ``[cpu=...]``/``[verdict=...]``."""
    cpus: tuple[str, ...] = ()
    verdict = ""
    while line.startswith("["):
        match = _CONDITION.match(line)
        if match is None:
            raise ValueError(f"{where}: expected a condition such as {_EXAMPLE}, found {line!r}")
        key, values = match.group(1), [v.strip() for v in match.group(2).split(",") if v.strip()]
        known = LEVELS if key == "cpu" else LATER_VERDICTS
        unknown = [v for v in values if v not in known]
        if not values or unknown or (key == "verdict" and len(values) != 1):
            raise ValueError(
                f"{where}: condition {match.group(0).strip()!r}: expected "
                f"{'capabilities among' if key == 'cpu' else 'one verdict of'} "
                f"{', '.join(known)}, found {', '.join(unknown or values) or 'none'}"
            )
        if key == "cpu":
            cpus = tuple(values)
        else:
            verdict = values[0]
        line = line[match.end() :]
    return cpus, verdict, line


def read_zoo_allowlist(path: str | Path) -> list[AllowEntry]:
    """Parses a zoo allowlist file. Raises ``ValueError`` naming the file and line of a bad entry.

    The zoo's format (``Arch:path-glob`` lines, the module docstring), not the one glob per
    line that :func:`graphcheck.read_allowlist` reads for the checker.
    """
    return read_entries(Path(path).read_text(encoding="utf-8").splitlines(), str(path))


def read_entries(lines: Iterable[str], where: str = "entries") -> list[AllowEntry]:
    """Parses allowlist lines (:func:`read_zoo_allowlist`'s rules; ``where`` names them)."""
    entries: list[AllowEntry] = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cpus, verdict, line = _conditions(line, f"{where}:{number}")
        arch, sep, glob = line.partition(":")
        if not sep or not arch.strip() or not glob.strip():
            raise ValueError(
                f"{where}:{number}: expected 'Arch:path-glob' (e.g. "
                f"'EsmModel@rotary:encoder.layer.*.rotary_embeddings._cos_cached'), found {line!r}"
            )
        if is_op_label(glob.strip()):
            raise ValueError(
                f"{where}:{number}: {glob.strip()!r} is an op label (the op that first read memory "
                "nothing names), not a site: an entry for it would allow any such memory; name "
                "the tensor's holder instead"
            )
        entries.append(AllowEntry(arch.strip(), glob.strip(), number, cpus, verdict))
    return entries


def site_globs(paths: Iterable[str]) -> list[str]:
    """The globs covering the paths of one site: each path with its numeric components as ``*``.

    ``layers.0.attn.scale`` and ``layers.1.attn.scale`` give ``layers.*.attn.scale``
    (:func:`~graphcheck.zoo.sites.generalize`); paths of other shapes keep a glob each, so that
    an entry names exactly the attribute paths of its site (``*`` never crosses a ``.``).
    """
    return sorted({generalize(p) for p in paths})


def architecture_blocks(name: str, result: Result) -> list[tuple[str, list[str]]]:
    """``(comment, entry lines)`` per site of one architecture's result (empty: nothing found).

    A census site is the class that holds the tensor and its attribute (memory torch does not
    own included, named by its kind); its globs cover every path where the architecture keeps
    one. Capture owners no census glob covers follow, then the owners a later epoch judged
    (``[verdict=...]`` entries). An op label (``aten:...``) names no site: it is written as a
    comment, never an entry.
    """
    if result.get("status") != "built":
        return []
    capture = result.get("capture") or {}
    owners = [*(capture.get("unregistered") or []), *(capture.get("foreign") or [])]
    by_site: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for f in (*(result.get("findings") or []), *(result.get("foreign") or [])):
        site = f.get("site", {})
        owner = str(site.get("owner") or f.get("kind") or "?")
        attribute = str(site.get("attribute") or f["path"].rsplit(".", 1)[-1])
        by_site.setdefault((owner, attribute), []).append(f)
    blocks: list[tuple[str, list[str]]] = []
    written: list[str] = []
    for (owner, attribute), found in by_site.items():
        file = found[0].get("site", {}).get("file")
        phases = sorted({str(f.get("phase", "static")) for f in found})
        kind = f", {found[0]['kind']}" if found[0].get("kind") else ""
        globs = site_globs(f["path"] for f in found)
        written += globs
        # A kind-only finding (an emptied parameter) has no holder class or file to cite.
        site = f"{owner}.{attribute} ({file})" if file else f"{owner} {attribute}"
        comment = f"{site}: {len(found)} storage(s), {', '.join(phases)}"
        blocks.append((comment + kind, [f"{name}:{g}" for g in globs]))
    blocks += _capture_blocks(name, owners, written)
    for (epoch, verdict), paths in sorted(_later(result).items()):
        entries = [f"[verdict={verdict}] {name}:{g}" for g in site_globs(paths)]
        blocks.append((f"{verdict} after {epoch}: {len(paths)} owner(s)", entries))
    return blocks


def allowlist_text(
    results: Mapping[str, Result],
    version: str,
    header: Iterable[str] = (),
    *,
    engine: str = "transformers",
) -> str:
    """The baseline text: every finding of every built architecture, one glob per site."""
    lines = [
        f"# graphcheck.zoo baseline allowlist for {engine} {version}",
        "# Format: [conditions] Arch:census-path-glob, one glob per site (see docs/zoo.md).",
        "# Written by python -m graphcheck.zoo --write-allowlist FILE",
        *(f"# {h}" for h in header),
    ]
    for name, result in results.items():
        blocks = architecture_blocks(name, result)
        if blocks:
            lines += ["", f"# === {name} ({result.get('model_type')})"]
            for comment, entries in blocks:
                lines += [f"# {comment}", *entries]
    return "\n".join(lines) + "\n"


def _later(result: Result) -> dict[tuple[str, str], list[str]]:
    """(epoch, verdict) -> the owners judged so after the capture (a reload's steps)."""
    found: dict[tuple[str, str], list[str]] = {}
    for step in (result.get("steps") or [])[1:]:
        for verdict, owners in (step.get("owners") or {}).items():
            if verdict in LATER_VERDICTS and owners:
                found.setdefault((str(step.get("label")), verdict), []).extend(owners)
    return found


def _capture_blocks(
    name: str, owners: list[str], written: list[str]
) -> list[tuple[str, list[str]]]:
    """Blocks for the capture's unregistered owners that no census glob already covers."""
    patterns = [PathGlob(g) for g in written]
    extra = dict(owner_entry(o) for o in owners if not any(p.fullmatch(o) for p in patterns))
    blocks: list[tuple[str, list[str]]] = []
    for glob, kind in sorted(extra.items()):
        if is_op_label(glob):
            blocks.append(
                (
                    f"not allowlisted: {glob} is an op label (the op that first read "
                    "memory nothing names), not a site; find and name its holder",
                    [],
                )
            )
            continue
        blocks.append((f"unregistered owner at capture ({kind}), not reached by the census",
                       [f"{name}:{glob}"]))  # fmt: skip
    return blocks


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
