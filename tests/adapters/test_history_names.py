"""A history call's name the target API refuses goes on the wire as a valid stand-in.

A model may call a name it made up (GPT models call ``multi_tool_use.parallel``; a
Gemini history holds ``default_api.get_weather``). The run answers "Unknown tool"
and the next request carries the call back: OpenAI checks the history's names
against ``^[a-zA-Z0-9_-]+$`` and answered 400, so the run failed instead of the
model recovering, and so did every continuation of that history. Each adapter now
sends such a name under `sent_name`'s stand-in; the state keeps the model's name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

import toolfold
from toolfold import Message, SchemaCompileError
from toolfold.adapters._dialects import DIALECTS, _names, clear_cache, sent_name
from toolfold.adapters._dialects._compile import compile_tool
from toolfold.adapters._dialects._names import NAME_RULES
from toolfold.runtime import ToolCallPart, ToolResultPart

# The rules each API states for the names it takes (providers.md; the specs' patterns).
OPENAI = re.compile(r"[a-zA-Z0-9_-]{1,64}")
ANTHROPIC = re.compile(r"[a-zA-Z0-9_-]{1,128}")
GEMINI = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}")
MADE_UP = "multi_tool_use.parallel"


@toolfold.tool
def get_weather(city: str) -> str:
    """Get the weather.

    Args:
        city: The city.
    """
    return "sunny"


def _text(path: str) -> dict[str, Any]:
    """A plain text answer in the shape of the API at ``path``."""
    if path.endswith("/chat/completions"):
        message = {"role": "assistant", "content": "recovered"}
        return {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
    if path.endswith("/responses"):
        content = [{"type": "output_text", "text": "recovered", "annotations": []}]
        return {
            "id": "r1",
            "object": "response",
            "status": "completed",
            "model": "m",
            "output": [{"type": "message", "id": "m1", "role": "assistant", "content": content}],
        }
    if path.endswith("/messages"):
        return {
            "id": "msg1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "recovered"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    if "generateContent" in path:
        content = {"role": "model", "parts": [{"text": "recovered"}]}
        return {"candidates": [{"content": content, "finishReason": "STOP"}]}
    assert path.endswith("/api/chat"), path
    return {
        "model": "m",
        "message": {"role": "assistant", "content": "recovered"},
        "done": True,
        "done_reason": "stop",
    }


def _made_up_call(path: str) -> dict[str, Any]:
    """An answer calling `MADE_UP`, in the shape of OpenAI's API at ``path``."""
    arguments = json.dumps({"tool_uses": []})
    if path.endswith("/chat/completions"):
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": MADE_UP, "arguments": arguments}  # type: ignore[assignment]
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        }
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": MADE_UP}
    item |= {"arguments": arguments, "status": "completed"}
    return {"id": "r1", "object": "response", "status": "completed", "model": "m", "output": [item]}


def _openai_history_names(body: dict[str, Any]) -> list[str]:
    """Every name in a Chat or Responses body's history (tool calls)."""
    names = [
        call["function"]["name"]
        for message in body.get("messages", ())
        for call in message.get("tool_calls") or ()
    ]
    names += [item["name"] for item in body.get("input", ()) if item.get("type") == "function_call"]
    return names


