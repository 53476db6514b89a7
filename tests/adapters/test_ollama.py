"""Ollama's native API: OLLAMA_HOST, refusals before any request, the wire shapes, errors, streams."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold import (
    MalformedResponseError,
    ModelConfigError,
    NotFoundError,
    ProviderError,
    StreamError,
    compile_tool,
)
from toolfold.adapters.ollama import (
    DecoderState,
    OllamaModel,
    build_body,
    decode_end,
    decode_line,
    host_from_env,
    parse_response,
)
from toolfold.runtime import (
    ImagePart,
    Message,
    ModelRequest,
    OutputSpec,
    ReasoningPart,
    StreamState,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    finish_stream,
    fold_stream,
)

WEATHER = ToolDefinition(
    "get_weather",
    "Get the weather.",
    {
        "type": "object",
        "$defs": {"Unit": {"enum": ["C", "F"], "description": "Unit."}},
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "unit": {"$ref": "#/$defs/Unit"},
        },
        "required": ["city"],
    },
)
REQUEST = ModelRequest((Message.user("Hi"),))


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("", "http://localhost:11434"),
        ("0.0.0.0", "http://0.0.0.0:11434"),
        ("example.com:8080", "http://example.com:8080"),
        (":9999", "http://127.0.0.1:9999"),
        ("https://ollama.example.com/", "https://ollama.example.com"),
        ("[::1]:1234", "http://[::1]:1234"),
    ],
)
def test_ollama_host_forms(value: str, url: str) -> None:
    """OLLAMA_HOST is read in every form the Ollama CLI accepts."""
    assert host_from_env({"OLLAMA_HOST": value}) == url


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("myhost:abc", "http://myhost:11434"),
        ("myhost:99999", "http://myhost:11434"),
        ("[::1]:abc", "http://[::1]:11434"),
        ("http://myhost:abc/api", "http://myhost/api"),  # the scheme's own port
        ("https://myhost:99999", "https://myhost"),
    ],
)
def test_a_port_that_is_no_port_falls_back_to_the_default_as_the_ollama_cli_does(
    value: str, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """OLLAMA_HOST with a bad port gives the default port, as the CLI and server do (envconfig.Host),
    with a warning naming OLLAMA_HOST: it was a bare ValueError naming neither."""
    with caplog.at_level("WARNING", logger="toolfold.http"):
        assert host_from_env({"OLLAMA_HOST": value}) == url
    assert "OLLAMA_HOST=" in caplog.text
    assert "default port is used" in caplog.text


@pytest.mark.parametrize(
    ("value", "url"),
    [
        ("http://bob:pw@ollama.example.com", "http://bob:pw@ollama.example.com"),
        ("https://bob:pw@ollama.example.com/api", "https://bob:pw@ollama.example.com/api"),
        ("http://bob:pw@10.0.0.5:11434", "http://bob:pw@10.0.0.5:11434"),
        ("http://bob:pw@[::1]", "http://bob:pw@[::1]"),
        ("http://bob:pw@[::1]:8080", "http://bob:pw@[::1]:8080"),
        ("http://bob:pw@ollama.example.com:abc", "http://bob:pw@ollama.example.com"),
        ("http://bob:pw@[::1]:abc", "http://bob:pw@[::1]"),
        ("http://bob:pw@ollama.example.com:", "http://bob:pw@ollama.example.com"),
    ],
)
def test_an_ollama_host_with_a_user_and_password_keeps_its_host(value: str, url: str) -> None:
    """The port is read from the host alone: 'http://bob:pw@host' went to the server 'http://bob'."""
    assert host_from_env({"OLLAMA_HOST": value}) == url


@pytest.mark.parametrize(
    ("value", "shown"),
    [("http://", "'http://'"), ("ftp://x", "'ftp://x'"), ("https:///v1", "'https:///v1'")],
)
def test_an_ollama_host_naming_no_server_is_a_model_config_error(value: str, shown: str) -> None:
    """OLLAMA_HOST that names no server is refused by name, as written: "http://" read as "base_url 'http:'"."""
    with pytest.raises(ModelConfigError, match=f"^OLLAMA_HOST {re.escape(shown)} must start"):
        host_from_env({"OLLAMA_HOST": value})


def test_the_model_uses_ollama_host_unless_given_a_base_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ollama:<model>`` goes to OLLAMA_HOST; an explicit base_url wins; no key is needed."""
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:11500")
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    assert toolfold.model("ollama:qwen3").base_url == "http://gpu-box:11500"
    assert OllamaModel("qwen3", base_url="http://127.0.0.1:1").base_url == "http://127.0.0.1:1"
    monkeypatch.delenv("OLLAMA_HOST")
    assert OllamaModel("qwen3").base_url == "http://localhost:11434"


