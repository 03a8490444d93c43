"""toolguard for LlamaIndex.

``guard_agent(agent, guard)`` guards a ``FunctionAgent``, ``ReActAgent`` or ``AgentWorkflow``
in place: its tools' calls are checked before they run (a blocked call's answer is the
guard's message, as an error output), each model turn's calls take their steps in emission
order, and each ``agent.run(...)`` is one trajectory. ``guard_tool`` / ``guard_tools`` guard
tools alone. LlamaIndex is imported on first use, so a missing framework says the command
that installs it.
"""

from typing import TYPE_CHECKING

import toolguard as tg

if TYPE_CHECKING:
    from ._agent import guard_agent
    from ._tools import GuardedFunctionTool, GuardedTool, guard_tool, guard_tools

# The one place the supported range is written: pyproject.toml's dependencies mirror it
# (tests/test_adapter_declaration.py). Checked when a name below is first used.
ADAPTER = tg.Adapter(
    "toolguard-llama-index",
    requires={"llama_index.core": "llama-index-core>=0.14.25,<0.15"},
    install="pip install -e . -e adapters/llama_index",
)
__version__ = ADAPTER.version

__getattr__, __dir__ = ADAPTER.exports(
    {
        "GuardedFunctionTool": "._tools",
        "GuardedTool": "._tools",
        "guard_agent": "._agent",
        "guard_tool": "._tools",
        "guard_tools": "._tools",
    }
)

__all__ = [
    "ADAPTER",
    "GuardedFunctionTool",
    "GuardedTool",
    "__version__",
    "guard_agent",
    "guard_tool",
    "guard_tools",
]
