"""``toolguard mcp-proxy --http``: the same guard over streamable HTTP on the loopback
interface, where the SDK's own ``tools/call`` span carries the guard's attributes."""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import anyio
import pytest

from conftest import HERE, PROXY, report_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_http_proxy_one_span_per_call(tmp_path: Path) -> None:
    from mcp import Client

    spans = tmp_path / "spans.jsonl"
    proxy = await anyio.open_process(
        [str(PROXY), "--http", "127.0.0.1:0", "--spans", str(spans),
         "--", sys.executable, str(HERE / "fake_server.py")],
        stdin=None,
    )  # fmt: skip
    try:
        assert proxy.stderr is not None
        seen = ""
        with anyio.fail_after(120):  # a bound on start-up, not a measurement
            async for chunk in proxy.stderr:
                seen += chunk.decode()
                found = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp)", seen)
                if found:
                    break
        assert found, seen
        async with Client(found.group(1)) as client:
            assert {t.name for t in (await client.list_tools()).tools} == {"echo", "crash", "hang", "big"}
            ok = await client.call_tool("echo", {"text": "over http"})
            assert ok.content[0].text == "over http"
            bad = await client.call_tool("echo", {"txt": "typo"})
            assert bad.is_error and "rejected (schema)" in bad.content[0].text
    finally:
        proxy.send_signal(signal.SIGTERM)
        with anyio.fail_after(60):
            code = await proxy.wait()
    assert code == 0

    names = []
    for line in spans.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    keys = {a["key"] for a in span["attributes"]}
                    names.append((span["name"], "toolguard.step" in keys))
    call_spans = [name for name, is_call in names if is_call]
    # The guard wrote onto the SDK's SERVER span: no second execute_tool span per call.
    assert call_spans == ["tools/call echo", "tools/call echo"]
    assert not any(name.startswith("execute_tool") for name, _ in names)
    (record,) = report_of(spans)[0]
    assert (record.length, record.fed, record.first_error_cause) == (2, 2, "schema")
