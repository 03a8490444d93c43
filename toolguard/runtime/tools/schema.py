"""Argument schemas: built once when a tool is wrapped, applied on every call.

Three sources: a function's type hints (a pydantic model made from its signature:
``signature.py``), an explicit pydantic model, or a JSON Schema (the way MCP and OpenAI
function specs describe tools; validated with the ``jsonschema`` library, and first by a
pydantic-core validator translated from it where that is exact: ``schema_core.py``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

import pydantic
import pydantic_core
from pydantic import BaseModel
from pydantic_core import core_schema

from ..._errors import ToolDefinitionError
from ..verdict import NAME_LIMIT, Failure, shorten_text
from .conditions import shorten
from .originals import container_arguments, keeping_originals

_MAX_ERRORS_SHOWN = 4


class SchemaFailure(Exception):
    """Internal: carries the failure of a schema check to the pipeline."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure

    def __str__(self) -> str:
        # A traceback that chains this one (telemetry failing while a rejection is handled,
        # logged by the SDK) shows this text: the value-free one, as spans and logs do.
        return self.failure.telemetry_message


def schema_failure(
    check: str, message: str, model_message: str, telemetry_message: str | None = None
) -> SchemaFailure:
    return SchemaFailure(
        Failure(
            "schema", check, message, model_message, telemetry_message=telemetry_message or message
        )
    )


def parse_arguments(tool: str, raw: str | bytes | Mapping[str, Any] | None) -> dict[str, Any]:
    """Arguments straight from a model: a mapping, or JSON text of an object."""
    if type(raw) is str:  # the model's text (most calls): json.loads without its wrapper
        try:
            value = _DECODER.decode(raw) if raw.strip() else {}
        except (ValueError, RecursionError) as exc:  # nested past the parser's depth
            raise _not_json(tool, exc) from None
        if type(value) is dict:
            return value
        raise _not_an_object(tool, value)
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    tool = shorten_text(tool, NAME_LIMIT)  # only echoed from here on
    if not isinstance(raw, str | bytes | bytearray):
        # A list or a number where the arguments belong: the model's (or the framework's)
        # mistake, rejected as a schema failure rather than crashing inside the guard.
        raise schema_failure(
            "schema.json",
            f"arguments of {tool!r} are a {type(raw).__name__}, not a mapping or JSON text",
            f"The arguments for `{tool}` must be one JSON object of named arguments, "
            f"not {shorten(raw)}.",
        )
    try:
        value = json.loads(raw) if raw.strip() else {}
    except (ValueError, TypeError, RecursionError) as exc:  # nested past the parser's depth
        raise _not_json(tool, exc) from None
    if not isinstance(value, dict):
        raise _not_an_object(tool, value)
    return value


_DECODER = json.JSONDecoder()  # what json.loads uses for text, called without its wrapper


def _not_json(tool: str, exc: BaseException) -> SchemaFailure:
    tool = shorten_text(tool, NAME_LIMIT)
    return schema_failure(
        "schema.json",
        f"arguments of {tool!r} are not valid JSON: {exc}",
        f"The arguments for `{tool}` are not valid JSON ({exc}). "
        "Send the arguments as one JSON object.",
    )


def _not_an_object(tool: str, value: Any) -> SchemaFailure:
    tool = shorten_text(tool, NAME_LIMIT)
    return schema_failure(
        "schema.json",
        f"arguments of {tool!r} are JSON {type(value).__name__}, not an object",
        f"The arguments for `{tool}` must be a JSON object of named arguments, "
        f"not {shorten(value)}.",
    )


Located = tuple[tuple[Any, ...], str]  # (place in the arguments, what is wrong there)


class ArgumentSchema:
    """Validates a dict of named arguments; knows the argument names and how to call."""

    def __init__(
        self,
        tool: str,
        names: tuple[str, ...] | None,
        validate: Callable[[dict[str, Any]], dict[str, Any]],
        hint: str,
        metadata: Mapping[str, tuple[Any, ...]] | None = None,
    ) -> None:
        self.tool = tool
        # Per argument, the `Annotated[...]` extras pydantic kept (markers such as tg.Ref).
        self.metadata: Mapping[str, tuple[Any, ...]] = metadata or {}
        self.names = names  # None: unknown (a JSON Schema that allows anything)
        # An attribute, not a method forwarding to it: one Python call less on every call.
        self.validate: Callable[[dict[str, Any]], dict[str, Any]] = validate
        self.hint = hint
        # Every problem of some arguments with its place ((argument, ...), text), for plan
        # verification (plan_check.py): it leaves problems at a reference's place alone.
        self.locate: Callable[[dict[str, Any]], list[Located]] | None = None

    @property
    def name_set(self) -> frozenset[str] | None:
        return None if self.names is None else frozenset(self.names)


