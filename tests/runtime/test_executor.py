"""The tool executor: validation, errors, timeouts, concurrency, order, cancellation."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from typing import Any

import pytest

from toolfold import RunContext, Tool, ToolCallPart
from toolfold.runtime.core._effects import ToolInvocation
from toolfold.runtime.drive._executor import (
    ToolJob,
    ToolOutcome,
    run_calls,
)
from toolfold.runtime.drive._kept_loop import run_kept
from toolfold.runtime.drive._sync_calls import run_calls_sync
from toolfold.testing import ScriptedModel

SCHEMA = {
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
    "additionalProperties": False,
}


def _ctx(call_id: str = "c1", deps: Any = None) -> RunContext[Any]:
    return RunContext(run_id="r1", step=1, call_id=call_id, tool_name="t", deps=deps)


def _inv(tool: Tool | None, args: Any = None, call_id: str = "c1") -> ToolJob:
    call = ScriptedModel.call(tool.name if tool else "nope", args or {"x": 1}, id=call_id)
    return _job(call, tool, _ctx(call_id))


def _job(call: ToolCallPart, tool: Tool | None, context: RunContext[Any]) -> ToolJob:
    return ToolJob(ToolInvocation(call, 0, 1, f"r1:1:{call.id}"), tool, context)


def _both(invs: list[ToolJob], **kw: Any) -> tuple[tuple[ToolOutcome, ...], ...]:
    return run_calls_sync(invs, **kw), asyncio.run(run_calls(invs, **kw))


def test_ok_result_is_formatted() -> None:
    """A sync tool's return value becomes text, in both the blocking and async paths."""
    double = Tool("double", "", SCHEMA, lambda a: {"y": a["x"] * 2})
    for outcomes in _both([_inv(double, {"x": 4})]):
        (outcome,) = outcomes
        assert (outcome.call_id, outcome.tool_name, outcome.outcome) == ("c1", "double", "ok")
        assert json.loads(outcome.part.content) == {"y": 8}


def test_exception_becomes_error_text_without_traceback() -> None:
    """A tool exception is an error result naming the type and the message."""

    def boom(args: dict[str, Any]) -> str:
        raise ValueError("no such city")

    tool = Tool("boom", "", SCHEMA, boom)
    for (outcome,) in _both([_inv(tool)]):
        assert outcome.is_error
        assert outcome.outcome == "error"
        assert outcome.content == "Error: ValueError: no such city"
        assert isinstance(outcome.exception, ValueError)
        assert "Traceback" not in outcome.content


def test_malformed_json_becomes_invalid_arguments() -> None:
    """Argument text that is not JSON gives the toolkit's message for the model."""
    tool = Tool("t", "", SCHEMA, lambda a: "never")
    invocation = _inv(tool, '{"x": 1')
    for (outcome,) in _both([invocation]):
        assert outcome.outcome == "invalid_arguments"
        assert "not valid JSON" in outcome.content
        assert "Call the tool again" in outcome.content


def test_unknown_or_functionless_tool_is_not_run() -> None:
    """A call without a runnable tool gets an error outcome, never an exception."""
    for (outcome,) in _both([_inv(None)]):
        assert outcome.outcome == "unknown_tool"
        assert outcome.is_error


def test_results_in_call_order_not_completion_order() -> None:
    """Parallel calls finishing in reverse order are still returned in call order."""
    release = [threading.Event() for _ in range(3)]

    def make(i: int) -> Tool:
        def fn(args: dict[str, Any]) -> str:
            if i + 1 < 3:
                release[i + 1].wait(5)  # the later call must finish first
            release[i].set()
            return f"r{i}"

        return Tool(f"t{i}", "", SCHEMA, fn)

    invs = [_inv(make(i), call_id=f"c{i}") for i in range(3)]
    release[2].set()
    outcomes = run_calls_sync(invs)
    assert [o.content for o in outcomes] == ["r0", "r1", "r2"]
    assert [o.call_id for o in outcomes] == ["c0", "c1", "c2"]


