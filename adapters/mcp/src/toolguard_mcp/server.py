"""Server side: middleware for an ``mcp`` server that checks every ``tools/call``.

    guard = tg.Guard()
    guard_server(server, guard, contract={"remove_contact": {"refs": {"contact_id": "id"}}})

A blocked call is answered with ``CallToolResult(isError=True)`` carrying the guard's message,
without reaching the tool; a result with ``isError`` is the environment's rejection
(``state_consistency``). Where the SDK's OpenTelemetry middleware already opened the
``tools/call {name}`` span, the guard's attributes go on it: one span per call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import toolguard as tg
from opentelemetry import trace

from . import _sdk, refusals  # noqa: F401  (the SDK, or an ImportError naming the extra)
from .calls import CallGuard
from .contracts import ContractLike
from .results import error_model
from .rounds import is_retry

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

SessionKey = Callable[["ServerRequestContext[Any, Any]"], str | None]


class UpstreamTimeout(TimeoutError):
    """Raised by a forwarding handler when the server behind it did not answer in time: the
    middleware records the call as cancelled and answers the host with an error result."""


class GuardMiddleware:
    """``ServerMiddleware`` checking ``tools/call`` with ``calls`` (a :class:`CallGuard`).

    ``session_key(ctx)`` names the MCP session a call belongs to, hence its trajectory when
    the request carries no ``toolguard/trajectory_id``; by default the streamable-HTTP
    session id, else one session per server process (stdio serves one host; the stateless
    2026-07-28 era has no session: such a host sends the id). ``server`` lets the middleware
    declare a tool it meets first from the server's own tool list.
    """

    def __init__(
        self,
        calls: CallGuard,
        *,
        server: Any = None,
        session_key: SessionKey | None = None,
    ) -> None:
        self.calls = calls
        self.server = server
        self.session_key = session_key or self.default_session_key

    def default_session_key(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        headers = getattr(ctx.request, "headers", None)
        if headers is not None:
            sid = headers.get("mcp-session-id")
            if sid:
                return f"mcp-session:{sid}"
        return None  # the process's session

    def client_of(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        """The host of this request: its ``clientInfo`` (``name/version``) from the session's
        initialize, or None."""
        session = getattr(ctx, "session", None)
        params = getattr(session, "client_params", None)
        info = getattr(params, "client_info", None)
        name = getattr(info, "name", None)
        if not isinstance(name, str):
            return None
        version = getattr(info, "version", None)
        return (name + (f"/{version}" if isinstance(version, str) else ""))[:256]

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method != "tools/call" or ctx.request_id is None:
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        name = params.get("name")
        if not isinstance(name, str):
            return await call_next(ctx)  # the SDK rejects it as invalid params
        meta, session = params.get("_meta"), self.session_key(ctx)
        # A tool not in the server's list: in a server, the server answers it its own way
        # (an unknown tool is a protocol error) and the guard counts the step; in a proxy,
        # it is refused (the server behind might run a tool it does not list).
        if (
            not self.calls.knows(name)
            and await self._declare_from_server(ctx)
            and not self.calls.knows(name)
            and self.calls.forward_unknown
            and name not in self.calls.undeclarable
        ):
            await self.calls.offload.call(self.calls.record_unknown, name, meta, session)
            return await call_next(ctx)
        # With a shared store the check and the close are round trips: in worker threads, so
        # the server's event loop goes on meanwhile (:mod:`.offload`).
        pending = await self.calls.offload.call(
            self.calls.admit,
            name,
            params.get("arguments"),
            meta,
            session,
            client=self.client_of(ctx),
            span=self._framework_span(name),
            retry=is_retry(params),
        )
        if isinstance(pending, tg.Rejection):
            return error_model(str(pending))
        if pending.rejection is not None:
            return error_model(str(pending.rejection))
        try:
            result = await call_next(ctx)
        except anyio.get_cancelled_exc_class():
            pending.cancel()
            raise
        except UpstreamTimeout as exc:
            pending.cancel()
            return error_model(str(exc))
        except BaseException as exc:
            code = refusals.error_code(exc)
            if refusals.refused_code(code):
                refusals.reject_code(pending, code)  # the SDK refused the request: not run
            else:
                pending.fail(exc)  # a KeyboardInterrupt and the like are recorded as cancelled
            raise
        await self.calls.offload.call(self.calls.answered, pending, result, params, session)
        return result

    def _framework_span(self, name: str) -> Any:
        """The SDK's ``tools/call {name}`` span, when it is current, recording, and written by
        the provider the guard writes to (else the guard opens its own span)."""
        guard = self.calls.guard
        if not guard.reuse_framework_spans:
            return None
        span = trace.get_current_span()
        if not span.is_recording() or getattr(span, "name", None) != f"tools/call {name}":
            return None
        provider = guard.tracer_provider
        if provider is not None and provider is not trace.get_tracer_provider():
            return None
        return span

    async def _declare_from_server(self, ctx: ServerRequestContext[Any, Any]) -> bool:
        """Declare the server's tools from its own list; False when there is no list to read
        (then only tools declared on the guard pass)."""
        server = self.server
        if server is None:
            return False
        list_tools = getattr(server, "list_tools", None)
        if callable(list_tools) and not hasattr(server, "get_request_handler"):
            self.calls.declare_tools(await list_tools())  # MCPServer
            return True
        entry = server.get_request_handler("tools/list")
        if entry is None:
            return False
        from mcp.types import PaginatedRequestParams

        tools: list[Any] = []
        cursor = None
        while True:
            page = await entry.handler(ctx, PaginatedRequestParams(cursor=cursor))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.calls.declare_tools(tools)
        return True


def guard_server(
    server: Any,
    guard: tg.Guard,
    contract: ContractLike | None = None,
    *,
    labels: Mapping[str, Any] | None = None,
    session_key: SessionKey | None = None,
) -> GuardMiddleware:
    """Guard every ``tools/call`` of ``server`` (an ``mcp`` ``Server`` or ``MCPServer``).

    ``contract``: a :func:`toolguard.load_contract` file, or ``{tool: ToolSpec or options}``;
    each tool is declared on first use by that contract and the server's input schema (tools
    already declared on ``guard`` keep their declaration). The middleware runs innermost, so
    the SDK's OpenTelemetry span is current. Call ``.calls.close()`` at shutdown to write the
    summaries of trajectories still open.
    """
    middleware = GuardMiddleware(
        CallGuard(guard, contract, labels=labels), server=server, session_key=session_key
    )
    server.middleware.append(middleware)
    return middleware