def from_model(
    tool: str,
    model: type[BaseModel],
    *,
    keep_extra: bool = False,
    strict: bool = True,
    renamed: Mapping[str, str] | None = None,
) -> ArgumentSchema:
    """Validation by the model. ``strict``: by the meaning of the JSON Schema the model was
    shown: ``true``, ``"42"`` and ``4.0`` are no integer, and an argument the model does not
    declare is unknown even where the model itself would ignore it. ``renamed``: field ->
    argument, for a signature's parameters whose own names pydantic cannot take as fields
    (each field has its argument's name as alias); the values come back by argument."""
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise ToolDefinitionError(f"tool {tool!r}: args_model must be a pydantic model class")
    try:
        # Also completes the model: one with undefined forward references fails here, at
        # wrap time, instead of on the first call.
        json_schema = model.model_json_schema()
    except pydantic.PydanticInvalidForJsonSchema:
        # An argument of an arbitrary class (a handle, a client): valid, just not describable
        # in JSON Schema; the hint then names the arguments without their types.
        json_schema = {
            "properties": {f.alias or key: {} for key, f in model.model_fields.items()},
            "required": [f.alias or n for n, f in model.model_fields.items() if f.is_required()],
        }
    except pydantic.PydanticUserError as exc:
        raise ToolDefinitionError(
            f"tool {tool!r}: cannot build its argument schema: {exc}"
        ) from exc
    validator = model.__pydantic_validator__
    renamed = renamed or {}
    # A field with an alias is also taken by its own name: the function's parameter, which
    # a direct call uses (the model is shown the alias). Not for a signature's renamed
    # fields, whose names are toolguard's own.
    by_name = not renamed and _takes_names(model)
    validate_python = _by_name(validator.validate_python, by_name)
    validate_json = _by_name(validator.validate_json, by_name)
    fields = tuple(model.model_fields)
    names = tuple(renamed.get(n, n) for n in fields)
    extra_mode = model.model_config.get("extra")
    keep_extra = keep_extra or extra_mode == "allow"
    accepted = frozenset(names) | {
        a for f in model.model_fields.values() for a in (f.alias, f.validation_alias) if a
    }
    check_unknown = strict and extra_mode in (None, "ignore")

    def unknown_failure(args: dict[str, Any]) -> SchemaFailure | None:
        unknown = [k for k in args if k not in accepted]
        if not unknown:
            return None
        problems = [f"{shorten_text(k)}: unknown argument" for k in unknown]
        return _schema_error(tool, problems, problems, hint)

    def retry(args: dict[str, Any], exc: pydantic.ValidationError) -> Any:
        """The instance after validate_python refused ``args``, or the schema failure."""
        if not strict:
            raise _from_pydantic(tool, exc, hint) from None
        # Strict Python mode also refuses what JSON carries legitimately (a date as a
        # string, an enum by value, a list for a tuple): judge those as the JSON they were.
        try:
            return validate_json(json.dumps(args), strict=True)
        except pydantic.ValidationError as json_exc:
            raise _from_pydantic(tool, json_exc, hint) from None
        except (TypeError, ValueError, RecursionError):
            raise _from_pydantic(tool, exc, hint) from None

    def values_of(instance: Any) -> dict[str, Any]:
        # A validated model's __dict__ holds exactly its fields, in order (extras live in
        # __pydantic_extra__): copying it is 3-4x cheaper than a getattr per field.
        values = dict(instance.__dict__)
        if len(values) != len(names):  # a model that keeps more than its fields: ask each
            values = {name: getattr(instance, name) for name in fields}
        if renamed:
            values = by_argument(values)
        if keep_extra and instance.__pydantic_extra__:
            values.update(instance.__pydantic_extra__)
        return values

    def by_argument(values: dict[str, Any]) -> dict[str, Any]:
        return {renamed.get(k, k): v for k, v in values.items()}

    # The model's own field validation without building the model (its fields dict is what
    # the model would hold as __dict__): about a third of validate_python's cost. None when
    # the model has more than fields (a model validator, a custom __init__ or post-init).
    validate_fields = _fields_validator(model)
    if validate_fields is not None:
        validate_fields = _by_name(validate_fields, by_name)

    def validate(args: dict[str, Any]) -> dict[str, Any]:
        if check_unknown and not accepted.issuperset(args):
            failure = unknown_failure(args)
            if failure is not None:
                raise failure
        if validate_fields is not None:
            try:
                values, extra, _ = validate_fields(args, strict=strict)
            except pydantic.ValidationError as exc:
                return values_of(retry(args, exc))
            if renamed:
                values = by_argument(values)
            if keep_extra and extra:
                values.update(extra)
            return values  # type: ignore[no-any-return]
        try:
            instance = validate_python(args, strict=strict)
        except pydantic.ValidationError as exc:
            instance = retry(args, exc)
        return values_of(instance)

    def locate(args: dict[str, Any]) -> list[Located]:
        found: list[Located] = []
        if check_unknown:
            found += [((k,), "unknown argument") for k in args if k not in accepted]
        try:
            try:
                if strict:  # judged as the JSON the model sends, as retry() does
                    validate_json(json.dumps(args), strict=True)
                    return found
            except (TypeError, ValueError, RecursionError):
                pass
            validate_python(args, strict=strict)
        except pydantic.ValidationError as exc:
            found += [(tuple(e["loc"]), _located_text(e)) for e in exc.errors(include_url=False)]
        return found

    hint = _hint_from_json_schema(tool, json_schema)
    metadata = {
        renamed.get(name, name): tuple(f.metadata)
        for name, f in model.model_fields.items()
        if f.metadata
    }
    # A container argument validation left unchanged goes as the caller's own object.
    containers = container_arguments(model, renamed)
    checked = keeping_originals(validate, containers) if containers else validate
    schema = ArgumentSchema(tool, names, checked, hint, metadata)
    schema.locate = locate
    return schema


