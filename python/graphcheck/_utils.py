"""Helpers shared by the package's modules (private module, public names)."""

from __future__ import annotations

import fnmatch
import re

__all__ = ["glob_regex"]


def glob_regex(glob: str) -> re.Pattern[str]:
    """Compile a path glob: fnmatch's ``*`` and ``?``, literal brackets.

    ``[`` and ``]`` match themselves, so that paths such as
    ``experts[0].weight`` can be pasted as they are. The census's allowlist,
    the zoo's allowlist and its ``--only`` selection all read globs this way.
    """
    return re.compile(fnmatch.translate(glob.replace("[", "[[]")))
