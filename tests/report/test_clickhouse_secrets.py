"""A ClickHouse URL's secrets never reach a message: the password (in the user info, written
raw with '#', '/', '?', '@' or percent-encoded), a token or password in the query, whatever
characters they hold. A URL that cannot be read as clickhouse-connect reads it is one line
naming what is wrong (its host at most), never a traceback. Every server here is a closed
port on 127.0.0.1: the driver is refused at once, and nothing is sent anywhere."""

from __future__ import annotations

import contextlib
import io
import socket
import urllib.parse

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("clickhouse_connect", reason="clickhouse-connect comes with the dev extra")

from toolguard._cli import main
from toolguard.report.clickhouse import ClickHouseError, connect, shown_url

# Each secret starts and ends with a marker: a leaked piece of it shows one of them.
HEAD, TAIL = "Pw7x", "Zq4y"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PORT = _closed_port()
HOST = f"127.0.0.1:{PORT}"


def _case_id(value: object) -> str | None:
    """A case's id without the port, which each process picks anew: the test workers
    (pytest -n) must collect the same ids."""
    return value.replace(f":{PORT}", ":PORT") if isinstance(value, str) else None


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["report", *argv])
    return code, out.getvalue(), err.getvalue()


def _leaks(text: str, secret: str) -> bool:
    return secret in text or HEAD in text or TAIL in text


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # a password with '#', '/' or '?' ends the user info early: the rest looked like a host
        (f"http://agent:a#{HEAD}{TAIL}@{HOST}/db", "an '@' after its host part"),
        (f"http://agent:a/{HEAD}{TAIL}@{HOST}", "an '@' after its host part"),
        (f"http://agent:a?{HEAD}{TAIL}@{HOST}", "an '@' after its host part"),
        (f"http://agent:12/{HEAD}{TAIL}@{HOST}", "an '@' after its host part"),
        (f"http://{HOST}/?access_token={HEAD}{TAIL}", f"at http://{HOST}/?***: no answer"),
        (f"http://{HOST}/db?access_token=x&{HEAD}{TAIL}", f"ClickHouse at http://{HOST}/db?***: "),
        (f"http://{HOST}/?password={HEAD}{TAIL}", "a parameter clickhouse-connect does not take"),
        (f"http://{HOST}/?{HEAD}{TAIL}=1", "a parameter clickhouse-connect does not take"),
        (f"http://agent:{HEAD}{TAIL}@[::1:{PORT}", "the URL cannot be parsed"),
        (f"http://agent:{HEAD}{TAIL}@127.0.0.1:80x", "URL of host 127.0.0.1: its port is not a"),
        (f"http://agent:{HEAD}{TAIL}@127.0.0.1:99999", "its port is not a number from 0 to 65535"),
        (f"htp://agent:{HEAD}{TAIL}@ch.example", "URL of host ch.example: not a ClickHouse URL"),
    ],
    ids=_case_id,
)  # fmt: skip
def test_a_hostile_url_is_one_line_without_its_secret(url: str, expected: str) -> None:
    code, out, err = cli("--clickhouse", url)
    assert code == 2 and out == "" and "Traceback" not in err and err.count("\n") == 1
    assert expected in err, err
    assert not _leaks(err, f"{HEAD}{TAIL}"), err


_ANY = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_NASTY = st.text(st.sampled_from("#/?@:%&=+[] \\;'\"$!~*,"), max_size=6)
SECRETS = st.builds(lambda a, b: f"{HEAD}{a}{b}{TAIL}", _ANY, _NASTY)


def _forms(secret: str) -> list[str]:
    encoded = urllib.parse.quote(secret, safe="")
    return [
        f"http://agent:{secret}@{HOST}/db",
        f"http://agent:{encoded}@{HOST}/db",
        f"https://:{secret}@{HOST}",
        f"http://{HOST}/db?access_token={secret}",
        f"http://{HOST}/?access_token={encoded}&compress=false",
        f"clickhouse://{HOST}/?password={secret}",
        f"http://agent:{secret}@{HOST}/db?access_token={secret}",
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SECRETS)
def test_no_message_holds_a_secret(secret: str) -> None:
    for url in _forms(secret):
        with pytest.raises(ClickHouseError) as caught:
            connect(url)
        message = str(caught.value)
        assert "\n" not in message and not _leaks(message, secret), (url, message)
        assert not _leaks(shown_url(url), secret), url


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SECRETS)
def test_the_command_line_neither(secret: str) -> None:
    for url in _forms(secret)[::3]:
        code, out, err = cli("--clickhouse", url)
        assert code == 2 and out == "" and "Traceback" not in err and err.count("\n") == 1
        assert not _leaks(err, secret), (url, err)


def test_what_a_message_shows_of_a_good_url() -> None:
    assert shown_url("https://reader:pw@CH.example:8443/telemetry?access_token=t") == (
        "https://reader:***@ch.example:8443/telemetry?***"
    )
    assert shown_url("http://[::1]:8123") == "http://[::1]:8123"
    assert shown_url("http://agent:a%23b@h:1/db") == "http://agent:***@h:1/db"  # encoded: fine
    assert shown_url("chdb:///var/lib/ch@1") == "chdb:///var/lib/ch@1"
