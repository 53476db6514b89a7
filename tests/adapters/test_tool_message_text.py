"""Text beside the results of a tool message reaches every provider's wire, never dropped."""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import ANY

import pytest
from anthropic_cassettes import spec_problems
from openai_spec import problems as openai_problems
from test_native_request_specs import gemini_problems
from test_native_request_specs import problems as responses_problems

from toolfold import Agent, ModelConfigError
from toolfold.adapters.anthropic import build_body as anthropic_body
from toolfold.adapters.gemini import GeminiModel
from toolfold.adapters.ollama import build_body as ollama_body
from toolfold.adapters.openai_chat import PROVIDERS, mistral_id
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


def _chat_sent(request: ModelRequest, provider: str) -> dict[str, Any]:
    """The Chat Completions body of ``request`` for ``provider``, checked: the bytes the model
    sends are those of the dict (or it falls back to the dict), and OpenAI's one fits its spec."""
    body = chat_body(request, "gpt-4o-mini", PROVIDERS[provider])
    encoded = encode_body(request, "gpt-4o-mini", PROVIDERS[provider])
    assert encoded is None or json.loads(encoded) == body
    if provider == "openai":
        assert openai_problems("CreateChatCompletionRequest", body) == []
    return body


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_chat_completions_sends_the_text_after_the_run_of_tool_messages(provider: str) -> None:
    """Chat Completions keeps the tool messages adjacent and sends their text in a user message after them."""
    body = _chat_sent(REQUEST, provider)
    messages = [m for m in body["messages"] if m["role"] != "assistant" or "tool_calls" in m]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user", "user"]
    assert messages[4]["content"] == "NOTE-A\n\nNOTE-B"
    assert messages[5]["content"] == "thanks"


def test_ollama_sends_the_text_after_the_run_of_tool_messages() -> None:
    """Ollama sends the run's tool messages' text in one user message after them, as Chat does."""
    body = ollama_body(REQUEST, "qwen3")
    assert [(m["role"], m["content"]) for m in body["messages"][2:]] == [
        ("tool", "sunny"),
        ("tool", "rain"),
        ("user", "NOTE-A\n\nNOTE-B"),
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


def test_responses_keeps_the_outputs_together_and_sends_the_text_after_them() -> None:
    """Responses sends both function_call_outputs in a row, then one user message with both notes."""
    body = OpenAIResponsesModel("gpt-4o", api_key="k" * 20).body(REQUEST)
    shown = [(item.get("type") or item["role"], item.get("content")) for item in body["input"][3:]]
    assert [item.get("type") for item in body["input"][1:3]] == ["function_call", "function_call"]
    assert shown == [
        ("function_call_output", None),
        ("function_call_output", None),
        (
            "user",
            [{"type": "input_text", "text": "NOTE-A"}, {"type": "input_text", "text": "NOTE-B"}],
        ),
        ("user", "thanks"),
    ]
    assert responses_problems("CreateResponse", body) == []


def test_responses_keeps_outputs_together_across_a_user_message_holding_results() -> None:
    """A user message holding a result and text, then a tool message: the outputs come first."""
    calls = [ToolCallPart("call_1", "weather", "{}"), ToolCallPart("call_2", "weather", "{}")]
    picture = ImagePart(data=b"\x89PNG\r\n\x1a\n")
    history = (
        Message.user("weather?"),
        Message.assistant("", calls),
        Message("user", [ToolResultPart("call_1", "weather", "sunny"), TextPart("NOTE-A")]),
        Message("tool", [picture, ToolResultPart("call_2", "weather", "rain")]),
        Message.assistant("done"),
    )
    body = OpenAIResponsesModel("gpt-4o", api_key="k" * 20).body(ModelRequest(history, (WEATHER,)))
    kinds = [item.get("type") or item["role"] for item in body["input"]]
    assert kinds[1:] == [
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "user",
        "assistant",
    ]
    assert [part["type"] for part in body["input"][5]["content"]] == ["input_text", "input_image"]
    assert responses_problems("CreateResponse", body) == []


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
        ModelConfigError,
        match=r"^a tool message cannot carry a tool call: call 'call_2' \(weather\) "
        r"sits beside tool results; a call belongs in an assistant message$",
    ):
        _ENCODERS[encode](request)


