"""The two chat-message formats: OpenAI chat logs (tau-bench's shape included) and tau2
simulations.

**openai**: a run is a list of chat messages, or an object holding them under ``messages``
(or ``traj``, tau-bench's name) with optional ``id``, ``task_id``, ``trial``, ``reward``,
``success`` / ``outcome``, ``labels`` (an object of strings) and ``tools`` (the OpenAI tool
list offered). A file is JSON Lines (one run per line), a JSON list of runs, one run object,
or one list of messages.

**tau2**: a tau2 results file (its ``simulations`` are streamed; its ``info`` gives the
domain, the agent's model and the offered tools' schemas), a JSON list of simulations, or
JSON Lines of them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from .jsonstream import DEFAULT_MAX_ELEMENT_BYTES, DEFAULT_MAX_STRING_BYTES, Located, iter_values
from .messages import events_of, outcome_of, reward_success, tool_schemas
from .model import RecordedRun, ReplayInputError, format_hint


def _is_message(value: Any) -> bool:
    return isinstance(value, Mapping) and "role" in value


def grouped(
    path: str,
    *,
    stream_key: str | None = None,
    keep: frozenset[str] | None = None,
    max_element_bytes: int = DEFAULT_MAX_ELEMENT_BYTES,
    max_string_bytes: int = DEFAULT_MAX_STRING_BYTES,
) -> Iterator[Located]:
    """The file's run values: a streamed array whose elements are chat messages is one run
    (its messages gathered: memory holds that run), any other element is a run of its own.
    The bounds are ``iter_values``'s."""
    gathering: Located | None = None
    messages: list[Any] = []
    values = iter_values(
        path,
        stream_key=stream_key,
        keep=keep,
        max_element_bytes=max_element_bytes,
        max_string_bytes=max_string_bytes,
    )
    for item in values:
        if gathering is not None and item.element is not None and item.top == gathering.top:
            if item.error is not None:
                gathering.error = gathering.error or f"{item.where}: {item.error}"
            messages.append(item.value)
            continue
        if gathering is not None:
            gathering.value = messages
            yield gathering
            gathering, messages = None, []
        if item.element == 0 and _is_message(item.value):
            gathering, messages = item, [item.value]
            continue
        # One JSON Lines line: a list of messages is a run, a list of runs is runs.
        value = item.value
        if item.element is None and isinstance(value, list) and value and not _is_message(value[0]):
            for k, element in enumerate(value):
                yield Located(element, f"{item.where} (element {k})", item.top, k)
            continue
        yield item
    if gathering is not None:
        gathering.value = messages
        yield gathering


def openai_run(value: Any, where: str, path: str, index: int) -> RecordedRun:
    if isinstance(value, list):
        return RecordedRun(_default_id(path, index), events_of(value, where), where)
    if not isinstance(value, Mapping):
        kind = type(value).__name__
        raise ReplayInputError(f"{where}: a run is a list of messages or an object, not {kind}")
    messages = value.get("messages", value.get("traj"))
    if messages is None:
        keys = ", ".join(sorted(map(str, value))[:6]) or "no keys"
        raise ReplayInputError(
            f"{where}: a run object needs 'messages' or 'traj' ({keys})"
            f"{format_hint(value, 'openai')}"
        )
    task = value.get("task_id")
    labels = _labels(value.get("labels"), where)
    trial = value.get("trial")
    if trial is not None:
        labels.setdefault("trial", str(trial))
    run_id = value.get("id")
    if not isinstance(run_id, str | int) or isinstance(run_id, bool):
        run_id = None
    if run_id is None and task is not None:
        run_id = f"{task}" if trial is None else f"{task}/trial-{trial}"
    return RecordedRun(
        str(run_id) if run_id is not None else _default_id(path, index),
        events_of(messages, where),
        where,
        success=outcome_of(value),
        task=None if task is None else str(task),
        labels=labels,
        tools=tool_schemas(value.get("tools")),
    )


def tau2_run(
    value: Any, where: str, header: Mapping[str, Any], path: str, index: int
) -> RecordedRun:
    if not isinstance(value, Mapping) or not isinstance(value.get("messages"), list):
        raise ReplayInputError(
            f"{where}: a tau2 simulation is an object with 'messages'{format_hint(value, 'tau2')}"
        )
    info = header.get("info") if isinstance(header.get("info"), Mapping) else {}
    labels: dict[str, str] = {}
    env = info.get("environment_info") if isinstance(info, Mapping) else None
    agent = info.get("agent_info") if isinstance(info, Mapping) else None
    tools = None
    if isinstance(env, Mapping):
        if isinstance(env.get("domain_name"), str):
            labels["domain"] = env["domain_name"]
        defs = env.get("tool_defs")
        if isinstance(defs, Mapping):
            tools = {
                str(name): _params(d.get("params") if isinstance(d, Mapping) else None)
                for name, d in defs.items()
            }
    if isinstance(agent, Mapping) and isinstance(agent.get("llm"), str):
        labels["model"] = agent["llm"]
    if value.get("trial") is not None:
        labels["trial"] = str(value["trial"])
    reward_info = value.get("reward_info")
    success = (
        reward_success(reward_info.get("reward")) if isinstance(reward_info, Mapping) else None
    )
    task = value.get("task_id")
    run_id = value.get("id")
    return RecordedRun(
        str(run_id) if run_id not in (None, "") else _default_id(path, index),
        events_of(value["messages"], where),
        where,
        success=success,
        task=None if task is None else str(task),
        labels=labels,
        tools=tools,
        null_as_default=True,  # tau2's tools take null for an optional parameter
    )


def _params(params: Any) -> Mapping[str, Any] | None:
    # Not a schema object: none recorded (as the openai format reads a tools list).
    return params if isinstance(params, Mapping) else None


def _labels(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ReplayInputError(f"{where}: 'labels' must be an object of strings")
    return {str(k): str(v) for k, v in raw.items()}


def _default_id(path: str, index: int) -> str:
    stem = os.path.basename(path)
    for suffix in (".gz", ".jsonl", ".ndjson", ".json"):
        stem = stem.removesuffix(suffix)
    return f"{stem}#{index + 1}"
