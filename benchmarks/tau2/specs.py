"""What the guard knows about each tau2 tool beyond its JSON schema.

- ``refs``: ids that must come from an earlier tool output or from the user's own text
  (bound by ``bind_user_ids``), never invented;
- ``produces``: where those ids appear in outputs (tau2 returns JSON-encoded models);
- preconditions: the state checks the tool would otherwise fail on (the record exists, the
  order is in the status the action needs); they ask for ``guard_state``, since retail's
  address tools have a ``state`` argument of their own, read from the live tau2 database before the
  call runs, so a wrong id is refused without touching the environment.
The schemas themselves come from tau2 (``Tool.openai_schema``), see ``guarded.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import toolguard as tg


@dataclass
class Live:
    """The guard's ``state``: the environment of the task being replayed (swapped per task)."""

    env: Any = None

    @property
    def db(self) -> Any:
        return self.env.tools.db


def _keys(field: str) -> Callable[[Any], Iterable[Any]]:
    """Producer of the keys of a mapping field (payment methods are keyed by their id)."""

    def keys(result: Any) -> Iterable[Any]:
        value = result.get(field) if isinstance(result, dict) else None
        return list(value) if isinstance(value, dict) else []

    return keys


def _whole_str(result: Any) -> Iterable[Any]:
    # find_user_id_by_* returns the bare user id string
    return [result] if isinstance(result, str) else []


def _dict_values(result: Any) -> Iterable[Any]:
    # list_all_product_types: {"Desk Lamp": "6817146515", ...}
    return list(result.values()) if isinstance(result, dict) else []


P = tg.Precondition

# -- airline ---------------------------------------------------------------------------------
USER_EXISTS = P(
    "user_exists", lambda guard_state, user_id: user_id in guard_state.db.users, "no such user"
)
RESERVATION_EXISTS = P(
    "reservation_exists",
    lambda guard_state, reservation_id: reservation_id in guard_state.db.reservations,
    "no such reservation",
)
# tau2 accepts a second cancellation and refunds again: refuse it before it corrupts the DB.
NOT_CANCELLED = P(
    "reservation_not_cancelled",
    lambda guard_state, reservation_id: (
        guard_state.db.reservations[reservation_id].status != "cancelled"
    ),
    "the reservation is already cancelled",
)


def _reservation_payment_ok(guard_state: Any, reservation_id: str, payment_id: str) -> bool:
    user = guard_state.db.users[guard_state.db.reservations[reservation_id].user_id]
    return payment_id in user.payment_methods


def _booking_payments_ok(guard_state: Any, user_id: str, payment_methods: list[dict]) -> bool:
    owned = guard_state.db.users[user_id].payment_methods
    return all(p.get("payment_id") in owned for p in payment_methods)


PASSENGER_COUNT = P(
    "passenger_count_matches",
    lambda guard_state, reservation_id, passengers: (
        len(passengers) == len(guard_state.db.reservations[reservation_id].passengers)
    ),
    "the number of passengers must stay the same",
)
RES_PAYMENT = P(
    "payment_of_reservation_user",
    _reservation_payment_ok,
    "the payment method is not one of the reservation owner's",
)
BOOK_PAYMENT = P(
    "payment_of_user", _booking_payments_ok, "a payment method is not one of the user's"
)

AIRLINE: dict[str, dict[str, Any]] = {
    "get_user_details": dict(
        refs={"user_id": "user_id"},
        produces={
            "reservations": "reservation_id",
            _keys("payment_methods"): "payment_id",
        },
        preconditions=[USER_EXISTS],
    ),
    "get_reservation_details": dict(
        refs={"reservation_id": "reservation_id"},
        produces={
            "user_id": "user_id",
            "flight_number": "flight_number",
            "payment_id": "payment_id",
        },
        preconditions=[RESERVATION_EXISTS],
    ),
    "cancel_reservation": dict(
        refs={"reservation_id": "reservation_id"},
        preconditions=[RESERVATION_EXISTS, NOT_CANCELLED],
    ),
    "update_reservation_baggages": dict(
        refs={"reservation_id": "reservation_id", "payment_id": "payment_id"},
        preconditions=[RESERVATION_EXISTS, NOT_CANCELLED, RES_PAYMENT],
    ),
    "update_reservation_flights": dict(
        refs={"reservation_id": "reservation_id", "payment_id": "payment_id"},
        preconditions=[RESERVATION_EXISTS, NOT_CANCELLED, RES_PAYMENT],
    ),
    "update_reservation_passengers": dict(
        refs={"reservation_id": "reservation_id"},
        preconditions=[RESERVATION_EXISTS, NOT_CANCELLED, PASSENGER_COUNT],
    ),
    "book_reservation": dict(
        refs={"user_id": "user_id", "payment_methods[].payment_id": "payment_id"},
        preconditions=[USER_EXISTS, BOOK_PAYMENT],
        produces={"reservation_id": "reservation_id"},
    ),
    "send_certificate": dict(refs={"user_id": "user_id"}, preconditions=[USER_EXISTS]),
    "search_direct_flight": dict(produces={"flight_number": "flight_number"}),
    "search_onestop_flight": dict(produces={"flight_number": "flight_number"}),
}

# -- retail ----------------------------------------------------------------------------------
R_USER_EXISTS = P(
    "user_exists", lambda guard_state, user_id: user_id in guard_state.db.users, "no such user"
)
ORDER_EXISTS = P(
    "order_exists", lambda guard_state, order_id: order_id in guard_state.db.orders, "no such order"
)
PRODUCT_EXISTS = P(
    "product_exists",
    lambda guard_state, product_id: product_id in guard_state.db.products,
    "no such product",
)


