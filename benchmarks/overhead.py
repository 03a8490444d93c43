"""Per-call overhead of the guard, side by side with what users would use instead.

    python -m benchmarks.overhead [--quick] [--json out.json]

Overhead = time per call minus the bare function's, medians over interleaved rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Tracer

import toolguard as tg
from toolguard.runtime.telemetry.span_file import SpanFileExporter

from . import _workload as w
from ._scaling import by_name, dispatch, growth
from ._timing import (
    Case,
    interleaved,
    median,
    overhead_ratios,
    print_targets,
    quartiles,
    time_ratio,
    us,
    write_json,
)


def _optional(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        return None


TRAJECTORY_ID = "0" * 32  # as long as the guard's (a uuid4 hex)


def lean_span(tracer: Tracer, fn: Callable[..., Any]) -> Callable[..., Any]:
    """The leanest span a user would write by hand around validate_call: ``start_span``
    with the contract's call attributes, the verdict's two attributes, ``end`` (the span is
    not made current: the guard's is, so that the tool's own spans nest below it)."""
    steps = itertools.count(1)

    def call(**kwargs: Any) -> Any:
        span = tracer.start_span(
            "execute_tool transfer",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "transfer",
                "gen_ai.tool.type": "function",
                "toolguard.trajectory.id": TRAJECTORY_ID,
                "toolguard.step": next(steps),
            },
        )
        try:
            result = fn(**kwargs)
        except pydantic.ValidationError:
            span.set_attributes({"toolguard.valid": False, "toolguard.decision": "blocked"})
            span.end()
            raise
        span.set_attributes({"toolguard.valid": True, "toolguard.decision": "allowed"})
        span.end()
        return result

    return call


CHUNK = 100  # calls timed back to back; every case is timed in chunks of this size


def loop_case(fn: Callable[..., Any], kwargs: dict[str, Any], parent: Tracer | None = None) -> Case:
    """``fn`` called ``n`` times, timed in chunks of CHUNK. ``parent``: each chunk runs under
    a span of its own (untimed), as the guard's calls run under their trajectory's."""

    def run(n: int) -> float:
        elapsed = 0.0
        for i in range(0, n, CHUNK):
            with (
                parent.start_as_current_span("toolguard.trajectory")
                if parent is not None
                else contextlib.nullcontext()
            ):
                start = time.perf_counter()
                for _ in range(min(CHUNK, n - i)):
                    fn(**kwargs)
                elapsed += time.perf_counter() - start
        return elapsed

    return run


def exported(provider: Any, case: Case) -> Case:
    """The file cases count the export work the calls cause, not only the time until a span
    is queued: the process's CPU time (the exporter's thread included) from the first call
    until the exporter has written the last span. CPU time, not wall time: waiting for the
    exporter thread's schedule is no work, and its encoding on the second core is. The queue
    starts each run empty (untimed); each chunk's own trajectory or parent span is counted."""

    def run(n: int) -> float:
        flush(provider)
        start = time.process_time()
        case(n)
        flush(provider)
        return time.process_time() - start

    return run


def flush(provider: Any) -> None:
    # force_flush wakes the exporter thread once; asked again every millisecond, it does not
    # sleep out its schedule delay (200 ms) after a batch it was busy writing.
    while not provider.force_flush(timeout_millis=1):
        pass


def first(prepare: Callable[[], Any], case: Case) -> Case:
    """Untimed preparation before each run of a case. File cases start with an empty export
    queue (force_flush), so the exporter thread, which takes the GIL, works during a case only
    on that case's own spans, never on a neighbour's; memory cases with an empty exporter."""

    def run(n: int) -> float:
        prepare()
        return case(n)

    return run


def guarded_case(
    fn: Callable[..., Any],
    provider: Any,
    kwargs: dict[str, Any],
    calls_per_traj: int = CHUNK,
    *,
    blocked: bool = False,
) -> Case:
    """Calls inside trajectories of realistic length; opening and closing them is not timed,
    like the gaps between the chunks of the other cases. ``blocked``: every call is rejected,
    and a guarded function called directly raises ToolCallRejected: caught the way a caller
    writes it, as the invalid validate_call case catches pydantic's ValidationError."""

    def run(n: int) -> float:
        elapsed = 0.0
        done = 0
        while done < n:
            k = min(calls_per_traj, n - done)
            with tg.trajectory(tracer_provider=provider) as traj:
                traj.bind("account_id", w.ACCOUNT)
                traj.bind("account_id", "acc-closed")
                start = time.perf_counter()
                if blocked:
                    for _ in range(k):
                        try:  # noqa: SIM105 - as in invalid_case
                            fn(**kwargs)
                        except tg.ToolCallRejected:
                            pass
                else:
                    for _ in range(k):
                        fn(**kwargs)
                elapsed += time.perf_counter() - start
            done += k
        return elapsed

    return run


