"""Server side: ``guard_server`` on the SDK's ``MCPServer`` and low-level ``Server``, driven by
an ``mcp`` client over the SDK's in-process transports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
import toolguard as tg
from pydantic import Field

import toolguard_mcp as tgmcp

from conftest import Telemetry, report_of

pytestmark = pytest.mark.anyio

PHONE = "+1-555-0199"
CONTRACT = {
    "search_contacts": {"produces": {"id": "contact_id"}},
    "remove_contact": {
        "refs": {"contact_id": "contact_id"},
        "invalidates": {"contact_id": "contact_id"},
    },
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def contacts_server() -> Any:
    from mcp.server.mcpserver import MCPServer

    contacts = {"id_8923": {"id": "id_8923", "name": "Alice", "phone": PHONE}}
    server = MCPServer("contacts")

    @server.tool()
    def search_contacts(phone: str) -> list[dict[str, str]]:
        """Contacts with this phone number."""
        return [c for c in contacts.values() if c["phone"] == phone]

    @server.tool()
    def remove_contact(contact_id: str) -> str:
        """Remove a contact by id."""
        del contacts[contact_id]
        return f"removed {contact_id}"

    @server.tool()
    def export_contacts(path: str) -> str:
        """Write the address book to a file."""
        raise PermissionError("the address book is read-only")

    return server


def text(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


async def test_the_papers_scenario_on_a_guarded_server(
    span_file: tuple[Any, Path],
) -> None:
    from mcp import Client

    provider, path = span_file
    server = contacts_server()
    middleware = tgmcp.guard_server(server, tg.Guard(tracer_provider=provider), CONTRACT)
    async with Client(server) as client:
        first = await client.call_tool("remove_contact", {"contact_id": PHONE})
        # The model gets the guard's message as the tool's result, and the tool never ran.
        assert first.is_error
        assert text(first).startswith(
            "Error: the call to `remove_contact` was rejected (dependency)"
        )
        found = await client.call_tool("search_contacts", {"phone": PHONE})
        contact_id = found.structured_content["result"][0]["id"]
        removed = await client.call_tool("remove_contact", {"contact_id": contact_id})
        assert text(removed) == "removed id_8923"
    middleware.calls.close()

    records, report = report_of(path)
    (record,) = records
    assert (record.length, record.fed, record.first_error_cause) == (3, 1, "dependency")
    assert report["overall"]["causes"]["dependency"] == 1


async def test_a_tool_that_raises_and_an_unknown_tool(otel: Telemetry) -> None:
    from mcp import Client

    server = contacts_server()
    middleware = tgmcp.guard_server(server, otel.guard(), CONTRACT)
    async with Client(server) as client:
        failed = await client.call_tool("export_contacts", {"path": "/tmp/x"})
        assert failed.is_error and "Error executing tool" in text(failed)  # the server's answer
        unknown = await client.call_tool("send_fax", {})
        assert unknown.is_error  # MCPServer answers an unknown tool with an error result
    middleware.calls.close()
    calls = sorted(otel.call_spans(), key=lambda s: s.attributes["toolguard.step"])
    assert [
        (s.attributes["gen_ai.tool.name"], s.attributes["toolguard.decision"],
         s.attributes["toolguard.check"]) for s in calls
    ] == [
        ("export_contacts", "allowed", "state.error_result"),
        ("send_fax", "blocked", "schema.tool"),
    ]  # fmt: skip
    (summary,) = otel.summaries()
    assert summary.attributes["toolguard.trajectory.length"] == 2


async def test_log_mode_runs_the_call_and_records_every_failure(otel: Telemetry) -> None:
    from mcp import Client

    server = contacts_server()
    middleware = tgmcp.guard_server(server, otel.guard(mode="log"), CONTRACT)
    async with Client(server) as client:
        result = await client.call_tool("remove_contact", {"contact_id": PHONE})
        assert result.is_error and "Error: the call" not in text(result)  # it ran: KeyError
    middleware.calls.close()
    (span,) = otel.call_spans()
    assert span.attributes["toolguard.decision"] == "logged"
    assert span.attributes["toolguard.failed_checks"] == (
        "dependency.contact_id",
        "state.error_result",
    )


def lowlevel_server() -> Any:
    from mcp import types
    from mcp.server import Server

    tools = [
        types.Tool(
            name="search_contacts",
            input_schema={"type": "object", "properties": {"phone": {"type": "string"}},
                          "required": ["phone"]},
        ),
        types.Tool(
            name="remove_contact",
            input_schema={"type": "object", "properties": {"contact_id": {"type": "string"}},
                          "required": ["contact_id"]},
        ),
    ]  # fmt: skip

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        if params.name == "search_contacts":
            return types.CallToolResult(
                content=[types.TextContent(type="text", text='[{"id": "id_8923"}]')]
            )
        return types.CallToolResult(content=[types.TextContent(type="text", text="removed")])

    return Server("contacts", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_meta_continues_a_hosts_trajectory_across_sessions(otel: Telemetry) -> None:
    from mcp import Client

    server = lowlevel_server()
    middleware = tgmcp.guard_server(server, otel.guard(), CONTRACT)

    def meta(step: int, call_id: str) -> dict[str, Any]:
        return {tgmcp.TRAJECTORY_ID: "task-9", tgmcp.STEP: step, tgmcp.CALL_ID: call_id}

    # The host made calls 1 and 2 elsewhere; its calls 3 and 4 reach this server in two
    # sessions. The id found in the first (JSON text, read as JSON) is usable in the second.
    async with Client(server) as first:
        await first.call_tool("search_contacts", {"phone": PHONE}, meta=meta(3, "call-3"))
    async with Client(server) as second:
        removed = await second.call_tool(
            "remove_contact", {"contact_id": "id_8923"}, meta=meta(4, "call-4")
        )
        assert not removed.is_error
        schema = await second.call_tool("remove_contact", {"id": 1}, meta=meta(5, "call-5"))
        assert schema.is_error and "rejected (schema)" in text(schema)
    middleware.calls.close()
    calls = sorted(otel.call_spans(), key=lambda s: s.attributes["toolguard.step"])
    assert [
        (s.attributes["toolguard.trajectory.id"], s.attributes["toolguard.step"],
         s.attributes["gen_ai.tool.call.id"]) for s in calls
    ] == [("task-9", 3, "call-3"), ("task-9", 4, "call-4"), ("task-9", 5, "call-5")]  # fmt: skip
    (summary,) = otel.summaries()
    assert summary.attributes["toolguard.trajectory.length"] == 5  # the host's numbering
    assert summary.attributes["toolguard.trajectory.first_error_depth"] == 5


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_a_call_that_asks_the_user_first_is_one_step(otel: Telemetry, mode: str) -> None:
    """MCP 2026-07-28: the first round answers ``input_required`` and the client retries the
    call with the user's answer. The rounds are one step: the first is cancelled, not
    finished, so its ``invalidates`` does not make the retry (the call that deletes) stale."""
    from confirm_server import CONTRACT, build
    from mcp import Client
    from mcp.types import ElicitResult

    async def confirm(ctx: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"ok": True})

    server = build()
    middleware = tgmcp.guard_server(server, otel.guard(), CONTRACT)
    async with Client(server, mode=mode, elicitation_callback=confirm) as client:
        assert (await client.call_tool("list_items", {})).structured_content == {
            "items": ["it-1", "it-2"]
        }
        deleted = await client.call_tool("delete_item", {"item_id": "it-1"})
        assert not deleted.is_error, text(deleted)
        assert text(deleted) == "deleted it-1"
        again = await client.call_tool("delete_item", {"item_id": "it-1"})
        assert again.is_error and "rejected (dependency)" in text(again)  # invalidated now
    (traj,) = list(middleware.calls._opened)
    assert traj.length == 3
    steps = [(v.step, v.tool, v.decision) for v in traj.verdicts if v.decision != "cancelled"]
    assert steps == [(1, "list_items", "allowed"), (2, "delete_item", "allowed"),
                     (3, "delete_item", "blocked")]  # fmt: skip


async def test_a_tool_whose_schema_has_a_unicode_property_pattern_is_guarded(
    otel: Telemetry,
) -> None:
    # pydantic (Rust's regex) reads \p{L}, so a Python server's schema carries it; the guard
    # declared no such tool and blocked every call of it.
    from mcp import Client
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("names")

    @server.tool()
    def greet(name: Annotated[str, Field(pattern=r"^\p{L}+$")]) -> str:
        """Greet someone by a name of letters."""
        return f"hello {name}"

    middleware = tgmcp.guard_server(server, otel.guard(), {})
    async with Client(server) as client:
        good = await client.call_tool("greet", {"name": "Zoë"})
        bad = await client.call_tool("greet", {"name": "R2D2"})
    middleware.calls.close()
    assert not good.is_error and text(good) == "hello Zoë"
    assert bad.is_error and "does not match" in text(bad)
    decisions = sorted(s.attributes["toolguard.decision"] for s in otel.call_spans())
    assert decisions == ["allowed", "blocked"]
