"""A cancelled run ends cancelled even when the tool or model call it awaits swallows the cancel.

A tool (or a model's request) that catches the `CancelledError` and returns
(a "graceful" shutdown) or raises an error of its own used to hand that back
to the run as if nothing happened: the cancelled run went on and made another
(billed) model call. Now it ends with the `CancelledError` carrying its
state, a tool's finished result kept in it so that resuming does not run it
again.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from toolfold import Agent, ModelRequest, RunError, RunState, state_of, tool
from toolfold.runtime.core._stream import StreamEvent
from toolfold.testing import FunctionModel

call = FunctionModel.call


def _results(request: ModelRequest) -> list[str]:
    return [r.content for m in request.messages for r in m.tool_results]


async def _cancelled_once(reached: asyncio.Event, work: Any) -> RunState:
    """Run ``work``, cancel it once ``reached`` is set; the state its CancelledError carries."""
    task = asyncio.ensure_future(work)
    await reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as caught:
        await task
    state = state_of(caught.value)
    assert isinstance(state, RunState), f"no state on {caught.value!r}"
    return state


@pytest.mark.parametrize("handling", ["returns", "raises"])
def test_a_lone_tool_that_handles_the_cancel_does_not_keep_the_run_going(handling: str) -> None:
    """The run ends cancelled with the tool's result kept; no further model call is made, and
    resuming gives the model that result without running the tool again."""
    reached = asyncio.Event()
    ran: list[str] = []
    asked: list[list[str]] = []

    @tool
    async def stubborn() -> str:
        """Waits; on cancel returns what it has, or fails."""
        ran.append("stubborn")
        try:
            reached.set()
            await asyncio.Event().wait()  # never set: only the cancel ends it
        except asyncio.CancelledError:
            if handling == "raises":
                raise ValueError("stopped early") from None
            return "partial"
        return "full"

    def reply(request: ModelRequest) -> Any:
        asked.append(_results(request))
        return call("stubborn", {}) if len(asked) == 1 else "answer"

    agent = Agent(FunctionModel(reply), tools=[stubborn])

    async def main() -> None:
        state = await _cancelled_once(reached, agent.arun("go"))
        assert len(asked) == 1  # no model call after the cancel
        expected = "partial" if handling == "returns" else "Error: ValueError: stopped early"
        # The step's one call ended: its result is committed, the model is next.
        assert state.phase == "awaiting_model"
        assert [r.content for r in state.messages[-1].tool_results] == [expected]
        response = await agent.aresume(RunState.from_json(state.to_json()))
        assert response.text == "answer"
        assert asked[-1] == [expected]
        assert ran == ["stubborn"]  # not run again on resume

    asyncio.run(main())


@pytest.mark.parametrize("handling", ["returns", "raises"])
def test_a_model_call_that_handles_the_cancel_does_not_keep_the_run_going(handling: str) -> None:
    """The run ends cancelled before the model's answer is acted on (no tool runs), from
    the state before the call; resuming asks the model again. Python 3.10 keeps no trace
    of the swallowed cancel (no `Task.cancelling`): the run goes on there, as documented."""
    reached = asyncio.Event()
    ran: list[str] = []
    asked = [0]

    @tool
    def work() -> str:
        """Does the work."""
        ran.append("work")
        return "done"

    async def reply(request: ModelRequest) -> Any:
        asked[0] += 1
        if asked[0] == 1:
            try:
                reached.set()
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                if handling == "raises":
                    raise RuntimeError("connection dropped") from None
            return call("work", {})
        return call("work", {}) if not _results(request) else "answer"

    agent = Agent(FunctionModel(reply), tools=[work])

    async def main() -> None:
        if sys.version_info < (3, 11):
            task = asyncio.ensure_future(agent.arun("go"))
            await reached.wait()
            task.cancel()
            if handling == "returns":
                assert (await task).text == "answer"
            else:
                with pytest.raises(RunError, match="connection dropped"):
                    await task
            return
        state = await _cancelled_once(reached, agent.arun("go"))
        assert (asked[0], ran) == (1, [])
        assert state.phase == "awaiting_model"
        response = await agent.aresume(state)
        assert response.text == "answer"
        assert (asked[0], ran) == (3, ["work"])

    asyncio.run(main())


class _SwallowingStream(FunctionModel):
    """Streams its answers; the first stops after its first piece until cancelled, then
    ends as if the reply were whole."""

    def __init__(self, reached: asyncio.Event, answer: Callable[[ModelRequest], Any]) -> None:
        self.reached = reached
        self.streams = 0
        super().__init__(answer)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.streams += 1
        first = self.streams == 1
        async for event in super().stream(request):
            yield event
            if first:
                first = False
                try:
                    self.reached.set()
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    return


def test_a_model_stream_that_handles_the_cancel_does_not_keep_the_stream_going() -> None:
    """An async stream whose model's stream swallows the cancel and ends as if whole ends
    cancelled, from the state before the call: no tool runs, no further model call (on
    Python 3.11+; 3.10 keeps no trace of the swallowed cancel, and the run goes on there
    with the reply as it was, as documented)."""
    reached = asyncio.Event()
    ran: list[str] = []

    @tool
    def work() -> str:
        """Does the work."""
        ran.append("work")
        return "done"

    def answer(request: ModelRequest) -> Any:
        return call("work", {}) if not _results(request) else "answer"

    model = _SwallowingStream(reached, answer)
    agent = Agent(model, tools=[work])

    async def consume() -> None:
        async for _ in agent.stream("go"):
            pass

    async def main() -> None:
        if sys.version_info < (3, 11):
            task = asyncio.ensure_future(consume())
            await reached.wait()
            task.cancel()
            await task  # not cancelled: the cut reply has no call, and the run ends
            assert (model.streams, ran) == (1, [])
            return
        state = await _cancelled_once(reached, consume())
        assert (model.streams, ran) == (1, [])
        assert state.phase == "awaiting_model"

    asyncio.run(main())


@pytest.mark.parametrize("calls", [1, 2], ids=["lone", "two"])
def test_a_cancel_swallowed_anywhere_in_a_round_stops_the_run_before_its_next_model_call(
    calls: int,
) -> None:
    """A sync tool run on the loop (blocking=False) returning a coroutine that swallows the
    cancel: the run ends cancelled before it calls the model again, what the coroutine
    returned kept (on Python 3.10 too: there the run cancels the coroutine's task and waits
    for it, as for an async tool; it used to go on there)."""
    reached = asyncio.Event()
    asked = [0]

    waiting: list[str] = []

    async def partial() -> str:
        try:
            waiting.append("partial")
            if len(waiting) == calls:  # every call waits: cancel now
                reached.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return "partial"
        return "full"

    @tool(blocking=False)
    def later() -> Any:
        """Hands back a coroutine for the run to await."""
        return partial()

    def reply(request: ModelRequest) -> Any:
        asked[0] += 1
        return [call("later", {})] * calls if asked[0] == 1 else "answer"

    agent = Agent(FunctionModel(reply), tools=[later])

    async def main() -> None:
        state = await _cancelled_once(reached, agent.arun("go"))
        assert asked[0] == 1  # no model call after the cancel
        assert state.phase == "awaiting_model"
        assert [r.content for r in state.messages[-1].tool_results] == ["partial"] * calls

    asyncio.run(main())
