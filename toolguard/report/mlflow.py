"""Spans from an MLflow tracking server's trace store (``toolguard report --mlflow URL
--experiment ID``), read through MLflow's own client API (``MlflowClient.search_traces``).

MLflow takes the same OTLP spans as any backend (its ``/v1/traces`` endpoint, the experiment
in the ``x-mlflow-experiment-id`` header) and answers them as ``Trace`` objects whose spans
hold their attributes as Python values. Each page of traces becomes one OTLP JSON export
request, so the report reads them with the same reading rules, checks and limits as a file
(collect.py): an attribute MLflow answers as an int is an ``intValue``, a bool a
``boolValue``, a list an ``arrayValue``, a string a ``stringValue``.

The client is the optional extra ``mlflow`` (``mlflow-skinny``, MLflow's client without the
server); it is imported only here, on first use.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from .collect import DEFAULT_MAX_LENGTH
from .escape import short_id
from .metrics import TrajectoryRecord
from .read import collect_requests
from .reader import BackendError, ExportRequest, ReadStats

MLFLOW_EXTRA_HINT = "reading MLflow needs its client: pip install 'toolguard-otel[mlflow]'"
DEFAULT_PAGE_SIZE = 100
DEFAULT_MAX_PAGES = 100_000
# MLflow 3 names a trace "tr-" and the OpenTelemetry trace id in hex.
_TRACE = re.compile(r"tr-([0-9a-f]{32})")


def any_value(value: Any) -> dict[str, Any]:
    """An MLflow attribute value as an OTLP ``AnyValue`` (the JSON mapping)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    # A mapping or anything else MLflow decoded: kept as its JSON text, as a string.
    return {"stringValue": json.dumps(value, default=str, sort_keys=True)}


def _trace_hex(trace_id: str) -> str:
    m = _TRACE.fullmatch(trace_id)
    return m.group(1) if m else trace_id


def otlp_span(span: Any) -> dict[str, Any]:
    """One MLflow ``Span`` (public properties only) as an OTLP JSON span."""
    out: dict[str, Any] = {
        "traceId": _trace_hex(str(span.trace_id)),
        "spanId": str(span.span_id),
        "name": str(span.name),
        "startTimeUnixNano": str(span.start_time_ns),
        "endTimeUnixNano": str(span.end_time_ns or span.start_time_ns),
        "attributes": [
            {"key": str(k), "value": any_value(v)} for k, v in (span.attributes or {}).items()
        ],
    }
    if span.parent_id:
        out["parentSpanId"] = str(span.parent_id)
    return out


def iter_mlflow_requests(
    url: str,
    experiment_id: str,
    stats: ReadStats,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    max_pages: int = DEFAULT_MAX_PAGES,
    filter_string: str | None = None,
) -> Iterator[tuple[ExportRequest, str]]:
    """Every trace of ``experiment_id`` on the tracking server at ``url``, a page of traces
    per export request. Raises BackendError naming the URL and what MLflow said when the
    client is missing, the server is down or refuses, or the experiment does not exist."""
    try:
        from mlflow import MlflowClient  # type: ignore[import-not-found,unused-ignore]
        from mlflow.exceptions import MlflowException  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise BackendError(MLFLOW_EXTRA_HINT) from None
    where = f"MLflow at {short_id(url)} experiment {short_id(experiment_id)}"
    stats.files.append(where)
    client = MlflowClient(tracking_uri=url)
    try:
        # An unknown experiment would answer no trace at all: said as what it is.
        client.get_experiment(experiment_id)
    except MlflowException as exc:
        raise BackendError(f"{where}: {short_id(exc.message, 300)}") from None
    except OSError as exc:
        raise BackendError(f"{where}: no answer ({short_id(str(exc), 300)})") from None
    token: str | None = None
    for page in range(1, max_pages + 1):
        try:
            traces = client.search_traces(
                locations=[experiment_id],
                filter_string=filter_string,
                max_results=page_size,
                page_token=token,
                include_spans=True,
            )
        except MlflowException as exc:
            raise BackendError(f"{where}: {short_id(exc.message, 300)}") from None
        except OSError as exc:  # the connection itself (requests' errors are OSErrors)
            raise BackendError(f"{where}: no answer ({short_id(str(exc), 300)})") from None
        spans = [otlp_span(s) for trace in traces for s in trace.data.spans]
        stats.lines += 1
        yield (
            {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]},
            f"{where} page {page}",
        )
        token = traces.token
        if not token:
            return
    raise BackendError(f"{where}: more than {max_pages} pages of traces; giving up")


def read_mlflow(
    url: str,
    experiment_id: str,
    *,
    max_length: int = DEFAULT_MAX_LENGTH,
    cost: bool = False,
    skip_invalid: bool = False,
    filter_string: str | None = None,
) -> tuple[list[TrajectoryRecord], ReadStats]:
    """Every span of MLflow experiment ``experiment_id`` on the tracking server at ``url``
    (MLflow's client, ``MlflowClient.search_traces``, page by page) into trajectory records,
    with the same reading rules as the files (report/mlflow.py). Raises BackendError when the
    client is missing or the server cannot be read, ReportInputError as read_records does."""
    stats = ReadStats()
    requests = iter_mlflow_requests(url, experiment_id, stats, filter_string=filter_string)
    return collect_requests(
        requests, stats, skip_invalid=skip_invalid, max_length=max_length, cost=cost
    )
