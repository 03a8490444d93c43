"""Client side: ``GuardedClient`` around the SDK's ``Client``, talking in-process to an
unguarded ``MCPServer``, and carrying the trajectory in ``_meta`` to a guarded one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import toolguard as tg

import toolguard_mcp as tgmcp

from conftest import Telemetry, report_of
from test_mcp_server_middleware import CONTRACT, PHONE, contacts_server, text

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_papers_scenario_from_the_host(span_file: tuple[Any, Path]) -> None:
    from mcp import Client

    provider, path = span_file
    guard = tg.Guard(tracer_provider=provider)
    async with tgmcp.GuardedClient(
        Client(contacts_server()), guard, CONTRACT, labels={"method": "react"}
    ) as client:
        first = await client.call_tool("remove_contact", {"contact_id": PHONE})
        assert first.is_error and "rejected (dependency)" in text(first)
        found = await client.call_tool("search_contacts", {"phone": PHONE})
        contact_id = found.structured_content["result"][0]["id"]
        await client.call_tool("remove_contact", {"contact_id": contact_id})
        again = await client.call_tool("remove_contact", {"contact_id": contact_id})
        assert "invalidated" in text(again)  # removed already: stale, never sent
        client.trajectory.success = True
    assert client.trajectory.ended  # left the block: the summary is written
    (record,) = report_of(path)[0]
    assert (record.length, record.fed, record.success) == (4, 1, True)
    assert record.labels == {"method": "react"}


async def test_three_parallel_calls_take_steps_by_call_id(otel: Telemetry) -> None:
    from mcp import Client

    guard = otel.guard()
    async with Client(contacts_server()) as raw:
        client = tgmcp.GuardedClient(raw, guard, CONTRACT)
        await client.declare_tools()
        with guard.trajectory("turn") as traj:
            traj.reserve(["c1", "c2", "c3"])
            async with anyio.create_task_group() as tg_:
                # Started in reverse order: the steps follow the model's order all the same.
                for call_id in ("c3", "c2", "c1"):
                    tg_.start_soon(
                        lambda c=call_id: client.call_tool(
                            "search_contacts", {"phone": PHONE}, call_id=c
                        )
                    )
    steps = {s.attributes["gen_ai.tool.call.id"]: s.attributes["toolguard.step"]
             for s in otel.call_spans()}  # fmt: skip
    assert steps == {"c1": 1, "c2": 2, "c3": 3}
    assert traj.length == 3 and traj.first_error_depth == 4


async def test_a_tool_that_fails_and_a_tool_the_server_lacks(otel: Telemetry) -> None:
    from mcp import Client

    guard = otel.guard(mode="log")
    async with tgmcp.GuardedClient(Client(contacts_server()), guard, CONTRACT) as client:
        failed = await client.call_tool("export_contacts", {"path": "/tmp/x"})
        assert failed.is_error  # the environment's rejection, handed over as it came
        missing = await client.call_tool("send_fax", {"to": "x"})
        assert missing.is_error and "There is no tool named `send_fax`" in text(missing)
        traj = client.trajectory
        assert [(v.tool, v.decision, v.cause) for v in traj.verdicts] == [
            ("export_contacts", "allowed", "state_consistency"),
            ("send_fax", "blocked", "schema"),  # unknown: not sent, even in log mode
        ]


async def test_meta_carries_the_hosts_trajectory_to_a_guarded_server(otel: Telemetry) -> None:
    from mcp import Client

    server = contacts_server()
    # The server's guard knows only its own contract; the host's guard checks first.
    remote = tgmcp.guard_server(server, otel.guard(), CONTRACT)
    host_guard = tg.Guard()  # tracing off on the host: only the server's spans are looked at
    async with Client(server) as raw:
        client = tgmcp.GuardedClient(raw, host_guard, CONTRACT)
        with host_guard.trajectory("episode-7") as traj:
            await client.call_tool("search_contacts", {"phone": PHONE}, call_id="a")
            await client.call_tool("remove_contact", {"contact_id": "id_8923"}, call_id="b")
    remote.calls.close()
    assert traj.length == 2
    calls = sorted(otel.call_spans(), key=lambda s: s.attributes["toolguard.step"])
    assert [
        (s.attributes["toolguard.trajectory.id"], s.attributes["toolguard.step"],
         s.attributes["gen_ai.tool.call.id"], s.attributes["toolguard.valid"]) for s in calls
    ] == [("episode-7", 1, "a", True), ("episode-7", 2, "b", True)]  # fmt: skip


async def test_a_tool_the_server_adds_later_is_checked_not_refused(otel: Telemetry) -> None:
    """The tool list read at the first call is not the last word: a tool the server offers
    later is looked up when a call names it, and the host's own list_tools declares what it
    returns (before, such a tool was refused as one the server does not list, for good)."""
    from mcp import Client

    def add_note(text: str) -> str:
        """Write a note."""
        return f"noted {text}"

    def add_tag(tag: str) -> str:
        """Tag the address book."""
        return f"tagged {tag}"

    server = contacts_server()
    contract = {**CONTRACT, "add_tag": {"refs": {"tag": "contact_id"}}}
    async with tgmcp.GuardedClient(Client(server), otel.guard(), contract) as client:
        found = await client.call_tool("search_contacts", {"phone": PHONE})
        assert not found.is_error
        server.add_tool(add_note)
        noted = await client.call_tool("add_note", {"text": "hi"})
        assert not noted.is_error and text(noted) == "noted hi"
        server.add_tool(add_tag)
        listed = await client.list_tools()
        assert "add_tag" in {t.name for t in listed.tools}
        assert client.calls.knows("add_tag")  # declared from the host's own list
        tagged = await client.call_tool("add_tag", {"tag": "nobody"})
        assert tagged.is_error and "rejected (dependency)" in text(tagged)  # its contract holds
    decisions = [(v.tool, v.decision) for v in client.trajectory.verdicts]
    assert decisions == [("search_contacts", "allowed"), ("add_note", "allowed"),
                         ("add_tag", "blocked")]  # fmt: skip
