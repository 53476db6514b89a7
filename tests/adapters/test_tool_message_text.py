"""Text beside the results of a tool message reaches every provider's wire, never dropped."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic_cassettes import spec_problems
from openai_spec import problems as openai_problems
from test_native_request_specs import gemini_problems
from test_native_request_specs import problems as responses_problems

from toolfold import Agent
from toolfold.adapters.anthropic import build_body as anthropic_body
from toolfold.adapters.gemini import GeminiModel
from toolfold.adapters.ollama import build_body as ollama_body
from toolfold.adapters.openai_chat import PROVIDERS
from toolfold.adapters.openai_chat import build_body as chat_body
from toolfold.adapters.openai_chat._request import encode_body
from toolfold.adapters.openai_responses import OpenAIResponsesModel
from toolfold.runtime import (
    Message,
    ModelRequest,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from toolfold.testing import FunctionModel

WEATHER = ToolDefinition("weather", "The weather.", {"type": "object", "properties": {}})
# Two tool messages answering one assistant message, each with text beside its result.
CONVERSATION = (
    Message.user("weather and time?"),
    Message.assistant(
        "", [ToolCallPart("call_1", "weather", "{}", {}), ToolCallPart("call_2", "weather", "{}")]
    ),
    Message("tool", [TextPart("NOTE-A"), ToolResultPart("call_1", "weather", "sunny")]),
    Message("tool", [ToolResultPart("call_2", "weather", "rain"), TextPart("NOTE-B")]),
    Message.user("thanks"),
)
REQUEST = ModelRequest(CONVERSATION, (WEATHER,))


def _sent(body: Any) -> str:
    return json.dumps(body)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_chat_completions_sends_the_text_after_the_run_of_tool_messages(provider: str) -> None:
    """Chat Completions keeps the tool messages adjacent and sends their text in a user message after them."""
    body = chat_body(REQUEST, "gpt-4o-mini", PROVIDERS[provider])
    messages = [m for m in body["messages"] if m["role"] != "assistant" or "tool_calls" in m]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert messages[4]["content"] == "NOTE-A\n\nNOTE-B"
    assert messages[5]["content"] == "thanks"
    # The bytes the model sends are those of the dict (or it falls back to the dict).
    encoded = encode_body(REQUEST, "gpt-4o-mini", PROVIDERS[provider])
    assert encoded is None or json.loads(encoded) == body
    if provider == "openai":
        assert openai_problems("CreateChatCompletionRequest", body) == []


def test_ollama_sends_the_text_after_the_run_of_tool_messages() -> None:
    """Ollama sends each tool message's text as a user message after the run of tool messages."""
    body = ollama_body(REQUEST, "qwen3")
    assert [(m["role"], m["content"]) for m in body["messages"][2:]] == [
        ("tool", "sunny"),
        ("tool", "rain"),
        ("user", "NOTE-A"),
        ("user", "NOTE-B"),
        ("user", "thanks"),
    ]


def test_anthropic_sends_the_text_after_the_tool_results() -> None:
    """Anthropic puts the text blocks after the tool_result blocks of the user turn."""
    body = anthropic_body(REQUEST, "claude-sonnet-4-5")
    kinds = [(b["type"], b.get("text")) for b in body["messages"][2]["content"]]
    assert kinds == [
        ("tool_result", None),
        ("tool_result", None),
        ("text", "NOTE-A"),
        ("text", "NOTE-B"),
        ("text", "thanks"),
    ]
    assert spec_problems(body, beta=False) == []


def test_gemini_and_responses_send_the_text() -> None:
    """Gemini and the Responses API carry the text beside the results as user text."""
    gemini = GeminiModel("gemini-2.5-flash", api_key="k" * 20).body(REQUEST)
    responses = OpenAIResponsesModel("gpt-4o", api_key="k" * 20).body(REQUEST)
    for body in (gemini, responses):
        assert "NOTE-A" in _sent(body)
        assert "NOTE-B" in _sent(body)
    assert gemini_problems({"model": "models/gemini-2.5-flash", **gemini}) == []
    assert responses_problems("CreateResponse", responses) == []


def test_a_run_from_such_a_history_sends_the_text_to_the_model() -> None:
    """Agent.run accepts a history whose tool message holds text and results; the model sees the text."""
    seen: list[ModelRequest] = []

    def model(request: ModelRequest) -> str:
        seen.append(request)
        return "done"

    response = Agent(FunctionModel(model)).run(list(CONVERSATION))
    assert response.text == "done"
    body = chat_body(seen[0], "gpt-4o-mini", PROVIDERS["openai"])
    assert "NOTE-A" in _sent(body)
