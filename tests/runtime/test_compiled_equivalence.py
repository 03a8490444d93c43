"""The compiled call path (toolguard/runtime/compiled.py) gives what the general path gives.

Random contracts (schemas from signatures and JSON Schemas, references, paths, ``produces``
in every place kind, ``invalidates``, preconditions and postconditions that hold, fail and
raise, grounded arguments, error results, modes, sync and async tools) and random call
sequences (direct calls by keyword and by position, dispatch by name with mappings and JSON
text, misspelt names, two-phase checks finished, failed and cancelled, reserved call ids,
bindings, observed text, calls before and after the trajectory, nested calls) run through a
guard whose tools are compiled and one whose calls all take the general path; every return
value, raised rejection, verdict, T, FED, cause, binding, seen value and span (name,
attributes, status, parent) must be the same.

The indexes behind the compiled path are checked against what they replace: the seen-text
index against the scan, the key finder against ``_find_key``, the leaf walker against
``_leaves``, the tool-name suggestions against difflib.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import json
import logging
from collections.abc import Callable
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

import toolguard as tg
from toolguard.runtime.seen import SeenTexts
from toolguard.runtime.suggest import ToolNames
from toolguard.runtime.tool import _find_key, find_key_into
from toolguard.runtime.trajectory import _leaves, add_leaves

# -- contracts ------------------------------------------------------------------------------

# name, annotation (with default), JSON Schema, whether it holds a string id
PARAMS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "a": ("str", {"type": "string"}, True),
    "b": ("int", {"type": "integer"}, False),
    "c": ("str | None = None", {"type": ["string", "null"]}, True),
    "d": ("str = 'dflt'", {"type": "string"}, True),
    "items": ("list[str] | None = None", {"type": ["array", "null"]}, False),
    "obj": ("dict[str, str] | None = None", {"type": ["object", "null"]}, False),
}
REQUIRED = ("a", "b")
KINDS = ("k1", "k2")
KIND = st.sampled_from(["k1", "k1", "k2"])


def _not_bad(a: Any) -> bool:
    return a != "bad"


def _not_banned(state: Any, a: Any) -> bool:
    return a not in state["banned"]


def _divides(b: Any) -> bool:
    return 10 // (b - 13) is not None  # raises for b == 13


def _interrupts(b: Any) -> bool:
    if b == 99:
        raise KeyboardInterrupt
    return True


def _few_args(args: Any) -> bool:
    return len(args) < 4


def _has_state(guard_state: Any, instance: Any, a: Any) -> bool:
    return guard_state is not None and getattr(instance, "banned", None) != a


def _c_not_no(c: Any) -> bool:
    return c != "no"


PRECONDITIONS: dict[str, tuple[Callable[..., bool], tuple[str, ...]]] = {
    "not_bad": (_not_bad, ("a",)),
    "not_banned": (_not_banned, ("a",)),
    "divides": (_divides, ("b",)),
    "interrupts": (_interrupts, ("b",)),
    "few_args": (_few_args, ()),
    "has_state": (_has_state, ("a",)),
    "c_not_no": (_c_not_no, ("c",)),
}


def _result_not_none(result: Any) -> bool:
    return result is not None


def _result_sized(result: Any, a: Any) -> bool:
    return len(result) >= 0  # raises for numbers and None


def _args_and_result(args: Any, result: Any) -> bool:
    return not (isinstance(result, dict) and result.get("status") == "failed" and args)


POSTCONDITIONS: dict[str, tuple[Callable[..., bool], tuple[str, ...]]] = {
    "not_none": (_result_not_none, ()),
    "sized": (_result_sized, ("a",)),
    "args_result": (_args_and_result, ()),
}


def _ids_of(result: Any) -> list[Any]:
    return [result["id"]] if isinstance(result, dict) and "id" in result else []


def _strict_ids(result: Any) -> list[Any]:
    return [result["id"]]  # raises on anything without an "id"


def _failed_status(result: Any) -> bool:
    return isinstance(result, dict) and result.get("status") == "failed"


def _status_raises(result: Any) -> bool:
    return result["status"] == "x"  # raises on anything without a status


PRODUCE_PLACES: dict[str, Any] = {
    "id": "id",
    "items[].id": "items[].id",
    "$": "$",
    "ids_of": _ids_of,
    "strict_ids": _strict_ids,
}
ERROR_RESULTS: dict[str, Any] = {
    "default": tg.INHERIT,  # the guard's
    "none": None,  # off, as on the guard
    "off": False,
    "failed": _failed_status,
    "raises": _status_raises,
}


@dataclasses.dataclass
class ToolContract:
    name: str
    params: tuple[str, ...]
    method: bool  # a bound method: predicates asking for `instance` get its object
    posonly: bool
    json_schema: bool
    is_async: bool
    refs: dict[str, str]
    produces: dict[str, str]
    invalidates: dict[str, str]
    preconditions: tuple[str, ...]
    postconditions: tuple[str, ...]
    grounded: tuple[str, ...]
    error_result: str
    mode: str | None


@dataclasses.dataclass
class GuardContract:
    mode: str
    sampled: bool  # False: an SDK whose sampler records nothing (spans that do not record)
    fail_open: bool
    error_result_none: bool
    tools: list[ToolContract]


@st.composite
def tool_contracts(draw: st.DrawFn, index: int) -> ToolContract:
    chosen = draw(st.sets(st.sampled_from(sorted(PARAMS)), max_size=4))
    if index == 1:  # the consumer of what tool_0 produces: an id argument, often invalidated
        chosen.add("a")
    params = tuple(p for p in PARAMS if p in chosen and p in REQUIRED) + tuple(
        p for p in PARAMS if p in chosen and p not in REQUIRED
    )
    ids = [p for p in params if PARAMS[p][2]]
    refs = {p: draw(KIND) for p in ids if draw(st.booleans())}
    if "items" in params and draw(st.booleans()):
        refs["items"] = draw(KIND)
    if "obj" in params and draw(st.booleans()):
        refs["obj.id"] = draw(KIND)
    places = draw(st.sets(st.sampled_from(sorted(PRODUCE_PLACES)), max_size=3))
    if index == 0:  # the producer
        places.add("id")
    produces = {p: draw(KIND) for p in sorted(places)}
    invalidates = {p: draw(KIND) for p in ids if draw(st.integers(0, 2)) == 0}
    if index == 1 and draw(st.booleans()):
        invalidates["a"] = "k1"
    pre = tuple(
        c
        for c, (_, needs) in PRECONDITIONS.items()
        if set(needs) <= set(params) and draw(st.integers(0, 2)) == 0
    )
    post = tuple(
        c
        for c, (_, needs) in POSTCONDITIONS.items()
        if set(needs) <= set(params) and draw(st.integers(0, 2)) == 0
    )
    grounded = tuple(p for p in ids if draw(st.integers(0, 2)) == 0)
    return ToolContract(
        name=f"tool_{index}",
        params=params,
        method=draw(st.integers(0, 2)) == 0,
        posonly=bool(params) and draw(st.integers(0, 4)) == 0,
        json_schema=draw(st.integers(0, 3)) == 0,
        is_async=draw(st.integers(0, 3)) == 0,
        refs=refs,
        produces=produces,
        invalidates=invalidates,
        preconditions=pre,
        postconditions=post,
        grounded=grounded,
        error_result=draw(st.sampled_from(sorted(ERROR_RESULTS))),
        mode=draw(st.sampled_from([None, None, None, "block", "log"])),
    )


@st.composite
def guard_contracts(draw: st.DrawFn) -> GuardContract:
    count = draw(st.sampled_from([1, 2, 2, 3]))
    return GuardContract(
        mode=draw(st.sampled_from(["block", "block", "log"])),
        sampled=draw(st.integers(0, 5)) > 0,
        fail_open=draw(st.integers(0, 4)) == 0,
        error_result_none=draw(st.integers(0, 5)) == 0,
        tools=[draw(tool_contracts(i)) for i in range(count)],
    )


# -- call sequences -------------------------------------------------------------------------

VALUES: list[Any] = [
    "id-1",
    "id-2",
    "id-3",
    "id-101",
    "bad",
    "no",
    "<unknown>",
    "",
    "TBD",
    "blue house",
    "zzz-unseen",
    13,
    99,
    7,
    "13",
    None,
    ["id-1", "id-2"],
    ["id-9"],
    {"id": "id-1"},
    {"id": "nope"},
    2.5,
]
OUTCOMES = 11  # what the tool does; see Box.result
IDS = ["id-1", "id-2", "id-3", "id-1", "id-2", "id-3", "id-101", "bad", "no", "<unknown>"]
IDS += ["blue house", "zzz", "id-5"]
TYPED: dict[str, list[Any]] = {  # values of each argument's own type: most calls pass schema
    "a": IDS,
    "b": [1, 7, 13, 99, 2],
    "c": [*IDS, None],
    "d": IDS,
    "items": [["id-1"], ["id-1", "id-2"], ["id-9"], [], None],
    "obj": [{"id": "id-1"}, {"id": "nope"}, {}, None],
}


@st.composite
def call_args(draw: st.DrawFn) -> tuple[str, Any]:
    """Arguments, resolved against the tool when the call runs: of the right types (most
    often) or anything at all."""
    if draw(st.integers(0, 3)) == 0:
        names = draw(st.sets(st.sampled_from([*PARAMS, "extra"]), max_size=4))
        return "random", {n: draw(st.sampled_from(VALUES)) for n in sorted(names)}
    return "typed", draw(st.lists(st.integers(0, 30), min_size=len(PARAMS), max_size=len(PARAMS)))


def resolve(args: tuple[str, Any], tool: ToolContract) -> dict[str, Any]:
    how, spec = args
    if how == "random":
        return dict(spec)
    out = {}
    for i, param in enumerate(tool.params):
        pick = spec[i]
        if param in REQUIRED or pick % 3:
            pool = TYPED[param]
            out[param] = pool[pick % len(pool)]
    return out


def action() -> st.SearchStrategy[tuple[Any, ...]]:
    tool = st.integers(0, 2)
    outcome = st.integers(0, OUTCOMES - 1)
    call_id = st.sampled_from([None, "c1", "c2", "c3", "c9"])
    return st.one_of(
        st.tuples(st.just("direct"), tool, st.booleans(), call_args(), outcome),
        st.tuples(
            st.just("call"), tool, st.integers(0, 5), call_args(), outcome, call_id, st.booleans()
        ),
        st.tuples(
            st.just("check"),
            tool,
            call_args(),
            outcome,
            call_id,
            st.sampled_from(["finish", "finish", "error", "fail", "cancel", "with"]),
        ),
        st.tuples(st.just("reserve"), st.lists(st.sampled_from(["c1", "c2", "c3"]), max_size=3)),
        st.tuples(st.just("bind"), st.sampled_from(KINDS), st.sampled_from(VALUES[:11])),
        st.tuples(st.just("observe"), st.sampled_from(["the id-3 is new", "id-101", "no"])),
    )


# -- running a sequence ---------------------------------------------------------------------


class Box:
    """What the tools return, driven by the sequence (the same in both runs)."""

    def __init__(self) -> None:
        self.n = 0
        self.outcome = 0
        self.nested: Callable[..., Any] | None = None
        self.guard: tg.Guard | None = None

    def result(self) -> Any:
        self.n += 1
        n, o = self.n, self.outcome
        if o == 0:
            return {"id": f"id-{n}", "status": "ok"}
        if o == 1:
            return {"items": [{"id": f"id-{n}"}, {"id": f"id-{n + 100}"}], "note": f"made id-{n}"}
        if o == 2:
            return {"error": "not found"}
        if o == 3:
            return f"free text mentioning id-{n} and the blue house"
        if o == 4:
            raise ValueError(f"boom {n}")
        if o == 5:
            return {"error": None, "id": f"id-{n}", "status": "failed"}
        if o == 6:
            return None
        if o == 7:
            return [f"id-{n}", {"id": f"id-{n}"}, ("id-2", 3)]
        if o == 8:
            return 42
        if o == 9:
            assert self.nested is not None and self.guard is not None
            try:
                inner = self.nested()
            except tg.ToolCallRejected as exc:
                inner = exc.rejection.check
            # A nested call by name as well: checked, traced, no step of the trajectory.
            return {"nested": inner, "by_name": repr(self.guard.call("ping")), "id": f"id-{n}"}
        return {"deep": {"id": f"id-{n}", "more": [{"id": None}, {"id": [f"id-{n}x", {}]}]}}


class Holder:
    banned = "id-1"


def _source(tool: ToolContract) -> str:
    params = [f"{p}: {PARAMS[p][0]}" for p in tool.params]
    if tool.posonly:
        params.insert(1, "/")
    if tool.method:
        params.insert(0, "self")
    body = "return box.result()"
    prefix = "async def" if tool.is_async else "def"
    source = f"{prefix} {tool.name}({', '.join(params)}):\n    {body}\n"
    if tool.method:
        body_lines = "".join(f"    {line}\n" for line in source.splitlines())
        source = "class Holder(Holder):\n" + body_lines
    return source


def _json_schema(tool: ToolContract) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {p: PARAMS[p][1] for p in tool.params},
        "required": [p for p in tool.params if p in REQUIRED],
    }


def build(contract: GuardContract, provider: TracerProvider, compile_tools: bool) -> Any:
    box = Box()
    guard = tg.Guard(
        tracer_provider=provider,
        state={"banned": {"id-2"}},
        mode=contract.mode,  # type: ignore[arg-type]
        on_guard_error="fail_open" if contract.fail_open else "fail_closed",
        **({"error_result": None} if contract.error_result_none else {}),
    )
    guard._compiled = compile_tools
    fns = []
    for tool in contract.tools:
        namespace: dict[str, Any] = {"box": box, "Holder": Holder}
        exec(_source(tool), namespace)
        fn = getattr(namespace["Holder"](), tool.name) if tool.method else namespace[tool.name]
        options: dict[str, Any] = {
            "refs": tool.refs,
            "produces": {PRODUCE_PLACES[p]: k for p, k in tool.produces.items()},
            "invalidates": tool.invalidates,
            "preconditions": [tg.Precondition(c, PRECONDITIONS[c][0]) for c in tool.preconditions],
            "postconditions": [
                tg.Postcondition(c, POSTCONDITIONS[c][0], "a message") for c in tool.postconditions
            ],
            "grounded": list(tool.grounded),
            "error_result": ERROR_RESULTS[tool.error_result],
            "mode": tg.INHERIT if tool.mode is None else tool.mode,
        }
        if tool.json_schema:
            options["json_schema"] = _json_schema(tool)
        fns.append(guard.register(fn, **options))

    def ping() -> str:
        return "pong"

    box.nested = guard.register(ping)
    box.guard = guard
    return guard, box, fns


def _value(value: Any) -> Any:
    """A comparable form of what a call returned or raised."""
    if isinstance(value, tg.Verdict):
        return (type(value).__name__, dataclasses.asdict(value), str(value))
    if isinstance(value, tg.ToolCallRejected):
        return ("raised", _value(value.rejection))
    if isinstance(value, BaseException):
        return ("raised", type(value).__name__, str(value))
    return ("value", repr(value))


def _settle(loop: asyncio.AbstractEventLoop, value: Any) -> Any:
    if asyncio.iscoroutine(value):
        return loop.run_until_complete(value)
    return value


def run_sequence(
    contract: GuardContract,
    before: list[tuple[Any, ...]],
    actions: list[tuple[Any, ...]],
    after: list[tuple[Any, ...]],
    compile_tools: bool,
) -> dict[str, Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=None if contract.sampled else ALWAYS_OFF)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    guard, box, fns = build(contract, provider, compile_tools)
    loop = asyncio.new_event_loop()
    out: list[Any] = []

    def do(step: tuple[Any, ...], traj: tg.Trajectory | None) -> None:
        kind = step[0]
        try:
            if kind == "direct":
                _, t, positional, spec, outcome = step
                fn = fns[t % len(fns)]
                args = resolve(spec, contract.tools[t % len(fns)])
                box.outcome = outcome
                if positional:
                    params = contract.tools[t % len(fns)].params
                    head = []
                    for p in params:
                        if p not in args:
                            break
                        head.append(args[p])
                    rest = {k: v for k, v in args.items() if k not in params[: len(head)]}
                    out.append(_value(_settle(loop, fn(*head, **rest))))
                else:
                    out.append(_value(_settle(loop, fn(**args))))
            elif kind == "call":
                _, t, how, spec, outcome, call_id, as_json = step
                name = contract.tools[t % len(fns)].name
                args = resolve(spec, contract.tools[t % len(fns)])
                if how == 5:
                    name = name.replace("tool", "tol")  # misspelt
                box.outcome = outcome
                arguments: Any = args
                if as_json:
                    try:
                        arguments = json.dumps(args)
                    except TypeError:
                        arguments = args
                if how == 4:
                    result = loop.run_until_complete(guard.acall(name, arguments, call_id=call_id))
                else:
                    result = _settle(loop, guard.call(name, arguments, call_id=call_id))
                out.append(_value(result))
            elif kind == "check":
                _, t, spec, outcome, call_id, end = step
                name = contract.tools[t % len(fns)].name
                args = resolve(spec, contract.tools[t % len(fns)])
                pending = guard.check(name, args, call_id=call_id)
                out.append(("pending", _value(pending.rejection), repr(pending.arguments)))
                if pending.rejection is None:
                    box.outcome = outcome
                    if end == "cancel":
                        out.append(_value(pending.cancel()))
                    elif end == "fail":
                        out.append(_value(pending.fail(RuntimeError("framework"))))
                    elif end == "with":
                        with pending:
                            pass
                        out.append(_value(pending.verdict))
                    else:
                        try:
                            result = box.result()
                        except ValueError as exc:
                            out.append(_value(pending.fail(exc)))
                        else:
                            error = True if end == "error" else None
                            out.append(_value(pending.finish(result, error=error)))
            elif kind == "reserve" and traj is not None:
                out.append(("reserved", traj.reserve(step[1])))
            elif kind == "bind" and traj is not None:
                traj.bind(step[1], step[2])
            elif kind == "observe" and traj is not None:
                traj.observe(step[1])
        except BaseException as exc:  # KeyboardInterrupt from a predicate included
            out.append(_value(exc))

    for step in before:
        do(step, None)
    with guard.trajectory("t-1", user_input="please use the blue house") as traj:
        for step in actions:
            do(step, traj)
        traj.success = True
    for step in after:
        do(step, None)
    loop.close()
    spans = list(exporter.get_finished_spans())
    ids = {s.context.span_id: i for i, s in enumerate(spans)}
    state = {
        "out": out,
        "verdicts": [dataclasses.asdict(v) for v in traj.verdicts],
        "T": traj.length,
        "FED": traj.first_error_depth,
        "cause": traj.first_error_cause,
        "bindings": {
            kind: [
                (value, b.live, b.produced_by, b.step, b.invalidated_by, b.shown)
                for value, b in values.items()
            ]
            for kind, values in traj._bindings.items()
            if values
        },
        "seen": sorted(map(repr, traj._seen)),
        "texts": list(traj._texts),
        "spans": [
            (
                s.name,
                dict(s.attributes or {}),
                s.status.status_code.name,
                s.status.description,
                None if s.parent is None else ids.get(s.parent.span_id, "outside"),
            )
            for s in spans
        ],
        "ran": box.n,
    }
    provider.shutdown()
    return state


@pytest.mark.slow
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    contract=guard_contracts(),
    before=st.lists(action(), max_size=2),
    actions=st.lists(action(), max_size=14),
    after=st.lists(action(), max_size=2),
)
def test_compiled_and_general_paths_agree(
    contract: GuardContract,
    before: list[tuple[Any, ...]],
    actions: list[tuple[Any, ...]],
    after: list[tuple[Any, ...]],
) -> None:
    logging.getLogger("toolguard").setLevel(logging.CRITICAL)
    try:
        fast = run_sequence(contract, before, actions, after, compile_tools=True)
        general = run_sequence(contract, before, actions, after, compile_tools=False)
    finally:
        logging.getLogger("toolguard").setLevel(logging.NOTSET)
    for key in general:
        assert fast[key] == general[key], key


def _tool(name: str, params: tuple[str, ...], **options: Any) -> ToolContract:
    fields: dict[str, Any] = {
        "method": False,
        "posonly": False,
        "json_schema": False,
        "is_async": False,
        "refs": {},
        "produces": {},
        "invalidates": {},
        "preconditions": (),
        "postconditions": (),
        "grounded": (),
        "error_result": "default",
        "mode": None,
    }
    fields.update(options)
    return ToolContract(name=name, params=params, **fields)


PRODUCER = _tool("tool_0", (), produces={"id": "k1", "items[].id": "k2"})
TYPED_ID = ("typed", [0] * len(PARAMS))  # a="id-1", b=1, ...
SCENARIOS: dict[str, tuple[list[ToolContract], list[tuple[Any, ...]]]] = {
    "invalidated, then stale": (
        [PRODUCER, _tool("tool_1", ("a",), refs={"a": "k1"}, invalidates={"a": "k1"})],
        [("call", 0, 0, ("random", {}), 0, None, False)]
        + [("direct", 1, False, TYPED_ID, 0)] * 2
        + [("call", 1, 0, TYPED_ID, 0, "c1", True)],
    ),
    "a method's instance": (
        [_tool("tool_0", ("a",), method=True, preconditions=("has_state",))],
        [("call", 0, 0, TYPED_ID, 0, None, False), ("direct", 0, True, TYPED_ID, 1)],
    ),
    "nested calls, reserved ids, async": (
        [PRODUCER, _tool("tool_1", ("a", "b"), is_async=True, posonly=True, grounded=("a",))],
        [
            ("reserve", ["c2", "c1"]),
            ("call", 0, 4, ("random", {}), 9, "c1", False),
            ("direct", 1, True, TYPED_ID, 3),
            ("call", 1, 4, TYPED_ID, 1, "c2", True),
            ("check", 1, TYPED_ID, 0, "c3", "with"),
        ],
    ),
    "environment errors and postconditions": (
        [
            _tool(
                "tool_0",
                ("a",),
                postconditions=("not_none", "sized", "args_result"),
                error_result="raises",
            ),
            _tool("tool_1", ("b",), error_result="failed", preconditions=("divides",)),
        ],
        [("direct", 0, False, TYPED_ID, o) for o in range(OUTCOMES)]
        + [("call", 1, 0, ("random", {"b": 13}), 5, None, False)]
        + [("check", 1, TYPED_ID, o, None, "error") for o in (0, 5)],
    ),
}


@pytest.mark.parametrize("mode", ["block", "log"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenarios_agree(name: str, mode: str) -> None:
    """Interactions the random sequences reach only now and then, every time."""
    tools, actions = SCENARIOS[name]
    contract = GuardContract(
        mode=mode, sampled=True, fail_open=False, error_result_none=False, tools=tools
    )
    fast = run_sequence(contract, actions[:1], actions, actions[-1:], compile_tools=True)
    general = run_sequence(contract, actions[:1], actions, actions[-1:], compile_tools=False)
    for key in general:
        assert fast[key] == general[key], key


def test_the_workload_shapes_are_compiled() -> None:
    """The benchmark's tools take the compiled path (not a silent fallback)."""
    guard = tg.Guard(state={"accounts": {"acc-7"}})
    for options in (
        {},
        {"refs": {"account_id": "account"}},
        {
            "refs": {"account_id": "account"},
            "produces": {"id": "receipt"},
            "preconditions": [tg.Precondition("open", lambda state, account_id: True)],
            "postconditions": [tg.Postcondition("ok", lambda result: True)],
            "grounded": ["memo"],
            "invalidates": {"account_id": "account"},
        },
    ):

        def transfer(account_id: str, amount: float, memo: str) -> dict[str, Any]:
            return {"id": "r-1"}

        fn = guard.register(transfer, replace=True, **options)
        code = fn.toolguard_tool._compiled_code
        assert code, options
        assert "def direct" in code.source
        assert guard._fast["transfer"] is not None


