"""OpenAI Responses SSE events -> neutral stream events, as a pure decoder.

Events are named by ``type`` [O5 response_stream_event.py]:

- ``response.created``: the response id and model;
- an ``image_generation_call`` item, or one toolfold does not read, comes out
  whole at its ``response.output_item.done``: the parts the whole response makes
  of it (a `MediaOutput` for the image, an ended `ReasoningDelta` for the part
  keeping its id);
- ``response.output_item.added`` with a ``function_call`` item starts a call at
  its ``output_index``; ``response.function_call_arguments.delta`` fragments are
  keyed by ``item_id`` (the ``fc_...`` id, not ``call_id``), so the decoder
  keeps the item id -> index map; ``...arguments.done`` carries the whole text
  (used when no fragment came); ``response.output_item.done`` ends the call;
- ``response.output_text.delta`` / ``response.refusal.delta`` are text;
  ``response.reasoning_summary_text.delta`` is reasoning, whose id and encrypted
  content arrive with the finished reasoning item (which ends its part: two
  items in a row are two parts, signed or not, as in a whole response), and so is
  ``response.reasoning_text.delta`` (the raw reasoning of open-weight models
  behind Responses-compatible servers; ``response.reasoning_text.done`` gives a
  part's whole text, used when no delta of it came). Of an item with both, the
  reasoning text is the part's text, as in a whole item: a summary that
  streamed first is replaced (`ReasoningDelta.replaces`) by the first
  reasoning text delta, and a summary coming after it does not stream. The
  finished item (``response.output_item.done``) is the authority: when the
  text that streamed is not the text it gives, the rest of its text follows (or,
  when what streamed is not the start of it, its text replaces what streamed),
  then and there; an item that gives no text at all leaves what streamed. Only
  the part's closing piece (empty, with the encrypted content) waits for the
  next event: when that shows the assistant message that follows (its
  ``output_item.added`` or ``.done``, or its first text delta's ``item_id``,
  whichever first carries the id), the piece keeps the message's item id (and
  ``phase``), as a whole response's reasoning part does. A failed or cut stream
  loses only that closing piece, never text;
- ``response.completed`` / ``response.incomplete`` end the response with its
  usage; ``response.failed`` and a bare ``error`` event raise `StreamError`.
  A body that stops before the end is a `StreamError`, never a half answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from toolfold._errors import StreamError
from toolfold.adapters import _wire as wire
from toolfold.adapters._codec import carries_nothing, event_json, inband_stream_error
from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters.openai_chat._response import synthetic_id
from toolfold.adapters.openai_responses._providers import REASONING_PROVIDER
from toolfold.adapters.openai_responses._response import (
    SUMMARY_SEPARATOR,
    failed_usage,
    finish,
    following_message,
    parse_call,
    parse_item,
    parse_reasoning,
    parse_usage,
)
from toolfold.runtime.core._messages import FilePart, ImagePart, Part, ReasoningPart
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
    """What the decoder remembers between events.

    Attributes:
        provider: The provider name (for errors).
        items: ``(item_id, index)`` of every call started.
        fragments: Item ids of calls that received argument fragments.
        open: Indexes of calls not yet ended.
        summary_part: The ``summary_index`` of the summary part whose text
            streamed last for the current reasoning item; None while none has.
        content_part: The ``content_index`` of the reasoning text part that
            streamed last for the current reasoning item; None while none has.
        content_streamed: The ``content_index`` of every reasoning text part
            of the current item whose text streamed (a late ``.done`` of one
            is not streamed again).
        reasoning: Which text of the current reasoning item streamed as its
            text, ``"summary"`` or ``"content"`` (``reasoning_text``, which
            takes over from a summary streamed before it).
        streamed: The text of the current reasoning item streamed so far (as
            the part's text: a replacing piece starts it again).
        finished: The closing piece (empty, signed) of a finished reasoning
            item, held until the next event shows whether the assistant
            message follows it (whose id the piece then keeps, see
            `_response.following_message`).
        done: The response ended (completed or incomplete).
        response_id: The response's id (from ``response.created``), the seed of
            the id made up for a call that comes with neither ``call_id`` nor ``id``.
        refused: A refusal streamed: a completed answer without calls is
            ``content_filter`` (`_response.finish`).
        dropped: Indexes of calls whose item was done ``incomplete``: dropped
            (`ToolCallEnd.dropped`), as the whole response drops them
            (`_response.parse_item`); not counted as calls for the finish.
        held: A high surrogate the last piece of the answer's text (``"text"``) or
            of a call's arguments (its index) ended with, held back for the next
            piece (`wire.hold`); any other event ends the text's. (Reasoning needs none: its finished item,
            whole, takes the place of what streamed when they differ.)
    """

    provider: str
    items: tuple[tuple[str, int], ...] = ()
    fragments: frozenset[str] = frozenset()
    open: tuple[int, ...] = ()
    summary_part: int | None = None
    content_part: int | None = None
    content_streamed: frozenset[int] = frozenset()
    reasoning: Literal["summary", "content"] | None = None
    streamed: str = ""
    finished: ReasoningDelta | None = None
    done: bool = False
    response_id: str = ""
    refused: bool = False
    dropped: frozenset[int] = frozenset()
    held: Mapping[wire.HeldKey, str] = wire.NOTHING_HELD


def decode_event(state: DecoderState, event: SSEEvent) -> tuple[DecoderState, list[StreamEvent]]:
    """Decode one SSE event.

    Raises:
        StreamError: An ``error`` event, a failed response, or data that is not JSON.
        MalformedResponseError: A field of the event has the wrong type.
    """
    if event.data == "[DONE]" or carries_nothing(event.data, event.event):
        return state, []
    data = event_json(state.provider, event.data)
    with wire.reading(state.provider, lambda: event.data):
        data = wire.root(data)
        kind = wire.text(data, "type", "$") or event.event or ""
        handler = _HANDLERS.get(kind)
        if handler is None:
            return state, []
        if state.held and kind not in _TEXT_PIECES and "text" in state.held:
            # (anything else comes after the text: the half it held goes out first)
            first: list[StreamEvent] = []
            state = _let_go(state, first, ("text",))
        elif state.finished is None:  # nothing held: the handler's list (each is a new one)
            return handler(state, data)
        else:
            first = []
        if state.finished is not None:
            state, held = _release_reasoning(state, state.finished, kind, data)
            first.extend(held)
        state, events = handler(state, data)
        return state, [*first, *events]


# The events that carry a piece of the answer's text (`_text_delta`).
_TEXT_PIECES = ("response.output_text.delta", "response.refusal.delta")


def _release_reasoning(
    state: DecoderState, piece: ReasoningDelta, kind: str, data: Mapping[str, Any]
) -> Result:
    """The finished reasoning item's closing ``piece``, as the next event comes: with the
    id (and phase) of the assistant message that follows when that event carries it.

    A message started without its id keeps the piece held: its first text delta
    (``item_id``) or its finished item may carry the id.
    """
    message: dict[str, str] = {}
    if kind in ("response.output_item.added", "response.output_item.done"):
        item = wire.mapping(data, "item", "$")
        message = following_message(item, "$.item")
        starts = kind == "response.output_item.added"
        if not message and starts and wire.text(item, "type", "$.item") == "message":
            return state, []
    elif kind in ("response.output_text.delta", "response.refusal.delta"):
        item_id = wire.text(data, "item_id", "$")
        message = {"message_id": item_id} if item_id else {}
    if message:
        piece = attrs.evolve(piece, provider_data={**piece.provider_data, **message})
    return attrs.evolve(state, finished=None), [piece]


def decode_end(state: DecoderState) -> list[StreamEvent]:
    """The body ended.

    Raises:
        StreamError: It ended before ``response.completed`` (or ``incomplete``).
    """
    if state.done:
        return [] if state.finished is None else [state.finished]
    pending = " with tool calls still open" if state.open else ""
    raise StreamError(
        f"{state.provider} stream ended before the response finished{pending}",
        provider=state.provider,
        status_code=200,
    )


Result = tuple[DecoderState, list[StreamEvent]]


def _created(state: DecoderState, data: Mapping[str, Any]) -> Result:
    response = wire.mapping(data, "response", "$")
    model, response_id = (
        wire.text(response, "model", "$.response"),
        wire.text(response, "id", "$.response"),
    )
    if response_id:
        state = attrs.evolve(state, response_id=response_id)
    return state, [ResponseInfo(model, response_id)]


def _index(data: Mapping[str, Any], fallback: int) -> int:
    index = wire.integer(data, "output_index", "$")
    return fallback if index is None else index


def _item_added(state: DecoderState, data: Mapping[str, Any]) -> Result:
    item = wire.mapping(data, "item", "$")
    kind = wire.text(item, "type", "$.item")
    if kind == "reasoning":
        return _next_reasoning(state), []
    if kind != "function_call":
        return state, []
    call = parse_call(item, "$.item")
    if not call.id:  # as the whole response makes it (`_response._response`)
        call = attrs.evolve(call, id=synthetic_id(state.response_id, len(state.items)))
    index = _index(data, len(state.items))
    item_id = wire.text(item, "id", "$.item") or call.id
    state = attrs.evolve(state, items=(*state.items, (item_id, index)), open=(*state.open, index))
    events: list[StreamEvent] = [ToolCallStart(index, call.id, call.name, call.provider_data)]
    arguments = wire.text(item, "arguments", "$.item")
    if arguments:
        events.append(ToolCallDelta(index, arguments))
        state = attrs.evolve(state, fragments=state.fragments | {item_id})
    return state, events


def _find(state: DecoderState, item_id: str | None, index: int | None) -> tuple[str, int] | None:
    for found in state.items:
        if found[0] == item_id:
            return found
    return next((f for f in state.items if f[1] == index), None)


def _arguments_delta(state: DecoderState, data: Mapping[str, Any]) -> Result:
    found = _find(state, wire.text(data, "item_id", "$"), wire.integer(data, "output_index", "$"))
    delta = _piece_of(data)
    if found is None or not delta or found[1] in state.dropped:
        return state, []
    item_id, index = found
    if item_id not in state.fragments:
        state = attrs.evolve(state, fragments=state.fragments | {item_id})
    if state.held or not delta.isascii():
        events: list[StreamEvent] = []
        state, delta = _piece(state, index, delta, events)
        return state, [*events, ToolCallDelta(index, delta)] if delta else events
    return state, [ToolCallDelta(index, delta)]


def _piece_of(data: Mapping[str, Any]) -> str | None:
    """An event's ``delta`` text, as it came (`_piece` makes it encodable)."""
    delta = data.get("delta")
    if delta is None or type(delta) is str:
        return delta
    return wire.text(data, "delta", "$")  # (raises, naming the field)


