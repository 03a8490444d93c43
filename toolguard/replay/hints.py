"""Which format a value read under another one looks like, for the error that refuses it:
``toolguard replay openai`` given a tau2 results file says to give ``tau2``, not only which
key is missing (mixed formats in one call are the common mistake)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def looks_like(value: Any) -> str | None:
    """The format whose top-level value ``value`` looks like, or None: ``openai`` (a run with
    messages), ``tau2`` (a results document), ``bfcl`` (a result line), ``spans`` (an OTLP
    trace export)."""
    if not isinstance(value, Mapping):
        return None
    if "resourceSpans" in value:
        return "spans"
    if "simulations" in value:
        return "tau2"
    if isinstance(value.get("id"), str) and "result" in value:
        return "bfcl"
    if "messages" in value or "traj" in value:
        return "openai"
    return None


def format_hint(value: Any, current: str) -> str:
    """``"; it looks like ... "`` naming the format ``value`` looks like, when it is not
    ``current``; else ``""``."""
    other = looks_like(value)
    if other is None or other == current:
        return ""
    if other == "spans":
        return (
            "; it looks like a span file (OTLP JSON): `toolguard report` reads it, "
            "`toolguard infer --format spans` infers from it"
        )
    return f"; it looks like the {other} format (give each format's files to their own call)"


def json_lines_hint(path: str) -> str:
    """``"; ..."`` when the JSON Lines file ``path`` starts with a line of a lone ``{`` or
    ``[`` (one JSON document written over several lines: a tau2 results file, say), else
    ``""``. Reads its first bytes only."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:  # stdin, or gone: no hint
        return ""
    first = next((line.strip() for line in head.splitlines() if line.strip()), b"")
    if first not in (b"{", b"["):
        return ""
    return (
        "; the file is one JSON document over several lines, not JSON Lines (one entry per "
        "line): another format's file?"
    )
