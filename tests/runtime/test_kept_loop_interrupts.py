"""Ctrl-C landing at the edges of a blocking round on the main thread's kept event loop.

A signal's handler runs between any two lines of Python in the main thread: these
tests raise KeyboardInterrupt as it would, from a trace function, at the line where
a round's result was lost or its loop was left broken (no timing involved).
"""

from __future__ import annotations

import asyncio
import inspect
import selectors
import signal
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, ClassVar

import pytest
from garbage import still_alive

from toolfold import Agent, ModelRequest, Parallel, RunState, state_of, tool
from toolfold.runtime import _conduct
from toolfold.runtime.drive import _executor, _join, _kept_loop, _loop
from toolfold.testing import FunctionModel

call = FunctionModel.call

Tracer = Callable[[FrameType, str, Any], Any]


class _PayRound:
    """A step calling ``watch`` (async, id "w") and ``pay`` (sync, id "a"): on the kept loop."""

    def __init__(self) -> None:
        self.paid = 0

        @tool
        def pay() -> str:
            """Pay (a side effect that must not run twice)."""
            self.paid += 1
            return "paid"

        @tool
        async def watch() -> str:
            """Watch."""
            return "watched"

        def reply(request: ModelRequest) -> Any:
            results = [r.content for m in request.messages for r in m.tool_results]
            if results:
                return "saw: " + " | ".join(results)
            return [call("watch", {}, id="w"), call("pay", {}, id="a")]

        self.agent = Agent(FunctionModel(reply), tools=[watch, pay])

    def interrupted(self, tracer: Tracer) -> RunState:
        """The state a blocking run leaves when ``tracer`` raises Ctrl-C in it."""
        sys.settrace(tracer)
        try:
            with pytest.raises(KeyboardInterrupt) as caught:
                self.agent.run("go")
        finally:
            sys.settrace(None)
        state = state_of(caught.value)
        assert isinstance(state, RunState), f"no state on {caught.value!r}"
        return state


def _line_of(function: Callable[..., Any], text: str, after: str | None = None) -> int:
    """The number of ``function``'s first line holding ``text`` (after the first holding
    ``after``, if given)."""
    lines, first = inspect.getsourcelines(function)
    start = 0 if after is None else next(i for i, line in enumerate(lines) if after in line)
    return first + next(i for i, line in enumerate(lines) if i >= start and text in line)


def _ctrl_c_at(
    function: Callable[..., Any],
    text: str,
    when: Callable[[FrameType], bool],
    after: str | None = None,
) -> tuple[Tracer, list[int]]:
    """A trace function raising KeyboardInterrupt once, at ``function``'s line holding
    ``text`` (after ``after``'s, if given), when ``when`` holds there; and the list it
    notes that it did in."""
    code = function.__code__
    line = _line_of(function, text, after)
    fired: list[int] = []

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and frame.f_lineno == line and not fired and when(frame):
            fired.append(line)
            raise KeyboardInterrupt
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    return tracer, fired


@pytest.fixture
def pays() -> Iterator[_PayRound]:
    """A `_PayRound`; the kept loop is dropped after it, whatever the test left on it."""
    yield _PayRound()
    loop = _kept_loop._KeptLoop.loop
    if loop is not None:
        _kept_loop._drop_kept(loop)


def test_ctrl_c_after_a_round_on_the_kept_loop_ended_keeps_its_calls(
    pays: _PayRound,
) -> None:
    """Ctrl-C landing once a round on the kept loop returned, before the run stored its
    outcomes, keeps every call that ran, async and sync: resuming runs neither again."""
    tracer, fired = _ctrl_c_at(
        _kept_loop.run_kept, "_cancel_leftovers(loop)", lambda frame: pays.paid == 1
    )
    state = pays.interrupted(tracer)
    assert fired
    assert [(c.call.id, c.status) for c in state.calls] == [("w", "done"), ("a", "done")]
    assert pays.agent.resume(RunState.from_json(state.to_json())).text == "saw: watched | paid"
    assert pays.paid == 1


def test_ctrl_c_as_a_branch_of_the_join_ends_keeps_the_call_it_returned(
    pays: _PayRound,
) -> None:
    """Ctrl-C landing in the join's branch just after the sync call's outcome was stored
    there (the task not ended yet) keeps the call: resuming does not run it again."""

    def after_pay(frame: FrameType) -> bool:
        return getattr(frame.f_locals.get("value"), "tool_name", None) == "pay"

    tracer, fired = _ctrl_c_at(_join._branch, "join.running -= 1", after_pay)
    state = pays.interrupted(tracer)
    assert fired
    assert ("a", "done") in [(c.call.id, c.status) for c in state.calls]
    assert pays.agent.resume(RunState.from_json(state.to_json())).text == "saw: watched | paid"
    assert pays.paid == 1


