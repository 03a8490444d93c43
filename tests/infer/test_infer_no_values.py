"""What `toolguard infer` writes and prints without --show-values holds no recorded value:
property test over runs whose every argument and result value carries a marker."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from runs import run, write

from toolguard.__main__ import main

_MARK = "SECRETVALUE"
# Values the user would not want in a contract file: strings (ids, emails), nested in
# objects and lists, and shared between results and later arguments (what infer traces).
_VALUE = st.builds(lambda n: f"{_MARK}-{n:06d}@mail", st.integers(0, 30))
_NESTED = st.recursive(
    _VALUE,
    lambda inner: (
        st.lists(inner, max_size=2)
        | st.dictionaries(st.sampled_from(["id", "email", "items"]), inner, min_size=1, max_size=2)
    ),
    max_leaves=4,
)
_CALL = st.tuples(
    st.sampled_from(["search", "get", "remove"]),
    st.dictionaries(st.sampled_from(["id", "name", "filter"]), _NESTED, max_size=2),
    st.dictionaries(st.sampled_from(["id", "result", "items"]), _NESTED, max_size=2),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(st.lists(_CALL, min_size=1, max_size=4), min_size=1, max_size=8),
    said=_VALUE,
    explain=st.booleans(),
)
def test_no_recorded_value_is_written_or_printed(
    runs: list[list[tuple[str, dict[str, object], dict[str, object]]]], said: str, explain: bool
) -> None:
    rows = [run(f"r{i}", f"please use {said}", *calls) for i, calls in enumerate(runs)]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "c.toml"
        argv = ["infer", write(folder, rows), "--out", str(out), "--min-support", "1"]
        argv += ["--min-distinct", "1", *["--explain"] * explain]
        printed, errors = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
            assert main(argv) == 0
        for text in (out.read_text(), printed.getvalue(), errors.getvalue()):
            assert _MARK not in text
