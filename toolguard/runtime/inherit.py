"""``tg.INHERIT``: the default of a tool option that takes the guard's value.

One sentinel for "not said here, ask the level above" (as httpx's ``USE_CLIENT_DEFAULT``),
so that ``None`` can mean the same at every level instead of "off" on the guard and
"inherit" on a tool. A leaf: fork.py and tool.py both need it.
"""

from __future__ import annotations

from typing import Final, Literal, final


@final
class Inherit:
    """The type of :data:`toolguard.INHERIT`, its only instance: an option left to the level
    above (a tool's to its guard, a plan's to each tool)."""

    _instance: Inherit | None = None

    def __new__(cls) -> Inherit:
        # One object, so `is INHERIT` holds after a copy or a pickle of a ToolSpec too.
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    # False, so that `tool_value or guard_value` reads the guard's (call.py and the compiled
    # call path read a tool's mode so), and type checkers drop it after `if value:`.
    def __bool__(self) -> Literal[False]:
        return False

    def __repr__(self) -> str:
        return "toolguard.INHERIT"

    def __reduce__(self) -> str:
        return "INHERIT"  # pickled by its public name, toolguard.INHERIT

    def __copy__(self) -> Inherit:
        return self

    def __deepcopy__(self, memo: object) -> Inherit:
        return self


INHERIT: Final = Inherit()
