"""A tool's options are typed: a misspelt option or a wrong value fails ``mypy --strict``.

The options of ``guard.tool``, ``register`` and ``declare`` are written once, as
``tg.ToolOptions`` next to ``tg.ToolSpec``; these tests keep the two equal and ask mypy
itself what it makes of a user's mistakes.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest

import toolguard as tg
from toolguard.runtime.tools import spec as spec_module

ROOT = Path(tg.__file__).resolve().parents[1]

WRONG = {
    "guard.tool(dry_runn=True)": "dry_runn",
    'guard.register(f, strict="yes")': "strict",
    'guard.declare("x", refz={})': "refz",
    "tg.ToolSpec(grounded=1)": "grounded",
}

HEADER = """\
from typing import Annotated

import toolguard as tg

guard = tg.Guard()


def f(x: int) -> int:
    return x


"""

RIGHT = """\
@guard.tool(dry_run=True, strict=False, name="g", replace=True)
def g(state: Annotated[int, tg.State]) -> int:
    return state


guard.register(f, name="f2", refs={"x": "thing"}, mode="log", error_result=None)
guard.declare("x", json_schema={"type": "object"}, external_effects=True)
tg.ToolSpec(grounded=["x"], dry_run=tg.DeepCopyFork())
"""


def spec_options() -> dict[str, object]:
    """ToolSpec's fields the user sets, with their types."""
    hints = typing.get_type_hints(tg.ToolSpec, vars(spec_module))
    return {f.name: hints[f.name] for f in dataclasses.fields(tg.ToolSpec) if f.init}


def test_the_options_are_the_spec_fields_with_their_types() -> None:
    # `name` is a parameter of its own in tool/register/declare, not an option among others.
    options = typing.get_type_hints(tg.ToolOptions, vars(spec_module))
    fields = spec_options()
    assert fields.pop("name") == str | None
    assert options == fields


def test_a_misspelt_option_still_fails_at_run_time() -> None:
    guard = tg.Guard()
    loose: dict[str, typing.Any] = {"dry_runn": True}
    with pytest.raises(tg.ToolDefinitionError, match=r"unknown tool option.*dry_runn"):
        guard.tool(**loose)(lambda x: x)
    with pytest.raises(tg.ToolDefinitionError, match=r"^tool 'x': unknown tool option.*refz"):
        guard.declare("x", json_schema={"type": "object"}, **{"refz": {}})
    with pytest.raises(tg.ToolDefinitionError, match=r"^tool 'y': unknown tool option.*refz"):
        guard.register(lambda x: x, name="y", **{"refz": {}})


@pytest.mark.slow  # a cold mypy run over the package: about ten seconds
def test_mypy_strict_flags_each_wrong_option_and_passes_right_ones(tmp_path: Path) -> None:
    lines = list(WRONG)
    (tmp_path / "wrong.py").write_text(HEADER + "\n".join(lines) + "\n")
    (tmp_path / "right.py").write_text(HEADER + RIGHT)
    if (ROOT / ".mypy_cache").is_dir():
        # make test has just run mypy over the package: a copy of its cache spares the cold
        # run (mypy checks each cached module's source hash and rechecks any that changed).
        shutil.copytree(ROOT / ".mypy_cache", tmp_path / "cache")
    env = dict(os.environ, MYPYPATH=str(ROOT))  # this tree's toolguard, not an installed one
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--cache-dir",
            str(tmp_path / "cache"),
            "wrong.py",
            "right.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "right.py" not in done.stdout, done.stdout
    errors: dict[int, str] = {}
    for line in done.stdout.splitlines():
        found = re.match(r"wrong\.py:(\d+): error: (.*)", line)
        if found:
            errors[int(found[1])] = errors.get(int(found[1]), "") + found[2]
    first = HEADER.count("\n") + 1
    for offset, (call, option) in enumerate(WRONG.items()):
        message = errors.get(first + offset, "")
        assert f'"{option}"' in message, f"{call}: {message or 'not flagged'}\n{done.stdout}"
    assert done.returncode == 1, done.stderr


def test_the_snippets_read_as_written() -> None:
    # The right snippet runs as well as it type-checks (the mypy test reads it only).
    namespace: dict[str, typing.Any] = {}
    exec(textwrap.dedent(HEADER).replace("tg.Guard()", "tg.Guard(state=1)") + RIGHT, namespace)
    assert namespace["guard"].tool_names == ["f2", "g", "x"]


def test_a_generator_tool_whose_result_a_contract_reads_is_refused() -> None:
    guard = tg.Guard()

    def contacts() -> typing.Iterator[dict[str, str]]:
        yield {"id": "id_8923"}

    async def acontacts() -> typing.AsyncIterator[dict[str, str]]:
        yield {"id": "id_8923"}

    for fn in (contacts, acontacts):
        with pytest.raises(tg.ToolDefinitionError, match="is a generator function"):
            guard.register(fn, produces={"id": "contact_id"})
    ok = tg.Postcondition("ok", lambda result: True)
    with pytest.raises(tg.ToolDefinitionError, match="is a generator function"):
        guard.register(contacts, name="checked", postconditions=[ok])
    guard.register(contacts, name="plain")  # nothing reads its result: guarded as it is
