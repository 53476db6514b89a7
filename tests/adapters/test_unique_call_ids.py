"""Call ids stay unique in a conversation whatever the server sends, streamed or whole, over HTTP.

A server may repeat an id: Ollama's and Gemini's made-up ids (derived from the
answer) for the same call made twice, an OpenAI-compatible server numbering
each response's calls from ``call_0``, a model repeating its 9-character
Mistral-style id. The model renames the repeat, so results, approvals and the
conversation sent to another provider each name one call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from fake_openai import Calls, FakeChat, Text
from scripted_http import Recorded, Reply, ScriptedServer, sse

import toolfold
from toolfold import Agent, RunError, Tool, UsageError
from toolfold.adapters._call_ids import fresh_id, unique_calls
from toolfold.adapters.openai_chat import mistral_id
from toolfold.runtime import (
    Message,
    ModelRequest,
    ModelResponse,
    RunState,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from toolfold.runtime.core._stream import StreamState, finish_stream, fold_stream

SAME_CALL = {"x": 1}


def _counter(approval: bool = False) -> tuple[Tool[..., Any], list[dict[str, Any]]]:
    """A tool ``t`` answering ``r1``, ``r2``... in the order it runs, and the arguments it got."""
    ran: list[dict[str, Any]] = []

    def run(arguments: dict[str, Any]) -> str:
        ran.append(arguments)
        return f"r{len(ran)}"

    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}}
    made = Tool(
        name="t",
        description="Count.",
        parameters=parameters,
        function=run,
        requires_approval=approval,
    )
    return made, ran


def _calls(state: RunState) -> list[ToolCallPart]:
    return [p for m in state.messages for p in m.parts if isinstance(p, ToolCallPart)]


def _results(state: RunState) -> list[tuple[str, str]]:
    return [
        (p.call_id, p.content)
        for m in state.messages
        for p in m.parts
        if isinstance(p, ToolResultPart)
    ]


def _run(model: Any, tool: Tool[..., Any], streamed: bool) -> RunState:
    agent = Agent(model=model, tools=[tool])
    if not streamed:
        return agent.run("go").state
    run = agent.stream("go")
    for _ in run:
        pass
    return run.response.state


def _ollama(bodies: list[dict[str, Any]]) -> Callable[[Recorded], Reply]:
    """An ``/api/chat`` that makes the same id-less call twice (same timestamp), then answers."""
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "t", "arguments": SAME_CALL}}],
    }
    script = [call, call, {"role": "assistant", "content": "done"}]

    def answer(request: Recorded) -> Reply:
        body = request.json()
        bodies.append(body)
        final = {
            "model": "q",
            "created_at": "2026-01-01T00:00:00Z",
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 1,
            "eval_count": 1,
        }
        message = script[min(len(bodies), len(script)) - 1]
        if body.get("stream") is False:
            return Reply(json={**final, "message": message})
        lines = [
            {"model": "q", "created_at": final["created_at"], "message": message, "done": False},
            {**final, "message": {"role": "assistant", "content": ""}},
        ]
        return Reply(
            headers={"content-type": "application/x-ndjson"},
            chunks=[(json.dumps(line) + "\n").encode() for line in lines],
        )

    return answer


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_ollama_same_call_in_two_steps_gets_two_ids_each_with_its_result(
    streamed: bool, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Two identical id-less Ollama calls get different ids; each result answers its own call."""
    bodies: list[dict[str, Any]] = []
    http_server.handler = _ollama(bodies)
    model = toolfold.model("ollama:q", base_url=http_server.url, retry=0)
    opened.append(model)
    tool, ran = _counter()
    state = _run(model, tool, streamed)
    ids = [c.id for c in _calls(state)]
    assert ran == [SAME_CALL, SAME_CALL]
    assert len(set(ids)) == 2
    assert ids[1] == f"{ids[0]}_2"
    assert _results(state) == [(ids[0], "r1"), (ids[1], "r2")]
    sent = bodies[-1]["messages"]
    call_ids = [c["id"] for m in sent if m["role"] == "assistant" for c in m.get("tool_calls", ())]
    assert call_ids == ids
    assert [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"] == [
        (ids[0], "r1"),
        (ids[1], "r2"),
    ]


