"""A shared trajectory's summary: claimed in the store by the first process that ends the
trajectory (an atomic claim: exactly one summary span, whoever ends it), written with T and
FED from the shared record once the steps other processes had pending have landed."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind

from ... import _contract as contract
from ..telemetry import spans as tel
from .store import Held, SharedSummary, TrajectoryStoreError

if TYPE_CHECKING:
    from .shared import SharedTrajectory

logger = logging.getLogger("toolguard")


def write(traj: SharedTrajectory, exc: BaseException | None) -> bool:
    """End ``traj`` in the store and write its summary span if this process claimed it;
    False: the store did not answer."""
    try:
        # As in memory, a trajectory never started writes no summary.
        claim = traj.writes_summary and traj._started
        summary = _claim(traj, claim)
    except TrajectoryStoreError as err:
        logger.error(
            "toolguard: trajectory %r: its summary could not be claimed in the trajectory "
            "store %s (%s): no summary written here (T so far %d, FED %d)",
            traj._shown_id,
            traj._store.store_name,
            err,
            traj.length,
            traj.first_error_depth,
        )
        return False
    if summary is None:
        if claim:
            logger.info(
                "toolguard: trajectory %r: its summary was written by another process",
                traj._shown_id,
            )
        return True
    with traj._lock:
        traj._length = max(traj._length, summary.length)
        traj._first_error = summary.first_error
    if traj.success is None:
        traj.success = summary.success
    if traj.conversation_id is None:
        traj.conversation_id = summary.conversation_id
    traj.labels = {**summary.labels, **traj.labels}
    try:  # a root of its own, started when the trajectory was first seen by any process
        span = traj._tracer.start_span(
            contract.SUMMARY_SPAN_NAME,
            context=otel_context.Context(),
            kind=SpanKind.INTERNAL,
            start_time=summary.created_ns,
        )
    except Exception:
        tel.log_failure("toolguard: could not start the summary span of %r", traj.id)
        return True
    traj._end_summary(span, exc)
    return True


def _claim(traj: SharedTrajectory, claim: bool) -> SharedSummary | None:
    """End the trajectory in the store and, with ``claim``, claim its summary once the
    steps other replicas have pending have landed (or the store's timeout passed)."""
    store = traj._store
    hold = claim
    deadline = time.monotonic() + store.wait_timeout
    while True:
        events, floor = traj._take_outbox(), traj._floor
        try:
            answer = store.end(floor, claim, traj._token, traj.success, traj.labels, events, hold)
        except TrajectoryStoreError:
            traj._put_back(events)
            raise
        if not isinstance(answer, Held):
            return answer
        left = deadline - time.monotonic()
        if left > 0:
            traj._apply(store.wait(traj._cursor, traj._floor, answer.mark, left), traj._floor)
            continue
        hold = False
        logger.warning(
            "toolguard: trajectory %r: steps %s of other processes had not finished "
            "when its summary was claimed",
            traj._shown_id,
            [s for s, _ in answer.pending],
        )