@pytest.mark.parametrize("encode", sorted(_ENCODERS))
def test_a_tool_call_in_a_tool_message_without_results_is_refused_saying_so(encode: str) -> None:
    """A tool call in a tool message with no results is refused without claiming results beside it."""
    messages = (*_beside().messages[:3], Message("tool", [ToolCallPart("call_2", "weather", "{}")]))
    with pytest.raises(
        ModelConfigError,
        match=r"^a tool message cannot carry a tool call: call 'call_2' \(weather\) "
        r"is in a tool message with no results; a call belongs in an assistant message$",
    ):
        _ENCODERS[encode](ModelRequest(messages, ()))


def test_ollama_sends_a_text_only_tool_message_as_chat_does() -> None:
    """A tool message with text and no result goes as a user message on Ollama, as on Chat Completions."""
    request = ModelRequest(
        (*_beside().messages[:3], Message("tool", [TextPart("NOTE")]), Message.user("next")), ()
    )
    ollama = ollama_body(request, "qwen3")["messages"]
    chat = chat_body(request, "gpt-4o-mini", PROVIDERS["openai"])["messages"]
    assert ollama[3:] == [{"role": "user", "content": "NOTE"}, {"role": "user", "content": "next"}]
    assert chat[3:] == ollama[3:]


# A tool message holding two results (the first with a screenshot) and, beside them,
# the user's own words and photo: a history in Anthropic's format.
SHOT = ImagePart(data=b"\x89PNG-shot", media_type="image/png")
PHOTO = ImagePart(data=b"\xff\xd8-photo", media_type="image/jpeg")
_SHOTS = ModelRequest(
    (
        Message.user("go"),
        Message.assistant(
            "", [ToolCallPart("c1", "weather", "{}"), ToolCallPart("c2", "weather", "{}")]
        ),
        Message(
            "tool",
            [
                ToolResultPart("c1", "weather", "shot", parts=(SHOT,)),
                ToolResultPart("c2", "weather", "failed", is_error=True),
                TextPart("Here is MY photo, not a screenshot:"),
                PHOTO,
            ],
        ),
    ),
    (WEATHER,),
)


@pytest.mark.parametrize("provider", ["openai", "mistral"])
def test_chat_keeps_parts_beside_results_out_from_under_a_results_heading(provider: str) -> None:
    """Chat sends a tool message's own text and image before the results' headed media, not under them."""
    body = chat_body(_SHOTS, "gpt-4o-mini", PROVIDERS[provider])
    roles = [m["role"] for m in body["messages"][2:] if m.get("content") != "OK"]
    assert roles == ["tool", "tool", "user"]  # (Mistral's "OK" between them left aside)
    content = body["messages"][-1]["content"]
    urls = [item.get("text") or item["image_url"]["url"][:15] for item in content]
    sent = mistral_id("c1") if provider == "mistral" else "c1"  # the id its tool message carries
    assert urls == [
        "Here is MY photo, not a screenshot:",
        "data:image/jpeg",
        f"Images and files returned by tool call {sent} (weather):",
        "data:image/png;",
    ]
    if provider == "openai":
        assert openai_problems("CreateChatCompletionRequest", body) == []


def _joined(*messages: Message) -> ModelRequest:
    """A request whose assistant message's calls are answered by ``messages``, then a user turn."""
    calls = [ToolCallPart("call_1", "weather", "{}"), ToolCallPart("call_2", "weather", "{}")]
    return ModelRequest(
        (Message.user("q"), Message.assistant("", calls), *messages, Message.user("next")),
        (WEATHER,),
    )


