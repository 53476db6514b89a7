"""Ctrl-C in a blocking round waits for the sync calls running on worker threads.

A thread cannot be stopped from outside: a call left running would run again
on resume, beside itself (a payment made twice). So the first Ctrl-C lets no
further call start, waits for those running, and keeps their results in the
interruption's ``.state``; a second Ctrl-C stops the wait. Ctrl-C is a real
SIGINT sent to the main thread from a tool; the tools wait on events, never
on time.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest
from interrupt_helpers import (
    ctrl_c,
    interrupted,
    join_step_threads,
    saved_state_on,
    state_on,
)

from toolfold import Agent, ModelRequest, RunState, Sequence, Tool, tool
from toolfold.runtime.drive import _executor, _loop, _shells, _sync_calls, _workers
from toolfold.runtime.drive._kept_loop import RoundInterrupt
from toolfold.runtime.drive._shells import interrupt_waits
from toolfold.testing import FunctionModel

call = FunctionModel.call


class _Round:
    """A step calling ``pay`` (order 1, id "a"; blocks until released), ``kick`` (id "b":
    Ctrl-C once ``pay`` runs) and ``note`` (id "c", queued behind them)."""

    def __init__(self, *, timeout: float | None = None) -> None:
        self.ran: list[str] = []
        self.paying = threading.Event()
        self.release = threading.Event()
        self.told: list[str] = []
        self.on_tell: Callable[[], None] = self.release.set

        @tool(timeout=timeout)
        def pay(order: int) -> str:
            """Pay an order (a side effect that must not run twice).

            Args:
                order: The order to pay.
            """
            self.paying.set()
            assert self.release.wait(30)
            self.ran.append(f"pay {order}")
            return f"paid {order}"

        @tool
        def kick() -> str:
            """Press Ctrl-C once ``pay`` runs."""
            assert self.paying.wait(30)
            ctrl_c()
            return "kicked"

        @tool
        def note(text: str) -> str:
            """Note a text.

            Args:
                text: What to note.
            """
            self.ran.append(f"note {text}")
            return f"noted {text}"

        self.tools: list[Tool[..., Any]] = [pay, kick, note]

    def agent(self) -> Agent[Any, Any]:
        """Two calls at once: ``note`` waits for a slot, and never starts before Ctrl-C."""
        calls = [
            call("pay", {"order": 1}, id="a"),
            call("kick", {}, id="b"),
            call("note", {"text": "x"}, id="c"),
        ]

        def reply(request: ModelRequest) -> Any:
            results = [r.content for m in request.messages for r in m.tool_results]
            return "saw: " + " | ".join(results) if results else calls

        return Agent(FunctionModel(reply), tools=self.tools, max_concurrency=2)

    def tell(self) -> None:
        self.told.append("waiting")
        self.on_tell()

    def run(self, agent: Agent[Any, Any], how: str) -> RunState:
        """Run ``agent`` blocking (``run``, or a blocking ``stream``); the state Ctrl-C left."""
        return state_on(interrupted(lambda: _blocking(agent, how), self.tell))


def _blocking(agent: Agent[Any, Any], how: str) -> None:
    if how == "run":
        agent.run("go")
    else:
        for _ in agent.stream("go"):
            pass


@pytest.fixture
def payments() -> Iterator[_Round]:
    """A round whose blocked ``pay`` is released at the end, whatever the test did."""
    round_ = _Round()
    try:
        yield round_
    finally:
        round_.on_tell = lambda: None
        round_.release.set()


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_waits_for_a_running_sync_call_and_keeps_its_result(
    how: str, payments: _Round
) -> None:
    """Ctrl-C while a sync call runs on a worker waits for it: its result is kept, resume skips it."""
    agent = payments.agent()
    state = payments.run(agent, how)
    assert [(c.call.id, c.status) for c in state.calls] == [
        ("a", "done"),
        ("b", "done"),
        ("c", "to_run"),  # not started when Ctrl-C came: it never started
    ]
    assert payments.told == ["waiting"]  # said once, while ``pay`` still ran
    assert payments.ran == ["pay 1"]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert payments.ran == ["pay 1", "note x"]  # pay did not run again
    assert response.text == "saw: paid 1 | kicked | noted x"


def test_a_second_ctrl_c_stops_waiting_and_leaves_the_call_to_run_again(
    payments: _Round,
) -> None:
    """A second Ctrl-C while the run waits raises at once; the running call is not kept."""
    payments.on_tell = ctrl_c  # the second Ctrl-C, as the wait is announced
    agent = payments.agent()
    state = payments.run(agent, "run")
    assert payments.told == ["waiting"]
    assert not payments.release.is_set()  # ``pay`` was still running
    [paying] = [c for c in state.calls if c.call.id == "a"]
    assert paying.status == "to_run"  # as before the wait existed: it runs again on resume
    assert payments.ran == []


def test_a_call_waited_for_still_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call with its own timeout, waited for after Ctrl-C, ends the wait with a timeout result."""
    payments = _Round(timeout=0.5)
    told = threading.Event()
    payments.on_tell = told.set  # ``pay`` is never released: only its timeout ends the wait
    timeout_of = _sync_calls._timeout_of
    # No deadline until the wait is told: ``pay`` cannot time out before Ctrl-C is handled,
    # however late (its 0.5 s count from its start then).
    monkeypatch.setattr(
        _sync_calls, "_timeout_of", lambda job: timeout_of(job) if told.is_set() else None
    )
    try:
        state = payments.run(payments.agent(), "run")
    finally:
        payments.release.set()
    paying, kicking, noting = state.calls
    assert (paying.status, kicking.status, noting.status) == ("done", "done", "to_run")
    assert payments.told == ["waiting"]
    assert paying.outcome == "timeout"
    assert paying.result is not None
    assert paying.result.content == "Error: tool 'pay' timed out after 0.5 s."


