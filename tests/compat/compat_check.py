"""Static checks of graphcheck.integrations.targets against an engine's sources.

The sources come from a :class:`SourceTree` (compat_index.py, re-exported here with
:class:`WheelTree`, :class:`DictTree` and :class:`Index`): a released wheel opened as a zip
(:class:`WheelTree`) or, in the checker's own tests, a dict of fabricated files
(:class:`DictTree`). Nothing is imported from the engine: modules are read as text and parsed
with :mod:`ast`, only those the targets name (plus what their imports and base classes lead
to). When a target is missing, every source file of the tree is searched for where it went,
so the failure names the new place.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

# DictTree, SourceTree and WheelTree are re-exported: the tier's tests and report.py import them
# from here.
from compat_index import _FUNCTIONS, Found, Index
from compat_index import DictTree as DictTree
from compat_index import SourceTree as SourceTree
from compat_index import WheelTree as WheelTree

REPO = Path(__file__).resolve().parents[2]
TARGETS_DIR = REPO / "python" / "graphcheck" / "integrations" / "targets"
#: The targets subpackage's modules (relative imports among themselves only).
TARGET_MODULES = tuple(
    TARGETS_DIR / name for name in ("__init__.py", "vocabulary.py", "vllm.py", "sglang.py")
)


def load_targets() -> ModuleType:
    """graphcheck.integrations.targets from this working tree, imported by file path.

    The targets folder is loaded as a package of its own (``graphcheck_compat_targets``), so
    its relative imports of its data modules work, and the tier needs neither the installed
    package (nor its compiled modules) nor a sys.path on which the repository's C++ folder
    graphcheck/ could shadow it.
    """
    package = "graphcheck_compat_targets"
    if package in sys.modules:
        return sys.modules[package]
    spec = importlib.util.spec_from_file_location(
        package, TARGETS_DIR / "__init__.py", submodule_search_locations=[str(TARGETS_DIR)]
    )
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {TARGETS_DIR}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[package] = module  # dataclasses look the module up while the class is built
    spec.loader.exec_module(module)
    return module


T = load_targets()


@dataclass
class Result:
    """The outcome of checking one target."""

    target: Any
    label: str
    found: str = ""
    """Where the target was found (``path:line`` and what), empty when it was not."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the target is where targets.py says, as the plugins assume."""
        return bool(self.found) and not self.problems

    def message(self) -> str:
        """One paragraph naming the engine release, the target, what is wrong and where."""
        t = self.target
        head = f"{self.label}: {t.dotted} [{t.key}: {t.need.value}, {t.action.value}]"
        if self.ok:
            return f"{head}: ok at {self.found}"
        where = f" (found at {self.found})" if self.found else ""
        return f"{head}{where}: " + "; ".join(self.problems)


def args_to_params(args: ast.arguments) -> tuple[object, ...]:
    """The parameters of a parsed ``def`` as targets.Param values."""
    kinds = T.ParamKind
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    out = []
    for index, arg in enumerate(positional):
        kind = kinds.POSITIONAL_ONLY if index < len(args.posonlyargs) else kinds.POSITIONAL
        out.append(T.Param(arg.arg, kind, index >= first_default))
    if args.vararg is not None:
        out.append(T.Param(args.vararg.arg, kinds.VAR_POSITIONAL))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append(T.Param(arg.arg, kinds.KEYWORD, default is not None))
    if args.kwarg is not None:
        out.append(T.Param(args.kwarg.arg, kinds.VAR_KEYWORD))
    return tuple(out)


def _describe(found: Found) -> str:
    node = found.node
    owner = f"{found.owner}." if found.owner else ""
    if isinstance(node, _FUNCTIONS):
        params = T.format_params(args_to_params(node.args))
        return f"{found.location} {owner}{node.name}{params}"
    return found.location


def _not_found(index: Index, module: str, qualname: str, why: str) -> list[str]:
    """The problems of a def that ``index.lookup`` did not find (``why``), then where it went:
    its name (and its class's, when that is missing too) searched over the whole tree."""
    return [why, _elsewhere(index, module, qualname, class_missing=" has no " not in why)]


