"""A cancelled sub-run is kept where it stopped: resuming the top run continues it.

An agent used as a tool, or a workflow (used as a tool, or as a step of
another), that is interrupted midway leaves its state on its call's record
(a `ToolSuspended` whose sub-run does not wait): the top run's state holds
the whole tree, and a resume, also through JSON, runs nothing that had
finished again.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from interrupt_helpers import ctrl_c, join_step_threads, saved_state_on, thrown_into

from toolfold import (
    Agent,
    ModelRequest,
    RunState,
    Sequence,
    SubRunEvent,
    Task,
    ToolCallEvent,
    state_of,
    tool,
)
from toolfold.runtime import ToolReturned, replay
from toolfold.runtime.drive import _loop
from toolfold.runtime.drive._kept_loop import RoundInterrupt, _interruptible, watched_interrupt
from toolfold.runtime.drive._shells import interrupt_waits
from toolfold.runtime.drive._sync_calls import run_calls_sync
from toolfold.testing import FunctionModel, ScriptedModel

call = FunctionModel.call


class Gate:
    """Counts tool executions; ``slow`` blocks until cancelled while ``holding`` is set."""

    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()
        self.holding = True
        self.reached = asyncio.Event()
        self.interrupt = False  # a blocking run: ``slow`` raises KeyboardInterrupt once
        # ``offload``'s work on a thread: started, let go, returned
        self.offloading = threading.Event()
        self.release = threading.Event()
        self.offloaded = threading.Event()

    def tools(self) -> list[Any]:
        @tool(blocking=False)
        def quick(key: str) -> str:
            """A tool that answers at once.

            Args:
                key: What to look up.
            """
            self.ran[f"quick:{key}"] += 1
            return f"quick {key}"

        @tool
        async def slow(key: str) -> str:
            """A tool that waits until the gate opens.

            Args:
                key: What to look up.
            """
            if self.holding:
                self.reached.set()
                await asyncio.Event().wait()  # never set: only the cancel ends it
            self.ran[f"slow:{key}"] += 1
            return f"slow {key}"

        @tool(blocking=False)
        def halt(key: str) -> str:
            """A tool that is interrupted by Ctrl-C the first time.

            Args:
                key: What to look up.
            """
            if self.interrupt:
                self.interrupt = False
                raise KeyboardInterrupt
            self.ran[f"halt:{key}"] += 1
            return f"halt {key}"

        def hold() -> None:
            self.offloading.set()
            self.release.wait(60)
            self.offloaded.set()

        @tool
        async def offload(key: str) -> str:
            """A tool that hands blocking work to a thread (until the gate lets it go).

            Args:
                key: What to look up.
            """
            if self.holding:
                await asyncio.to_thread(hold)
            self.ran[f"offload:{key}"] += 1
            return f"offload {key}"

        return [quick, slow, halt, offload]


def _results(request: ModelRequest) -> list[str]:
    return [r.content for m in request.messages for r in m.tool_results]


def _worker(gate: Gate, name: str, last: str = "slow") -> Agent:
    """An agent that calls ``quick``, then ``last`` (in a second step), then answers."""

    def reply(request: ModelRequest) -> Any:
        gate.ran[f"model:{name}"] += 1
        done = _results(request)
        if not done:
            return call("quick", {"key": name})
        if len(done) == 1:
            return call(last, {"key": name})
        return f"{name}: " + ", ".join(done)

    return Agent(FunctionModel(reply), name=name, tools=gate.tools())


def _caller(gate: Gate, name: str, tool_: Any) -> Agent:
    """An agent whose model calls ``tool_`` once, then answers with its result."""

    def reply(request: ModelRequest) -> Any:
        gate.ran[f"model:{name}"] += 1
        done = _results(request)
        return f"{name}(" + done[0] + ")" if done else call(tool_.name, {"input": "go"})

    return Agent(FunctionModel(reply), name=name, tools=[tool_])


async def _cancelled(gate: Gate, work: Any) -> RunState:
    task = asyncio.ensure_future(work)
    await gate.reached.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError) as caught:
        await task
    state = state_of(caught.value)
    assert isinstance(state, RunState)
    return RunState.from_json(state.to_json())


def _side_by_side(gate: Gate, last: str, first_last: str = "quick") -> Agent:
    """lead, whose model calls first (quick, then ``first_last``) and second (quick, then ``last``) in one step."""
    first = _worker(gate, "first", first_last)
    second = _worker(gate, "second", last)

    def reply(request: ModelRequest) -> Any:
        gate.ran["model:lead"] += 1
        done = _results(request)
        if done:
            return "lead(" + " | ".join(done) + ")"
        return [call("first", {"input": "a"}), call("second", {"input": "b"})]

    return Agent(FunctionModel(reply), name="lead", tools=[first.as_tool(), second.as_tool()])


def _resumed(lead: Agent, state: RunState, stream: bool) -> Any:
    """The response of ``lead`` resuming ``state``, blocking, streamed or not."""
    if not stream:
        return lead.resume(state)
    resumed = lead.resume_stream(state)
    list(resumed)
    return resumed.response


def _kept_path(state: RunState) -> list[str]:
    """The names of the calls holding an interrupted sub-run, from the top down."""
    path: list[str] = []
    while True:
        held = [c for c in state.calls if c.child is not None and c.status == "to_run"]
        if not held:
            return path
        (record,) = held
        path.append(record.call.name)
        state = record.child


def test_a_cancelled_sub_agent_two_deep_continues_where_it_stopped() -> None:
    """lead -> mid -> bottom, cancelled in bottom's second step: resuming from JSON runs no model call or tool that had ended again."""
    gate = Gate()
    bottom = _worker(gate, "bottom")
    mid = _caller(gate, "mid", bottom.as_tool())
    lead = _caller(gate, "lead", mid.as_tool())

    async def go() -> None:
        state = await _cancelled(gate, lead.arun("go"))
        assert _kept_path(state) == ["mid", "bottom"]
        assert gate.ran == {"model:lead": 1, "model:mid": 1, "model:bottom": 2, "quick:bottom": 1}
        assert state.tree_usage.requests == 4  # the kept sub-runs' model calls count
        assert list(state.sub_runs) == [state.calls[0].call.id]
        from toolfold.runtime._view import to_html

        assert "Sub-run interrupted" in to_html(state)
        assert replay(state.log) == state
        gate.holding = False
        response = await lead.aresume(state)
        assert response.text == "lead(mid(bottom: quick bottom, slow bottom))"
        assert replay(response.state.log) == response.state

    asyncio.run(go())
    # each model call and tool ran once: bottom's first step and quick were not run again
    assert gate.ran == {
        "model:lead": 2,
        "model:mid": 2,
        "model:bottom": 3,
        "quick:bottom": 1,
        "slow:bottom": 1,
    }


