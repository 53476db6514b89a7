"""A malformed provider response is the provider's fault: a `MalformedResponseError` with a path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scripted_http import Reply, ScriptedServer, sse

import toolfold
from toolfold import Agent, MalformedResponseError, ProviderError, generate_text
from toolfold.adapters import _wire as wire
from toolfold.adapters._http._http_errors import parse_error_body
from toolfold.adapters.openai_chat import parse_response
from toolfold.adapters.openai_chat._errors import inband_error
from toolfold.adapters.openai_chat._stream import DecoderState, decode_chunk

KEY = "sk-malformed-0123456789abcdef"


def _body(message: Any = None, **top: Any) -> dict[str, Any]:
    choice = {"index": 0, "message": message or {"role": "assistant", "content": "hi"}}
    return {"id": "r1", "model": "m", "choices": [choice], **top}


def _call(**fields: Any) -> dict[str, Any]:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    call.update(fields)
    return call


DEEP = {"a": 1}
for _ in range(wire.MAX_DEPTH + 5):
    DEEP = {"a": DEEP}

BAD_BODIES = [
    ({"choices": 8}, "$.choices"),
    ([1, 2], "$"),
    ({"choices": [None]}, "$.choices[0]"),
    ({"choices": [{"message": []}]}, "$.choices[0].message"),
    ({"choices": [{"message": None, "finish_reason": "stop"}]}, "$.choices[0].message"),
    ({"choices": [{"index": 0, "finish_reason": "stop"}]}, "$.choices[0].message"),
    (
        _body(tool_calls=None) | {"choices": [{"message": {"tool_calls": 8}}]},
        "$.choices[0].message.tool_calls",
    ),
    (
        {"choices": [{"message": {"content": "x"}, "finish_reason": {}}]},
        "$.choices[0].finish_reason",
    ),
    (_body({"content": [{"type": "text", "text": 9}]}), "$.choices[0].message.content[0].text"),
    (_body({"content": 7}), "$.choices[0].message.content"),
    (_body(usage="r"), "$.usage"),
    (_body(usage={"prompt_tokens": float("nan")}), "$.usage.prompt_tokens"),
    (_body(usage={"prompt_tokens": -3}), "$.usage.prompt_tokens"),
    (_body(usage={"completion_tokens": True}), "$.usage.completion_tokens"),
    (_body({"tool_calls": [_call(id=["x"])]}), "$.choices[0].message.tool_calls[0].id"),
    (_body({"tool_calls": [_call(id={"x": 1})]}), "$.choices[0].message.tool_calls[0].id"),
    (_body({"tool_calls": [None]}), "$.choices[0].message.tool_calls[0]"),
    (
        _body({"tool_calls": [_call(function={"name": 3})]}),
        "$.choices[0].message.tool_calls[0].function.name",
    ),
    (
        _body({"tool_calls": [_call(function={"name": "f", "arguments": 5})]}),
        "$.choices[0].message.tool_calls[0].function.arguments",
    ),
    (
        _body({"tool_calls": [_call(extra_content={"x": float("inf")})]}),
        "$.choices[0].message.tool_calls[0].extra_content.x",
    ),
    (
        _body({"tool_calls": [_call(extra_content=DEEP)]}),
        "$.choices[0].message.tool_calls[0].extra_content",
    ),
    (_body(id=12), "$.id"),
    (_body(model=["m"]), "$.model"),
]


@pytest.mark.parametrize(("body", "path"), BAD_BODIES)
def test_a_wrong_type_names_its_path(body: Any, path: str) -> None:
    """Every wrong type, NaN or too-deep value in a body is a MalformedResponseError at its path."""
    with pytest.raises(MalformedResponseError) as caught:
        parse_response(body, "openai")
    error = caught.value
    assert error.path.startswith(path)
    assert error.provider == "openai"
    assert isinstance(error, ProviderError)
    assert error.path in str(error)
    assert error.body  # the raw body is kept


def _decode(*datas: str) -> list[Any]:
    state = DecoderState("groq")
    out: list[Any] = []
    for data in datas:
        state, events = decode_chunk(state, data)
        out.extend(events)
    return out


def _chunk(delta: Any, **top: Any) -> str:
    return json.dumps({"id": "s1", "model": "m", "choices": [{"index": 0, "delta": delta}], **top})


BAD_CHUNKS = [
    (json.dumps({"choices": 8}), "$.choices"),
    (json.dumps({"choices": [{"delta": [None]}]}), "$.choices[0].delta"),
    (json.dumps({"choices": [{"index": "0", "delta": {}}]}), "$.choices[0].index"),
    (_chunk({"content": [{"type": "text", "text": 9}]}), "$.choices[0].delta.content[0].text"),
    (_chunk({"content": {"a": 1}}), "$.choices[0].delta.content"),
    (_chunk({"tool_calls": [{"index": 0, "id": ["x"]}]}), "$.choices[0].delta.tool_calls[0].id"),
    (_chunk({"tool_calls": [{"index": True}]}), "$.choices[0].delta.tool_calls[0].index"),
    (_chunk({"tool_calls": {"a": 1}}), "$.choices[0].delta.tool_calls"),
    (_chunk({"refusal": ["no"]}), "$.choices[0].delta.refusal"),
    (_chunk({"function_call": "get"}), "$.choices[0].delta.function_call"),
    (_chunk({"function_call": {"name": 1}}), "$.choices[0].delta.function_call.name"),
    (_chunk({"function_call": {"arguments": 1}}), "$.choices[0].delta.function_call.arguments"),
    (_chunk({}, usage="r"), "$.usage"),
    (
        _chunk({}, usage={"prompt_tokens_details": {"cache_write_tokens": "9"}}),
        "$.usage.prompt_tokens_details.cache_write_tokens",
    ),
    (_chunk({}, x_groq={"usage": {"prompt_tokens": "9"}}), "$.x_groq.usage.prompt_tokens"),
    (json.dumps({"choices": [{"delta": {}, "finish_reason": {}}]}), "$.choices[0].finish_reason"),
    (json.dumps({"id": ["s"], "choices": []}), "$.id"),
    # An event that is not an object: the other stream codecs refused it, this one skipped it.
    ("null", "$"),
    ("5", "$"),
    ("[]", "$"),
    ('"x"', "$"),
]


@pytest.mark.parametrize(("data", "path"), BAD_CHUNKS)
def test_a_wrong_type_in_a_stream_event_names_its_path(data: str, path: str) -> None:
    """A stream event with a wrong type is a MalformedResponseError carrying that event."""
    with pytest.raises(MalformedResponseError) as caught:
        _decode(data)
    assert caught.value.path == path
    assert caught.value.body == data


def test_nan_and_deep_nesting_in_a_stream_event_are_not_json() -> None:
    """NaN and nesting deeper than Python decodes are refused as a StreamError, not a crash."""
    for data in ('{"choices": [], "usage": {"prompt_tokens": NaN}}', "[" * 100_000):
        with pytest.raises(toolfold.StreamError, match="not JSON"):
            _decode(data)


def test_provider_strings_come_back_encodable() -> None:
    """A lone surrogate in text, ids and argument text is replaced, so every later request encodes."""
    body = _body(
        {
            "content": "a\ud800b",
            "tool_calls": [
                _call(id="c\udfff", function={"name": "f", "arguments": '{"k": "\ud800"}'})
            ],
        }
    )
    response = parse_response(body, "openai")
    parts = response.message.parts
    assert parts[0].text == "a\ufffdb"  # type: ignore[union-attr]
    call = response.tool_calls[0]
    assert call.id == "c\ufffd"
    call.arguments_text.encode("utf-8")
    assert call.arguments == {"k": "\ufffd"}


def test_an_error_code_that_looks_like_a_digit_is_not_a_status() -> None:
    """``"code": "²"`` (isdigit but not int) in a 200 error body is a ProviderError, not ValueError."""
    with pytest.raises(ProviderError, match="returned an error with HTTP 200: boom") as caught:
        parse_response({"error": {"message": "boom", "code": "²"}}, "openrouter")
    assert caught.value.code == "²"


@pytest.mark.parametrize(
    "body",
    [
        '{"error": ' * 50_000,
        "[" * 50_000 + "]" * 50_000,
        '{"error": {"message": NaN, "code": Infinity}}',
        '{"error": {"message": {"deep": [1]}, "code": [1], "details": [{"@type": {"x": 1}}]}}',
        '{"error": {"details": [{"@type": "google.rpc.QuotaFailure", "violations": [{"quotaId": []}]}]}}',
        '{"error": "\\ud800"}',
    ],
)
def test_error_bodies_never_raise(body: str) -> None:
    """The error-body reader answers for hostile bodies (deep, NaN, wrong types) and never raises."""
    info = parse_error_body(400, body, {})
    for text in (info.message, info.code, info.type):
        if text is not None:
            text.encode("utf-8")
    assert inband_error("groq", "error", body) is not None


def _model(server: ScriptedServer, opened: list[Any]) -> Any:
    made = toolfold.model("openai-compatible:m", base_url=f"{server.url}/v1", api_key=KEY)
    opened.append(made)
    return made


def test_a_malformed_body_over_http_names_the_provider_and_field(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Over HTTP, a wrong type is a MalformedResponseError with the raw body, the key scrubbed."""
    raw = json.dumps({"choices": [{"message": {"content": "x", "tool_calls": 8}}], "echo": KEY})
    http_server.add(Reply(body=raw.encode(), headers={"content-type": "application/json"}))
    with pytest.raises(MalformedResponseError) as caught:
        generate_text(_model(http_server, opened), "hi")
    error = caught.value
    assert error.provider == "openai-compatible"
    assert error.path == "$.choices[0].message.tool_calls"
    assert "tool_calls" in error.body
    assert KEY not in error.body
    assert "***" in error.body
    assert error.state is not None  # type: ignore[attr-defined]


