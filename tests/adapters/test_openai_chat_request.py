"""Request bodies: valid against OpenAI's spec over a matrix of cases, and each family quirk."""

from __future__ import annotations

import functools
import gc
import itertools
import json
import logging
import pickle
import re
from typing import Any

import attrs
import pytest
from openai_spec import mistral_problems, problems

from toolfold import ModelConfigError
from toolfold.adapters._http._json import dumps
from toolfold.adapters._provider_model import _MAX_UNBOUND, LoggedNotes, ProviderModel
from toolfold.adapters.openai_chat import (
    PROVIDERS,
    SERVER_PRESETS,
    OpenAIChatModel,
    build_body,
    mistral_id,
)
from toolfold.adapters.openai_chat._request import encode_body, reasoning_notes
from toolfold.adapters.openai_chat._response import parse_response
from toolfold.runtime import (
    FilePart,
    ImagePart,
    Message,
    ModelRequest,
    OutputSpec,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from toolfold.runtime.core._messages import wire_memo

WEATHER = ToolDefinition(
    "get_weather",
    "Get the weather for a city.",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": ["string", "null"], "enum": ["C", "F", None]},
        },
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
    strict=True,
)
TIME = ToolDefinition("get_time", "Get the time.")
CALL = ToolCallPart("call_9", "get_time", "{}", {})
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8

CONVERSATIONS: dict[str, tuple[Message, ...]] = {
    "text": (Message.user("Hi"),),
    "system": (Message.system("Be brief."), Message.user("Hi")),
    "tool-results": (
        Message.system("Be brief."),
        Message.user("Weather in Paris and Tokyo?"),
        Message(
            "assistant",
            (
                ReasoningPart("Two cities, two calls.", provider="openai"),
                TextPart("Checking."),
                ToolCallPart(
                    "call_1",
                    "get_weather",
                    '{"city":"Paris","unit":null}',
                    {"city": "Paris", "unit": None},
                ),
                ToolCallPart(
                    "call_2",
                    "get_weather",
                    '{"city":"Tokyo","unit":"C"}',
                    {"city": "Tokyo", "unit": "C"},
                ),
            ),
        ),
        Message.tool(
            ToolResultPart("call_1", "get_weather", "sunny"),
            ToolResultPart("call_2", "get_weather", "Error: timeout", is_error=True),
        ),
        Message.assistant("Paris is sunny."),
        Message.user("And the time?"),
    ),
    "images": (
        Message.user(
            "What is in these?",
            ImagePart(url="https://example.com/cat.png"),
            ImagePart(data=PNG, media_type="image/png"),
            FilePart(data=b"%PDF-1.4", media_type="application/pdf", filename="a.pdf"),
            FilePart(data=b"RIFF....WAVE", media_type="audio/wav"),
        ),
    ),
}
#: A tool result with an image (its image travels in a user message after the tool
#: message), then a user message with an image right after the tool message.
TOOL_MEDIA_THEN_USER = (
    Message.user("What does the camera show?"),
    Message("assistant", (CALL,)),
    Message.tool(ToolResultPart("call_9", "get_time", "", parts=(ImagePart(data=PNG),))),
    Message.tool(ToolResultPart("call_9", "get_time", "12:00")),
    Message.user("And this one?", ImagePart(url="https://example.com/cat.png")),
)
CONVERSATIONS["tool-media-then-user"] = TOOL_MEDIA_THEN_USER
CHOICES = (None, "auto", "none", "required", "get_weather")
OUTPUT = OutputSpec(
    "answer",
    {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
        "additionalProperties": False,
    },
    strict=True,
)
MATRIX = list(
    itertools.product(sorted(CONVERSATIONS), CHOICES, (False, True), (None, OUTPUT), (False, True))
)


def _request(
    conversation: str, choice: str | None, parallel: bool, output: Any, **settings: Any
) -> ModelRequest:
    if parallel:
        settings["parallel_tool_calls"] = False
    return ModelRequest(CONVERSATIONS[conversation], (WEATHER, TIME), choice, output, settings)


@pytest.mark.parametrize(("conversation", "choice", "parallel", "output", "stream"), MATRIX)
def test_every_body_validates_against_the_openai_spec(
    conversation: str, choice: str | None, parallel: bool, output: Any, stream: bool
) -> None:
    """Bodies for every case (tools, results, images, choices, output, stream) fit CreateChatCompletionRequest."""
    request = _request(
        conversation, choice, parallel, output, temperature=0.2, max_tokens=50, seed=1, stop=["END"]
    )
    for provider in ("openai", "groq", "deepseek", "openrouter", "openai-compatible"):
        body = build_body(request, "gpt-4o-mini", PROVIDERS[provider], stream=stream)
        assert problems("CreateChatCompletionRequest", body) == [], provider


def test_the_spec_check_can_fail() -> None:
    """A body with Mistral's "any" and a call without a type is refused by the spec check."""
    body = build_body(_request("text", "required", False, None), "m", PROVIDERS["mistral"])
    assert body["tool_choice"] == "any"
    assert problems("CreateChatCompletionRequest", body) != []


def test_openai_body_shape() -> None:
    """Messages, tools, choice and settings land where OpenAI expects them."""
    request = _request("tool-results", "get_weather", True, OUTPUT, max_tokens=50, top_p=0.5)
    body = build_body(request, "gpt-4o-mini", PROVIDERS["openai"], stream=True)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False
    assert body["max_completion_tokens"] == 50
    assert "max_tokens" not in body
    assert body["top_p"] == 0.5
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": dict(OUTPUT.schema), "strict": True},
    }
    assistant = body["messages"][2]
    assert assistant == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":null}'},
            },
            {
                "id": "call_2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Tokyo","unit":"C"}'},
            },
        ],
    }
    assert body["messages"][3:5] == [
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: timeout"},
    ]
    assert body["tools"][1] == {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the time.",
            "parameters": {
                "type": "object",
                "properties": {},
                "additionalProperties": False,
                "required": [],
            },
            "strict": True,
        },
    }


