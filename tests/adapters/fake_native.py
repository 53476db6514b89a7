"""Fake Anthropic Messages and Ollama ``/api/chat`` servers for the scripted HTTP server.

Each answers from a script of turns (`Calls` or `Text`, shared with the
OpenAI fake) and checks every request the way the real API does:

- Anthropic: ``max_tokens`` present; roles alternate user/assistant starting
  with user; the turn after an assistant turn with ``tool_use`` blocks is a
  user turn whose first blocks are a ``tool_result`` for every one of them;
  a scripted thinking block comes back unchanged. Streams like the API:
  ``message_start``, per block ``content_block_start`` / deltas (arguments in
  small ``input_json_delta`` fragments, a ``ping`` between) /
  ``content_block_stop``, ``message_delta``, ``message_stop``.
- Ollama: no ``tool_choice``; every ``role: "tool"`` message names its tool
  (``tool_name``) and answers a call made earlier; streams NDJSON with the
  content in pieces, calls whole, and the counts on the ``done`` line.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import attrs
from fake_openai import Calls, Text, Turn
from scripted_http import Recorded, Reply

__all__ = ["Calls", "FakeAnthropic", "FakeOllama", "Text"]

SIGNATURE = "EqQBCkYIBxgCKkBfakesignature=="


@attrs.define
class FakeAnthropic:
    """The Messages server's brain: scripted turns, and the problems it saw."""

    turns: Sequence[Turn]
    thinking: str | None = None  # a signed thinking block opening every tool turn
    problems: list[str] = attrs.field(factory=list)
    bodies: list[dict[str, Any]] = attrs.field(factory=list)
    paths: list[str] = attrs.field(factory=list)

    def __call__(self, request: Recorded) -> Reply:
        body = request.json()
        self.bodies.append(body)
        self.paths.append(request.path)
        self._check(body, request)
        number = len(self.bodies) - 1
        turn = self.turns[min(number, len(self.turns) - 1)]
        content, stop = self._content(turn, number)
        usage = {
            "input_tokens": 10 * (number + 1),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 2,
            "output_tokens": 5,
        }
        message = {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return Reply(json=message)
        return Reply(
            headers={"content-type": "text/event-stream; charset=utf-8"},
            chunks=_anthropic_events(message),
        )

    def _content(self, turn: Turn, number: int) -> tuple[list[dict[str, Any]], str]:
        if isinstance(turn, Text):
            return [{"type": "text", "text": turn.text}], "end_turn"
        blocks: list[dict[str, Any]] = []
        if self.thinking is not None:
            blocks.append({"type": "thinking", "thinking": self.thinking, "signature": SIGNATURE})
        blocks += [
            {"type": "tool_use", "id": f"toolu_{number}_{n}", "name": name, "input": arguments}
            for n, (name, arguments) in enumerate(turn.calls)
        ]
        return blocks, "tool_use"

    def _check(self, body: dict[str, Any], request: Recorded) -> None:
        if not isinstance(body.get("max_tokens"), int):
            self.problems.append("max_tokens missing")
        if request.headers.get("anthropic-version") != "2023-06-01":
            self.problems.append("anthropic-version header missing")
        roles = [m["role"] for m in body["messages"]]
        if roles[:1] != ["user"] or any(a == b for a, b in itertools.pairwise(roles)):
            self.problems.append(f"roles do not alternate from user: {roles}")
        pending: list[str] = []
        for message in body["messages"]:
            blocks = message["content"]
            if isinstance(blocks, str):
                blocks = [{"type": "text", "text": blocks}]
            if pending:
                answered = [b.get("tool_use_id") for b in blocks[: len(pending)]]
                if message["role"] != "user" or sorted(answered) != sorted(pending):
                    self.problems.append(f"calls {pending} not answered first by {blocks}")
                pending = []
            if message["role"] == "assistant":
                pending = [b["id"] for b in blocks if b["type"] == "tool_use"]
                if self.thinking is not None and pending:
                    first = blocks[0]
                    if first != {
                        "type": "thinking",
                        "thinking": self.thinking,
                        "signature": SIGNATURE,
                    }:
                        self.problems.append(f"thinking block not sent back unchanged: {first}")
        if pending:
            self.problems.append(f"calls without results: {pending}")


def _anthropic_events(message: dict[str, Any]) -> list[bytes]:
    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()

    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    out = [event("message_start", {"message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            out.append(
                event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "text", "text": ""}},
                )
            )
            out.append(b'event: ping\ndata: {"type": "ping"}\n\n')
            text = block["text"]
            for at in range(0, len(text), 5):
                delta = {"type": "text_delta", "text": text[at : at + 5]}
                out.append(event("content_block_delta", {"index": index, "delta": delta}))
        elif block["type"] == "thinking":
            out.append(
                event(
                    "content_block_start",
                    {"index": index, "content_block": {"type": "thinking", "thinking": ""}},
                )
            )
            delta = {"type": "thinking_delta", "thinking": block["thinking"]}
            out.append(event("content_block_delta", {"index": index, "delta": delta}))
            delta = {"type": "signature_delta", "signature": block["signature"]}
            out.append(event("content_block_delta", {"index": index, "delta": delta}))
        else:
            head = {**block, "input": {}}
            out.append(event("content_block_start", {"index": index, "content_block": head}))
            arguments = json.dumps(block["input"])
            pieces = [""] + [arguments[at : at + 4] for at in range(0, len(arguments), 4)]
            for piece in pieces:
                delta = {"type": "input_json_delta", "partial_json": piece}
                out.append(event("content_block_delta", {"index": index, "delta": delta}))
        out.append(event("content_block_stop", {"index": index}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    out.append(
        event(
            "message_delta",
            {"delta": delta, "usage": {"output_tokens": message["usage"]["output_tokens"]}},
        )
    )
    out.append(event("message_stop", {}))
    return out


@attrs.define
class FakeOllama:
    """The ``/api/chat`` server's brain: scripted turns, and the problems it saw."""

    turns: Sequence[Turn]
    with_ids: bool = False  # newer servers give calls an id; older ones do not
    problems: list[str] = attrs.field(factory=list)
    bodies: list[dict[str, Any]] = attrs.field(factory=list)

    def __call__(self, request: Recorded) -> Reply:
        body = request.json()
        self.bodies.append(body)
        self._check(body, request)
        number = len(self.bodies) - 1
        turn = self.turns[min(number, len(self.turns) - 1)]
        message: dict[str, Any] = {"role": "assistant", "content": ""}
        if isinstance(turn, Text):
            message["content"] = turn.text
        else:
            message["tool_calls"] = [
                {
                    **({"id": f"call_{number}_{n}"} if self.with_ids else {}),
                    "function": {"index": n, "name": name, "arguments": arguments},
                }
                for n, (name, arguments) in enumerate(turn.calls)
            ]
        final = {
            "model": body["model"],
            "created_at": f"2026-01-01T00:00:0{number}Z",
            "done": True,
            "done_reason": "stop",
            "total_duration": 1000,
            "prompt_eval_count": 10 * (number + 1),
            "eval_count": 5,
        }
        if body.get("stream") is False:
            return Reply(json={**final, "message": message})
        lines: list[dict[str, Any]] = []
        text = message["content"]
        for at in range(0, len(text), 5):
            piece = {"role": "assistant", "content": text[at : at + 5]}
            lines.append(
                {
                    "model": body["model"],
                    "created_at": final["created_at"],
                    "message": piece,
                    "done": False,
                }
            )
        if message.get("tool_calls"):
            calls = {"role": "assistant", "content": "", "tool_calls": message["tool_calls"]}
            lines.append(
                {
                    "model": body["model"],
                    "created_at": final["created_at"],
                    "message": calls,
                    "done": False,
                }
            )
        lines.append({**final, "message": {"role": "assistant", "content": ""}})
        return Reply(
            headers={"content-type": "application/x-ndjson"},
            chunks=[(json.dumps(line) + "\n").encode() for line in lines],
        )

    def _check(self, body: dict[str, Any], request: Recorded) -> None:
        if request.path != "/api/chat":
            self.problems.append(f"path {request.path}")
        if "tool_choice" in body:
            self.problems.append("tool_choice sent")
        if "stream" not in body:
            self.problems.append("stream not stated (Ollama would stream)")
        called: list[str] = []
        for message in body["messages"]:
            if message["role"] == "assistant":
                called += [c["function"]["name"] for c in message.get("tool_calls") or ()]
                for call in message.get("tool_calls") or ():
                    if not isinstance(call["function"]["arguments"], dict):
                        self.problems.append("arguments not an object")
            elif message["role"] == "tool" and message.get("tool_name") not in called:
                self.problems.append(f"result for a tool not called: {message}")
