"""The BFCL harness's hand rules as a contract file, for ``toolguard replay bfcl --contract``.

``python -m benchmarks.bfcl contract --out bfcl-contract.toml`` writes, per backend function
with rules (``rules/``), its preconditions (``predicate = "benchmarks.bfcl.contract:NAME"``,
resolved by this module's ``__getattr__`` to the rule's own function, which reads the live
backend as ``instance``), its ``refs``, ``invalidates``, ``grounded`` and the ``produces``
places that are names (a rule's ``produces`` given as a function has no contract-file form:
left out, and counted in the file's header comment). The replay runs every call on BFCL's
backends through the guard, so these predicates see the state the harness's do; values the
user gave are bound ids there as in the harness.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomli_w

from benchmarks.bfcl.rules import RULES

_SEP = "__"


def predicate_name(class_name: str, tool: str, cid: str) -> str:
    return _SEP.join(("pre", class_name, tool, cid))


def __getattr__(name: str) -> Callable[..., Any]:
    """``pre__<class>__<tool>__<id>`` -> that precondition's predicate (the contract file's
    ``module:function`` lookup lands here)."""
    parts = name.split(_SEP)
    if len(parts) == 4 and parts[0] == "pre":
        rules = RULES.get(parts[1], {}).get(parts[2])
        for pre in rules.preconditions if rules is not None else ():
            if pre.id == parts[3]:
                return pre.predicate
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def contract_document() -> tuple[dict[str, Any], int]:
    """The contract as TOML data, and how many function-valued ``produces`` were left out."""
    tools: dict[str, Any] = {}
    dropped = 0
    for class_name, by_tool in sorted(RULES.items()):
        for tool, rules in sorted(by_tool.items()):
            table: dict[str, Any] = {}
            if rules.preconditions:
                table["preconditions"] = [
                    {
                        "id": pre.id,
                        "predicate": f"{__name__}:{predicate_name(class_name, tool, pre.id)}",
                        "message": pre.message,
                    }
                    for pre in rules.preconditions
                ]
            for key in ("refs", "invalidates"):
                if getattr(rules, key):
                    table[key] = dict(getattr(rules, key))
            produces = {p: k for p, k in rules.produces.items() if isinstance(p, str)}
            dropped += len(rules.produces) - len(produces)
            if produces:
                table["produces"] = produces
            if rules.grounded:
                table["grounded"] = list(rules.grounded)
            if table:
                if tool in tools:  # BFCL's executor: a later class wins a name clash
                    raise ValueError(f"two backend classes have rules for {tool!r}")
                tools[tool] = table
    return {"mode": "log", "null_as_default": True, "tools": tools}, dropped


def write_contract(path: Path) -> int:
    """Write the contract file; returns the number of tools it declares."""
    document, dropped = contract_document()
    header = (
        "# The BFCL harness's hand rules (benchmarks/bfcl/rules), for\n"
        "#   toolguard replay bfcl RESULT_FILE... --contract THIS_FILE\n"
        f"# {dropped} produces given as functions have no contract-file form: left out.\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + tomli_w.dumps(document))
    return len(document["tools"])


if __name__ == "__main__":
    print(write_contract(Path(sys.argv[1])))