def _piece(
    state: DecoderState, part: wire.HeldKey, piece: str, events: list[StreamEvent]
) -> tuple[DecoderState, str]:
    """``piece`` of ``part`` (``"text"`` or a call's index) made encodable, with the high
    surrogate held back for the part's next piece (`wire.hold`)."""
    held, text = wire.hold(state.held, part, piece, events, state.provider)
    return (state if held is state.held else attrs.evolve(state, held=held)), text


def _let_go(
    state: DecoderState, events: list[StreamEvent], parts: Sequence[wire.HeldKey] | None = None
) -> DecoderState:
    """``parts`` (every part when None) end: the half each held goes out (`wire.let_go`)."""
    return attrs.evolve(state, held=wire.let_go(state.held, events, state.provider, parts))


def _arguments_done(state: DecoderState, data: Mapping[str, Any]) -> Result:
    found = _find(state, wire.text(data, "item_id", "$"), wire.integer(data, "output_index", "$"))
    arguments = wire.text(data, "arguments", "$")
    if (
        found is None
        or found[0] in state.fragments
        or arguments is None
        or found[1] in state.dropped
    ):
        return state, []
    # No fragment came: the whole text is here.
    return attrs.evolve(state, fragments=state.fragments | {found[0]}), [
        ToolCallDelta(found[1], arguments)
    ]


