"""fold_stream, finish_stream, drop_tool_calls and state_of refuse wrong arguments by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from toolfold import Agent, RunError, Usage, UsageError, drop_tool_calls, state_of
from toolfold.runtime import Message, StreamState, TextPart, finish_stream, fold_stream
from toolfold.runtime.core._stream import (
    ResponseInfo,
    StreamEvent,
    StreamFinish,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageUpdate,
)
from toolfold.testing import ScriptedModel


@pytest.mark.parametrize("value", [None, "state", {"growing": None}, 5])
def test_fold_stream_given_no_stream_state_names_it(value: Any) -> None:
    """fold_stream(non-state, event) raises UsageError naming the function, argument and type."""
    with pytest.raises(UsageError) as caught:
        fold_stream(value, TextDelta("x"))
    assert str(caught.value).startswith(
        f"fold_stream(): the state must be a StreamState, got {type(value).__name__} {value!r}"
    )


def test_fold_stream_given_none_says_to_start_with_a_stream_state() -> None:
    """fold_stream(None, event) says a stream starts with StreamState()."""
    with pytest.raises(UsageError, match=r"\(start a stream with StreamState\(\)\)$"):
        fold_stream(None, TextDelta("x"))  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, "text", Message.user("hi"), 5])
def test_fold_stream_given_no_stream_event_names_it(value: Any) -> None:
    """fold_stream(state, non-event) raises UsageError listing the stream event types."""
    with pytest.raises(UsageError) as caught:
        fold_stream(StreamState(), value)
    message = str(caught.value)
    assert message.startswith("fold_stream(): the event must be a stream event (TextDelta, ")
    assert f"got {type(value).__name__} " in message


def test_fold_stream_refuses_a_value_that_only_looks_like_response_info() -> None:
    """An object with model_name and response_id is no ResponseInfo: it is refused, not folded."""
    response = Agent(ScriptedModel(["hello"])).run("hi")
    with pytest.raises(UsageError, match=r"^fold_stream\(\): the event must be a stream event"):
        fold_stream(StreamState(), response)  # type: ignore[arg-type]
    folded = fold_stream(StreamState(), ResponseInfo("m", "r1"))
    assert (folded.model_name, folded.response_id) == ("m", "r1")


def test_fold_stream_keeps_a_decoders_stream_error() -> None:
    """An event for a call that never started is still a StreamError, not a UsageError."""
    from toolfold import StreamError

    with pytest.raises(StreamError) as caught:
        fold_stream(StreamState(), ToolCallEnd(3))
    assert not isinstance(caught.value, UsageError)


def test_finish_stream_given_no_stream_state_names_it() -> None:
    """finish_stream(non-state, make_id) raises UsageError naming the function and type."""
    with pytest.raises(
        UsageError, match=r"^finish_stream\(\): the state must be a StreamState, got NoneType None$"
    ):
        finish_stream(None, str)  # type: ignore[arg-type]


def test_finish_stream_given_no_callable_make_id_names_it() -> None:
    """finish_stream(state, non-callable) is refused even when no call needs an id."""
    state = fold_stream(StreamState(), TextDelta("hi"))
    with pytest.raises(UsageError, match=r"^finish_stream\(\): make_id must be a callable"):
        finish_stream(state, "c")  # type: ignore[arg-type]
    started = fold_stream(StreamState(), ToolCallStart(0, None, "f"))
    response = finish_stream(fold_stream(started, ToolCallEnd(0)), lambda i: f"c{i}")
    assert response.message.tool_calls[0].id == "c0"


EVENTS: list[StreamEvent] = [
    TextDelta("x"),
    ToolCallStart(0, "c", "f"),
    ToolCallDelta(0, "{}"),
    ToolCallEnd(0),
    UsageUpdate(Usage(1, 1)),
    StreamFinish("stop", "stop"),
    ResponseInfo("m", "r"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize("kind", ["RunState", "the StreamState class"])
def test_fold_stream_given_a_run_state_or_the_class_names_it(kind: str, event: StreamEvent) -> None:
    """A RunState (which has calls) or StreamState without () is refused by a UsageError for every event."""
    state: Any = StreamState
    if kind == "RunState":
        state = Agent(ScriptedModel(["hello"])).run("hi").state
    with pytest.raises(UsageError) as caught:
        fold_stream(state, event)
    assert str(caught.value).startswith(
        f"fold_stream(): the state must be a StreamState, got {type(state).__name__} "
    )


@pytest.mark.parametrize("kind", ["RunState", "the StreamState class"])
def test_finish_stream_given_a_run_state_or_the_class_names_it(kind: str) -> None:
    """finish_stream(RunState or StreamState class) is a UsageError, not an AttributeError/TypeError."""
    state: Any = StreamState
    if kind == "RunState":
        state = Agent(ScriptedModel(["hello"])).run("hi").state
    with pytest.raises(UsageError, match=r"^finish_stream\(\): the state must be a StreamState"):
        finish_stream(state, str)


CALLS: dict[str, Callable[[], object]] = {
    "NoneType": lambda: drop_tool_calls(None),  # type: ignore[arg-type]
    "int": lambda: drop_tool_calls(5),  # type: ignore[arg-type]
    "str": lambda: drop_tool_calls("hello"),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("value", ["", b"", b"hi"])
def test_drop_tool_calls_refuses_empty_text_and_bytes_as_it_refuses_text(value: Any) -> None:
    """drop_tool_calls("") and (b"") raise the UsageError drop_tool_calls("hello") does, not return []."""
    with pytest.raises(UsageError) as caught:
        drop_tool_calls(value)
    assert str(caught.value).startswith(
        f"drop_tool_calls(): messages must be an iterable of Messages, got {type(value).__name__} "
    )


@pytest.mark.parametrize("name", sorted(CALLS))
def test_drop_tool_calls_given_no_iterable_of_messages_names_it(name: str) -> None:
    """drop_tool_calls(non-iterable or str) raises UsageError naming its messages argument."""
    with pytest.raises(UsageError) as caught:
        CALLS[name]()
    assert str(caught.value).startswith(
        f"drop_tool_calls(): messages must be an iterable of Messages, got {name} "
    )


def test_drop_tool_calls_names_the_position_of_a_non_message() -> None:
    """A list holding something else than a Message is refused at that item's position."""
    with pytest.raises(
        UsageError, match=r"^drop_tool_calls\(\): messages\[1\] must be a Message, got str 'hi'$"
    ):
        drop_tool_calls([Message.user("a"), "hi"])  # type: ignore[list-item]


