"""Regular expressions in JSON Schemas: Python's where it reads them, ECMA-262's where only it does.

JSON Schema names ECMA-262 (unicode mode) as the dialect of ``pattern``; Python's ``re``,
which ``jsonschema`` uses, refuses some of it: ``\\p{L}`` and the other Unicode property
escapes a TypeScript MCP server's schemas carry (zod's ``.regex(/\\p{L}/u)``). Such a tool was
refused at declaration, so every call of it was blocked. A pattern ``re`` compiles is still
matched by ``re``, as before (a schema written from Python means it that way, and the two
dialects differ on a few patterns both accept, ``\\d`` among them); one only ECMA-262 compiles
is matched by ``regress`` (an ECMA-262 engine), in unicode mode. A pattern neither compiles is
a definition error, as before.

Only ``pattern`` takes the ECMA-only kind: ``jsonschema`` reads ``patternProperties`` keys with
``re`` in several keywords, so a key only ECMA-262 compiles is refused when the tool is
declared (:func:`python_only_keys`), not at its first call.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .json_schema_refs import subschemas

Matcher = Callable[[str], bool]

_EXTENDED: dict[type[Any], type[Any]] = {}  # a jsonschema validator class, with our pattern


@functools.lru_cache(maxsize=4096)
def matcher(pattern: str) -> Matcher | None:
    """Whether a string matches ``pattern`` (searched, as JSON Schema does); None when
    neither dialect compiles it."""
    try:
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        pass
    else:
        return lambda text: compiled.search(text) is not None
    try:
        import regress
    except ImportError:  # not installed: Python's dialect alone, as before
        return None
    try:
        ecma = regress.Regex(pattern, "u")
    except Exception:  # regress.RegressError: not ECMA-262 either
        return None
    return lambda text: ecma.find(text) is not None


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    """The ``pattern`` keyword (jsonschema's own, with :func:`matcher`)."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string") or not isinstance(pattern, str):
        return
    match = matcher(pattern)
    if match is None or not match(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def validator_class(cls: type[Any]) -> type[Any]:
    """``cls`` (a jsonschema validator class) whose ``pattern`` reads either dialect."""
    extended = _EXTENDED.get(cls)
    if extended is None:
        from jsonschema import validators

        extended = validators.extend(cls, {"pattern": _pattern})  # type: ignore[no-untyped-call]
        _EXTENDED[cls] = extended
    return extended


def format_checker(cls: type[Any]) -> Any:
    """``cls``'s format checker, with a ``regex`` format that reads either dialect: the
    metaschema checks every ``pattern`` with it when the tool is declared."""
    from jsonschema import FormatChecker

    checker = FormatChecker()
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
    checker.checkers["regex"] = (_is_regex, ())
    return checker


def _is_regex(value: object) -> bool:
    return not isinstance(value, str) or matcher(value) is not None


def python_only_keys(schema: Mapping[str, Any]) -> str | None:
    """The first ``patternProperties`` key Python's ``re`` does not compile, as
    ``path/patternProperties: key``; None when there is none."""
    for where, node in subschemas(schema):
        keys = node.get("patternProperties")
        if isinstance(keys, Mapping):
            for key in keys:
                if isinstance(key, str) and not _compiles(key):
                    return f"{where or '(root)'}/patternProperties: {key!r}"
    return None


def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True
