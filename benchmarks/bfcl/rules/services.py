"""MessageAPI, TicketAPI, TwitterAPI, TradingBot: sessions, existing entities, ids from outputs."""

from __future__ import annotations

from typing import Any

from benchmarks.bfcl.rules.base import add

# -- MessageAPI: a session, and receivers that exist --------------------------------------------
MSG = "MessageAPI"
_login = ("logged_in", lambda instance: bool(instance.current_user), "log in first")
for _tool in (
    "send_message",
    "delete_message",
    "view_messages_sent",
    "search_messages",
    "get_message_stats",
):
    add(MSG, _tool, _login)
add(
    MSG,
    "send_message",
    (
        "receiver_exists",
        lambda instance, receiver_id: receiver_id in instance.user_map.values(),
        "the receiver id must be a known user id",
    ),
)
add(
    MSG,
    "delete_message",
    (
        "message_to_receiver_exists",
        lambda instance, receiver_id: any(receiver_id in m for m in instance.inbox),
        "no message to that receiver",
    ),
)
add(
    MSG,
    "get_user_id",
    ("user_exists", lambda instance, user: user in instance.user_map, "no such user"),
)
add(
    MSG,
    "message_login",
    (
        "user_id_exists",
        lambda instance, user_id: user_id in instance.user_map.values(),
        "no such user id",
    ),
    grounded=["user_id"],
)
add(
    MSG,
    "add_contact",
    (
        "name_is_new",
        lambda instance, user_name: user_name not in instance.user_map,
        "that contact already exists",
    ),
    grounded=["user_name"],
)


# -- TicketAPI: tickets must exist; their ids come from outputs or from the user -----------------
TIX = "TicketAPI"


def _ticket(instance: Any, ticket_id: Any) -> dict[str, Any] | None:
    return next((t for t in instance.ticket_queue if t.get("id") == ticket_id), None)


_tix_login = ("logged_in", lambda instance: bool(instance.current_user), "log in first")
_tix_exists = (
    "ticket_exists",
    lambda instance, ticket_id: _ticket(instance, ticket_id) is not None,
    "no ticket with that id",
)
add(
    TIX,
    "create_ticket",
    _tix_login,
    ("priority_range", lambda priority: priority is None or 1 <= priority <= 5, "priority is 1..5"),
    produces={"id": "ticket_id"},
    grounded=["title"],
)
for _tool in ("get_ticket", "close_ticket", "resolve_ticket", "edit_ticket"):
    add(TIX, _tool, _tix_exists, refs={"ticket_id": "ticket_id"})
add(TIX, "get_ticket", produces={"id": "ticket_id"})
add(TIX, "get_user_tickets", _tix_login, produces={"id": "ticket_id"})
add(
    TIX,
    "close_ticket",
    (
        "not_closed",
        lambda instance, ticket_id: (_ticket(instance, ticket_id) or {}).get("status") != "Closed",
        "the ticket is already closed",
    ),
)
add(
    TIX,
    "resolve_ticket",
    (
        "not_resolved",
        lambda instance, ticket_id: (
            (_ticket(instance, ticket_id) or {}).get("status") != "Resolved"
        ),
        "the ticket is already resolved",
    ),
)
add(
    TIX,
    "edit_ticket",
    (
        "known_fields",
        lambda updates: set(updates) <= {"title", "description", "status", "priority"},
        "only title, description, status and priority can change",
    ),
)
add(TIX, "logout", _tix_login)
add(TIX, "ticket_login", grounded=["username", "password"])


# -- TwitterAPI: authentication, tweets that exist and were seen ---------------------------------
TW = "TwitterAPI"
_auth = ("authenticated", lambda instance: bool(instance.authenticated), "authenticate first")
for _tool in (
    "post_tweet",
    "retweet",
    "comment",
    "follow_user",
    "list_all_following",
    "unfollow_user",
):
    add(TW, _tool, _auth)
for _tool in ("retweet", "comment", "mention", "get_tweet", "get_tweet_comments"):
    add(
        TW,
        _tool,
        (
            "tweet_exists",
            lambda instance, tweet_id: tweet_id in instance.tweets,
            "no tweet with that id",
        ),
    )
for _tool in ("retweet", "comment", "mention"):
    add(TW, _tool, refs={"tweet_id": "tweet_id"})
for _tool in ("post_tweet", "get_tweet", "get_user_tweets", "search_tweets"):
    add(TW, _tool, produces={"id": "tweet_id"})
add(TW, "comment", grounded=["comment_content"])


# -- TradingBot: session, market, known symbols and orders ---------------------------------------
TB = "TradingBot"
_tb_auth = ("authenticated", lambda instance: bool(instance.authenticated), "log in first")
for _tool in (
    "place_order",
    "withdraw_funds",
    "get_account_info",
    "fund_account",
    "remove_stock_from_watchlist",
    "get_watchlist",
    "get_order_history",
    "get_transaction_history",
):
    add(TB, _tool, _tb_auth)
add(
    TB,
    "place_order",
    ("symbol_known", lambda instance, symbol: symbol in instance.stocks, "unknown symbol"),
    ("positive", lambda price, amount: price > 0 and amount > 0, "price and amount > 0"),
    (
        "funds",
        lambda instance, order_type, price, amount: (
            order_type.lower() != "buy" or price * amount <= instance.account_info.get("balance", 0)
        ),
        "insufficient funds",
    ),
    grounded=["amount"],
)
add(
    TB,
    "get_stock_info",
    ("symbol_known", lambda instance, symbol: symbol in instance.stocks, "unknown symbol"),
)
for _tool in ("cancel_order", "get_order_details"):
    add(
        TB,
        _tool,
        (
            "order_exists",
            lambda instance, order_id: order_id in instance.orders,
            "no order with that id",
        ),
    )
add(
    TB,
    "cancel_order",
    (
        "not_completed",
        lambda instance, order_id: instance.orders.get(order_id, {}).get("status") != "Completed",
        "a completed order cannot be cancelled",
    ),
)
add(
    TB,
    "withdraw_funds",
    ("market_open", lambda instance: instance.market_status == "Open", "market is closed"),
    (
        "amount_available",
        lambda instance, amount: 0 < amount <= instance.account_info["balance"],
        "amount must be positive and covered",
    ),
)
add(TB, "fund_account", ("positive", lambda amount: amount > 0, "amount must be positive"))
add(
    TB,
    "remove_stock_from_watchlist",
    (
        "on_watchlist",
        lambda instance, symbol: symbol in instance.watch_list,
        "not on the watchlist",
    ),
)