@pytest.mark.parametrize(
    ("choice", "settings", "words"),
    [
        ("required", {}, "cannot force a tool call"),
        ("get_weather", {}, "cannot force a call of 'get_weather'"),
        ("auto", {"parallel_tool_calls": False}, "no switch for parallel tool calls"),
    ],
)
def test_what_ollama_cannot_do_is_refused_before_any_request(
    http_server: ScriptedServer, choice: str, settings: dict[str, Any], words: str
) -> None:
    """A required or named tool_choice (or serial calls) is a ModelConfigError, and nothing is sent."""
    model = OllamaModel("qwen3", base_url=http_server.url)
    request = ModelRequest((Message.user("x"),), (WEATHER,), choice, None, settings)
    with pytest.raises(ModelConfigError, match=words):
        model.request_sync(request)
    with pytest.raises(ModelConfigError, match=words):
        list(model.stream_sync(request))
    model.close()
    assert http_server.requests == []


def test_tool_choice_none_leaves_the_tools_out() -> None:
    """``none`` has no wire form; not offering the tools says it."""
    sent = build_body(ModelRequest((Message.user("x"),), (WEATHER,), "none"), "qwen3")
    assert "tools" not in sent
    assert "tools" in build_body(ModelRequest((Message.user("x"),), (WEATHER,), "auto"), "qwen3")


