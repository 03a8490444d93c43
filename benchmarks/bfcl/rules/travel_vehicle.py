"""TravelAPI and VehicleControlAPI: tokens, cards, bookings, budgets; the engine start sequence."""

from __future__ import annotations

import re
from typing import Any

from benchmarks.bfcl.rules.base import add

_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")

# -- TravelAPI: the session token, registered cards, existing bookings ----------------------------
TR = "TravelAPI"


def _token_ok(instance: Any, access_token: str) -> bool:
    return instance.token_expires_in not in (None, 0) and access_token == instance.access_token


_token = ("valid_token", _token_ok, "the access token must be the live one")
for _tool in (
    "register_credit_card",
    "get_credit_card_balance",
    "book_flight",
    "retrieve_invoice",
    "get_booking_history",
    "cancel_booking",
    "set_budget_limit",
    "purchase_insurance",
):
    add(TR, _tool, _token)
for _tool in ("get_credit_card_balance", "book_flight", "purchase_insurance"):
    add(
        TR,
        _tool,
        (
            "card_registered",
            lambda instance, card_id: card_id in instance.credit_card_list,
            "card not registered",
        ),
    )
for _tool in (
    "cancel_booking",
    "contact_customer_support",
    "purchase_insurance",
    "retrieve_invoice",
):
    add(
        TR,
        _tool,
        (
            "booking_exists",
            lambda instance, booking_id: booking_id in instance.booking_record,
            "no booking with that id",
        ),
    )
for _tool in ("cancel_booking", "contact_customer_support"):
    add(TR, _tool, refs={"booking_id": "booking_id"})
add(
    TR,
    "book_flight",
    (
        "known_airports",
        lambda instance, travel_from, travel_to: (
            {travel_from, travel_to} <= set(instance.list_all_airports())
        ),
        "unknown airport code",
    ),
    (
        "iso_date",
        lambda travel_date: _ISO_DATE.fullmatch(travel_date) is not None,
        "travel_date is YYYY-MM-DD",
    ),
    (
        "travel_class",
        lambda travel_class: travel_class in ("economy", "business", "first"),
        "travel_class is economy, business or first",
    ),
    (
        "balance_covers_budget",
        lambda instance, card_id: (
            instance.budget_limit is None
            or instance.credit_card_list.get(card_id, {}).get("balance", 0) >= instance.budget_limit
        ),
        "the card balance is below the budget limit",
    ),
    produces={"booking_id": "booking_id"},
)
add(
    TR,
    "purchase_insurance",
    (
        "within_budget",
        lambda instance, insurance_cost: (
            instance.budget_limit is None or insurance_cost <= instance.budget_limit
        ),
        "the insurance costs more than the budget limit",
    ),
)
add(
    TR,
    "get_booking_history",
    produces={lambda r: list((r or {}).get("booking_history", {})): "booking_id"},
)
add(TR, "register_credit_card", grounded=["card_number"])
for _tool, _args in (
    (
        "authenticate_travel",
        ["client_id", "client_secret", "refresh_token", "user_first_name", "user_last_name"],
    ),
    ("verify_traveler_information", ["first_name", "last_name"]),
    ("get_nearest_airport_by_city", ["location"]),
):
    add(TR, _tool, grounded=_args)


# -- VehicleControlAPI: the start sequence, physical ranges; places come from the user ----------
VC = "VehicleControlAPI"


def _tank_limits() -> tuple[float, float]:
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import vehicle_control as vc

    return vc.MIN_FUEL_LEVEL, vc.MAX_FUEL_LEVEL


add(
    VC,
    "startEngine",
    (
        "ignition_start",
        lambda ignitionMode: ignitionMode == "START",
        "the engine starts with ignitionMode START",
    ),
    (
        "doors_locked",
        lambda instance: instance.remainingUnlockedDoors == 0,
        "lock every door first",
    ),
    (
        "brake_fully_pressed",
        lambda instance: (
            instance.brakePedalStatus == "pressed" and instance._brakePedalForce == 1000.0
        ),
        "press the brake pedal fully first",
    ),
    ("fuel", lambda instance: instance.fuelLevel >= _tank_limits()[0], "the tank is empty"),
)
add(
    VC,
    "setCruiseControl",
    (
        "engine_running",
        lambda instance: instance.engine_state != "stopped",
        "start the engine first",
    ),
    (
        "speed_valid",
        lambda speed, activate: not activate or (0 <= speed <= 120 and speed % 5 == 0),
        "speed is 0..120 in steps of 5",
    ),
)
add(
    VC,
    "pressBrakePedal",
    (
        "pedal_range",
        lambda pedalPosition: 0 <= pedalPosition <= 1,
        "pedalPosition is between 0 and 1",
    ),
)
add(
    VC,
    "fillFuelTank",
    (
        "tank_capacity",
        lambda instance, fuelAmount: (
            fuelAmount >= 0 and instance.fuelLevel + fuelAmount <= _tank_limits()[1]
        ),
        "the fuel must fit in the tank",
    ),
)
add(
    VC,
    "lockDoors",
    ("known_doors", lambda instance, door: set(door) <= set(instance.doorStatus), "unknown door"),
)
add(VC, "estimate_distance", grounded=["cityA", "cityB"])
add(VC, "get_zipcode_based_on_city", grounded=["city"])
add(VC, "set_navigation", grounded=["destination"])
