"""A fast fake Anthropic Messages and Ollama ``/api/chat`` server, run as its own process for benchmarks.

    .venv/bin/python bench/fake_native_server.py [--port 0]

Prints ``READY <port>`` once listening. Scripts the same sequential tool loop
as ``fake_openai_server.py`` (the model name ``fake-N`` gives N tool steps):
``POST /v1/messages`` answers like Anthropic (SSE events when streamed, the
arguments in two ``input_json_delta`` fragments), ``POST /api/chat`` like
Ollama (NDJSON when streamed, the call whole). Reuses that server's asyncio
protocol; only the answers differ.
"""

from __future__ import annotations

import json
from typing import Any

import fake_openai_server as base

_USAGE = {"input_tokens": 20, "output_tokens": 5}


def decide(request: dict[str, Any], *, ollama: bool) -> tuple[str | None, str, str]:
    """(tool name or None for the final text, call id, arguments or text)."""
    messages = request.get("messages") or []
    if ollama:
        done = sum(1 for m in messages if m.get("role") == "tool")
    else:
        done = sum(
            1
            for m in messages
            if m.get("role") == "user" and isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        )
    if done < base._steps(str(request.get("model", ""))):
        tools = request.get("tools") or []
        name = (tools[0]["function"]["name"] if ollama else tools[0]["name"]) if tools else "add"
        return name, f"toolu_{done}", json.dumps({"a": done, "b": 1})
    return None, "", f"Finished after {done} tool calls."


def anthropic_message(request: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed Messages answer."""
    name, call_id, payload = decide(request, ollama=False)
    if name is None:
        content: list[dict[str, Any]] = [{"type": "text", "text": payload}]
    else:
        content = [{"type": "tool_use", "id": call_id, "name": name, "input": json.loads(payload)}]
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "fake"),
        "content": content,
        "stop_reason": "end_turn" if name is None else "tool_use",
        "stop_sequence": None,
        "usage": _USAGE,
    }


def anthropic_events(request: dict[str, Any]) -> list[bytes]:
    """The same answer as Anthropic SSE events."""
    message = anthropic_message(request)

    def event(kind: str, **data: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    out = [event("message_start", message={**message, "content": [], "stop_reason": None})]
    block = message["content"][0]
    if block["type"] == "text":
        out.append(
            event("content_block_start", index=0, content_block={"type": "text", "text": ""})
        )
        for word in block["text"].split(" "):
            delta = {"type": "text_delta", "text": word + " "}
            out.append(event("content_block_delta", index=0, delta=delta))
    else:
        out.append(event("content_block_start", index=0, content_block={**block, "input": {}}))
        arguments = json.dumps(block["input"])
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            delta = {"type": "input_json_delta", "partial_json": piece}
            out.append(event("content_block_delta", index=0, delta=delta))
    out.append(event("content_block_stop", index=0))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    out.append(event("message_delta", delta=delta, usage={"output_tokens": 5}))
    out.append(event("message_stop"))
    return out


def ollama_answer(request: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed ``/api/chat`` answer."""
    name, _, payload = decide(request, ollama=True)
    message: dict[str, Any] = {"role": "assistant", "content": ""}
    if name is None:
        message["content"] = payload
    else:
        message["tool_calls"] = [{"function": {"name": name, "arguments": json.loads(payload)}}]
    return {
        "model": request.get("model", "fake"),
        "created_at": "2026-01-01T00:00:00Z",
        "message": message,
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 20,
        "eval_count": 5,
    }


def ollama_lines(request: dict[str, Any]) -> list[bytes]:
    """The same answer as NDJSON lines: content in words, the call whole, then the done line."""
    answer = ollama_answer(request)
    message = answer["message"]
    lines = []
    head = {"model": answer["model"], "created_at": answer["created_at"], "done": False}
    if message["content"]:
        for word in message["content"].split(" "):
            lines.append({**head, "message": {"role": "assistant", "content": word + " "}})
    else:
        lines.append({**head, "message": message})
    lines.append({**answer, "message": {"role": "assistant", "content": ""}})
    return [(json.dumps(line) + "\n").encode() for line in lines]


_HEAD_NDJSON = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
)


class _Connection(base._Connection):
    def respond(self, path: str, body: bytes) -> None:
        assert self.transport is not None
        route = path.split("?")[0]
        if not route.endswith(("v1/messages", "api/chat")):
            self.transport.write(base._NOT_FOUND)
            return
        request = json.loads(body)
        ollama = route.endswith("api/chat")
        if request.get("stream"):
            pieces = ollama_lines(request) if ollama else anthropic_events(request)
            parts = [_HEAD_NDJSON if ollama else base._HEAD_SSE]
            parts += [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces]
            parts.append(b"0\r\n\r\n")
            self.transport.write(b"".join(parts))
        else:
            answer = ollama_answer(request) if ollama else anthropic_message(request)
            payload = json.dumps(answer).encode()
            self.transport.write(base._HEAD_JSON % len(payload) + payload)


if __name__ == "__main__":
    base.main(_Connection, __doc__)
