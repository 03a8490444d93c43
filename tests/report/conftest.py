"""Fixtures of the report tests; the span builders live in spanfiles.py."""

from spanfiles import write_lines

__all__ = ["write_lines"]
