"""Random tool signatures and legal calls for the "a legal call is never blocked, and the
tool gets what it would get without the guard" properties (test_legal_calls.py).

A signature is a list of parameters, each of one of the KINDS below (an annotation, a
strategy for its Python values, and its values as a model sends them: pydantic's JSON form).
The function is built from source text (optionally under ``from __future__ import
annotations``) as a plain, async, method, classmethod, staticmethod, partial or callable
object, and records what it received.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import functools
import keyword
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional, Union

import pydantic
from hypothesis import strategies as st
from typing_extensions import TypedDict


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Point:
    x: int
    tags: list[str] = dataclasses.field(default_factory=list)


class Range(TypedDict):
    lo: int
    hi: int


class Item(pydantic.BaseModel):
    sku: str
    qty: Annotated[int, pydantic.Field(ge=0)]
    child: Optional[Item] = None  # noqa: UP045  (a forward reference on purpose)


class Order(pydantic.BaseModel):
    items: list[Item]
    when: datetime.datetime
    point: Optional[Point] = None  # noqa: UP045


# What the exec'd tool sources see: every annotation below by the name its source uses.
NAMESPACE: dict[str, Any] = {
    "Any": Any,
    "Annotated": Annotated,
    "Literal": Literal,
    "Optional": Optional,
    "Union": Union,
    "Field": pydantic.Field,
    "datetime": datetime,
    "decimal": decimal,
    "uuid": uuid,
    "Color": Color,
    "Level": Level,
    "Point": Point,
    "Range": Range,
    "Item": Item,
    "Order": Order,
}

_text = st.text(max_size=8)
_json_scalar = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text
_json = st.recursive(
    _json_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_item = st.builds(
    Item,
    sku=_text,
    qty=st.integers(0, 10**20),
    child=st.none() | st.builds(Item, sku=_text, qty=st.integers(0, 5)),
)
_point = st.builds(Point, x=st.integers(), tags=st.lists(_text, max_size=2))
_aware = st.datetimes(timezones=st.none() | st.just(datetime.UTC))

# (annotation source, strategy of its Python values)
KINDS: list[tuple[str, st.SearchStrategy[Any]]] = [
    ("int", st.integers()),  # big ints too: JSON carries them
    ("float", st.floats(allow_nan=False, allow_infinity=False)),
    ("str", st.text(max_size=10)),
    ("bool", st.booleans()),
    ("bytes", st.text(max_size=6).map(str.encode)),
    ("Optional[int]", st.none() | st.integers()),
    ("int | None", st.none() | st.integers()),
    ("Union[int, str]", st.integers() | st.text(max_size=5)),
    ("Literal['a', 'b', 7]", st.sampled_from(["a", "b", 7])),
    ("Color", st.sampled_from(Color)),
    ("Level", st.sampled_from(Level)),
    ("Annotated[int, Field(ge=0, le=100)]", st.integers(0, 100)),
    ("Annotated[str, Field(min_length=1, max_length=4)]", st.text(min_size=1, max_size=4)),
    ("list[int]", st.lists(st.integers(), max_size=3)),
    ("dict[str, float]", st.dictionaries(_text, st.floats(allow_nan=False), max_size=3)),
    ("tuple[int, str]", st.tuples(st.integers(), _text)),
    ("tuple[str, ...]", st.lists(_text, max_size=3).map(tuple)),
    ("set[int]", st.sets(st.integers(), max_size=3)),
    ("frozenset[str]", st.frozensets(_text, max_size=3)),
    ("datetime.datetime", _aware),
    ("datetime.date", st.dates()),
    ("uuid.UUID", st.uuids()),
    ("decimal.Decimal", st.decimals(allow_nan=False, allow_infinity=False, places=3)),
    ("Point", _point),
    ("Range", st.fixed_dictionaries({"lo": st.integers(), "hi": st.integers()})),
    ("Item", _item),
    ("Order", st.builds(Order, items=st.lists(_item, max_size=2), when=_aware)),
    ("list[Item]", st.lists(_item, max_size=2)),
    ("Any", _json),
]

# Names a tool's parameters may have: plain ones, and ones pydantic treats specially.
NAMES = ["a", "b", "c", "d", "e", "x_1", "ключ", "data", "json", "schema", "copy", "validate"]
TRICKY_NAMES = ["_private", "_", "model_config", "model_dump", "model_fields", "fields"]
VARIANTS = ["plain", "async", "method", "classmethod", "staticmethod", "partial", "callable"]
VARIANTS += ["async method", "async partial", "async callable"]


@dataclasses.dataclass
class Param:
    name: str
    kind: str  # "posonly" | "normal" | "kwonly"
    annotation: str
    values: st.SearchStrategy[Any]
    default: Any = dataclasses.field(default=None)
    has_default: bool = False


@dataclasses.dataclass
class Signature:
    params: list[Param]
    varargs: tuple[str, str, st.SearchStrategy[Any]] | None  # (name, annotation, values)
    varkw: tuple[str, str, st.SearchStrategy[Any]] | None  # (name, annotation, values)
    future: bool
    variant: str
    odd_return: bool = False

    def source(self) -> tuple[str, dict[str, Any]]:
        """The function's source and the defaults it refers to (by name in its globals)."""
        parts: list[str] = []
        defaults: dict[str, Any] = {}
        positional = [p for p in self.params if p.kind != "kwonly"]
        for p in positional:
            parts.append(_param_source(p, defaults))
            if p.kind == "posonly" and not any(
                q.kind == "posonly" for q in positional[positional.index(p) + 1 :]
            ):
                parts.append("/")
        if self.varargs is not None:
            parts.append(f"*{self.varargs[0]}: {self.varargs[1]}")
        elif any(p.kind == "kwonly" for p in self.params):
            parts.append("*")
        parts += [_param_source(p, defaults) for p in self.params if p.kind == "kwonly"]
        if self.varkw is not None:
            parts.append(f"**{self.varkw[0]}: {self.varkw[1]}")
        names = [p.name for p in self.params]
        names += [v[0] for v in (self.varargs, self.varkw) if v is not None]
        record = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
        head = "from __future__ import annotations\n" if self.future else ""
        # Under future annotations a return type may name what only a type checker sees.
        ret = " -> OnlyForTypeCheckers" if self.future and self.odd_return else ""
        shape = _SHAPES[self.variant]
        return head + shape.format(sig=", ".join(parts), record=record, ret=ret), defaults

    def build(self, record: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
        text, defaults = self.source()
        namespace = {**NAMESPACE, **defaults, "_record": record, "functools": functools}
        exec(compile(text, "<tool>", "exec"), namespace)  # our own generated source
        return namespace["tool"]  # type: ignore[no-any-return]


def _param_source(p: Param, defaults: dict[str, Any]) -> str:
    if not p.has_default:
        return f"{p.name}: {p.annotation}"
    default_name = f"_default_{len(defaults)}"
    defaults[default_name] = p.default
    return f"{p.name}: {p.annotation} = {default_name}"


_SHAPES = {
    "plain": "def tool({sig}){ret}:\n    return _record({record})\n",
    "async": "async def tool({sig}){ret}:\n    return _record({record})\n",
    "method": (
        "class Service:\n    def run(self, {sig}){ret}:\n        return _record({record})\n"
        "tool = Service().run\n"
    ),
    "classmethod": (
        "class Service:\n    @classmethod\n    def run(cls, {sig}){ret}:\n"
        "        return _record({record})\ntool = Service.run\n"
    ),
    "staticmethod": (
        "class Service:\n    @staticmethod\n    def run({sig}){ret}:\n"
        "        return _record({record})\ntool = Service.run\n"
    ),
    "partial": (
        "def inner({sig}){ret}:\n    return _record({record})\ntool = functools.partial(inner)\n"
    ),
    "callable": (
        "class Service:\n    def __call__(self, {sig}){ret}:\n        return _record({record})\n"
        "tool = Service()\n"
    ),
}
for _sync in ("method", "partial", "callable"):
    _SHAPES[f"async {_sync}"] = (
        _SHAPES[_sync].replace("    def ", "    async def ").replace("def inner", "async def inner")
    )


@st.composite
def signatures(draw: st.DrawFn, names: list[str] = NAMES) -> Signature:
    count = draw(st.integers(0, 5))
    chosen = draw(st.lists(st.sampled_from(names), min_size=count, max_size=count, unique=True))
    params: list[Param] = []
    for name in chosen:
        annotation, values = draw(st.sampled_from(KINDS))
        params.append(
            Param(name, draw(st.sampled_from(["posonly", "normal", "kwonly"])), "", values)
        )
        params[-1].annotation = annotation
    # Python's order: positional-only, then the others, then keyword-only.
    order = {"posonly": 0, "normal": 1, "kwonly": 2}
    params.sort(key=lambda p: order[p.kind])
    positional = [p for p in params if p.kind != "kwonly"]
    first_default = draw(st.integers(0, len(positional)))
    for i, p in enumerate(params):
        wants = i >= first_default if p.kind != "kwonly" else draw(st.booleans())
        if wants:
            p.has_default = True
            # A value of the type, or a mutable object shared by every call (a cache).
            p.default = draw(p.values | st.builds(dict) | st.builds(list))
    rest = [n for n in ["args", "rest", "more"] if n not in chosen]
    varargs = None
    if draw(st.booleans()):
        annotation, values = draw(st.sampled_from(KINDS[:8]))
        varargs = (rest[0], annotation, values)
    varkw = None
    if draw(st.booleans()) and "kw" not in chosen:
        annotation, values = draw(st.sampled_from([KINDS[-1], *KINDS[:8], KINDS[19]]))
        varkw = ("kw", annotation, values)
    variant = draw(st.sampled_from(VARIANTS))
    return Signature(params, varargs, varkw, draw(st.booleans()), variant, draw(st.booleans()))


def is_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


OMIT = object()


@dataclasses.dataclass
class Call:
    values: dict[str, Any]  # parameter -> Python value, or OMIT
    varargs: list[Any]
    extras: dict[str, Any]  # **kwargs: names the signature does not list

    def direct(self, sig: Signature, positional_prefix: int) -> tuple[list[Any], dict[str, Any]]:
        """Positional and keyword arguments for calling the function itself."""
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        positional = [p for p in sig.params if p.kind != "kwonly"]
        for i, p in enumerate(positional):
            value = self.values[p.name]
            if value is OMIT:
                continue
            if p.kind == "posonly" or self.varargs or (i < positional_prefix and len(args) == i):
                args.append(value)
            else:
                kwargs[p.name] = value
        args += self.varargs
        for p in sig.params:
            if p.kind == "kwonly" and self.values[p.name] is not OMIT:
                kwargs[p.name] = self.values[p.name]
        kwargs.update(self.extras)
        return args, kwargs

    def named(self, sig: Signature) -> dict[str, Any]:
        """The arguments as a model sends them: one object of named JSON values."""
        out = {
            name: json_form(sig, name, value)
            for name, value in self.values.items()
            if value is not OMIT
        }
        if self.varargs and sig.varargs is not None:
            annotation = sig.varargs[1]
            out[sig.varargs[0]] = [
                adapter(annotation).dump_python(v, mode="json") for v in self.varargs
            ]
        if self.extras and sig.varkw is not None:
            kind = adapter(sig.varkw[1])
            out.update({k: kind.dump_python(v, mode="json") for k, v in self.extras.items()})
        return out


@functools.cache
def adapter(annotation: str) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(eval(annotation, NAMESPACE))  # our own annotation texts


def json_form(sig: Signature, name: str, value: Any) -> Any:
    param = next(p for p in sig.params if p.name == name)
    return adapter(param.annotation).dump_python(value, mode="json")


@st.composite
def calls(draw: st.DrawFn, sig: Signature) -> Call:
    values: dict[str, Any] = {}
    omitted_positional = False
    for p in sig.params:
        omit = p.has_default and draw(st.booleans())
        if p.kind == "posonly" and omitted_positional:
            omit = True  # a positional-only one after an omitted one cannot be given
        values[p.name] = OMIT if omit else draw(p.values)
        if omit and p.kind != "kwonly":
            omitted_positional = True
    varargs: list[Any] = []
    if sig.varargs is not None and not omitted_positional:
        varargs = draw(st.lists(sig.varargs[2], max_size=3))
    extras: dict[str, Any] = {}
    if sig.varkw is not None:
        taken = {p.name for p in sig.params} | {sig.varargs[0] if sig.varargs else ""}
        extra_names = st.text(min_size=1, max_size=6).filter(lambda n: n not in taken)
        extras = draw(st.dictionaries(extra_names, sig.varkw[2], max_size=2))
    return Call(values, varargs, extras)


def expected(sig: Signature, call: Call, *, from_json: bool) -> dict[str, Any]:
    """What the function receives without the guard, the values converted as pydantic's
    ``validate_call`` converts them (a model's JSON values as JSON, Python values as
    Python), and a parameter left out at its own default object."""
    import json

    out: dict[str, Any] = {}
    for p in sig.params:
        value = call.values[p.name]
        if value is OMIT:
            out[p.name] = p.default
        elif from_json:
            text = json.dumps(adapter(p.annotation).dump_python(value, mode="json"))
            out[p.name] = adapter(p.annotation).validate_json(text)
        else:
            out[p.name] = adapter(p.annotation).validate_python(value)
    if sig.varargs is not None:
        name, annotation, _ = sig.varargs
        ta = adapter(annotation)
        if from_json:
            out[name] = tuple(
                ta.validate_json(json.dumps(ta.dump_python(v, mode="json"))) for v in call.varargs
            )
        else:
            out[name] = tuple(ta.validate_python(v) for v in call.varargs)
    if sig.varkw is not None:
        ta = adapter(sig.varkw[1])
        if from_json:
            out[sig.varkw[0]] = {
                k: ta.validate_json(json.dumps(ta.dump_python(v, mode="json")))
                for k, v in call.extras.items()
            }
        else:
            out[sig.varkw[0]] = {k: ta.validate_python(v) for k, v in call.extras.items()}
    return out


def same(got: Any, want: Any, where: str = "") -> list[str]:
    """Where ``got`` differs from ``want`` in value or in type, at any depth."""
    if type(got) is not type(want):
        return [
            f"{where or 'value'}: {type(got).__name__} {got!r} != {type(want).__name__} {want!r}"
        ]
    if isinstance(want, dict):
        if list(got) != list(want):
            return [f"{where}: keys {list(got)!r} != {list(want)!r}"]
        return [d for k in want for d in same(got[k], want[k], f"{where}.{k}")]
    if isinstance(want, list | tuple):
        if len(got) != len(want):
            return [f"{where}: {got!r} != {want!r}"]
        return [
            d
            for i, (g, w) in enumerate(zip(got, want, strict=True))
            for d in same(g, w, f"{where}[{i}]")
        ]
    if isinstance(want, pydantic.BaseModel):
        return same(dict(got.__dict__), dict(want.__dict__), where)
    if dataclasses.is_dataclass(want):
        return same(dataclasses.asdict(got), dataclasses.asdict(want), where)
    return [] if got == want else [f"{where}: {got!r} != {want!r}"]
