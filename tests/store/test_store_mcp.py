"""MCP proxies sharing one Redis store (``toolguard mcp-proxy --store redis://...``):

- two proxies for two different servers (mcp-server-time and a small echo server) in one
  episode: one summary with the episode's T and FED, where each proxy alone wrote its own
  (and the report's figures were wrong);
- a proxy killed mid-episode: the next proxy continues the trajectory's steps and writes
  its summary;
- three replicas (``--replica``) behind a balancer that sends each new TCP connection to the
  next replica, serving one host session (the official client over streamable HTTP): the
  same spans, steps, bindings and report as one proxy.

The proxies each case needs are started together, the episodes run once per module, and each
test asserts one thing about what they wrote (a proxy writes its summaries as it stops).
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from redis_server import RedisServer

import toolguard as tg
from toolguard import _contract as contract

pytest.importorskip("toolguard_mcp", reason="the MCP adapter (adapters/mcp) is not installed")
pytest.importorskip("mcp_server_time", reason="mcp-server-time is in the MCP adapter's [test]")

HERE = Path(__file__).parent
PROXY = Path(sys.executable).parent / "toolguard-mcp-proxy"
TIME = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
ECHO = [sys.executable, str(HERE / "echo_server.py")]
TICKETS = ["--contract", str(HERE / "tickets.toml")]
META_ID = "toolguard/trajectory_id"


@dataclass
class Proxy:
    url: str
    proc: subprocess.Popen[str]
    spans: Path
    log: list[str] = field(default_factory=list)


@contextmanager
def http_proxies(*specs: tuple[Path, list[str], list[str]]) -> Iterator[list[Proxy]]:
    """``toolguard-mcp-proxy --http 127.0.0.1:0 --spans FILE [options] -- server`` for each
    (spans, server, options), all started at once; their URLs (from the line each logs once
    listening). SIGTERM at the end, which writes the summaries of their open trajectories."""
    procs = [
        subprocess.Popen(
            [str(PROXY), "--http", "127.0.0.1:0", "--spans", str(spans), *options, "--", *server],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        for spans, server, options in specs
    ]
    try:
        proxies = []
        for proc, (spans, _, _) in zip(procs, specs, strict=True):
            assert proc.stderr is not None
            seen = []
            found = None
            for line in proc.stderr:  # ends when the proxy exits: no wait without a bound
                seen.append(line)
                found = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp)", line)
                if found:
                    break
            assert found, "".join(seen)
            proxy = Proxy(found.group(1), proc, spans, seen)
            # The rest of its log is read on, so a talkative proxy never blocks on the pipe.
            threading.Thread(target=proxy.log.extend, args=(proc.stderr,), daemon=True).start()
            proxies.append(proxy)
        yield proxies
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)


def client(url: str, *, fresh_connections: bool = False) -> AbstractContextManager[Any]:
    """The official client over streamable HTTP; ``fresh_connections``: a new TCP connection
    for every HTTP request (no keep-alive), so a balancer of connections spreads them."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    if not fresh_connections:
        return Client(url, mode="legacy")  # type: ignore[return-value]
    http = httpx2.AsyncClient(
        limits=httpx2.Limits(max_keepalive_connections=0),
        timeout=httpx2.Timeout(30.0, read=300.0),
    )
    return Client(streamable_http_client(url, http_client=http), mode="legacy")  # type: ignore[return-value]


def meta(episode: str | None) -> dict[str, Any] | None:
    return {META_ID: episode} if episode else None


def spans_in(*paths: Path) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    for span in ss["spans"]:
                        attrs = {
                            a["key"]: next(iter(a["value"].values())) for a in span["attributes"]
                        }
                        out.append({"name": span["name"], "file": path.name, **attrs})
    return out


def of(spans: list[dict[str, Any]], trajectory: str) -> list[dict[str, Any]]:
    return [s for s in spans if s.get(contract.TRAJECTORY_ID) == trajectory]


def summaries(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == contract.SUMMARY_SPAN_NAME]


