"""Agents as tools in async runs: the sub-agents run on the caller's event loop, not on threads."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from toolfold import Agent, RunEndEvent, SubRunEvent, tool
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


def _where() -> tuple[int, int]:
    """The running loop and the thread, as ids."""
    return id(asyncio.get_running_loop()), threading.get_ident()


def _tree(seen: list[tuple[str, tuple[int, int]]], *, approval: bool = False) -> Agent:
    """top -> mid -> bottom; the bottom agent's async tool records where it runs."""

    @tool(requires_approval=approval)
    async def probe(label: str) -> str:
        """Record the running loop and thread.

        Args:
            label: A label.
        """
        seen.append((label, _where()))
        return "probed"

    def delegate(name: str) -> FunctionModel:
        def reply(request: Any) -> Any:
            last = request.messages[-1]
            if last.role == "tool":
                return f"{name}: " + last.tool_results[0].content
            if name == "probe":
                return call("probe", {"label": "bottom"})
            return call(name, {"input": last.text})

        return FunctionModel(reply)

    bottom = Agent(delegate("probe"), name="bottom", tools=[probe])
    mid = Agent(delegate("bottom"), name="mid", tools=[bottom.as_tool()])
    return Agent(delegate("mid"), name="top", tools=[mid.as_tool()])


def test_arun_runs_sub_agents_on_the_callers_loop_and_thread() -> None:
    """Under arun an async tool two agents down sees the caller's loop and thread."""
    seen: list[tuple[str, tuple[int, int]]] = []

    async def main() -> tuple[str, tuple[int, int]]:
        response = await _tree(seen).arun("go")
        return response.text, _where()

    text, here = asyncio.run(main())
    assert text == "mid: bottom: probe: probed"
    assert seen == [("bottom", here)]


def test_async_stream_and_aresume_run_sub_agents_on_the_callers_loop() -> None:
    """Streaming with async for, and resuming with aresume, keep nested sub-agents on the caller's loop."""
    seen: list[tuple[str, tuple[int, int]]] = []
    top = _tree(seen, approval=True)

    async def main() -> tuple[list[Any], tuple[int, int]]:
        events = [event async for event in top.stream("go")]
        end = events[-1]
        assert isinstance(end, RunEndEvent)
        assert end.response.finish_reason == "approval_required"
        approvals = {c.id: True for c in end.response.pending_approvals}
        resumed = [e async for e in top.resume_stream(end.response.state, approvals=approvals)]
        waiting = await top.arun("again")
        approvals = {c.id: True for c in waiting.pending_approvals}
        done = await top.aresume(waiting.state, approvals=approvals)
        assert done.text == "mid: bottom: probe: probed"
        return resumed, _where()

    resumed, here = asyncio.run(main())
    assert resumed[-1].response.text == "mid: bottom: probe: probed"
    assert any(isinstance(e, SubRunEvent) and e.path[::2] == ("mid", "bottom") for e in resumed)
    assert seen == [("bottom", here), ("bottom", here)]


def test_blocking_run_still_runs_sub_agents_as_blocking_calls() -> None:
    """A blocking run calls its sub-agents with their blocking run; the async tool below still runs."""
    seen: list[tuple[str, tuple[int, int]]] = []
    response = _tree(seen).run("go")
    assert response.text == "mid: bottom: probe: probed"
    assert [label for label, _ in seen] == ["bottom"]


