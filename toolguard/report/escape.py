"""Text from span files, made safe to print (docs/report-limits.md, "Escaping").

Labels, trajectory ids, file names and the values quoted in error messages come from files
anyone could have written. The JSON report keeps them exact (JSON escapes control characters
itself); everything printed for people or spreadsheets goes through this module first:

- ``printable``: control characters (C0, DEL, C1, line and paragraph separators, bidirectional
  overrides) become visible escapes such as ``\\x1b`` and ``\\n``: no terminal escape sequence,
  and no line break that would split a table row or a warning;
- ``csv_cell``: also no cell that a spreadsheet would take for a formula;
- ``markdown_cell``: also no character that would end a table cell or start Markdown or HTML;
- ``mathtext_literal``: also no ``$`` that matplotlib would read as mathtext;
- ``short``: a bounded repr for error messages, whatever the size of the value.
"""

from __future__ import annotations

import re
import reprlib

from .._printable import printable as printable  # the report modules import it from here

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_MARKDOWN = re.compile(r"([\\`*_\[\]<>|&])")


def csv_cell(text: str) -> str:
    """A printable cell that no spreadsheet reads as a formula: one starting with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return gets a leading ``'`` (the OWASP rule)."""
    out = printable(text)
    return "'" + out if text.startswith(_FORMULA_START) or out.startswith(_FORMULA_START) else out


def markdown_cell(text: str) -> str:
    """A printable Markdown table cell: ``|`` cannot end the cell, and backslashes, emphasis,
    code, links and HTML are shown literally (backslash escapes of CommonMark)."""
    return _MARKDOWN.sub(r"\\\1", printable(text))


def mathtext_literal(text: str) -> str:
    """A printable matplotlib text shown as written: every ``$`` escaped, so no part of it is
    parsed as mathtext (``$\\undefinedmacro{$`` would make the figure fail to draw). A
    leading ``_`` is kept visible: matplotlib's legend hides labels that start with one."""
    out = printable(text).replace("$", r"\$")
    return " " + out if out.startswith("_") else out


_SHORT = reprlib.Repr()
_SHORT.maxstring = 80
_SHORT.maxother = 80
_SHORT.maxlevel = 3
_SHORT.maxdict = _SHORT.maxlist = _SHORT.maxtuple = 6


def short(value: object) -> str:
    """A repr of ``value`` at most a few hundred characters long (error messages quote what
    was wrong; a 60 MB attribute value should not become a 60 MB message)."""
    return printable(_SHORT.repr(value))


def short_id(text: str, limit: int = 80) -> str:
    """An id or label for a message: printable, cut to ``limit`` characters."""
    out = printable(text)
    return out if len(out) <= limit else out[: limit - 3] + "..."
