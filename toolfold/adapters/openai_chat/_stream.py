"""Chat Completions SSE chunks -> neutral stream events, as a pure decoder.

`decode_chunk` maps one SSE event (its ``event:`` name and ``data:`` text) and
the decoder state to the next state and the neutral events it produced;
`decode_end` says what the end of the body means. The events then fold with
`toolfold.runtime.fold_stream` into the response a non-streaming call gives.

Rules (providers.md §1, §6 and the recorded streams):

- Calls are keyed by ``index``; OpenAI sends ``id``/``name`` once per index and
  argument fragments after. llama.cpp repeats the name in every delta: a name
  on a started index is ignored, never appended. A different id, or a
  different name without an id once the call has arguments or with an
  ``arguments`` field of its own (even ``""``: a no-argument call's head), at a
  started index is a second call (servers that reuse index 0); a different name
  under the call's own id is a `MalformedResponseError` at ``function.name``:
  never one call's arguments appended to another's. The same name again without
  an id is the same call (a second call repeating it cannot be told from
  llama.cpp's repeated name), and so is a new name alone (no id, no
  ``arguments``) before any arguments (a name sent in pieces, ``get_`` then
  ``weather``; OpenAI sends it whole): that call keeps its first name, as a
  call's name is never appended.
- Mistral and Gemini's OpenAI endpoint send whole calls without ``index``:
  each such entry is a new call at the next free index (by position).
- A call ends only when the stream says so: on the chunk carrying
  ``finish_reason``, or at ``data: [DONE]`` if no finish reason came. A body
  that stops before either is a `StreamError`, never a half call.
- Errors inside an HTTP 200 stream (Groq's ``event: error``, OpenAI's and
  OpenRouter's ``data: {"error": ...}``) raise with the provider's message.
- Usage comes in ``usage`` (OpenAI's last chunk, Mistral's finishing chunk)
  or ``x_groq.usage`` (Groq [C2]).
- ``delta.audio`` pieces (an audio answer): the transcript, the audio's
  bytes and id are kept and come out as the answer finishes (the transcript
  as answer text only if no ``content`` came), a `MediaOutput` and an ended `ReasoningDelta` keeping the id, as
  the whole answer has them (`_response.audio_parts`).
- A ``refusal`` delta is answer text while no ``content`` has come, as a
  whole body's ``refusal`` is its text when it has no content (OpenAI sends
  one or the other).
- The legacy ``delta.function_call`` (functions API, still in the spec) is
  the one call of the answer when no ``tool_calls`` come, as in a whole body.
- OpenRouter's ``delta.reasoning_details`` pieces (every chunk of its stream
  carries the key, nearly always an empty array: no event) are kept as they come
  and joined into blocks once (`merge_details`), when the reasoning ends: the
  first text, call or finish after them, or the end. One `ReasoningDelta`
  gives the blocks new since the last such flush to the reasoning part and ends
  it; the request joins the parts' arrays into the one a whole answer has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from toolfold._errors import StreamError
from toolfold.adapters import _wire as wire
from toolfold.adapters._codec import AUDIO, carries_nothing, event_json
from toolfold.adapters.openai_chat._errors import inband_error
from toolfold.adapters.openai_chat._providers import (
    REASONING_DETAILS,
    REASONING_FIELDS,
)
from toolfold.adapters.openai_chat._response import (
    _NO_REASONING,
    arguments_text,
    audio_type,
    call_extra,
    content_chunks,
    failed_answer,
    finish_reason,
    no_choices,
    parse_usage,
    refused,
    synthetic_id,
)
from toolfold.runtime.core._build import replacer
from toolfold.runtime.core._log import Log
from toolfold.runtime.core._messages import FilePart
from toolfold.runtime.core._request import CUT_FINISHES, FinishReason
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
class _Started:
    index: int
    wire_index: int | None
    id: str
    name: str = ""
    has_arguments: bool = False


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
        chosen: A chunk carried the answer's choice (index 0): a stream that
            ends without one has no answer, as a whole body with no choices.
        thinking_in_total: See `parse_usage` (Gemini's OpenAI endpoint).
        has_content: Some ``content`` arrived (a refusal no longer counts).
        refused: A ``refusal`` arrived (the answer finishes ``content_filter``
            unless content came too).
        audio: What ``delta.audio`` pieces gave so far: the id, ``expires_at``
            and the audio's bytes, piece by piece (sent whole as the answer
            finishes, as `_response.audio_parts` makes them), or None.
        transcript: The audio's transcript pieces so far, or None: the answer's
            text as it finishes unless ``content`` came (the whole answer's rule).
        held: A high surrogate each part's last piece ended with, held back for its
            next piece (`wire.hold`): by ``"text"``, ``"reasoning"`` and each
            call's index (its arguments).
        detail_pieces: The ``reasoning_details`` arrays since, as they came, or None.
    """

    provider: str
    calls: tuple[_Started, ...] = ()
    open: tuple[int, ...] = ()
    seed: str | None = None
    info_sent: bool = False
    finished: bool = False
    done: bool = False
    chosen: bool = False
    thinking_in_total: bool = False
    has_content: bool = False
    refused: bool = False
    audio: tuple[str | None, int | None, Log[bytes] | None] | None = None
    transcript: Log[str] | None = None
    held: Mapping[wire.HeldKey, str] = wire.NOTHING_HELD
    detail_pieces: Log[list[Any]] | None = None


