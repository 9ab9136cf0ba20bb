"""Static checks of graphcheck.integrations.targets against an engine's sources.

The sources come from a :class:`SourceTree`: a released wheel opened as a zip
(:class:`WheelTree`) or, in the checker's own tests, a dict of fabricated files
(:class:`DictTree`). Nothing is imported from the engine: modules are read as text and parsed
with :mod:`ast`, only those the targets name (plus what their imports and base classes lead
to). When a target is missing, every source file of the tree is searched for where it went,
so the failure names the new place.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import os
import re
import sys
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

REPO = Path(__file__).resolve().parents[2]
INTEGRATIONS = REPO / "python" / "graphcheck" / "integrations"
TARGETS_PY = INTEGRATIONS / "targets.py"
#: targets.py and the modules it imports (relative imports inside the integrations folder).
TARGET_MODULES = tuple(
    INTEGRATIONS / name
    for name in ("targets.py", "_target_types.py", "_vllm_targets.py", "_sglang_targets.py")
)


def load_targets() -> ModuleType:
    """graphcheck.integrations.targets from this working tree, imported by file path.

    The integrations folder is loaded as a package of its own (``graphcheck_compat_integrations``,
    its ``__init__`` imports nothing), so targets.py's relative imports of its data modules
    work, and the tier needs neither the installed package (nor its compiled modules) nor a
    sys.path on which the repository's C++ folder graphcheck/ could shadow it.
    """
    package = "graphcheck_compat_integrations"
    name = f"{package}.targets"
    if name in sys.modules:
        return sys.modules[name]
    if package not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            package, INTEGRATIONS / "__init__.py", submodule_search_locations=[str(INTEGRATIONS)]
        )
        if spec is None or spec.loader is None:
            raise RuntimeError(f"cannot load {INTEGRATIONS}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[package] = module  # dataclasses look the module up while the class is built
        spec.loader.exec_module(module)
    return importlib.import_module(name)


T = load_targets()


class SourceTree(Protocol):
    """Read-only access to an engine's Python sources by path (``vllm/plugins/__init__.py``)."""

    label: str
    """How messages name the tree: ``vllm 0.33.0``."""

    def read(self, path: str) -> str | None:
        """The file's text, or None when the tree has no such file."""

    def paths(self) -> Iterable[str]:
        """Every ``.py`` path of the tree."""


class WheelTree:
    """The ``.py`` files of a wheel, read from the zip on demand (each at most once)."""

    def __init__(self, wheel: Path, label: str) -> None:
        self.label = label
        self.wheel = wheel
        self._zip = zipfile.ZipFile(wheel)
        self._names = {n for n in self._zip.namelist() if n.endswith(".py")}
        self._cache: dict[str, str] = {}

    def read(self, path: str) -> str | None:
        """The file's text, or None."""
        if path not in self._names:
            return None
        if path not in self._cache:
            self._cache[path] = self._zip.read(path).decode("utf-8", errors="replace")
        return self._cache[path]

    def paths(self) -> Iterable[str]:
        """Every ``.py`` path, sorted."""
        return sorted(self._names)

    def metadata_version(self) -> str:
        """``Version:`` of the wheel's METADATA."""
        for name in self._zip.namelist():
            if name.endswith(".dist-info/METADATA"):
                text = self._zip.read(name).decode("utf-8", errors="replace")
                match = re.search(r"^Version:\s*(\S+)", text, re.MULTILINE)
                if match:
                    return match.group(1)
        raise RuntimeError(f"{self.wheel}: no .dist-info/METADATA with a Version")


class DictTree:
    """Sources given as ``{path: text}`` (the checker's own tests)."""

    def __init__(self, files: dict[str, str], label: str = "fake 1.0") -> None:
        self.label = label
        self._files = files

    def read(self, path: str) -> str | None:
        """The file's text, or None."""
        return self._files.get(path)

    def paths(self) -> Iterable[str]:
        """Every path given, sorted."""
        return sorted(self._files)


@dataclass
class Module:
    """A parsed module of the tree."""

    name: str
    path: str
    tree: ast.Module

    @property
    def is_package(self) -> bool:
        """Whether it is a package's ``__init__.py``."""
        return self.path.endswith("/__init__.py")


@dataclass
class Found:
    """A definition found: where and what."""

    module: Module
    node: ast.AST
    owner: str | None = None
    """The class that holds it, for members."""

    @property
    def location(self) -> str:
        """``path:line``."""
        return f"{self.module.path}:{getattr(self.node, 'lineno', 0)}"


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


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SKIP_BASES = {"object", "Protocol", "Generic", "ABC", "Enum", "NamedTuple", "TypedDict"}


