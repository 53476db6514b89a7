"""A fast fake OpenAI Chat Completions server, run as its own process for benchmarks.

    .venv/bin/python bench/fake_openai_server.py [--port 0]

Prints ``READY <port>`` on stdout once listening. Answers ``POST
.../chat/completions`` over HTTP/1.1 keep-alive. It scripts a sequential tool
loop: while the conversation holds fewer ``role: tool`` messages than the
model's step count, the answer calls the request's first tool (``add`` by
default) with ``{"a": <n>, "b": 1}``; then it answers with text. The step count
comes from the model name: ``fake-10`` runs 10 tool steps (11 exchanges); any
other name means 10. With ``"stream": true`` the same answer is streamed as
Chat Completions SSE chunks (role, tool-call start, two argument fragments,
finish, usage, ``[DONE]``), in HTTP chunked encoding.

Built on a bare asyncio protocol so the server costs little next to the
clients being measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

_USAGE = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}


def _steps(model: str) -> int:
    tail = model.rpartition("-")[2]
    return int(tail) if model.startswith("fake-") and tail.isdigit() else 10


def decide(request: dict[str, Any]) -> tuple[str | None, str, str]:
    """(tool name or None for the final text, call id, arguments or text)."""
    messages = request.get("messages") or []
    done = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "tool")
    if done < _steps(str(request.get("model", ""))):
        tools = request.get("tools") or []
        name = tools[0]["function"]["name"] if tools else "add"
        return name, f"call_{done}", json.dumps({"a": done, "b": 1})
    return None, "", f"Finished after {done} tool calls."


def completion(request: dict[str, Any]) -> bytes:
    """A non-streamed Chat Completions body."""
    name, call_id, payload = decide(request)
    if name is None:
        message: dict[str, Any] = {"role": "assistant", "content": payload}
        finish = "stop"
    else:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": payload},
                }
            ],
        }
        finish = "tool_calls"
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": request.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": _USAGE,
    }
    return json.dumps(body).encode()


def chunks(request: dict[str, Any]) -> list[bytes]:
    """The SSE events of the same answer, streamed."""
    name, call_id, payload = decide(request)
    base = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": request.get("model", "fake"),
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    events: list[dict[str, Any]] = [chunk({"role": "assistant", "content": None})]
    if name is None:
        words = payload.split(" ")
        events += [chunk({"content": w + (" " if i < len(words) - 1 else "")}) for i, w in enumerate(words)]  # fmt: skip
        events.append(chunk({}, "stop"))
    else:
        half = len(payload) // 2
        start = {"index": 0, "id": call_id, "type": "function"}
        events.append(
            chunk({"tool_calls": [{**start, "function": {"name": name, "arguments": ""}}]})
        )
        for piece in (payload[:half], payload[half:]):
            events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
        events.append(chunk({}, "tool_calls"))
    events.append({**base, "choices": [], "usage": _USAGE})
    out = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
    out.append(b"data: [DONE]\n\n")
    return out


_HEAD_JSON = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"x-request-id: req_fake\r\ncontent-length: %d\r\n\r\n"
)
_HEAD_SSE = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"x-request-id: req_fake\r\ntransfer-encoding: chunked\r\n\r\n"
)
_NOT_FOUND = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 36\r\n\r\n{\"error\": {\"message\": \"not found\"}}"  # fmt: skip


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            body, self.buffer = self.buffer[end + 4 : total], self.buffer[total:]
            self.respond(head.split(" ", 2)[1], body)

    def respond(self, path: str, body: bytes) -> None:
        assert self.transport is not None
        if not path.split("?")[0].endswith("chat/completions"):
            self.transport.write(_NOT_FOUND)
            return
        request = json.loads(body)
        if request.get("stream"):
            parts = [_HEAD_SSE]
            for piece in chunks(request):
                parts.append(b"%x\r\n%s\r\n" % (len(piece), piece))
            parts.append(b"0\r\n\r\n")
            self.transport.write(b"".join(parts))
        else:
            payload = completion(request)
            self.transport.write(_HEAD_JSON % len(payload) + payload)


async def serve(port: int, protocol: type[asyncio.Protocol] | None = None) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(protocol or _Connection, "127.0.0.1", port, backlog=1024)
    sockets = server.sockets or ()
    print(f"READY {sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


def main(protocol: type[asyncio.Protocol] | None = None, doc: str | None = None) -> None:
    parser = argparse.ArgumentParser(description=(doc or __doc__ or "").split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.port, protocol))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
