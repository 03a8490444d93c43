"""``toolguard mcp-proxy --record FILE`` (issue 26): a period of shadow traffic for
``toolguard infer``. Nothing the contract forbids is blocked, and the span file (the core's
own format, read here as the report reads it) holds each call's argument and result values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toolguard as tg

from conftest import PROXY
from raw_client import WAIT, RawProxy
from test_mcp_proxy_fail_closed import call_spans

TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
# A zone must come from an earlier result: a first call naming one is a dependency failure.
CONTRACT = """
mode = "block"

[tools.get_current_time]
refs = { timezone = "zone" }
mode = "block"
"""
CALL = {"name": "get_current_time", "arguments": {"timezone": "Europe/Paris"}}


def text_of(answer: dict[str, Any]) -> str:
    return str(answer["result"]["content"][0]["text"])


@pytest.fixture
def contract(tmp_path: Path) -> Path:
    pytest.importorskip("mcp_server_time", reason="mcp-server-time is in the [test] extra")
    path = tmp_path / "time.toml"
    path.write_text(CONTRACT)
    return path


def test_recording_runs_what_the_contract_blocks_and_keeps_its_values(
    tmp_path: Path, contract: Path
) -> None:
    guarded = RawProxy(tmp_path / "guarded", TIME_SERVER, "--contract", str(contract))
    guarded.initialize()
    blocked = guarded.request("tools/call", CALL)
    assert blocked["result"]["isError"] and "dependency" in text_of(blocked)
    assert guarded.close() == 0
    assert "gen_ai.tool.call.arguments" not in guarded.spans.read_text()  # no opt-in, no values

    shadow = RawProxy(tmp_path / "shadow", TIME_SERVER, "--contract", str(contract), record=True)
    shadow.initialize()
    ran = shadow.request("tools/call", CALL)
    assert not ran["result"].get("isError"), ran
    assert "Europe/Paris" in text_of(ran)  # the server's own answer
    assert shadow.close() == 0
    assert "nothing is blocked" in shadow.stderr()

    (span,) = call_spans(shadow.spans)
    assert span["toolguard.decision"] == "logged"
    assert span["toolguard.cause"] == "dependency"
    assert json.loads(span["gen_ai.tool.call.arguments"]) == CALL["arguments"]
    result = json.loads(span["gen_ai.tool.call.result"])
    assert result["timezone"] == "Europe/Paris"
    # The report reads the file as any span file: one trajectory, its one call.
    records, _ = tg.read_records([str(shadow.spans)])
    assert [(r.length, r.first_error_cause) for r in records] == [(1, "dependency")]


CLASHES = {"--spans": ["--spans", "other.jsonl"], "--no-spans": ["--no-spans"]}
CLASHES["--mode block"] = ["--mode", "block"]


@pytest.mark.parametrize("named", sorted(CLASHES))
def test_record_refuses_options_that_contradict_it(tmp_path: Path, named: str) -> None:
    clash = CLASHES[named]
    proc = subprocess.run(
        [str(PROXY), "--record", str(tmp_path / "r.jsonl"), *clash, "--", *TIME_SERVER],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert proc.returncode == 2
    assert f"drop {named}" in proc.stderr
    assert not (tmp_path / "r.jsonl").exists()
