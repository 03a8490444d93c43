"""`toolguard report --format json` against a reference written straight from the protocol's
definitions (docs/protocol.md sections 3 to 5), on random span files: trajectories of any
length (T = 0 too), calls finishing out of step order, a retried export repeating spans, call
spans without a summary and summaries without calls, one trajectory's spans in several
processes (resource blocks), outcomes true/false/unknown, labels, gzip and several files.

The reference shares no code with the report: each figure is its definition, counted again
over the trajectories."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolguard.__main__ import main

_CAUSES = ["schema", "dependency", "precondition", "state_consistency", "information"]
_Z = 1.959963984540054


@dataclass
class Traj:
    """One trajectory as the guard lived it: ``steps[i]`` is None (valid) or the cause."""

    tid: str
    steps: list[str | None]
    success: bool | None
    model: str | None
    summary: bool
    kept: list[bool]  # which call spans reach the files (the others were lost)


_TRAJ = st.builds(
    lambda steps, success, model, summary, kept: (steps, success, model, summary, kept),
    st.lists(st.none() | st.none() | st.sampled_from(_CAUSES), max_size=6),
    st.sampled_from([True, False, None]),
    st.sampled_from(["m1", "m2", None]),
    st.booleans() | st.just(True),
    st.lists(st.booleans() | st.just(True), min_size=6, max_size=6),
)


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _spans(t: Traj, rng: random.Random) -> list[tuple[int, dict[str, Any]]]:
    """(process, span) pairs: what the guards of each process wrote for ``t``."""
    out = []
    for step, cause in enumerate(t.steps, 1):
        if not t.kept[step - 1]:
            continue
        attrs = [
            _attr("gen_ai.operation.name", "execute_tool"),
            _attr("gen_ai.tool.name", "tool"),
            _attr("toolguard.trajectory.id", t.tid),
            _attr("toolguard.step", step),
            _attr("toolguard.valid", cause is None),
        ]
        if cause is not None:
            attrs += [_attr("toolguard.cause", cause), _attr("toolguard.decision", "blocked")]
        out.append((rng.randrange(3), {"attributes": attrs}))
    if t.summary:
        bad = [i for i, c in enumerate(t.steps, 1) if c is not None]
        fed = bad[0] if bad else len(t.steps) + 1
        attrs = [
            _attr("toolguard.trajectory.id", t.tid),
            _attr("toolguard.trajectory.length", len(t.steps)),
            _attr("toolguard.trajectory.first_error_depth", fed),
        ]
        if bad:
            attrs.append(_attr("toolguard.trajectory.first_error.cause", t.steps[fed - 1]))
        if t.success is not None:
            attrs.append(_attr("toolguard.trajectory.success", t.success))
        if t.model is not None:
            attrs.append(_attr("toolguard.label.model", t.model))
        out.append((rng.randrange(3), {"attributes": attrs}))
    return out


def _write_files(trajs: list[Traj], seed: int, folder: Path) -> list[Path]:
    rng = random.Random(seed)
    spans: list[tuple[int, dict[str, Any]]] = []
    for t in trajs:
        spans += _spans(t, rng)
    for n, (_, s) in enumerate(spans):
        s.update(traceId=f"{rng.randrange(3):032x}", spanId=f"{n + 1:016x}", name="x", kind=1)
    spans += [rng.choice(spans) for _ in range(rng.randrange(3))] if spans else []  # retried
    rng.shuffle(spans)  # parallel calls end out of step order; files in any order
    lines: list[list[str]] = [[] for _ in range(rng.randrange(1, 4))]
    i = 0
    while i < len(spans):
        batch = spans[i : i + rng.randrange(1, 5)]
        i += len(batch)
        blocks = [
            {
                "resource": {"attributes": [_attr("service.name", f"p{p}")]},
                "scopeSpans": [
                    {"scope": {"name": "toolguard"}, "spans": [s for q, s in batch if q == p]}
                ],
            }
            for p in sorted({q for q, _ in batch})
        ]
        rng.choice(lines).append(json.dumps({"resourceSpans": blocks}))
    paths = []
    for n, file_lines in enumerate(lines):
        text = "".join(line + "\n" for line in file_lines).encode()
        path = folder / (f"spans{n}.jsonl" + (".gz" if n % 2 else ""))
        path.write_bytes(gzip.compress(text) if n % 2 else text)
        paths.append(path)
    return paths


# -- the reference: one function per definition -------------------------------------------


@dataclass
class Ref:
    length: int
    fed: int
    cause: str | None
    y: bool | None
    model: str | None
    incomplete: bool


def reference_record(t: Traj) -> Ref | None:
    """T, FED, Y by the reading rules: the summary rules; without one, T is the largest step
    seen and FED the first invalid step seen."""
    if t.summary:
        bad = [i for i, c in enumerate(t.steps, 1) if c is not None]
        fed = bad[0] if bad else len(t.steps) + 1
        cause = t.steps[fed - 1] if bad else None
        return Ref(len(t.steps), fed, cause, t.success, t.model, False)
    seen = [(i, c) for i, c in enumerate(t.steps, 1) if t.kept[i - 1]]
    if not seen:
        return None  # nothing of it in the files
    length = max(i for i, _ in seen)
    errs = [(i, c) for i, c in seen if c is not None]
    if errs:
        return Ref(length, errs[0][0], errs[0][1], None, None, True)
    return Ref(length, length + 1, None, None, None, True)


def wilson(k: int, n: int) -> list[float] | None:
    if n == 0:
        return None
    p = k / n
    centre = (p + _Z**2 / (2 * n)) / (1 + _Z**2 / n)
    half = _Z / (1 + _Z**2 / n) * math.sqrt(p * (1 - p) / n + _Z**2 / (4 * n**2))
    return [max(0.0, centre - half), min(1.0, centre + half)]


def reference_metrics(rs: list[Ref]) -> dict[str, Any]:
    n = len(rs)
    ex = [r for r in rs if r.fed == r.length + 1]
    broke = [r for r in rs if r.fed <= r.length]
    known = [r for r in rs if r.y is not None]
    nonempty = [r for r in rs if r.length >= 1]
    k_max = max((r.length for r in rs), default=0)
    at = [sum(r.length >= k for r in rs) for k in range(1, k_max + 1)]
    alive = [sum(r.length >= k and r.fed > k for r in rs) for k in range(1, k_max + 1)]
    rr_el = [r for r in broke if r.y is not None]
    s_el = [r for r in ex if r.y is not None]
    causes = dict.fromkeys(_CAUSES, 0)
    for r in broke:
        assert r.cause is not None
        causes[r.cause] += 1
    return {
        "n": n,
        "ter": len(ex) / n,
        "mean_fed": sum(r.fed for r in rs) / n,
        "auc_pec": (
            math.fsum((r.fed - 1) / r.length for r in nonempty) / len(nonempty)
            if nonempty
            else None
        ),
        "n_empty": n - len(nonempty),
        "pec": [a / n for a in alive],
        "pec_elig": [a / d if d else None for a, d in zip(alive, at, strict=True)],
        "n_at_depth": at,
        "final_success": sum(r.y is True for r in known) / len(known) if known else None,
        "n_outcome_known": len(known),
        "rr": sum(r.y is True for r in rr_el) / len(rr_el) if rr_el else None,
        "rr_eligible": len(rr_el),
        "s": sum(r.y is True for r in s_el) / len(s_el) if s_el else None,
        "causes": causes,
        "incomplete": sum(r.incomplete for r in rs),
        "disagreements": 0,
        "_wilson": {
            "ter": wilson(len(ex), n),
            "final_success": wilson(sum(r.y is True for r in known), len(known)),
            "rr": wilson(sum(r.y is True for r in rr_el), len(rr_el)),
            "s": wilson(sum(r.y is True for r in s_el), len(s_el)),
        },
        "_values": {
            "auc_pec": [(r.fed - 1) / r.length for r in nonempty],
            "mean_fed": [float(r.fed) for r in rs],
        },
    }


def assert_same(got: Mapping[str, Any], want: dict[str, Any]) -> None:
    for key, value in want.items():
        if not key.startswith("_"):
            assert got[key] == value, key
    for key, interval in want["_wilson"].items():
        if interval is None:
            assert got["ci"][key] is None, key
        else:
            assert got["ci"][key] == pytest.approx(interval, rel=1e-12, abs=1e-15), key
    for key, values in want["_values"].items():
        if not values:
            assert got["ci"][key] is None, key
        else:
            lo, hi = got["ci"][key]
            assert min(values) <= lo <= hi <= max(values), key
    if got["n_outcome_known"] == got["n"]:
        # The identity of section 3, when every Y is known.
        ter, s, rr = got["ter"], got["s"] or 0.0, got["rr"] or 0.0
        assert got["final_success"] == pytest.approx(ter * s + (1 - ter) * rr, abs=1e-12)


def _trajs(raw: list[tuple[Any, ...]]) -> list[Traj]:
    return [Traj(f"t{i}", *r) for i, r in enumerate(raw)]


def _report(paths: list[Path], *extra: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["report", *map(str, paths), "--format", "json", "--quiet", *extra])
    assert status == 0, err.getvalue()
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def _expected(trajs: list[Traj]) -> list[Ref]:
    return [r for r in map(reference_record, trajs) if r is not None]


_COHORT = st.lists(_TRAJ, min_size=1, max_size=7)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_COHORT, seed=st.integers(0, 2**32))
def test_the_report_is_the_definitions(
    raw: list[tuple[Any, ...]], seed: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    trajs = _trajs(raw)
    refs = _expected(trajs)
    if not refs:
        return  # nothing in the files: another test's case (the report refuses it)
    paths = _write_files(trajs, seed, tmp_path_factory.mktemp("cohort"))
    report = _report(paths)
    want = reference_metrics(refs)
    assert len(report["groups"]) == 1 and report["groups"][0]["labels"] == {}
    assert_same(report["overall"], want)
    assert_same(report["groups"][0], want)

    by_model = _report(paths, "--by", "model")
    assert_same(by_model["overall"], want)
    models = {r.model for r in refs}
    assert [g["labels"]["model"] for g in by_model["groups"]] == sorted(
        models, key=lambda m: (m is None, m or "")
    )
    for g in by_model["groups"]:
        assert_same(g, reference_metrics([r for r in refs if r.model == g["labels"]["model"]]))


def _rows_file(paths: list[Path], out: Path) -> Path:
    from toolguard.report.clickhouse_rows import request_to_rows

    with out.open("wb") as f:
        for path in paths:
            data = path.read_bytes()
            for line in (gzip.decompress(data) if path.suffix == ".gz" else data).splitlines():
                for row in request_to_rows(orjson.loads(line)):
                    f.write(orjson.dumps(row) + b"\n")
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=_COHORT, seed=st.integers(0, 2**32))
def test_the_sql_report_is_the_definitions(
    raw: list[tuple[Any, ...]], seed: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    pytest.importorskip("chdb", reason="chdb (embedded ClickHouse) comes with the dev extra")
    from chdb_engine import RUN, engine

    from toolguard.report.clickhouse import sql_report
    from toolguard.report.clickhouse_rows import OTEL_TRACES_DDL, insert_file_sql

    trajs = _trajs(raw)
    refs = _expected(trajs)
    if not refs:
        return
    folder = tmp_path_factory.mktemp("sql")
    paths = _write_files(trajs, seed, folder)
    table = f"otel_traces_ref_{folder.name.replace('-', '_')}"
    sess = engine()[1]
    sess.query(OTEL_TRACES_DDL.format(table=table))
    sess.query(insert_file_sql(table, str(_rows_file(paths, folder / "rows.jsonl"))))
    want = reference_metrics(refs)
    assert_same(sql_report(RUN, table)["overall"], want)
    by_model = sql_report(RUN, table, by=["model"])
    for g in by_model["groups"]:
        assert_same(g, reference_metrics([r for r in refs if r.model == g["labels"]["model"]]))
    assert {g["labels"]["model"] for g in by_model["groups"]} == {r.model for r in refs}
