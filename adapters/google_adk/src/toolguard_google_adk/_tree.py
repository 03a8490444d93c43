"""The tools of a Runner's whole agent tree: what the guard declares before a run's first
call (a session resumed by a sub-agent still binds what the root agent's tools found), and
what the contracts' names are checked against."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from google.adk.agents.base_agent import BaseAgent
from google.adk.agents.invocation_context import InvocationContext
from google.adk.agents.llm_agent import LlmAgent
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset

# Tools ADK adds to a model request itself (no agent lists them): a contract may name them.
ADK_ADDED = frozenset({"transfer_to_agent", "set_model_response"})


@dataclass(slots=True)
class Tools:
    """The tools found, and whether that is all the tree can ever call: a toolset may list
    other tools later (its list can depend on the session), and one that failed to list
    them now hides its own."""

    found: dict[str, BaseTool] = field(default_factory=dict)
    complete: bool = True


def root(ctx: InvocationContext) -> BaseAgent | None:
    """The root of the invocation's agent tree; None for a workflow node (no agent tree)."""
    agent = ctx.agent
    return agent.root_agent if isinstance(agent, BaseAgent) else None


async def tree_tools(ctx: InvocationContext, top: BaseAgent) -> Tools:
    """The tools of every agent under ``top``, sub-agents called as tools (``AgentTool``)
    included: those run in a runner of their own with these plugins."""
    tools = Tools()
    seen: set[int] = set()
    todo: list[BaseAgent] = [top]
    while todo:
        agent = todo.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        todo.extend(agent.sub_agents)
        if isinstance(agent, LlmAgent):
            todo.extend(await _agent_tools(agent, ctx, tools))
    return tools


async def _agent_tools(agent: LlmAgent, ctx: InvocationContext, tools: Tools) -> list[BaseAgent]:
    """Adds ``agent``'s tools to ``tools``; returns the agents its AgentTools wrap."""
    if any(isinstance(t, BaseToolset) for t in agent.tools):
        tools.complete = False
    try:
        listed = await agent.canonical_tools(ReadonlyContext(ctx))
    except Exception:  # a toolset that cannot list its tools now: what is known is used
        tools.complete = False
        return []
    wrapped: list[BaseAgent] = []
    for tool in listed:
        tools.found.setdefault(tool.name, tool)
        if isinstance(tool, AgentTool):
            wrapped.append(tool.agent)
    return wrapped


def unknown_contracts(contracts: Mapping[str, object], names: Iterable[str]) -> str | None:
    """What to say about contracts naming no tool of the tree, or None when all name one."""
    known = set(names)
    missing = sorted(set(contracts) - known - ADK_ADDED)
    if not missing:
        return None
    return (
        f"ToolGuardPlugin: contracts name tools that no agent of this runner has: "
        f"{', '.join(missing)} (tools: {', '.join(sorted(known)) or 'none'}); a contract "
        f"that names no tool is never applied"
    )
