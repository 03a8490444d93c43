"""`toolguard` lists every command; `replay` and `mcp-proxy` are handed to their own parsers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from toolguard._cli import main


def run(*args: str, code: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "toolguard"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)


def test_help_lists_every_command() -> None:
    done = run("--help")
    assert done.returncode == 0
    for command in ("report", "compare", "replay", "mcp-proxy"):
        assert command in done.stdout


def test_replay_is_handed_its_own_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--help"]) == 0
    assert "usage: toolguard replay" in capsys.readouterr().out


def test_mcp_proxy_runs_the_adapters_command() -> None:
    pytest.importorskip("toolguard_mcp", reason="the MCP adapter (adapters/mcp) is not installed")
    done = run("mcp-proxy", "--help")
    assert done.returncode == 0, done.stderr
    assert "usage: toolguard mcp-proxy" in done.stdout and "--contract" in done.stdout


def test_mcp_proxy_without_the_adapter_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['toolguard_mcp'] = None; "
        "from toolguard._cli import main; sys.exit(main(sys.argv[1:]))"
    )
    done = run("mcp-proxy", "--help", code=code)
    assert done.returncode == 2
    assert "pip install -e . -e adapters/mcp" in done.stderr