@pytest.mark.parametrize("provider", ["openai", "mistral"])
def test_a_users_stream_options_are_kept_when_streaming_and_not_sent_otherwise(
    provider: str,
) -> None:
    """stream_options from the settings: include_usage merged into them when streaming (where the provider takes it), and no stream_options without stream (the spec's rule), in built and encoded bodies."""
    asked = {"include_obfuscation": False}
    request = ModelRequest([Message.user("x")], settings={"stream_options": asked})
    row = PROVIDERS[provider]
    streamed = {"include_usage": True, **asked} if row.stream_usage_option else asked
    for stream, expected in ((True, streamed), (False, None)):
        body = build_body(request, "m", row, stream=stream)
        assert body.get("stream_options") == expected, stream
        assert encode_body(request, "m", row, stream=stream) == dumps(body)
    assert asked == {"include_obfuscation": False}  # the user's object is not changed


def test_strict_mode_by_provider() -> None:
    """OpenAI sends a strict-compatible schema strict; the others only when the tool asks."""
    optional = ToolDefinition(
        "f",
        "",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a"],
        },
    )
    request = ModelRequest((Message.user("x"),), (optional,))
    openai = build_body(request, "m", PROVIDERS["openai"])["tools"][0]["function"]
    assert openai["strict"] is True
    assert openai["parameters"]["required"] == ["a", "b"]
    assert openai["parameters"]["properties"]["b"]["type"] == ["string", "null"]
    for name in ("groq", "mistral", "openrouter", "openai-compatible", "deepseek"):
        loose = build_body(request, "m", PROVIDERS[name])["tools"][0]["function"]
        assert "strict" not in loose, name
        assert loose["parameters"] == dict(optional.parameters), name
    asked = ModelRequest((Message.user("x"),), (attrs.evolve(optional, strict=True),))
    assert build_body(asked, "m", PROVIDERS["groq"])["tools"][0]["function"]["strict"] is True


def test_images_and_files_become_content_parts() -> None:
    """URLs pass through, bytes become data URLs, PDFs file parts and WAV input_audio."""
    body = build_body(ModelRequest(CONVERSATIONS["images"]), "gpt-4o", PROVIDERS["openai"])
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "image_url", "file", "input_audio"]
    assert parts[1]["image_url"]["url"] == "https://example.com/cat.png"
    assert parts[2]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert parts[3]["file"] == {
        "file_data": "data:application/pdf;base64,JVBERi0xLjQ=",
        "filename": "a.pdf",
    }
    assert parts[4]["input_audio"]["format"] == "wav"


def test_parallel_tool_calls_only_when_asked_and_only_with_tools() -> None:
    """Some models reject the parameter, and OpenAI refuses it without tools."""
    plain = build_body(ModelRequest((Message.user("x"),), (WEATHER,)), "m", PROVIDERS["openai"])
    assert "parallel_tool_calls" not in plain
    assert "tool_choice" not in plain
    no_tools = build_body(
        ModelRequest((Message.user("x"),), settings={"parallel_tool_calls": True}),
        "m",
        PROVIDERS["openai"],
    )
    assert "parallel_tool_calls" not in no_tools
    assert "tools" not in no_tools


def test_named_choice_must_name_a_tool() -> None:
    """A tool_choice naming no tool of the request is refused with the tool list."""
    with pytest.raises(ModelConfigError, match=r"'nope' names no tool.*get_weather, get_time"):
        build_body(_request("text", "nope", False, None), "m", PROVIDERS["openai"])


def test_file_by_url_is_refused_with_the_reason() -> None:
    """Chat Completions takes files inline only; a URL-only file says so."""
    request = ModelRequest(
        (Message.user("read", FilePart(url="https://x/a.pdf", media_type="application/pdf")),)
    )
    with pytest.raises(ModelConfigError, match="inline only"):
        build_body(request, "m", PROVIDERS["openai"])


def test_mistral_quirks() -> None:
    """Mistral: "any", no tools for "none", random_seed, no stream_options, 9-character ids."""
    mistral = PROVIDERS["mistral"]
    assert (
        build_body(_request("text", "required", False, None), "m", mistral)["tool_choice"] == "any"
    )
    none = build_body(_request("text", "none", False, None), "m", mistral)
    assert "tools" not in none
    assert "tool_choice" not in none
    body = build_body(
        _request("tool-results", None, False, None, seed=7), "m", mistral, stream=True
    )
    assert body["random_seed"] == 7
    assert "seed" not in body
    assert "stream_options" not in body
    assert body["stream"] is True
    calls = [c["id"] for c in body["messages"][2]["tool_calls"]]
    results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in calls)
    assert results == calls
    assert len(set(calls)) == 2


def test_mistral_names_a_tools_images_by_the_id_it_sent() -> None:
    """The note before a tool's images names the call by its rewritten Mistral id, the one
    its tool_calls and tool message carry: the original id appears nowhere in the body."""
    image = ImagePart(b"\x89PNG\r\n\x1a\n0000", media_type="image/png")
    messages = [
        Message.user("go"),
        Message("assistant", [ToolCallPart("call_1", "shot", "{}")]),
        Message(
            "tool", [ToolResultPart("call_1", "shot", "here", parts=[TextPart("here"), image])]
        ),
    ]
    body = build_body(ModelRequest(messages), "mistral-large-latest", PROVIDERS["mistral"])
    sent = mistral_id("call_1")
    assert body["messages"][1]["tool_calls"][0]["id"] == sent
    assert body["messages"][2]["tool_call_id"] == sent
    note = body["messages"][-1]["content"][0]["text"]
    assert note == f"Images and files returned by tool call {sent} (shot):"
    assert "call_1" not in json.dumps(body)


def test_mistral_ids_are_deterministic_and_keep_fitting_ids() -> None:
    """The same id always maps the same way; Mistral's own ids pass unchanged."""
    assert mistral_id("call_0fypS1hVX") == mistral_id("call_0fypS1hVX")
    assert mistral_id("call_0fypS1hVX") != mistral_id("call_0fypS1hVY")
    assert mistral_id("rHU0eZiMa") == "rHU0eZiMa"
    assert re.fullmatch(r"[A-Za-z0-9]{9}", mistral_id("toolu_01ABC"))


def test_llama_cpp_has_no_named_choice() -> None:
    """llama.cpp: a named choice becomes "required" with only that tool offered."""
    body = build_body(
        _request("text", "get_weather", False, None), "m", SERVER_PRESETS["llama.cpp"]
    )
    assert body["tool_choice"] == "required"
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]
    assert body["parallel_tool_calls"] is True  # llama.cpp's own default is one call
    asked = _request("text", None, True, None)
    assert build_body(asked, "m", SERVER_PRESETS["llama.cpp"])["parallel_tool_calls"] is False