def test_async_tools_run_concurrently() -> None:
    """Async calls of one step overlap: each waits for the other to start."""
    started: list[str] = []
    both = asyncio.Event

    async def run() -> tuple[ToolOutcome, ...]:
        gate = both()

        async def fn(args: dict[str, Any]) -> str:
            started.append(str(args["x"]))
            if len(started) == 2:
                gate.set()
            await asyncio.wait_for(gate.wait(), 5)
            return "ok"

        tool = Tool("a", "", SCHEMA, fn)
        return await run_calls([_inv(tool, {"x": 1}, "c1"), _inv(tool, {"x": 2}, "c2")])

    outcomes = asyncio.run(run())
    assert [o.content for o in outcomes] == ["ok", "ok"]


def test_sync_tools_run_in_threads_concurrently() -> None:
    """Sync calls of one step overlap in the thread pool (a barrier of two passes)."""
    barrier = threading.Barrier(2, timeout=5)

    def fn(args: dict[str, Any]) -> str:
        barrier.wait()
        return "ok"

    tool = Tool("s", "", SCHEMA, fn)
    for outcomes in _both([_inv(tool, call_id="c1"), _inv(tool, call_id="c2")]):
        assert [o.content for o in outcomes] == ["ok", "ok"]
        barrier.reset()


def test_concurrency_limit_is_respected() -> None:
    """No more than max_concurrency calls run at once."""
    lock = threading.Lock()
    active = [0, 0]

    def fn(args: dict[str, Any]) -> str:
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
        threading.Event().wait(0.005)
        with lock:
            active[0] -= 1
        return "ok"

    tool = Tool("s", "", SCHEMA, fn)
    invs = [_inv(tool, call_id=f"c{i}") for i in range(6)]
    for outcomes in _both(invs, max_concurrency=2):
        assert len(outcomes) == 6
        assert active[1] <= 2
        active[1] = 0


def test_async_timeout_becomes_error_result() -> None:
    """An async tool that outlives its timeout is cancelled and reported as timed out."""
    cancelled = []

    async def slow(args: dict[str, Any]) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    tool = Tool("slow", "", SCHEMA, slow, timeout=0.01)
    (outcome,) = asyncio.run(run_calls([_inv(tool)]))
    assert outcome.outcome == "timeout"
    assert "timed out after 0.01 s" in outcome.content
    assert cancelled == [True]


