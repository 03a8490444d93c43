"""Argument types shared by the command lines (``toolguard`` and ``toolguard replay``)."""

from __future__ import annotations

import argparse


def positive(text: str) -> int:
    """A whole number of at least 1 (a bound), or argparse's one-line error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value