def _by(provider: str, messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """``messages`` with every reasoning part made ``provider``'s."""
    return tuple(
        attrs.evolve(
            m,
            parts=tuple(
                attrs.evolve(p, provider=provider) if isinstance(p, ReasoningPart) else p
                for p in m.parts
            ),
        )
        for m in messages
    )


def test_deepseek_sends_reasoning_back_and_uses_json_object() -> None:
    """DeepSeek: reasoning_content on tool turns; output as json_object plus the schema in a system message."""
    request = _request("tool-results", None, False, OUTPUT)
    request = attrs.evolve(request, messages=_by("deepseek", request.messages))
    body = build_body(request, "deepseek-reasoner", PROVIDERS["deepseek"])
    assert body["messages"][2]["reasoning_content"] == "Two cities, two calls."
    assert "reasoning_content" not in body["messages"][5]  # a text-only turn
    assert body["response_format"] == {"type": "json_object"}
    assert body["messages"][-1]["role"] == "system"
    assert '"x"' in body["messages"][-1]["content"]
    openai = build_body(_request("tool-results", None, False, None), "gpt-4o", PROVIDERS["openai"])
    assert "reasoning_content" not in openai["messages"][2]


def test_deepseek_gets_only_its_own_reasoning_back() -> None:
    """Another provider's reasoning on a tool turn is no DeepSeek thinking: an empty
    reasoning_content goes, and a note says what was left out (it went as DeepSeek's)."""
    request = _request("tool-results", None, False, None)  # the reasoning is OpenAI's
    body = build_body(request, "deepseek-reasoner", PROVIDERS["deepseek"])
    assert body["messages"][2]["reasoning_content"] == ""
    notes = reasoning_notes(request.messages, PROVIDERS["deepseek"])
    assert any(
        "reasoning from openai left out: deepseek takes back its own reasoning only" in n
        for n in notes
    )
    noted: list[str] = []
    sent = encode_body(request, "deepseek-reasoner", PROVIDERS["deepseek"], notes=noted)
    assert sent is not None
    assert json.loads(sent) == body
    assert tuple(noted) == notes


@pytest.mark.parametrize(("conversation", "choice", "parallel", "output", "stream"), MATRIX)
def test_every_mistral_body_validates_against_mistrals_spec(
    conversation: str, choice: str | None, parallel: bool, output: Any, stream: bool
) -> None:
    """Mistral bodies (its tool_choice words, random_seed, document and audio chunks) fit its ChatCompletionRequest."""
    request = _request(
        conversation, choice, parallel, output, temperature=0.2, max_tokens=50, seed=1, stop=["END"]
    )
    body = build_body(request, "mistral-large-latest", PROVIDERS["mistral"], stream=stream)
    assert mistral_problems(body) == []


def test_the_mistral_spec_check_can_fail() -> None:
    """An OpenAI-style body with stream_options is refused by Mistral's spec (extra keys)."""
    body = build_body(_request("text", None, False, None), "m", PROVIDERS["openai"], stream=True)
    assert mistral_problems(body) != []


def test_tool_results_come_first_whatever_message_carries_them() -> None:
    """Results in a user or assistant message become tool messages ahead of its other parts."""
    call = ToolCallPart("call_1", "get_weather", '{"city": "Paris", "unit": null}')
    messages = (
        Message.user("weather?"),
        Message("assistant", (call,)),
        Message("user", (ToolResultPart("call_1", "get_weather", "12 C"), TextPart("thanks"))),
        Message.tool(),
        Message("user", (TextPart("a"), TextPart("b"))),
    )
    body = build_body(ModelRequest(messages, (WEATHER,)), "gpt-4o-mini", PROVIDERS["mistral"])
    sent_id = mistral_id("call_1")
    assert body["messages"] == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": sent_id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": call.arguments_text},
                }
            ],
        },
        {"role": "tool", "tool_call_id": sent_id, "content": "12 C"},
        {"role": "assistant", "content": "OK"},  # Mistral takes no user right after a tool
        {"role": "user", "content": "thanks"},
        {"role": "user", "content": "ab"},
    ]


_ALL_ROWS = [*PROVIDERS.values(), *SERVER_PRESETS.values()]


@pytest.mark.parametrize(("conversation", "choice", "parallel", "output", "stream"), MATRIX)
def test_encoded_bodies_are_the_bytes_of_the_built_ones(
    conversation: str, choice: str | None, parallel: bool, output: Any, stream: bool
) -> None:
    """encode_body, from messages' memoized JSON, sends exactly dumps(build_body) for every row, twice."""
    request = _request(conversation, choice, parallel, output, temperature=0.2, stop=["END"])
    for row in _ALL_ROWS:
        expected = dumps(build_body(request, "m", row, stream=stream))
        for _ in range(2):  # the second time from the memo
            encoded = encode_body(request, "m", row, stream=stream)
            assert encoded is None or encoded == expected, row.name
    # The memo is only skipped where it must be: here, json_object output,
    # reasoning left out (the `build_body` path notes it in the report), and a
    # tool's images (sent in a user message after the tool messages).
    openai = PROVIDERS["openai"]
    if output is None:
        skipped = encode_body(request, "m", openai) is None
        media = conversation == "tool-media-then-user"
        assert skipped == (bool(reasoning_notes(request.messages, openai)) or media)


def test_a_tool_step_s_messages_encode_like_their_dicts_whatever_their_strings() -> None:
    """A prompt, a tool step's calls and results, with quotes, escapes, control and non-ASCII text: dumps(build_body)."""
    texts = ['say "hi"\\n', "tab\there\x00\x1f\x7f", "caf\u00e9 \u2028 \U0001f600", "</script>", ""]
    calls = [
        ToolCallPart(
            f"call_{i}{text}", f"tool{i}", json.dumps({"q": text}, ensure_ascii=i % 2 == 0)
        )
        for i, text in enumerate(texts)
    ]
    results = [
        ToolResultPart(c.id, c.name, text, i % 2 == 0)
        for i, (c, text) in enumerate(zip(calls, texts, strict=True))
    ]
    for row in _ALL_ROWS:
        request = ModelRequest(
            (
                *(Message.user(text) for text in texts),
                Message.assistant("", calls),
                Message.tool(*results),
            ),
            (WEATHER,),
        )
        expected = dumps(build_body(request, "m", row))
        for _ in range(2):  # the second time from the memo
            assert encode_body(request, "m", row) == expected, row.name


