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

import contextvars
import logging
import uuid
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

import toolguard as tg
from opentelemetry import context as otel_context

from . import _meta, refusals
from .contracts import ContractLike, as_contract, contract_fault
from .offload import KeyLocks, Offload
from .policy import ToolPolicy
from .results import is_error, result_value
from .rounds import Rounds, input_required

logger = logging.getLogger("toolguard.mcp")

# Attributes the proxy adds to the call span it is checking (set on the span as it starts).
CALL_NOTES: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "toolguard_mcp_call_notes", default=None
)


class CallGuard:
    """Checks MCP ``tools/call`` requests with ``guard`` against ``contract``."""

    def __init__(
        self,
        guard: tg.Guard,
        contract: ContractLike | None = None,
        *,
        labels: Mapping[str, Any] | None = None,
        policy: ToolPolicy | None = None,
        forward_unknown: bool = True,
    ) -> None:
        self.guard = guard
        self.contract = as_contract(contract, guard.mode)
        self.labels = dict(labels or {})
        self.policy = policy
        # In a server the server answers a tool it lacks its own way; a proxy never forwards
        # one (a server may run a tool it does not list).
        self.forward_unknown = forward_unknown
        self.undeclarable: dict[str, str] = {}  # tool -> why it cannot be declared
        self.unchecked: dict[str, str] = {}  # undeclarable tools passed, as the user asked
        # One key for calls whose transport has no session of its own (stdio: the process
        # serves one host; the stateless 2026-07-28 HTTP era).
        self.process_session = f"mcp-session:{uuid.uuid4().hex}"
        self._declared: set[str] = set()  # declared here, from a server's tool list
        self._warned: set[str] = set()
        self._opened: weakref.WeakSet[tg.Trajectory] = weakref.WeakSet()
        self.rounds = Rounds()  # calls paused for the user's input (MCP 2026-07-28)
        # A shared store's round trips go to worker threads (:mod:`.offload`).
        self.offload = Offload(guard)
        self._opening = KeyLocks()

    # -- tools ---------------------------------------------------------------------------------
    def knows(self, name: str) -> bool:
        try:
            self.guard.get_tool(name)
        except KeyError:
            return False
        return True

    def declare_tools(
        self, tools: Iterable[Any], *, complete: bool = True, at_start: bool = False
    ) -> None:
        """Declare a server's tools (``Tool`` models or their wire form) by the contract and
        each tool's ``inputSchema``. A tool the user already declared on the guard keeps that
        declaration. With ``complete`` (the whole list), contract entries naming a tool the
        server does not offer are logged as a warning, once.

        A tool that cannot be declared is refused from then on (``schema.undeclarable``), or
        declared to accept any arguments when the policy says ``on_undeclarable = "pass"``.
        Where the contract's entry is at fault and ``at_start``, a
        :class:`toolguard.ContractFileError` names the file, the tool and the key."""
        names = []
        wire = [_wire(tool) for tool in tools]
        if self.policy is not None:
            for name in self.policy.observe([w for w in wire if w is not None], complete=complete):
                logger.warning(
                    "toolguard-mcp-proxy: the definition of tool %r changed since it was pinned%s",
                    name,
                    "; its calls are refused until it is re-pinned"
                    if self.policy.pin == "block"
                    else "",
                )
        for tool in wire:
            if tool is None:
                continue
            name, schema = tool["name"], tool.get("inputSchema")
            names.append(name)
            if name not in self._declared and self.knows(name):
                continue
            schema = schema if isinstance(schema, Mapping) else None
            try:
                self.guard.declare(name, self.contract.spec_for(name, schema), replace=True)
            except Exception as exc:
                self._undeclarable(name, schema, exc, at_start)
                continue
            self._declared.add(name)
            self.undeclarable.pop(name, None)
            self.unchecked.pop(name, None)
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

    def _undeclarable(
        self, name: str, schema: Mapping[str, Any] | None, exc: Exception, at_start: bool
    ) -> None:
        fault = contract_fault(self.contract, name, schema, strict=self.guard.strict)
        if fault is not None:
            key, why = fault
            why = why.removeprefix(f"tool {name!r}: ")
            text = f"{self.contract.path}: tool {name!r}, key {key!r}: {why}"
            if at_start:
                raise tg.ContractFileError(text) from None
        else:
            why = str(exc).removeprefix(f"tool {name!r}: ")
            text = f"tool {name!r}: the server's input schema cannot be used: {why}"
        self.undeclarable[name] = text
        if self.policy is not None and self.policy.passes_undeclarable(name):
            # Asked for by the user, for this tool: any arguments, no check, said on its spans.
            self.guard.declare(name, tg.ToolSpec(name=name, json_schema={}), replace=True)
            self._declared.add(name)
            self.unchecked[name] = text
            logger.warning("toolguard-mcp-proxy: %s; its calls run unchecked", text)
        else:
            logger.error("toolguard-mcp-proxy: %s; its calls are refused", text)

    # -- trajectories --------------------------------------------------------------------------
    def trajectory_for(
        self, meta: Any, session: str | None, *, retry_of: tuple[str, Any] | None = None
    ) -> tuple[tg.Trajectory, str | None]:
        """The call's trajectory and call id (see the module's docstring). A step the host
        carried is reserved for the call, so the host's numbering is kept. ``retry_of``:
        (tool, arguments) of a call retrying a round (:mod:`toolguard_mcp.rounds`), which
        takes the step of the round it continues."""
        traj_id, step, call_id = _meta.carried(meta)
        key = self._key(meta, session)
        traj = self._open_once(traj_id, key)
        if step is not None:
            if call_id is None:
                # reserve() is by call id: a step sent without one gets a stand-in id.
                call_id = f"toolguard-step-{step}"
            traj.reserve({call_id: step})
        elif call_id is None and retry_of is not None:
            stand_in = Rounds.call_id(key, *retry_of)
            if stand_in is not None and self.rounds.resume(stand_in):
                call_id = stand_in  # reserved for it when its round paused
        return traj, call_id

    def _key(self, meta: Any, session: str | None) -> str:
        """The registry key of a call's trajectory: the id it carries, else its session's."""
        return _meta.carried(meta)[0] or session or self.process_session

    def _open_once(self, traj_id: str | None, key: str) -> tg.Trajectory:
        """The open trajectory of ``key``, else one opened now: once, when calls of one
        session are checked in threads at once (opening it may wait for the store)."""
        traj = self.guard.find_trajectory(key)
        if traj is not None:
            return traj
        with self._opening.hold(key):
            traj = self.guard.find_trajectory(key)
            return traj if traj is not None else self._open(traj_id or uuid.uuid4().hex, key)

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
        """End every trajectory this object opened that is still open (summaries written),
        once the work still running in threads is done."""
        self.offload.close()
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
        retry: bool = False,
    ) -> tg.PendingCall:
        """``retry``: the call retries an ``input_required`` round (:mod:`.rounds`)."""
        traj, call_id = self.trajectory_for(
            meta, session, retry_of=_retry_of(retry, name, arguments)
        )
        return self.guard.check(name, arguments, call_id=call_id, trajectory=traj, span=span)

    def admit(
        self,
        name: str,
        arguments: Any,
        meta: Any = None,
        session: str | None = None,
        *,
        client: str | None = None,
        span: Any = None,
        retry: bool = False,
    ) -> tg.PendingCall | tg.Rejection:
        """Check a call as a proxy must: a tool denied, changed since pinned (``pin =
        "block"``), undeclarable or not offered is refused without reaching the guard's
        checks; the rest is :meth:`check` ed. Either way the call span carries the proxy's
        notes (:data:`CALL_NOTES`): the host's identity, a tool that runs unchecked or changed."""
        notes: dict[str, Any] = {}
        if client:
            notes[_meta.CLIENT_ATTRIBUTE] = client
        policy = self.policy
        if name in self.unchecked:
            notes[_meta.UNCHECKED_ATTRIBUTE] = self.unchecked[name]
        if policy is not None and name in policy.changed:
            notes[_meta.TOOL_CHANGED_ATTRIBUTE] = policy.changed[name]
        if span is not None and notes and span.is_recording():
            span.set_attributes(notes)
        token = CALL_NOTES.set(notes)
        try:
            refused = self._refusal(name)
            if refused is None:
                return self.check(name, arguments, meta, session, span=span, retry=retry)
            check, message, model_message = refused
            traj, call_id = self.trajectory_for(
                meta, session, retry_of=_retry_of(retry, name, arguments)
            )
            return self.guard.record_rejection(
                name,
                message,
                check=check,
                model_message=model_message,
                call_id=call_id,
                trajectory=traj,
            )
        finally:
            CALL_NOTES.reset(token)

    def _refusal(self, name: str) -> tuple[str, str, str] | None:
        """(check, message, the model's message) for a call refused before any check."""
        missing = f"There is no tool named `{name[:128]}`; use one of the tools listed."
        policy = self.policy
        if policy is not None and policy.denied(name):
            # Told as a tool that does not exist: the model never learns what it is not offered.
            return "schema.tool", f"tool {name[:128]!r} is denied by the contract", missing
        if name in self.undeclarable and name not in self.unchecked:
            text = self.undeclarable[name]
            return (
                "schema.undeclarable",
                f'{text}; refused (on_undeclarable = "pass" lets it run unchecked)',
                f"The tool `{name[:128]}` cannot be checked, so it is not available.",
            )
        if policy is not None and policy.pin == "block" and name in policy.changed:
            return (
                "schema.pin",
                f"tool {name[:128]!r} {policy.changed[name]} since it was pinned; refused "
                "until it is re-pinned",
                f"The tool `{name[:128]}` changed since it was approved, so it is not available.",
            )
        if not self.knows(name):
            return (
                "schema.tool",
                f"no tool named {name[:128]!r} in the server's tool list",
                missing,
            )
        return None

    def record_refusal(
        self, name: str, message: str, meta: Any = None, session: str | None = None
    ) -> None:
        """Count a ``tools/call`` refused before it could be read whole (malformed JSON, an id
        the specification does not allow): a step with cause ``schema``, check
        ``schema.jsonrpc``."""
        traj, call_id = self.trajectory_for(meta, session)
        self.guard.record_rejection(
            name, message, check="schema.jsonrpc", call_id=call_id, trajectory=traj
        )

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
        is the environment's rejection (``state_consistency``), unless it is the server's
        SDK refusing the arguments before the tool ran: blocked then (:mod:`.refusals`)."""
        error = is_error(result)
        if error and refusals.refused_arguments(pending.name, result):
            refusals.reject_arguments(pending)
            verdict = pending.verdict
            assert verdict is not None
            return verdict
        return pending.finish(result_value(result), error=error)

    def answered(
        self, pending: tg.PendingCall, result: Any, params: Mapping[str, Any], session: str | None
    ) -> None:
        """The server answered an admitted call (``params``: its ``tools/call`` params): its
        final result closes it; an ``input_required`` round pauses it (:mod:`.rounds`)."""
        if not input_required(result):
            CallGuard.finish(pending, result)
            return
        step = pending.cancel().step
        meta = params.get("_meta")
        _, carried_step, call_id = _meta.carried(meta)
        key = self._key(meta, session)
        traj = self.guard.find_trajectory(key)
        if step is None or carried_step is not None or traj is None:
            return  # a host's own step: its retry carries it again
        if call_id is None:
            call_id = Rounds.call_id(key, str(params.get("name")), params.get("arguments"))
            if call_id is None:
                return
            self.rounds.pause(call_id)
        traj.reserve({call_id: step})


def _retry_of(retry: bool, name: str, arguments: Any) -> tuple[str, Any] | None:
    return (name, arguments) if retry else None


def _wire(tool: Any) -> dict[str, Any] | None:
    """A tool of a list in its wire form (``name``, ``description``, ``inputSchema``)."""
    if isinstance(tool, Mapping):
        return dict(tool) if isinstance(tool.get("name"), str) else None
    name = getattr(tool, "name", None)
    if not isinstance(name, str):
        return None
    return {
        "name": name,
        "description": getattr(tool, "description", None),
        "inputSchema": getattr(tool, "input_schema", None),
    }
