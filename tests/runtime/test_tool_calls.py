"""Raw tool calling through the guard, with the real OpenAI and Anthropic clients.

The clients talk to an ``httpx.MockTransport`` (``httpx2``'s for anthropic 2.x, which is
built on it) that answers each request with the next scripted model turn, in the JSON shape
the API returns; an agent loop like the SDKs' function-calling guides sends the model's tool
calls through the helper and the replies back, so every test also sees what the model
received.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import toolguard as tg
from toolguard.runtime.tool_calls import (
    arun_anthropic_tool_uses,
    arun_openai_response_calls,
    arun_openai_tool_calls,
    run_anthropic_tool_uses,
    run_openai_response_calls,
    run_openai_tool_calls,
)

PHONE = "+1-555-0199"
CONTACT_ID = "id_8923"

# A scripted model turn: the tool calls it emits (call id, tool name, arguments: a mapping,
# or raw text for a malformed call), or its final text.
Call = tuple[str, str, Any]
Turn = list[Call] | str


def _json_args(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args)


# -- the three wire formats --------------------------------------------------------------------
class Chat:
    """OpenAI Chat Completions."""

    name = "chat"
    http: Any = httpx
    run = staticmethod(run_openai_tool_calls)
    arun = staticmethod(arun_openai_tool_calls)

    @staticmethod
    def body(turn: Turn, n: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        if isinstance(turn, str):
            message["content"] = turn
        else:
            message["tool_calls"] = [
                {"id": i, "type": "function", "function": {"name": t, "arguments": _json_args(a)}}
                for i, t, a in turn
            ]
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 1_760_000_000,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "stop" if isinstance(turn, str) else "tool_calls",
                    "logprobs": None,
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    @staticmethod
    def client(transport: httpx.MockTransport, aio: bool = False) -> Any:
        if aio:
            return openai.AsyncOpenAI(
                api_key="sk-test", base_url="http://model.test/v1", max_retries=0,
                http_client=httpx.AsyncClient(transport=transport),
            )  # fmt: skip
        return openai.OpenAI(
            api_key="sk-test", base_url="http://model.test/v1", max_retries=0,
            http_client=httpx.Client(transport=transport),
        )  # fmt: skip

    @staticmethod
    def create(client: Any, history: list[Any]) -> Any:
        return client.chat.completions.create(
            model="gpt-test", messages=history, tools=OPENAI_CHAT_TOOLS
        )

    @staticmethod
    def start(prompt: str) -> list[Any]:
        return [{"role": "user", "content": prompt}]

    @staticmethod
    def extend(history: list[Any], response: Any, replies: list[dict[str, Any]]) -> None:
        history.append(response.choices[0].message)
        history.extend(replies)

    @staticmethod
    def received(body: dict[str, Any]) -> dict[str, tuple[str, bool | None]]:
        return {
            m["tool_call_id"]: (m["content"], None)
            for m in body["messages"]
            if m.get("role") == "tool"
        }


class Responses:
    """OpenAI Responses."""

    name = "responses"
    http: Any = httpx
    run = staticmethod(run_openai_response_calls)
    arun = staticmethod(arun_openai_response_calls)

    @staticmethod
    def body(turn: Turn, n: int) -> dict[str, Any]:
        if isinstance(turn, str):
            output = [{
                "type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": turn, "annotations": []}],
            }]  # fmt: skip
        else:
            output = [
                {"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": t,
                 "arguments": _json_args(a), "status": "completed"}
                for i, t, a in turn
            ]  # fmt: skip
        return {
            "id": f"resp_{n}",
            "object": "response",
            "created_at": 1_760_000_000,
            "status": "completed",
            "model": "gpt-test",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}},
        }  # fmt: skip

    client = Chat.client

    @staticmethod
    def create(client: Any, history: list[Any]) -> Any:
        return client.responses.create(model="gpt-test", input=history, tools=OPENAI_RESP_TOOLS)

    start = Chat.start

    @staticmethod
    def extend(history: list[Any], response: Any, replies: list[dict[str, Any]]) -> None:
        history.extend(response.output)
        history.extend(replies)

    @staticmethod
    def received(body: dict[str, Any]) -> dict[str, tuple[str, bool | None]]:
        return {
            item["call_id"]: (item["output"], None)
            for item in body["input"]
            if item.get("type") == "function_call_output"
        }


class Messages:
    """Anthropic Messages."""

    name = "anthropic"
    http: Any = httpx2  # anthropic 2.x is built on httpx2 and refuses httpx clients
    run = staticmethod(run_anthropic_tool_uses)
    arun = staticmethod(arun_anthropic_tool_uses)

    @staticmethod
    def body(turn: Turn, n: int) -> dict[str, Any]:
        if isinstance(turn, str):
            content: list[dict[str, Any]] = [{"type": "text", "text": turn}]
        else:
            content = [{"type": "text", "text": "Let me do that."}] + [
                {"type": "tool_use", "id": i, "name": t, "input": a} for i, t, a in turn
            ]
        return {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": "end_turn" if isinstance(turn, str) else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }

    @staticmethod
    def client(transport: httpx2.MockTransport, aio: bool = False) -> Any:
        if aio:
            return anthropic.AsyncAnthropic(
                api_key="test", base_url="http://model.test", max_retries=0,
                http_client=httpx2.AsyncClient(transport=transport),
            )  # fmt: skip
        return anthropic.Anthropic(
            api_key="test", base_url="http://model.test", max_retries=0,
            http_client=httpx2.Client(transport=transport),
        )  # fmt: skip

    @staticmethod
    def create(client: Any, history: list[Any]) -> Any:
        return client.messages.create(
            model="claude-test", max_tokens=1024, messages=history, tools=ANTHROPIC_TOOLS
        )

    start = Chat.start

    @staticmethod
    def extend(history: list[Any], response: Any, replies: list[dict[str, Any]]) -> None:
        history.append({"role": "assistant", "content": response.content})
        history.extend(replies)

    @staticmethod
    def received(body: dict[str, Any]) -> dict[str, tuple[str, bool | None]]:
        out = {}
        for message in body["messages"]:
            if message["role"] == "user" and isinstance(message["content"], list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        out[block["tool_use_id"]] = (block["content"], block.get("is_error"))
        return out


APIS = [Chat, Responses, Messages]
api_param = pytest.mark.parametrize("api", APIS, ids=[a.name for a in APIS])

_SCHEMAS = {
    "search_contact": {"type": "object", "properties": {"phone": {"type": "string"}},
                       "required": ["phone"]},
    "remove_contact": {"type": "object", "properties": {"contact_id": {"type": "string"}},
                       "required": ["contact_id"]},
}  # fmt: skip
OPENAI_CHAT_TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": s}} for n, s in _SCHEMAS.items()
]
OPENAI_RESP_TOOLS = [{"type": "function", "name": n, "parameters": s} for n, s in _SCHEMAS.items()]
ANTHROPIC_TOOLS = [{"name": n, "input_schema": s} for n, s in _SCHEMAS.items()]


# -- the scripted model and the agent loop -------------------------------------------------------
class ScriptedModel:
    """Answers each request with the next scripted turn; keeps every request body."""

    def __init__(self, api: Any, script: list[Turn]) -> None:
        self.api, self.script, self.requests = api, list(script), []

    def __call__(self, request: Any) -> Any:
        self.requests.append(json.loads(request.content))
        turn = self.script.pop(0)
        return self.api.http.Response(200, json=self.api.body(turn, len(self.requests)))

    def received(self, request: int) -> dict[str, tuple[str, bool | None]]:
        """The tool results the model read in request ``request`` (counted from 0)."""
        return self.api.received(self.requests[request])


def agent(api: Any, guard: tg.Guard, script: list[Turn], prompt: str = "go") -> ScriptedModel:
    model = ScriptedModel(api, script)
    client = api.client(api.http.MockTransport(model))
    history = api.start(prompt)
    for _ in range(len(script)):
        response = api.create(client, history)
        replies = api.run(guard, response)
        if not replies:  # no tool call: the model answered
            break
        api.extend(history, response, replies)
    assert model.script == []
    return model


async def aagent(api: Any, guard: tg.Guard, script: list[Turn]) -> ScriptedModel:
    model = ScriptedModel(api, script)
    client = api.client(api.http.MockTransport(model), aio=True)
    history = api.start("go")
    for _ in range(len(script)):
        response = await api.create(client, history)
        replies = await api.arun(guard, response)
        if not replies:
            break
        api.extend(history, response, replies)
    assert model.script == []
    return model


def contacts_guard(provider: TracerProvider, mode: str = "block") -> tuple[dict[str, Any], Any]:
    contacts = {CONTACT_ID: {"id": CONTACT_ID, "name": "Alex", "phone": PHONE}}
    guard = tg.Guard(state=contacts, mode=mode, tracer_provider=provider)  # type: ignore[arg-type]

    @guard.tool(produces={"id": "contact_id"})
    def search_contact(phone: str) -> list[dict[str, str]]:
        return [c for c in contacts.values() if c["phone"] == phone]

    @guard.tool(
        refs={"contact_id": "contact_id"},
        invalidates={"contact_id": "contact_id"},
        preconditions=[tg.Precondition("contact_exists",
                                       lambda state, contact_id: contact_id in state,
                                       "the contact must exist")],
    )  # fmt: skip
    def remove_contact(contact_id: str) -> dict[str, str]:
        del contacts[contact_id]
        return {"removed": contact_id}

    return contacts, guard


def steps_by_call_id(traj: tg.Trajectory) -> dict[str | None, int | None]:
    return {v.call_id: v.step for v in traj.verdicts}


# -- the paper's scenario ------------------------------------------------------------------------
PAPER = [
    [("c1", "remove_contact", {"contact_id": PHONE})],  # a phone number where an id belongs
    [("c2", "search_contact", {"phone": PHONE})],
    [("c3", "remove_contact", {"contact_id": CONTACT_ID})],
    "Done: Alex is removed.",
]


@api_param
def test_paper_scenario_blocked_repaired_and_reported(api: Any, tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(str(path))))
    contacts, guard = contacts_guard(provider)
    labels = {"model": "scripted", "api": api.name}
    with guard.trajectory("paper", labels=labels, user_input=f"Remove {PHONE}") as traj:
        model = agent(api, guard, PAPER, prompt=f"Remove the contact {PHONE}")
        traj.success = True

    assert contacts == {}
    assert (traj.length, traj.first_error_depth, traj.first_error_cause) == (3, 1, "dependency")
    first = traj.verdicts[0]
    assert (first.call_id, first.decision, first.cause) == ("c1", "blocked", "dependency")
    # The guard's message came back as c1's tool result, and the model went on from it.
    text, is_error = model.received(1)["c1"]
    assert text.startswith("Error: the call to `remove_contact` was rejected (dependency).")
    assert "contact_id" in text and PHONE in text
    assert is_error is (True if api is Messages else None)
    found, _ = model.received(2)["c2"]
    assert json.loads(found)[0]["id"] == CONTACT_ID
    assert json.loads(model.received(3)["c3"][0]) == {"removed": CONTACT_ID}
    provider.shutdown()

    records, stats = tg.read_records([str(path)])
    assert stats.spans == 4  # three calls and the summary
    [record] = records
    assert (record.trajectory_id, record.length, record.fed) == ("paper", 3, 1)
    assert (record.first_error_cause, record.success) == ("dependency", True)
    assert not record.incomplete and not record.disagreements
    [group] = tg.build_report(records, by=["api"])["groups"]
    assert group["labels"] == {"api": api.name}
    assert (group["n"], group["ter"], group["mean_fed"], group["rr"]) == (1, 0.0, 1.0, 1.0)
    assert group["causes"]["dependency"] == 1


# -- one turn, three parallel calls ----------------------------------------------------------
@api_param
def test_parallel_calls_take_steps_in_emission_order(api: Any, otel: Any) -> None:
    guard = otel.guard()
    finished: list[str] = []
    script: list[Turn] = [
        [("call_a", "fetch", {"key": "a"}), ("call_b", "fetch", {"key": "b"}),
         ("call_c", "fetch", {"key": "c"})],
        "All three fetched.",
    ]  # fmt: skip

    async def main() -> ScriptedModel:
        # Each call holds until the one emitted after it has finished: c, then b, then a.
        done = {k: asyncio.Event() for k in "abc"}
        after = {"a": "b", "b": "c"}

        @guard.tool
        async def fetch(key: str) -> dict[str, str]:
            if key in after:
                await done[after[key]].wait()
            finished.append(key)
            done[key].set()
            return {"key": key}

        async with asyncio.timeout(30):  # a runner that ran them one by one would hang here
            with guard.trajectory("parallel") as traj:
                model = await aagent(api, guard, script)
        assert steps_by_call_id(traj) == {"call_a": 1, "call_b": 2, "call_c": 3}
        assert traj.length == 3 and traj.first_error_depth == 4
        return model

    model = asyncio.run(main())
    assert finished == ["c", "b", "a"]
    spans = {s.attributes["gen_ai.tool.call.id"]: s for s in otel.call_spans("parallel")}
    assert {i: s.attributes["toolguard.step"] for i, s in spans.items()} == {
        "call_a": 1, "call_b": 2, "call_c": 3}  # fmt: skip
    # The replies pair with their calls and keep the model's order.
    received = model.received(1)
    assert list(received) == ["call_a", "call_b", "call_c"]
    assert [json.loads(text)["key"] for text, _ in received.values()] == ["a", "b", "c"]


@api_param
def test_sync_runner_numbers_a_turn_in_order(api: Any, otel: Any) -> None:
    _, guard = contacts_guard(otel.provider)
    turn = [("s1", "search_contact", {"phone": PHONE}),
            ("s2", "remove_contact", {"contact_id": "nope"}),
            ("s3", "search_contact", {"phone": "+1-555-0000"})]  # fmt: skip
    with guard.trajectory("turn") as traj:
        agent(api, guard, [turn, "ok"])
    assert steps_by_call_id(traj) == {"s1": 1, "s2": 2, "s3": 3}
    assert (traj.length, traj.first_error_depth) == (3, 2)


# -- a tool that raises, log mode, an unknown tool -------------------------------------------
@api_param
def test_a_tool_that_raises_is_an_error_result_not_a_crash(api: Any, otel: Any) -> None:
    guard = otel.guard()

    @guard.tool
    def send_sms(phone: str, text: str) -> str:
        raise ConnectionError("the SMS gateway is down")

    script: list[Turn] = [[("t1", "send_sms", {"phone": PHONE, "text": "hi"})], "Sorry."]
    with guard.trajectory("raises") as traj:
        model = agent(api, guard, script)
    text, is_error = model.received(1)["t1"]
    assert text.startswith("Error: the call to `send_sms` was rejected (state_consistency).")
    assert is_error is (True if api is Messages else None)
    [verdict] = traj.verdicts
    assert (verdict.decision, verdict.cause, verdict.check) == (
        "allowed", "state_consistency", "state.exception")  # fmt: skip
    assert (traj.length, traj.first_error_depth) == (1, 1)


@api_param
def test_an_error_result_is_an_error_result_on_the_wire(api: Any, otel: Any) -> None:
    """Issue 23, defect 6: a tool that answers ``{"error": ...}`` is the environment's
    rejection (state_consistency), and Anthropic's ``tool_result`` says so, as it does for a
    tool that raised. A tool_result of an ordinary result carries no ``is_error``."""
    guard = otel.guard()

    @guard.tool
    def send_sms(phone: str, text: str) -> dict[str, str]:
        return {"error": "the SMS gateway is down"} if text == "hi" else {"sent": text}

    script: list[Turn] = [
        [("e1", "send_sms", {"phone": PHONE, "text": "hi"})],
        [("e2", "send_sms", {"phone": PHONE, "text": "hello"})],
        "Sent.",
    ]
    with guard.trajectory("error-result") as traj:
        model = agent(api, guard, script)
    text, is_error = model.received(1)["e1"]
    assert json.loads(text) == {"error": "the SMS gateway is down"}
    assert is_error is (True if api is Messages else None)
    assert model.received(2)["e2"][1] is None
    first, second = traj.verdicts
    assert (first.decision, first.cause, first.check) == (
        "allowed", "state_consistency", "state.error_result")  # fmt: skip
    assert second.valid


@api_param
def test_log_mode_runs_the_call_and_returns_its_result(api: Any, otel: Any) -> None:
    contacts, guard = contacts_guard(otel.provider, mode="log")
    # The id was never produced by a search: invalid (dependency), yet it runs in log mode.
    script: list[Turn] = [[("l1", "remove_contact", {"contact_id": CONTACT_ID})], "Removed."]
    with guard.trajectory("log") as traj:
        model = agent(api, guard, script)
    assert contacts == {}
    text, is_error = model.received(1)["l1"]
    assert json.loads(text) == {"removed": CONTACT_ID}
    assert not is_error
    [verdict] = traj.verdicts
    assert (verdict.decision, verdict.cause, verdict.valid) == ("logged", "dependency", False)
    assert (traj.length, traj.first_error_depth) == (1, 1)
    [span] = otel.call_spans("log")
    assert span.attributes["toolguard.decision"] == "logged"


@api_param
def test_an_unknown_tool_is_rejected_and_counted_in_t(api: Any, otel: Any) -> None:
    _, guard = contacts_guard(otel.provider)
    script: list[Turn] = [
        [("u1", "delete_contact", {"contact_id": CONTACT_ID})],
        [("u2", "search_contact", {"phone": PHONE})],
        "Found Alex.",
    ]
    with guard.trajectory("unknown") as traj:
        model = agent(api, guard, script)
    text, is_error = model.received(1)["u1"]
    assert "There is no tool named `delete_contact`" in text and "remove_contact" in text
    assert is_error is (True if api is Messages else None)
    assert [(v.call_id, v.cause, v.check) for v in traj.verdicts] == [
        ("u1", "schema", "schema.tool"), ("u2", None, None)]  # fmt: skip
    assert (traj.length, traj.first_error_depth) == (2, 1)
    assert [s.attributes["toolguard.step"] for s in otel.call_spans("unknown")] == [1, 2]


@pytest.mark.parametrize("api", [Chat, Responses], ids=["chat", "responses"])
def test_malformed_json_arguments_are_a_schema_rejection(api: Any, otel: Any) -> None:
    _, guard = contacts_guard(otel.provider)
    script: list[Turn] = [[("m1", "search_contact", '{"phone": ')], "Giving up."]
    with guard.trajectory("malformed") as traj:
        model = agent(api, guard, script)
    assert "not valid JSON" in model.received(1)["m1"][0]
    assert [(v.cause, v.check) for v in traj.verdicts] == [("schema", "schema.json")]


# -- the helpers themselves: JSON shapes, no trajectory, misuse ------------------------------
@api_param
def test_the_json_shapes_work_like_the_sdk_objects(api: Any, otel: Any) -> None:
    _, guard = contacts_guard(otel.provider)
    body = api.body([("j1", "search_contact", {"phone": PHONE})], 1)
    with guard.trajectory("json") as traj:
        replies = api.run(guard, body)
        final = api.run(guard, api.body("done", 2))
    assert final == []
    assert traj.length == 1 and traj.verdicts[0].call_id == "j1"
    if api is Messages:
        [reply] = replies
        [block] = reply["content"]
        assert (reply["role"], block["type"], block["tool_use_id"]) == ("user", "tool_result", "j1")
        assert "is_error" not in block
        text = block["content"]
    elif api is Chat:
        [reply] = replies
        assert (reply["role"], reply["tool_call_id"]) == ("tool", "j1")
        text = reply["content"]
        # The message alone, as JSON, gives the same replies.
        assert api.run(guard, body["choices"][0]["message"]) == replies
    else:
        [reply] = replies
        assert (reply["type"], reply["call_id"]) == ("function_call_output", "j1")
        text = reply["output"]
    assert json.loads(text)[0]["id"] == CONTACT_ID


def test_results_become_text_and_serialize_replaces_json(otel: Any) -> None:
    guard = otel.guard()
    results: dict[str, Any] = {"plain": "as is", "none": None, "tuple": (1, 2), "odd": {(1,): 2}}

    @guard.tool
    def value(which: str) -> Any:
        return results[which]

    calls = [(w, "value", {"which": w}) for w in results]
    replies = run_openai_tool_calls(guard, Chat.body(calls, 1))  # outside any trajectory
    assert [r["content"] for r in replies] == ["as is", "null", "[1, 2]", "{(1,): 2}"]
    custom: Callable[[Any], str] = lambda r: f"<{r}>"  # noqa: E731
    replies = run_openai_tool_calls(guard, Chat.body(calls[:1], 1), serialize=custom)
    assert replies[0]["content"] == "<as is>"


def test_misuse_raises_before_any_call_runs(otel: Any) -> None:
    guard = otel.guard()

    @guard.tool
    async def slow() -> str:
        return "never"

    guard.declare("external", json_schema={"type": "object", "properties": {}})
    with guard.trajectory("misuse") as traj:
        with pytest.raises(tg.UsageError, match="async"):
            run_openai_tool_calls(guard, Chat.body([("a1", "slow", {})], 1))
        with pytest.raises(tg.UsageError, match="declared by contract alone"):
            run_anthropic_tool_uses(guard, Messages.body([("a2", "external", {})], 1))
        for wrong in ({"output": []}, Messages.body("hi", 1), Responses.body("hi", 1)):
            with pytest.raises(tg.UsageError, match="a chat completion"):
                run_openai_tool_calls(guard, wrong)
        with pytest.raises(tg.UsageError, match="a Response"):
            run_openai_response_calls(guard, object())
        with pytest.raises(tg.UsageError, match="a Message"):
            run_anthropic_tool_uses(guard, 42)
    assert traj.length == 0
    # The async twin runs it.
    replies = asyncio.run(arun_openai_tool_calls(guard, Chat.body([("a3", "slow", {})], 1)))
    assert replies[0]["content"] == "never"


def test_a_result_json_cannot_write_still_becomes_a_reply(otel: Any) -> None:
    """The guard ran these calls fine: their replies must go back to the model too."""
    guard = otel.guard()

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    results: dict[str, Any] = {"deep": deep, "unprintable": {"x": Unprintable()}}

    @guard.tool
    def value(which: str) -> Any:
        return results[which]

    calls = [(w, "value", {"which": w}) for w in results]
    with guard.trajectory("unwritable"):
        replies = run_openai_tool_calls(guard, Chat.body(calls, 1))
        blocks = run_anthropic_tool_uses(guard, Messages.body(calls, 1))
    assert [r["tool_call_id"] for r in replies] == ["deep", "unprintable"]
    assert json.loads(replies[1]["content"]) == {
        "x": "<a Unprintable result that cannot be written as text>"
    }
    assert [b["tool_use_id"] for b in blocks[0]["content"]] == ["deep", "unprintable"]


def test_a_turn_cancelled_before_its_calls_start_ends_them_cancelled(otel: Any) -> None:
    """Every reserved step gets its verdict and span: cancelled, not lost."""
    guard = otel.guard()

    @guard.tool
    async def slow(n: int) -> int:
        await asyncio.sleep(3600)
        return n

    async def cancel_at_once() -> None:
        body = Chat.body([("c1", "slow", {"n": 1}), ("c2", "slow", {"n": 2})], 1)
        task = asyncio.ensure_future(arun_openai_tool_calls(guard, body))
        await asyncio.sleep(0)  # the turn's steps are reserved; no call has started
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with guard.trajectory("cancelled-turn") as traj:
        asyncio.run(cancel_at_once())
    assert [(v.step, v.call_id, v.decision) for v in traj.verdicts] == [
        (1, "c1", "cancelled"),
        (2, "c2", "cancelled"),
    ]
    assert sorted(s.attributes["toolguard.step"] for s in otel.call_spans()) == [1, 2]


def test_a_sync_turn_interrupted_ends_its_later_calls_cancelled(otel: Any) -> None:
    guard = otel.guard()

    @guard.tool
    def stop(n: int) -> int:
        raise KeyboardInterrupt

    @guard.tool
    def never(n: int) -> int:
        return n

    body = Chat.body([("s1", "stop", {"n": 1}), ("s2", "never", {"n": 2}), ("s3", "x", {})], 1)
    with guard.trajectory("interrupted") as traj, pytest.raises(KeyboardInterrupt):
        run_openai_tool_calls(guard, body)
    # the unknown tool "x" is blocked (its checks said so), the others cancelled
    assert [(v.step, v.decision) for v in traj.verdicts] == [
        (1, "cancelled"),
        (2, "cancelled"),
        (3, "blocked"),
    ]
    assert traj.length == 3


def test_acall_batch_takes_the_steps_reserved_for_its_call_ids(otel: Any) -> None:
    guard = otel.guard()

    @guard.tool
    async def echo(n: int) -> int:
        return n

    with guard.trajectory("reserved-batch") as traj:
        traj.reserve(["d2", "d1"])  # the model emitted d2 first
        calls = [("echo", {"n": 1}, "d1"), ("echo", {"n": 2}, "d2"), ("echo", {"n": 3})]
        assert asyncio.run(guard.acall_batch(calls)) == [1, 2, 3]
    assert [(v.call_id, v.step) for v in sorted(traj.verdicts, key=lambda v: v.step)] == [
        ("d2", 1),
        ("d1", 2),
        (None, 3),
    ]
    assert traj.length == 3
