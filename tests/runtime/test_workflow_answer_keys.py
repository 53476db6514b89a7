"""An answer to a call that does not wait says which calls wait (at any depth)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from workflow_helpers import echo

from toolfold import (
    Agent,
    InvalidEventError,
    Parallel,
    RunError,
    Sequence,
    UsageError,
    state_of,
    tool,
)
from toolfold.testing import FunctionModel, ScriptedModel

RAN: list[str] = []


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish a text.

    Args:
        text: What to publish.
    """
    RAN.append(text)
    return "published"


def _publisher(request: Any) -> Any:
    if request.messages[-1].role == "tool":
        return "Done."
    return ScriptedModel.call("publish", {"text": request.messages[-1].text})


def _flow() -> Sequence:
    pub = Agent(FunctionModel(_publisher), name="pub", tools=[publish])
    return Sequence(echo("a"), pub, echo("z"), name="flow")


def test_a_wrong_approval_id_lists_the_waiting_calls_not_the_steps() -> None:
    """A waiting workflow resumed with an unknown id lists the call ids that wait deep in it
    (it used to list the step ids, 'pub', which no answer can name); nothing runs."""
    workflow = _flow()
    waiting = workflow.run("x")
    before = waiting.state.to_json()
    for answers, what in (
        ({"approvals": {"nope": True}}, "an approval; waiting: 'call_1_0'"),
        ({"tool_results": {"nope": "x"}}, "a result; waiting: none"),
    ):
        with pytest.raises(
            InvalidEventError, match=re.escape(f"no tool call 'nope' waits for {what}")
        ) as info:
            workflow.resume(waiting.state, **answers)
        assert info.value.state is not None
    assert (waiting.state.to_json(), RAN) == (before, [])


def test_an_agent_lists_the_calls_that_wait_the_same_way() -> None:
    """An agent resumed with an unknown id says the same, with its waiting call ids."""
    agent = Agent(FunctionModel(_publisher), name="pub", tools=[publish])
    waiting = agent.run("x")
    with pytest.raises(
        InvalidEventError,
        match=re.escape("no tool call 'nope' waits for an approval; waiting: 'call_1_0'"),
    ):
        agent.resume(waiting.state, approvals={"nope": True})


def test_answers_to_a_finished_workflow_do_not_suggest_a_new_turn() -> None:
    """A finished workflow given approvals says nothing waits (it used to suggest adding a user
    message, which Workflow.resume cannot take)."""
    workflow = Sequence(echo("a"), name="w")
    done = workflow.run("x")
    with pytest.raises(InvalidEventError) as info:
        workflow.resume(done.state, approvals={"nope": True})
    assert "the run of Sequence 'w' finished, so no call waits" in str(info.value)
    assert "message" not in str(info.value)


def test_an_answer_of_the_wrong_kind_for_a_nested_call_says_which_it_waits_for() -> None:
    """A nested call waiting for an approval given a result (and one waiting for a result
    given an approval) says which answer it waits for (it used to list the workflow's
    steps); nothing runs."""
    workflow = _flow()
    waiting = workflow.run("x")
    with pytest.raises(InvalidEventError) as info:
        workflow.resume(waiting.state, tool_results={"pub/call_1_0": "r"})
    assert str(info.value).endswith(
        "call 'pub/call_1_0' waits for an approval, not a result: answer it in approvals=, "
        "not tool_results="
    )
    manual = Agent(FunctionModel(_publisher), name="pub", tools=[publish], auto_execute_tools=False)
    returned = Sequence(echo("a"), manual, name="flow").run("x")
    with pytest.raises(InvalidEventError) as info:
        Sequence(echo("a"), manual, name="flow").resume(
            returned.state, approvals={"pub/call_1_0": True}
        )
    assert str(info.value).endswith(
        "call 'pub/call_1_0' waits for a result, not an approval: answer it in tool_results=, "
        "not approvals="
    )
    assert RAN == []


