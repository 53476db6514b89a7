"""Anthropic Messages SSE events -> neutral stream events, as a pure decoder.

`decode_event` maps one Server-Sent Event and the decoder state to the next
state and the neutral events it produced; `decode_end` says what the end of
the body means. The events fold with `toolfold.runtime.fold_stream` into the
response a non-streaming call gives.

Rules (providers.md §3 [A2, A6 raw_message_stream_event.py] and the recorded
streams):

- ``message_start`` carries the model, the id and the input side of usage;
  ``message_delta`` the stop reason and the cumulative output tokens (newer
  recordings repeat the input side there too; a ``null`` count there leaves
  the earlier one).
- Every block is keyed by its ``index``. A ``tool_use`` block starts with
  ``input: {}`` and its arguments arrive as ``input_json_delta.partial_json``
  fragments (the first often ``""``; a tool without parameters sends only
  that); the call ends at its ``content_block_stop``, never before.
- ``thinking`` text arrives as ``thinking_delta`` and its signature as one
  ``signature_delta`` before the block stops; a ``redacted_thinking`` block
  arrives whole in its start event.
- ``ping`` (whatever its data), an event with empty data, and event types
  this decoder does not know are skipped (the API may add new ones);
  ``event: error`` raises a `StreamError` with the
  provider's error type as ``code`` (``overloaded_error``).
- A body that ends before ``message_stop`` with a call still open, or before
  any stop reason, is a `StreamError`, never a half call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from toolfold._errors import StreamError
from toolfold.adapters import _wire as wire
from toolfold.adapters._codec import carries_nothing, event_json
from toolfold.adapters.anthropic._errors import stream_error
from toolfold.adapters.anthropic._response import (
    REDACTED,
    finish_reason,
    malformed,
    parse_usage,
    paused,
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

PROVIDER = "anthropic"


@attrs.frozen
class DecoderState:
    """What the decoder remembers between events.

    Attributes:
        usage: The raw usage fields seen so far (input side, then output).
        tools: Indexes of the ``tool_use`` blocks started.
        open: Indexes of tool blocks not yet stopped.
        fed: Tool blocks that received an argument fragment.
        initial: Arguments a tool block started with, when not ``{}``.
        finished: A stop reason arrived.
        done: ``message_stop`` arrived.
        held: By part (``"text"``, ``"reasoning"`` or a tool block's index), the high
            surrogate its block's last piece ended with, held back for its next piece
            (`wire.hold`).
    """

    usage: Mapping[str, Any] = attrs.field(factory=dict)
    tools: frozenset[int] = frozenset()
    open: tuple[int, ...] = ()
    fed: frozenset[int] = frozenset()
    initial: Mapping[int, str] = attrs.field(factory=dict)
    finished: bool = False
    done: bool = False
    held: Mapping[wire.HeldKey, str] = wire.NOTHING_HELD


def decode_event(
    state: DecoderState, data: str, event: str | None = None
) -> tuple[DecoderState, list[StreamEvent]]:
    """Decode one SSE event.

    Args:
        state: The decoder state so far.
        data: The event's data text.
        event: The ``event:`` name, if any.

    Raises:
        StreamError: An ``error`` event, or data that is not JSON.
        MalformedResponseError: A value of the wrong type (with its JSON path).
    """
    if event == "error":
        raise stream_error(data)
    if carries_nothing(data, event):
        return state, []
    payload = event_json(PROVIDER, data)
    with wire.reading(PROVIDER, lambda: data):
        if not isinstance(payload, Mapping):
            raise malformed("$", "an object", payload)
        kind = payload.get("type", event)
        if kind == "error":
            raise stream_error(data)
        handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return state, []  # ping, and event types added after this decoder
        return handler(state, payload)


def decode_end(state: DecoderState) -> list[StreamEvent]:
    """The body ended (no more bytes).

    Raises:
        StreamError: The stream stopped before ``message_stop`` with a call
            still open, or before any stop reason.
    """
    if state.done or (state.finished and not state.open):
        return []
    detail = f" with tool call blocks {list(state.open)} still open" if state.open else ""
    raise StreamError(
        f"{PROVIDER} stream ended before the message finished{detail}",
        provider=PROVIDER,
        status_code=200,
    )


def _message_start(
    state: DecoderState, payload: Mapping[str, Any]
) -> tuple[DecoderState, list[StreamEvent]]:
    message = payload.get("message")
    if not isinstance(message, Mapping):
        raise malformed("$.message", "an object", message)
    info = ResponseInfo(
        wire.text(message, "model", "$.message"), wire.text(message, "id", "$.message")
    )
    events: list[StreamEvent] = [info]
    usage = message.get("usage")
    if usage is not None:
        parse_usage(usage, "$.message.usage")  # checked where it stands
        state = attrs.evolve(state, usage=_merged(state.usage, usage))
        events.append(UsageUpdate(parse_usage(state.usage)))
    return state, events


def _merged(usage: Mapping[str, Any], update: Mapping[str, Any]) -> Mapping[str, Any]:
    """``usage`` updated with the counts ``update`` carries.

    The counts are cumulative, and ``message_delta``'s are required but
    nullable [anthropic-openapi.json MessageDeltaUsage]: ``null`` means "no
    update", so it never wipes a count ``message_start`` gave.
    """
    return {**usage, **{key: value for key, value in update.items() if value is not None}}


def _index(payload: Mapping[str, Any]) -> int:
    index = payload.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        raise malformed("$.index", "an integer", index)
    return index


def _block_start(
    state: DecoderState, payload: Mapping[str, Any]
) -> tuple[DecoderState, list[StreamEvent]]:
    index = _index(payload)
    block = payload.get("content_block")
    if not isinstance(block, Mapping):
        raise malformed("$.content_block", "an object", block)
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str) or not text:
            return state, []
        return _text_piece(state, "text", text)
    if kind == "thinking":
        # The API sends both empty here and fills them with deltas; a block
        # that arrives whole (a proxy, a replay) keeps its signature too.
        text, signature = block.get("thinking") or "", block.get("signature") or None
        if not isinstance(text, str) or not isinstance(signature, (str, type(None))):
            raise malformed("$.content_block", "a thinking block", block)
        if signature is None and text and (state.held or not text.isascii()):
            return _text_piece(state, "reasoning", text)
        if not text.isascii():
            text = wire.encodable(text)  # (whole: nothing follows it)
        return state, [ReasoningDelta(text, signature, PROVIDER)] if text or signature else []
    if kind == "redacted_thinking":
        data = block.get("data")
        if not isinstance(data, str):
            raise malformed("$.content_block.data", "a string", data)
        return state, [ReasoningDelta("", data, PROVIDER, dict(REDACTED))]
    if kind != "tool_use":
        return state, []  # server tool blocks: the server runs them, not the loop
    call_id, name, arguments = block.get("id"), block.get("name"), block.get("input")
    if not isinstance(call_id, str):
        raise malformed("$.content_block.id", "a string", call_id)
    if not isinstance(name, str):
        raise malformed("$.content_block.name", "a string", name)
    initial = dict(state.initial)
    if isinstance(arguments, Mapping) and arguments:  # prefilled (gateways): as the blocking read
        initial[index], _ = wire.call_arguments(arguments, "$.content_block.input")
    events: list[StreamEvent] = []
    if state.held:  # (a text or thinking block before it that never stopped)
        state = _let_go(state, events, wire.IN_ORDER)
    state = attrs.evolve(
        state, tools=state.tools | {index}, open=(*state.open, index), initial=initial
    )
    return state, [*events, ToolCallStart(index, call_id, name)]


def _block_delta(
    state: DecoderState, payload: Mapping[str, Any]
) -> tuple[DecoderState, list[StreamEvent]]:
    index = _index(payload)
    delta = payload.get("delta")
    if not isinstance(delta, Mapping):
        raise malformed("$.delta", "an object", delta)
    kind = delta.get("type")
    if kind == "text_delta":
        text = delta.get("text")
        if not isinstance(text, str) or not text:
            return state, []
        return _text_piece(state, "text", text)
    if kind == "thinking_delta":
        text = delta.get("thinking")
        if not isinstance(text, str) or not text:
            return state, []
        return _text_piece(state, "reasoning", text)
    if kind == "signature_delta":
        signature = delta.get("signature")
        if not isinstance(signature, str):
            raise malformed("$.delta.signature", "a string", signature)
        # The signature completes the thinking: what it held goes before it.
        events: list[StreamEvent] = []
        if state.held:
            state = _let_go(state, events, ("reasoning",))
        events.append(ReasoningDelta("", signature, PROVIDER))
        return state, events
    if kind == "input_json_delta" and index in state.open:
        fragment = delta.get("partial_json")
        if not isinstance(fragment, str):
            raise malformed("$.delta.partial_json", "a string", fragment)
        if not fragment:
            return state, []
        if index not in state.fed:
            state = attrs.evolve(state, fed=state.fed | {index})
        events = []
        if state.held or not fragment.isascii():
            state, fragment = _piece(state, index, fragment, events)
        return state, [*events, ToolCallDelta(index, fragment)] if fragment else events
    return state, []  # citations, server tool input...


def _piece(
    state: DecoderState, part: wire.HeldKey, piece: str, events: list[StreamEvent]
) -> tuple[DecoderState, str]:
    """``piece`` of ``part`` (``"text"``, ``"reasoning"`` or a tool block's index) made
    encodable, with the high surrogate held back for the block's next piece (`wire.hold`)."""
    held, text = wire.hold(state.held, part, piece, events, PROVIDER)
    return (state if held is state.held else attrs.evolve(state, held=held)), text


def _text_piece(
    state: DecoderState, part: Literal["text", "reasoning"], piece: str
) -> tuple[DecoderState, list[StreamEvent]]:
    """A text or thinking block's piece as its events: a half held before it let go,
    its own trailing high surrogate held (`_piece`); the rest a text or reasoning delta."""
    events: list[StreamEvent] = []
    if state.held or not piece.isascii():
        state, piece = _piece(state, part, piece, events)
    if piece:
        events.append(TextDelta(piece) if part == "text" else ReasoningDelta(piece, None, PROVIDER))
    return state, events


def _let_go(
    state: DecoderState, events: list[StreamEvent], parts: Sequence[wire.HeldKey] | None = None
) -> DecoderState:
    """``parts`` (every part when None) end: the half each held goes out (`wire.let_go`)."""
    return attrs.evolve(state, held=wire.let_go(state.held, events, PROVIDER, parts))


def _block_stop(
    state: DecoderState, payload: Mapping[str, Any]
) -> tuple[DecoderState, list[StreamEvent]]:
    index = _index(payload)
    events: list[StreamEvent] = []
    if state.held:  # (the block ends: its text, its thinking or its arguments)
        state = _let_go(state, events, (index, *wire.IN_ORDER))
    if index not in state.open:
        return state, events
    if index not in state.fed and index in state.initial:
        events.append(ToolCallDelta(index, state.initial[index]))
    events.append(ToolCallEnd(index))
    return attrs.evolve(state, open=tuple(i for i in state.open if i != index)), events


def _message_delta(
    state: DecoderState, payload: Mapping[str, Any]
) -> tuple[DecoderState, list[StreamEvent]]:
    events: list[StreamEvent] = []
    delta = payload.get("delta")
    raw = delta.get("stop_reason") if isinstance(delta, Mapping) else None
    if raw is not None and not isinstance(raw, str):
        raise malformed("$.delta.stop_reason", "a string", raw)
    usage = payload.get("usage")
    if usage is not None:
        parse_usage(usage, "$.usage")  # checked where it stands
        state = attrs.evolve(state, usage=_merged(state.usage, usage))
        events.append(UsageUpdate(parse_usage(state.usage)))
    if raw is not None:
        if raw == "pause_turn":  # (with the usage so far: its update is not folded)
            raise paused(wire.dumps_raw(payload), parse_usage(state.usage))
        if state.held:  # (blocks that never stopped)
            state = _let_go(state, events)
        events.append(StreamFinish(finish_reason(raw, bool(state.tools)), raw))
        state = attrs.evolve(state, finished=True)
    return state, events


def _message_stop(
    state: DecoderState, payload: Mapping[str, Any]
) -> tuple[DecoderState, list[StreamEvent]]:
    if state.open:
        raise StreamError(
            f"{PROVIDER} stopped the message with tool call blocks {list(state.open)} still open",
            provider=PROVIDER,
            status_code=200,
        )
    events: list[StreamEvent] = []
    if state.held:
        state = _let_go(state, events)
    if not state.finished:
        events.append(StreamFinish(finish_reason(None, bool(state.tools)), None))
    return attrs.evolve(state, finished=True, done=True), events


_HANDLERS = {
    "message_start": _message_start,
    "content_block_start": _block_start,
    "content_block_delta": _block_delta,
    "content_block_stop": _block_stop,
    "message_delta": _message_delta,
    "message_stop": _message_stop,
}