def test_the_conversation_on_the_wire() -> None:
    """Calls go back with object arguments and thinking; results as role tool with tool_name; images inline."""
    call = ToolCallPart("call_1", "get_weather", '{"city": "Paris"}', {"city": "Paris"})
    sent = build_body(
        ModelRequest(
            (
                Message.system("Be brief."),
                Message.user("Weather here?", ImagePart(b"\x89PNG")),
                Message("assistant", (ReasoningPart("hmm", provider="ollama"), call)),
                Message.tool(ToolResultPart("call_1", "get_weather", "no station", True)),
            ),
            (WEATHER,),
        ),
        "qwen3",
        stream=True,
    )
    assert sent["stream"] is True
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather here?", "images": ["iVBORw=="]},
        {
            "role": "assistant",
            "content": "",
            "thinking": "hmm",
            "tool_calls": [
                {
                    "id": "call_1",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {
            "role": "tool",
            "tool_name": "get_weather",
            "tool_call_id": "call_1",
            "content": "no station",
        },
    ]


def test_the_tool_schema_goes_through_the_ollama_dialect() -> None:
    """$ref is inlined; minLength (dropped by Ollama's Go structs) moves into the description, reported."""
    sent = build_body(ModelRequest((Message.user("x"),), (WEATHER,)), "qwen3")
    function = sent["tools"][0]["function"]
    assert sent["tools"][0]["type"] == "function"
    assert function["parameters"]["properties"]["unit"] == {
        "enum": ["C", "F"],
        "description": "Unit.",
    }
    assert "$defs" not in function["parameters"]
    assert function["parameters"]["properties"]["city"] == {
        "type": "string",
        "description": "minLength: 1",
    }
    report = compile_tool(WEATHER, "ollama")
    assert {(r.keyword, r.action) for r in report.rewrites} >= {
        ("$ref", "inlined"),
        ("minLength", "moved_to_description"),
    }


def test_settings_become_options_and_output_becomes_format() -> None:
    """max_tokens -> options.num_predict, stop a list; think/keep_alive top level; the output schema as format."""
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    sent = build_body(
        ModelRequest(
            (Message.user("x"),),
            output=OutputSpec("answer", schema),
            settings={
                "max_tokens": 64,
                "temperature": 0,
                "stop": "END",
                "seed": 7,
                "think": True,
                "keep_alive": "5m",
            },
        ),
        "qwen3",
    )
    assert sent["options"] == {"num_predict": 64, "temperature": 0, "stop": ["END"], "seed": 7}
    assert (sent["think"], sent["keep_alive"], sent["format"], sent["stream"]) == (
        True,
        "5m",
        schema,
        False,
    )


@pytest.mark.parametrize(
    "part",
    [
        ImagePart(url="https://e.com/a.png"),
        toolfold.FilePart(b"%PDF", media_type="application/pdf"),
    ],
)
def test_parts_ollama_cannot_take_are_refused(part: Any) -> None:
    """An image by URL or a file is a ModelConfigError (Ollama takes inline images only)."""
    with pytest.raises(ModelConfigError, match="Ollama"):
        build_body(ModelRequest((Message.user("x", part),)), "qwen3")


def test_a_whole_answer_parses() -> None:
    """Thinking, text, calls (an object, or tolerated as a string) and the counts map to neutral values."""
    response = parse_response(
        {
            "model": "qwen3",
            "created_at": "2026-01-01T00:00:00Z",
            "message": {
                "role": "assistant",
                "content": "Checking.",
                "thinking": "User wants weather.",
                "tool_calls": [
                    {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                    {
                        "id": "call_x",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    },
                ],
            },
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 26,
            "eval_count": 9,
        }
    )
    assert [p.kind for p in response.message.parts] == [
        "reasoning",
        "text",
        "tool_call",
        "tool_call",
    ]
    assert response.message.parts[0] == ReasoningPart("User wants weather.", provider="ollama")
    assert response.message.parts[1] == TextPart("Checking.")
    first, second = response.tool_calls
    assert first.id.startswith("call_")
    assert first.arguments == {"city": "Paris"}
    assert (second.id, second.arguments) == ("call_x", {"city": "Oslo"})
    assert (response.finish_reason, response.raw_finish_reason) == ("tool_calls", "stop")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (26, 9)


def test_content_after_a_tool_calls_line_stays_one_text_before_the_calls_as_in_the_whole_answer() -> (
    None
):
    """A stream's content after a ``tool_calls`` line joins the content before it, all before
    the calls, as the whole message has them (``content`` and ``tool_calls`` are apart)."""
    call = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    head = {"model": "qwen3", "created_at": "2026-01-01T00:00:00Z"}
    done = {**head, "done": True, "done_reason": "stop", "prompt_eval_count": 1, "eval_count": 1}
    lines = [
        {**head, "message": {"role": "assistant", "content": "Let me "}, "done": False},
        {
            **head,
            "message": {"role": "assistant", "content": "", "tool_calls": [call]},
            "done": False,
        },
        {**head, "message": {"role": "assistant", "content": "check."}, "done": False},
        {**done, "message": {"role": "assistant", "content": ""}},
    ]
    whole = {
        **done,
        "message": {"role": "assistant", "content": "Let me check.", "tool_calls": [call]},
    }
    decoder, state = DecoderState(), StreamState()
    for line in lines:
        decoder, events = decode_line(decoder, json.dumps(line))
        for event in events:
            state = fold_stream(state, event)
    assert decode_end(decoder) == []
    streamed = finish_stream(state, lambda position: f"never-{position}")
    assert [p.kind for p in streamed.message.parts] == ["text", "tool_call"]
    assert streamed == parse_response(whole)


def test_a_character_split_between_two_lines_comes_whole_in_thinking_and_content() -> None:
    """An emoji a proxy cut by UTF-16 length ("\\ud83d", then "\\ude00") joins again in
    thinking and content; a half nothing completes by the done line is U+FFFD."""
    head = {"model": "qwen3", "created_at": "2026-01-01T00:00:00Z", "done": False}
    messages = [
        {"thinking": "t\ud83d"},
        {"thinking": "\ude00"},
        {"content": "a\ud83d"},
        {"content": "\ude00b\ud83d"},
    ]
    lines = [{**head, "message": {"role": "assistant", **m}} for m in messages]
    lines.append({**head, "done": True, "message": {"role": "assistant", "content": ""}})
    decoder, state = DecoderState(), StreamState()
    for line in lines:
        decoder, events = decode_line(decoder, json.dumps(line))
        for event in events:
            state = fold_stream(state, event)
    thought, text = finish_stream(state, str).message.parts
    assert thought.text == "t\U0001f600"  # type: ignore[union-attr]
    assert text.text == "a\U0001f600b\ufffd"  # type: ignore[union-attr]


@pytest.mark.parametrize("then", ["content", "call"])
def test_a_half_character_held_goes_out_when_another_part_comes_as_in_the_whole_answer(
    then: str,
) -> None:
    """Thinking that ends with a high surrogate, then content (or text, then a call): the
    half goes out (U+FFFD) before what comes next: the parts are the whole answer's, no
    stray third part."""
    head = {"model": "qwen3", "created_at": "2026-01-01T00:00:00Z", "done": False}
    call = {"function": {"name": "f", "arguments": {"q": 1}}}
    if then == "content":
        first, second = {"thinking": "t\ud83d"}, {"content": "a"}
        message: dict[str, Any] = {"thinking": "t\ud83d", "content": "a"}
    else:
        first, second = {"content": "a\ud83d"}, {"content": "", "tool_calls": [call]}
        message = {"content": "a\ud83d", "tool_calls": [call]}
    done = {**head, "done": True, "done_reason": "stop"}
    lines = [{**head, "message": {"role": "assistant", **m}} for m in (first, second)]
    lines.append({**done, "message": {"role": "assistant", "content": ""}})
    decoder, state = DecoderState(), StreamState()
    for line in lines:
        decoder, events = decode_line(decoder, json.dumps(line))
        for event in events:
            state = fold_stream(state, event)
    streamed = finish_stream(state, lambda position: f"never-{position}")
    whole = json.loads(json.dumps({**done, "message": {"role": "assistant", **message}}))
    assert streamed.message.parts == parse_response(whole).message.parts
    assert "\ufffd" in streamed.message.parts[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("message", "path"),
    [
        ({"content": 3}, r"\$\.message\.content"),
        (
            {"tool_calls": [{"function": {"name": 1}}]},
            r"\$\.message\.tool_calls\[0\]\.function\.name",
        ),
        (
            {"tool_calls": [{"function": {"name": "f", "arguments": [1]}}]},
            r"\$\.message\.tool_calls\[0\]\.function\.arguments",
        ),
    ],
)
def test_malformed_answers_name_the_json_path(message: dict[str, Any], path: str) -> None:
    """A value of the wrong type is a MalformedResponseError naming where it is."""
    with pytest.raises(MalformedResponseError, match=path):
        parse_response({"model": "m", "message": message, "done": True})


@pytest.mark.parametrize(
    ("top", "path"),
    [
        ({"eval_count": -2}, "$.eval_count"),
        ({"model": 3}, "$.model"),
        ({"done_reason": []}, "$.done_reason"),
    ],
)
def test_malformed_counts_and_fields_name_the_json_path(top: dict[str, Any], path: str) -> None:
    """A negative count or a non-string model or reason is a MalformedResponseError at its path."""
    with pytest.raises(MalformedResponseError) as caught:
        parse_response({"model": "m", "message": {"content": "hi"}, "done": True, **top})
    assert caught.value.path == path


def test_unknown_model_is_not_found_with_ollamas_message(http_server: ScriptedServer) -> None:
    """Ollama's 404 ``{"error": "model 'x' not found"}`` is a NotFoundError quoting it."""
    http_server.add(Reply(status=404, json={"error": "model 'nope' not found"}))
    model = OllamaModel("nope", base_url=http_server.url, retry=0)
    with pytest.raises(NotFoundError, match="model 'nope' not found"):
        model.request_sync(REQUEST)
    model.close()


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        (
            [
                {"model": "m", "message": {"content": "Hel"}, "done": False},
                {"error": "an error was encountered while running the model"},
            ],
            "error was encountered",
        ),
        ([{"model": "m", "message": {"content": "Hel"}, "done": False}], "before its final"),
    ],
    ids=["error-line", "no-done-line"],
)
def test_broken_streams_are_stream_errors(
    http_server: ScriptedServer, lines: list[Any], words: str
) -> None:
    """An ``{"error": ...}`` line after HTTP 200, or a body without its done line, is a StreamError."""
    chunks = [(json.dumps(line) + "\n").encode() for line in lines]
    http_server.add(Reply(headers={"content-type": "application/x-ndjson"}, chunks=chunks))
    model = OllamaModel("m", base_url=http_server.url, retry=0)
    with pytest.raises(StreamError, match=words):
        list(model.stream_sync(REQUEST))
    model.close()


def test_a_key_for_ollama_cloud_is_a_bearer_token_and_never_shows(
    http_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OLLAMA_API_KEY goes as a bearer token and stays out of repr and errors."""
    key = "ollama-SECRET-key-0123456789"
    monkeypatch.setenv("OLLAMA_API_KEY", key)
    http_server.add(Reply(status=401, json={"error": f"unauthorized: {key}"}))
    model = OllamaModel("m", base_url=http_server.url, retry=0)
    with pytest.raises(ProviderError) as caught:
        model.request_sync(REQUEST)
    model.close()
    assert http_server.requests[0].headers["authorization"] == f"Bearer {key}"
    assert key not in repr(model)
    assert key not in str(caught.value)
    assert key not in caught.value.body


@pytest.mark.parametrize(
    ("reasoning", "provider"),
    [
        (ReasoningPart("claude thinks", "sig", "anthropic"), "anthropic"),
        (ReasoningPart("", "Z3NpZw==", "gemini"), "gemini"),
    ],
    ids=["signed-text", "signature-only"],
)
def test_another_providers_reasoning_is_left_out_and_reported(
    http_server: ScriptedServer,
    caplog: pytest.LogCaptureFixture,
    reasoning: ReasoningPart,
    provider: str,
) -> None:
    """Another provider's reasoning (text or a bare signature) stays off the wire; the model's report and the INFO log say so."""
    parts = (reasoning, TextPart("Hi"))
    request = ModelRequest((Message.user("x"), Message("assistant", parts)))
    note = f"messages[1]: reasoning from {provider} left out: it was written for another provider"
    model = OllamaModel("qwen3", base_url=http_server.url, retry=0)
    prepared = model.prepare(request)
    assert prepared.body["messages"][1] == {"role": "assistant", "content": "Hi"}
    assert (prepared.report.provider, prepared.report.notes) == ("ollama", (note,))
    http_server.add(Reply(json={"model": "qwen3", "message": {"content": "ok"}, "done": True}))
    with caplog.at_level("INFO", logger="toolfold.adapters"):
        model.request_sync(request)
    model.close()
    assert http_server.wait_request().json()["messages"][1] == {
        "role": "assistant",
        "content": "Hi",
    }
    assert [r.getMessage() for r in caplog.records] == [f"ollama:qwen3 request: {note}"]


def test_a_user_message_holding_results_and_text_is_sent_as_chat_completions_sends_it(
    http_server: ScriptedServer,
) -> None:
    """Results in a user message go as role tool messages, its text and image in a user message after them."""
    from toolfold.adapters.openai_chat import PROVIDERS
    from toolfold.adapters.openai_chat import build_body as chat_body

    call = ToolCallPart("call_1", "get_weather", '{"city": "Paris"}', {"city": "Paris"})
    history = (
        Message.user("Weather in Paris?"),
        Message.assistant("", [call]),
        Message(
            "user",
            [
                ToolResultPart("call_1", "get_weather", "sunny"),
                TextPart("Thanks. "),
                TextPart("And tomorrow?"),
                ImagePart(b"\x89PNG"),
            ],
        ),
    )
    http_server.add(
        Reply(json={"model": "m", "message": {"role": "assistant", "content": "ok"}, "done": True})
    )
    model = OllamaModel("qwen3", base_url=http_server.url, retry=0)
    model.request_sync(ModelRequest(history, (WEATHER,)))
    model.close()
    sent = http_server.wait_request().json()["messages"]
    assert sent[2:] == [
        {
            "role": "tool",
            "tool_name": "get_weather",
            "tool_call_id": "call_1",
            "content": "sunny",
        },
        {"role": "user", "content": "Thanks. And tomorrow?", "images": ["iVBORw=="]},
    ]
    chat = chat_body(ModelRequest(history, (WEATHER,)), "gpt-4o", PROVIDERS["openai"])["messages"]
    assert [m["role"] for m in chat[2:]] == [m["role"] for m in sent[2:]]


@pytest.mark.parametrize("value", ["bob:hunter2pw@myhost:abc", "http://bob:hunter2pw@myhost:abc"])
def test_the_bad_port_warning_masks_the_password(
    value: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The bad-port warning masks the password also without a scheme (it was logged as written)."""
    with caplog.at_level("WARNING", logger="toolfold.http"):
        host_from_env({"OLLAMA_HOST": value})
    assert "default port is used" in caplog.text
    assert "bob:***@myhost:abc" in caplog.text
    assert "hunter2pw" not in caplog.text


@pytest.mark.parametrize(
    "value",
    [
        "http://bob:hunter2/x@host:abc",
        "http://bob:hunter2#x@host",
        "http://bob:hunter2?x@host:abc",
        "bob:hunter2/x@host:abc",
    ],
)
def test_a_password_with_an_unencoded_slash_is_refused_unshown(
    value: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An '@' after the host part ends (a password with '/', '?', '#') is a ModelConfigError, the value unshown.

    It was read as server 'bob', port 'hunter2', and the warning logged the
    password as "the port".
    """
    with (
        caplog.at_level("WARNING", logger="toolfold.http"),
        pytest.raises(ModelConfigError, match="percent-encoded") as caught,
    ):
        host_from_env({"OLLAMA_HOST": value})
    assert "hunter2" not in caplog.text
    assert "hunter2" not in str(caught.value)
    assert "OLLAMA_HOST" in str(caught.value)
