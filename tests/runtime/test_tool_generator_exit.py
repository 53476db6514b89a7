"""A tool raising GeneratorExit ends the run as SystemExit does: the exception carries the state."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import weakref
from typing import Any

import pytest
from garbage import still_alive

import toolfold
from toolfold.runtime.core._state import RunState
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@toolfold.tool
def leaves() -> str:
    """Raises GeneratorExit."""
    raise GeneratorExit


@toolfold.tool
async def aleaves() -> str:
    """Raises GeneratorExit, async."""
    raise GeneratorExit


async def _leave() -> str:
    await asyncio.sleep(0)  # (raised once it had waited: from a task, not as it is called)
    raise GeneratorExit


@toolfold.tool
def handsleave() -> Any:
    """Returns a coroutine that raises GeneratorExit, for the run to await."""
    return _leave()


@toolfold.tool
def fine() -> str:
    """Returns."""
    return "fine"


@pytest.mark.parametrize(
    "calls", [["leaves"], ["leaves", "fine"], ["aleaves", "fine"], ["handsleave", "fine"]]
)
def test_a_blocking_run_hands_the_tools_generator_exit_its_state(calls: list[str]) -> None:
    """run(): the GeneratorExit a tool raised carries the run's state, resumable."""
    agent = toolfold.Agent(
        ScriptedModel([[call(name, {}) for name in calls], "done"]),
        tools=[leaves, aleaves, handsleave, fine],
    )
    with pytest.raises(GeneratorExit) as caught:
        agent.run("go")
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.phase == "running_tools"


@pytest.mark.parametrize(
    "calls",
    [["leaves"], ["aleaves"], ["leaves", "fine"], ["aleaves", "fine"], ["handsleave", "fine"]],
    ids="+".join,
)
def test_an_async_run_hands_the_tools_generator_exit_its_state(calls: list[str]) -> None:
    """arun(): the GeneratorExit a tool raised carries the run's state."""
    agent = toolfold.Agent(
        ScriptedModel([[call(name, {}) for name in calls], "done"]),
        tools=[leaves, aleaves, handsleave, fine],
    )
    with pytest.raises(GeneratorExit) as caught:
        asyncio.run(agent.arun("go"))
    assert toolfold.state_of(caught.value) is not None


def test_an_async_run_keeps_no_record_of_its_tools_generator_exit() -> None:
    """arun(): once the run ended, its task keeps no record of the tool's GeneratorExit."""
    from toolfold.runtime.drive import _executor

    agent = toolfold.Agent(ScriptedModel([[call("aleaves", {})], "done"]), tools=[aleaves])

    async def main() -> bool:
        with pytest.raises(GeneratorExit):
            await agent.arun("go")
        return asyncio.current_task() in _executor._THROWN_EXITS

    assert asyncio.run(main()) is False


def test_a_later_runs_generator_exit_leaves_an_earlier_runs_exception_alone() -> None:
    """A second run in the same task, ended by its model's GeneratorExit, does not restate the first's."""
    from toolfold.testing import FunctionModel

    async def leave(request: object) -> object:
        raise GeneratorExit

    first = toolfold.Agent(ScriptedModel([[call("aleaves", {})], "done"]), tools=[aleaves])
    second = toolfold.Agent(FunctionModel(leave))

    async def main() -> tuple[GeneratorExit, RunState | None, GeneratorExit]:
        with pytest.raises(GeneratorExit) as one:
            await first.arun("run one")
        state = toolfold.state_of(one.value)
        with pytest.raises(GeneratorExit) as two:
            await second.arun("run two")
        return one.value, state, two.value

    one, state, two = asyncio.run(main())
    assert state is not None
    assert toolfold.state_of(one) is state
    later = toolfold.state_of(two)
    assert later is not None
    assert later.run_id != state.run_id


