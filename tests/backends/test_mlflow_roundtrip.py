"""Guarded trajectories -> the standard OTLP/HTTP exporter -> a real MLflow tracking server
(`mlflow server`, its /v1/traces endpoint) -> read back with `toolguard report --mlflow URL
--experiment ID` (MLflow's own client) -> the same report as the file of the same spans.

Needs mlflow (the server; the report needs only mlflow-skinny, the `mlflow` extra): `make
test-backends` installs it into .venv-backends; elsewhere these tests are skipped."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mlflow") is None, reason="needs mlflow: run make test-backends"
)

START_TIMEOUT_S = float(os.environ.get("TOOLGUARD_MLFLOW_START_TIMEOUT", "240"))
INGEST_TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from phoenix_server import free_port

    work = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = shutil.which("mlflow", path=str(Path(sys.executable).parent)) or "mlflow"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MLFLOW_"))}
    with open(work / "server.log", "wb") as log:
        process = subprocess.Popen(
            [command, "server", "--host", "127.0.0.1", "--port", str(port),
             "--backend-store-uri", f"sqlite:///{work / 'mlflow.db'}",
             "--default-artifact-root", str(work / "artifacts"), "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=work,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:  # ready by its own signal: uvicorn's line, then /health answering
            said = b"Uvicorn running on" in (work / "server.log").read_bytes()
            if said and _answers(f"{url}/health"):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                tail = (work / "server.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"mlflow server at {url} did not start:\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@pytest.fixture(scope="module")
def sent(mlflow_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from backend_workload import run_workload
    from mlflow import MlflowClient
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from otlp_retry import EXPORT_TIMEOUT_S, FLUSH_TIMEOUT_MS, Retrying
    from toolguard.runtime.span_file import SpanFileExporter

    experiment = MlflowClient(tracking_uri=mlflow_server).create_experiment("toolguard")
    memory = InMemorySpanExporter()
    with pytest.MonkeyPatch.context() as env:
        # The standard variables only, as for Phoenix; MLflow's experiment is a header.
        env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{mlflow_server}/v1/traces")
        env.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"x-mlflow-experiment-id={experiment}")
        env.setenv("OTEL_SERVICE_NAME", "toolguard-mlflow")
        provider = TracerProvider(resource=Resource.create())
        provider.add_span_processor(SimpleSpanProcessor(memory))
        exporter = Retrying(OTLPSpanExporter(timeout=EXPORT_TIMEOUT_S))
        provider.add_span_processor(BatchSpanProcessor(exporter))
        run_workload(provider)
        assert provider.force_flush(FLUSH_TIMEOUT_MS)
        provider.shutdown()
    assert exporter.dropped == 0
    spans = list(memory.get_finished_spans())
    original = tmp_path_factory.mktemp("original") / "original.jsonl"
    SpanFileExporter(original).export(spans)
    traces = {s.context.trace_id for s in spans if s.context is not None}
    _wait_for_traces(mlflow_server, experiment, len(traces), len(spans))
    return {"experiment": experiment, "original": original, "spans": len(spans)}


def _wait_for_traces(url: str, experiment: str, traces: int, spans: int) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=url)
    deadline = time.monotonic() + INGEST_TIMEOUT_S
    seen = 0
    while time.monotonic() < deadline:
        found, token = [], None
        while True:
            page = client.search_traces(locations=[experiment], max_results=100, page_token=token)
            found += page
            token = page.token
            if not token:
                break
        seen = sum(len(t.data.spans) for t in found)
        if len(found) >= traces and seen >= spans:
            return
        time.sleep(0.5)
    pytest.fail(f"MLflow at {url} holds {seen} of the {spans} spans sent")


def test_the_report_from_mlflow_is_the_files(
    mlflow_server: str, sent: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from toolguard._cli import main

    argv = ["--by", "model,method", "--format", "json", "--quiet"]
    assert main(["report", "--mlflow", mlflow_server, "--experiment", sent["experiment"],
                 *argv]) == 0  # fmt: skip
    from_mlflow = json.loads(capsys.readouterr().out)
    assert main(["report", str(sent["original"]), *argv]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert from_mlflow == from_file
    assert from_file["overall"]["n"] > 10


def test_an_unknown_experiment_is_one_line(
    mlflow_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolguard._cli import main

    assert main(["report", "--mlflow", mlflow_server, "--experiment", "987654", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"toolguard: error: MLflow at {mlflow_server} experiment 987654: ")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_server_that_is_down(capsys: pytest.CaptureFixture[str]) -> None:
    from phoenix_server import free_port

    from toolguard._cli import main

    url = f"http://127.0.0.1:{free_port()}"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        assert main(["report", "--mlflow", url, "--experiment", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"toolguard: error: MLflow at {url} experiment 1: ")
    assert err.count("\n") == 1
