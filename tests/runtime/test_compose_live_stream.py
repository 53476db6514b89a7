"""A streaming caller sees its sub-runs' events live, at any depth, while they run.

Each sub-agent here streams through a `GatedModel`: it writes its first
delta, then waits for a gate that only the test's consumer opens, on seeing
a delta of the stream it iterates. Events that reached the caller only when
a call completed would never open the gate (the model then gives up with an
error, so a regression fails instead of hanging). No sleeps, no clocks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from toolfold import (
    Agent,
    Parallel,
    Sequence,
    SubRunEvent,
    TextDelta,
    ToolResultEvent,
    state_of,
    tool,
)
from toolfold.runtime import RunEndEvent, replay
from toolfold.runtime.core._messages import Message, TextPart, Usage
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._stream import StreamEvent, StreamFinish, UsageUpdate
from toolfold.runtime.drive._shells import interrupt_waits
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call
_GUARD = 20.0  # seconds a gate waits before the model fails the run (a hang guard, not a timing)


class GatedModel:
    """A model that streams ``first``, waits for its gate, then streams ``rest``."""

    def __init__(self, first: str, rest: str) -> None:
        self.first, self.rest = first, rest
        self.gate = threading.Event()

    @property
    def name(self) -> str:
        return "gated:model"

    def _response(self) -> ModelResponse:
        message = Message("assistant", (TextPart(self.first + self.rest),))
        return ModelResponse(message, Usage(), "stop", None, self.name)

    def _waited(self, opened: bool) -> None:
        if not opened:
            raise RuntimeError(f"nobody saw {self.first!r} while the sub-run was running")

    async def request(self, request: ModelRequest) -> ModelResponse:
        return self._response()

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        return self._response()

    def _tail(self) -> Iterator[StreamEvent]:
        yield TextDelta(self.rest)
        yield UsageUpdate(Usage())
        yield StreamFinish("stop", None)

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        yield TextDelta(self.first)
        self._waited(self.gate.wait(_GUARD))
        yield from self._tail()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield TextDelta(self.first)
        loop = asyncio.get_running_loop()  # wait off the loop: other branches run meanwhile
        self._waited(await loop.run_in_executor(None, self.gate.wait, _GUARD))
        for event in self._tail():
            yield event


def gated(name: str) -> tuple[Agent, GatedModel]:
    model = GatedModel(f"{name} starts", f", {name} ends")
    return Agent(model, name=name), model


def opener(gates: dict[str, threading.Event]) -> Any:
    """Opens the gate named for the first word of each delta the caller sees, records it."""
    seen: list[tuple[tuple[str, ...], str]] = []

    def see(event: Any) -> None:
        path, inner = (event.path, event.event) if isinstance(event, SubRunEvent) else ((), event)
        if isinstance(inner, TextDelta):
            seen.append((path[::2], inner.text))
            gate = gates.get(inner.text.split()[0])
            if gate is not None:
                gate.set()

    return see, seen


def consume(stream: Any, how: str, see: Any) -> list[Any]:
    """The stream's events, each shown to ``see`` as it arrives (``for`` or ``async for``)."""
    events: list[Any] = []
    if how == "sync":
        for event in stream:
            see(event)
            events.append(event)
        return events

    async def main() -> None:
        async for event in stream:
            see(event)
            events.append(event)

    asyncio.run(main())
    return events


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_sub_agents_delta_reaches_the_caller_while_it_runs(how: str) -> None:
    """A streamed parent yields its sub-agent's first delta before the sub-agent finishes."""
    helper, model = gated("helper")
    lead = Agent(
        ScriptedModel([call("helper", {"input": "hi"}, id="c1"), "done"]),
        tools=[helper.as_tool()],
    )
    see, seen = opener({"helper": model.gate})
    events = consume(lead.stream("go"), how, see)
    assert seen[:2] == [(("helper",), "helper starts"), (("helper",), ", helper ends")]
    first = next(i for i, e in enumerate(events) if isinstance(e, SubRunEvent))
    result = next(i for i, e in enumerate(events) if isinstance(e, ToolResultEvent))
    assert first < result
    assert events[first].path == ("helper", "c1")
    end = events[-1]
    assert isinstance(end, RunEndEvent)
    assert end.response.text == "done"
    assert end.response.state.sub_runs["c1"].output == "helper starts, helper ends"


