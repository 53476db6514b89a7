"""Cost of the Chat Completions codec per request, per response and per stream chunk.

The codec runs on every model call of a run, so it must stay small next to the
network: building the body of a 50-message conversation with 5 tools, parsing a
response with two calls, and decoding one SSE chunk (the decoder sees every
token of a streamed answer). Also the whole recorded OpenAI stream
(stream-parallel-2-calls: 16 chunks) through the SSE decoder, the chunk decoder
and the runtime's fold. Last, the same answers through `OpenAIChatModel` itself
(``request_sync`` / ``stream_sync``) over an in-process ``httpx.MockTransport``:
the model class's own share (transport, error boundary, stream loop) beside
the codec's.

Run: ``.venv/bin/python bench/bench_openai_chat.py``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from toolfold.adapters._http._sse import SSEDecoder
from toolfold.adapters.openai_chat import (
    PROVIDERS,
    DecoderState,
    OpenAIChatModel,
    build_body,
    decode_chunk,
    decode_end,
    parse_response,
)
from toolfold.runtime import (
    Message,
    ModelRequest,
    StreamState,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
    finish_stream,
    fold_stream,
)

TOOLS = tuple(
    ToolDefinition(
        f"tool_{i}",
        f"Tool number {i}.",
        {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    )
    for i in range(5)
)


def _conversation(turns: int) -> tuple[Message, ...]:
    messages = [Message.system("Be brief."), Message.user("Plan a trip.")]
    for n in range(turns):
        call = ToolCallPart(f"call_{n}", "tool_1", '{"city": "Paris"}', {"city": "Paris"})
        messages.append(Message.assistant("Checking.", [call]))
        messages.append(Message.tool(ToolResultPart(f"call_{n}", "tool_1", "sunny")))
    return tuple(messages)


RESPONSE = {
    "id": "chatcmpl-1",
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "tool_1", "arguments": '{"city": "Paris", "days": 3}'},
                    }
                    for i in range(2)
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 500, "completion_tokens": 40, "total_tokens": 540},
}
TEXT_CHUNK = json.dumps(
    {
        "id": "chatcmpl-1",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": " token"}, "finish_reason": None}],
    }
)
CASSETTE = (
    Path(__file__).resolve().parents[1]
    / ".."
    / "shared"
    / "fixtures"
    / "provider-traffic"
    / "openai-chat-completions"
    / "stream-parallel-2-calls.yaml"
)


def _recorded_stream() -> str:
    import yaml

    data = yaml.safe_load(CASSETTE.read_text(encoding="utf-8"))
    return str(data["interactions"][0]["response"]["body"]["string"])


def _per_call(fn: Callable[[], Any], repeat: int = 7) -> float:
    """Median microseconds per call over ``repeat`` timed batches."""
    number = 1
    while True:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        if time.perf_counter() - start > 0.05:
            break
        number *= 2
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def _model(stream_text: str) -> OpenAIChatModel:
    """A model whose HTTP client answers in-process: the recorded stream, or `RESPONSE`."""
    streamed = stream_text.encode()
    whole = json.dumps(RESPONSE).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(
                200, content=streamed, headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(200, content=whole, headers={"content-type": "application/json"})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    return OpenAIChatModel("gpt-4o-mini", api_key="sk-bench", http_client=client, retry=0)


def main() -> None:
    openai = PROVIDERS["openai"]
    small = ModelRequest(_conversation(1), TOOLS)
    large = ModelRequest(_conversation(24), TOOLS)  # 50 messages
    build_body(large, "gpt-4o-mini", openai)  # warm the schema compile cache
    stream_text = _recorded_stream()
    model = _model(stream_text)

    def decode_one() -> None:
        decode_chunk(DecoderState("openai", info_sent=True, seed="x"), TEXT_CHUNK)

    def whole_stream() -> None:
        state, folded = DecoderState("openai"), StreamState()
        for event in SSEDecoder().feed(stream_text):
            state, out = decode_chunk(state, event.data, event.event)
            for item in out:
                folded = fold_stream(folded, item)
        for item in decode_end(state):
            folded = fold_stream(folded, item)
        finish_stream(folded, str)

    rows = [
        ("build body, 4 messages, 5 tools", lambda: build_body(small, "gpt-4o-mini", openai)),
        ("build body, 50 messages, 5 tools", lambda: build_body(large, "gpt-4o-mini", openai)),
        (
            "build body, 50 messages, mistral ids",
            lambda: build_body(large, "m", PROVIDERS["mistral"]),
        ),
        ("parse response with 2 calls", lambda: parse_response(RESPONSE, "openai")),
        ("decode one text chunk", decode_one),
        ("recorded 16-chunk stream: SSE+decode+fold", whole_stream),
        ("model.request_sync, 4 messages, in-process HTTP", lambda: model.request_sync(small)),
        ("model.stream_sync, 16 chunks, in-process HTTP", lambda: list(model.stream_sync(small))),
    ]
    for label, fn in rows:
        print(f"{label:50s} {_per_call(fn):9.1f} us")


if __name__ == "__main__":
    main()
