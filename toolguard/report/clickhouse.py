"""The report computed by ClickHouse (clickhouse_sql.py) and printed like the Python report.

``sql_report(run, table, ...)`` takes a ``run(sql) -> rows`` callable, so the same query runs
on a server through clickhouse-connect (``connect``), on chdb in process (the tests and the
benchmark), or anywhere else that returns rows as mappings of column name to value. It checks
the table's columns first (``DESCRIBE TABLE``), runs the one query, and turns the counts it
returns into the report object of docs/protocol.md section 7 with the same code the Python
report uses (metrics.metrics_from_counts, findings.render_findings, cost.cost_from_counts):
intervals are bootstrapped here from the per-group histograms, without pulling any span.
"""

from __future__ import annotations

import logging
import re
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, cast

from .build import GroupMetrics, Labels, Report, _sort_key
from .clickhouse_result import Row, as_int, cohort_counts, cost_counts, row_findings
from .clickhouse_sql import quote_table, report_query
from .cost import cost_from_counts, cost_warnings
from .escape import printable
from .findings import render_findings
from .metrics import DEFAULT_RESAMPLES, DEFAULT_SEED, metrics_from_counts
from .reader import BackendError

Run = Callable[[str], Sequence[Row]]
"""Runs one SQL statement and returns its rows as mappings (column name -> value)."""

CLICKHOUSE_EXTRA_HINT = (
    "reading ClickHouse needs clickhouse-connect: pip install 'toolguard-otel[clickhouse]'"
)
NEEDED_COLUMNS = ("TraceId", "SpanId", "SpanAttributes")
COST_COLUMNS = ("Duration",)


class ClickHouseError(BackendError):
    """ClickHouse could not be read: the server is down or refused, the table is missing or
    lacks a column the report needs, the query failed, or the spans break the contract. The
    message names the URL or table and what was answered."""


def check_columns(run: Run, table: str, *, cost: bool = False) -> None:
    """Raise ClickHouseError naming the first column the report needs that ``table`` lacks."""
    rows = run(f"DESCRIBE TABLE {quote_table(table)}")
    types = {str(r.get("name")): str(r.get("type", "")) for r in rows}
    have = set(types)
    for column in NEEDED_COLUMNS + (COST_COLUMNS if cost else ()):
        if column not in have:
            raise ClickHouseError(
                f"table {table} has no column {column}: the report reads "
                f"{', '.join(NEEDED_COLUMNS + COST_COLUMNS)} as the OpenTelemetry Collector's "
                f"ClickHouse exporter writes them (otel_traces; columns found: "
                f"{', '.join(sorted(have)[:12]) or 'none'})"
            )
    attrs = types["SpanAttributes"]
    if not attrs.startswith("Map("):
        # The exporter's JSON mode (ClickHouse's JSON type for attributes) splits keys on their
        # dots into nested paths: the Map lookups of the query would fail with an engine
        # error that names none of this.
        json_mode = attrs.startswith(("JSON", "Object"))
        mode = "the Collector ClickHouse exporter's JSON mode" if json_mode else "not its default"
        raise ClickHouseError(
            f"table {table} stores SpanAttributes as {printable(attrs)[:60]} ({mode}), which "
            "the report does not read: it reads the exporter's default schema, SpanAttributes "
            "Map(LowCardinality(String), String); send toolguard's spans to a table made "
            "without the JSON mode (docs/clickhouse.md)"
        )


