"""Handoffs, as_tool(output=...) and on_tool_error="raise" on Temporal: the same specs as locally, on a real dev server."""

from __future__ import annotations

from pathlib import Path

import pytest
import temporal_app
from temporal_runs import (
    _approved_like_local,
    _failing,
    _lines,
    _replays,
    _run,
    _run_like_local,
    _scheduled,
)
from temporal_servers import DevServer

import toolfold.integrations.temporal._workflow as workflow_module
from toolfold import RunError, ToolExecutionError
from toolfold.integrations.temporal import TemporalAgent
from toolfold.runtime import TokenBudget


@pytest.mark.parametrize(
    ("agent", "text", "prefix"),
    [
        (temporal_app.desk, "sorted: GO", "desk"),
        (temporal_app.handed, "last(sorted: GO1)", "handed.triage"),
        (temporal_app.front, "front: sorted: BILL ME", "front.triage"),
    ],
    ids=["top", "step", "as_tool"],
)
def test_a_handoff_cycle_runs_durably_like_a_local_run(
    agent: TemporalAgent,
    text: str,
    prefix: str,
    server: DevServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """triage -> billing (input filter) -> triage by name: the durable state is the local run's, at the top, in a step, in a sub-agent."""
    run_id = f"handoff-{agent.name}"
    # the same state: the handoffs, the filtered conversation, every sub-run
    durable, history, _ = _run_like_local(agent, run_id, server, tmp_path, monkeypatch)
    assert durable.text == text
    done = [line for line in _lines(tmp_path) if line.startswith("done ")]
    assert len(done) == 2
    assert len(set(done)) == 1
    # billing's model and tools are activities of their own: <first agent's node>@billing
    scheduled = _scheduled(history)
    assert scheduled.count(f"{prefix}@billing__model_request") == 2
    assert scheduled.count(f"{prefix}__model_request") == 2  # triage, before and after
    assert f"{prefix}@billing__tool__record" in scheduled
    _replays(history)


def test_the_handed_off_events_are_the_local_runs(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The durable run hands off to billing, then back to triage, and billing saw only the user's message."""
    durable, _ = _run(temporal_app.desk, "handoff-events", server, tmp_path, monkeypatch)
    handed = [e for e in durable.state.events if e.kind == "handed_off"]
    assert [e.agent for e in handed] == ["billing", "triage"]
    assert handed[0].messages is not None
    assert [m.role for m in handed[0].messages] == ["user"]  # the input filter ran
    assert durable.agent == "triage"


def test_a_second_transfer_in_one_answer_says_so_in_the_durable_log(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two transfers in one answer: the durable run's log says the second did not transfer, as locally, and the handoff keeps the conversation."""
    durable, history, _ = _run_like_local(temporal_app.torn, "torn", server, tmp_path, monkeypatch)
    assert (durable.agent, durable.text) == ("refunds", "refunded")
    returned = [e for e in durable.state.events if e.kind == "tool_returned"]
    assert returned[0].content == "Transferred to refunds."
    assert returned[1].content.startswith("Not transferred: the conversation went to refunds")
    (handed,) = [e for e in durable.state.events if e.kind == "handed_off"]
    assert handed.messages is None
    _replays(history)


def test_a_handoff_cycle_stops_at_the_runs_max_steps(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ping <-> pong forever: the durable run stops at the first agent's max_steps, as locally,
    handed to pong by the transfer of the step that reached it."""
    durable, history, local = _run_like_local(
        temporal_app.ping, "ping-1", server, tmp_path, monkeypatch
    )
    assert durable.finish_reason == local.finish_reason == "max_steps"
    assert durable.state.step == 3
    assert durable.agent == "pong"
    assert [e.agent for e in durable.state.events if e.kind == "handed_off"] == [
        "pong",
        "ping",
        "pong",
    ]
    _replays(history)


def test_on_tool_error_raise_fails_the_durable_run_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failing tool raises the local run's ToolExecutionError, with the same message and state."""
    durable = _failing(
        temporal_app.strict, "strict-1", ToolExecutionError, server, tmp_path, monkeypatch
    )
    assert str(durable) == "tool 'crash' failed: Error: ValueError: cannot take 'x'"
    assert durable.state is not None
    assert durable.state.phase == "running_tools"  # before the step's results, as locally


def test_on_tool_error_raise_keeps_the_result_of_a_call_beside_the_failing_one_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The durable error's state is the local one: the call that ended beside the failing one
    has its result committed, the failed call is still to run."""
    durable = _failing(
        temporal_app.strict_beside,
        "strict-beside-1",
        ToolExecutionError,
        server,
        tmp_path,
        monkeypatch,
    )
    state = durable.state
    assert state is not None
    results = {c.call.name: c.result for c in state.calls}
    assert results["crash"] is None
    assert results["note"] is not None
    assert results["note"].content == "noted y"


def test_on_tool_error_raise_above_a_failing_sub_agent_keeps_its_usage_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A caller raising on its sub-agent's failure: the durable error's state is the local one,
    whose tree usage counts the sub-agent's model call (left out with the round's results)."""
    durable = _failing(
        temporal_app.stricter, "stricter-1", ToolExecutionError, server, tmp_path, monkeypatch
    )
    state = durable.state
    assert state is not None
    assert state.phase == "running_tools"
    (dropped,) = [e for e in state.events if e.kind == "attempt_dropped"]
    assert dropped.sub_run_usage.requests == 1  # strict's one model call
    assert state.tree_usage == state.usage + dropped.sub_run_usage
    assert state.tree_usage.requests == 2


def test_on_tool_error_raise_names_a_renamed_failing_sub_agent_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error of a caller raising on its sub-agent (tool 'check', agent 'strict') names
    the agent, durably as locally; nested, that text is its own caller's error result."""
    durable = _failing(
        temporal_app.stricter_renamed,
        "stricter-renamed-1",
        ToolExecutionError,
        server,
        tmp_path,
        monkeypatch,
    )
    assert str(durable).startswith("tool 'check' failed in agent 'strict': Error: ")
    nested, history, _ = _run_like_local(
        temporal_app.lenient_renamed, "lenient-renamed-1", server, tmp_path, monkeypatch
    )
    assert "ToolExecutionError: tool 'check' failed in agent 'strict': " in nested.text
    _replays(history)


def test_a_run_recorded_before_a_failure_named_its_agent_replays_so(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run without the toolfold-failure-names-agent patch (as an earlier toolfold ran it):
    the nested error result keeps the text it had, and the history replays with this code."""
    patched = workflow_module.workflow.patched
    monkeypatch.setattr(
        workflow_module.workflow,
        "patched",
        lambda given: given != workflow_module.FAILURE_NAMES_AGENT and patched(given),
    )
    old, history = _run(
        temporal_app.lenient_renamed, "lenient-renamed-old", server, tmp_path, monkeypatch
    )
    assert "ToolExecutionError: tool 'check' failed: " in old.text
    monkeypatch.setattr(workflow_module.workflow, "patched", patched)
    _replays(history)


def test_on_tool_error_raise_inside_a_sub_agent_is_its_callers_error_result(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sub-agent that raises on a tool error gives its caller the error result a local run gives."""
    durable, _, _ = _run_like_local(
        temporal_app.lenient, "lenient-1", server, tmp_path, monkeypatch
    )
    assert "ToolExecutionError: tool 'crash' failed" in durable.text


def test_a_sub_agent_stopped_by_tool_called_answers_with_that_call_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent tool whose run stops at tool_called gives the caller that call's result (its error when it failed), on Temporal as locally; one stopped at max_steps an error naming it and the limit."""
    durable, _, _ = _run_like_local(
        temporal_app.settling, "settling-1", server, tmp_path, monkeypatch
    )
    assert durable.text == (
        "settled 42 | Error: ValueError: no answer | Error: agent 'hasty' stopped at its "
        "limit max_steps=1 after 1 model call without answering"
    )


def test_as_tool_output_runs_once_in_its_activity(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """as_tool(output=fn): the caller sees what fn made (or its error) as locally; fn ran once, in its activity."""
    durable, history = _run(temporal_app.extracting, "extract-1", server, tmp_path, monkeypatch)
    assert _lines(tmp_path).count("shout echo(hi)") == 1
    local = temporal_app.extracting.agent.run("go", run_id="extract-1")
    assert (
        durable.text
        == local.text
        == "ECHO(HI) | Error: the output= function of tool 'mute' failed: KeyError: 'no summary'"
    )
    assert durable.state == local.state
    scheduled = _scheduled(history)
    assert scheduled.count("extracting.loud__output") == scheduled.count("extracting.mute__output")
    assert scheduled.count("extracting.loud__output") == 1
    _replays(history)  # the recorded result: replay never runs fn again
    assert _lines(tmp_path).count("shout echo(hi)") == 2  # the durable run's and the local one


def test_a_run_handed_off_continues_as_new_with_the_agent_it_was_handed_to(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Continue-as-new after each model call: every new history goes on with the agent the run was handed to."""
    durable, history, _ = _run_like_local(
        temporal_app.hopping, "hopping-1", server, tmp_path, monkeypatch
    )
    assert durable.text == "sorted: GO"
    assert _scheduled(history) == ["hopping__model_request"]  # the last history: triage answers


def test_a_handoff_target_waiting_for_an_approval_resumes_with_that_agent(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run waits inside the agent it was handed to; the approval resumes it there, as a local resume does."""
    agent = temporal_app.cashier  # waiting and done as a local run and its resume
    waiting, durable = _approved_like_local(agent, "go", "cashier-1", server, tmp_path, monkeypatch)
    assert waiting.agent == "till"
    assert durable.text == "billing: moved 5"


def test_an_input_filter_that_raises_fails_the_durable_run_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A raising input_filter fails the run with the local RunError, its state the run before the handoff."""
    durable = _failing(temporal_app.clumsy, "clumsy-1", RunError, server, tmp_path, monkeypatch)
    assert "input_filter of the handoff to 'billing' raised LookupError" in str(durable)
    assert durable.state is not None
    assert durable.state.agent == "clumsy"


def test_a_step_that_stops_at_max_steps_fails_durably_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step's agent stops at max_steps without answering: skipped with its error, not 'null' passed on."""
    durable, history, _ = _run_like_local(
        temporal_app.unanswered, "unanswered", server, tmp_path, monkeypatch
    )
    assert durable.text == "b(go)"
    assert durable.errors["looper"].startswith("Error: the step's run stopped at its limit")
    _replays(history)


def test_a_step_handed_on_that_stops_at_max_steps_names_both_agents_durably_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step's agent hands its run to the looper, which stops at max_steps: the step's error
    names the run of 'desk' handed to 'looper', as locally (it said "the step's run")."""
    durable, history, _ = _run_like_local(
        temporal_app.handed_unanswered, "handed-unanswered", server, tmp_path, monkeypatch
    )
    assert durable.text == "b(go)"
    assert durable.errors["desk"] == (
        "Error: the run of agent 'desk', handed to agent 'looper', stopped at its limit "
        "max_steps=2 after 2 model calls without answering"
    )
    _replays(history)


def test_the_first_agents_stop_conditions_stop_the_target_durably_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """triage's stop callable stops refunds after the handoff (before its token_budget would), as locally."""
    durable, history, _ = _run_like_local(
        temporal_app.kept_stops, "kept-stops-1", server, tmp_path, monkeypatch
    )
    assert (durable.finish_reason, durable.agent, durable.state.usage.requests) == (
        "stop_condition",
        "refunds",
        3,
    )
    assert durable.state.config.stop_when == (TokenBudget(2000),)  # the budget goes on too
    _replays(history)


def test_a_cycle_drops_the_conditions_of_the_agent_that_handed_back_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """looped -> ponger -> looped: ponger's budget and callable stop nothing after it hands back; max_steps ends both runs alike."""
    durable, history, _ = _run_like_local(
        temporal_app.looped, "looped-1", server, tmp_path, monkeypatch
    )
    assert (durable.finish_reason, durable.agent, durable.state.usage.requests) == (
        "max_steps",
        "looped",
        6,
    )
    assert durable.state.config.stop_when == ()
    _replays(history)


def test_a_chain_drops_the_middle_agents_conditions_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """opener -> middle -> closer: closer runs under the first agent's conditions, not middle's, as locally."""
    durable, history, _ = _run_like_local(
        temporal_app.relayed_stops, "relayed-stops-1", server, tmp_path, monkeypatch
    )
    assert (durable.finish_reason, durable.agent, durable.state.usage.requests) == (
        "max_steps",
        "closer",
        5,
    )
    assert durable.state.config.stop_when == (TokenBudget(100000),)
    _replays(history)


def test_an_unfit_input_filter_fails_the_durable_run_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter leaving a tool result without its call fails the run before refunds' model runs, as locally."""
    durable = _failing(temporal_app.orphaned, "orphaned-1", RunError, server, tmp_path, monkeypatch)
    assert "returned a conversation no provider takes" in str(durable)
    assert durable.state is not None
    assert durable.state.agent == "orphaned"
