"""Span names and attribute keys of the span contract (docs/protocol.md; version 1 with the
1.1 additions).

Every module that writes or reads a span names its keys through these constants, so the
contract lives in exactly one place.
"""

from __future__ import annotations

from typing import Final, Literal

CONTRACT_VERSION: Final = 1

# The five causes, in precedence order (docs/protocol.md).
SCHEMA: Final = "schema"
DEPENDENCY: Final = "dependency"
PRECONDITION: Final = "precondition"
STATE_CONSISTENCY: Final = "state_consistency"
INFORMATION: Final = "information"
CAUSES: Final = (SCHEMA, DEPENDENCY, PRECONDITION, STATE_CONSISTENCY, INFORMATION)
Cause = Literal["schema", "dependency", "precondition", "state_consistency", "information"]

# Decisions.
ALLOWED: Final = "allowed"
BLOCKED: Final = "blocked"
LOGGED: Final = "logged"
CANCELLED: Final = "cancelled"  # version 1.1: the caller gave up on the call after its checks
Decision = Literal["allowed", "blocked", "logged", "cancelled"]

# OpenTelemetry GenAI semantic conventions.
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
ERROR_TYPE: Final = "error.type"

# Call spans.
TRAJECTORY_ID: Final = "toolguard.trajectory.id"
STEP: Final = "toolguard.step"
VALID: Final = "toolguard.valid"
CAUSE: Final = "toolguard.cause"
CHECK: Final = "toolguard.check"
MESSAGE: Final = "toolguard.message"
FAILED_CHECKS: Final = "toolguard.failed_checks"
DECISION: Final = "toolguard.decision"

# Trajectory summary spans.
SUMMARY_SPAN_NAME: Final = "toolguard.trajectory"
TRAJECTORY_LENGTH: Final = "toolguard.trajectory.length"
TRAJECTORY_FED: Final = "toolguard.trajectory.first_error_depth"
TRAJECTORY_FIRST_ERROR_CAUSE: Final = "toolguard.trajectory.first_error.cause"
TRAJECTORY_SUCCESS: Final = "toolguard.trajectory.success"
LABEL_PREFIX: Final = "toolguard.label."


# Version 1.1: a call's trajectory carried across processes in the transport's metadata
# (MCP `_meta`).
META_TRAJECTORY_ID: Final = "toolguard/trajectory_id"
META_STEP: Final = "toolguard/step"
META_CALL_ID: Final = "toolguard/call_id"


# Version 1.1: a span of another tracer naming the trajectory its trace belongs to, read by
# --cost only (docs/protocol.md section 6.8). LangSmith's OTel mode exports a run's metadata
# under "langsmith.metadata."; the LangChain adapter names the trajectory there.
LANGSMITH_TRAJECTORY_ID: Final = "langsmith.metadata.toolguard.trajectory.id"


def call_span_name(tool_name: str) -> str:
    return f"{OPERATION_EXECUTE_TOOL} {tool_name}"


def error_type(cause: str) -> str:
    return f"toolguard.{cause}"


# Dry runs and plan verification (docs/fork-and-plans.md). Additions that no figure of the
# report reads: a plan's spans carry neither toolguard.step nor toolguard.trajectory.length.
DRY_RUN: Final = "toolguard.dry_run"  # on a call span: passed, rejected or guard_error
OPERATION_VERIFY_PLAN: Final = "verify_plan"
PLAN_LENGTH: Final = "toolguard.plan.length"  # steps in the plan
PLAN_VALID: Final = "toolguard.plan.valid"  # the plan (or one step of it) passed
PLAN_FAILED_STEP: Final = "toolguard.plan.failed_step"  # 0-based index of the failing step
PLAN_CAUSE: Final = "toolguard.plan.cause"
PLAN_CHECK: Final = "toolguard.plan.check"
PLAN_MESSAGE: Final = "toolguard.plan.message"
PLAN_DRY_RUN: Final = "toolguard.plan.dry_run"  # whether the plan ran on a fork
PLAN_STEP: Final = "toolguard.plan.step"  # on a step's span: its 0-based index
PLAN_STEP_ID: Final = "toolguard.plan.step_id"  # on a step's span: the planner's id for it
PLAN_RAN_ON_FORK: Final = "toolguard.plan.ran_on_fork"  # on a step's span


def plan_step_span_name(tool_name: str) -> str:
    return f"{OPERATION_VERIFY_PLAN} {tool_name}"


# The MCP proxy's additions to a call span (adapters/mcp/README.md); no figure of the report
# reads them. The adapter spells them out too (adapters/mcp/src/toolguard_mcp/_meta.py).
MCP_CLIENT: Final = "toolguard.mcp.client"  # the host: its clientInfo, name/version
MCP_UNCHECKED: Final = "toolguard.mcp.unchecked"  # why the call ran unchecked (on_undeclarable)
MCP_TOOL_CHANGED: Final = "toolguard.mcp.tool_changed"  # how the tool differs from its pin