def _status(pred: Callable[[str], bool], what: str, cid: str) -> tg.Precondition:
    return P(cid, lambda guard_state, order_id: pred(guard_state.db.orders[order_id].status), what)


PENDING = _status(lambda s: s == "pending", "the order must be pending", "order_pending")
# address and payment changes are also allowed after an item modification ("pending (...)")
PENDING_ANY = _status(
    lambda s: s.startswith("pending"), "the order must be pending", "order_pending"
)
DELIVERED = _status(lambda s: s == "delivered", "the order must be delivered", "order_delivered")


def _items_in_order(guard_state: Any, order_id: str, item_ids: list[str]) -> bool:
    have = [it.item_id for it in guard_state.db.orders[order_id].items]
    return all(item_ids.count(i) <= have.count(i) for i in set(item_ids))


def _new_items_available(guard_state: Any, new_item_ids: list[str]) -> bool:
    variants = {vid: v for p in guard_state.db.products.values() for vid, v in p.variants.items()}
    return all(i in variants and variants[i].available for i in new_item_ids)


def _payment_of_order_user(guard_state: Any, order_id: str, payment_method_id: str) -> bool:
    user = guard_state.db.users[guard_state.db.orders[order_id].user_id]
    return payment_method_id in user.payment_methods


ITEMS_IN_ORDER = P("items_in_order", _items_in_order, "an item is not in the order")
NEW_ITEMS = P(
    "new_items_available", _new_items_available, "a new item does not exist or is sold out"
)
ORDER_PAYMENT = P(
    "payment_of_order_user", _payment_of_order_user, "the payment method is not the order owner's"
)

_ITEM_CHANGE = dict(
    refs={
        "order_id": "order_id",
        "item_ids": "item_id",
        "new_item_ids": "item_id",
        "payment_method_id": "payment_method_id",
    },
)

RETAIL: dict[str, dict[str, Any]] = {
    "find_user_id_by_name_zip": dict(produces={_whole_str: "user_id"}, grounded=["zip"]),
    "find_user_id_by_email": dict(produces={_whole_str: "user_id"}, grounded=["email"]),
    "get_user_details": dict(
        refs={"user_id": "user_id"},
        produces={"orders": "order_id", _keys("payment_methods"): "payment_method_id"},
        preconditions=[R_USER_EXISTS],
    ),
    "get_order_details": dict(
        refs={"order_id": "order_id"},
        produces={
            "item_id": "item_id",
            "product_id": "product_id",
            "payment_method_id": "payment_method_id",
            "user_id": "user_id",
        },
        preconditions=[ORDER_EXISTS],
    ),
    "get_product_details": dict(
        refs={"product_id": "product_id"},
        produces={"item_id": "item_id"},
        preconditions=[PRODUCT_EXISTS],
    ),
    "list_all_product_types": dict(produces={_dict_values: "product_id"}),
    "cancel_pending_order": dict(
        refs={"order_id": "order_id"}, preconditions=[ORDER_EXISTS, PENDING]
    ),
    "modify_pending_order_address": dict(
        refs={"order_id": "order_id"}, preconditions=[ORDER_EXISTS, PENDING_ANY]
    ),
    "modify_pending_order_payment": dict(
        refs={"order_id": "order_id", "payment_method_id": "payment_method_id"},
        preconditions=[ORDER_EXISTS, PENDING_ANY, ORDER_PAYMENT],
    ),
    "modify_pending_order_items": dict(
        **_ITEM_CHANGE,
        preconditions=[ORDER_EXISTS, PENDING, ITEMS_IN_ORDER, NEW_ITEMS, ORDER_PAYMENT],
    ),
    "exchange_delivered_order_items": dict(
        **_ITEM_CHANGE,
        preconditions=[ORDER_EXISTS, DELIVERED, ITEMS_IN_ORDER, NEW_ITEMS, ORDER_PAYMENT],
    ),
    "return_delivered_order_items": dict(
        refs={
            "order_id": "order_id",
            "item_ids": "item_id",
            "payment_method_id": "payment_method_id",
        },
        preconditions=[ORDER_EXISTS, DELIVERED, ITEMS_IN_ORDER, ORDER_PAYMENT],
    ),
    "modify_user_address": dict(refs={"user_id": "user_id"}, preconditions=[R_USER_EXISTS]),
}

SPECS = {"airline": AIRLINE, "retail": RETAIL}

# Ids the user may state in their own words; the agent may use them without a lookup.
_USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{3,5}\b")
_RESERVATION_ID = re.compile(r"\b(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}\b")
_ORDER_ID = re.compile(r"#?\bW\d{7}\b")
_FLIGHT = re.compile(r"\bHAT\d{3}\b")


def user_ids(domain: str, text: str) -> list[tuple[str, str]]:
    """(kind, value) for every id that appears in the user's scenario text."""
    found = [("user_id", m) for m in _USER_ID.findall(text)]
    if domain == "airline":
        found += [("reservation_id", m) for m in _RESERVATION_ID.findall(text)]
        found += [("flight_number", m) for m in _FLIGHT.findall(text)]
    else:
        found += [("order_id", "#" + m.lstrip("#")) for m in _ORDER_ID.findall(text)]
    return found