def _elsewhere(index: Index, module: str, qualname: str, *, class_missing: bool) -> str:
    """Where a missing def went: its name (and its class's, when that is missing too) searched
    over the whole tree."""
    class_name, _, member = qualname.rpartition(".")
    parts = []
    near = module.replace(".", "/")
    hits = index.search(member, kind="def", near=near)
    same_class = [h for h in hits if h.endswith(f" {qualname}") or h.endswith(f".{qualname}")]
    hits = same_class or hits
    parts.append(
        f"def {member} is defined at: {', '.join(hits)}"
        if hits
        else f"no def {member} anywhere in {index.tree.label}"
    )
    if class_name and class_missing:
        hits = index.search(class_name.split(".")[-1], kind="class", near=near)
        if hits:
            parts.append(f"class {class_name} is defined at: {', '.join(hits)}")
    return "; ".join(parts)


def check_method(target: Any, index: Index) -> Result:
    """A MethodTarget: the method exists (own or inherited) with the parameters assumed."""
    t = target
    result = Result(t, index.tree.label)
    found, why = index.lookup(t.module, t.qualname)
    if found is None:
        result.problems += _not_found(index, t.module, t.qualname, why)
        return result
    result.found = _describe(found)
    node = found.node
    if not isinstance(node, _FUNCTIONS):
        result.problems.append(
            f"{t.qualname} is not a def here ({ast.unparse(node)[:80]!r}): its parameters "
            "cannot be checked; update targets.py"
        )
        return result
    decorators = {ast.unparse(d).split("(")[0].split(".")[-1] for d in node.decorator_list}
    for bad in ("property", "cached_property", "staticmethod"):
        if bad in decorators and "." in t.qualname:
            result.problems.append(f"is a @{bad}, not a plain method")
    if isinstance(node, ast.AsyncFunctionDef) and t.action.patched:
        result.problems.append("is async: the plugin's wrappers assume a plain call")
    actual = args_to_params(node.args)
    for problem in T.compare_params(
        t.params,
        actual,
        called_by_plugin=t.action is T.Action.READ,
    ):
        result.problems.append(f"{problem}: expected {T.format_params(t.params)}")
    return result


def check_attribute(target: Any, index: Index) -> Result:
    """An AttributeTarget: the class (or a base) defines or assigns the attribute."""
    t = target
    result = Result(t, index.tree.label)
    found, why = index.lookup(t.module, t.qualname)
    if found is None:
        class_name = t.qualname.rsplit(".", 1)[0]
        hits = index.search(class_name, kind="class", near=t.module.replace(".", "/"))
        where = f"class {class_name} is defined at: {', '.join(hits)}" if hits else ""
        result.problems += [p for p in (why, where) if p]
        return result
    result.found = f"{found.location} {found.owner or ''}.{t.qualname.rsplit('.', 1)[1]}"
    return result


def check_constant(target: Any, index: Index) -> Result:
    """A ConstantTarget: the module defines the constant with the expected literal value."""
    t = target
    result = Result(t, index.tree.label)
    found, why = index.lookup(t.module, t.name)
    if found is None:
        hits = index.search(t.name, kind="assign", near=t.module.replace(".", "/"))
        where = (
            f"{t.name} is assigned at: {', '.join(hits)}"
            if hits
            else f"no module-level {t.name} anywhere in {index.tree.label}"
        )
        result.problems += [why, where]
        return result
    result.found = found.location
    node = found.node
    value_node = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if value_node is None:
        result.problems.append(f"{t.name} is not assigned a value here")
        return result
    try:
        value = ast.literal_eval(value_node)
    except ValueError:
        result.problems.append(f"{t.name} = {ast.unparse(value_node)} is not a literal")
        return result
    if value != t.value:
        result.problems.append(f"{t.name} is {value!r}, expected {t.value!r}")
    return result


