"""Gemini ``GenerateContentResponse`` -> neutral `ModelResponse` (pure functions).

Parts map one to one [G4 Part]: ``text`` -> `TextPart`; ``thought: true`` ->
`ReasoningPart` (provider ``gemini``); ``functionCall`` -> `ToolCallPart`, with
its ``thoughtSignature`` kept in ``provider_data`` to go back unchanged [G2]; a
signature on a text part -> an empty signed `ReasoningPart` after it (the
request builder puts it back on that part). A call without an ``id`` gets a
deterministic one from the response id and its position, so a replay gives the
same ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolfold._errors import ProviderError
from toolfold.adapters.gemini._errors import stream_error
from toolfold.adapters.gemini._providers import FINISH_REASONS
from toolfold.adapters.openai_chat._response import synthetic_id
from toolfold.runtime.core._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from toolfold.runtime.core._request import FinishReason, ModelResponse

PROVIDER = "gemini"


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def parse_usage(usage: Any) -> Usage:
    """Neutral usage from ``usageMetadata`` [G4 GenerateContentResponseUsageMetadata].

    Input counts the prompt and the tool-use prompt; output counts the
    candidates and the thoughts (``totalTokenCount`` is their sum).
    """
    if not isinstance(usage, Mapping):
        return Usage(requests=1)
    thoughts = _int(usage.get("thoughtsTokenCount"))
    return Usage(
        _int(usage.get("promptTokenCount")) + _int(usage.get("toolUsePromptTokenCount")),
        _int(usage.get("candidatesTokenCount")) + thoughts,
        _int(usage.get("cachedContentTokenCount")),
        thoughts,
        1,
    )


def finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    """Normalise a finish reason: ``STOP`` with calls is a tool turn."""
    if raw is None or raw == "STOP":
        return "tool_calls" if has_calls else "stop"
    return FINISH_REASONS.get(raw, "other")


def first_candidate(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first candidate, or None (a blocked prompt has none)."""
    candidates = body.get("candidates")
    if isinstance(candidates, list) and candidates and isinstance(candidates[0], Mapping):
        return candidates[0]
    return None


def candidate_parts(candidate: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The candidate's content parts that are objects."""
    content = candidate.get("content") if candidate is not None else None
    parts = content.get("parts") if isinstance(content, Mapping) else None
    if not isinstance(parts, list):
        return []
    return [p for p in parts if isinstance(p, Mapping)]


def parse_part(part: Mapping[str, Any], seed: str, position: int) -> list[Part]:
    """The neutral parts one wire part makes (``position`` numbers calls without ids)."""
    signature = part.get("thoughtSignature")
    if not isinstance(signature, str):
        signature = None
    call = part.get("functionCall") or part.get("function_call")
    if isinstance(call, Mapping):
        return [parse_call(call, signature, seed, position)]
    text = part.get("text")
    if not isinstance(text, str):
        return []
    if part.get("thought") is True:
        return [ReasoningPart(text, signature, PROVIDER)]
    out: list[Part] = [TextPart(text)] if text else []
    if signature is not None:
        out.append(ReasoningPart("", signature, PROVIDER))
    return out


def parse_call(
    call: Mapping[str, Any], signature: str | None, seed: str, position: int
) -> ToolCallPart:
    """A ``functionCall`` as a `ToolCallPart` (``args`` is an object on the wire)."""
    args = call.get("args")
    arguments = args if isinstance(args, Mapping) else {}
    call_id = call.get("id")
    return ToolCallPart(
        call_id if isinstance(call_id, str) and call_id else synthetic_id(seed, position),
        str(call.get("name") or ""),
        json.dumps(arguments, ensure_ascii=False),
        arguments,
        {"thought_signature": signature} if signature is not None else None,
    )


def seed_of(body: Mapping[str, Any]) -> str:
    """What synthetic call ids derive from: the response id, else the body itself."""
    response_id = body.get("responseId")
    if isinstance(response_id, str) and response_id:
        return response_id
    return json.dumps(first_candidate(body), sort_keys=True, default=str)


def parse_response(body: Mapping[str, Any], provider: str = PROVIDER) -> ModelResponse:
    """Turn a ``GenerateContentResponse`` body into a `ModelResponse`.

    A prompt blocked before any candidate (``promptFeedback.blockReason``) is a
    response with no content and finish reason ``content_filter``.

    Raises:
        StreamError: The body is an error object sent with HTTP 200.
    """
    if body.get("error") is not None:
        raise stream_error(provider, body)
    candidate = first_candidate(body)
    seed = seed_of(body)
    parts: list[Part] = []
    calls = 0
    for wire in candidate_parts(candidate):
        made = parse_part(wire, seed, calls)
        calls += sum(1 for p in made if type(p) is ToolCallPart)
        parts.extend(made)
    raw = candidate.get("finishReason") if candidate is not None else None
    if candidate is None:
        raw = _block_reason(body)
        if raw is None:
            raise ProviderError(
                f"{provider} returned a response without candidates",
                provider=provider,
                status_code=200,
                body=json.dumps(body)[:2000],
            )
    raw = raw if isinstance(raw, str) else None
    finish: FinishReason = "content_filter" if candidate is None else finish_reason(raw, calls > 0)
    model = body.get("modelVersion")
    response_id = body.get("responseId")
    return ModelResponse(
        Message("assistant", tuple(parts)),
        parse_usage(body.get("usageMetadata")),
        finish,
        raw,
        model if isinstance(model, str) else None,
        response_id if isinstance(response_id, str) else None,
    )


def _block_reason(body: Mapping[str, Any]) -> str | None:
    feedback = body.get("promptFeedback")
    reason = feedback.get("blockReason") if isinstance(feedback, Mapping) else None
    return reason if isinstance(reason, str) else None