def test_drop_tool_calls_given_one_message_or_a_response_says_what_to_pass() -> None:
    """A single Message is told to pass [message]; a Response to pass its .messages."""
    message = Message.user("hi")
    with pytest.raises(UsageError, match=r"\(pass \[message\]\)$"):
        drop_tool_calls(message)  # type: ignore[arg-type]
    response = Agent(ScriptedModel(["hello"])).run("hi")
    with pytest.raises(UsageError, match=r"got Response .*\(pass its \.messages\)$"):
        drop_tool_calls(response)  # type: ignore[arg-type]
    kept = drop_tool_calls(response.messages)
    assert [m.parts for m in kept] == [(TextPart("hi"),), (TextPart("hello"),)]


@pytest.mark.parametrize("value", [None, "error", 5])
def test_state_of_given_no_exception_names_it(value: Any) -> None:
    """state_of(non-exception) raises UsageError naming the function, argument and type."""
    with pytest.raises(UsageError) as caught:
        state_of(value)
    assert str(caught.value) == (
        f"state_of(): error must be an exception, got {type(value).__name__} {value!r}"
    )


def test_state_of_given_a_response_says_to_read_its_state() -> None:
    """state_of(response) says to read the response's .state; an error still gives its state."""
    response = Agent(ScriptedModel(["hello"])).run("hi")
    with pytest.raises(UsageError, match=r"got Response .*\(read its \.state\)$"):
        state_of(response)  # type: ignore[arg-type]
    error = RunError("failed", state=response.state)
    assert state_of(error) is response.state