def test_the_main_thread_never_waits_for_a_report_without_a_bound() -> None:
    """A round's wait in the main thread is bounded, so a Ctrl-C that came just before it blocked
    is raised soon (a signal that arrives before a lock wait begins does not wake it)."""
    ticket = _workers.Ticket(0)
    ticket.started = 0.0  # running, with no timeout of its own
    job = _executor.ToolJob(None, None, None)  # type: ignore[arg-type]  # (no tool: no timeout)
    ready = [(job, {})]
    bound = _sync_calls._next_deadline({0: ticket}, ready)
    assert bound is not None
    assert 0.0 < bound <= 1.0
    elsewhere: list[float | None] = []
    thread = threading.Thread(
        target=lambda: elsewhere.append(_sync_calls._next_deadline({0: ticket}, ready))
    )
    thread.start()
    thread.join(30)
    assert elsewhere == [None]  # other threads get no Ctrl-C: they wait for the report alone


def test_ctrl_c_as_a_report_is_read_loses_no_call(
    payments: _Round, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C landing as the main thread reads a call's end report keeps that call's result,
    and the wait ends once the running call returns (the end is read from the call's ticket)."""
    read = _workers.SyncInbox.get
    lost: list[str] = []
    reads_after_release = [0]

    def get(inbox: _workers.SyncInbox, timeout: float | None) -> Any:
        if payments.release.is_set():
            reads_after_release[0] += 1
            if reads_after_release[0] > 20:  # the wait goes on (each read ends within 0.25 s)
                raise KeyboardInterrupt  # for a report that never comes: a second Ctrl-C
        # Until the Ctrl-C, a read waits for a report: a bounded one that timed out would
        # let the round read kick's end from its ticket first and start note in its slot
        # (seen once on a loaded CI machine), before the Ctrl-C this test places there.
        report = read(inbox, timeout if lost else None)
        _ticket, ok, value = report
        if not lost and ok is not None and value == "kicked":
            lost.append(value)  # as a SIGINT handled once the C call returned, before the
            raise KeyboardInterrupt  # report is stored: what the caller got is lost
        return report

    @tool(name="kick")
    def kick_quietly() -> str:
        """End once ``pay`` runs, with no Ctrl-C: the one as its end is read is the only one."""
        assert payments.paying.wait(30)
        return "kicked"

    monkeypatch.setattr(_workers.SyncInbox, "get", get)
    payments.tools[1] = kick_quietly
    agent = payments.agent()
    state = payments.run(agent, "run")
    assert lost == ["kicked"]
    assert [(c.call.id, c.status) for c in state.calls] == [
        ("a", "done"),
        ("b", "done"),  # its report was lost to the Ctrl-C, its end was not
        ("c", "to_run"),
    ]
    assert payments.told == ["waiting"]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert payments.ran == ["pay 1", "note x"]  # nothing ran twice
    assert response.text == "saw: paid 1 | kicked | noted x"


def test_a_tool_raising_system_exit_ends_the_run_without_waiting(payments: _Round) -> None:
    """A tool's SystemExit beside a running call is raised at once: no Ctrl-C wait, no notice."""

    @tool(name="kick")
    def bail() -> str:
        """Exit once ``pay`` runs."""
        assert payments.paying.wait(30)
        raise SystemExit(3)

    payments.tools[1] = bail
    with pytest.raises(SystemExit) as caught, interrupt_waits(payments.tell):
        payments.agent().run("go")
    assert caught.value.code == 3
    assert payments.told == []  # (a wait would be told, and would release ``pay``)
    assert not payments.release.is_set()  # ``pay`` still runs: nothing waited for it
    assert payments.ran == []


def test_ctrl_c_in_a_streamed_sub_agent_round_starts_no_queued_call(payments: _Round) -> None:
    """Ctrl-C in a blocking stream whose sub-agent's round runs sync calls on workers (on the
    round's own thread): a call queued in that round never starts; the running one is kept."""
    fired = threading.Event()

    def tell() -> None:  # told by the stream's thread once the round's interruption fired
        payments.release.set()
        fired.set()

    @tool(name="kick")
    def kick_then_end() -> str:
        """Ctrl-C once ``pay`` runs; end once the round was interrupted, ``note`` still queued."""
        assert payments.paying.wait(30)
        ctrl_c()
        assert fired.wait(30)
        return "kicked"

    payments.tools[1] = kick_then_end
    payments.on_tell = tell
    sub = payments.agent()
    calls_sub = call("sub", {"input": "go"}, id="s")

    def lead_reply(request: ModelRequest) -> Any:
        results = [r.content for m in request.messages for r in m.tool_results]
        return "lead: " + results[0] if results else calls_sub

    lead = Agent(FunctionModel(lead_reply), name="lead", tools=[sub.as_tool(name="sub")])
    payments.run(lead, "stream")
    assert payments.told == ["waiting"]
    assert payments.ran == ["pay 1"]  # ``note`` (queued behind ``pay`` and ``kick``) never ran


class _LoopRound:
    """A step that runs on an event loop: ``watch`` (id "w", an async tool, or a sub-agent
    calling it: waits until cancelled), ``pay`` (id "a": presses Ctrl-C once ``watch`` runs,
    then blocks until released) and ``note`` (id "c", queued behind them)."""

    def __init__(self, beside: str, *, timeout: float | None = None) -> None:
        self.ran: list[str] = []
        self.cancelled: list[str] = []
        self.watching = threading.Event()
        self.release = threading.Event()
        self.told: list[str] = []
        self.on_tell: Callable[[], None] = self.release.set

        @tool(timeout=timeout)
        def pay(order: int) -> str:
            """Pay an order (a side effect that must not run twice); Ctrl-C the first time.

            Args:
                order: The order to pay.
            """
            if not self.cancelled:
                assert self.watching.wait(30)
                ctrl_c()
                assert self.release.wait(30)
            self.ran.append(f"pay {order}")
            return f"paid {order}"

        @tool
        async def watch() -> str:
            """Wait until cancelled (the first time); then answer at once."""
            if not self.cancelled:
                self.watching.set()
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.cancelled.append("watch")
                    raise
            self.ran.append("watch")
            return "watched"

        @tool
        def note(text: str) -> str:
            """Note a text.

            Args:
                text: What to note.
            """
            self.ran.append(f"note {text}")
            return f"noted {text}"

        watcher: Tool[..., Any] = watch
        if beside == "agent":

            def sub_reply(request: ModelRequest) -> Any:
                results = [r.content for m in request.messages for r in m.tool_results]
                return "sub " + results[0] if results else call("watch", {})

            sub = Agent(FunctionModel(sub_reply), name="watch", tools=[watch])
            watcher = sub.as_tool(name="watch")
        self.tools: list[Tool[..., Any]] = [watcher, pay, note]
        self.watch_input: dict[str, Any] = {"input": "go"} if beside == "agent" else {}

    def agent(self) -> Agent[Any, Any]:
        """Two calls at once: ``note`` waits for a slot, and never starts before Ctrl-C."""
        calls = [
            call("watch", self.watch_input, id="w"),
            call("pay", {"order": 1}, id="a"),
            call("note", {"text": "x"}, id="c"),
        ]

        def reply(request: ModelRequest) -> Any:
            results = [r.content for m in request.messages for r in m.tool_results]
            return "saw: " + " | ".join(results) if results else calls

        return Agent(FunctionModel(reply), tools=self.tools, max_concurrency=2)

    def tell(self) -> None:
        self.told.append("waiting")
        self.on_tell()

    def run(self, agent: Agent[Any, Any], how: str) -> RunState:
        """Run ``agent`` blocking (``run``, or a blocking ``stream``); the state Ctrl-C left."""
        return state_on(interrupted(lambda: _blocking(agent, how), self.tell))


@pytest.fixture
def on_loop() -> Iterator[Callable[..., _LoopRound]]:
    """Makes `_LoopRound`s whose blocked ``pay`` is released at the end, whatever the test did."""
    made: list[_LoopRound] = []

    def make(beside: str, **options: Any) -> _LoopRound:
        made.append(_LoopRound(beside, **options))
        return made[-1]

    try:
        yield make
    finally:
        for round_ in made:
            round_.on_tell = lambda: None
            round_.release.set()


@pytest.mark.parametrize("beside", ["async", "agent"])
@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_in_a_round_on_an_event_loop_waits_for_its_running_sync_call(
    how: str, beside: str, on_loop: Callable[..., _LoopRound]
) -> None:
    """Ctrl-C in a blocking round on an event loop (a sync tool beside an async tool or a
    sub-agent) cancels the async part, waits for the running sync call and keeps its result:
    resuming runs it no more, and the queued call never started before."""
    payments = on_loop(beside)
    agent = payments.agent()
    state = payments.run(agent, how)
    assert payments.cancelled == ["watch"]  # the async part was cancelled, as arun's
    assert payments.told == ["waiting"]  # said once, while ``pay`` still ran
    assert payments.ran == ["pay 1"]  # ``note`` (queued) never started
    assert [(c.call.id, c.status) for c in state.calls] == [
        ("w", "to_run"),
        ("a", "done"),
        ("c", "to_run"),
    ]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert sorted(payments.ran) == ["note x", "pay 1", "watch"]  # pay ran once over both
    watched = "sub watched" if beside == "agent" else "watched"
    assert response.text == f"saw: {watched} | paid 1 | noted x"


@pytest.mark.parametrize(("how", "beside"), [("run", "async"), ("stream", "agent")])
def test_a_second_ctrl_c_stops_waiting_for_a_sync_call_on_an_event_loop(
    how: str, beside: str, on_loop: Callable[..., _LoopRound]
) -> None:
    """A second Ctrl-C while a round on an event loop waits raises at once; the running sync
    call is not kept (it runs again on resume)."""
    payments = on_loop(beside)
    payments.on_tell = ctrl_c  # the second Ctrl-C, as the wait is announced
    state = payments.run(payments.agent(), how)
    assert payments.told == ["waiting"]
    assert not payments.release.is_set()  # ``pay`` was still running
    assert [(c.call.id, c.status) for c in state.calls if c.call.id != "w"] == [
        ("a", "to_run"),
        ("c", "to_run"),
    ]
    assert payments.ran == []


def test_a_round_going_on_after_a_second_ctrl_c_does_not_write_into_the_state_being_built(
    monkeypatch: pytest.MonkeyPatch, on_loop: Callable[..., _LoopRound]
) -> None:
    """After a second Ctrl-C in a blocking stream, a sync call that ends on the round's thread
    while the run builds its interrupted state is not slipped into it (unsettled, unfiltered):
    the state holds what had ended at the second Ctrl-C."""
    payments = on_loop("agent")
    payments.on_tell = ctrl_c
    building = _loop._round_interrupted

    def round_ends_meanwhile(*args: Any) -> None:
        if threading.current_thread() is threading.main_thread():  # (not the sub-agent's)
            payments.release.set()  # ``pay`` ends, and its round with it, on its thread
            join_step_threads()
        building(*args)

    monkeypatch.setattr(_loop, "_round_interrupted", round_ends_meanwhile)
    state = payments.run(payments.agent(), "stream")
    assert payments.ran == ["pay 1"]  # it did end, once the state was being built
    assert [(c.call.id, c.status) for c in state.calls if c.call.id != "w"] == [
        ("a", "to_run"),
        ("c", "to_run"),
    ]


def test_a_sync_call_waited_for_on_an_event_loop_still_times_out(
    monkeypatch: pytest.MonkeyPatch, on_loop: Callable[..., _LoopRound]
) -> None:
    """A sync call with a timeout, waited for after Ctrl-C in a round on an event loop, ends
    the wait with a timeout result."""
    payments = on_loop("async", timeout=0.5)
    told = threading.Event()
    payments.on_tell = told.set  # ``pay`` is never released: only its timeout ends the wait
    timeout_of = _sync_calls._timeout_of
    original_wait = asyncio.wait

    async def wait_without_timeout(*args: Any, **options: Any) -> Any:
        options.pop("timeout", None)  # on the loop, ``pay`` times out only once Ctrl-C came
        return await original_wait(*args, **options)

    monkeypatch.setattr(asyncio, "wait", wait_without_timeout)
    # Nor in the wait before it is told: its 0.5 s count from its start then.
    monkeypatch.setattr(
        _sync_calls, "_timeout_of", lambda job: timeout_of(job) if told.is_set() else None
    )
    state = payments.run(payments.agent(), "run")
    assert payments.told == ["waiting"]
    assert payments.cancelled == ["watch"]
    [paying] = [c for c in state.calls if c.call.id == "a"]
    assert (paying.status, paying.outcome) == ("done", "timeout")
    assert paying.result is not None
    assert paying.result.content == "Error: tool 'pay' timed out after 0.5 s."


def test_a_cancelled_arun_does_not_wait_for_its_running_sync_call(
    on_loop: Callable[..., _LoopRound],
) -> None:
    """Cancelling ``arun`` (not a blocking run's Ctrl-C) stays prompt: the sync call running
    beside an async tool is not waited for."""
    payments = on_loop("async")
    paying = threading.Event()
    paid = threading.Event()

    @tool(name="pay")
    def pay_quietly(order: int) -> str:
        """Pay an order once released, pressing no Ctrl-C: the test cancels the run itself.

        Args:
            order: The order to pay.
        """
        paying.set()
        try:
            assert payments.release.wait(30)
            return f"paid {order}"
        finally:
            paid.set()

    payments.tools[1] = pay_quietly

    async def main() -> bool:
        task = asyncio.ensure_future(payments.agent().arun("go"))
        await asyncio.to_thread(paying.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return paid.is_set()

    assert asyncio.run(main()) is False  # cancelled while ``pay`` still ran: not waited for
    assert payments.cancelled == ["watch"]
    assert payments.told == []


@pytest.mark.parametrize("beside", ["async", "agent"])
def test_ctrl_c_before_an_async_call_on_an_event_loop_began_leaves_it_to_run(
    beside: str, on_loop: Callable[..., _LoopRound]
) -> None:
    """Ctrl-C landing in a blocking round on an event loop as its async tool (alone, or a
    sub-agent's) is about to begin, a sync call running: the async call never ran, so it is
    kept to run (not ended), and the sync call is waited for and kept; resuming runs each once."""
    payments = on_loop(beside)
    paying = threading.Event()

    @tool(name="pay")
    def pay_quietly(order: int) -> str:
        """Pay an order once released, pressing no Ctrl-C: the test's trace function does.

        Args:
            order: The order to pay.
        """
        if not paying.is_set():
            paying.set()
            assert payments.release.wait(30)
        payments.ran.append(f"pay {order}")
        return f"paid {order}"

    payments.tools[1] = pay_quietly
    fired: list[str] = []

    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        # The tool's coroutine entered for its first step (a signal's handler runs there too).
        code = frame.f_code
        entered = event == "call" and code.co_name == "watch" and code.co_filename == __file__
        if entered and not fired and paying.wait(30):  # ``pay`` runs on its worker thread
            fired.append(event)
            raise KeyboardInterrupt

    agent = payments.agent()
    sys.settrace(tracer)
    try:
        state = payments.run(agent, "run")
    finally:
        sys.settrace(None)
    assert fired
    assert payments.told == ["waiting"]  # said while ``pay`` still ran
    assert payments.cancelled == []  # ``watch`` never began: nothing of it to cancel
    assert payments.ran == ["pay 1"]
    assert [(c.call.id, c.status) for c in state.calls] == [
        ("w", "to_run"),
        ("a", "done"),
        ("c", "to_run"),
    ]
    payments.cancelled.append("(resuming)")  # (``watch`` now answers at once)
    response = agent.resume(RunState.from_json(state.to_json()))
    assert sorted(payments.ran) == ["note x", "pay 1", "watch"]  # pay ran once over both
    watched = "sub watched" if beside == "agent" else "watched"
    assert response.text == f"saw: {watched} | paid 1 | noted x"


class _SecondCtrlC:
    """A tree whose sync tool ``pay`` presses Ctrl-C the first time it runs, then blocks
    until released; the wait it causes is told, and a second Ctrl-C answers that. ``fast``
    answers at once; ``ran`` counts the tools' runs and each agent's model calls."""

    concurrency = 1  # (the calls its agents' steps run at once)

    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()
        self.release = threading.Event()
        self.told: list[str] = []
        self.sent = threading.Event()

        @tool
        def fast(x: str) -> str:
            """A tool that answers at once.

            Args:
                x: What to answer.
            """
            self.ran["fast"] += 1
            return f"fast {x}"

        @tool
        def pay(order: int) -> str:
            """Pay an order (a side effect that must not run twice).

            Args:
                order: The order to pay.
            """
            self.ran["pay"] += 1
            if self.ran["pay"] == 1:
                self._before_ctrl_c()
                ctrl_c()
                assert self.release.wait(30)
            return f"paid {order}"

        self.fast: Tool[..., Any] = fast
        self.pay: Tool[..., Any] = pay

    def _before_ctrl_c(self) -> None:
        """What ``pay`` waits for before it presses Ctrl-C (nothing)."""

    def _agent(self, name: str, tools: list[Any], first: list[Any]) -> Agent[Any, Any]:
        def reply(request: ModelRequest) -> Any:
            self.ran[f"model:{name}"] += 1
            results = [r.content for m in request.messages for r in m.tool_results]
            return f"{name}({', '.join(results)})" if results else first

        return Agent(FunctionModel(reply), name=name, tools=tools, max_concurrency=self.concurrency)

    def tell(self) -> None:
        self.told.append("waiting")
        ctrl_c()  # the second Ctrl-C, as the wait is announced (from whichever thread)
        self.sent.set()  # (the main thread got it first: it is a signal)

    def _run(self, runner: Any, how: str) -> RunState:
        """The state two Ctrl-Cs left in ``runner``'s run (``run``, or a blocking ``stream``),
        its step's threads ended (released once its state was kept)."""
        try:
            error = interrupted(lambda: _blocking(runner, how), self.tell)
        finally:
            self.release.set()
            join_step_threads()  # (a stream's round goes on on its thread)
        return saved_state_on(error)


class _SubAgentRound(_SecondCtrlC):
    """``lead`` calls the agent ``sub`` as a tool (through the agent ``mid`` when ``deep``);
    ``sub``'s step calls ``fast`` then ``pay`` one at a time (or ``pay`` alone), and ``pay``
    presses Ctrl-C the first time, then blocks until released; the wait it causes is told,
    and a second Ctrl-C answers that."""

    def __init__(self, shape: str) -> None:
        super().__init__()
        paying = call("pay", {"order": 1}, id="p")
        first = [paying] if shape == "alone" else [call("fast", {"x": "1"}, id="f"), paying]
        sub = self.sub = self._agent("sub", [self.fast, self.pay], first)
        inner = sub.as_tool()
        if shape == "deep":
            inner = self._agent("mid", [inner], [call("sub", {"input": "go"}, id="s")]).as_tool()
        self.lead = self._agent("lead", [inner], [call(inner.name, {"input": "go"}, id="c")])

    def run(self, how: str, runner: Any = None) -> RunState:
        """The state two Ctrl-Cs left in the lead run (or ``runner``'s: ``run``, or a
        blocking ``stream``), its step's thread ended (released once its state was kept)."""
        return self._run(self.lead if runner is None else runner, how)


@pytest.mark.parametrize(
    ("how", "shape"),
    [
        ("run", "beside"),
        ("stream", "beside"),
        ("stream", "alone"),
        ("run", "deep"),
        ("stream", "deep"),
    ],
)
def test_a_second_ctrl_c_keeps_a_sub_agent_where_it_stood(how: str, shape: str) -> None:
    """A second Ctrl-C while a sub-agent's sync tool is waited for keeps the sub-agent (one or
    two deep) where it stood, blocking stream or not: resuming runs none of its finished model
    calls or tools again, only the tool that still ran."""
    round_ = _SubAgentRound(shape)
    state = round_.run(how)
    assert round_.told == ["waiting"]
    depth, kept = 0, state
    while kept.calls and kept.calls[0].child is not None:  # the sub-runs kept, down to ``sub``
        depth, kept = depth + 1, kept.calls[0].child
    assert depth == (2 if shape == "deep" else 1)
    ended = [(c.call.name, c.status) for c in kept.calls]
    assert ended == (
        [("pay", "to_run")] if shape == "alone" else [("fast", "done"), ("pay", "to_run")]
    )
    before = dict(round_.ran)
    response = round_.lead.resume(state)
    done = "paid 1" if shape == "alone" else "fast 1, paid 1"
    expected = f"sub({done})"
    if shape == "deep":
        expected = f"mid({expected})"
    assert response.text == f"lead({expected})"
    assert round_.ran["fast"] == (0 if shape == "alone" else 1)  # it ran once over both
    assert round_.ran["pay"] == before["pay"] + 1  # cut by the second Ctrl-C: run again
    assert round_.ran["model:sub"] == 2  # its first step was not asked again
    assert round_.ran["model:lead"] == 2
    assert round_.ran["model:mid"] == (2 if shape == "deep" else 0)


@pytest.mark.parametrize("how", ["run", "stream"])
def test_a_second_ctrl_c_keeps_a_workflow_steps_agent_where_it_stood(how: str) -> None:
    """A second Ctrl-C while a workflow step's agent waits for its sync tool keeps the agent
    where it stood, streamed or not: resuming runs only the tool that still ran."""
    round_ = _SubAgentRound("beside")
    flow = Sequence(round_.sub, name="flow")
    state = round_.run(how, flow)
    assert round_.told == ["waiting"]
    [kept] = [c.child for c in state.calls if c.child is not None]
    assert kept is not None
    assert [(c.call.name, c.status) for c in kept.calls] == [("fast", "done"), ("pay", "to_run")]
    response = flow.resume(state)
    assert response.output == "sub(fast 1, paid 1)"
    assert (round_.ran["fast"], round_.ran["pay"], round_.ran["model:sub"]) == (1, 2, 2)


class _BesideRound(_SecondCtrlC):
    """``mid``'s step runs the agent ``s1`` beside the sync tool ``pay`` (``mid`` called as a
    tool by ``lead`` when ``deep``). ``s1`` runs ``fast``, then waits for its model until
    cancelled; ``pay`` then presses Ctrl-C and blocks until released; the wait it causes is
    told, and a second Ctrl-C answers that."""

    concurrency = 2

    def __init__(self, deep: bool) -> None:
        super().__init__()
        self.asking = threading.Event()

        async def s1_reply(request: ModelRequest) -> Any:
            self.ran["model:s1"] += 1
            done = [r.content for m in request.messages for r in m.tool_results]
            if not done:
                return call("fast", {"x": "1"})
            if self.ran["model:s1"] == 2:  # (its answer, asked for once: cancelled by Ctrl-C)
                self.asking.set()
                await asyncio.wait_for(asyncio.Event().wait(), 30)
            return f"s1({', '.join(done)})"

        s1 = Agent(FunctionModel(s1_reply), name="s1", tools=[self.fast])
        first = [call("s1", {"input": "go"}, id="s"), call("pay", {"order": 1}, id="p")]
        self.top = mid = self._agent("mid", [s1.as_tool(), self.pay], first)
        if deep:
            self.top = self._agent("lead", [mid.as_tool()], [call("mid", {"input": "go"})])

    def _before_ctrl_c(self) -> None:
        assert self.asking.wait(30)  # (s1 waits for its model)

    def run(self, how: str) -> RunState:
        """The state two Ctrl-Cs left in the top run, its step's threads ended."""
        return self._run(self.top, how)


@pytest.mark.parametrize("how", ["run", "stream"])
@pytest.mark.parametrize("deep", [False, True], ids=["top", "deep"])
def test_a_second_ctrl_c_keeps_a_sub_agent_cancelled_beside_a_sync_tool(
    how: str, deep: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sub-agent the first Ctrl-C stopped beside a sync tool (in the top run, or in a
    sub-agent's step) is kept where it stopped when a second Ctrl-C stops the wait for the
    tool, blocking stream or not, even a second Ctrl-C landing as soon as the round was
    interrupted: resuming runs only the tool and the sub-agent's next model call."""
    round_ = _BesideRound(deep)
    fire = RoundInterrupt.fire
    held: list[bool] = []

    def fire_then_told(interrupt: RoundInterrupt) -> bool:
        fired = fire(interrupt)
        if threading.current_thread() is threading.main_thread() and not held:
            held.append(True)
            if not interrupt.waits:  # the round's own thread tells: its Ctrl-C lands here
                assert round_.sent.wait(30)
        return fired

    monkeypatch.setattr(RoundInterrupt, "fire", fire_then_told)
    state = round_.run(how)
    assert round_.told == ["waiting"]
    kept = state
    if deep:
        (mid,) = [c.child for c in state.calls]
        assert mid is not None
        kept = mid
    [(name, s1)] = [(c.call.name, c.child) for c in kept.calls if c.child is not None]
    assert name == "s1"
    assert s1 is not None
    assert [(c.call.name, c.status) for c in s1.calls] == [("fast", "done")]
    assert [(c.call.name, c.status) for c in kept.calls] == [("s1", "to_run"), ("pay", "to_run")]
    monkeypatch.undo()
    response = round_.top.resume(state)
    expected = "mid(s1(fast 1), paid 1)"
    assert response.text == (f"lead({expected})" if deep else expected)
    assert round_.ran["fast"] == 1  # it ran once over both
    assert round_.ran["pay"] == 2  # cut by the second Ctrl-C: run again
    assert round_.ran["model:s1"] == 3  # its first step was not asked again


def test_a_second_ctrl_c_keeps_a_sub_agent_whose_round_ends_as_it_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A blocking stream's lone sub-agent whose round ends just as a second Ctrl-C keeps
    what had ended (its thread keeping the sub-agent, stopped at its next step) is kept:
    resuming runs none of its finished model calls or tools again."""
    round_ = _SubAgentRound("beside")

    class _Ending(threading.Event):
        """The round's end: once the wait was told, the main thread's next look at it lets
        the round end first (pay returns, the sub-agent stops at its next step)."""

        def is_set(self) -> bool:
            if threading.current_thread() is threading.main_thread() and round_.told:
                round_.release.set()
                assert self.wait(30)
            return super().is_set()

    class _Threading:
        def __getattr__(self, name: str) -> Any:
            return getattr(threading, name)

    ending = _Threading()
    ending.Event = _Ending  # type: ignore[attr-defined]
    monkeypatch.setattr(_shells, "threading", ending)
    state = round_.run("stream")
    monkeypatch.undo()
    assert round_.told == ["waiting"]
    [kept] = [c.child for c in state.calls if c.child is not None]
    assert kept is not None
    assert [(c.call.name, c.status) for c in kept.calls] == [("fast", "done"), ("pay", "done")]
    response = round_.lead.resume(state)
    assert response.text == "lead(sub(fast 1, paid 1))"
    assert (round_.ran["fast"], round_.ran["pay"], round_.ran["model:sub"]) == (1, 1, 2)
