"""Anthropic streams beyond the recordings, error mapping and retries, malformed answers, and the key."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from cassettes import answer
from scripted_http import Cut, Reply, ScriptedServer

from toolfold import (
    AuthenticationError,
    MalformedResponseError,
    ModelConfigError,
    RateLimitError,
    ServerError,
    StreamError,
)
from toolfold.adapters.anthropic import (
    AnthropicModel,
    DecoderState,
    build_body,
    decode_end,
    decode_event,
    parse_response,
)
from toolfold.runtime import Message, ModelRequest, StreamState, finish_stream, fold_stream

KEY = "sk-ant-api03-SECRET-0123456789abcdef"
REQUEST = ModelRequest((Message.user("Hi"),))
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def event(name: str, **data: Any) -> bytes:
    """One named SSE event whose data carries its type, as Anthropic sends it."""
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def start(index: int, block: dict[str, Any]) -> bytes:
    """A content_block_start event."""
    return event("content_block_start", index=index, content_block=block)


def delta(index: int, **body: Any) -> bytes:
    """A content_block_delta event."""
    return event("content_block_delta", index=index, delta=body)


def message_start(**usage: int) -> bytes:
    """A message_start event with the given input-side usage."""
    message = {"id": "msg_1", "model": "claude-test", "role": "assistant", "content": []}
    return event("message_start", message={**message, "usage": {**usage, "output_tokens": 1}})


MESSAGE_START = message_start(input_tokens=7, cache_read_input_tokens=100)


def fold(chunks: list[bytes]) -> Any:
    """Decode and fold an SSE body given as event chunks (no HTTP)."""
    from toolfold.adapters._http._sse import SSEDecoder

    decoder, state, folded = SSEDecoder(), DecoderState(), StreamState()
    for item in [*decoder.feed(b"".join(chunks)), *decoder.close()]:
        state, out = decode_event(state, item.data, item.event)
        for e in out:
            folded = fold_stream(folded, e)
    decode_end(state)
    return finish_stream(folded, lambda i: f"missing-{i}")


def test_thinking_redacted_and_text_stream_into_parts_in_order() -> None:
    """thinking_delta + signature_delta, a redacted block, text and a call fold into ordered parts."""
    response = fold(
        [
            MESSAGE_START,
            start(0, {"type": "thinking", "thinking": ""}),
            delta(0, type="thinking_delta", thinking="Let me "),
            delta(0, type="thinking_delta", thinking="think."),
            delta(0, type="signature_delta", signature="SIG=="),
            event("content_block_stop", index=0),
            start(1, {"type": "redacted_thinking", "data": "ENC=="}),
            event("content_block_stop", index=1),
            start(2, {"type": "text", "text": ""}),
            event("ping"),
            event("some_future_event", index=2),
            delta(2, type="text_delta", text="Sure."),
            event("content_block_stop", index=2),
            start(3, {"type": "tool_use", "id": "toolu_9", "name": "now", "input": {}}),
            delta(3, type="input_json_delta", partial_json=""),
            event("content_block_stop", index=3),
            event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 30}),
            event("message_stop"),
        ]
    )
    kinds = [(p.kind, getattr(p, "text", None)) for p in response.message.parts]
    assert kinds == [
        ("reasoning", "Let me think."),
        ("reasoning", ""),
        ("text", "Sure."),
        ("tool_call", None),
    ]
    thinking, redacted = response.message.parts[:2]
    assert (thinking.signature, thinking.provider, dict(thinking.provider_data)) == (
        "SIG==",
        "anthropic",
        {},
    )
    assert (redacted.signature, dict(redacted.provider_data)) == (
        "ENC==",
        {"type": "redacted_thinking"},
    )
    assert response.tool_calls[0].arguments == {}
    usage = response.usage
    assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens) == (107, 100, 30)
    assert (response.finish_reason, response.raw_finish_reason) == ("tool_calls", "tool_use")


def test_a_character_split_between_two_deltas_comes_whole_and_a_lone_half_is_a_replacement() -> (
    None
):
    """An emoji a proxy cut by UTF-16 length ("\\ud83d", then "\\ude00") joins again in
    thinking, text and arguments; a half nothing completes (before a signature, at a
    block's stop, alone in the text) is U+FFFD, so the answer is always encodable."""
    response = fold(
        [
            MESSAGE_START,
            start(0, {"type": "thinking", "thinking": ""}),
            delta(0, type="thinking_delta", thinking="t\ud83d"),
            delta(0, type="thinking_delta", thinking="\ude00 u\ud83d"),
            delta(0, type="signature_delta", signature="SIG=="),
            event("content_block_stop", index=0),
            start(1, {"type": "text", "text": ""}),
            delta(1, type="text_delta", text="a\ud83d"),
            delta(1, type="text_delta", text="\ude00b\ud800c\ud83d"),
            event("content_block_stop", index=1),
            start(2, {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}}),
            delta(2, type="input_json_delta", partial_json='{"q": "\ud83d'),
            delta(2, type="input_json_delta", partial_json='\ude00"}'),
            event("content_block_stop", index=2),
            event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 3}),
            event("message_stop"),
        ]
    )
    thinking, text, call = response.message.parts
    assert (thinking.text, thinking.signature) == ("t\U0001f600 u\ufffd", "SIG==")
    assert text.text == "a\U0001f600b\ufffdc\ufffd"
    assert call.arguments == {"q": "\U0001f600"}


