"""Wrapping tools: functions, async functions, methods, the proxy; schemas; broken definitions."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from pydantic import BaseModel, Field

import toolguard as tg

# -- plain and async functions --------------------------------------------------------------


def test_decorated_function_runs_and_keeps_its_identity(otel):
    guard = otel.guard()

    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    original = inspect.signature(add)
    guarded = guard.tool(add)
    assert guarded(1) == 3
    assert guarded(1, b=5) == 6
    assert guarded(a=1, b=1) == 2
    assert inspect.signature(guarded) == original
    assert guarded.__name__ == "add"
    assert guarded.__doc__ == "Add two numbers."
    assert not inspect.iscoroutinefunction(guarded)
    assert guard.tool_names == ["add"]
    assert guard.get_tool("add").description == "Add two numbers."
    assert [s.name for s in otel.call_spans()] == ["execute_tool add"] * 3


def test_type_hints_coerce_only_when_not_strict(otel):
    lax = otel.guard(strict=False)
    coerced = []

    @lax.tool
    def g(n: int) -> None:
        coerced.append(n)

    g("3")  # pydantic lax mode: "3" is an int
    assert coerced == [3] and type(coerced[0]) is int


def test_type_hints_reject_what_the_json_schema_rejects(otel):
    guard = otel.guard()
    seen = []

    @guard.tool
    def f(n: int, tags: list[str]) -> None:
        seen.append((n, tags))

    f(3, ["a"])
    for bad in ("3", True, 4.0):  # strict by default: the model was shown "integer"
        with pytest.raises(tg.ToolCallRejected, match="schema"):
            f(bad, ["a"])
    assert seen == [(3, ["a"])]
    with pytest.raises(tg.ToolCallRejected) as info:
        f("three", ["a"])
    assert info.value.cause == "schema"
    assert info.value.check == "schema.args"
    assert "n" in info.value.model_message and "three" in info.value.model_message
    with pytest.raises(tg.ToolCallRejected, match="schema"):
        f(1, ["a"], extra=True)
    with pytest.raises(tg.ToolCallRejected, match="schema"):
        f(1)
    with pytest.raises(tg.ToolCallRejected, match="schema"):
        f(1, ["a"], 3)  # too many positional arguments: a schema failure, not a TypeError
    assert len(seen) == 1


def test_async_function(otel):
    guard = otel.guard()

    async def fetch(url: str) -> str:
        await asyncio.sleep(0)
        return url.upper()

    sig = inspect.signature(fetch)
    guarded = guard.tool(fetch)
    assert inspect.iscoroutinefunction(guarded)
    assert inspect.signature(guarded) == sig
    assert asyncio.run(guarded("x")) == "X"

    async def bad() -> None:
        with pytest.raises(tg.ToolCallRejected):
            await guarded(42)  # the rejection surfaces when awaited

    asyncio.run(bad())
    spans = otel.call_spans()
    assert [s.attributes["toolguard.valid"] for s in spans] == [True, False]


def test_async_tool_exception_is_state_consistency(otel):
    guard = otel.guard()

    @guard.tool
    async def boom() -> None:
        raise KeyError("gone")

    with pytest.raises(KeyError):
        asyncio.run(boom())
    assert otel.only_call().attributes["toolguard.cause"] == "state_consistency"


def test_keyword_only_positional_only_and_varargs(otel):
    guard = otel.guard()

    @guard.tool
    def f(a: int, /, b: int, *rest: int, c: int = 0, **extra: int) -> tuple:
        return (a, b, rest, c, extra)

    assert f(1, 2, 3, 4, c=5, d=6) == (1, 2, (3, 4), 5, {"d": 6})
    assert f(1, 2) == (1, 2, (), 0, {})
    assert guard.call("f", {"a": 1, "b": 2}) == (1, 2, (), 0, {})

    @guard.tool
    def g(b: int, *rest: int) -> tuple:
        return (b, rest)

    assert g(2, 3, 4) == (2, (3, 4))
    assert g(b=2) == (2, ())
    assert otel.call_spans()[-1].attributes["toolguard.valid"] is True


# -- methods --------------------------------------------------------------------------------


def test_decorated_method_guards_every_instance(otel):
    guard = otel.guard()

    class Wallet:
        def __init__(self, balance: int) -> None:
            self.balance = balance

        @guard.tool(
            preconditions=[
                tg.Precondition(
                    "enough", lambda instance, amount: instance.balance >= amount, "no funds"
                )
            ]
        )
        def pay(self, amount: int) -> int:
            self.balance -= amount
            return self.balance

    rich, poor = Wallet(100), Wallet(1)
    assert rich.pay(10) == 90
    with pytest.raises(tg.ToolCallRejected) as info:
        poor.pay(10)
    assert info.value.check == "precondition.enough"
    assert poor.balance == 1
    assert list(inspect.signature(rich.pay).parameters) == ["amount"]
    assert list(inspect.signature(Wallet.pay).parameters) == ["self", "amount"]
    # A method decorated in a class body has no instance to dispatch to by name.
    assert "pay" not in guard.tool_names
    # ... but a bound method can be registered for dispatch.
    guard.register(rich.pay)
    assert guard.call("pay", {"amount": 5}) == 85


def test_classmethod_and_staticmethod(otel):
    guard = otel.guard()

    class K:
        factor = 3

        @classmethod
        @guard.tool
        def scale(cls, x: int) -> int:
            return x * cls.factor

        @staticmethod
        @guard.tool
        def double(x: int) -> int:
            return x * 2

    assert K.scale(2) == 6
    assert K().scale(1) == 3
    assert K.double(4) == 8
    assert K().double(5) == 10
    with pytest.raises(tg.ToolCallRejected):
        K.scale("a lot")
    with pytest.raises(tg.ToolCallRejected):
        K.double("a lot")
    assert "double" in guard.tool_names  # a plain function: dispatchable
    assert guard.call("double", {"x": 1}) == 2


# -- the proxy ------------------------------------------------------------------------------


class Shell:
    """An existing API client whose code we do not edit."""

    def __init__(self) -> None:
        self.cwd = "/"
        self.dirs = {"/", "/tmp"}

    def cd(self, path: str) -> str:
        self.cwd = path
        return path

    def ls(self) -> list[str]:
        return sorted(self.dirs)

    def rm(self, path: str) -> None:
        raise PermissionError(path)

    def _private(self) -> str:
        return "private"

    @property
    def prompt(self) -> str:
        return f"{self.cwd}$"


def test_proxy_guards_chosen_methods(otel):
    guard = otel.guard()
    shell = Shell()
    spec = tg.ToolSpec(
        preconditions=[
            tg.Precondition("dir_exists", lambda instance, path: path in instance.dirs, "no dir")
        ]
    )
    proxy = guard.proxy(shell, tools={"cd": spec, "ls": None})
    assert isinstance(proxy, Shell)
    assert proxy.cd("/tmp") == "/tmp"
    assert shell.cwd == "/tmp"
    assert proxy.prompt == "/tmp$"  # everything else passes through
    assert proxy._private() == "private"
    assert proxy.ls() == ["/", "/tmp"]
    with pytest.raises(tg.ToolCallRejected) as info:
        proxy.cd("/nowhere")
    assert info.value.check == "precondition.dir_exists"
    assert shell.cwd == "/tmp"
    with pytest.raises(PermissionError):
        proxy.rm("/")  # not guarded: no span
    assert sorted(guard.tool_names) == ["cd", "ls"]
    assert guard.call("cd", {"path": "/"}) == "/"
    assert shell.cwd == "/"
    names = [s.name for s in otel.call_spans()]
    assert names == ["execute_tool cd", "execute_tool ls", "execute_tool cd", "execute_tool cd"]
    assert inspect.signature(proxy.cd) == inspect.signature(shell.cd)


def test_proxy_default_guards_public_methods(otel):
    guard = otel.guard()
    proxy = guard.proxy(Shell())
    assert set(guard.tool_names) == {"cd", "ls", "rm"}
    with pytest.raises(PermissionError):
        proxy.rm("/")
    assert otel.only_call().attributes["toolguard.cause"] == "state_consistency"


def test_proxy_of_a_new_object_replaces_the_old_one(otel):
    guard = otel.guard()
    first, second = Shell(), Shell()
    guard.proxy(first, tools=["cd"])
    guard.proxy(second, tools=["cd"])
    guard.call("cd", {"path": "/tmp"})
    assert (first.cwd, second.cwd) == ("/", "/tmp")


def test_proxy_unknown_method_fails_at_wrap_time(otel):
    guard = otel.guard()
    with pytest.raises(tg.ToolDefinitionError, match="nope"):
        guard.proxy(Shell(), tools=["cd", "nope"])


# -- schema sources -------------------------------------------------------------------------


class Forecast(BaseModel):
    city: str
    days: int = Field(ge=1, le=7)


def test_schema_from_explicit_pydantic_model(otel):
    guard = otel.guard()

    @guard.tool(args_model=Forecast)
    def forecast(city, days):  # no hints: the model is the schema
        return f"{city}:{days}"

    assert forecast("Oslo", 3) == "Oslo:3"
    with pytest.raises(tg.ToolCallRejected) as info:
        forecast("Oslo", 9)
    assert info.value.check == "schema.args"
    assert "days" in info.value.model_message
    assert "9" in info.value.model_message
    assert guard.call("forecast", {"city": "Rome", "days": 2}) == "Rome:2"


def test_schema_from_json_schema(otel):
    guard = otel.guard()
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
        "required": ["q"],
        "additionalProperties": False,
    }

    def search(**kwargs):
        return kwargs

    guarded = guard.register(search, name="web_search", json_schema=schema)
    assert guard.call("web_search", {"q": "x", "limit": 2}) == {"q": "x", "limit": 2}
    assert guarded(q="y") == {"q": "y"}
    for bad in ({"limit": 2}, {"q": "x", "limit": 0}, {"q": 1}, {"q": "x", "other": 1}):
        rejection = guard.call("web_search", bad)
        assert rejection.cause == "schema", bad
        assert rejection.check == "schema.args"
        assert "web_search" in rejection.model_message


def test_schema_message_shows_the_expected_call(otel):
    guard = otel.guard()

    @guard.tool
    def book(room: str, nights: int = 1) -> None:
        return None

    with pytest.raises(tg.ToolCallRejected) as info:
        book()
    text = info.value.model_message
    assert "room" in text and "missing" in text
    assert "book(room: string, nights?: integer)" in text


class Handle:
    pass


def test_argument_of_an_arbitrary_class(otel):
    guard = otel.guard()

    @guard.tool
    def use(h: Handle, n: int) -> int:
        return n

    assert use(Handle(), 2) == 2
    with pytest.raises(tg.ToolCallRejected):
        use("not a handle", 2)


# -- broken definitions fail at wrap time, naming the tool ----------------------------------


def test_invalid_json_schema_names_the_tool():
    guard = tg.Guard()
    with pytest.raises(tg.ToolDefinitionError, match="'lookup'"):
        guard.register(
            lambda **kw: kw,
            name="lookup",
            json_schema={"type": "object", "properties": {"x": {"type": "nope"}}},
        )


def test_unresolvable_type_hint_names_the_tool():
    guard = tg.Guard()
    with pytest.raises(tg.ToolDefinitionError, match="'ghost'"):

        @guard.tool
        def ghost(x: UndefinedName) -> None:  # type: ignore[name-defined]  # noqa: F821
            return None


def test_args_model_must_be_a_model():
    guard = tg.Guard()
    with pytest.raises(tg.ToolDefinitionError, match="'f'"):
        guard.register(lambda x: x, name="f", args_model=dict)  # type: ignore[arg-type]


def test_args_model_and_json_schema_are_exclusive():
    guard = tg.Guard()
    with pytest.raises(tg.ToolDefinitionError, match="'f'"):
        guard.register(lambda x: x, name="f", args_model=Forecast, json_schema={"type": "object"})


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"refs": {"contactid": "contact_id"}}, "contactid"),
        ({"invalidates": {"nope": "contact_id"}}, "nope"),
        ({"grounded": ["phone_number"]}, "phone_number"),
        ({"preconditions": [tg.Precondition("p", lambda state, contactid: True)]}, "contactid"),
        ({"postconditions": [tg.Postcondition("q", lambda result, cid: True)]}, "cid"),
    ],
)
def test_unknown_argument_names_fail_at_wrap_time(options, fragment):
    guard = tg.Guard()
    with pytest.raises(tg.ToolDefinitionError) as info:

        @guard.tool(**options)
        def remove_contact(contact_id: str) -> None:
            return None

    assert "'remove_contact'" in str(info.value)
    assert fragment in str(info.value)
    assert guard.tool_names == []


def test_unknown_option_and_duplicate_name():
    guard = tg.Guard()
    with pytest.raises(tg.ToolDefinitionError, match="requirez"):
        guard.register(lambda x: x, name="f", requirez={"x": "k"})

    @guard.tool
    def f(x: int) -> int:
        return x

    with pytest.raises(tg.ToolDefinitionError, match="'f'"):
        guard.register(lambda x: x, name="f")
    guard.register(lambda x: x + 1, name="f", replace=True)
    assert guard.call("f", {"x": 1}) == 2


def test_condition_needs_id_and_callable():
    with pytest.raises(tg.ToolDefinitionError):
        tg.Precondition("", lambda: True)
    with pytest.raises(tg.ToolDefinitionError):
        tg.Precondition("p", "not callable")  # type: ignore[arg-type]


def test_definition_error_is_a_toolguard_error():
    assert issubclass(tg.ToolDefinitionError, tg.ToolGuardError)
    assert issubclass(tg.ToolCallRejected, tg.ToolGuardError)


def test_registered_bound_method_gets_its_instance_by_name(otel):
    guard = otel.guard()

    class Wallet:
        def __init__(self, balance: int) -> None:
            self.balance = balance

        def pay(self, amount: int) -> int:
            self.balance -= amount
            return self.balance

    wallet = Wallet(5)
    enough = tg.Precondition(
        "enough", lambda instance, amount: instance.balance >= amount, "no funds"
    )
    pay = guard.register(wallet.pay, preconditions=[enough])
    assert pay(1) == 4
    assert guard.call("pay", {"amount": 1}) == 3  # by name: the predicate sees the wallet
    assert guard.call("pay", {"amount": 10}).check == "precondition.enough"
    assert [s.attributes["toolguard.valid"] for s in otel.call_spans()] == [True, True, False]
