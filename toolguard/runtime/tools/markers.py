"""What a tool declaration is made of: the option types and the ``Annotated`` markers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from ..forks.strategies import DeepCopyFork, ForkStrategy

Mode = Literal["block", "log"]
WHOLE_RESULT = "$"  # `produces={"$": "session"}`: the return value itself is the value

# Where a produced value is found in a result: a key name (anywhere in it), a path from its
# root ("items[].id"), "$" for the result itself, or a callable result -> iterable of values.
ResultPlace = str | Callable[[Any], Iterable[Any]]
# One meaning per value, on a guard and on a tool alike: a predicate result -> bool (true:
# the environment rejected the call); None or False, no result is read as an error.
ErrorResult = Callable[[Any], bool] | Literal[False] | None
# None or False: no dry run; True: one, with the strategy of the level above where it has
# one, else a deep copy; a strategy: that one. See fork.resolve.
DryRun = ForkStrategy | bool | None
_DEFAULT_FORK = DeepCopyFork()  # what dry_run=True means where no strategy is given


@dataclass(frozen=True)
class Ref:
    """``Annotated[str, tg.Ref("contact_id")]``: the argument must refer to a value of that
    kind produced earlier in the trajectory (the same as ``refs={"arg": "contact_id"}``)."""

    kind: str


class Grounded:
    """``Annotated[str, tg.Grounded]``: the argument's value must appear in what the
    trajectory has seen (the same as ``grounded=["arg"]``)."""
