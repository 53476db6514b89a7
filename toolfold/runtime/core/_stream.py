"""Neutral stream events and the pure `fold_stream` reducer that folds them into a response."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, NoReturn, Union, get_args

import attrs

from toolfold._errors import StreamError
from toolfold.runtime.core._build import builder, replacer
from toolfold.runtime.core._log import Log
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    Usage,
    decoded_arguments,
    wrong_argument,
)
from toolfold.runtime.core._request import (
    CUT_FINISHES,
    FINISH_REASONS,
    FinishReason,
    ModelResponse,
    _finish_reason,
    _usage,
)

# --- stream events ---------------------------------------------------------


@attrs.frozen
class TextDelta:
    """A piece of answer text.

    Attributes:
        text: The piece of text.
        before_call: The piece belongs to the text that the tool calls started
            since its last piece follow: it joins that text, before the calls,
            not the text after them. (A piece held back past a call until the
            text after it showed whether the two write a secret across the
            call: toolfold masks an API key a model writes so.)
    """

    text: str
    before_call: bool = False
    kind: Literal["text_delta"] = "text_delta"


@attrs.frozen
class ReasoningDelta:
    """A piece of reasoning text, or its signature when it arrives.

    Pieces join into one reasoning part until one completes it: a piece with
    a ``signature``, or one that ``ends`` it. The next reasoning is another
    part, as a provider's whole response has two reasoning blocks (or items)
    in a row as two parts. A piece that ``replaces`` is the part's whole
    text, in place of what its earlier pieces gave: a provider's finished
    item correcting the text that streamed (a display shows it instead).

    Attributes:
        text: The piece of text (may be empty).
        signature: The part's signature (opaque, sent back unchanged); it
            completes the part.
        provider: The provider whose reasoning this is.
        provider_data: Opaque provider fields of the part, merged into
            those of its earlier pieces.
        ends: This piece completes its part, signed or not.
        replaces: ``text`` is the part's whole text so far, replacing the
            earlier pieces' (which a display should clear).
    """

    text: str = ""
    signature: str | None = None
    provider: str | None = None
    provider_data: Mapping[str, Any] = attrs.field(factory=dict)
    ends: bool = False
    replaces: bool = False
    kind: Literal["reasoning_delta"] = "reasoning_delta"


@attrs.frozen
class ToolCallStart:
    """A tool call begins at ``index`` (the provider's key for its fragments).

    The call takes its place among the response's parts here, as in a whole
    response whose content is a sequence (Anthropic's blocks, Gemini's parts,
    Responses' items): after the text or reasoning before it, which it
    completes (what comes after the call is another part).

    Attributes:
        index: The provider's key for the call's fragments.
        id: The call's id (None: one is made when the stream finishes).
        name: The tool's name.
        provider_data: Opaque provider fields of the call.
        apart: The provider keeps calls apart from the text (Chat Completions'
            ``tool_calls`` beside the message's ``content``): the call goes
            after all the parts, and text or reasoning around it stays one part.
    """

    index: int
    id: str | None
    name: str
    provider_data: Mapping[str, Any] = attrs.field(factory=dict)
    apart: bool = False
    kind: Literal["tool_call_start"] = "tool_call_start"


@attrs.frozen
class ToolCallDelta:
    """A fragment of the arguments of the call at ``index``."""

    index: int
    arguments: str
    kind: Literal["tool_call_delta"] = "tool_call_delta"


@attrs.frozen
class ToolCallEnd:
    """The call at ``index`` is complete: only now are its arguments final.

    ``dropped``: the call never runs, and is taken out of the answer, its start and
    fragments with it: the provider left it unfinished (a Responses ``function_call``
    item done with ``status: "incomplete"``), or the finish that closes it cuts the
    answer (``length`` / ``content_filter``: a Chat finish chunk, a Gemini chunk that
    carries the call and its finish). A call that ended before its answer's finish
    came (Anthropic, Responses, a Gemini call in an earlier chunk) ends ``dropped=False``
    and is dropped with the rest when the ``length`` / ``content_filter`` finish comes.
    """

    index: int
    dropped: bool = False
    kind: Literal["tool_call_end"] = "tool_call_end"


@attrs.frozen
class UsageUpdate:
    """Token counts for the response (replaces earlier counts).

    A ``usage`` that is no `Usage` raises a `UsageError`.
    """

    usage: Usage = attrs.field(validator=_usage)
    kind: Literal["usage"] = "usage"


@attrs.frozen
class StreamFinish:
    """The response ended.

    A ``finish_reason`` that is no `FinishReason` raises a `UsageError` naming
    the values allowed, as `ModelResponse` does.
    """

    finish_reason: FinishReason = attrs.field(validator=_finish_reason)
    raw_finish_reason: str | None = None
    kind: Literal["finish"] = "finish"


@attrs.frozen
class MediaOutput:
    """An image or file the model answered with (Gemini's generated images, the
    Responses image tool's, a Chat Completions audio answer), whole: it ends the
    text or reasoning before it and is the next part of the answer.

    Attributes:
        part: The image or file.
    """

    part: ImagePart | FilePart
    kind: Literal["media"] = "media"


@attrs.frozen
class ResponseInfo:
    """Metadata about the response (model name, response id)."""

    model_name: str | None = None
    response_id: str | None = None
    kind: Literal["info"] = "info"


StreamEvent = Union[  # noqa: UP007
    TextDelta,
    ReasoningDelta,
    ToolCallStart,
    ToolCallDelta,
    ToolCallEnd,
    UsageUpdate,
    StreamFinish,
    ResponseInfo,
    MediaOutput,
]


def _joined(pieces: Log[str]) -> str:
    return pieces[0] if len(pieces) == 1 else "".join(pieces)


_NO_PIECES: Log[str] = Log()

# The place of a call kept apart from the parts (`ToolCallStart.apart`): after all of
# them. Below every count, so no part ends before it (see `_ends_before_call`).
_APART = -1


class _ByKey:
    """Equality and hash by ``_key()``: what a value reads as, not the pieces it keeps.

    A growing text is kept as its fragments; two states holding the same text
    in other fragments are equal.
    """

    __slots__ = ()

    def _key(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


@attrs.frozen(eq=False)
class _OpenCall(_ByKey):
    index: int
    id: str | None
    name: str
    # The argument fragments as they came: appending to a `Log` is O(1), where
    # joining the text on every fragment copied all of it each time (a long or
    # hostile stream of small fragments cost time quadratic in its length).
    pieces: Log[str] = _NO_PIECES
    done: bool = False
    provider_data: Mapping[str, Any] = attrs.field(factory=dict)
    # How many of the response's parts come before the call (the part growing as it
    # started counted): where the finished message has it, as a whole response does;
    # `_APART` for a call kept apart (after all the parts, see `ToolCallStart.apart`).
    at: int = 0

    @property
    def arguments(self) -> str:
        """The argument text so far."""
        return _joined(self.pieces)

    def _key(self) -> tuple[Any, ...]:
        return (
            self.index,
            self.id,
            self.name,
            self.arguments,
            self.done,
            self.provider_data,
            self.at,
        )


@attrs.frozen
class _OpenPart:
    """The text or reasoning part still growing: its pieces, joined when read.

    ``closed``: an unsigned reasoning part a piece ended (`ReasoningDelta.ends`):
    nothing more joins it; it stays here, not in ``settled``, where an unsigned
    reasoning part is one that grows on (a state made with its parts).
    """

    pieces: Log[str]
    reasoning: bool = False
    provider: str | None = None
    provider_data: Mapping[str, Any] = attrs.field(factory=dict)
    closed: bool = False

    def part(self, signature: str | None = None) -> Part:
        if self.reasoning:
            return ReasoningPart(_joined(self.pieces), signature, self.provider, self.provider_data)
        return _text(_joined(self.pieces))


@attrs.frozen(eq=False, repr=False)
class StreamState(_ByKey):
    """A response under construction from stream events (see `fold_stream`).

    The text or reasoning part still growing is kept apart (``growing``, its
    fragments as they came) and joined when ``parts`` is read, so folding
    costs the same for each event however long the stream. Make a state with
    ``StreamState(parts=...)``; ``attrs.evolve(state, parts=...)`` replaces
    only the parts before the growing one (``settled``).

    Attributes:
        parts: Completed parts, in order (text and reasoning merged as they grow).
        calls: Tool calls by stream index, in the order they started; each
            keeps its place among ``parts`` (after those before its start).
        usage: The latest usage reported.
        finish_reason: Set once the stream finished.
        raw_finish_reason: The provider's own finish reason.
        model_name: The model that answered.
        response_id: The provider's response id.
    """

    # The parts before the one still growing; `parts` adds that one, joined.
    settled: tuple[Part, ...] = attrs.field(default=(), alias="parts")
    calls: tuple[_OpenCall, ...] = ()
    usage: Usage = Usage(requests=1)
    finish_reason: FinishReason | None = None
    raw_finish_reason: str | None = None
    model_name: str | None = None
    response_id: str | None = None
    growing: _OpenPart | None = attrs.field(default=None, alias="_growing")

    @property
    def parts(self) -> tuple[Part, ...]:
        """Completed parts, in order (text and reasoning merged as they grow)."""
        growing = self.growing
        return self.settled if growing is None else (*self.settled, growing.part())

    def _key(self) -> tuple[Any, ...]:
        return (
            self.parts,
            self.calls,
            self.usage,
            self.finish_reason,
            self.raw_finish_reason,
            self.model_name,
            self.response_id,
        )

    def __repr__(self) -> str:
        return (
            f"StreamState(parts={self.parts!r}, calls={self.calls!r}, usage={self.usage!r}, "
            f"finish_reason={self.finish_reason!r}, "
            f"raw_finish_reason={self.raw_finish_reason!r}, "
            f"model_name={self.model_name!r}, response_id={self.response_id!r})"
        )


# Stream events arrive by the hundred per response: each fold copies the state
# without `attrs.evolve`'s keyword handling and the classes' checks (see `replacer`).
_with_text = replacer(StreamState, "settled", "growing")
_with_calls = replacer(StreamState, "calls")
_with_usage = replacer(StreamState, "usage")
_with_finish = replacer(StreamState, "finish_reason", "raw_finish_reason")
_with_info = replacer(StreamState, "model_name", "response_id")
_with_pieces = replacer(_OpenCall, "pieces")
_with_done = replacer(_OpenCall, "done")
_growing_text = builder(_OpenPart)
_text = builder(TextPart)
_response = builder(ModelResponse)


def fold_stream(state: StreamState, event: StreamEvent) -> StreamState:
    """Fold one stream event into the response under construction (pure).

    Each event costs time independent of how long the stream has been: text
    and argument fragments are kept as they came and joined when read.

    Raises:
        StreamError: An event for a tool call that never started (a decoder
            that broke the stream's rules).
        UsageError: ``state`` is no `StreamState` or ``event`` no stream event.
    """
    # The argument checks run only once the fold failed (or no event type
    # matched), so a real state and event pay nothing for them.
    try:
        if isinstance(event, TextDelta):
            return _add_text(state, event)
        if isinstance(event, ReasoningDelta):
            return _add_reasoning(state, event)
        if isinstance(event, ToolCallStart):
            # (after the growing part, which the call completes: see `_ends_before_call`)
            at = _APART if event.apart else len(state.settled) + (state.growing is not None)
            call = _OpenCall(
                event.index, event.id, event.name, _NO_PIECES, False, event.provider_data, at
            )
            return _with_calls(state, (*state.calls, call))
        if isinstance(event, ToolCallDelta):
            text = event.arguments
            return _with_calls(
                state,
                _update_call(
                    state.calls,
                    event.index,
                    lambda c: _with_pieces(c, c.pieces.append(text) if c.pieces else Log((text,))),
                ),
            )
        if isinstance(event, ToolCallEnd):
            if event.dropped:
                return _with_calls(state, _drop_call(state.calls, event.index))
            return _with_calls(
                state, _update_call(state.calls, event.index, lambda c: _with_done(c, True))
            )
        # These three copy every other field of ``state`` and read nothing that
        # fails on a wrong one (the StreamState class itself gives its slots'
        # descriptors): checked first. A stream sends each once or so.
        if isinstance(event, UsageUpdate):
            if not isinstance(state, StreamState):
                _refuse_stream_state("fold_stream", state, None)
            return _with_usage(state, event.usage)
        if isinstance(event, StreamFinish):
            if not isinstance(state, StreamState):
                _refuse_stream_state("fold_stream", state, None)
            return _with_finish(state, event.finish_reason, event.raw_finish_reason)
        if isinstance(event, ResponseInfo):
            if not isinstance(state, StreamState):
                _refuse_stream_state("fold_stream", state, None)
            return _with_info(
                state, event.model_name or state.model_name, event.response_id or state.response_id
            )
        if isinstance(event, MediaOutput):
            growing = state.growing
            settled = state.settled if growing is None else (*state.settled, growing.part())
            return _with_text(state, (*settled, event.part), None)
    except (AttributeError, TypeError, StreamError) as error:
        # A `RunState` has ``calls`` too (a call's event fails as the stream's fault), and
        # the class itself gives descriptors (a TypeError): the state is checked first.
        _refuse_stream_state("fold_stream", state, error)
    raise wrong_argument("fold_stream", "the event", _EVENTS, event)


_EVENTS = "a stream event (" + ", ".join(t.__name__ for t in get_args(StreamEvent)) + ")"


def _refuse_stream_state(function: str, value: object, error: BaseException | None) -> NoReturn:
    """Raise a `UsageError` for ``value`` if it is no `StreamState`, else ``error`` again."""
    if not isinstance(value, StreamState):
        fresh = (value is None or value is StreamState) and function == "fold_stream"
        hint = " (start a stream with StreamState())" if fresh else ""
        raise wrong_argument(function, "the state", "a StreamState", value, hint) from None
    assert error is not None  # (only a failure of a real state's fold is raised again)
    raise error


def _ends_before_call(calls: tuple[_OpenCall, ...], count: int) -> bool:
    """Whether a call started after the first ``count`` parts: the part ``count`` ends
    is complete, what comes next is another part (after the call)."""
    return bool(calls) and calls[-1].at >= count


def _add_text(state: StreamState, event: TextDelta) -> StreamState:
    text = event.text
    growing, settled = state.growing, state.settled
    if growing is not None:
        # (the growing part counted: one more than the settled ones)
        if not growing.reasoning and (
            not _ends_before_call(state.calls, len(settled) + 1) or event.before_call
        ):
            return _with_text(state, settled, _growing_text(growing.pieces.append(text)))
        # reasoning ends where text begins; text after a call is another part
        settled = (*settled, growing.part())
    elif (
        settled
        and isinstance(settled[-1], TextPart)
        and (event.before_call or not _ends_before_call(state.calls, len(settled)))
    ):  # a state made with its parts
        text = settled[-1].text + text
        settled = settled[:-1]
    return _with_text(state, settled, _growing_text(Log((text,))))


def _add_reasoning(state: StreamState, event: ReasoningDelta) -> StreamState:
    growing, settled, calls = state.growing, state.settled, state.calls
    if growing is not None and (
        not growing.reasoning
        or growing.closed
        or _ends_before_call(calls, len(settled) + 1)  # (the growing part counted)
    ):
        # text ends where reasoning begins; a closed part takes no more, nor one a call followed
        settled, growing = (*settled, growing.part()), None
    elif growing is None and settled and not _ends_before_call(calls, len(settled)):
        # a state made with its parts
        last = settled[-1]
        if isinstance(last, ReasoningPart) and last.signature is None:
            settled = settled[:-1]
            growing = _OpenPart(Log((last.text,)), True, last.provider, last.provider_data)
    if growing is None:
        pieces = Log((event.text,))
        provider, data = event.provider, event.provider_data
    else:
        pieces = Log((event.text,)) if event.replaces else growing.pieces.append(event.text)
        provider = event.provider or growing.provider
        data = (
            {**growing.provider_data, **event.provider_data}
            if event.provider_data
            else growing.provider_data
        )
    if event.signature is not None:  # a signed part is complete: the next reasoning is another
        grown = _OpenPart(pieces, True, provider, data)
        return _with_text(state, (*settled, grown.part(event.signature)), None)
    return _with_text(state, settled, _OpenPart(pieces, True, provider, data, event.ends))


def _position(calls: tuple[_OpenCall, ...], index: int) -> int:
    """Where the (last) call at ``index`` is in ``calls``.

    Raises:
        StreamError: No call at ``index`` started.
    """
    for position in range(len(calls) - 1, -1, -1):
        if calls[position].index == index:
            return position
    raise StreamError(f"the model's stream sent an event for tool call {index} before its start")


def _update_call(
    calls: tuple[_OpenCall, ...], index: int, change: Callable[[_OpenCall], _OpenCall]
) -> tuple[_OpenCall, ...]:
    position = _position(calls, index)
    # Concatenated, not unpacked into a new tuple: a third cheaper at any size.
    return calls[:position] + (change(calls[position]),) + calls[position + 1 :]  # noqa: RUF005


def _drop_call(calls: tuple[_OpenCall, ...], index: int) -> tuple[_OpenCall, ...]:
    """``calls`` without the (last) call at ``index``."""
    position = _position(calls, index)
    return calls[:position] + calls[position + 1 :]


def finish_stream(state: StreamState, make_id: Callable[[int], str]) -> ModelResponse:
    """Turn a folded stream into the response.

    Args:
        state: The folded stream.
        make_id: Makes an id for a call the provider sent without one (by position).

    Raises:
        StreamError: A tool call never ended: its arguments are not final
            (unless the provider cut the answer, finish reason ``length`` or
            ``content_filter``:
            then no call is kept, ended or not; see `without_cut_calls`).
        UsageError: ``state`` is no `StreamState` or ``make_id`` is not callable.
    """
    if not callable(make_id):  # (checked here: it is called only for a call with no id)
        raise wrong_argument(
            "finish_stream", "make_id", "a callable that makes a call id from a position", make_id
        )
    if not isinstance(state, StreamState):  # (once a stream: a `RunState` has calls too)
        _refuse_stream_state("finish_stream", state, None)
    open_calls = [c.name for c in state.calls if not c.done]
    finish = state.finish_reason or "stop"
    if finish in CUT_FINISHES:  # the provider cut the calls: none runs (see `without_cut_calls`)
        state = _with_calls(state, ())
    elif open_calls:
        raise StreamError(
            f"the model's stream ended before tool calls completed: {', '.join(open_calls)}"
        )
    calls = tuple(
        ToolCallPart(
            c.id or make_id(position),
            c.name,
            c.arguments or "{}",
            decoded_arguments(c.arguments),
            c.provider_data,
        )
        for position, c in enumerate(state.calls)
    )
    # What the fold took came through `UsageUpdate` and `StreamFinish`, which check
    # it: built without the constructor's checks then (a state made by hand keeps them).
    checked = type(state.usage) is Usage and finish in FINISH_REASONS
    return (_response if checked else ModelResponse)(
        Message("assistant", _placed(state.parts, state.calls, calls)),
        state.usage,
        finish,
        state.raw_finish_reason,
        state.model_name,
        state.response_id,
    )


def _placed(
    parts: tuple[Part, ...], started: tuple[_OpenCall, ...], calls: tuple[ToolCallPart, ...]
) -> tuple[Part, ...]:
    """``parts`` with each of ``calls`` where it started (``started``: their open calls),
    as a whole response has them: interleaved reasoning, text and calls keep their order
    (a provider refuses reasoning sent back apart from the call it led to)."""
    if not calls:
        return parts
    placed: list[Part] = []
    taken = 0
    for opened, call in zip(started, calls, strict=True):
        # (apart, or a state given fewer parts by hand: after them)
        at = len(parts) if opened.at == _APART else min(opened.at, len(parts))
        if at > taken:
            placed += parts[taken:at]
            taken = at
        placed.append(call)
    placed += parts[taken:]
    return tuple(placed)
