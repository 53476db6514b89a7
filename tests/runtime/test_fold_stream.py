"""`fold_stream` keeps fragments as they came: each event costs the same however long the stream."""

from __future__ import annotations

import pickle

from toolfold.runtime import StreamState, finish_stream, fold_stream
from toolfold.runtime.core._messages import ReasoningPart, TextPart
from toolfold.runtime.core._stream import (
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)


def fold(events: list[StreamEvent], state: StreamState | None = None) -> StreamState:
    state = StreamState() if state is None else state
    for event in events:
        state = fold_stream(state, event)
    return state


def test_text_fragments_are_not_copied_on_each_event() -> None:
    # A stream of n fragments used to copy the text so far on each one (time
    # quadratic in its length: 80k fragments of 10 characters took ~10 s of
    # CPU); the fragments now extend one shared buffer.
    first = fold([TextDelta("a")])
    state = fold([TextDelta("b") for _ in range(1000)], first)
    assert state.parts == (TextPart("a" + "b" * 1000),)
    assert first.growing is not None
    assert state.growing is not None
    assert state.growing.pieces._items is first.growing.pieces._items
    assert first.parts == (TextPart("a"),)  # the earlier state still reads its own text


def test_argument_fragments_are_not_copied_on_each_event() -> None:
    started = fold([ToolCallStart(0, "c1", "add"), ToolCallDelta(0, '{"a": ')])
    state = fold([ToolCallDelta(0, "1") for _ in range(500)] + [ToolCallDelta(0, "}")], started)
    assert state.calls[0].pieces._items is started.calls[0].pieces._items
    response = finish_stream(fold([ToolCallEnd(0)], state), str)
    assert response.message.parts[0].arguments == {"a": int("1" * 500)}
    assert started.calls[0].arguments == '{"a": '


def test_two_folds_from_one_state_stay_apart() -> None:
    base = fold([TextDelta("Hel")])
    left = fold([TextDelta("lo")], base)
    right = fold([TextDelta("p!")], base)
    assert (left.parts, right.parts, base.parts) == (
        (TextPart("Hello"),),
        (TextPart("Help!"),),
        (TextPart("Hel"),),
    )
    call = fold([ToolCallStart(0, "c", "f"), ToolCallDelta(0, "{")])
    one, two = fold([ToolCallDelta(0, "}")], call), fold([ToolCallDelta(0, '"')], call)
    assert (one.calls[0].arguments, two.calls[0].arguments) == ("{}", '{"')


def test_states_compare_by_what_they_hold_not_how_it_was_split() -> None:
    folded = fold([TextDelta("He"), TextDelta("llo")])
    assert folded == StreamState(parts=(TextPart("Hello"),))
    assert hash(folded) == hash(StreamState(parts=(TextPart("Hello"),)))
    assert folded != StreamState(parts=(TextPart("Hell"),))
    assert repr(folded).startswith("StreamState(parts=(TextPart(text='Hello'")
    assert pickle.loads(pickle.dumps(folded)) == folded


def test_a_state_made_with_its_parts_keeps_growing_them() -> None:
    state = StreamState(parts=(ReasoningPart("thin"), TextPart("Hel")))
    assert fold([TextDelta("lo")], state).parts == (ReasoningPart("thin"), TextPart("Hello"))
    reasoning = StreamState(parts=(ReasoningPart("thin", provider="p"),))
    grown = fold([ReasoningDelta("k", signature="s")], reasoning)
    assert grown.parts == (ReasoningPart("think", "s", "p"),)
    assert grown.growing is None  # a signed part is complete


def test_reasoning_and_text_alternate_as_separate_parts() -> None:
    state = fold(
        [
            ReasoningDelta("a", provider_data={"x": 1}),
            ReasoningDelta("b", provider_data={"y": 2}),
            TextDelta("t1"),
            ReasoningDelta("c", signature="s1"),
            ReasoningDelta("d"),
            TextDelta("t2"),
            TextDelta("t3"),
        ]
    )
    assert state.parts == (
        ReasoningPart("ab", None, None, {"x": 1, "y": 2}),
        TextPart("t1"),
        ReasoningPart("c", "s1"),
        ReasoningPart("d"),
        TextPart("t2t3"),
    )


def test_a_reasoning_piece_that_ends_its_part_starts_another_after_it() -> None:
    """A ReasoningDelta with ends=True completes its (unsigned) part: the next reasoning is a
    new part with its own provider_data, and text after it is a part of its own."""
    state = fold(
        [
            ReasoningDelta("On", provider="p", provider_data={"id": 1}),
            ReasoningDelta("e.", provider="p", provider_data={"id": 1}, ends=True),
            ReasoningDelta("Two.", provider="p", provider_data={"id": 2}, ends=True),
            TextDelta("t"),
            ReasoningDelta("Three."),
            ReasoningDelta(" More."),
        ]
    )
    assert state.parts == (
        ReasoningPart("One.", None, "p", {"id": 1}),
        ReasoningPart("Two.", None, "p", {"id": 2}),
        TextPart("t"),
        ReasoningPart("Three. More."),
    )