def test_a_condition_with_kwargs_is_not_compiled_and_still_checked() -> None:
    guard = tg.Guard()

    @guard.tool(preconditions=[tg.Precondition("small", lambda **kw: kw["n"] < 3)])
    def f(n: int) -> int:
        return n

    assert f.toolguard_tool._compiled_code is None
    with tg.trajectory():
        assert f(n=1) == 1
        with pytest.raises(tg.ToolCallRejected):
            f(n=5)


# -- the indexes against what they replace -------------------------------------------------

texts_strategy = st.lists(
    st.text(alphabet="ab\x00c- ", max_size=12) | st.sampled_from(["id-1", "abc", "a b c"]),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(
    texts=texts_strategy,
    needles=st.lists(st.text(alphabet="ab\x00c- ", max_size=6), max_size=10),
    ratio=st.sampled_from([0, 0.5, 100]),
    block=st.sampled_from([1, 5, 64]),
)
def test_seen_text_index_answers_as_the_scan(
    texts: list[str], needles: list[str], ratio: float, block: int
) -> None:
    index = SeenTexts(seal_ratio=ratio, block_chars=block)
    seen: list[str] = []
    for i, text in enumerate(texts):
        index.add(text)
        seen.append(text)
        for needle in needles[i % 3 :: 3]:
            assert index.contains(needle) == any(needle in t for t in seen), (needle, seen)
    for needle in needles:
        assert index.contains(needle) == any(needle in t for t in seen), (needle, seen)


def test_seen_text_index_finds_old_text_after_sealing() -> None:
    index = SeenTexts(seal_ratio=0, block_chars=100)
    index.add("please pay the rent for March")
    for i in range(5_000):
        index.add(f"Transferred 12.50 from acc-7; receipt r-{i} issued.")
        assert index.contains(f"receipt r-{i}")
    assert index.contains("rent for March")
    assert index.contains("r-4999 iss")
    assert not index.contains("r-5000")
    assert not index.contains("rent for April")
    assert index.contains("") and index.contains("7") and not index.contains("Z")
    assert index._blocks, "the history was sealed into indexed blocks"


@dataclasses.dataclass
class Leaf:
    id: str
    n: int


class Model(pydantic.BaseModel):
    id: str
    tags: list[str] = []


json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, width=16)
    | st.sampled_from(["id", "x", "id-1", ""])
    | st.binary(max_size=2),
    lambda children: (
        st.lists(children, max_size=3)
        | st.lists(children, max_size=3).map(tuple)
        | st.frozensets(st.sampled_from(["a", "id", 1]), max_size=2)
        | st.dictionaries(st.sampled_from(["id", "x", "items", 1, (1, 2)]), children, max_size=3)
        | st.builds(Leaf, st.sampled_from(["id", "q"]), st.integers(0, 2))
        | st.builds(Model, id=st.sampled_from(["id", "m"]))
    ),
    max_leaves=25,
)


