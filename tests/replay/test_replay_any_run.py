"""Recorded runs of any shape (messages, tool calls, answers and schemas of the wrong type or
nesting): `toolguard replay` (with a contract) reads them or names the run and what is
wrong, exit status 2; `toolguard infer` warns and exits 0. Never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolguard.infer.cli import main as infer
from toolguard.replay.cli import main as replay

_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
_DEEP = "[" * 3000 + "]" * 3000  # deeper than the json module's stack
_ID = st.sampled_from(["c1", "c2", ""]) | _JSON
_NAME = st.sampled_from(["find", "cancel"]) | _JSON
_ARGUMENTS = (
    st.dictionaries(st.sampled_from(["order_id", "q"]), _JSON | st.sampled_from(["ORD-1"]))
    .map(json.dumps)
    .filter(lambda text: "Infinity" not in text)
    | _JSON
    | st.sampled_from(["{", _DEEP, "null", ""])
)
_CALL = st.fixed_dictionaries(
    {
        "id": _ID,
        "type": st.just("function") | _JSON,
        "function": st.fixed_dictionaries({"name": _NAME, "arguments": _ARGUMENTS}) | _JSON,
    }
)
_ANSWER = _JSON | st.sampled_from(['{"order_id": "ORD-1"}', "Error: no", _DEEP])
_MESSAGE = st.one_of(
    st.fixed_dictionaries({"role": st.just("user"), "content": _JSON | st.text(max_size=10)}),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": _JSON, "tool_calls": st.lists(_CALL) | _JSON}
    ),
    st.fixed_dictionaries(
        {"role": st.just("tool"), "tool_call_id": _ID, "content": _ANSWER},
        optional={"error": _JSON, "requestor": st.just("user") | _JSON},
    ),
    st.fixed_dictionaries({"role": st.sampled_from(["system", "function"]) | _JSON}),
    _JSON,
)
_SCHEMA = st.sampled_from(
    [{"type": "object", "properties": {"order_id": {"type": "string"}}}, {"$ref": "#/x"}]
)
_TOOLS = (
    st.lists(
        st.fixed_dictionaries(
            {
                "type": st.just("function"),
                "function": st.fixed_dictionaries({"name": _NAME, "parameters": _SCHEMA | _JSON}),
            }
        ),
        max_size=2,
    )
    | _JSON
)
_RUN = st.one_of(
    st.fixed_dictionaries(
        {"messages": st.lists(_MESSAGE, max_size=6)},
        optional={
            "id": _JSON,
            "task_id": _JSON,
            "reward": _JSON,
            "success": _JSON,
            "labels": _JSON,
            "tools": _TOOLS,
        },
    ),
    st.lists(_MESSAGE, max_size=5),
    _JSON,
)
_CONTRACT = '[tools.cancel]\nrefs = { order_id = "order_id" }\n'


def _quiet(command: Callable[[list[str]], int], argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = command(argv)
    return status, err.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(_RUN, min_size=1, max_size=4),
    fmt=st.sampled_from(["openai", "tau2"]),
    as_list=st.booleans(),
    skip=st.booleans(),
)
def test_any_recorded_run_is_replayed_or_named(
    runs: list[object], fmt: str, as_list: bool, skip: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "runs.json"
        text = json.dumps(runs) if as_list else "".join(json.dumps(r) + "\n" for r in runs)
        path.write_text(text)
        contract = Path(folder) / "c.toml"
        contract.write_text(_CONTRACT)
        argv = [fmt, str(path), "--out", f"{folder}/spans.jsonl", "--quiet"]
        status, err = _quiet(
            replay, [*argv, "--contract", str(contract), *["--skip-invalid"] * skip]
        )
        assert status in (0, 2) and "Traceback" not in err
        if status == 2:
            assert err.startswith("toolguard: error: ")
        status, err = _quiet(infer, [str(path), "--format", fmt, "--out", f"{folder}/c2.toml"])
        assert status == 0 and "Traceback" not in err