@pytest.mark.parametrize(
    ("tail", "words"),
    [
        ([], "ended before the message finished with tool call blocks [0] still open"),
        ([event("message_stop")], "still open"),
    ],
    ids=["body-ends", "message-stop"],
)
def test_a_stream_that_stops_mid_call_is_a_stream_error(tail: list[bytes], words: str) -> None:
    """A call whose block never stopped is never handed out: StreamError naming it."""
    head = [
        MESSAGE_START,
        start(0, {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}),
        delta(0, type="input_json_delta", partial_json='{"a": '),
    ]
    with pytest.raises(StreamError, match=words.replace("[", r"\[").replace("]", r"\]")):
        fold(head + tail)


def test_an_error_event_after_200_is_a_stream_error_with_the_type() -> None:
    """``event: error`` with overloaded_error mid-stream raises StreamError, code overloaded_error."""
    body = f"event: error\ndata: {json.dumps(OVERLOADED)}\n\n".encode()
    with pytest.raises(StreamError, match=r"Overloaded \(code overloaded_error\)") as caught:
        fold([MESSAGE_START, body])
    assert caught.value.code == "overloaded_error"
    assert caught.value.status_code == 200


@pytest.mark.parametrize(
    ("body", "path", "problem"),
    [
        ({"content": "hi"}, "$.content", "expected an array of content blocks, got string"),
        (
            {"content": [{"type": "tool_use", "id": "t", "name": "n", "input": "{}"}]},
            "$.content[0].input",
            "expected an object, got string",
        ),
        (
            {"content": [{"type": "text", "text": 5}]},
            "$.content[0].text",
            "expected a string, got number",
        ),
        ({"content": [], "stop_reason": 3}, "$.stop_reason", "expected a string, got number"),
        (
            {"content": [], "usage": {"input_tokens": -1}},
            "$.usage.input_tokens",
            "expected a non-negative integer, got number",
        ),
        (
            {
                "content": [
                    {"type": "tool_use", "id": "t", "name": "n", "input": {"x": float("nan")}}
                ]
            },
            "$.content[0].input.x",
            "expected a finite number, got nan",
        ),
        ({"content": [], "model": ["m"]}, "$.model", "expected a string, got array"),
    ],
)
def test_malformed_responses_name_the_json_path(
    body: dict[str, Any], path: str, problem: str
) -> None:
    """A value of the wrong type is a MalformedResponseError at its path, with the body, never a bad part."""
    with pytest.raises(MalformedResponseError) as caught:
        parse_response(body)
    assert (caught.value.path, caught.value.problem) == (path, problem)
    assert f"{problem} @ {path}" in str(caught.value)
    assert caught.value.body


def test_a_malformed_stream_event_names_its_path() -> None:
    """A tool_use block whose id is a number is a MalformedResponseError carrying that event."""
    bad = start(0, {"type": "tool_use", "id": 7, "name": "now", "input": {}})
    with pytest.raises(MalformedResponseError) as caught:
        fold([MESSAGE_START, bad])
    assert caught.value.path == "$.content_block.id"
    assert '"id": 7' in caught.value.body


# --- over HTTP: retries, statuses, the key -----------------------------------


def _model(server: ScriptedServer, **options: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=server.url, api_key=KEY, **options)


def _no_waits(model: AnthropicModel, waits: list[float]) -> None:
    async def sleep(delay: float) -> None:
        waits.append(delay)

    sender = model._transport._sender
    sender.sleep, sender.sleep_sync, sender.random = sleep, waits.append, lambda: 0.0


