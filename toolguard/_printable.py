"""Text read from files anyone could have written, made safe to print: :func:`printable`.

Shared by every command that prints what it read (the report, replay, infer): control
characters (C0, DEL, C1, line and paragraph separators, bidirectional overrides) become
visible escapes such as ``\\x1b`` and ``\\n``, so no terminal escape sequence runs and no line
break splits a table row or a warning. The report's cell escapes build on it
(``report/escape.py``).
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 controls, DEL and C1 controls; the Unicode line and paragraph separators; the
# bidirectional marks, embeddings, overrides and isolates (text that reads one way and prints
# another).
_CONTROL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control character written as a visible escape."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escape, text)
