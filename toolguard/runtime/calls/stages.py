"""A tool's stages, chosen once from its contract: the pre-execution checks in precedence
order, the judge of the outcome and the record of an accepted result."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..checks.conditions import precondition_stage
from ..checks.dependencies import dependency_stage
from ..checks.information import information_stage
from ..checks.outcome import Judge, judge_stage, plain_judge
from ..checks.stage import CheckStage
from .record import Record, observe_only, record_stage

if TYPE_CHECKING:
    from ..tools.tool import Tool


class ToolStages:
    """``checks``: dependency, precondition, information (those the contract declares);
    ``judge``: error result and postconditions; ``record``: produces and invalidates (None
    when the contract declares neither), ``record_outcome`` the same or observing only."""

    __slots__ = ("checks", "judge", "own_error_result", "plain_judge", "record", "record_outcome")

    def __init__(self, tool: Tool) -> None:
        found = (
            dependency_stage(tool),
            precondition_stage(tool.preconditions),
            information_stage(tool),
        )
        self.checks: tuple[CheckStage, ...] = tuple(s for s in found if s is not None)
        self.judge: Judge = judge_stage(tool)
        self.plain_judge = plain_judge(tool)
        # The tool reads errors by its own rule (the default, with plain_judge): the
        # guard's error_result does not matter to it.
        self.own_error_result = tool.spec.error_result is not None
        self.record: Record | None = record_stage(tool)
        self.record_outcome: Record = self.record if self.record is not None else observe_only


def stages_of(tool: Tool) -> ToolStages:
    """The tool's stages, built on first use and kept on the tool (shared by every guard
    that declares it: they read the guard's settings per call)."""
    stages: ToolStages | None = tool.stages
    if stages is None:
        stages = tool.stages = ToolStages(tool)
    return stages
