"""Outcomes files that are wrong: an error naming the file (and line where there is one),
never a traceback, never an outcome silently joined to no trajectory."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolguard.report.outcomes import load_outcomes
from toolguard.report.reader import ReportInputError


def _load(tmp_path: Path, name: str, text: str) -> dict[str, bool | None]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_outcomes(str(path))


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        (
            "o.jsonl",
            '{"trajectory_id": ' + "[" * 5000 + "]" * 5000 + ', "success": true}\n',
            "o.jsonl:1: not valid JSON",
        ),
        (
            "o.csv",
            'trajectory_id,success\n"' + "a" * 200_000 + '",true\n',
            "o.csv: not a CSV row after line 1: field larger than field limit",
        ),
        (
            "o.csv",
            '"' + "a" * 200_000 + '",success\nx,true\n',
            "o.csv:1: not a CSV header: field larger than field limit",
        ),
        (
            "o.jsonl",
            '{"trajectory_id": ["A"], "success": true}\n',
            "o.jsonl:1: trajectory_id must be a non-empty string, got ['A']",
        ),
        (
            "o.jsonl",
            '{"trajectory_id": null, "success": true}\n',
            "o.jsonl:1: trajectory_id must be a non-empty string, got None",
        ),
        (
            "o.jsonl",
            '{"trajectory_id": "A", "success": true}\n{"trajectory_id": "A", "success": false}\n',
            "o.jsonl:2: trajectory 'A' is listed again with another outcome (True before, "
            "False here)",
        ),
        (
            "o.csv",
            "trajectory_id,success\nA,true\nA,\n",
            "o.csv:3: trajectory 'A' is listed again with another outcome (True before, None here)",
        ),
    ],
)
def test_a_bad_outcomes_file_is_named(tmp_path: Path, name: str, text: str, why: str) -> None:
    with pytest.raises(ReportInputError) as err:
        _load(tmp_path, name, text)
    assert why in str(err.value)


def test_numeric_ids_and_repeats_that_agree_are_read(tmp_path: Path) -> None:
    text = (
        '{"trajectory_id": 17, "success": true}\n{"trajectory_id": "17", "success": true}\n'
        '{"trajectory_id": "B", "success": null}\n'
    )
    assert _load(tmp_path, "o.jsonl", text) == {"17": True, "B": None}


_CELLS = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["true", "false", "", "null", '"', "\r", "{", "[" * 3000, "a" * 140_000]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    header=st.lists(st.sampled_from(["trajectory_id", "success", "x", ""]) | _CELLS, max_size=3),
    rows=st.lists(st.lists(_CELLS, max_size=3), max_size=4),
    sep=st.sampled_from([",", "\n", '{"trajectory_id": ', ', "success": ']),
)
def test_any_outcomes_file_is_read_or_named(
    header: list[str], rows: list[list[str]], sep: str
) -> None:
    text = "\n".join(sep.join(cells) for cells in [header, *rows])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "outcomes"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            load_outcomes(str(path))
        except ReportInputError as exc:
            assert str(exc).startswith(str(path))
