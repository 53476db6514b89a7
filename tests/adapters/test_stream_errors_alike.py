"""Every provider reports a stream's in-band error, and an event that is not JSON, the same way."""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold import StreamError
from toolfold.runtime import Message, ModelRequest

REQUEST = ModelRequest((Message.user("hi"),))
SSE = {"content-type": "text/event-stream"}
NDJSON = {"content-type": "application/x-ndjson"}


def _model(provider: str, url: str) -> Any:
    if provider == "ollama":
        return toolfold.model("ollama:m", base_url=url, retry=0)
    base = {"openai": f"{url}/v1", "openai-responses": f"{url}/v1"}.get(provider, url)
    return toolfold.model(f"{provider}:m", base_url=base, api_key="k" * 24, retry=0)


def _sse(data: str, event: str | None = None) -> bytes:
    return (f"event: {event}\n" if event else "").encode() + f"data: {data}\n\n".encode()


ERRORS = {
    "anthropic": (
        _sse(
            json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Busy"}}),
            "error",
        ),
        "Busy",
        "overloaded_error",
    ),
    "gemini": (
        _sse(json.dumps({"error": {"code": 500, "message": "Busy", "status": "INTERNAL"}})),
        "Busy",
        "INTERNAL",
    ),
    "openai-responses": (
        _sse(
            json.dumps(
                {
                    "type": "response.failed",
                    "response": {
                        "status": "failed",
                        "error": {"code": "server_error", "message": "Busy"},
                    },
                }
            ),
            "response.failed",
        ),
        "Busy",
        "server_error",
    ),
    "openai": (
        _sse(json.dumps({"error": {"message": "Busy", "type": "server_error"}})),
        "Busy",
        "server_error",
    ),
    "ollama": (json.dumps({"error": "Busy"}).encode() + b"\n", "Busy", None),
}


@pytest.mark.parametrize("provider", list(ERRORS))
def test_an_in_band_error_reads_alike_for_every_provider(
    http_server: ScriptedServer, opened: list[Any], provider: str
) -> None:
    """An error inside an HTTP 200 stream is a StreamError with one message form, the provider's message and code."""
    chunk, said, code = ERRORS[provider]
    http_server.add(Reply(headers=NDJSON if provider == "ollama" else SSE, chunks=[chunk]))
    model = _model(provider, http_server.url)
    opened.append(model)
    with pytest.raises(StreamError) as raised:
        list(model.stream_sync(REQUEST))
    error = raised.value
    suffix = f" (code {code})" if code else ""
    assert str(error) == f"{provider} reported an error inside the stream: {said}{suffix}"
    assert (error.provider, error.status_code, error.provider_message, error.code) == (
        provider,
        200,
        said,
        code,
    )


@pytest.mark.parametrize("provider", list(ERRORS))
def test_an_event_that_is_not_json_reads_alike_for_every_provider(
    http_server: ScriptedServer, opened: list[Any], provider: str
) -> None:
    """A stream event (an NDJSON line for Ollama) that is not JSON is a StreamError quoting its start."""
    chunk = b"{half\n" if provider == "ollama" else _sse("{half")
    http_server.add(Reply(headers=NDJSON if provider == "ollama" else SSE, chunks=[chunk]))
    model = _model(provider, http_server.url)
    opened.append(model)
    what = "stream line" if provider == "ollama" else "stream event"
    with pytest.raises(StreamError, match=f"^{provider} sent a {what} that is not JSON: '{{half'"):
        list(model.stream_sync(REQUEST))


NOT_STREAMS = {
    # A server that ignored "stream": true and sent its whole answer, key echoed in it.
    "json": (
        {"content-type": "application/json"},
        b'{"id": "c1", "object": "chat.completion", "echo": "' + b"k" * 24 + b'"}',
    ),
    "html": ({"content-type": "text/html"}, b"<html><body>Please log in</body></html>"),
    # A proxy's page labelled as a stream: told apart by its lines, not its type.
    "mislabelled": (SSE, b"<html>\n<body>Please log in</body>\n</html>\n"),
}


@pytest.mark.parametrize("body", list(NOT_STREAMS))
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "openai-responses"])
def test_a_200_that_is_not_an_event_stream_says_what_came(
    http_server: ScriptedServer, opened: list[Any], provider: str, body: str
) -> None:
    """A whole JSON answer or an HTML page for a streamed request is a StreamError quoting its
    start and content type, with ``body`` set and the key scrubbed.

    It read as "stream ended before the response finished", with an empty ``body``.
    """
    headers, sent = NOT_STREAMS[body]
    http_server.add(Reply(headers=headers, body=sent))
    model = _model(provider, http_server.url)
    opened.append(model)
    with pytest.raises(StreamError, match=" that is not an event stream ") as raised:
        list(model.stream_sync(REQUEST))
    error = raised.value
    assert f"(content-type: {headers['content-type']}): {sent[:12].decode()!r}"[:-1] in str(error)
    assert error.status_code == 200
    assert "k" * 24 not in str(error)
    assert error.body == sent.decode().replace("k" * 24, "***")