def test_a_cancelled_nested_workflow_continues_where_it_stopped() -> None:
    """A workflow used as a tool whose second step is itself a workflow, cancelled in its last agent: resuming from JSON runs no finished step again."""
    gate = Gate()
    inner = Sequence(_worker(gate, "second", "quick"), _worker(gate, "third"), name="inner")
    outer = Sequence(_worker(gate, "first", "quick"), inner, name="outer")
    lead = _caller(gate, "lead", outer.as_tool())

    async def go() -> None:
        state = await _cancelled(gate, lead.arun("go"))
        assert _kept_path(state) == ["outer", "inner", "third"]
        before = dict(gate.ran)
        assert before["quick:first"] == 2
        assert before["quick:second"] == 2
        gate.holding = False
        response = await lead.aresume(state)
        assert response.text.startswith("lead(third: quick third, slow third")
        assert replay(response.state.log) == response.state
        ran_again = {k: v - before.get(k, 0) for k, v in gate.ran.items()}
        assert {k: v for k, v in ran_again.items() if v} == {
            "model:lead": 1,
            "model:third": 1,
            "slow:third": 1,
        }

    asyncio.run(go())


@pytest.mark.parametrize("stream", [False, True], ids=["run", "stream"])
def test_ctrl_c_in_a_blocking_sub_agent_keeps_it_where_it_stopped(stream: bool) -> None:
    """Ctrl-C inside a blocking sub-agent two deep: the top run's state holds both sub-runs, and resuming runs nothing that had ended again.

    A blocking stream runs a round whose sub-runs forward events on a thread
    of its own: it keeps the sub-run too (it started the sub-agent again)."""
    gate = Gate()
    gate.interrupt = True
    bottom = _worker(gate, "bottom", "halt")
    mid = _caller(gate, "mid", bottom.as_tool())
    lead = _caller(gate, "lead", mid.as_tool())
    start = (lambda: list(lead.stream("go"))) if stream else (lambda: lead.run("go"))
    with pytest.raises(KeyboardInterrupt) as caught:
        start()
    state = saved_state_on(caught.value)
    assert _kept_path(state) == ["mid", "bottom"]
    response = _resumed(lead, state, stream)
    assert response.text == "lead(mid(bottom: quick bottom, halt bottom))"
    assert gate.ran == {
        "model:lead": 2,
        "model:mid": 2,
        "model:bottom": 3,
        "quick:bottom": 1,
        "halt:bottom": 1,
    }


