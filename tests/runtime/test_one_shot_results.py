"""A tool declared with ``produces`` that returns a one-shot iterator (a generator, ``map``,
``iter(list)``, an async generator): the guard cannot read it without using it up, so it
reads nothing (the caller still gets every item), says so once per tool, and the later
call that refers to one of its ids is told why nothing was recorded."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

import toolguard as tg

_ROWS = [{"id": "a"}, {"id": "b"}]


def _gen() -> Iterator[dict[str, str]]:
    yield from _ROWS


async def _agen() -> AsyncIterator[dict[str, str]]:
    for row in _ROWS:
        yield row


async def _items(result: Any) -> list[Any]:
    return [row async for row in result]


ONE_SHOT: dict[str, Callable[[], Any]] = {
    "generator": _gen,
    "map": lambda: map(dict, _ROWS),
    "iter(list)": lambda: iter(list(_ROWS)),
    "filter": lambda: filter(None, _ROWS),
    "async generator": _agen,
}


@pytest.mark.parametrize("shape", ONE_SHOT)
@pytest.mark.parametrize("key", ["id", lambda r: [x["id"] for x in r]])
def test_a_one_shot_result_is_left_whole_warned_about_once_and_named_later(
    otel: Any, caplog: pytest.LogCaptureFixture, shape: str, key: Any
) -> None:
    guard = tg.Guard(tracer_provider=otel.provider)
    make = ONE_SHOT[shape]

    @guard.tool(produces={key: "contact_id"})
    def search() -> Any:
        return make()

    @guard.tool(refs={"contact_id": "contact_id"})
    def remove(contact_id: str) -> str:
        return contact_id

    with caplog.at_level(logging.WARNING, logger="toolguard"), guard.trajectory("t"):
        for _ in range(2):
            result = search()
            items = asyncio.run(_items(result)) if shape == "async generator" else list(result)
            assert items == _ROWS  # nothing consumed by the guard
        with pytest.raises(tg.ToolCallRejected) as err:
            remove("a")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    text = warnings[0].getMessage()
    assert "tool search " in text and "produces" in text and "iterator" in text and "list" in text
    rejection = err.value.rejection
    assert rejection.cause == "dependency"
    # Not "first call a tool that returns one": the model did; the application's tool
    # returned its ids in a form the guard could not read.
    assert "first call a tool" not in rejection.model_message
    assert "search" in rejection.model_message and "iterator" in rejection.model_message
    assert "search" in err.value.rejection.developer_text()
    assert "iterator" in err.value.rejection.developer_text()


def test_an_iterable_that_is_no_iterator_is_read(otel: Any, caplog: Any) -> None:
    """A tuple, a record holding one: read as before, with no warning."""
    guard = tg.Guard(tracer_provider=otel.provider)
    results: list[Any] = [tuple(_ROWS), {"rows": tuple(_ROWS)}, [{"rows": _ROWS}]]
    answers = iter(results)

    @guard.tool(produces={"id": "contact_id"})
    def search() -> Any:
        return next(answers)

    @guard.tool(refs={"contact_id": "contact_id"})
    def remove(contact_id: str) -> str:
        return contact_id

    with caplog.at_level(logging.WARNING, logger="toolguard"):
        for _ in results:
            with guard.trajectory():
                search()
                assert remove("b") == "b"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_later_readable_result_of_the_kind_is_offered_again(otel: Any) -> None:
    """Once a readable result of the kind is bound, the rejection offers its values."""
    guard = tg.Guard(tracer_provider=otel.provider)

    @guard.tool(produces={"id": "contact_id"})
    def stream() -> Any:
        return iter(_ROWS)

    @guard.tool(produces={"id": "contact_id"})
    def search() -> Any:
        return [{"id": "c"}]

    @guard.tool(refs={"contact_id": "contact_id"})
    def remove(contact_id: str) -> str:
        return contact_id

    with guard.trajectory():
        list(stream())
        search()
        with pytest.raises(tg.ToolCallRejected) as err:
            remove("a")
    assert "'c'" in err.value.rejection.model_message


def test_an_earlier_one_shot_result_bound_as_context_is_left_whole(otel: Any) -> None:
    """``traj.bind_result`` (the adapters' earlier results) reads no one-shot iterator."""
    guard = tg.Guard(tracer_provider=otel.provider)

    @guard.tool(produces={lambda r: [x["id"] for x in r]: "contact_id"})
    def search() -> Any:
        return iter(_ROWS)

    result = iter(list(_ROWS))
    with guard.trajectory() as traj:
        traj.bind_result(guard.get_tool("search"), result)
    assert list(result) == _ROWS