def _nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = {"id": [value], "x": value}
    return value


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(value=json_like, depth=st.sampled_from([0, 0, 18, 21]))
def test_key_finder_and_leaf_walker_agree_with_the_generators(value: Any, depth: int) -> None:
    value = _nest(value, depth)
    for key in ("id", "x", "items"):
        found: list[Any] = []
        find_key_into(value, key, found)
        assert found == list(_find_key(value, key, 0))
    leaves: list[str] = []
    add_leaves(value, leaves.append)
    assert leaves == list(_leaves(value))


def _bindings_after(result: Any, compile_tools: bool) -> Any:
    guard = tg.Guard()
    guard._compiled = compile_tools
    box = [result]

    @guard.tool(produces={"id": "k", "x": "k2"}, grounded=["n"])
    def f(n: str) -> Any:
        return box[0]

    with tg.trajectory(user_input="0") as traj:
        try:
            f(n="0")
        except BaseException as exc:  # the same in both, compared below
            return ("raised", type(exc).__name__)
        return (
            {k: [(v, b.step, b.live) for v, b in d.items()] for k, d in traj._bindings.items()},
            sorted(map(repr, traj._seen)),
        )


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(value=json_like)
def test_produces_and_observe_agree_on_any_result(value: Any) -> None:
    """The compiled result walk (a flat dict short-cut, the top level inline) and the general
    one bind and observe the same values, whatever the result holds."""
    logging.getLogger("toolguard").setLevel(logging.CRITICAL)
    try:
        assert _bindings_after(value, True) == _bindings_after(value, False)
    finally:
        logging.getLogger("toolguard").setLevel(logging.NOTSET)