@pytest.mark.parametrize("how", ["stream", "timeout"])
def test_a_cancelled_streamed_or_timed_sub_agent_is_kept_too(how: str) -> None:
    """A sub-agent streamed to its caller, or given its own timeout (it runs on a task of its own), is kept where it stopped as well."""
    gate = Gate()
    bottom = _worker(gate, "bottom")
    lead = _caller(
        gate, "lead", bottom.as_tool(timeout=100) if how == "timeout" else bottom.as_tool()
    )

    async def consume() -> None:
        if how == "stream":
            async for _ in lead.stream("go"):
                pass
        else:
            await lead.arun("go")

    async def go() -> None:
        state = await _cancelled(gate, consume())
        assert _kept_path(state) == ["bottom"]
        gate.holding = False
        response = await lead.aresume(state)
        assert response.text == "lead(bottom: quick bottom, slow bottom)"

    asyncio.run(go())
    assert gate.ran == {"model:lead": 2, "model:bottom": 3, "quick:bottom": 1, "slow:bottom": 1}


def test_ctrl_c_in_one_of_two_blocking_sub_agents_keeps_both() -> None:
    """Two sub-agents side by side in a blocking run, Ctrl-C in the second: the first's answer and the second's progress are kept, and resuming runs neither's finished work again."""
    gate = Gate()
    gate.interrupt = True
    lead = _side_by_side(gate, "halt")
    with pytest.raises(KeyboardInterrupt) as caught:
        lead.run("go")
    state = saved_state_on(caught.value)
    assert [(c.call.name, c.status) for c in state.calls] == [
        ("first", "done"),
        ("second", "to_run"),
    ]
    # the call that had ended is timed as in an async run (it was null here)
    (ended,) = [e for e in state.log if isinstance(e, ToolReturned)]
    assert isinstance(ended.duration, float)
    assert ended.duration >= 0.0
    response = lead.resume(state)
    assert (
        response.text == "lead(first: quick first, quick first | second: quick second, halt second)"
    )
    assert gate.ran == {
        "model:lead": 2,
        "model:first": 3,
        "quick:first": 2,
        "model:second": 3,
        "quick:second": 1,
        "halt:second": 1,
    }


def _calls(event: Any, name: str = "slow") -> bool:
    """Whether ``event`` is a sub-run's call to the tool ``name``."""
    inner = getattr(event, "event", None)
    return isinstance(inner, ToolCallEvent) and inner.call.name == name


def _until_call(events: Iterator[Any], name: str) -> None:
    """Read ``events`` (a blocking stream's) up to a sub-run's call to the tool ``name``."""
    for event in events:
        if _calls(event, name):
            return


def test_ctrl_c_in_a_blocking_stream_keeps_its_round_of_sub_agents() -> None:
    """Ctrl-C while a blocking stream's round of two sub-agents runs on its thread: the round is cancelled and both sub-runs are kept, so resuming runs nothing that had ended again.

    The interruption is thrown into the stream where it waits for the round's
    events, where Ctrl-C reaches a blocking stream."""
    gate = Gate()
    lead = _side_by_side(gate, "slow")
    events = iter(lead.stream("go"))
    _until_call(events, "slow")
    error = thrown_into(events)
    state = saved_state_on(error)
    second = next(c for c in state.calls if c.call.name == "second")
    assert second.status == "to_run"
    assert second.child is not None  # kept where it stopped: not the round's start
    gate.holding = False
    response = _resumed(lead, state, stream=True)
    assert (
        response.text == "lead(first: quick first, quick first | second: quick second, slow second)"
    )
    assert gate.ran["quick:second"] == 1
    assert gate.ran["model:second"] == 3
    assert gate.ran["slow:second"] == 1
    assert gate.ran["quick:first"] == 2
    assert gate.ran["model:first"] == 3


