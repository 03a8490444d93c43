"""Hostile numbers and types in span files (issue 11, "The report on hostile files").

Huge or absurd steps, lengths and first-error depths, and attributes of the wrong type, are a
clear ``file:line`` error (or skipped with ``skip_invalid``), never an OverflowError, a
MemoryError, a TypeError or gigabytes of per-depth lists. The 1.1 string-typed values stay
valid."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_report_spans import call, export, kv, raw, span, summary, trajectory, write

from toolguard import _contract as A
from toolguard._cli import main
from toolguard.report.build import build_report
from toolguard.report.collect import DEFAULT_MAX_LENGTH
from toolguard.report.read import read_records
from toolguard.report.reader import ReportInputError
from toolguard.report.render import render_csv, render_markdown, render_text

GOOD = export(*trajectory("good", 2, 2))
INT_KEYS = (A.STEP, A.TRAJECTORY_LENGTH, A.TRAJECTORY_FED)


def _with(key: str, any_value: Any) -> dict[str, Any]:
    """A span of trajectory "t" whose attribute ``key`` holds ``any_value``."""
    if key == A.STEP:
        return span([kv(A.TRAJECTORY_ID, "t"), raw(A.STEP, any_value), kv(A.VALID, True)])
    attrs = {A.TRAJECTORY_LENGTH: {"intValue": "2"}, A.TRAJECTORY_FED: {"intValue": "3"}}
    attrs[key] = any_value
    return span([kv(A.TRAJECTORY_ID, "t"), *(raw(k, v) for k, v in attrs.items())])


def _error(path: Path, **kw: Any) -> str:
    with pytest.raises(ReportInputError) as info:
        read_records([str(path)], **kw)
    return str(info.value)


ABSURD = [
    {"intValue": 10**30},  # a JSON number orjson reads as a float
    {"intValue": str(10**30)},
    {"intValue": 2**63},
    {"intValue": str(2**63)},
    {"intValue": str(-(2**63))},
    {"intValue": 10**12},
    {"intValue": "200000000"},
    {"intValue": "1e30"},
    {"stringValue": "1e30"},
    {"stringValue": str(10**30)},
    {"intValue": 1e30},
    {"intValue": -1},
    {"intValue": "-7"},
    {"intValue": "9" * 5000},  # longer than int()'s digit limit
    {"intValue": True},
    {"intValue": 2.5},
    {"intValue": None},
    {"intValue": [3]},
    {"doubleValue": 3.0},
    {"stringValue": "three"},
    {},
]


@pytest.mark.parametrize("key", INT_KEYS)
@pytest.mark.parametrize("any_value", ABSURD, ids=lambda v: json.dumps(v)[:30])
def test_absurd_numbers_are_a_file_line_error(
    tmp_path: Path, key: str, any_value: dict[str, Any]
) -> None:
    path = write(tmp_path / "s.jsonl", [GOOD, export(_with(key, any_value))])
    message = _error(path)
    assert message.startswith(f"{path}:2: {key}")
    assert len(message) < 400  # the value is quoted, but never in full
    # Skipped and counted with skip_invalid; the good line still reads.
    records, stats = read_records([str(path)], skip_invalid=True)
    assert [r.trajectory_id for r in records] == ["good"] and stats.skipped == 1


@pytest.mark.parametrize("key", INT_KEYS)
def test_zero_is_only_valid_for_the_length(tmp_path: Path, key: str) -> None:
    path = write(tmp_path / "s.jsonl", [export(_with(key, {"intValue": "0"}))])
    if key == A.TRAJECTORY_LENGTH:
        # T = 0 is a legal trajectory; its FED of 3 is out of range: a disagreement, clamped.
        (r,), _ = read_records([str(path)])
        assert (r.length, r.fed) == (0, 1) and r.disagreements
    else:
        assert f"{key} must be >= 1, got 0" in _error(path)


def test_a_huge_length_allocates_nothing(tmp_path: Path) -> None:
    """T = 2*10**8 would be 2*10**8 entries in each per-depth list: refused before reading on."""
    path = write(tmp_path / "s.jsonl", [export(summary("t", 2 * 10**8, 2 * 10**8 + 1))])
    tracemalloc.start()
    try:
        message = _error(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "exceeds the maximum trajectory length 100,000" in message and "--max-length" in message
    assert peak < 5_000_000


def test_the_length_limit_is_documented_and_overridable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert DEFAULT_MAX_LENGTH == 100_000
    doc = (Path(__file__).parents[2] / "docs" / "report-limits.md").read_text(encoding="utf-8")
    assert "100,000" in doc and "--max-length" in doc and "max_length" in doc
    t = 150_000
    path = write(tmp_path / "s.jsonl", [export(call("t", t), summary("t", t, t + 1))])
    assert "150000 exceeds the maximum trajectory length" in _error(path)
    records, _ = read_records([str(path)], max_length=t)
    report = build_report(records, resamples=10)
    assert len(report["overall"]["pec"]) == t and report["overall"]["ter"] == 1.0
    assert main(["report", str(path), "--max-length", str(t - 1), "--quiet"]) == 2
    assert "--max-length" in capsys.readouterr().err
    assert main(["report", str(path), "--max-length", str(t), "--quiet", "--depths", "3"]) == 0
    assert "PEC@k" in capsys.readouterr().out
    with pytest.raises(ValueError, match="max_length"):
        read_records([str(path)], max_length=0)


@pytest.mark.parametrize(
    "tid_value",
    [
        {"intValue": 5},
        {"intValue": "5"},
        {"stringValue": 5},
        {"stringValue": None},
        {"stringValue": ""},
        {"stringValue": ["a"]},
        {"boolValue": True},
        {"doubleValue": 1.5},
        {"arrayValue": {"values": [{"stringValue": "a"}]}},
    ],
    ids=lambda v: json.dumps(v),
)
def test_a_trajectory_id_that_is_not_a_string(tmp_path: Path, tid_value: dict[str, Any]) -> None:
    """Mixed with string ids, a non-string id used to reach ``sorted()``: TypeError."""
    bad = span([raw(A.TRAJECTORY_ID, tid_value), kv(A.STEP, 1), kv(A.VALID, True)])
    path = write(tmp_path / "s.jsonl", [GOOD, export(bad), export(*trajectory("z", 1))])
    assert _error(path).startswith(f"{path}:2: {A.TRAJECTORY_ID} is ")
    records, stats = read_records([str(path)], skip_invalid=True)
    assert [r.trajectory_id for r in records] == ["good", "z"] and stats.skipped == 1


@pytest.mark.parametrize(
    ("key", "any_value"),
    [
        (A.VALID, {"intValue": "1"}),
        (A.VALID, {"stringValue": "yes"}),
        (A.VALID, {"stringValue": "True"}),
        (A.CAUSE, {"intValue": "3"}),
        (A.CAUSE, {"arrayValue": {"values": []}}),
        (A.TRAJECTORY_SUCCESS, {"intValue": "1"}),
        (A.TRAJECTORY_SUCCESS, {"stringValue": "maybe"}),
        (A.TRAJECTORY_FIRST_ERROR_CAUSE, {"boolValue": True}),
        (A.LABEL_PREFIX + "model", {"intValue": "4"}),
        (A.LABEL_PREFIX + "model", {"kvlistValue": {}}),
    ],
)
def test_attributes_of_the_wrong_type(tmp_path: Path, key: str, any_value: dict) -> None:
    if key in (A.VALID, A.CAUSE):
        attrs = [kv(A.TRAJECTORY_ID, "t"), kv(A.STEP, 1), kv(A.VALID, False), kv(A.CAUSE, "schema")]
    else:
        attrs = [kv(A.TRAJECTORY_ID, "t"), kv(A.TRAJECTORY_LENGTH, 1), kv(A.TRAJECTORY_FED, 1)]
        attrs.append(kv(A.TRAJECTORY_FIRST_ERROR_CAUSE, "schema"))
    attrs = [a for a in attrs if a["key"] != key] + [raw(key, any_value)]
    path = write(tmp_path / "s.jsonl", [GOOD, export(span(attrs))])
    message = _error(path)
    assert message.startswith(f"{path}:2: {key} is not a ")


def test_string_typed_values_of_1_1_read_like_the_declared_types(tmp_path: Path) -> None:
    def s(key: str, text: str) -> dict[str, Any]:
        return raw(key, {"stringValue": text})

    as_strings = [
        span([kv(A.TRAJECTORY_ID, "t"), s(A.STEP, "1"), s(A.VALID, "true")]),
        span(
            [kv(A.TRAJECTORY_ID, "t"), s(A.STEP, "2"), s(A.VALID, "false"), kv(A.CAUSE, "schema")]
        ),
        span(
            [
                kv(A.TRAJECTORY_ID, "t"),
                s(A.TRAJECTORY_LENGTH, "2"),
                s(A.TRAJECTORY_FED, "2"),
                s(A.TRAJECTORY_SUCCESS, "false"),
                s(A.FAILED_CHECKS, '["schema.args"]'),
            ]
        ),
    ]
    typed = [call("t", 1), call("t", 2, False, "schema"), summary("t", 2, 2, success=False)]
    a = read_records([str(write(tmp_path / "a.jsonl", [export(*as_strings)]))])[0]
    b = read_records([str(write(tmp_path / "b.jsonl", [export(*typed)]))])[0]
    assert a == b and a[0].fed == 2 and a[0].first_error_cause == "schema" and not a[0].success
    # Integers as JSON numbers, as some writers do, and integral floats.
    numbers = [
        span([kv(A.TRAJECTORY_ID, "t"), raw(A.STEP, {"intValue": 1}), kv(A.VALID, True)]),
        span([kv(A.TRAJECTORY_ID, "t"), raw(A.STEP, {"intValue": 2.0}), kv(A.VALID, True)]),
    ]
    (r,), _ = read_records([str(write(tmp_path / "n.jsonl", [export(*numbers)]))])
    assert (r.length, r.fed) == (2, 3)


# -- fuzzing: whatever the values, a record or a file:line error --------------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**40), 10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["3", "-3", "0", "1e30", str(2**63), "true", "false", " 2", "1_0"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
_any_value = st.one_of(
    st.dictionaries(
        st.sampled_from(["intValue", "stringValue", "boolValue", "doubleValue", "arrayValue"]),
        _json,
        max_size=2,
    ),
    _json,
)
_key = st.sampled_from(
    [
        A.TRAJECTORY_ID,
        A.STEP,
        A.VALID,
        A.CAUSE,
        A.TRAJECTORY_LENGTH,
        A.TRAJECTORY_FED,
        A.TRAJECTORY_FIRST_ERROR_CAUSE,
        A.TRAJECTORY_SUCCESS,
        A.LABEL_PREFIX + "model",
        "other.key",
    ]
)
_base = st.sampled_from(["call", "summary", "bare"])


@st.composite
def _hostile_span(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(_base)
    attrs: dict[str, Any] = {A.TRAJECTORY_ID: {"stringValue": draw(st.sampled_from(["t", "u"]))}}
    if kind == "call":
        attrs[A.STEP] = {"intValue": "1"}
        attrs[A.VALID] = {"boolValue": False}
    elif kind == "summary":
        attrs[A.TRAJECTORY_LENGTH] = {"intValue": "1"}
        attrs[A.TRAJECTORY_FED] = {"intValue": "2"}
    for key, v in draw(st.lists(st.tuples(_key, _any_value), max_size=3)):
        attrs[key] = v
    return span(raw(k, v) for k, v in attrs.items())


FUZZ = settings(
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(spans=st.lists(_hostile_span(), min_size=1, max_size=4))
def test_fuzzed_values_give_records_or_a_file_line_error(
    tmp_path: Path, spans: list[dict[str, Any]]
) -> None:
    path = write(tmp_path / "fuzz.jsonl", [GOOD, *(export(s) for s in spans)])
    limit = 50
    try:
        records, _ = read_records([str(path)], max_length=limit)
    except ReportInputError as exc:
        assert str(exc).startswith(f"{path}:"), exc
        assert str(exc).split(":")[1] in {str(i) for i in range(2, len(spans) + 2)}
    else:
        assert all(r.length <= limit for r in records)
        assert all(
            isinstance(v, str) for r in records for v in (r.trajectory_id, *r.labels.values())
        )
        report = build_report(records, by=["model"], resamples=5)
        render_text(report), render_markdown(report), render_csv(report)
    # With skip_invalid nothing but well-typed records come out, the good one always.
    records, stats = read_records([str(path)], skip_invalid=True, max_length=limit)
    assert "good" in {r.trajectory_id for r in records} and stats.skipped <= len(spans)
    json.dumps(build_report(records, by=["model"], resamples=5), allow_nan=False)


def test_the_bootstrap_is_bounded_whatever_the_cohort(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cohort of all-distinct values (easy to write by hand) once made a resamples x distinct
    matrix of counts: 10^5 values, 800 MB. Now in blocks, with the same interval (the same
    draws; only the last bit of a sum may differ between block sizes)."""
    from toolguard.report import metrics

    values = [i / 20_000 for i in range(20_000)]
    tracemalloc.start()
    try:
        blocked = metrics.bootstrap_mean_ci(values, resamples=200)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20_000_000  # the one-shot matrix alone was 32 MB
    monkeypatch.setattr(metrics, "_BOOTSTRAP_CELLS", 1 << 40)  # one block: the old way
    assert metrics.bootstrap_mean_ci(values, resamples=200) == pytest.approx(blocked, rel=1e-12)
    monkeypatch.setattr(metrics, "_BOOTSTRAP_CELLS", 1)  # one row per block
    assert metrics.bootstrap_mean_ci(values, resamples=200) == pytest.approx(blocked, rel=1e-12)


def test_a_negative_seed_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "s.jsonl", [GOOD])
    assert main(["report", str(path), "--seed", "-1"]) == 2
    assert capsys.readouterr().err == "toolguard: error: --seed must be >= 0\n"
