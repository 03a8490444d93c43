"""The demo's span file, read back with nothing but json, satisfies the span contract (v1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CAUSES = {"schema", "dependency", "precondition", "state_consistency", "information"}
# Check-id prefix -> rank of its cause in the protocol's precedence order.
CHECK_RANK = {
    "schema": 0,
    "dependency": 1,
    "precondition": 2,
    "state": 3,
    "postcondition": 3,
    "information": 4,
}


def _value(v: dict) -> object:
    ((kind, raw),) = v.items()
    if kind == "intValue":
        return int(raw)
    if kind == "arrayValue":
        return [_value(x) for x in raw.get("values", [])]
    return raw


@pytest.fixture(scope="module")
def demo_spans(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("demo") / "spans.jsonl"
    # A subprocess: the demo installs a global tracer provider, which a process sets once.
    done = subprocess.run(
        [sys.executable, "-m", "toolguard.demo", "--out", str(out), "--no-report"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    spans = []
    for line in Path(out).read_text().splitlines():
        request = json.loads(line)
        for resource in request["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    span["attrs"] = {
                        a["key"]: _value(a["value"]) for a in span.get("attributes", [])
                    }
                    spans.append(span)
    return spans


def _calls(spans: list[dict]) -> list[dict]:
    return [s for s in spans if "toolguard.step" in s["attrs"]]


def _summaries(spans: list[dict]) -> list[dict]:
    return [s for s in spans if "toolguard.trajectory.length" in s["attrs"]]


def test_every_call_span_carries_the_contract(demo_spans: list[dict]) -> None:
    calls = _calls(demo_spans)
    assert len(calls) > 50
    for span in calls:
        a = span["attrs"]
        tool = a["gen_ai.tool.name"]
        assert span["name"] == f"execute_tool {tool}"
        assert span["kind"] == 1  # SPAN_KIND_INTERNAL
        assert a["gen_ai.operation.name"] == "execute_tool"
        assert a["gen_ai.tool.type"] == "function"
        assert isinstance(a["toolguard.trajectory.id"], str)
        assert isinstance(a["toolguard.step"], int) and a["toolguard.step"] >= 1
        assert isinstance(a["toolguard.valid"], bool)
        assert a["toolguard.decision"] in {"allowed", "blocked", "logged"}
        # Values are opt-in; the demo does not opt in.
        assert "gen_ai.tool.call.arguments" not in a and "gen_ai.tool.call.result" not in a
        status = span.get("status", {}).get("code", 0)
        if a["toolguard.valid"]:
            assert not {"toolguard.cause", "toolguard.check", "error.type"} & set(a)
            assert status != 2
        else:
            assert a["toolguard.cause"] in CAUSES
            assert a["toolguard.check"] and a["toolguard.message"]
            assert a["toolguard.failed_checks"][0] == a["toolguard.check"]
            ranks = [CHECK_RANK[c.split(".")[0]] for c in a["toolguard.failed_checks"]]
            assert ranks == sorted(ranks)
            assert a["error.type"] == f"toolguard.{a['toolguard.cause']}"
        if a["toolguard.decision"] == "blocked" or a.get("toolguard.cause") == "state_consistency":
            assert status == 2  # STATUS_CODE_ERROR


def test_every_trajectory_has_one_summary_that_matches_its_calls(demo_spans: list[dict]) -> None:
    summaries = _summaries(demo_spans)
    calls = _calls(demo_spans)
    assert len(summaries) == 100  # 50 tasks, each by a ReAct policy and by the Dual-Loop agent
    by_id = {s["attrs"]["toolguard.trajectory.id"]: s for s in summaries}
    assert len(by_id) == 100
    for tid, summary in by_id.items():
        a = summary["attrs"]
        mine = [c for c in calls if c["attrs"]["toolguard.trajectory.id"] == tid]
        steps = sorted(c["attrs"]["toolguard.step"] for c in mine)
        assert steps == list(range(1, a["toolguard.trajectory.length"] + 1))
        invalid = [c["attrs"]["toolguard.step"] for c in mine if not c["attrs"]["toolguard.valid"]]
        fed = min(invalid) if invalid else len(steps) + 1
        assert a["toolguard.trajectory.first_error_depth"] == fed
        if invalid:
            first = next(c for c in mine if c["attrs"]["toolguard.step"] == fed)
            assert a["toolguard.trajectory.first_error.cause"] == first["attrs"]["toolguard.cause"]
        else:
            assert "toolguard.trajectory.first_error.cause" not in a
        assert isinstance(a["toolguard.trajectory.success"], bool)
        assert {"model", "method", "dataset", "task"} <= {
            k.removeprefix("toolguard.label.") for k in a if k.startswith("toolguard.label.")
        }
        # The summary is the parent of its call spans (same process).
        for c in mine:
            assert c["traceId"] == summary["traceId"]
            assert c["parentSpanId"] == summary["spanId"]


def test_plan_verification_spans_are_not_calls(demo_spans: list[dict]) -> None:
    """The Dual-Loop agent's verifications show in the trace under its trajectory, with their
    own operation name, and are never read as calls (no step, nothing counted in T)."""
    verifications = [
        s for s in demo_spans if s["attrs"].get("gen_ai.operation.name") == "verify_plan"
    ]
    assert verifications
    assert not any("toolguard.step" in s["attrs"] for s in verifications)
    summaries = {s["spanId"]: s for s in _summaries(demo_spans)}
    by_id = {s["spanId"]: s for s in demo_spans}
    for span in verifications:
        parent = by_id[span["parentSpanId"]]
        while parent["spanId"] not in summaries:  # a step's span is under its plan's
            parent = by_id[parent["parentSpanId"]]
        assert parent["attrs"]["toolguard.label.loop"] == "dual"


def test_the_demo_shows_every_cause(demo_spans: list[dict]) -> None:
    causes = {
        s["attrs"].get("toolguard.trajectory.first_error.cause") for s in _summaries(demo_spans)
    }
    assert causes >= CAUSES