def test_ctrl_c_in_a_blocking_stream_keeps_a_lone_sub_agent() -> None:
    """Ctrl-C while a blocking stream's step runs one sub-agent (no timeout) on its thread: the
    sub-agent runs on that thread's event loop, so it is cancelled and kept where it stopped,
    and resuming runs none of its finished model calls or tools again (it ran blocking, out of
    reach, and resuming started it from its beginning)."""
    gate = Gate()
    lead = _caller(gate, "lead", _worker(gate, "bottom").as_tool())
    events = iter(lead.stream("go"))
    _until_call(events, "slow")
    error = thrown_into(events)
    state = saved_state_on(error)
    assert _kept_path(state) == ["bottom"]
    gate.holding = False
    response = _resumed(lead, state, stream=True)
    assert response.text == "lead(bottom: quick bottom, slow bottom)"
    assert gate.ran == {"model:lead": 2, "model:bottom": 3, "quick:bottom": 1, "slow:bottom": 1}


def test_ctrl_c_in_a_blocking_workflow_stream_keeps_its_step() -> None:
    """Ctrl-C thrown into a blocking workflow stream (where its caller is busy with an event)
    reaches the run it streams: the error carries the state, the step agent kept where it
    stopped, and resuming runs none of its finished work again."""
    gate = Gate()
    flow = Sequence(_worker(gate, "first", "quick"), _worker(gate, "second"), name="flow")
    events = iter(flow.stream("go"))
    _until_call(events, "slow")
    error = thrown_into(events)
    state = saved_state_on(error)
    assert _kept_path(state) == ["second"]
    gate.holding = False
    resumed = flow.resume_stream(state)
    list(resumed)
    assert resumed.response.output == "second: quick second, slow second"
    assert gate.ran == {
        "model:first": 3,
        "quick:first": 2,
        "model:second": 3,
        "quick:second": 1,
        "slow:second": 1,
    }


def test_ctrl_c_in_a_blocking_stream_does_not_wait_for_work_a_tool_handed_to_a_thread() -> None:
    """Ctrl-C while a sub-agent's tool waits on ``asyncio.to_thread`` work: the stream raises
    without waiting for that thread (which nothing can stop), and the round is kept.

    Were the stream to wait for the round's loop to shut its executor down, it
    would raise only once ``hold`` returned (the gate is let go after the raise)."""
    gate = Gate()
    lead = _side_by_side(gate, "offload")
    events = iter(lead.stream("go"))
    _until_call(events, "offload")
    assert gate.offloading.wait(60)  # the work runs on its thread
    error = thrown_into(events)
    assert not gate.offloaded.is_set()  # raised while the thread still works
    gate.release.set()
    assert gate.offloaded.wait(60)
    state = saved_state_on(error)
    gate.holding = False
    response = _resumed(lead, state, stream=True)
    assert response.text == (
        "lead(first: quick first, quick first | second: quick second, offload second)"
    )
    assert gate.ran["quick:second"] == 1
    assert gate.ran["model:first"] == 3


def test_a_round_interrupted_before_it_attached_never_starts() -> None:
    """Ctrl-C before the round's thread attached its cancel: the round does not start
    (the stream raises with the round's start, so running it would run its calls twice)."""
    interrupt = RoundInterrupt()
    assert interrupt.fire() is False
    ran: list[str] = []

    async def calls() -> str:
        ran.append("calls")
        return "done"

    async def round_() -> str:
        return await _interruptible(calls(), interrupt)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(round_())
    assert ran == []
    assert interrupt.attach(lambda: None) is False
    with pytest.raises(KeyboardInterrupt):  # nor does a round that would run blocking
        run_calls_sync([], interrupt=interrupt)