@pytest.mark.parametrize("how", ["sync", "async"])
def test_events_two_levels_down_are_live_and_tagged_with_the_whole_path(how: str) -> None:
    """A sub-sub-agent's delta reaches the top while it runs, tagged with both levels."""
    bottom, model = gated("bottom")
    mid = Agent(
        ScriptedModel([call("bottom", {"input": "x"}, id="b1"), "mid done"]),
        name="mid",
        tools=[bottom.as_tool()],
    )
    top = Agent(
        ScriptedModel([call("mid", {"input": "y"}, id="m1"), "top done"]),
        tools=[mid.as_tool()],
    )
    see, seen = opener({"bottom": model.gate})
    events = consume(top.stream("go"), how, see)
    assert seen[:2] == [(("mid", "bottom"), "bottom starts"), (("mid", "bottom"), ", bottom ends")]
    tagged = next(e for e in events if isinstance(e, SubRunEvent) and e.path[2:])
    assert tagged.path == ("mid", "m1", "bottom", "b1")
    assert events[-1].response.text == "top done"


@pytest.mark.parametrize("how", ["sync", "async"])
def test_parallel_sub_agents_interleave_live(how: str) -> None:
    """Two sub-agents called in one step each wait for a delta of the other: both stream live."""
    left, left_model = gated("left")
    right, right_model = gated("right")
    lead = Agent(
        ScriptedModel([[call("left", {"input": "a"}), call("right", {"input": "b"})], "ok"]),
        tools=[left.as_tool(), right.as_tool()],
    )
    # Each one's gate opens when the caller sees the *other* one start.
    see, seen = opener({"right": left_model.gate, "left": right_model.gate})
    events = consume(lead.stream("go"), how, see)
    assert {text for path, text in seen if path} == {
        "left starts",
        ", left ends",
        "right starts",
        ", right ends",
    }
    assert events[-1].response.text == "ok"


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_workflow_steps_events_are_live(how: str) -> None:
    """A streamed Sequence yields its running step's delta before the step ends."""
    first, model = gated("first")
    then = Agent(FunctionModel(lambda request: "then done"), name="then")
    flow = Sequence(first, then)
    see, seen = opener({"first": model.gate})
    stream = flow.stream("go", run_id="w")
    events = consume(stream, how, see)
    assert seen[0] == (("first",), "first starts")
    tagged = next(
        e for e in events if isinstance(e, SubRunEvent) and e.event == TextDelta("first starts")
    )
    assert tagged.path == ("first", "first")
    assert stream.response.output == "then done"
    assert replay(stream.response.state.log) == stream.response.state


@pytest.mark.parametrize("how", ["sync", "async"])
def test_parallel_branches_interleave_live_inside_a_sequence(how: str) -> None:
    """Branches of a nested Parallel each wait for the other's delta: they stream interleaved."""
    left, left_model = gated("left")
    right, right_model = gated("right")
    flow = Sequence(Parallel(left, right, name="both"), name="outer")
    see, seen = opener({"right": left_model.gate, "left": right_model.gate})
    stream = flow.stream("go", run_id="p")
    consume(stream, how, see)
    assert {path for path, _ in seen} == {("both", "left"), ("both", "right")}
    assert stream.response.output == {
        "left": "left starts, left ends",
        "right": "right starts, right ends",
    }
    assert replay(stream.response.state.log) == stream.response.state


@pytest.mark.parametrize("how", ["sync", "async"])
def test_the_agent_a_handoff_reaches_streams_live(how: str) -> None:
    """After a handoff the run goes on in the same stream: the target's delta arrives as written."""
    target, model = gated("billing")
    triage = Agent(ScriptedModel([call("transfer_to_billing")]), name="triage", handoffs=[target])
    see, seen = opener({"billing": model.gate})
    events = consume(triage.stream("my invoice"), how, see)
    assert seen == [((), "billing starts"), ((), ", billing ends")]
    assert events[-1].response.agent == "billing"


