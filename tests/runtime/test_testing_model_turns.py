"""TestModel across a run: output retries, shared models' usage, scripted outputs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
from typing import Any

import pytest

from toolfold import Agent, OutputValidationError, UsageError, tool
from toolfold.testing import FunctionModel, TestModel


def test_a_rejected_output_is_asked_again_without_calling_the_tools_again() -> None:
    """An output retry is no new turn: TestModel calls each tool once, then only answers."""
    calls: list[int] = []

    @tool
    def charge(amount: int) -> str:
        """Charge the card.

        Args:
            amount: The amount.
        """
        calls.append(amount)
        return "charged"

    model = TestModel(output={"code": 5})  # (refused: code is a string)
    agent = Agent(model, tools=[charge], output_type=dict[str, str], output_retries=2)
    with pytest.raises(OutputValidationError):
        agent.run("go")
    assert len(calls) == 1
    # one request calling the tool, then the answer and the two answers asked again
    assert len(model.requests) == 4


@pytest.mark.parametrize("output_type", [None, dict[str, str]], ids=["text", "typed"])
def test_a_user_message_starting_like_a_retry_is_a_new_turn(output_type: Any) -> None:
    """A user's own message that begins as the output retry does (without its closing
    line, or in a run with no output type) is a new turn: TestModel calls the tools again."""
    calls: list[str] = []

    @tool
    def lookup(q: str) -> str:
        """Look up.

        Args:
            q: The query.
        """
        calls.append(q)
        return "found"

    agent = Agent(TestModel(), tools=[lookup], output_type=output_type)  # type: ignore[call-overload]
    first = agent.run("first question")
    assert len(calls) == 1
    text = "Your final answer does not match the required output schema:\n- my own words"
    agent.run(text, history=first.messages)
    assert len(calls) == 2


def test_a_test_model_shared_by_two_agents_counts_each_request_alone() -> None:
    """A TestModel shared by a handoff's two agents reports the input tokens a model each would."""

    def triage(shared: TestModel | None) -> Agent[None, str]:
        billing = Agent(shared or TestModel(text="done"), name="billing", instructions="short")
        return Agent(
            shared or TestModel(text="done"),
            name="triage",
            handoffs=[billing],
            instructions=" ".join(["long"] * 200),
        )

    alone = triage(None).run("refund please").usage
    shared = triage(TestModel(text="done")).run("refund please").usage
    assert shared == alone


def test_a_run_given_another_runs_history_is_counted_by_its_own_request() -> None:
    """Messages of an earlier run, sent after other instructions, are not counted on from that run."""

    @tool
    def ls(path: str) -> str:
        """List a folder.

        Args:
            path: The folder.
        """
        return "a b"

    model = TestModel()
    first = Agent(model, tools=[ls], instructions=" ".join(["word"] * 100)).run("x")
    again = Agent(model, tools=[ls], instructions="short").run("y", history=first.messages)
    fresh = Agent(TestModel(), tools=[ls], instructions="short").run("y", history=first.messages)
    assert again.usage == fresh.usage


def test_interleaved_conversations_are_each_counted_on_from_their_own_prefix() -> None:
    """Two conversations growing in turns on one model count as each would alone."""
    from toolfold import Message, ModelRequest

    model, one, two = TestModel(text="ok"), TestModel(text="ok"), TestModel(text="ok")
    left: tuple[Message, ...] = (Message.user("a b c"),)
    right: tuple[Message, ...] = (Message.user("d"),)
    for _ in range(3):
        for conversation, alone in ((left, one), (right, two)):
            request = ModelRequest(conversation)
            assert model.request_sync(request).usage == alone.request_sync(request).usage
        left += (Message.assistant("ok"), Message.user("more words here"))
        right += (Message.assistant("ok"), Message.user("x"))


def test_a_conversation_edited_between_its_ends_is_counted_as_it_is() -> None:
    """A conversation keeping its first and last messages but with an older message
    replaced (older tool results elided by an input filter or a trimmed history)
    is counted by its own words, not on from the earlier request."""
    from toolfold import Message, ModelRequest

    model, alone = TestModel(text="ok"), TestModel(text="ok")
    first, long = Message.user("a b"), Message.assistant(" ".join(["word"] * 300))
    last = Message.user("c")
    model.request_sync(ModelRequest((first, long, last)))
    edited = (first, Message.assistant("[elided]"), last, Message.assistant("ok"))
    request = ModelRequest((*edited, Message.user("d")))
    assert model.request_sync(request).usage == alone.request_sync(request).usage