def test_a_cancelled_workflow_step_with_a_timeout_continues_where_it_stopped() -> None:
    """A workflow's agent step with its own timeout (run on a task of its own), cancelled midway, is continued on resume from JSON."""
    gate = Gate()
    flow = Sequence(
        _worker(gate, "first", "quick"), Task(_worker(gate, "second"), timeout=100), name="flow"
    )

    async def go() -> None:
        state = await _cancelled(gate, flow.arun("go"))
        assert _kept_path(state) == ["second"]
        gate.holding = False
        response = await flow.aresume(state)
        assert response.text == "second: quick second, slow second"

    asyncio.run(go())
    assert gate.ran == {
        "model:first": 3,
        "quick:first": 2,
        "model:second": 3,
        "quick:second": 1,
        "slow:second": 1,
    }


def test_only_the_calls_own_sub_run_is_kept() -> None:
    """An interruption carrying a state that is not the call's sub-run (a deeper one a layer did not replace) keeps nothing: the call starts over rather than resume the wrong run."""
    from toolfold.runtime.drive._executor import kept_sub_run

    bottom = _worker(Gate(), "bottom")

    def interrupted_in(run_id: str) -> BaseException:
        with pytest.raises(RuntimeError) as failed:  # a state in mid-run, from a failing model
            bottom.evolve(model=FunctionModel(lambda r: 1 / 0)).run("go", run_id=run_id)
        exc = asyncio.CancelledError()
        exc.state = failed.value.state  # type: ignore[attr-defined]
        return exc

    kept: dict[int, Any] = {}
    for index, run_id in enumerate(["top/c1", "top/c1@3", "top/c1/c7", "top/c2", "elsewhere"]):
        kept_sub_run(kept, index, "c1", "bottom", interrupted_in(run_id), "top")
    assert sorted(kept) == [0, 1]
    assert kept[0].child.run_id == "top/c1"


def test_ctrl_c_in_a_blocking_stream_stops_a_lone_sub_agent_after_its_blocking_tool() -> None:
    """Ctrl-C while a lone sub-agent (run blocking on the step's thread) waits in a sync tool:
    the stream waits for the tool, the sub-agent stops before its next model call, and
    resuming runs neither that tool nor the sub-agent's earlier model calls again."""
    ran: Counter[str] = Counter()
    reached = threading.Event()
    released = threading.Event()

    @tool
    def wait(key: str) -> str:
        """A blocking tool that returns once the round is interrupted.

        Args:
            key: What to look up.
        """
        ran["wait"] += 1
        if ran["wait"] == 1:
            interrupt = watched_interrupt()
            assert interrupt is not None  # run on the round's thread, watched
            interrupt.attach(released.set)  # (fired by the Ctrl-C below)
            reached.set()
            released.wait(60)
        return f"waited {key}"

    def bottom_reply(request: ModelRequest) -> Any:
        ran["model:bottom"] += 1
        return "bottom done" if _results(request) else call("wait", {"key": "x"})

    bottom = Agent(FunctionModel(bottom_reply), name="bottom", tools=[wait])
    lead = _caller(Gate(), "lead", bottom.as_tool())
    events = iter(lead.stream("go"))
    _until_call(events, "wait")
    assert reached.wait(60)
    error = thrown_into(events)
    state = saved_state_on(error)
    assert _kept_path(state) == ["bottom"]
    assert ran == {"wait": 1, "model:bottom": 1}
    response = _resumed(lead, state, stream=True)
    assert response.text == "lead(bottom done)"
    assert ran == {"wait": 1, "model:bottom": 2}


def _asking_bottom(ran: Counter[str], asking: threading.Event, answer: threading.Event) -> Agent:
    """The agent ``bottom``: its model's first reply (a call to ``look``) comes once ``answer``
    is set, ``asking`` set meanwhile; then ``bottom done``. ``ran`` counts its model calls and
    ``look``'s runs."""

    @tool
    def look(key: str) -> str:
        """A tool that answers at once.

        Args:
            key: What to look up.
        """
        ran["look"] += 1
        return f"looked {key}"

    def bottom_reply(request: ModelRequest) -> Any:
        ran["model:bottom"] += 1
        if _results(request):
            return "bottom done"
        if ran["model:bottom"] == 1:
            asking.set()
            assert answer.wait(60)  # (the reply comes once the stream waits for it)
        return call("look", {"key": "x"})

    return Agent(FunctionModel(bottom_reply), name="bottom", tools=[look])


