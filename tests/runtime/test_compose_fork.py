"""Forking a composed run at a middle step: the fork runs on from there, the original stays as it was."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolfold import Agent, Denied, tool
from toolfold.runtime import RunState, fork, replay
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


def _tree(log: list[tuple[str, str]]) -> Agent:
    """top -> mid -> bottom (agents as tools); the bottom one looks up, then deletes with an approval."""

    @tool
    def lookup(path: str) -> str:
        """Look a file up.

        Args:
            path: The file.
        """
        log.append(("lookup", path))
        return f"{path} is 3 kB"

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        log.append(("delete", path))
        return f"deleted {path}"

    def delegate(name: str) -> FunctionModel:
        def reply(request: Any) -> Any:
            last = request.messages[-1]
            if last.role == "tool":
                return f"{name} said: " + " / ".join(r.content for r in last.tool_results)
            if name == "files":
                return [call("lookup", {"path": "a.txt"}), call("delete", {"path": "a.txt"})]
            return call(name, {"input": "clean " + last.text})

        return FunctionModel(reply)

    bottom = Agent(delegate("files"), name="bottom", tools=[lookup, delete])
    mid = Agent(delegate("bottom"), name="mid", tools=[bottom.as_tool()])
    return Agent(delegate("mid"), name="top", tools=[mid.as_tool()])


FINAL = "mid said: bottom said: files said: a.txt is 3 kB / deleted a.txt"


def _finished(top: Agent) -> RunState:
    suspended = top.run("the disk")
    approvals = {c.id: True for c in suspended.pending_approvals}
    done = top.resume(suspended.state, approvals=approvals)
    assert done.text == FINAL
    return done.state


def _position(state: RunState, kind: str) -> int:
    """How many events of the log come up to and including the first of ``kind``."""
    return next(i for i, e in enumerate(state.events, 1) if e.kind == kind)


def test_fork_after_a_finished_sub_run_asks_the_top_model_again_and_reruns_nothing() -> None:
    """Forked before the top's last model response, the fork keeps the whole sub-tree and runs no tool again."""
    log: list[tuple[str, str]] = []
    top = _tree(log)
    original = _finished(top)
    snapshot = original.to_json()
    forked = fork(original, step=1, run_id="fork-1")
    assert forked.phase != "finished"
    assert forked.sub_runs.keys() == original.sub_runs.keys()
    ran = list(log)
    done = top.resume(forked)
    assert done.text == FINAL
    assert log == ran  # the sub-tree's tools ran in the original only
    assert done.state.run_id == "fork-1"
    assert replay(done.state.log) == done.state
    assert RunState.from_json(done.state.to_json()) == done.state
    assert original.to_json() == snapshot


def test_fork_before_a_sub_run_starts_runs_the_whole_sub_tree_again_under_the_new_id() -> None:
    """Forked right after the top model called the sub-agent, the fork runs the tree anew (with its own ids)."""
    log: list[tuple[str, str]] = []
    top = _tree(log)
    original = _finished(top)
    snapshot = original.to_json()
    forked = fork(original, events=_position(original, "model_responded"), run_id="fork-2")
    assert forked.phase == "running_tools"
    assert forked.sub_runs == {}
    log.clear()
    waiting = top.resume(forked)
    assert waiting.finish_reason == "approval_required"
    (mid_run,) = waiting.state.sub_runs.values()
    assert mid_run.run_id.startswith("fork-2/")
    approvals = {c.id: Denied("keep it") for c in waiting.pending_approvals}
    done = asyncio.run(top.aresume(waiting.state, approvals=approvals))
    assert "denied this tool call: keep it" in done.text
    assert log == [("lookup", "a.txt")]  # this time the delete was denied
    assert original.to_json() == snapshot
    (original_mid,) = original.sub_runs.values()
    assert original_mid.run_id != mid_run.run_id


def test_fork_at_the_suspension_answers_the_deep_approval_differently() -> None:
    """A fork of the tree at its suspension takes another answer; the original's answer stands."""
    log: list[tuple[str, str]] = []
    top = _tree(log)
    original = _finished(top)
    snapshot = original.to_json()
    forked = fork(original, events=_position(original, "tool_suspended"))
    assert [c.name for c in forked.pending_approvals] == ["delete"]
    log.clear()
    done = top.resume(forked, approvals={forked.pending_approvals[0].id: False})
    assert log == []
    assert "denied" in done.text
    assert original.to_json() == snapshot
    assert replay(done.state.log) == done.state


def _desk(seen: list[str]) -> Agent:
    """triage -> billing -> refunds, each model recording that it was asked."""

    def model(name: str, then: Any) -> FunctionModel:
        def reply(request: Any) -> Any:
            seen.append(name)
            return then

        return FunctionModel(reply)

    refunds = Agent(model("refunds", "Refunded."), name="refunds", instructions="Refund.")
    billing = Agent(
        model("billing", call("transfer_to_refunds")),
        name="billing",
        instructions="Bill.",
        handoffs=[refunds],
    )
    return Agent(model("triage", call("transfer_to_billing")), name="triage", handoffs=[billing])


@pytest.mark.parametrize(
    ("step", "agent", "asked"),
    [
        (0, "triage", ["triage", "billing", "refunds"]),
        (1, "billing", ["billing", "refunds"]),
        (2, "refunds", ["refunds"]),
    ],
)
def test_fork_of_a_handoff_chain_goes_on_with_the_agent_of_that_step(
    step: int, agent: str, asked: list[str]
) -> None:
    """Forked at each step of triage -> billing -> refunds, the fork goes on with the agent running then."""
    seen: list[str] = []
    triage = _desk(seen)
    original = triage.run("money back").state
    assert (original.agent, seen) == ("refunds", ["triage", "billing", "refunds"])
    snapshot = original.to_json()
    forked = fork(original, step=step, run_id=f"fork-{step}")
    assert forked.agent == agent
    assert replay(forked.log) == forked
    seen.clear()
    done = triage.resume(RunState.from_json(forked.to_json()))
    assert (done.agent, done.text, seen) == ("refunds", "Refunded.", asked)
    assert done.state.config.instructions == "Refund."
    assert replay(done.state.log) == done.state
    assert original.to_json() == snapshot
