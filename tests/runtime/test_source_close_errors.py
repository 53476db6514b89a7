"""A run's error wins on the way out: a failing source close is attached to it; a failed handoff keeps the state.

A run that ended raises `SourceCloseError` carrying its response instead of losing it.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import pytest

from toolfold import (
    Agent,
    RunError,
    RunState,
    Sequence,
    SourceCloseError,
    SubRunEvent,
    Tool,
    tool,
)
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


def _drives(prompt: str = "hi") -> dict[str, Any]:
    """Each way to run an agent to its end: run, arun, and a stream iterated both ways."""

    async def streamed(agent: Agent) -> None:
        async for _ in agent.stream(prompt):
            pass

    return {
        "run": lambda agent: agent.run(prompt),
        "arun": lambda agent: asyncio.run(agent.arun(prompt)),
        "stream": lambda agent: list(agent.stream(prompt)),
        "async stream": lambda agent: asyncio.run(streamed(agent)),
    }


def assert_close_failed(error: SourceCloseError, *sources: BadClose) -> None:
    """``error`` is caused by the first source's close error and lists every one."""
    assert isinstance(error.__cause__, OSError)
    assert [str(e) for e in error.close_errors] == [f"{s.name} would not close" for s in sources]
    assert str(error.__cause__) == f"{sources[0].name} would not close"
    assert error.state is error.response.state
    assert all(s.holders == 0 for s in sources)


def test_a_run_that_ends_well_raises_the_close_error_with_its_response() -> None:
    """A run that did not fail raises SourceCloseError carrying its response (never dropped), in every driver."""
    for name, drive in _drives().items():
        source = BadClose()
        with pytest.raises(SourceCloseError, match="would not close") as caught:
            drive(Agent(FunctionModel(lambda r: "fine"), tools=[source]))
        assert caught.value.response.text == "fine", name
        assert_close_failed(caught.value, source)


def test_a_run_suspended_for_approval_keeps_its_state_when_a_close_fails() -> None:
    """A run waiting for an approval raises SourceCloseError whose state resumes (run, resume, aresume)."""

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        return f"paid {amount}"

    source = BadClose()
    agent = Agent(
        ScriptedModel([call("pay", {"amount": 3}), "Paid.", call("pay", {"amount": 4}), "Again."]),
        tools=[pay, source],
    )
    with pytest.raises(SourceCloseError) as caught:
        agent.run("pay 3")
    assert caught.value.response.finish_reason == "approval_required"
    assert_close_failed(caught.value, source)
    state = RunState.from_json(caught.value.state.to_json())
    with pytest.raises(SourceCloseError) as resumed:
        agent.resume(state, approvals={state.pending_approvals[0].id: True})
    assert resumed.value.response.text == "Paid."
    with pytest.raises(SourceCloseError) as asked:
        asyncio.run(agent.aresume(resumed.value.state, message="pay 4"))
    assert asked.value.response.finish_reason == "approval_required"
    with pytest.raises(SourceCloseError) as streamed:
        list(
            agent.resume_stream(
                asked.value.state, approvals={asked.value.state.pending_approvals[0].id: True}
            )
        )
    assert streamed.value.response.text == "Again."
    assert_close_failed(streamed.value, source)


def test_a_handoff_targets_failing_close_keeps_the_response_in_every_driver() -> None:
    """Sources a handoff opened: a run that ended well raises SourceCloseError with the target's answer."""
    for name, drive in _drives("go").items():
        source = BadClose()
        pong = Agent(FunctionModel(lambda r: "pong here"), name="pong", tools=[source])
        ping = Agent(
            FunctionModel(lambda r: call("transfer_to_pong")), name="ping", handoffs=[pong]
        )
        with pytest.raises(SourceCloseError) as caught:
            drive(ping)
        assert (caught.value.response.agent, caught.value.response.text) == ("pong", "pong here"), (
            name
        )
        assert_close_failed(caught.value, source)


def test_the_agents_and_a_handoffs_failing_closes_are_all_reported() -> None:
    """The first agent's source and a handoff target's both fail to close: one SourceCloseError lists both."""
    for name, drive in _drives("go").items():
        own, theirs = BadClose("own"), BadClose("theirs")
        pong = Agent(FunctionModel(lambda r: "pong here"), name="pong", tools=[theirs])
        ping = Agent(
            FunctionModel(lambda r: call("transfer_to_pong")),
            name="ping",
            handoffs=[pong],
            tools=[own],
        )
        with pytest.raises(SourceCloseError) as caught:
            drive(ping)
        assert caught.value.response.text == "pong here", name
        assert_close_failed(caught.value, theirs, own)


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


def _answering(seen: list[str], answer: str) -> Any:
    """A model function noting the last message it is sent, answering ``answer``."""

    def reply(request: Any) -> str:
        seen.append(request.messages[-1].text)
        return answer

    return reply


