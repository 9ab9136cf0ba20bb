"""Sites: from a census path to the code that keeps the tensor.

A census path (``encoder.layer.0.attention.self.rotary_embeddings._cos_cached``)
names one storage in one model. The *site* is what the finding has in common
across layers and architectures: the class of the object that holds the
attribute, the attribute, and the file that defines the class
(``transformers/models/esm/modeling_esm.py: RotaryEmbedding._cos_cached``).
:func:`resolve_site` walks the path back through the model to find it;
:func:`generalize` turns a path into the glob that covers every layer
(``encoder.layer.*.attention...``), one glob per site in an allowlist.
A capture's owner that no attribute reaches is an allocation label instead, best its
creation site (``transformers/.../modeling_beit.py:213 in f (cached: f)``, graphcheck._sites);
:func:`owner_entry` makes its allowlist glob.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

__all__ = [
    "GLOBAL_PREFIX",
    "generalize",
    "is_allocation_label",
    "is_op_label",
    "owner_entry",
    "resolve_site",
    "split_path",
]

_TOKEN = re.compile(r"\[(?:'((?:[^'\\]|\\.)*)'|([^\]]*))\]|\.?([^.\[]+)")
# A capture owner labelled by its creation site: "file:line in function (cached: name)".
_CREATION_SITE = re.compile(r"(?P<file>[^\[\]]+):(?P<line>\d+) in (?P<rest>.+)")


def split_path(path: str) -> list[tuple[str, str]]:
    """Steps of a census path: ``("attr", name)``, ``("item", "3")`` or ``("key", "k")``."""
    steps: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(path):
        key, item, attr = m.groups()
        if attr is not None:
            steps.append(("attr", attr))
        elif key is not None:
            steps.append(("key", key))
        else:
            steps.append(("item", item or ""))
    return steps


def generalize(path: str) -> str:
    """The glob of a path's site: every numeric component and list index becomes ``*``."""
    out = re.sub(r"(?<=\.)\d+(?=\.|$|\[)", "*", path)
    out = re.sub(r"^\d+(?=\.|\[|$)", "*", out)
    return re.sub(r"\[\d+\]", "[*]", out)


def is_allocation_label(glob: str) -> bool:
    """True for a capture's allocation label (``aten:aten::view``, ``file.py:12 in f``).

    A census path has a ``:`` only inside a ``['key']``; an allocation label
    has one outside brackets. Only a capture can match such an entry.
    """
    return ":" in re.sub(r"\[[^\]]*\]", "", glob)


#: How a capture names a tensor a module keeps as a global (graphcheck._model_registry).
GLOBAL_PREFIX = "global "


def is_op_label(owner: str) -> bool:
    """True for an ATen window's op label (``aten:aten::maximum``).

    The op that first read memory nothing else names: it names no site, so it is never a
    baseline entry.
    """
    return owner.startswith("aten:")


def owner_entry(owner: str) -> tuple[str, str]:
    """The allowlist glob of a capture owner (unregistered at capture), and what it is.

    A creation site (``file.py:12 in f (cached: f)``) loses its line: the entry survives edits
    above the function. A census path gets :func:`generalize`; other labels stay.
    """
    if owner.startswith(GLOBAL_PREFIX):
        return owner, "module global"
    site = _CREATION_SITE.fullmatch(owner)
    if site is not None:
        return f"{site['file']}:* in {site['rest']}", "creation site"
    if is_allocation_label(owner):
        return owner, "allocation label"
    return generalize(owner), "census path"


def _step(obj: Any, kind: str, name: str) -> Any:
    if kind == "attr":
        try:
            return getattr(obj, name)
        except AttributeError:
            pass
        code = getattr(obj, "__code__", None)
        cells = getattr(obj, "__closure__", None)
        if code is not None and cells:
            for var, cell in zip(code.co_freevars, cells, strict=False):
                if var == name:
                    return cell.cell_contents
        raise AttributeError(name)
    if kind == "item":
        if isinstance(obj, (set, frozenset)):
            return list(obj)[int(name)]
        return obj[int(name)]
    return obj[name]


def resolve_site(root: Any, path: str) -> dict[str, str]:
    """The site of ``path`` under ``root``: ``owner`` (class qualname), ``attribute``, ``file``.

    ``owner`` is the class of the object that holds the last attribute of the
    path (list indices and dict keys after it are part of the attribute:
    ``experts[*]``); ``file`` is its defining file, relative to the package
    root (``transformers/models/...``). When the path cannot be walked back
    (an object changed since the census), ``owner`` is ``"?"`` and the rest is
    taken from the path.
    """
    steps = split_path(path)
    last_attr = max((i for i, (k, _) in enumerate(steps) if k == "attr"), default=-1)
    obj = root
    owner: Any = None
    try:
        for i, (kind, name) in enumerate(steps):
            if i == last_attr:
                owner = obj
            obj = _step(obj, kind, name)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        owner = owner if owner is not None else None
    tail = steps[last_attr:] if last_attr >= 0 else steps
    attribute = "".join(
        ("." + n if k == "attr" else "[*]" if k == "item" else f"[{n!r}]") for k, n in tail
    ).lstrip(".")
    if owner is None:
        return {"owner": "?", "attribute": attribute, "file": ""}
    cls = owner if inspect.isfunction(owner) else type(owner)
    qualname = getattr(cls, "__qualname__", type(owner).__name__)
    module = getattr(cls, "__module__", "") or ""
    file = ""
    try:
        source = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        source = None
    if source:
        marker = "/site-packages/"
        file = source.split(marker, 1)[1] if marker in source else source
    return {
        "owner": f"{module}.{qualname}" if module else qualname,
        "attribute": attribute,
        "file": file,
    }
