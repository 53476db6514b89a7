"""A fake OpenAI-compatible ``/v1/chat/completions`` for the scripted HTTP server.

It answers from a script of turns (tool calls or text), checks every request it
gets the way a strict server would (each tool result answers a call made
earlier in the same request; each call of the last assistant turn is answered),
and streams like OpenAI when asked: ``id``/``name`` once per index, arguments
in small fragments interleaved across calls, ``finish_reason`` on the last
choice chunk, then a usage chunk when ``stream_options.include_usage`` is set,
then ``[DONE]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
from scripted_http import Recorded, Reply, sse


@attrs.frozen
class Calls:
    """A turn that calls tools: ``(name, arguments)`` pairs."""

    calls: tuple[tuple[str, dict[str, Any]], ...]


@attrs.frozen
class Text:
    """A turn that answers with text."""

    text: str


Turn = Calls | Text


@attrs.define
class FakeChat:
    """The server's brain: the scripted turns, and the problems it saw."""

    turns: Sequence[Turn]
    ids: Sequence[str] = ()  # call ids to hand out (default call_<turn>_<n>)
    problems: list[str] = attrs.field(factory=list)
    bodies: list[dict[str, Any]] = attrs.field(factory=list)

    def __call__(self, request: Recorded) -> Reply:
        body = request.json()
        self.bodies.append(body)
        self._check(body)
        turn_number = len(self.bodies) - 1
        turn = self.turns[min(turn_number, len(self.turns) - 1)]
        message, finish = self._message(turn, turn_number)
        usage = {
            "prompt_tokens": 10 * (turn_number + 1),
            "completion_tokens": 5,
            "total_tokens": 10 * (turn_number + 1) + 5,
        }
        if not body.get("stream"):
            return Reply(
                json={
                    "id": f"chatcmpl-{turn_number}",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )
        include_usage = (body.get("stream_options") or {}).get("include_usage")
        return Reply(
            headers={"content-type": "text/event-stream"},
            chunks=self._chunks(
                body["model"], turn_number, message, finish, usage if include_usage else None
            ),
        )

    def _message(self, turn: Turn, turn_number: int) -> tuple[dict[str, Any], str]:
        if isinstance(turn, Text):
            return {"role": "assistant", "content": turn.text}, "stop"
        calls = []
        for n, (name, arguments) in enumerate(turn.calls):
            given = (
                len([c for t in self.turns[:turn_number] if isinstance(t, Calls) for c in t.calls])
                + n
            )
            call_id = self.ids[given] if given < len(self.ids) else f"call_{turn_number}_{n}"
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            )
        return {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"

    def _chunks(
        self, model: str, turn_number: int, message: dict[str, Any], finish: str, usage: Any
    ) -> list[bytes]:
        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": f"chatcmpl-{turn_number}",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        payloads: list[Any] = [chunk({"role": "assistant", "content": ""})]
        if message.get("content"):
            text = message["content"]
            payloads += [chunk({"content": text[i : i + 4]}) for i in range(0, len(text), 4)]
        calls = message.get("tool_calls") or []
        for index, call in enumerate(calls):
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            payloads.append(chunk({"tool_calls": [head]}))
        # Fragments of every call, interleaved: no fragment is JSON on its own.
        pieces = [
            [
                c["function"]["arguments"][i : i + 3]
                for i in range(0, len(c["function"]["arguments"]), 3)
            ]
            for c in calls
        ]
        for step in range(max((len(p) for p in pieces), default=0)):
            for index, parts in enumerate(pieces):
                if step < len(parts):
                    payloads.append(
                        chunk(
                            {
                                "tool_calls": [
                                    {"index": index, "function": {"arguments": parts[step]}}
                                ]
                            }
                        )
                    )
        payloads.append(chunk({}, finish))
        if usage is not None:
            payloads.append(
                {
                    "id": f"chatcmpl-{turn_number}",
                    "object": "chat.completion.chunk",
                    "model": model,
                    "choices": [],
                    "usage": usage,
                }
            )
        payloads.append("[DONE]")
        return sse(*payloads)

    def _check(self, body: dict[str, Any]) -> None:
        called: set[str] = set()
        last_calls: list[str] = []
        for message in body["messages"]:
            if message["role"] == "assistant":
                last_calls = [c["id"] for c in message.get("tool_calls") or ()]
                called.update(last_calls)
            elif message["role"] == "tool":
                if message["tool_call_id"] not in called:
                    self.problems.append(f"result for unknown call {message['tool_call_id']}")
                if message["tool_call_id"] in last_calls:
                    last_calls.remove(message["tool_call_id"])
            elif last_calls:
                self.problems.append(f"calls without results: {last_calls}")
                last_calls = []
        if last_calls:
            self.problems.append(f"calls without results: {last_calls}")
