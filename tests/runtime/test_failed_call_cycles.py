"""A run whose tool raised is freed by reference counting alone, as a successful run is."""

from __future__ import annotations

import asyncio
import gc
import traceback
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pydantic
import pytest

from toolfold import Agent, RunContext, RunState, ToolExecutionError, tool
from toolfold.runtime.core._effects import ToolInvocation
from toolfold.runtime.drive._executor import ToolJob, ToolOutcome, checked_arguments
from toolfold.testing import FunctionModel


def broken(q: str) -> str:
    """Fail.

    Args:
        q: The query.
    """
    raise ValueError("no such record")


async def abroken(q: str) -> str:
    """Fail.

    Args:
        q: The query.
    """
    raise ValueError("no such record")


def _agent(function: Callable[..., Any], **options: Any) -> Agent[Any, Any]:
    def reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done: " + request.messages[-1].parts[0].content
        return FunctionModel.call(function.__name__, {"q": "a"})

    return Agent(FunctionModel(reply, keep_requests=False), tools=[tool(function)], **options)


def _run(agent: Agent[Any, Any]) -> Any:
    return agent.run("q")


def _stream(agent: Agent[Any, Any]) -> Any:
    stream = agent.stream("q")
    for _ in stream:
        pass
    return stream.response


def _arun(agent: Agent[Any, Any]) -> Any:
    return asyncio.run(agent.arun("q"))


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# Only an async run: in a blocking run the tool's frames reach the driver's as their
# callers, a cycle the cyclic collector frees (not cut on 3.10, 3.11 or 3.13 alike).
@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("how", [_arun])
@pytest.mark.parametrize("function", [broken, abroken])
def test_the_state_of_a_run_whose_tool_raised_dies_when_dropped(
    how: Callable[[Agent[Any, Any]], Any], function: Callable[..., Any]
) -> None:
    """With the cyclic collector off, a failed call's run state is freed once its Response is dropped."""
    agent = _agent(function)
    response = how(agent)
    assert response.text == "done: Error: ValueError: no such record"  # what the model read
    state = weakref.ref(response.state)
    del response
    assert state() is None


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("function", [broken, abroken])
def test_the_state_of_a_raised_tool_error_dies_when_dropped(function: Callable[..., Any]) -> None:
    """With the collector off, on_tool_error="raise": the error's state is freed once the error is dropped."""
    agent = _agent(function, on_tool_error="raise")
    with pytest.raises(ToolExecutionError) as caught:
        agent.run("q")
    state: weakref.ref[RunState] = weakref.ref(caught.value.state)  # type: ignore[arg-type]
    error = weakref.ref(caught.value)
    del caught
    assert error() is None
    assert state() is None


@pytest.mark.parametrize("how", ["run", "arun"])
@pytest.mark.parametrize("function", [broken, abroken])
def test_a_raised_tool_error_still_shows_where_the_tool_raised(
    how: str, function: Callable[..., Any]
) -> None:
    """on_tool_error="raise": the cause is the tool's exception, its traceback ending in the tool."""
    agent = _agent(function, on_tool_error="raise")
    with pytest.raises(ToolExecutionError) as caught:
        _run(agent) if how == "run" else _arun(agent)
    cause = caught.value.__cause__
    assert isinstance(cause, ValueError)
    assert str(cause) == "no such record"
    assert traceback.extract_tb(cause.__traceback__)[-1].name == function.__name__


def unformattable(q: str) -> Any:
    """Return what cannot be given to the model.

    Args:
        q: The query.
    """
    return (c for c in q)


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("how", [_run, _stream, _arun])
@pytest.mark.parametrize(
    ("function", "arguments", "read"),
    [
        (broken, {"q": 5}, "done: Invalid arguments for tool 'broken'"),
        (unformattable, {"q": "ab"}, "done: Error: TypeError: tool 'unformattable' returned a"),
    ],
    ids=["invalid_arguments", "unformattable_result"],
)
def test_the_state_of_a_run_with_an_error_toolfold_raised_about_a_call_dies_when_dropped(
    how: Callable[[Agent[Any, Any]], Any],
    function: Callable[..., Any],
    arguments: dict[str, Any],
    read: str,
) -> None:
    """With the collector off, a run whose call had invalid arguments or an unformattable result is freed once dropped."""

    def reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done: " + request.messages[-1].parts[0].content
        return FunctionModel.call(function.__name__, arguments)

    agent = Agent(FunctionModel(reply, keep_requests=False), tools=[tool(function)])
    response = how(agent)
    assert response.text.startswith(read)
    state = weakref.ref(response.state)
    del response
    assert state() is None


def test_an_unformattable_result_raised_is_still_the_cause_of_the_tool_error() -> None:
    """on_tool_error="raise": the error about a result the model cannot be given is still the raised error's cause."""

    def reply(request: Any) -> Any:
        return FunctionModel.call("unformattable", {"q": "ab"})

    agent = Agent(FunctionModel(reply), tools=[tool(unformattable)], on_tool_error="raise")
    with pytest.raises(ToolExecutionError) as caught:
        agent.run("q")
    assert isinstance(caught.value.__cause__, TypeError)
    assert "returned a generator" in str(caught.value.__cause__)


class Search(pydantic.BaseModel):
    """Search.

    Args:
        q: The query.
    """

    q: str

    @pydantic.field_validator("q")
    @classmethod
    def _check(cls, value: str) -> str:
        return value.nosuch  # type: ignore[attr-defined, no-any-return]  # (a validator's bug)

    def __call__(self) -> str:
        return self.q


def test_invalid_arguments_keep_the_traceback_of_the_validator_error_they_came_from() -> None:
    """An invalid-arguments error kept on the outcome loses its own traceback, not its cause's (a user's validator)."""
    call = FunctionModel.call("Search", {"q": "a"})
    context = RunContext(run_id="r1", step=1, call_id=call.id, tool_name="Search")
    job = ToolJob(ToolInvocation(call, 0, 1, f"r1:1:{call.id}"), tool(Search), context)
    outcome = checked_arguments(job)
    assert isinstance(outcome, ToolOutcome)
    assert outcome.outcome == "invalid_arguments"
    error = outcome.exception
    assert error is not None
    assert error.__traceback__ is None
    cause = error.__cause__ or error.__context__
    while cause is not None and not isinstance(cause, AttributeError):
        cause = cause.__cause__ or cause.__context__
    assert cause is not None
    assert traceback.extract_tb(cause.__traceback__)[-1].name == "_check"
