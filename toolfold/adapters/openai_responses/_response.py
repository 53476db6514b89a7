"""OpenAI Responses ``Response`` object -> neutral `ModelResponse` (pure functions).

Output items map one to one [O5 response_output_item.py]: ``message`` ->
`TextPart` (its ``output_text`` and ``refusal`` parts); ``reasoning`` ->
`ReasoningPart` (summary text; id and encrypted content in ``signature``, to
go back unchanged); ``function_call`` -> `ToolCallPart` with ``call_id`` as
its id and the item id (``fc_...``) in ``provider_data``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolfold._errors import ProviderError
from toolfold.adapters.openai_responses._providers import INCOMPLETE_REASONS, REASONING_PROVIDER
from toolfold.adapters.openai_responses._request import reasoning_signature
from toolfold.runtime.core._arguments import parse_arguments
from toolfold.runtime.core._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
)
from toolfold.runtime.core._request import FinishReason, ModelResponse


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_usage(usage: Any) -> Usage:
    """Neutral usage [O5 response_usage.py]."""
    if not isinstance(usage, Mapping):
        return Usage(requests=1)
    inputs = usage.get("input_tokens_details")
    outputs = usage.get("output_tokens_details")
    return Usage(
        _int(usage.get("input_tokens")),
        _int(usage.get("output_tokens")),
        _int(inputs.get("cached_tokens")) if isinstance(inputs, Mapping) else 0,
        _int(outputs.get("reasoning_tokens")) if isinstance(outputs, Mapping) else 0,
        1,
    )


def finish(response: Mapping[str, Any], has_calls: bool) -> tuple[FinishReason, str | None]:
    """``(finish reason, raw reason)`` from the response status and incomplete details."""
    status = _str(response.get("status"))
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = _str(details.get("reason")) if isinstance(details, Mapping) else None
        return INCOMPLETE_REASONS.get(reason or "", "other"), reason or status
    if status in (None, "completed"):
        return ("tool_calls" if has_calls else "stop"), status
    return "other", status


def parse_item(item: Mapping[str, Any]) -> list[Part]:
    """The neutral parts one output item makes."""
    kind = item.get("type")
    if kind == "function_call":
        return [parse_call(item)]
    if kind == "message":
        texts = []
        for content in item.get("content") or ():
            if not isinstance(content, Mapping):
                continue
            text = content.get("text") if content.get("type") == "output_text" else None
            text = text if text is not None else content.get("refusal")
            if isinstance(text, str) and text:
                texts.append(TextPart(text))
        return list(texts)
    if kind == "reasoning" and isinstance(item.get("id"), str):
        return [parse_reasoning(item)]
    return []


def parse_call(item: Mapping[str, Any]) -> ToolCallPart:
    """A ``function_call`` item as a `ToolCallPart` (arguments are a JSON string)."""
    text = _str(item.get("arguments")) or ""
    call_id = _str(item.get("call_id")) or _str(item.get("id")) or ""
    item_id = _str(item.get("id"))
    return ToolCallPart(
        call_id,
        str(item.get("name") or ""),
        text or "{}",
        parse_arguments(text),
        {"item_id": item_id} if item_id else None,
    )


def summary_text(item: Mapping[str, Any]) -> str:
    """The reasoning summary of a reasoning item, as one text."""
    texts = [
        s.get("text", "")
        for s in item.get("summary") or ()
        if isinstance(s, Mapping) and isinstance(s.get("text"), str)
    ]
    return "\n\n".join(t for t in texts if t)


def parse_reasoning(item: Mapping[str, Any]) -> ReasoningPart:
    """A reasoning item as a `ReasoningPart` whose signature brings it back unchanged."""
    signature = reasoning_signature(item["id"], _str(item.get("encrypted_content")))
    return ReasoningPart(summary_text(item), signature, REASONING_PROVIDER)


def parse_response(body: Mapping[str, Any], provider: str) -> ModelResponse:
    """Turn a ``Response`` object into a `ModelResponse`.

    Raises:
        ProviderError: The response failed (``status: failed`` with its error).
    """
    error = body.get("error")
    if isinstance(error, Mapping) or body.get("status") == "failed":
        info = error if isinstance(error, Mapping) else {}
        message = _str(info.get("message")) or "the response failed"
        raise ProviderError(
            f"{provider} returned a failed response: {message}",
            provider=provider,
            status_code=200,
            body=json.dumps(body)[:5000],
            provider_message=message,
            code=_str(info.get("code")),
        )
    parts: list[Part] = []
    for item in body.get("output") or ():
        if isinstance(item, Mapping):
            parts.extend(parse_item(item))
    has_calls = any(type(p) is ToolCallPart for p in parts)
    reason, raw = finish(body, has_calls)
    return ModelResponse(
        Message("assistant", tuple(parts)),
        parse_usage(body.get("usage")),
        reason,
        raw,
        _str(body.get("model")),
        _str(body.get("id")),
    )
