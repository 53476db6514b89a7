"""The whole tool loop (`generate_text`, `Agent`) against a fake OpenAI-compatible server over HTTP."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from fake_openai import Calls, FakeChat, Text
from scripted_http import Cut, Reply, ScriptedServer, sse

import toolfold
from toolfold import Agent, StreamError, ToolUseFailedError, generate_text
from toolfold.runtime import TextDelta

WEATHER = {"Paris": "sunny, 22C", "Tokyo": "rainy, 18C"}
SCRIPT = (
    Calls((("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"}))),
    Text("Paris is sunny (22C) and Tokyo is rainy (18C)."),
)


@toolfold.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name.
    """
    return WEATHER[city]


def _model(server: ScriptedServer, opened: list[Any], provider: str = "openai-compatible") -> Any:
    made = toolfold.model(f"{provider}:fake-model", base_url=f"{server.url}/v1", api_key="k" * 20)
    opened.append(made)
    return made


def _check_conversation(fake: FakeChat) -> None:
    assert fake.problems == []
    assert len(fake.bodies) == 2
    second = fake.bodies[1]["messages"]
    results = [(m["tool_call_id"], m["content"]) for m in second if m["role"] == "tool"]
    assert results == [("call_0_0", "sunny, 22C"), ("call_0_1", "rainy, 18C")]
    tool = fake.bodies[0]["tools"][0]["function"]
    assert tool["name"] == "get_weather"
    assert tool["parameters"]["properties"]["city"]["type"] == "string"


def test_generate_text_runs_the_tool_loop_over_http(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Two parallel calls run, their results go back by call id, the final text comes back."""
    fake = FakeChat(SCRIPT)
    http_server.handler = fake
    response = generate_text(
        _model(http_server, opened), "Weather in Paris and Tokyo?", tools=[get_weather]
    )
    assert response.text == "Paris is sunny (22C) and Tokyo is rainy (18C)."
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.requests) == (
        30,
        10,
        2,
    )
    assert fake.bodies[0].get("stream") is None
    _check_conversation(fake)


def test_streamed_run_yields_deltas_and_the_same_answer(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Agent.stream gets fragmented, interleaved calls and text deltas, and ends like the blocking run."""
    fake = FakeChat(SCRIPT)
    http_server.handler = fake
    agent = Agent(model=_model(http_server, opened), tools=[get_weather])
    run = agent.stream("Weather in Paris and Tokyo?")
    deltas = [e.text for e in run if isinstance(e, TextDelta)]
    assert "".join(deltas) == "Paris is sunny (22C) and Tokyo is rainy (18C)."
    assert len(deltas) > 1
    assert run.response.text == "Paris is sunny (22C) and Tokyo is rainy (18C)."
    assert run.response.usage.input_tokens == 30
    assert fake.bodies[0]["stream"] is True
    assert fake.bodies[0]["stream_options"] == {"include_usage": True}
    _check_conversation(fake)


def test_async_run_over_http(http_server: ScriptedServer, opened: list[Any]) -> None:
    """The async driver and the async HTTP client run the same loop."""
    fake = FakeChat(SCRIPT)
    http_server.handler = fake

    async def main() -> str:
        response = await toolfold.agenerate_text(
            _model(http_server, opened), "Weather in Paris and Tokyo?", tools=[get_weather]
        )
        return response.text

    assert asyncio.run(main()) == "Paris is sunny (22C) and Tokyo is rainy (18C)."
    _check_conversation(fake)


def test_async_streamed_run_over_http(http_server: ScriptedServer, opened: list[Any]) -> None:
    """``async for`` over Agent.stream drives the async SSE path to the same answer."""
    fake = FakeChat(SCRIPT)
    http_server.handler = fake
    agent = Agent(model=_model(http_server, opened), tools=[get_weather])

    async def main() -> str:
        run = agent.stream("Weather in Paris and Tokyo?")
        async for _ in run:
            pass
        return run.response.text

    assert asyncio.run(main()) == "Paris is sunny (22C) and Tokyo is rainy (18C)."
    _check_conversation(fake)


def test_mistral_ids_are_rewritten_and_still_match(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Foreign call ids go back to Mistral as 9 alphanumerics, the same in the call and its result."""
    fake = FakeChat(SCRIPT, ids=("call_0fypS1hVX", "call_2bQ7aa01Z"))
    http_server.handler = fake
    model = _model(http_server, opened, "mistral")
    response = generate_text(model, "Weather in Paris and Tokyo?", tools=[get_weather])
    assert response.text.startswith("Paris is sunny")
    second = fake.bodies[1]["messages"]
    call_ids = [c["id"] for m in second if m["role"] == "assistant" for c in m["tool_calls"]]
    result_ids = [m["tool_call_id"] for m in second if m["role"] == "tool"]
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in call_ids)
    assert result_ids == call_ids
    assert len(set(call_ids)) == 2
    assert "stream_options" not in fake.bodies[0]


def test_error_inside_a_200_stream_stops_the_run_with_the_provider_message(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """OpenAI's in-band ``{"error": ...}`` after HTTP 200 raises StreamError naming the cause."""
    chunk = {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "Hel"}, "finish_reason": None}],
    }
    error = {
        "error": {
            "message": "The server had an error while processing your request.",
            "type": "server_error",
        }
    }
    http_server.add(Reply(headers={"content-type": "text/event-stream"}, chunks=sse(chunk, error)))
    agent = Agent(model=_model(http_server, opened), tools=[get_weather])
    with pytest.raises(StreamError, match="The server had an error while processing"):
        for _ in agent.stream("hi"):
            pass


def test_groq_tool_use_failed_in_a_stream_is_a_tool_use_error(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Groq's ``event: error`` with tool_use_failed raises ToolUseFailedError with its message."""
    error = {
        "error": {
            "message": "Tool choice is required, but model did not call a tool",
            "type": "invalid_request_error",
            "code": "tool_use_failed",
            "failed_generation": "maybe",
        }
    }
    http_server.add(
        Reply(headers={"content-type": "text/event-stream"}, chunks=sse(error, event="error"))
    )
    model = _model(http_server, opened, "groq")
    with pytest.raises(ToolUseFailedError, match="did not call a tool") as caught:
        for _ in Agent(model=model, tools=[get_weather]).stream("hi"):
            pass
    assert caught.value.failed_generation == "maybe"


def _head_and_fragment() -> list[bytes]:
    head = {
        "id": "c",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_cut",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ],
    }
    piece = {
        "id": "c",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}]
                },
                "finish_reason": None,
            }
        ],
    }
    return sse(head, piece)


@pytest.mark.parametrize("cut", [True, False], ids=["connection-cut", "body-ends-early"])
def test_a_stream_that_stops_mid_call_never_runs_the_tool(
    http_server: ScriptedServer, opened: list[Any], cut: bool
) -> None:
    """Cut mid-call (socket closed, or a clean end before finish/[DONE]): StreamError, no tool call."""
    chunks: list[Any] = [*_head_and_fragment(), Cut()] if cut else _head_and_fragment()
    http_server.add(Reply(headers={"content-type": "text/event-stream"}, chunks=chunks))
    ran: list[str] = []

    @toolfold.tool
    def get_weather(city: str) -> str:
        """Get the weather.

        Args:
            city: The city.
        """
        ran.append(city)
        return "sunny"

    model = _model(http_server, opened)
    with pytest.raises(StreamError):
        for _ in Agent(model=model, tools=[get_weather]).stream("Weather in Paris?"):
            pass
    assert ran == []
