"""The four guard configurations compared side by side (issue 15), and their tool specs.

- ``schema_deps`` (a): BFCL's function docs as JSON Schema plus the dependency declarations
  (``refs`` / ``produces`` / ``invalidates``: which ids must come from an earlier output);
- ``hand_rules`` (b): (a) plus the hand-written preconditions and grounded arguments of
  ``rules/`` - what ``python -m benchmarks.bfcl run`` has always measured;
- ``fork`` (c): (a) plus a fork dry-run of every call, no hand-written state rule, with
  ``tg.UndoLogFork()`` (the call runs once, in an undo log: kept when accepted);
- ``fork_rules`` (d): (b) plus the fork dry-run;
- ``fork_copy`` (c'): (c) with ``tg.DeepCopyFork()`` (the call tried on a copy, then run for
  real): the dry run's verdict there is a separate run, checked against the real one.

The dependency declarations are hand-written too (``rules/``): only the preconditions and the
grounded arguments are what (a) and (c) leave out.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import toolguard as tg
from benchmarks._compare import Config, configurations
from benchmarks.bfcl.data import function_docs
from benchmarks.bfcl.env import is_error_result
from benchmarks.bfcl.rules import RULES
from benchmarks.bfcl.schema import to_json_schema

CONFIGS: dict[str, Config] = configurations("a deep copy")
DEFAULT = "hand_rules"


@cache
def spec(class_name: str, tool: str, config: str = DEFAULT) -> tg.ToolSpec:
    """The ToolSpec of one backend function under one configuration (shared by all tasks,
    so its compiled schema is built once)."""
    doc = function_docs(class_name)[tool]
    rules = RULES.get(class_name, {}).get(tool)
    options: dict[str, Any] = {}
    if rules is not None:
        options = {
            "refs": dict(rules.refs),
            "produces": dict(rules.produces),
            "invalidates": dict(rules.invalidates),
        }
        if CONFIGS[config].state_rules:
            options["preconditions"] = list(rules.preconditions)
            options["grounded"] = list(rules.grounded)
    return tg.ToolSpec(
        name=tool,
        description=doc.get("description"),
        json_schema=to_json_schema(doc),
        error_result=is_error_result,
        **options,
    )
