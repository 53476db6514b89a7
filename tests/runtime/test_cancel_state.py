"""A cancelled run keeps what it did: the cancellation carries the state to resume from.

Cancelling `arun`, an async stream or a workflow mid-model-call or mid-tool
raises the `CancelledError` with ``.state``: the run where the interrupted
I/O began, with the results of the round's calls that had ended committed.
Resuming it reaches the answer and runs again only what had not ended.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import pytest

from toolfold import (
    Agent,
    ModelRequest,
    Parallel,
    RunError,
    RunState,
    Sequence,
    ToolExecutionError,
    tool,
)
from toolfold.runtime.core._stream import StreamEvent
from toolfold.testing import FunctionModel

call = FunctionModel.call


def in_loop(case: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """A test of async code, run on an event loop of its own."""

    @functools.wraps(case)
    def test() -> None:
        asyncio.run(case())

    return test


def _state(err: BaseException) -> RunState:
    """The state a cancellation carries (on Python 3.10, asyncio re-makes the error
    for the awaiting code: the one with the state is its context)."""
    state = toolfold_state_of(err)
    assert isinstance(state, RunState), f"no state on {err!r}"
    return state


def toolfold_state_of(err: BaseException) -> Any:
    from toolfold import state_of

    return state_of(err)


class Gate:
    """Counts what ran; ``hold`` blocks until cancelled while ``holding`` is set."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.holding = True
        self.reached = asyncio.Event()

    async def hold(self, what: str) -> None:
        if self.holding:
            self.reached.set()
            await asyncio.Event().wait()  # never set: only the cancel ends it
        self.ran.append(what)


def _tools(gate: Gate) -> list[Any]:
    @tool(blocking=False)
    def quick(key: str) -> str:
        """A tool that answers at once.

        Args:
            key: What to look up.
        """
        gate.ran.append(f"quick:{key}")
        return f"quick {key}"

    @tool
    async def slow(key: str) -> str:
        """A tool that waits until the gate opens.

        Args:
            key: What to look up.
        """
        await gate.hold(f"slow:{key}")
        return f"slow {key}"

    return [quick, slow]


def _tool_results(request: ModelRequest) -> list[str]:
    return [r.content for m in request.messages for r in m.tool_results]


async def _cancel_when(gate: Gate, work: Any) -> BaseException:
    task = asyncio.ensure_future(work)
    await gate.reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as caught:
        await task
    return caught.value


@in_loop
async def test_cancelled_mid_tool_keeps_the_calls_that_ended_and_resumes() -> None:
    gate = Gate()

    def reply(request: ModelRequest) -> Any:
        results = _tool_results(request)
        if not results:
            return [call("quick", {"key": "a"}), call("slow", {"key": "b"})]
        return "answer: " + ", ".join(results)

    agent = Agent(FunctionModel(reply), tools=_tools(gate))
    err = await _cancel_when(gate, agent.arun("go"))
    state = _state(err)
    assert gate.ran == ["quick:a"]
    # The quick call's result is committed; the slow one waits to run again.
    assert [(c.call.name, c.result is not None) for c in state.calls] == [
        ("quick", True),
        ("slow", False),
    ]
    restored = RunState.from_json(state.to_json())
    gate.holding = False
    response = await agent.aresume(restored)
    assert response.text == "answer: quick a, slow b"
    assert gate.ran == ["quick:a", "slow:b"]  # the quick tool did not run again


@in_loop
async def test_cancelled_mid_model_call_resumes_from_before_the_call() -> None:
    gate = Gate()
    calls = 0

    async def reply(request: ModelRequest) -> Any:
        nonlocal calls
        calls += 1
        if not _tool_results(request):
            return call("quick", {"key": "a"})
        await gate.hold("model")
        return "done"

    agent = Agent(FunctionModel(reply), tools=_tools(gate))
    err = await _cancel_when(gate, agent.arun("go"))
    state = _state(err)
    assert state.phase == "awaiting_model"
    assert state.step == 1
    assert [m.role for m in state.messages] == ["user", "assistant", "tool"]
    gate.holding = False
    response = await agent.aresume(state)
    assert response.text == "done"
    assert gate.ran == ["quick:a", "model"]  # the tool of step 1 ran once
    assert calls == 3