def test_an_approval_held_in_a_failed_nested_parallel_says_to_resume_first() -> None:
    """A failed Sequence(a, Parallel(pub, boom)), 'pub' waiting for an approval, given that
    approval is refused in phase 'failed' saying to resume first (it used to name phase
    'running_tools' and no such call); resumed, it waits for the call, which the same key then
    approves: the publish runs once, the failed step twice, the rest once."""
    assert RAN == []
    ran: list[str] = []
    failing = [True]

    def boom(text: str) -> str:
        ran.append("boom")
        if failing[0]:
            raise ValueError("boom went")
        return "boom ok"

    pub = Agent(FunctionModel(_publisher), name="pub", tools=[publish])
    flow = Sequence(echo("a"), Parallel(pub, boom, name="par"), name="flow")
    with pytest.raises(RunError) as raised:
        flow.run("x")
    failed = state_of(raised.value)
    assert failed.phase == "failed"
    before = failed.to_json()
    with pytest.raises(InvalidEventError) as info:
        flow.resume(failed, approvals={"call_1_0": True})
    assert str(info.value) == (
        "event 'approval_granted' refused in phase 'failed': call 'call_1_0' waits for an "
        "approval in step 'par', which failed: resume(state) with no answers first, which runs "
        "what failed again and has the run wait for the call again; then answer it"
    )
    assert info.value.state is failed
    assert (failed.to_json(), ran, RAN) == (before, ["boom"], [])
    failing[0] = False
    waiting = flow.resume(failed)
    assert [key for key, _ in waiting.state.keyed_pending_approvals] == ["call_1_0"]
    done = flow.resume(waiting.state, approvals={"call_1_0": True})
    assert done.output == {"pub": "Done.", "boom": "boom ok"}
    published, RAN[:] = RAN[:], []  # (the other tests find it empty)
    assert (ran, published) == (["boom", "boom"], ["a(x)"])


def _failed_nested() -> tuple[Sequence, Any]:
    """A Sequence(a, Parallel(pub, boom)) failed in boom, 'pub' waiting for an approval of its
    call 'call_1_0', and its failed state."""

    def boom(text: str) -> str:
        raise ValueError("boom went")

    pub = Agent(FunctionModel(_publisher), name="pub", tools=[publish])
    flow = Sequence(echo("a"), Parallel(pub, boom, name="par"), name="flow")
    with pytest.raises(RunError) as raised:
        flow.run("x")
    return flow, state_of(raised.value)


def test_wrongly_typed_answers_to_a_failed_run_are_usage_errors_first() -> None:
    """Answers of the wrong type to a failed workflow or agent (keys no text, no mapping, an
    approval no bool) are refused as a UsageError saying so, before the refusal of an answer
    held in a failed step (a bare TypeError, or that refusal, before); nothing runs."""
    flow, failed = _failed_nested()
    caller = Agent(
        FunctionModel(lambda request: ScriptedModel.call("flow", {"input": "x"})),
        name="caller",
        tools=[flow.as_tool()],
    )
    with pytest.raises(RunError) as raised:
        caller.run("go")
    caller_failed = state_of(raised.value)
    assert (failed.phase, caller_failed.phase) == ("failed", "failed")
    for resume, state in ((flow.resume, failed), (caller.resume, caller_failed)):
        for bad, said in (
            ({5: True}, "approvals= is keyed by call ids (text), got 5"),
            (True, "approvals= maps call ids to answers, got bool"),
            (["call_1_0"], "approvals= maps call ids to answers, got list"),
            ({"call_1_0": "yes"}, "approval for call 'call_1_0' must be True, False or Denied"),
        ):
            with pytest.raises(UsageError) as info:
                resume(state, approvals=bad)
            assert str(info.value).startswith(said)
        with pytest.raises(UsageError, match="tool_results= is keyed by call ids"):
            resume(state, tool_results={5: "x"})
    assert RAN == []


def test_an_answer_of_the_wrong_kind_held_in_a_failed_step_says_which_it_waits_for() -> None:
    """A result given for a call held in a failed nested step waiting for an approval is refused
    in phase 'failed' saying it waits for an approval and to resume first, then answer it in
    approvals= (it used to name phase 'running_tools' and no such call); the state is kept."""
    flow, failed = _failed_nested()
    before = failed.to_json()
    with pytest.raises(InvalidEventError) as info:
        flow.resume(failed, tool_results={"call_1_0": "by hand"})
    assert str(info.value) == (
        "event 'tool_results_provided' refused in phase 'failed': call 'call_1_0' waits for an "
        "approval, not a result, in step 'par', which failed: resume(state) with no answers "
        "first, which runs what failed again and has the run wait for the call again; then "
        "answer it in approvals=, not tool_results="
    )
    assert info.value.state is failed
    assert (failed.to_json(), RAN) == (before, [])


def test_a_held_result_is_refused_after_every_value_is_checked_in_any_order() -> None:
    """Results for a failed run, one for a call held in a failed step and one a generator, are
    refused for the generator (a UsageError naming its key) whichever the dict gives first (the
    held refusal came first when the held key did)."""
    flow, failed = _failed_nested()

    def values() -> Any:
        yield 1

    for results in (
        {"call_1_0": "by hand", "zz": values()},
        {"zz": values(), "call_1_0": "by hand"},
    ):
        with pytest.raises(UsageError, match=r"^tool_results\['zz'\] is a generator"):
            flow.resume(failed, tool_results=results)
    assert RAN == []
