"""Prints every target's result against engine releases: the tool for bumping the pins.

    <venv>/bin/python tests/compat/report.py                 # the pinned releases
    <venv>/bin/python tests/compat/report.py vllm==0.34.0 sglang==0.5.24

One line per target: ``ok``/``FAIL``, the key, where it was found (the ``seen`` to write in
targets.py when the release becomes NEWEST_CHECKED), then the reasons of a failure. Exit
status 1 when any target fails. Fetches the wheels as the tier does (cache, else PyPI).
"""

from __future__ import annotations

import sys

import compat_wheels
from compat_check import Index, T, WheelTree, check


def main(argv: list[str]) -> int:
    """Checks the releases named (``dist==version``), or the pins; returns the exit status."""
    releases = [tuple(a.split("==", 1)) for a in argv] or compat_wheels.releases()
    failed = 0
    for dist, version in releases:
        index = Index(WheelTree(compat_wheels.fetch(dist, version), f"{dist} {version}"))
        print(f"== {dist} {version}")
        for target in T.targets_for(T.Framework(dist), version):
            result = check(target, index)
            where = result.found.split(" ")[0] if result.found else "-"
            moved = "" if not target.seen or where == target.seen else f"  (seen={target.seen})"
            print(f"{'ok  ' if result.ok else 'FAIL'} {target.key}  {where}{moved}")
            if not result.ok:
                failed += 1
                print(f"     {'; '.join(result.problems)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
