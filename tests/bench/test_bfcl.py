"""BFCL harness, small and fast: the first 20 base tasks, ground truth plus wrong-id injection.

Runs in CI (``make test`` installs the pinned bfcl-eval); skips with a reason where it is
not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval not installed (make test installs it)")

from opentelemetry.sdk.trace import TracerProvider

from benchmarks.bfcl.data import CallParseError, function_docs, load_tasks, parse_call
from benchmarks.bfcl.evaluate import (
    EXPECTED_CAUSES,
    evaluate_mutation,
    run_ground_truth,
)
from benchmarks.bfcl.guarded import Harness
from benchmarks.bfcl.mutations import MUTATION_CLASSES, mutate, normalised_calls
from benchmarks.bfcl.results import read_result_file, write_result_file
from benchmarks.bfcl.schema import TYPE_MAP, to_json_schema

CLASSES = (
    "GorillaFileSystem",
    "MathAPI",
    "MessageAPI",
    "TwitterAPI",
    "TicketAPI",
    "TradingBot",
    "TravelAPI",
    "VehicleControlAPI",
)


@pytest.fixture(scope="module")
def tasks():
    return load_tasks(("base",), limit=20)


@pytest.fixture(scope="module")
def harness():
    return Harness(TracerProvider())


def _types(node, found):
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            found.add(node["type"])
        for key, value in node.items():
            if key == "properties":
                for prop in value.values():
                    _types(prop, found)
            elif key in ("items", "parameters"):
                _types(value, found)


def test_every_bfcl_type_name_in_the_docs_is_mapped():
    found: set[str] = set()
    n = 0
    for cls in CLASSES:
        for doc in function_docs(cls).values():
            _types(doc, found)
            schema = to_json_schema(doc)
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            n += 1
    assert n == 128  # the count of multi-turn functions
    assert found <= set(TYPE_MAP), found - set(TYPE_MAP)
    assert {"dict", "float", "integer", "string", "array", "boolean"} <= found


def test_calls_are_parsed_as_literals_never_evaluated():
    call = parse_call("mv(source='a.txt', destination='b')")
    assert (call.name, call.kwargs) == ("mv", {"source": "a.txt", "destination": "b"})
    assert parse_call("sort('f.txt')").args == ("f.txt",)
    with pytest.raises(CallParseError):
        parse_call("cat(file_name=__import__('os').getcwd())")


def test_ground_truth_runs_clean_on_the_backend_and_through_the_guard(tasks, harness):
    result = run_ground_truth(tasks, harness)
    assert result.n_tasks == 20 and result.n_calls > 60
    assert result.env_rejections == 0
    assert result.not_successful == []  # BFCL's own per-turn check on its own answers
    assert result.flags == [], [(f.task, f.tool, f.check, f.message) for f in result.flags]


def test_wrong_ids_are_caught_before_execution_at_the_true_depth(tasks, harness):
    outcomes = [
        evaluate_mutation(t, m, harness)
        for t in tasks
        if (m := mutate(t, "wrong_id", seed=0)) is not None
    ]
    assert len(outcomes) >= 15
    for o in outcomes:
        # The raw backend decides where the trajectory broke; the mutation only says where
        # it was edited.
        assert o.env_fed <= o.length, (o.task, o.detail)
        assert o.verdict == "guard", (o.task, o.detail, o.guard_check)
        assert o.guard_fed == o.env_fed, (o.task, o.detail, o.guard_fed, o.env_fed)
        assert o.guard_cause in EXPECTED_CAUSES["wrong_id"], (o.task, o.guard_cause)


def test_mutations_are_seeded(tasks):
    a = [mutate(t, "swap", seed=1) for t in tasks]
    b = [mutate(t, "swap", seed=1) for t in tasks]
    c = [mutate(t, "swap", seed=2) for t in tasks]
    assert [m.calls for m in a if m] == [m.calls for m in b if m]
    assert [m.position for m in a if m] != [m.position for m in c if m]


def test_result_files_round_trip_and_report_per_model(tasks, tmp_path):
    gt = [(t.id, len(t.questions), normalised_calls(t)) for t in tasks]
    mutants = [
        (t.id, len(t.questions), m.calls)
        for t in tasks
        if (m := mutate(t, "wrong_id", seed=0)) is not None
    ]
    gt_file = tmp_path / "gt-model" / "multi_turn" / "BFCL_v4_multi_turn_base_result.json"
    mut_file = tmp_path / "bad-model" / "multi_turn" / "BFCL_v4_multi_turn_base_result.json"
    write_result_file(gt_file, gt, style="fc")
    write_result_file(mut_file, mutants, style="prompting")
    assert read_result_file(gt_file) == {i: calls for i, _, calls in gt}
    assert read_result_file(mut_file) == {i: calls for i, _, calls in mutants}

    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bfcl",
            "results",
            str(gt_file),
            str(mut_file),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    groups = {
        g["labels"]["model"]: g for g in json.loads((out / "report.json").read_text())["groups"]
    }
    assert set(groups) == {"gt-model", "bad-model"}
    assert groups["gt-model"]["n"] == 20 and groups["gt-model"]["ter"] == 1.0
    assert groups["gt-model"]["final_success"] == 1.0
    bad = groups["bad-model"]
    assert bad["n"] == len(mutants) and bad["ter"] == 0.0
    assert bad["causes"]["schema"] == 0 and bad["rr_eligible"] == len(mutants)


def test_rules_never_raise_on_mutated_calls(tasks, harness):
    """A predicate that raises is a guard error (fail closed): a bug in a rule, not a verdict."""
    broken = []
    for kind in MUTATION_CLASSES:
        for t in tasks:
            m = mutate(t, kind, seed=0)
            if m is None:
                continue
            run = harness.run(t, m.calls, f"{t.id}/{kind}", {"method": kind})
            broken += [
                (t.id, kind, v.check, v.message)
                for v in run.verdicts
                if v.message and "guard error" in v.message
            ]
    assert broken == []
