"""A tool's own CancelledError (nobody cancelled the run) is an error the model reads."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from typing import Any

import pytest
from interrupt_helpers import ctrl_c, interrupted, state_on

import toolfold
from toolfold import ModelRequest, RunState, tool
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


async def _awaits_what_it_cancelled() -> str:
    """The slip the error reads: awaiting a sub-task the tool cancelled itself."""
    sub = asyncio.ensure_future(asyncio.sleep(10))
    await asyncio.sleep(0)
    sub.cancel()
    await sub
    return "never"


@tool
async def hedged(url: str) -> str:
    """Fetch with a hedge.

    Args:
        url: The address.
    """
    return await _awaits_what_it_cancelled()


@tool(timeout=30)
async def hedged_timed(url: str) -> str:
    """Fetch with a hedge, under a timeout.

    Args:
        url: The address.
    """
    return await _awaits_what_it_cancelled()


@tool
def other(x: int) -> str:
    """Another call of the same step.

    Args:
        x: Anything.
    """
    return "other done"


def _script(name: str) -> ScriptedModel:
    return ScriptedModel([[call("other", {"x": 1}), call(name, {"url": "u"})], "fine"])


@pytest.mark.parametrize("hedge", [hedged, hedged_timed], ids=["untimed", "timed"])
def test_a_tools_own_cancelled_error_is_an_error_result(hedge: toolfold.Tool) -> None:
    """The run goes on: the model reads the tool's CancelledError as its error, the
    other call's result is kept, and the run answers (it used to end the whole
    blocking run with a bare CancelledError, a BaseException `except Exception` misses).
    Python 3.10 cannot tell an untimed tool's own from a cancellation of the run
    (no `Task.cancelling`): there the run ends cancelled, as documented."""
    if sys.version_info < (3, 11) and hedge is hedged:
        with pytest.raises(asyncio.CancelledError):
            toolfold.generate_text(_script(hedge.name), "go", tools=[other, hedge])
        return
    response = toolfold.generate_text(_script(hedge.name), "go", tools=[other, hedge])
    results = response.steps[0].tool_results
    assert [r.content for r in results] == ["other done", "Error: CancelledError"]
    assert results[1].is_error
    assert response.text == "fine"


def test_cancelling_the_run_still_cancels_it() -> None:
    """A real cancellation of the run while a tool runs still ends the run cancelled."""
    started = asyncio.Event()

    @tool
    async def slow(url: str) -> str:
        """Wait.

        Args:
            url: The address.
        """
        started.set()
        await asyncio.sleep(30)
        return "late"

    async def main() -> None:
        run = asyncio.ensure_future(
            toolfold.agenerate_text(_script("slow"), "go", tools=[other, slow])
        )
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(main())


@pytest.mark.parametrize("lone", [True, False], ids=["lone", "beside_another"])
def test_a_tools_own_cancelled_error_is_an_error_result_in_a_task_with_a_cancel_caught_before(
    lone: bool,
) -> None:
    """A run awaited by a task that caught a cancel earlier and never took it back (its
    count stays 1): the tool's own CancelledError is still its error result (it used to end
    the run, read as the run's cancel). Python 3.10: the run ends cancelled, as documented."""
    script = ScriptedModel(
        [
            call("hedged", {"url": "u"})
            if lone
            else [call("other", {"x": 1}), call("hedged", {"url": "u"})],
            "fine",
        ]
    )

    async def caught_a_cancel_then_runs() -> str:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        # Caught, not uncancelled: Task.cancelling() stays 1 (3.11+).
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)
        response = await toolfold.agenerate_text(script, "go", tools=[other, hedged])
        assert response.steps[0].tool_results[-1].is_error
        return response.text

    if sys.version_info < (3, 11):
        with pytest.raises(asyncio.CancelledError):
            asyncio.run(caught_a_cancel_then_runs())
        return
    assert asyncio.run(caught_a_cancel_then_runs()) == "fine"


def _raises_cancelled() -> str:
    """A library that raises CancelledError of its own (no cancellation of anything)."""
    raise asyncio.CancelledError("the library gave up")


@tool
def wraps_library(url: str) -> str:
    """A sync tool on a worker thread.

    Args:
        url: The address.
    """
    return _raises_cancelled()


@tool(blocking=False)
def wraps_library_quick(url: str) -> str:
    """A sync tool called on the run's loop (or its blocking thread).

    Args:
        url: The address.
    """
    return _raises_cancelled()


@tool(timeout=30)
def wraps_library_timed(url: str) -> str:
    """A sync tool under a timeout.

    Args:
        url: The address.
    """
    return _raises_cancelled()


_SYNC = [wraps_library, wraps_library_quick, wraps_library_timed]
_SYNC_IDS = ["threaded", "quick", "timed"]


@pytest.mark.parametrize("lone", [True, False], ids=["lone", "beside_another"])
@pytest.mark.parametrize("run", ["run", "arun"])
@pytest.mark.parametrize("raiser", _SYNC, ids=_SYNC_IDS)
def test_a_sync_tools_own_cancelled_error_is_an_error_result(
    raiser: toolfold.Tool, run: str, lone: bool
) -> None:
    """A sync tool cannot be cancelled by the run: a CancelledError it raises is its error,
    the model reads it and the run goes on, on every Python (it used to end a blocking run,
    and any run of a blocking=False or timed one, as cancelled)."""
    first = [call(raiser.name, {"url": "u"})] + ([] if lone else [call("other", {"x": 1})])
    agent = toolfold.Agent(ScriptedModel([first, "fine"]), tools=[other, raiser])
    response = agent.run("go") if run == "run" else asyncio.run(agent.arun("go"))
    results = response.steps[0].tool_results
    assert results[0].content == "Error: CancelledError: the library gave up"
    assert results[0].is_error
    assert [r.content for r in results[1:]] == ([] if lone else ["other done"])
    assert response.text == "fine"


@pytest.mark.parametrize("raiser", _SYNC, ids=_SYNC_IDS)
def test_a_sync_tools_own_cancelled_error_raises_a_tool_execution_error(
    raiser: toolfold.Tool,
) -> None:
    """With on_tool_error="raise" it is a ToolExecutionError caused by the tool's error, with
    the run's state, as for any exception a tool raises (not the run's cancellation)."""
    agent = toolfold.Agent(
        ScriptedModel([call(raiser.name, {"url": "u"}), "fine"]),
        tools=[raiser],
        on_tool_error="raise",
    )
    with pytest.raises(toolfold.ToolExecutionError) as raised:
        agent.run("go")
    assert isinstance(raised.value.__cause__, asyncio.CancelledError)
    assert raised.value.state is not None


@pytest.mark.parametrize("run", ["run", "arun"])
@pytest.mark.parametrize("raiser", _SYNC, ids=_SYNC_IDS)
def test_a_sync_tools_own_cancelled_error_is_its_error_in_a_run_resumed_on_ctrl_c(
    raiser: toolfold.Tool, run: str
) -> None:
    """Resumed as documented, ``except KeyboardInterrupt as e: agent.resume(e.state)``, the
    tool's own CancelledError has the Ctrl-C the caller handles for context: not one that
    landed in the call, it is the tool's error the model reads (it ended the resumed run as
    cancelled, as a Ctrl-C the tool turned into its own CancelledError does)."""
    replies: list[Any] = [KeyboardInterrupt, call(raiser.name, {"url": "u"}), "fine"]

    def model(request: ModelRequest) -> Any:
        reply = replies.pop(0)
        if reply is KeyboardInterrupt:
            raise reply  # (the Ctrl-C the caller handles)
        return reply

    agent = toolfold.Agent(FunctionModel(model), tools=[raiser])
    try:
        agent.run("go")
    except KeyboardInterrupt as stopped:
        state = state_on(stopped)
        response = agent.resume(state) if run == "run" else asyncio.run(agent.aresume(state))
    results = response.steps[0].tool_results
    assert [(r.content, r.is_error) for r in results] == [
        ("Error: CancelledError: the library gave up", True)
    ]
    assert response.text == "fine"


@tool(timeout=30)
def gives_up_on_its_own_interrupt(url: str) -> str:
    """A sync tool on a worker thread whose library raises a CancelledError as it handles
    a KeyboardInterrupt of its own making (no Ctrl-C lands on a worker thread).

    Args:
        url: The address.
    """
    try:
        raise KeyboardInterrupt("the library's own")
    except KeyboardInterrupt:
        return _raises_cancelled()


@pytest.mark.parametrize("run", ["run", "arun"])
def test_a_cancelled_error_raised_on_a_worker_thread_handling_a_keyboard_interrupt_is_its_error(
    run: str,
) -> None:
    """Only the main thread gets a Ctrl-C: a KeyboardInterrupt behind the CancelledError a
    call on a worker thread raised is none, and that error is the model's to read (a timed
    call in arun ended the run as cancelled)."""
    tool_ = gives_up_on_its_own_interrupt
    agent = toolfold.Agent(ScriptedModel([call(tool_.name, {"url": "u"}), "fine"]), tools=[tool_])
    response = agent.run("go") if run == "run" else asyncio.run(agent.arun("go"))
    results = response.steps[0].tool_results
    assert [r.content for r in results] == ["Error: CancelledError: the library gave up"]
    assert response.text == "fine"


class _Payment:
    """A sync tool ``pay`` (run as ``kind``: on a worker thread, ``blocking=False``, or with
    a timeout) whose first call, once running, has the run stopped by ``stop`` and waits to
    be released; ``own`` is when it raises a CancelledError of its own too: "late" once
    released, "on_kbi" as a Ctrl-C lands in it (a library turning it into its own)."""

    def __init__(self, kind: str, own: str | None, lone: bool = True) -> None:
        self.ran: list[int] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self.stop: Any = lambda: None
        first = [True]
        options = {"threaded": {}, "quick": {"blocking": False}, "timed": {"timeout": 30}}[kind]

        @tool(**options)
        def pay(order: int) -> str:
            """Pay an order.

            Args:
                order: The order.
            """
            self.ran.append(order)
            if first:  # (the first call only: the resumed run's returns at once)
                first.clear()
                self.started.set()
                try:
                    self.stop()
                    assert self.release.wait(30)
                except KeyboardInterrupt:
                    if own == "on_kbi":
                        raise asyncio.CancelledError("the library gave up") from None
                    raise
                if own == "late":
                    raise asyncio.CancelledError("the library gave up")
            return f"paid {order}"

        calls = [call("pay", {"order": 1}, id="a")] + ([] if lone else [call("other", {"x": 1})])

        async def reply(request: ModelRequest) -> Any:
            await asyncio.sleep(0)  # (a model call waits: where a cancel of the run lands)
            results = [r.content for m in request.messages for r in m.tool_results]
            return "saw: " + " | ".join(results) if results else calls

        self.agent = toolfold.Agent(FunctionModel(reply), tools=[pay, other])

    def resumed(self, state: RunState) -> str:
        """The text of the run resumed from ``state`` saved as JSON (the tool released)."""
        self.release.set()
        return self.agent.resume(RunState.from_json(state.to_json())).text


@pytest.mark.parametrize("own", [None, "late"])
@pytest.mark.parametrize("kind", _SYNC_IDS)
def test_cancelling_an_arun_while_a_sync_tool_runs_ends_it_cancelled_with_its_state(
    kind: str, own: str | None
) -> None:
    """task.cancel() while a sync tool runs ends the run cancelled, with its state, even if the
    tool then raises a CancelledError of its own (its error, not the run's cancel: the run
    is cancelled all the same); resumed, the run goes on. A call on a thread is not waited
    for (it runs again); a blocking=False one, which the cancel reaches only once it
    returned, is kept with its outcome."""
    payment = _Payment(kind, own)

    async def main() -> BaseException:
        task = asyncio.ensure_future(payment.agent.arun("go"))
        if kind == "quick":  # (it runs on the loop: the cancel comes while it runs, as from
            # another thread or a signal handler, and lands at the run's next wait)
            payment.stop = lambda: asyncio.get_running_loop().call_soon(task.cancel)
            payment.release.set()
        else:
            assert await asyncio.to_thread(payment.started.wait, 30)
            task.cancel()
        try:
            with pytest.raises(asyncio.CancelledError) as caught:
                await task
        finally:
            payment.release.set()
        return caught.value

    state = state_on(asyncio.run(main()))
    kept = kind == "quick"
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "done" if kept else "to_run")]
    result = "Error: CancelledError: the library gave up" if kept and own else "paid 1"
    assert payment.resumed(state) == f"saw: {result}"
    assert payment.ran == ([1] if kept else [1, 1])


@pytest.mark.parametrize("own", [None, "late", "on_kbi"])
@pytest.mark.parametrize("kind", _SYNC_IDS)
def test_ctrl_c_in_a_blocking_run_while_a_lone_sync_tool_runs_stops_it_with_its_state(
    kind: str, own: str | None
) -> None:
    """A real Ctrl-C while a run's only call, a sync tool, runs stops the run with its state
    (the call still to run), and the resumed run goes on. Called right in the run (no
    timeout), the Ctrl-C lands in the tool: one that turns it into a CancelledError of its
    own ends the run cancelled, as before (it was taken for the tool's error, and the run
    went on as if no Ctrl-C had come)."""
    payment = _Payment(kind, own)
    payment.stop = ctrl_c
    in_the_tool = kind != "timed"
    try:
        if in_the_tool and own == "on_kbi":
            with pytest.raises(asyncio.CancelledError) as caught:
                payment.agent.run("go")
            stopped: BaseException = caught.value
        else:
            stopped = interrupted(lambda: payment.agent.run("go"), payment.release.set)
    finally:
        payment.release.set()
    state = state_on(stopped)
    assert [(c.call.id, c.status) for c in state.calls] == [("a", "to_run")]
    assert payment.resumed(state) == "saw: paid 1"
    assert payment.ran == [1, 1]


@pytest.mark.parametrize("own", [None, "late"])
@pytest.mark.parametrize("kind", _SYNC_IDS)
def test_ctrl_c_in_a_blocking_round_waits_for_a_sync_tool_and_keeps_its_own_cancel(
    kind: str, own: str | None
) -> None:
    """Ctrl-C in a round of two calls waits for the sync tool running on its thread and keeps
    its outcome: its result, or the CancelledError it raised of its own as its error (not
    the run's interruption); resumed, the tool does not run again."""
    payment = _Payment(kind, own, lone=False)
    payment.stop = ctrl_c
    try:
        stopped = interrupted(lambda: payment.agent.run("go"), payment.release.set)
    finally:
        payment.release.set()
    state = state_on(stopped)
    assert (state.calls[0].call.id, state.calls[0].status) == ("a", "done")
    result = "Error: CancelledError: the library gave up" if own else "paid 1"
    assert payment.resumed(state) == f"saw: {result} | other done"
    assert payment.ran == [1]
