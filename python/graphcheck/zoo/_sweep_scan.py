"""The code-path switches of a modeling source: which config options it compares, with which values.

:func:`scan_switches` reads Python source with :mod:`ast` (nothing is imported
or run) and returns, per config option, the literals the code switches on:

- ``config.X == "lit"``, ``!=``, ``in ("a", "b")``, ``not in`` (either side);
- ``match config.X: case "lit" | "other":``;
- ``TABLE[config.X]`` where ``TABLE`` is a module-level dict literal with string
  keys (dispatch tables): every key;
- ``if config.X:``, ``if not config.X:``, ``x if config.X else y``, ``while``,
  and ``and``/``or`` inside such tests, and ``config.X is True``: the option
  is a boolean switch (:data:`BOOL`).

``config.X`` stands for every way the modeling code reads an option:
``config.X``, ``self.config.X``, ``text_config.X`` (any name ending in
``config``), ``getattr(config, "X", default)``, ``config.sub_config.X``
(reported as ``sub_config.X``), and aliases: a name or ``self.attr`` assigned
from one of those (``self.position_embedding_type = getattr(config,
"position_embedding_type", "absolute")``, also through ``a or config.X``), so
that a later ``if self.position_embedding_type == "rotary"`` counts.

Which options matter (config keys, the denylist) is decided by the caller
(:mod:`graphcheck.zoo.sweep`); this module only reads the code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

__all__ = ["BOOL", "scan_switches"]

#: The value recorded for an option tested for truth (``if config.X:``): a boolean switch.
BOOL = "<bool>"

Switches = dict[str, set[str]]


def _is_config_name(node: ast.expr) -> bool:
    """``config``, ``text_config``, ``self.config``, ``self.text_config``."""
    if isinstance(node, ast.Name):
        return node.id.endswith("config")
    return (
        isinstance(node, ast.Attribute)
        and node.attr.endswith("config")
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def _alias_key(node: ast.expr) -> str | None:
    """The alias slot a name or ``self.attr`` occupies (``"n:x"``, ``"s:x"``)."""
    if isinstance(node, ast.Name):
        return f"n:{node.id}"
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"s:{node.attr}" if node.value.id == "self" else None
    return None


class _Reader:
    """Resolves an expression to the config option it reads, through the aliases found so far."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def option(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Attribute):
            if _is_config_name(node.value):
                return node.attr
            # config.sub_config.X: an option of a sub-config
            inner = node.value
            if (
                isinstance(inner, ast.Attribute)
                and inner.attr.endswith("config")
                and _is_config_name(inner.value)
            ):
                return f"{inner.attr}.{node.attr}"
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and _is_config_name(node.args[0])
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            return node.args[1].value
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            # `position_embedding_type or config.position_embedding_type`
            found = [o for o in (self.option(v) for v in node.values) if o]
            return found[0] if len(found) == 1 else None
        key = _alias_key(node)
        if key is not None and not (isinstance(node, ast.Attribute) and _is_config_name(node)):
            return self.aliases.get(key)
        return None

    def learn_aliases(self, nodes: list[ast.AST]) -> None:
        """Aliases from every assignment of a config read (to a fixpoint: aliases of aliases)."""
        assigns = [n for n in nodes if isinstance(n, (ast.Assign, ast.AnnAssign))]
        for _ in range(3):
            before = len(self.aliases)
            for node in assigns:
                if node.value is None:
                    continue
                option = self.option(node.value)
                if option is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    key = _alias_key(target)
                    if key is not None and not _is_config_name(target):
                        self.aliases.setdefault(key, option)
            if len(self.aliases) == before:
                break


def _strings(node: ast.expr) -> list[str] | None:
    """The string literal(s) of ``"a"`` or ``("a", "b")`` / ``["a"]`` / ``{"a"}``; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        if values and len(values) == len(node.elts) and all(isinstance(v, str) for v in values):
            return [str(v) for v in values]
    return None


def _dispatch_tables(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level ``NAME = {"key": ...}`` dict literals with string keys."""
    tables: dict[str, list[str]] = {}
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        value = node.value
        if not isinstance(value, ast.Dict) or not value.keys:
            continue
        keys = [k.value for k in value.keys if isinstance(k, ast.Constant)]
        if len(keys) != len(value.keys) or not all(isinstance(k, str) for k in keys):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name):
                tables[target.id] = [str(k) for k in keys]
    return tables


def _truth_tests(node: ast.expr) -> Iterable[ast.expr]:
    """The operands a truth test reads: through ``not``, ``and``, ``or``."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield from _truth_tests(node.operand)
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _truth_tests(value)
    else:
        yield node


def _match_strings(pattern: ast.pattern) -> list[str]:
    if isinstance(pattern, ast.MatchValue):
        return _strings(pattern.value) or []
    if isinstance(pattern, ast.MatchOr):
        return [s for p in pattern.patterns for s in _match_strings(p)]
    return []


def _compare(reader: _Reader, node: ast.Compare, out: Switches) -> None:
    operands = [node.left, *node.comparators]
    for op, left, right in zip(node.ops, operands, operands[1:], strict=False):
        for ref, lit in ((left, right), (right, left)):
            option = reader.option(ref)
            if option is None:
                continue
            if isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) and (
                isinstance(lit, ast.Constant) and isinstance(lit.value, bool)
            ):
                out.setdefault(option, set()).add(BOOL)
            elif isinstance(op, (ast.Eq, ast.NotEq)) or (
                isinstance(op, (ast.In, ast.NotIn)) and ref is left
            ):
                # `"lit" in config.X` tests membership in a list option: not a value of X.
                values = _strings(lit)
                if values is not None:
                    out.setdefault(option, set()).update(values)


def scan_tree(tree: ast.Module, nodes: list[ast.AST] | None = None) -> Switches:
    """:func:`scan_switches` on a parsed module; ``nodes``: ``list(ast.walk(tree))`` if known."""
    nodes = list(ast.walk(tree)) if nodes is None else nodes
    reader = _Reader()
    reader.learn_aliases(nodes)
    tables = _dispatch_tables(tree)
    out: Switches = {}
    for node in nodes:
        if isinstance(node, ast.Compare):
            _compare(reader, node, out)
        elif isinstance(node, (ast.If, ast.IfExp, ast.While)):
            for operand in _truth_tests(node.test):
                option = reader.option(operand)
                if option is not None:
                    out.setdefault(option, set()).add(BOOL)
        elif isinstance(node, ast.Match):
            option = reader.option(node.subject)
            if option is not None:
                for case in node.cases:
                    out.setdefault(option, set()).update(_match_strings(case.pattern))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id in tables
        ):
            option = reader.option(node.slice)
            if option is not None:
                out.setdefault(option, set()).update(tables[node.value.id])
    return {k: v for k, v in out.items() if v}


def scan_switches(source: str) -> Switches:
    """Config option -> the string literals the code switches on (:data:`BOOL` for truth tests).

    Raises ``SyntaxError`` for source that does not parse.
    """
    return scan_tree(ast.parse(source))
