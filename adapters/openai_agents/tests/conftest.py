"""Fixtures: a real OpenTelemetry SDK provider (in memory), and the two ways to run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from oa_support import Episode, Telemetry
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Telemetry(provider, exporter)
    provider.shutdown()


@pytest.fixture(params=["sync", "async"])
def episode(request: pytest.FixtureRequest) -> Episode:
    """Runner.run_sync in a plain ``with``, or Runner.run in ``async with`` under asyncio.run."""
    return Episode(request.param)
