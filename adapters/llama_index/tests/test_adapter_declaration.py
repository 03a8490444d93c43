"""The adapter's declaration (``ADAPTER``): the framework range written once and
mirrored by pyproject.toml, the version from the package metadata, one install command."""

from __future__ import annotations

from pathlib import Path

import toolguard_llama_index as adapter


def test_the_declaration_agrees_with_the_pyproject_the_metadata_and_the_readme() -> None:
    assert adapter.ADAPTER.declaration_problems(Path(__file__).resolve().parents[1]) == []