def _item_done(state: DecoderState, data: Mapping[str, Any]) -> Result:
    item = wire.mapping(data, "item", "$")
    kind = wire.text(item, "type", "$.item")
    if kind == "reasoning" and wire.text(item, "id", "$.item"):
        part = parse_reasoning(item, "$.item")
        rest = _rest_of_reasoning(state, part.text, part.provider_data)
        # The item is one part (the next is another); its closing piece waits for the next
        # event, which shows whether a message follows it.
        closing = ReasoningDelta("", part.signature, REASONING_PROVIDER, part.provider_data, True)
        return attrs.evolve(_next_reasoning(state), finished=closing), rest
    if kind not in ("function_call", "message", "reasoning", None):
        # A generated image, or an item toolfold does not read: the parts the whole
        # response makes of it (`_response.parse_item`), each whole.
        return state, [_whole_part(part) for part in parse_item(item, "$.item")]
    if kind != "function_call":  # (a message's text ends: `decode_event` let it go)
        return state, []
    found = _find(state, wire.text(item, "id", "$.item"), wire.integer(data, "output_index", "$"))
    if wire.text(item, "status", "$.item") == "incomplete":
        # A half-written call never runs, streamed or whole (`_response.parse_item`):
        # one that started is taken back, start and fragments; one that did not is no call.
        if found is None or found[1] in state.dropped:
            return state, []
        state = attrs.evolve(
            state,
            open=tuple(i for i in state.open if i != found[1]),
            dropped=state.dropped | {found[1]},
            held={k: v for k, v in state.held.items() if k != found[1]},
        )
        return state, [ToolCallEnd(found[1], dropped=True)]
    events: list[StreamEvent] = []
    if found is None:  # done without added: the whole call at once
        state, events = _item_added(state, data)
        found = state.items[-1]
    else:
        arguments = wire.text(item, "arguments", "$.item")
        if found[0] not in state.fragments and arguments:
            events.append(ToolCallDelta(found[1], arguments))
    if found[1] in state.open:
        if state.held:
            state = _let_go(state, events, (found[1],))
        events.append(ToolCallEnd(found[1]))
        state = attrs.evolve(state, open=tuple(i for i in state.open if i != found[1]))
    return state, events