def calls(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((s for s in spans if contract.STEP in s), key=lambda s: int(s[contract.STEP]))


def report(paths: list[Path], *trajectories: str) -> dict[str, Any]:
    """The report's overall figures over the trajectories named (the files hold others')."""
    records, _ = tg.read_records([str(p) for p in paths if p.exists()])
    kept = [r for r in records if r.trajectory_id in trajectories]
    assert len(kept) == len(trajectories)
    return dict(tg.build_report(kept)["overall"])


# -- the fleet: every proxy of the module, started at once ----------------------------------------
PROXIES = {  # name: (server, options); "store" stands for --store URL
    "time-store": (TIME, ["store"]),
    "echo-store": (ECHO, [*TICKETS, "store"]),
    "time-memory": (TIME, []),
    "echo-memory": (ECHO, TICKETS),
    "killed": (ECHO, ["store"]),
    **{f"replica{i}": (ECHO, [*TICKETS, "--replica", "store"]) for i in range(3)},
}
REPLICAS = ["replica0", "replica1", "replica2"]
NAMED = {
    "ep-2",
    "ep-k",
    "ep-crash",
}  # the episodes a host names in _meta; sessions' trajectories are unnamed


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every episode of the module, run once on one fleet of proxies (a proxy serves several
    cases where they allow it: ``echo-store`` is the echo proxy of the store's episode, the
    proxy that continues the killed one's, and the one proxy the replicas are compared to).
    The proxies are stopped before any test reads their span files.

    Once per test run, not once per pytest-xdist worker that gets one of these tests (the
    fleet is sixteen processes): the first worker runs it under a lock in the run's shared
    temporary folder and leaves what it got there; the others read it."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "store-mcp"
    folder.mkdir(exist_ok=True)
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = folder / "runs.pickle"
        if not done.exists():
            redis = RedisServer(tmp_path_factory.mktemp("redis"))
            try:
                outcome = run_fleet(redis.url, folder)
            finally:
                redis.stop()
            done.write_bytes(pickle.dumps(outcome))
        outcome = pickle.loads(done.read_bytes())
    return {**outcome, "files": {name: folder / f"{name}.jsonl" for name in PROXIES}}


def run_fleet(redis_url: str, folder: Path) -> dict[str, Any]:
    """Start every proxy, run every episode, stop the proxies: what the hosts got."""
    files = {name: folder / f"{name}.jsonl" for name in PROXIES}
    specs = [
        (
            files[name],
            server,
            [o for x in options for o in (["--store", redis_url] if x == "store" else [x])],
        )
        for name, (server, options) in PROXIES.items()
    ]
    with http_proxies(*specs) as started:
        fleet = dict(zip(PROXIES, started, strict=True))

        async def everything() -> dict[str, Any]:
            return {
                "two": {
                    True: await two_servers(fleet["time-store"].url, fleet["echo-store"].url),
                    False: await two_servers(fleet["time-memory"].url, fleet["echo-memory"].url),
                },
                "killed": await killed_then_continued(fleet["killed"], fleet["echo-store"].url),
                "replicas": await replicas_then_one(
                    [fleet[n].url for n in REPLICAS], fleet["echo-store"].url
                ),
            }

        return asyncio.run(everything())


# -- two proxies for two servers in one episode ---------------------------------------------------
async def two_servers(time_url: str, echo_url: str) -> list[Any]:
    """Episode ep-2 over a time proxy and an echo proxy: one host session on each, the
    episode's id in _meta making them one trajectory."""
    async with client(time_url) as time, client(echo_url) as echo:
        episode = meta("ep-2")
        return [
            await time.call_tool("get_current_time", {"timezone": "UTC"}, meta=episode),
            await echo.call_tool("echo", {"text": "hi"}, meta=episode),
            await time.call_tool("get_current_time", {"zone": "UTC"}, meta=episode),
            await echo.call_tool("echo", {"text": "bye"}, meta=episode),
        ]


@pytest.mark.parametrize("shared", [True, False], ids=["store", "no-store"])
def test_two_proxies_for_two_servers_in_one_episode(runs: dict[str, Any], shared: bool) -> None:
    ok, echoed, bad, bye = runs["two"][shared]
    assert not ok.is_error and not echoed.is_error and not bye.is_error
    assert bad.is_error and "rejected (schema)" in bad.content[0].text
    kind = "store" if shared else "memory"
    paths = [runs["files"][f"{name}-{kind}"] for name in ("time", "echo")]
    spans = of(spans_in(*paths), "ep-2")
    found = summaries(spans)
    if not shared:  # each proxy alone: two summaries of one id, and figures the report guesses
        assert len(found) == 2
        return
    assert len(found) == 1
    assert int(found[0][contract.TRAJECTORY_LENGTH]) == 4
    assert int(found[0][contract.TRAJECTORY_FED]) == 3
    assert [int(s[contract.STEP]) for s in calls(spans)] == [1, 2, 3, 4]
    figures = report(paths, "ep-2")
    assert (figures["n"], figures["ter"], figures["mean_fed"]) == (1, 0.0, 3.0)
    assert figures["causes"]["schema"] == 1
    assert figures["disagreements"] == 0 and figures["incomplete"] == 0


# -- a proxy killed mid-episode -------------------------------------------------------------------
async def echoes(url: str, episode: str, *arguments: dict[str, str]) -> list[Any]:
    async with client(url) as host:
        return [await host.call_tool("echo", a, meta=meta(episode)) for a in arguments]


async def killed_then_continued(killed: Proxy, next_url: str) -> list[Any]:
    """Episode ep-k: three calls on a proxy, which is then killed, and two on the next."""
    first = await echoes(killed.url, "ep-k", {"text": "1"}, {"text": "2"}, {"txt": "3"})
    killed.proc.send_signal(signal.SIGKILL)  # no summary, no goodbye
    killed.proc.wait(60)
    return first + await echoes(next_url, "ep-k", {"text": "4"}, {"text": "5"})


def test_a_killed_proxy_is_continued_by_the_next(runs: dict[str, Any]) -> None:
    assert [r.is_error for r in runs["killed"]] == [False, False, True, False, False]
    first, second = runs["files"]["killed"], runs["files"]["echo-store"]
    spans = of(spans_in(first, second), "ep-k")
    found = summaries(spans)
    assert len(found) == 1
    # The second proxy took steps 4 and 5: the killed one's record was in the store.
    assert [int(s[contract.STEP]) for s in calls(of(spans_in(second), "ep-k"))] == [4, 5]
    assert int(found[0][contract.TRAJECTORY_LENGTH]) == 5
    assert int(found[0][contract.TRAJECTORY_FED]) == 3


def test_a_bad_store_url_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(PROXY), "--store", "mem://x", "--no-spans", "--", *ECHO],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "--store: 'mem://x' is no trajectory store" in proc.stderr


def test_replicas_without_a_shared_store_are_refused(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TOOLGUARD_STORE"}
    proc = subprocess.run(
        [str(PROXY), "--http", "127.0.0.1:0", "--replica", "--no-spans", "--", *ECHO],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 2
    assert "--replica needs a shared trajectory store" in proc.stderr
    assert "--store memory" in proc.stderr  # the way to say there is one replica only


# -- three replicas behind a round-robin balancer -------------------------------------------------
class RoundRobin:
    """A TCP balancer on loopback, as an L4 load balancer runs: each new connection goes to
    the next replica in turn, its bytes piped both ways; nothing read from HTTP, so no
    session affinity of any kind."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends = backends
        self.sent: list[int] = []  # the replica each connection went to, in order
        self.open: set[asyncio.StreamWriter] = set()
        self.piping: set[asyncio.Task[Any]] = set()

    async def close(self) -> None:
        """Close the connections still open (a client's GET stream retrying) and wait."""
        for writer in self.open:
            writer.close()
        await asyncio.gather(*self.piping, return_exceptions=True)

    async def serve(self) -> asyncio.Server:
        return await asyncio.start_server(self._client, "127.0.0.1", 0)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = len(self.sent) % len(self.backends)
        self.sent.append(index)
        task = asyncio.current_task()
        assert task is not None
        self.piping.add(task)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.backends[index])
        except OSError:
            writer.close()
            return
        self.open.update((writer, up_writer))
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        for end in (writer, up_writer):
            end.close()
            self.open.discard(end)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # a half close: the other way may still be answering
    except (ConnectionError, OSError):
        writer.close()


# One host session: a ticket minted and redeemed (a binding), a forged ticket (dependency,
# the first failure), a misspelt argument (schema), a second ticket.
SESSION = [
    ("mint", {"name": "a"}),
    ("redeem", {"ticket": "T-" + hashlib.sha256(b"a").hexdigest()[:8]}),
    ("echo", {"text": "x"}),
    ("redeem", {"ticket": "T-forged"}),
    ("echo", {"txt": "typo"}),
    ("mint", {"name": "b"}),
    ("redeem", {"ticket": "T-" + hashlib.sha256(b"b").hexdigest()[:8]}),
]
ALLOWED = [True, True, True, False, False, True, True]


async def one_session(url: str, *, fresh_connections: bool) -> list[Any]:
    async with client(url, fresh_connections=fresh_connections) as host:
        await host.list_tools()
        return [await host.call_tool(name, arguments) for name, arguments in SESSION]


async def raw_checks(url: str) -> dict[str, Any]:
    """What a replica refuses, asked with a raw HTTP client on a session of its own."""
    import httpx2

    accept = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def answer(response: Any) -> Any:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            data = [ln[5:] for ln in response.text.splitlines() if ln.startswith("data:")]
            return json.loads(data[-1])
        return response.json()

    def sent(response: Any) -> dict[str, Any]:  # what the tests read of a response
        return {"status_code": response.status_code, "json": response.json()}

    async with httpx2.AsyncClient(timeout=30.0) as http:
        init = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        opened = await http.post(url, json=init, headers=accept)
        sid = opened.headers["mcp-session-id"]
        session = {**accept, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
        subscribe = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "resources/subscribe",
            "params": {"uri": "file:///x"},
        }
        nan_call = (
            b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", '
            b'"params": {"name": "echo", "arguments": {"text": NaN}}}'
        )
        return {
            "sid": sid,
            "initialized": answer(opened),
            "get": (await http.get(url, headers=session)).status_code,
            "subscribe": answer(await http.post(url, json=subscribe, headers=session)),
            "nan": sent(await http.post(url, content=nan_call, headers=session)),
            "no_session": (
                await http.post(
                    url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=accept
                )
            ).status_code,
        }


async def replicas_then_one(urls: list[str], one: str) -> dict[str, Any]:
    """The session through the three replicas behind the balancer, then through one proxy;
    then the raw client's checks on a replica."""
    balancer = RoundRobin([(urlsplit(u).hostname or "", urlsplit(u).port or 0) for u in urls])
    server = await balancer.serve()
    front = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    try:
        spread = await one_session(front, fresh_connections=True)
    finally:
        server.close()
        await balancer.close()
    return {
        "spread": spread,
        "alone": await one_session(one, fresh_connections=False),
        "connections": balancer.sent,
        "raw": await raw_checks(urls[0]),
        "restart": await crash_then_call(urls[1]),
    }


async def crash_then_call(url: str) -> tuple[str, Any]:
    """A call that crashes a replica's server, then a call of the same session."""
    async with client(url) as host:
        try:
            crashed = repr(await host.call_tool("crash", {}, meta=meta("ep-crash")))
        except Exception as exc:  # the JSON-RPC error the relay answers with
            crashed = repr(exc)
        return crashed, await host.call_tool("echo", {"text": "again"}, meta=meta("ep-crash"))


def session_of(runs: dict[str, Any], *names: str) -> list[dict[str, Any]]:
    """The spans of the host session in the files of ``names``: the one trajectory there
    that is neither a named episode nor the raw client's."""
    raw = runs["replicas"]["raw"]["sid"].partition(".")[0]
    spans = spans_in(*(runs["files"][n] for n in names))
    kept = [s for s in spans if s.get(contract.TRAJECTORY_ID) not in {*NAMED, raw}]
    assert len({s[contract.TRAJECTORY_ID] for s in kept}) == 1
    return kept


def test_replicas_answer_the_session_as_one_proxy(runs: dict[str, Any]) -> None:
    spread, alone = runs["replicas"]["spread"], runs["replicas"]["alone"]
    for results in (spread, alone):
        assert [not r.is_error for r in results] == ALLOWED
    assert [r.content[0].text for r in spread] == [r.content[0].text for r in alone]


def test_replicas_take_steps_1_to_n_over_all_three(runs: dict[str, Any]) -> None:
    spread = calls(session_of(runs, *REPLICAS))
    assert [int(s[contract.STEP]) for s in spread] == list(range(1, len(SESSION) + 1))
    # Every replica served calls of the session: the balancer kept no affinity.
    assert {s["file"] for s in spread} == {f"{n}.jsonl" for n in REPLICAS}
    assert set(runs["replicas"]["connections"]) == {0, 1, 2}


def test_replicas_write_the_spans_of_one_proxy(runs: dict[str, Any]) -> None:
    def seen(spans: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        keys = (contract.STEP, contract.GEN_AI_TOOL_NAME, contract.DECISION, contract.CAUSE)
        more = (contract.CHECK, contract.MCP_CLIENT)
        return [tuple(s.get(k) for k in (*keys, *more)) for s in spans]

    spread = calls(session_of(runs, *REPLICAS))
    alone = calls(session_of(runs, "echo-store"))
    assert seen(spread) == seen(alone)
    assert [s[contract.DECISION] for s in alone] == [
        "allowed" if ok else "blocked" for ok in ALLOWED
    ]
    assert all(s[contract.MCP_CLIENT] for s in spread)  # the host, on every replica


def test_a_binding_crosses_replicas(runs: dict[str, Any]) -> None:
    by_step = {int(s[contract.STEP]): s for s in calls(session_of(runs, *REPLICAS))}
    crossed = [
        redeem
        for mint, redeem in ((1, 2), (6, 7))
        if by_step[mint]["file"] != by_step[redeem]["file"]
    ]
    assert crossed  # a ticket minted on one replica, redeemed on another
    for redeem in crossed:
        assert by_step[redeem][contract.DECISION] == "allowed"
    assert by_step[4][contract.CAUSE] == "dependency"  # a ticket nobody minted


def test_replicas_write_one_summary_and_the_report_of_one_proxy(runs: dict[str, Any]) -> None:
    spread = session_of(runs, *REPLICAS)
    (found,) = summaries(spread)
    (alone,) = summaries(session_of(runs, "echo-store"))
    assert int(found[contract.TRAJECTORY_LENGTH]) == len(SESSION)
    assert int(found[contract.TRAJECTORY_FED]) == 4
    for key in (
        contract.TRAJECTORY_LENGTH,
        contract.TRAJECTORY_FED,
        contract.TRAJECTORY_FIRST_ERROR_CAUSE,
    ):
        assert found.get(key) == alone.get(key)
    files = runs["files"]
    figures = report([files[n] for n in REPLICAS], found[contract.TRAJECTORY_ID])
    assert figures == report([files["echo-store"]], alone[contract.TRAJECTORY_ID])
    assert (figures["n"], figures["ter"], figures["mean_fed"]) == (1, 0.0, 4.0)
    assert figures["causes"]["dependency"] == 1  # the first failure's cause
    assert figures["disagreements"] == 0 and figures["incomplete"] == 0


def test_a_replica_refuses_what_needs_session_affinity(runs: dict[str, Any]) -> None:
    raw = runs["replicas"]["raw"]
    result = raw["initialized"]["result"]
    assert result["serverInfo"]["name"] == "echo"
    assert "listChanged" not in result["capabilities"].get("tools", {})
    assert raw["get"] == 405  # no GET stream
    assert raw["subscribe"]["error"]["code"] == -32601
    assert "resources/subscribe" in raw["subscribe"]["error"]["message"]
    assert raw["no_session"] == 400  # only initialize opens a session


def test_a_replica_refuses_a_call_it_cannot_parse(runs: dict[str, Any]) -> None:
    nan = runs["replicas"]["raw"]["nan"]
    assert nan["status_code"] == 400 and nan["json"]["error"]["code"] == -32700
    # Recorded as a rejected step of the raw session's trajectory, never forwarded.
    raw = runs["replicas"]["raw"]["sid"].partition(".")[0]
    (refused,) = calls(of(spans_in(*(runs["files"][n] for n in REPLICAS)), raw))
    assert refused[contract.DECISION] == "blocked"
    assert refused[contract.CHECK] == "schema.jsonrpc"


def test_a_replica_restarts_its_server_after_a_crash(runs: dict[str, Any]) -> None:
    crashed, after = runs["replicas"]["restart"]
    assert "exited" in crashed  # the call in flight, answered with an error
    assert not after.is_error and after.content[0].text == "again"  # the next server's
    steps = calls(of(spans_in(runs["files"]["replica1"]), "ep-crash"))
    assert [(s[contract.GEN_AI_TOOL_NAME], s[contract.DECISION]) for s in steps] == [
        ("crash", "allowed"),
        ("echo", "allowed"),
    ]


def test_a_replica_stops_at_start_on_a_contract_that_does_not_fit(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[tools.redeem]\nrefs = { tiket = "ticket" }\n')
    replica = ["--http", "127.0.0.1:0", "--replica", "--store", "memory"]
    proc = subprocess.run(
        [str(PROXY), *replica, "--contract", str(bad), "--no-spans", "--", *ECHO],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert "tool 'redeem', key 'refs'" in proc.stderr and "Traceback" not in proc.stderr
