"""Gemini ``streamGenerateContent`` -> neutral stream events, as a pure decoder.

Each chunk is a whole ``GenerateContentResponse`` [G4 _api_client.py]; it
arrives as an SSE ``data:`` line (``?alt=sse``) or as one element of a JSON
array written incrementally (no ``alt``; stream-json-array cassette). Both
framings end up in `decode_chunk`:

- text and thought parts are deltas; a function call arrives whole in one
  chunk (the Gemini API never splits arguments [G4 PartialArg]), so it starts,
  gets its arguments and ends at once, with the id rule of a whole response;
- an image or file (``inlineData``/``fileData``) arrives whole too: a
  `MediaOutput`, with its signature after it as the whole response has it;
- ``usageMetadata`` repeats on chunks: the last one wins;
- the chunk with ``finishReason`` ends the response; a body that stops before
  it is a `StreamError`, never a half answer. There is no ``[DONE]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from toolfold._errors import StreamError
from toolfold.adapters import _wire as wire
from toolfold.adapters._codec import carries_nothing, event_json
from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters.gemini._errors import stream_error
from toolfold.adapters.gemini._providers import FINISH_REASONS
from toolfold.adapters.gemini._response import (
    PROVIDER,
    block_reason,
    candidate_parts,
    failed_candidate,
    finish_reason,
    first_candidate,
    no_candidates,
    parse_part,
    parse_usage,
    seed_of,
)
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
)
from toolfold.runtime.core._request import CUT_FINISHES
from toolfold.runtime.core._stream import (
    MediaOutput,
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
class DecoderState:
    """What the decoder remembers between chunks.

    Attributes:
        provider: The provider name (for errors).
        seed: Seed for synthetic call ids (the response id).
        calls: Calls seen so far (their stream indexes are 0, 1, ...).
        finished: A finish reason arrived.
        chosen: A chunk carried a candidate: a stream that ends without one
            has no answer, as a whole body with none.
        held: A high surrogate the last piece of text (``"text"``) or of thought
            (``"reasoning"``) ended with, held back for the next piece of the same
            (`wire.hold`); anything else that comes ends it.
    """

    provider: str = PROVIDER
    seed: str | None = None
    calls: int = 0
    finished: bool = False
    chosen: bool = False
    held: Mapping[wire.HeldKey, str] = wire.NOTHING_HELD


def decode_event(state: DecoderState, event: SSEEvent) -> tuple[DecoderState, list[StreamEvent]]:
    """Decode one SSE event of an ``alt=sse`` stream.

    Raises:
        StreamError: A data line that is not JSON, or an error object.
        MalformedResponseError: A field of the chunk has the wrong type.
    """
    if carries_nothing(event.data, event.event):
        return state, []
    chunk = event_json(state.provider, event.data)
    with wire.reading(state.provider, lambda: event.data):
        return _chunk(state, chunk)


def decode_chunk(state: DecoderState, chunk: Any) -> tuple[DecoderState, list[StreamEvent]]:
    """Decode one ``GenerateContentResponse`` chunk (an element of the streamed JSON array).

    Raises:
        StreamError: The chunk is an error object.
        MalformedResponseError: A field of the chunk has the wrong type.
    """
    with wire.reading(state.provider, lambda: wire.dumps_raw(chunk)):
        return _chunk(state, chunk)


def _chunk(state: DecoderState, chunk: Any) -> tuple[DecoderState, list[StreamEvent]]:
    chunk = wire.root(chunk)
    if chunk.get("error") is not None:
        raise stream_error(state.provider, chunk)
    events: list[StreamEvent] = []
    if state.seed is None:
        state = attrs.evolve(state, seed=seed_of(chunk))
        model, response_id = (
            wire.text(chunk, "modelVersion", "$"),
            wire.text(chunk, "responseId", "$"),
        )
        events.append(ResponseInfo(model, response_id))
    candidate = first_candidate(chunk)
    if candidate is not None and not state.chosen:
        state = attrs.evolve(state, chosen=True)
    calls = state.calls
    raw = wire.text(candidate, "finishReason", "$.candidates[0]") if candidate is not None else None
    # A call arrives whole, in the chunk that may end a cut answer: its end says it is
    # dropped (`ToolCallEnd.dropped`), as the run drops it.
    dropped = raw is not None and FINISH_REASONS.get(raw) in CUT_FINISHES
    for wire_part, at in candidate_parts(candidate):
        for part in parse_part(wire_part, at, state.seed or "", calls):
            if type(part) is TextPart:
                text = part.text
                if state.held or not text.isascii():  # (the piece as it came: `_piece`)
                    state, text = _piece(state, "text", wire_part["text"], events)
                if text:
                    events.append(TextDelta(text))
                continue
            if type(part) is ReasoningPart and part.text:  # a thought
                text = part.text
                if state.held or not text.isascii():
                    state, text = _piece(state, "reasoning", wire_part["text"], events)
                if part.signature is not None and state.held:  # (signed: the thought ends)
                    text += wire.HELD_ALONE
                    state = attrs.evolve(state, held=wire.NOTHING_HELD)
                if text or part.signature is not None:
                    events.append(ReasoningDelta(text, part.signature, part.provider))
                continue
            if state.held:  # (the text or the thought it follows ends)
                state = _let_go(state, events)
            if type(part) is ReasoningPart:
                events.append(ReasoningDelta(part.text, part.signature, part.provider))
            elif type(part) is ToolCallPart:
                events.append(ToolCallStart(calls, part.id, part.name, part.provider_data))
                events.append(ToolCallDelta(calls, part.arguments_text))
                events.append(ToolCallEnd(calls, dropped))
                calls += 1
            elif type(part) is ImagePart or type(part) is FilePart:
                events.append(MediaOutput(part))  # whole in its chunk, as a call
    if calls != state.calls:
        state = attrs.evolve(state, calls=calls)
    usage = wire.mapping(chunk, "usageMetadata", "$")
    if usage:
        events.append(UsageUpdate(parse_usage(usage)))
    blocked = block_reason(chunk) if candidate is None else None
    if raw is not None or blocked is not None:
        if state.held:
            state = _let_go(state, events)
        if not state.finished:
            if blocked is not None:
                events.append(StreamFinish("content_filter", blocked))
            else:
                finish = finish_reason(raw, calls > 0)
                if finish == "error":
                    raise failed_candidate(state.provider, candidate or {}, raw, chunk)
                events.append(StreamFinish(finish, raw))
        state = attrs.evolve(state, finished=True)
    return state, events


def _piece(
    state: DecoderState, part: wire.HeldKey, piece: str, events: list[StreamEvent]
) -> tuple[DecoderState, str]:
    """``piece`` of ``part`` (``"text"`` or ``"reasoning"``) made encodable, with the high
    surrogate held back for the next piece (`wire.hold`); the other part's ends."""
    held, text = wire.hold(state.held, part, piece, events, state.provider)
    return (state if held is state.held else attrs.evolve(state, held=held)), text


def _let_go(state: DecoderState, events: list[StreamEvent]) -> DecoderState:
    """The text and the thought end: the half each held goes out (`wire.let_go`)."""
    return attrs.evolve(state, held=wire.let_go(state.held, events, state.provider))


def decode_end(state: DecoderState) -> list[StreamEvent]:
    """The body ended.

    Raises:
        ProviderError: Chunks came but none had a candidate (`no_candidates`, as a
            whole body without one).
        StreamError: The stream stopped before a finish reason.
    """
    if state.finished:
        return []
    if state.seed is not None and not state.chosen:  # (chunks came, none with a candidate)
        raise no_candidates(state.provider, "")
    raise StreamError(
        f"{state.provider} stream ended before the response finished",
        provider=state.provider,
        status_code=200,
    )
