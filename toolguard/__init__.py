"""toolguard: check every LLM tool call before it runs, and measure prefix executability.

The runtime guard (``Guard``, ``trajectory``, ...) imports no agent framework; the report
(``read_records``, ``build_report``, ...) is loaded on first use. See README.md and
docs/protocol.md for the span contract.
"""

from typing import TYPE_CHECKING

from ._adapter import Adapter, FrameworkVersionWarning
from ._adapter import distribution_version as _distribution_version
from ._errors import ForkError, ToolCallRejected, ToolDefinitionError, ToolGuardError, UsageError
from .runtime.calls.pending import PendingCall
from .runtime.calls.wrappers import GuardedFunction
from .runtime.contract_file import Contract, ContractFileError, load_contract
from .runtime.forks.strategies import (
    CallbackFork,
    DeepCopyFork,
    ForkStrategy,
    SQLiteSavepointFork,
    State,
    UndoLogFork,
)
from .runtime.guard import Guard
from .runtime.inherit import INHERIT, Inherit
from .runtime.plans.plan import (
    PlanRefError,
    PlanStep,
    PlanStepVerdict,
    PlanVerdict,
    StepRef,
    plan_refs,
    resolve_plan_refs,
)
from .runtime.telemetry.export import setup_file_export
from .runtime.tool_calls import (
    arun_anthropic_tool_uses,
    arun_openai_response_calls,
    arun_openai_tool_calls,
    run_anthropic_tool_uses,
    run_openai_response_calls,
    run_openai_tool_calls,
)
from .runtime.tools.conditions import Postcondition, Precondition
from .runtime.tools.markers import Grounded, Ref
from .runtime.tools.spec import ToolOptions, ToolSpec
from .runtime.tools.tool import Tool
from .runtime.trajectories.adopt import run_trajectory
from .runtime.trajectories.at_exit import end_at_exit
from .runtime.trajectories.current import current_trajectory
from .runtime.trajectories.redis_store import RedisStore
from .runtime.trajectories.registry import TrajectoryRegistry
from .runtime.trajectories.store import MemoryStore, TrajectoryStore, TrajectoryStoreError
from .runtime.trajectories.trajectory import Trajectory, trajectory
from .runtime.verdict import Failure, Rejection, Verdict

if TYPE_CHECKING:  # what the lazy loader below provides, visible to type checkers
    from .replay.api import replay_files
    from .replay.engine import Replayer
    from .replay.model import ReplayInputError
    from .replay.sources import read_runs
    from .report.build import build_report
    from .report.clickhouse import ClickHouseError, clickhouse_report, sql_report
    from .report.compare import compare
    from .report.metrics import TrajectoryRecord, compute_metrics
    from .report.outcomes import join_outcomes, load_outcomes
    from .report.plot import plot_report
    from .report.read import read_phoenix, read_records, read_rows
    from .report.reader import BackendError, ReportInputError

# From the package metadata, the one place the version is written (pyproject.toml).
__version__ = _distribution_version("toolguard-otel")

# The report side pulls in numpy (the [report] extra): loaded on first use, so guarding a tool
# neither pays for it nor needs it installed.
_LAZY = {
    "BackendError": ".report.reader",
    "ReportInputError": ".report.reader",
    "TrajectoryRecord": ".report.metrics",
    "build_report": ".report.build",
    "ClickHouseError": ".report.clickhouse",
    "clickhouse_report": ".report.clickhouse",
    "sql_report": ".report.clickhouse",
    "read_rows": ".report.read",
    "compare": ".report.compare",
    "compute_metrics": ".report.metrics",
    "join_outcomes": ".report.outcomes",
    "load_outcomes": ".report.outcomes",
    "plot_report": ".report.plot",
    "read_phoenix": ".report.read",
    "read_records": ".report.read",
    # Replay of recorded runs: its own wing over the runtime's public API.
    "ReplayInputError": ".replay.model",
    "Replayer": ".replay.engine",
    "read_runs": ".replay.sources",
    "replay_files": ".replay.api",
}


def _public(value: object) -> object:
    """Name a class or function defined in the package after the package itself.

    Its repr, tracebacks and docs then read ``toolguard.Guard`` (as httpx does), and pickles
    of public objects name ``toolguard.X``, which still resolves after an internal module
    moves. Anything defined elsewhere (a re-exported typing construct) is left alone.
    """
    from types import FunctionType

    defined_here = getattr(value, "__module__", "").startswith(__name__ + ".")
    if defined_here and isinstance(value, type | FunctionType):
        value.__module__ = __name__
    return value


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolguard' has no attribute {name!r}")
    import importlib

    try:
        value = _public(getattr(importlib.import_module(module, __name__), name))
    except ImportError as exc:
        # The report and replay stack is the [report] extra: say so, not "no module numpy".
        from ._extras import is_missing, missing_extra

        if not is_missing(exc, "report"):
            raise
        raise missing_extra(f"toolguard.{name}", "report", exc) from exc
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


# Sorted plainly (tests/test_public_api.py), not isort-style: INHERIT sits among the I names.
__all__ = [  # noqa: RUF022
    "Adapter",
    "BackendError",
    "CallbackFork",
    "ClickHouseError",
    "Contract",
    "ContractFileError",
    "DeepCopyFork",
    "Failure",
    "ForkError",
    "ForkStrategy",
    "FrameworkVersionWarning",
    "Grounded",
    "Guard",
    "GuardedFunction",
    "INHERIT",
    "Inherit",
    "MemoryStore",
    "PendingCall",
    "PlanRefError",
    "PlanStep",
    "PlanStepVerdict",
    "PlanVerdict",
    "Postcondition",
    "Precondition",
    "RedisStore",
    "Ref",
    "Rejection",
    "ReplayInputError",
    "Replayer",
    "ReportInputError",
    "SQLiteSavepointFork",
    "State",
    "StepRef",
    "Tool",
    "ToolCallRejected",
    "ToolDefinitionError",
    "ToolGuardError",
    "ToolOptions",
    "ToolSpec",
    "Trajectory",
    "TrajectoryRecord",
    "TrajectoryRegistry",
    "TrajectoryStore",
    "TrajectoryStoreError",
    "UndoLogFork",
    "UsageError",
    "Verdict",
    "__version__",
    "arun_anthropic_tool_uses",
    "arun_openai_response_calls",
    "arun_openai_tool_calls",
    "build_report",
    "clickhouse_report",
    "compare",
    "compute_metrics",
    "current_trajectory",
    "end_at_exit",
    "join_outcomes",
    "load_contract",
    "load_outcomes",
    "plan_refs",
    "plot_report",
    "read_phoenix",
    "read_records",
    "read_rows",
    "read_runs",
    "replay_files",
    "resolve_plan_refs",
    "run_anthropic_tool_uses",
    "run_openai_response_calls",
    "run_openai_tool_calls",
    "run_trajectory",
    "setup_file_export",
    "sql_report",
    "trajectory",
]

# The lazy names are renamed as __getattr__ loads them.
for _name in __all__:
    if _name not in _LAZY:
        _public(globals()[_name])
del _name
