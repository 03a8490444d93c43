"""BFCL's backends, instantiated and called the way BFCL's own executor does it.

Semantics replicated from ``bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils``
(by reading it, not by copying it): one instance per involved class, created from
``CLASS_FILE_PATH_MAPPING``, loaded with ``_load_scenario(deepcopy(config), long_context=...)``
unless the class is stateless; every public bound method is a tool, and a later class wins
a name clash. Instead of ``eval`` on the call string we bind the parsed literal arguments to
the method, so an ill-typed or unknown argument surfaces as the same exception BFCL sees.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.bfcl.data import Call, Task

# The backends' rejection markers; their classes, loaded with their module's first state
# kept so each Environment starts from it (a mutable default leaks across tasks otherwise).
from toolguard.replay.bfcl_env import backend_class, fresh_state, is_error_result


class Environment:
    """The live backend instances of one task and the method table over them."""

    def __init__(self, task: Task) -> None:
        from bfcl_eval.constants.executable_backend_config import STATELESS_CLASSES

        self.task = task
        self.instances: dict[str, Any] = {}
        self.methods: dict[str, Callable[..., Any]] = {}
        self.owner: dict[str, str] = {}
        fresh_state(tuple(task.involved_classes))
        for class_name in task.involved_classes:
            instance = backend_class(class_name)()
            if class_name not in STATELESS_CLASSES:
                config = task.initial_config.get(class_name, {})
                instance._load_scenario(copy.deepcopy(config), long_context=task.long_context)
            self.instances[class_name] = instance
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.methods[name] = method
                    self.owner[name] = class_name

    def normalise(self, call: Call) -> dict[str, Any]:
        """Positional arguments -> keyword arguments, by the backend method's signature.

        Falls back to the raw keywords when the call cannot bind (unknown tool, too many
        positionals): the guard must then see the call as the agent wrote it.
        """
        method = self.methods.get(call.name)
        if method is None or not call.args:
            return dict(call.kwargs)
        try:
            bound = inspect.signature(method).bind_partial(*call.args, **call.kwargs)
        except TypeError:
            return {**{f"_{i}": a for i, a in enumerate(call.args)}, **call.kwargs}
        return dict(bound.arguments)


@dataclass
class Outcome:
    result: Any = None
    rejected: bool = False
    exception: str | None = None  # exception type name when the backend raised
    text: str = ""  # the result as BFCL's executor renders it for its response check


def execute(env: Environment, name: str, kwargs: dict[str, Any]) -> Outcome:
    """Run one call on the raw backend; never raises (BFCL records exceptions as results)."""
    method = env.methods.get(name)
    if method is None:
        # BFCL's eval of an unknown name raises NameError; the environment rejects it.
        return Outcome(rejected=True, exception="NameError", text=f"Error: no tool {name!r}")
    try:
        # Fresh argument objects per call, as BFCL's eval builds them: backends keep references
        # to list arguments (post_tweet stores `mentions`) and later calls mutate them.
        result = method(**copy.deepcopy(kwargs))
    except Exception as exc:  # the backend's own rejection of an ill-formed call
        return Outcome(
            rejected=True, exception=type(exc).__name__, text=f"Error during execution: {exc}"
        )
    return Outcome(result=result, rejected=is_error_result(result), text=render(result))


def render(result: Any) -> str:
    """Strings as they are, dicts as JSON, anything else by str(): how BFCL compares results."""
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


def state_differences(env: Environment, reference: Environment) -> dict[str, list[str]]:
    """Per class, the public attributes that differ, by BFCL's own instance comparison."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import _compare_instances

    out: dict[str, list[str]] = {}
    for class_name, ref in reference.instances.items():
        valid, diffs = _compare_instances(env.instances[class_name], ref)
        if not valid:
            out[class_name] = sorted(diffs)
    return out
