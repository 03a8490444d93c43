"""A contract that does not fit the server stops the proxy at start (one line, exit 2: over
stdio at the host's first request, over HTTP before anything is served); a tool the guard
cannot declare is refused, or passed unchecked where the contract asks; a tool the server
does not list never reaches it; the server dies with the proxy; a session without a call
reports as an empty report (issue 22, section 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HERE, PROXY, python_server
from raw_client import WAIT, RawProxy
from test_mcp_proxy_fail_closed import call_spans

ODD = python_server(str(HERE / "odd_server.py"))
FAKE = python_server(str(HERE / "fake_server.py"))

UNFIT = {
    "preconditions": (
        "[tools.get_current_time]\n"
        "preconditions = [{ id = 'known', predicate = 'zone_rules:known' }]\n",
        "def known(timezon):\n    return True\n",
    ),
    "json_schema": (
        "[tools.get_current_time]\n"
        "json_schema = { type = 'object', properties = { timezone = { type = 'strin' } } }\n",
        "",
    ),
    "refs": ("[tools.get_current_time]\nrefs = { zone = 'timezone' }\n", ""),
}


# The host's first request, by which the stdio proxy probes the server in that request's era.
FIRST_REQUEST = {
    "stdio": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t"},
        },
    },
    "stdio-2026": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    },
}


@pytest.mark.parametrize(
    ("key", "transport"),
    # Over HTTP the same declaration runs at start, and over stdio in the 2026-07-28 era:
    # one case each shows the path.
    [*((key, "stdio") for key in sorted(UNFIT)), ("refs", "stdio-2026"), ("refs", "http")],
)
def test_a_contract_that_does_not_fit_stops_the_proxy_at_start(
    tmp_path: Path, time_server: list[str], key: str, transport: str
) -> None:
    """Over stdio at the host's first request, before it goes on (the proxy's own tool list
    waits for it: the first request fixes the server's protocol era); over HTTP before
    anything is served."""
    text, rules = UNFIT[key]
    contract = tmp_path / "time.toml"
    contract.write_text(text)
    if rules:
        (tmp_path / "zone_rules.py").write_text(rules)
    http = ["--http", "127.0.0.1:0"] if transport == "http" else []
    proc = subprocess.Popen(
        [str(PROXY), "--contract", str(contract), *http, "--no-spans", "--", *time_server],
        stdin=subprocess.PIPE,  # left open: the proxy must stop by itself
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stderr is not None and proc.stdout is not None
    if transport in FIRST_REQUEST:
        proc.stdin.write(json.dumps(FIRST_REQUEST[transport]) + "\n")
        proc.stdin.flush()
    try:
        assert proc.wait(timeout=WAIT) == 2
        err, out = proc.stderr.read(), proc.stdout.read()
    finally:
        proc.kill()
        proc.stdin.close()
    assert out == ""  # the request was never relayed
    lines = [ln for ln in err.splitlines() if "serving http" not in ln]
    assert len(lines) == 1, err
    for name in (str(contract), "'get_current_time'", f"key {key!r}"):
        assert name in lines[0], lines[0]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_server_that_dies_at_start_stops_the_proxy_at_once(
    tmp_path: Path, transport: str
) -> None:
    """Its exit is said, with its code, as soon as it happens: not after the proxy's own
    handshake timed out (60 s), and over HTTP before anything is served."""
    dead = [sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit(5)"]
    http = ["--http", "127.0.0.1:0"] if transport == "http" else []
    proc = subprocess.Popen(
        [str(PROXY), *http, "--no-spans", "--", *dead],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t"}}
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    out, err = proc.communicate(json.dumps(message).encode() + b"\n", timeout=WAIT)
    assert out == b""  # stdio: no answer but the end of the stream; HTTP: nothing served
    log = err.decode()
    assert proc.returncode == 5, log
    assert "Traceback" not in log and "serving" not in log, log
    assert "exited" in log and "code 5" in log, log


def test_without_the_probe_an_unfit_entry_refuses_its_tool(
    tmp_path: Path, time_server: list[str]
) -> None:
    """--no-probe: the tools are declared from the host's first list, when the proxy can no
    longer stop; a contract entry that does not fit is logged, and its tool refused."""
    contract = tmp_path / "time.toml"
    contract.write_text(UNFIT["refs"][0])
    proxy = RawProxy(tmp_path, time_server, "--no-probe", "--contract", str(contract))
    proxy.initialize()
    unfit = proxy.request(
        "tools/call", {"name": "get_current_time", "arguments": {"timezone": "UTC"}}
    )
    assert unfit["result"]["isError"] and "cannot be checked" in text_of(unfit)
    other = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"}
    assert not proxy.request("tools/call", {"name": "convert_time", "arguments": other})[
        "result"
    ].get("isError")
    assert proxy.close() == 0
    assert "tool 'get_current_time', key 'refs'" in proxy.stderr()
    spans = call_spans(proxy.spans)
    assert [(s["toolguard.decision"], s.get("toolguard.check")) for s in spans] == [
        ("blocked", "schema.undeclarable"),
        ("allowed", None),
    ]


@pytest.mark.parametrize("options", [(), ("--no-probe",)], ids=["probed", "no-probe"])
def test_an_undeclarable_tool_is_refused_and_later_tools_still_checked(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    proxy = RawProxy(tmp_path, ODD, *options)
    proxy.initialize()
    broken = proxy.request("tools/call", {"name": "broken", "arguments": {"a": 1}})
    assert broken["result"]["isError"] and "cannot be checked" in text_of(broken)
    fine = proxy.request("tools/call", {"name": "fine", "arguments": {"a": "x"}})
    assert text_of(fine) == "ran fine"
    typo = proxy.request("tools/call", {"name": "fine", "arguments": {"b": "x"}})
    assert "rejected (schema)" in text_of(typo)
    # The server runs a tool it does not list: the proxy never sends it one.
    hidden = proxy.request("tools/call", {"name": "hidden", "arguments": {}})
    assert "There is no tool named `hidden`" in text_of(hidden)
    assert proxy.close() == 0
    assert "tool 'broken': the server's input schema cannot be used" in proxy.stderr()
    spans = call_spans(proxy.spans)
    assert [
        (s["gen_ai.tool.name"], s["toolguard.decision"], s.get("toolguard.check")) for s in spans
    ] == [
        ("broken", "blocked", "schema.undeclarable"),
        ("fine", "allowed", None),
        ("fine", "blocked", "schema.args"),
        ("hidden", "blocked", "schema.tool"),
    ]


def test_on_undeclarable_pass_runs_it_unchecked_and_says_so(tmp_path: Path) -> None:
    contract = tmp_path / "odd.toml"
    contract.write_text('[tools.broken]\non_undeclarable = "pass"\n')
    proxy = RawProxy(tmp_path, ODD, "--contract", str(contract))
    proxy.initialize()
    broken = proxy.request("tools/call", {"name": "broken", "arguments": {"a": 1}})
    assert text_of(broken) == "ran broken"
    assert proxy.close() == 0
    (span,) = call_spans(proxy.spans)
    assert span["toolguard.decision"] == "allowed"
    assert "input schema cannot be used" in span["toolguard.mcp.unchecked"]
    assert span["toolguard.mcp.client"] == "raw-client/0"


def text_of(answer: dict) -> str:
    return answer["result"]["content"][0]["text"]


# -- the server dies with the proxy ---------------------------------------------------------------
STUBBORN = (
    "import os, signal, sys, threading\n"
    "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
    "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
    "threading.Event().wait()\n"  # never reads stdin: its end does not stop it
)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT  # a bound against a hung test, not a measurement
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_server_dies_with_a_killed_proxy(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    proxy = subprocess.Popen(
        [str(PROXY), "--no-spans", "--", sys.executable, "-c", STUBBORN, str(pid_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    wait_until(lambda: pid_file.exists() and pid_file.read_text(), "the server never started")
    server = int(pid_file.read_text())
    assert alive(server)
    proxy.send_signal(signal.SIGKILL)
    proxy.wait(timeout=WAIT)
    wait_until(lambda: not alive(server), f"the server {server} outlived the proxy")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_node_server_dies_with_a_killed_proxy(
    tmp_path: Path, everything_server: list[str]
) -> None:
    proxy = RawProxy(tmp_path, everything_server, "--no-spans")
    proxy.initialize()
    children = Path(f"/proc/{proxy.process.pid}/task/{proxy.process.pid}/children")
    (server,) = [int(c) for c in children.read_text().split()]
    assert alive(server)
    proxy.process.send_signal(signal.SIGKILL)
    proxy.process.wait(timeout=WAIT)
    wait_until(lambda: not alive(server), f"the Node server {server} outlived the proxy")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_servers_of_http_sessions_die_with_a_killed_proxy(tmp_path: Path) -> None:
    """Over HTTP each session has a server process of its own: a kill -9 of the proxy ends it."""
    import re

    import httpx2
    from test_mcp_proxy_http import HEAD, HELLO

    log = tmp_path / "proxy.log"
    with log.open("wb") as err:
        proxy = subprocess.Popen(
            [str(PROXY), "--http", "127.0.0.1:0", "--no-spans", "--", *FAKE],
            stdin=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        wait_until(lambda: "serving http" in log.read_text(), "the proxy never served")
        found = re.search(r"serving (http://\S+/mcp)", log.read_text())
        assert found
        with httpx2.Client(timeout=WAIT) as http:
            assert http.post(found.group(1), headers=HEAD, json=HELLO).status_code == 200
        children = Path(f"/proc/{proxy.pid}/task/{proxy.pid}/children")
        (server,) = [int(c) for c in children.read_text().split()]  # the session's
        assert alive(server)
    finally:
        proxy.send_signal(signal.SIGKILL)
        proxy.wait(timeout=WAIT)
    wait_until(lambda: not alive(server), f"the session's server {server} outlived the proxy")


def test_a_session_without_a_call_is_an_empty_report(
    tmp_path: Path, time_server: list[str]
) -> None:
    proxy = RawProxy(tmp_path, time_server)
    proxy.initialize()
    assert proxy.close() == 0
    report = subprocess.run(
        [sys.executable, "-m", "toolguard", "report", str(proxy.spans), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
        env={**os.environ},
    )
    assert report.returncode == 0, report.stderr
    assert "is empty" in report.stdout
