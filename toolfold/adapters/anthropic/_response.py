"""Anthropic ``message`` body -> neutral `ModelResponse` (pure functions).

Content blocks keep their order: ``thinking`` (text and signature) and
``redacted_thinking`` (its data kept as the signature) become `ReasoningPart`
values with ``provider="anthropic"`` so they can go back unchanged; ``text``
becomes `TextPart`; ``tool_use`` becomes `ToolCallPart` with Anthropic's own
``toolu_...`` id and its ``input`` object. Blocks of server tools and newer
block types carry nothing the loop can act on and are skipped.

Values are checked at this boundary: a field of the wrong type is a
`ProviderError` naming its JSON path, never a wrong value in the state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolfold._errors import ProviderError
from toolfold.adapters.anthropic._errors import error_in_body, is_error_body
from toolfold.adapters.anthropic._provider import STOP_REASONS
from toolfold.runtime.core._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from toolfold.runtime.core._request import FinishReason, ModelResponse

PROVIDER = "anthropic"
REDACTED: Mapping[str, Any] = {"type": "redacted_thinking"}


def malformed(path: str, expected: str, value: Any) -> ProviderError:
    """The error for a response value of the wrong type at ``path``."""
    got = type(value).__name__ if value is not None else "null"
    return ProviderError(
        f"{PROVIDER} sent a malformed response: {path} should be {expected}, got {got}",
        provider=PROVIDER,
        status_code=200,
    )


def finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    """Normalise a ``stop_reason`` (calls win over a missing reason)."""
    if raw is None:
        return "tool_calls" if has_calls else "stop"
    return STOP_REASONS.get(raw, "other")


def parse_usage(usage: Any) -> Usage:
    """Neutral usage: input counts the cache reads and writes too [A6 usage.py].

    ``input_tokens`` excludes the cached part, so the neutral input is
    ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``
    and ``cached_tokens`` is the cache reads.
    """
    if not isinstance(usage, Mapping):
        return Usage(requests=1)
    fresh = _int(usage.get("input_tokens"))
    written = _int(usage.get("cache_creation_input_tokens"))
    read = _int(usage.get("cache_read_input_tokens"))
    return Usage(fresh + written + read, _int(usage.get("output_tokens")), read, 0, 1)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_response(body: Mapping[str, Any]) -> ModelResponse:
    """Turn a ``message`` body into a `ModelResponse`.

    Raises:
        ProviderError: The body is an error object, or a value has the wrong
            type (the message names its JSON path).
    """
    if is_error_body(body):
        raise error_in_body(body)
    content = body.get("content")
    if not isinstance(content, list):
        raise malformed("$.content", "an array of content blocks", content)
    parts: list[Part] = []
    calls = 0
    for position, block in enumerate(content):
        part = parse_block(block, f"$.content[{position}]")
        if part is not None:
            parts.append(part)
            calls += isinstance(part, ToolCallPart)
    raw = body.get("stop_reason")
    if raw is not None and not isinstance(raw, str):
        raise malformed("$.stop_reason", "a string", raw)
    model = body.get("model")
    response_id = body.get("id")
    return ModelResponse(
        Message("assistant", parts),
        parse_usage(body.get("usage")),
        finish_reason(raw, bool(calls)),
        raw,
        model if isinstance(model, str) else None,
        response_id if isinstance(response_id, str) else None,
    )


def parse_block(block: Any, path: str) -> Part | None:
    """One content block as a neutral part, or None for a block the loop cannot use."""
    if not isinstance(block, Mapping):
        raise malformed(path, "an object", block)
    kind = block.get("type")
    if kind == "text":
        text = _string(block, "text", path)
        return TextPart(text) if text else None
    if kind == "tool_use":
        arguments = block.get("input")
        if not isinstance(arguments, Mapping):
            raise malformed(f"{path}.input", "an object", arguments)
        return ToolCallPart(
            _string(block, "id", path),
            _string(block, "name", path),
            json.dumps(arguments, ensure_ascii=False),
            arguments,
        )
    if kind == "thinking":
        return ReasoningPart(
            _string(block, "thinking", path), _string(block, "signature", path), PROVIDER
        )
    if kind == "redacted_thinking":
        return ReasoningPart("", _string(block, "data", path), PROVIDER, REDACTED)
    return None


def _string(block: Mapping[str, Any], key: str, path: str) -> str:
    value = block.get(key)
    if not isinstance(value, str):
        raise malformed(f"{path}.{key}", "a string", value)
    return value
