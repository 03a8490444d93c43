"""The Guard: declares tools (decorator, register, declare, proxy) and checks their calls."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, ParamSpec, TypeVar, Unpack, overload

from opentelemetry import trace
from opentelemetry.trace import Span

from .. import _contract as contract
from .._errors import UsageError
from . import declare as _declare
from .calls import batch as _batch
from .calls.pending import PendingCall
from .calls.pipeline import Arguments, Pipeline
from .calls.wrappers import GuardedFunction, GuardedTool
from .checks.schema import unknown_tool_failure
from .forks import strategies as _fork
from .inherit import INHERIT, Inherit
from .plans import run as plan_run
from .plans.plan import PlanStep, PlanVerdict
from .telemetry import spans as tel
from .tools.error_result import default_error_result
from .tools.markers import DryRun, ErrorResult, Mode
from .tools.spec import ToolOptions, ToolSpec
from .tools.suggest import ToolNames
from .tools.tool import Tool
from .trajectories.registry import TrajectoryRegistry
from .trajectories.shared import open_trajectory
from .trajectories.store import TrajectoryStore
from .trajectories.store_url import store_from
from .trajectories.trajectory import Trajectory
from .verdict import Failure, Rejection, Verdict

P = ParamSpec("P")
R = TypeVar("R")


class Guard:
    """Checks every call of the tools it knows, in the protocol's order.

    ``mode``: ``"block"`` (an invalid call does not run) or ``"log"`` (it runs and is
    recorded as ``logged``); tools may override it. ``on_guard_error``: a predicate that
    raises fails its check (``"fail_closed"``) or is logged loudly and passed
    (``"fail_open"``). ``record_content`` opts in to recording argument and result values
    on spans (truncated). ``state`` is handed to predicates. ``error_result``: how a result
    says the environment rejected the call (default: a mapping with a non-empty ``"error"``);
    ``None`` or ``False`` reads no result as an error. ``reuse_framework_spans``: where the
    framework already opened the ``execute_tool`` span of a call, the guard's attributes go
    on it.
    ``max_live_trajectories`` / ``trajectory_idle_timeout`` bound the trajectories kept by
    key (:meth:`trajectory` with ``key=``). ``strict`` (the default) judges arguments by the
    JSON Schema the model was shown: ``true``, ``"42"`` and ``4.0`` are no integer and an
    undeclared argument is unknown; ``strict=False`` lets pydantic coerce (its lax mode).
    ``dry_run``: a fork strategy (or True for ``tg.DeepCopyFork()``) that every tool declared
    afterwards, unless it says otherwise or ``external_effects=True``, tries each call on
    before running it (docs/fork-and-plans.md); ``None`` or ``False``: no dry run.
    ``store``: where the trajectories opened with :meth:`trajectory` keep their record
    (steps, bindings, what was seen, the summary's claim): ``"memory"`` (this process), a
    Redis URL (``"redis://host:6379/0"``: shared by every guard using it, in any process;
    docs/deployment.md) or a store object; None (the default): ``$TOOLGUARD_STORE``, else
    memory.

    A tool's ``error_result``, ``mode``, ``strict`` and ``dry_run`` default to
    :data:`tg.INHERIT`, these; a value given there means what it means here.
    """

    def __init__(
        self,
        *,
        mode: Mode = "block",
        state: Any = None,
        on_guard_error: Literal["fail_closed", "fail_open"] = "fail_closed",
        record_content: bool = False,
        tracer_provider: trace.TracerProvider | None = None,
        error_result: ErrorResult = default_error_result,
        reuse_framework_spans: bool = True,
        max_live_trajectories: int = 10_000,
        trajectory_idle_timeout: float | None = 3600.0,
        strict: bool = True,
        dry_run: DryRun = None,
        store: TrajectoryStore | str | None = None,
    ) -> None:
        if mode not in ("block", "log"):
            raise ValueError(f"mode must be 'block' or 'log', not {mode!r}")
        if on_guard_error not in ("fail_closed", "fail_open"):
            raise ValueError(
                f"on_guard_error must be 'fail_closed' or 'fail_open', not {on_guard_error!r}"
            )
        if error_result is not None and error_result is not False and not callable(error_result):
            raise ValueError("error_result must be a callable result -> bool, None or False")
        self.mode: Mode = mode
        self.strict = strict
        # Read when a tool is declared: changing it later leaves declared tools as they are.
        self.dry_run: DryRun = _fork.resolve(dry_run, "Guard")
        self.state = state
        self.fail_open = on_guard_error == "fail_open"
        self.record_content = record_content
        self.error_result: ErrorResult = error_result
        self.reuse_framework_spans = reuse_framework_spans
        self.tracer_provider = tracer_provider
        self.tracer = tel.get_tracer(tracer_provider)
        self._makes_spans = tel.makes_spans(self.tracer)  # None: ask per call (calls/start.py)
        self.observes_outputs = False  # turned on by the first tool with grounded arguments
        self.trajectories = TrajectoryRegistry(max_live_trajectories, trajectory_idle_timeout)
        # Where trajectories keep their record: memory (one process) or a shared store.
        self.store = store_from(store, trajectory_idle_timeout)
        self._tools: dict[str, tuple[Tool, GuardedTool | None]] = {}
        self._pipelines: dict[str, Pipeline] = {}  # each tool's call path, by name
        self._suggest = ToolNames()

    def __repr__(self) -> str:
        shown = ", ".join(self.tool_names[:5]) + (", ..." if len(self._tools) > 5 else "")
        live = len(self.trajectories)
        return f"Guard(mode={self.mode!r}, tools=[{shown}], live_trajectories={live})"

    # -- declaring tools ---------------------------------------------------------------------
    @overload
    def tool(self, fn: Callable[P, R], /) -> GuardedFunction[P, R]: ...
    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        replace: bool = False,
        **options: Unpack[ToolOptions],
    ) -> Callable[[Callable[P, R]], GuardedFunction[P, R]]: ...

    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        /,
        *,
        name: str | None = None,
        replace: bool = False,
        **options: Unpack[ToolOptions],
    ) -> Any:
        """Decorator: ``@guard.tool`` or ``@guard.tool(refs=..., preconditions=...)``.

        Works on functions, async functions and methods (the instance is passed to
        predicates as ``instance``). The options are ``name``, ``replace`` (see
        :meth:`register`) and the fields of :class:`ToolSpec` (:class:`ToolOptions`).
        Called directly, the function keeps its return type: a rejected call raises
        :class:`ToolCallRejected`.
        """
        if fn is None:
            return lambda f: self.register(f, name=name, replace=replace, **options)
        return self.register(fn, name=name, replace=replace, **options)

    def register(
        self,
        fn: Callable[P, R],
        spec: ToolSpec | None = None,
        *,
        name: str | None = None,
        replace: bool = False,
        **options: Unpack[ToolOptions],
    ) -> GuardedFunction[P, R]:
        """Guard ``fn`` and make it callable by name; returns the guarded callable.

        Its declaration is ``spec`` or the options (:class:`ToolOptions`, the fields of
        :class:`ToolSpec`), not both; ``name`` defaults to the function's. ``replace``: take
        the name from a tool already registered under it."""
        return _declare.register(self, fn, spec, name, replace, options)

    def declare(
        self,
        name: str,
        spec: ToolSpec | None = None,
        *,
        replace: bool = False,
        **options: Unpack[ToolOptions],
    ) -> Tool:
        """A tool known by its contract alone (``json_schema=`` or ``args_model=``, refs,
        conditions...: ``spec`` or the options, :class:`ToolOptions`): the framework owns and
        runs the function; :meth:`check` judges its calls."""
        return _declare.declare(self, name, spec, replace, options)

    def proxy(
        self,
        obj: Any,
        tools: Iterable[str] | Mapping[str, ToolSpec | None] | None = None,
    ) -> Any:
        """A wrapt proxy of ``obj`` whose named methods are guarded (all public ones by
        default); everything else passes through. The methods become dispatchable by name,
        replacing those of an earlier proxy of the same names."""
        return _declare.proxy(self, obj, tools)

    @property
    def tool_names(self) -> list[str]:
        return sorted(self._tools)

    def has_tool(self, name: str) -> bool:
        return name in self._tools

    def get_tool(self, name: str) -> Tool:
        return self._tools[name][0]

    # -- trajectories ------------------------------------------------------------------------
    def trajectory(
        self,
        id: str | None = None,
        *,
        key: str | None = None,
        labels: Mapping[str, Any] | None = None,
        user_input: str | Iterable[str] | None = None,
        conversation_id: str | None = None,
        summary: bool = True,
    ) -> Trajectory:
        """A trajectory whose summary span goes to this guard's tracer provider. With
        ``key`` (a session or thread id), :meth:`find_trajectory` finds it while it is open.
        ``summary=False``: another process writes this trajectory's summary (a proxy or MCP
        server continuing a host's trajectory); this one writes its call spans only."""
        return open_trajectory(
            self.store,
            id,
            labels=labels,
            user_input=user_input,
            conversation_id=conversation_id,
            tracer=self.tracer,
            tracer_provider=self.tracer_provider,
            registry=self.trajectories if key is not None else None,
            key=key,
            summary=summary,
        )

    def find_trajectory(self, key: str) -> Trajectory | None:
        """The open trajectory started with ``key``, or None (never started, ended, evicted or
        expired)."""
        return self.trajectories.get(key)

    # -- checking calls ----------------------------------------------------------------------
    def check(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        call_id: str | None = None,
        trajectory: Trajectory | None = None,
        span: Span | None = None,
    ) -> PendingCall:
        """Check a call whose tool someone else runs (an agent framework, an MCP server).

        ``arguments``: a mapping or the model's JSON text. ``call_id``: the model's tool call
        id (takes the step :meth:`Trajectory.reserve` kept for it). ``trajectory``: the
        episode, when the current context does not hold it. ``span``: the framework's own
        ``execute_tool`` span for this call, to carry the guard's attributes instead of a new
        one. Returns a :class:`PendingCall`: ``rejection`` set means do not run it.
        """
        return self._check(name, arguments, call_id, trajectory, span, None)

    def cancel_unstarted(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        call_id: str | None = None,
        trajectory: Trajectory | None = None,
    ) -> Verdict:
        """Close a call of the model's turn that the run gave up on before it started (a
        stream left unread, a cancelled task): checked, so its validity is what its checks
        said, then ``cancelled``, or ``blocked`` where the guard would have blocked it. Its
        reserved step gets its verdict and span."""
        pending = self._check(name, arguments, call_id, trajectory, None, None)
        return pending.rejection if pending.rejection is not None else pending.cancel()

    def _check(
        self,
        name: str,
        arguments: Arguments,
        call_id: str | None,
        trajectory: Trajectory | None,
        span: Span | None,
        step: int | None,
    ) -> PendingCall:
        if not isinstance(name, str):
            raise UsageError(f"a tool name must be a string, got {type(name).__name__}")
        if call_id is not None and not isinstance(call_id, str):
            raise UsageError(f"call_id must be a string or None, got {type(call_id).__name__}")
        if trajectory is not None and not isinstance(trajectory, Trajectory):
            raise UsageError(f"trajectory must be a Trajectory, got {type(trajectory).__name__}")
        pipeline = self._pipelines.get(name)
        if pipeline is None:
            pending = PendingCall(self, name, None, None, call_id, trajectory, span, step)
            pending._reject(self._unknown_tool(name))
            return pending
        return pipeline.check(arguments, call_id, trajectory, span, step)

    def record_rejection(
        self,
        name: str,
        message: str,
        *,
        cause: str = contract.SCHEMA,
        check: str | None = None,
        model_message: str | None = None,
        call_id: str | None = None,
        trajectory: Trajectory | None = None,
    ) -> Rejection:
        """Record a call the framework rejected before the guard saw it (an unknown tool, or
        arguments that failed the framework's own validation): a step with its cause, so T
        does not undercount. ``message`` is for the developer; nothing runs."""
        if cause not in contract.CAUSES:
            raise UsageError(f"cause must be one of {', '.join(contract.CAUSES)}, not {cause!r}")
        if check is None:
            check = "schema.args" if name in self._tools else "schema.tool"
        tool = self._tools[name][0] if name in self._tools else None
        pending = PendingCall(self, name, tool, None, call_id, trajectory)
        pending._reject(Failure(cause, check, message, model_message or message))
        assert pending.rejection is not None
        return pending.rejection

    def call(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        call_id: str | None = None,
        trajectory: Trajectory | None = None,
    ) -> Any:
        """Check and run tool ``name``: its result, or a :class:`Rejection` when the call
        was blocked or the tool raised (the agent loop hands ``str(rejection)`` back to the
        model). An async tool returns an awaitable: use :meth:`acall`."""
        return self._dispatch(name, arguments, call_id, trajectory, None)

    def _dispatch(
        self,
        name: str,
        arguments: Arguments,
        call_id: str | None,
        trajectory: Trajectory | None,
        step: int | None,
    ) -> Any:
        if type(name) is str:
            pipeline = self._pipelines.get(name)
            if (
                pipeline is not None
                and (call_id is None or type(call_id) is str)
                and (trajectory is None or isinstance(trajectory, Trajectory))
            ):
                return pipeline.dispatch(arguments, call_id, trajectory, step)
        # An unknown tool, or arguments of the wrong type: _check says which.
        return self._run_checked(self._check(name, arguments, call_id, trajectory, None, step))

    def _run_checked(self, pending: PendingCall) -> Any:
        """Run a checked call (acall_batch checks all of a turn's calls first)."""
        pipeline = self._pipelines.get(pending.name)
        if pipeline is None:  # an unknown tool: its rejection
            return pending.rejection
        return pipeline.run_checked(pending)

    async def acall(
        self,
        name: str,
        arguments: Arguments = None,
        *,
        call_id: str | None = None,
        trajectory: Trajectory | None = None,
    ) -> Any:
        """:meth:`call` for agent loops that await; sync tools run inline."""
        result = self._dispatch(name, arguments, call_id, trajectory, None)
        if asyncio.iscoroutine(result):
            return await result
        return result

    async def acall_batch(
        self,
        calls: Sequence[tuple[str, Arguments] | tuple[str, Arguments, str | None]],
        *,
        trajectory: Trajectory | None = None,
    ) -> list[Any]:
        """Parallel tool calls of one model turn: steps in list order, run concurrently."""
        return await _batch.acall_batch(self, calls, trajectory)

    # -- plans -------------------------------------------------------------------------------
    def verify_plan(
        self,
        steps: Sequence[PlanStep | Mapping[str, Any]] | str | bytes,
        trajectory: Trajectory | None = None,
        dry_run: DryRun | Inherit = INHERIT,
    ) -> PlanVerdict:
        """Check a planned sequence of calls before its first step runs; the verdict names
        the first step that would fail, its cause and a message for the planner.

        ``steps``: :class:`PlanStep` objects, step mappings (``{"tool", "arguments", "id"}``)
        or the plan's JSON text; arguments may refer to earlier steps' results
        (:class:`StepRef`, JSON ``{"$step": <index or id>, "path": "a.b.0"}``).
        ``trajectory``: whose bound values literal ids are checked against (default: the
        current one); it takes no step. ``dry_run``: ``tg.INHERIT`` (the default) runs each
        step on a fork with its tool's own dry run; ``True`` forks every tool, with its own
        strategy where it has one, else a deep copy; a strategy forks every tool with it;
        ``None`` or ``False`` forks nothing. Nothing runs on the real state. Async tools are
        not run on the fork here: use :meth:`averify_plan`.
        """
        return plan_run.verify(self, steps, trajectory, dry_run)

    async def averify_plan(
        self,
        steps: Sequence[PlanStep | Mapping[str, Any]] | str | bytes,
        trajectory: Trajectory | None = None,
        dry_run: DryRun | Inherit = INHERIT,
    ) -> PlanVerdict:
        """:meth:`verify_plan` that awaits async tools on the fork."""
        return await plan_run.averify(self, steps, trajectory, dry_run)

    def _unknown_tool(self, name: str) -> Failure:
        return unknown_tool_failure(name, self._suggest)
