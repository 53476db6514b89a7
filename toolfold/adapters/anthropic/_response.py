"""Anthropic ``message`` body -> neutral `ModelResponse` (pure functions).

Content blocks keep their order: ``thinking`` (text and signature) and
``redacted_thinking`` (its data kept as the signature) become `ReasoningPart`
values with ``provider="anthropic"`` so they can go back unchanged; ``text``
becomes `TextPart`; ``tool_use`` becomes `ToolCallPart` with Anthropic's own
``toolu_...`` id and its ``input`` object. Blocks of server tools and newer
block types carry nothing the loop can act on and are skipped.

Values are checked at this boundary: a field of the wrong type is a
`MalformedResponseError` naming its JSON path, never a wrong value in the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfold._errors import ProviderFinishError
from toolfold.adapters import _wire as wire
from toolfold.adapters._finishes import abnormal_finish
from toolfold.adapters.anthropic._errors import error_in_body, is_error_body
from toolfold.adapters.anthropic._provider import STOP_REASONS
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from toolfold.runtime.core._request import FinishReason, ModelResponse

# Counts come from `wire.count` (non-negative ints), finish reasons from the
# provider's table (a `FinishReason`): these records are built without the
# constructors' checks (see `builder`), which cost more than the parse.
_usage = builder(Usage)
_model_response = builder(ModelResponse)

PROVIDER = "anthropic"
REDACTED: Mapping[str, Any] = {"type": "redacted_thinking"}


def malformed(path: str, expected: str, value: Any) -> wire.WireError:
    """The error for a response value of the wrong type at ``path`` (see `toolfold.adapters._wire`)."""
    return wire.WireError(path, f"expected {expected}, got {wire.kind(value)}")


#: Why a ``pause_turn`` answer is no answer (`paused`).
PAUSED = (
    "a server tool (web search...) paused a long turn, to be sent back to continue; "
    "toolfold does not keep server tool blocks, so it cannot continue it"
)


def paused(body: str, usage: Usage) -> ProviderFinishError:
    """The error of an answer Anthropic paused (``stop_reason: pause_turn``), billed ``usage``.

    Its text is the turn so far, not an answer: read as one, the run finished
    ``stop``. Raised for a whole answer and a streamed one alike.
    """
    return abnormal_finish(PROVIDER, "pause_turn", None, body=body, why=PAUSED, usage=usage)


def finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    """Normalise a ``stop_reason`` (calls win over a missing reason)."""
    if raw is None:
        return "tool_calls" if has_calls else "stop"
    return STOP_REASONS.get(raw, "other")


def parse_usage(usage: Any, at: str = "$.usage") -> Usage:
    """Neutral usage: input counts the cache reads and writes too [A6 usage.py].

    ``input_tokens`` excludes the cached part, so the neutral input is
    ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``;
    ``cached_tokens`` is the cache reads and ``cache_write_tokens`` the cache
    writes (priced differently, so each is kept). Counts are checked at ``at``.
    """
    if usage is None:
        return Usage(requests=1)
    if not isinstance(usage, Mapping):
        raise malformed(at, "an object", usage)
    fresh = wire.count(usage, "input_tokens", at)
    written = wire.count(usage, "cache_creation_input_tokens", at)
    read = wire.count(usage, "cache_read_input_tokens", at)
    output = wire.count(usage, "output_tokens", at)
    return _usage(fresh + written + read, output, read, 0, 1, written)


def parse_response(body: Mapping[str, Any]) -> ModelResponse:
    """Turn a ``message`` body into a `ModelResponse`.

    Raises:
        ProviderError: The body is an error object.
        MalformedResponseError: A value has the wrong type (with its JSON path).
    """
    with wire.reading(PROVIDER, lambda: wire.dumps_raw(body)):
        return _parse(body)


def _parse(body: Mapping[str, Any]) -> ModelResponse:
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
    raw = wire.text(body, "stop_reason", "$")
    if raw == "pause_turn":
        raise paused(wire.dumps_raw(body), parse_usage(body.get("usage")))
    return _model_response(
        Message("assistant", parts),
        parse_usage(body.get("usage")),
        finish_reason(raw, bool(calls)),
        raw,
        wire.text(body, "model", "$"),
        wire.text(body, "id", "$"),
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
        found = block.get("input")
        if not isinstance(found, Mapping):
            raise malformed(f"{path}.input", "an object", found)
        text, arguments = wire.call_arguments(found, f"{path}.input")
        return ToolCallPart(
            _string(block, "id", path), _string(block, "name", path), text, arguments
        )
    if kind == "thinking":
        return ReasoningPart(
            _string(block, "thinking", path), _string(block, "signature", path), PROVIDER
        )
    if kind == "redacted_thinking":
        return ReasoningPart("", _string(block, "data", path), PROVIDER, REDACTED)
    return None


def _string(block: Mapping[str, Any], key: str, path: str) -> str:
    value = wire.text(block, key, path)
    if value is None:
        raise malformed(f"{path}.{key}", "a string", None)
    return value
