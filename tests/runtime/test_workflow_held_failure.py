"""A step that fails a workflow fails it at once, not after another branch's approval."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import attrs
import pytest

from toolfold import Agent, Parallel, RunError, RunState, Sequence, tool
from toolfold.runtime import replay
from toolfold.testing import FunctionModel, ScriptedModel

LOG: list[str] = []
UP = {"flaky": False}


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish a text.

    Args:
        text: What to publish.
    """
    LOG.append("publish")
    return "published"


def _publisher(request: Any) -> Any:
    if request.messages[-1].role == "tool":
        return "Done."
    return ScriptedModel.call("publish", {"text": request.messages[-1].text})


def flaky(text: str) -> str:
    """A step that fails until it is up."""
    LOG.append("flaky")
    if not UP["flaky"]:
        raise RuntimeError("down")
    return "fine"


def _workflow() -> Parallel:
    publisher = Agent(FunctionModel(_publisher), name="publisher", tools=[publish])
    return Parallel(publisher, flaky, name="par")


MESSAGE = (
    "step 'flaky' of Parallel 'par' failed: Error: RuntimeError: down [not run, kept in the "
    "state: 'publisher' waits for an approval of 'publish' (call 'call_1_0'); resuming the "
    "state runs 'flaky' again, then waits as it did]"
)


@pytest.fixture(autouse=True)
def _down() -> None:
    LOG.clear()
    UP["flaky"] = False


def test_a_failing_branch_fails_the_run_before_another_branchs_approval() -> None:
    """run raises RunError naming the failed step and the branch that waits (not run); the
    approval's side effect never runs (the run used to wait, errors empty, and publish ran on
    approval before the failure surfaced)."""
    with pytest.raises(RunError, match=re.escape(MESSAGE)) as caught:
        _workflow().run("x")
    state = caught.value.state
    assert state is not None
    assert (state.phase, state.error.tool_name if state.error else None) == ("failed", "flaky")
    assert "publish" not in LOG
    assert replay(state.log) == state
    waiting = [c.child for c in state.calls if c.call.name == "publisher"]
    assert [c.pending_approvals[0].id for c in waiting if c is not None] == ["call_1_0"]


def test_arun_and_stream_fail_the_same_way() -> None:
    """arun and stream raise the same RunError where run does."""
    with pytest.raises(RunError, match=re.escape(MESSAGE)):
        asyncio.run(_workflow().arun("x"))
    with pytest.raises(RunError, match=re.escape(MESSAGE)):
        list(_workflow().stream("x"))
    assert "publish" not in LOG


def test_resuming_the_failed_run_retries_the_step_and_keeps_the_waiting_branch() -> None:
    """Resuming the error's state (from JSON, nested one level down) runs the failed step again
    and waits for the same approval; approving it then finishes the run, which replays."""
    workflow = Sequence(Agent(FunctionModel(lambda r: "d"), name="draft"), _workflow())
    with pytest.raises(RunError, match=re.escape("step 'par' of Sequence 'sequence' failed")) as c:
        workflow.run("x")
    assert c.value.state is not None
    UP["flaky"] = True
    LOG.clear()
    again = workflow.resume(RunState.from_json(c.value.state.to_json()))
    assert (again.finish_reason, LOG) == ("approval_required", ["flaky"])
    assert [p.id for p in again.pending_approvals] == ["call_1_0"]
    done = workflow.resume(RunState.from_json(again.state.to_json()), approvals={"call_1_0": True})
    assert (done.output, LOG) == ({"publisher": "Done.", "flaky": "fine"}, ["flaky", "publish"])
    assert replay(done.state.log) == done.state


def also_down(text: str) -> str:
    """A second step that fails."""
    LOG.append("also_down")
    raise ValueError("nope")


def test_two_failing_branches_are_both_named_as_running_again() -> None:
    """With two failing branches the message says resuming runs both again, and the second's
    error (it used to name only the first, though both run again)."""
    publisher = Agent(FunctionModel(_publisher), name="publisher", tools=[publish])
    with pytest.raises(RunError) as caught:
        Parallel(publisher, flaky, also_down, name="two").run("x")
    assert (
        "resuming the state runs 'flaky', 'also_down' again, then waits as it did; tool "
        "'also_down' failed too: Error: ValueError: nope]" in str(caught.value)
    )


def test_a_held_failure_reworded_in_a_saved_state_resumes_the_same_way() -> None:
    """A held failure whose message a later release words otherwise still runs the failed
    step again and waits for the kept approval (it used to be matched byte for byte, and
    was then resumed as another failure)."""
    with pytest.raises(RunError) as caught:
        _workflow().run("x")
    state = caught.value.state
    assert state is not None
    *before, last = state.log
    reworded = replay([*before, attrs.evolve(last, message="reworded in a later release")])
    UP["flaky"] = True
    LOG.clear()
    again = _workflow().resume(RunState.from_json(reworded.to_json()))
    assert (again.finish_reason, LOG) == ("approval_required", ["flaky"])
    assert [p.id for p in again.pending_approvals] == ["call_1_0"]
