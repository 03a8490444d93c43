"""The guard under the LangChain instrumentations people use (issue 23), with the real
packages: Traceloop's ``opentelemetry-instrumentation-langchain``, OpenInference's
``openinference-instrumentation-langchain`` and LangSmith's OTel mode.

- Traceloop's and OpenInference's open a tool span for each executed call: the guard's
  attributes go on it, so an executed call has exactly one tool span, and a blocked call
  (which never reaches the tool) the guard's own, with its verdict. The run is one trace, so
  ``--cost`` attributes the model spans' tokens (Traceloop's ``gen_ai.usage.*``,
  OpenInference's ``llm.token_count.*``) to the trajectory.
- LangSmith's makes its spans in a background thread after the fact: nothing to write onto,
  so its tool spans stay a second span per executed call. Its root span is parented on the
  span current when the agent is invoked: with the middleware's own trajectory (opened later,
  in ``before_agent``) or one given to ``ToolCallGuard`` its spans are a trace of their own,
  which names the trajectory (the adapter puts its id in LangSmith's run metadata), so
  ``--cost`` still counts its tokens; with the trajectory opened around the call, the run is
  one trace.

In every case the trajectory's figures (T, FED, TER) are those of the same run without an
instrumentation. Each package runs in a process of its own (instrumented_run.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# name -> (module, distribution), in the order they run: Traceloop's last (it leaks context).
MODULES = {
    "openinference": (
        "openinference.instrumentation.langchain",
        "openinference-instrumentation-langchain",
    ),
    "traceloop": (
        "opentelemetry.instrumentation.langchain",
        "opentelemetry-instrumentation-langchain",
    ),
}
SCOPES = {
    "openinference": "openinference.instrumentation.langchain",
    "traceloop": "opentelemetry.instrumentation.langchain",
}
TOKENS = {"n_with_tokens": 1, "mean_input_tokens": 40.0, "mean_output_tokens": 12.0}


def runs(tmp: Path, *names: str) -> dict[str, Any]:
    here = Path(__file__).parent
    done = subprocess.run(
        [sys.executable, str(here / "instrumented_run.py"), str(tmp), *names],
        capture_output=True,
        text=True,
        cwd=here,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def instrumented(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    for module, distribution in MODULES.values():
        pytest.importorskip(module, reason=f"the adapter's [test] extra: {distribution}")
    return runs(tmp_path_factory.mktemp("spans"), "none", *MODULES)


def figures(run: dict[str, Any]) -> tuple[Any, ...]:
    return run["trajectories"], run["ter"], run["mean_fed"]


def by_call(run: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for span in run["tool_spans"]:
        out.setdefault(span["call_id"] or "?", []).append(span)
    return out


@pytest.mark.parametrize("which", list(MODULES))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_each_call_has_one_tool_span_the_instrumentations(
    instrumented: dict[str, Any], which: str, mode: str
) -> None:
    plain, run = instrumented[f"none {mode}"], instrumented[f"{which} {mode}"]
    assert figures(plain) == ([[4, 3]], 0.0, 3.0)  # T = 4, FED = 3: fetch was blocked
    assert figures(run) == figures(plain)
    assert run["traces"] == 1
    calls = by_call(run)
    # No tool span without the guard's attributes.
    assert sorted(calls) == ["b1", "f1", "p1", "p2"]
    for call_id, step, cause in (("p1", 1, None), ("p2", 2, None), ("b1", 4, "state_consistency")):
        (span,) = calls[call_id]  # exactly one, the instrumentation's own, with the verdict
        assert span["scope"] == SCOPES[which], span
        assert (span["step"], span["decision"], span["cause"]) == (step, "allowed", cause)
        assert span["ns"] > 0  # ended, at the end time the instrumentation asked for
    (blocked,) = calls["f1"]  # never reached the tool: the guard's own span
    assert (blocked["scope"], blocked["step"], blocked["decision"]) == ("toolguard", 3, "blocked")
    # The model spans' tokens are the trajectory's: 4 model turns of 10 in, 3 out.
    assert {k: run["cost"][k] for k in TOKENS} == TOKENS
    assert plain["cost"]["n_with_tokens"] == 0


def test_langsmith_otel_mode(instrumented: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("langsmith", reason="LangChain's own dependency")
    got = runs(tmp_path, "langsmith")
    for mode in ("sync", "async"):
        plain = instrumented[f"none {mode}"]
        for how in ("", " around", " given"):
            run = got[f"langsmith {mode}{how}"]
            name = f"{mode}{how}"
            assert figures(run) == figures(plain), name
            calls = by_call(run)
            # The guard's three call spans, and LangSmith's own tool span of each executed
            # call (made after the fact in its exporter's thread), found by call id.
            assert sorted(calls) == ["b1", "f1", "p1", "p2"], name
            for call_id, step in (("p1", 1), ("p2", 2), ("b1", 4)):
                ours, theirs = sorted(calls[call_id], key=lambda s: s["scope"] != "toolguard")
                assert (ours["scope"], ours["step"]) == ("toolguard", step)
                assert (theirs["scope"], theirs["step"]) == ("langsmith", None)
            # LangSmith's trace names the run's trajectory (its run's metadata), so --cost
            # counts its model spans' tokens for it: 4 model turns of 10 in, 3 out.
            (tid,) = run["trajectory_ids"]
            assert {t for _, t in run["joined"]} == {tid}, name
            assert {k: run["cost"][k] for k in TOKENS} == TOKENS, name
        own, around, given = (got[f"langsmith {mode}{how}"] for how in ("", " around", " given"))
        # The middleware's own trajectory opens after LangSmith's root span took its parent,
        # and a trajectory given to ToolCallGuard is not current where the agent is invoked:
        # LangSmith's spans are a trace of their own, joined by the trajectory id it names.
        for run in (own, given):
            assert run["traces"] == 2
            ((theirs, _),) = run["joined"]
            assert run["guard_traces"] != [theirs]
        # Opened around the call, the trajectory is the root's parent: one trace.
        assert around["traces"] == 1


def test_langsmith_otel_mode_legacy_variables(tmp_path: Path) -> None:
    """LANGSMITH_OTEL_ENABLED + LANGSMITH_OTEL_ONLY, the older spelling of the same mode."""
    pytest.importorskip("langsmith", reason="LangChain's own dependency")
    run = runs(tmp_path, "langsmith", "legacy")["langsmith sync"]
    assert figures(run) == ([[4, 3]], 0.0, 3.0)
    assert run["traces"] == 2
    assert {t for _, t in run["joined"]} == set(run["trajectory_ids"])
    assert {k: run["cost"][k] for k in TOKENS} == TOKENS