def test_encode_body_falls_back_where_messages_do_not_encode_alone() -> None:
    """A tool's image (sent in a user message after the tool messages) or a setting adding tools: None.

    A lone surrogate is no reason to fall back: it is sent as U+FFFD.
    """
    media = ToolResultPart("call_1", "get_weather", "", parts=(ImagePart(data=PNG),))
    with_media = ModelRequest((Message.user("x"), Message.tool(media)), (WEATHER,))
    assert encode_body(with_media, "m", PROVIDERS["openai"]) is None
    added = ModelRequest((Message.user("x"),), (WEATHER,), settings={"tools": []})
    assert encode_body(added, "m", PROVIDERS["openai"]) is None
    surrogate = ModelRequest((Message.user("a\ud800"),), ())
    assert b'"content":"a\xef\xbf\xbd"' in encode_body(surrogate, "m", PROVIDERS["openai"])


def test_a_memoized_message_is_re_encoded_for_another_provider_and_not_pickled() -> None:
    """The memo is keyed by the provider row; pickles and copies of a message leave it behind."""
    call = ToolCallPart("call_1", "get_weather", '{"city":"Paris","unit":null}')
    request = ModelRequest((Message.user("x"), Message.assistant("", [call])), (WEATHER,))
    openai, deepseek = PROVIDERS["openai"], PROVIDERS["deepseek"]
    assert encode_body(request, "m", openai) == dumps(build_body(request, "m", openai))
    # DeepSeek sends reasoning_content back on a tool turn: not OpenAI's memo.
    assert encode_body(request, "m", deepseek) == dumps(build_body(request, "m", deepseek))
    assert b"reasoning_content" in (encode_body(request, "m", deepseek) or b"")
    assert b"reasoning_content" not in (encode_body(request, "m", openai) or b"")
    copied = pickle.loads(pickle.dumps(request.messages[1]))
    assert copied == request.messages[1]
    assert wire_memo(request.messages[1], openai) is not None  # the last one encoded
    assert wire_memo(copied, openai) is None


def test_a_look_alike_message_with_a_memo_attribute_is_encoded_and_memoized() -> None:
    """A message-like object of the caller's own (role, parts and a ``_wire`` attribute, not a
    `Message`) is encoded as `build_body` encodes it, and keeps its memo as a `Message` does."""

    class LookAlike:
        _wire: Any = None

        def __init__(self, role: str, parts: tuple[Any, ...]) -> None:
            self.role, self.parts = role, parts

    message = LookAlike("user", (TextPart("x"),))
    request = ModelRequest((message,), ())  # type: ignore[arg-type]
    openai = PROVIDERS["openai"]
    assert encode_body(request, "m", openai) == dumps(build_body(request, "m", openai))
    assert wire_memo(message, openai) is not None  # type: ignore[arg-type]
    assert encode_body(request, "m", openai) == dumps(build_body(request, "m", openai))


@attrs.define
class Editable:
    """A tool-like whose schema stays the caller's dict (a `ToolDefinition` keeps a frozen copy)."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool | None = None


def test_a_tool_schema_changed_in_place_is_sent_changed() -> None:
    """The memoized tools entry follows a tool-like's schema edited between requests."""
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    request = ModelRequest((Message.user("x"),), (Editable("t", "", schema),))  # type: ignore[arg-type]
    openai = PROVIDERS["openai"]
    first = encode_body(request, "m", openai)
    schema["properties"]["b"] = {"type": "string"}
    second = encode_body(request, "m", openai)
    assert first != second
    assert second == dumps(build_body(request, "m", openai))
    assert b'"b":{"type":' in (second or b"")


def test_the_memoized_frame_follows_settings_schemas_and_output() -> None:
    """One tools tuple, requests that differ in settings (1 vs 1.0), schema or output: each its own bytes."""
    parameters: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}
    tools = (Editable("get_weather", "Weather.", parameters),)
    messages = (Message.user("x"),)
    openai = PROVIDERS["openai"]
    requests = [
        ModelRequest(messages, tools),
        ModelRequest(messages, tools, settings={"temperature": 1}),
        ModelRequest(messages, tools, settings={"temperature": 1.0}),
        ModelRequest(messages, tools, "required"),
        ModelRequest(messages, tools, output=OutputSpec("answer", {"type": "object"})),
        ModelRequest(messages, tools),
    ]
    for request in requests:
        for stream in (False, True):
            expected = dumps(build_body(request, "m", openai, stream=stream))
            assert encode_body(request, "m", openai, stream=stream) == expected
    assert b'"temperature":1.0' in (encode_body(requests[2], "m", openai) or b"")
    parameters["properties"]["days"] = {"type": "integer"}  # mutated in place: compiled anew
    assert encode_body(requests[0], "m", openai) == dumps(build_body(requests[0], "m", openai))
    assert b'"days"' in (encode_body(requests[0], "m", openai) or b"")


def test_the_memoized_frame_sees_a_schema_value_change_type_in_place() -> None:
    """A schema edited in place from 1 to 1.0 or True (equal in Python) sends the new value."""
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 1}},
    }
    tools = (
        ToolDefinition("first", "First.", {"type": "object"}),
        Editable("count", "Count.", parameters),
    )
    request = ModelRequest((Message.user("x"),), tools)  # type: ignore[arg-type]
    openai = PROVIDERS["openai"]
    for value, text in ((1, b'"maximum":1}'), (1.0, b'"maximum":1.0}'), (True, b'"maximum":true}')):
        parameters["properties"]["n"]["maximum"] = value
        sent = encode_body(request, "m", openai)
        assert sent == dumps(build_body(request, "m", openai))
        assert text in (sent or b""), value


def test_a_request_compiles_each_tool_once() -> None:
    """Encoding a request compiles each tool once (each compilation reads the tool's description once)."""

    class Counted:
        name, parameters, strict = "f", {"type": "object"}, None

        def __init__(self) -> None:
            self.reads = 0

        @property
        def description(self) -> str:
            self.reads += 1
            return "Counted."

    tool = Counted()
    request = ModelRequest((Message.user("hi"),), (tool,))  # type: ignore[arg-type]
    encode_body(request, "m", PROVIDERS["openai"])
    assert tool.reads == 1