@pytest.mark.parametrize("blocking", [True, False])
def test_an_async_tool_holding_the_loop_past_its_timeout_keeps_its_result_and_warns(
    blocking: bool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A call that ended past its timeout (the loop held, so nothing could cancel it) is kept.

    Its side effects are done: it is not reported as timed out (the model would
    retry it), and a warning names the tool, how long it took and the timeout.
    Before, the result came back with nothing said. The executor's clock is
    driven by the tool (a second passes while it holds the loop): no sleeping.
    """
    from toolfold import Agent, generate_text
    from toolfold.runtime.drive import _executor

    now = [100.0]
    monkeypatch.setattr(_executor, "_monotonic", lambda: now[0])

    async def blocker(args: dict[str, Any]) -> str:
        now[0] += 1.0  # as time.sleep(1.0) would: the loop runs nothing meanwhile
        return "finished"

    tool = Tool("blocker", "", SCHEMA, blocker, timeout=0.2)
    model = ScriptedModel([ScriptedModel.call("blocker", {"x": 1}), "done"])
    with caplog.at_level("WARNING", logger="toolfold.runtime"):
        if blocking:
            response = generate_text(model, "go", tools=[tool])
        else:
            response = asyncio.run(Agent(model, tools=[tool]).arun("go"))
    (result,) = response.steps[0].tool_results
    assert (result.content, result.is_error) == ("finished", False)
    (record,) = [r for r in caplog.records if r.name == "toolfold.runtime"]
    assert record.getMessage().startswith(
        "tool 'blocker' ended 1 s after it began, past its timeout of 0.2 s: the event loop "
        "was held while it ran (by it or by other code on the loop: a sync call inside an "
        "async tool?), so the timeout could not stop it"
    )


def test_the_warning_for_a_loop_held_by_another_tool_blames_neither(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A timed tool that awaits properly, held up by another tool of its step, is not blamed.

    Before, the warning said of ``polite`` that it made a sync call and should
    be made sync, while ``hog`` (no timeout) held the loop. Now it says the loop
    was held while ``polite`` ran, by it or by other code on the loop.
    """
    from toolfold.runtime.drive import _executor

    now = [100.0]
    monkeypatch.setattr(_executor, "_monotonic", lambda: now[0])

    async def polite(args: dict[str, Any]) -> str:
        await asyncio.sleep(0)  # yields: ``hog`` runs meanwhile
        return "polite ok"

    async def hog(args: dict[str, Any]) -> str:
        now[0] += 1.0  # as time.sleep(1.0) would
        return "hog ok"

    calls = [
        _inv(Tool("polite", "", SCHEMA, polite, timeout=0.2), call_id="c1"),
        _inv(Tool("hog", "", SCHEMA, hog), call_id="c2"),
    ]
    with caplog.at_level("WARNING", logger="toolfold.runtime"):
        outcomes = asyncio.run(run_calls(calls))
    assert [o.content for o in outcomes] == ["polite ok", "hog ok"]
    (record,) = [r for r in caplog.records if r.name == "toolfold.runtime"]
    message = record.getMessage()
    assert message.startswith("tool 'polite' ended 1 s after it began")
    assert "held while it ran (by it or by other code on the loop" in message
    assert "make the blocking tool sync" in message


def test_the_held_loop_warning_does_not_read_the_loops_debug_setting(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An app that raised ``slow_callback_duration`` (to quiet asyncio's debug mode) still gets it.

    Before, the margin was the loop's ``slow_callback_duration``: raised to
    10 s, a call held 1 s past its timeout said nothing (and a custom loop
    without the attribute failed the call with an AttributeError).
    """
    from toolfold.runtime.drive import _executor

    now = [100.0]
    monkeypatch.setattr(_executor, "_monotonic", lambda: now[0])

    async def blocker(args: dict[str, Any]) -> str:
        now[0] += 1.0
        return "finished"

    async def main() -> tuple[ToolOutcome, ...]:
        asyncio.get_running_loop().slow_callback_duration = 10.0
        return await run_calls([_inv(Tool("blocker", "", SCHEMA, blocker, timeout=0.2))])

    with caplog.at_level("WARNING", logger="toolfold.runtime"):
        (outcome,) = asyncio.run(main())
    assert outcome.content == "finished"
    (record,) = [r for r in caplog.records if r.name == "toolfold.runtime"]
    assert record.getMessage().startswith("tool 'blocker' ended 1 s after it began")


def test_an_async_tool_ending_within_its_timeout_logs_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A timed call that ends in time (by the executor's clock) gives its result, no warning."""
    from toolfold.runtime.drive import _executor

    now = [100.0]
    monkeypatch.setattr(_executor, "_monotonic", lambda: now[0])

    async def quick(args: dict[str, Any]) -> str:
        now[0] += 0.1
        return "quick"

    tool = Tool("quick", "", SCHEMA, quick, timeout=0.2)
    with caplog.at_level("WARNING", logger="toolfold.runtime"):
        (outcome,) = asyncio.run(run_calls([_inv(tool)]))
    assert (outcome.outcome, outcome.content) == ("ok", "quick")
    assert [r for r in caplog.records if r.name == "toolfold.runtime"] == []


def test_sync_timeout_becomes_error_result() -> None:
    """A sync tool that outlives its timeout is reported as timed out (its thread is left)."""
    release = threading.Event()
    tool = Tool("slow", "", SCHEMA, lambda a: release.wait(5), timeout=0.01)
    fast = Tool("fast", "", SCHEMA, lambda a: "quick")
    try:
        outcomes = run_calls_sync([_inv(tool, call_id="c1"), _inv(fast, call_id="c2")])
        assert [o.outcome for o in outcomes] == ["timeout", "ok"]
        (alone,) = run_calls_sync([_inv(tool)])
        assert alone.outcome == "timeout"
    finally:
        release.set()


def test_tool_raising_timeout_error_is_an_error_not_a_timeout() -> None:
    """A TimeoutError raised by the tool itself reads as a tool error."""

    async def fn(args: dict[str, Any]) -> str:
        raise TimeoutError("upstream slow")

    tool = Tool("t", "", SCHEMA, fn, timeout=5)
    (outcome,) = asyncio.run(run_calls([_inv(tool)]))
    assert outcome.outcome == "error"
    assert "upstream slow" in outcome.content


def test_cancellation_cancels_running_async_tools() -> None:
    """Cancelling the awaiting task cancels every running call."""
    cancelled: list[int] = []
    started = asyncio.Event

    async def main() -> None:
        both_started = started()
        count = [0]

        async def fn(args: dict[str, Any]) -> str:
            count[0] += 1
            if count[0] == 2:
                both_started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(args["x"])
                raise
            return "never"

        tool = Tool("t", "", SCHEMA, fn)
        task = asyncio.ensure_future(
            run_calls([_inv(tool, {"x": 1}, "a"), _inv(tool, {"x": 2}, "b")])
        )
        await both_started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert sorted(cancelled) == [1, 2]


def test_async_tool_from_blocking_path() -> None:
    """An async tool works from the blocking path (a loop is made for the step)."""

    async def fn(args: dict[str, Any]) -> int:
        await asyncio.sleep(0)
        return int(args["x"]) + 1

    (outcome,) = run_calls_sync([_inv(Tool("a", "", SCHEMA, fn), {"x": 41})])
    assert outcome.content == "42"


def test_blocking_path_inside_running_loop() -> None:
    """The blocking path called from async code does not re-enter the running loop."""

    async def fn(args: dict[str, Any]) -> str:
        return "inner"

    async def main() -> tuple[ToolOutcome, ...]:
        return run_calls_sync([_inv(Tool("a", "", SCHEMA, fn))])

    assert asyncio.run(main())[0].content == "inner"


def test_context_is_passed_and_result_formatting_errors_are_caught() -> None:
    """A tool that cannot be formatted gives an error result, not an exception."""

    class Weird(Tool):
        def format_result(self, value: Any) -> str:
            raise TypeError("cannot format")

    (outcome,) = run_calls_sync([_inv(Weird("w", "", SCHEMA, lambda a: object()))])
    assert outcome.outcome == "error"
    assert "cannot format" in outcome.content


def test_call_without_id_keeps_name() -> None:
    """Outcome carries the tool name the call named, even for unknown tools."""
    call = ToolCallPart("z", "ghost", "{}", {})
    (outcome,) = run_calls_sync([_job(call, None, _ctx())])
    assert (outcome.call_id, outcome.tool_name) == ("z", "ghost")


def test_sync_tool_timeout_on_the_async_path() -> None:
    """On the async path a sync tool in a thread also times out, without blocking the loop."""
    release = threading.Event()
    tool = Tool("slow", "", SCHEMA, lambda a: release.wait(5), timeout=0.01)
    try:
        (outcome,) = asyncio.run(run_calls([_inv(tool)]))
    finally:
        release.set()
    assert outcome.outcome == "timeout"


def test_the_kept_loop_cancels_what_a_blocking_call_left_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`run_kept` cancels a task its coroutine left running, as ``asyncio.run`` does."""
    left: list[asyncio.Task[None]] = []
    seen: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def leaves_one() -> str:
        left.append(asyncio.ensure_future(forever()))
        await asyncio.sleep(0)  # it starts
        return "done"

    async def leaves_none() -> str:
        return "done"

    assert run_kept(leaves_one) == "done"
    assert seen == ["cancelled"]
    assert left[0].cancelled()
    left.clear()
    gc.collect()
    walks: list[object] = []
    every = asyncio.all_tasks
    monkeypatch.setattr(asyncio, "all_tasks", lambda loop=None: walks.append(loop) or every(loop))
    assert run_kept(leaves_none) == "done"
    assert seen == ["cancelled"]
    # Before 3.12, with no task left anywhere, the leftover check does not walk the tasks.
    registry = getattr(asyncio.tasks, "_all_tasks", None)
    assert len(walks) == (1 if registry is None else 0)


def _returning_awaitable(kind: str, awaited: Any, timeout: float) -> Tool[..., Any]:
    """A tool named ``wrapper`` (sync or async, ``kind``) with ``timeout`` that returns the
    coroutine ``awaited()`` makes, for the executor to await."""
    if kind == "sync":

        def wrapper(args: dict[str, Any]) -> Any:
            return awaited()

        return Tool("wrapper", "", {"type": "object"}, wrapper, timeout=timeout)

    async def awrapper(args: dict[str, Any]) -> Any:
        return awaited()

    return Tool("wrapper", "", {"type": "object"}, awrapper, timeout=timeout)


def _first_result(tools: list[Tool[..., Any]], names: list[str], how: str) -> Any:
    """The result of the first call when a run calls ``names`` side by side (``how``: run,
    arun), then answers."""
    from toolfold import Agent

    calls = [ScriptedModel.call(name, {}, id=f"c{i}") for i, name in enumerate(names)]
    agent = Agent(ScriptedModel([calls, "done"]), tools=tools)
    response = agent.run("go") if how == "run" else asyncio.run(agent.arun("go"))
    return response.steps[0].tool_results[0]


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("how", ["run", "arun"])
@pytest.mark.parametrize("beside", [[], ["other"], ["aother"]], ids=["alone", "sync", "async"])
def test_a_timeout_covers_the_awaitable_a_tool_returns(
    kind: str, how: str, beside: list[str]
) -> None:
    """A tool with ``timeout=`` that returns an awaitable which never ends gets the timed-out
    error result at its timeout (the awaitable cancelled), not the awaitable's late result."""
    cancelled: list[bool] = []

    async def hangs() -> str:
        try:
            await asyncio.Event().wait()  # never set: only the cancel ends it
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    other = Tool("other", "", {"type": "object"}, lambda args: "other")

    async def aother(args: dict[str, Any]) -> str:
        return "aother"

    tools = [
        _returning_awaitable(kind, hangs, 0.05),
        other,
        Tool("aother", "", {"type": "object"}, aother),
    ]
    result = _first_result(tools, ["wrapper", *beside], how)
    assert result.is_error
    assert result.content == "Error: tool 'wrapper' timed out after 0.05 s."
    assert cancelled == [True]


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("how", ["run", "arun"])
def test_an_awaitable_a_timed_tool_returns_gives_its_result_or_its_own_error(
    kind: str, how: str
) -> None:
    """What a tool with ``timeout=`` returns to await gives its result when it ends in time;
    a TimeoutError it raises itself is its error, not the tool's timeout."""

    async def answers() -> str:
        return "answered"

    async def times_out() -> str:
        raise TimeoutError("upstream")

    ok = _first_result([_returning_awaitable(kind, answers, 60)], ["wrapper"], how)
    assert (ok.content, ok.is_error) == ("answered", False)
    failed = _first_result([_returning_awaitable(kind, times_out, 60)], ["wrapper"], how)
    assert failed.is_error
    assert "upstream" in failed.content
    assert "timed out" not in failed.content


def test_a_task_an_async_tool_left_running_is_cancelled_with_a_warning_in_a_blocking_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A blocking run cancels what a tool started and left running, and says so; ``arun`` does not.

    Before, the task was cancelled with nothing said, where in ``arun`` it ran on.
    The task waits on an event that is never set: nothing depends on timing.
    """
    from toolfold import Agent, generate_text

    log: list[str] = []

    async def fire(args: dict[str, Any]) -> str:
        async def later() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                log.append("cancelled")
                raise

        fire.task = asyncio.get_running_loop().create_task(later())  # type: ignore[attr-defined]
        return "fired"

    tool = Tool("fire", "", SCHEMA, fire)
    model = ScriptedModel([ScriptedModel.call("fire", {"x": 1}), "done"])
    with caplog.at_level("WARNING", logger="toolfold.runtime"):
        generate_text(model, "go", tools=[tool])
    assert log == ["cancelled"]
    (record,) = [r for r in caplog.records if r.name == "toolfold.runtime"]
    assert record.getMessage().startswith(
        "a blocking run ended with 1 task(s) a tool started still running "
        "(test_a_task_an_async_tool_left_running_is_cancelled_with_a_warning_in_a_blocking_run"
        ".<locals>.fire.<locals>.later): they are cancelled"
    )

    async def in_arun() -> bool:
        agent = Agent(ScriptedModel([ScriptedModel.call("fire", {"x": 1}), "done"]), tools=[tool])
        await agent.arun("go")
        task = fire.task  # type: ignore[attr-defined]
        running = not task.done()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return running

    caplog.clear()
    assert asyncio.run(in_arun()) is True
    assert [r for r in caplog.records if r.name == "toolfold.runtime"] == []
