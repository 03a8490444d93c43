"""The round trips a Redis record's replica gave up on (not answered in time), carried with
each of its later round trips until one is answered, which reconciles them first
(``redis_scripts.py``): a call's begin, and a reservation of steps by call id.

Each is sent as one JSON entry ``[token, kind, step, ...]``, in step order (a reservation
before the begins of the calls it reserved, which carry its steps):

- ``[token, "", step, call_id]`` a begin at a provisional step or one reserved for its call
  id (by this process or another: the reservation counts the call, so the begin only
  consumes it), ``"="`` for a step another process assigned;
- ``[token, "R", first, [[call_id, step], ...]]`` a reservation at provisional steps
  (``call_id`` ``""`` for ``next_step``'s, which no call takes).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any


class GivenUp:
    """The round trips one replica gave up on, not yet reconciled by an answered one."""

    __slots__ = ("_entries", "_lock")

    def __init__(self) -> None:
        # token -> (sort key, the entry as the script reads it)
        self._entries: dict[str, tuple[tuple[int, int], list[Any]]] = {}
        self._lock = threading.Lock()

    def begin(self, token: str, step: int, given: bool, call_id: str | None) -> None:
        """A begin not answered: its call (``call_id``) went on at ``step`` (``given``: a step
        another process assigned, else a provisional or reserved one)."""
        entry = [token, "=" if given else "", step, call_id or ""]
        with self._lock:
            self._entries[token] = ((step, 1), entry)

    def reserving(self, token: str, steps: Sequence[tuple[str | None, int]]) -> None:
        """A reservation not answered: it gave ``steps`` (call id, step) out provisionally."""
        if not steps:
            return
        pairs = [[call_id or "", step] for call_id, step in steps]
        first = min(step for _, step in steps)
        with self._lock:
            self._entries[token] = ((first, 0), [token, "R", first, pairs])

    def carried(self) -> tuple[str, list[str]]:
        """The argument the next round trip carries ('' when nothing was given up), and the
        tokens it carries (:meth:`reconciled` once it is answered)."""
        if not self._entries:
            return "", []
        with self._lock:
            items = sorted(self._entries.items(), key=lambda item: item[1][0])
        entries = [entry for _, (_, entry) in items]
        return json.dumps(entries, ensure_ascii=False), [t for t, _ in items]

    def reconciled(self, tokens: list[str]) -> None:
        if tokens:
            with self._lock:
                for t in tokens:
                    self._entries.pop(t, None)