def test_a_tool_that_is_not_a_tool_definition_is_encoded_anew_each_request() -> None:
    """A duck-typed tool whose description changes between requests sends the new one."""
    from types import SimpleNamespace

    tool = SimpleNamespace(name="f", description="old", parameters={"type": "object"}, strict=None)
    request = ModelRequest((Message.user("hi"),), (tool,))  # type: ignore[arg-type]
    openai = PROVIDERS["openai"]
    first = json.loads(encode_body(request, "m", openai) or b"")
    tool.description = "new"
    second = json.loads(encode_body(request, "m", openai) or b"")
    assert [b["tools"][0]["function"]["description"] for b in (first, second)] == ["old", "new"]


@pytest.mark.parametrize("role", ["system", "user"])
def test_reasoning_in_a_system_or_user_message_is_noted_as_left_out(role: str) -> None:
    """Chat Completions sends a system or user message's text only: its reasoning is noted."""
    model = OpenAIChatModel("m", provider="openai", api_key="sk-" + "k" * 20)
    message = Message(role, (TextPart("Be brief."), ReasoningPart("Why brief.")))
    request = ModelRequest((message, Message.user("Hi")) if role == "system" else (message,))
    notes = model.prepare(request).report.notes
    body = model._outgoing(request, False)[1]
    model.close()
    assert notes == (
        f"messages[0]: reasoning left out: openai takes no reasoning in a {role} message",
    )
    assert type(body) is bytes  # the memoized path, which logs the note too
    assert body == dumps(model.prepare(request).body)
    assert b"Why brief" not in body


