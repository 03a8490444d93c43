"""Values a user gave in a message, which may stand wherever a contract wants a bound id.

The protocol's bound variable is a value produced earlier in the trajectory *or one the user
gave* ("remove ticket 12345"). A replay with a contract binds these, under every kind the
contract refers to, as the BFCL harness always has: whole numbers, quoted texts (up to 60
characters) and id-like tokens (a word holding a digit or an underscore).
"""

from __future__ import annotations

import re
from typing import Any

_NUMBER = re.compile(r"(?<![\w.])\d+(?!\w|\.\d)")
_QUOTED = re.compile(r"'([^']{1,60})'|\"([^\"]{1,60})\"")
_TOKEN = re.compile(r"\b[A-Za-z]*(?:\d|_)[\w-]*\b")


def user_values(text: str) -> set[Any]:
    """Values the user gave explicitly in ``text``: its numbers (as ints), quoted texts and
    id-like tokens."""
    found: set[Any] = {int(n) for n in _NUMBER.findall(text)}
    found.update(a or b for a, b in _QUOTED.findall(text))
    found.update(_TOKEN.findall(text))
    return found
