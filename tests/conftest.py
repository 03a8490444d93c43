"""Shared fixtures: a real OpenTelemetry SDK provider with an in-memory exporter.

The global tracer provider is never set here: every guard and trajectory gets the provider
explicitly (``tracer_provider=...``), so tests cannot leak telemetry into each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import toolguard as tg

SUMMARY = "toolguard.trajectory"


@dataclass
class Telemetry:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    def guard(self, **options: Any) -> tg.Guard:
        return tg.Guard(tracer_provider=self.provider, **options)

    def trajectory(self, id: str | None = None, **options: Any) -> tg.Trajectory:
        return tg.trajectory(id, tracer_provider=self.provider, **options)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def call_spans(self, trajectory_id: str | None = None) -> list[ReadableSpan]:
        out = [s for s in self.spans() if s.name.startswith("execute_tool ")]
        if trajectory_id is not None:
            out = [s for s in out if s.attributes.get("toolguard.trajectory.id") == trajectory_id]
        return out

    def summary_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == SUMMARY]

    def summary(self, trajectory_id: str) -> ReadableSpan:
        found = [
            s
            for s in self.summary_spans()
            if s.attributes.get("toolguard.trajectory.id") == trajectory_id
        ]
        assert len(found) == 1, f"expected one summary span for {trajectory_id}, got {found}"
        return found[0]

    def only_call(self) -> ReadableSpan:
        calls = self.call_spans()
        assert len(calls) == 1, [s.name for s in calls]
        return calls[0]

    def clear(self) -> None:
        self.exporter.clear()


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Telemetry(provider, exporter)
    provider.shutdown()


@pytest.fixture(autouse=True)
def _telemetry_failures_logged_afresh() -> Iterator[None]:
    """A telemetry failure is logged once per process; each test sees its own first one."""
    from toolguard.runtime.telemetry import spans

    spans._logged.clear()
    yield
