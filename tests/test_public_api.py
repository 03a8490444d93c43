"""The public surface: ``toolguard.__all__`` is sorted, complete and resolvable."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import toolguard as tg

INIT = Path(tg.__file__)


def names_bound_in_init() -> set[str]:
    """Every name toolguard/__init__.py binds at module level (imports, defs, assignments)."""
    tree = ast.parse(INIT.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            if isinstance(node, ast.ImportFrom) and node.module in ("__future__", "typing"):
                continue
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_all_is_sorted_and_unique():
    assert list(tg.__all__) == sorted(tg.__all__)
    assert len(set(tg.__all__)) == len(tg.__all__)


def test_every_public_name_is_in_all():
    public = {n for n in names_bound_in_init() if not n.startswith("_")} | {"__version__"}
    assert public - set(tg.__all__) == set()


def test_every_name_in_all_exists():
    missing = [n for n in tg.__all__ if not hasattr(tg, n)]
    assert missing == []
    namespace: dict = {}
    exec("from toolguard import *", namespace)
    assert set(tg.__all__) <= set(namespace)


def test_public_objects_are_documented():
    for name in tg.__all__:
        obj = getattr(tg, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"toolguard.{name} has no docstring"


def test_the_api_sketch_names_exist():
    for name in (
        "Guard",
        "Precondition",
        "Postcondition",
        "ToolSpec",
        "trajectory",
        "ToolGuardError",
        "ToolDefinitionError",
        "ToolCallRejected",
        "Rejection",
        "setup_file_export",
    ):
        assert name in tg.__all__
    assert isinstance(tg.__version__, str) and tg.__version__


def test_guard_import_does_not_load_the_report_side() -> None:
    import subprocess
    import sys

    code = (
        "import sys, toolguard as tg; assert 'numpy' not in sys.modules; "
        "assert callable(tg.compute_metrics); assert 'numpy' in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def public_classes_and_functions() -> dict[str, object]:
    objects = {name: getattr(tg, name) for name in tg.__all__}  # loads the lazy ones too
    return {n: o for n, o in objects.items() if inspect.isclass(o) or inspect.isfunction(o)}


def test_public_objects_report_the_package_not_their_module() -> None:
    # repr, tracebacks and docs show `toolguard.Guard`: where a name is defined inside the
    # package is an implementation detail that may move.
    modules = {n: getattr(o, "__module__", None) for n, o in public_classes_and_functions().items()}
    assert len(modules) > 50
    wrong = {n: m for n, m in modules.items() if m != "toolguard"}
    assert wrong == {}
    assert repr(tg.Guard) == "<class 'toolguard.Guard'>"


def pickled_globals(obj: object) -> set[str]:
    """The `module name` pairs a protocol-2 pickle of obj looks up when it is loaded."""
    import pickle
    import pickletools

    ops = pickletools.genops(pickle.dumps(obj, protocol=2))
    return {str(arg) for op, arg, _ in ops if op.name == "GLOBAL"}


def test_public_exceptions_and_rejections_pickle_by_their_public_name(otel) -> None:
    import pickle

    guard = otel.guard(mode="block")

    @guard.tool(preconditions=[tg.Precondition("positive", lambda x: x > 0, "must be > 0")])
    def f(x: int) -> int:
        return x

    with otel.trajectory("t"):
        rejection = guard.call("f", {"x": -1})
        with pytest.raises(tg.ToolCallRejected) as info:
            f(-2)
    assert isinstance(rejection, tg.Rejection)
    fork_error = tg.ForkError("the savepoint is gone")

    again = pickle.loads(pickle.dumps(rejection))
    assert type(again) is tg.Rejection and again == rejection
    exc = pickle.loads(pickle.dumps(info.value))
    assert type(exc) is tg.ToolCallRejected
    assert exc.rejection == info.value.rejection and str(exc) == str(info.value)
    assert exc.cause == "precondition"
    forked = pickle.loads(pickle.dumps(fork_error))
    assert type(forked) is tg.ForkError and forked.args == fork_error.args
    # A pickle names the public path, so it still loads after an internal module moves.
    assert "toolguard Rejection" in pickled_globals(rejection)
    assert "toolguard ToolCallRejected" in pickled_globals(info.value)
    assert "toolguard ForkError" in pickled_globals(fork_error)