class _HangingStream(FunctionModel):
    """Streams the first answer whole; the second one stops after its first piece."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        super().__init__(self._answer)

    def _answer(self, request: ModelRequest) -> Any:
        return "the answer" if _tool_results(request) else call("quick", {"key": "a"})

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        pieces = super().stream(request)
        async for event in pieces:
            yield event
            if _tool_results(request):
                await self.gate.hold("stream")


@in_loop
async def test_cancelled_mid_stream_resumes_and_runs_no_tool_again() -> None:
    gate = Gate()
    agent = Agent(_HangingStream(gate), tools=_tools(gate))

    async def consume() -> None:
        async for _ in agent.stream("go"):
            pass

    err = await _cancel_when(gate, consume())
    state = _state(err)
    assert state.phase == "awaiting_model"
    assert state.step == 1
    gate.holding = False
    response = await agent.aresume(state)
    assert response.text == "the answer"
    assert gate.ran == ["quick:a"]  # the tool of step 1 ran once


@in_loop
async def test_a_cancelled_workflow_carries_its_own_state_not_a_steps() -> None:
    gate = Gate()

    def first(request: ModelRequest) -> Any:
        return "first done" if _tool_results(request) else call("quick", {"key": "one"})

    def second(request: ModelRequest) -> Any:
        return "second done" if _tool_results(request) else call("slow", {"key": "two"})

    flow = Sequence(
        Agent(FunctionModel(first), name="first", tools=_tools(gate)),
        Agent(FunctionModel(second), name="second", tools=_tools(gate)),
    )
    err = await _cancel_when(gate, flow.arun("go"))
    state = _state(err)
    # The workflow's run, waiting on its second step (an agent's would wait on "slow").
    assert [c.call.name for c in state.calls] == ["second"]
    assert [m.role for m in state.messages][-2:] == ["tool", "assistant"]
    gate.holding = False
    response = await flow.aresume(state)
    assert response.text == "second done"
    assert gate.ran == ["quick:one", "slow:two"]  # the first step did not run again


@in_loop
async def test_a_cancelled_parallel_round_keeps_the_branches_that_ended() -> None:
    gate = Gate()

    def quick_branch(request: ModelRequest) -> Any:
        return "quick done" if _tool_results(request) else call("quick", {"key": "q"})

    def slow_branch(request: ModelRequest) -> Any:
        return "slow done" if _tool_results(request) else call("slow", {"key": "s"})

    flow = Parallel(
        Agent(FunctionModel(quick_branch), name="fast", tools=_tools(gate)),
        Agent(FunctionModel(slow_branch), name="late", tools=_tools(gate)),
    )
    err = await _cancel_when(gate, flow.arun("go"))
    state = _state(err)
    assert [(c.call.name, c.result is not None) for c in state.calls] == [
        ("fast", True),
        ("late", False),
    ]
    gate.holding = False
    response = await flow.aresume(RunState.from_json(state.to_json()))
    assert response.output == {"fast": "quick done", "late": "slow done"}
    assert gate.ran == ["quick:q", "slow:s"]  # the fast branch did not run again


@in_loop
async def test_a_cancelled_sub_agent_gives_the_top_runs_state() -> None:
    gate = Gate()

    def inner(request: ModelRequest) -> Any:
        return "inner done" if _tool_results(request) else call("slow", {"key": "deep"})

    helper = Agent(FunctionModel(inner), name="helper", tools=_tools(gate))

    def outer(request: ModelRequest) -> Any:
        results = _tool_results(request)
        return "outer: " + results[0] if results else call("helper", {"input": "do it"})

    lead = Agent(FunctionModel(outer), name="lead", tools=[helper.as_tool()])
    err = await _cancel_when(gate, lead.arun("go"))
    state = _state(err)
    assert state.agent == "lead"
    assert [c.call.name for c in state.calls] == ["helper"]
    gate.holding = False
    response = await lead.aresume(state)
    assert response.text == "outer: inner done"


def test_state_of_finds_the_state_through_causes_and_contexts() -> None:
    from toolfold import state_of

    state = RunState.from_json(Agent(FunctionModel(lambda r: "hi")).run("go").state.to_json())
    inner = asyncio.CancelledError()
    inner.state = state  # type: ignore[attr-defined]

    def timed_out() -> None:
        try:
            raise inner
        except asyncio.CancelledError as exc:
            raise TimeoutError from exc

    with pytest.raises(TimeoutError) as caught:
        timed_out()
    assert state_of(caught.value) is state
    assert state_of(ValueError("x")) is None


def test_an_interrupted_blocking_run_carries_its_state() -> None:
    """Ctrl-C in a blocking run (here raised by the tool) carries the state to resume from."""
    interrupts = [KeyboardInterrupt()]
    ran: list[str] = []

    @tool(blocking=False)
    def lookup(key: str) -> str:
        """Look something up.

        Args:
            key: What to look up.
        """
        if interrupts:
            raise interrupts.pop()
        ran.append(key)
        return f"value of {key}"

    def reply(request: ModelRequest) -> Any:
        results = _tool_results(request)
        return "got " + results[0] if results else call("lookup", {"key": "k"})

    agent = Agent(FunctionModel(reply), tools=[lookup])
    with pytest.raises(KeyboardInterrupt) as caught:
        agent.run("go")
    state = _state(caught.value)
    assert state.phase == "running_tools"
    assert [c.result for c in state.calls] == [None]
    assert agent.resume(state).text == "got value of k"
    assert ran == ["k"]


@in_loop
async def test_with_on_tool_error_raise_a_failed_call_is_not_kept_by_a_cancel() -> None:
    """A call that failed before the cancel raises on resume, as the round would have."""
    gate = Gate()

    @tool
    async def boom(key: str) -> str:
        """Fails.

        Args:
            key: What to look up.
        """
        gate.ran.append(f"boom:{key}")
        raise ValueError("boom")

    def reply(request: ModelRequest) -> Any:
        results = _tool_results(request)
        if not results:
            return [call("boom", {"key": "a"}), call("slow", {"key": "b"})]
        return "model saw: " + ", ".join(results)

    agent = Agent(FunctionModel(reply), tools=[boom, _tools(gate)[1]], on_tool_error="raise")
    err = await _cancel_when(gate, agent.arun("go"))
    state = _state(err)
    assert [c.result for c in state.calls] == [None, None]  # the failure is not kept
    gate.holding = False
    with pytest.raises(ToolExecutionError, match="tool 'boom' failed"):
        await agent.aresume(state)
    assert gate.ran == ["boom:a", "boom:a", "slow:b"]  # the round ran whole, then raised


class _SlowClose:
    """A tool source whose close waits until cancelled (after the run ended)."""

    def __init__(self) -> None:
        self.closing = asyncio.Event()
        self.release = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    def open(self) -> None:
        pass

    def close(self) -> None:
        assert self.loop is not None
        self.loop.call_soon_threadsafe(self.closing.set)
        assert self.release.wait(60)  # a slow close, on its worker thread

    def tools(self) -> list[Any]:
        @tool(blocking=False)
        def ledger() -> str:
            """Read the ledger."""
            return "balanced"

        return [ledger]


@in_loop
async def test_a_run_cancelled_while_its_sources_close_carries_its_final_state() -> None:
    source = _SlowClose()
    source.loop = asyncio.get_running_loop()

    def reply(request: ModelRequest) -> Any:
        return "all done" if _tool_results(request) else call("ledger")

    agent = Agent(FunctionModel(reply), tools=[source])
    task = asyncio.ensure_future(agent.arun("go"))
    await source.closing.wait()
    task.cancel()
    try:
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
    finally:
        source.release.set()
    state = _state(caught.value)
    assert state.phase == "finished"
    assert state.output == "all done"


def test_state_of_does_not_follow_an_error_raised_while_handling_another() -> None:
    from toolfold import state_of

    failed = RunError("the run failed", Agent(FunctionModel(lambda r: "hi")).run("go").state)

    def handle() -> None:
        try:
            raise failed
        except RunError:
            raise ValueError("a bug in the handler") from None

    with pytest.raises(ValueError, match="a bug") as caught:
        handle()
    assert state_of(caught.value) is None
    assert state_of(failed) is failed.state