def _whole_part(part: Part) -> StreamEvent:
    """The event of an image, or of the empty part keeping an item's id, that comes whole."""
    if isinstance(part, (ImagePart, FilePart)):
        return MediaOutput(part)
    assert isinstance(part, ReasoningPart)  # (what `parse_item` makes of such an item)
    return ReasoningDelta(part.text, part.signature, part.provider, part.provider_data, True)


def _rest_of_reasoning(
    state: DecoderState, whole: str, provider_data: Mapping[str, Any]
) -> list[StreamEvent]:
    """What the finished reasoning item adds to the text that streamed of it, the item being
    the authority (its text is the part's, see `parse_reasoning`): the rest of its text when
    what streamed is its start, else its text in place of what streamed (``replaces``).

    An item that gives no text at all leaves what streamed (a server that does not repeat
    the text in the finished item takes nothing back).
    """
    streamed = state.streamed if state.reasoning is not None else None
    if streamed is None or whole.startswith(streamed):
        text, replaces = whole[len(streamed or "") :], False
    elif whole:
        text, replaces = whole, True
    else:
        text, replaces = "", False
    if not text and not replaces:
        return []
    return [ReasoningDelta(text, None, REASONING_PROVIDER, provider_data, replaces=replaces)]


def _text_delta(state: DecoderState, data: Mapping[str, Any]) -> Result:
    delta = _piece_of(data)
    if not delta:
        return state, []
    if state.held or not delta.isascii():  # (only the text's: `decode_event`)
        state, delta = _piece(state, "text", delta, [])
    return state, [TextDelta(delta)] if delta else []


def _refusal_delta(state: DecoderState, data: Mapping[str, Any]) -> Result:
    state, events = _text_delta(state, data)
    if events and not state.refused:
        state = attrs.evolve(state, refused=True)
    return state, events


def _next_reasoning(state: DecoderState) -> DecoderState:
    """``state`` with nothing streamed yet of a (new) reasoning item."""
    return attrs.evolve(
        state,
        summary_part=None,
        content_part=None,
        content_streamed=frozenset(),
        reasoning=None,
        streamed="",
    )


