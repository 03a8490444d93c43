"""BFCL's own backends as the live environment of a result file's replay (bfcl-eval
installed), and the offered tools' schemas from BFCL's function docs.

A result file records the model's calls but not the environment's answers, so the replay
runs each call on BFCL's backend classes the way BFCL's executor does (read from
``bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils``, not copied): one instance per
involved class, loaded with ``_load_scenario(deepcopy(initial_config), long_context=...)``
unless stateless; every public method is a tool, a later class winning a name clash. Instead
of ``eval`` on a call string, the parsed literal arguments are bound to the method, so an
ill-typed or unknown argument surfaces as the exception BFCL would see. bfcl-eval is imported
only here, only when installed.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import json
import os
import re
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from . import bfcl_state
from .bfcl import Call, Entry, category_of
from .model import Executor, LiveEnvironment, ReplayInputError

_CATEGORY_FILE = "{prefix}_multi_turn_{category}.json"

# BFCL's type names -> JSON Schema (``float`` accepts integers, as Python's float parameters
# do; ``any`` is unconstrained). The multi-turn docs use dict, string, integer, float, array
# and boolean.
TYPE_MAP: dict[str, str | None] = {
    "dict": "object",
    "object": "object",
    "integer": "integer",
    "int": "integer",
    "float": "number",
    "number": "number",
    "string": "string",
    "str": "string",
    "array": "array",
    "list": "array",
    "tuple": "array",
    "boolean": "boolean",
    "bool": "boolean",
    "any": None,
}


def available() -> bool:
    return importlib.util.find_spec("bfcl_eval") is not None


@cache
def version() -> str:
    """The installed bfcl-eval's version (the package's, as pip shows it)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("bfcl-eval")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@cache
def data_prefix() -> str:
    """The installed data's file prefix, ``BFCL_v4``: a result file of another is refused."""
    prefix: str = importlib.import_module("bfcl_eval.constants.category_mapping").VERSION_PREFIX
    return prefix


def _config() -> Any:
    return importlib.import_module("bfcl_eval.constants.executable_backend_config")


def _data_root() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None and spec.submodule_search_locations is not None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


@cache
def _tasks(category: str) -> dict[str, dict[str, Any]]:
    path = _data_root() / _CATEGORY_FILE.format(prefix=data_prefix(), category=category)
    if not path.is_file():
        return {}
    out = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                entry = json.loads(line)
                out[entry["id"]] = entry
    return out


def check_version(path: str) -> None:
    """Refuse a result file whose name says another BFCL version than the installed data."""
    match = re.match(r"(BFCL_v\d+)_", os.path.basename(path))
    if match and match.group(1) != data_prefix():
        raise ReplayInputError(
            f"{path}: a {match.group(1)} result file, but the installed bfcl-eval "
            f"{version()} holds {data_prefix()} data: its task ids and ground "
            "truth may differ. Replay it with the bfcl-eval that produced it."
        )


def check_task(entry: Entry, known: Mapping[str, Any] | None) -> None:
    """Refuse an entry the installed data does not have (``known``: its ``task``), or with
    more turns than the data's task: both mean a result file of another BFCL version."""
    installed = f"bfcl-eval {version()} ({data_prefix()} data)"
    if known is None:
        raise ReplayInputError(
            f"{entry.where}: task {entry.id!r} is not in the installed {installed}: a result "
            "file of another BFCL version? Replay it with the bfcl-eval that produced it."
        )
    turns = len(known.get("question", []))
    if entry.n_turns > turns:
        raise ReplayInputError(
            f"{entry.where}: task {entry.id!r} has {entry.n_turns} turns here, {turns} in the "
            f"installed {installed}: a result file of another BFCL version?"
        )


def task(task_id: str) -> dict[str, Any] | None:
    """BFCL's test entry (questions, initial_config, involved_classes) for ``task_id``."""
    return _tasks(category_of(task_id)).get(task_id)


@cache
def backend_class(class_name: str) -> type:
    """BFCL's backend class ``class_name``, its module's first state kept (``bfcl_state``)."""
    module = importlib.import_module(_config().CLASS_FILE_PATH_MAPPING[class_name])
    cls: type = getattr(module, class_name)
    bfcl_state.remember(cls)
    return cls


def fresh_state(classes: tuple[str, ...]) -> None:
    """The backend modules of ``classes`` as first imported (mutable defaults, module
    containers): call before building a task's instances so no earlier task leaks in."""
    bfcl_state.restore(tuple(backend_class(c) for c in classes))


def _methods(classes: tuple[str, ...]) -> dict[str, Callable[..., Any]]:
    """Tool name -> the (unbound) method; a later class wins a clash, as in BFCL."""
    out: dict[str, Callable[..., Any]] = {}
    for class_name in classes:
        for name, fn in inspect.getmembers(backend_class(class_name), predicate=inspect.isfunction):
            if not name.startswith("_"):
                out[name] = fn
    return out


