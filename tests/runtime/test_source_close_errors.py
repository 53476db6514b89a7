"""A run's error wins on the way out: a failing source close is attached to it; a failed handoff keeps the state."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from toolfold import Agent, RunError, Sequence, SubRunEvent, Tool, tool
from toolfold.runtime.drive._open import aopened, opened
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


class BadClose:
    """A tool source whose close raises (after releasing its holder, as an MCP server would)."""

    def __init__(self, name: str = "flaky-server", fails: bool = True) -> None:
        self.name = name
        self.fails = fails
        self.holders = 0

    def open(self) -> None:
        self.holders += 1

    def close(self) -> None:
        self.holders -= 1
        if self.fails:
            raise OSError(f"{self.name} would not close")

    def tools(self) -> list[Tool[..., Any]]:
        @tool
        def ledger() -> str:
            """Read the ledger."""
            return "balanced"

        return [ledger]


def model_down(request: Any) -> Any:
    raise ConnectionError("the model is down")


def assert_noted(error: BaseException, source: BadClose) -> None:
    """``error`` carries the close error of ``source`` as a note and in ``close_errors``."""
    assert [str(e) for e in error.close_errors] == [  # type: ignore[attr-defined]
        f"{source.name} would not close"
    ]
    assert error.__notes__ == [  # type: ignore[attr-defined]
        f"closing tool source {source.name!r} failed as well: "
        f"OSError: {source.name} would not close"
    ]
    assert source.holders == 0


def as_raised(cancelled: BaseException) -> BaseException:
    """The CancelledError the run raised, from the one its awaiting caller caught.

    On Python 3.10 asyncio hands the caller of a cancelled task a new
    CancelledError whose ``__context__`` is the task's own; 3.11+ the very one.
    """
    if sys.version_info < (3, 11):
        assert cancelled.__context__ is not None
        return cancelled.__context__
    return cancelled


def failing(source: BadClose) -> Agent:
    return Agent(FunctionModel(model_down), tools=[source])


def test_a_failed_run_raises_its_error_with_the_close_error_attached() -> None:
    """run: the RunError (with its state) is raised, not the source's close error."""
    source = BadClose()
    with pytest.raises(RunError, match="the model is down") as caught:
        failing(source).run("hi")
    assert caught.value.state is not None
    assert_noted(caught.value, source)


def test_a_failed_async_run_raises_its_error_with_the_close_error_attached() -> None:
    """arun: the RunError (with its state) is raised, not the source's close error."""
    source = BadClose()
    with pytest.raises(RunError, match="the model is down") as caught:
        asyncio.run(failing(source).arun("hi"))
    assert caught.value.state is not None
    assert_noted(caught.value, source)


def test_a_failed_stream_raises_its_error_with_the_close_error_attached() -> None:
    """stream, iterated with for: the RunError is raised, not the close error."""
    source = BadClose()
    with pytest.raises(RunError, match="the model is down") as caught:
        list(failing(source).stream("hi"))
    assert caught.value.state is not None
    assert_noted(caught.value, source)


def test_a_failed_async_stream_raises_its_error_with_the_close_error_attached() -> None:
    """stream, iterated with async for: the RunError is raised, not the close error."""
    source = BadClose()

    async def main() -> None:
        async for _ in failing(source).stream("hi"):
            pass

    with pytest.raises(RunError, match="the model is down") as caught:
        asyncio.run(main())
    assert caught.value.state is not None
    assert_noted(caught.value, source)


def test_a_failed_resume_raises_its_error_with_the_close_error_attached() -> None:
    """resume and aresume of a failed run fail again with a RunError whose state resumes."""
    source = BadClose()
    agent = failing(source)
    with pytest.raises(RunError) as first:
        agent.run("hi")
    with pytest.raises(RunError, match="the model is down") as again:
        agent.resume(first.value.state)
    assert_noted(again.value, source)
    with pytest.raises(RunError, match="the model is down") as async_again:
        asyncio.run(agent.aresume(again.value.state))
    assert_noted(async_again.value, source)


