"""`StepEnded`, a workflow's own event: what the reducer accepts, refuses, and how it folds."""

from __future__ import annotations

import pytest

from toolfold import Agent, InvalidEventError, RunState, Sequence, Task
from toolfold.runtime import StepEnded, fork, initial_state, reduce, replay
from toolfold.runtime.core._reducer import end_steps
from toolfold.runtime.core._serialize import events_from_json, events_to_json
from toolfold.testing import FunctionModel


def echo(name: str) -> Agent:
    """An agent that answers ``name(<its prompt>)``."""
    return Agent(FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name)


def _flow() -> Sequence:
    return Sequence(echo("a"), Task(echo("b"), on_error="retry", retries=1), name="flow")


def _started() -> RunState:
    """A fresh run of `_flow`'s config, before any step."""
    done = _flow().run("x", run_id="wf")
    return initial_state(done.state.messages[:1], done.state.config, run_id="wf", agent="flow")


def test_a_lean_run_records_one_step_ended_per_step_and_the_output_on_the_last() -> None:
    """Sequence(a, b) logs run_started and two step_ended, the output on the second; it replays and round-trips."""
    done = _flow().run("x", run_id="wf")
    first, second = done.state.events[1:]
    assert [e.kind for e in done.state.events] == ["run_started", "step_ended", "step_ended"]
    assert isinstance(first, StepEnded)
    assert isinstance(second, StepEnded)
    assert (first.name, first.input, first.final) == ("a", "x", False)
    assert (second.name, second.input, second.final, second.output) == (
        "b",
        "a(x)",
        True,
        "b(a(x))",
    )
    assert done.state.step == 2
    assert done.outputs == {"a": "a(x)", "b": "b(a(x))"}
    assert [[c.name for c in step.tool_calls] for step in done.steps] == [["a"], ["b"]]
    assert replay(done.state.log) == done.state
    assert RunState.from_json(done.state.to_json()) == done.state
    assert events_from_json(events_to_json(done.state.events)) == done.state.events


def test_fork_at_a_middle_step_of_a_lean_run_reruns_only_the_rest() -> None:
    """fork(step=1) keeps step a's run; resuming runs b only, to the same output."""
    done = _flow().run("x", run_id="wf")
    forked = fork(done.state, step=1, run_id="wf2")
    assert sorted(forked.sub_runs) == ["a"]
    again = _flow().resume(forked)
    assert again.output == done.output
    assert again.state.sub_runs["a"] is forked.sub_runs["a"]
    assert again.state.sub_runs["b"].run_id == "wf2/b"
    assert replay(again.state.log) == again.state


def test_the_reducer_refuses_a_step_the_workflow_does_not_have() -> None:
    """A StepEnded naming no step of the workflow is refused, naming it."""
    with pytest.raises(InvalidEventError, match="no step 'c' in this workflow"):
        reduce(_started(), StepEnded("c", "c", "x", {}, '"c(x)"'))


def test_the_reducer_refuses_a_step_whose_run_did_not_end() -> None:
    """A step's sub-run that still waits cannot be recorded as ended."""
    waiting = initial_state("hi", run_id="sub")
    with pytest.raises(InvalidEventError, match="its run did not end"):
        reduce(_started(), StepEnded("a", "a", "x", {}, '"a(x)"', child=waiting))


def test_the_reducer_refuses_content_that_is_not_text() -> None:
    """A step's result is text."""
    with pytest.raises(InvalidEventError, match="must be text"):
        reduce(_started(), StepEnded("a", "a", "x", {}, 3))  # type: ignore[arg-type]


def test_a_failure_past_the_retries_fails_the_run_and_end_steps_agrees_with_reduce() -> None:
    """b fails twice with retries=1: the run fails there; end_steps gives reduce's state and refusal."""
    events = [
        StepEnded("a", "a", "x", {}, '"a(x)"'),
        StepEnded("b", "b", "a(x)", {}, "Error: down", is_error=True),
        StepEnded("b#2", "b", "a(x)", {}, "Error: down", is_error=True),
    ]
    state = _started()
    one_by_one = state
    for event in events:
        one_by_one = reduce(one_by_one, event)
    assert one_by_one.phase == "failed"
    assert one_by_one.error is not None
    assert one_by_one.error.kind == "tool_retries_exceeded"
    assert end_steps(state, events) == one_by_one
    late = [*events, StepEnded("c", "b", "a(x)", {}, '"b"')]
    with pytest.raises(InvalidEventError) as fused:
        end_steps(state, late)
    with pytest.raises(InvalidEventError) as single:
        reduce(one_by_one, late[-1])
    assert str(fused.value) == str(single.value)


def test_a_step_ended_after_the_output_is_refused() -> None:
    """Once the last step's event finished the run, no step can end."""
    done = reduce(_started(), StepEnded("a", "a", "x", {}, '"a(x)"', final=True, output="a(x)"))
    assert (done.phase, done.output) == ("finished", "a(x)")
    with pytest.raises(InvalidEventError, match="finished"):
        reduce(done, StepEnded("b", "b", "a(x)", {}, '"b"'))


def test_a_loop_condition_that_raises_is_called_once_and_fails_as_the_loop_reports_it() -> None:
    """`until` raising after an iteration: called once, the RunError holds the state after the iteration."""
    from toolfold import Loop, RunError

    calls: list[str] = []

    def until(out: str) -> bool:
        calls.append(out)
        raise ValueError("cannot tell")

    with pytest.raises(RunError, match="cannot tell") as lean:
        Loop(echo("e"), until=until, max_iterations=3).run("x", run_id="lp")
    assert calls == ["e(x)"]
    with pytest.raises(RunError) as looped:
        Loop(echo("e"), until=until, max_iterations=3).run(
            "x", run_id="lp", on_event=lambda event: None
        )
    assert str(lean.value) == str(looped.value)
    assert lean.value.state is not None
    assert sorted(lean.value.state.sub_runs) == ["e.1"]