OK = {
    "id": "msg_ok",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [{"type": "text", "text": "Hello"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_529_overloaded_is_retried_then_succeeds(http_server: ScriptedServer, mode: str) -> None:
    """Two 529 overloaded_error answers are retried with backoff; the third answer is returned."""
    http_server.add(
        Reply(status=529, json=OVERLOADED), Reply(status=529, json=OVERLOADED), Reply(json=OK)
    )
    model = _model(http_server, retry=2)
    waits: list[float] = []
    _no_waits(model, waits)
    if mode == "sync":
        response = model.request_sync(REQUEST)
    else:
        response = asyncio.run(model.request(REQUEST))
    model.close()
    assert response.text == "Hello"
    assert len(http_server.requests) == 3
    assert waits == [0.5, 1.0]


def test_529_without_retries_is_a_server_error_with_the_type(http_server: ScriptedServer) -> None:
    """With retries off, 529 is a ServerError carrying status 529 and code overloaded_error."""
    http_server.add(Reply(status=529, json=OVERLOADED))
    model = _model(http_server, retry=0)
    with pytest.raises(ServerError, match="Overloaded") as caught:
        model.request_sync(REQUEST)
    model.close()
    assert (caught.value.status_code, caught.value.code) == (529, "overloaded_error")


def test_429_honours_retry_after(http_server: ScriptedServer) -> None:
    """A 429 rate_limit_error with retry-after waits that long before the retry."""
    limited = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    http_server.add(Reply(status=429, headers={"retry-after": "3"}, json=limited), Reply(json=OK))
    model = _model(http_server, retry=1)
    waits: list[float] = []
    _no_waits(model, waits)
    assert model.request_sync(REQUEST).text == "Hello"
    model.close()
    assert waits == [3.0]
    http_server.add(Reply(status=429, headers={"retry-after": "3"}, json=limited))
    model = _model(http_server, retry=0)
    with pytest.raises(RateLimitError) as caught:
        model.request_sync(REQUEST)
    model.close()
    assert (caught.value.retry_after, caught.value.code) == (3.0, "rate_limit_error")


def test_a_cut_stream_is_a_stream_error(http_server: ScriptedServer) -> None:
    """The connection dropping mid-call is a StreamError, never a half call."""
    chunks: list[Any] = [
        MESSAGE_START,
        start(0, {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}),
        Cut(),
    ]
    http_server.add(Reply(headers={"content-type": "text/event-stream"}, chunks=chunks))
    model = _model(http_server, retry=0)
    with pytest.raises(StreamError):
        list(model.stream_sync(REQUEST))
    model.close()


def test_the_key_never_shows(http_server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:
    """The key is sent as x-api-key, and is absent from repr, errors echoing it, and retry logs."""
    echo = {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"},
    }
    http_server.add(Reply(status=529, json=OVERLOADED), Reply(status=401, json=echo))
    model = _model(http_server, retry=1)
    _no_waits(model, [])
    with (
        caplog.at_level(logging.DEBUG, logger="toolfold.http"),
        pytest.raises(AuthenticationError) as caught,
    ):
        model.request_sync(REQUEST)
    model.close()
    assert http_server.requests[0].headers["x-api-key"] == KEY
    error = caught.value
    for text in (repr(model), str(error), error.body, error.provider_message or "", caplog.text):
        assert KEY not in text
    assert "invalid x-api-key" in str(error)
    assert any("retrying POST" in r.getMessage() for r in caplog.records)


def test_no_key_is_a_clear_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without api_key and ANTHROPIC_API_KEY the model refuses to start, naming the variable."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    model = AnthropicModel("claude-test")
    assert model.base_url == "https://api.anthropic.com"
    assert KEY not in repr(model)


def test_a_thinking_block_that_arrives_whole_keeps_its_signature() -> None:
    """A thinking block sent complete in its start event (a proxy, a replay) keeps text and signature."""
    response = fold(
        [
            MESSAGE_START,
            start(0, {"type": "thinking", "thinking": "Whole.", "signature": "SIG"}),
            event("content_block_stop", index=0),
            event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 3}),
            event("message_stop"),
        ]
    )
    (part,) = response.message.parts
    assert (part.kind, part.text, part.signature) == ("reasoning", "Whole.", "SIG")


CACHED_USAGE = {
    "input_tokens": 7,
    "cache_creation_input_tokens": 40,
    "cache_read_input_tokens": 100,
    "output_tokens": 30,
}


@pytest.mark.parametrize("streamed", [False, True], ids=["blocking", "streamed"])
def test_prompt_cache_writes_and_reads_are_counted_apart(
    http_server: ScriptedServer, streamed: bool
) -> None:
    """Cache writes and reads both count as input; each also has its own field (cache_write_tokens, cached_tokens)."""
    if streamed:
        start_usage = {k: v for k, v in CACHED_USAGE.items() if k != "output_tokens"}
        body = b"".join(
            [
                message_start(**start_usage),
                start(0, {"type": "text", "text": ""}),
                delta(0, type="text_delta", text="Hello"),
                event("content_block_stop", index=0),
                event(
                    "message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 30}
                ),
                event("message_stop"),
            ]
        )
        http_server.add(Reply(headers={"content-type": "text/event-stream"}, chunks=[body]))
    else:
        http_server.add(Reply(json={**OK, "usage": CACHED_USAGE}))
    model = _model(http_server, retry=0)
    response = answer(model, REQUEST, streamed)
    model.close()
    assert response.text == "Hello"
    u = response.usage
    assert (u.input_tokens, u.cache_write_tokens, u.cached_tokens, u.output_tokens) == (
        147,
        40,
        100,
        30,
    )


def test_a_null_count_in_message_delta_keeps_the_count_message_start_gave() -> None:
    """MessageDeltaUsage's counts are required but nullable: null is no update, not zero."""
    response = fold(
        [
            message_start(
                input_tokens=20, cache_creation_input_tokens=0, cache_read_input_tokens=3000
            ),
            start(0, {"type": "text", "text": ""}),
            delta(0, type="text_delta", text="Hello"),
            event("content_block_stop", index=0),
            event(
                "message_delta",
                delta={"stop_reason": "end_turn", "stop_sequence": None},
                usage={
                    "input_tokens": None,
                    "cache_creation_input_tokens": None,
                    "cache_read_input_tokens": None,
                    "output_tokens": 12,
                    "server_tool_use": None,
                },
            ),
            event("message_stop"),
        ]
    )
    u = response.usage
    assert (u.input_tokens, u.cached_tokens, u.cache_write_tokens, u.output_tokens) == (
        3020,
        3000,
        0,
        12,
    )


#: An answer that thinks between its calls (interleaved thinking), as its blocks come.
INTERLEAVED = [
    {"type": "thinking", "thinking": "First thought.", "signature": "SIG1"},
    {"type": "redacted_thinking", "data": "REDACTED=="},
    {"type": "text", "text": "Let me check."},
    {"type": "tool_use", "id": "toolu_A", "name": "weather", "input": {"city": "Paris"}},
    {"type": "thinking", "thinking": "Interleaved thought.", "signature": "SIG2"},
    {"type": "tool_use", "id": "toolu_B", "name": "weather", "input": {"city": "Rome"}},
]


def _streamed_blocks(blocks: list[dict[str, Any]]) -> list[bytes]:
    """The stream of a message made of ``blocks``, each block's text in two deltas."""
    chunks = [MESSAGE_START]
    for index, block in enumerate(blocks):
        if block["type"] == "thinking":
            chunks.append(start(index, {"type": "thinking", "thinking": ""}))
            text = block["thinking"]
            chunks.append(delta(index, type="thinking_delta", thinking=text[:5]))
            chunks.append(delta(index, type="thinking_delta", thinking=text[5:]))
            chunks.append(delta(index, type="signature_delta", signature=block["signature"]))
        elif block["type"] == "text":
            chunks.append(start(index, {"type": "text", "text": ""}))
            chunks.append(delta(index, type="text_delta", text=block["text"]))
        elif block["type"] == "tool_use":
            chunks.append(start(index, {**block, "input": {}}))
            arguments = json.dumps(block["input"])
            chunks.append(delta(index, type="input_json_delta", partial_json=arguments[:4]))
            chunks.append(delta(index, type="input_json_delta", partial_json=arguments[4:]))
        else:
            chunks.append(start(index, block))
        chunks.append(event("content_block_stop", index=index))
    stop = event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 9})
    return [*chunks, stop, event("message_stop")]


def test_interleaved_thinking_streams_back_in_the_order_it_came() -> None:
    """Thinking between calls keeps its place streamed as whole: the assistant turn goes back
    block for block as the model wrote it (a call is not moved after the later thinking)."""
    streamed = fold(_streamed_blocks(INTERLEAVED))
    whole = parse_response(
        {
            "id": "msg_1",
            "model": "claude-test",
            "role": "assistant",
            "content": INTERLEAVED,
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 7, "output_tokens": 9},
        }
    )
    sent = []
    for response in (streamed, whole):
        request = ModelRequest((Message.user("Weather?"), response.message, Message.user("Ok?")))
        sent.append(build_body(request, "claude-test")["messages"][1]["content"])
    assert sent[0] == sent[1] == INTERLEAVED
