"""toolguard: check every LLM tool call before it runs, and measure prefix executability.

See README.md for the quickstart and PROTOCOL.md for the span contract.
"""

from ._checks import Failure, Postcondition, Precondition
from ._errors import GuardCheckError, ToolCallRejected, ToolDefinitionError, ToolGuardError
from ._guard import Guard
from ._telemetry import setup_file_export
from ._tool import Tool, ToolSpec
from ._trajectory import Trajectory, Verdict, current_trajectory, trajectory
from ._verdict import Rejection

__version__ = "0.1.0"

__all__ = [
    "Failure",
    "Guard",
    "GuardCheckError",
    "Postcondition",
    "Precondition",
    "Rejection",
    "Tool",
    "ToolCallRejected",
    "ToolDefinitionError",
    "ToolGuardError",
    "ToolSpec",
    "Trajectory",
    "Verdict",
    "__version__",
    "current_trajectory",
    "setup_file_export",
    "trajectory",
]
