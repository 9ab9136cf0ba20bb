"""The allowlist evaluation: a run's findings split into allowed and new, and the entries' state.

What a run is judged on, per built architecture:

- the census findings, memory torch does not own among them (a native handle, the emptied
  parameter it replaced: ``result["foreign"]``), by path and alias;
- the capture's unregistered owners, handles among them (``capture.unregistered``,
  ``capture.foreign``);
- after the capture, every owner a later epoch judges ``dangling``, ``stale`` or ``lost``
  (``steps[1:]``, a reload's): an entry allows one only when it names that verdict
  (``[verdict=dangling]``); ``lost`` is also allowed by a plain entry (an allowlisted owner
  whose bytes a sleep discarded is the known site itself, as the checker rules).

An entry applies to the architectures its ``Arch`` glob matches among those that ran, and to
their variants, on the CPUs its condition names. It is *stale* when one of them built,
nothing matched it, and it could have matched (a fixed site must leave the baseline);
otherwise an unmatched entry is *unverified* (nothing to compare with). A row in another
dtype (``Arch@bf16``, and vLLM's quantized variants, whose rows say ``"dtype": "bfloat16"``:
other kernels) requires only the entries that name it: a bfloat16 pass verifies the sites its
class entries share with float32 and leaves the float32-only ones unverified.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from graphcheck._utils import PathGlob
from graphcheck.zoo.allowlist import LATER_VERDICTS, AllowEntry, is_allocation_label

__all__ = ["Evaluation", "evaluate", "later_owners"]

Result = dict[str, Any]


@dataclasses.dataclass
class Evaluation:
    """Findings split by the allowlist, per architecture, and the entries' state.

    ``allowed``/``new`` hold census finding paths (memory torch does not own included),
    ``capture_allowed``/``capture_new`` the unregistered owners of the capture (where it
    ran), ``later_allowed``/``later_new`` the owners judged after it, each written
    ``"<epoch> <verdict> <owner>"``.
    """

    allowed: dict[str, list[str]]
    new: dict[str, list[str]]
    stale: list[AllowEntry]
    unverified: list[AllowEntry]
    capture_allowed: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    capture_new: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    later_allowed: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    later_new: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    #: Entries whose CPU condition excludes the run's CPU: neither required nor stale.
    other_cpu: list[AllowEntry] = dataclasses.field(default_factory=list)

    def failed(self) -> bool:
        """Whether the run fails: a finding outside the allowlist, or a stale entry."""
        return bool(
            any(self.new.values())
            or any(self.capture_new.values())
            or any(self.later_new.values())
            or self.stale
        )


def _capture_ran(result: Result) -> bool:
    return isinstance(result.get("capture"), dict)


def later_owners(result: Result) -> Iterator[tuple[str, str, str]]:
    """``(epoch, verdict, owner)`` of every owner judged after the capture (a reload's)."""
    for step in (result.get("steps") or [])[1:]:
        for verdict, owners in sorted((step.get("owners") or {}).items()):
            if verdict in LATER_VERDICTS:
                for owner in owners:
                    yield str(step.get("label", "")), verdict, str(owner)


_Compiled = tuple[int, AllowEntry, PathGlob]

#: Variants that run a class in another dtype (graphcheck.zoo.vllm_engine.catalog's VARIANTS
#: whose dtype is not float32), for a row that does not say its dtype (a report written before
#: rows did, which ``python -m graphcheck.zoo.baseline --update`` may still read).
_OTHER_DTYPES = frozenset({"bf16", "w8a8", "awq", "gptq"})


def _other_dtype(name: str, result: Result) -> bool:
    """Whether row ``name`` runs its weights in another dtype than its class's float32 row.

    A row says its dtype where the engine records one (vLLM: the W8A8, AWQ and GPTQ variants
    run in bfloat16, not only ``@bf16``), else its variant's name tells.
    """
    dtype = result.get("dtype")
    if isinstance(dtype, str) and dtype:
        return dtype != "float32"
    return name.partition("@")[2] in _OTHER_DTYPES


def _judge(mine: list[_Compiled], names: Sequence[str], verdict: str, used: set[int]) -> bool:
    """Whether an entry of ``mine`` allows one of ``names`` judged ``verdict`` ("" at capture)."""
    hits = [
        i
        for i, e, rx in mine
        if (e.verdict == verdict or (verdict == "lost" and not e.verdict))
        and any(rx.fullmatch(n) for n in names)
    ]
    used.update(hits)
    return bool(hits)


def evaluate(
    results: Mapping[str, Result], entries: Sequence[AllowEntry], cpu: str | None = None
) -> Evaluation:
    """Matches every built architecture's findings and owners against ``entries``.

    ``cpu`` is the run's CPU capability (:mod:`graphcheck.zoo.cpu`): an entry whose CPU
    condition excludes it takes no part (:attr:`Evaluation.other_cpu`); None: every entry does.
    A census path entry could always have matched a built architecture; an allocation label
    (:func:`is_allocation_label`) only where the capture ran; a verdict entry only where an
    epoch after the capture was judged.
    """
    ev = Evaluation({}, {}, [], [])
    ev.other_cpu = [e for e in entries if cpu is not None and not e.holds_on(cpu)]
    entries = [e for e in entries if cpu is None or e.holds_on(cpu)]
    used: set[int] = set()
    could_match: set[int] = set()
    applies: dict[int, list[str]] = defaultdict(list)
    compiled = [(i, e, PathGlob(e.path)) for i, e in enumerate(entries)]
    for name, result in results.items():
        # An entry naming a class covers its variants too: the same class code, other options.
        own = (name, name.partition("@")[0])
        mine = [c for c in compiled if any(fnmatch.fnmatchcase(n, c[1].arch) for n in own)]
        for i, _, _ in mine:
            applies[i].append(name)
        if result.get("status") != "built":
            continue
        ran = _capture_ran(result)
        later = list(later_owners(result))
        judged_later = any("owners" in s for s in (result.get("steps") or [])[1:])
        # A row in another dtype (the bfloat16 pass's Arch@bf16) runs other kernels: it
        # verifies the class's entries it matches, and requires only its own.
        other_dtype = _other_dtype(name, result)
        could_match.update(
            i
            for i, e, _ in mine
            if (fnmatch.fnmatchcase(name, e.arch) or not other_dtype)
            and (judged_later if e.verdict else ran or not is_allocation_label(e.path))
        )
        ev.allowed[name], ev.new[name] = [], []
        for finding in (*result.get("findings", []), *(result.get("foreign") or [])):
            paths = [finding["path"], *finding.get("aliases", [])]
            allowed = _judge(mine, paths, "", used)
            (ev.allowed if allowed else ev.new)[name].append(finding["path"])
        if ran:
            ev.capture_allowed[name], ev.capture_new[name] = [], []
            capture = result["capture"]
            for owner in (*capture.get("unregistered", []), *(capture.get("foreign") or [])):
                allowed = _judge(mine, [owner], "", used)
                (ev.capture_allowed if allowed else ev.capture_new)[name].append(owner)
        if judged_later:
            ev.later_allowed[name], ev.later_new[name] = [], []
            for epoch, verdict, owner in later:
                allowed = _judge(mine, [owner], verdict, used)
                (ev.later_allowed if allowed else ev.later_new)[name].append(
                    f"{epoch} {verdict} {owner}"
                )
    for i, entry in enumerate(entries):
        if not applies.get(i) or i in used:
            continue
        (ev.stale if i in could_match else ev.unverified).append(entry)
    return ev
