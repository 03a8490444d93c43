"""The adapter's declaration (``ADAPTER``): the framework range written once and
mirrored by pyproject.toml, the version from the package metadata, one install command."""

from __future__ import annotations

from pathlib import Path

import toolguard_mcp as adapter


def test_the_declaration_agrees_with_the_pyproject_the_metadata_and_the_readme() -> None:
    assert adapter.ADAPTER.declaration_problems(Path(__file__).resolve().parents[1]) == []


def test_without_the_sdk_the_import_error_names_the_install_command() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import toolguard_mcp\n"
        "toolguard_mcp.CallGuard  # needs no SDK\n"
        "try:\n"
        "    toolguard_mcp.GuardedClient\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "mcp>=2.3,<3" in done.stdout
    assert "pip install -e . -e adapters/mcp" in done.stdout
