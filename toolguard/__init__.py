"""toolguard: check every LLM tool call before it runs, and measure prefix executability.

See README.md for the quickstart and PROTOCOL.md for the span contract.
"""

from ._errors import GuardCheckError, ToolCallRejected, ToolDefinitionError, ToolGuardError
from .runtime.checks import Rejection
from .runtime.conditions import Failure, Postcondition, Precondition
from .runtime.guard import Guard
from .runtime.telemetry import setup_file_export
from .runtime.tool import Tool, ToolSpec
from .runtime.trajectory import Trajectory, Verdict, current_trajectory, trajectory

__version__ = "0.1.0"

# The report side pulls in numpy: loaded on first use, so guarding a tool does not pay for it.
_LAZY = {
    "ReportInputError": ".report.reader",
    "TrajectoryRecord": ".report.metrics",
    "build_report": ".report.build",
    "compare_groups": ".report.compare",
    "compute_metrics": ".report.metrics",
    "join_outcomes": ".report.outcomes",
    "load_outcomes": ".report.outcomes",
    "plot_report": ".report.plot",
    "read_records": ".report.collect",
}
_RENAMED = {"compare_groups": "compare"}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolguard' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Failure",
    "Guard",
    "GuardCheckError",
    "Postcondition",
    "Precondition",
    "Rejection",
    "ReportInputError",
    "Tool",
    "ToolCallRejected",
    "ToolDefinitionError",
    "ToolGuardError",
    "ToolSpec",
    "Trajectory",
    "TrajectoryRecord",
    "Verdict",
    "__version__",
    "build_report",
    "compare_groups",
    "compute_metrics",
    "current_trajectory",
    "join_outcomes",
    "load_outcomes",
    "plot_report",
    "read_records",
    "setup_file_export",
    "trajectory",
]
