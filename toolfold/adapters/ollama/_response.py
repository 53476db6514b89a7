"""Ollama ``/api/chat`` answer -> neutral `ModelResponse` (pure functions).

The answer is ``{"model", "created_at", "message": {"role", "content",
"thinking", "tool_calls"}, "done", "done_reason", "prompt_eval_count",
"eval_count", ...}`` [L1]. Calls arrive whole, arguments as an object [L2
``ToolCallFunction``]; a call without an ``id`` (older servers) gets a
deterministic one. Values are checked at this boundary: a field of the wrong
type is a `MalformedResponseError` naming its JSON path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolfold._errors import ProviderError
from toolfold.adapters import _wire as wire
from toolfold.adapters.ollama._provider import DONE_REASONS
from toolfold.adapters.openai_chat._response import synthetic_id
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
    decoded_arguments,
)
from toolfold.runtime.core._request import FinishReason, ModelResponse

# Counts come from `wire.count` (non-negative ints), finish reasons from the
# provider's table (a `FinishReason`): these records are built without the
# constructors' checks (see `builder`), which cost more than the parse.
_usage = builder(Usage)
_model_response = builder(ModelResponse)

PROVIDER = "ollama"


def malformed(path: str, expected: str, value: Any) -> wire.WireError:
    """The error for an answer value of the wrong type at ``path`` (see `toolfold.adapters._wire`)."""
    return wire.WireError(path, f"expected {expected}, got {wire.kind(value)}")


def error_in_body(data: Mapping[str, Any], status: int = 200) -> ProviderError:
    """The exception for ``{"error": "..."}`` sent with HTTP 200."""
    said = str(data.get("error"))
    return ProviderError(
        f"{PROVIDER} returned an error with HTTP {status}: {said}",
        provider=PROVIDER,
        status_code=status,
        body=json.dumps(data),
        provider_message=said,
    )


def finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    """Normalise a ``done_reason``: ``stop`` with calls is a tool turn [L1]."""
    if has_calls and raw in (None, "stop"):
        return "tool_calls"
    if raw is None:
        return "stop"
    return DONE_REASONS.get(raw, "other")


def parse_usage(data: Mapping[str, Any]) -> Usage:
    """Usage from the final object: ``prompt_eval_count`` in, ``eval_count`` out [L1 usage.mdx]."""
    return _usage(
        wire.count(data, "prompt_eval_count", "$"), wire.count(data, "eval_count", "$"), 0, 0, 1
    )


def seed_of(data: Mapping[str, Any]) -> str:
    """What synthetic call ids are derived from: the model and the answer's timestamp."""
    return f"{data.get('model')}:{data.get('created_at')}"


def message_parts(message: Any, seed: str, first: int = 0) -> tuple[str, str, list[ToolCallPart]]:
    """``(thinking, content, calls)`` of one ``message`` object (whole, or one stream chunk's).

    Args:
        message: The ``message`` object.
        seed: For synthetic ids (`seed_of`).
        first: The position of this message's first call in the whole answer.
    """
    if not isinstance(message, Mapping):
        raise malformed("$.message", "an object", message)
    thinking = wire.text(message, "thinking", "$.message") or ""
    content = wire.text(message, "content", "$.message") or ""
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise malformed("$.message.tool_calls", "an array", raw_calls)
    calls = [
        _call(raw, seed, first + n, f"$.message.tool_calls[{n}]") for n, raw in enumerate(raw_calls)
    ]
    return thinking, content, calls


def _call(raw: Any, seed: str, position: int, path: str) -> ToolCallPart:
    if not isinstance(raw, Mapping):
        raise malformed(path, "an object", raw)
    function = raw.get("function")
    if not isinstance(function, Mapping):
        raise malformed(f"{path}.function", "an object", function)
    name = wire.text(function, "name", f"{path}.function")
    if name is None:
        raise malformed(f"{path}.function.name", "a string", name)
    arguments = function.get("arguments")
    if arguments is None:
        arguments = {}
    decoded: Mapping[str, Any] | None
    if isinstance(arguments, Mapping):
        text, decoded = wire.call_arguments(arguments, f"{path}.function.arguments")
    elif isinstance(arguments, str):  # tolerated: the OpenAI-style string
        arguments = wire.encodable(arguments)
        text, decoded = arguments or "{}", decoded_arguments(arguments)
    else:
        raise malformed(f"{path}.function.arguments", "an object", arguments)
    call_id = wire.text(raw, "id", path)
    if not call_id:
        call_id = synthetic_id(seed, position)
    return ToolCallPart(call_id, name, text, decoded)


def parse_response(data: Mapping[str, Any]) -> ModelResponse:
    """Turn a non-streamed ``/api/chat`` answer into a `ModelResponse`.

    Raises:
        ProviderError: The answer is ``{"error": ...}``.
        MalformedResponseError: A value has the wrong type (with its JSON path).
    """
    if data.get("error") is not None:
        raise error_in_body(data)
    with wire.reading(PROVIDER, lambda: wire.dumps_raw(data)):
        return _parse(data)


def _parse(data: Mapping[str, Any]) -> ModelResponse:
    thinking, content, calls = message_parts(data.get("message"), seed_of(data))
    parts: list[Part] = []
    if thinking:
        parts.append(ReasoningPart(thinking, provider=PROVIDER))
    if content:
        parts.append(TextPart(content))
    raw = wire.text(data, "done_reason", "$")
    return _model_response(
        Message("assistant", (*parts, *calls)),
        parse_usage(data),
        finish_reason(raw, bool(calls)),
        raw,
        wire.text(data, "model", "$"),
        None,
    )