@pytest.mark.parametrize(
    ("request_", "chat", "ollama"),
    [
        (  # a tool message's text parts: joined as a user message's are, with nothing between
            _joined(
                Message(
                    "tool",
                    [ToolResultPart("call_1", "weather", "ok"), TextPart("a"), TextPart("b")],
                )
            ),
            "ab",
            {"content": "ab"},
        ),
        (  # the same beside an image: still joined, the image apart
            _joined(
                Message(
                    "tool",
                    [ToolResultPart("call_1", "weather", "ok"), TextPart("a"), TextPart("b"), PNG],
                )
            ),
            [{"type": "text", "text": "ab"}, {"type": "image_url", "image_url": {"url": ANY}}],
            {"content": "ab", "images": ["iVBORw=="]},
        ),
        (  # two tool messages' text: one user message, a blank line apart
            _joined(
                Message("tool", [ToolResultPart("call_1", "weather", "ok"), TextPart("a")]),
                Message("tool", [ToolResultPart("call_2", "weather", "ok"), TextPart("b")]),
            ),
            "a\n\nb",
            {"content": "a\n\nb"},
        ),
        (  # text and a described file: pieces a blank line apart
            _joined(
                Message("tool", [ToolResultPart("call_1", "weather", "ok"), TextPart("a"), SVG])
            ),
            "a\n\n[image: image/svg+xml, 6 bytes]",
            {"content": "a\n\n[image: image/svg+xml, 6 bytes]"},
        ),
    ],
)
def test_chat_and_ollama_join_text_beside_results_alike(
    request_: ModelRequest, chat: Any, ollama: dict[str, Any]
) -> None:
    """Chat Completions and Ollama send the same text beside results, joined by one rule."""
    chat_user = chat_body(request_, "gpt-4o-mini", PROVIDERS["openai"])["messages"][-2]
    ollama_user = ollama_body(request_, "qwen3")["messages"][-2]
    assert chat_user == {"role": "user", "content": chat}
    assert ollama_user == {"role": "user", **ollama}


def test_ollama_sends_result_images_after_the_run_of_tool_messages() -> None:
    """Ollama keeps a run's tool messages adjacent: results' images follow them, after the text beside."""
    png = ImagePart(b"\x89PNG", "image/png")
    request = ModelRequest(
        (
            Message.user("look"),
            Message.assistant(
                "", [ToolCallPart("c1", "weather", "{}", {}), ToolCallPart("c2", "weather", "{}")]
            ),
            Message("tool", [ToolResultPart("c1", "weather", "shot", parts=(png,))]),
            Message("tool", [ToolResultPart("c2", "weather", "rain"), TextPart("NOTE")]),
            Message.user("thanks"),
        ),
        (WEATHER,),
    )
    messages = ollama_body(request, "llama3.2")["messages"]
    assert [m["role"] for m in messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "user",
        "user",
    ]
    assert messages[4]["content"] == "NOTE"
    assert messages[5]["images"]
    assert "returned by tool call c1" in messages[5]["content"]
    assert messages[6]["content"] == "thanks"


# One turn's two results: the first in a user message with text (Anthropic's format), the
# second in a tool message.
SPLIT = ModelRequest(
    (
        Message.user("weather?"),
        Message.assistant(
            "", [ToolCallPart("call_1", "weather", "{}"), ToolCallPart("call_2", "weather", "{}")]
        ),
        Message("user", [ToolResultPart("call_1", "weather", "sunny"), TextPart("NOTE")]),
        Message("tool", [ToolResultPart("call_2", "weather", "rain")]),
        Message.user("thanks"),
    ),
    (WEATHER,),
)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_chat_keeps_tool_messages_together_across_a_user_message_holding_results(
    provider: str,
) -> None:
    """The user message's text goes after both tool messages, not between them (Chat's own rule)."""
    body = _chat_sent(SPLIT, provider)
    messages = [m for m in body["messages"] if m["role"] != "assistant" or "tool_calls" in m]
    shown = [(m["role"], m.get("content")) for m in messages[2:]]
    assert shown == [("tool", "sunny"), ("tool", "rain"), ("user", "NOTE"), ("user", "thanks")]


