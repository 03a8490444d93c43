"""A guarded function called directly binds its positional and keyword arguments as Python
binds them: random signatures (positional-only, keyword-only, defaults, *args, **kwargs,
as plain, async, method, classmethod, staticmethod, partial and callable-object tools) and
random calls, legal or not. Where the unguarded function accepts the call, the guarded one
runs it with the very same values; where Python raises TypeError, the guard refuses it as
a malformed call (``schema``) and the tool does not run."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from legal_calls import Signature, same, signatures

import toolguard as tg

_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_KEYWORDS = ["a", "b", "c", "d", "e", "args", "rest", "kw", "zz"]


def _run(value: Any) -> Any:
    return asyncio.run(value) if asyncio.iscoroutine(value) else value


def _untyped(sig: Signature) -> Signature:
    """The signature with every annotation Any: what is compared is binding, not conversion."""
    params = [dataclasses.replace(p, annotation="Any", values=st.integers()) for p in sig.params]
    var = [None if v is None else (v[0], "Any", st.integers()) for v in (sig.varargs, sig.varkw)]
    return dataclasses.replace(sig, params=params, varargs=var[0], varkw=var[1])


@st.composite
def _cases(draw: st.DrawFn) -> tuple[Signature, list[int], dict[str, int]]:
    sig = _untyped(draw(signatures(["a", "b", "c", "d", "e"])))
    args = draw(st.lists(st.integers(0, 9), max_size=6))
    kwargs = draw(st.dictionaries(st.sampled_from(_KEYWORDS), st.integers(10, 99), max_size=4))
    return sig, args, kwargs


def _received(sig: Signature, args: list[int], kwargs: dict[str, int]) -> Any:
    seen: list[dict[str, Any]] = []
    fn = sig.build(seen.append)
    try:
        _run(fn(*args, **kwargs))
    except TypeError as exc:
        return exc
    return seen[-1]


def _guarded(sig: Signature, args: list[int], kwargs: dict[str, int]) -> Any:
    seen: list[dict[str, Any]] = []
    wrapped = tg.Guard().tool(sig.build(seen.append), name="t")
    try:
        _run(wrapped(*args, **kwargs))
    except tg.ToolCallRejected as exc:
        assert not seen, "a refused call ran"
        return exc
    return seen[-1]


@_SETTINGS
@given(_cases())
def test_a_direct_call_binds_as_python_binds(case: Any) -> None:
    sig, args, kwargs = case
    want = _received(sig, args, dict(kwargs))
    got = _guarded(sig, args, dict(kwargs))
    where = f"{sig.source()[0]}\nt(*{args}, **{kwargs})"
    if isinstance(want, TypeError):
        assert isinstance(got, tg.ToolCallRejected), f"{where}\nPython: {want}\nguard ran: {got}"
        assert got.rejection.cause == "schema", where
        return
    assert not isinstance(got, Exception), f"{where}\nPython ran it: {want}\nguard: {got}"
    problems = same(got, want)
    assert not problems, f"{where}\n{problems}"


def _posonly_kw(a: int, /, **kw: int) -> tuple[int, dict[str, int]]:
    return a, kw


@pytest.mark.parametrize(
    ("args", "kwargs", "want"),
    [
        ((1,), {"a": 2}, (1, {"a": 2})),  # a=2 goes into **kw, as in Python
        ((1,), {"a": 2, "b": 3}, (1, {"a": 2, "b": 3})),
        ((1,), {"b": 3, "a": 2}, (1, {"b": 3, "a": 2})),  # **kw keeps the call's order
    ],
)
def test_a_positional_only_name_passed_by_keyword_goes_into_kwargs(
    args: tuple[int, ...], kwargs: dict[str, int], want: Any
) -> None:
    guarded = tg.Guard().tool(_posonly_kw)
    got = guarded(*args, **kwargs)
    assert got == want and list(got[1]) == list(want[1])


def test_a_keyword_into_kwargs_is_validated_as_its_type() -> None:
    guarded = tg.Guard().tool(_posonly_kw)
    with pytest.raises(tg.ToolCallRejected) as err:
        guarded(1, a="x")
    assert err.value.rejection.cause == "schema"


def test_refused_as_python_refuses_them() -> None:
    guard = tg.Guard()

    @guard.tool
    def only(a: int, /) -> int:
        return a

    @guard.tool
    def keyword_only(*, a: int) -> int:
        return a

    @guard.tool
    def star(*args: int) -> tuple[int, ...]:
        return args

    @guard.tool
    async def later(*, a: int) -> int:
        return a

    calls = (lambda: only(a=1), lambda: keyword_only(1), lambda: star(args=[1]), lambda: later(1))
    for call in calls:
        # A TypeError as Python raises, at the call (an async tool's too, not when awaited),
        # and a rejection like any other.
        with pytest.raises(TypeError) as err:
            call()
        assert isinstance(err.value, tg.ToolCallRejected)
        assert err.value.rejection.cause == "schema"
        assert err.value.rejection.tool in str(err.value)


def test_a_keyword_into_kwargs_reaches_the_dry_run_and_the_run() -> None:
    """Tried on a copy of the state first, the call gets the same **kwargs both times."""
    state: dict[str, Any] = {"seen": []}
    runs: list[tuple[int, dict[str, int]]] = []  # outside the state: the fork's run too
    guard = tg.Guard(state=state, dry_run=True)

    @guard.tool
    def note(a: int, /, *, db: Annotated[dict[str, Any], tg.State], **kw: int) -> int:
        db["seen"].append((a, kw))
        runs.append((a, kw))
        return a

    assert note(1, a=2, b=3) == 1
    assert runs == [(1, {"a": 2, "b": 3})] * 2  # on the copy, then for real
    assert state["seen"] == [(1, {"a": 2, "b": 3})]
