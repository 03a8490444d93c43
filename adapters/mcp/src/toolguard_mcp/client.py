"""Client side: a wrapper that checks each ``call_tool`` of an ``mcp`` ``Client`` or
``ClientSession`` before the request leaves the host.

    async with GuardedClient(Client(params), guard, contract) as client:
        result = await client.call_tool("git_show", {"repo_path": ".", "revision": sha})

A blocked call is not sent: it comes back as ``CallToolResult(isError=True)`` with the
guard's message, the way a failed tool call reaches the model. The request carries the
trajectory id, step and call id in ``_meta`` (``propagate=False`` leaves them out), so a
guard in the server's process continues the same trajectory.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import anyio
import toolguard as tg

from . import _meta, _sdk  # noqa: F401  (the SDK, or an ImportError naming the extra)
from .calls import CallGuard, ContractLike
from .results import error_model


class GuardedClient:
    """``client`` with a guarded ``call_tool``; every other attribute is the client's own.

    The trajectory of a call: ``trajectory=`` given to the call, else the one given here,
    else the one current in the context (``with guard.trajectory(...)``), else the wrapper's
    own, one per wrapper (its MCP session), ended by :meth:`end` or leaving ``async with``.
    Tools are declared from the server's tool list on first use, by ``contract``.
    """

    def __init__(
        self,
        client: Any,
        guard: tg.Guard,
        contract: ContractLike | None = None,
        *,
        trajectory: tg.Trajectory | None = None,
        labels: Mapping[str, Any] | None = None,
        propagate: bool = True,
    ) -> None:
        self.client = client
        self.calls = CallGuard(guard, contract, labels=labels)
        self.propagate = propagate
        self._trajectory = trajectory
        self._session = f"mcp-client:{uuid.uuid4().hex}"
        self._own: tg.Trajectory | None = None
        self._listed = False
        self._entered_client = False

    def __getattr__(self, name: str) -> Any:
        if name == "client":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.client, name)

    @property
    def trajectory(self) -> tg.Trajectory:
        """The trajectory a call made now would join (set ``.success`` or labels on it before
        it ends); after :meth:`end`, the wrapper's last one."""
        traj = self._trajectory or tg.current_trajectory()
        if traj is None:
            traj = self._own if self._own is not None else self._session_trajectory()
        return traj

    def _session_trajectory(self) -> tg.Trajectory:
        # Found again by key each time: one evicted or expired is replaced by a new one.
        self._own, _ = self.calls.trajectory_for(None, self._session)
        return self._own

    async def declare_tools(self) -> None:
        """Declare the server's tools on the guard now (otherwise done on first use)."""
        from mcp import ClientSession
        from mcp.types import PaginatedRequestParams

        tools: list[Any] = []
        cursor: str | None = None
        while True:
            if isinstance(self.client, ClientSession):
                page = await self.client.list_tools(params=PaginatedRequestParams(cursor=cursor))
            else:
                page = await self.client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.calls.declare_tools(tools)
        self._listed = True

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        read_timeout_seconds: float | None = None,
        progress_callback: Any = None,
        *,
        call_id: str | None = None,
        trajectory: tg.Trajectory | None = None,
        meta: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Any:
        """``call_tool`` of the wrapped client, checked first. ``call_id``: the model's tool
        call id (its step, when reserved with ``traj.reserve``)."""
        if not self._listed and not self.calls.knows(name):
            await self.declare_tools()
        traj = (
            trajectory or self._trajectory or tg.current_trajectory() or self._session_trajectory()
        )
        pending = self.calls.guard.check(name, arguments, call_id=call_id, trajectory=traj)
        if pending.rejection is not None:
            return error_model(str(pending.rejection))
        if self.propagate:
            meta = _meta.stamped(meta, traj.id, pending.step, call_id)
        try:
            result = await self.client.call_tool(
                name, arguments, read_timeout_seconds, progress_callback, meta=meta, **options
            )
        except anyio.get_cancelled_exc_class():
            pending.cancel()
            raise
        except BaseException as exc:
            if _timed_out(exc):
                pending.cancel()  # the host gave up; not the environment's rejection
            else:
                pending.fail(exc)
            raise
        CallGuard.finish(pending, result)
        return result

    def end(self) -> None:
        """End the wrapper's own trajectory (writes its summary); a no-op for one you passed."""
        self.calls.end_session(self._session)

    async def __aenter__(self) -> GuardedClient:
        enter = getattr(self.client, "__aenter__", None)
        if enter is not None and _unentered(self.client):
            await enter()
            self._entered_client = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.end()
        if self._entered_client:
            self._entered_client = False
            await self.client.__aexit__(exc_type, exc, tb)


def _unentered(client: Any) -> bool:
    """A ``mcp.Client`` not yet connected (its ``session`` raises until it is entered)."""
    from mcp import Client

    if not isinstance(client, Client):
        return False
    try:
        client.session  # noqa: B018
    except RuntimeError:
        return True
    return False


def _timed_out(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp.types import REQUEST_TIMEOUT

    return isinstance(exc, TimeoutError) or (
        isinstance(exc, MCPError) and exc.error.code == REQUEST_TIMEOUT
    )
