"""toolguard for the OpenAI Agents SDK.

``guard_agent(agent, guard)`` returns a clone of an ``Agent`` whose function tools the
``toolguard.Guard`` checks before they run (a blocked call's answer is the guard's message),
and whose model turns number their parallel calls in emission order. ``guarded_run`` (or
``run`` / ``run_sync``) makes one ``Runner.run`` one trajectory. The SDK is imported on first
use, so a missing SDK says the command that installs it.
"""

from typing import TYPE_CHECKING

import toolguard as tg

if TYPE_CHECKING:
    from ._agent import guard_agent
    from ._episode import guarded_run, run, run_sync
    from ._hooks import GuardHooks, reserve_turn
    from ._tools import guard_tool, guard_tools, guarded_by

# The one place the supported range is written: pyproject.toml's dependencies mirror it
# (tests/test_adapter_declaration.py). Checked when a name below is first used.
ADAPTER = tg.Adapter(
    "toolguard-openai-agents",
    requires={"agents": "openai-agents>=0.24,<1"},
    install="pip install -e . -e adapters/openai_agents",
)
__version__ = ADAPTER.version

__getattr__, __dir__ = ADAPTER.exports(
    {
        "GuardHooks": "._hooks",
        "guard_agent": "._agent",
        "guard_tool": "._tools",
        "guard_tools": "._tools",
        "guarded_by": "._tools",
        "guarded_run": "._episode",
        "reserve_turn": "._hooks",
        "run": "._episode",
        "run_sync": "._episode",
    }
)

__all__ = [
    "ADAPTER",
    "GuardHooks",
    "__version__",
    "guard_agent",
    "guard_tool",
    "guard_tools",
    "guarded_by",
    "guarded_run",
    "reserve_turn",
    "run",
    "run_sync",
]
