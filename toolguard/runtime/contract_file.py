"""Declarative contracts: a TOML file that says, per tool, what the decorator's options say.

For tools whose code the user cannot change (an MCP server behind ``toolguard mcp-proxy``,
recorded runs replayed by ``toolguard replay``). The file::

    mode = "block"                         # the default for every tool ("block" or "log")

    null_as_default = true                 # accept null for an optional argument with a default

    [tools.git_show]
    refs = { revision = "commit" }          # argument (or "arg.field", "arg[].field") -> kind
    mode = "log"                           # (null_as_default = false here: per tool)

    [tools.git_log]
    produces = { "regex:Commit: '?([0-9a-f]{7,40})" = "commit" }   # place in the result -> kind

    [initial]                              # the run's initial state, where a replay has one
    "TradingBot.orders{}" = "order_id"     # place in the state -> kind (initial_state.py)

    [tools.git_checkout]
    refs = { branch_name = "branch" }
    grounded = ["repo_path"]
    preconditions = [
        { id = "clean_tree", predicate = "my_rules:tree_is_clean", message = "commit first" },
    ]

Places in ``produces`` are those of :class:`ToolSpec` (a key name found anywhere, a path such
as ``items[].id``, ``$`` for the whole result) plus ``regex:PATTERN``: every match of the
pattern (its first group, if it has one) in the result's text, for tools that answer in prose.

What loading a file runs. A condition's ``predicate = "module:function"`` is the only thing
that leads to code: :func:`load_contract` imports ``module`` with ``importlib.import_module``
(running its top-level code the first time the process imports it) and takes ``function``
from it by ``getattr``; it must be callable. The import is tried on ``sys.path`` as it is;
only if that raises ``ImportError`` is the contract file's folder put first on ``sys.path``,
the import tried again, and the folder taken off again (rules kept next to their file). This
happens when the file is loaded, once per condition, never when a call is checked. Nothing
else in the file is evaluated: every other value is TOML data (a ``regex:`` place is compiled
as a regular expression, a ``json_schema`` is read as a schema), no expression is run.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import ToolGuardError
from .inherit import INHERIT
from .initial_state import check_place, initial_values
from .tools.conditions import Postcondition, Precondition
from .tools.json_schema_refs import unresolvable_ref
from .tools.schema import accept_null_defaults
from .tools.spec import ToolSpec

_TOOL_KEYS = frozenset(
    {
        "description",
        "json_schema",
        "refs",
        "produces",
        "invalidates",
        "grounded",
        "preconditions",
        "postconditions",
        "mode",
        "strict",
        "null_as_default",
    }
)
_TOP_KEYS = frozenset({"mode", "tools", "null_as_default", "initial"})
REGEX_PREFIX = "regex:"


class ContractFileError(ToolGuardError, ValueError):
    """A contract file that cannot be used; the message names the file, the tool and the key."""


@dataclass
class Contract:
    """A loaded contract file: the default mode and one :class:`ToolSpec` per tool."""

    path: str
    mode: str = "block"
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    # ``null_as_default``: the file's (None: not said) and each tool's where it says so.
    null_as_default: bool | None = None
    tool_null_as_default: dict[str, bool] = field(default_factory=dict)
    # ``[initial]``: place in the environment's initial state -> kind (``initial_state.py``);
    # read by a replay of a run that has one, ignored by a guard with no such state.
    initial: dict[str, str] = field(default_factory=dict)

    def spec_for(
        self,
        name: str,
        json_schema: Mapping[str, Any] | None = None,
        *,
        null_as_default: bool = False,
    ) -> ToolSpec:
        """The tool's spec with ``json_schema`` (the server's own) unless the file gave one.
        ``null_as_default``: whether ``null`` is accepted for an optional argument with a
        default (``accept_null_defaults``) where the file says nothing, per tool or at the
        top."""
        accept = self.tool_null_as_default.get(name, self.null_as_default)
        if accept is None:
            accept = null_as_default
        base = self.tools.get(name)
        if base is None:
            given = json_schema or {"type": "object"}
            return ToolSpec(name=name, json_schema=accept_null_defaults(given) if accept else given)
        if base.args_model is not None:  # the contract's own argument model: no schema
            return dataclasses.replace(base, name=name)
        schema = base.json_schema if base.json_schema is not None else json_schema
        if accept and schema:
            schema = accept_null_defaults(schema)
        # Every option the contract gives (a code contract may give any of ToolSpec's:
        # error_result, dry_run, external_effects...), with the schema settled here.
        return dataclasses.replace(base, name=name, json_schema=schema or {"type": "object"})

    def initial_values(self, state: Any) -> Iterator[tuple[str, Any]]:
        """(kind, value) for every value the ``[initial]`` places find in ``state``, the
        environment's initial state (None: there is none, nothing is found)."""
        return initial_values(self.initial, state)

    def unknown_tools(self, offered: Iterable[str]) -> list[str]:
        """Tools the file names that ``offered`` (a server's tool list) does not have."""
        names = set(offered)
        return sorted(t for t in self.tools if t not in names)