@pytest.mark.parametrize("calls", [["taskleaves", "fine"], ["fine", "taskleaves"]])
def test_a_run_ended_by_one_of_several_calls_generator_exit_keeps_none_of_its_tasks(
    calls: list[str],
) -> None:
    """A round of several calls ended by one's GeneratorExit leaves nothing holding that call's task."""
    tasks: list[weakref.ref[asyncio.Task[Any]]] = []

    @toolfold.tool
    async def taskleaves() -> str:
        """Notes its task, then raises GeneratorExit."""
        task = asyncio.current_task()
        assert task is not None
        tasks.append(weakref.ref(task))
        raise GeneratorExit

    agent = toolfold.Agent(
        ScriptedModel([[call(name, {}) for name in calls], "done"]), tools=[taskleaves, fine]
    )

    async def main() -> None:
        with pytest.raises(GeneratorExit):
            await agent.arun("go")

    asyncio.run(main())
    gc.collect()
    assert len(tasks) == 1
    assert tasks[0]() is None


def test_a_task_running_runs_ended_by_generator_exit_keeps_no_runs_context() -> None:
    """A long-lived task whose runs each end by a tool's GeneratorExit keeps none of their contexts."""

    class Request:
        """What a server keeps in a context variable for one request."""

    current: contextvars.ContextVar[Request] = contextvars.ContextVar("current")
    requests: list[weakref.ref[Request]] = []

    @toolfold.tool
    def leaves() -> str:
        """Raises GeneratorExit."""
        raise GeneratorExit

    async def worker() -> None:
        for _ in range(20):
            request = Request()
            requests.append(weakref.ref(request))
            token = current.set(request)
            agent = toolfold.Agent(ScriptedModel([[call("leaves", {})], "done"]), tools=[leaves])
            with pytest.raises(GeneratorExit):
                await agent.arun("go")
            current.reset(token)
            del request
        assert still_alive(requests) == []  # (waited for: other threads' hold)

    asyncio.run(worker())


@pytest.mark.parametrize(
    "calls",
    [
        ["leaves"],
        ["aleaves"],
        ["aleaves", "fine"],
        ["fine", "leaves"],
        ["handsleave"],
        ["handsleave", "fine"],
        ["handsleave", "aleaves"],
    ],
    ids="+".join,
)
def test_an_async_stream_ended_by_a_tools_generator_exit_closes_cleanly(
    calls: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """An async stream whose tool raised GeneratorExit raises it with the run's state, and
    leaves no generator of its own half closed: asyncio.run ends without "async generator
    ignored GeneratorExit" at its shutdown."""
    agent = toolfold.Agent(
        ScriptedModel([[call(name, {}) for name in calls], "done"]),
        tools=[leaves, aleaves, handsleave, fine],
    )

    async def main() -> RunState | None:
        with pytest.raises(GeneratorExit) as caught:
            async for _ in agent.stream("go"):
                pass
        return toolfold.state_of(caught.value)

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        state = asyncio.run(main())
    assert not caplog.records
    assert state is not None
    assert state.phase == "running_tools"


@pytest.mark.parametrize(
    "calls",
    [
        ["leaves"],
        ["aleaves"],
        ["fine", "leaves"],
        ["handsleave"],
        ["handsleave", "fine"],
        ["handsleave", "inner"],
    ],
    ids="+".join,
)
def test_a_blocking_stream_hands_the_tools_generator_exit_its_state(calls: list[str]) -> None:
    """A blocking stream: the GeneratorExit a tool raised carries the run's state (no caller
    stopped iterating), what a sync tool returned to await raising it too (beside another
    sync call, or beside a sub-run, whose round runs on an event loop)."""
    inner = toolfold.Agent(ScriptedModel(["inner done"]), name="inner")
    agent = toolfold.Agent(
        ScriptedModel(
            [[call(name, {"input": "x"} if name == "inner" else {}) for name in calls], "done"]
        ),
        tools=[leaves, aleaves, handsleave, fine, inner.as_tool()],
    )
    with pytest.raises(GeneratorExit) as caught:
        for _ in agent.stream("go"):
            pass
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.phase == "running_tools"
