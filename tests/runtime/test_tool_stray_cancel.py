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