def load_contract(path: str | os.PathLike[str]) -> Contract:
    """Read and validate a contract file; a :class:`ContractFileError` says what is wrong.

    Imports the module of every ``module:function`` predicate the file names, now (from
    ``sys.path``, else from the file's folder); nothing else in the file is run.
    """
    where = os.fspath(path)
    try:
        with open(where, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ContractFileError(f"{where}: no such contract file") from None
    except IsADirectoryError:
        raise ContractFileError(f"{where}: is a folder, not a contract file") from None
    except OSError as exc:
        raise ContractFileError(f"{where}: cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # TOML is UTF-8 text
        raise ContractFileError(
            f"{where}: not UTF-8 text (byte {exc.start}: {exc.object[exc.start : exc.start + 1]!r})"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        bom = "; it starts with a byte order mark (save it as UTF-8 without BOM)"
        raise ContractFileError(
            f"{where}: not valid TOML: {exc}{bom if _starts_with_bom(where) else ''}"
        ) from None
    except RecursionError:  # tomllib parses nested arrays and tables by recursion
        raise ContractFileError(
            f"{where}: not a contract: arrays or tables nested deeper than Python's stack"
        ) from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ContractFileError(
            f"{where}: unknown top-level key {unknown[0]!r} (known: mode, null_as_default, "
            "[initial], [tools.NAME])"
        )
    mode = data.get("mode", "block")
    if mode not in ("block", "log"):
        raise ContractFileError(f"{where}: mode must be 'block' or 'log', not {mode!r}")
    tools = data.get("tools", {})
    if not isinstance(tools, dict):
        raise ContractFileError(f"{where}: 'tools' must be tables [tools.NAME]")
    null_default = data.get("null_as_default")
    if null_default is not None and not isinstance(null_default, bool):
        raise ContractFileError(f"{where}: null_as_default must be true or false")
    contract = Contract(where, mode, null_as_default=null_default)
    contract.initial = _initial(where, data.get("initial", {}))
    for name, table in tools.items():
        contract.tools[name] = _tool_spec(where, name, table)
        if isinstance(table, dict) and "null_as_default" in table:
            if not isinstance(table["null_as_default"], bool):
                raise ContractFileError(
                    f"{where}: tool {name!r}, key 'null_as_default': must be true or false"
                )
            contract.tool_null_as_default[name] = table["null_as_default"]
    return contract


def _initial(where: str, table: Any) -> dict[str, str]:
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in table.items()
    ):
        raise ContractFileError(f'{where}: [initial] must be a table of place = "kind" strings')
    for place in table:
        why = check_place(place)
        if why is not None:
            raise ContractFileError(f"{where}: [initial] place {place!r}: {why}")
    return dict(table)


def _tool_spec(where: str, name: str, table: Any) -> ToolSpec:
    def fail(key: str, what: str) -> ContractFileError:
        return ContractFileError(f"{where}: tool {name!r}, key {key!r}: {what}")

    if not isinstance(table, dict):
        raise ContractFileError(f"{where}: tool {name!r} must be a table [tools.{name}]")
    unknown = sorted(set(table) - _TOOL_KEYS)
    if unknown:
        raise fail(unknown[0], f"unknown key (known: {', '.join(sorted(_TOOL_KEYS))})")
    for key in ("refs", "invalidates", "produces"):
        value = table.get(key, {})
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()
        ):
            raise fail(key, 'must be a table of place = "kind" strings')
    grounded = table.get("grounded", [])
    if not isinstance(grounded, list) or not all(isinstance(g, str) for g in grounded):
        raise fail("grounded", "must be a list of argument names")
    # TOML has no null: a key left out is the only way to say "the guard's".
    mode = table.get("mode", INHERIT)
    if mode is not INHERIT and mode not in ("block", "log"):
        raise fail("mode", f"must be 'block' or 'log', not {mode!r}")
    strict = table.get("strict", INHERIT)
    if strict is not INHERIT and not isinstance(strict, bool):
        raise fail("strict", "must be true or false")
    schema = table.get("json_schema")
    if schema is not None and not isinstance(schema, dict):
        raise fail("json_schema", "must be a table (a JSON Schema object)")
    if schema is not None:
        why = unresolvable_ref(schema)
        if why is not None:
            raise fail("json_schema", why)
    description = table.get("description")
    if description is not None and not isinstance(description, str):
        raise fail("description", "must be a string")
    produces: dict[Any, str] = {}
    for place, kind in table.get("produces", {}).items():
        if place.startswith(REGEX_PREFIX):
            try:
                produces[_regex_finder(place[len(REGEX_PREFIX) :])] = kind
            except re.error as exc:
                raise fail("produces", f"bad regular expression {place!r}: {exc}") from None
        else:
            produces[place] = kind
    return ToolSpec(
        name=name,
        description=description,
        json_schema=schema,
        refs=dict(table.get("refs", {})),
        produces=produces,
        invalidates=dict(table.get("invalidates", {})),
        grounded=list(grounded),
        preconditions=[
            Precondition(*_condition(c, fail, "preconditions", where))
            for c in _conditions(table, "preconditions", fail)
        ],
        postconditions=[
            Postcondition(*_condition(c, fail, "postconditions", where))
            for c in _conditions(table, "postconditions", fail)
        ],
        mode=mode,
        strict=strict,
    )


def _conditions(
    table: Mapping[str, Any], key: str, fail: Callable[[str, str], ContractFileError]
) -> list[dict[str, Any]]:
    items = table.get(key, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise fail(key, 'must be a list of { id = ..., predicate = "module:function" } tables')
    return items


def _condition(
    item: Mapping[str, Any],
    fail: Callable[[str, str], ContractFileError],
    key: str,
    where: str,
) -> tuple[str, Callable[..., Any], str]:
    """(id, predicate, message) of one condition table."""
    extra = sorted(set(item) - {"id", "predicate", "message"})
    if extra:
        raise fail(key, f"unknown key {extra[0]!r} in a condition (known: id, predicate, message)")
    cid, target, message = item.get("id"), item.get("predicate"), item.get("message", "")
    if not isinstance(cid, str) or not cid:
        raise fail(key, "every condition needs an id (a non-empty string)")
    if not isinstance(target, str) or ":" not in target:
        raise fail(key, f"condition {cid!r}: predicate must be 'module:function', not {target!r}")
    module_name, _, attr = target.partition(":")
    if not module_name or module_name.startswith(".") or not attr:
        raise fail(
            key,
            f"condition {cid!r}: predicate must be 'module:function' with an absolute module "
            f"name, not {target!r}",
        )
    try:
        predicate = getattr(_import_beside(module_name, where), attr)
    except (ImportError, AttributeError) as exc:
        raise fail(key, f"condition {cid!r}: cannot import {target!r}: {exc}") from None
    except Exception as exc:  # the module itself is broken: a SyntaxError, or it raised
        raise fail(
            key, f"condition {cid!r}: importing {target!r} failed: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(predicate):
        raise fail(key, f"condition {cid!r}: {target!r} is not callable")
    if not isinstance(message, str):
        raise fail(key, f"condition {cid!r}: message must be a string, not {message!r}")
    return cid, predicate, message


def _import_beside(module_name: str, where: str) -> Any:
    """Import a predicate's module from the path, or else from the contract file's folder
    (rules kept next to the file they belong to)."""
    try:
        return importlib.import_module(module_name)
    except ImportError:
        folder = os.path.dirname(os.path.abspath(where))
        sys.path.insert(0, folder)
        try:
            return importlib.import_module(module_name)
        finally:
            sys.path.remove(folder)


def _starts_with_bom(where: str) -> bool:
    try:
        with open(where, "rb") as f:
            return f.read(3) == b"\xef\xbb\xbf"
    except OSError:
        return False


def _regex_finder(pattern: str) -> Callable[[Any], list[str]]:
    compiled = re.compile(pattern)

    def find(result: Any) -> list[str]:
        found = []
        for text in _texts(result):
            for match in compiled.finditer(text):
                found.append(match.group(1) if compiled.groups else match.group(0))
        return found

    find.__qualname__ = f"regex({pattern!r})"
    return find


def _texts(value: Any, depth: int = 0) -> Iterable[str]:
    """The text inside a result: a string, or the strings of a list / mapping of them (an MCP
    result's content blocks, say)."""
    if depth > 20:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _texts(v, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _texts(v, depth + 1)