def _interrupted_asking(
    lead: Agent, asking: threading.Event, tell: Callable[[], None], let_go: Callable[[], None]
) -> BaseException:
    """Ctrl-C thrown into a blocking stream of ``lead`` once its lone sub-agent's step began
    and its model is ``asking``, ``tell`` told of the wait for it: the interruption, once
    ``let_go`` ran (whatever happened) and the sub-agent's thread ended (cut, it goes on)."""
    try:
        events = iter(lead.stream("go"))
        for event in events:
            if isinstance(event, SubRunEvent):  # (the sub-agent's step began)
                break
        assert asking.wait(60)
        with interrupt_waits(tell), pytest.raises(KeyboardInterrupt) as caught:
            events.throw(KeyboardInterrupt())
    finally:
        let_go()
        join_step_threads()
    return caught.value


@pytest.mark.parametrize("second", [False, True], ids=["once", "twice"])
def test_ctrl_c_in_a_blocking_stream_keeps_the_reply_a_lone_sub_agent_waited_for(
    second: bool,
) -> None:
    """Ctrl-C while a lone sub-agent (run blocking on the step's thread) waits for its model's
    streamed reply: the stream says it waits, the reply is read to its end and kept, and
    resuming does not ask for it again; a second Ctrl-C as the wait is told stops at once,
    and the reply, cut, is asked for again on resume."""
    ran: Counter[str] = Counter()
    asking = threading.Event()
    answer = threading.Event()
    told: list[str] = []

    def tell() -> None:
        told.append("waiting")
        if second:
            ctrl_c()
        else:
            answer.set()

    lead = _caller(Gate(), "lead", _asking_bottom(ran, asking, answer).as_tool())
    state = saved_state_on(_interrupted_asking(lead, asking, tell, answer.set))
    assert told == ["waiting"]
    assert _kept_path(state) == ["bottom"]
    (kept,) = [c.child for c in state.calls if c.child is not None]
    assert kept is not None
    kinds = [e.kind for e in kept.log]
    assert kinds == (["run_started"] if second else ["run_started", "model_responded"])
    response = _resumed(lead, state, stream=True)
    assert response.text == "lead(bottom done)"
    assert ran == {"model:bottom": 3 if second else 2, "look": 1}


@pytest.mark.parametrize("how", ["abandoned", "twice"])
def test_a_lone_sub_agent_stops_reading_a_streamed_reply_nobody_keeps(how: str) -> None:
    """Once nobody keeps a blocking stream's lone sub-agent's streamed reply (the caller left
    the stream, or a second Ctrl-C stopped waiting for it), the sub-agent's thread stops
    reading it at its next chunk, not at its end."""
    read: list[Any] = []
    sizes: list[int] = []
    reading = threading.Event()
    go = threading.Event()
    text = FunctionModel(lambda request: "x" * 160)

    def chunks(request: ModelRequest) -> Any:
        events = list(text.stream_sync(request))
        sizes.append(len(events))
        for event in events:
            read.append(event)
            if len(read) == 3:
                reading.set()
                assert go.wait(30)
            yield event

    sub = Agent(FunctionModel(lambda request: "x" * 160, stream_function=chunks), name="sub")
    lead = _caller(Gate(), "lead", sub.as_tool())
    events = iter(lead.stream("go"))
    try:
        for event in events:
            if isinstance(event, SubRunEvent):  # (the sub-agent began)
                break
        assert reading.wait(30)
        if how == "abandoned":
            events.close()  # (as ``break``)
        else:
            with interrupt_waits(ctrl_c), pytest.raises(KeyboardInterrupt):
                events.throw(KeyboardInterrupt())
    finally:
        go.set()
        join_step_threads()  # (the sub-agent's thread ends its read)
    assert sizes[0] > 3
    assert len(read) == 3


