"""One call through its stages, top to bottom:

    start -> parse -> schema -> dependency -> precondition -> information -> [dry run]
          -> run -> judge -> record -> close

A :class:`Pipeline` is one tool's call path in one guard, built when the tool is declared:
the checks its contract declares (``stages.py``, each specialised to the contract), how it
runs (plain, async, tried on a fork first, or in a transaction), and the three entry points
that feed it: the wrapped function called directly (:meth:`Pipeline.direct`), dispatch by
name (:meth:`Pipeline.dispatch`, ``guard.call``) and the two-phase check whose tool someone
else runs (:meth:`Pipeline.check`, ``guard.check``). Each entry point only says where the
arguments come from and how a rejection is handed back; everything else is the same code.

- start: ``start.start`` takes the call's trajectory, step and span (``start.py``);
- parse: JSON text or a mapping (dispatch), positional and keyword arguments (direct);
- schema, dependency, precondition, information: :meth:`Pipeline.admit`; blocking stops at
  the first failure, log mode collects them all;
- dry run: ``dryrun.py`` (a fork) or ``transaction.py`` (the dry run is the call itself);
- run: the function, with the call's span current;
- judge, record, close: ``PendingCall._finish`` (``checks/outcome.py``, ``record.py``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from ... import _contract as contract
from ..._errors import MalformedCall, ToolCallRejected, UsageError
from ..checks.schema import bind_failure
from ..telemetry import spans as tel
from ..tools.schema import SchemaFailure, parse_arguments
from ..trajectories.nesting import _inside_tool
from ..trajectories.trajectory import Trajectory
from ..verdict import Rejection
from . import dry_run as dryrun
from . import transaction
from .call import _Call
from .pending import PendingCall
from .stages import stages_of
from .start import start

if TYPE_CHECKING:
    from ..guard import Guard
    from ..tools.tool import Tool

logger = logging.getLogger("toolguard")
_new = object.__new__  # the call's state, started by start.start (cheaper than the class call)

Arguments = str | bytes | Mapping[str, Any] | None


class Pipeline:
    """One tool's call path in one guard (module docstring)."""

    __slots__ = (
        "checks",
        "fn",
        "guard",
        "instance",
        "keywords",
        "make",
        "name",
        "run",
        "tool",
        "validate",
    )

    def __init__(
        self, guard: Guard, tool: Tool, fn: Callable[..., Any] | None, instance: Any
    ) -> None:
        self.guard = guard
        self.tool = tool
        self.name = tool.name
        self.fn = fn  # None: declared by contract alone, its owner runs it
        self.instance = instance  # the object of a bound method or a proxy
        self.checks = stages_of(tool).checks
        self.validate = tool.schema.validate
        # The state of a call the guard starts and runs itself. An async one keeps the
        # finalizer of a PendingCall: a coroutine dropped without being awaited is then
        # cancelled when it is collected; a sync one is always closed before it returns.
        self.make: type[_Call] = PendingCall if tool.is_async else _Call
        # How an admitted call runs, decided once (the dry run's strategy is the tool's).
        # The validated arguments are the function's keywords as they are (no positional-only
        # parameter, no *args, no tg.State to add): the common case, without call_parts.
        self.keywords = not tool._posonly and tool._varpos is None and tool.state_param is None
        self.run: Callable[[_Call, Callable[..., Any], bool], Any]
        if tool.is_async:
            self.run = self._run_async
        elif tool.dry_run is not None:
            self.run = self._run_tried
        else:
            self.run = self._run

    def __repr__(self) -> str:
        return f"Pipeline({self.name!r})"

    # -- entry points ------------------------------------------------------------------------
    def direct(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        """The wrapped function called directly (the wrapt wrapper): its result, or
        :class:`ToolCallRejected`."""
        owner = self.instance if self.instance is not None else instance
        tool = self.tool
        if owner is None and tool.owner_param is not None:
            # Called as Service.run(service, 3) where wrapt saw no class: the first
            # argument (or the keyword self) is the instance or class, as Python binds it.
            if args:
                owner, args = args[0], args[1:]
                wrapped = functools.partial(wrapped, owner)
            elif tool.owner_param in kwargs:
                owner = kwargs.pop(tool.owner_param)
                wrapped = functools.partial(wrapped, owner)
        call = start(_new(self.make), self.guard, self.name, tool, owner)
        try:
            # parse: positional and keyword arguments bound by name (kwargs is this call's
            # own dict: no copy needed)
            raw = kwargs
            special = tool.binds_keywords
            if args or (special and not special.isdisjoint(kwargs)):
                try:
                    raw, moved = tool.bind(args, kwargs)
                except TypeError as exc:
                    call._reject(bind_failure(tool, exc))
                    assert call.rejection is not None
                    # Raised as Python raises it: at the call, an async tool's too.
                    raise MalformedCall(call.rejection) from None
                else:
                    if moved:  # keywords for **kwargs held under other names (binding.py)
                        call._moved = moved
            if call.rejection is None:
                if tool.state_param is not None:  # a direct call may pass its state by keyword
                    call._take_state(raw)
                self.admit(call, raw)
        except BaseException:  # Ctrl-C inside a predicate: the span ends, the call is cancelled
            if not call.done:
                call.cancel()
            raise
        if call.rejection is not None:
            if tool.is_async:
                return _raise_async(call.rejection)
            raise ToolCallRejected(call.rejection)
        return self.run(call, wrapped, False)

    def check(
        self,
        arguments: Arguments,
        call_id: str | None,
        trajectory: Trajectory | None,
        span: Span | None,
        step: int | None,
    ) -> PendingCall:
        """Start and check a call whose tool someone else runs (``guard.check``): admitted
        (run it, then close it) or already blocked."""
        call = PendingCall(
            self.guard, self.name, self.tool, self.instance, call_id, trajectory, span, step
        )
        self.parse(call, arguments)
        return call

    def dispatch(
        self,
        arguments: Arguments,
        call_id: str | None,
        trajectory: Trajectory | None,
        step: int | None,
    ) -> Any:
        """``guard.call`` / ``acall`` by name: the result, or the :class:`Rejection` (also
        when the tool raised). An async tool's answer is an awaitable."""
        call = start(
            _new(self.make),
            self.guard,
            self.name,
            self.tool,
            self.instance,
            call_id,
            trajectory,
            None,
            step,
        )
        self.parse(call, arguments)
        return self.run_checked(call)

    def run_checked(self, call: _Call) -> Any:
        """A checked call's answer by name: its rejection, or the tool run (acall_batch
        checks a whole turn's calls first, then runs them with this)."""
        if call.rejection is not None:
            return _value(call.rejection) if self.tool.is_async else call.rejection
        if self.fn is None:
            call.cancel()
            raise UsageError(
                f"tool {self.name!r} is declared by contract alone: its owner runs it "
                "(use guard.check() and finish the pending call)"
            )
        return self.run(call, self.fn, True)

    # -- parse ---------------------------------------------------------------------------------
    def parse(self, call: _Call, arguments: Arguments) -> None:
        """A mapping copied (the checks must not see the caller change it), or the model's
        JSON text parsed; then admitted or blocked."""
        try:
            if type(arguments) is dict:
                raw = dict(arguments)
            else:
                try:
                    raw = parse_arguments(self.name, arguments)
                except SchemaFailure as exc:
                    call._reject(exc.failure)
                    return
            self.admit(call, raw)
        except BaseException:  # Ctrl-C inside a predicate: the span ends, the call is cancelled
            if not call.done:
                call.cancel()
            raise

    # -- schema, dependency, precondition, information ----------------------------------------
    def admit(self, call: _Call, raw: dict[str, Any]) -> None:
        """The pre-execution checks in precedence order; a blocked call is closed here and
        carries its rejection."""
        block = call._mode == "block"
        call._sent = raw  # what the information check compares with what was said
        if self.guard.record_content and call._recording:
            tel.set_attributes(call._span, {contract.GEN_AI_TOOL_CALL_ARGUMENTS: tel.content(raw)})
        try:
            values = self.validate(raw)
            unvalidated = False
        except SchemaFailure as exc:
            values = raw
            unvalidated = True
            call._failures += (exc.failure,)
            if block:
                call.arguments = values
                call._reject()
                return
        call.arguments = values
        for stage in self.checks:
            found = stage(call, values, block, unvalidated)
            if found:
                call._failures += tuple(found)
                if block:
                    call._reject()
                    return
        if call._failures and block:  # found as the call started: the trajectory store's
            call._reject()

    # -- [dry run] -> run -------------------------------------------------------------------
    def _run_tried(self, call: _Call, fn: Callable[..., Any], dispatch: bool) -> Any:
        """A sync tool with a dry run: in its transaction, or tried on a fork, then run."""
        if transaction.applies(self.tool):  # the dry run is the call itself
            done = transaction.run(call, fn, dispatch)
            if done is not transaction.RUN_PLAIN:
                return done
        elif not dryrun.try_on_fork(call, fn):
            return _blocked(call, dispatch)
        return self._run(call, fn, dispatch)

    def _run(self, call: _Call, fn: Callable[..., Any], dispatch: bool) -> Any:
        """Run an admitted call of a sync tool, then judge, record and close it
        (``_Call._finish``). ``dispatch``: a tool's exception comes back as the
        :class:`Rejection` the agent reads; otherwise it is re-raised."""
        if self.keywords:  # unpacked with **, which copies: the validated dict itself
            args: Any = ()
            kwargs = call.arguments
        else:
            args, kwargs = call.call_parts()
        # The tool runs with the call span current (spans it makes, HTTP or DB, nest below)
        # and marked as inside its trajectory (a guarded call it makes is nested: no step).
        token = nested = None  # kept on the call only if the tool raises (fail() resets them)
        if call._recording and call._owns_span:
            try:  # tel.attach, inline (telemetry never breaks a call)
                token = otel_context.attach(trace.set_span_in_context(call._span))
            except Exception:
                tel.log_failure("toolguard: could not make the span current")
        traj = call._traj
        if traj is not None:
            nested = _inside_tool.set(traj)
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            call._token, call._nested = token, nested
            raised = exc
        else:
            # leave: the span no longer current, the nested mark reset (_Call._leave, inline)
            if token is not None:
                try:  # tel.detach, inline
                    otel_context.detach(token)
                except Exception:
                    tel.log_failure("toolguard: could not restore the previous context")
            if nested is not None:
                try:
                    _inside_tool.reset(nested)
                except ValueError:  # reset in another context than it was set in
                    _inside_tool.set(False)
            try:
                call._finish(result, None)
            except BaseException:  # Ctrl-C inside a postcondition: the call ends as cancelled
                if not call.done:
                    call.cancel()
                raise
            return result
        try:
            return _failed(call, raised, dispatch)
        finally:
            del raised  # the exception's traceback holds this frame

    async def _run_async(self, call: _Call, fn: Callable[..., Any], dispatch: bool) -> Any:
        if self.tool.dry_run is not None:
            if transaction.applies(self.tool):
                done = await transaction.arun(call, fn, dispatch)
                if done is not transaction.RUN_PLAIN:
                    return done
            elif not await dryrun.atry_on_fork(call, fn):
                return _blocked(call, dispatch)
        if self.keywords:  # as in _run
            args: Any = ()
            kwargs = call.arguments
        else:
            args, kwargs = call.call_parts()
        call._enter()
        try:
            result = await fn(*args, **kwargs)
        except BaseException as exc:
            raised = exc
        else:
            call._leave()
            call._finish(result, None)  # dropped by an exception here, cancelled when collected
            return result
        try:
            return _failed(call, raised, dispatch)
        finally:
            del raised  # the exception's traceback holds this frame


def _failed(call: _Call, exc: BaseException, dispatch: bool) -> Any:
    """The tool raised ``exc``: the call is closed, out of the ``except`` block that caught
    it, so a telemetry failure as its span ends (an exporter that raises, logged by the
    SDK) does not chain the tool's exception, whose text may hold argument values, into
    the log. Returns the rejection (dispatch) or raises ``exc`` again."""
    rejection = call.fail(exc)
    if dispatch and isinstance(exc, Exception):
        return rejection
    raise exc


def _blocked(call: _Call, dispatch: bool) -> Any:
    """A call its dry run blocked: the rejection for dispatch, raised for a direct call."""
    rejection = call.rejection
    assert rejection is not None
    if dispatch:
        return rejection
    raise ToolCallRejected(rejection)


async def _raise_async(rejection: Rejection) -> Any:
    raise ToolCallRejected(rejection)


async def _value(value: Any) -> Any:
    return value


def awaitable(value: Any) -> Any:
    """A dispatched call's answer as an awaitable (acall_batch gathers them)."""
    return value if asyncio.iscoroutine(value) else _value(value)