def _normalize(source: str) -> str:
    """Python source in ast.unparse's spelling (quotes, spaces), ``*``/``**`` kept."""
    stars = len(source) - len(source.lstrip("*"))
    body = source[stars:].strip()
    return "*" * stars + ast.unparse(ast.parse(body, mode="eval").body)


_KEYWORD = re.compile(r"^([A-Za-z_]\w*)\s*=(?!=)(.*)$", re.DOTALL)


def _normalize_keyword(source: str) -> str:
    match = _KEYWORD.match(source.strip())
    if match is None:
        return _normalize(source) if source.startswith("**") else source.strip()
    return f"{match.group(1)}={_normalize(match.group(2))}"


def _call_matches(call: ast.Call, target: Any) -> bool:
    t = target
    callee = ast.unparse(call.func)
    if callee != t.callee and not callee.endswith("." + t.callee):
        return False
    positional = [ast.unparse(a) for a in call.args]
    want_positional = [_normalize(p) for p in t.positional]
    if positional[: len(want_positional)] != want_positional:
        return False
    keywords: set[str] = set()
    for kw in call.keywords:
        value = ast.unparse(kw.value)
        if kw.arg is None:
            keywords.add(f"**{value}")
        else:
            keywords |= {kw.arg, f"{kw.arg}={value}"}
    return all(_normalize_keyword(k) in keywords for k in t.keywords)


def _calls_reached(index: Index, found: Found, depth: int) -> list[tuple[Found, ast.Call]]:
    """Every call in a function, and in the same-class methods it calls on ``self``."""
    seen: set[int] = set()
    out: list[tuple[Found, ast.Call]] = []
    todo = [(found, depth)]
    cls = index.resolve(found.module.name, found.owner) if found.owner else None
    while todo:
        current, level = todo.pop(0)
        if id(current.node) in seen:
            continue
        seen.add(id(current.node))
        for node in ast.walk(current.node):
            if not isinstance(node, ast.Call):
                continue
            out.append((current, node))
            func = node.func
            if (
                level > 0
                and cls is not None
                and isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
            ):
                callee = index.member(cls, func.attr)
                if callee is not None and isinstance(callee.node, _FUNCTIONS):
                    todo.append((callee, level - 1))
    return out


def check_call(target: Any, index: Index) -> Result:
    """A CallTarget: the function (or what it calls on self, to ``depth``) makes the call."""
    t = target
    result = Result(t, index.tree.label)
    found, why = index.lookup(t.module, t.function)
    if found is None:
        result.problems += _not_found(index, t.module, t.function, why)
        return result
    if not isinstance(found.node, _FUNCTIONS):
        result.problems.append(f"{t.function} is not a function here ({found.location})")
        return result
    calls = _calls_reached(index, found, t.depth)
    for where, call in calls:
        if _call_matches(call, t):
            result.found = f"{where.module.path}:{call.lineno} {ast.unparse(call)[:100]}"
            return result
    want = f"{t.callee}({', '.join([*t.positional, *t.keywords])})"
    scope = f"{t.function}" + (" or the methods it calls on self" if t.depth else "")
    same = [
        f"{w.module.path}:{c.lineno} {ast.unparse(c)[:100]}"
        for w, c in calls
        if ast.unparse(c.func).split(".")[-1] == t.callee.split(".")[-1]
    ]
    text = f"no call {want} in {scope} ({found.location})"
    if same:
        text += f"; calls to {t.callee.split('.')[-1]} there: {'; '.join(same[:4])}"
    result.problems.append(text)
    return result


def check(target: Any, index: Index) -> Result:
    """Checks any target against an indexed tree."""
    if isinstance(target, T.MethodTarget):
        return check_method(target, index)
    if isinstance(target, T.AttributeTarget):
        return check_attribute(target, index)
    if isinstance(target, T.ConstantTarget):
        return check_constant(target, index)
    if isinstance(target, T.CallTarget):
        return check_call(target, index)
    raise TypeError(f"unknown target kind: {type(target).__name__}")