def test_ollama_keeps_tool_messages_together_across_a_user_message_holding_results() -> None:
    """Ollama sends both tool messages in a row, then the user message's text, as Responses keeps them."""
    body = ollama_body(SPLIT, "qwen3")
    assert [(m["role"], m["content"]) for m in body["messages"][2:]] == [
        ("tool", "sunny"),
        ("tool", "rain"),
        ("user", "NOTE"),
        ("user", "thanks"),
    ]


@pytest.mark.parametrize("role", ["tool", "user"])
def test_ollama_describes_a_file_beside_results_whichever_message_holds_them(role: str) -> None:
    """A file beside a result is described in a user message holding results too, not refused."""
    history = (
        Message.user("q"),
        Message.assistant("", [ToolCallPart("call_1", "weather", "{}")]),
        Message(role, [ToolResultPart("call_1", "weather", "r1"), TextPart("see"), NOTES]),
    )
    body = ollama_body(ModelRequest(history, (WEATHER,)), "qwen3")
    assert body["messages"][2:] == [
        {"role": "tool", "tool_name": "weather", "tool_call_id": "call_1", "content": "r1"},
        {"role": "user", "content": "see\n\n[file notes.txt: text/plain]\nhello"},
    ]


@pytest.mark.parametrize("encode", sorted(_ENCODERS))
def test_a_tool_call_beside_results_in_a_user_message_is_refused_naming_it(encode: str) -> None:
    """A tool call beside results in a user message is refused naming the user message."""
    history = (
        Message.user("q"),
        Message.assistant("", [ToolCallPart("call_1", "weather", "{}")]),
        Message(
            "user",
            [ToolResultPart("call_1", "weather", "r1"), ToolCallPart("call_2", "weather", "{}")],
        ),
    )
    with pytest.raises(ModelConfigError, match=r"^a user message cannot carry a tool call"):
        _ENCODERS[encode](ModelRequest(history, ()))


# One turn's two results split so that the LATER message is a user message holding only a
# result: what the first holds beside its result (text, an image) goes after both.
_R1 = ToolResultPart("call_1", "weather", "sunny")
_R1_SHOT = ToolResultPart("call_1", "weather", "sunny", parts=(TextPart("sunny"), PNG))
_R2_ALONE = Message("user", [ToolResultPart("call_2", "weather", "rain")])
_LATER_USER = {
    "user(r1+NOTE), user(r2)": Message("user", [_R1, TextPart("NOTE")]),
    "tool(r1+NOTE), user(r2)": Message("tool", [_R1, TextPart("NOTE")]),
    "tool(r1 w/ image), user(r2)": Message("tool", [_R1_SHOT]),
}


def _later_user(first: Message) -> ModelRequest:
    calls = [ToolCallPart("call_1", "weather", "{}"), ToolCallPart("call_2", "weather", "{}")]
    history = (Message.user("weather?"), Message.assistant("", calls), first, _R2_ALONE)
    return ModelRequest((*history, Message.user("thanks")), (WEATHER,))


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("case", sorted(_LATER_USER))
def test_chat_keeps_tool_messages_together_when_the_later_user_message_holds_only_results(
    case: str, provider: str
) -> None:
    """Chat Completions sends both tool messages in a row, then what the first held beside its result."""
    body = _chat_sent(_later_user(_LATER_USER[case]), provider)
    roles = [m["role"] for m in body["messages"] if m["role"] != "assistant"]
    assert roles == ["user", "tool", "tool", "user", "user"]
    assert body["messages"][-1]["content"] == "thanks"


@pytest.mark.parametrize("case", sorted(_LATER_USER))
def test_ollama_keeps_tool_messages_together_when_the_later_user_message_holds_only_results(
    case: str,
) -> None:
    """Ollama sends both tool messages in a row, then what the first held beside its result."""
    body = ollama_body(_later_user(_LATER_USER[case]), "qwen3")
    assert [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "user",
    ]
    assert [m["tool_call_id"] for m in body["messages"][2:4]] == ["call_1", "call_2"]
