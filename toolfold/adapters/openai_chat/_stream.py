"""Chat Completions SSE chunks -> neutral stream events, as a pure decoder.

`decode_chunk` maps one SSE event (its ``event:`` name and ``data:`` text) and
the decoder state to the next state and the neutral events it produced;
`decode_end` says what the end of the body means. The events then fold with
`toolfold.runtime.fold_stream` into the response a non-streaming call gives.

Rules (providers.md §1, §6 and the recorded streams):

- Calls are keyed by ``index``; OpenAI sends ``id``/``name`` once per index and
  argument fragments after. llama.cpp repeats the name in every delta: a name
  on a started index is ignored, never appended.
- Mistral and Gemini's OpenAI endpoint send whole calls without ``index``:
  each such entry is a new call at the next free index (by position).
- A call ends only when the stream says so: on the chunk carrying
  ``finish_reason``, or at ``data: [DONE]`` if no finish reason came. A body
  that stops before either is a `StreamError`, never a half call.
- Errors inside an HTTP 200 stream (Groq's ``event: error``, OpenAI's and
  OpenRouter's ``data: {"error": ...}``) raise with the provider's message.
- Usage comes in ``usage`` (OpenAI's last chunk, Mistral's finishing chunk)
  or ``x_groq.usage`` (Groq [C2]).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from toolfold._errors import StreamError
from toolfold.adapters.openai_chat._errors import inband_error
from toolfold.adapters.openai_chat._providers import REASONING_FIELDS
from toolfold.adapters.openai_chat._response import (
    arguments_text,
    content_chunks,
    finish_reason,
    parse_usage,
    synthetic_id,
)
from toolfold.runtime.core._stream import (
    ReasoningDelta,
    ResponseInfo,
    StreamEvent,
    StreamFinish,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageUpdate,
)


@attrs.frozen
class _Started:
    index: int
    wire_index: int | None
    id: str


@attrs.frozen
class DecoderState:
    """What the decoder remembers between chunks.

    Attributes:
        provider: The provider name (for errors and reasoning parts).
        calls: Calls started so far, in order.
        open: Indexes of calls not yet ended.
        seed: Seed for synthetic call ids (the response id when known).
        info_sent: `ResponseInfo` was emitted.
        finished: A finish reason arrived.
        done: ``data: [DONE]`` arrived.
        thinking_in_total: See `parse_usage` (Gemini's OpenAI endpoint).
    """

    provider: str
    calls: tuple[_Started, ...] = ()
    open: tuple[int, ...] = ()
    seed: str | None = None
    info_sent: bool = False
    finished: bool = False
    done: bool = False
    thinking_in_total: bool = False


def decode_chunk(
    state: DecoderState, data: str, event: str | None = None
) -> tuple[DecoderState, list[StreamEvent]]:
    """Decode one SSE event.

    Args:
        state: The decoder state so far.
        data: The event's data text.
        event: The ``event:`` name, if any.

    Raises:
        ToolUseFailedError: Groq refused the generated call inside the stream.
        StreamError: Any other in-band error, or a data line that is not JSON.
    """
    if data == "[DONE]":
        return _end(attrs.evolve(state, done=True))
    error = inband_error(state.provider, event, data)
    if error is not None:
        raise error
    try:
        chunk = json.loads(data)
    except ValueError as exc:
        raise StreamError(
            f"{state.provider} sent a stream event that is not JSON: {data[:200]!r}",
            provider=state.provider,
            status_code=200,
            body=data,
        ) from exc
    if not isinstance(chunk, Mapping):
        return state, []
    events: list[StreamEvent] = []
    if not state.info_sent:
        seed = chunk.get("id") or f"{chunk.get('model')}:{chunk.get('created')}"
        state = attrs.evolve(state, info_sent=True, seed=seed)
        events.append(ResponseInfo(chunk.get("model"), chunk.get("id") or None))
    for choice in chunk.get("choices") or ():
        if isinstance(choice, Mapping) and choice.get("index", 0) == 0:
            state = _choice(state, choice, events)
    usage = chunk.get("usage") or _groq_usage(chunk)
    if isinstance(usage, Mapping):
        events.append(UsageUpdate(parse_usage(usage, thinking_in_total=state.thinking_in_total)))
    return state, events


def decode_end(state: DecoderState) -> list[StreamEvent]:
    """The body ended (no more bytes).

    Raises:
        StreamError: The stream stopped before a finish reason or ``[DONE]``.
    """
    if state.done or (state.finished and not state.open):
        return []
    pending = [c.id for c in state.calls if c.index in state.open]
    detail = f" with tool calls still open ({', '.join(pending)})" if pending else ""
    raise StreamError(
        f"{state.provider} stream ended before the response finished{detail}",
        provider=state.provider,
        status_code=200,
    )


def _groq_usage(chunk: Mapping[str, Any]) -> Any:
    extra = chunk.get("x_groq")
    return extra.get("usage") if isinstance(extra, Mapping) else None


def _end(state: DecoderState) -> tuple[DecoderState, list[StreamEvent]]:
    events: list[StreamEvent] = [ToolCallEnd(i) for i in state.open]
    if not state.finished:
        events.append(StreamFinish(finish_reason(None, bool(state.calls)), None))
    return attrs.evolve(state, open=(), finished=True), events


def _choice(
    state: DecoderState, choice: Mapping[str, Any], events: list[StreamEvent]
) -> DecoderState:
    delta = choice.get("delta") or {}
    for field in REASONING_FIELDS:
        text = delta.get(field)
        if isinstance(text, str) and text:
            events.append(ReasoningDelta(text, provider=state.provider))
            break
    content = delta.get("content")
    if isinstance(content, str) and content:
        events.append(TextDelta(content))
    elif isinstance(content, list):
        _content_chunks(state, content, events)
    for entry in delta.get("tool_calls") or ():
        if isinstance(entry, Mapping):
            state = _tool_entry(state, entry, events)
    raw = choice.get("finish_reason")
    if raw == "error":
        # OpenRouter ends a failed stream this way; the error object usually
        # comes first and is raised above [C8].
        raise StreamError(
            f"{state.provider} ended the stream with finish_reason 'error'",
            provider=state.provider,
            status_code=200,
        )
    if raw is not None:
        events.extend(ToolCallEnd(i) for i in state.open)
        if not state.finished:
            events.append(StreamFinish(finish_reason(raw, bool(state.calls)), raw))
        state = attrs.evolve(state, open=(), finished=True)
    return state


def _content_chunks(state: DecoderState, content: list[Any], events: list[StreamEvent]) -> None:
    events.extend(
        ReasoningDelta(text, provider=state.provider) if thinking else TextDelta(text)
        for thinking, text in content_chunks(content)
    )


def _tool_entry(
    state: DecoderState, entry: Mapping[str, Any], events: list[StreamEvent]
) -> DecoderState:
    function = entry.get("function") or {}
    fragment = arguments_text(function.get("arguments"))
    started = _find(state, entry)
    if started is None:
        wire_index = entry.get("index")
        index = (
            wire_index
            if isinstance(wire_index, int) and not any(c.index == wire_index for c in state.calls)
            else max((c.index for c in state.calls), default=-1) + 1
        )
        call_id = entry.get("id") or synthetic_id(state.seed or "", len(state.calls))
        extra = {"extra_content": entry["extra_content"]} if entry.get("extra_content") else {}
        events.append(ToolCallStart(index, call_id, str(function.get("name") or ""), extra))
        state = attrs.evolve(
            state,
            calls=(*state.calls, _Started(index, wire_index, call_id)),
            open=(*state.open, index),
        )
        started = state.calls[-1]
    if fragment:
        events.append(ToolCallDelta(started.index, fragment))
    return state


def _find(state: DecoderState, entry: Mapping[str, Any]) -> _Started | None:
    """The started call this entry continues, or None when it starts a new one."""
    wire_index = entry.get("index")
    call_id = entry.get("id")
    if isinstance(wire_index, int):
        for call in reversed(state.calls):
            if call.wire_index == wire_index and call.index in state.open:
                # A different non-empty id at a known index is a new call
                # (servers that reuse index 0 for every whole call).
                if call_id and call_id != call.id:
                    return None
                return call
        return None
    if call_id:
        return next((c for c in state.calls if c.id == call_id and c.index in state.open), None)
    function = entry.get("function") or {}
    if not function.get("name") and state.open:
        # An anonymous fragment continues the latest open call.
        return next(c for c in reversed(state.calls) if c.index == state.open[-1])
    return None