class OpenAILike:
    """An OpenAI host over ``httpx.MockTransport``: the first answer calls `MADE_UP`, and a
    request whose history names a function outside OpenAI's pattern gets OpenAI's 400."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        if len(self.bodies) == 1:
            return httpx.Response(200, json=_made_up_call(request.url.path))
        for name in _openai_history_names(body):
            if not OPENAI.fullmatch(name):
                error = {"message": f"Invalid 'name': {name!r}", "code": "invalid_value"}
                return httpx.Response(400, json={"error": error})
        return httpx.Response(200, json=_text(request.url.path))


@pytest.fixture
def host() -> Iterator[Callable[[str], tuple[Any, OpenAILike]]]:
    """``host(spec)``: a model of ``spec`` on an `OpenAILike` host, and the host."""
    clients: list[httpx.Client] = []

    def make(spec: str) -> tuple[Any, OpenAILike]:
        fake = OpenAILike()
        clients.append(httpx.Client(transport=httpx.MockTransport(fake)))
        return toolfold.model(spec, api_key="k", retry=0, http_client=clients[-1]), fake

    yield make
    for client in clients:
        client.close()


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "openai-responses:gpt-4o-mini"])
def test_a_made_up_call_name_does_not_break_the_next_request(
    spec: str, host: Callable[[str], tuple[Any, OpenAILike]]
) -> None:
    """The model calls ``multi_tool_use.parallel``; the run answers "Unknown tool" and the
    model recovers: its next request names the call by a valid stand-in (main sent the
    dotted name, and OpenAI answered 400 invalid_value). The state keeps the model's name,
    and a continuation of the history sends the same stand-in."""
    model, fake = host(spec)
    result = toolfold.generate_text(model, "weather?", tools=[get_weather])
    assert result.text == "recovered"
    (sent,) = _openai_history_names(fake.bodies[1])
    assert sent == sent_name(MADE_UP, "openai-chat")
    assert OPENAI.fullmatch(sent)
    assert sent.startswith("multi_tool_use_parallel_")
    calls = [p for m in result.messages for p in m.parts if isinstance(p, ToolCallPart)]
    assert [c.name for c in calls] == [MADE_UP]
    again = toolfold.generate_text(
        model, [*result.messages, Message.user("and now?")], tools=[get_weather]
    )
    assert again.text == "recovered"
    assert _openai_history_names(fake.bodies[2]) == [sent]


HISTORY = (
    Message.user("weather?"),
    Message(
        "assistant",
        (
            ToolCallPart("call_a", "default_api.get_weather", '{"city":"P"}', {"city": "P"}),
            ToolCallPart("call_b", "9 lives/天気", "{}", {}),
            ToolCallPart("call_c", "get_weather", '{"city":"P"}', {"city": "P"}),
        ),
    ),
    Message.tool(
        ToolResultPart("call_a", "default_api.get_weather", "Unknown tool", is_error=True),
        ToolResultPart("call_b", "9 lives/天気", "Unknown tool", is_error=True),
        ToolResultPart("call_c", "get_weather", "sunny"),
    ),
    Message.user("again"),
)
ORIGINAL = ["default_api.get_weather", "9 lives/天気", "get_weather"]


def _sent(spec: str, tools: list[Any], **options: Any) -> dict[str, Any]:
    """The body ``spec``'s model sends for `HISTORY`, as it goes over HTTP."""
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=_text(request.url.path))

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        model = toolfold.model(spec, retry=0, http_client=client, **options)
        toolfold.generate_text(model, list(HISTORY), tools=tools)
    (body,) = bodies
    return body


@pytest.mark.parametrize("tools", [[], [get_weather]], ids=["tool-less", "with-tools"])
def test_each_api_is_sent_history_names_its_rule_takes(tools: list[Any]) -> None:
    """A history from another provider (Gemini's ``default_api.get_weather``, a name no
    API takes) continued anywhere: each name a call or result is sent by fits that API's
    rule, the same stand-in for a call and its result; a valid name goes as it was."""
    chat = _sent("openai:gpt-4o-mini", tools, api_key="k")
    chat_names = _openai_history_names(chat)
    responses_names = _openai_history_names(
        _sent("openai-responses:gpt-4o-mini", tools, api_key="k")
    )
    expected = [sent_name(n, "openai-chat") for n in ORIGINAL]
    assert chat_names == responses_names == expected
    assert all(OPENAI.fullmatch(n) for n in expected)
    assert expected[2] == "get_weather"

    anthropic = _sent("anthropic:claude-sonnet-4-5", tools, api_key="k")
    blocks = [
        b for m in anthropic["messages"] if isinstance(m["content"], list) for b in m["content"]
    ]
    used = [b["name"] for b in blocks if b["type"] == "tool_use"]
    assert used == [sent_name(n, "anthropic") for n in ORIGINAL]
    assert all(ANTHROPIC.fullmatch(n) for n in used)
    assert used[2] == "get_weather"

    gemini = _sent("gemini:gemini-2.5-flash", tools, api_key="k")
    parts = [p for c in gemini["contents"] for p in c["parts"]]
    called = [p["functionCall"]["name"] for p in parts if "functionCall" in p]
    answered = [p["functionResponse"]["name"] for p in parts if "functionResponse" in p]
    # Gemini takes the dotted name: only the other is a stand-in.
    assert called == answered == ["default_api.get_weather", called[1], "get_weather"]
    assert called[1] == sent_name("9 lives/天気", "gemini")
    assert GEMINI.fullmatch(called[1])

    ollama = _sent("ollama:llama3.1", tools)  # (Ollama states no rule: every name as it was)
    ollama_called = [
        c["function"]["name"] for m in ollama["messages"] for c in m.get("tool_calls", ())
    ]
    answered = [m["tool_name"] for m in ollama["messages"] if m["role"] == "tool"]
    assert ollama_called == answered == ORIGINAL


