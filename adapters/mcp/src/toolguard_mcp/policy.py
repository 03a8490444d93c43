"""The proxy's own contract options, beside what the core's contract file says per tool.

    allow = ["get_*", "convert_time"]   # only these tools are served (globs); default: all
    deny = ["delete_*"]                 # never these (wins over allow)
    pin = "block"                       # "warn" (default), "block" or "off"

    [tools.risky_tool]
    on_undeclarable = "pass"            # default "block"

Denied tools are taken out of every ``tools/list`` the host reads and a call to one is blocked
(``schema.tool``), told to the model as a tool that does not exist. Pinning records each
tool's name, description and input schema at the first list the proxy sees (or reads them
from ``--pin FILE``); a tool that changes later, or appears when a pin file exists, is flagged
on its call spans (``toolguard.mcp.tool_changed``) and with ``pin = "block"`` refused
(``schema.pin``) until re-pinned (the entry or the file deleted). A tool the guard cannot
declare (its input schema is invalid) is refused (``schema.undeclarable``) unless its table
says ``on_undeclarable = "pass"``: then it runs unchecked and its spans say why
(``toolguard.mcp.unchecked``).

The core's :func:`toolguard.load_contract` refuses keys it does not know, so these keys are
taken out here and the rest of the file is handed to it as it was.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import tempfile
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
import toolguard as tg

PinMode = Literal["warn", "block", "off"]
_PIN_MODES = ("warn", "block", "off")
_UNDECLARABLE = ("block", "pass")
LOCK_VERSION = 1


@dataclass
class ToolPolicy:
    """Which tools are served, which are pinned, and what a tool that cannot be declared gets."""

    allow: list[str] | None = None
    deny: list[str] = field(default_factory=list)
    pin: PinMode = "warn"
    on_undeclarable: dict[str, str] = field(default_factory=dict)
    lock: Path | None = None
    pins: dict[str, str] = field(default_factory=dict)  # tool -> digest of its definition
    changed: dict[str, str] = field(default_factory=dict)  # tool -> what changed
    _locked: bool = False  # pins came from a file: a tool not in it is a change too

    def denied(self, name: str) -> bool:
        if any(fnmatch.fnmatchcase(name, p) for p in self.deny):
            return True
        return self.allow is not None and not any(fnmatch.fnmatchcase(name, p) for p in self.allow)

    def passes_undeclarable(self, name: str) -> bool:
        return self.on_undeclarable.get(name) == "pass"

    def served(self, tools: list[Any]) -> list[Any]:
        """``tools`` (a ``tools/list`` page, wire form) without the denied ones."""
        return [
            t for t in tools if not (isinstance(t, Mapping) and self.denied(str(t.get("name"))))
        ]

    # -- pinning -------------------------------------------------------------------------------
    def load_lock(self, path: str | os.PathLike[str]) -> None:
        """Pins from ``path`` when it exists; else the first complete list is written there."""
        self.lock = Path(path)
        if not self.lock.exists():
            return
        try:
            data = orjson.loads(self.lock.read_bytes())
            tools = data["tools"]
            self.pins = {str(k): str(v["sha256"]) for k, v in tools.items()}
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            raise tg.ContractFileError(
                f"{self.lock}: not a pin file written by toolguard mcp-proxy ({exc})"
            ) from None
        self._locked = True

    def observe(self, tools: Iterable[Mapping[str, Any]], *, complete: bool) -> list[str]:
        """Compare tool definitions with their pins (pinning those seen first); returns the
        names that changed now."""
        if self.pin == "off":
            return []
        now = []
        definitions = {}
        for tool in tools:
            name = tool.get("name")
            if not isinstance(name, str):
                continue
            definition = {k: tool.get(k) for k in ("name", "description", "inputSchema")}
            digest = hashlib.sha256(orjson.dumps(definition, option=orjson.OPT_SORT_KEYS))
            definitions[name] = (digest.hexdigest(), definition)
            pinned = self.pins.get(name)
            if pinned is None and not self._locked:
                self.pins[name] = digest.hexdigest()
            elif pinned != digest.hexdigest() and name not in self.changed:
                self.changed[name] = "not in the pin file" if pinned is None else "changed"
                now.append(name)
        if complete and self.lock is not None and not self._locked:
            self._write_lock(definitions)
        return now

    def _write_lock(self, definitions: Mapping[str, tuple[str, Any]]) -> None:
        assert self.lock is not None
        body = {
            "version": LOCK_VERSION,
            "tools": {
                n: {"sha256": d, "definition": t} for n, (d, t) in sorted(definitions.items())
            },
        }
        self.lock.write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2) + b"\n")
        self._locked = True


def load(path: str | os.PathLike[str]) -> tuple[tg.Contract, ToolPolicy]:
    """The core's contract and the proxy's options from one file; a
    :class:`toolguard.ContractFileError` names the file, the tool and the key."""
    where = os.fspath(path)
    try:
        with open(where, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise tg.ContractFileError(f"{where}: no such contract file") from None
    except tomllib.TOMLDecodeError as exc:
        raise tg.ContractFileError(f"{where}: not valid TOML: {exc}") from None
    policy = ToolPolicy()
    for key in ("allow", "deny"):
        if key in data:
            value = data.pop(key)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise tg.ContractFileError(f"{where}: {key!r} must be a list of tool names")
            setattr(policy, key, value)
    pin = data.pop("pin", "warn")
    if pin not in _PIN_MODES:
        raise tg.ContractFileError(f"{where}: 'pin' must be 'warn', 'block' or 'off', not {pin!r}")
    policy.pin = pin
    tools = data.get("tools")
    if isinstance(tools, dict):
        for name, table in tools.items():
            if isinstance(table, dict) and "on_undeclarable" in table:
                value = table.pop("on_undeclarable")
                if value not in _UNDECLARABLE:
                    raise tg.ContractFileError(
                        f"{where}: tool {name!r}, key 'on_undeclarable': must be 'block' or "
                        f"'pass', not {value!r}"
                    )
                policy.on_undeclarable[name] = value
    return _core_contract(where, data), policy


def _core_contract(where: str, data: dict[str, Any]) -> tg.Contract:
    import tomli_w

    # The rest goes through the core's loader from a copy; its messages name the user's file.
    with tempfile.TemporaryDirectory(prefix="toolguard-mcp-") as folder:
        copy = os.path.join(folder, Path(where).name)
        with open(copy, "wb") as f:
            tomli_w.dump(data, f)
        try:
            contract = tg.load_contract(copy)
        except tg.ContractFileError as exc:
            raise tg.ContractFileError(str(exc).replace(copy, where)) from None
    contract.path = where
    return contract