def async_case(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], provider: Any) -> Case:
    async def block(n: int) -> float:
        async with tg.trajectory(tracer_provider=provider) as traj:
            traj.bind("account_id", w.ACCOUNT)
            start = time.perf_counter()
            for _ in range(n):
                await fn(**w.ARGS)
            return time.perf_counter() - start

    def run(n: int) -> float:
        return sum(loop.run_until_complete(block(min(100, n - i))) for i in range(0, n, 100))

    return run


def invalid_case(fn: Callable[..., Any]) -> Case:
    bad = {**w.ARGS, "amount": "lots"}

    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            try:  # noqa: SIM105 - what a caller writes; contextlib.suppress costs more per call
                fn(**bad)
            except pydantic.ValidationError:
                pass
        return time.perf_counter() - start

    return run


def build_cases(tmp: Path) -> tuple[dict[str, Case], dict[str, int], Callable[[], None]]:
    off = trace.NoOpTracerProvider()
    mem_exporter = InMemorySpanExporter()
    mem = TracerProvider()
    mem.add_span_processor(SimpleSpanProcessor(mem_exporter))
    file_provider = tg.setup_file_export(tmp / "spans.jsonl")
    # Traced as users run it: the SDK's own BatchSpanProcessor on its defaults, into the span
    # file. What is timed is the calling thread, as a user's agent waits for it; the queue is
    # flushed (one blocking force_flush, untimed) before each run, so the exporter thread
    # works during a case on that case's own spans, never on a neighbour's.
    sdk_provider = TracerProvider()
    sdk_provider.add_span_processor(BatchSpanProcessor(SpanFileExporter(tmp / "sdk.jsonl")))

    def guard(provider: Any, shape: str = "workload") -> Any:
        g = tg.Guard(state=w.Bank(), tracer_provider=provider)
        return g, g.register(w.transfer, **w.tool_options(shape))

    g_off, tg_off = guard(off)
    _, tg_schema = guard(off, "schema only")
    _, tg_produces = guard(off, "workload + produces")
    _, tg_mem = guard(mem)
    _, tg_file = guard(file_provider)
    _, tg_sdk = guard(sdk_provider)
    j_guard = tg.Guard(state=w.Bank(), tracer_provider=off)
    tg_json = j_guard.register(w.transfer, json_schema=w.TRANSFER_JSON_SCHEMA)
    s_guard = tg.Guard(state=w.Bank(), tracer_provider=off)
    tg_search = s_guard.register(w.search_contacts, **w.search_options())
    vc_search = pydantic.validate_call(w.search_contacts)
    a_guard = tg.Guard(state=w.Bank(), tracer_provider=off)
    tg_async = a_guard.register(w.atransfer, **w.tool_options())
    vc = pydantic.validate_call(w.transfer)
    mem_tracer = mem.get_tracer("hand")
    file_tracer = file_provider.get_tracer("hand")
    sdk_tracer = sdk_provider.get_tracer("hand")

    def sdk_flush() -> None:
        sdk_provider.force_flush()

    cases: dict[str, Case] = {
        "bare": loop_case(w.transfer, w.ARGS),
        "validate_call": loop_case(vc, w.ARGS),
        "validate_call+span(memory)": first(
            mem_exporter.clear, loop_case(lean_span(mem_tracer, vc), w.ARGS, mem_tracer)
        ),
        "validate_call+span(file)": exported(
            file_provider, loop_case(lean_span(file_tracer, vc), w.ARGS, file_tracer)
        ),
        "toolguard off, schema only": guarded_case(tg_schema, off, w.ARGS),
        "toolguard off": guarded_case(tg_off, off, w.ARGS),
        "toolguard off, produces": guarded_case(tg_produces, off, w.ARGS),
        "toolguard memory": first(mem_exporter.clear, guarded_case(tg_mem, mem, w.ARGS)),
        "toolguard file": exported(file_provider, guarded_case(tg_file, file_provider, w.ARGS)),
        "toolguard off, blocked": guarded_case(tg_off, off, w.CLOSED_ARGS, blocked=True),
        "bare search": loop_case(w.search_contacts, w.SEARCH_ARGS),
        "validate_call search": loop_case(vc_search, w.SEARCH_ARGS),
        "toolguard off, search": guarded_case(tg_search, off, w.SEARCH_ARGS),
        "toolguard off, json_schema": guarded_case(tg_json, off, w.ARGS),
        "validate_call+span(sdk batch)": first(
            sdk_flush, loop_case(lean_span(sdk_tracer, vc), w.ARGS, sdk_tracer)
        ),
        "toolguard sdk batch": first(sdk_flush, guarded_case(tg_sdk, sdk_provider, w.ARGS)),
        "validate_call, invalid": invalid_case(vc),
    }
    cases["toolguard off, by name"] = by_name(g_off, off)
    loop = asyncio.new_event_loop()
    cases["async bare"] = async_case(loop, w.atransfer, off)
    cases["async validate_call"] = async_case(loop, pydantic.validate_call(w.atransfer), off)
    cases["async toolguard off"] = async_case(loop, tg_async, off)
    scale = {name: 1 for name in cases}
    icontract = _optional("icontract")
    if icontract is not None:
        contract = icontract.require(lambda account_id: account_id in _BANK.accounts)
        cases["icontract"] = loop_case(contract(w.transfer), w.ARGS)
        scale["icontract"] = 1
    lc_tools = _optional("langchain_core.tools")
    if lc_tools is not None:
        from langchain_core.tools import StructuredTool

        lc = StructuredTool.from_function(w.transfer, description="Transfer money.")
        cases["langchain invoke"] = _invoke_case(lc)
        scale["langchain invoke"] = 10  # ~30x slower: fewer calls keep the rounds short

    def cleanup() -> None:
        mem_exporter.clear()
        sdk_provider.shutdown()
        loop.close()

    return cases, scale, cleanup


