"""Ollama's NDJSON stream -> neutral stream events, as a pure decoder.

One JSON object per line, ``{"message": {...}, "done": false}``; ``thinking``
and ``content`` arrive in pieces, tool calls whole inside one chunk's
``message.tool_calls``; the last line has ``done: true``, the
``done_reason`` and the counts [L1 streaming.mdx, tool-calling.mdx]. An
``{"error": "..."}`` line after HTTP 200 is a `StreamError` [L1 errors.mdx];
a body that ends before ``done: true`` is one too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from toolfold._errors import StreamError
from toolfold.adapters import _wire as wire
from toolfold.adapters._codec import event_json, inband_stream_error
from toolfold.adapters.ollama._response import (
    finish_reason,
    malformed,
    message_parts,
    parse_usage,
    seed_of,
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

PROVIDER = "ollama"


@attrs.frozen
class DecoderState:
    """What the decoder remembers between lines.

    Attributes:
        seed: Seed for synthetic call ids (from the first line).
        calls: Calls seen so far.
        done: The ``done: true`` line arrived.
        held: A high surrogate the last piece of ``content`` (``"text"``) or of
            ``thinking`` (``"reasoning"``) ended with, held back for its next piece
            (`wire.hold`).
    """

    seed: str | None = None
    calls: int = 0
    done: bool = False
    held: Mapping[wire.HeldKey, str] = wire.NOTHING_HELD


def decode_line(state: DecoderState, line: str) -> tuple[DecoderState, list[StreamEvent]]:
    """Decode one NDJSON line.

    Raises:
        StreamError: An ``{"error": ...}`` line, or a line that is not JSON.
        MalformedResponseError: A value of the wrong type (with its JSON path).
    """
    chunk = event_json(PROVIDER, line, "stream line")
    with wire.reading(PROVIDER, lambda: line):
        return _decode(state, chunk, line)


def _decode(state: DecoderState, chunk: Any, line: str) -> tuple[DecoderState, list[StreamEvent]]:
    if not isinstance(chunk, Mapping):
        raise malformed("$", "an object", chunk)
    if chunk.get("error") is not None:
        raise inband_stream_error(PROVIDER, line, str(chunk["error"]))
    events: list[StreamEvent] = []
    if state.seed is None:
        events.append(ResponseInfo(wire.text(chunk, "model", "$"), None))
        state = attrs.evolve(state, seed=seed_of(chunk))
    if "message" in chunk:
        message = chunk["message"]
        thinking, content, calls = message_parts(message, state.seed or "", state.calls)
        if thinking:
            if state.held or not thinking.isascii():  # (the piece as it came: `_piece`)
                state, thinking = _piece(state, "reasoning", message["thinking"], events)
            if thinking:
                events.append(ReasoningDelta(thinking, provider=PROVIDER))
        if content:
            if state.held or not content.isascii():
                state, content = _piece(state, "text", message["content"], events)
            if content:
                events.append(TextDelta(content))
        if calls and state.held:  # (the text or the thinking held goes before the calls)
            state = _let_go(state, events)
        for n, call in enumerate(calls):
            index = state.calls + n
            # (the message's ``tool_calls`` are apart from its ``content``)
            events.append(ToolCallStart(index, call.id, call.name, apart=True))
            events.append(ToolCallDelta(index, call.arguments_text))
            events.append(ToolCallEnd(index))
        state = attrs.evolve(state, calls=state.calls + len(calls))
    if chunk.get("done") is True:
        if state.held:  # (the answer ends)
            state = _let_go(state, events)
        raw = wire.text(chunk, "done_reason", "$")
        events.append(UsageUpdate(parse_usage(chunk)))
        events.append(StreamFinish(finish_reason(raw, state.calls > 0), raw))
        state = attrs.evolve(state, done=True)
    return state, events


def _piece(
    state: DecoderState, part: wire.HeldKey, piece: str, events: list[StreamEvent]
) -> tuple[DecoderState, str]:
    """``piece`` of ``part`` (``"text"`` or ``"reasoning"``) made encodable, with the high
    surrogate held back for the part's next piece (`wire.hold`)."""
    held, text = wire.hold(state.held, part, piece, events, PROVIDER)
    return (state if held is state.held else attrs.evolve(state, held=held)), text


def _let_go(state: DecoderState, events: list[StreamEvent]) -> DecoderState:
    """The text and the thinking end: the half each held goes out (`wire.let_go`)."""
    return attrs.evolve(state, held=wire.let_go(state.held, events, PROVIDER))


def decode_end(state: DecoderState) -> list[StreamEvent]:
    """The body ended (no more lines).

    Raises:
        StreamError: The stream stopped before its ``done: true`` line.
    """
    if state.done:
        return []
    raise StreamError(
        f"{PROVIDER} stream ended before its final (done) line",
        provider=PROVIDER,
        status_code=200,
    )
