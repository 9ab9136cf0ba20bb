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

Not covered: pybind11's own ``TypeError`` when a compiled function gets arguments of the wrong
type, and exceptions of the user's model that propagate through a capture.
"""

from __future__ import annotations

from graphcheck._core import GraphcheckError

__all__ = ["GraphcheckError", "GraphcheckKeyError", "GraphcheckTypeError", "GraphcheckValueError"]


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