_BANK = w.Bank()


def _invoke_case(tool: Any) -> Case:
    def run(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            tool.invoke(w.ARGS)
        return time.perf_counter() - start

    return run


# (case, reference, target): the case's overhead over the reference's must be <= target
TARGETS = [
    ("toolguard off", "validate_call", 1.5),
    ("toolguard off, produces", "validate_call", 2.0),
    ("toolguard memory", "validate_call+span(memory)", 1.05),
    ("toolguard file", "validate_call+span(file)", 1.05),
    # Issue 28: a realistic tool (a reference, a precondition, `produces` over 20 records),
    # a tool declared by JSON Schema (Agents SDK, MCP) against the same one by annotations
    # (both schema only: the validators compared), traced with the SDK's own processor.
    ("toolguard off, search", "validate_call search", 3.0),
    ("toolguard off, json_schema", "toolguard off, schema only", 1.5),
    ("toolguard sdk batch", "validate_call+span(sdk batch)", 1.15),
]
# The bare function each case's overhead is counted from, where it is not `transfer`.
BARE = dict.fromkeys(
    ("bare search", "validate_call search", "toolguard off, search"), "bare search"
)


def per_call(rounds: int, n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        cases, divide, cleanup = build_cases(Path(tmp))
        try:
            samples = interleaved(cases, rounds=rounds, n=n, divide=divide)
        finally:
            cleanup()
    out: dict[str, Any] = {
        "time": {k: median(v) for k, v in samples.items()},
        "overhead": {
            k: median(v) - median(samples[BARE.get(k, "bare")]) for k, v in samples.items()
        },
        "ratios": {},
        "per_round": {},
    }
    pairs = [(case, ref, BARE.get(case, "bare")) for case, ref, _ in TARGETS]
    pairs += [
        ("toolguard off, schema only", "validate_call", "bare"),
        ("toolguard off, by name", "validate_call", "bare"),
        ("toolguard off, blocked", "validate_call, invalid", "bare"),
        ("async toolguard off", "async validate_call", "async bare"),
    ]
    if "icontract" in samples:
        pairs.append(("toolguard off", "icontract", "bare"))
    if "langchain invoke" in samples:
        # Inverted: how many times LangChain's overhead is the guard's.
        pairs += [
            ("langchain invoke", mine, "bare") for mine in ("toolguard off", "toolguard memory")
        ]
    for case, ref, bare_case in pairs:
        # The definition: overhead = median time - median bare time; their ratio.
        base = median(samples[bare_case])
        name = f"{case} / {ref}"
        out["ratios"][name] = (median(samples[case]) - base) / (median(samples[ref]) - base)
        # The noise check: the same ratio round by round (median and quartiles).
        per_round = overhead_ratios(samples, case, ref, bare_case)
        out["per_round"][name] = [median(per_round), *quartiles(per_round)]
    return out


def verdicts(result: dict[str, Any]) -> dict[str, bool]:
    r = result["ratios"]
    met = {f"{c} / {ref} <= {t}": r[f"{c} / {ref}"] <= t for c, ref, t in TARGETS}
    if "langchain invoke / toolguard off" in r:
        met["langchain invoke / toolguard off >= 30"] = r["langchain invoke / toolguard off"] >= 30
    g = result["growth"]
    met[f"call {g['depth']} / call 10 of a trajectory, every check kind <= 1.2"] = g["ratio"] <= 1.2
    d = result["dispatch"]
    met[f"{d['many']} tools / 10 tools by name, misspelt names included <= 1.2"] = d["ratio"] <= 1.2
    return met


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few rounds: checks it runs")
    parser.add_argument("--rounds", type=int, default=61)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.quick:
        rounds, n, depth, many, deep_rounds = 3, 200, 1_000, 1_000, 3
    else:
        rounds, n, depth, many, deep_rounds = args.rounds, 200, 10_000, 10_000, 11
    started = time.perf_counter()
    result = per_call(rounds, n)
    result["growth"] = {"depth": depth, **growth(depth, rounds=deep_rounds)}
    # The index's hard case, reported without a target: every memo quotes any earlier answer.
    uniform = growth(depth, min(deep_rounds, 7), uniform=True)
    result["growth_uniform"] = {"depth": depth, **uniform}
    disp = dispatch(many, rounds=rounds, n=n)
    result["dispatch"] = {
        "many": many,
        "time_10": median(disp["10 tools"]),
        "time_many": median(disp[f"{many} tools"]),
        "ratio": time_ratio(disp, f"{many} tools", "10 tools"),
        "per_round": quartiles(
            [m / t for m, t in zip(disp[f"{many} tools"], disp["10 tools"], strict=True)]
        ),
    }
    result["targets"] = verdicts(result)
    result["settings"] = {"rounds": rounds, "calls_per_round": n, "quick": args.quick}
    result["seconds"] = time.perf_counter() - started
    report(result)
    write_json(args.json, result)
    return result


def report(result: dict[str, Any]) -> None:
    print(f"{'case':34} {'time/call':>12} {'overhead':>12}")
    for name, t in sorted(result["time"].items(), key=lambda kv: kv[1]):
        print(f"{name:34} {us(t)} {us(result['overhead'][name])}")
    print("\noverhead ratios (of median overheads); per round: median [25th-75th percentile]")
    for name, value in result["ratios"].items():
        mid, lo, hi = result["per_round"][name]
        print(f"  {name:54} {value:6.2f}   per round {mid:6.2f} [{lo:.2f}-{hi:.2f}]")
    d = result["dispatch"]
    for key, label in (("growth", "recent and earlier quotes"), ("growth_uniform", "any")):
        g = result[key]
        lo, hi = g["per_round"]
        print(
            f"\ncall {g['depth']} / call 10 of one trajectory ({label}): {g['ratio']:.3f} "
            f"[{lo:.2f}-{hi:.2f}]  ({us(g['call_last']).strip()} vs {us(g['call_10']).strip()})"
        )
    lo, hi = d["per_round"]
    print(
        f"dispatch by name, {d['many']} tools / 10 tools: {d['ratio']:.3f} [{lo:.2f}-{hi:.2f}]"
        f"  ({us(d['time_many']).strip()} vs {us(d['time_10']).strip()})"
    )
    print(f"\n{result['seconds']:.0f} s")
    print_targets(result["targets"])


if __name__ == "__main__":
    main(sys.argv[1:])
