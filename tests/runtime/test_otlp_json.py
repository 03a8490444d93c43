"""The span file's own OTLP JSON encoder writes the official encoder's bytes.

``toolguard/runtime/telemetry/otlp_json.py`` builds the export request's dicts straight from
the spans' fields; here every line it gives is compared, byte for byte once through
``json.dumps``, with ``encode_spans(spans).to_dict()`` of the OTLP JSON exporter package: over
generated spans (every attribute type, events, links, status, parents local and remote,
trace state, several resources and scopes) and over spans of the real SDK with its limits
(dropped counts).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceState

from toolguard.runtime.telemetry import otlp_json
from toolguard.runtime.telemetry.otlp_json import encode_request, request_line


def official(spans: list[ReadableSpan]) -> str:
    return json.dumps(encode_spans(spans).to_dict(), separators=(",", ":"))


def ours(spans: list[ReadableSpan]) -> str:
    return json.dumps(encode_request(spans), separators=(",", ":"))


TEXT = st.text(max_size=8)  # lone surrogates and non-ASCII included
SCALARS = (
    st.none()
    | st.booleans()
    | TEXT
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.binary(max_size=6)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3).map(tuple)
        | st.lists(inner, max_size=3)
        | st.dictionaries(TEXT, inner, max_size=3)
    ),
    max_leaves=6,
)
ATTRIBUTES = st.none() | st.dictionaries(TEXT, VALUES, max_size=5)
IDS = st.integers(0, 2**64 - 1)
CONTEXTS = st.builds(
    SpanContext,
    trace_id=st.integers(0, 2**128 - 1),
    span_id=IDS,
    is_remote=st.booleans(),
    trace_state=st.none()
    | st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from(["1", "x"])), max_size=2).map(
        TraceState
    ),
)
EVENTS = st.builds(
    Event, name=TEXT, attributes=ATTRIBUTES, timestamp=st.none() | st.integers(0, 2**63)
)
LINKS = st.builds(Link, context=CONTEXTS, attributes=ATTRIBUTES)
RESOURCES = st.sampled_from(
    [
        Resource({"service.name": "a"}),
        Resource({"service.name": "a"}),  # equal to the one before, another object
        Resource({"service.name": "b", "n": 3}, schema_url="https://example.com/s"),
        Resource({}),
    ]
)
SCOPES = st.sampled_from(
    [
        None,
        InstrumentationScope("toolguard", "0.1"),
        InstrumentationScope("toolguard", "0.1"),
        InstrumentationScope("other", None, "https://example.com/scope"),
        InstrumentationScope("", None, None, {"scope.attr": "v"}),
    ]
)
STATUSES = st.sampled_from(
    [
        Status(StatusCode.UNSET),
        Status(StatusCode.OK),
        Status(StatusCode.ERROR),
        Status(StatusCode.ERROR, "it failed"),
    ]
)
SPANS = st.builds(
    ReadableSpan,
    name=TEXT,
    context=st.none() | CONTEXTS,
    parent=st.none() | CONTEXTS,
    resource=RESOURCES,
    attributes=ATTRIBUTES,
    events=st.lists(EVENTS, max_size=2),
    links=st.lists(LINKS, max_size=2),
    kind=st.sampled_from(list(SpanKind)),
    status=STATUSES,
    start_time=st.none() | st.integers(0, 2**63),
    end_time=st.none() | st.integers(0, 2**63),
    instrumentation_scope=SCOPES,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(SPANS, max_size=6))
def test_generated_spans_encode_to_the_official_bytes(spans: list[ReadableSpan]) -> None:
    assert ours(spans) == official(spans)


@settings(max_examples=150, deadline=None)
@given(st.lists(SPANS, min_size=1, max_size=6))
def test_the_span_files_line_is_the_official_bytes_with_or_without_orjson(
    spans: list[ReadableSpan],
) -> None:
    # orjson writes the line where it gives json's bytes (ASCII text, no float), json the
    # rest: the same bytes either way, so the file never depends on what is installed.
    expected = (official(spans) + "\n").encode()
    assert request_line(encode_request(spans)) == expected
    saved = otlp_json._orjson
    otlp_json._orjson = None
    try:
        assert request_line(encode_request(spans)) == expected
    finally:
        otlp_json._orjson = saved


def test_orjson_writes_the_plain_lines_and_json_the_others() -> None:
    pytest.importorskip("orjson", reason="orjson comes with the [export] extra")
    calls: list[Any] = []
    real = otlp_json._orjson

    class Spy:
        OPT_APPEND_NEWLINE = real.OPT_APPEND_NEWLINE

        @staticmethod
        def dumps(value: Any, option: int) -> bytes:
            line: bytes = real.dumps(value, option=option)
            calls.append(line)
            return line

    otlp_json._orjson = Spy  # type: ignore[assignment]
    try:
        plain = request_line({"k": [{"stringValue": "ok"}, {"intValue": "3"}]})
        for other in ("é", "a\x7fb", "\ud800"):  # non-ASCII, DEL, a lone surrogate
            assert (
                request_line({"k": other})
                == (json.dumps({"k": other}, separators=(",", ":")) + "\n").encode()
            )
        floating = request_line({"doubleValue": 1e16})
    finally:
        otlp_json._orjson = real
    assert calls[0] is plain  # orjson's own line
    assert floating == b'{"doubleValue":1e+16}\n'  # json's float (orjson writes 1e16)
    assert len(calls) == 4  # the lone surrogate never reached a line of orjson's


def test_an_empty_batch_is_an_empty_request() -> None:
    assert encode_request([]) == {} == encode_spans([]).to_dict()


def test_a_value_neither_encoder_knows_leaves_its_attribute_out_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    span = ReadableSpan("s", attributes={"good": 1, "bad": object(), "nested": [1, object()]})
    with caplog.at_level(logging.ERROR):
        assert ours([span]) == official([span])
    [encoded] = encode_request([span])["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [a["key"] for a in encoded["attributes"]] == ["good"]
    assert "bad" in caplog.text and "nested" in caplog.text


def test_spans_of_the_sdk_with_dropped_counts_encode_to_the_official_bytes() -> None:
    exporter = InMemorySpanExporter()
    limits = SpanLimits(max_attributes=2, max_events=1, max_links=1, max_event_attributes=1)
    provider = TracerProvider(resource=Resource({"service.name": "t"}), span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("toolguard", "1.0")
    other = provider.get_tracer("other")
    link = Link(SpanContext(1, 2, is_remote=True), {"a": 1, "b": 2})
    with tracer.start_as_current_span("root", links=[link, link]) as root:
        root.set_attributes({"x": 1, "y": "é", "z": (1.5, 2.5)})
        root.add_event("e1", {"k": True, "l": False})
        root.add_event("e2")
        with other.start_as_current_span("child", kind=SpanKind.CLIENT) as child:
            child.set_status(Status(StatusCode.ERROR, "no"))
            child.record_exception(ValueError("boom"))
    spans: list[Any] = list(exporter.get_finished_spans())
    assert ours(spans) == official(spans)
    encoded = encode_request(spans)["resourceSpans"][0]["scopeSpans"]
    assert [s["scope"].get("name") for s in encoded] == ["other", "toolguard"]
    root_span = encoded[1]["spans"][0]
    assert root_span["droppedAttributesCount"] == 1
    assert root_span["droppedEventsCount"] == 1
    assert root_span["droppedLinksCount"] == 1
