"""Messages and tool calls refuse values that would not survive the JSON round trip."""

from __future__ import annotations

from typing import Any

import pytest
from core_helpers import start

from toolfold import (
    Agent,
    FilePart,
    ImagePart,
    InvalidEventError,
    Message,
    ReasoningPart,
    RunState,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    UsageError,
)
from toolfold.runtime import (
    ModelResponded,
    ModelResponse,
    ToolDefinition,
    ToolReturned,
    ToolSpec,
    UserMessageAdded,
    initial_state,
    reduce,
)
from toolfold.runtime.core._build import builder
from toolfold.testing import ScriptedModel

# Made around the constructors' checks, as a driver's hot path makes them.
_raw_message = builder(Message)
_raw_call = builder(ToolCallPart)


def test_message_refuses_a_str_as_its_parts() -> None:
    """A str where parts are expected is refused with advice, not split into characters."""
    with pytest.raises(UsageError, match=r"Message\.parts must be a list of parts") as caught:
        Message("user", "Refund order 7")  # type: ignore[arg-type]
    assert "Message.user(text)" in str(caught.value)
    assert "'Refund order 7'" in str(caught.value)


@pytest.mark.parametrize("part", [{"text": "x"}, "plain text", 42, None])
def test_message_refuses_a_part_that_is_no_part(part: Any) -> None:
    """A dict, str, int or None among the parts is refused, naming its index and type."""
    with pytest.raises(UsageError, match=r"Message\.parts\[1\]: expected a part") as caught:
        Message("user", [TextPart("ok"), part])
    assert type(part).__name__ in str(caught.value)


def test_message_refuses_parts_that_are_not_iterable() -> None:
    """Parts that are no collection at all are refused as a UsageError, not a bare TypeError."""
    with pytest.raises(UsageError, match=r"Message\.parts must be a list of parts, got int"):
        Message("user", 5)  # type: ignore[arg-type]


def test_message_with_parts_still_round_trips() -> None:
    """A message of real parts is built as before and its run's state round-trips."""
    message = Message("user", [TextPart("Refund order 7")])
    response = Agent(ScriptedModel(["ok"])).run("Go on.", history=[message])
    assert response.messages[0] == Message.user("Refund order 7")
    assert RunState.from_json(response.state.to_json()) == response.state


def test_message_tool_refuses_a_list_of_results() -> None:
    """``Message.tool([result])`` says to spread the list, not that calls lack results."""
    result = ToolResultPart("c1", "add", "3")
    with pytest.raises(UsageError, match=r"Message\.tool\(\*results\)"):
        Message.tool([result])  # type: ignore[arg-type]
    assert Message.tool(result).parts == (result,)


def test_message_assistant_refuses_tool_calls_that_are_not_calls() -> None:
    """``Message.assistant(tool_calls=...)`` takes ToolCallParts only."""
    with pytest.raises(UsageError, match="takes ToolCallParts, got str"):
        Message.assistant("", ["add"])  # type: ignore[list-item]


def test_reducer_refuses_a_history_part_made_around_the_checks() -> None:
    """RunStarted refuses a history message whose parts are no parts, whoever built it."""
    bad = _raw_message("user", ("R", "e"))
    with pytest.raises(InvalidEventError, match=r"the history: part 0 of message 0 \(user\)"):
        initial_state([bad], run_id="r")


def test_reducer_refuses_an_added_message_part_made_around_the_checks() -> None:
    """UserMessageAdded refuses a message whose parts are no parts, whoever built it."""
    state = initial_state("hi", run_id="r")
    state = reduce(state, ModelResponded(ModelResponse(Message.assistant("ok"))))
    with pytest.raises(InvalidEventError, match="part 0 of the user message: expected a part"):
        reduce(state, UserMessageAdded(_raw_message("user", ({"text": "x"},))))


def test_tool_call_refuses_arguments_that_are_not_an_object() -> None:
    """ToolCallPart refuses decoded arguments that are a list, naming the field."""
    with pytest.raises(UsageError, match=r"ToolCallPart\.arguments must be .* got list \[1, 2\]"):
        ToolCallPart("c1", "add", "[1, 2]", [1, 2])  # type: ignore[arg-type]


