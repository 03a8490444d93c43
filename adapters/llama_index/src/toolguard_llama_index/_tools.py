"""LlamaIndex tools whose calls the guard checks before they run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import toolguard as tg
from llama_index.core.tools import FunctionTool
from llama_index.core.tools.types import AsyncBaseTool, BaseTool, ToolMetadata, ToolOutput

from . import _run

ToolErrors = Literal["deliver", "raise"]

try:
    # What a step raises to wait for an event (workflows 2.9 on): LlamaIndex's agents let it
    # through to the workflow, which pauses the step and runs it again once the event comes.
    from workflows.runtime.types.results import WaitingForEvent as _PAUSED
except ImportError:  # pragma: no cover - a workflows version without it cannot pause a tool
    _PAUSED = None  # type: ignore[assignment,misc]


class _Guarding:
    """What a guarded tool holds: the guard, how a tool's exception answers the model."""

    __slots__ = ()
    _tg_guard: tg.Guard
    _tg_tool_errors: ToolErrors

    def _tg_check(self, name: str, kwargs: Mapping[str, Any]) -> tg.PendingCall:
        run = _run.CURRENT.get()
        call_id = run.claim(name, kwargs) if run is not None else None
        return self._tg_guard.check(
            name, dict(kwargs), call_id=call_id, trajectory=run.traj if run is not None else None
        )

    def _tg_finished(self, pending: tg.PendingCall, name: str, output: ToolOutput) -> None:
        if output.is_error:
            # The tool reported the failure itself (an error output, not an exception).
            pending.finish(output.raw_output, error=True)
            return
        pending.finish(output.raw_output)  # the raw value: what `produces` reads
        run = _run.CURRENT.get()
        if run is not None:
            run.results.append((name, output.raw_output))

    def _tg_failed(
        self, pending: tg.PendingCall, name: str, kwargs: Mapping[str, Any], exc: BaseException
    ) -> ToolOutput:
        if _PAUSED is not None and isinstance(exc, _PAUSED):
            _paused(pending, name, kwargs)
            raise exc  # the workflow's to handle, as FunctionAgent._call_tool re-raises it
        rejection = pending.fail(exc)
        if self._tg_tool_errors == "raise" or not isinstance(exc, Exception):
            raise exc
        return _rejected(name, kwargs, rejection)


def _paused(pending: tg.PendingCall, name: str, kwargs: Mapping[str, Any]) -> None:
    """The tool waits for an event (``ctx.wait_for_event``: a human's answer): not a failure.
    This attempt is cancelled; when the event comes the workflow runs the tool again from
    the start with the same arguments, and that attempt takes the call's id and step."""
    step = pending.cancel().step
    run = _run.CURRENT.get()
    call_id = pending.call_id
    if run is None or call_id is None or step is None:
        return
    run.traj.reserve({call_id: step})
    run.give_back(call_id, name, kwargs)


def _rejected(name: str, kwargs: Mapping[str, Any], rejection: tg.Rejection) -> ToolOutput:
    # LlamaIndex's own shape for a failed call: an error output the agent hands to the model.
    return ToolOutput(
        content=str(rejection),
        tool_name=name,
        raw_input={"kwargs": dict(kwargs)},
        raw_output=None,
        is_error=True,
    )


