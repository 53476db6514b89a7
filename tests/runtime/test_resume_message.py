"""resume(message=...) adds a message where the run can take one, and refuses it, naming why, elsewhere."""

from __future__ import annotations

from typing import Any

import pytest

from toolfold import Agent, Tool, UsageError, tool
from toolfold.runtime import Event
from toolfold.testing import ScriptedModel


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file to delete.
    """
    return f"deleted {path}"


def _waiting() -> tuple[Agent, Any]:
    model = ScriptedModel([ScriptedModel.call("delete_file", {"path": "a.txt"}, id="c1"), "ok"])
    agent = Agent(model, tools=[delete_file])
    return agent, agent.run("Delete a.txt").state


def test_message_on_a_run_awaiting_approval_is_a_usage_error_naming_the_calls() -> None:
    """A message for a run that waits for approvals is refused as a UsageError, nothing observed."""
    agent, state = _waiting()
    seen: list[Event] = []
    with pytest.raises(UsageError, match=r"resume\(message=\.\.\.\) cannot add") as caught:
        agent.resume(state, message="Only if it is older than a week.", on_event=seen.append)
    assert "approval of calls 'c1' (delete_file)" in str(caught.value)
    assert "approvals=" in str(caught.value)
    assert seen == []


def test_message_with_approvals_whose_calls_still_run_is_refused_before_any_event() -> None:
    """Approving a call and adding a message is refused up front: the call must run first."""
    agent, state = _waiting()
    seen: list[Event] = []
    with pytest.raises(UsageError, match=r"calls 'c1' \(delete_file\) still have to run"):
        agent.resume(state, approvals={"c1": True}, message="Then tell me.", on_event=seen.append)
    assert seen == []
    assert state.phase == "awaiting_approval"


def test_message_after_answers_that_settle_the_step_is_added() -> None:
    """A denial that settles the step lets the message in before the model is called again."""
    agent, state = _waiting()
    response = agent.resume(state, approvals={"c1": False}, message="Why not?")
    assert [m.role for m in response.messages] == ["user", "assistant", "tool", "user", "assistant"]
    assert response.messages[3].text == "Why not?"


def test_message_with_tool_results_for_returned_calls_is_added() -> None:
    """Results for every returned call settle the step, so the message is added after them."""
    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    response = agent.resume(state, tool_results={"r1": "42"}, message="And then?")
    assert response.messages[3].text == "And then?"
    assert response.output == "ok"


def test_message_on_a_run_awaiting_tool_results_names_tool_results() -> None:
    """Without the results a returned call waits for, the refusal says to give tool_results=."""
    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    with pytest.raises(UsageError, match=r"results of calls 'r1' \(lookup\).*tool_results="):
        agent.resume(state, message="And then?")


def test_tool_results_with_a_message_are_converted_once() -> None:
    """A result object given with message= is dumped once, and every answer event is shown once."""
    dumps: list[int] = []

    class Found:
        def model_dump(self, mode: str = "json") -> dict[str, int]:
            dumps.append(1)
            return {"dumped": len(dumps)}

    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    seen: list[Event] = []
    response = agent.resume(
        state, tool_results={"r1": Found()}, message="And then?", on_event=seen.append
    )
    assert response.messages[2].parts[0].content == '{"dumped":1}'  # type: ignore[union-attr]
    assert len(dumps) == 1
    assert [e.kind for e in seen][:2] == ["tool_results_provided", "user_message_added"]


def test_results_refusal_says_to_give_them_in_the_same_resume() -> None:
    """The refusal for a run waiting for results says one resume with both options works."""
    lookup = Tool("lookup", "Look something up.")
    agent = Agent(ScriptedModel([ScriptedModel.call("lookup", {}, id="r1"), "ok"]), tools=[lookup])
    state = agent.run("Look it up.").state
    with pytest.raises(UsageError, match="in the same resume as message=") as caught:
        agent.resume(state, message="And then?")
    assert "once that run has finished" not in str(caught.value)


def test_sub_run_answered_by_path_refusal_names_the_sub_run() -> None:
    """Answering a sub-run's call by path with a message says the sub-run must finish first."""
    inner_model = ScriptedModel([ScriptedModel.call("delete_file", {"path": "a"}, id="c1"), "done"])
    inner = Agent(inner_model, tools=[delete_file], name="inner")
    outer_model = ScriptedModel([ScriptedModel.call("inner", {"input": "x"}, id="p1"), "ok"])
    outer = Agent(outer_model, tools=[inner.as_tool("inner", "Inner agent.")])
    state = outer.run("Go.").state
    with pytest.raises(UsageError, match=r"the sub-runs of calls 'p1' \(inner\) go on") as caught:
        outer.resume(state, approvals={"p1/c1": False}, message="m")
    assert "approved by this resume" not in str(caught.value)