def sql_report(
    run: Run,
    table: str,
    *,
    by: Sequence[str] = (),
    where: str | None = None,
    max_length: int = 100_000,
    cost: bool = False,
    skip_invalid: bool = False,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Report:
    """The report of the spans in ``table`` (an ``otel_traces`` table), computed by the
    engine behind ``run``: the same object ``build_report`` returns for the same spans.

    ``where`` is a SQL condition on the table's own columns (``ServiceName = 'agent'``),
    passed to the engine as written: it is the caller's own SQL on their own server, never
    built from span contents. Spans that break the contract (docs/report-limits.md) raise
    ClickHouseError naming the first, or with ``skip_invalid`` are left out and counted."""
    check_columns(run, table, cost=cost)
    rows = run(report_query(table, by=by, where=where, max_length=max_length, cost=cost))
    overall_row: Row | None = None
    group_rows: list[tuple[tuple[str | None, ...], Row]] = []
    problems, first_problem = 0, None
    for row in rows:
        values = tuple(row["group_labels"])
        whole = not by or not values  # a row over every trajectory (of its `used` value)
        if whole and as_int(row["problems"]):
            problems += as_int(row["problems"])
            here = tuple(row["problem_first"])
            first_problem = here if first_problem is None else min(first_problem, here)
        if not as_int(row["used"]):
            continue
        if whole:
            overall_row = row
        if not by or values:
            group_rows.append((values, row))
    if overall_row is None and not problems:
        raise ClickHouseError(
            f"no toolguard trajectory in table {table}"
            + (f" where {where}" if where else "")
            + ": no span carries toolguard.trajectory.id with toolguard.step or "
            "toolguard.trajectory.length"
        )
    warnings = []
    if problems:
        trace, span, why = first_problem or ("?", "?", "?")
        first = f"trace {trace} span {span}: {why}"
        if not skip_invalid:
            raise ClickHouseError(
                f"table {table}: {problems} spans break the span contract "
                f"(docs/report-limits.md); the first: {first}"
            )
        warnings.append(f"{problems} invalid spans skipped; the first: {first}")
    if overall_row is None:
        raise ClickHouseError(f"no valid toolguard trajectory in table {table}")

    def group(labels: Labels, row: Row) -> GroupMetrics:
        # A GroupMetrics without its optional cost, which is added below when asked for.
        g = cast(
            GroupMetrics,
            {
                "labels": labels,
                **metrics_from_counts(cohort_counts(row), seed=seed, resamples=resamples),
            },
        )
        if cost:
            g["cost"] = cost_from_counts(cost_counts(row))
        return g

    group_rows.sort(key=lambda vr: _sort_key(vr[0]))
    groups = [group(dict(zip(by, values, strict=True)), row) for values, row in group_rows]
    overall = group({}, overall_row) if by else groups[0].copy()
    if cost:  # where the Python report has them: with what the reading found
        warnings += cost_warnings(
            as_int(overall_row["cost_unattributed_spans"]),
            as_int(overall_row["cost_invalid_spans"]),
        )
    warnings += render_findings(row_findings(overall_row, by))
    return {"groups": groups, "overall": overall, "warnings": warnings}


_SCHEMES = ("http", "https", "clickhouse", "clickhouses", "chdb")
_ERRNO = re.compile(r"\[Errno -?\d+\] [^\"')\]]+")
_NOT_SHOWN = "the URL is not shown: it may hold a password"
# The query parameters clickhouse-connect 1.12 takes from a DSN (get_client's keywords): their
# names are no secret. Any other name may be a piece of a token cut by an unencoded '&'.
_DSN_KEYWORDS = frozenset((
    "access_token", "autogenerate_query_id", "autogenerate_session_id", "ca_cert",
    "client_cert", "client_cert_key", "client_name", "compress", "compression",
    "connect_timeout", "dedicated_pool", "form_encode_query_params", "headers", "http_proxy",
    "https_proxy", "native_codec", "pool_mgr", "proxy_path", "query_limit", "query_retries",
    "rename_response_column", "send_receive_timeout", "server_host_name", "session_id",
    "settings", "show_clickhouse_errors", "tls_mode", "token_provider", "tz_mode", "tz_source",
    "user", "user_name", "verify",
))  # fmt: skip


class _Url:
    """What a message may show of a ClickHouse URL, and the secrets it must not.

    clickhouse-connect reads credentials from the user info (``user:password@``, split at its
    last ``@``) and from the query (``access_token``; ``user`` and every other parameter go to
    the client as keywords). Only the user, host, port and path are ever shown (the password
    as ``***``, a query as ``?***``); a URL that cannot be read as the driver reads it raises,
    showing its host at most."""

    def __init__(self, url: str) -> None:
        try:
            parts = urllib.parse.urlsplit(url)
        except ValueError:  # its message could quote the URL
            raise ClickHouseError(
                f"--clickhouse: the URL cannot be parsed (an IPv6 host's '[' left open?); "
                f"{_NOT_SHOWN}"
            ) from None
        self.secrets = _secrets(parts)
        if parts.scheme.lower() != "chdb" and "@" in parts.path + parts.query + parts.fragment:
            # The user info ended early: '/', '?' or '#' in the password cut it, so what the
            # driver would take for the host (or the path) is part of the password.
            raise ClickHouseError(
                "--clickhouse: the URL has an '@' after its host part: a password or a query "
                "value holding '@', '/', '?' or '#' must be percent-encoded (%40, %2F, %3F, "
                f"%23); {_NOT_SHOWN}"
            )
        host = parts.hostname or ""
        self.host = printable(f"[{host}]" if ":" in host else host)
        try:
            port = parts.port
        except ValueError:
            raise ClickHouseError(
                f"--clickhouse URL of host {self.host or '(none)'}: its port is not a number "
                f"from 0 to 65535; {_NOT_SHOWN}"
            ) from None
        if parts.scheme.lower() not in _SCHEMES:
            raise ClickHouseError(
                f"--clickhouse {self.shown_host()}: not a ClickHouse URL; give "
                "http://host:8123, https://user@host:8443/database, clickhouse://... or "
                "chdb:///path"
            )
        user = ""
        if parts.username is not None:
            user = parts.username + (":***" if parts.password is not None else "") + "@"
        self.shown = printable(
            f"{parts.scheme}://{user}{self.host}{f':{port}' if port is not None else ''}"
            f"{parts.path}{'?***' if parts.query else ''}"
        )

    def shown_host(self) -> str:
        return f"URL of host {self.host}" if self.host else "URL"

    def scrub(self, text: str) -> str:
        """``text`` (a driver's message) with every secret of the URL replaced by ``***``."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text


def _secrets(parts: urllib.parse.SplitResult) -> list[str]:
    """The password, every query value and name (but clickhouse-connect's own) and the
    fragment, as written and decoded (a token cut by an unencoded '&' or '#' becomes a name
    or the fragment); longest first, so no shorter one leaves a piece of a longer one."""
    found = {parts.password or "", parts.fragment}
    for piece in parts.query.split("&"):
        found.update(piece.split("=", 1))
    for name, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        found.update((name, value))
    found |= {urllib.parse.unquote(s) for s in found}
    found -= _DSN_KEYWORDS
    # As a driver's message may quote them: escaped in a str's or a bytes' repr (an
    # "Invalid header value b'Bearer ...'").
    for s in list(found):
        found |= {repr(s)[1:-1], printable(s)}
        found |= {repr(s.encode(codec, "replace"))[2:-1] for codec in ("utf-8", "latin-1")}
    # A secret of one or two characters would turn every message into stars; its leak
    # tells next to nothing.
    return sorted((s for s in found if len(s) > 2), key=len, reverse=True)


def shown_url(url: str) -> str:
    """``url`` as messages show it: the password as ``***``, a query as ``?***``; for a URL
    that cannot be read as clickhouse-connect reads it, the reason and its host at most."""
    try:
        return _Url(url).shown
    except ClickHouseError as exc:
        return str(exc)


def _answer(exc: BaseException, url: _Url) -> str:
    """What the server (or the network) said, in one line, without the URL's secrets."""
    text = url.scrub(" ".join(str(exc).split()))
    errno = _ERRNO.search(text)
    if errno:
        return f"no answer ({errno.group(0).strip()})"
    for marker in ("received ClickHouse error", "Code:"):
        at = text.find(marker)
        if at >= 0:
            text = text[at:]
            break
    return printable(text[:500] + (" ..." if len(text) > 500 else ""))


def connect(url: str) -> tuple[Any, Run]:
    """A clickhouse-connect client for ``url`` and a ``run`` that queries through it.

    ``url``: ``http(s)://[user[:password]@]host:port[/database][?access_token=...]``,
    ``clickhouse://...``, or ``chdb:///path`` for an embedded chdb database
    (clickhouse-connect's chdb backend). A URL that cannot be read, and a server that is down
    or refuses, raise ClickHouseError naming the URL (password, token and query hidden) and
    what it answered."""
    parsed = _Url(url)
    where = parsed.shown
    try:
        import clickhouse_connect
        from clickhouse_connect.driver.exceptions import Error as DriverError
    except ImportError:
        raise ClickHouseError(CLICKHOUSE_EXTRA_HINT) from None
    # The driver logs each failed attempt; with no logging set up, Python would print those
    # on stderr beside our one-line error. A NullHandler keeps them for whoever configures
    # logging, and quiet otherwise.
    logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())
    try:
        client = clickhouse_connect.get_client(dsn=url)
    except (DriverError, OSError, ValueError) as exc:
        raise ClickHouseError(f"ClickHouse at {where}: {_answer(exc, parsed)}") from None
    except ImportError as exc:  # chdb:// without chdb installed
        raise ClickHouseError(f"ClickHouse at {where}: {_answer(exc, parsed)}") from None
    except TypeError:
        # The driver passes each query parameter to its client as a keyword: an unknown one,
        # or a password given there too, is a TypeError naming it, and a name may be a piece
        # of a token cut by an unencoded '&'.
        raise ClickHouseError(
            f"ClickHouse at {where}: the URL's query holds a parameter clickhouse-connect does "
            "not take, or one it has already (a password goes in user:password@host); the "
            "names are not shown, a value holding '&' or '=' must be percent-encoded "
            "(%26, %3D)"
        ) from None
    except Exception as exc:  # anything else the driver raises on a URL it cannot use
        raise ClickHouseError(
            f"ClickHouse at {where}: clickhouse-connect refused the URL "
            f"({type(exc).__name__}: {_answer(exc, parsed)})"
        ) from None

    def run(sql: str) -> Sequence[Row]:
        try:
            return list(client.query(sql).named_results())
        except (DriverError, OSError) as exc:
            raise ClickHouseError(f"ClickHouse at {where}: {_answer(exc, parsed)}") from None

    return client, run


def clickhouse_report(
    url: str,
    table: str = "otel_traces",
    *,
    by: Sequence[str] = (),
    where: str | None = None,
    max_length: int = 100_000,
    cost: bool = False,
    skip_invalid: bool = False,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> Report:
    """``sql_report`` on the ClickHouse server at ``url`` (see ``connect``): what
    ``toolguard report --clickhouse URL --table TABLE`` prints, as the report object."""
    client, run = connect(url)
    try:
        return sql_report(
            run,
            table,
            by=by,
            where=where,
            max_length=max_length,
            cost=cost,
            skip_invalid=skip_invalid,
            seed=seed,
            resamples=resamples,
        )
    finally:
        client.close()
