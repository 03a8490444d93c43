"""What each BFCL backend needs before a call can run, declared for the guard.

Preconditions read the live backend (``instance``, the object behind the proxy) so an
illegal call is caught before it runs: the file must exist before ``cat``, the user must be
logged in before ``send_message``, the ticket must exist before ``close_ticket``.
Dependencies say which ids must come from an earlier output, and which call makes one stale.
Grounded arguments must appear in what the agent has seen (user turns and tool outputs); only
arguments for which every ground-truth call passes that test are declared (see README).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import toolguard as tg

Pred = Callable[..., bool]
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass
class Rules:
    preconditions: list[tg.Precondition] = field(default_factory=list)
    requires: dict[str, str] = field(default_factory=dict)
    produces: dict[str, str | Callable[[Any], Iterable[Any]]] = field(default_factory=dict)
    invalidates: dict[str, str] = field(default_factory=dict)
    grounded: list[str] = field(default_factory=list)


RULES: dict[str, dict[str, Rules]] = {}


def _tolerant(pred: Pred) -> Pred:
    """An ill-typed argument makes the predicate false instead of a guard error.

    Log mode runs every check even after the schema check failed, so predicates see values of
    the wrong type; the primary cause stays ``schema`` either way. On well-typed calls (the
    whole ground truth) this wrapper never fires, so it cannot hide a predicate bug there:
    such a bug would show up as a flagged ground-truth call.
    """

    @functools.wraps(pred)
    def wrapper(*args: Any, **kwargs: Any) -> bool:
        try:
            return bool(pred(*args, **kwargs))
        except (TypeError, AttributeError):
            return False

    return wrapper


def _add(cls: str, tool: str, *pre: tuple[str, Pred, str], **decl: Any) -> None:
    rules = RULES.setdefault(cls, {}).setdefault(tool, Rules())
    rules.preconditions.extend(tg.Precondition(i, _tolerant(p), m) for i, p, m in pre)
    for key, value in decl.items():
        current = getattr(rules, key)
        if isinstance(current, list):
            current.extend(value)
        else:
            current.update(value)


# -- GorillaFileSystem: every name is local to the current directory ---------------------------
def _entry(fs: Any, name: Any) -> Any:
    return fs._current_dir.contents.get(name) if isinstance(name, str) else None


def _is_file(fs: Any, name: Any) -> bool:
    return type(_entry(fs, name)).__name__ == "File"


def _is_dir(fs: Any, name: Any) -> bool:
    return type(_entry(fs, name)).__name__ == "Directory"


def _valid_name(name: str) -> bool:
    return not any(c in name for c in '|/\\?%*:"><')


def _cd_ok(instance: Any, folder: str) -> bool:
    folder = folder.rstrip("/") or "/"
    if folder in (".", "/"):
        return True
    if folder == "..":
        return instance._current_dir.parent is not None
    return "/" not in folder and _is_dir(instance, folder)


def _path_ok(instance: Any, path: str | None) -> bool:
    if path in (None, ".", "/"):
        return True
    node = instance.root if path.startswith("/") else instance._current_dir
    for part in path.strip("/").split("/"):
        node = node.contents.get(part) if part != "." else node
        if type(node).__name__ != "Directory":
            return False
    return True


def _move_ok(instance: Any, source: str, destination: str) -> bool:
    """mv/cp: into an existing directory only if the name is free there; never over a file."""
    if "/" in destination:
        return False
    target = _entry(instance, destination)
    if target is None:
        return True
    return _is_dir(instance, destination) and source not in target.contents


FS = "GorillaFileSystem"
_file_exists = "the file must exist in the current directory"
for _tool in ("cat", "sort", "tail", "grep", "wc"):
    _add(FS, _tool, ("file_exists", lambda instance, file_name: _is_file(instance, file_name),
                     _file_exists))
_add(FS, "wc", ("wc_mode", lambda mode: mode in (None, "l", "w", "c"), "mode is l, w or c"))
_add(FS, "diff", ("both_files_exist",
                  lambda instance, file_name1, file_name2: _is_file(instance, file_name1)
                  and _is_file(instance, file_name2), "both files must exist here"))
_add(FS, "cd", ("folder_exists", _cd_ok, "the folder must be a subdirectory, '..' or '/'"))
_add(FS, "find", ("path_exists", _path_ok, "the path must lead to a directory"))
for _tool in ("mv", "cp"):
    _add(FS, _tool,
         ("source_exists", lambda instance, source: _entry(instance, source) is not None,
          "the source must exist in the current directory"),
         ("destination_free", _move_ok,
          "the destination must be a new name or a directory without that name"))
_add(FS, "rm", ("exists", lambda instance, file_name: _entry(instance, file_name) is not None,
                "nothing of that name in the current directory"))
_add(FS, "rmdir", ("empty_dir_exists",
                   lambda instance, dir_name: _is_dir(instance, dir_name)
                   and not _entry(instance, dir_name).contents,
                   "must be an empty directory here"))
def _name_free(arg: str) -> Pred:
    def pred(instance: Any, args: dict[str, Any]) -> bool:
        return _valid_name(args[arg]) and _entry(instance, args[arg]) is None

    return pred


for _tool, _arg in (("mkdir", "dir_name"), ("touch", "file_name")):
    _add(FS, _tool, ("name_free", _name_free(_arg), "the name must be new and valid"))
_add(FS, "echo", ("target_file_exists",
                  lambda instance, file_name: file_name is None
                  or (_valid_name(file_name) and _is_file(instance, file_name)),
                  "echo writes only into an existing file"))
_add(FS, "mkdir", grounded=["dir_name"])
_add(FS, "find", grounded=["name"])
for _tool in ("mv", "cp"):
    _add(FS, _tool, grounded=["destination"])


# -- MessageAPI: a session, and receivers that exist --------------------------------------------
MSG = "MessageAPI"
_login = ("logged_in", lambda instance: bool(instance.current_user), "log in first")
for _tool in ("send_message", "delete_message", "view_messages_sent", "search_messages",
              "get_message_stats"):
    _add(MSG, _tool, _login)
_add(MSG, "send_message", ("receiver_exists",
                           lambda instance, receiver_id: receiver_id in instance.user_map.values(),
                           "the receiver id must be a known user id"))
_add(MSG, "delete_message", ("message_to_receiver_exists",
                             lambda instance, receiver_id: any(receiver_id in m
                                                               for m in instance.inbox),
                             "no message to that receiver"))
_add(MSG, "get_user_id", ("user_exists", lambda instance, user: user in instance.user_map,
                          "no such user"))
_add(MSG, "message_login", ("user_id_exists",
                            lambda instance, user_id: user_id in instance.user_map.values(),
                            "no such user id"), grounded=["user_id"])
_add(MSG, "add_contact", ("name_is_new", lambda instance, user_name: user_name
                          not in instance.user_map, "that contact already exists"),
     grounded=["user_name"])


# -- TicketAPI: tickets must exist; their ids come from outputs or from the user -----------------
TIX = "TicketAPI"


def _ticket(instance: Any, ticket_id: Any) -> dict[str, Any] | None:
    return next((t for t in instance.ticket_queue if t.get("id") == ticket_id), None)


_tix_login = ("logged_in", lambda instance: bool(instance.current_user), "log in first")
_tix_exists = ("ticket_exists", lambda instance, ticket_id: _ticket(instance, ticket_id)
               is not None, "no ticket with that id")
_add(TIX, "create_ticket", _tix_login,
     ("priority_range", lambda priority: priority is None or 1 <= priority <= 5,
      "priority is 1..5"), produces={"ticket_id": "id"}, grounded=["title"])
for _tool in ("get_ticket", "close_ticket", "resolve_ticket", "edit_ticket"):
    _add(TIX, _tool, _tix_exists, requires={"ticket_id": "ticket_id"})
_add(TIX, "get_ticket", produces={"ticket_id": "id"})
_add(TIX, "get_user_tickets", _tix_login, produces={"ticket_id": "id"})
_add(TIX, "close_ticket", ("not_closed", lambda instance, ticket_id:
                           (_ticket(instance, ticket_id) or {}).get("status") != "Closed",
                           "the ticket is already closed"))
_add(TIX, "resolve_ticket", ("not_resolved", lambda instance, ticket_id:
                             (_ticket(instance, ticket_id) or {}).get("status") != "Resolved",
                             "the ticket is already resolved"))
_add(TIX, "edit_ticket", ("known_fields", lambda updates: set(updates)
                          <= {"title", "description", "status", "priority"},
                          "only title, description, status and priority can change"))
_add(TIX, "logout", _tix_login)
_add(TIX, "ticket_login", grounded=["username", "password"])


# -- TwitterAPI: authentication, tweets that exist and were seen ---------------------------------
TW = "TwitterAPI"
_auth = ("authenticated", lambda instance: bool(instance.authenticated), "authenticate first")
for _tool in ("post_tweet", "retweet", "comment", "follow_user", "list_all_following",
              "unfollow_user"):
    _add(TW, _tool, _auth)
for _tool in ("retweet", "comment", "mention", "get_tweet", "get_tweet_comments"):
    _add(TW, _tool, ("tweet_exists", lambda instance, tweet_id: tweet_id in instance.tweets,
                     "no tweet with that id"))
for _tool in ("retweet", "comment", "mention"):
    _add(TW, _tool, requires={"tweet_id": "tweet_id"})
for _tool in ("post_tweet", "get_tweet", "get_user_tweets", "search_tweets"):
    _add(TW, _tool, produces={"tweet_id": "id"})
_add(TW, "comment", grounded=["comment_content"])


# -- TradingBot: session, market, known symbols and orders ---------------------------------------
TB = "TradingBot"
_tb_auth = ("authenticated", lambda instance: bool(instance.authenticated), "log in first")
for _tool in ("place_order", "withdraw_funds", "get_account_info", "fund_account",
              "remove_stock_from_watchlist", "get_watchlist", "get_order_history",
              "get_transaction_history"):
    _add(TB, _tool, _tb_auth)
_add(TB, "place_order",
     ("symbol_known", lambda instance, symbol: symbol in instance.stocks, "unknown symbol"),
     ("positive", lambda price, amount: price > 0 and amount > 0, "price and amount > 0"),
     ("funds", lambda instance, order_type, price, amount: order_type.lower() != "buy"
      or price * amount <= instance.account_info.get("balance", 0), "insufficient funds"),
     grounded=["amount"])
_add(TB, "get_stock_info", ("symbol_known", lambda instance, symbol: symbol in instance.stocks,
                            "unknown symbol"))
for _tool in ("cancel_order", "get_order_details"):
    _add(TB, _tool, ("order_exists", lambda instance, order_id: order_id in instance.orders,
                     "no order with that id"))
_add(TB, "cancel_order", ("not_completed", lambda instance, order_id:
                          instance.orders.get(order_id, {}).get("status") != "Completed",
                          "a completed order cannot be cancelled"))
_add(TB, "withdraw_funds",
     ("market_open", lambda instance: instance.market_status == "Open", "market is closed"),
     ("amount_available", lambda instance, amount: 0 < amount
      <= instance.account_info["balance"], "amount must be positive and covered"))
_add(TB, "fund_account", ("positive", lambda amount: amount > 0, "amount must be positive"))
_add(TB, "remove_stock_from_watchlist", ("on_watchlist", lambda instance, symbol:
                                         symbol in instance.watch_list, "not on the watchlist"))


# -- TravelAPI: the session token, registered cards, existing bookings ----------------------------
TR = "TravelAPI"


def _token_ok(instance: Any, access_token: str) -> bool:
    return instance.token_expires_in not in (None, 0) and access_token == instance.access_token


_token = ("valid_token", _token_ok, "the access token must be the live one")
for _tool in ("register_credit_card", "get_credit_card_balance", "book_flight",
              "retrieve_invoice", "get_booking_history", "cancel_booking", "set_budget_limit",
              "purchase_insurance"):
    _add(TR, _tool, _token)
for _tool in ("get_credit_card_balance", "book_flight", "purchase_insurance"):
    _add(TR, _tool, ("card_registered", lambda instance, card_id: card_id
                     in instance.credit_card_list, "card not registered"))
for _tool in ("cancel_booking", "contact_customer_support", "purchase_insurance",
              "retrieve_invoice"):
    _add(TR, _tool, ("booking_exists", lambda instance, booking_id: booking_id
                     in instance.booking_record, "no booking with that id"))
for _tool in ("cancel_booking", "contact_customer_support"):
    _add(TR, _tool, requires={"booking_id": "booking_id"})
_add(TR, "book_flight",
     ("known_airports", lambda instance, travel_from, travel_to:
      {travel_from, travel_to} <= set(instance.list_all_airports()), "unknown airport code"),
     ("iso_date", lambda travel_date: _ISO_DATE.fullmatch(travel_date) is not None,
      "travel_date is YYYY-MM-DD"),
     ("travel_class", lambda travel_class: travel_class in ("economy", "business", "first"),
      "travel_class is economy, business or first"),
     ("balance_covers_budget", lambda instance, card_id: instance.budget_limit is None
      or instance.credit_card_list[card_id]["balance"] >= instance.budget_limit,
      "the card balance is below the budget limit"),
     produces={"booking_id": "booking_id"})
_add(TR, "purchase_insurance", ("within_budget", lambda instance, insurance_cost:
                                instance.budget_limit is None
                                or insurance_cost <= instance.budget_limit,
                                "the insurance costs more than the budget limit"))
_add(TR, "get_booking_history",
     produces={"booking_id": lambda r: list((r or {}).get("booking_history", {}))})
_add(TR, "register_credit_card", grounded=["card_number"])
for _tool, _args in (("authenticate_travel", ["client_id", "client_secret", "refresh_token",
                                              "user_first_name", "user_last_name"]),
                     ("verify_traveler_information", ["first_name", "last_name"]),
                     ("get_nearest_airport_by_city", ["location"])):
    _add(TR, _tool, grounded=_args)


# -- VehicleControlAPI: the start sequence, physical ranges; places come from the user ----------
VC = "VehicleControlAPI"


def _tank_limits() -> tuple[float, float]:
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import vehicle_control as vc

    return vc.MIN_FUEL_LEVEL, vc.MAX_FUEL_LEVEL


_add(VC, "startEngine",
     ("ignition_start", lambda ignitionMode: ignitionMode == "START",
      "the engine starts with ignitionMode START"),
     ("doors_locked", lambda instance: instance.remainingUnlockedDoors == 0,
      "lock every door first"),
     ("brake_fully_pressed", lambda instance: instance.brakePedalStatus == "pressed"
      and instance._brakePedalForce == 1000.0, "press the brake pedal fully first"),
     ("fuel", lambda instance: instance.fuelLevel >= _tank_limits()[0], "the tank is empty"))
_add(VC, "setCruiseControl",
     ("engine_running", lambda instance: instance.engine_state != "stopped",
      "start the engine first"),
     ("speed_valid", lambda speed, activate: not activate
      or (0 <= speed <= 120 and speed % 5 == 0), "speed is 0..120 in steps of 5"))
_add(VC, "pressBrakePedal", ("pedal_range", lambda pedalPosition: 0 <= pedalPosition <= 1,
                             "pedalPosition is between 0 and 1"))
_add(VC, "fillFuelTank", ("tank_capacity", lambda instance, fuelAmount: fuelAmount >= 0
                          and instance.fuelLevel + fuelAmount <= _tank_limits()[1],
                          "the fuel must fit in the tank"))
_add(VC, "lockDoors", ("known_doors", lambda instance, door: set(door) <= set(instance.doorStatus),
                       "unknown door"))
_add(VC, "estimate_distance", grounded=["cityA", "cityB"])
_add(VC, "get_zipcode_based_on_city", grounded=["city"])
_add(VC, "set_navigation", grounded=["destination"])
