"""Fresh module state for BFCL's backends: every replayed task starts as in a new process.

BFCL's backend classes keep state outside their instances: ``TwitterAPI.post_tweet(...,
mentions=[])`` is a mutable default that ``mention()`` extends in place, so once any task
has mentioned users on a tweet posted without ``mentions``, every later tweet of the process
carries them. A replay of one result file after another (or a reference computed once and
compared later) then depends on what ran before. Here each backend module's state as first
imported is kept (a deep copy of every function default of its classes and of every mutable
module-level container) and put back before each fresh backend instance is built, so the
verdicts of a file are the same alone and after any other file.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from types import FunctionType, ModuleType
from typing import Any

_MUTABLE = (list, dict, set, bytearray)


@dataclass
class _Snapshot:
    # (function, its __defaults__, its __kwdefaults__) as first seen
    defaults: list[tuple[FunctionType, Any, Any]] = field(default_factory=list)
    # module-level mutable containers: (module, name, value as first seen)
    globals: list[tuple[ModuleType, str, Any]] = field(default_factory=list)


_SNAPSHOTS: dict[str, _Snapshot] = {}


def remember(cls: type) -> None:
    """Keep the pristine state of ``cls``'s module (once per module; call it when the class
    is first imported, before any of its methods ran)."""
    name = cls.__module__
    if name in _SNAPSHOTS:
        return
    module = sys.modules[name]
    snap = _Snapshot()
    for value in vars(module).values():
        if isinstance(value, type) and value.__module__ == name:
            for attr in vars(value).values():
                fn = attr.__func__ if isinstance(attr, classmethod | staticmethod) else attr
                if isinstance(fn, FunctionType) and (fn.__defaults__ or fn.__kwdefaults__):
                    pristine = (copy.deepcopy(fn.__defaults__), copy.deepcopy(fn.__kwdefaults__))
                    snap.defaults.append((fn, *pristine))
    for key, value in vars(module).items():
        if isinstance(value, _MUTABLE) and not key.startswith("__"):
            try:
                snap.globals.append((module, key, copy.deepcopy(value)))
            except Exception:  # a value deepcopy cannot copy is not backend data
                continue
    _SNAPSHOTS[name] = snap


def restore(classes: tuple[type, ...]) -> None:
    """Put the modules of ``classes`` back as :func:`remember` found them: fresh copies of
    the function defaults always (they are small), module-level containers only where they
    changed (some are long, e.g. the long-context extensions), in place."""
    for name in dict.fromkeys(cls.__module__ for cls in classes):
        snap = _SNAPSHOTS.get(name)
        if snap is None:
            continue
        for fn, defaults, kwdefaults in snap.defaults:
            fn.__defaults__ = copy.deepcopy(defaults)
            fn.__kwdefaults__ = copy.deepcopy(kwdefaults)
        for module, key, pristine in snap.globals:
            current: Any = getattr(module, key, None)
            if type(current) is not type(pristine):
                setattr(module, key, copy.deepcopy(pristine))
            elif not _equal(current, pristine):
                fresh = copy.deepcopy(pristine)
                if isinstance(current, list | bytearray):
                    current[:] = fresh
                else:
                    current.clear()
                    current.update(fresh)


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # an element whose comparison raises: restore to be safe
        return False