def test_a_second_ctrl_c_keeps_the_reply_a_lone_sub_agent_read_before_its_calls_ran(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A second Ctrl-C landing once a blocking stream's lone sub-agent read its reply, as it
    shows the calls it makes (before they run), keeps the reply: resuming runs its call
    without asking its model again."""
    ran: Counter[str] = Counter()
    asking = threading.Event()
    answer = threading.Event()
    release = threading.Event()
    told: list[str] = []
    shown = _loop.ToolCallEvent

    def showing(call_: Any, disposition: Any) -> Any:
        if call_.name == "look" and not ran["shown"]:
            ran["shown"] += 1
            ctrl_c()
            assert release.wait(30)  # (the second Ctrl-C lands while it stands here)
        return shown(call_, disposition)

    def tell() -> None:
        told.append("waiting")
        answer.set()

    monkeypatch.setattr(_loop, "ToolCallEvent", showing)
    lead = _caller(Gate(), "lead", _asking_bottom(ran, asking, answer).as_tool())

    def let_go() -> None:
        answer.set()
        release.set()

    caught = _interrupted_asking(lead, asking, tell, let_go)
    monkeypatch.undo()
    assert told == ["waiting"]
    assert ran["shown"] == 1
    state = saved_state_on(caught)
    (kept,) = [c.child for c in state.calls if c.child is not None]
    assert kept is not None
    assert [e.kind for e in kept.log] == ["run_started", "model_responded"]
    response = _resumed(lead, state, stream=True)
    assert response.text == "lead(bottom done)"
    assert ran["model:bottom"] == 2
    assert ran["look"] == 1


class _SyncOnly:
    """A user's model with blocking methods only: its async API raises."""

    name = "mine:sync"

    def __init__(self) -> None:
        self.inner = FunctionModel(lambda request: "sub says hi")

    def request_sync(self, request: ModelRequest) -> Any:
        return self.inner.request_sync(request)

    def stream_sync(self, request: ModelRequest) -> Any:
        return self.inner.stream_sync(request)

    async def request(self, request: ModelRequest) -> Any:
        raise NotImplementedError("sync only")

    def stream(self, request: ModelRequest) -> Any:
        raise NotImplementedError("sync only")


def _lone_sub_agent_streamed(sub: Agent) -> Any:
    """The response of a blocking stream whose step calls ``sub`` alone."""
    lead = Agent(
        ScriptedModel([ScriptedModel.call("sub", {"input": "go"}), "done"]),
        name="lead",
        tools=[sub.as_tool()],
    )
    stream = lead.stream("go")
    list(stream)
    return stream.response


def test_a_blocking_stream_calls_a_lone_sub_agents_model_through_its_blocking_api() -> None:
    """A blocking stream runs a lone sub-agent as a blocking run: a model with blocking
    methods only answers there (its async API is never called)."""
    response = _lone_sub_agent_streamed(Agent(_SyncOnly(), name="sub"))  # type: ignore[arg-type]
    assert response.steps[0].tool_results[0].content == "sub says hi"


def test_a_blocking_stream_uses_a_lone_sub_agents_injected_sync_http_client() -> None:
    """A sub-agent whose provider model was given a blocking ``httpx.Client`` streams through
    it in a blocking stream's step (no async client is asked for)."""
    import json

    import httpx

    import toolfold

    def answer(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["stream"] is True
        chunks = [
            {
                "id": "r1",
                "model": "gpt-test",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": "sub hello"},
                        "finish_reason": None,
                    }
                ],
            },
            {
                "id": "r1",
                "model": "gpt-test",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            },
        ]
        text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(
            200, content=text.encode(), headers={"content-type": "text/event-stream"}
        )

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        model = toolfold.model("openai:gpt-test", api_key="sk-x", http_client=client)
        response = _lone_sub_agent_streamed(Agent(model, name="sub"))
    assert response.steps[0].tool_results[0].content == "sub hello"


def test_a_lone_sub_agents_sync_tool_in_a_blocking_stream_may_run_its_own_event_loop() -> None:
    """A ``blocking=False`` sync tool of a lone sub-agent in a blocking stream runs with no
    event loop around it, as in a blocking run: ``asyncio.run`` inside it works."""

    async def half() -> str:
        return "inner loop"

    seen: list[str] = []

    @tool(blocking=False)
    def nested() -> str:
        """Run a coroutine to its end."""
        seen.append(asyncio.run(half()))
        return seen[-1]

    sub = Agent(
        ScriptedModel([ScriptedModel.call("nested", {}), "sub done"]), name="sub", tools=[nested]
    )
    response = _lone_sub_agent_streamed(sub)
    assert seen == ["inner loop"]
    assert response.steps[0].tool_results[0].content == "sub done"