def _takes_names(model: type[BaseModel]) -> bool:
    """Whether some field has an alias the model would take only by that alias, and this
    pydantic can be asked per call to take names too (``by_name``, pydantic 2.11)."""
    config = model.model_config
    if config.get("validate_by_name") or config.get("populate_by_name"):
        return False
    if not any(
        (f.alias or f.validation_alias) not in (None, n) for n, f in model.model_fields.items()
    ):
        return False
    return _BY_NAME_OPTION


def _has_by_name_option() -> bool:
    # Asked of a validator of nothing: the model's own would run its validators.
    try:
        pydantic_core.SchemaValidator(core_schema.any_schema()).validate_python(None, by_name=True)
    except TypeError:  # an older pydantic-core: no such option
        return False
    return True


_BY_NAME_OPTION = _has_by_name_option()


def _by_name(validate: Callable[..., Any], by_name: bool) -> Callable[..., Any]:
    return functools.partial(validate, by_name=True, by_alias=True) if by_name else validate


def _fields_validator(model: type[BaseModel]) -> Any:
    """``validate_python`` of the model's ``model-fields`` core schema: the same field
    validators, defaults, extra handling and errors as the model's, without the instance (its
    fields dict is what the model would hold as ``__dict__``)."""
    try:
        core = model.__pydantic_core_schema__
        if (
            core.get("type") != "model"
            or core.get("custom_init")
            or core.get("root_model")
            or core["schema"].get("type") != "model-fields"
            or getattr(model, "__pydantic_post_init__", None) is not None
        ):
            return None
        return pydantic_core.SchemaValidator(core["schema"], core.get("config")).validate_python
    except Exception:  # a schema this does not understand: the model validates
        return None


def _located_text(error: Any) -> str:
    kind = error["type"]
    if kind == "missing":
        return "missing required argument"
    if kind == "extra_forbidden":
        return "unknown argument"
    return f"{shorten_text(error['msg'])} (got {shorten(error.get('input'))})"


def _from_pydantic(tool: str, exc: pydantic.ValidationError, hint: str) -> SchemaFailure:
    problems, safe = [], []
    for error in exc.errors(include_url=False):
        where = shorten_text(".".join(str(p) for p in error["loc"]) or "arguments")
        kind = error["type"]
        if kind == "missing":
            problems.append(f"{where}: missing required argument")
            safe.append(problems[-1])
        elif kind == "extra_forbidden":
            problems.append(f"{where}: unknown argument")
            safe.append(problems[-1])
        else:
            msg = shorten_text(error["msg"])
            problems.append(f"{where}: {msg} (got {shorten(error.get('input'))})")
            safe.append(f"{where}: {kind}")
    return _schema_error(tool, problems, safe, hint)


def _schema_error(tool: str, problems: list[str], safe: list[str], hint: str) -> SchemaFailure:
    tool = shorten_text(tool, NAME_LIMIT)

    def listing(items: list[str]) -> str:
        more = len(items) - _MAX_ERRORS_SHOWN
        return "; ".join(items[:_MAX_ERRORS_SHOWN]) + (f"; and {more} more" if more > 0 else "")

    return schema_failure(
        "schema.args",
        f"invalid arguments for {tool!r}: {listing(problems)}",
        f"The arguments for `{tool}` are invalid: {listing(problems)}. "
        f"Call it again with arguments matching {hint}.",
        f"invalid arguments for {tool!r}: {listing(safe)}",
    )


def _hint_from_json_schema(tool: str, schema: Mapping[str, Any]) -> str:
    """`tool(a: string, b?: integer)`: what the model should call, computed once."""
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return f"`{tool}(...)`"
    required = set(schema.get("required", ()))
    parts = []
    for name, spec in props.items():
        kind = spec.get("type", "any") if isinstance(spec, Mapping) else "any"
        if isinstance(spec, Mapping) and "anyOf" in spec:
            kind = "|".join(
                str(s.get("type", "any")) for s in spec["anyOf"] if isinstance(s, Mapping)
            )
        parts.append(f"{name}{'' if name in required else '?'}: {kind}")
    return f"`{tool}({', '.join(parts)})`"


def accept_null_defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with JSON ``null`` accepted for every optional argument that has a
    ``default``: models send ``"status": null`` to mean "the default", and backends whose
    parameter defaults to ``None`` take it. A required argument, or one without a default,
    is left as it is. Only the top level (the arguments) changes; the input is not."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return dict(schema)
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    out = {}
    for name, prop in properties.items():
        if isinstance(prop, Mapping) and "default" in prop and name not in needed:
            out[name] = {"anyOf": [dict(prop), {"type": "null"}], "default": prop["default"]}
        else:
            out[name] = prop
    return {**schema, "properties": out}