def test_async_sub_agent_past_its_timeout_is_cancelled_on_the_loop() -> None:
    """Under arun a sub-agent that outlives as_tool(timeout=) is cancelled, and the caller reads a timeout."""
    cancelled: list[str] = []

    @tool
    async def wait_forever() -> str:
        """Never finish."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("sub-agent's tool")
            raise
        return "unreachable"

    slow = Agent(ScriptedModel([call("wait_forever", {})]), name="slow", tools=[wait_forever])
    lead = Agent(
        ScriptedModel([call("slow", {"input": "go"}), "gave up"]),
        tools=[slow.as_tool(timeout=0.2)],
    )
    response = asyncio.run(lead.arun("go"))
    assert response.text == "gave up"
    (result,) = response.steps[0].tool_results
    assert result.is_error
    assert "timed out" in result.content
    assert cancelled == ["sub-agent's tool"]


def test_a_replaced_timeout_holds_in_blocking_runs_too() -> None:
    """as_tool().replace(timeout=...) bounds the sub-agent in a blocking run as in an async one."""
    release = threading.Event()

    @tool
    def wait_for_release() -> str:
        """Block until the test releases it."""
        release.wait(60)
        return "released"

    slow = Agent(
        ScriptedModel([call("wait_for_release", {})]), name="slow", tools=[wait_for_release]
    )
    lead = Agent(
        ScriptedModel([call("quick", {"input": "go"}), "gave up"]),
        tools=[slow.as_tool().replace(name="quick", timeout=0.2)],
    )
    try:
        response = lead.run("go")
    finally:
        release.set()
    assert response.text == "gave up"
    (result,) = response.steps[0].tool_results
    assert result.is_error
    assert "'quick' timed out" in result.content


_REAL_MONOTONIC = time.monotonic
_TIMEOUT = 0.2  # the sub-agent's, in `_timed_lead`


class _StoppedClock:
    """``time.monotonic`` (the event loop's clock, the deadlines') standing still until
    ``reached`` is set, then at once past the deadlines set meanwhile: a timeout cuts a run
    where the test says, however loaded the machine (on the real clock, a run loaded for
    ``_TIMEOUT`` was cut before its tools ran)."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._stopped = _REAL_MONOTONIC()

    def __call__(self) -> float:
        if self.reached.is_set():  # (never back in time: the real clock once it caught up)
            return max(_REAL_MONOTONIC(), self._stopped + _TIMEOUT)
        return self._stopped

    def stop(self) -> None:
        """Stand still again (from now), until ``reached`` is set again."""
        self._stopped = self()
        self.reached.clear()


def _timed_lead(clock: _StoppedClock) -> Agent:
    """lead -> slow (as_tool(timeout=0.2)): slow calls `quick`, then `quick` and `wait_forever`,
    which lets ``clock`` reach the deadline (`quick`, called on the loop, has ended by then)."""

    @tool
    async def wait_forever() -> str:
        """Never finish."""
        clock.reached.set()
        await asyncio.Event().wait()
        return "unreachable"

    @tool(blocking=False)
    def quick() -> str:
        """Answer at once."""
        return "quick result"

    slow = Agent(
        ScriptedModel([call("quick", {}), [call("quick", {}), call("wait_forever", {})]]),
        name="slow",
        tools=[quick, wait_forever],
    )
    return Agent(
        ScriptedModel([call("slow", {"input": "go"}), "gave up"]),
        name="lead",
        tools=[slow.as_tool(timeout=_TIMEOUT)],
    )


def test_a_timed_out_sub_run_stays_in_the_tree_and_counts_its_usage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sub-agent stopped by as_tool(timeout=) rides on the call's timeout result: its model calls count in response.usage."""
    clock = _StoppedClock()
    monkeypatch.setattr(time, "monotonic", clock)
    response = asyncio.run(_timed_lead(clock).arun("go", run_id="timed"))
    (result,) = response.steps[0].tool_results
    assert result.content == "Error: tool 'slow' timed out after 0.2 s."
    child = response.state.sub_runs[result.call_id]
    assert child.run_id == f"timed/{result.call_id}"
    assert child.usage.requests == 2  # both of the sub-agent's model calls
    assert response.usage.requests == 4  # the lead's two, and the sub-agent's
    assert response.usage == response.state.usage + child.usage
    # where the cancellation found it: its second round, the call that ended committed
    assert child.phase == "running_tools"
    assert [(c.call.name, c.status) for c in child.calls] == [
        ("quick", "done"),
        ("wait_forever", "to_run"),
    ]
    clock.stop()
    blocking = _timed_lead(clock).run("go", run_id="timed")
    assert blocking.state.sub_runs[result.call_id] == child
    assert blocking.usage == response.usage
