"""What every framework adapter shares: the framework imported on first use, its version
checked against the range the adapter declares, the adapter's own version, lazy exports.

The adapters (adapters/<framework>/) build on this public helper, as opentelemetry-python-
contrib's instrumentations build on ``BaseInstrumentor`` and their ``_instruments``. The core
imports no framework: it only ever sees their names, as strings.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

# A distribution name, then its range: "openai-agents>=0.24,<1" (no extras, markers or URLs).
_REQUIREMENT = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(.*)", re.DOTALL)

# The version of a distribution run from a source tree without being installed: nothing can
# say which it is, and a valid PEP 440 string keeps comparisons working.
UNKNOWN_VERSION = "0+unknown"


class FrameworkVersionWarning(UserWarning):
    """The installed agent framework is outside the range its adapter declares it supports.

    The adapter still runs (a newer release often works); filter on this category to silence
    it, or make it an error in CI (``-W error::toolguard.FrameworkVersionWarning``)."""


def distribution_version(distribution: str) -> str:
    """The installed version of ``distribution`` from its package metadata, or ``0+unknown``
    when it is not installed (a source tree on ``sys.path``)."""
    try:
        return version(distribution)
    except PackageNotFoundError:
        return UNKNOWN_VERSION


class Adapter:
    """One framework adapter's declaration: its distribution, the framework it needs and the
    command that installs it.

    ``requires`` maps each module the adapter imports to the PEP 508 requirement of the
    distribution that provides it (``{"agents": "openai-agents>=0.24,<1"}``); the adapter's
    ``pyproject.toml`` lists the same ranges. ``install`` is the command a user runs when
    the framework is missing (the adapters are on no package index: from a toolguard
    checkout, ``pip install -e . -e adapters/<name>``). ``package`` is the import package,
    by default the distribution's name with underscores.

    ``version`` is the adapter's version from its package metadata; ``require()`` imports the
    framework, and ``exports()`` makes a package's names load on first use.
    """

    def __init__(
        self,
        distribution: str,
        *,
        requires: Mapping[str, str],
        install: str,
        package: str | None = None,
    ) -> None:
        self.distribution = distribution
        self.package = package or distribution.replace("-", "_")
        self.requires: dict[str, str] = dict(requires)
        self.install = install
        # Parsed now: a malformed range is the adapter's bug, and fails at its import.
        self._ranges = {module: _parse(req) for module, req in self.requires.items()}
        self._checked = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Adapter({self.distribution!r}, requires={self.requires!r})"

    @property
    def version(self) -> str:
        """The adapter's own version, from its distribution's metadata."""
        return distribution_version(self.distribution)

    def require(self) -> None:
        """Import the framework's modules, or raise an ``ImportError`` that names what is
        missing and the install command; then, once per process, warn with a
        ``FrameworkVersionWarning`` for each installed distribution outside its range."""
        if self._checked:
            return
        for module, requirement in self.requires.items():
            try:
                importlib.import_module(module)
            except ImportError as exc:
                raise ImportError(
                    f"{self.package} needs {requirement}, which cannot be imported ({exc}); "
                    f"from a toolguard checkout: {self.install}",
                    name=exc.name,
                ) from exc
        with self._lock:
            if self._checked:
                return
            self._checked = True
        from packaging.version import InvalidVersion, Version

        for module, (name, supported) in self._ranges.items():
            try:
                found = version(name)
                inside = supported.contains(Version(found), prereleases=True)
            except (PackageNotFoundError, InvalidVersion):
                # Importable but with no (valid) metadata, e.g. vendored: nothing to compare.
                continue
            if not inside:
                warnings.warn(
                    f"{self.package} {self.version} supports {self.requires[module]}, but "
                    f"{name} {found} is installed: it may not work as documented",
                    FrameworkVersionWarning,
                    stacklevel=_caller_level(),
                )

    def declaration_problems(self, project: str | os.PathLike[str]) -> list[str]:
        """What disagrees between this declaration and the adapter's project folder (its
        ``pyproject.toml`` and ``README.md``): each framework range must be the pyproject's,
        the version the metadata's and the pyproject's, and the README must give the install
        command the ImportError gives. Empty when all agree: each adapter's own test asserts
        it, so the range is written once and cannot drift."""
        import tomllib

        from packaging.requirements import Requirement

        root = Path(project)
        meta = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
        declared = {}
        for line in meta.get("dependencies", []):
            requirement = Requirement(line)
            declared[requirement.name] = requirement.specifier
        problems = []
        for wanted in map(Requirement, self.requires.values()):
            if declared.get(wanted.name) != wanted.specifier:
                problems.append(
                    f"{wanted} is declared, pyproject.toml says "
                    f"{declared.get(wanted.name, 'nothing')}"
                )
        if self.version != meta.get("version"):
            problems.append(f"version {self.version}, pyproject.toml says {meta.get('version')}")
        if self.install not in (root / "README.md").read_text(encoding="utf-8"):
            problems.append(f"README.md does not give the install command {self.install!r}")
        return problems

    def exports(
        self, names: Mapping[str, str], *, require: bool = True
    ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
        """A module ``__getattr__`` and ``__dir__`` for the adapter's package that import each
        of ``names`` (a name -> its relative module) on first use, after ``require()``
        unless ``require=False`` (when some exports need no framework, and the modules that
        do call ``require()`` themselves). ``import <adapter>`` alone then never imports
        the framework."""
        package = self.package
        table = dict(names)

        def __getattr__(name: str) -> Any:
            module = table.get(name)
            if module is None:
                raise AttributeError(f"module {package!r} has no attribute {name!r}")
            if require:
                self.require()
            value = getattr(importlib.import_module(module, package), name)
            setattr(sys.modules[package], name, value)
            return value

        def __dir__() -> list[str]:
            return sorted(getattr(sys.modules[package], "__all__", table))

        return __getattr__, __dir__


def _parse(requirement: str) -> tuple[str, SpecifierSet]:
    # packaging.specifiers only, imported here: `import toolguard` for a guard with no adapter
    # does not pay for it (packaging.requirements would add its markers and tags, ~35 ms).
    from packaging.specifiers import SpecifierSet

    match = _REQUIREMENT.fullmatch(requirement)
    if match is None:
        raise ValueError(f"not a distribution name and range: {requirement!r}")
    return match[1], SpecifierSet(match[2])


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside toolguard, its adapters and importlib:
    the warning points at the user's line that first used the adapter, so the default filter
    shows it once per such line, not once for a line inside the adapter."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None:
        if not frame.f_globals.get("__name__", "").startswith(("toolguard", "importlib")):
            return level
        frame = frame.f_back
        # warnings.warn skips the import machinery's frames (`from adapter import name` runs
        # the adapter's __getattr__ from there) when it counts stacklevel: so does this.
        while frame is not None and _internal(frame):
            frame = frame.f_back
        level += 1
    return 1


def _internal(frame: FrameType) -> bool:
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename
