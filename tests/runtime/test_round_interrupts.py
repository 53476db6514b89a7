"""A round of calls stopped midway keeps the calls that had ended.

Ctrl-C in a blocking run or stream, and an ``on_event`` observer that raises,
stop a round of parallel calls: the state they leave (the interruption's
``.state``, the `RunError`'s) has the results of the calls that had ended
committed, so resuming it runs again only what had not. Interruptions are
injected deterministically: a tool or a model that raises KeyboardInterrupt
itself once the calls it waits for have ended.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import pytest

from toolfold import Agent, ModelRequest, RunError, RunState, Tool, state_of, tool
from toolfold.runtime import Event, ToolReturned
from toolfold.runtime.drive import _executor, _sync_calls, _workers
from toolfold.runtime.drive._shells import interrupt_waits
from toolfold.testing import FunctionModel

call = FunctionModel.call


def _charger(ran: list[int], interrupt: set[int]) -> Tool[..., Any]:
    """A sync tool (run on a worker thread) that raises Ctrl-C once for the orders in ``interrupt``."""

    @tool
    def charge(order: int) -> str:
        """Charge an order (a side effect that must not run twice).

        Args:
            order: The order to charge.
        """
        if order in interrupt:
            interrupt.discard(order)
            raise KeyboardInterrupt
        ran.append(order)
        return f"charged {order}"

    return charge


def _tool_results(request: ModelRequest) -> list[str]:
    return [r.content for m in request.messages for r in m.tool_results]


def _answer(calls: list[Any]) -> Callable[[ModelRequest], Any]:
    """A model that makes ``calls`` in one step, then answers with the results it saw."""

    def reply(request: ModelRequest) -> Any:
        results = _tool_results(request)
        return "saw: " + " | ".join(results) if results else calls

    return reply


def _interrupted_state(err: BaseException) -> RunState:
    state = state_of(err)
    assert isinstance(state, RunState), f"no state on {err!r}"
    return state


def _run(agent: Agent[Any, Any], how: str, **options: Any) -> None:
    """Run ``agent``: ``run``, a blocking ``stream``, ``arun`` or an async stream (``astream``)."""
    if how == "run":
        agent.run("go", **options)
    elif how == "stream":
        for _ in agent.stream("go", **options):
            pass
    else:
        asyncio.run(_run_async(agent, how, **options))


async def _run_async(agent: Agent[Any, Any], how: str, **options: Any) -> None:
    if how == "arun":
        await agent.arun("go", **options)
    else:
        async for _ in agent.stream("go", **options):
            pass


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_in_a_blocking_round_keeps_the_calls_that_had_ended(how: str) -> None:
    """Ctrl-C in a blocking run's or stream's round of sync calls commits those that ended."""
    ran: list[int] = []
    charge = _charger(ran, interrupt={2})
    calls = [
        call("charge", {"order": 1}, id="a"),
        call("charge", {"order": "two"}, id="bad"),  # ends at once: invalid arguments
        call("charge", {"order": 2}, id="b"),
    ]
    # One call at a time: "a" has ended when "b" raises Ctrl-C.
    agent = Agent(FunctionModel(_answer(calls)), tools=[charge], max_concurrency=1)
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(agent, how)
    state = _interrupted_state(caught.value)
    assert [(c.call.id, c.status) for c in state.calls] == [
        ("a", "done"),
        ("bad", "done"),
        ("b", "to_run"),
    ]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert ran == [1, 2]  # the resume ran "b" only
    assert response.text.startswith("saw: charged 1 | Invalid arguments for tool 'charge'")
    assert response.text.endswith(" | charged 2")


def _noted(monkeypatch: pytest.MonkeyPatch, call_id: str) -> threading.Event:
    """An event set once the executor noted, on the worker thread, that call ``call_id`` ended
    (after the tool returned: what an interruption then keeps, see `_call_noted`, and
    `_call_ticketed` in a blocking round on an event loop)."""
    ended = threading.Event()

    def told_after(note: Callable[..., Any]) -> Callable[..., Any]:
        def noted_then_told(job: Any, *args: Any) -> Any:
            try:
                return note(job, *args)
            finally:
                if job.call.id == call_id:
                    ended.set()

        return noted_then_told

    monkeypatch.setattr(_executor, "_call_noted", told_after(_executor._call_noted))
    monkeypatch.setattr(_executor, "_call_ticketed", told_after(_executor._call_ticketed))
    return ended


def _research_beside_lookup(monkeypatch: pytest.MonkeyPatch) -> tuple[Agent[Any, Any], list[str]]:
    """A top agent whose one step calls a plain tool and a sub-agent side by side.

    The sub-agent runs one tool of its own, then its model raises Ctrl-C once
    the plain call (on a worker thread, told to go on by the sub-agent's model)
    has ended: the event loop the step runs on is busy in that model, and has
    not yet learnt that the plain call ended.
    """
    ran: list[str] = []
    reached = threading.Event()
    looked_up = _noted(monkeypatch, "t1")
    interrupts = [KeyboardInterrupt()]

    @tool
    def lookup(key: str) -> str:
        """Look something up.

        Args:
            key: What to look up.
        """
        if key == "top":
            assert reached.wait(30)
        ran.append(key)
        return f"found {key}"

    def sub_reply(request: ModelRequest) -> Any:
        results = _tool_results(request)
        if not results:
            return call("lookup", {"key": "sub"})
        if interrupts:
            reached.set()
            assert looked_up.wait(30)
            raise interrupts.pop()
        return "sub answer after " + results[0]

    sub = Agent(
        FunctionModel(sub_reply), name="research", description="Research it.", tools=[lookup]
    )
    calls = [call("lookup", {"key": "top"}, id="t1"), call("research", {"input": "x"}, id="t2")]
    return Agent(FunctionModel(_answer(calls)), tools=[lookup, sub.as_tool()]), ran


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_in_a_sub_agent_keeps_the_plain_call_beside_it(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in a sub-agent keeps its sub-run and the plain call that ended beside it."""
    agent, ran = _research_beside_lookup(monkeypatch)
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(agent, how)
    state = _interrupted_state(caught.value)
    assert ran == ["sub", "top"]
    lookup, research = state.calls
    assert (lookup.call.id, lookup.status) == ("t1", "done")
    assert research.status == "to_run"
    assert research.child is not None
    assert research.child.step == 1  # the sub-run, kept where it stopped
    response = agent.resume(RunState.from_json(state.to_json()))
    assert ran == ["sub", "top"]  # neither lookup ran again
    assert response.text == "saw: found top | sub answer after found sub"


def _breaks_at(call_id: str) -> Callable[[Event], None]:
    """An ``on_event`` observer that raises when it sees the result of ``call_id``."""

    def observer(event: Event) -> None:
        if event.kind == "tool_returned" and event.call_id == call_id:
            raise ValueError("observer broke")

    return observer


@pytest.mark.parametrize("how", ["run", "stream", "arun", "astream"])
def test_an_observer_that_raises_mid_round_leaves_every_call_that_ran(how: str) -> None:
    """An on_event observer raising at a round's first result leaves all its calls committed."""
    ran: list[int] = []
    calls = [call("charge", {"order": 1}, id="a"), call("charge", {"order": 2}, id="b")]
    agent = Agent(FunctionModel(_answer(calls)), tools=[_charger(ran, interrupt=set())])
    with pytest.raises(RunError, match="on_event observer raised ValueError") as caught:
        _run(agent, how, on_event=_breaks_at("a"))
    state = caught.value.state
    assert state is not None
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "done"), ("b", "done")]
    assert sorted(ran) == [1, 2]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert sorted(ran) == [1, 2]  # nothing ran again
    assert response.text == "saw: charged 1 | charged 2"


def _charge_twice(ran: list[int], **options: Any) -> Agent[Any, Any]:
    """An agent whose first step charges orders 1 ("a") and 2 ("b") side by side."""
    calls = [call("charge", {"order": 1}, id="a"), call("charge", {"order": 2}, id="b")]
    return Agent(FunctionModel(_answer(calls)), tools=[_charger(ran, interrupt=set())], **options)


def _reported(monkeypatch: pytest.MonkeyPatch) -> dict[str, threading.Event]:
    """Events, by call id, set once the worker running a blocking round's call reported its end
    (the report is then in the round's inbox, read or not)."""
    reported: dict[str, threading.Event] = {}
    submit = _sync_calls.submit_sync

    def submit_told(
        inbox: _workers.SyncInbox, ticket: _workers.Ticket, function: Any, *args: Any
    ) -> None:
        told = reported.setdefault(args[0].call.id, threading.Event())

        class Telling:
            def put(self, ticket: _workers.Ticket, ok: bool | None, value: Any) -> None:
                inbox.put(ticket, ok, value)
                if ok is not None:
                    told.set()

        submit(Telling(), ticket, function, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(_sync_calls, "submit_sync", submit_told)
    return reported


def _resumed_runs_nothing_again(agent: Agent[Any, Any], state: RunState, ran: list[int]) -> None:
    before = list(ran)
    response = agent.resume(RunState.from_json(state.to_json()))
    assert ran == before  # nothing ran again
    assert response.text == "saw: charged 1 | charged 2"


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_while_a_call_is_handed_to_a_worker_keeps_it_once_it_ended(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in a blocking round's hand-off of a call that a worker then ran keeps its result."""
    reported = _reported(monkeypatch)
    submit = _sync_calls.submit_sync

    def slow_hand_off(inbox: Any, ticket: Any, function: Any, *args: Any) -> None:
        # Ctrl-C lands as the worker starts (a cold thread's start waits for it), the call
        # already run on it.
        submit(inbox, ticket, function, *args)
        if args[0].call.id == "a":
            assert reported["a"].wait(30)
            raise KeyboardInterrupt

    monkeypatch.setattr(_sync_calls, "submit_sync", slow_hand_off)
    ran: list[int] = []
    agent = _charge_twice(ran)
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(agent, how)
    state = _interrupted_state(caught.value)
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "done"), ("b", "to_run")]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert ran == [1, 2]  # the resume ran "b" only
    assert response.text == "saw: charged 1 | charged 2"


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_just_after_a_call_is_queued_drops_it_and_resuming_runs_it_once(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in a blocking round's hand-off once the call is queued, before a worker took it:
    the call never runs, and resuming runs each call once."""
    monkeypatch.setattr(_workers, "MAX_WORKERS", 1)
    pool = _workers._Workers()
    monkeypatch.setattr(_workers, "_WORKERS", pool)
    jobs = pool._jobs
    armed = [True]

    class Interrupting:
        def put(self, job: Any) -> None:
            jobs.put(job)
            # Ctrl-C lands once the put returned (as a signal handler runs), for call "a".
            if armed and isinstance(job[1], _workers.Ticket) and job[1].index == 0:
                armed.clear()
                raise KeyboardInterrupt

        def get(self) -> Any:
            return jobs.get()

    monkeypatch.setattr(pool, "_jobs", Interrupting())
    ran: list[int] = []
    agent = _charge_twice(ran)
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(agent, how)
    assert not armed
    state = _interrupted_state(caught.value)
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "to_run"), ("b", "to_run")]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert sorted(ran) == [1, 2]  # each ran once (on worker threads: in any order)
    assert response.text == "saw: charged 1 | charged 2"
    # The dropped call's reservation came back once: the pool's one worker, once it runs a
    # call queued after all these, is neither idle nor waited for.
    inbox, probe, release = _workers.SyncInbox(), _workers.Ticket(0), threading.Event()
    _workers.submit_sync(inbox, probe, release.wait, 10)
    try:
        assert inbox.get(10)[:2] == (probe, None)
        assert (pool._count, pool._idle, pool._backlog) == (1, 0, 0)
    finally:
        release.set()


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_while_a_result_is_made_keeps_it_and_the_calls_ended_since(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a blocking round makes a call's result keeps it, and a call whose end is unread."""
    reported = _reported(monkeypatch)
    making_a = threading.Event()
    finish = _executor._finish
    interrupts = [KeyboardInterrupt()]

    def slow_finish(job: Any, value: Any, started: float | None = None) -> Any:
        if job.call.id == "a" and interrupts:  # (a large result, formatted)
            making_a.set()
            assert reported["b"].wait(30)  # "b" ended meanwhile: its report is not read
            raise interrupts.pop()
        return finish(job, value, started)

    for module in (_executor, _sync_calls):  # (a round's results are made in both)
        monkeypatch.setattr(module, "_finish", slow_finish)
    ran: list[int] = []

    @tool
    def charge(order: int) -> str:
        """Charge an order; order 2 once order 1's result is being made.

        Args:
            order: The order to charge.
        """
        if order == 2:
            assert making_a.wait(30)
        ran.append(order)
        return f"charged {order}"

    calls = [call("charge", {"order": 1}, id="a"), call("charge", {"order": 2}, id="b")]
    agent = Agent(FunctionModel(_answer(calls)), tools=[charge])
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(agent, how)
    state = _interrupted_state(caught.value)
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "done"), ("b", "done")]
    _resumed_runs_nothing_again(agent, state, ran)


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_once_a_blocking_round_ended_keeps_all_of_it(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C after a blocking round's calls all ended, before the run took them, keeps them all."""
    timed = _executor._timed
    interrupts = [KeyboardInterrupt()]

    def interrupted_timing(outcomes: Any, started: float) -> Any:
        if len(outcomes) == 2 and interrupts:
            raise interrupts.pop()
        return timed(outcomes, started)

    for module in (_executor, _sync_calls):  # (both time a round's outcomes)
        monkeypatch.setattr(module, "_timed", interrupted_timing)
    ran: list[int] = []
    agent = _charge_twice(ran)
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(agent, how)
    state = _interrupted_state(caught.value)
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "done"), ("b", "done")]
    durations = [e.duration for e in state.log if isinstance(e, ToolReturned)]
    assert len(durations) == 2
    assert None not in durations  # timed as a round that ran on is
    _resumed_runs_nothing_again(agent, state, ran)


@pytest.mark.parametrize("how", ["run", "stream"])
def test_ctrl_c_on_a_busy_loop_keeps_a_timed_sync_call_that_ended(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while a round's event loop is busy keeps a sync call with a timeout that had ended."""
    charged = _noted(monkeypatch, "a")
    ran: list[int] = []
    interrupts = [KeyboardInterrupt()]

    @tool(timeout=30)
    def charge(order: int) -> str:
        """Charge an order.

        Args:
            order: The order to charge.
        """
        ran.append(order)
        return f"charged {order}"

    @tool
    async def busy() -> str:
        """Hold the event loop until "a" ended on its thread, then raise Ctrl-C once."""
        if interrupts:
            assert charged.wait(30)  # (blocking: the loop cannot learn that "a" ended)
            raise interrupts.pop()
        return "busy done"

    calls = [call("charge", {"order": 1}, id="a"), call("busy", {}, id="s")]
    agent = Agent(FunctionModel(_answer(calls)), tools=[charge, busy])
    with pytest.raises(KeyboardInterrupt) as caught:
        _run(agent, how)
    state = _interrupted_state(caught.value)
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "done"), ("s", "to_run")]
    response = agent.resume(RunState.from_json(state.to_json()))
    assert ran == [1]  # "a" did not run again
    assert response.text == "saw: charged 1 | busy done"


def _throw_at_first(events: Any, kind: str = "tool_result", nth: int = 0) -> None:
    """Read ``events``, throwing Ctrl-C into them at the first of ``kind`` (as ``toolfold run
    --stream`` does when it lands while an event is shown), or at the ``nth`` (from 0)."""
    seen = 0
    for event in events:
        if event.kind == kind:
            if seen == nth:
                events.throw(KeyboardInterrupt())
            seen += 1


@pytest.mark.parametrize("observed", [False, True])
def test_ctrl_c_thrown_into_a_stream_at_a_result_carries_the_round(observed: bool) -> None:
    """Ctrl-C thrown into a blocking stream at a result it shows carries the state with the round."""
    ran: list[int] = []
    agent = _charge_twice(ran)
    events = iter(agent.stream("go", on_event=(lambda e: None) if observed else None))
    with pytest.raises(KeyboardInterrupt) as caught:
        _throw_at_first(events)
    state = _interrupted_state(caught.value)
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "done"), ("b", "done")]
    _resumed_runs_nothing_again(agent, state, ran)


def test_a_cancelled_timed_sync_call_gives_its_worker_away(one_worker: threading.Event) -> None:
    """A run cancelled while a sync tool with a timeout runs lets later calls have a worker."""
    started = threading.Event()

    @tool(timeout=30)
    def stuck() -> str:
        """Runs until the test ends."""
        started.set()
        one_worker.wait()
        return "late"

    @tool(timeout=30)
    def quick() -> str:
        """Returns at once."""
        return "quick"

    stuck_agent = Agent(FunctionModel(lambda request: call("stuck", {})), tools=[stuck])
    quick_agent = Agent(FunctionModel(_answer([call("quick", {})])), tools=[quick])

    async def main() -> str:
        task = asyncio.ensure_future(stuck_agent.arun("go"))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The only worker still runs "stuck": a new one serves the next call.
        response = await asyncio.wait_for(quick_agent.arun("go"), 30)
        return response.text

    assert asyncio.run(main()) == "saw: quick"


@pytest.mark.parametrize("kind", ["step_start", "tool_call", "step_end"])
def test_ctrl_c_thrown_into_a_stream_at_any_notice_carries_the_state(kind: str) -> None:
    """Ctrl-C thrown into a blocking stream at a step's start, call or end carries the state,
    the model's response included once it was given."""
    ran: list[int] = []
    asked: list[ModelRequest] = []
    reply = _answer([call("charge", {"order": 1}, id="a"), call("charge", {"order": 2}, id="b")])
    model = FunctionModel(lambda request: asked.append(request) or reply(request))
    agent = Agent(model, tools=[_charger(ran, interrupt=set())])
    events = iter(agent.stream("go"))
    with pytest.raises(KeyboardInterrupt) as caught:
        _throw_at_first(events, kind)
    state = _interrupted_state(caught.value)
    response = agent.resume(RunState.from_json(state.to_json()))
    assert sorted(ran) == [1, 2]  # each ran once, before or after the resume (threads: any order)
    # Asked once for the calls and once for the answer: a response in the state is not
    # asked for (and billed) again.
    assert len(asked) == 2
    assert response.text == "saw: charged 1 | charged 2"


def _refunds(ran: list[str], asked: list[ModelRequest]) -> Agent[Any, Any]:
    """An agent whose first step charges order 1 ("a") and asks to refund 2 ("r1") and 3
    ("r2"), refunds needing approval; its model's requests go to ``asked``."""

    @tool
    def charge(order: int) -> str:
        """Charge an order.

        Args:
            order: The order to charge.
        """
        ran.append(f"charge {order}")
        return f"charged {order}"

    @tool(requires_approval=True)
    def refund(order: int) -> str:
        """Refund an order.

        Args:
            order: The order to refund.
        """
        ran.append(f"refund {order}")
        return f"refunded {order}"

    calls = [
        call("charge", {"order": 1}, id="a"),
        call("refund", {"order": 2}, id="r1"),
        call("refund", {"order": 3}, id="r2"),
    ]
    reply = _answer(calls)
    model = FunctionModel(lambda request: asked.append(request) or reply(request))
    return Agent(model, tools=[charge, refund])


@pytest.mark.parametrize(("kind", "nth"), [("tool_result", 0), ("tool_result", 1), ("step_end", 0)])
def test_ctrl_c_thrown_into_a_resume_stream_at_its_results_carries_the_state(
    kind: str, nth: int
) -> None:
    """Ctrl-C thrown into resume_stream at the answered calls' results or their step's end
    carries the state: resuming it runs no tool and asks the model nothing again."""
    approvals = {"r1": True, "r2": False}
    ran: list[str] = []
    asked: list[ModelRequest] = []
    agent = _refunds(ran, asked)
    paused = agent.run("go").state
    expected = agent.resume(RunState.from_json(paused.to_json()), approvals=approvals).text
    ran.clear()
    asked.clear()
    paused = agent.run("go").state
    assert (ran, len(asked)) == (["charge 1"], 1)  # paused for the refunds' approvals
    events = iter(agent.resume_stream(RunState.from_json(paused.to_json()), approvals=approvals))
    with pytest.raises(KeyboardInterrupt) as caught:
        _throw_at_first(events, kind, nth)
    state = _interrupted_state(caught.value)
    response = agent.resume(RunState.from_json(state.to_json()))
    assert ran == ["charge 1", "refund 2"]  # each approved call ran once; the denied one never
    assert len(asked) == 2  # the answer alone was asked for after the pause
    assert response.text == expected


async def _athrow_at_first(
    events: Any, exc: BaseException, kind: str = "tool_result", nth: int = 0
) -> None:
    """Read an async stream, throwing ``exc`` into it (``athrow``) at the first event of
    ``kind``, or at the ``nth`` (from 0): Ctrl-C or a cancellation that lands while the
    code iterating it handles the event."""
    seen = 0
    async for event in events:
        if event.kind == kind:
            if seen == nth:
                await events.athrow(exc)
            seen += 1


def _interruption(name: str) -> BaseException:
    return KeyboardInterrupt() if name == "ctrl-c" else asyncio.CancelledError()


class _Source:
    """A tool source whose only tool is ``tool_``: the run's stream opens and closes it."""

    def __init__(self, tool_: Tool[..., Any]) -> None:
        self._tool = tool_
        self.closed = 0

    def open(self) -> None:
        pass

    def close(self) -> None:
        self.closed += 1

    def tools(self) -> list[Tool[..., Any]]:
        return [self._tool]


@pytest.mark.parametrize("sourced", [False, True])
@pytest.mark.parametrize("thrown", ["ctrl-c", "cancel"])
@pytest.mark.parametrize("kind", ["step_start", "tool_call", "tool_result", "step_end"])
def test_an_interrupt_thrown_into_an_async_stream_at_any_notice_carries_the_state(
    kind: str, thrown: str, sourced: bool
) -> None:
    """Ctrl-C or a cancellation thrown into an async stream at a step's start, call, result
    or end carries the state: resuming runs no call and asks the model nothing again."""
    ran: list[int] = []
    asked: list[ModelRequest] = []
    reply = _answer([call("charge", {"order": 1}, id="a"), call("charge", {"order": 2}, id="b")])
    model = FunctionModel(lambda request: asked.append(request) or reply(request))
    charge = _charger(ran, interrupt=set())
    source = _Source(charge)
    agent = Agent(model, tools=[source if sourced else charge])
    exc = _interruption(thrown)
    with pytest.raises(type(exc)) as caught:
        asyncio.run(_athrow_at_first(agent.stream("go").__aiter__(), exc, kind))
    if thrown == "ctrl-c" or sys.version_info >= (3, 11):
        assert caught.value is exc  # (3.10's asyncio raises a new CancelledError)
    state = _interrupted_state(caught.value)
    response = agent.resume(RunState.from_json(state.to_json()))
    assert sorted(ran) == [1, 2]  # each ran once, before or after the resume
    assert len(asked) == 2  # a response in the state is not asked for (and billed) again
    assert response.text == "saw: charged 1 | charged 2"
    assert source.closed == (2 if sourced else 0)  # (the interrupted run closed it too)


@pytest.mark.parametrize("thrown", ["ctrl-c", "cancel"])
@pytest.mark.parametrize(("kind", "nth"), [("tool_result", 0), ("tool_result", 1), ("step_end", 0)])
def test_an_interrupt_thrown_into_an_async_resume_stream_at_its_results_carries_the_state(
    kind: str, nth: int, thrown: str
) -> None:
    """Ctrl-C or a cancellation thrown into an async resume_stream at the answered calls'
    results or their step's end carries the state: resuming it runs no tool and asks the
    model nothing again."""
    approvals = {"r1": True, "r2": False}
    ran: list[str] = []
    asked: list[ModelRequest] = []
    agent = _refunds(ran, asked)
    paused = agent.run("go").state
    expected = agent.resume(RunState.from_json(paused.to_json()), approvals=approvals).text
    ran.clear()
    asked.clear()
    paused = agent.run("go").state
    assert (ran, len(asked)) == (["charge 1"], 1)  # paused for the refunds' approvals
    events = agent.resume_stream(RunState.from_json(paused.to_json()), approvals=approvals)
    exc = _interruption(thrown)
    with pytest.raises(type(exc)):
        asyncio.run(_athrow_at_first(events.__aiter__(), exc, kind, nth))
    state = _interrupted_state(exc)
    response = agent.resume(RunState.from_json(state.to_json()))
    assert ran == ["charge 1", "refund 2"]  # each approved call ran once; the denied one never
    assert len(asked) == 2  # the answer alone was asked for after the pause
    assert response.text == expected


def _thrown_at(agent: Agent[Any, Any], how: str, at: str, exc: BaseException) -> BaseException:
    """Throw ``exc`` into ``agent``'s blocking or async stream at its first event of kind ``at``;
    what the stream raised back (of ``exc``'s class)."""
    if how == "stream":
        events = iter(agent.stream("go"))
        for event in events:
            if event.kind == at:
                with pytest.raises(type(exc)) as caught:
                    events.throw(exc)
                return caught.value
    else:

        async def main() -> BaseException:
            events = agent.stream("go").__aiter__()
            async for event in events:
                if event.kind == at:
                    with pytest.raises(type(exc)) as caught:
                        await events.athrow(exc)
                    return caught.value
            raise AssertionError(f"no {at} event")

        return asyncio.run(main())
    raise AssertionError(f"no {at} event")


@pytest.mark.parametrize("how", ["stream", "astream"])
@pytest.mark.parametrize("thrown", [KeyboardInterrupt, SystemExit])
def test_an_interruption_thrown_into_a_stream_carries_the_state_but_at_its_end(
    how: str, thrown: type[BaseException]
) -> None:
    """Ctrl-C or SystemExit thrown into a blocking or async stream after a call ended carries
    the state with it; thrown in at the run's end event, none (the response has it)."""
    ran: list[int] = []
    exc = _thrown_at(_charge_twice(ran), how, "step_end", thrown())
    assert type(exc) is thrown
    state = _interrupted_state(exc)
    assert sorted(c.status for c in state.calls) == ["done", "done"]
    end = _thrown_at(_charge_twice(ran), how, "run_end", thrown())
    assert type(end) is thrown
    assert state_of(end) is None


def test_ctrl_c_landing_off_the_loop_thread_still_stops_a_blocking_round_on_its_loop() -> None:
    """A SIGINT that interrupts no wait of the loop's (it lands on a worker thread, as one
    landing just before the loop's wait begins) still stops a blocking round idle on its loop
    at once: the async tool is cancelled, the sync tool beside it has not given up waiting."""
    watching = threading.Event()
    release = threading.Event()
    ended = threading.Event()
    gave_up: list[str] = []
    cancelled: list[str] = []

    @tool
    def pay(order: int) -> str:
        """Press Ctrl-C (on this worker thread) once ``watch`` runs; wait to be released.

        Args:
            order: The order to pay.
        """
        try:
            assert watching.wait(30)
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            if not release.wait(30):
                gave_up.append("pay")
            return f"paid {order}"
        finally:
            ended.set()

    @tool
    async def watch() -> str:
        """Wait until cancelled."""
        watching.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("watch")
            raise
        return "never"

    calls = [call("watch", {}, id="w"), call("pay", {"order": 1}, id="a")]
    agent = Agent(FunctionModel(_answer(calls)), tools=[pay, watch])
    try:
        # (a run that waits for ``pay`` once interrupted is told so: it releases it)
        with pytest.raises(KeyboardInterrupt), interrupt_waits(release.set):
            agent.run("go")
    finally:
        release.set()
        assert ended.wait(60)
    assert cancelled == ["watch"]
    assert gave_up == []  # the interruption came at once, not once ``pay`` gave up