def _summary_delta(state: DecoderState, data: Mapping[str, Any]) -> Result:
    """Summary text; a new part (``summary_index``) starts after a blank line.

    As `joined` joins the parts of a whole item, so the streamed text is
    the same. A delta without an index continues the current part. When
    the item's reasoning text streamed first, the summary is left to the
    finished item (see `parse_reasoning`: the part's text is the reasoning
    text then).
    """
    delta = wire.text(data, "delta", "$")
    if not delta or state.reasoning == "content":
        return state, []
    part = _part_index(data, "summary_index", state.summary_part)
    if part != state.summary_part:
        delta = _after_part(state.summary_part, delta)
        state = attrs.evolve(state, summary_part=part, reasoning="summary")
    state = attrs.evolve(state, streamed=state.streamed + delta)
    return state, [ReasoningDelta(delta, provider=REASONING_PROVIDER)]


def _reasoning_text_delta(state: DecoderState, data: Mapping[str, Any]) -> Result:
    """Reasoning text (``content_index`` parts joined as summary parts are, see
    `_summary_delta`). It is the part's text, as in a whole item: when the item's
    summary streamed first, its first delta replaces the summary streamed."""
    delta = wire.text(data, "delta", "$")
    if not delta:
        return state, []
    replaces = state.reasoning == "summary"
    if replaces:
        state = attrs.evolve(state, summary_part=None, reasoning=None)
    part = _part_index(data, "content_index", state.content_part)
    if part != state.content_part:
        delta = _after_part(state.content_part, delta)
        state = attrs.evolve(
            state,
            content_part=part,
            content_streamed=state.content_streamed | {part},
            reasoning="content",
        )
    state = attrs.evolve(state, streamed=delta if replaces else state.streamed + delta)
    return state, [ReasoningDelta(delta, provider=REASONING_PROVIDER, replaces=replaces)]


def _reasoning_text_done(state: DecoderState, data: Mapping[str, Any]) -> Result:
    """A reasoning text part's whole text: streamed now unless its deltas came (however
    late it comes)."""
    text = wire.text(data, "text", "$")
    part = _part_index(data, "content_index", state.content_part)
    if not text or part in state.content_streamed:
        return state, []
    return _reasoning_text_delta(state, {"delta": text, "content_index": part})


def _part_index(data: Mapping[str, Any], key: str, current: int | None) -> int:
    """The part a reasoning delta belongs to: its ``key`` index, else the current part (else 0)."""
    part = wire.integer(data, key, "$")
    if part is None:
        return 0 if current is None else current
    return part


def _after_part(current: int | None, delta: str) -> str:
    """The first delta of a new part, after a blank line when a part streamed before it."""
    return delta if current is None else f"{SUMMARY_SEPARATOR}{delta}"


def _completed(state: DecoderState, data: Mapping[str, Any]) -> Result:
    response = wire.mapping(data, "response", "$")
    events: list[StreamEvent] = []
    if state.held:
        state = _let_go(state, events)
    events.extend(ToolCallEnd(i) for i in state.open)
    events.append(
        UsageUpdate(parse_usage(wire.mapping(response, "usage", "$.response"), "$.response.usage"))
    )
    has_calls = len(state.items) > len(state.dropped)
    reason, raw = finish(response, has_calls, "$.response", state.refused)
    events.append(StreamFinish(reason, raw))
    return attrs.evolve(state, open=(), done=True), events


def _failed(state: DecoderState, data: Mapping[str, Any]) -> Result:
    response = wire.mapping(data, "response", "$")
    error = wire.mapping(response, "error", "$.response") or data
    message = wire.text(error, "message", "$")
    code = error.get("code")
    failed = inband_stream_error(
        state.provider, wire.dumps_raw(data), message, code if isinstance(code, str) else None
    )
    failed.usage = failed_usage(response)  # (the failed answer was billed)
    raise failed


_HANDLERS = {
    "response.created": _created,
    "response.output_item.added": _item_added,
    "response.function_call_arguments.delta": _arguments_delta,
    "response.function_call_arguments.done": _arguments_done,
    "response.output_item.done": _item_done,
    "response.output_text.delta": _text_delta,
    "response.refusal.delta": _refusal_delta,
    "response.reasoning_summary_text.delta": _summary_delta,
    "response.reasoning_text.delta": _reasoning_text_delta,
    "response.reasoning_text.done": _reasoning_text_done,
    "response.completed": _completed,
    "response.incomplete": _completed,
    "response.failed": _failed,
    "error": _failed,
}
