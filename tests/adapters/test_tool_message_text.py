"""Text beside the results of a tool message reaches every provider's wire, never dropped."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic_cassettes import spec_problems
from openai_spec import problems as openai_problems
from test_native_request_specs import gemini_problems
from test_native_request_specs import problems as responses_problems

from toolfold import Agent, ModelConfigError
from toolfold.adapters.anthropic import build_body as anthropic_body
from toolfold.adapters.gemini import GeminiModel
from toolfold.adapters.ollama import build_body as ollama_body
from toolfold.adapters.openai_chat import PROVIDERS
from toolfold.adapters.openai_chat import build_body as chat_body
from toolfold.adapters.openai_chat._request import encode_body
from toolfold.adapters.openai_responses import OpenAIResponsesModel
from toolfold.runtime import (
    FilePart,
    ImagePart,
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


def _beside(*parts: Any) -> ModelRequest:
    """A request whose tool message holds ``parts`` beside its one result."""
    call = ToolCallPart("call_1", "weather", "{}")
    return ModelRequest(
        (
            Message.user("weather?"),
            Message.assistant("", [call]),
            Message("tool", [ToolResultPart("call_1", "weather", "sunny"), *parts]),
            Message.user("thanks"),
        ),
        (WEATHER,),
    )


PDF = FilePart(data=b"%PDF", media_type="application/pdf", filename="a.pdf")
PDF_BY_URL = FilePart(url="https://example.com/a.pdf", media_type="application/pdf")
PNG = ImagePart(data=b"\x89PNG", media_type="image/png")
PNG_BY_URL = ImagePart(url="https://example.com/a.png")
SVG = ImagePart(data=b"<svg/>", media_type="image/svg+xml")
NOTES = FilePart(data=b"hello", media_type="text/plain", filename="notes.txt")


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        (PDF, "[file a.pdf: application/pdf, 4 bytes]"),
        (PDF_BY_URL, "[file: application/pdf, https://example.com/a.pdf]"),
        (PNG_BY_URL, "[image: image/png, https://example.com/a.png]"),
        (SVG, "[image: image/svg+xml, 6 bytes]"),
        (NOTES, "[file notes.txt: text/plain]\nhello"),
    ],
)
def test_ollama_describes_media_beside_results_it_cannot_take(part: Any, expected: str) -> None:
    """Ollama sends a file, an image by URL or an SVG beside results described, not a failed request."""
    body = ollama_body(_beside(part), "qwen3")
    assert body["messages"][3] == {"role": "user", "content": expected}
    assert body["messages"][4] == {"role": "user", "content": "thanks"}


def test_ollama_sends_an_inline_image_beside_results_with_the_text() -> None:
    """Ollama sends an inline PNG beside results in `images`, and the text beside it as content."""
    body = ollama_body(_beside(TextPart("look"), PNG), "qwen3")
    assert body["messages"][3] == {"role": "user", "content": "look", "images": ["iVBORw=="]}


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        (PDF_BY_URL, "[file: application/pdf, https://example.com/a.pdf]"),
        (SVG, "[image: image/svg+xml, 6 bytes]"),
        (NOTES, "[file notes.txt: text/plain]\nhello"),
    ],
)
def test_chat_describes_media_beside_results_it_cannot_take(part: Any, expected: str) -> None:
    """OpenAI's Chat Completions describes a file by URL or an SVG beside results, as a result's."""
    body = chat_body(_beside(part), "gpt-4o-mini", PROVIDERS["openai"])
    assert body["messages"][3] == {"role": "user", "content": expected}
    assert openai_problems("CreateChatCompletionRequest", body) == []


def test_chat_sends_media_beside_results_that_it_takes() -> None:
    """Chat Completions sends a PDF and an image by URL beside results as file and image_url parts."""
    body = chat_body(_beside(PDF, PNG_BY_URL), "gpt-4o-mini", PROVIDERS["openai"])
    content = body["messages"][3]["content"]
    assert [item["type"] for item in content] == ["file", "image_url"]
    assert content[1]["image_url"] == {"url": "https://example.com/a.png"}
    assert openai_problems("CreateChatCompletionRequest", body) == []


def test_mistral_takes_a_file_by_url_beside_results() -> None:
    """Mistral, which takes documents by URL, sends a file by URL beside results as document_url."""
    body = chat_body(_beside(PDF_BY_URL), "mistral-large", PROVIDERS["mistral"])
    user = [m for m in body["messages"] if m["role"] == "user"][1]
    assert user["content"] == [
        {"type": "document_url", "document_url": "https://example.com/a.pdf"}
    ]


_ENCODERS: dict[str, Any] = {
    "chat": lambda request: chat_body(request, "gpt-4o-mini", PROVIDERS["openai"]),
    "ollama": lambda request: ollama_body(request, "qwen3"),
}


@pytest.mark.parametrize("encode", sorted(_ENCODERS))
def test_a_tool_call_beside_results_is_refused_naming_the_tool_message(encode: str) -> None:
    """A tool call beside results raises ModelConfigError saying a tool message cannot carry it."""
    request = _beside(ToolCallPart("call_2", "weather", "{}"))
    with pytest.raises(
        ModelConfigError, match=r"^a tool message cannot carry a tool call: call 'call_2'"
    ):
        _ENCODERS[encode](request)


def test_ollama_sends_a_text_only_tool_message_as_chat_does() -> None:
    """A tool message with text and no result goes as a user message on Ollama, as on Chat Completions."""
    request = ModelRequest(
        (*_beside().messages[:3], Message("tool", [TextPart("NOTE")]), Message.user("next")), ()
    )
    ollama = ollama_body(request, "qwen3")["messages"]
    chat = chat_body(request, "gpt-4o-mini", PROVIDERS["openai"])["messages"]
    assert ollama[3:] == [{"role": "user", "content": "NOTE"}, {"role": "user", "content": "next"}]
    assert chat[3:] == ollama[3:]
