"""A replica's sessions (:mod:`toolguard_mcp.replica`): the session ids it hands out and
reads, and the trajectories they name, the same at every replica."""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping
from typing import Any

from . import _meta
from .calls import CallGuard

SESSION_PREFIX = "mcp-session:"  # the trajectory key of a session, as in every mode
_SID_LIMIT = 512
_CLIENT_LIMIT = 256


class ReplicaCalls(CallGuard):
    """A :class:`CallGuard` whose session trajectories are named by the session id, so every
    replica opens the same shared record for a session."""

    def trajectory_for(
        self, meta: Any, session: str | None, *, retry_of: tuple[str, Any] | None = None
    ) -> tuple[Any, str | None]:
        if (
            session is not None
            and session.startswith(SESSION_PREFIX)
            and _meta.carried(meta)[0] is None
        ):
            self._open_once(session.removeprefix(SESSION_PREFIX), session)
        return super().trajectory_for(meta, session, retry_of=retry_of)

    def end_replica_session(self, session: str) -> None:
        """The host ended its session (DELETE), on whichever replica: the trajectory ends here
        and its summary is claimed, when the shared record has steps (a session without a
        call has no trajectory, as in every mode)."""
        traj = self.guard.find_trajectory(session)
        if traj is None:
            traj = self._open(session.removeprefix(SESSION_PREFIX), session)
            if traj.length == 0:
                traj.writes_summary = False
        traj.end()


def new_session_id(msg: Mapping[str, Any]) -> str:
    """A session id for the host of this ``initialize``: a random id, then its
    ``clientInfo`` (name/version) so every replica knows who calls."""
    sid = uuid.uuid4().hex
    params = msg.get("params")
    info = params.get("clientInfo") if isinstance(params, Mapping) else None
    if isinstance(info, Mapping) and isinstance(info.get("name"), str):
        version = info.get("version")
        who = (info["name"] + (f"/{version}" if isinstance(version, str) else ""))[:_CLIENT_LIMIT]
        sid += "." + base64.urlsafe_b64encode(who.encode()).decode().rstrip("=")
    return sid


def session_of(sid: str) -> tuple[str, str | None]:
    """(the trajectory key, the host) a session id stands for."""
    own, _, who = sid.partition(".")
    client = None
    if who:
        try:
            client = base64.urlsafe_b64decode(who + "=" * (-len(who) % 4)).decode()[:_CLIENT_LIMIT]
        except (binascii.Error, UnicodeDecodeError, ValueError):
            client = None
    return SESSION_PREFIX + own, client


def valid_session_id(sid: str) -> bool:
    own = sid.partition(".")[0]
    return 0 < len(sid) <= _SID_LIMIT and bool(own) and all(0x21 <= ord(c) <= 0x7E for c in sid)