def test_a_cancelled_run_stays_cancelled_when_a_close_fails() -> None:
    """Cancelling arun raises CancelledError, with the close error attached, not the close error."""
    source = BadClose()

    async def main() -> BaseException:
        started = asyncio.Event()
        never = asyncio.Event()

        async def hang(request: Any) -> Any:
            started.set()
            await never.wait()

        task = asyncio.ensure_future(Agent(FunctionModel(hang), tools=[source]).arun("hi"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
        return caught.value

    assert_noted(as_raised(asyncio.run(main())), source)


def handing_to(source: BadClose) -> Agent:
    """An agent handing the run to one whose model fails and whose source's close fails."""
    pong = Agent(FunctionModel(model_down), name="pong", tools=[source])
    return Agent(FunctionModel(lambda r: call("transfer_to_pong")), name="ping", handoffs=[pong])


def test_a_failed_run_after_a_handoff_keeps_its_error_in_every_driver() -> None:
    """Sources a handoff opened: run, arun and both streams raise the RunError, close error attached."""

    async def streamed(agent: Agent) -> None:
        async for _ in agent.stream("go"):
            pass

    drives = {
        "run": lambda agent: agent.run("go"),
        "arun": lambda agent: asyncio.run(agent.arun("go")),
        "stream": lambda agent: list(agent.stream("go")),
        "async stream": lambda agent: asyncio.run(streamed(agent)),
    }
    for name, drive in drives.items():
        source = BadClose()
        with pytest.raises(RunError, match="the model is down") as caught:
            drive(handing_to(source))
        assert caught.value.state.agent == "pong", name
        assert_noted(caught.value, source)


def test_a_failed_workflow_step_fails_with_its_run_error_not_the_close_error() -> None:
    """A workflow step whose agent fails and whose source's close fails records the run's error."""
    source = BadClose()
    step = Agent(FunctionModel(model_down), name="step", tools=[source])
    with pytest.raises(RunError) as caught:
        Sequence(step).run("x")
    assert "the model is down" in str(caught.value.state.error)
    assert "would not close" not in str(caught.value.state.error)
    assert source.holders == 0


def test_a_run_that_ends_well_raises_the_close_error() -> None:
    """A run that did not fail raises its source's close error (never dropped), in every driver."""

    async def streamed(agent: Agent) -> None:
        async for _ in agent.stream("hi"):
            pass

    agent = Agent(FunctionModel(lambda r: "fine"), tools=[BadClose()])
    for drive in (
        lambda: agent.run("hi"),
        lambda: asyncio.run(agent.arun("hi")),
        lambda: list(agent.stream("hi")),
        lambda: asyncio.run(streamed(agent)),
    ):
        with pytest.raises(OSError, match="would not close"):
            drive()


def test_a_stream_closed_early_raises_the_close_error() -> None:
    """A caller that stops iterating has no error to attach to: closing the stream raises it."""
    source = BadClose()
    events = iter(Agent(FunctionModel(lambda r: "fine"), tools=[source]).stream("hi"))
    next(events)
    with pytest.raises(OSError, match="would not close"):
        events.close()  # type: ignore[attr-defined]
    assert source.holders == 0


def test_every_close_error_is_attached_in_order_and_the_first_error_wins() -> None:
    """Several failing closes: all noted on the block's error, latest-opened first; without one, the first raises."""
    first, second = BadClose("first"), BadClose("second")
    with pytest.raises(KeyError) as caught, opened([first, second]):
        raise KeyError("the run's")
    assert [str(e) for e in caught.value.close_errors] == [  # type: ignore[attr-defined]
        "second would not close",
        "first would not close",
    ]

    async def clean() -> None:
        async with aopened([BadClose("first"), BadClose("second")]):
            pass

    with pytest.raises(OSError, match="second would not close") as raised:
        asyncio.run(clean())
    assert [str(e) for e in raised.value.close_errors] == [  # type: ignore[attr-defined]
        "first would not close"
    ]


def test_a_handoff_whose_target_cannot_take_over_keeps_the_runs_state() -> None:
    """A target whose source lists a tool named like its own fails the run with a RunError holding its state."""

    @tool
    def ledger() -> str:
        """Read the ledger."""
        return "balanced"

    class Clashing(BadClose):
        def tools(self) -> list[Tool[..., Any]]:
            return [ledger]

    source = Clashing(fails=False)
    pong = Agent(FunctionModel(lambda r: "hi"), name="pong", tools=[ledger, source])
    ping = Agent(FunctionModel(lambda r: call("transfer_to_pong")), name="ping", handoffs=[pong])
    with pytest.raises(
        RunError, match="could not take the run over: ToolDefinitionError"
    ) as caught:
        ping.run("go")
    assert [c.call.name for c in caught.value.state.calls] == ["transfer_to_pong"]
    assert caught.value.state.agent == "ping"
    assert source.holders == 0


def test_an_async_stream_closed_early_stops_its_calls_before_closing_a_handoffs_sources() -> None:
    """Stopping an async stream mid-step cancels the step's sub-run while the sources it may use are open."""
    source = BadClose(fails=False)
    seen: list[int] = []

    async def hang(request: Any) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(source.holders)
            raise

    helper = Agent(FunctionModel(hang), name="helper")
    pong = Agent(
        FunctionModel(lambda r: call("helper", {"input": "x"})),
        name="pong",
        tools=[helper.as_tool(), source],
    )
    ping = Agent(FunctionModel(lambda r: call("transfer_to_pong")), name="ping", handoffs=[pong])

    async def main() -> None:
        events = ping.stream("go").__aiter__()
        async for event in events:
            if isinstance(event, SubRunEvent):
                break
        await events.aclose()  # type: ignore[attr-defined]

    asyncio.run(main())
    assert (seen, source.holders) == ([1], 0)
