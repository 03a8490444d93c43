"""LangChain instrumentations' spans: the run's, for the trajectory's summary span, and the
tool's, for the call's (``_call_span.py``).

Instrumentations of LangChain (Traceloop's ``opentelemetry-instrumentation-langchain``,
OpenInference's) open their spans from LangChain's callbacks. Traceloop's makes each run's
span current, so the trajectory opened in ``before_agent`` is already its child, in its
trace. OpenInference's keeps its spans by run id and never attaches them (its callbacks
have no guaranteed end to detach in): the trajectory would start a trace of its own, apart
from the model spans whose tokens ``toolguard report --cost`` attributes by trace. So when
no span is current, the trajectory is opened below OpenInference's root span of the run,
found with its public ``get_ancestor_spans()`` / ``get_current_span()``; the guard's call
spans nest below the trajectory, so the whole run is one trace.

A tool's span is the instrumentation's span of the tool's run, looked up while the tool runs:
the current span where it is one for this tool (Traceloop's ``execute_tool {tool}``, or any
span with the GenAI attributes of one), else OpenInference's span of the current run.

LangSmith's OTel mode is joined differently: it makes its spans in its exporter's thread
from the runs LangChain posts, after the fact, and its root span's trace id is drawn then (the
trace of the span current where the agent was invoked, else a random one; the ids it derives
from the run tree's uuids are those of a stand-in context only, never of a span it exports).
So nothing in the process knows that trace while the run is live, and there is no span to
write onto. Instead the run's trajectory id goes into the metadata of LangSmith's current run
(``mark_langsmith_run``), which LangSmith exports as the attribute
``langsmith.metadata.toolguard.trajectory.id`` of that run's span: ``toolguard report --cost``
counts the model spans of a trace holding it for that trajectory (docs/protocol.md, 6.8).

Looked up only in ``sys.modules``: the adapter never imports an instrumentation itself.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Any

from opentelemetry import trace

logger = logging.getLogger("toolguard")

_OPENINFERENCE = "openinference.instrumentation.langchain"
_LANGSMITH = "langsmith.run_helpers"
# The metadata key LangSmith exports as langsmith.metadata.toolguard.trajectory.id (the
# contract's key of a span naming its trace's trajectory, docs/protocol.md section 6.8).
LANGSMITH_METADATA_KEY = "toolguard.trajectory.id"
_GUARD_SCOPE = "toolguard"  # the instrumentation scope of the guard's own spans


def run_span() -> Any:
    """The instrumentation's span to open the trajectory below, or None (a span is current
    already, or no instrumentation that needs this is loaded)."""
    if trace.get_current_span().get_span_context().is_valid:
        return None
    module = _openinference()
    if module is None:
        return None
    try:
        ancestors = module.get_ancestor_spans()
        span = ancestors[-1] if ancestors else module.get_current_span()
    except Exception:  # telemetry trouble never breaks the run
        logger.debug("toolguard: could not read OpenInference's current span", exc_info=True)
        return None
    if span is None or not span.get_span_context().is_valid:
        return None
    return span


def mark_langsmith_run(trajectory_id: str) -> None:
    """Name the trajectory in the metadata of LangSmith's current run, where LangSmith traces
    (its span then carries it: ``--cost`` joins its trace to the trajectory). Once per run:
    the metadata is read first."""
    module = sys.modules.get(_LANGSMITH)
    if module is None:
        return
    try:
        run = module.get_current_run_tree()
        if run is not None and run.metadata.get(LANGSMITH_METADATA_KEY) != trajectory_id:
            run.add_metadata({LANGSMITH_METADATA_KEY: trajectory_id})
    except Exception:  # telemetry trouble never breaks the run
        logger.debug("toolguard: could not name the trajectory in LangSmith's run", exc_info=True)


def below(span: Any) -> contextlib.AbstractContextManager[Any]:
    if span is None:
        return contextlib.nullcontext()
    return trace.use_span(span, end_on_exit=False)


def tool_span(tool: str) -> Any:
    """The instrumentation's span of the running tool ``tool``, or None."""
    try:
        current = trace.get_current_span()
        if current.is_recording() and _is_tool_span(current, tool):
            return current
        module = _openinference()
        if module is None:
            return None
        span = module.get_current_span()  # the span of the run the tool's config is in
    except Exception:  # telemetry trouble never breaks the call: the guard's own span
        logger.debug("toolguard: could not look up the instrumentation's tool span", exc_info=True)
        return None
    if span is None or not span.is_recording() or getattr(span, "name", None) != tool:
        return None
    return span


def _is_tool_span(span: Any, tool: str) -> bool:
    """An instrumentation's span for a call of ``tool``: named ``execute_tool {tool}``, or
    with the GenAI attributes of one; never the guard's own (its tracer's scope)."""
    scope = getattr(span, "instrumentation_scope", None)
    if scope is not None and getattr(scope, "name", None) == _GUARD_SCOPE:
        return False
    if getattr(span, "name", None) == f"execute_tool {tool}":
        return True
    attributes = getattr(span, "attributes", None) or {}
    return bool(
        attributes.get("gen_ai.operation.name") == "execute_tool"
        and attributes.get("gen_ai.tool.name") == tool
    )


def _openinference() -> Any:
    """OpenInference's LangChain module while it instruments (its look-ups print a line to
    stdout when it does not)."""
    module = sys.modules.get(_OPENINFERENCE)
    if module is None:
        return None
    try:
        instrumented = module.LangChainInstrumentor().is_instrumented_by_opentelemetry
    except Exception:
        return None
    return module if instrumented else None
