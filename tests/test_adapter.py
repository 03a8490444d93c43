"""The adapters' shared helper, ``tg.Adapter``: the framework imported on first use, its
installed version checked against the declared range, the adapter's version from metadata.

Real installed distributions stand in for a framework (pydantic, a core dependency): a range
it is outside of is declared, nothing is mocked.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import warnings
from importlib.metadata import version
from pathlib import Path

import pytest

import toolguard as tg

INSTALL = "pip install -e . -e adapters/example"
REPO = Path(__file__).resolve().parents[1]


def adapter(**requires: str) -> tg.Adapter:
    return tg.Adapter("toolguard-otel", requires=requires, install=INSTALL, package="toolguard")


def test_a_missing_framework_raises_an_import_error_naming_the_install_command() -> None:
    missing = adapter(toolguard_no_such_framework="no-such-framework>=1,<2")
    with pytest.raises(ImportError) as info:
        missing.require()
    message = str(info.value)
    assert INSTALL in message and "no-such-framework>=1,<2" in message
    assert info.value.name == "toolguard_no_such_framework"


def test_a_framework_blocked_from_import_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As when the distribution is absent: its metadata may linger, the import is what counts.
    monkeypatch.setitem(sys.modules, "pydantic", None)
    with pytest.raises(ImportError, match=re.escape(INSTALL)):
        adapter(pydantic="pydantic>=2").require()


def test_a_framework_outside_the_range_warns_once_naming_its_version_and_the_range() -> None:
    installed = version("pydantic")
    outside = adapter(pydantic="pydantic<2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # the helper's own once, not the filter's
        outside.require()
        outside.require()
    assert [w.category for w in caught] == [tg.FrameworkVersionWarning]
    message = str(caught[0].message)
    assert f"pydantic {installed} is installed" in message and "pydantic<2" in message
    # It points at the caller's line, not at a line inside toolguard.
    assert caught[0].filename == __file__


def test_the_warning_points_at_the_line_that_imports_from_the_adapter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `from adapter import name` runs the adapter's __getattr__ inside the import machinery,
    # whose frames warnings.warn leaves out of its stacklevel count.
    package = tmp_path / "toolguard_example_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import toolguard as tg\n"
        "ADAPTER = tg.Adapter('toolguard-example-pkg', requires={'pydantic': 'pydantic<2'},"
        " install='pip install -e . -e adapters/example')\n"
        "__getattr__, __dir__ = ADAPTER.exports({'Guard': 'toolguard'})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "toolguard_example_pkg", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from toolguard_example_pkg import Guard  # type: ignore[import-not-found]
    assert Guard is tg.Guard
    assert [(w.category, w.filename) for w in caught] == [(tg.FrameworkVersionWarning, __file__)]
    monkeypatch.delitem(sys.modules, "toolguard_example_pkg")


def test_a_framework_inside_the_range_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adapter(pydantic="pydantic>=2,<3").require()


def test_the_adapter_version_comes_from_its_package_metadata() -> None:
    # A distribution whose version is not the core's: only the metadata can know it.
    assert tg.Adapter("pydantic", requires={}, install=INSTALL).version == version("pydantic")
    assert tg.__version__ == version("toolguard-otel")
    assert tg.Adapter("toolguard-no-such-adapter", requires={}, install=INSTALL).version == (
        "0+unknown"
    )


def test_a_malformed_range_fails_when_the_adapter_is_declared() -> None:
    with pytest.raises(ValueError):
        adapter(pydantic="pydantic[email]>=2")


def test_exports_load_on_first_use_after_the_framework_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    package = types.ModuleType("toolguard_example")
    package.__path__ = []  # a package, so relative names resolve against it
    package.__all__ = ["Adapter", "shared"]
    monkeypatch.setitem(sys.modules, "toolguard_example", package)
    example = tg.Adapter(
        "toolguard-example", requires={"toolguard_no_such_framework": "x>=1"}, install=INSTALL
    )
    getattr_, dir_ = example.exports({"Adapter": "toolguard"})
    assert dir_() == ["Adapter", "shared"]
    with pytest.raises(AttributeError, match="shared"):
        getattr_("shared")
    with pytest.raises(ImportError, match=re.escape(INSTALL)):
        getattr_("Adapter")
    getattr_, _ = example.exports({"Adapter": "toolguard"}, require=False)
    assert getattr_("Adapter") is tg.Adapter
    assert package.Adapter is tg.Adapter  # cached: the next access skips __getattr__


def test_no_version_string_is_written_in_the_packages() -> None:
    # pyproject.toml holds each distribution's version; the code reads it from the metadata.
    sources = [*REPO.glob("toolguard/**/*.py"), *REPO.glob("adapters/*/src/**/*.py")]
    assignments = re.compile(r"^__version__\s*=\s*[\"']", re.MULTILINE)
    written = [str(p.relative_to(REPO)) for p in sources if assignments.search(p.read_text())]
    assert written == []


def test_a_declaration_that_disagrees_with_its_project_is_said_point_by_point(
    tmp_path: Path,
) -> None:
    declared = tg.Adapter(
        "pydantic", requires={"pydantic": "pydantic>=2,<3"}, install="pip install -e ."
    )
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "pydantic"\nversion = "0.0.1"\ndependencies = ["pydantic>=1"]\n'
    )
    (tmp_path / "README.md").write_text("install it somehow\n")
    problems = declared.declaration_problems(tmp_path)
    assert len(problems) == 3, problems
    assert "pydantic<3,>=2 is declared, pyproject.toml says >=1" in problems[0]
    assert "pyproject.toml says 0.0.1" in problems[1]
    assert "pip install -e ." in problems[2]


def test_run_trajectory_takes_the_users_then_the_current_then_a_new_one() -> None:
    guard = tg.Guard()
    made: list[tg.Trajectory] = []

    def make() -> tg.Trajectory:
        made.append(guard.trajectory("new"))
        return made[-1]

    mine = guard.trajectory("mine")
    assert tg.run_trajectory(mine, make) == (mine, True)  # started here: the adapter ends it
    started = guard.trajectory("started").start()
    assert tg.run_trajectory(started, make) == (started, False)  # the user ends it
    with guard.trajectory("around") as around:
        assert tg.run_trajectory(None, make) == (around, False)
    traj, owned = tg.run_trajectory(None, make)
    assert owned and made == [traj] and traj.id == "new" and not traj.ended
    mine.end()
    with pytest.raises(tg.UsageError, match="already ended"):
        tg.run_trajectory(mine, make)
    with pytest.raises(tg.UsageError, match=r"must be a tg\.Trajectory"):
        tg.run_trajectory("t-1", make)


def test_a_run_trajectory_left_open_is_ended_at_exit(tmp_path: Path) -> None:
    """A run the process leaves mid-way (no hook ends it) still writes its summary, once the
    adapter that owns it passed it to tg.end_at_exit."""
    spans = tmp_path / "spans.jsonl"
    script = (
        "import toolguard as tg\n"
        f"tg.setup_file_export({str(spans)!r})\n"
        "guard = tg.Guard()\n"
        "make = lambda: guard.trajectory('dies', labels={'m': 'x'})\n"
        "traj, owned = tg.run_trajectory(None, make)\n"
        "assert owned\n"
        "tg.end_at_exit(traj)\n"
        "raise SystemExit(0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    names = [
        (span["name"], {a["key"] for a in span["attributes"]})
        for line in spans.read_text().splitlines()
        for scope in json.loads(line)["resourceSpans"][0]["scopeSpans"]
        for span in scope["spans"]
    ]
    assert [n for n, _ in names] == ["toolguard.trajectory"]
    assert "toolguard.label.m" in names[0][1] and "toolguard.trajectory.success" not in names[0][1]
