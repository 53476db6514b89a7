"""Gemini ``GenerateContentResponse`` -> neutral `ModelResponse` (pure functions).

Parts map one to one [G4 Part]: ``text`` -> `TextPart`; ``thought: true`` ->
`ReasoningPart` (provider ``gemini``); ``functionCall`` -> `ToolCallPart`, with
its ``thoughtSignature`` kept in ``provider_data`` to go back unchanged [G2];
``inlineData``/``fileData`` (images a model generates) -> `ImagePart` or
`FilePart` (one with ``thought: true``, a draft made while thinking, is left
out with its signature: it is not the answer); a signature on a text or media part -> an empty signed
`ReasoningPart` after it (the request builder puts it back on that part). A call without an ``id`` gets a
deterministic one from the response id and its position, so a replay gives the
same ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolfold._errors import ProviderError, ProviderFinishError
from toolfold.adapters import _wire as wire
from toolfold.adapters._finishes import abnormal_finish
from toolfold.adapters.gemini._errors import stream_error
from toolfold.adapters.gemini._providers import FAILED_FINISHES, FINISH_REASONS
from toolfold.adapters.openai_chat._response import synthetic_id
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
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

PROVIDER = "gemini"


def parse_usage(usage: Mapping[str, Any], at: str = "$.usageMetadata") -> Usage:
    """Neutral usage from ``usageMetadata`` [G4 GenerateContentResponseUsageMetadata].

    Input counts the prompt and the tool-use prompt; output counts the
    candidates and the thoughts (``totalTokenCount`` is their sum).

    Raises:
        WireError: A count that is not a non-negative integer.
    """
    if not usage:
        return Usage(requests=1)
    thoughts = wire.count(usage, "thoughtsTokenCount", at)
    return _usage(
        wire.count(usage, "promptTokenCount", at)
        + wire.count(usage, "toolUsePromptTokenCount", at),
        wire.count(usage, "candidatesTokenCount", at) + thoughts,
        wire.count(usage, "cachedContentTokenCount", at),
        thoughts,
        1,
    )


def finish_reason(raw: str | None, has_calls: bool) -> FinishReason:
    """Normalise a finish reason: ``STOP`` with calls is a tool turn."""
    if raw is None or raw == "STOP":
        return "tool_calls" if has_calls else "stop"
    return FINISH_REASONS.get(raw, "other")


def failed_candidate(
    provider: str,
    candidate: Mapping[str, Any],
    raw: str | None,
    body: Mapping[str, Any],
    at: str = "$.candidates[0]",
) -> ProviderFinishError:
    """The error of a candidate whose finish reason is a failure (``MALFORMED_FUNCTION_CALL``,
    ``MISSING_THOUGHT_SIGNATURE``...: `FAILED_FINISHES`), with its ``finishMessage``: its
    text, often empty, is no answer, whole or streamed [G4 FinishReason]. ``body``'s
    ``usageMetadata`` (a stream's last chunk carries the answer's) is the usage billed."""
    said = wire.text(candidate, "finishMessage", at)
    usage = wire.mapping(body, "usageMetadata", "$")
    return abnormal_finish(
        provider,
        raw or "",
        said,
        body=wire.dumps_raw(body),
        why=FAILED_FINISHES.get(raw or "", "the answer failed"),
        usage=parse_usage(usage) if usage else None,
    )


def no_candidates(provider: str, body: str) -> ProviderError:
    """The error of an answer with no candidate and no ``promptFeedback.blockReason``,
    whole or a stream that ended without one: there is no answer to read, not even an
    empty one. ``body``: the body, or the stream's last chunk (key-free)."""
    return ProviderError(
        f"{provider} returned a response without candidates: no answer to read",
        provider=provider,
        status_code=200,
        body=body[:2000],
    )