def test_tool_call_with_array_text_gets_an_argument_error_and_round_trips() -> None:
    """A call whose text is an array is answered with an argument error; its state round-trips."""
    state = start(ToolSpec(ToolDefinition("add")), run_id="r")
    call = ToolCallPart("c1", "add", "[1, 2]")
    state = reduce(state, ModelResponded(ModelResponse(Message.assistant("", [call]))))
    assert state.calls[0].outcome == "invalid_arguments"
    assert "array" in (state.calls[0].result.content if state.calls[0].result else "")
    assert RunState.from_json(state.to_json()) == state


def test_reducer_refuses_call_arguments_made_around_the_checks() -> None:
    """ModelResponded refuses a call whose decoded arguments are not an object."""
    state = start(ToolSpec(ToolDefinition("add")), run_id="r")
    call = _raw_call("c1", "add", "[1]", [1])
    response = ModelResponse(_raw_message("assistant", (call,)))
    with pytest.raises(InvalidEventError, match=r"tool call 'c1' \(add\) has arguments"):
        reduce(state, ModelResponded(response))


def test_scripted_call_refuses_a_list_of_arguments_with_advice() -> None:
    """ScriptedModel.call with a list says to give non-object arguments as text."""
    with pytest.raises(UsageError, match=r"give them as text: call\('add', '\[1, 2\]'\)"):
        ScriptedModel.call("add", [1, 2])
    assert ScriptedModel.call("add", "[1, 2]").arguments is None


def test_scripted_call_refusal_is_bounded_for_huge_arguments() -> None:
    """A huge list of arguments gives a short refusal, not the whole JSON text."""
    with pytest.raises(UsageError) as caught:
        ScriptedModel.call("add", ["x" * 100_000])
    assert len(str(caught.value)) < 300
    assert "call('add', json.dumps(arguments))" in str(caught.value)


def test_scripted_call_refuses_arguments_that_are_not_json_without_text_advice() -> None:
    """A set is refused as not JSON, without advising its repr as argument text."""
    with pytest.raises(UsageError, match="got set, which is not JSON") as caught:
        ScriptedModel.call("add", {1, 2})
    assert '"{1, 2}"' not in str(caught.value)


def test_scripted_call_refuses_pairs_saying_to_make_a_dict() -> None:
    """A list of (name, value) pairs is refused with advice to pass dict(pairs)."""
    with pytest.raises(UsageError, match=r"\(name, value\) pairs: .*call\('add', dict\(pairs\)\)"):
        ScriptedModel.call("add", [("a", 1)])


def test_reducer_names_the_position_of_a_bad_history_message() -> None:
    """RunStarted names which history message holds the bad part, with its role."""
    good = Message.user("hi")
    bad = _raw_message("assistant", ("R",))
    with pytest.raises(InvalidEventError, match=r"part 0 of message 2 \(assistant\): expected"):
        initial_state([good, Message.assistant("ok"), bad], run_id="r")


def test_reducer_refuses_history_call_arguments_made_around_the_checks() -> None:
    """RunStarted's quick scan still finds a history call whose arguments are not an object."""
    call = _raw_call("c1", "add", "[1]", [1])
    history = [Message.user("hi"), _raw_message("assistant", (call,))]
    with pytest.raises(InvalidEventError, match=r"part 0 of message 1 \(assistant\): tool call"):
        initial_state(history, run_id="r")


@pytest.mark.parametrize("parts", [{"text": "x"}, b"ab", bytearray(b"ab")])
def test_message_refuses_a_dict_or_bytes_as_its_parts_whole(parts: Any) -> None:
    """A dict or bytes as the parts is refused as a whole, not iterated into keys or ints."""
    with pytest.raises(UsageError, match=r"Message\.parts must be a list of parts, got a") as e:
        Message("user", parts)
    assert type(parts).__name__ in str(e.value)
    assert "[0]" not in str(e.value)


def test_message_describes_a_part_whose_repr_fails_by_its_type() -> None:
    """A part whose repr raises is still refused as a UsageError naming its type."""

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("boom")

    with pytest.raises(UsageError, match=r"parts\[0\]: expected a part.*got Broken"):
        Message("user", [Broken()])  # type: ignore[list-item]


