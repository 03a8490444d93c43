"""A conversation's tool results kept in its Context's state, so a Context stored and loaded
back (``ctx.to_dict()`` / ``Context.from_dict``: a chat kept between a server's requests, or
across processes) still binds what the earlier runs' tools returned.

In process, the runs of one Context object share their results directly (``_Episodes``); a
restored Context is a new object, so each run also writes the results' JSON form under one
key of the Context's state, at each model turn, and a run whose Context the adapter has not
seen reads them back before its first call. A state that refuses the key (a typed state
model) or a value with no JSON form keeps the in-process behaviour: nothing is lost but the
binding.
"""

from __future__ import annotations

import logging

import toolguard as tg
from llama_index.core.workflow import Context
from pydantic_core import to_jsonable_python

from . import _run

KEY = "toolguard_results"
_log = logging.getLogger("toolguard")


async def sync(run: _run.Run, ctx: Context, guard: tg.Guard) -> None:
    """Before a model turn: bind what a restored Context holds (the run's first turn), then
    keep this run's new results in the Context's state."""
    if not run.keep:
        return
    if run.restore:
        run.restore = False
        await _bind_stored(run, ctx, guard)
    if len(run.results) > run.saved:
        await _save(run, ctx)


async def _bind_stored(run: _run.Run, ctx: Context, guard: tg.Guard) -> None:
    try:
        stored = await ctx.store.get(KEY, default=None)
    except Exception:  # a state that cannot hold the key: nothing was stored
        return
    if not isinstance(stored, list):
        return
    for entry in stored:
        if isinstance(entry, list | tuple) and len(entry) == 2 and isinstance(entry[0], str):
            name, value = entry
            run.results.append((name, value))
            if guard.has_tool(name):
                run.traj.bind_result(guard.get_tool(name), value)
    run.saved = len(run.results)  # already in the state


async def _save(run: _run.Run, ctx: Context) -> None:
    new = []
    for name, value in run.results[run.saved :]:
        try:
            new.append([name, to_jsonable_python(value, fallback=str)])
        except Exception:  # no JSON form (a cycle, ...): its binding is not kept
            continue
    run.saved = len(run.results)
    try:
        kept = await ctx.store.get(KEY, default=None)
        await ctx.store.set(KEY, [*(kept if isinstance(kept, list) else ()), *new])
    except Exception:  # a typed state without the key: the in-process binding still holds
        _log.debug("toolguard: the Context's state keeps no tool results", exc_info=True)