def _without_reasoning(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    return tuple(
        Message(m.role, tuple(p for p in m.parts if not isinstance(p, ReasoningPart)))
        for m in messages
    )


@pytest.mark.parametrize("family", ["openai", "mistral", "deepseek"])
@pytest.mark.parametrize("reasoning", [True, False], ids=["with-reasoning", "without"])
def test_the_memoized_body_logs_what_prepare_reports_and_sends_build_bodys_bytes(
    family: str, reasoning: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A request the codec changes on the way (reasoning left out, ``max_tokens`` and ``seed``
    renamed, ``tool_choice="none"`` dropping the tools on Mistral) logs on the model's own
    path (`_outgoing`: `encode_body`'s memoized JSON when it takes the request) exactly the
    notes `prepare`'s report holds and the `build_body` path logs, and sends the same bytes.
    Reasoning left out is noted (the docs promise it is never dropped silently), on the
    memoized path too: every request takes it."""
    model = OpenAIChatModel("m", provider=family, api_key="sk-" + "k" * 20)
    messages = CONVERSATIONS["tool-results"]
    request = ModelRequest(
        messages if reasoning else _without_reasoning(messages),
        (WEATHER,),
        "none",
        settings={"max_tokens": 50, "seed": 7, "temperature": 0},
    )
    notes = model.prepare(request).report.notes
    expected = [f"{model.name} request: {note}" for note in notes]
    sent, logged = [], []
    for outgoing in (model._outgoing, functools.partial(ProviderModel._outgoing, model)):
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="toolfold.adapters"):
            _, body, _ = outgoing(request, False)
        sent.append(body if type(body) is bytes else dumps(body))
        logged.append([(r.levelno, r.getMessage()) for r in caplog.records])
    memoized = type(model._outgoing(request, False)[1]) is bytes
    model.close()
    assert sent[0] == sent[1]
    # The same notes; the second request carries the same message again: DEBUG.
    assert logged == [
        [(logging.INFO, line) for line in expected],
        [(logging.DEBUG, line) for line in expected],
    ]
    # The reasoning is OpenAI's: left out and noted everywhere, DeepSeek included,
    # which takes back its own only.
    assert bool(notes) == reasoning
    assert memoized
    if notes:
        why = (
            "reasoning from openai left out: deepseek takes back its own reasoning only"
            if family == "deepseek"
            else f"reasoning left out: {model.provider.name} takes no reasoning back"
        )
        assert notes == (f"messages[2]: {why}",)


def test_a_reasoning_run_encodes_each_message_once_and_notes_each_message_once_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A run on a reasoning model the provider takes no reasoning back from (a reasoning model
    behind vLLM or llama.cpp): each request still sends the conversation from the messages'
    memoized JSON, and logs what it leaves out, at its messages' positions, as `prepare`
    reports it: at INFO for the message new to this request, at DEBUG for the earlier ones it
    carries again (it logged every note of every request at INFO: a run's log grew with the
    square of its steps). Such a request used to build and encode the whole body every time."""
    model = OpenAIChatModel(
        "m", provider="openai-compatible", server="vllm", base_url="http://127.0.0.1:9/v1"
    )
    thinking = Message("assistant", (ReasoningPart("Hm."), CALL))
    messages: tuple[Message, ...] = (Message.system("Be brief."), Message.user("Time?"))
    for step in range(3):
        messages = (*messages, thinking, Message.tool(ToolResultPart("call_9", "get_time", "9")))
        thinking = Message("assistant", (ReasoningPart(f"Step {step}."), CALL))
        request = ModelRequest(messages, (TIME,))
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="toolfold.adapters"):
            body = model._outgoing(request, False)[1]
        notes = model.prepare(request).report.notes
        assert type(body) is bytes
        assert body == dumps(model.prepare(request).body)
        assert [r.getMessage() for r in caplog.records] == [
            f"{model.name} request: {note}" for note in notes
        ]
        assert [r.levelno for r in caplog.records] == [logging.DEBUG] * step + [logging.INFO]
        assert [note.split(":")[0] for note in notes] == [
            f"messages[{2 + 2 * i}]" for i in range(step + 1)
        ]
        memo = wire_memo(messages[2], model.provider)
        assert memo is not None  # its JSON and its note, kept
        assert not isinstance(memo, str)
    model.close()


@pytest.mark.parametrize(
    ("family", "parts", "note"),
    [
        (
            "openai",
            (ReasoningPart("", signature="sig", provider="anthropic"),),
            "takes no reasoning back",
        ),
        ("openai", (ReasoningPart(""),), None),
        (
            "deepseek",
            (ReasoningPart("Hm."), TextPart("Hi.")),
            "takes reasoning back on turns that call tools only",
        ),
        (
            "deepseek",
            (ReasoningPart("Hm.", signature="sig", provider="anthropic"), CALL),
            "reasoning from anthropic left out: deepseek takes back its own reasoning only",
        ),
        ("deepseek", (ReasoningPart("Hm.", provider="deepseek"), CALL), None),
        (
            "deepseek",
            (ReasoningPart("Hm."), CALL),
            "reasoning from an unknown provider left out: deepseek takes back its own",
        ),
        (
            "deepseek",
            (ReasoningPart("", signature="sig", provider="deepseek"), CALL),
            "reasoning's signature left out",
        ),
    ],
)
def test_reasoning_left_out_is_noted_in_the_report_and_logged(
    family: str, parts: tuple[Any, ...], note: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """Each reasoning part Chat Completions cannot send back is one note naming its message;
    a part with nothing in it, or one sent whole, is none."""
    model = OpenAIChatModel("m", provider=family, api_key="sk-" + "k" * 20)
    request = ModelRequest((Message.user("Hi"), Message("assistant", parts), Message.user("Go on")))
    with caplog.at_level(logging.INFO, logger="toolfold.adapters"):
        body = model._outgoing(request, False)[1]
    model.close()
    notes = model.prepare(request).report.notes
    if note is None:
        assert notes == ()
        assert type(body) is bytes
        assert not caplog.records
    else:
        assert len(notes) == 1
        assert notes[0].startswith("messages[1]: ")
        assert note in notes[0]
        assert [r.getMessage() for r in caplog.records] == [f"{model.name} request: {notes[0]}"]


def test_a_note_is_logged_at_info_once_per_message_and_model(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first time a model notes a message, INFO; that message again, DEBUG. Messages are
    told apart by identity (another run's equal message is noted again at INFO), and each
    model keeps its own record (another model sending the message notes it at INFO)."""
    thinking = Message("assistant", (ReasoningPart("Hm."), TextPart("Hi.")))
    first = ModelRequest((Message.user("Hi"), thinking, Message.user("Go on")))
    again = ModelRequest((*first.messages, Message.assistant("Sure."), Message.user("More")))
    other_run = ModelRequest(  # equal messages, other objects
        (Message.user("Hi"), attrs.evolve(thinking), Message.user("Go on"))
    )
    model, other_model = (
        OpenAIChatModel("m", provider="openai", api_key="sk-" + "k" * 20) for _ in range(2)
    )
    levels = []
    for sender, request in (
        (model, first),
        (model, again),
        (model, other_run),
        (other_model, first),
    ):
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="toolfold.adapters"):
            sender._outgoing(request, False)
        levels.append([(r.levelno, r.getMessage()) for r in caplog.records])
    model.close()
    other_model.close()
    line = f"{model.name} request: messages[1]: reasoning left out: openai takes no reasoning back"
    assert levels == [
        [(logging.INFO, line)],
        [(logging.DEBUG, line)],
        [(logging.INFO, line)],
        [(logging.INFO, line)],
    ]


def test_the_record_of_logged_notes_forgets_a_freed_message() -> None:
    """The record holds its messages weakly: a run's messages, once freed, leave no entry (a
    long-lived model does not grow with the runs it served); a note naming no message of the
    request (a setting's) is known by its text."""
    notes = LoggedNotes()
    message = Message("assistant", (ReasoningPart("Hm."),))
    messages = (Message.user("Hi"), message)
    assert notes.first("messages[1]: left out", messages)
    assert not notes.first("messages[1]: left out", messages)
    assert notes.first("messages[1]: also this", messages)
    assert notes.first("messages[7]: out of range", messages)
    assert notes.first("not about a message", messages)
    assert not notes.first("not about a message", messages)  # (known by its text)
    assert len(notes._by_message) == 1
    del messages, message
    gc.collect()
    assert notes._by_message == {}


def test_the_record_of_setting_notes_is_bounded() -> None:
    """Past the notes naming no message a model remembers, each new one is logged as a first every time (never dropped to DEBUG unseen), and the record stays bounded."""
    notes = LoggedNotes()
    assert all(notes.first(f"setting {i} left out", ()) for i in range(_MAX_UNBOUND))
    assert notes.first("one more", ())
    assert notes.first("one more", ())
    assert not notes.first("setting 0 left out", ())
    assert len(notes._unbound) == _MAX_UNBOUND


def _roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def test_mistral_gets_an_assistant_turn_between_tool_results_and_a_user_message() -> None:
    """Mistral refuses a user message right after a tool message ("Unexpected role 'user'
    after role 'tool'"): one assistant message goes between them, before the tool's image and
    before a user message with images, built or encoded from the memo; OpenAI gets none."""
    call = ToolCallPart("call_9", "get_time", "{}", {})
    messages = (
        Message.user("What does the camera show?"),
        Message("assistant", (call,)),
        Message.tool(ToolResultPart("call_9", "get_time", "", parts=(ImagePart(data=PNG),))),
    )
    mistral = PROVIDERS["mistral"]
    media = build_body(ModelRequest(messages, (TIME,)), "m", mistral)["messages"]
    assert _roles(media) == ["user", "assistant", "tool", "assistant", "user"]
    assert media[3] == {"role": "assistant", "content": "OK"}
    assert media[4]["content"][1]["type"] == "image_url"
    follow_up = (
        Message.user("Time?"),
        Message("assistant", (call,)),
        Message.tool(ToolResultPart("call_9", "get_time", "12:00")),
        Message.user("And this?", ImagePart(url="https://example.com/cat.png")),
    )
    request = ModelRequest(follow_up, (TIME,))
    sent = build_body(request, "m", mistral)
    assert _roles(sent["messages"]) == ["user", "assistant", "tool", "assistant", "user"]
    assert mistral_problems(sent) == []
    for _ in range(2):  # the second time from the memo
        assert encode_body(request, "m", mistral) == dumps(sent)
    openai = build_body(request, "m", PROVIDERS["openai"])["messages"]
    assert _roles(openai) == ["user", "assistant", "tool", "user"]


def test_an_audio_answer_keeps_its_transcript_and_audio_and_goes_back_by_id() -> None:
    """message.audio: the transcript is the text, the audio a FilePart; the next turn sends its id."""
    audio = {
        "id": "audio_1",
        "expires_at": 1700000000,
        "data": "UklGRgAAAABXQVZF",
        "transcript": "Hello!",
    }
    message = {"role": "assistant", "content": None, "audio": audio}
    answer = {"id": "c1", "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}
    parsed = parse_response(answer, "openai")
    assert parsed.message.text == "Hello!"
    (sound,) = [p for p in parsed.message.parts if isinstance(p, FilePart)]
    assert (sound.data, sound.media_type) == (b"RIFF\x00\x00\x00\x00WAVE", "audio/wav")
    request = ModelRequest([Message.user("hi"), parsed.message, Message.user("again")])
    prepared = OpenAIChatModel("gpt-4o-audio-preview", api_key="k" * 20).prepare(request)
    assert prepared.body["messages"][1] == {
        "role": "assistant",
        "content": "Hello!",
        "audio": {"id": "audio_1"},
    }
    assert prepared.report.notes == ()
    assert problems("CreateChatCompletionRequest", prepared.body) == []
    elsewhere = OpenAIChatModel("m", provider="mistral", api_key="k" * 20).prepare(request)
    assert elsewhere.body["messages"][1] == {"role": "assistant", "content": "Hello!"}
    assert elsewhere.report.notes == (
        "messages[1]: audio answer from openai left out: its id means nothing to mistral "
        "(its transcript is sent)",
    )


@pytest.mark.parametrize("provider", ["openai", "mistral"])
@pytest.mark.parametrize(
    "media", [ImagePart(b"\x89PNG"), FilePart(b"%PDF", media_type="application/pdf")]
)
def test_an_image_or_file_in_an_assistant_message_is_refused(
    provider: str, media: ImagePart | FilePart
) -> None:
    """An assistant message's image or file (not an audio answer) is refused, never dropped unsaid."""
    request = ModelRequest(
        [
            Message.user("draw"),
            Message("assistant", [TextPart("here:"), media]),
            Message.user("more"),
        ]
    )
    with pytest.raises(ModelConfigError, match=f"assistant message.*not {media.kind!r}"):
        OpenAIChatModel("m", provider=provider, api_key="k" * 20).prepare(request)


def test_a_responses_output_item_marker_is_noted_by_what_it_is_not_as_reasoning() -> None:
    """A Responses output-item marker left out of a Chat request is noted as that item, not reasoning."""
    marker = ReasoningPart("", None, "openai", {"output_item": ["web_search_call", "ws_1"]})
    request = ModelRequest(
        (Message.user("hi"), Message("assistant", (marker, TextPart("found"))), Message.user("ok"))
    )
    model = OpenAIChatModel("m", provider="openai", api_key="sk-" + "k" * 20)
    notes = model.prepare(request).report.notes
    model.close()
    assert notes == (
        "messages[1]: the web_search_call output item from openai left out: "
        "openai cannot take it back",
    )


# OpenRouter's reasoning blocks behind Gemini 3: the encrypted one is its thought signature.
DETAILS = [
    {"type": "reasoning.text", "text": "I will call.", "format": "google-gemini-v1", "index": 0},
    {"type": "reasoning.encrypted", "data": "U0lH", "id": "call_9", "index": 0},
]


def test_openrouter_gets_its_reasoning_details_back_unchanged() -> None:
    """OpenRouter documents that reasoning_details go back unchanged on the assistant
    message (Gemini 3 behind it refuses a tool turn without its signature): the answer's
    blocks are kept and sent back as they came, with no note. They were dropped, and the
    log said "openrouter takes no reasoning back"."""
    answer = {
        "id": "gen-1",
        "model": "google/gemini-3-pro-preview",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "reasoning": "I will call.",
                    "reasoning_details": DETAILS,
                    "tool_calls": [
                        {
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "get_time", "arguments": "{}"},
                        }
                    ],
                },
            }
        ],
    }
    turn = parse_response(answer, "openrouter").message
    messages = (
        Message.user("Time?"),
        turn,
        Message.tool(ToolResultPart("call_9", "get_time", "9")),
    )
    request = ModelRequest(messages, (TIME,))
    openrouter = PROVIDERS["openrouter"]
    body = build_body(request, "google/gemini-3-pro-preview", openrouter)
    assert body["messages"][1]["reasoning_details"] == DETAILS
    assert reasoning_notes(messages, openrouter) == ()
    noted: list[str] = []
    sent = encode_body(request, "google/gemini-3-pro-preview", openrouter, notes=noted)
    assert sent is not None
    assert json.loads(sent) == body
    assert noted == []
    # Elsewhere they are left out, and said.
    openai = build_body(request, "gpt-4o", PROVIDERS["openai"])
    assert "reasoning_details" not in json.dumps(openai)
    assert reasoning_notes(messages, PROVIDERS["openai"]) == (
        "messages[1]: reasoning left out: openai takes no reasoning back",
    )


def test_openrouter_reasoning_without_details_is_noted_truthfully() -> None:
    """OpenRouter reasoning that came without reasoning_details (an upstream that sends
    only the text) is left out, and the note says why: not that OpenRouter takes none."""
    messages = (
        Message.user("Hi"),
        Message("assistant", (ReasoningPart("Hm.", provider="openrouter"), CALL)),
    )
    (note,) = reasoning_notes(messages, PROVIDERS["openrouter"])
    assert "takes its reasoning back as the reasoning_details it answered with" in note


EXTRA = {"extra_content": {"google": {"thought_signature": "U0lH"}}}


@pytest.mark.parametrize("family", ["openai", "mistral", "deepseek", "groq", "openrouter"])
def test_a_gemini_thought_signature_goes_to_geminis_endpoint_only(family: str) -> None:
    """A call's extra_content (Gemini's OpenAI endpoint's thought signature) went to every
    provider: Mistral's ToolCall refuses the unknown key. It is left out elsewhere, noted."""
    call = ToolCallPart("call_9", "get_time", "{}", {}, EXTRA)
    messages = (Message.user("Time?"), Message("assistant", (call,)))
    request = ModelRequest(messages, (TIME,))
    body = build_body(request, "m", PROVIDERS[family])
    assert "extra_content" not in json.dumps(body)
    (note,) = reasoning_notes(messages, PROVIDERS[family])
    assert note.startswith("messages[1]: call call_9's Gemini thought signature left out")
    noted: list[str] = []
    sent = encode_body(request, "m", PROVIDERS[family], notes=noted)
    assert sent is not None
    assert json.loads(sent) == body
    assert noted == [note]
    if family == "mistral":
        assert mistral_problems(body) == []
    gemini = build_body(request, "gemini-3-flash-preview", SERVER_PRESETS["gemini"])
    assert gemini["messages"][1]["tool_calls"][0]["extra_content"] == EXTRA["extra_content"]
    assert reasoning_notes(messages, SERVER_PRESETS["gemini"]) == ()


@pytest.mark.parametrize("server", [None, "vllm", "llama.cpp"])
def test_any_openai_compatible_server_gets_a_calls_extra_content_back(server: str | None) -> None:
    """Gemini 3 behind another URL (Vertex AI's OpenAI endpoint, a gateway) answers a call
    with extra_content.google.thought_signature and refuses the next turn without it:
    an openai-compatible server gets it back as it came, unnoted (round 1 left it out,
    noting "only Gemini takes it back"). A native signature is not guessed into one."""
    row = PROVIDERS["openai-compatible"] if server is None else SERVER_PRESETS[server]
    call = ToolCallPart("call_9", "get_time", "{}", {}, EXTRA)
    messages = (Message.user("Time?"), Message("assistant", (call,)))
    body = build_body(ModelRequest(messages, (TIME,)), "gemini-3-pro-preview", row)
    assert body["messages"][1]["tool_calls"][0]["extra_content"] == EXTRA["extra_content"]
    assert reasoning_notes(messages, row) == ()
    native = ToolCallPart("call_9", "get_time", "{}", {}, {"thought_signature": "TkFU"})
    messages = (Message.user("Time?"), Message("assistant", (native,)))
    assert "extra_content" not in json.dumps(build_body(ModelRequest(messages), "m", row))
    (note,) = reasoning_notes(messages, row)
    assert "native Gemini thought signature left out" in note


@pytest.mark.parametrize("family", ["openai", "groq", "deepseek", "mistral", "openrouter"])
def test_a_named_provider_at_a_gateway_gets_a_calls_extra_content_back(family: str) -> None:
    """`openai:` (or `groq:`, `deepseek:`...) given a base_url of a gateway with Gemini 3
    behind it answers a call with extra_content.google.thought_signature and refuses the
    next turn without it: it goes back as it came, unnoted (round 2 left it out for every
    named provider; main sent it). The provider's own host still gets none, noted."""
    call = ToolCallPart("call_9", "get_time", "{}", {}, EXTRA)
    request = ModelRequest((Message.user("Time?"), Message("assistant", (call,))), (TIME,))
    key = "sk-" + "k" * 20
    for url in ("https://gateway.example/v1", "http://127.0.0.1:4000"):
        gateway = OpenAIChatModel(
            "gemini-3-pro-preview", provider=family, base_url=url, api_key=key
        )
        prepared = gateway.prepare(request)
        assert (
            prepared.body["messages"][1]["tool_calls"][0]["extra_content"] == EXTRA["extra_content"]
        )
        assert prepared.report.notes == ()
        sent = json.loads(gateway._outgoing(request, False)[1])
        assert sent["messages"][1]["tool_calls"][0]["extra_content"] == EXTRA["extra_content"]
    own = OpenAIChatModel("gemini-3-pro-preview", provider=family, api_key=key)
    prepared = own.prepare(request)
    assert "extra_content" not in json.dumps(prepared.body)
    (note,) = prepared.report.notes
    assert "thought signature left out" in note
    assert "extra_content" not in own._outgoing(request, False)[1].decode()


def test_a_native_gemini_signature_goes_to_geminis_openai_endpoint_as_extra_content() -> None:
    """A call made by the native Gemini API keeps thought_signature: on Gemini's OpenAI
    endpoint it goes as extra_content.google.thought_signature (noted). It went without
    one, and Gemini 3 answers 400 for a call missing its signature."""
    call = ToolCallPart("call_9", "get_time", "{}", {}, {"thought_signature": "TkFU"})
    messages = (Message.user("Time?"), Message("assistant", (call,)))
    body = build_body(ModelRequest(messages, (TIME,)), "m", SERVER_PRESETS["gemini"])
    extra = body["messages"][1]["tool_calls"][0]["extra_content"]
    assert extra == {"google": {"thought_signature": "TkFU"}}
    (note,) = reasoning_notes(messages, SERVER_PRESETS["gemini"])
    assert "native Gemini thought signature sent as extra_content" in note
    assert "thought_signature" not in json.dumps(
        build_body(ModelRequest(messages), "m", PROVIDERS["openai"])
    )


@pytest.mark.parametrize(
    ("model", "placeholder"), [("gemini-3-flash-preview", True), ("gemini-2.5-flash", False)]
)
def test_an_unsigned_turn_gets_the_placeholder_on_gemini_3_behind_its_openai_endpoint(
    model: str, placeholder: bool
) -> None:
    """A turn another provider made has no thought signature; Gemini 3 refuses a tool turn
    whose first call has none. On its OpenAI endpoint that call gets Google's placeholder in
    extra_content (noted), as the native adapter sends it; other Gemini models get none."""
    calls = (
        ToolCallPart("toolu_1", "get_time", "{}", {}),
        ToolCallPart("toolu_2", "get_time", "{}", {}),
    )
    messages = (Message.user("Time?"), Message("assistant", calls))
    chat = OpenAIChatModel(
        model,
        provider="openai-compatible",
        base_url="https://generativelanguage.googleapis.com/v1beta/openai",
        api_key="k" * 20,
    )
    request = ModelRequest(messages, (TIME,))
    prepared = chat.prepare(request)
    sent = prepared.body["messages"][1]["tool_calls"]
    expected = {"google": {"thought_signature": "skip_thought_signature_validator"}}
    assert [c.get("extra_content") for c in sent] == [expected if placeholder else None, None]
    assert bool(prepared.report.notes) == placeholder
    assert json.loads(chat._outgoing(request, False)[1]) == prepared.body
    chat.close()


VERTEX_OPENAI = "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/endpoints/openapi"


def test_vertex_ais_openai_endpoint_with_server_gemini_gives_gemini_3_the_placeholder() -> None:
    """Vertex AI names its models google/gemini-3-...; with server="gemini" (its host is not
    detected as Gemini's) an unsigned turn's first call gets the placeholder there too: the
    google/ prefix hid the model's generation, and Gemini 3 refused the turn."""
    messages = (
        Message.user("Time?"),
        Message("assistant", (ToolCallPart("t1", "get_time", "{}", {}),)),
    )
    chat = OpenAIChatModel(
        "google/gemini-3-flash-preview",
        provider="openai-compatible",
        base_url=VERTEX_OPENAI,
        api_key="k" * 20,
        server="gemini",
    )
    sent = chat.prepare(ModelRequest(messages, (TIME,))).body["messages"][1]["tool_calls"]
    expected = {"google": {"thought_signature": "skip_thought_signature_validator"}}
    assert sent[0].get("extra_content") == expected
    chat.close()
