"""Which trajectory store a guard uses, without a Redis server: memory by default (a plain
in-memory Trajectory, today's path), a URL or $TOOLGUARD_STORE, and clear errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolguard as tg
from toolguard.runtime.trajectories.redis_store import RedisStore
from toolguard.runtime.trajectories.shared import _UNSHARABLE, SharedTrajectory, _decode, _encode
from toolguard.runtime.trajectories.store import MemoryStore, redact
from toolguard.runtime.trajectories.store_url import ENV


def test_memory_is_the_default_and_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    guard = tg.Guard()
    assert isinstance(guard.store, MemoryStore)
    traj = guard.trajectory("t")
    assert type(traj) is tg.Trajectory and traj._shared is False
    assert type(tg.Guard(store="memory").trajectory()) is tg.Trajectory


def test_the_environment_chooses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "redis://:secret@127.0.0.1:1/0")
    guard = tg.Guard(trajectory_idle_timeout=60)
    assert isinstance(guard.store, RedisStore)
    assert guard.store.name == "redis://127.0.0.1:1/0"  # no password in messages
    assert guard.store.ttl_ms == 60_000
    # Making a trajectory connects to nothing: a store down at start-up is no crash.
    assert isinstance(guard.trajectory("x"), SharedTrajectory)
    assert isinstance(tg.Guard(store="memory").store, MemoryStore)  # store= wins


def test_bad_store_names_where(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "postgres://db/x")
    with pytest.raises(ValueError, match=r"\$TOOLGUARD_STORE: 'postgres://db/x' is no trajectory"):
        tg.Guard()
    with pytest.raises(ValueError, match="store=: 'mem' is no trajectory store"):
        tg.Guard(store="mem")
    with pytest.raises(ValueError, match="store= takes a TrajectoryStore or a URL"):
        tg.Guard(store=3)  # type: ignore[arg-type]


def test_redact() -> None:
    assert redact("redis://user:pw@h:1/0?password=x") == "redis://h:1/0"
    assert redact("unix:///run/redis.sock") == "unix:///run/redis.sock"


def test_long_ids_share_one_slot() -> None:
    store = RedisStore("redis://127.0.0.1:1/0")
    keys = store.keys("x" * 10_000)
    assert len({k.rsplit(":", 1)[0] for k in keys}) == 1 and max(map(len, keys)) < 120
    assert store.keys("a}b")[0].startswith("toolguard:{sha256:")


scalars = st.one_of(
    st.text(), st.integers(), st.floats(allow_nan=False), st.booleans(), st.binary()
)
values = st.recursive(scalars, lambda inner: st.tuples(inner, inner), max_leaves=8)


@given(values)
def test_a_bound_value_crosses_the_store_unchanged(value) -> None:
    encoded = _encode(value)
    decoded = _decode(json.loads(json.dumps(encoded)))
    assert decoded == value and type(decoded) is type(value)
    assert repr(decoded) == repr(value)  # 1 stays 1, True stays True, -0.0 stays -0.0


def test_values_json_cannot_carry_are_not_shared() -> None:
    assert _encode(frozenset({1})) is _UNSHARABLE
    assert _encode((1, object())) is _UNSHARABLE
    assert _decode(json.loads(json.dumps(_encode(float("inf"))))) == float("inf")