def test_a_reasoning_piece_that_replaces_takes_the_place_of_its_parts_earlier_pieces() -> None:
    """A ReasoningDelta with replaces=True is its part's whole text so far: later pieces add to
    it, an earlier (closed) part and the text before are untouched."""
    state = fold(
        [
            ReasoningDelta("Old.", provider="p", provider_data={"id": 1}, ends=True),
            ReasoningDelta("Summ", provider="p", provider_data={"id": 2}),
            ReasoningDelta("ary.", provider="p"),
            ReasoningDelta("Raw", provider="p", replaces=True),
            ReasoningDelta(" text.", provider="p", ends=True),
        ]
    )
    assert state.parts == (
        ReasoningPart("Old.", None, "p", {"id": 1}),
        ReasoningPart("Raw text.", None, "p", {"id": 2}),
    )


def test_a_call_keeps_its_place_among_the_parts_as_a_whole_response_has_it() -> None:
    """Reasoning, text and calls interleaved fold in the order they came (a provider refuses
    reasoning sent back apart from the call it led to); text after a call is another part."""
    state = fold(
        [
            ReasoningDelta("First.", signature="S1"),
            TextDelta("Let me "),
            TextDelta("check."),
            ToolCallStart(0, "a", "f"),
            ToolCallDelta(0, "{}"),
            ToolCallEnd(0),
            ReasoningDelta("Then.", signature="S2"),
            ToolCallStart(1, "b", "f"),
            TextDelta("And "),
            ToolCallDelta(1, "{}"),
            TextDelta("more."),
            ToolCallEnd(1),
        ]
    )
    parts = finish_stream(state, str).message.parts
    assert [(p.kind, getattr(p, "text", None) or getattr(p, "id", None)) for p in parts] == [
        ("reasoning", "First."),
        ("text", "Let me check."),
        ("tool_call", "a"),
        ("reasoning", "Then."),
        ("tool_call", "b"),
        ("text", "And more."),
    ]


def test_a_part_a_call_follows_takes_no_more_pieces() -> None:
    """Unsigned reasoning, or text, before a call ends there: what comes after is another part,
    whether it grew in this fold or was given with the state."""
    unsigned = fold([ReasoningDelta("a"), ToolCallStart(0, "c", "f"), ReasoningDelta("b")])
    unsigned = fold([ToolCallEnd(0)], unsigned)
    assert [p.kind for p in finish_stream(unsigned, str).message.parts] == [
        "reasoning",
        "tool_call",
        "reasoning",
    ]
    given = StreamState(parts=(TextPart("a"),))
    grown = fold([ToolCallStart(0, "c", "f"), ToolCallEnd(0), TextDelta("b")], given)
    parts = finish_stream(grown, str).message.parts
    assert [getattr(p, "text", "call") for p in parts] == ["a", "call", "b"]


def test_a_dropped_call_leaves_the_parts_around_it_as_one() -> None:
    """A call taken back (`ToolCallEnd.dropped`) leaves no mark: the text around it is one part."""
    state = fold(
        [
            TextDelta("a"),
            ToolCallStart(0, "c", "f"),
            ToolCallEnd(0, dropped=True),
            TextDelta("b"),
        ]
    )
    assert finish_stream(state, str).message.parts == (TextPart("ab"),)


def test_a_call_kept_apart_goes_after_the_parts_and_splits_no_text() -> None:
    """A call started ``apart`` (Chat Completions' tool_calls beside the content) goes after
    every part, and the text around it stays one text, as the whole message has it."""
    state = fold(
        [
            TextDelta("a"),
            ToolCallStart(0, "c", "f", apart=True),
            TextDelta("b"),
            ToolCallEnd(0),
            ReasoningDelta("r"),
        ]
    )
    parts = finish_stream(state, str).message.parts
    assert [getattr(p, "text", "call") for p in parts] == ["ab", "r", "call"]


def test_text_before_a_call_joins_the_text_the_call_follows() -> None:
    """A piece sent ``before_call`` after a call started (held back until the text after the
    call showed what it was) joins the text before the call, grown or given with the state;
    the text after the call is still another part."""
    grown = fold(
        [
            TextDelta("The key is "),
            ToolCallStart(0, "c", "f"),
            ToolCallDelta(0, "{}"),
            ToolCallEnd(0),
            TextDelta("sk", before_call=True),
            TextDelta(" done"),
        ]
    )
    given = fold(
        [ToolCallStart(0, "c", "f"), ToolCallEnd(0), TextDelta("sk", before_call=True)],
        StreamState(parts=(TextPart("The key is "),)),
    )
    given = fold([TextDelta(" done")], given)
    for state in (grown, given):
        parts = finish_stream(state, str).message.parts
        assert [getattr(p, "text", "call") for p in parts] == ["The key is sk", "call", " done"]