@dataclasses.dataclass
class _Weather:
    city: str
    temp: float


class _Unit(enum.Enum):
    C = "celsius"


@pytest.mark.parametrize(
    ("output", "output_type"),
    [
        (_Weather("Paris", 3.5), _Weather),
        (_Unit.C, _Unit),
        (dt.date(2024, 1, 2), dt.date),
        (decimal.Decimal("1.5"), decimal.Decimal),
        ({1, 2}, set[int]),
        ([_Weather("Rome", 2.0)], list[_Weather]),
    ],
)
def test_a_typed_output_is_given_as_the_runs_answer(output: Any, output_type: Any) -> None:
    """TestModel(output=) takes a value of the output type and the run answers it."""
    assert Agent(TestModel(output=output), output_type=output_type).run("x").output == output


def test_a_pydantic_output_is_given_as_the_runs_answer() -> None:
    """TestModel(output=) takes a pydantic model instance, its date field included."""
    import pydantic

    class Trip(pydantic.BaseModel):
        city: str
        when: dt.date

    trip = Trip(city="Oslo", when=dt.date(2024, 5, 1))
    assert Agent(TestModel(output=trip), output_type=Trip).run("x").output == trip


def test_an_output_with_no_json_form_is_refused_when_the_model_is_made() -> None:
    """TestModel(output=object()) is a UsageError naming the value, not a failed run."""
    with pytest.raises(UsageError, match=r"TestModel\(output=\.\.\.\): object .* as JSON"):
        TestModel(output=object())


def test_a_test_model_that_counted_requests_pickles_and_counts_alike() -> None:
    """A used TestModel pickles (for Ray's actors), and its copy counts a request as it does."""
    import pickle

    from toolfold import Message, ModelRequest

    model = TestModel(text="ok")
    request = ModelRequest((Message.user("a b c"),))
    expected = model.request_sync(request).usage
    copy = pickle.loads(pickle.dumps(model))
    assert copy.request_sync(request).usage == expected


@pytest.mark.parametrize("commit", ["1711365d", "9b17df2c"])
def test_a_function_model_an_older_toolfold_pickled_answers(commit: str) -> None:
    """A FunctionModel pickled before 12-07 (its counter without a lock; before 12-03 without
    keep_requests) answers, counts and keeps its requests once loaded.

    Made by tests/runtime/saved/function_models.md. Before, its first request failed:
    '_InputCounter' object has no attribute '_lock' (9b17df2c's: 'keep_requests').
    """
    import pickle
    from pathlib import Path

    saved = Path(__file__).parent / "saved" / f"function_model_{commit}.pkl"
    model = pickle.loads(saved.read_bytes())
    response = Agent(model).run("one two three")
    assert response.text == "hi"
    assert response.usage.input_tokens == 3
    assert len(model.requests) == 1
    again = pickle.loads(pickle.dumps(model))  # (pickled as today's again)
    assert Agent(again).run("four five").usage.input_tokens == 2


def _ok(request: Any) -> str:
    return "ok"


class _Slotted(FunctionModel):
    __slots__ = ("tag",)


class _Noted(FunctionModel):
    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "note": "kept"}


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "copy"])
def test_a_subclass_of_a_test_model_with_slots_or_its_own_state_copies(how: str) -> None:
    """A user's subclass with ``__slots__`` (pickle hands its state as the attributes and the
    slots) or its own ``__getstate__`` pickles and copies, keeping what it holds, and answers.

    Before, one with ``__slots__`` failed to load: 'tuple' object is not a mapping.
    """
    import copy
    import pickle

    copied = {
        "pickle": lambda m: pickle.loads(pickle.dumps(m)),
        "deepcopy": copy.deepcopy,
        "copy": copy.copy,
    }[how]
    slotted = _Slotted(_ok, keep_requests=False)
    slotted.tag = "t"
    again = copied(slotted)
    assert (again.tag, again.keep_requests) == ("t", False)
    assert Agent(again).run("hi").text == "ok"
    noted = copied(_Noted(_ok))
    assert (noted.note, noted.keep_requests) == ("kept", True)
    assert Agent(noted).run("hi").text == "ok"
