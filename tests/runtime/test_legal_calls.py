"""A legal call is never blocked by default, and the tool gets exactly what it would get
without the guard: random signatures (positional-only, keyword-only, defaults, *args,
**kwargs, unions, literals, enums, constrained and nested types, models, dataclasses,
TypedDicts, forward references, ``from __future__ import annotations``), as plain, async,
method, classmethod, staticmethod, partial and callable-object tools, called through the
three entry points (the function itself, ``guard.call``, ``guard.check`` then finish) in
block mode with no contract. The reference is pydantic's conversion (``validate_call``'s),
and a parameter left out gets its own default object, as Python gives it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legal_calls import (
    NAMES,
    OMIT,
    TRICKY_NAMES,
    Call,
    Signature,
    calls,
    expected,
    same,
    signatures,
)

import toolguard as tg

_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Token:
    """What the tool returns: the guard must hand back this very object."""


class Recorder:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.results: list[Token] = []

    def __call__(self, received: dict[str, Any]) -> Token:
        self.seen.append(received)
        self.results.append(Token())
        return self.results[-1]


def _run(value: Any) -> Any:
    return asyncio.run(value) if asyncio.iscoroutine(value) else value


def _check_received(sig: Signature, call: Call, got: dict[str, Any], *, from_json: bool) -> None:
    want = expected(sig, call, from_json=from_json)
    problems = same(got, want)
    assert not problems, f"{sig.source()[0]}\n{problems}"
    for p in sig.params:
        if call.values[p.name] is OMIT:
            # Left out: the function's own default object (a shared cache stays shared).
            assert got[p.name] is p.default, f"{p.name}: a copy of its default"


def _entry_points(sig: Signature, call: Call, prefix: int, text: bool) -> None:
    recorder = Recorder()
    fn = sig.build(recorder)
    guard = tg.Guard()
    wrapped = guard.tool(fn, name="t")
    named = call.named(sig)
    arguments: Any = json.dumps(named, ensure_ascii=prefix % 2 == 0) if text else named

    # 1. the function itself, with Python values
    args, kwargs = call.direct(sig, prefix)
    result = _run(wrapped(*args, **kwargs))
    assert result is recorder.results[-1]
    _check_received(sig, call, recorder.seen[-1], from_json=False)

    # 2. dispatch by name, with the model's JSON (text or decoded)
    result = (
        asyncio.run(guard.acall("t", arguments))
        if sig.variant.startswith("async")
        else guard.call("t", arguments)
    )
    assert not isinstance(result, tg.Rejection), f"{sig.source()[0]}\n{named}\n{result}"
    assert result is recorder.results[-1]
    _check_received(sig, call, recorder.seen[-1], from_json=True)

    # 3. two phases: the framework runs the function with what the guard hands it
    pending = guard.check("t", arguments)
    assert pending.rejection is None, f"{sig.source()[0]}\n{named}\n{pending.rejection}"
    args, kwargs = pending.call_parts()
    result = _run(fn(*args, **kwargs))
    verdict = pending.finish(result)
    assert verdict.ok
    _check_received(sig, call, recorder.seen[-1], from_json=True)


@st.composite
def _cases(draw: st.DrawFn, names: list[str] = NAMES) -> tuple[Signature, Call, int, bool]:
    sig = draw(signatures(names))
    return sig, draw(calls(sig)), draw(st.integers(0, 5)), draw(st.booleans())


@_SETTINGS
@given(_cases())
def test_a_legal_call_runs_with_what_it_would_get_unguarded(case: Any) -> None:
    _entry_points(*case)


@_SETTINGS
@given(_cases(NAMES + TRICKY_NAMES))
def test_parameter_names_pydantic_treats_specially_are_arguments_too(case: Any) -> None:
    _entry_points(*case)
