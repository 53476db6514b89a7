"""An async run's tool raising KeyboardInterrupt or SystemExit: the exception carries the state.

asyncio raises either out of the event loop at once when a task raises it; a
call's task returns it instead, and the run raises it with its state, in the
task that awaits the run (as for a sync tool's, raised on a worker thread).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
from typing import Any

import pytest

import toolfold
from toolfold.runtime.core._state import RunState
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


class _Tools:
    """``leaves`` (async) and ``sleaves`` (sync) raise ``exc`` at their first call and return
    after; ``fine`` returns. Each counts its calls."""

    def __init__(self, exc: type[BaseException]) -> None:
        self.ran = {"leaves": 0, "sleaves": 0, "fine": 0}

        @toolfold.tool
        async def leaves() -> str:
            """Raises at its first call, async."""
            self.ran["leaves"] += 1
            if self.ran["leaves"] == 1:
                raise exc()
            return "left"

        @toolfold.tool
        def sleaves() -> str:
            """Raises at its first call."""
            self.ran["sleaves"] += 1
            if self.ran["sleaves"] == 1:
                raise exc()
            return "left"

        @toolfold.tool
        async def fine() -> str:
            """Returns."""
            self.ran["fine"] += 1
            return "fine"

        self.all = [leaves, sleaves, fine]


async def _drive(agent: toolfold.Agent[Any, Any], how: str) -> Any:
    if how == "arun":
        return await agent.arun("go")
    async for _ in agent.stream("go"):
        pass
    return None


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("how", ["arun", "stream"])
@pytest.mark.parametrize(
    "calls", [["leaves"], ["leaves", "fine"], ["fine", "sleaves"]], ids="+".join
)
def test_an_async_tools_exit_carries_the_state_and_the_loop_goes_on(
    exc: type[BaseException], how: str, calls: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """arun() or an async stream raises a tool's KeyboardInterrupt or SystemExit in the task
    that awaits it, with the state of the round (the calls that had ended kept): on the same
    loop, resuming runs only the call that raised, and asyncio.run ends cleanly."""
    tools = _Tools(exc)
    agent = toolfold.Agent(
        ScriptedModel([[call(name, {}) for name in calls], "done"]), tools=tools.all
    )

    async def main() -> str:
        with pytest.raises(exc) as caught:
            await _drive(agent, how)
        state = toolfold.state_of(caught.value)
        assert state is not None
        assert state.phase == "running_tools"
        kept = {c.call.name for c in state.calls if c.result is not None}
        assert kept == ({"fine"} if "fine" in calls else set())
        resumed = await agent.aresume(RunState.from_json(state.to_json()))
        return resumed.text

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        text = asyncio.run(main())
    assert text == "done"
    assert tools.ran == {
        "leaves": 2 if "leaves" in calls else 0,
        "sleaves": 2 if "sleaves" in calls else 0,
        "fine": 1 if "fine" in calls else 0,
    }
    assert not caplog.records  # nothing left unretrieved or unhandled on the loop


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_a_blocking_false_tools_awaitable_exit_carries_the_state(
    exc: type[BaseException],
) -> None:
    """What a ``blocking=False`` sync tool returns to await, raising KeyboardInterrupt or
    SystemExit, ends arun() with the state too."""

    async def leave() -> str:
        raise exc()

    @toolfold.tool(blocking=False)
    def hands_over() -> Any:
        """Returns a coroutine to await."""
        return leave()

    agent = toolfold.Agent(ScriptedModel([call("hands_over", {}), "done"]), tools=[hands_over])
    with pytest.raises(exc) as caught:
        asyncio.run(agent.arun("go"))
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.phase == "running_tools"


def test_a_call_cancelled_before_its_task_began_is_closed_unrun() -> None:
    """A run cancelled once its async call's task was made, before that task began: the tool
    never runs, and its coroutine is closed (no "never awaited" warning, an error here)."""
    ran: list[str] = []

    @toolfold.tool
    async def never() -> str:
        """Notes that it ran."""
        ran.append("never")
        return "ran"

    def cancel_at_answer(event: object) -> None:
        if type(event).__name__ == "ModelResponded":  # the call's task is made next
            task = asyncio.current_task()
            assert task is not None
            task.cancel()  # delivered at the run's next wait: for the call's task

    agent = toolfold.Agent(ScriptedModel([call("never", {}), "done"]), tools=[never])

    async def main() -> RunState | None:
        with pytest.raises(asyncio.CancelledError) as caught:
            await agent.arun("go", on_event=cancel_at_answer)
        return toolfold.state_of(caught.value)

    state = asyncio.run(main())
    gc.collect()  # (an unclosed coroutine warns as it is collected)
    assert state is not None
    # (Python 3.10 awaits a lone async tool apart, see `_cancels`: its task begins first)
    if sys.version_info >= (3, 11):
        assert ran == []
        assert state.phase == "running_tools"
        assert state.calls[0].result is None  # no result for a call that never ran
    else:
        assert ran == ["never"]


def _cancel_at_answer(event: object) -> None:
    """Cancel the run's task as the model answered, before the calls are set up: as
    ``asyncio.run``'s Ctrl-C handler does, the cancel lands at the run's next wait."""
    if type(event).__name__ == "ModelResponded":
        task = asyncio.current_task()
        assert task is not None
        task.cancel()


@pytest.mark.parametrize("calls", [["pay"], ["spay"], ["pay", "spay"]], ids="+".join)
def test_a_call_cancelled_before_it_began_stays_to_run(calls: list[str]) -> None:
    """The run cancelled (Ctrl-C in ``asyncio.run``) as it sets a lone call up: the call's
    task or future is cancelled before the tool began, which is the run's cancellation,
    not the tool's own CancelledError. The call keeps no result; resuming runs it, and the
    model reads what it returned (it read "Error: CancelledError", the tool never run)."""
    ran: list[str] = []
    # A sync call a worker took before the cancel waits here: it cannot end (and be kept)
    # before the run is stopped; it then runs on in the background, as any does.
    gate = threading.Event()

    @toolfold.tool
    async def pay() -> str:
        """Pays, async."""
        ran.append("pay")
        return "paid"

    @toolfold.tool
    def spay() -> str:
        """Pays."""
        gate.wait()
        ran.append("spay")
        return "spaid"

    agent = toolfold.Agent(
        ScriptedModel([[call(name, {}) for name in calls], "done"]), tools=[pay, spay]
    )

    async def main() -> toolfold.Response[Any]:
        with pytest.raises(asyncio.CancelledError) as caught:
            await agent.arun("go", on_event=_cancel_at_answer)
        gate.set()
        state = toolfold.state_of(caught.value)
        assert state is not None
        # A call keeps a result only if its tool ran and returned: none keeps the run's
        # cancellation as its own error. (An async call beside another may have had its
        # first step before the cancel landed: on 3.13, or 3.10 that awaits a lone one
        # apart, see `_cancels`; the gated sync one cannot have returned.)
        kept = {c.call.name: c.result.content for c in state.calls if c.result is not None}
        assert kept == ({"pay": "paid"} if "pay" in ran else {})
        if len(calls) == 1 and sys.version_info >= (3, 11):
            assert kept == {}
            assert state.phase == "running_tools"
        return await agent.aresume(RunState.from_json(state.to_json()))

    resumed = asyncio.run(main())
    assert resumed.text == "done"
    read = [part.content for m in resumed.messages for part in m.tool_results]
    assert read == [{"pay": "paid", "spay": "spaid"}[name] for name in calls]
    assert ran.count("pay") == calls.count("pay")  # run once: before the cancel, or on resume


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("how", ["arun", "stream"])
def test_a_sub_runs_tools_exit_carries_the_state_with_the_sub_run_kept(
    exc: type[BaseException], how: str
) -> None:
    """An agent used as a tool whose own async tool raises KeyboardInterrupt or SystemExit:
    arun() or an async stream (whose round of sub-runs runs as a task) raises it with the
    state, the sub-run kept where it stopped."""
    tools = _Tools(exc)
    inner = toolfold.Agent(
        ScriptedModel([call("leaves", {}), "inner done"]), tools=tools.all, name="inner"
    )
    lead = toolfold.Agent(
        ScriptedModel([call("inner", {"input": "x"}), "done"]), tools=[inner.as_tool()]
    )
    with pytest.raises(exc) as caught:
        asyncio.run(_drive(lead, how))
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.phase == "running_tools"
    assert state.calls[0].child is not None
