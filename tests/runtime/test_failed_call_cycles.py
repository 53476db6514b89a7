"""A run whose tool raised is freed by reference counting alone, as a successful run is."""

from __future__ import annotations

import asyncio
import gc
import traceback
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from toolfold import Agent, RunContext, RunState, ToolExecutionError, tool
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


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("how", [_run, _stream, _arun])
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


class _Session:
    """Stands for what a run's deps hold (a session, a client)."""


def failing_with_deps(ctx: RunContext[_Session], q: str) -> str:
    """Fail.

    Args:
        q: The query.
    """
    raise ValueError("no such record")


def _two_calls_agent(**options: Any) -> Agent[Any, Any]:
    def reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done: " + request.messages[-1].parts[0].content
        return [FunctionModel.call("failing_with_deps", {"q": q}) for q in "ab"]

    return Agent(
        FunctionModel(reply, keep_requests=False), tools=[tool(failing_with_deps, **options)]
    )


@pytest.mark.usefixtures("collector_off")
@pytest.mark.parametrize("timeout", [None, 60.0])
@pytest.mark.parametrize("how", ["run", "stream", "arun", "run_in_a_loop"])
def test_a_step_of_two_failing_calls_leaves_no_cycle_holding_the_deps(
    how: str, timeout: float | None
) -> None:
    """With the collector off, a step of two failing calls (worker threads) leaves its deps and state in no cycle."""
    agent = _two_calls_agent(timeout=timeout)
    session = _Session()
    if how == "run":
        response = agent.run("q", deps=session)
    elif how == "stream":
        stream = agent.stream("q", deps=session)
        for event in stream:
            del event  # (the last, the run's end, holds its response)
        response = stream.response
        del stream
    elif how == "arun":
        response = asyncio.run(agent.arun("q", deps=session))
    else:

        async def blocking_in_a_loop(deps: _Session) -> Any:
            return agent.run("q", deps=deps)

        response = asyncio.run(blocking_in_a_loop(session))
    del session
    assert response.text == "done: Error: ValueError: no such record"
    state = weakref.ref(response.state)
    del response
    assert state() is None
    # A worker thread may not have let go of its call yet (it reports the end, then
    # drops it): what it holds is no cycle, and no cycle is what is checked.
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        in_cycles = [o for o in gc.garbage if isinstance(o, _Session)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert in_cycles == []


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
