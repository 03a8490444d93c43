"""Span files of any shape a writer could garble: the report's reader, `toolguard report` and
`toolguard infer --format spans` read them or say what is wrong where (exit status 2 for the
report, a warning and exit 0 for infer), never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import tomllib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import toolguard as tg
from toolguard import _contract as A
from toolguard.__main__ import main

_KEYS = [
    A.TRAJECTORY_ID,
    A.STEP,
    A.VALID,
    A.CAUSE,
    A.DECISION,
    A.TRAJECTORY_LENGTH,
    A.TRAJECTORY_FED,
    A.TRAJECTORY_FIRST_ERROR_CAUSE,
    A.TRAJECTORY_SUCCESS,
    A.GEN_AI_TOOL_NAME,
    A.GEN_AI_TOOL_CALL_ARGUMENTS,
    A.GEN_AI_TOOL_CALL_RESULT,
    A.GEN_AI_TOOL_CALL_ID,
    A.FAILED_CHECKS,
    A.LABEL_PREFIX + "task",
]
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
_DEEP = "[" * 3000 + "]" * 3000  # JSON text deeper than the json module's stack
_NUMBERS = st.integers(-(10**20), 10**20)
# An OTLP AnyValue, well formed or not: the right key with a value of any type, digits past
# int()'s limit, wrong keys, not a mapping at all.
_ANY_VALUE = st.one_of(
    st.builds(lambda v: {"stringValue": v}, st.text(max_size=8) | _JSON | st.just(_DEEP)),
    st.builds(
        lambda v: {"intValue": v}, st.integers(-(2**63), 2**63 - 1) | _NUMBERS.map(str) | _JSON
    ),
    st.builds(lambda v: {"intValue": "9" * v}, st.integers(4000, 5000)),
    st.builds(lambda v: {"doubleValue": v}, _JSON),
    st.builds(lambda v: {"boolValue": v}, st.booleans() | _JSON),
    st.builds(
        lambda v: {"arrayValue": {"values": v}},
        st.lists(st.builds(lambda s: {"stringValue": s}, st.text(max_size=4)), max_size=3) | _JSON,
    ),
    _JSON,
)
_RANDOM_ATTRIBUTES = st.lists(
    st.fixed_dictionaries({"key": st.sampled_from(_KEYS) | _JSON, "value": _ANY_VALUE}),
    max_size=8,
)


def _s(values: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, object]]:
    return values.map(lambda v: {"stringValue": v})


# Mostly what a guard writes, each value now and then of another type or shape: the spans
# reach the readers' deeper paths (a call placed in its trajectory, its arguments parsed).
_CALL_VALUES = {
    A.TRAJECTORY_ID: _s(st.sampled_from(["t1", "t2", ""])),
    A.STEP: st.integers(-2, 4).map(lambda v: {"intValue": str(v)}),
    A.VALID: st.booleans().map(lambda v: {"boolValue": v}),
    A.DECISION: _s(st.sampled_from(["allowed", "logged", "blocked", "cancelled"])),
    A.CAUSE: _s(st.sampled_from(A.CAUSES)),
    A.GEN_AI_TOOL_NAME: _s(st.sampled_from(["find", "cancel", "a\nb"])),
    A.GEN_AI_TOOL_CALL_ARGUMENTS: _s(
        st.dictionaries(st.sampled_from(["id", "q"]), _JSON).map(json.dumps)
        | st.sampled_from([_DEEP, "{", "[1]", "x…"])
    ),
    A.GEN_AI_TOOL_CALL_RESULT: _s(_JSON.map(json.dumps) | st.just(_DEEP)),
    A.TRAJECTORY_LENGTH: st.integers(0, 4).map(lambda v: {"intValue": str(v)}),
    A.TRAJECTORY_FED: st.integers(1, 5).map(lambda v: {"intValue": str(v)}),
}
_REQUIRED = (A.TRAJECTORY_ID, A.STEP, A.GEN_AI_TOOL_CALL_ARGUMENTS)


def _mostly(key: str) -> st.SearchStrategy[object]:
    right = _CALL_VALUES[key]
    return st.one_of(right, right, right, _ANY_VALUE)  # three in four of the right shape


_CALL_ATTRIBUTES = st.fixed_dictionaries(
    {k: _mostly(k) for k in _REQUIRED},
    optional={
        k: _CALL_VALUES[k] if k == A.TRAJECTORY_LENGTH else _mostly(k)
        for k in _CALL_VALUES
        if k not in _REQUIRED
    },
).map(lambda d: [{"key": k, "value": v} for k, v in d.items()])
_ATTRIBUTES = _CALL_ATTRIBUTES | _RANDOM_ATTRIBUTES
_SPAN = st.fixed_dictionaries(
    {
        "traceId": st.sampled_from(["0" * 31 + "1", "0" * 31 + "2"]) | _JSON,
        "spanId": st.sampled_from(["a" * 16, "b" * 16, "c" * 16]) | _JSON,
        "attributes": _ATTRIBUTES | _JSON,
        "status": st.fixed_dictionaries({"code": st.sampled_from([0, 1, 2]) | _JSON}) | _JSON,
    }
)
_EXPORT = st.builds(
    lambda spans: {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]},
    st.lists(_SPAN, max_size=4) | _JSON,
)
# (Numbers JSON parsers take: a 64-bit integer, a finite float; a line orjson refuses is one
# broken line, which the binary lines are already.)
# Lines of spans shaped as a guard writes them, values now and then wrong: a file's first
# broken line ends infer's reading of it, so these reach the readers' deeper paths.
_PLAUSIBLE_LINE = st.lists(
    st.fixed_dictionaries(
        {
            "traceId": st.just("0" * 31 + "1"),
            "spanId": st.sampled_from(["a" * 16, "b" * 16, "c" * 16, "d" * 16]),
            "attributes": _CALL_ATTRIBUTES,
            "status": st.fixed_dictionaries({"code": st.sampled_from([0, 1, 2])}),
        }
    ),
    min_size=1,
    max_size=4,
).map(lambda spans: json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))
_LINE = st.one_of(
    _PLAUSIBLE_LINE,
    _EXPORT.map(json.dumps),
    _JSON.map(json.dumps),
    st.binary(max_size=30).map(lambda b: b.decode("latin-1")),
)


def _write(folder: str, lines: list[str], damage: bytes, ending: str) -> Path:
    path = Path(folder) / "spans.jsonl"
    text = ending.join(lines).encode("utf-8", "surrogatepass") + damage
    path.write_bytes(text)
    return path


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_LINE, max_size=4) | st.lists(_PLAUSIBLE_LINE, max_size=3),
    damage=st.sampled_from([b"", b"\n", b'{"resourceSpans": [', b"\xef\xbb\xbf", b"\xff"]),
    ending=st.sampled_from(["\n", "\r\n"]),
)
def test_the_readers_say_what_is_wrong_or_read(
    lines: list[str], damage: bytes, ending: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(folder, lines, damage, ending)
        for skip_invalid in (False, True):
            try:
                tg.read_records([str(path)], skip_invalid=skip_invalid)
            except tg.ToolGuardError as exc:
                assert str(path) in str(exc) or "no toolguard trajectory" in str(exc)
        out = Path(folder) / "c.toml"
        assert main(["infer", str(path), "--format", "spans", "--out", str(out)]) == 0
        tomllib.loads(out.read_text(encoding="utf-8"))  # the contract written parses


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_EXPORT.map(json.dumps), min_size=1, max_size=3))
def test_the_report_command_never_ends_in_a_traceback(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(folder, lines, b"", "\n")
        for extra in ([], ["--skip-invalid"], ["--format", "json"]):
            stderr = io.StringIO()
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                status = main(["report", str(path), "--quiet", *extra])
            err = stderr.getvalue()
            assert status in (0, 2), err
            assert "Traceback" not in err
            if status == 2:
                assert err.startswith("toolguard: error: ")
