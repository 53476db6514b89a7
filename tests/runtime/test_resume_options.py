"""Which options a resume takes: applied (max_steps, live parts) or refused, never ignored."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from toolfold import (
    Agent,
    InvalidEventError,
    RunError,
    RunState,
    Sequence,
    ToolExecutionError,
    UsageError,
    generate_text,
    resume,
    tool,
)
from toolfold.runtime import (
    RunConfig,
    StepLimitChanged,
    ToolSpec,
    events_from_json,
    events_to_json,
    initial_state,
    reduce,
)
from toolfold.runtime import max_steps as stop_at
from toolfold.runtime.core._request import ToolDefinition
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: How much.
    """
    return "paid"


def _looping(calls: int, then: str = "done") -> ScriptedModel:
    return ScriptedModel([*(call("add", {"a": i, "b": 1}) for i in range(calls)), then])


def test_resume_with_a_larger_max_steps_continues_the_run() -> None:
    """A run stopped at max_steps=2 resumed with max_steps=4 makes the model calls it lacked."""
    model = _looping(3)
    first = generate_text(model, "go", tools=[add], max_steps=2)
    assert (first.finish_reason, first.state.step) == ("max_steps", 2)
    again = resume(first.state, model=model, tools=[add], max_steps=4)
    assert (again.finish_reason, again.text, again.state.step) == ("stop", "done", 4)
    assert again.state.config.max_steps == 4


def test_max_steps_on_resume_is_the_new_total_for_the_turn() -> None:
    """max_steps=3 after stopping at 2 allows exactly one more model call."""
    model = _looping(10)
    first = generate_text(model, "go", tools=[add], max_steps=2)
    again = resume(first.state, model=model, tools=[add], max_steps=3)
    assert (again.finish_reason, again.state.step, model.remaining) == ("max_steps", 3, 8)


def test_the_resuming_agents_max_steps_applies() -> None:
    """Agent(max_steps=20).resume(state) continues a run its twin with max_steps=1 stopped."""
    model = _looping(2)
    first = Agent(model, tools=[add], max_steps=1).run("go")
    again = Agent(model, tools=[add], max_steps=20).resume(first.state)
    assert (again.finish_reason, again.text, again.state.step) == ("stop", "done", 3)


def test_a_smaller_max_steps_of_the_resuming_agent_lowers_the_limit() -> None:
    """An agent with max_steps=1 resuming a suspended run stops it after that step."""
    model = ScriptedModel([call("pay", {"amount": 5}), call("add", {"a": 1, "b": 1}), "done"])
    first = Agent(model, tools=[pay, add], max_steps=10).run("go")
    approval = {first.state.pending_approvals[0].id: True}
    again = Agent(model, tools=[pay, add], max_steps=1).resume(first.state, approvals=approval)
    assert (again.finish_reason, again.state.step, again.state.config.max_steps) == (
        "max_steps",
        1,
        1,
    )


@pytest.mark.parametrize("functional", [True, False])
def test_resume_at_max_steps_without_more_steps_is_refused(functional: bool) -> None:
    """Resuming a run stopped at max_steps with nothing that continues it says how to go on."""
    model = _looping(5)
    agent = Agent(model, tools=[add], max_steps=2)
    first = agent.run("go")

    def again() -> Any:
        if functional:
            return resume(first.state, model=model, tools=[add])
        return agent.resume(first.state)

    with pytest.raises(UsageError, match="resume with max_steps=N above 2") as caught:
        again()
    assert "message=" in str(caught.value)
    assert model.remaining == 4  # no model call was made


def test_max_steps_below_the_calls_made_is_refused() -> None:
    """A limit below the model calls this turn already made is a clear error."""
    model = _looping(5)
    first = generate_text(model, "go", tools=[add], max_steps=3)
    with pytest.raises(UsageError, match=r"max_steps=2 \(given to resume\) is below the 3"):
        resume(first.state, model=model, tools=[add], max_steps=2)


def test_a_message_starts_a_new_turn_with_the_limit_counted_anew() -> None:
    """After stopping at max_steps, a new message gets the full max_steps again."""
    model = ScriptedModel([call("add", {"a": 1, "b": 1}), "second turn"])
    first = generate_text(model, "go", tools=[add], max_steps=1)
    again = resume(first.state, model=model, tools=[add], message="and now?")
    assert (again.finish_reason, again.text) == ("stop", "second turn")