def test_ctrl_c_in_a_blocking_stream_cancels_the_sub_agents_a_lone_sub_agent_runs_side_by_side() -> (
    None
):
    """Ctrl-C while a lone sub-agent (run blocking on the step's thread) runs two sub-agents of
    its own on an event loop: they are cancelled, the whole tree is kept where it stopped, and
    resuming runs nothing that had ended again."""
    gate = Gate()
    mid = attrs.evolve(_side_by_side(gate, "slow"), name="mid")
    top = _caller(gate, "top", mid.as_tool())
    events = iter(top.stream("go"))
    _until_call(events, "slow")
    error = thrown_into(events)
    state = saved_state_on(error)
    (held,) = [c for c in state.calls if c.child is not None]
    second = next(c for c in held.child.calls if c.call.name == "second")
    assert second.status == "to_run"
    assert second.child is not None
    gate.holding = False
    response = _resumed(top, state, stream=True)
    assert response.text.startswith("top(lead(")
    assert gate.ran["quick:second"] == 1
    assert gate.ran["slow:second"] == 1


async def _athrown_at_slow(events: Any, exc: BaseException) -> None:
    """Read an async stream up to a sub-run's call to ``slow``, then throw ``exc`` into it."""
    async for event in events:
        if _calls(event):
            await events.athrow(exc)


@pytest.mark.parametrize("thrown", [KeyboardInterrupt, asyncio.CancelledError])
def test_an_interrupt_thrown_into_an_async_stream_keeps_its_round_of_sub_agents(
    thrown: type[BaseException],
) -> None:
    """Ctrl-C or a cancellation thrown into an async stream at a sub-run's event, while its
    round of two sub-agents runs: both sub-runs are kept, so resuming runs nothing that had
    ended again."""
    gate = Gate()
    lead = _side_by_side(gate, "slow")
    exc = thrown()
    with pytest.raises(thrown):
        asyncio.run(_athrown_at_slow(lead.stream("go").__aiter__(), exc))
    state = state_of(exc)
    assert isinstance(state, RunState)
    state = RunState.from_json(state.to_json())
    second = next(c for c in state.calls if c.call.name == "second")
    assert second.status == "to_run"
    assert second.child is not None  # kept where it stopped: not the round's start
    gate.holding = False
    response = _resumed(lead, state, stream=True)
    assert (
        response.text == "lead(first: quick first, quick first | second: quick second, slow second)"
    )
    assert gate.ran["quick:second"] == 1
    assert gate.ran["model:second"] == 3
    assert gate.ran["slow:second"] == 1
    assert gate.ran["quick:first"] == 2
    assert gate.ran["model:first"] == 3


@pytest.mark.parametrize("thrown", [KeyboardInterrupt, asyncio.CancelledError])
def test_an_interrupt_thrown_into_an_async_workflow_stream_keeps_its_step(
    thrown: type[BaseException],
) -> None:
    """Ctrl-C or a cancellation thrown into an async workflow stream reaches the run it
    streams: the error carries the state, the step agent kept where it stopped, and
    resuming runs none of its finished work again."""
    gate = Gate()
    flow = Sequence(_worker(gate, "first", "quick"), _worker(gate, "second"), name="flow")
    exc = thrown()
    with pytest.raises(thrown):
        asyncio.run(_athrown_at_slow(flow.stream("go").__aiter__(), exc))
    state = state_of(exc)
    assert isinstance(state, RunState)
    state = RunState.from_json(state.to_json())
    assert _kept_path(state) == ["second"]
    gate.holding = False
    resumed = flow.resume_stream(state)
    list(resumed)
    assert resumed.response.output == "second: quick second, slow second"
    assert gate.ran == {
        "model:first": 3,
        "quick:first": 2,
        "model:second": 3,
        "quick:second": 1,
        "slow:second": 1,
    }
