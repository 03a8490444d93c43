"""``toolguard mcp-proxy``: guard any MCP server without touching its code.

    toolguard mcp-proxy --contract git.toml -- python -m mcp_server_git --repository .

Starts the server as a subprocess and serves its tools to the host, over stdio (default) or
streamable HTTP bound to the loopback interface (``--http 127.0.0.1:8765``; with
``--replica``, one of several behind a load balancer: :mod:`toolguard_mcp.replica`),
checking every ``tools/call`` against the contract file before it reaches the server. Spans go to
``--spans`` (OTLP JSON Lines, none lost), or wherever the standard ``OTEL_*`` variables say.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import toolguard as tg

from . import policy
from .calls import CALL_NOTES, CallGuard
from .policy import ToolPolicy

logger = logging.getLogger("toolguard.mcp")

DEFAULT_TIMEOUT = 300.0
DEFAULT_SPANS = "toolguard-spans.jsonl"
STORE_ENV = "TOOLGUARD_STORE"  # the core's variable (toolguard/runtime/trajectories/store_url.py)


def build_parser(prog: str = "toolguard mcp-proxy") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run an MCP server behind toolguard: every tools/call is checked against "
        "a contract file before it reaches the server, and traced.",
        epilog="example: %(prog)s --contract git.toml -- python -m mcp_server_git --repository .",
    )
    parser.add_argument(
        "--contract",
        metavar="FILE",
        help="TOML contract file (per tool: "
        "refs, produces, invalidates, grounded, preconditions, mode)",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at "
        "http://HOST:PORT/mcp instead of stdio (loopback addresses only)",
    )
    parser.add_argument(
        "--replica",
        action="store_true",
        help="with --http: serve as one of several replicas behind a load balancer (no "
        "session affinity): one server process shared by every host session, any session "
        "served by any replica; needs a shared --store (--store memory: one replica alone)",
    )
    parser.add_argument(
        "--spans",
        metavar="FILE",
        help=f"span file (OTLP JSON Lines; default {DEFAULT_SPANS}); "
        "OTEL_TRACES_EXPORTER selects other exporters instead",
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="record shadow traffic to FILE (the span file, for toolguard infer): log mode, "
        "nothing the contract forbids is blocked, and argument and result values are "
        "recorded on the spans (they may hold personal data)",
    )
    parser.add_argument(
        "--no-spans",
        action="store_true",
        help="check calls but install no span export (tracing off)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="a tools/call the server has not answered after this long is "
        "cancelled and answered with an error (default %(default)g; 0: never)",
    )
    parser.add_argument(
        "--mode", choices=("block", "log"), help="override the contract's default mode"
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label on every trajectory (repeatable), e.g. --label model=gpt",
    )
    parser.add_argument(
        "--max-trajectories",
        type=int,
        default=10_000,
        metavar="N",
        help="live trajectories kept at most (default %(default)s)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="a trajectory without a call this long is ended (default %(default)g)",
    )
    parser.add_argument(
        "--store",
        metavar="URL",
        help="keep trajectories in a shared store (redis://host:6379/0), so proxies in "
        "several processes continue one trajectory; default $TOOLGUARD_STORE, else memory",
    )
    parser.add_argument(
        "--record-content",
        action="store_true",
        help="record argument and result values on spans (off by default)",
    )
    parser.add_argument(
        "--pin",
        metavar="FILE",
        help="tool-definition pins: read from FILE when it exists, else written there at the "
        'first tool list; a tool that differs is flagged, or refused with pin = "block"',
    )
    parser.add_argument(
        "--max-message-mib",
        type=int,
        default=64,
        metavar="MIB",
        help="the largest JSON-RPC message relayed; a longer one is refused with an error "
        "(default %(default)s)",
    )
    parser.add_argument(
        "--auth-token-env",
        metavar="VAR",
        help="with --http: hosts must send 'Authorization: Bearer' with the token in the "
        "environment variable VAR (401 otherwise)",
    )
    parser.add_argument(
        "--no-probe",
        action="store_true",
        help="stdio: do not initialize the server before the host does (for a server that "
        "refuses a second initialize); its tools are then declared from the first tool list",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each verdict")
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- then the server's command line"
    )
    return parser


def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    """``toolguard mcp-proxy ARGS`` (the core CLI passes ``argv`` without the subcommand);
    run as the ``toolguard-mcp-proxy`` console script, ``argv`` is ``sys.argv[1:]``."""
    if prog is None:
        prog = "toolguard mcp-proxy" if argv is not None else Path(sys.argv[0]).name
    parser = build_parser(prog)
    args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("no server command: put it after --, e.g. -- python -m mcp_server_git")
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(message)s",
    )
    labels = {}
    for item in args.label:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--label takes KEY=VALUE, not {item!r}")
        labels[key] = value
    address = None
    if args.http:
        try:
            address = _loopback(args.http)
        except ValueError as exc:
            parser.error(str(exc))
    if args.replica:
        if address is None:
            parser.error("--replica needs --http (replicas serve streamable HTTP)")
        chosen = (args.store or os.environ.get(STORE_ENV, "")).strip()
        if not chosen:
            parser.error(
                "--replica needs a shared trajectory store, or each replica counts its own "
                "steps of a session: --store redis://host:6379/0 (or $TOOLGUARD_STORE); "
                "for one replica alone, say --store memory"
            )
        if chosen == "memory":
            logger.warning(
                "toolguard-mcp-proxy: --replica with --store memory: trajectories stay in "
                "this process, right only while it is the one replica"
            )
    token = None
    if args.auth_token_env:
        if address is None:
            parser.error("--auth-token-env needs --http (stdio has no hosts to tell apart)")
        token = os.environ.get(args.auth_token_env)
        if not token:
            parser.error(f"--auth-token-env: the variable {args.auth_token_env} is not set")
    if args.max_message_mib < 1:
        parser.error("--max-message-mib takes a whole number of MiB, at least 1")
    if args.record is not None:
        clash = [
            flag
            for flag, given in (
                ("--spans", args.spans is not None),
                ("--no-spans", args.no_spans),
                ("--mode block", args.mode == "block"),
            )
            if given
        ]
        if clash:
            parser.error(f"--record FILE writes its spans to FILE, in log mode: drop {clash[0]}")
        if not args.record.strip():
            parser.error("--record needs a file name")
    try:
        contract, policy = _load(args.contract) if args.contract else (None, ToolPolicy())
        if args.pin:
            policy.load_lock(args.pin)
    except tg.ContractFileError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    recording = args.record is not None
    if recording and contract is not None:
        contract = shadow(contract)
    mode: Literal["block", "log"] = (
        "log"
        if recording
        else args.mode or ("log" if contract is not None and contract.mode == "log" else "block")
    )
    service = None if "OTEL_SERVICE_NAME" in os.environ else "toolguard-mcp-proxy"
    spans = args.record if recording else args.spans or DEFAULT_SPANS
    provider = None if args.no_spans else tg.setup_file_export(spans, service_name=service)
    if recording:
        logger.warning(
            "toolguard-mcp-proxy: recording to %s: nothing is blocked, and argument and "
            "result values are written to the span file",
            spans,
        )
    try:
        guard = tg.Guard(
            mode=mode,
            record_content=args.record_content or recording,
            max_live_trajectories=args.max_trajectories,
            trajectory_idle_timeout=args.idle_timeout or None,
            store=args.store,
        )
    except (ValueError, ImportError) as exc:  # --store (or $TOOLGUARD_STORE) unusable
        parser.error(str(exc).replace("store=:", "--store:"))
    if provider is not None:
        provider.add_span_processor(call_notes())
    kind = CallGuard
    if args.replica:
        from .replica_sessions import ReplicaCalls

        kind = ReplicaCalls
    calls = kind(guard, contract, labels=labels, policy=policy, forward_unknown=False)
    timeout = args.timeout or None
    limit = args.max_message_mib * 1024 * 1024
    try:
        if address is None:
            status = _serve_stdio(calls, command, timeout, limit, probe=not args.no_probe)
        else:
            from .http import serve_http

            status = asyncio.run(
                serve_http(
                    calls,
                    command,
                    host=address[0],
                    port=address[1],
                    timeout=timeout,
                    env=os.environ,
                    token=token,
                    limit=limit,
                    replica=args.replica,
                )
            )
    except tg.ContractFileError as exc:  # the contract does not fit the server's tools
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    finally:
        calls.close()  # summaries of the trajectories still open
        if provider is not None:
            provider.force_flush()
    return status


def _serve_stdio(
    calls: CallGuard, command: list[str], timeout: float | None, limit: int, *, probe: bool
) -> int:
    from .relay import StdioRelay

    # The protocol gets private copies of stdin and stdout; fd 0 then reads nothing and fd 1
    # writes to stderr, so a stray print() in a predicate cannot corrupt the JSON-RPC stream.
    host_in, host_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    try:
        relay = StdioRelay(
            calls,
            command,
            host_in=host_in,
            host_out=host_out,
            timeout=timeout,
            env=os.environ,
            limit=limit,
            probe=probe,
        )
        return asyncio.run(relay.run())
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


def shadow(contract: tg.Contract) -> tg.Contract:
    """The contract for ``--record``: every tool in log mode, its own ``mode`` included, so
    what the contract forbids runs and is recorded with its failure."""
    tools = {name: dataclasses.replace(spec, mode="log") for name, spec in contract.tools.items()}
    return dataclasses.replace(contract, mode="log", tools=tools)


def _load(path: str) -> tuple[tg.Contract, ToolPolicy]:
    # Predicates named `module:function` are most often a module beside the contract.
    folder = str(Path(path).resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return policy.load(path)


def call_notes() -> Any:
    """A span processor putting the proxy's notes (the host, a tool unchecked or changed:
    :data:`toolguard_mcp.calls.CALL_NOTES`) on the call span as it starts."""
    from opentelemetry.sdk.trace import SpanProcessor

    class CallNotes(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            notes = CALL_NOTES.get()
            if notes and span.name.startswith("execute_tool"):
                span.set_attributes(notes)

    return CallNotes()


def _loopback(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(
            f"--http takes HOST:PORT (a port 0-65535), e.g. 127.0.0.1:8765, not {value!r}"
        )
    host = host.strip("[]") or "127.0.0.1"
    if host != "localhost":
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(f"--http binds loopback addresses only (127.0.0.1, ::1), not {host}")
    # Tried now, so a port in use is one line here rather than a traceback from the server's
    # task group (the socket is opened again, the same way, when serving starts).
    probe = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, int(port)))
    except OSError as exc:
        raise ValueError(f"--http {value}: cannot listen there: {exc.strerror or exc}") from None
    finally:
        probe.close()
    return host, int(port)


if __name__ == "__main__":
    raise SystemExit(main())
