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

from . import _meta, _sdk, refusals  # noqa: F401  (the SDK, or an ImportError naming the extra)
from .calls import CallGuard
from .contracts import ContractLike
from .results import error_model


class GuardedClient:
    """``client`` with a guarded ``call_tool``; every other attribute is the client's own.

    The trajectory of a call: ``trajectory=`` given to the call, else the one given here,
    else the one current in the context (``with guard.trajectory(...)``), else the wrapper's
    own, one per wrapper (its MCP session), ended by :meth:`end` or leaving ``async with``.
    Tools are declared by ``contract`` from the server's tool list: read when a call names a
    tool the guard does not know yet (a tool the server added later too), and from every
    list the host reads itself with :meth:`list_tools`.
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
        """Declare the server's tools on the guard now, from its list as it is now (otherwise
        done when a call names a tool the guard does not know)."""
        from mcp import ClientSession
        from mcp.types import PaginatedRequestParams

        tools: list[Any] = []
        cursor: str | None = None
        while True:
            if isinstance(self.client, ClientSession):
                page = await self.client.list_tools(params=PaginatedRequestParams(cursor=cursor))
            else:
                # Read from the server, not the client's cache: it may predate the tool.
                page = await self.client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.calls.declare_tools(tools)

    async def list_tools(
        self,
        *,
        cursor: str | None = None,
        params: Any = None,
        meta: Any = None,
        cache_mode: str | None = None,
    ) -> Any:
        """``list_tools`` of the wrapped client (``cursor``, ``meta``, ``cache_mode`` for a
        ``Client``; ``params`` for a ``ClientSession``): the tools it returns are declared, so
        a tool the server added since is checked like the others."""
        given = {"cursor": cursor, "params": params, "meta": meta, "cache_mode": cache_mode}
        result = await self.client.list_tools(**{k: v for k, v in given.items() if v is not None})
        first = cursor is None and getattr(params, "cursor", None) is None
        # One page is the whole list only when it is the first and the last.
        self.calls.declare_tools(result.tools, complete=first and not result.next_cursor)
        return result

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
        if not self.calls.knows(name):
            # Looked up in the server's list before the guard refuses it (as the proxy does):
            # the server may have added it since the list was read.
            await self.declare_tools()
        # With a shared store, opening the trajectory, the check and the close are round
        # trips: in worker threads, so the app's event loop goes on meanwhile (:mod:`.offload`).
        offload = self.calls.offload
        traj = trajectory or self._trajectory or tg.current_trajectory()
        if traj is None:
            traj = await offload.call(self._session_trajectory)
        pending = await offload.call(
            self.calls.guard.check, name, arguments, call_id=call_id, trajectory=traj
        )
        if pending.rejection is not None:
            return error_model(str(pending.rejection))
        if self.propagate:
            meta = _meta.stamped(meta, traj.id, pending.step, call_id)
        unsendable = _unsendable(name, arguments, meta)
        if unsendable is not None:
            # The SDK would refuse to build the request (arguments that are no object, the
            # JSON text the guard reads, say): it never leaves the host, as without the guard.
            why = f"the mcp client cannot send the call to {name[:128]!r}"
            await offload.call(refusals.reject, pending, why)
            raise unsendable
        try:
            result = await self.client.call_tool(
                name, arguments, read_timeout_seconds, progress_callback, meta=meta, **options
            )
        except anyio.get_cancelled_exc_class():
            pending.cancel()
            raise
        except BaseException as exc:
            code = refusals.error_code(exc)
            if _timed_out(exc):
                pending.cancel()  # the host gave up; not the environment's rejection
            elif refusals.refused_code(code):
                refusals.reject_code(pending, code)  # the server refused it as a request
            else:
                pending.fail(exc)
            raise
        await offload.call(CallGuard.finish, pending, result)
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
        await self.calls.offload.call(self.end)
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


def _unsendable(name: str, arguments: Any, meta: Any) -> Exception | None:
    """What the SDK raises building the ``tools/call`` request, before anything is sent;
    None when it can be sent."""
    from mcp.types import CallToolRequestParams
    from pydantic import ValidationError

    try:
        CallToolRequestParams(name=name, arguments=arguments, _meta=meta)
    except ValidationError as exc:
        return exc
    return None


def _timed_out(exc: BaseException) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp.types import REQUEST_TIMEOUT

    return isinstance(exc, TimeoutError) or (
        isinstance(exc, MCPError) and exc.error.code == REQUEST_TIMEOUT
    )
