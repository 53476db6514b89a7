"""A tool's own CancelledError (nobody cancelled the run) is an error the model reads."""

from __future__ import annotations

import asyncio
import contextlib
import sys

import pytest

import toolfold
from toolfold import tool
from toolfold.testing import ScriptedModel

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
