"""Chat Completions response body -> neutral `ModelResponse` (pure functions)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from toolfold._errors import ProviderError
from toolfold.adapters._http._http_errors import status_error
from toolfold.adapters.openai_chat._errors import parse_error
from toolfold.adapters.openai_chat._providers import REASONING_FIELDS
from toolfold.runtime.core._arguments import parse_arguments
from toolfold.runtime.core._messages import (
    FrozenDict,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from toolfold.runtime.core._request import FinishReason, ModelResponse

# finish_reason values [O4 chat_completion_chunk.py]; "model_length" is
# Mistral's [mistral-openapi.json FinishReason]; "error" is OpenRouter's [C8].
FINISH_REASONS: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "model_length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "error": "error",
}


def finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    """Normalise a finish reason.

    Gemini's OpenAI endpoint ends a turn that called tools with ``"stop"``
    (gemini-openai-endpoint-stream-single-call cassette): calls win.
    """
    if has_calls and raw in (None, "stop"):
        return "tool_calls"
    if raw is None:
        return "stop"
    return FINISH_REASONS.get(raw, "other")


def synthetic_id(seed: str, position: int) -> str:
    """A deterministic call id for a provider that sent none (or ``""``)."""
    digest = hashlib.sha256(f"{seed}:{position}".encode()).hexdigest()[:24]
    return f"call_{digest}"


def parse_usage(usage: Mapping[str, Any] | None, *, thinking_in_total: bool = False) -> Usage:
    """Neutral usage from the OpenAI fields and the family's extras.

    Cached prompt tokens: ``prompt_tokens_details.cached_tokens`` (OpenAI),
    ``prompt_cache_hit_tokens`` (DeepSeek [C6]) or ``num_cached_tokens``
    (Mistral, see its cassettes).

    Args:
        usage: The ``usage`` object.
        thinking_in_total: The provider counts hidden thinking in
            ``total_tokens`` only (Gemini's OpenAI endpoint: 35 + 12 of 109 in
            the gemini-openai-endpoint cassette): the gap between the total and
            prompt plus completion is reported as reasoning output. Off for
            everyone else, whose gap (if any) means something else.
    """
    if not usage:
        return Usage(requests=1)
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    total = _int(usage.get("total_tokens"))
    cached = reasoning = 0
    if not usage.keys() <= _PLAIN_USAGE:
        prompt_details = usage.get("prompt_tokens_details") or {}
        completion_details = usage.get("completion_tokens_details") or {}
        cached = _int(prompt_details.get("cached_tokens"))
        cached = cached or _int(usage.get("prompt_cache_hit_tokens"))
        cached = cached or _int(usage.get("num_cached_tokens"))
        reasoning = _int(completion_details.get("reasoning_tokens"))
    if thinking_in_total and not reasoning and total > prompt + completion:
        reasoning = total - prompt - completion
        completion += reasoning
    return Usage(prompt, completion, cached, reasoning, 1)


_PLAIN_USAGE = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})


def _int(value: Any) -> int:
    # type() first: the common case (a plain int) costs one comparison.
    if type(value) is int:
        return value
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def arguments_text(arguments: Any) -> str:
    """Arguments as JSON text; a few servers send an object instead of a string."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments)


def parse_response(
    body: Mapping[str, Any], provider: str, *, thinking_in_total: bool = False
) -> ModelResponse:
    """Turn a ``chat.completion`` body into a `ModelResponse`.

    ``thinking_in_total`` is passed to `parse_usage`.

    Raises:
        ProviderError: The body is an error object, or has no choice.
    """
    if body.get("error") is not None:
        text = json.dumps(body)
        info = parse_error(200, text, {})
        if info.code is not None and info.code.isdigit() and int(info.code) >= 400:
            # OpenRouter and vLLM put the HTTP status in the code: map it like one [C8, C11].
            raise status_error(provider, int(info.code), text, {}, info, "")
        raise ProviderError(
            f"{provider} returned an error with HTTP 200: {info.message}",
            provider=provider,
            status_code=200,
            body=text,
            provider_message=info.message,
            code=info.code,
        )
    choices = body.get("choices") or []
    if not choices:
        raise ProviderError(
            f"{provider} returned a response without choices",
            provider=provider,
            status_code=200,
            body=json.dumps(body),
        )
    choice = choices[0]
    message = choice.get("message") or {}
    response_id = body.get("id") or None
    content = message.get("content")
    parts: list[Part] = _reasoning(message, provider)
    if type(content) is str:
        if content:
            parts.append(TextPart(content))
    else:
        parts.extend(_content(content, provider))
    if not content and isinstance(message.get("refusal"), str):
        parts.append(TextPart(message["refusal"]))
    raw_calls = list(message.get("tool_calls") or [])
    if not raw_calls and isinstance(message.get("function_call"), Mapping):
        raw_calls = [{"function": message["function_call"]}]  # legacy functions API
    seed = response_id or ""
    if not seed and any(not raw.get("id") for raw in raw_calls):
        seed = json.dumps(message, sort_keys=True)  # only a call without an id needs it
    calls = [_call(raw, seed, position) for position, raw in enumerate(raw_calls)]
    raw_finish = choice.get("finish_reason")
    return ModelResponse(
        Message("assistant", (*parts, *calls)),
        parse_usage(body.get("usage"), thinking_in_total=thinking_in_total),
        finish_reason(raw_finish, bool(calls)),
        raw_finish,
        body.get("model"),
        response_id,
    )


def _reasoning(message: Mapping[str, Any], provider: str) -> list[Part]:
    for field in REASONING_FIELDS:
        text = message.get(field)
        if text and isinstance(text, str):  # absent (None) for most answers: one test
            return [ReasoningPart(text, provider=provider)]
    return []


def _content(content: Any, provider: str) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    if not isinstance(content, list):
        return []
    return [
        ReasoningPart(text, provider=provider) if thinking else TextPart(text)
        for thinking, text in content_chunks(content)
    ]


def content_chunks(content: list[Any]) -> list[tuple[bool, str]]:
    """``(is_thinking, text)`` for each non-empty chunk of typed content.

    Mistral's reasoning models answer with typed chunks, in whole responses and
    in stream deltas alike [mistral-openapi.json ContentChunk].
    """
    found: list[tuple[bool, str]] = []
    for chunk in content:
        if not isinstance(chunk, Mapping):
            continue
        if chunk.get("type") == "text" and chunk.get("text"):
            found.append((False, chunk["text"]))
        elif chunk.get("type") == "thinking":
            inner = chunk.get("thinking") or []
            text = "".join(c.get("text", "") for c in inner if isinstance(c, Mapping))
            if text:
                found.append((True, text))
    return found


# Already frozen: the call keeps it as is instead of freezing a new empty dict.
_NO_EXTRA: Mapping[str, Any] = FrozenDict()


def _call(raw: Mapping[str, Any], seed: str, position: int) -> ToolCallPart:
    function = raw.get("function") or {}
    text = arguments_text(function.get("arguments"))
    extra = {"extra_content": raw["extra_content"]} if raw.get("extra_content") else _NO_EXTRA
    return ToolCallPart(
        raw.get("id") or synthetic_id(seed, position),
        str(function.get("name") or ""),
        text or "{}",
        parse_arguments(text),
        extra,
    )