def first_candidate(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first candidate, or None (a blocked prompt has none)."""
    candidates = wire.array(body, "candidates", "$")
    return wire.mapping(candidates, 0, "$.candidates") if candidates else None


_CANDIDATE = "$.candidates[0]"


def candidate_parts(candidate: Mapping[str, Any] | None) -> list[tuple[Mapping[str, Any], str]]:
    """The candidate's content parts, each with its JSON path."""
    if candidate is None:
        return []
    content = wire.mapping(candidate, "content", _CANDIDATE)
    at = f"{_CANDIDATE}.content.parts"
    parts = wire.array(content, "parts", f"{_CANDIDATE}.content")
    return [(wire.mapping(parts, i, at), f"{at}[{i}]") for i in range(len(parts))]


def parse_part(part: Mapping[str, Any], at: str, seed: str, position: int) -> list[Part]:
    """The neutral parts one wire part makes (``position`` numbers calls without ids)."""
    signature = wire.text(part, "thoughtSignature", at)
    key = "functionCall" if "functionCall" in part else "function_call"
    call = wire.mapping(part, key, at)
    if call:
        return [parse_call(call, f"{at}.{key}", signature, seed, position)]
    text = wire.text(part, "text", at)
    if text is None:
        media = parse_media(part, at)
        if media is None:
            return []
        if part.get("thought") is True:
            # A thought image is a draft the model made while thinking, not its
            # answer: left out, with any signature of its own (it signs only
            # the draft, which does not go back).
            return []
        out: list[Part] = [media]
    elif part.get("thought") is True:
        return [ReasoningPart(text, signature, PROVIDER)]
    else:
        out = [TextPart(text)] if text else []
    if signature is not None:
        out.append(ReasoningPart("", signature, PROVIDER))
    return out


def parse_media(part: Mapping[str, Any], at: str) -> ImagePart | FilePart | None:
    """An ``inlineData`` (bytes) or ``fileData`` (URI) part as an `ImagePart` (an
    ``image/*`` type) or a `FilePart`, or None for a part that is neither [G4 Part]:
    a model asked for images (``responseModalities``) answers with them."""
    inline = wire.mapping(part, "inlineData", at)
    if inline:
        where = f"{at}.inlineData"
        mime = wire.text(inline, "mimeType", where) or "application/octet-stream"
        data = wire.base64_bytes(inline, "data", where) or b""
        return (
            ImagePart(data, media_type=mime) if _is_image(mime) else FilePart(data, media_type=mime)
        )
    linked = wire.mapping(part, "fileData", at)
    if linked:
        where = f"{at}.fileData"
        mime = wire.text(linked, "mimeType", where) or "application/octet-stream"
        uri = wire.text(linked, "fileUri", where) or ""
        return (
            ImagePart(url=uri, media_type=mime)
            if _is_image(mime)
            else FilePart(url=uri, media_type=mime)
        )
    return None


def _is_image(mime: str) -> bool:
    return mime.lower().startswith("image/")


def parse_call(
    call: Mapping[str, Any], at: str, signature: str | None, seed: str, position: int
) -> ToolCallPart:
    """A ``functionCall`` as a `ToolCallPart` (``args`` is an object on the wire)."""
    found = call.get("args")
    if found is None:
        found = {}
    elif not isinstance(found, Mapping):
        raise wire.WireError(f"{at}.args", f"expected an object, got {wire.kind(found)}")
    text, args = wire.call_arguments(found, f"{at}.args")
    call_id = wire.text(call, "id", at)
    return ToolCallPart(
        call_id or synthetic_id(seed, position),
        wire.text(call, "name", at) or "",
        text,
        args,
        {"thought_signature": signature} if signature is not None else None,
    )


def seed_of(body: Mapping[str, Any]) -> str:
    """What synthetic call ids derive from: the response id, else the body itself."""
    response_id = wire.text(body, "responseId", "$")
    if response_id:
        return response_id
    return wire.dumps_raw(body.get("candidates"))


def block_reason(body: Mapping[str, Any]) -> str | None:
    """Why the prompt was blocked before any candidate (``promptFeedback.blockReason``)."""
    feedback = wire.mapping(body, "promptFeedback", "$")
    return wire.text(feedback, "blockReason", "$.promptFeedback")


def parse_response(body: Any, provider: str = PROVIDER) -> ModelResponse:
    """Turn a ``GenerateContentResponse`` body into a `ModelResponse`.

    A prompt blocked before any candidate (``promptFeedback.blockReason``) is a
    response with no content and finish reason ``content_filter``.

    Raises:
        StreamError: The body is an error object sent with HTTP 200.
        MalformedResponseError: A field has the wrong type (its JSON path named).
    """
    with wire.reading(provider, lambda: wire.dumps_raw(body)):
        return _response(wire.root(body), provider)


def _response(body: Mapping[str, Any], provider: str) -> ModelResponse:
    if body.get("error") is not None:
        raise stream_error(provider, body)
    candidate = first_candidate(body)
    seed = seed_of(body)
    parts: list[Part] = []
    calls = 0
    for wire_part, at in candidate_parts(candidate):
        made = parse_part(wire_part, at, seed, calls)
        calls += sum(1 for p in made if type(p) is ToolCallPart)
        parts.extend(made)
    if candidate is None:
        raw = block_reason(body)
        if raw is None:
            raise no_candidates(provider, wire.dumps_raw(body))
        finish: FinishReason = "content_filter"
    else:
        raw = wire.text(candidate, "finishReason", _CANDIDATE)
        finish = finish_reason(raw, calls > 0)
        if finish == "error":
            raise failed_candidate(provider, candidate, raw, body, _CANDIDATE)
    return _model_response(
        Message("assistant", tuple(parts)),
        parse_usage(wire.mapping(body, "usageMetadata", "$")),
        finish,
        raw,
        wire.text(body, "modelVersion", "$"),
        wire.text(body, "responseId", "$"),
    )
