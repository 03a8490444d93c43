"""JSON Schema patterns only ECMA-262 reads (``\\p{L}``: the Unicode property escapes a
TypeScript MCP server's schemas carry): the tool is declared and its calls are judged by the
pattern, where the tool was refused at declaration and every call of it blocked. Patterns
Python's ``re`` compiles keep Python's meaning; a pattern neither dialect compiles, and an
ECMA-only ``patternProperties`` key, are definition errors naming the place."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolguard as tg

LETTERS = "^\\p{L}+$"
_letters = st.text(st.characters(categories=["Lu", "Ll", "Lt", "Lm", "Lo"]), min_size=1)
_not_letters = st.text(st.characters(categories=["Nd", "Zs", "Po", "Sm"]), min_size=1)


def _guard(pattern: str) -> tg.Guard:
    guard = tg.Guard()
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "pattern": pattern}},
        "required": ["name"],
    }
    guard.register(lambda name: name, name="greet", json_schema=schema)
    return guard


def test_the_pattern_is_not_a_python_regular_expression() -> None:
    with pytest.raises(re.error):
        re.compile(LETTERS)  # the premise: Python's re refuses it


@settings(max_examples=100, deadline=None)
@given(_letters)
def test_a_string_of_letters_matches_a_letters_pattern(name: str) -> None:
    result = _guard(LETTERS).call("greet", {"name": name})
    assert result == name


@settings(max_examples=100, deadline=None)
@given(_not_letters)
def test_a_string_without_letters_is_refused_naming_the_pattern(name: str) -> None:
    result = _guard(LETTERS).call("greet", {"name": name})
    assert isinstance(result, tg.Rejection) and result.cause == "schema"
    assert "does not match '^\\\\p{L}+$'" in str(result)


@pytest.mark.parametrize(
    ("pattern", "good", "bad"),
    [
        ("^\\p{Lu}\\p{Ll}*$", "Émile", "émile"),
        ("^[\\p{L}\\p{N}_-]{1,8}$", "ключ_42", "a b"),
        ("^\\p{Script=Greek}+$", "λόγος", "logos"),
        ("^\\u{1F600}$", "\U0001f600", "x"),  # a code point escape, unicode mode only
    ],
)
def test_ecma_only_patterns_judge_calls(pattern: str, good: str, bad: str) -> None:
    guard = _guard(pattern)
    assert guard.call("greet", {"name": good}) == good
    refused = guard.call("greet", {"name": bad})
    assert isinstance(refused, tg.Rejection) and refused.check == "schema.args"


def test_a_pattern_python_reads_keeps_pythons_meaning() -> None:
    # \d is any Unicode digit in Python (ASCII only in ECMA-262): a Python-written schema's
    # calls are judged as before.
    assert _guard("^\\d+$").call("greet", {"name": "৪২"}) == "৪২"


def test_a_pattern_neither_dialect_reads_is_a_definition_error() -> None:
    with pytest.raises(tg.ToolDefinitionError, match=r"properties/name/pattern.*'\(\?<'"):
        _guard("(?<")


def test_an_ecma_only_pattern_properties_key_is_a_definition_error() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"tags": {"type": "object", "patternProperties": {"^\\p{L}+$": {}}}},
    }
    with pytest.raises(tg.ToolDefinitionError) as info:
        tg.Guard().register(lambda tags: tags, name="tag", json_schema=schema)
    message = str(info.value)
    assert "'tag'" in message and "properties/tags/patternProperties: '^\\\\p{L}+$'" in message