class Index:
    """Parsed modules of one tree, with name resolution across imports and base classes."""

    def __init__(self, tree: SourceTree) -> None:
        self.tree = tree
        self._modules: dict[str, Module | None] = {}

    def module(self, name: str) -> Module | None:
        """The module ``a.b.c`` (``a/b/c.py`` or ``a/b/c/__init__.py``), parsed once."""
        if name not in self._modules:
            found = None
            base = name.replace(".", "/")
            for path in (f"{base}.py", f"{base}/__init__.py"):
                text = self.tree.read(path)
                if text is not None:
                    found = Module(name, path, ast.parse(text, filename=path))
                    break
            self._modules[name] = found
        return self._modules[name]

    def _import_source(self, module: Module, node: ast.ImportFrom) -> str:
        if node.level == 0:
            return node.module or ""
        package = module.name.split(".")
        if not module.is_package:
            package = package[:-1]
        package = package[: len(package) - (node.level - 1)]
        return ".".join([*package, node.module] if node.module else package)

    def resolve(self, module_name: str, name: str, hops: int = 4) -> Found | None:
        """The module-level definition ``name`` in a module, following imports and aliases.

        Finds classes, functions and assignments; follows ``from x import name [as alias]``,
        ``Alias = Name`` and ``import x`` for dotted names (``x.Name``).
        """
        module = self.module(module_name)
        if module is None or hops < 0:
            return None
        head, _, rest = name.partition(".")
        for node in module.tree.body:
            if isinstance(node, (ast.ClassDef, *_FUNCTIONS)) and node.name == head:
                return Found(module, node) if not rest else self._member_path(module, node, rest)
        for node in module.tree.body:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == head:
                        source = self._import_source(module, node)
                        target = f"{alias.name}.{rest}" if rest else alias.name
                        found = self.resolve(source, target, hops - 1)
                        if found is None:  # ``from package import submodule``
                            submodule = f"{source}.{alias.name}"
                            if rest:
                                found = self.resolve(submodule, rest, hops - 1)
                            else:
                                found = self._as_module(submodule)
                        return found
            elif isinstance(node, ast.Import) and rest:
                for alias in node.names:
                    bound = alias.asname or alias.name.split(".")[0]
                    if bound == head:
                        full = alias.name if alias.asname else head
                        return self._resolve_dotted(f"{full}.{rest}", hops - 1)
        for node in module.tree.body:
            if not _assigns(node, head):
                continue
            value = node.value  # type: ignore[attr-defined]
            if isinstance(value, ast.Name) and value.id != head and not rest:
                return self.resolve(module_name, value.id, hops - 1) or Found(module, node)
            return Found(module, node)
        return None

    def _as_module(self, dotted: str) -> Found | None:
        module = self.module(dotted)
        return Found(module, module.tree) if module is not None else None

    def _resolve_dotted(self, dotted: str, hops: int) -> Found | None:
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            if self.module(".".join(parts[:cut])) is not None:
                return self.resolve(".".join(parts[:cut]), ".".join(parts[cut:]), hops)
        return None

    def _member_path(self, module: Module, node: ast.AST, rest: str) -> Found | None:
        found: Found | None = Found(module, node)
        for part in rest.split("."):
            if found is None or not isinstance(found.node, ast.ClassDef):
                return None
            found = self.member(found, part)
        return found

    def bases(self, cls: Found) -> tuple[list[Found], list[str]]:
        """The resolved base classes of a class, and the names of those not resolved."""
        assert isinstance(cls.node, ast.ClassDef)
        resolved, unresolved = [], []
        for base in cls.node.bases:
            if isinstance(base, ast.Subscript):
                base = base.value
            text = ast.unparse(base)
            if text.split(".")[-1] in _SKIP_BASES:
                continue
            found = self.resolve(cls.module.name, text)
            if found is not None and isinstance(found.node, ast.ClassDef):
                resolved.append(found)
            else:
                unresolved.append(text)
        return resolved, unresolved

    def member(self, cls: Found, name: str, depth: int = 6) -> Found | None:
        """A class's member ``name`` (method, class attribute, field, enum member or
        ``self.name`` assignment), from the class itself, then its bases in order."""
        assert isinstance(cls.node, ast.ClassDef)
        own = _own_member(cls.node, name)
        if own is not None:
            return Found(cls.module, own, cls.node.name)
        if depth == 0:
            return None
        for base in self.bases(cls)[0]:
            found = self.member(base, name, depth - 1)
            if found is not None:
                return found
        return None

    def lookup(self, module_name: str, qualname: str) -> tuple[Found | None, str]:
        """``Class.member`` or ``function`` in a module; on failure, the reason."""
        module = self.module(module_name)
        if module is None:
            base = module_name.replace(".", "/")
            return (
                None,
                f"module {module_name} is not in the wheel (no {base}.py or {base}/__init__.py)",
            )
        if "." not in qualname:
            found = self.resolve(module_name, qualname)
            if found is None:
                return None, f"{module.path} defines no {qualname}"
            return found, ""
        class_name, member = qualname.rsplit(".", 1)
        cls = self.resolve(module_name, class_name)
        if cls is None or not isinstance(cls.node, ast.ClassDef):
            return None, f"{module.path} defines no class {class_name}"
        found = self.member(cls, member)
        if found is None:
            resolved, unresolved = self.bases(cls)
            chain = ", ".join(b.node.name for b in resolved)
            text = f"class {class_name} ({cls.location}) has no {member}"
            if chain:
                text += f", nor have its bases {chain}"
            if unresolved:
                text += f" (bases not followed: {', '.join(unresolved)})"
            close = difflib.get_close_matches(member, _member_names(cls.node), n=3, cutoff=0.6)
            if close:
                text += f"; similar in {class_name}: {', '.join(close)}"
            return None, text
        return found, ""

    def search(self, name: str, *, kind: str, near: str = "") -> list[str]:
        """Where ``def name`` (kind ``def``), ``class name`` (``class``) or a module-level
        ``name = ...`` (``assign``) is anywhere in the tree: ``path:line Qual.name``, at most
        eight, those in folders nearest the module ``near`` first, tests last."""
        if kind == "assign":
            pattern = re.compile(rf"^{re.escape(name)}\s*(?::[^=\n]*)?=(?!=)", re.MULTILINE)
        else:
            keyword = r"(?:async[ \t]+)?def" if kind == "def" else "class"
            pattern = re.compile(rf"^[ \t]*{keyword}[ \t]+{re.escape(name)}\b", re.MULTILINE)
        hits: list[str] = []
        for path in self.tree.paths():
            text = self.tree.read(path) or ""
            if name not in text:
                continue
            match = pattern.search(text)
            if match is None:
                continue
            if kind == "assign":
                hits.append(f"{path}:{text.count(chr(10), 0, match.start()) + 1} {name}")
                continue
            try:
                parsed = ast.parse(text)
            except SyntaxError:
                continue
            for qual, node in _walk_qualnames(parsed):
                if getattr(node, "name", None) == name and (
                    isinstance(node, _FUNCTIONS)
                    if kind == "def"
                    else isinstance(node, ast.ClassDef)
                ):
                    hits.append(f"{path}:{node.lineno} {qual}")

        def closeness(hit: str) -> tuple[bool, int, str]:
            shared = os.path.commonprefix([hit.split("/"), near.split("/")])
            return ("/test" in hit, -len(shared), hit)

        hits.sort(key=closeness)
        return hits[:8]