_WRONG_FIELDS = [
    (lambda: TextPart(42), r"TextPart\.text: expected a str, got int 42"),
    (lambda: ReasoningPart(text=42), r"ReasoningPart\.text: expected a str, got int"),
    (lambda: ReasoningPart(signature=5), r"ReasoningPart\.signature: expected a str or None"),
    (lambda: ToolCallPart(1, "add"), r"ToolCallPart\.id: expected a str, got int 1"),
    (lambda: ToolCallPart("c1", None), r"ToolCallPart\.name: expected a str, got NoneType"),
    (lambda: ToolResultPart("c1", "add", 3), r"ToolResultPart\.content: expected a str, got int"),
    (lambda: ToolResultPart("c1", "add", "3", 1), r"ToolResultPart\.is_error: expected True"),
    (
        lambda: ToolResultPart("c1", "add", "3", parts=[TextPart(3)]),
        r"ToolResultPart\.parts\[0\]: TextPart\.text: expected a str",
    ),
    (
        lambda: ToolResultPart("c1", "add", "3", parts=["x"]),
        r"ToolResultPart\.parts\[0\]: expected a TextPart, ImagePart or FilePart, got str",
    ),
    (
        lambda: ImagePart(data="aGk="),
        r"ImagePart\.data: expected bytes or None, got str.*b64decode",
    ),
    (lambda: FilePart(url=b"x"), r"FilePart\.url: expected a str or None, got bytes"),
    (lambda: FilePart(filename=7), r"FilePart\.filename: expected a str or None, got int"),
]


@pytest.mark.parametrize(("make", "expected"), _WRONG_FIELDS)
def test_message_refuses_a_part_with_a_wrong_typed_field(make: Any, expected: str) -> None:
    """A part whose text (or data) field has the wrong type is refused, naming index and field."""
    with pytest.raises(UsageError, match=r"Message\.parts\[1\]: " + expected):
        Message("user", [TextPart("ok"), make()])


def test_message_shortcuts_refuse_text_that_is_no_str() -> None:
    """``Message.system(42)`` and ``Message.user(TextPart(42))`` fail where they are made."""
    with pytest.raises(UsageError, match=r"TextPart\.text: expected a str, got int 42"):
        Message.system(42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"Message\.parts\[0\]: TextPart\.text"):
        Message.user(TextPart(42))  # type: ignore[arg-type]


@pytest.mark.parametrize("role", [42, "bogus", None])
def test_message_refuses_a_role_that_is_none_of_the_four(role: Any) -> None:
    """A role other than system/user/assistant/tool is refused, naming what was expected."""
    with pytest.raises(UsageError, match=r"Message\.role: expected one of 'system', 'user'") as e:
        Message(role, [TextPart("x")])
    assert type(role).__name__ in str(e.value)


def test_message_takes_text_of_a_str_subclass() -> None:
    """A str subclass (an enum's value, say) is text: the message is made and round-trips."""

    class Label(str):
        pass

    message = Message("user", [TextPart(Label("Refund order 7"))])
    response = Agent(ScriptedModel(["ok"])).run("Go on.", history=[message])
    assert RunState.from_json(response.state.to_json()).messages[0] == Message.user(
        "Refund order 7"
    )


def test_reducer_refuses_an_added_message_with_a_wrong_typed_field() -> None:
    """UserMessageAdded refuses a message made around the checks whose text is no str."""
    state = initial_state("hi", run_id="r")
    state = reduce(state, ModelResponded(ModelResponse(Message.assistant("ok"))))
    bad = _raw_message("user", (TextPart(42),))
    with pytest.raises(InvalidEventError, match=r"part 0 of the user message: TextPart\.text"):
        reduce(state, UserMessageAdded(bad))


def test_reducer_names_the_position_of_a_history_part_with_a_wrong_typed_field() -> None:
    """RunStarted's quick scan finds a wrong-typed field and names the message's position."""
    bad = _raw_message("assistant", (ReasoningPart("thinking", provider=3),))
    with pytest.raises(
        InvalidEventError,
        match=r"part 0 of message 1 \(assistant\): ReasoningPart\.provider: expected a str or None",
    ):
        initial_state([Message.user("hi"), bad], run_id="r")


def test_reducer_refuses_tool_returned_content_parts_with_a_wrong_typed_field() -> None:
    """ToolReturned refuses result parts whose text is no str before they enter the state."""
    state = start(ToolSpec(ToolDefinition("add")), run_id="r")
    call = ToolCallPart("c1", "add", "{}")
    state = reduce(state, ModelResponded(ModelResponse(Message.assistant("", [call]))))
    with pytest.raises(InvalidEventError, match=r"a result's part 0: TextPart\.text: expected"):
        reduce(state, ToolReturned("c1", "3", parts=(TextPart(3),)))  # type: ignore[arg-type]