def test_ollama_streamed_and_whole_runs_give_the_same_ids(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A streamed run and a whole one over the same answers give the same call ids."""
    made: list[list[str]] = []
    for streamed in (False, True):
        bodies: list[dict[str, Any]] = []
        http_server.handler = _ollama(bodies)
        model = toolfold.model("ollama:q", base_url=http_server.url, retry=0)
        opened.append(model)
        made.append([c.id for c in _calls(_run(model, _counter()[0], streamed))])
    assert made[0] == made[1]
    assert len(set(made[0])) == 2


def test_the_conversation_switched_to_anthropic_or_responses_has_unique_ids(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A conversation with a repeated Ollama call goes to Anthropic and Responses with distinct ids, paired."""
    http_server.handler = _ollama([])
    model = toolfold.model("ollama:q", base_url=http_server.url, retry=0)
    opened.append(model)
    state = _run(model, _counter()[0], streamed=False)
    request = ModelRequest((*state.messages[:-1], Message.user("again?")))
    anthropic = toolfold.model("anthropic:claude-sonnet-4-5", api_key="sk-ant-" + "k" * 20)
    responses = toolfold.model("openai-responses:gpt-4o", api_key="sk-" + "k" * 20)
    opened += [anthropic, responses]
    blocks = [b for m in anthropic.body(request)["messages"] for b in m["content"]]
    blocks = [b for b in blocks if isinstance(b, dict)]
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    answers = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    assert len(set(uses)) == 2
    assert answers == uses
    items = responses.body(request)["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [
        (i["call_id"], i["output"]) for i in items if i.get("type") == "function_call_output"
    ]
    assert len(set(calls)) == 2
    assert outputs == [(calls[0], "r1"), (calls[1], "r2")]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_server_reusing_call_0_every_step_gets_unique_ids(
    streamed: bool, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """An OpenAI-compatible server that calls every step's call ``call_0``: the repeats are renamed."""
    script = (Calls((("t", SAME_CALL),)), Calls((("t", {"x": 2}),)), Text("done"))
    fake = FakeChat(script, ids=("call_0", "call_0"))
    http_server.handler = fake
    model = toolfold.model(
        "openai-compatible:m", base_url=f"{http_server.url}/v1", api_key="k" * 20
    )
    opened.append(model)
    tool, ran = _counter()
    state = _run(model, tool, streamed)
    assert [c.id for c in _calls(state)] == ["call_0", "call_0_2"]
    assert _results(state) == [("call_0", "r1"), ("call_0_2", "r2")]
    assert ran == [SAME_CALL, {"x": 2}]
    assert fake.problems == []
    sent = fake.bodies[-1]["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"] == [
        ("call_0", "r1"),
        ("call_0_2", "r2"),
    ]


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_repeated_id_in_one_response_is_renamed_not_refused(
    streamed: bool, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Two parallel calls both named ``call_0`` run as ``call_0`` and ``call_0_2``."""
    script = (Calls((("t", {"x": 1}), ("t", {"x": 2}))), Text("done"))
    http_server.handler = FakeChat(script, ids=("call_0", "call_0"))
    model = toolfold.model(
        "openai-compatible:m", base_url=f"{http_server.url}/v1", api_key="k" * 20
    )
    opened.append(model)
    tool, ran = _counter()
    state = _run(model, tool, streamed)
    assert [c.id for c in _calls(state)] == ["call_0", "call_0_2"]
    assert len(ran) == 2
    by_call = dict(_results(state))
    assert {by_call["call_0"], by_call["call_0_2"]} == {"r1", "r2"}


@pytest.mark.parametrize("provider", ["mistral", "openai-compatible"])
def test_a_repeated_mistral_style_id_stays_nine_alphanumerics(
    provider: str, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A repeated 9-character id is renamed to another 9 letters and digits, sent back as such."""
    script = (Calls((("t", SAME_CALL),)), Calls((("t", SAME_CALL),)), Text("done"))
    fake = FakeChat(script, ids=("rHU0eZiMa", "rHU0eZiMa"))
    http_server.handler = fake
    model = toolfold.model(f"{provider}:m", base_url=f"{http_server.url}/v1", api_key="k" * 20)
    opened.append(model)
    state = _run(model, _counter()[0], streamed=False)
    ids = [c.id for c in _calls(state)]
    assert ids[0] == "rHU0eZiMa"
    assert ids[1] != ids[0]
    assert re.fullmatch(r"[A-Za-z0-9]{9}", ids[1])
    sent = fake.bodies[-1]["messages"]
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_mistral_repeating_the_id_it_was_sent_for_another_call_gets_a_new_one(
    streamed: bool, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Mistral saw ``call_0`` as its 9-character hash; saying that hash again is renamed."""
    seen = mistral_id("call_0")
    fake = FakeChat((Calls((("t", {"x": 2}),)),), ids=(seen,))
    http_server.handler = fake
    model = toolfold.model("mistral:m", base_url=f"{http_server.url}/v1", api_key="k" * 20)
    opened.append(model)
    earlier = (
        Message("user", (TextPart("go"),)),
        Message("assistant", (ToolCallPart("call_0", "t", '{"x": 1}', {"x": 1}),)),
        Message("tool", (ToolResultPart("call_0", "t", "r1"),)),
    )
    request = ModelRequest(messages=earlier)
    if streamed:
        folded = StreamState()
        for event in model.stream_sync(request):
            folded = fold_stream(folded, event)
        message = finish_stream(folded, lambda index: f"made_{index}").message
    else:
        message = model.request_sync(request).message
    (call,) = message.tool_calls
    assert call.id != seen
    assert re.fullmatch(r"[A-Za-z0-9]{9}", call.id)
    after = (*earlier, message, Message("tool", (ToolResultPart(call.id, "t", "r2"),)))
    sent = model.body(ModelRequest(messages=after))["messages"]
    ids = [c["id"] for m in sent for c in m.get("tool_calls") or ()]
    assert len(set(ids)) == 2
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


def _gemini(bodies: list[dict[str, Any]]) -> Callable[[Recorded], Reply]:
    """A Gemini without ``responseId`` that makes the same id-less call twice, then answers."""
    call = [{"functionCall": {"name": "t", "args": SAME_CALL}}]
    script = [call, call, [{"text": "done"}]]

    def answer(request: Recorded) -> Reply:
        bodies.append(request.json())
        parts = script[min(len(bodies), len(script)) - 1]
        body = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "index": 0, "finishReason": "STOP"}
            ],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1},
            "modelVersion": "gemini-fake-001",
        }
        if ":streamGenerateContent" not in request.path:
            return Reply(json=body)
        return Reply(headers={"content-type": "text/event-stream"}, chunks=sse(body))

    return answer


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_gemini_without_response_id_same_call_twice_gets_two_ids(
    streamed: bool, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Gemini's made-up ids (no responseId) for one call made twice differ; each result answers its call."""
    bodies: list[dict[str, Any]] = []
    http_server.handler = _gemini(bodies)
    model = toolfold.model(
        "gemini:gemini-2.5-flash", base_url=http_server.url, api_key="AIza" + "k" * 20
    )
    opened.append(model)
    state = _run(model, _counter()[0], streamed)
    ids = [c.id for c in _calls(state)]
    assert len(set(ids)) == 2
    assert _results(state) == [(ids[0], "r1"), (ids[1], "r2")]
    answers = [
        (p["functionResponse"]["id"], p["functionResponse"]["response"])
        for c in bodies[-1]["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert answers == [(ids[0], {"output": "r1"}), (ids[1], {"output": "r2"})]


def test_an_approval_for_the_first_call_does_not_approve_the_repeat(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """With ``call_0`` every step, approving step 1's call by id cannot approve step 2's call."""
    script = (Calls((("t", SAME_CALL),)), Calls((("t", {"x": 666}),)), Text("done"))
    http_server.handler = FakeChat(script, ids=("call_0", "call_0"))
    model = toolfold.model(
        "openai-compatible:m", base_url=f"{http_server.url}/v1", api_key="k" * 20
    )
    opened.append(model)
    tool, ran = _counter(approval=True)
    agent = Agent(model=model, tools=[tool])
    first = agent.run("go")
    given = {"call_0": True}
    second = agent.resume(first.state, approvals=given)
    assert [c.id for c in second.state.pending_approvals] == ["call_0_2"]
    with pytest.raises((UsageError, RunError), match="call_0"):
        agent.resume(second.state, approvals=given)
    assert ran == [SAME_CALL]


def test_renaming_is_deterministic_and_leaves_fresh_ids_alone() -> None:
    """The same conversation and answer give the same renamed ids; ids not taken pass unchanged."""
    earlier = Message("assistant", (ToolCallPart("call_0", "t"),))
    request = ModelRequest((Message.user("go"), earlier))
    answer = ModelResponse(
        Message("assistant", (ToolCallPart("call_0", "t"), ToolCallPart("call_1", "t")))
    )
    once, twice = unique_calls(request, answer), unique_calls(request, answer)
    assert [c.id for c in once.tool_calls] == ["call_0_2", "call_1"]
    assert once == twice
    fresh = ModelResponse(Message("assistant", (ToolCallPart("call_9", "t"),)))
    assert unique_calls(request, fresh) is fresh
    assert fresh_id("call_0", {"call_0", "call_0_2"}) == "call_0_3"


def test_an_id_holding_a_lone_surrogate_still_maps_to_nine_alphanumerics() -> None:
    """A lone surrogate in an id (a state a custom model wrote) hashes, never raises; other ids
    map to what they always did, so a stored run's Mistral ids stay the same."""
    assert re.fullmatch("[A-Za-z0-9]{9}", mistral_id("call_\ud800"))
    assert mistral_id("call_\ud800") != mistral_id("call_\ufffd")
    assert mistral_id("call_été😀") == "1TmKPuqIC"


def _anonymous_chat(bodies: list[dict[str, Any]]) -> Callable[[Recorded], Reply]:
    """A chat server that sends no response id and calls with ``id: ""`` (the same call twice)."""
    call = {"index": 0, "id": "", "type": "function"}
    call["function"] = {"name": "t", "arguments": json.dumps(SAME_CALL)}
    script: list[dict[str, Any]] = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "assistant", "content": "done"},
    ]

    def answer(request: Recorded) -> Reply:
        body = request.json()
        bodies.append(body)
        message = script[min(len(bodies), len(script)) - 1]
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        head = {"model": "m", "created": 1700000000}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return Reply(json={**head, "choices": [choice]})
        delta = {"index": 0, "delta": message, "finish_reason": None}
        end = {"index": 0, "delta": {}, "finish_reason": finish}
        chunks = sse({**head, "choices": [delta]}, {**head, "choices": [end]}, "[DONE]")
        return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)

    return answer


def test_chat_calls_without_any_id_get_the_same_ids_streamed_or_whole(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """No response id and ``id: ""``: a streamed run and a whole one make the same, unique, ids."""
    made: list[list[str]] = []
    for streamed in (False, True):
        bodies: list[dict[str, Any]] = []
        http_server.handler = _anonymous_chat(bodies)
        model = toolfold.model(
            "openai-compatible:m", base_url=f"{http_server.url}/v1", api_key="k" * 20
        )
        opened.append(model)
        state = _run(model, _counter()[0], streamed)
        made.append([c.id for c in _calls(state)])
        assert _results(state) == [(made[-1][0], "r1"), (made[-1][1], "r2")]
    assert made[0] == made[1]
    assert len(set(made[0])) == 2


def _anonymous_responses(bodies: list[dict[str, Any]]) -> Callable[[Recorded], Reply]:
    """A Responses server whose calls carry neither ``call_id`` nor ``id`` (two per step, twice)."""

    def answer(request: Recorded) -> Reply:
        body = request.json()
        bodies.append(body)
        output: list[dict[str, Any]] = [
            {"type": "function_call", "name": "t", "arguments": json.dumps({"x": x})}
            for x in (1, 2)
        ]
        if len(bodies) > 2:
            text = [{"type": "output_text", "text": "done"}]
            output = [{"type": "message", "role": "assistant", "content": text}]
        response = {"object": "response", "status": "completed", "model": "m", "output": output}
        if not body.get("stream"):
            return Reply(json=response)
        started = {**response, "status": "in_progress", "output": []}
        events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
        for index, item in enumerate(output):
            for kind in ("added", "done"):
                event = {"type": f"response.output_item.{kind}", "output_index": index}
                events.append({**event, "item": item})
        events.append({"type": "response.completed", "response": response})
        chunks = [chunk for event in events for chunk in sse(event, event=event["type"])]
        return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)

    return answer


def test_responses_calls_without_any_id_get_unique_ids_streamed_or_whole(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """No ``call_id`` nor item id: each call of each step gets its own id, the same streamed or not."""
    made: list[list[str]] = []
    for streamed in (False, True):
        bodies: list[dict[str, Any]] = []
        http_server.handler = _anonymous_responses(bodies)
        model = toolfold.model(
            "openai-responses:m", base_url=f"{http_server.url}/v1", api_key="sk-" + "k" * 20
        )
        opened.append(model)
        state = _run(model, _counter()[0], streamed)
        made.append([c.id for c in _calls(state)])
        # (a step's two calls run on worker threads, in either order: r3 and r4 may swap)
        contents = [content for _, content in _results(state)]
        assert sorted(contents[:2]) == ["r1", "r2"]
        assert sorted(contents[2:]) == ["r3", "r4"]
        assert [call_id for call_id, _ in _results(state)] == made[-1]
        sent = [
            i["call_id"] for i in bodies[-1]["input"] if i.get("type") == "function_call_output"
        ]
        assert sent == made[-1]
    assert made[0] == made[1]
    assert len(set(made[0])) == 4
    assert all(made[0])