def _assigns(node: ast.AST, name: str) -> bool:
    """Whether a statement assigns the plain name (``name = ...`` or ``name: T [= ...]``)."""
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    return (
        isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and node.target.id == name
    )


def _own_member(cls: ast.ClassDef, name: str) -> ast.AST | None:
    for node in cls.body:
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)) and node.name == name:
            return node
        if _assigns(node, name):
            return node
    for node in cls.body:
        if isinstance(node, _FUNCTIONS):
            for sub in ast.walk(node):
                targets: list[ast.expr] = []
                if isinstance(sub, ast.Assign):
                    targets = sub.targets
                elif isinstance(sub, (ast.AnnAssign, ast.AugAssign)):
                    targets = [sub.target]
                for target in targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and target.attr == name
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        return sub
    return None


def _member_names(cls: ast.ClassDef) -> list[str]:
    names = []
    for node in cls.body:
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def _walk_qualnames(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.ClassDef, *_FUNCTIONS)):
            qual = f"{prefix}{node.name}"
            yield qual, node
            yield from _walk_qualnames(node, f"{qual}.")
        else:
            yield from _walk_qualnames(node, prefix)


def _describe(found: Found) -> str:
    node = found.node
    owner = f"{found.owner}." if found.owner else ""
    if isinstance(node, _FUNCTIONS):
        params = T.format_params(args_to_params(node.args))
        return f"{found.location} {owner}{node.name}{params}"
    return found.location


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
        class_missing = " has no " not in why
        result.problems += [
            why,
            _elsewhere(index, t.module, t.qualname, class_missing=class_missing),
        ]
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
        class_missing = " has no " not in why
        result.problems += [
            why,
            _elsewhere(index, t.module, t.function, class_missing=class_missing),
        ]
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
