"""docs/protocol.md documents the whole contract: every attribute key and every report key.

The attribute keys are read from toolguard/_contract.py's source (not imported), so a key added
there without a line in the docs fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
CONTRACT = ROOT / "toolguard" / "_contract.py"

ATTRIBUTE_PREFIXES = ("toolguard.", "gen_ai.", "error.type")

# PROTOCOL.md section 5: the report's JSON keys (a public interface).
REPORT_KEYS = (
    "n",
    "ter",
    "mean_fed",
    "auc_pec",
    "n_empty",
    "pec",
    "pec_elig",
    "n_at_depth",
    "final_success",
    "n_outcome_known",
    "rr",
    "rr_eligible",
    "s",
    "causes",
    "ci",
    "incomplete",
    "disagreements",
    "groups",
    "overall",
    "warnings",
    "labels",
)

# Values of the contract the docs must name, whether or not _contract.py has caught up.
CONTRACT_VALUES = (
    "schema",
    "dependency",
    "precondition",
    "state_consistency",
    "information",
    "allowed",
    "blocked",
    "logged",
    "cancelled",
    "execute_tool",
    "toolguard/trajectory_id",
    "toolguard/step",
    "toolguard/call_id",
    "schema.tool",
    "schema.json",
    "schema.args",
    "dependency.<argument>",
    "precondition.<id>",
    "state.exception",
    "state.error_result",
    "postcondition.<id>",
    "information.<argument>",
)


def _contract_strings() -> list[str]:
    """Every module-level string constant of _contract.py, e.g. ``VALID: Final = "..."``."""
    found = []
    for node in ast.parse(CONTRACT.read_text(encoding="utf-8")).body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            found.append(value.value)
    return found


ATTRIBUTE_KEYS = sorted({s for s in _contract_strings() if s.startswith(ATTRIBUTE_PREFIXES)})


def _in_backticks(key: str) -> bool:
    # A prefix such as "toolguard.label." is documented as `toolguard.label.<key>`.
    tail = "" if key.endswith(".") else "`"
    return re.search("`" + re.escape(key) + tail, DOC) is not None


def test_contract_has_attribute_keys() -> None:
    assert "toolguard.trajectory.id" in ATTRIBUTE_KEYS
    assert "gen_ai.tool.name" in ATTRIBUTE_KEYS
    assert "error.type" in ATTRIBUTE_KEYS


@pytest.mark.parametrize("key", ATTRIBUTE_KEYS)
def test_attribute_key_documented(key: str) -> None:
    assert _in_backticks(key), f"docs/protocol.md does not name `{key}` (toolguard/_contract.py)"


@pytest.mark.parametrize("key", REPORT_KEYS)
def test_report_key_documented(key: str) -> None:
    assert f"`{key}`" in DOC, f"docs/protocol.md does not name the report key `{key}`"


@pytest.mark.parametrize("value", CONTRACT_VALUES)
def test_contract_value_documented(value: str) -> None:
    assert f"`{value}`" in DOC, f"docs/protocol.md does not name `{value}`"


def test_renamed_check_ids_not_documented() -> None:
    assert "requires." not in DOC and "ensures." not in DOC