@pytest.mark.parametrize("dialect", sorted(NAME_RULES))
def test_a_stand_in_fits_its_rule_and_stays_apart(dialect: str) -> None:
    """Stand-ins fit the dialect's rule (a name too long, empty, of refused characters,
    starting with a digit); two names made alike by replacing characters stay apart; the
    same name gives the same stand-in; a name the rule takes is kept."""
    rule = NAME_RULES[dialect]
    names = ["a.b", "a/b", "", "9x", "-x", "x" * 200, "天気", "時間", "\ud800", "ok_name"]
    sent = [sent_name(n, dialect) for n in names]
    assert all(rule.pattern.fullmatch(s) for s in sent), sent
    assert len(set(sent)) == len(sent)
    assert sent == [sent_name(n, dialect) for n in names]
    assert sent[-1] == "ok_name"


@pytest.mark.parametrize(
    ("name", "dialect", "stand_in"),
    [
        ("multi_tool_use.parallel", "openai-chat", "multi_tool_use_parallel_41c06c9e"),
        ("multi_tool_use.parallel", "openai-responses", "multi_tool_use_parallel_41c06c9e"),
        ("default_api.get_weather", "anthropic", "default_api_get_weather_afcc8284"),
        ("9 lives/天気", "gemini", "_9_lives____70dac042"),
        ("x" * 70, "gemini", "x" * 55 + "_c71bd109"),
    ],
)
def test_a_stand_in_is_the_name_saved_conversations_were_sent(
    name: str, dialect: str, stand_in: str
) -> None:
    """Stand-ins are pinned by value: a conversation continued after an upgrade sends
    its calls by the names it was sent before (`with_digest` is shared with MCP's
    names, so a change made there would otherwise rename these silently)."""
    assert sent_name(name, dialect) == stand_in


def test_tools_are_checked_by_the_rules_history_names_are_sent_by() -> None:
    """One table of name rules: a tool's name is refused at compile time by the rule its
    dialect's history names are made to fit."""
    for dialect in DIALECTS:
        rule = NAME_RULES.get(dialect)
        for name in ("a.b", "a b", "ok_name"):
            tool = SimpleNamespace(
                name=name, description="d", parameters={"type": "object"}, strict=None
            )
            if rule is not None and not rule.pattern.fullmatch(name):
                with pytest.raises(SchemaCompileError, match="the tool name must be"):
                    compile_tool(tool, dialect)
            else:
                compile_tool(tool, dialect)  # (no error)


def test_a_long_made_up_name_is_not_kept_once_sent() -> None:
    """The lookup of names as sent keeps no name longer than any rule takes: main kept
    every one (up to 4096 a dialect), so a model's 1 MB made-up names stayed in memory
    after the run (200 of them held 200 MB). A long name still gives the same stand-in."""
    long = "x." * 100_000
    for dialect in [*NAME_RULES, "ollama"]:
        assert sent_name(long, dialect) == sent_name(long, dialect)
    assert sent_name(long, "ollama") == long
    assert not any(long in names for names in _names._sent.values())


def test_clear_cache_forgets_the_names_as_sent() -> None:
    """``clear_cache`` (for benchmarks and tests) starts the name lookup afresh too."""
    sent_name(MADE_UP, "openai-chat")
    clear_cache()
    assert _names._sent == {}
