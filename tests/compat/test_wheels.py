"""Every target of graphcheck.integrations.targets against the pinned released wheels.

One test per (release, target) that holds for the release. The wheels come from the cache or
PyPI (compat_wheels.fetch); when they cannot be had, the tests fail, unless
GRAPHCHECK_COMPAT_ALLOW_OFFLINE=1 lets them skip.
"""

from __future__ import annotations

import os

import pytest

import compat_wheels
from compat_check import Index, T, WheelTree, check

RELEASES = compat_wheels.releases()


def _cases() -> list[object]:
    cases = []
    for dist, version in RELEASES:
        framework = T.Framework(dist)
        for target in T.targets_for(framework, version):
            cases.append(pytest.param(dist, version, target, id=f"{dist}-{version}-{target.key}"))
    return cases


_indexes: dict[tuple[str, str], Index | str] = {}


def index_of(dist: str, version: str) -> Index:
    """The parsed wheel of a release, fetched (or found unavailable) once per session."""
    key = (dist, version)
    if key not in _indexes:
        try:
            wheel = compat_wheels.fetch(dist, version)
            _indexes[key] = Index(WheelTree(wheel, f"{dist} {version}"))
        except compat_wheels.WheelUnavailable as error:
            _indexes[key] = str(error)
    found = _indexes[key]
    if isinstance(found, str):
        if os.environ.get(compat_wheels.ALLOW_OFFLINE) == "1":
            pytest.skip(f"{compat_wheels.ALLOW_OFFLINE}=1: {found}")
        pytest.fail(found, pytrace=False)
    return found


@pytest.mark.parametrize(("dist", "version"), RELEASES)
def test_wheel_is_the_pinned_release(dist: str, version: str) -> None:
    tree = index_of(dist, version).tree
    assert isinstance(tree, WheelTree)
    assert tree.wheel.name.startswith(f"{dist}-{version}-")
    assert T.parse_version(tree.metadata_version()) == T.parse_version(version)


@pytest.mark.parametrize(("dist", "version"), RELEASES)
def test_release_is_not_older_than_the_oldest_checked(dist: str, version: str) -> None:
    oldest = T.OLDEST_CHECKED[T.Framework(dist)]
    assert T.parse_version(version) >= T.parse_version(oldest), (
        f"{dist} {version} is older than {oldest}, the oldest release targets.py was checked "
        "against: lower OLDEST_CHECKED only after checking that release"
    )


@pytest.mark.parametrize(("dist", "version", "target"), _cases())
def test_target(dist: str, version: str, target: object) -> None:
    result = check(target, index_of(dist, version))
    assert result.ok, result.message()
    if version == T.NEWEST_CHECKED[T.Framework(dist)]:
        # targets.py's `seen` is where the entry was read; keep it true for that release.
        location = result.found.split()[0]
        assert location == target.seen, (  # type: ignore[attr-defined]
            f"{result.message()}; targets.py says seen={target.seen!r}: update it"  # type: ignore[attr-defined]
        )