def _tree() -> Agent:
    helper = Agent(FunctionModel(lambda request: "helper says hi"), name="helper")
    return Agent(
        ScriptedModel([[call("helper", {"input": "a"}), call("helper", {"input": "b"})], "ok"]),
        tools=[helper.as_tool()],
    )


def test_a_blocking_stream_left_early_raises_nothing() -> None:
    """Closing a blocking stream during a sub-run step is clean; the step ends on its thread."""
    events = iter(_tree().stream("go"))
    first = next(e for e in events if isinstance(e, SubRunEvent))
    assert first.path[0] == "helper"
    events.close()  # type: ignore[attr-defined]
    assert _tree().run("go").text == "ok"


def test_an_async_stream_left_early_cancels_the_steps_sub_runs() -> None:
    """Closing an async stream during a sub-run step cancels its calls cleanly (no stray task)."""

    async def main() -> list[Any]:
        events = _tree().stream("go").__aiter__()
        first = await anext(events)
        while not isinstance(first, SubRunEvent):
            first = await anext(events)
        await events.aclose()  # type: ignore[attr-defined]
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(main()) == []


def _step_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "toolfold-step"]


@pytest.mark.parametrize("helpers", [1, 2])
@pytest.mark.parametrize("leave", ["break", "throw"])
def test_a_blocking_stream_left_early_stops_its_sub_agents_model_calls(
    leave: str, helpers: int
) -> None:
    """Leaving a blocking stream mid sub-run (break, or an error thrown in) stops its sub-agents:
    no model call once it returned."""
    requests: list[str] = []
    entered: list[str] = []
    all_in, release = threading.Event(), threading.Event()

    @tool
    def hold(x: str) -> str:
        """Wait for the test.

        Args:
            x: anything.
        """
        entered.append(x)
        if len(entered) == helpers:
            all_in.set()
        release.wait(_GUARD)
        return x

    def reply(request: ModelRequest) -> Any:
        requests.append(request.messages[-1].role)
        if request.messages[-1].role == "user":
            return call("hold", {"x": "a"})
        return "sub done"

    helper = Agent(FunctionModel(reply), name="helper", tools=[hold])
    lead = Agent(
        ScriptedModel([[call("helper", {"input": str(i)}) for i in range(helpers)], "lead done"]),
        name="lead",
        tools=[helper.as_tool()],
    )
    before = set(_step_threads())
    events = iter(lead.stream("go"))
    next(e for e in events if isinstance(e, SubRunEvent))
    assert all_in.wait(_GUARD)  # every sub-agent waits in its tool: its next call comes after
    if leave == "break":
        events.close()  # type: ignore[attr-defined]
    else:
        with pytest.raises(ValueError, match="consumer"):
            events.throw(ValueError("consumer"))  # type: ignore[attr-defined]
    made = len(requests)
    assert made == helpers
    release.set()
    for thread in set(_step_threads()) - before:
        thread.join(_GUARD)
        assert not thread.is_alive()
    assert len(requests) == made  # (before: each sub-agent asked its model again)


@pytest.mark.parametrize("answer", ["text", "tool call"])
def test_a_blocking_stream_left_while_a_model_call_holds_the_loop_starts_nothing_more(
    answer: str,
) -> None:
    """Leaving a blocking stream while one sub-agent's blocking model function holds its round's
    event loop: the other sub-agent makes no model call, and the first runs no tool, after."""
    asked: list[str] = []
    entered: list[str] = []
    in_model, release = threading.Event(), threading.Event()

    @tool
    def hold(x: str) -> str:
        """Record the call.

        Args:
            x: anything.
        """
        entered.append(x)
        return x

    def reply(request: ModelRequest) -> Any:
        asked.append(request.messages[-1].role)
        if len(asked) == 1:  # the first sub-agent's call holds the loop until the test lets go
            in_model.set()
            release.wait(_GUARD)
            return call("hold", {"x": "a"}) if answer == "tool call" else "sub done"
        return "sub done"

    helper = Agent(FunctionModel(reply), name="helper", tools=[hold])
    lead = Agent(
        ScriptedModel([[call("helper", {"input": "1"}), call("helper", {"input": "2"})], "done"]),
        name="lead",
        tools=[helper.as_tool()],
    )
    before = set(_step_threads())
    events = iter(lead.stream("go"))
    next(e for e in events if isinstance(e, SubRunEvent))
    assert in_model.wait(_GUARD)
    events.close()  # type: ignore[attr-defined]
    release.set()
    for thread in set(_step_threads()) - before:
        thread.join(_GUARD)
        assert not thread.is_alive()
    assert (asked, entered) == (["user"], [])  # (before: the second asked, the first's tool ran)


