"""The zoo's command line checked before any model is built: one error line, exit status 2.

A run of the corpus takes minutes to hours; an output path it cannot write or a timeout it
cannot use must stop it before the first worker starts, not after the last one finished (and
not with a traceback whose exit status 1 reads as "findings"). :class:`ZooParser` makes
argparse's own errors one line too; :func:`option_errors` checks what argparse cannot: every
output path (its folder exists and is writable, the path is not a folder) and every number
(``--timeout`` finite and positive, ``--jobs`` at least 1).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import NoReturn

__all__ = ["OUTPUT_OPTIONS", "ZooParser", "option_errors", "usage_error"]

#: The options that name a file the run writes, by their ``argparse`` destination.
OUTPUT_OPTIONS = {"json": "--json", "html": "--html", "write_allowlist": "--write-allowlist"}

_PROG = "graphcheck.zoo"


def usage_error(message: str) -> int:
    """Prints ``graphcheck.zoo: error: <message>`` as one line on stderr; returns 2."""
    one_line = message.replace("\n", " ").strip()
    print(f"{_PROG}: error: {one_line}", file=sys.stderr)
    return 2


class ZooParser(argparse.ArgumentParser):
    """argparse's parser with its errors as one line (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:
        """Exits with status 2 after one line naming the option (``--timeout abc``)."""
        usage_error(f"{message} (run 'python -m graphcheck.zoo --help' for usage)")
        sys.exit(2)


def _output_error(option: str, path: str) -> str | None:
    """Why the run could not write ``path`` (given to ``option``), or None."""
    shown = ascii(path)
    if not path:
        return f"{option}: expected a file path, got an empty string"
    if os.path.isdir(path):
        return f"{option} {shown}: is a folder; expected a file path to write"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        what = "does not exist" if not os.path.lexists(folder) else "is not a folder"
        return f"{option} {shown}: the folder {ascii(folder)} {what}; create it first"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{option} {shown}: the folder {ascii(folder)} is not writable"
    if os.path.lexists(path) and not os.access(path, os.W_OK):
        return f"{option} {shown}: the file exists and is not writable"
    return None


def option_errors(args: argparse.Namespace) -> list[str]:
    """What is wrong with the parsed options, one message each naming the option.

    Checks the numbers (``--jobs`` >= 1, ``--timeout`` finite and > 0) and the output paths
    (``--json``, ``--html``, ``--write-allowlist``: not a folder, in a folder that exists and
    is writable, not an existing file that cannot be written, no two options the same file).
    Touches nothing: no file is created.
    """
    errors: list[str] = []
    if args.jobs < 1:
        errors.append(f"--jobs must be >= 1, found {args.jobs}")
    if not math.isfinite(args.timeout) or args.timeout <= 0:
        errors.append(f"--timeout must be a finite number of seconds > 0, found {args.timeout!r}")
    seen: dict[str, str] = {}
    for dest, option in OUTPUT_OPTIONS.items():
        path = getattr(args, dest, None)
        if path is None:
            continue
        problem = _output_error(option, path)
        if problem is not None:
            errors.append(problem)
            continue
        real = os.path.realpath(path)
        if real in seen:
            errors.append(f"{option} {ascii(path)}: the same file as {seen[real]}")
        seen[real] = option
    return errors