def _suspended() -> tuple[Agent, RunState]:
    agent = Agent(ScriptedModel([call("pay", {"amount": 5}), "paid it"]), tools=[pay, add])
    return agent, agent.run("go").state


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"instructions": "Be terse."}, "instructions"),
        ({"settings": {"temperature": 0.5}}, "settings"),
        ({"tool_choice": "required"}, "tool_choice"),
        ({"output_retries": 1}, "output_retries"),
        ({"auto_execute_tools": False}, "auto_execute_tools"),
        ({"output_type": int}, "output_type"),
    ],
)
def test_an_agent_with_other_stored_options_is_refused(change: dict[str, Any], named: str) -> None:
    """An agent whose stored options differ from the run's cannot resume it, and says which."""
    agent, state = _suspended()
    other = agent.evolve(**change)
    verb = "differ" if named in ("instructions", "settings") else "differs"  # (plurals)
    with pytest.raises(UsageError, match=f"agent's {named} {verb} from the run's"):
        other.resume(state, approvals={state.pending_approvals[0].id: True})


def test_the_resuming_agents_on_tool_error_applies() -> None:
    """on_tool_error="raise" on the resuming agent raises for a failing tool."""

    @tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("nope")

    model = ScriptedModel([call("add", {"a": 1, "b": 1}), call("broken", {}), "done"])
    first = Agent(model, tools=[add, broken], max_steps=1).run("go")
    strict = Agent(model, tools=[add, broken], max_steps=5, on_tool_error="raise")
    with pytest.raises(ToolExecutionError, match="nope"):
        strict.resume(first.state)


def test_stop_conditions_given_on_resume_apply() -> None:
    """A data stop condition given to resume stops the run (not stored, yet applied)."""
    model = _looping(5)
    first = generate_text(model, "go", tools=[add], max_steps=1)
    again = resume(first.state, model=model, tools=[add], max_steps=10, stop_when=[stop_at(3)])
    assert (again.finish_reason, again.state.step) == ("max_steps", 3)
    assert again.state.config.stop_when == ()


def test_the_core_reopens_a_run_stopped_at_its_limit() -> None:
    """StepLimitChanged continues a run finished at its limit, and finishes one already at it."""
    first = generate_text(_looping(2), "go", tools=[add], max_steps=2)
    event = StepLimitChanged(3)
    reopened = reduce(first.state, event)
    assert (reopened.phase, reopened.finish_reason, reopened.config.max_steps) == (
        "awaiting_model",
        None,
        3,
    )
    assert events_from_json(events_to_json([event])) == (event,)
    lowered = reduce(reopened, StepLimitChanged(2))
    assert (lowered.phase, lowered.finish_reason) == ("finished", "max_steps")
    with pytest.raises(InvalidEventError, match="below the 2 model calls"):
        reduce(first.state, StepLimitChanged(1))
    waiting = initial_state("go", RunConfig(tools=[ToolSpec(ToolDefinition("add"))]), run_id="r")
    assert reduce(waiting, StepLimitChanged(5)).config.max_steps == 5


# --- sub-runs: a changed sub-agent or step agent is refused up front, as the agent is ---

ran: list[str] = []


@tool(requires_approval=True)
def act(x: str) -> str:
    """Act.

    Args:
        x: What on.
    """
    ran.append(x)
    return "acted"


def _asking(tool_name: str, arguments: dict[str, Any], answer: str) -> FunctionModel:
    """Calls ``tool_name``, then answers ``answer`` and what the call gave."""

    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return f"{answer}: {last.tool_results[0].content}"
        return call(tool_name, arguments)

    return FunctionModel(reply)


def _adding_then_acting(request: Any) -> Any:
    """Adds, then acts (waiting for an approval at its second step), then answers."""
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        return call("add", {"a": 1, "b": 1})
    if len(results) == 1:
        return call("act", {"x": "1"})
    return f"sub done: {results[-1].tool_results[0].content}"


def _lead(instructions: str = "v1", tools: tuple[Any, ...] = (add, act), **more: Any) -> Agent:
    sub = Agent(FunctionModel(_adding_then_acting), name="sub", tools=tools, **more)
    lead_model = _asking("sub", {"input": "go"}, "lead")
    return Agent(lead_model, name="lead", tools=[sub.evolve(instructions=instructions).as_tool()])


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        ({"instructions": "v2"}, "the resuming agent's instructions differ from the run's"),
        ({"tools": (add,)}, "the run's state names tools that were not given: act"),
        ({"max_steps": 1}, "max_steps=1 (the resuming agent's) is below the 2 model calls"),
    ],
)
def test_a_changed_agent_used_as_a_tool_is_refused_before_anything_runs(
    changed: dict[str, Any], reason: str
) -> None:
    """A sub-run that its changed agent cannot resume is refused as the agent would be, before
    the approval is applied: the tool never runs, nothing is used up, and the same run then
    resumes with the agent that started it."""
    ran.clear()
    first = _lead().run("go")
    text = first.state.to_json()
    approvals = {c.id: True for c in first.pending_approvals}
    message = (
        "cannot resume the sub-run of call 'call_1_0' (tool 'sub'), so nothing was run: " + reason
    )
    with pytest.raises(UsageError, match=re.escape(message)):
        _lead(**changed).resume(RunState.from_json(text), approvals=approvals)
    assert ran == []
    assert first.state.to_json() == text
    done = _lead().resume(RunState.from_json(text), approvals=approvals)
    assert (done.text, ran) == ("lead: sub done: acted", ["1"])