class GuardedFunctionTool(_Guarding, FunctionTool):
    """A ``FunctionTool`` (the same function, metadata, context parameter and callbacks)
    whose calls ``guard`` checks first. Still a ``FunctionTool``, so agents hand it their
    ``Context`` as they do to any tool that asks for one."""

    def __init__(self, tool: FunctionTool, guard: tg.Guard, tool_errors: ToolErrors) -> None:
        # The wrapped tool's state as it is (whatever this LlamaIndex version keeps there):
        # no re-derivation from the function that could come out different.
        self.__dict__.update(tool.__dict__)
        self._tg_guard = guard
        self._tg_tool_errors = tool_errors
        self._tg_inner = tool

    def _tg_arguments(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        # The model's arguments, without the Context LlamaIndex adds.
        return {k: v for k, v in kwargs.items() if k != self.ctx_param_name}

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        name = self.metadata.get_name()
        arguments = self._tg_arguments(kwargs)
        pending = self._tg_check(name, arguments)
        if pending.rejection is not None:
            return _rejected(name, arguments, pending.rejection)
        with _run.running(pending):
            try:
                output = super().call(*args, **kwargs)
            except BaseException as exc:
                return self._tg_failed(pending, name, arguments, exc)
            self._tg_finished(pending, name, output)
            return output

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        name = self.metadata.get_name()
        arguments = self._tg_arguments(kwargs)
        pending = self._tg_check(name, arguments)
        if pending.rejection is not None:
            return _rejected(name, arguments, pending.rejection)
        with _run.running(pending):
            try:
                output = await super().acall(*args, **kwargs)
            except BaseException as exc:
                return self._tg_failed(pending, name, arguments, exc)
            self._tg_finished(pending, name, output)
            return output


class GuardedTool(_Guarding, AsyncBaseTool):
    """Any other LlamaIndex tool (a query engine tool, ...) behind ``guard``."""

    def __init__(self, tool: BaseTool, guard: tg.Guard, tool_errors: ToolErrors) -> None:
        self._tg_inner = tool
        self._tg_guard = guard
        self._tg_tool_errors = tool_errors

    @property
    def metadata(self) -> ToolMetadata:
        return self._tg_inner.metadata

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        name = self.metadata.get_name()
        pending = self._tg_check(name, kwargs)
        if pending.rejection is not None:
            return _rejected(name, kwargs, pending.rejection)
        with _run.running(pending):
            try:
                output = self._tg_inner(*args, **kwargs)
            except BaseException as exc:
                return self._tg_failed(pending, name, kwargs, exc)
            self._tg_finished(pending, name, output)
            return output

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        name = self.metadata.get_name()
        pending = self._tg_check(name, kwargs)
        if pending.rejection is not None:
            return _rejected(name, kwargs, pending.rejection)
        inner = self._tg_inner
        with _run.running(pending):
            try:
                if isinstance(inner, AsyncBaseTool):
                    output = await inner.acall(*args, **kwargs)
                else:
                    output = inner(*args, **kwargs)
            except BaseException as exc:
                return self._tg_failed(pending, name, kwargs, exc)
            self._tg_finished(pending, name, output)
            return output


def guard_tool(
    tool: BaseTool | Any,
    guard: tg.Guard,
    *,
    contracts: Mapping[str, tg.ToolOptions] | None = None,
    tool_errors: ToolErrors = "deliver",
) -> BaseTool:
    """``tool`` (a LlamaIndex tool, or a function as agents take them) checked by ``guard``,
    declared now with the JSON Schema the model is shown and its contract from ``contracts``
    (unless the guard already knows a tool of that name). A guarded tool is returned as is."""
    if tool_errors not in ("deliver", "raise"):
        raise ValueError(f"tool_errors must be 'deliver' or 'raise', not {tool_errors!r}")
    if is_guarded(tool):
        return tool
    tool = as_tool(tool)
    declare(guard, tool.metadata, contracts or {})
    if isinstance(tool, FunctionTool):
        return GuardedFunctionTool(tool, guard, tool_errors)
    return GuardedTool(tool, guard, tool_errors)


def guard_tools(
    tools: Sequence[BaseTool | Any],
    guard: tg.Guard,
    *,
    contracts: Mapping[str, tg.ToolOptions] | None = None,
    tool_errors: ToolErrors = "deliver",
) -> list[BaseTool]:
    return [guard_tool(t, guard, contracts=contracts, tool_errors=tool_errors) for t in tools]


def as_tool(tool: BaseTool | Any) -> BaseTool:
    """``tool`` as a LlamaIndex tool: a function becomes the ``FunctionTool`` agents make of
    it."""
    if isinstance(tool, BaseTool):
        return tool
    if not callable(tool):
        raise TypeError(f"a tool must be a LlamaIndex tool or a function, got {tool!r}")
    return FunctionTool.from_defaults(tool)


def check_contract_names(contracts: Mapping[str, Any], tools: Sequence[BaseTool]) -> None:
    """A contract for a name none of ``tools`` has is a typo: that tool would run unguarded."""
    names = {t.metadata.get_name() for t in tools}
    unknown = sorted(set(contracts) - names)
    if unknown:
        raise tg.ToolDefinitionError(
            f"contracts name tools the agent does not have: {', '.join(unknown)} "
            f"(the agent's tools: {', '.join(sorted(names)) or 'none'})"
        )


def is_guarded(tool: Any) -> bool:
    return isinstance(tool, _Guarding)


def declare(
    guard: tg.Guard, metadata: ToolMetadata, contracts: Mapping[str, tg.ToolOptions]
) -> None:
    name = metadata.get_name()
    if guard.has_tool(name):
        return
    contract: dict[str, Any] = dict(contracts.get(name, {}))
    if "json_schema" not in contract and "args_model" not in contract:
        contract["json_schema"] = metadata.get_parameters_dict()
    if metadata.description:
        contract.setdefault("description", metadata.description)
    try:
        guard.declare(name, **contract)
    except tg.ToolDefinitionError:
        if guard.has_tool(name):  # a race with another agent, which declared it first
            return
        raise  # the core's error names the tool (an unknown option's too)
