"""The public pure functions refuse what is no RunState with a UsageError naming it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from core_helpers import start

import toolfold
from toolfold import Agent, InvalidEventError, ModelRequest, Sequence, UsageError, Workflow, tool
from toolfold.runtime import (
    Message,
    ToolCallPart,
    UserMessageAdded,
    approval_key,
    build_request,
    fork,
    initial_state,
    max_steps,
    next_effect,
    reduce,
    replay,
    stop_reason,
    stopping_result,
    tool_called,
)
from toolfold.testing import FunctionModel, ScriptedModel

_EVENT = UserMessageAdded(Message.user("again"))

CALLS: dict[str, Callable[[Any], object]] = {
    "reduce": lambda state: reduce(state, _EVENT),
    "next_effect": next_effect,
    "build_request": build_request,
    "fork": lambda state: fork(state, events=1),
    "replay": lambda state: replay([_EVENT], state),
    "stop_reason": lambda state: stop_reason(state, [max_steps(1)]),
    "stopping_result": stopping_result,
    "approval_key": lambda state: approval_key(state, "c1"),
}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        (name, value)
        for name in sorted(CALLS)
        for value in [None, "state", {"phase": "new"}, 5]
        if (name, value) != ("replay", None)  # replay's initial=None is a blank run
    ],
)
def test_a_function_given_no_state_names_itself_and_the_value(name: str, value: Any) -> None:
    """Each public function that takes a state raises UsageError naming it and the type given."""
    with pytest.raises(UsageError) as caught:
        CALLS[name](value)
    assert str(caught.value).startswith(
        f"{name}(): the state must be a RunState, got {type(value).__name__} {value!r}"
    )
    assert not isinstance(caught.value, InvalidEventError)


def test_a_response_given_as_the_state_is_told_to_pass_its_state() -> None:
    """reduce(response, event) says to pass the response's .state."""
    response = Agent(ScriptedModel(["hello"])).run("hi")
    with pytest.raises(UsageError, match=r"got Response .*\(pass its \.state\)$"):
        reduce(response, _EVENT)  # type: ignore[arg-type]
    assert reduce(response.state, _EVENT).phase == "awaiting_model"


def test_reduce_names_a_wrong_state_before_a_wrong_event() -> None:
    """reduce(None, "x") names the state, the first argument, not the event."""
    with pytest.raises(
        UsageError, match=r"^reduce\(\): the state must be a RunState, got NoneType"
    ):
        reduce(None, "x")  # type: ignore[arg-type]


def test_reduce_still_refuses_a_non_event_with_invalid_event_error() -> None:
    """A real state with a non-event keeps raising InvalidEventError with the state attached."""
    state = start()
    with pytest.raises(InvalidEventError, match="expected an event, got int 5") as caught:
        reduce(state, 5)  # type: ignore[arg-type]
    assert caught.value.state is state


@pytest.mark.parametrize("messages", [None, 5, 1.5])
def test_initial_state_refuses_messages_that_are_no_prompt_or_iterable(messages: Any) -> None:
    """initial_state(None) raises UsageError naming messages, not a bare TypeError."""
    with pytest.raises(
        UsageError,
        match=rf"^initial_state\(\): messages must be a prompt \(a str\) or an iterable of "
        rf"Messages, got {type(messages).__name__} ",
    ):
        initial_state(messages, run_id="r")


def test_initial_state_keeps_the_error_an_iterable_raises() -> None:
    """A TypeError raised while iterating the messages is not renamed as a wrong argument."""

    def broken() -> Any:
        yield Message.user("hi")
        raise TypeError("the source broke")

    with pytest.raises(TypeError, match="the source broke"):
        initial_state(broken(), run_id="r")


def test_replay_refuses_events_that_are_not_iterable() -> None:
    """replay(None) raises UsageError naming events."""
    with pytest.raises(UsageError, match=r"^replay\(\): events must be an iterable of events"):
        replay(None)  # type: ignore[arg-type]


def _submit(x: int) -> str:
    """Submit a number.

    Args:
        x: The number.
    """
    return f"got {x}"


def _responses() -> dict[str, Any]:
    answered = Agent(ScriptedModel(["hello"])).run("hi")
    model = ScriptedModel([[ToolCallPart("c1", "_submit", '{"x": 1}')]])
    stopped = Agent(model, tools=[_submit], stop_when=[tool_called("_submit")]).run("go")
    assert stopped.finish_reason == "tool_called"
    return {"answered": answered, "tool_called": stopped}


