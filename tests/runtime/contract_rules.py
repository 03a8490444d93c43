"""Predicates a contract file names by import path (tests/runtime/test_contract_file.py)."""


def short_message(text: str) -> bool:
    return len(text) <= 20


NOT_CALLABLE = 3
