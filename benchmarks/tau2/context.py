"""What an agent knows before its first listed call: the authenticated user's account.

tau2's ground-truth action lists are often write-only (retail tasks 70-113, airline 14-23):
the lookups that revealed an order id or a payment method are left out, because tau2 grades
the final database, not the reads. Replayed as is, every such id "comes from nowhere" and
the dependency check flags it. With ``context="account"`` the replay binds what those
omitted lookups would have returned, by running them on the environment outside the
trajectory (they are not steps): the user named in the scenario text (user id, e-mail, or
name + zip, as the agent authenticates them), that user's details, each of their orders or
reservations, and - retail - the public catalogue (product ids and variant item ids).
Ids of other users stay unbound, so foreign ids are still caught.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal

import toolguard as tg
from benchmarks.tau2._tau2 import tool_call
from benchmarks.tau2.oracle import parse_content
from benchmarks.tau2.specs import user_ids
from benchmarks.tau2.tasks import GroundTruth

Context = Literal["account", "none"]
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


def _read(env: Any, name: str, **arguments: Any) -> Any | None:
    msg = env.get_response(tool_call(name, arguments, f"context-{name}"))
    return None if msg.error else parse_content(msg.content)


def account_users(task: GroundTruth, env: Any) -> list[str]:
    """The users the scenario text identifies, found the way the agent would find them."""
    found = [v for k, v in user_ids(task.domain, task.user_text) if k == "user_id"]
    if task.domain == "retail":
        for email in _EMAIL.findall(task.user_text):
            uid = _read(env, "find_user_id_by_email", email=email.rstrip("."))
            found += [uid] if isinstance(uid, str) else []
        # name + zip as free text: the users whose first name, last name and zip all occur
        text = task.user_text
        for uid, user in env.tools.db.users.items():
            name = (user.name.first_name, user.name.last_name, user.address.zip)
            if all(part in text for part in name):
                found.append(uid)
    return list(dict.fromkeys(u for u in found if u in env.tools.db.users))


def _extract(guard: tg.Guard, name: str, result: Any) -> Iterator[tuple[str, Any]]:
    yield from guard.get_tool(name).extract(result)


def account_bindings(task: GroundTruth, env: Any, guard: tg.Guard) -> list[tuple[str, Any]]:
    """(kind, value) pairs the omitted account lookups would have produced."""
    out: list[tuple[str, Any]] = []
    for uid in account_users(task, env):
        out.append(("user_id", uid))
        details = _read(env, "get_user_details", user_id=uid)
        if details is None:
            continue
        out += _extract(guard, "get_user_details", details)
        if task.domain == "airline":
            for rid in details.get("reservations", []):
                res = _read(env, "get_reservation_details", reservation_id=rid)
                out += _extract(guard, "get_reservation_details", res) if res else []
        else:
            for oid in details.get("orders", []):
                order = _read(env, "get_order_details", order_id=oid)
                out += _extract(guard, "get_order_details", order) if order else []
    if task.domain == "retail":
        out += _catalogue(env, guard)
    return out


_CATALOGUES: dict[int, list[tuple[str, Any]]] = {}


def _catalogue(env: Any, guard: tg.Guard) -> list[tuple[str, Any]]:
    # Product and variant ids never change during a replay (only availability does), so
    # the catalogue is read once per guard, from the first environment it sees.
    key = id(guard)
    if key not in _CATALOGUES:
        out: list[tuple[str, Any]] = []
        catalogue = _read(env, "list_all_product_types") or {}
        out += _extract(guard, "list_all_product_types", catalogue)
        for pid in catalogue.values():
            product = _read(env, "get_product_details", product_id=pid)
            out += _extract(guard, "get_product_details", product) if product else []
        _CATALOGUES[key] = out
    return _CATALOGUES[key]