@pytest.mark.parametrize("kind", ["answered", "tool_called"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_function_given_a_response_says_to_pass_its_state(name: str, kind: str) -> None:
    """Each function given a Response (answered, or stopped by tool_called) says to pass its .state."""
    response = _responses()[kind]
    with pytest.raises(UsageError) as caught:
        CALLS[name](response)
    message = str(caught.value)
    assert message.startswith(f"{name}(): the state must be a RunState, got Response ")
    assert message.endswith("(pass its .state)")


def test_stopping_result_reads_the_state_of_a_response_stopped_by_tool_called() -> None:
    """stopping_result(response.state) still gives the result of the call that stopped the run."""
    result = stopping_result(_responses()["tool_called"].state)
    assert result is not None
    assert result.content == "got 1"


@pytest.mark.parametrize("conditions", [[], [lambda state: True]])
def test_stop_reason_refuses_no_state_even_when_no_condition_fails_on_it(
    conditions: list[Any],
) -> None:
    """stop_reason(None, ...) raises UsageError with no condition, or one that holds for anything."""
    with pytest.raises(UsageError, match=r"^stop_reason\(\): the state must be a RunState"):
        stop_reason(None, conditions)  # type: ignore[arg-type]


def test_stop_reason_keeps_a_conditions_own_error_on_a_real_state() -> None:
    """A callable condition failing on a real state propagates its own error unchanged."""

    def broken(state: Any) -> bool:
        raise AttributeError("the condition's own bug")

    with pytest.raises(AttributeError, match="the condition's own bug"):
        stop_reason(start(), [broken])


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr boom")


class _BadStateProperty:
    @property
    def state(self) -> object:
        raise RuntimeError("property boom")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_value_whose_repr_fails_is_still_named(name: str) -> None:
    """A value whose repr raises gives the UsageError, naming its type, not the repr's error."""
    with pytest.raises(UsageError, match=r"got _BadRepr \(a _BadRepr whose repr fails\)$"):
        CALLS[name](_BadRepr())


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_value_whose_state_property_fails_is_still_named(name: str) -> None:
    """A value whose .state raises gives the UsageError with no hint, not the property's error."""
    with pytest.raises(UsageError, match=r"got _BadStateProperty <") as caught:
        CALLS[name](_BadStateProperty())
    assert "pass its .state" not in str(caught.value)


def _waiting_agent() -> Agent:
    """An agent whose run waits for the approval of call p1."""

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish.

        Args:
            text: What to publish.
        """
        return "published"

    def model(request: ModelRequest) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return ScriptedModel.call("publish", {"text": "x"}, id="p1")

    return Agent(FunctionModel(model), name="pub", tools=[publish])


def _resume_calls(spec: Agent | Workflow, value: Any) -> dict[str, Callable[[], object]]:
    answers: dict[str, Any] = {"approvals": {"p1": True}}
    return {
        "resume": lambda: spec.resume(value, **answers),
        "aresume": lambda: asyncio.run(spec.aresume(value, **answers)),
        "resume_stream": lambda: list(spec.resume_stream(value, **answers)),
    }


@pytest.mark.parametrize("kind", ["Agent", "Sequence"])
@pytest.mark.parametrize("method", ["resume", "aresume", "resume_stream"])
@pytest.mark.parametrize("given", ["response", "json", "none"])
def test_resuming_something_that_is_no_state_is_a_usage_error(
    kind: str, method: str, given: str
) -> None:
    """An agent's or workflow's resume methods given a Response, its JSON or None name the
    method and what to pass; it was a bare AttributeError."""
    agent = _waiting_agent()
    spec: Agent | Workflow = agent if kind == "Agent" else Sequence(agent, name="flow")
    response = spec.run("x")
    value = {"response": response, "json": response.state.to_json(), "none": None}[given]
    hint = {
        "response": r" \(pass its \.state\)$",
        "json": r" \(load JSON text with RunState\.from_json\)$",
        "none": "$",
    }[given]
    with pytest.raises(
        UsageError, match=rf"^{kind}\.{method}\(\): the state must be a RunState.*{hint}"
    ):
        _resume_calls(spec, value)[method]()
    assert spec.resume(response.state, approvals={"p1": True}).text == "done"


@pytest.mark.parametrize("function", ["resume", "aresume"])
def test_the_resume_function_given_a_response_is_a_usage_error(function: str) -> None:
    """toolfold.resume/aresume given a Response say to pass its .state (not AttributeError)."""
    response = Agent(ScriptedModel(["hello"])).run("hi")
    calls: dict[str, Callable[[], object]] = {
        "resume": lambda: toolfold.resume(response, model=ScriptedModel(["again"])),  # type: ignore[arg-type]
        "aresume": lambda: asyncio.run(toolfold.aresume(response, model=ScriptedModel(["x"]))),  # type: ignore[arg-type]
    }
    with pytest.raises(UsageError, match=rf"^{function}\(\): the state .*\(pass its \.state\)$"):
        calls[function]()