def test_a_workflow_keeps_a_steps_answer_and_raises_its_close_error_when_it_ends() -> None:
    """A step whose agent ends well but whose source fails to close is done: the workflow goes on, then raises SourceCloseError with its response."""

    async def streamed(flow: Sequence) -> None:
        async for _ in flow.stream("x"):
            pass

    drives = {
        "run": lambda flow: flow.run("x"),
        "arun": lambda flow: asyncio.run(flow.arun("x")),
        "stream": lambda flow: list(flow.stream("x")),
        "async stream": lambda flow: asyncio.run(streamed(flow)),
        "watched": lambda flow: flow.run("x", on_event=lambda event: None),  # the loop, not conduct
    }
    for name, drive in drives.items():
        source = BadClose()
        first = Agent(FunctionModel(lambda r: "first done"), name="first", tools=[source])
        seen: list[str] = []
        second = Agent(FunctionModel(_answering(seen, "second done")), name="second")
        with pytest.raises(SourceCloseError) as caught:
            drive(Sequence(first, second))
        assert seen == ["first done"], name
        response = caught.value.response
        assert (response.text, response.outputs["first"]) == ("second done", "first done"), name
        assert_close_failed(caught.value, source)


def test_a_workflow_suspended_after_a_failing_close_resumes_from_the_errors_state() -> None:
    """A workflow that waits for an approval after a step's close failed raises SourceCloseError whose state resumes."""

    @tool(requires_approval=True)
    def ship(item: str) -> str:
        """Ship an item.

        Args:
            item: What to ship.
        """
        return f"shipped {item}"

    source = BadClose()
    first = Agent(FunctionModel(lambda r: "lamp"), name="first", tools=[source])
    second = Agent(
        ScriptedModel([call("ship", {"item": "lamp"}), "Shipped."]), name="second", tools=[ship]
    )
    flow = Sequence(first, second)
    with pytest.raises(SourceCloseError) as caught:
        flow.run("x")
    assert caught.value.response.finish_reason == "approval_required"
    state = RunState.from_json(caught.value.state.to_json())
    done = flow.resume(state, approvals={state.pending_approvals[0].id: True})
    assert done.text == "Shipped."
    assert source.holders == 0


def test_a_workflow_failing_after_a_failing_close_carries_both() -> None:
    """A workflow whose later step fails raises its RunError with the earlier step's close error attached."""
    source = BadClose()
    first = Agent(FunctionModel(lambda r: "fine"), name="first", tools=[source])
    second = Agent(FunctionModel(model_down), name="second")
    with pytest.raises(RunError, match="the model is down") as caught:
        Sequence(first, second).run("x")
    assert [str(e) for e in caught.value.close_errors] == ["flaky-server would not close"]  # type: ignore[attr-defined]
    assert caught.value.__notes__ == [  # type: ignore[attr-defined]
        "closing a tool source of a step of Sequence 'sequence' failed as well: "
        "OSError: flaky-server would not close"
    ]


def test_an_agent_used_as_a_tool_keeps_its_answer_when_its_source_fails_to_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The sub-run ended: the lead's model reads its answer; the close error is a warning."""
    for name, drive in _drives().items():
        source = BadClose()
        helper = Agent(FunctionModel(lambda r: "helper ok"), name="helper", tools=[source])

        def lead_reply(request: Any) -> Any:
            last = request.messages[-1]
            if last.role == "tool":
                return "lead got: " + last.tool_results[0].content
            return FunctionModel.call("helper", {"input": "go"})

        lead = Agent(FunctionModel(lead_reply), name="lead", tools=[helper.as_tool()])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="toolfold.sources"):
            drive(lead)
        (record,) = caplog.records
        assert "closing a tool source failed (its answer is kept)" in record.getMessage(), name
        assert "flaky-server would not close" in record.getMessage(), name
        assert source.holders == 0, name
    response = lead.run("hi")
    assert response.text == "lead got: helper ok"


def test_a_close_failure_logged_for_an_agent_tool_stays_on_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A source's close error (a server's text) with a newline and an escape sequence is
    logged escaped: one record, one line, no terminal sequence."""
    source = BadClose("srv\nCRITICAL forged \x1b[2K")
    helper = Agent(FunctionModel(lambda r: "helper ok"), name="helper", tools=[source])

    def lead_reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return FunctionModel.call("helper", {"input": "go"})

    lead = Agent(FunctionModel(lead_reply), name="lead", tools=[helper.as_tool()])
    with caplog.at_level(logging.WARNING, logger="toolfold.sources"):
        lead.run("hi")
    (record,) = caplog.records
    assert record.getMessage().endswith(r"OSError: srv\x0aCRITICAL forged \x1b[2K would not close")
