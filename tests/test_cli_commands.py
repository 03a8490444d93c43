"""`toolguard` lists every command; `replay` and `mcp-proxy` are handed to their own parsers."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from toolguard._cli import main

ADAPTER_PYPROJECT = Path(__file__).parents[1] / "adapters" / "mcp" / "pyproject.toml"


def run(
    *args: str, code: str | None = None, path: Path | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "toolguard"]
    env = None
    if path is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), *sys.path])}
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, env=env)


def plug_in(root: Path, entry_points: str) -> Path:
    """A distribution installed in ``root`` (its metadata only, as pip writes it) declaring
    ``entry_points`` (entry_points.txt); ``root`` goes on sys.path to install it."""
    info = root / "toolguard_test_plugin-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: toolguard-test-plugin\nVersion: 0\n"
    )
    (info / "entry_points.txt").write_text(entry_points)
    return root


def adapter_entry_points() -> str:
    """The adapter's entry points as pip writes them from its pyproject.toml on install."""
    declared = tomllib.loads(ADAPTER_PYPROJECT.read_text())["project"]["entry-points"]
    return "".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in declared.items()
    )


def test_help_lists_every_command() -> None:
    done = run("--help")
    assert done.returncode == 0
    for command in ("report", "compare", "replay", "mcp-proxy"):
        assert command in done.stdout


def test_replay_is_handed_its_own_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--help"]) == 0
    assert "usage: toolguard replay" in capsys.readouterr().out


def test_a_command_is_found_by_its_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Whichever distribution declares `mcp-proxy` runs: the core names no adapter module.
    (tmp_path / "toolguard_test_plugin.py").write_text(
        "def main(argv, prog):\n    print(prog, argv)\n    return 7\n"
    )
    plug_in(tmp_path, "[toolguard.commands]\nmcp-proxy = toolguard_test_plugin:main\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["mcp-proxy", "--contract", "x.toml"]) == 7
    assert capsys.readouterr().out == "toolguard mcp-proxy ['--contract', 'x.toml']\n"


def test_mcp_proxy_runs_the_adapters_command(tmp_path: Path) -> None:
    pytest.importorskip("toolguard_mcp", reason="the MCP adapter (adapters/mcp) is not installed")
    # The entry point the adapter's pyproject.toml declares, installed as pip would: the venv's
    # copy of the adapter may predate the declaration until it is reinstalled.
    done = run("mcp-proxy", "--help", path=plug_in(tmp_path, adapter_entry_points()))
    assert done.returncode == 0, done.stderr
    assert "usage: toolguard mcp-proxy" in done.stdout and "--contract" in done.stdout


def test_an_entry_point_that_does_not_import_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Metadata an uninstalled adapter left behind: the same one line as no adapter at all.
    plug_in(tmp_path, "[toolguard.commands]\nmcp-proxy = toolguard_no_such_module:main\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["mcp-proxy", "--help"]) == 2
    assert "pip install -e . -e adapters/mcp" in capsys.readouterr().err


def test_mcp_proxy_without_the_adapter_names_the_install_command() -> None:
    code = (
        "import sys; sys.modules['toolguard_mcp'] = None; "
        "from toolguard._cli import main; sys.exit(main(sys.argv[1:]))"
    )
    done = run("mcp-proxy", "--help", code=code)
    assert done.returncode == 2
    assert "pip install -e . -e adapters/mcp" in done.stderr