def test_a_malformed_stream_over_http_names_the_field(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A streamed event with a wrong type ends the run with a MalformedResponseError."""
    chunks = sse({"id": "s", "choices": [{"index": 0, "delta": [None]}]}, "[DONE]")
    http_server.add(Reply(headers={"content-type": "text/event-stream"}, chunks=chunks))
    with pytest.raises(MalformedResponseError, match=r"\$\.choices\[0\]\.delta"):
        for _ in Agent(model=_model(http_server, opened)).stream("hi"):
            pass


def test_a_body_nested_too_deep_is_a_malformed_response(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A body nested deeper than Python decodes is read cut to 200 levels (see `shallow`), not a
    RecursionError: here the bad field is named, as in any malformed answer."""
    deep = b'{"choices":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    http_server.add(Reply(body=deep, headers={"content-type": "application/json"}))
    with pytest.raises(
        MalformedResponseError, match=r"expected an object, got array @ \$\.choices\[0\]$"
    ) as caught:
        generate_text(_model(http_server, opened), "hi")
    assert (caught.value.path, caught.value.status_code) == ("$.choices[0]", 200)
    assert str(caught.value).startswith(f"{caught.value.provider} sent a malformed response")


def test_a_body_still_too_deep_after_the_cut_is_a_malformed_response_at_the_root(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """An answer the cut cannot make readable (not JSON past its depth) stays a
    MalformedResponseError at $ saying so, not a RecursionError."""
    deep = b'{"choices":' + b"[" * 100_000 + b"}"
    http_server.add(Reply(body=deep, headers={"content-type": "application/json"}))
    with pytest.raises(
        MalformedResponseError, match=r"nested too deep to decode.* @ \$$"
    ) as caught:
        generate_text(_model(http_server, opened), "hi")
    assert (caught.value.path, caught.value.status_code) == ("$", 200)


def test_a_200_body_that_is_not_json_is_a_malformed_response(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """An HTML page (or a cut body) answered with 200 is the provider's malformed answer, raw body kept."""
    http_server.add(
        Reply(body=b"<html>gateway says hi</html>", headers={"content-type": "text/html"})
    )
    with pytest.raises(MalformedResponseError, match="not JSON") as caught:
        generate_text(_model(http_server, opened), "hi")
    assert caught.value.body == "<html>gateway says hi</html>"
    assert caught.value.problem.startswith("not JSON")


def test_guarded_turns_a_codec_crash_into_a_malformed_response() -> None:
    """Under wire.guarded a codec's TypeError is a MalformedResponseError at $; ToolfoldErrors pass."""
    with (
        pytest.raises(MalformedResponseError, match=r"TypeError.*@ \$") as caught,
        wire.guarded("p", lambda: "the body"),
    ):
        len(8)  # type: ignore[arg-type]
    assert caught.value.body == "the body"
    assert isinstance(caught.value.__cause__, TypeError)
    with pytest.raises(toolfold.StreamError), wire.guarded("p", lambda: ""):
        raise toolfold.StreamError("on purpose")


def test_a_lone_surrogate_that_reaches_a_request_body_is_sent_as_a_replacement() -> None:
    """A lone surrogate in a request body goes as U+FFFD (strict parsers refuse its escape); a pair joins."""
    from toolfold.adapters._http._json import dumps

    assert dumps({"a": "é"}) == '{"a":"é"}'.encode()
    assert dumps({"a": "x\ud800", "b": "caf\udce9"}) == '{"a":"x\ufffd","b":"caf\ufffd"}'.encode()
    assert dumps({"a": "\ud83d\ude00\ude00"}) == '{"a":"\U0001f600\ufffd"}'.encode()


@pytest.mark.parametrize(
    "text",
    [
        '{"a":[1,2]}',
        "{} \n",
        '{"a":NaN}',
        " {}",
        "{}x",
        "",
        "\ufeff{}",
        '{"a":',
        '{"a":1}{}',
        "[1]",
        '{"a":1}\xa0',  # whitespace to str.isspace(), not to JSON
        '{"a":1}\x0c',
        '{"a":1}\u2028',
        '{"a":1} \t\r\n',
    ],
)
def test_the_body_reader_decodes_and_refuses_like_json_loads(text: str) -> None:
    """loads_text gives json.loads' value, or its error class and message, for every text."""
    from toolfold.adapters._http._json import loads_text

    def outcome(loads: Any) -> Any:
        try:
            return ("value", loads(text))
        except ValueError as exc:
            return (type(exc), str(exc))

    ours, stdlib = outcome(loads_text), outcome(json.loads)
    assert repr(ours) == repr(stdlib)  # repr: NaN equals itself there


def test_a_stream_whose_call_never_ends_is_a_stream_error() -> None:
    """The fold refuses a call that never ended, or a fragment before its start, as a StreamError."""
    from toolfold.runtime import (
        StreamState,
        ToolCallDelta,
        ToolCallStart,
        finish_stream,
        fold_stream,
    )

    started = fold_stream(StreamState(), ToolCallStart(0, "c", "f"))
    with pytest.raises(toolfold.StreamError, match="ended before tool calls completed"):
        finish_stream(started, str)
    with pytest.raises(toolfold.StreamError, match="before its start"):
        fold_stream(StreamState(), ToolCallDelta(3, "{}"))