#: The fields of a ``reasoning_details`` block whose pieces are appended to each other.
_DETAIL_TEXTS = frozenset(("text", "summary", "data"))


def merge_details(pieces: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``reasoning_details`` blocks the streamed ``pieces`` make.

    A piece with the ``type`` and ``index`` of the block before continues it:
    its text (``text``, ``summary``, ``data``) is appended, any other field
    it gives set (a ``signature`` at the end); any other piece is a new block.
    Each text is joined once, so the cost is linear in the pieces.
    """
    out: list[dict[str, Any]] = []
    last: dict[str, Any] | None = None
    joins: dict[str, list[str]] = {}
    for piece in pieces:
        index = piece.get("index")
        if (
            last is not None
            and index is not None
            and index == last.get("index")
            and piece.get("type") == last.get("type")
        ):
            for key, value in piece.items():
                texts = joins.get(key)
                if key in _DETAIL_TEXTS and type(value) is str:
                    if texts is not None:
                        texts.append(value)
                        continue
                    before = last.get(key)
                    if type(before) is str:
                        joins[key] = [before, value]
                        continue
                if value is not None:
                    joins.pop(key, None)
                    last[key] = value
        else:
            _settle(last, joins)
            last, joins = dict(piece), {}
            out.append(last)
    _settle(last, joins)
    return out


def _settle(block: dict[str, Any] | None, joins: dict[str, list[str]]) -> None:
    if block is not None:
        for key, texts in joins.items():
            block[key] = "".join(texts)


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
        MalformedResponseError: A field of the event has the wrong type.
    """
    if data == "[DONE]":
        if not state.chosen and not state.finished:
            raise no_choices(state.provider, "")
        return _end(attrs.evolve(state, done=True))
    error = inband_error(state.provider, event, data)
    if error is not None:
        raise error
    if carries_nothing(data, event):
        return state, []
    chunk = event_json(state.provider, data)
    try:
        return _chunk(state, chunk)
    except wire.READ_ERRORS as exc:
        raise wire.malformed(state.provider, exc, data) from None


def _chunk(state: DecoderState, chunk: Any) -> tuple[DecoderState, list[StreamEvent]]:
    chunk = wire.root(chunk)  # an event that is not an object is malformed, as in a body
    events: list[StreamEvent] = []
    if not state.info_sent:
        model = wire.text(chunk, "model", "$")
        chunk_id = wire.text(chunk, "id", "$")
        seed = chunk_id or f"{model}:{chunk.get('created')}"
        state = attrs.evolve(state, info_sent=True, seed=seed)
        events.append(ResponseInfo(model, chunk_id or None))
    choices = wire.array(chunk, "choices", "$")
    for position in range(len(choices)):
        choice = wire.mapping(choices, position, "$.choices")
        at = _FIRST if position == 0 else f"$.choices[{position}]"
        if (wire.integer(choice, "index", at) or 0) == 0:
            if not state.chosen:
                state = attrs.evolve(state, chosen=True)
            state = _choice(state, chunk, choice, events, at)
    usage = wire.mapping(chunk, "usage", "$")
    at = "$.usage"
    if not usage and "x_groq" in chunk:
        usage = _groq_usage(chunk)
        at = "$.x_groq.usage"
    if usage:
        events.append(
            UsageUpdate(parse_usage(usage, thinking_in_total=state.thinking_in_total, at=at))
        )
    return state, events


_FIRST = "$.choices[0]"  # the paths of nearly every choice: built once
_FIRST_DELTA = "$.choices[0].delta"


def decode_end(state: DecoderState) -> list[StreamEvent]:
    """The body ended (no more bytes).

    Raises:
        StreamError: The stream stopped before a finish reason or ``[DONE]``.
    """
    if state.done or (state.finished and not state.open):
        return _flush_details(state)[1]  # (pieces after the finish, without ``[DONE]``)
    pending = [c.id for c in state.calls if c.index in state.open]
    detail = f" with tool calls still open ({', '.join(pending)})" if pending else ""
    raise StreamError(
        f"{state.provider} stream ended before the response finished{detail}",
        provider=state.provider,
        status_code=200,
    )


def _groq_usage(chunk: Mapping[str, Any]) -> Mapping[str, Any]:
    return wire.mapping(wire.mapping(chunk, "x_groq", "$"), "usage", "$.x_groq")


def _end(state: DecoderState) -> tuple[DecoderState, list[StreamEvent]]:
    state, events = _flush_details(state)
    if state.held:  # (the answer ends)
        state = _let_go(state, events)
    events.extend(ToolCallEnd(i) for i in state.open)
    if not state.finished:
        events.extend(_audio_end(state))
        events.append(StreamFinish(_reason(state, None), None))
    return attrs.evolve(state, open=(), finished=True), events


def _reason(state: DecoderState, raw: str | None) -> FinishReason:
    """The answer's finish reason: a refusal with no content and no call is
    ``content_filter``, as a whole body's (`refused`)."""
    reason = finish_reason(raw, bool(state.calls))
    if state.refused and not state.has_content and not state.calls:
        return refused(reason)
    return reason


def _choice(
    state: DecoderState,
    chunk: Mapping[str, Any],
    choice: Mapping[str, Any],
    events: list[StreamEvent],
    at: str,
) -> DecoderState:
    delta = wire.mapping(choice, "delta", at)
    delta_at = _FIRST_DELTA if at is _FIRST else f"{at}.delta"
    if not _NO_REASONING(delta.keys()):  # most deltas carry none: one set operation
        for field in REASONING_FIELDS:
            text = delta.get(field)
            if text and type(text) is str:  # an optional extra, as in whole responses
                if state.held or not text.isascii():
                    state, text = _piece(state, "reasoning", text, events)
                if text:
                    events.append(ReasoningDelta(text, provider=state.provider))
                break
        pieces = delta.get(REASONING_DETAILS)
        if pieces and type(pieces) is list:  # (OpenRouter sends [] in every chunk)
            state = _keep_details(state, pieces)
    mark = len(events)  # (where the reasoning of a delta ends)
    content = delta.get("content")
    if type(content) is str:
        if content:
            shown = content
            if state.held or not shown.isascii():
                state, shown = _piece(state, "text", shown, events)
            if shown:
                events.append(TextDelta(shown))
    elif isinstance(content, list):  # (typed chunks, whole: a half held before goes out)
        if state.held:
            state = _let_go(state, events, wire.IN_ORDER)
        events.extend(
            ReasoningDelta(text, provider=state.provider) if thinking else TextDelta(text)
            for thinking, text in content_chunks(content, f"{delta_at}.content")
        )
    elif content is not None:
        raise wire.WireError(
            f"{delta_at}.content", f"expected a string or an array, got {wire.kind(content)}"
        )
    if content and not state.has_content:
        state = attrs.evolve(state, has_content=True)
    refusal = delta.get("refusal")
    if refusal is not None:
        refusal = wire.text(delta, "refusal", delta_at)
        if refusal and not state.has_content:
            if state.held:
                state = _let_go(state, events, wire.IN_ORDER)
            events.append(TextDelta(refusal))
            if not state.refused:
                state = attrs.evolve(state, refused=True)
    if delta.get("audio") is not None:
        state = _audio(state, wire.mapping(delta, "audio", delta_at), events, f"{delta_at}.audio")
    entries = wire.array(delta, "tool_calls", delta_at)
    for position in range(len(entries)):
        entry = wire.mapping(entries, position, f"{delta_at}.tool_calls")
        at_entry = f"{delta_at}.tool_calls[{position}]"
        function = wire.mapping(entry, "function", at_entry)
        state = _tool_entry(state, entry, function, events, at_entry, f"{at_entry}.function")
    if not entries and delta.get("function_call") is not None:
        # The legacy functions API: one call per answer, so always index 0.
        function = wire.mapping(delta, "function_call", delta_at)
        if function:
            legacy_at = f"{delta_at}.function_call"
            state = _tool_entry(state, _LEGACY_ENTRY, function, events, delta_at, legacy_at)
    raw = wire.text(choice, "finish_reason", at)
    if raw == "error":
        # OpenRouter ends a failed stream this way; the error object usually
        # comes first and is a StreamError above [C8]. Without one, the error
        # the same answer whole gives (what streamed is no answer).
        raise failed_answer(chunk, choice, state.provider, at)
    if raw is not None:
        if state.held:  # (the answer ends)
            state = _let_go(state, events)
        reason = _reason(state, raw)
        # A cut answer's calls never run: their end says so (`ToolCallEnd.dropped`).
        dropped = reason in CUT_FINISHES
        events.extend(ToolCallEnd(i, dropped) for i in state.open)
        if not state.finished:
            events.extend(_audio_end(state))
            events.append(StreamFinish(reason, raw))
        state = attrs.evolve(state, open=(), finished=True)
    if state.detail_pieces is not None and len(events) > mark:
        # The reasoning ended: its blocks go to its part before what follows it.
        state, flushed = _flush_details(state)
        events[mark:mark] = flushed
    return state


def _audio(
    state: DecoderState, audio: Mapping[str, Any], events: list[StreamEvent], at: str
) -> DecoderState:
    """Take a ``delta.audio`` piece: its transcript is kept for `_audio_end`, its bytes and id too."""
    transcript = wire.text(audio, "transcript", at)
    if transcript:
        # Held to the end: content may still come, and then (as in the whole
        # answer) the transcript is not the answer's text.
        held = state.transcript
        state = attrs.evolve(
            state, transcript=held.append(transcript) if held else Log((transcript,))
        )
    audio_id, expires, pieces = state.audio or (None, None, None)
    data = wire.base64_bytes(audio, "data", at)
    kept = (
        wire.text(audio, "id", at) or audio_id,
        wire.integer(audio, "expires_at", at) or expires,
        # A `Log` appends in O(1): a tuple copied per piece made a long answer
        # quadratic. A fresh one per answer, so no shared buffer keeps old audio.
        (pieces.append(data) if pieces else Log((data,))) if data else pieces,
    )
    return attrs.evolve(state, audio=kept)


def _audio_end(state: DecoderState) -> list[StreamEvent]:
    """The audio answer's file and the part keeping its id, as the whole answer
    has them (`_response.audio_parts`)."""
    events: list[StreamEvent] = []
    if state.transcript and not state.has_content:
        events.append(TextDelta("".join(state.transcript)))
    if state.audio is None:
        return events
    audio_id, expires, pieces = state.audio
    if pieces:
        data = b"".join(pieces)
        events.append(MediaOutput(FilePart(data, media_type=audio_type(data))))
    if audio_id:
        kept = {AUDIO: {"id": audio_id, "expires_at": expires}}
        events.append(ReasoningDelta("", None, state.provider, kept, ends=True))
    return events


# What a legacy ``function_call`` delta stands for: the tool call at index 0.
_LEGACY_ENTRY: Mapping[str, Any] = MappingProxyType({"index": 0})


def _tool_entry(
    state: DecoderState,
    entry: Mapping[str, Any],
    function: Mapping[str, Any],
    events: list[StreamEvent],
    at: str,
    function_at: str,
) -> DecoderState:
    fragment = function.get("arguments")
    if type(fragment) is not str:  # (an object from a few servers; anything else refused)
        fragment = arguments_text(function, function_at)
    wire_index = wire.integer(entry, "index", at)
    call_id = wire.text(entry, "id", at)
    name = wire.text(function, "name", function_at)
    started = _find(state, wire_index, call_id, name)
    if (
        started is not None
        and name
        and started.name
        and name != started.name
        and (call_id or started.has_arguments or function.get("arguments") is not None)
    ):
        # A call never changes its name (llama.cpp repeats the same one): a new
        # name at a started index is a second call; under the same id it
        # cannot be told from the first, and appending it would merge two calls.
        # Without an id, without an ``arguments`` field (a call's head carries
        # one, if only ""), and before the call has arguments, it is the rest
        # of a name sent in pieces (ignored, as a repeated name is): a second
        # call there would take the arguments, leaving the first with none.
        if call_id and call_id == started.id:
            raise wire.WireError(
                f"{function_at}.name",
                f"{name!r} for call {call_id!r}, which was started as {started.name!r} "
                f"(index {wire_index if wire_index is not None else started.index}): "
                "a second call under the same id",
            )
        started = None
    if started is None:
        index = (
            wire_index
            if wire_index is not None
            and wire_index >= 0
            and not any(c.index == wire_index for c in state.calls)
            else max((c.index for c in state.calls), default=-1) + 1
        )
        call_id = call_id or synthetic_id(state.seed or "", len(state.calls))
        if state.held:  # (the text or reasoning held goes before the call)
            state = _let_go(state, events, wire.IN_ORDER)
        # (``tool_calls`` are apart from the message's ``content``: text after a call's start
        # is the same text, as a whole message has it)
        events.append(ToolCallStart(index, call_id, name or "", call_extra(entry, at), apart=True))
        state = attrs.evolve(
            state,
            calls=(*state.calls, _Started(index, wire_index, call_id, name or "")),
            open=(*state.open, index),
        )
        started = state.calls[-1]
    if fragment:
        if not started.has_arguments:
            argued = attrs.evolve(started, has_arguments=True)
            calls = tuple(argued if c is started else c for c in state.calls)
            state = attrs.evolve(state, calls=calls)
        if state.held or not fragment.isascii():
            state, fragment = _piece(state, started.index, fragment, events)
        if fragment:
            events.append(ToolCallDelta(started.index, fragment))
    return state


def _keep_details(state: DecoderState, pieces: list[Any]) -> DecoderState:
    """A delta's OpenRouter ``reasoning_details`` array, kept as it came for
    `_flush_details` (which checks its items once)."""
    held = state.detail_pieces
    # One a chunk of a reasoning stream: copied without evolve's keyword handling.
    return _with_detail_pieces(state, held.append(pieces) if held else Log((pieces,)))


_with_detail_pieces = replacer(DecoderState, "detail_pieces")


def _flush_details(state: DecoderState) -> tuple[DecoderState, list[StreamEvent]]:
    """The ``reasoning_details`` blocks since the last flush, given to the reasoning
    part once its reasoning ended."""
    if state.detail_pieces is None:
        return state, []
    # An array holding anything but objects is another server's use of the name: left
    # alone, as in a whole answer (`reasoning_details`).
    pieces = [
        piece
        for array in state.detail_pieces
        if all(type(piece) is dict for piece in array)
        for piece in array
    ]
    state = attrs.evolve(state, detail_pieces=None)
    if not pieces:
        return state, []
    # The blocks new since the last flush (a part each: it ends here, so what comes
    # later makes another); the request joins the parts' arrays (`_own_details`).
    kept = {REASONING_DETAILS: merge_details(pieces)}
    return state, [ReasoningDelta("", provider=state.provider, provider_data=kept, ends=True)]


def _piece(
    state: DecoderState, part: wire.HeldKey, piece: str, events: list[StreamEvent]
) -> tuple[DecoderState, str]:
    """``piece`` of ``part`` (``"text"``, ``"reasoning"`` or a call's index) made encodable,
    with the high surrogate held back for the part's next piece (`wire.hold`)."""
    held, text = wire.hold(state.held, part, piece, events, state.provider)
    return (state if held is state.held else attrs.evolve(state, held=held)), text


def _let_go(
    state: DecoderState, events: list[StreamEvent], parts: Sequence[wire.HeldKey] | None = None
) -> DecoderState:
    """``parts`` (every part when None) end, or something else of the answer comes first
    (`wire.IN_ORDER`): the half each held goes out (`wire.let_go`)."""
    return attrs.evolve(state, held=wire.let_go(state.held, events, state.provider, parts))


def _find(
    state: DecoderState, wire_index: int | None, call_id: str | None, name: str | None
) -> _Started | None:
    """The started call this entry continues, or None when it starts a new one."""
    if wire_index is not None:
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
    if not name and state.open:
        # An anonymous fragment continues the latest open call.
        return next(c for c in reversed(state.calls) if c.index == state.open[-1])
    return None