def _gzip_cut(payload: bytes) -> bytes:
    """``payload`` gzipped without its 8-byte trailer (CRC-32, length): every byte of it inflates."""
    return gzip.compress(payload)[:-8]


_TEXT = {"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hello"}}]}
_STOP = {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
_MESSAGE = {"id": "m", "type": "message", "role": "assistant", "model": "m", "content": []}
COMPLETE = {
    # A whole answer ending with the provider's terminal event.
    "openai": _sse(json.dumps(_TEXT)) + _sse(json.dumps(_STOP)) + _sse("[DONE]"),
    "anthropic": b"".join(
        _sse(json.dumps({"type": name, **fields}), name)
        for name, fields in [
            ("message_start", {"message": {**_MESSAGE, "usage": {"input_tokens": 1}}}),
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "hello"}}),
            ("content_block_stop", {"index": 0}),
            (
                "message_delta",
                {"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
            ),
            ("message_stop", {}),
        ]
    ),
    "ollama": b"".join(
        json.dumps(line).encode() + b"\n"
        for line in [
            {"message": {"role": "assistant", "content": "hello"}, "done": False},
            {"message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop"},
        ]
    ),
}
# Answers with no terminal event: the last chunk carries the finish reason, and
# more may follow it (OpenAI's usage chunk), so a cut stream cannot be known whole.
OPEN_ENDED = {
    "gemini": _sse(
        json.dumps(
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": "hello"}]},
                        "finishReason": "STOP",
                    }
                ]
            }
        )
    ),
    "openai": _sse(json.dumps(_TEXT)) + _sse(json.dumps(_STOP)),  # a server sending no [DONE]
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", list(COMPLETE))
def test_a_gzip_stream_cut_after_its_terminal_event_is_a_whole_answer(
    http_server: ScriptedServer, opened: list[Any], provider: str, mode: str
) -> None:
    """The terminal event ([DONE], message_stop, done: true) arrived, the gzip trailer did not:
    the answer is complete and is returned (the codec stops reading at its terminal event)."""
    headers = {**(NDJSON if provider == "ollama" else SSE), "content-encoding": "gzip"}
    http_server.add(Reply(headers=headers, body=_gzip_cut(COMPLETE[provider])))
    model = _model(provider, http_server.url)
    opened.append(model)
    text = "".join(getattr(event, "text", "") or "" for event in _events(model, mode))
    assert "hello" in text


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("provider", list(OPEN_ENDED))
def test_a_gzip_stream_cut_with_no_terminal_event_is_a_stream_error(
    http_server: ScriptedServer, opened: list[Any], provider: str, mode: str
) -> None:
    """No terminal event, and the gzip trailer missing: whether events were lost cannot be told,
    so it is a StreamError naming the cut, never a possibly half answer."""
    headers = {**SSE, "content-encoding": "gzip"}
    http_server.add(Reply(headers=headers, body=_gzip_cut(OPEN_ENDED[provider])))
    model = _model(provider, http_server.url)
    opened.append(model)
    with pytest.raises(StreamError, match="its gzip data stops before its end"):
        _events(model, mode)


def _events(model: Any, mode: str) -> list[Any]:
    if mode == "sync":
        return list(model.stream_sync(REQUEST))

    async def run() -> list[Any]:
        try:
            return [event async for event in model.stream(REQUEST)]
        finally:
            await model.aclose()

    return asyncio.run(run())


def test_a_responses_reasoning_item_finished_before_an_in_band_error_is_shown_whole(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """The text of a Responses reasoning item finished just before response.failed reaches the
    caller before the StreamError (only the item's closing piece waits for the next event)."""
    item = {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc"}
    summary = [{"type": "summary_text", "text": "Adds 2 and 2."}]
    at = {"item_id": "rs_1", "output_index": 0, "summary_index": 0}
    events = [
        ("response.output_item.added", {"output_index": 0, "item": {**item, "summary": []}}),
        ("response.reasoning_summary_text.delta", {**at, "delta": "Adds"}),
        ("response.output_item.done", {"output_index": 0, "item": {**item, "summary": summary}}),
    ]
    chunks = [_sse(json.dumps({"type": kind, **data}), kind) for kind, data in events]
    chunks.append(ERRORS["openai-responses"][0])
    http_server.add(Reply(headers=SSE, chunks=chunks))
    model = _model("openai-responses", http_server.url)
    opened.append(model)
    seen: list[Any] = []
    with pytest.raises(StreamError, match="Busy"):
        seen.extend(model.stream_sync(REQUEST))
    assert "".join(e.text for e in seen if e.kind == "reasoning_delta") == "Adds 2 and 2."