def _sync_tool_running_an_agent(
    outcomes: list[str], ended: threading.Event, started: threading.Event, go: threading.Event
) -> tuple[Agent, list[str]]:
    """A lead whose one round runs a sync tool (it waits for ``go``, then runs an agent with
    ``asyncio.run``, recording how that ended in ``outcomes``) beside a sub-agent."""
    runs: list[str] = []
    inner = Agent(FunctionModel(lambda request: "inner ok"), name="inner")

    @tool
    def lookup(x: str) -> str:
        """Record the call, wait for the test, then ask an agent of its own.

        Args:
            x: anything.
        """
        runs.append(x)
        started.set()
        try:
            if not go.wait(_GUARD):
                outcomes.append("nobody let it go")
            try:
                out = asyncio.run(inner.arun("q")).output
            except BaseException as exc:
                outcomes.append(type(exc).__name__)
                raise
            outcomes.append(out)
            return f"looked {out}"
        finally:
            ended.set()

    def slow(request: ModelRequest) -> Any:
        started.wait(_GUARD)
        return "helper done"

    helper = Agent(FunctionModel(slow), name="helper")
    lead = Agent(
        ScriptedModel([[call("lookup", {"x": "a"}), call("helper", {"input": "1"})], "done"]),
        name="lead",
        tools=[lookup, helper.as_tool()],
    )
    return lead, runs


def test_ctrl_c_in_a_blocking_stream_keeps_what_a_sync_tool_running_an_agent_returns() -> None:
    """Ctrl-C in a blocking stream whose round waits for a sync tool that then runs an agent
    with asyncio.run: that agent is not cancelled, the result is kept, resume runs it no more."""
    outcomes: list[str] = []
    ended, started, go = threading.Event(), threading.Event(), threading.Event()
    lead, runs = _sync_tool_running_an_agent(outcomes, ended, started, go)
    # (the round, stopped, waits for the sync tool: the test is told, and lets it go on)
    with interrupt_waits(go.set):
        events = iter(lead.stream("go"))
        next(e for e in events if isinstance(e, SubRunEvent))
        assert started.wait(_GUARD)
        with pytest.raises(KeyboardInterrupt) as caught:
            events.throw(KeyboardInterrupt())  # type: ignore[attr-defined]
    assert ended.wait(_GUARD)
    assert outcomes == ["inner ok"]  # (before: CancelledError at the inner agent's model call)
    state = state_of(caught.value)
    assert state is not None
    assert lead.resume(state).output == "done"
    assert runs == ["a"]  # (before: its result was lost, and it ran again on resume)


def test_a_blocking_stream_left_lets_a_sync_tool_running_an_agent_finish() -> None:
    """Leaving a blocking stream (close) while a sync tool waits: the agent that tool then runs
    with asyncio.run finishes on the tool's thread, not cancelled by the abandoned round."""
    outcomes: list[str] = []
    ended, started, go = threading.Event(), threading.Event(), threading.Event()
    lead, runs = _sync_tool_running_an_agent(outcomes, ended, started, go)
    before = set(_step_threads())
    events = iter(lead.stream("go"))
    next(e for e in events if isinstance(e, SubRunEvent))
    assert started.wait(_GUARD)
    events.close()  # type: ignore[attr-defined]
    go.set()
    assert ended.wait(_GUARD)
    for thread in set(_step_threads()) - before:
        thread.join(_GUARD)
        assert not thread.is_alive()
    assert (outcomes, runs) == (["inner ok"], ["a"])  # (before: ["CancelledError"])
