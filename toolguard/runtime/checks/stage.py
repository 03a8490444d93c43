"""What a pre-execution check stage is: built once per tool, called once per call."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..verdict import Failure

if TYPE_CHECKING:
    from ..calls.call import _Call

# (call, validated arguments, stop at the first failure, the schema refused the arguments)
# -> the failures found (None or empty: the check passed). Blocking stops at the first.
CheckStage = Callable[["_Call", Mapping[str, Any], bool, bool], "list[Failure] | None"]
