"""Arguments sent as a JSON object (Anthropic, Gemini, Ollama) nested too deep: an argument error.

Argument text nested too deep (OpenAI, Anthropic's stream) is an argument error
the model reads and can correct; the same arguments sent as an object failed
the whole model call as a malformed response. Both now read the same.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolfold import Agent, tool
from toolfold.adapters import _wire as wire
from toolfold.adapters.anthropic import DecoderState as AnthropicState
from toolfold.adapters.anthropic import decode_end as anthropic_end
from toolfold.adapters.anthropic import decode_event as anthropic_event
from toolfold.adapters.anthropic import parse_response as parse_anthropic
from toolfold.adapters.gemini import DecoderState as GeminiState
from toolfold.adapters.gemini import decode_chunk
from toolfold.adapters.gemini import decode_end as gemini_end
from toolfold.adapters.gemini import parse_response as parse_gemini
from toolfold.adapters.ollama import DecoderState as OllamaState
from toolfold.adapters.ollama import decode_end as ollama_end
from toolfold.adapters.ollama import decode_line
from toolfold.adapters.ollama import parse_response as parse_ollama
from toolfold.runtime import ModelResponse, StreamState, finish_stream, fold_stream
from toolfold.runtime.core._arguments import argument_problem
from toolfold.testing import FunctionModel


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


TOO_DEEP = nested(wire.MAX_DEPTH + 6)
DEEPEST = nested(wire.MAX_DEPTH)


def anthropic(arguments: Any) -> ModelResponse:
    return parse_anthropic(
        {
            "content": [
                {"type": "text", "text": "Calling."},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": arguments},
            ],
            "stop_reason": "tool_use",
        }
    )


def anthropic_stream(arguments: Any) -> ModelResponse:
    """A stream whose tool block starts with its input filled in (as some gateways send it)."""
    state, events = AnthropicState(), []
    for payload in (
        {"type": "message_start", "message": {"id": "m1", "model": "claude", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Calling."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": arguments},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ):
        state, new = anthropic_event(state, json.dumps(payload))
        events.extend(new)
    return _folded([*events, *anthropic_end(state)])


def gemini_body(arguments: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Calling."},
                        {"functionCall": {"name": "f", "args": arguments}},
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "responseId": "r1",
    }


def gemini_stream(arguments: Any) -> ModelResponse:
    state, events = decode_chunk(GeminiState(), gemini_body(arguments))
    return _folded([*events, *gemini_end(state)])


def ollama_body(arguments: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "message": {
            "role": "assistant",
            "content": "Calling.",
            "tool_calls": [{"function": {"name": "f", "arguments": arguments}}],
        },
        "done": True,
        "done_reason": "stop",
    }


def ollama_stream(arguments: Any) -> ModelResponse:
    state, events = decode_line(OllamaState(), json.dumps(ollama_body(arguments)))
    return _folded([*events, *ollama_end(state)])


def _folded(events: list[Any]) -> ModelResponse:
    folded = StreamState()
    for event in events:
        folded = fold_stream(folded, event)
    return finish_stream(folded, lambda n: f"made{n}")


PARSERS = {
    "anthropic": anthropic,
    "anthropic-stream": anthropic_stream,
    "gemini": lambda a: parse_gemini(gemini_body(a)),
    "gemini-stream": gemini_stream,
    "ollama": lambda a: parse_ollama(ollama_body(a)),
    "ollama-stream": ollama_stream,
}


@pytest.mark.parametrize("wire_format", sorted(PARSERS))
def test_too_deep_object_arguments_are_an_argument_problem(wire_format: str) -> None:
    response = PARSERS[wire_format](TOO_DEEP)
    [call] = response.message.tool_calls
    assert call.arguments is None
    assert response.message.text == "Calling."  # the rest of the answer stands
    assert argument_problem(call.arguments_text) == (
        f"nested more than {wire.MAX_DEPTH} levels deep",
        0,
    )
    assert call.arguments_text.isascii()


@pytest.mark.parametrize("wire_format", sorted(PARSERS))
def test_object_arguments_within_the_limit_are_kept(wire_format: str) -> None:
    response = PARSERS[wire_format](DEEPEST)
    [call] = response.message.tool_calls
    assert call.arguments == DEEPEST
    assert json.loads(call.arguments_text) == DEEPEST


def test_the_model_reads_the_argument_error_and_corrects_itself() -> None:
    """Through the loop: the call gets an argument error, the next answer is used."""
    seen: list[str] = []

    @tool
    def f(a: Any) -> str:
        """Take a value."""
        seen.append(json.dumps(a))
        return "ok"

    answers = iter([anthropic(TOO_DEEP), anthropic({"a": 1})])

    def reply(request: Any) -> Any:
        return next(answers, "done")

    response = Agent(FunctionModel(reply), tools=[f]).run("go")
    assert response.text == "done"
    assert seen == ["1"]
    results = [r for m in response.messages if m.role == "tool" for r in m.tool_results]
    assert results[0].is_error
    assert f"nested more than {wire.MAX_DEPTH} levels deep" in results[0].content
