"""The replay flushes before a batch processor's queue can overflow: no span is dropped."""

from __future__ import annotations

from pathlib import Path

from chatlog import calls, tool, user, write_jsonl
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolguard.replay import Replayer, read_runs


def test_a_tiny_queue_loses_nothing(tmp_path: Path) -> None:
    runs = []
    for i in range(60):  # T = 0, 1, 2, 3, ...: summaries alone must flush too
        messages = [user(f"task {i}")]
        for k in range(i % 4):
            messages += [calls((f"c{k}", "f", {"k": k})), tool(f"c{k}", "ok")]
        runs.append({"id": f"r{i}", "messages": messages})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    # Eight spans fit in the queue and nothing is exported by the timer during the test.
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter, max_queue_size=8, max_export_batch_size=8, schedule_delay_millis=600_000
        )
    )
    replayer = Replayer(provider, flush_every=4)
    expected = 0
    for run in read_runs("openai", [write_jsonl(tmp_path / "runs.jsonl", runs)]):
        replayer.replay(run)
        expected += run.length + 1
    provider.shutdown()
    assert expected == 60 + sum(i % 4 for i in range(60))
    assert len(exporter.get_finished_spans()) == expected
