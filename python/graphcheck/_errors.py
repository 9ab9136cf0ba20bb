"""The package's one error rule and its exception classes (private module, public names).

Misuse (a wrong argument), bad input and setup failures raise :class:`GraphcheckError` (from
the compiled module ``graphcheck._core``: the C++ checker raises it too), with a message that
names the cause and the fix. Where a built-in exception says what kind of misuse it is, the
class raised is a subclass of both: a wrong type raises :class:`GraphcheckTypeError` (also a
``TypeError``), a wrong value :class:`GraphcheckValueError` (also a ``ValueError``), an unknown
key or label :class:`GraphcheckKeyError` (also a ``KeyError``). So ``except GraphcheckError``
catches every graphcheck error, and code that catches the built-in keeps working. Findings are
never errors (they are data in a report), except where the caller asked for them to be:
:class:`graphcheck.FindingsError` (a watch in ``error`` mode) and the ``AssertionError`` of
:meth:`graphcheck.testing.GraphReplayResult.assert_clean`.

Text that goes to the C++ side must encode to UTF-8: a str holding a lone surrogate (what
bytes that are not UTF-8 in a file name or an environment variable decode to) raises
:class:`GraphcheckValueError` naming the argument (:func:`require_text` here, and the compiled
modules' own text arguments), never pybind11's ``TypeError``.

Not covered: pybind11's own ``TypeError`` when a compiled function gets arguments of the wrong
type (an int where a str goes), and exceptions of the user's model that propagate through a
capture.
"""

from __future__ import annotations

from collections.abc import Iterable

from graphcheck._core import GraphcheckError

__all__ = [
    "GraphcheckError",
    "GraphcheckKeyError",
    "GraphcheckTypeError",
    "GraphcheckValueError",
    "require_text",
    "require_texts",
]


class GraphcheckTypeError(GraphcheckError, TypeError):
    """An argument of the wrong type (a model that is not a module, a label that is not a str)."""

    __module__ = "graphcheck"


class GraphcheckValueError(GraphcheckError, ValueError):
    """An argument of the right type with a wrong value (an empty label, a negative count)."""

    __module__ = "graphcheck"


class GraphcheckKeyError(GraphcheckError, KeyError):
    """A key or label that is not there (a buffer slot, a checkpoint key, a replay step)."""

    __module__ = "graphcheck"

    # KeyError's str() is the repr of its argument (quotes, escaped newlines): the message is
    # meant to be read, as every other graphcheck error's.
    __str__ = BaseException.__str__


def require_text(value: object, what: str) -> str:
    """``value``, when it is a str that encodes to UTF-8 (what the C++ side takes).

    Raises :class:`GraphcheckTypeError` naming ``what`` when it is not a str, and
    :class:`GraphcheckValueError` naming ``what``, the character and its index when it holds
    a lone surrogate.
    """
    if not isinstance(value, str):
        raise GraphcheckTypeError(f"{what}: expected a str, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        shown = ascii(value) if len(value) <= 60 else ascii(value[:57]) + "..."
        raise GraphcheckValueError(
            f"{what}: expected text, found {shown}, which holds the lone surrogate "
            f"U+{ord(value[exc.start]):04X} at index {exc.start} (not valid Unicode: bytes that "
            "are not UTF-8, decoded with surrogateescape?); pass text that encodes to UTF-8"
        ) from None
    return value


def require_texts(values: Iterable[object], what: str) -> tuple[str, ...]:
    """Every item of ``values`` through :func:`require_text` (``what[i]`` in messages).

    A bare str is refused (:class:`GraphcheckTypeError`): iterating it would make one item
    per character.
    """
    if isinstance(values, (str, bytes)):
        raise GraphcheckTypeError(
            f"{what}: expected an iterable of str, found a single string (wrap it in a list)"
        )
    return tuple(require_text(value, f"{what}[{i}]") for i, value in enumerate(values))
