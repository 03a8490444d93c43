"""What a trajectory has seen as free text, indexed for the information check.

The question is ``any(value in text for text in texts)``: does some text the agent saw (the
user's input, a tool's answer given as text, a value bound as a string) contain the value?
Asked by scanning, it costs the whole history at every call (34x slower at the 10,000th call
of a trajectory). Here:

- a value found once stays found (texts are only ever added): a set of those;
- the texts not yet indexed (the tail) are scanned newest first (an agent mostly quotes what
  it has just read);
- once scanning the tail has cost ``SEAL_RATIO`` times what one full scan of it costs (about
  a tenth of what indexing it costs), the tail is sealed into blocks of about
  ``BLOCK_CHARS``: texts joined by NUL, so a value without NUL matches in a block exactly
  when it matches in one of the block's texts, and each 3-gram of a block points to the
  block. A value of 3 characters or more is looked for only in the blocks holding the rarer
  two of five of its 3-grams spread over it (a block holding the value holds them all); a
  value of 1 or 2 characters is answered by the set of every character and pair of
  characters of the blocks; a value holding NUL by the plain scan.

The answer is exactly the scan's (``tests/runtime/test_compiled_equivalence.py`` checks it against
the scan on random texts, the index forced at every question). A trajectory whose questions
are answered by the tail or by values found before, or that nobody asks, never builds the
index. Indexing a text costs about a hundred scans of it, once; a look-up in the blocks a
few microseconds, whatever the history's length (benchmarks/README.md, growth).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

BLOCK_CHARS = 2048  # a sealed block holds about this many characters
SEAL_RATIO = 10  # seal the tail once scanning it has cost 10 full scans of it
_PER_TEXT = 64  # scanning one text costs about as much as scanning 64 characters
_SEP = "\x00"
_FOUND_LIMIT = 65_536  # values remembered as found (a bound on memory, not on correctness)


class SeenTexts:
    """The free texts of one trajectory (append-only) and their index."""

    __slots__ = (
        "_blocks",
        "_found",
        "_grams",
        "_lock",
        "_sealed",
        "_short",
        "_tail_size",
        "_work",
        "block_chars",
        "seal_ratio",
        "texts",
    )

    def __init__(self, seal_ratio: float = SEAL_RATIO, block_chars: int = BLOCK_CHARS) -> None:
        self.texts: list[str] = []
        self.seal_ratio = seal_ratio
        self.block_chars = block_chars
        self._sealed = 0  # texts[:_sealed] are in blocks
        self._tail_size = 0  # characters in texts[_sealed:]
        self._work = 0  # what scanning the tail has cost since the last sealing
        self._blocks: list[str] = []
        self._grams: dict[tuple[str, ...], list[int]] = {}  # 3-gram -> its blocks, ascending
        self._short: set[Any] = set()  # every character and pair of characters of the blocks
        self._found: set[str] = set()
        self._lock = threading.Lock()

    def add(self, text: str) -> None:
        self.texts.append(text)
        self._tail_size += len(text)

    def __len__(self) -> int:
        return len(self.texts)

    def contains(self, value: str) -> bool:
        """``any(value in text for text in self.texts)``."""
        if value in self._found:
            return True
        if not value:
            return bool(self.texts)
        found = any(value in t for t in self.texts) if _SEP in value else self._search(value)
        if found and len(self._found) < _FOUND_LIMIT:
            self._found.add(value)
        return found

    def _search(self, value: str) -> bool:
        texts = self.texts
        end = len(texts)  # texts added while we look are not looked at (as with a scan)
        start = self._sealed
        cost = self._tail_size + _PER_TEXT * (end - start)
        if end > start and self._work >= self.seal_ratio * cost:
            with self._lock:
                self._seal(end)
            start = self._sealed
        work = 0
        for i in range(end - 1, start - 1, -1):
            text = texts[i]
            if value in text:
                self._work += work
                return True
            work += len(text) + _PER_TEXT
        self._work += work
        return self._in_blocks(value, start)

    def _in_blocks(self, value: str, sealed: int) -> bool:
        if not sealed:
            return False
        if len(value) < 3:
            return (value if len(value) == 1 else (value[0], value[1])) in self._short
        grams = self._grams
        rarest: list[int] | None = None
        second: list[int] | None = None
        # Any block holding the value holds each of its 3-grams: a few of them, spread over
        # the value (its ends are the most telling: "...r-4123"), are enough to narrow the
        # blocks down; the value itself is then looked for in those.
        n = len(value) - 3
        for i in {0, n // 3, (2 * n) // 3, n - 1 if n > 0 else 0, n}:
            g = (value[i], value[i + 1], value[i + 2])
            blocks = grams.get(g)
            if blocks is None:
                return False  # a 3-gram no block holds
            if rarest is None or len(blocks) < len(rarest):
                rarest, second = blocks, rarest
            elif second is None or len(blocks) < len(second):
                second = blocks
        assert rarest is not None
        candidates: list[int] | set[int] = rarest
        if second is not None and len(rarest) > 2:
            candidates = set(rarest).intersection(second)
        texts = self._blocks
        return any(value in texts[b] for b in sorted(candidates, reverse=True))

    def _seal(self, end: int) -> None:
        """Join texts[_sealed:end] into blocks and index them (under the lock)."""
        texts, start = self.texts, self._sealed
        grams, short, blocks = self._grams, self._short, self._blocks
        while start < end:
            stop, size = start + 1, len(texts[start])
            while stop < end and size + len(texts[stop]) < self.block_chars:
                size += len(texts[stop]) + 1
                stop += 1
            block = _SEP.join(texts[start:stop])
            b = len(blocks)
            blocks.append(block)
            # 3-grams (and the 1- and 2-character substrings) as tuples of characters:
            # made by zip in C, about twice as fast as slicing.
            short.update(block)
            short.update(itertools.pairwise(block))
            for g in set(zip(block, block[1:], block[2:], strict=False)):
                found = grams.get(g)
                if found is None:
                    grams[g] = [b]
                else:
                    found.append(b)
            start = stop
            self._sealed = stop
        self._tail_size = sum(len(t) for t in texts[self._sealed :])
        self._work = 0