_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from(["id", "x", "id-1", "id-2", ""])
    | st.binary(max_size=2)
)
# A search's answer: a list of records, most of them flat (the compiled path's short-cut),
# some holding a container or a non-str key (walked whole), some not dicts at all.
records = st.lists(
    st.dictionaries(st.sampled_from(["id", "x", "name"]), _leaf, max_size=3)
    | st.dictionaries(
        st.sampled_from(["id", "x", 1]),
        _leaf
        | st.lists(_leaf, max_size=2)
        | st.dictionaries(st.sampled_from(["id", "x"]), _leaf, max_size=2),
        max_size=3,
    )
    | _leaf
    | st.lists(st.dictionaries(st.sampled_from(["id", "x"]), _leaf, max_size=2), max_size=2),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(value=records)
def test_produces_over_a_list_of_records_agrees(value: Any) -> None:
    logging.getLogger("toolguard").setLevel(logging.CRITICAL)
    try:
        assert _bindings_after(value, True) == _bindings_after(value, False)
    finally:
        logging.getLogger("toolguard").setLevel(logging.NOTSET)


@pytest.mark.parametrize("compile_tools", [True, False])
def test_invalidating_one_produced_value_leaves_its_siblings_live(compile_tools: bool) -> None:
    """The values one call produces share one binding on the compiled path: invalidating one
    of them must not reach the others."""
    guard = tg.Guard()
    guard._compiled = compile_tools

    @guard.tool(produces={"id": "contact"})
    def search() -> list[dict[str, str]]:
        return [{"id": "c-1"}, {"id": "c-2"}, {"id": "c-3"}]

    @guard.tool(refs={"contact": "contact"}, invalidates={"contact": "contact"})
    def remove(contact: str) -> str:
        return "removed"

    with tg.trajectory() as traj:
        search()
        remove(contact="c-2")
        assert traj.live_values("contact") == ["c-1", "c-3"]
        removed = traj.lookup("contact", "c-2")
        assert removed is not None and not removed.live
        assert removed.invalidated_by == "remove at step 2" and removed.step == 1
        with pytest.raises(tg.ToolCallRejected):
            remove(contact="c-2")
        remove(contact="c-3")
        assert traj.live_values("contact") == ["c-1"]


def test_suggestions_among_few_tools_are_difflibs() -> None:
    names = ToolNames()
    pool = ["remove_contact", "search_contacts", "send_message", "transfer", "get_weather"]
    for n in pool:
        names.add(n)
    for word in ("remove_contacts", "trasnfer", "weather", "zzz", "sendmessage"):
        assert names.close(word) == difflib.get_close_matches(word, pool, n=3)


def test_suggestions_among_many_tools_find_typos_in_bounded_candidates() -> None:
    names = ToolNames()
    for i in range(10_000):
        names.add(f"tool_{i:05d}")
    for n in ("transfer", "get_weather", "get_weather_forecast", "search_contacts"):
        names.add(n)
    every = list(names._names)
    for word in ("trasnfer", "rtansfer", "get_weather_now", "search_contact"):
        # The same answer as difflib over all 10,004 names, from a few dozen candidates.
        assert names.close(word) == difflib.get_close_matches(word, every, n=3), word
        assert len(names._candidates(word)) <= 64
    # Hundreds of names tie with "tool_0042x" (one edit each): among many, three of them.
    assert len(names.close("tool_0042x")) == 3
    assert names.close("trasnfer")[0] == "transfer"
    assert names.close("completely_different_name_here") == []
