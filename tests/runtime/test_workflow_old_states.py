"""States saved before workflows recorded `StepEnded` events load, resume, fork and replay."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from old_format_workflow import workflow
from workflow_runs import reached

from toolfold import RunState
from toolfold.runtime import fork, replay
from toolfold.runtime._workflow import WorkflowResponse

STATES = Path(__file__).parent / "states"
OUTPUT = "z(g: deleted old.log)"


def _load(name: str) -> RunState:
    return RunState.from_json((STATES / name).read_text())


def test_old_states_load_replay_and_round_trip_exactly() -> None:
    """Both stored states (decisions and tool results, no StepEnded) load, replay to themselves and survive JSON."""
    for name in ("workflow_suspended_v1.json", "workflow_finished_v1.json"):
        state = _load(name)
        assert "step_ended" not in [e.kind for e in state.events]
        assert replay(state.log) == state
        assert RunState.from_json(state.to_json()) == state
        assert state.to_json() == (STATES / name).read_text()


def test_an_old_finished_state_reads_back_its_outputs() -> None:
    """The outputs, errors and sub-runs of an old finished state read as they did."""
    done = WorkflowResponse(_load("workflow_finished_v1.json"))
    assert done.text == OUTPUT
    assert done.outputs["both"] == {"b1": "b1(a(x))", "b2": "b2(a(x))"}
    assert done.outputs["z"] == OUTPUT
    assert not done.errors
    assert sorted(done.state.sub_runs) == ["a", "again", "both", "g", "pick", "z"]


def test_an_old_suspended_state_resumes_to_the_old_finished_state() -> None:
    """Answering the approval inside step g of the old state reaches what the old code reached.

    The old events stay as they were; the steps after the answer are recorded
    as `StepEnded` events.
    """
    waiting = _load("workflow_suspended_v1.json")
    (call,) = waiting.pending_approvals
    done = workflow().resume(waiting, approvals={call.id: True})
    assert done.output == OUTPUT
    assert reached(done.state) == reached(_load("workflow_finished_v1.json"))
    assert done.state.events[: len(waiting.events)] == waiting.events
    assert [e.kind for e in done.state.events[len(waiting.events) :]] == [
        "call_resumed",
        "tool_returned",
        "step_ended",
    ]
    assert replay(done.state.log) == done.state
    assert RunState.from_json(done.state.to_json()) == done.state


def test_an_old_suspended_state_resumes_in_another_process() -> None:
    """The old suspended state's JSON, resumed by a fresh interpreter, finishes with the same output."""
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from old_format_workflow import workflow\n"
        "from toolfold import RunState\n"
        "state = RunState.from_json(open(sys.argv[2]).read())\n"
        "(call,) = state.pending_approvals\n"
        "print(workflow().resume(state, approvals={call.id: True}).state.to_json())\n"
    )
    here = str(Path(__file__).parent)
    ran = subprocess.run(
        [sys.executable, "-c", script, here, str(STATES / "workflow_suspended_v1.json")],
        capture_output=True,
        text=True,
        check=True,
    )
    done = RunState.from_json(ran.stdout)
    assert done.output == OUTPUT
    assert reached(done) == reached(_load("workflow_finished_v1.json"))


def test_an_old_state_forked_at_a_middle_step_goes_on_with_step_ended_events() -> None:
    """Forked after its second step, an old state runs on in the new events; both kinds replay and round-trip."""
    old = _load("workflow_finished_v1.json")
    forked = fork(old, step=2, run_id="forked")
    assert forked.phase == "awaiting_model"
    assert sorted(forked.sub_runs) == ["a", "both"]
    waiting = workflow().resume(forked)
    assert waiting.state.phase == "awaiting_approval"  # step g asks again
    (call,) = waiting.pending_approvals
    done = workflow().resume(RunState.from_json(waiting.state.to_json()), approvals={call.id: True})
    assert done.output == OUTPUT
    kinds = [e.kind for e in done.state.events]
    # the old steps a and both; pick and again lean; g suspends (its round as the loop
    # records one); z lean again, with the output
    assert kinds == [
        "run_started",
        *["model_responded", "tool_returned"] * 2,
        *["step_ended"] * 2,
        "model_responded",
        "tool_suspended",
        "call_resumed",
        "tool_returned",
        "step_ended",
    ]
    assert done.state.sub_runs["pick"].run_id == "forked/pick"
    assert replay(done.state.log) == done.state
    assert RunState.from_json(done.state.to_json()) == done.state
