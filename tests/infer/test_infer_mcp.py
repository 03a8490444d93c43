"""`python -m benchmarks.infer.mcp_memory` end to end on a few sessions: a scripted agent
against the official Node memory server behind `toolguard mcp-proxy --record`, `toolguard
infer --format mcp` on the recording, and the rule-by-rule comparison with the hand-written
adapters/mcp/examples/memory.toml. Needs node, npm (the server is installed from npm into a
temporary folder, as the MCP adapter's tests install it) and the MCP adapter."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

import toolguard as tg

pytest.importorskip("toolguard_mcp", reason="the MCP adapter: pip install -e adapters/mcp")

from benchmarks.infer.mcp_memory import HAND, INSTALL, find_server, measure, rules_of

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def memory_server(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip(f"node and npm are needed (apt-get install nodejs npm), then {INSTALL}")
    server = find_server(tmp_path_factory.mktemp("npm"), install=True)
    assert server is not None
    return server


def test_recorded_sessions_infer_the_hand_contracts_rules(
    tmp_path: Path, memory_server: list[str]
) -> None:
    summary = measure(memory_server, tmp_path, sessions=8, held_out=2, min_support=3)
    inferred = tg.load_contract(tmp_path / "inferred.toml")  # an ordinary contract file
    tomllib.loads(summary["inferred_text"])
    hand = rules_of(tg.load_contract(HAND))
    rows = {(r["tool"], r["what"], r["path"]): r for r in summary["rows"]}
    assert set(hand) <= set(rows)  # every hand-written rule has its row
    assert set(rules_of(inferred)) <= set(rows)
    for rule, row in rows.items():
        assert row["verdict"] in ("same", "other kind", "hand only", "inferred only"), row
        assert (row["hand"] != "-") == (rule in hand)
    # The entity passing is in every session: the inference finds at least part of it.
    assert any(r["verdict"] == "same" and r["what"] == "refs" for r in rows.values())
    held = summary["held_out"]
    assert set(held) == {"schema-only", "hand-written", "inferred"}
    calls = {row["calls"] for row in held.values()}
    assert len(calls) == 1  # the same sessions under each contract
    for name, row in held.items():
        assert row["mistakes"] == 2 and row["mistakes"] + row["correct"] == row["calls"], name
    assert held["schema-only"]["mistakes_flagged"] == 0  # names are well-typed strings
    # The hand-written contract flags every invented and every deleted name it is given.
    assert held["hand-written"]["mistakes_flagged"] == 2
    assert held["hand-written"]["correct_flagged"] == 0
