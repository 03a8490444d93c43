"""`--mlflow URL --experiment ID`: the options checked before anything is read, and without
MLflow's client the error names the extra. Runs in every venv (no server needed)."""

from __future__ import annotations

import importlib.util

import pytest

from toolguard._cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--experiment", "1"], "--experiment goes with --mlflow URL"),
        (["--mlflow", "http://127.0.0.1:9"], "--mlflow needs --experiment ID"),
        (["s.jsonl", "--mlflow", "http://x", "--experiment", "1"], "give span files, --phoenix or"),
        (["--mlflow", "http://x", "--experiment", "1", "--clickhouse", "http://y"], "--mlflow or"),
    ],
)
def test_bad_options(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", *argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.skipif(importlib.util.find_spec("mlflow") is not None, reason="mlflow installed")
def test_without_the_client_the_extra_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["report", "--mlflow", "http://127.0.0.1:9", "--experiment", "1", "--quiet"])
    assert code == 2
    assert "pip install 'toolguard-otel[mlflow]'" in capsys.readouterr().err
