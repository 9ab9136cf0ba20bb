"""graphcheck's side of the plugin contract: pyproject.toml declares each entry point of
targets.ENTRY_POINTS, and its target is a module function the engine can call with no
argument. Skipped for an engine until its plugin module exists."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from compat_check import REPO, T

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the bootstrap's interpreter is 3.11
    tomllib = None


def plugin_file(point: object) -> Path:
    module = point.value.split(":")[0]  # type: ignore[attr-defined]
    return REPO / "python" / (module.replace(".", "/") + ".py")


@pytest.mark.parametrize("point", T.ENTRY_POINTS, ids=lambda p: p.framework.value)
def test_entry_point_is_declared_and_callable(point: object) -> None:
    path = plugin_file(point)
    if not path.is_file():
        pytest.skip(f"{path.relative_to(REPO)} is not written yet (issue 11)")
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = project.get("entry-points", {}).get(point.group, {})  # type: ignore[attr-defined]
    assert declared.get(point.name) == point.value, (  # type: ignore[attr-defined]
        f'pyproject.toml must declare [project.entry-points."{point.group}"] '  # type: ignore[attr-defined]
        f'{point.name} = "{point.value}"; it declares {declared or "nothing there"}'  # type: ignore[attr-defined]
    )
    function = point.value.split(":")[1]  # type: ignore[attr-defined]
    tree = ast.parse(path.read_text())
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    assert defs, f"{path.relative_to(REPO)} defines no module-level {function}()"
    args = defs[0].args
    required = len(args.posonlyargs) + len(args.args) - len(args.defaults)
    required += sum(d is None for d in args.kw_defaults)
    assert required == 0, f"{function}() must take no required argument: the engine calls it bare"