def test_a_changed_sub_agent_two_levels_down_is_named_by_its_path() -> None:
    """The path to the refused sub-run is given as resume keys its calls (``a/b``); an
    async resume is refused the same way."""

    def tree(instructions: str) -> Agent:
        inner = Agent(_asking("act", {"x": "1"}, "in"), name="inner", tools=[act])
        inner = inner.evolve(instructions=instructions)
        mid = Agent(_asking("inner", {"input": "go"}, "mid"), name="mid", tools=[inner.as_tool()])
        return Agent(_asking("mid", {"input": "go"}, "top"), name="top", tools=[mid.as_tool()])

    ran.clear()
    first = tree("v1").run("go")
    approvals = {c.id: True for c in first.pending_approvals}
    with pytest.raises(UsageError, match=re.escape("call 'call_1_0/call_1_0' (tool 'inner')")):
        asyncio.run(tree("v2").aresume(first.state, approvals=approvals))
    assert ran == []
    resumed = asyncio.run(tree("v1").aresume(first.state, approvals=approvals))
    assert resumed.text == "top: mid: in: acted"


def test_a_changed_step_agent_is_refused_before_anything_runs() -> None:
    """A workflow step's agent is checked the same way, its instructions' placeholders filled
    with the step's input first (the filled instructions are what its run stored)."""

    def workflow(instructions: str) -> Sequence:
        step = Agent(_asking("act", {"x": "1"}, "step"), name="step", tools=[act])
        return Sequence(step.evolve(instructions=instructions), name="wf")

    ran.clear()
    first = workflow("Work on {input}.").run("go")
    approvals = {c.id: True for c in first.pending_approvals}
    changed = workflow("Now work on {input}.")
    with pytest.raises(UsageError, match=r"sub-run of call 'step' .*instructions differ"):
        changed.resume(first.state, approvals=approvals)
    with pytest.raises(UsageError, match=r"sub-run of call 'step' .*instructions differ"):
        changed.resume_stream(first.state, approvals=approvals)
    assert ran == []
    done = workflow("Work on {input}.").resume(first.state, approvals=approvals)
    assert (done.output, ran) == ("step: acted", ["1"])


