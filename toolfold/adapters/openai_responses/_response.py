"""OpenAI Responses ``Response`` object -> neutral `ModelResponse` (pure functions).

Output items map one to one [O5 response_output_item.py]: ``message`` ->
`TextPart` (its ``output_text`` and ``refusal`` parts); ``reasoning`` ->
`ReasoningPart` (summary text, or the ``reasoning_text`` content when there is
some; encrypted content as ``signature``, the item id and, with content, the
texts of the summary and content parts in ``provider_data``, to go back unchanged; the
id of an assistant ``message`` item right after it as ``"message_id"``, and its
``phase`` as ``"message_phase"``, for that message to go back as the same item); ``function_call`` -> `ToolCallPart` with
``call_id`` as its id and the item id (``fc_...``) in ``provider_data``;
``image_generation_call`` (the built-in image tool) -> `ImagePart` and an
empty `ReasoningPart` keeping the item's id (`parse_image_call`); an item of
another type -> an empty `ReasoningPart` naming it, which the next request
reports as left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from toolfold._errors import ProviderError
from toolfold.adapters import _wire as wire
from toolfold.adapters._codec import IMAGE_CALL, OUTPUT_ITEM
from toolfold.adapters.openai_chat._response import synthetic_id
from toolfold.adapters.openai_responses._providers import INCOMPLETE_REASONS, REASONING_PROVIDER
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._messages import (
    ImagePart,
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


def parse_usage(usage: Mapping[str, Any], at: str = "$.usage") -> Usage:
    """Neutral usage [O5 response_usage.py; openai-openapi.yaml ResponseUsage].

    ``input_tokens`` counts the cached tokens, read or written;
    ``input_tokens_details`` has the reads (``cached_tokens``) and the writes
    (``cache_write_tokens``).

    Raises:
        WireError: A count that is not a non-negative integer.
    """
    if not usage:
        return Usage(requests=1)
    inputs = wire.mapping(usage, "input_tokens_details", at)
    outputs = wire.mapping(usage, "output_tokens_details", at)
    inputs_at = f"{at}.input_tokens_details"
    return _usage(
        wire.count(usage, "input_tokens", at),
        wire.count(usage, "output_tokens", at),
        wire.count(inputs, "cached_tokens", inputs_at),
        wire.count(outputs, "reasoning_tokens", f"{at}.output_tokens_details"),
        1,
        wire.count(inputs, "cache_write_tokens", inputs_at),
    )


def failed_usage(response: Mapping[str, Any]) -> Usage | None:
    """The usage a failed response reports (the answer was billed: `ProviderError.usage`),
    read as best it can be: None when there is none or it is unreadable (a count that is
    no count), which must not hide the failure the provider reported."""
    usage = response.get("usage")
    if not usage or not isinstance(usage, Mapping):
        return None
    try:
        return parse_usage(usage)
    except wire.WireError:
        return None


def finish(
    response: Mapping[str, Any], has_calls: bool, at: str = "$", refused: bool = False
) -> tuple[FinishReason, str | None]:
    """``(finish reason, raw reason)`` from the response status and incomplete details.

    A completed answer without calls that holds a ``refusal`` (``refused``, or
    one in the response's ``output``) is ``content_filter``: the model declined,
    as an Anthropic refusal reads; ``stop`` would say it answered.
    """
    status = wire.text(response, "status", at)
    if status == "incomplete":
        details = wire.mapping(response, "incomplete_details", at)
        reason = wire.text(details, "reason", f"{at}.incomplete_details")
        return INCOMPLETE_REASONS.get(reason or "", "other"), reason or status
    if status in (None, "completed"):
        if has_calls:
            return "tool_calls", status
        if refused or _refuses(response, at):
            return "content_filter", status
        return "stop", status
    return "other", status


def _refuses(response: Mapping[str, Any], at: str) -> bool:
    """Whether a message item of the response's ``output`` holds a non-empty refusal."""
    output = wire.array(response, "output", at)
    for i in range(len(output)):
        item = wire.mapping(output, i, f"{at}.output")
        if wire.text(item, "type", f"{at}.output[{i}]") != "message":
            continue
        contents = wire.array(item, "content", f"{at}.output[{i}]")
        for j in range(len(contents)):
            content = wire.mapping(contents, j, f"{at}.output[{i}].content")
            where = f"{at}.output[{i}].content[{j}]"
            if wire.text(content, "type", where) == "refusal" and wire.text(
                content, "refusal", where
            ):
                return True
    return False


def parse_item(item: Mapping[str, Any], at: str) -> list[Part]:
    """The neutral parts one output item makes."""
    kind = wire.text(item, "type", at)
    if kind == "function_call":
        # An item the provider left ``incomplete`` is a half-written call: it never
        # runs, whatever the response's finish (see `without_cut_calls`).
        return [] if wire.text(item, "status", at) == "incomplete" else [parse_call(item, at)]
    if kind == "message":
        texts: list[Part] = []
        contents = wire.array(item, "content", at)
        for i in range(len(contents)):
            content = wire.mapping(contents, i, f"{at}.content")
            key = (
                "text"
                if wire.text(content, "type", f"{at}.content[{i}]") == "output_text"
                else "refusal"
            )
            text = wire.text(content, key, f"{at}.content[{i}]")
            if text:
                texts.append(TextPart(text))
        return texts
    if kind == "reasoning" and wire.text(item, "id", at):
        return [parse_reasoning(item, at)]
    if kind == "image_generation_call":
        return parse_image_call(item, at)
    if kind == "reasoning" or kind is None:
        return []
    # An item toolfold does not read (a built-in tool's call, say): an empty part
    # names it, so the next request's report says it was not sent back.
    return [
        ReasoningPart(
            "", None, REASONING_PROVIDER, {OUTPUT_ITEM: [kind, wire.text(item, "id", at)]}
        )
    ]


_IMAGE_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


def parse_image_call(item: Mapping[str, Any], at: str) -> list[Part]:
    """An ``image_generation_call`` item [openai-openapi.yaml ImageGenToolCall]: its image
    (base64 ``result``; none while failed) as an `ImagePart`, then an empty `ReasoningPart`
    keeping the item's id and status, from which the request sends the item back."""
    item_id = wire.text(item, "id", at) or ""
    status = wire.text(item, "status", at) or "completed"
    data = wire.base64_bytes(item, "result", at)
    marker = ReasoningPart("", None, REASONING_PROVIDER, {IMAGE_CALL: [item_id, status]})
    if data is None:
        return [marker]
    media_type = _IMAGE_TYPES.get(wire.text(item, "output_format", at) or "", "image/png")
    return [ImagePart(data, media_type=media_type), marker]


def parse_call(item: Mapping[str, Any], at: str) -> ToolCallPart:
    """A ``function_call`` item as a `ToolCallPart` (arguments are a JSON string)."""
    text = wire.text(item, "arguments", at) or ""
    item_id = wire.text(item, "id", at)
    return ToolCallPart(
        wire.text(item, "call_id", at) or item_id or "",
        wire.text(item, "name", at) or "",
        text or "{}",
        decoded_arguments(text),
        {"item_id": item_id} if item_id else None,
    )


#: Between the parts of a reasoning summary, in the one text they make.
SUMMARY_SEPARATOR = "\n\n"


def summary_texts(item: Mapping[str, Any], at: str) -> list[str]:
    """The texts of a reasoning item's summary parts."""
    summary = wire.array(item, "summary", at)
    return [
        wire.text(wire.mapping(summary, i, f"{at}.summary"), "text", f"{at}.summary[{i}]") or ""
        for i in range(len(summary))
    ]


def joined(texts: list[str]) -> str:
    """Summary (or reasoning text) parts as one text, as they stream (see `SUMMARY_SEPARATOR`)."""
    return SUMMARY_SEPARATOR.join(t for t in texts if t)


def as_summary(text: str) -> list[str]:
    """The summary parts a part's text alone stands for: the text as one part (none if empty)."""
    return [text] if text else []


def reasoning_texts(item: Mapping[str, Any], at: str) -> list[str]:
    """The texts of a reasoning item's ``reasoning_text`` content parts (the raw reasoning
    open-weight models behind Responses-compatible servers send; OpenAI's send none)."""
    content = wire.array(item, "content", at)
    texts = []
    for i in range(len(content)):
        block = wire.mapping(content, i, f"{at}.content")
        if wire.text(block, "type", f"{at}.content[{i}]") == "reasoning_text":
            texts.append(wire.text(block, "text", f"{at}.content[{i}]") or "")
    return texts


def parse_reasoning(item: Mapping[str, Any], at: str) -> ReasoningPart:
    """A reasoning item as a `ReasoningPart` that brings it back unchanged.

    The encrypted content is the signature; the item id is in ``provider_data``.
    The part's text is the summary (its parts joined), as OpenAI's models send
    it; a summary the text alone does not give back (several parts, or an
    empty one) keeps its parts' texts in ``provider_data["summary"]``. An item
    with ``reasoning_text`` content (open-weight models behind
    Responses-compatible servers) has that raw reasoning as its text instead,
    as its stream gives it whichever comes first (see `_stream`), and keeps the texts of both in
    ``provider_data`` (``"content"`` and ``"summary"``). The item is rebuilt
    from them (see `_request.reasoning_item`).
    """
    summary = summary_texts(item, at)
    data: dict[str, Any] = {"item_id": wire.text(item, "id", at)}
    texts = reasoning_texts(item, at)
    if texts:
        data["content"] = texts
        data["summary"] = summary
    elif summary != as_summary(joined(summary)):  # (only then: a state keeps no copy)
        data["summary"] = summary
    return ReasoningPart(
        joined(texts) or joined(summary),
        wire.text(item, "encrypted_content", at),
        REASONING_PROVIDER,
        data,
    )


def following_message(item: Mapping[str, Any], at: str) -> dict[str, str]:
    """What a reasoning part keeps of ``item`` when it is the assistant message that follows
    it: its id (``"message_id"``) and its ``phase`` (``"message_phase"``, which newer models
    want back); nothing when ``item`` is not a message or has no id."""
    if wire.text(item, "type", at) != "message":
        return {}
    message_id = wire.text(item, "id", at)
    if not message_id:
        return {}
    phase = wire.text(item, "phase", at)
    return {"message_id": message_id, **({"message_phase": phase} if phase else {})}


def followed_by(part: ReasoningPart, message: Mapping[str, str]) -> ReasoningPart:
    """``part`` keeping what it keeps of the message item that followed it (see
    `following_message`).

    OpenAI refuses a reasoning item sent back without the item that followed it
    ("Item 'rs_...' of type 'reasoning' was provided without its required
    following item"); the text that followed it goes back as that message item
    (see `_request.reasoning_item`).
    """
    return attrs.evolve(part, provider_data={**part.provider_data, **message})


def parse_response(body: Any, provider: str) -> ModelResponse:
    """Turn a ``Response`` object into a `ModelResponse`.

    Raises:
        ProviderError: The response failed (``status: failed`` with its error).
        MalformedResponseError: A field has the wrong type (its JSON path named).
    """
    with wire.reading(provider, lambda: wire.dumps_raw(body)):
        return _response(wire.root(body), provider)


def _response(body: Mapping[str, Any], provider: str) -> ModelResponse:
    error = wire.mapping(body, "error", "$")
    if error or wire.text(body, "status", "$") == "failed":
        message = wire.text(error, "message", "$.error") or "the response failed"
        failed = ProviderError(
            f"{provider} returned a failed response: {message}",
            provider=provider,
            status_code=200,
            body=wire.dumps_raw(body)[:5000],
            provider_message=message,
            code=wire.text(error, "code", "$.error"),
        )
        failed.usage = failed_usage(body)  # (the failed answer was billed)
        raise failed
    parts: list[Part] = []
    output = wire.array(body, "output", "$")
    follows_reasoning = False
    for i in range(len(output)):
        item = wire.mapping(output, i, "$.output")
        following = following_message(item, f"$.output[{i}]") if follows_reasoning else {}
        if following and parts and isinstance(parts[-1], ReasoningPart):
            parts[-1] = followed_by(parts[-1], following)
        new = parse_item(item, f"$.output[{i}]")
        # (A reasoning item's part: not the empty one an image or unknown item leaves.)
        follows_reasoning = (
            bool(new) and isinstance(new[-1], ReasoningPart) and "item_id" in new[-1].provider_data
        )
        parts.extend(new)
    response_id = wire.text(body, "id", "$")
    calls = [i for i, p in enumerate(parts) if type(p) is ToolCallPart]
    for position, i in enumerate(calls):
        call = parts[i]
        if type(call) is ToolCallPart and not call.id:
            # Neither call_id nor id (some compatible servers): made up as the
            # stream makes it (`_stream._item_added`), before the ids are made unique.
            parts[i] = attrs.evolve(call, id=synthetic_id(response_id or "", position))
    reason, raw = finish(body, bool(calls))
    return _model_response(
        Message("assistant", tuple(parts)),
        parse_usage(wire.mapping(body, "usage", "$")),
        reason,
        raw,
        wire.text(body, "model", "$"),
        response_id,
    )
