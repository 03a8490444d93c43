"""Where a call's span goes while a trajectory is current: below its summary span, or onto
the framework's own span of the call. The guard knows the trajectory's own context (the one
``with`` made current) without reading its span again; these pin that it still finds the
framework's span opened inside it, and the summary as parent wherever that context is
current again (a worker thread it was handed to).
"""

from __future__ import annotations

import threading

from opentelemetry import context as otel_context


def _echo_guard(otel):
    guard = otel.guard()

    @guard.tool
    def echo(text: str) -> dict:
        return {"text": text}

    return guard, echo


def test_a_call_in_the_trajectorys_context_gets_its_own_span_below_the_summary(otel) -> None:
    guard, echo = _echo_guard(otel)
    with guard.trajectory("own"):
        echo("a")
        guard.call("echo", {"text": "b"})
    summary = otel.summary("own")
    calls = otel.call_spans("own")
    assert [s.name for s in calls] == ["execute_tool echo", "execute_tool echo"]
    assert all(s.parent is not None and s.parent.span_id == summary.context.span_id for s in calls)
    assert all(s.instrumentation_scope.name == "toolguard" for s in calls)


def test_a_framework_span_opened_inside_the_trajectory_is_still_reused(otel) -> None:
    guard, echo = _echo_guard(otel)
    tracer = otel.provider.get_tracer("some.framework")
    with guard.trajectory("framework"):
        with tracer.start_as_current_span("execute_tool echo"):
            echo("a")
        echo("b")  # the framework's span is no longer current: a span of the guard's own
    calls = otel.call_spans("framework")
    assert [s.instrumentation_scope.name for s in calls] == ["some.framework", "toolguard"]
    assert all(s.attributes["toolguard.valid"] is True for s in calls)


def test_the_trajectorys_context_attached_in_a_thread_still_parents_the_call(otel) -> None:
    guard, echo = _echo_guard(otel)
    with guard.trajectory("thread") as traj:
        captured = otel_context.get_current()

        def work() -> None:
            token = otel_context.attach(captured)
            try:
                with traj.activate():
                    echo("in a thread")
            finally:
                otel_context.detach(token)

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
    summary = otel.summary("thread")
    (call,) = otel.call_spans("thread")
    assert call.instrumentation_scope.name == "toolguard"
    assert call.parent is not None and call.parent.span_id == summary.context.span_id
    assert call.attributes["toolguard.step"] == 1