def test_a_finished_sub_run_on_a_call_still_to_run_does_not_block_the_resume() -> None:
    """Ctrl-C in a round whose answers ended a sub-run (a denial at its max_steps): the
    state holds the finished sub-run on a call still to run, and resumes with the same agents."""
    import attrs

    @tool(requires_approval=True)
    def act(x: str) -> str:
        """Act.

        Args:
            x: X.
        """
        return "acted"

    interrupted = []

    @tool(requires_approval=True, blocking=False)
    def danger() -> str:
        """Danger."""
        interrupted.append(1)
        if len(interrupted) == 1:
            raise KeyboardInterrupt  # Ctrl-C while the round runs, once
        return "done"

    def lead_model(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return "lead: " + " | ".join(t.content for t in last.tool_results)
        return [
            attrs.evolve(ScriptedModel.call("danger", {}), id="d1"),
            attrs.evolve(ScriptedModel.call("sub", {"input": "go"}), id="s1"),
        ]

    def make() -> Agent:
        sub = Agent(
            FunctionModel(lambda request: ScriptedModel.call("act", {"x": "1"})),
            name="sub",
            tools=[act],
            max_steps=1,
        )
        return Agent(FunctionModel(lead_model), name="lead", tools=[danger, sub.as_tool()])

    first = make().run("go")
    with pytest.raises(KeyboardInterrupt) as caught:
        make().resume(first.state, approvals={"d1": True, "s1/call_1_0": False})
    state = caught.value.state  # type: ignore[attr-defined]
    (sub_call,) = [c for c in state.calls if c.call.name == "sub"]
    assert sub_call.status != "done"
    assert sub_call.child.is_done
    again = make().resume(RunState.from_json(state.to_json()))
    assert again.text.startswith("lead: done | ")
    assert interrupted == [1, 1]  # danger ran again (it had not finished), once


@pytest.mark.parametrize("answer", ["approve", "deny", "result"])
def test_a_step_the_resumes_answers_close_is_reported_like_one_the_loop_closes(
    answer: str,
) -> None:
    """Denied or given results close the waiting step as a call run by the loop does: the
    result event, the step end and `on_step`, streamed or not, once."""
    from toolfold import Tool

    @tool(requires_approval=True)
    def act(x: str) -> str:
        """Act.

        Args:
            x: X.
        """
        return "acted"

    # no function: its calls go back to the caller, who answers them
    schema = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    ask = Tool("act", "Ask the caller.", schema)

    def model(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "end"
        return FunctionModel.call("act", {"x": "1"})

    agent = Agent(FunctionModel(model), tools=[ask if answer == "result" else act])
    first = agent.run("go")
    if answer == "result":
        (waiting,) = first.state.tool_calls
        answers: dict[str, Any] = {"tool_results": {waiting.id: "given"}}
    else:
        (waiting,) = first.pending_approvals
        answers = {"approvals": {waiting.id: answer == "approve"}}
    seen: list[Any] = []
    events = list(agent.resume_stream(first.state, on_step=seen.append, **answers))
    kinds = [event.kind for event in events]
    assert kinds[:2] == ["tool_result", "step_end"]
    assert kinds.count("step_end") == 2  # the answered step, then the final answer's
    (result,) = [e for e in events if e.kind == "tool_result"]
    expected = {"approve": "ok", "deny": "denied", "result": "ok"}[answer]
    assert result.outcome == expected
    assert len(seen) == 2
    assert [r.call_id for r in seen[0].tool_results] == [waiting.id]
    blocking: list[Any] = []
    agent.resume(first.state, on_step=blocking.append, **answers)
    assert len(blocking) == 2


def test_answers_are_shown_once_across_resumes() -> None:
    """A step's answers show in the resume that gives them, not again: not when a first
    resume denies one call and a second approves the other, nor when the model call after
    a denial that closed the step fails and its error's state is resumed."""

    @tool(requires_approval=True)
    def act(x: str) -> str:
        """Act.

        Args:
            x: X.
        """
        return "acted " + x

    failing = [True]

    def model(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            if failing and failing.pop():
                raise ConnectionError("provider down")
            return "end"
        if request.messages[-1].text == "one":
            return FunctionModel.call("act", {"x": "a"}, id="A")
        return [
            FunctionModel.call("act", {"x": "a"}, id="A"),
            FunctionModel.call("act", {"x": "b"}, id="B"),
        ]

    def shown(events: list[Any]) -> list[tuple[str, Any]]:
        return [
            (e.kind, e.result.call_id if e.kind == "tool_result" else e.step.index)
            for e in events
            if e.kind in ("tool_result", "step_end")
        ]

    agent = Agent(FunctionModel(model), tools=[act])
    first = agent.run("two")
    one = list(agent.resume_stream(first.state, approvals={"A": False}))
    assert shown(one) == [("tool_result", "A")]  # B still waits: no step end yet
    failing.clear()
    two = list(agent.resume_stream(one[-1].response.state, approvals={"B": True}))
    assert shown(two) == [("tool_result", "B"), ("step_end", 1), ("step_end", 2)]

    failing.append(True)
    waiting = agent.run("one").state
    seen: list[Any] = []
    with pytest.raises(RunError) as caught:  # the denial closes step 1; the model call fails
        agent.resume(waiting, approvals={"A": False}, on_step=seen.append)
    assert [s.index for s in seen] == [1]
    retried: list[Any] = []
    events = list(agent.resume_stream(caught.value.state, on_step=retried.append))
    assert shown(events) == [("step_end", 2)]  # step 1 is not shown again
    assert [s.index for s in retried] == [2]


@pytest.mark.parametrize("approve", [True, False])
def test_answers_at_the_step_limit_end_the_run_there_approved_or_denied(approve: bool) -> None:
    """At max_steps, the waiting call's answer is taken either way and the run ends at the
    limit with it; a denial is not refused as a resume that cannot continue."""

    @tool(requires_approval=True)
    def act(x: str) -> str:
        """Act.

        Args:
            x: X.
        """
        return "acted"

    def model(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "end"
        return FunctionModel.call("act", {"x": "1"})

    agent = Agent(FunctionModel(model), tools=[act], max_steps=1)
    first = agent.run("go")
    (waiting,) = first.pending_approvals
    done = agent.resume(first.state, approvals={waiting.id: approve})
    assert done.finish_reason == "max_steps"
    (result,) = done.steps[0].tool_results
    assert result.content == ("acted" if approve else "The user denied this tool call.")
    with pytest.raises(UsageError, match="does not continue it"):
        agent.resume(done.state)  # with nothing answered, the limit still stops it
