"""The source side of the compat tier's checks: engine sources by path and name resolution.

A :class:`SourceTree` gives an engine's Python sources by path: a released wheel opened as a
zip (:class:`WheelTree`) or, in the checker's own tests, a dict of fabricated files
(:class:`DictTree`). :class:`Index` parses the modules it is asked for (only those, once each)
and resolves names across imports and base classes; compat_check.py checks the targets with it.
"""

from __future__ import annotations

import ast
import difflib
import os
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


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