def test_ctrl_c_before_the_kept_loop_stopped_leaves_the_next_run_working(
    pays: _PayRound,
) -> None:
    """Ctrl-C landing once a round on the kept loop completed, before the loop ran its stop
    callback, leaves no stale stop behind: the next blocking run completes."""
    fired: list[str] = []

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if event == "call" and code.co_name == "select" and code.co_filename == selectors.__file__:
            loop = frame.f_back.f_locals.get("self") if frame.f_back is not None else None
            ready = getattr(loop, "_ready", ())
            names = [getattr(getattr(h, "_callback", None), "__name__", "") for h in ready]
            if "_run_until_complete_cb" in names and not fired:
                fired.append("select")
                raise KeyboardInterrupt  # as a signal arriving during that poll
        return None

    state = pays.interrupted(tracer)
    assert fired
    assert pays.agent.run("again").text == "saw: watched | paid"
    resumed = pays.agent.resume(RunState.from_json(state.to_json()))
    assert resumed.text == "saw: watched | paid"
    assert pays.paid == 2  # once for each run: the first's was kept


def test_a_blocking_round_on_the_kept_loop_leaves_the_signal_wakeup_fd_alone(
    pays: _PayRound, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blocking round on the kept loop installs no signal wakeup fd of its own (process
    state the program owns): it neither sets nor reads one."""
    touched: list[tuple[Any, ...]] = []
    original = signal.set_wakeup_fd

    def recorded(*args: Any, **options: Any) -> int:
        touched.append(args)
        return original(*args, **options)

    monkeypatch.setattr(signal, "set_wakeup_fd", recorded)
    assert pays.agent.run("go").text == "saw: watched | paid"
    assert touched == []


def test_a_kept_loop_dropped_after_ctrl_c_is_closed_and_not_kept_alive(pays: _PayRound) -> None:
    """The kept loop a Ctrl-C dropped is closed, and nothing (an exit hook) keeps it alive:
    runs interrupted again and again leave no loops behind."""
    tracer, fired = _ctrl_c_at(
        _kept_loop.run_kept, "_cancel_leftovers(loop)", lambda frame: pays.paid == 2
    )
    assert pays.agent.run("go").text == "saw: watched | paid"
    first = _kept_loop._KeptLoop.loop
    assert first is not None
    dropped = weakref.ref(first)
    del first
    pays.interrupted(tracer)
    assert fired
    assert _kept_loop._KeptLoop.loop is None
    assert still_alive([dropped]) == []  # (waited for: a worker lets go of the loop's inbox)


def test_a_second_ctrl_c_in_the_kept_loop_clean_up_leaves_it_to_the_next_run(
    pays: _PayRound,
) -> None:
    """A second Ctrl-C landing as an interrupted round's loop is cleaned up leaves that loop,
    its cancelled tasks unfinished, to the next blocking run, which ends them and closes it
    (closed at once, they would be destroyed pending)."""

    @tool
    def hold() -> str:
        """Hold (its outcome waits on the dropped loop, unread)."""
        return "held"

    @tool
    async def stop() -> str:
        """Ctrl-C, raised as the signal's would be: by the loop, outside any task (one the
        tool raised would be raised by the run's task, once the round's tasks had ended)."""

        def ctrl_c() -> None:
            raise KeyboardInterrupt

        asyncio.get_running_loop().call_soon(ctrl_c)
        await asyncio.Event().wait()  # never set: the Ctrl-C leaves the loop first
        return "never"

    def reply(request: ModelRequest) -> Any:
        if any(m.tool_results for m in request.messages):
            return "ended"
        return [call("hold", {}, id="h"), call("stop", {}, id="s")]

    agent = Agent(FunctionModel(reply), tools=[hold, stop])
    tracer, fired = _ctrl_c_at(_kept_loop._drop_kept, "loop.run_forever()", lambda frame: True)
    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt):
            agent.run("go")
    finally:
        sys.settrace(None)
    assert fired
    left = _kept_loop._KeptLoop.dropped
    assert left is not None
    tasks = asyncio.all_tasks(left)
    assert tasks
    assert not any(task.done() for task in tasks)
    assert pays.agent.run("next").text == "saw: watched | paid"
    assert _kept_loop._KeptLoop.dropped is None
    assert left.is_closed()
    assert all(task.done() for task in tasks)


class _SubRunRound:
    """A step calling the sub-agent ``payer`` (id "s", whose own sync tool ``pay`` pays),
    the sync ``note`` ("n") and the async ``watch`` ("w"): on the kept loop."""

    def __init__(self, timeout: float | None = None) -> None:
        """``timeout``: the sub-agent's and ``watch``'s (their calls then wait with one)."""
        self.ran = {"pay": 0, "note": 0, "watch": 0}
        self.answered = False  # the sub-agent gave its answer

        @tool
        def pay() -> str:
            """Pay (inside the sub-agent; a side effect that must not run twice)."""
            self.ran["pay"] += 1
            return "paid"

        @tool
        def note() -> str:
            """Note."""
            self.ran["note"] += 1
            return "noted"

        @tool(timeout=timeout)
        async def watch() -> str:
            """Watch, once the sub-agent answered (its own tool ran, its run no longer)."""
            for _ in range(10_000):  # (bounded: a sub-run that never answers fails the test)
                if self.answered:
                    break
                await asyncio.sleep(0)
            assert self.answered, "the sub-agent never answered"
            self.ran["watch"] += 1
            return "watched"

        def sub_reply(request: ModelRequest) -> Any:
            if any(m.tool_results for m in request.messages):
                self.answered = True
                return "sub done"
            return [call("pay", {}, id="p")]

        sub = Agent(FunctionModel(sub_reply), tools=[pay], name="payer")

        def reply(request: ModelRequest) -> Any:
            results = [r.content for m in request.messages for r in m.tool_results]
            if results:
                return "saw: " + " | ".join(results)
            return [
                call("payer", {"input": "go"}, id="s"),
                call("note", {}, id="n"),
                call("watch", {}, id="w"),
            ]

        self.agent = Agent(FunctionModel(reply), tools=[sub.as_tool(timeout=timeout), note, watch])

    def run_interrupted_then_resumed(self, tracer: Tracer) -> RunState:
        """The state Ctrl-C from ``tracer`` leaves; the run is then resumed from it (stored)."""
        sys.settrace(tracer)
        try:
            with pytest.raises(KeyboardInterrupt) as caught:
                self.agent.run("go")
        finally:
            sys.settrace(None)
        state = state_of(caught.value)
        assert isinstance(state, RunState), f"no state on {caught.value!r}"
        resumed = self.agent.resume(RunState.from_json(state.to_json()))
        assert resumed.text == "saw: sub done | noted | watched"
        return state


def test_ctrl_c_after_a_round_on_the_kept_loop_ended_keeps_its_sub_run_and_async_call() -> None:
    """Ctrl-C landing once a round of a sub-agent, a sync and an async tool on the kept loop
    returned keeps all three: resuming runs none again (the sub-agent's own tool included)."""
    round_ = _SubRunRound()
    tracer, fired = _ctrl_c_at(_kept_loop.run_kept, "_cancel_leftovers(loop)", lambda frame: True)
    state = round_.run_interrupted_then_resumed(tracer)
    assert fired
    assert [(c.call.id, c.status) for c in state.calls] == [
        ("s", "done"),
        ("n", "done"),
        ("w", "done"),
    ]
    assert round_.ran == {"pay": 1, "note": 1, "watch": 1}


def _call_id(frame: FrameType) -> str | None:
    """The id of the call that ``frame`` (the executor's, with a ``job``) runs."""
    job = frame.f_locals.get("job")
    return job.call.id if isinstance(job, _executor.ToolJob) else None


def test_ctrl_c_as_an_async_call_on_the_kept_loop_returns_keeps_it() -> None:
    """Ctrl-C landing once an async tool's task ended, as its call reads the result, keeps
    it (beside the sub-agent and the sync tool): resuming does not run it again."""
    round_ = _SubRunRound()
    code = _executor._run_one.__code__
    line = _line_of(_executor._run_one, "value = await work") + 1  # (back from the await)
    fired: list[int] = []

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and frame.f_lineno == line and not fired and _call_id(frame) == "w":
            fired.append(line)
            raise KeyboardInterrupt
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    state = round_.run_interrupted_then_resumed(tracer)
    assert fired
    assert ("w", "done") in [(c.call.id, c.status) for c in state.calls]
    assert round_.ran == {"pay": 1, "note": 1, "watch": 1}


def _kept_and_ran_once(
    round_: _SubRunRound, tracer: Tracer, fired: list[int], call_id: str
) -> None:
    """Ctrl-C from ``tracer`` fired in call ``call_id``, which ended, and left it kept:
    resuming ``round_`` runs none of its tools twice."""
    state = round_.run_interrupted_then_resumed(tracer)
    assert fired
    assert (call_id, "done") in [(c.call.id, c.status) for c in state.calls]
    assert round_.ran == {"pay": 1, "note": 1, "watch": 1}


def test_ctrl_c_as_a_sub_run_call_on_the_kept_loop_makes_its_outcome_keeps_it() -> None:
    """Ctrl-C landing once a sub-agent used as a tool (no timeout) ended, as its call makes
    its outcome, keeps it: resuming runs neither it nor its own tool again."""
    round_ = _SubRunRound()
    tracer, fired = _ctrl_c_at(
        _executor._run_one,
        "outcome = _finish(job, value)",
        lambda frame: _call_id(frame) == "s",
        after="job.tool.invoke(arguments, job.context)",
    )
    _kept_and_ran_once(round_, tracer, fired, "s")


def test_ctrl_c_as_an_async_call_on_the_kept_loop_makes_its_outcome_keeps_it() -> None:
    """Ctrl-C landing once an async tool (no timeout) returned, as its call makes its
    outcome, keeps it: resuming does not run it again."""
    round_ = _SubRunRound()
    tracer, fired = _ctrl_c_at(
        _executor._run_one,
        "outcome = _finish(job, value)",
        lambda frame: _call_id(frame) == "w",
        after="value = await work",
    )
    _kept_and_ran_once(round_, tracer, fired, "w")


@pytest.mark.parametrize("call_id", ["s", "w"])
def test_ctrl_c_as_a_timed_call_on_the_kept_loop_ends_keeps_it(call_id: str) -> None:
    """Ctrl-C landing once a sub-agent or async tool with a timeout ended, at the first line
    its call runs after its wait, keeps it: resuming runs neither again."""
    round_ = _SubRunRound(timeout=60)
    code = _executor._run_one.__code__
    waited = _line_of(_executor._run_one, "await asyncio.wait({work}, timeout=timeout)")
    fired: list[int] = []

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and frame.f_lineno > waited and not fired and _call_id(frame) == call_id:
            fired.append(frame.f_lineno)
            raise KeyboardInterrupt
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    _kept_and_ran_once(round_, tracer, fired, call_id)


def test_ctrl_c_as_a_parallel_step_on_the_kept_loop_ends_keeps_it() -> None:
    """Ctrl-C landing once a step of a blocking `Parallel` (on the kept loop) ended, as its
    outcome is made, keeps it: resuming does not run the step (its own tool) again."""
    paid = {"A": 0, "B": 0}

    def agent(name: str) -> Agent:
        @tool(name=f"pay_{name}")
        def pay() -> str:
            """Pay (a side effect that must not run twice)."""
            paid[name] += 1
            return "paid"

        def reply(request: ModelRequest) -> Any:
            if any(m.tool_results for m in request.messages):
                return f"{name} done"
            return [call(f"pay_{name}", {}, id="p")]

        return Agent(FunctionModel(reply), tools=[pay], name=name)

    flow = Parallel(agent("A"), agent("B"), name="both")
    tracer, fired = _ctrl_c_at(
        _conduct._ran_async,
        "state = ended.state",
        lambda frame: frame.f_locals["step"][0].name == "A",
    )
    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            flow.run("go")
    finally:
        sys.settrace(None)
    assert fired
    state = state_of(caught.value)
    assert isinstance(state, RunState), f"no state on {caught.value!r}"
    assert ("A", "done") in [(c.call.id, c.status) for c in state.calls]
    resumed = flow.resume(RunState.from_json(state.to_json()))
    assert resumed.output == {"A": "A done", "B": "B done"}
    assert paid["A"] == 1


def test_a_second_ctrl_c_in_the_kept_loop_clean_up_keeps_a_sync_call_that_had_returned(
    pays: _PayRound, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second Ctrl-C landing in the dropped loop's clean-up keeps the sync call that had
    returned on its thread before the first: resuming does not run it again."""
    ended = threading.Event()
    called = _executor._call_ticketed

    def noting_its_end(*args: Any) -> Any:
        try:
            return called(*args)
        finally:
            ended.set()  # (its ticket marked ended)

    monkeypatch.setattr(_executor, "_call_ticketed", noting_its_end)
    paid: list[int] = []
    stops: list[int] = []

    @tool
    def pay() -> str:
        """Pay (a side effect that must not run twice)."""
        paid.append(1)
        return "paid"

    @tool
    async def stop() -> str:
        """Ctrl-C once ``pay`` ended on its thread, the loop held so its task never resumed."""
        if not stops:  # the first time only
            stops.append(1)
            assert ended.wait(30)
            raise KeyboardInterrupt
        return "stopped"

    def reply(request: ModelRequest) -> Any:
        if any(m.tool_results for m in request.messages):
            return "ended"
        return [call("pay", {}, id="p"), call("stop", {}, id="s")]

    agent = Agent(FunctionModel(reply), tools=[pay, stop])
    tracer, fired = _ctrl_c_at(_kept_loop._drop_kept, "loop.run_forever()", lambda frame: True)
    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            agent.run("go")
    finally:
        sys.settrace(None)
    assert fired
    state = state_of(caught.value)
    assert isinstance(state, RunState)
    assert [(c.call.id, c.status) for c in state.calls] == [("p", "done"), ("s", "to_run")]
    assert agent.resume(RunState.from_json(state.to_json())).text == "ended"
    assert paid == [1]


class _Formatted:
    """A tool's result that counts how often it was made into text."""

    made = 0

    def __str__(self) -> str:
        _Formatted.made += 1
        return "formatted"

    __repr__ = __str__


class _CtrlCAfterStore(dict[int, Any]):
    """A round's record raising Ctrl-C just after `_run_one` stored the ``make`` call's
    outcome in it, once: as a signal handled there (before the call's code leaves its
    ``try``) would."""

    fired: ClassVar[list[int]] = []

    def __setitem__(self, index: int, outcome: Any) -> None:
        super().__setitem__(index, outcome)
        caller = sys._getframe(1).f_code
        if caller is _executor._run_one.__code__ and outcome.tool_name == "make" and not self.fired:
            self.fired.append(index)
            raise KeyboardInterrupt


def test_ctrl_c_as_a_sync_call_on_the_kept_loop_is_kept_keeps_its_outcome_made_once(
    pays: _PayRound, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C landing just after a sync call's outcome was kept keeps that outcome: the
    result is not made into text a second time, and resuming does not run the call again."""
    _Formatted.made = 0
    _CtrlCAfterStore.fired = []
    monkeypatch.setattr(_loop, "_round_record", lambda jobs: _CtrlCAfterStore())
    ran: list[int] = []

    @tool
    def make() -> _Formatted:
        """Make a result."""
        ran.append(1)
        return _Formatted()

    @tool
    async def watch() -> str:
        """Watch."""
        return "watched"

    def reply(request: ModelRequest) -> Any:
        results = [r.content for m in request.messages for r in m.tool_results]
        if results:
            return "saw: " + " | ".join(results)
        return [call("watch", {}, id="w"), call("make", {}, id="m")]

    agent = Agent(FunctionModel(reply), tools=[watch, make])
    with pytest.raises(KeyboardInterrupt) as caught:
        agent.run("go")
    assert _CtrlCAfterStore.fired
    assert _Formatted.made == 1
    state = state_of(caught.value)
    assert isinstance(state, RunState)
    assert ("m", "done") in [(c.call.id, c.status) for c in state.calls]
    assert agent.resume(RunState.from_json(state.to_json())).text == "saw: watched | formatted"
    assert ran == [1]


def test_ctrl_c_as_a_dropped_kept_loop_closes_is_held_until_it_closed() -> None:
    """A Ctrl-C landing as a dropped kept loop closes (in the middle of closing its self-pipe)
    is raised once the loop is closed: half closed, its garbage collection would fail."""
    import asyncio.selector_events

    loop = asyncio.new_event_loop()
    close_pipe = asyncio.selector_events.BaseSelectorEventLoop._close_self_pipe  # type: ignore[attr-defined]
    code = close_pipe.__code__
    line = _line_of(close_pipe, "self._ssock = None")
    fired: list[int] = []

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line" and frame.f_lineno == line and not fired:
            fired.append(line)
            signal.raise_signal(signal.SIGINT)  # (Python's handler runs at the next line)
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt):
            _kept_loop._drop_kept(loop)
    finally:
        sys.settrace(None)
    assert fired
    assert loop.is_closed()
    assert _kept_loop._KeptLoop.dropped is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
