"""Whether a command's output file is one of its inputs (:func:`input_named_by`): writing it
would lose the input, or read a half-written file. Shared by the commands that read files and
write one (report, compare, replay, infer)."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable

STDIN = "-"


def input_named_by(out: str, inputs: Iterable[str]) -> str | None:
    """The input (a path or glob of ``inputs``) that ``out`` is the same file as, or None.
    By the file, not the name: another path to it, or a link, is the same file. Inputs that
    name nothing are left to the reader's own error."""
    if not os.path.isfile(out):
        return None
    for pattern in inputs:
        if pattern == STDIN:
            continue
        # one by one: an input that names nothing does not hide the others
        paths = [pattern] if os.path.exists(pattern) else glob.glob(pattern, recursive=True)
        for path in paths:
            try:
                if os.path.isfile(path) and os.path.samefile(out, path):
                    return path
            except OSError:
                continue
    return None
