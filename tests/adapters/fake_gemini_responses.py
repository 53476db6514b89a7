"""Fake Gemini and OpenAI Responses servers for the scripted HTTP server.

Each answers from a script of turns (`Calls` / `Text` from ``fake_openai``),
checks every request the way a strict server would, and streams when asked,
in the provider's own framing.

Gemini: calls come without ids (the client must make its own), the first call
of a turn carries a ``thoughtSignature`` that must come back unchanged, and a
failed tool must come back as ``response: {"error": ...}``. Streams are SSE
(``?alt=sse``) or one JSON array written in pieces.

Responses: every turn starts with an encrypted reasoning item that must come
back (same id and content) before that turn's calls; calls are linked by
``call_id``; arguments stream in fragments keyed by ``item_id``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
from fake_openai import Text, Turn
from scripted_http import Recorded, Reply, sse


def _signature(turn_number: int) -> str:
    return f"c2lnbmF0dXJl{turn_number}"


@attrs.define
class FakeGemini:
    """A ``generateContent`` / ``streamGenerateContent`` server from scripted turns."""

    turns: Sequence[Turn]
    foreign_turns: int = 0  # model turns made by another provider, first in the history
    problems: list[str] = attrs.field(factory=list)
    bodies: list[dict[str, Any]] = attrs.field(factory=list)
    paths: list[str] = attrs.field(factory=list)

    def __call__(self, request: Recorded) -> Reply:
        body = request.json()
        self.bodies.append(body)
        self.paths.append(request.path)
        if request.headers.get("x-goog-api-key") is None:
            self.problems.append("no x-goog-api-key header")
        self._check(body)
        turn_number = len(self.bodies) - 1
        turn = self.turns[min(turn_number, len(self.turns) - 1)]
        parts = self._parts(turn, turn_number)
        usage = {
            "promptTokenCount": 10 * (turn_number + 1),
            "candidatesTokenCount": 5,
            "thoughtsTokenCount": 2,
            "totalTokenCount": 10 * (turn_number + 1) + 7,
        }
        if ":streamGenerateContent" not in request.path:
            return Reply(json=self._chunk(parts, usage, "STOP", turn_number))
        chunks = []
        text = "".join(p.get("text", "") for p in parts)
        for i in range(0, len(text), 4):
            chunks.append(self._chunk([{"text": text[i : i + 4]}], usage, None, turn_number))
        calls = [p for p in parts if "functionCall" in p]
        chunks.append(self._chunk(calls, usage, "STOP", turn_number))
        if "alt=sse" in request.path:
            return Reply(headers={"content-type": "text/event-stream"}, chunks=sse(*chunks))
        pieces = (
            [b"["]
            + [
                (("," if n else "") + json.dumps(c, indent=2) + "\n").encode()
                for n, c in enumerate(chunks)
            ]
            + [b"]"]
        )
        # Cut each element in two, so no read holds a whole one.
        cut = [
            half
            for piece in pieces
            for half in (piece[: len(piece) // 2], piece[len(piece) // 2 :])
            if half
        ]
        return Reply(headers={"content-type": "application/json"}, chunks=cut)

    def _chunk(
        self,
        parts: list[dict[str, Any]],
        usage: dict[str, Any],
        finish: str | None,
        turn_number: int,
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": "gemini-fake-001",
            "responseId": f"resp-{turn_number}",
        }

    def _parts(self, turn: Turn, turn_number: int) -> list[dict[str, Any]]:
        if isinstance(turn, Text):
            return [{"text": turn.text}]
        parts: list[dict[str, Any]] = []
        for n, (name, arguments) in enumerate(turn.calls):
            part: dict[str, Any] = {"functionCall": {"name": name, "args": arguments}}
            if n == 0:
                part["thoughtSignature"] = _signature(turn_number)
            parts.append(part)
        return parts

    def _check(self, body: dict[str, Any]) -> None:
        pending: list[dict[str, Any]] = []
        model_turn = 0
        for content in body["contents"]:
            parts = content["parts"]
            if content["role"] == "model":
                calls = [p for p in parts if "functionCall" in p]
                own = model_turn - self.foreign_turns
                expected = _signature(own) if own >= 0 else "skip_thought_signature_validator"
                if calls and calls[0].get("thoughtSignature") != expected:
                    self.problems.append(f"model turn {model_turn}: signature not sent back")
                pending = [c["functionCall"] for c in calls]
                model_turn += 1
                continue
            answers = [p["functionResponse"] for p in parts if "functionResponse" in p]
            for answer in answers:
                match = [c for c in pending if c.get("id") == answer.get("id")]
                if not match or match[0]["name"] != answer["name"]:
                    self.problems.append(f"result {answer} answers no call")
                    continue
                pending.remove(match[0])
                if set(answer["response"]) not in ({"output"}, {"error"}):
                    self.problems.append(f"bad response object {answer['response']}")
            if pending:
                self.problems.append(f"calls without results: {pending}")
                pending = []


@attrs.define
class FakeResponses:
    """A ``POST /v1/responses`` server from scripted turns."""

    turns: Sequence[Turn]
    problems: list[str] = attrs.field(factory=list)
    bodies: list[dict[str, Any]] = attrs.field(factory=list)

    def __call__(self, request: Recorded) -> Reply:
        body = request.json()
        self.bodies.append(body)
        if "previous_response_id" in body:
            self.problems.append("previous_response_id sent")
        self._check(body)
        turn_number = len(self.bodies) - 1
        turn = self.turns[min(turn_number, len(self.turns) - 1)]
        output = self._output(turn, turn_number)
        usage = {
            "input_tokens": 10 * (turn_number + 1),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 3},
            "total_tokens": 10 * (turn_number + 1) + 5,
        }
        response = {
            "id": f"resp_{turn_number}",
            "object": "response",
            "status": "completed",
            "model": body["model"],
            "output": output,
            "usage": usage,
        }
        if not body.get("stream"):
            return Reply(json=response)
        return Reply(headers={"content-type": "text/event-stream"}, chunks=self._events(response))

    def _output(self, turn: Turn, turn_number: int) -> list[dict[str, Any]]:
        reasoning = {
            "type": "reasoning",
            "id": f"rs_{turn_number}",
            "summary": [{"type": "summary_text", "text": f"Thinking {turn_number}."}],
            "encrypted_content": f"enc_{turn_number}",
        }
        if isinstance(turn, Text):
            message = {
                "type": "message",
                "id": f"msg_{turn_number}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
            }
            return [reasoning, message]
        calls = [
            {
                "type": "function_call",
                "id": f"fc_{turn_number}_{n}",
                "call_id": f"call_{turn_number}_{n}",
                "name": name,
                "arguments": json.dumps(arguments),
                "status": "completed",
            }
            for n, (name, arguments) in enumerate(turn.calls)
        ]
        return [reasoning, *calls]

    def _events(self, response: dict[str, Any]) -> list[bytes]:
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"response": {**response, "status": "in_progress", "output": []}})
        ]
        calls = []
        for index, item in enumerate(response["output"]):
            if item["type"] == "reasoning":
                events.append(
                    (
                        "response.output_item.added",
                        {"output_index": index, "item": {**item, "summary": []}},
                    )
                )
                for piece in item["summary"][0]["text"].split(" "):
                    events.append(
                        (
                            "response.reasoning_summary_text.delta",
                            {"item_id": item["id"], "delta": piece + " "},
                        )
                    )
                events.append(("response.output_item.done", {"output_index": index, "item": item}))
            elif item["type"] == "message":
                events.append(
                    (
                        "response.output_item.added",
                        {"output_index": index, "item": {**item, "content": []}},
                    )
                )
                text = item["content"][0]["text"]
                for i in range(0, len(text), 4):
                    events.append(
                        (
                            "response.output_text.delta",
                            {
                                "item_id": item["id"],
                                "output_index": index,
                                "delta": text[i : i + 4],
                            },
                        )
                    )
                events.append(("response.output_item.done", {"output_index": index, "item": item}))
            else:
                calls.append((index, item))
                events.append(
                    (
                        "response.output_item.added",
                        {"output_index": index, "item": {**item, "arguments": ""}},
                    )
                )
        # Argument fragments of every call, interleaved, keyed by item id.
        pieces = [
            [item["arguments"][i : i + 3] for i in range(0, len(item["arguments"]), 3)]
            for _, item in calls
        ]
        for step in range(max((len(p) for p in pieces), default=0)):
            for (index, item), parts in zip(calls, pieces, strict=True):
                if step < len(parts):
                    events.append(
                        (
                            "response.function_call_arguments.delta",
                            {"item_id": item["id"], "output_index": index, "delta": parts[step]},
                        )
                    )
        for index, item in calls:
            events.append(
                (
                    "response.function_call_arguments.done",
                    {"item_id": item["id"], "output_index": index, "arguments": item["arguments"]},
                )
            )
            events.append(("response.output_item.done", {"output_index": index, "item": item}))
        events.append(("response.completed", {"response": response}))
        out: list[bytes] = []
        for number, (kind, payload) in enumerate(events):
            data = {"type": kind, "sequence_number": number, **payload}
            out += sse(data, event=kind)
        return out

    def _check(self, body: dict[str, Any]) -> None:
        calls: dict[str, str] = {}
        answered: set[str] = set()
        for number, item in enumerate(body["input"]):
            kind = item.get("type")
            if kind == "reasoning":
                turn = item["id"].removeprefix("rs_")
                if item.get("encrypted_content") != f"enc_{turn}":
                    self.problems.append(f"reasoning item {item['id']} changed")
                following = body["input"][number + 1] if number + 1 < len(body["input"]) else {}
                if (
                    following.get("type") != "function_call"
                    and following.get("role") != "assistant"
                ):
                    self.problems.append(f"reasoning item {item['id']} not followed by its turn")
            elif kind == "function_call":
                calls[item["call_id"]] = item["name"]
            elif kind == "function_call_output":
                if item["call_id"] not in calls:
                    self.problems.append(f"output for unknown call {item['call_id']}")
                answered.add(item["call_id"])
        if set(calls) - answered:
            self.problems.append(f"calls without outputs: {sorted(set(calls) - answered)}")
