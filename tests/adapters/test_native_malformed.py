"""Malformed Gemini and Responses bodies are the provider's fault: a `MalformedResponseError` with a path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scripted_http import Reply, ScriptedServer, sse

import toolfold
from toolfold import MalformedResponseError
from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters.gemini import DecoderState as GeminiState
from toolfold.adapters.gemini import decode_chunk
from toolfold.adapters.gemini import parse_response as parse_gemini
from toolfold.adapters.openai_responses import DecoderState as ResponsesState
from toolfold.adapters.openai_responses import decode_event
from toolfold.adapters.openai_responses import parse_response as parse_responses
from toolfold.runtime import Message, ModelRequest

KEY = "AIzaMalformedKey0123456789"


def _gemini(*parts: Any, **top: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": list(parts)}, "finishReason": "STOP"}
        ],
        **top,
    }


GEMINI_BAD = [
    ({"candidates": 3}, "$.candidates"),
    ([1], "$"),
    ({"candidates": [None]}, "$.candidates[0]"),
    ({"candidates": [{"content": {"parts": {"text": "x"}}}]}, "$.candidates[0].content.parts"),
    (_gemini({"text": 5}), "$.candidates[0].content.parts[0].text"),
    (
        _gemini({"functionCall": {"name": "f", "args": [1]}}),
        "$.candidates[0].content.parts[0].functionCall.args",
    ),
    (
        _gemini({"functionCall": {"name": ["f"]}}),
        "$.candidates[0].content.parts[0].functionCall.name",
    ),
    (
        _gemini({"functionCall": {"name": "f", "id": 7}}),
        "$.candidates[0].content.parts[0].functionCall.id",
    ),
    (
        _gemini({"text": "x", "thoughtSignature": {}}),
        "$.candidates[0].content.parts[0].thoughtSignature",
    ),
    (
        _gemini({"text": "x"}, usageMetadata={"promptTokenCount": -1}),
        "$.usageMetadata.promptTokenCount",
    ),
    ({"candidates": [{"finishReason": 1}]}, "$.candidates[0].finishReason"),
    (_gemini({"text": "x"}, responseId=["r"]), "$.responseId"),
]

RESPONSES_BAD = [
    ({"output": {}}, "$.output"),
    ({"output": [3]}, "$.output[0]"),
    ({"output": [{"type": "function_call", "call_id": 5}]}, "$.output[0].call_id"),
    (
        {"output": [{"type": "function_call", "call_id": "c", "arguments": {"a": 1}}]},
        "$.output[0].arguments",
    ),
    (
        {"output": [{"type": "message", "content": [{"type": "output_text", "text": 1}]}]},
        "$.output[0].content[0].text",
    ),
    ({"output": [{"type": "reasoning", "id": "rs", "summary": "x"}]}, "$.output[0].summary"),
    ({"output": [], "usage": {"input_tokens": "9"}}, "$.usage.input_tokens"),
    (
        {"output": [], "usage": {"input_tokens_details": {"cache_write_tokens": -1}}},
        "$.usage.input_tokens_details.cache_write_tokens",
    ),
    ({"output": [], "status": 1}, "$.status"),
]


@pytest.mark.parametrize(("body", "path"), GEMINI_BAD, ids=[p for _, p in GEMINI_BAD])
def test_gemini_bodies_with_wrong_types(body: Any, path: str) -> None:
    """Each wrong type in a Gemini body is a MalformedResponseError at its path, the body kept."""
    with pytest.raises(MalformedResponseError) as caught:
        parse_gemini(body)
    assert caught.value.path == path
    assert caught.value.provider == "gemini"


@pytest.mark.parametrize(("body", "path"), GEMINI_BAD, ids=[p for _, p in GEMINI_BAD])
def test_gemini_stream_chunks_with_wrong_types(body: Any, path: str) -> None:
    """The same wrong types inside a stream chunk raise the same error."""
    with pytest.raises(MalformedResponseError) as caught:
        decode_chunk(GeminiState(), body)
    assert caught.value.path == path


@pytest.mark.parametrize(("body", "path"), RESPONSES_BAD, ids=[p for _, p in RESPONSES_BAD])
def test_responses_bodies_with_wrong_types(body: Any, path: str) -> None:
    """Each wrong type in a Responses body is a MalformedResponseError at its path."""
    with pytest.raises(MalformedResponseError) as caught:
        parse_responses(body, "openai-responses")
    assert caught.value.path == path


@pytest.mark.parametrize(
    ("event", "path"),
    [
        (
            {"type": "response.output_item.added", "item": {"type": "function_call", "name": 3}},
            "$.item.name",
        ),
        ({"type": "response.function_call_arguments.delta", "item_id": "i", "delta": 4}, "$.delta"),
        (
            {"type": "response.completed", "response": {"usage": {"output_tokens": 1.5}}},
            "$.response.usage.output_tokens",
        ),
        ({"type": 9}, "$.type"),
    ],
)
def test_responses_events_with_wrong_types(event: Any, path: str) -> None:
    """A stream event with a wrong type is a MalformedResponseError carrying the event."""
    data = json.dumps(event)
    with pytest.raises(MalformedResponseError) as caught:
        decode_event(ResponsesState("openai-responses"), SSEEvent(data=data, event=None))
    assert caught.value.path == path
    assert caught.value.body == data


def test_over_http_the_error_keeps_the_raw_body_without_the_key(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Over HTTP, a malformed Gemini body and a malformed stream chunk raise with the key scrubbed."""
    bad = _gemini({"text": f"echo {KEY}", "thoughtSignature": 5})
    http_server.add(
        Reply(json=bad), Reply(headers={"content-type": "text/event-stream"}, chunks=sse(bad))
    )
    model = toolfold.model(
        "gemini:gemini-2.5-flash", base_url=http_server.url, api_key=KEY, retry=0
    )
    opened.append(model)
    request = ModelRequest([Message.user("hi")])
    with pytest.raises(MalformedResponseError) as whole:
        model.request_sync(request)
    with pytest.raises(MalformedResponseError) as streamed:
        list(model.stream_sync(request))
    for caught in (whole.value, streamed.value):
        assert caught.path == "$.candidates[0].content.parts[0].thoughtSignature"
        assert KEY not in caught.body
        assert "echo ***" in caught.body
