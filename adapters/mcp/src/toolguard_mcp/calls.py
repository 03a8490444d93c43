"""What the server middleware, the client wrapper and the proxy share: a guard, the contract
its MCP tools are declared by, and the trajectories of MCP sessions.

A call finds its trajectory in this order: the trajectory id the request carries in
``_meta`` (a host that knows its episode; continued, or opened on first sight), else the
MCP session's own (one session, one trajectory). Trajectories live in the guard's registry
(``Guard(max_live_trajectories=..., trajectory_idle_timeout=...)``): that bounds what is kept
per trajectory (bindings, what was seen, the step counter), and a trajectory evicted or idle
too long is ended with its summary written; a later call of that session opens a new one.
"""

from __future__ import annotations

import logging
import uuid
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import toolguard as tg
from opentelemetry import context as otel_context

from . import _meta
from .results import is_error, result_value

logger = logging.getLogger("toolguard.mcp")

ContractLike: TypeAlias = tg.Contract | Mapping[str, tg.ToolSpec | Mapping[str, Any]]


def as_contract(contract: ContractLike | None, mode: str = "block") -> tg.Contract:
    """A :class:`toolguard.Contract` from a loaded file, or from ``{tool: ToolSpec or options}``
    written in code (the options of ``@guard.tool``)."""
    if contract is None:
        return tg.Contract("<none>", mode)
    if isinstance(contract, tg.Contract):
        return contract
    tools = {}
    for name, spec in contract.items():
        if isinstance(spec, tg.ToolSpec):
            tools[name] = spec
        elif isinstance(spec, Mapping):
            tools[name] = tg.ToolSpec(name=name, **spec)
        else:
            raise tg.ToolDefinitionError(
                f"contract for {name!r} must be a ToolSpec or a mapping of its options, "
                f"not {type(spec).__name__}"
            )
    return tg.Contract("<code>", mode, tools)


class CallGuard:
    """Checks MCP ``tools/call`` requests with ``guard`` against ``contract``."""

    def __init__(
        self,
        guard: tg.Guard,
        contract: ContractLike | None = None,
        *,
        labels: Mapping[str, Any] | None = None,
    ) -> None:
        self.guard = guard
        self.contract = as_contract(contract, guard.mode)
        self.labels = dict(labels or {})
        # One key for calls whose transport has no session of its own (stdio: the process
        # serves one host; the stateless 2026-07-28 HTTP era).
        self.process_session = f"mcp-session:{uuid.uuid4().hex}"
        self._declared: set[str] = set()  # declared here, from a server's tool list
        self._warned: set[str] = set()
        self._opened: weakref.WeakSet[tg.Trajectory] = weakref.WeakSet()

    # -- tools ---------------------------------------------------------------------------------
    def knows(self, name: str) -> bool:
        try:
            self.guard.get_tool(name)
        except KeyError:
            return False
        return True

    def declare_tools(self, tools: Iterable[Any], *, complete: bool = True) -> None:
        """Declare a server's tools (``Tool`` models or their wire form) by the contract and
        each tool's ``inputSchema``. A tool the user already declared on the guard keeps that
        declaration. With ``complete`` (the whole list), contract entries naming a tool the
        server does not offer are logged as a warning, once."""
        names = []
        for tool in tools:
            if isinstance(tool, Mapping):
                name, schema = tool.get("name"), tool.get("inputSchema")
            else:
                name, schema = getattr(tool, "name", None), getattr(tool, "input_schema", None)
            if not isinstance(name, str):
                continue
            names.append(name)
            if name not in self._declared and self.knows(name):
                continue
            spec = self.contract.spec_for(name, schema if isinstance(schema, Mapping) else None)
            self.guard.declare(name, spec, replace=True)
            self._declared.add(name)
        if complete:
            for name in self.contract.unknown_tools(names):
                if name not in self._warned:
                    self._warned.add(name)
                    logger.warning(
                        "toolguard: contract %s names tool %r, which the server does not "
                        "offer; the entry is ignored",
                        self.contract.path,
                        name,
                    )

    # -- trajectories --------------------------------------------------------------------------
    def trajectory_for(self, meta: Any, session: str | None) -> tuple[tg.Trajectory, str | None]:
        """The call's trajectory and call id (see the module's docstring). A step the host
        carried is reserved for the call, so the host's numbering is kept."""
        traj_id, step, call_id = _meta.carried(meta)
        key = traj_id or session or self.process_session
        traj = self.guard.find_trajectory(key)
        if traj is None:
            traj = self._open(traj_id or uuid.uuid4().hex, key)
        if step is not None:
            if call_id is None:
                # reserve() is by call id: a step sent without one gets a stand-in id.
                call_id = f"toolguard-step-{step}"
            traj.reserve({call_id: step})
        return traj, call_id

    def _open(self, traj_id: str, key: str) -> tg.Trajectory:
        traj = self.guard.trajectory(traj_id, key=key, labels=self.labels)
        # The summary span is a root of its own, not a child of whichever request opened it.
        token = otel_context.attach(otel_context.Context())
        try:
            traj.start()
        finally:
            otel_context.detach(token)
        self._opened.add(traj)
        return traj

    def end_session(self, session: str) -> None:
        traj = self.guard.find_trajectory(session)
        if traj is not None:
            traj.end()

    def close(self) -> None:
        """End every trajectory this object opened that is still open (summaries written)."""
        for traj in list(self._opened):
            traj.end()

    # -- calls ---------------------------------------------------------------------------------
    def check(
        self,
        name: str,
        arguments: Any,
        meta: Any = None,
        session: str | None = None,
        *,
        span: Any = None,
    ) -> tg.PendingCall:
        traj, call_id = self.trajectory_for(meta, session)
        return self.guard.check(name, arguments, call_id=call_id, trajectory=traj, span=span)

    def record_unknown(self, name: str, meta: Any = None, session: str | None = None) -> None:
        """Count a call of a tool the server does not offer (the server rejects it itself)."""
        traj, call_id = self.trajectory_for(meta, session)
        self.guard.record_rejection(
            name,
            f"no tool named {name[:128]!r} in the server's tool list",
            check="schema.tool",
            call_id=call_id,
            trajectory=traj,
        )

    @staticmethod
    def finish(pending: tg.PendingCall, result: Any) -> tg.Verdict:
        """Close an admitted call with the server's result (model or wire form); ``isError``
        is the environment's rejection (``state_consistency``)."""
        return pending.finish(result_value(result), error=is_error(result))
