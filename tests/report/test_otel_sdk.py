"""Spans written by the real OpenTelemetry SDK and its OTLP JSON file exporter, read back."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import SpanKind

from toolguard import _contract as A
from toolguard.report.metrics import compute_metrics
from toolguard.report.read import read_records


def _emit(path: Path, batch: bool) -> None:
    provider = TracerProvider()
    exporter = FileSpanExporter(str(path))
    provider.add_span_processor(BatchSpanProcessor(exporter) if batch
                                else SimpleSpanProcessor(exporter))  # fmt: skip
    tracer = provider.get_tracer("toolguard")
    # Worked example: A = rejected remove, search, remove; B = search, remove.
    plans = {"A": [("remove_contact", "state_consistency"), ("search_contact", None),
                   ("remove_contact", None)],
             "B": [("search_contact", None), ("remove_contact", None)]}  # fmt: skip
    for tid, calls in plans.items():
        with tracer.start_as_current_span(A.SUMMARY_SPAN_NAME) as summ:
            fed = len(calls) + 1
            for step, (tool, cause) in enumerate(calls, 1):
                attrs: dict[str, object] = {
                    A.GEN_AI_OPERATION_NAME: A.OPERATION_EXECUTE_TOOL,
                    A.GEN_AI_TOOL_NAME: tool,
                    A.TRAJECTORY_ID: tid,
                    A.STEP: step,
                    A.VALID: cause is None,
                    A.DECISION: A.ALLOWED,
                }
                if cause:
                    attrs |= {A.CAUSE: cause, A.FAILED_CHECKS: [f"{cause}.env"],
                              A.ERROR_TYPE: A.error_type(cause)}  # fmt: skip
                    fed = min(fed, step)
                with tracer.start_as_current_span(
                    A.call_span_name(tool),
                    kind=SpanKind.INTERNAL,
                    attributes=attrs,  # type: ignore[arg-type]
                ):
                    pass
            summ.set_attributes({A.TRAJECTORY_ID: tid, A.TRAJECTORY_LENGTH: len(calls),
                                 A.TRAJECTORY_FED: fed, A.TRAJECTORY_SUCCESS: True,
                                 A.LABEL_PREFIX + "model": "demo"})  # fmt: skip
            if fed <= len(calls):
                summ.set_attribute(A.TRAJECTORY_FIRST_ERROR_CAUSE, "state_consistency")
    provider.shutdown()


@pytest.mark.parametrize("batch", [False, True])
def test_sdk_file_exporter_round_trip(tmp_path: Path, batch: bool) -> None:
    path = tmp_path / "spans.jsonl"
    _emit(path, batch)
    lines = path.read_text().splitlines()
    # One export request per line: one per span when exported one by one, batched otherwise.
    assert len(lines) == 7 if not batch else 1 <= len(lines) < 7
    records, stats = read_records([str(path)])
    assert stats.spans == 7
    assert [(r.trajectory_id, r.length, r.fed, r.first_error_cause) for r in records] == [
        ("A", 3, 1, "state_consistency"), ("B", 2, 3, None)]  # fmt: skip
    assert all(not r.incomplete and not r.disagreements for r in records)
    m = compute_metrics(records)
    assert (m["ter"], m["mean_fed"], m["auc_pec"], m["rr"], m["s"]) == (0.5, 2.0, 0.5, 1.0, 1.0)
    assert m["pec"] == [0.5, 0.5, 0.0]