def keyword_arguments(call: Call, classes: tuple[str, ...]) -> dict[str, Any]:
    """Positional arguments bound to names by the backend method's signature; where the call
    cannot bind (unknown tool, too many positionals) they are kept as ``_0``, ``_1``..., so
    the guard sees the call as the model wrote it."""
    if not call.args:
        return dict(call.kwargs)
    method = _methods(classes).get(call.name)
    if method is not None:
        try:
            bound = inspect.signature(method).bind_partial(None, *call.args, **call.kwargs)
        except TypeError:
            pass
        else:
            arguments = dict(bound.arguments)
            arguments.pop(next(iter(inspect.signature(method).parameters)), None)  # self
            return arguments
    return {**{f"_{i}": a for i, a in enumerate(call.args)}, **call.kwargs}


def environment(entry: Mapping[str, Any]) -> Callable[[], Executor]:
    """A factory of fresh backend instances for one task (one per replayed cohort)."""
    classes = tuple(entry.get("involved_classes", ()))
    config = entry.get("initial_config", {})
    long_context = "long_context" in category_of(str(entry.get("id", "")))

    def fresh() -> Executor:
        stateless = set(_config().STATELESS_CLASSES)
        fresh_state(classes)
        owners: dict[str, tuple[Any, str]] = {}
        for class_name in classes:
            instance = backend_class(class_name)()
            if class_name not in stateless:
                instance._load_scenario(
                    copy.deepcopy(config.get(class_name, {})), long_context=long_context
                )
            for name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    owners[name] = (instance, name)  # a later class wins, as in BFCL
        return LiveEnvironment(owners, is_error_result)

    return fresh


def initial_state(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The task's initial state as data, by involved class: its ``initial_config``, and for
    a top-level key the config leaves out, the backend's ``DEFAULT_STATE`` value that
    ``_load_scenario`` falls back to (plain data only: a default holding objects, a file
    system's empty root, is left out); a stateless class (MathAPI) has none. What a
    contract's ``[initial]`` places read; long context's extra data, loaded by the
    backends, is not in it."""
    config = entry.get("initial_config", {})
    stateless = set(_config().STATELESS_CLASSES)
    out: dict[str, Any] = {}
    for class_name in entry.get("involved_classes", ()):
        if class_name in stateless:
            continue  # never loaded (``environment``): its config is no state it has
        given = config.get(class_name, {})
        state = dict(given) if isinstance(given, Mapping) else {}
        module = importlib.import_module(backend_class(class_name).__module__)
        defaults = getattr(module, "DEFAULT_STATE", None)
        if isinstance(defaults, Mapping):
            for key, value in defaults.items():
                if key not in state and _plain(value):
                    state[key] = copy.deepcopy(value)
        out[class_name] = state
    return out


def _plain(value: Any, depth: int = 0) -> bool:
    """JSON-like data (what a state given as data can hold), not objects."""
    if depth > 20:
        return False
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(
            isinstance(k, str | int) and not isinstance(k, bool) and _plain(v, depth + 1)
            for k, v in value.items()
        )
    return False


def is_error_result(result: Any) -> bool:
    """The backends' own rejection markers: most return ``{"error": ...}``, a few wrap it
    in a one-element list (``[{"error": ...}]``, ``["Error: ..."]``), failed logins answer
    with a false ``authentication_status`` / ``success`` / ``login_status``."""
    if isinstance(result, dict):
        if "error" in result:
            return True
        if result.get("authentication_status") is False or result.get("success") is False:
            return True
        return result.get("login_status") is False and "message" in result
    if isinstance(result, list) and len(result) == 1:
        only = result[0]
        if isinstance(only, dict):
            return "error" in only
        if isinstance(only, str):
            return only.startswith("Error:")
    return False


@cache
def _docs(class_name: str) -> dict[str, dict[str, Any]]:
    name = _config().MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]
    path = _data_root() / "multi_turn_func_doc" / name
    with path.open(encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh if line.strip()]
    return {d["name"]: d for d in docs}


def tool_schemas(classes: tuple[str, ...]) -> dict[str, Mapping[str, Any] | None]:
    """The task's offered tools (every function of its classes) -> JSON Schema of their
    parameters, closed (an unknown argument is a schema error)."""
    out: dict[str, Mapping[str, Any] | None] = {}
    for class_name in classes:
        for name, doc in _docs(class_name).items():
            out[name] = to_json_schema(doc)
    return out


def to_json_schema(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of one BFCL function doc as a closed JSON Schema object."""
    schema = _convert(doc.get("parameters", {"type": "dict", "properties": {}}))
    schema["type"] = "object"
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


def _convert(node: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    mapped = TYPE_MAP.get(str(node.get("type"))) if "type" in node else None
    if mapped is not None:
        out["type"] = mapped
    for key in ("description", "enum", "default"):  # a default: optional, null accepted
        if key in node:
            out[key] = node[key]
    if isinstance(node.get("items"), Mapping):
        out["items"] = _convert(node["items"])
    if isinstance(node.get("properties"), Mapping):
        out["properties"] = {k: _convert(v) for k, v in node["properties"].items()}
        if "required" in node:
            out["required"] = list(node["required"])
    return out
