"""The adapter's declaration (``ADAPTER``): the framework range written once and
mirrored by pyproject.toml, the version from the package metadata, one install command."""

from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

import toolguard_langchain as adapter

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_declared_framework_range_is_the_pyprojects() -> None:
    dependencies = [Requirement(line) for line in PROJECT["dependencies"]]
    declared = {r.name: r.specifier for r in dependencies}
    for requirement in adapter.ADAPTER.requires.values():
        wanted = Requirement(requirement)
        assert declared.get(wanted.name) == wanted.specifier, requirement


def test_the_version_comes_from_the_package_metadata() -> None:
    assert adapter.__version__ == version("toolguard-langchain") == PROJECT["version"]


def test_the_readme_says_the_install_command_the_import_error_says() -> None:
    assert adapter.ADAPTER.install in (ROOT / "README.md").read_text()
