"""A workflow's lean driver reaches the very state the agent loop reaches (only durations differ)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import attrs
import pytest
from workflow_helpers import broken, echo, steady, worker

from toolfold import Agent, Loop, Parallel, RunState, Sequence, Task, Workflow
from toolfold.runtime import replay
from toolfold.testing import FunctionModel


def tree() -> Workflow:
    """Every kind of step: sequence, parallel, loop, a function, a failing step skipped."""
    return Sequence(
        echo("a"),
        Parallel(worker("b"), echo("c"), name="both"),
        Task(broken("d"), on_error="skip"),
        Loop(echo("e"), until=lambda out: len(out) > 30, max_iterations=3, name="again"),
        Task(len, name="size"),
        name="tree",
    )


@pytest.mark.parametrize("watch", ["on_event", "on_step"])
def test_a_run_nobody_watches_reaches_the_loops_state(watch: str) -> None:
    """The lean driver (no observer) and the agent loop (an observer) give the same state and log."""
    seen: list[Any] = []
    lean = tree().run("x", run_id="wf")
    looped = tree().run("x", run_id="wf", **{watch: seen.append})
    assert seen  # the observer made the loop drive it
    assert steady(lean.state) == steady(looped.state)
    assert lean.output == looped.output == len('e({"b": "b done", "c": "c(a(x))"})')
    assert lean.errors == looped.errors
    assert "d" in lean.errors
    assert "no model here" in lean.errors["d"]
    assert replay(lean.state.log) == lean.state
    assert RunState.from_json(lean.state.to_json()) == lean.state


def test_an_async_run_nobody_watches_reaches_the_loops_state() -> None:
    """`arun` without observers reaches the state `arun` with one reaches."""
    lean = asyncio.run(tree().arun("x", run_id="wf"))
    looped = asyncio.run(tree().arun("x", run_id="wf", on_event=lambda event: None))
    assert steady(lean.state) == steady(looped.state)
    assert replay(lean.state.log) == lean.state


def test_a_step_that_fails_the_workflow_fails_it_as_the_loop_does() -> None:
    """A failing step with on_error='fail' raises the same error, with the same state, either way."""
    from toolfold import RunError

    def failing() -> Workflow:
        return Sequence(echo("a"), broken("b"), echo("c"))

    with pytest.raises(RunError) as lean:
        failing().run("x", run_id="wf")
    with pytest.raises(RunError) as looped:
        failing().run("x", run_id="wf", on_event=lambda event: None)
    assert str(lean.value) == str(looped.value)
    assert lean.value.state is not None
    assert looped.value.state is not None
    assert steady(lean.value.state) == steady(looped.value.state)
    assert lean.value.state.phase == "failed"


def test_a_decision_that_raises_fails_as_the_loop_reports_it() -> None:
    """A router that raises gives the same RunError and state, driven lean or by the loop."""
    from toolfold import Route, RunError

    def router(text: str) -> str:
        raise LookupError(f"no route for {text}")

    def routed() -> Workflow:
        return Sequence(echo("a"), Route(router, {"b": echo("b")}, name="pick"))

    with pytest.raises(RunError) as lean:
        routed().run("x", run_id="wf")
    with pytest.raises(RunError) as looped:
        routed().run("x", run_id="wf", on_event=lambda event: None)
    assert str(lean.value) == str(looped.value)
    assert "no route for a(x)" in str(lean.value)
    assert lean.value.state is not None
    assert looped.value.state is not None
    assert steady(lean.value.state) == steady(looped.value.state)


def test_cancelling_a_parallel_round_cancels_every_waiting_step() -> None:
    """Cancelling a Parallel's run cancels each step in flight (the first and those started beside it), none left running."""
    started: list[str] = []
    cancelled: list[str] = []
    limit = 3

    def waiting(name: str) -> Agent:
        async def reply(request: Any) -> str:
            started.append(name)
            if len(started) == limit:
                ready.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(name)
                raise
            return "never"  # pragma: no cover - never set

        return Agent(FunctionModel(reply), name=name)

    workflow = Parallel(*[waiting(f"s{i}") for i in range(5)], max_concurrency=limit)

    async def main() -> list[asyncio.Task[Any]]:
        run = asyncio.ensure_future(workflow.arun("x"))
        await ready.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    ready = asyncio.Event()
    assert asyncio.run(main()) == []
    assert started == ["s0", "s1", "s2"]  # at most max_concurrency at once, in call order
    assert sorted(cancelled) == started


def test_steps_that_wait_run_side_by_side_and_commit_in_call_order() -> None:
    """Steps that wait at different points overlap (the next starts while one waits) and commit in call order."""
    log: list[str] = []

    def step(name: str, waits: int) -> Agent:
        async def reply(request: Any) -> str:
            log.append(f"{name} start")
            for _ in range(waits):
                await asyncio.sleep(0)
            log.append(f"{name} end")
            return name

        return Agent(FunctionModel(reply), name=name)

    response = Parallel(step("a", 0), step("b", 2), step("c", 1), step("d", 0)).run("x")
    assert response.output == {"a": "a", "b": "b", "c": "c", "d": "d"}
    # a ends before anything waits; b waits, so c and d start beside it
    assert log[:3] == ["a start", "a end", "b start"]
    assert log.index("c start") < log.index("b end")
    assert log.index("d start") < log.index("b end")
    assert replay(response.state.events) == response.state


_BRANCH: contextvars.ContextVar[str] = contextvars.ContextVar("branch", default="unset")


def _setter(name: str) -> Agent:
    async def reply(request: Any) -> str:
        _BRANCH.set(name)
        return f"{name} set"

    return Agent(FunctionModel(reply), name=name)


def _reader(name: str) -> Agent:
    async def reply(request: Any) -> str:
        return f"{name} saw {_BRANCH.get()}"

    return Agent(FunctionModel(reply), name=name)


def test_parallel_branches_each_have_their_own_context_variables() -> None:
    """A context variable one branch sets is seen neither by the next branch nor by the caller."""

    async def main(watched: bool) -> tuple[Any, str]:
        workflow = Parallel(_setter("a"), _reader("b"), max_concurrency=1)
        # on_event makes the loop drive the run: both drivers must agree.
        response = await workflow.arun("x", on_event=(lambda event: None) if watched else None)
        return response.output, _BRANCH.get()

    for watched in (False, True):
        assert asyncio.run(main(watched)) == ({"a": "a set", "b": "b saw unset"}, "unset")
    assert Parallel(_setter("a"), _reader("b")).run("x").output["b"] == "b saw unset"


def _task_named(name: str) -> Agent:
    async def reply(request: Any) -> str:
        task = asyncio.current_task()
        return task.get_name() if task is not None else "no task"

    return Agent(FunctionModel(reply), name=name)


def test_parallel_branches_run_in_tasks_named_by_their_steps() -> None:
    """Each branch's task is named by its step's call (what a debugger or asyncio.all_tasks shows), by both drivers."""
    workflow = Parallel(_task_named("a"), _task_named("b"))
    assert workflow.run("x").output == {"a": "a", "b": "b"}
    watched = workflow.run("x", on_event=lambda event: None)  # the loop drives it
    assert watched.output == {"a": "a", "b": "b"}


class _Halt(BaseException):
    """A BaseException that is not an Exception (as a library's own may be)."""


def test_a_branch_raising_a_base_exception_cancels_the_others_at_once() -> None:
    """The round ends with the error while its other branches still wait, cancelling them."""
    log: list[str] = []

    def waiting(name: str) -> Agent:
        async def reply(request: Any) -> str:
            log.append(f"{name} start")
            try:
                await asyncio.Event().wait()  # never set: only a cancellation ends it
            except asyncio.CancelledError:
                log.append(f"{name} cancelled")
                raise
            return name

        return Agent(FunctionModel(reply), name=name)

    async def halting(request: Any) -> str:
        await asyncio.sleep(0)
        raise _Halt("stop")

    async def main() -> None:
        workflow = Parallel(
            waiting("a"), Agent(FunctionModel(halting), name="b"), waiting("c"), max_concurrency=2
        )
        with pytest.raises(_Halt):
            await asyncio.wait_for(workflow.arun("x"), 60)  # a guard against a hang only

    asyncio.run(main())
    started = [entry.split()[0] for entry in log if entry.endswith("start")]
    assert "a" in started
    assert sorted(entry for entry in log if entry.endswith("cancelled")) == sorted(
        f"{name} cancelled" for name in started
    )


def test_a_cancelled_round_stays_cancelled_when_a_branch_swallows_its_cancellation() -> None:
    """The run is cancelled, and no branch that had not started starts after the cancel."""
    log: list[str] = []
    inside = asyncio.Event()

    async def swallowing(request: Any) -> str:
        inside.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            log.append("a swallowed its cancellation")
            return "fallback"
        return "a"

    async def later(request: Any) -> str:
        log.append("b started")
        return "b"

    async def main() -> None:
        workflow = Parallel(
            Agent(FunctionModel(swallowing), name="a"),
            Agent(FunctionModel(later), name="b"),
            max_concurrency=1,
        )
        run = asyncio.ensure_future(workflow.arun("x"))
        await inside.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(main())
    assert log == ["a swallowed its cancellation"]


def test_plain_rounds_are_reduced_in_one_pass_to_the_loops_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Steps that each finish ok run back to back, their events reduced once: the loop's state, no reduce per event."""
    from toolfold.runtime.core import _rounds

    def workflow() -> Workflow:
        return Sequence(worker("a"), Parallel(echo("b"), echo("c"), name="both"), echo("d"))

    looped = workflow().run("x", run_id="wf", on_event=lambda event: None)

    def one_at_a_time(*args: Any) -> RunState:
        raise AssertionError("an event of a plain round was reduced on its own")

    monkeypatch.setattr(_rounds, "reduce", one_at_a_time)
    lean = workflow().run("x", run_id="wf")
    assert steady(lean.state) == steady(looped.state)
    assert lean.output == looped.output == 'd({"b": "b(a done)", "c": "c(a done)"})'
    monkeypatch.undo()
    assert replay(lean.state.log) == lean.state


def test_a_parallels_output_is_accepted_without_decoding_its_json_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The branches' outputs are decoded already: the run accepts them as they are, the loop's state all the same."""
    import json

    from toolfold.runtime._planner import WorkflowOutput

    def workflow() -> Workflow:
        data = {"n": [1, 2.5, None, -0.0], "k": "v", "nested": {"t": True}}
        structured = Agent(
            FunctionModel(lambda request: json.dumps(data)),
            name="data",
            output_type=dict[str, Any],
        )
        return Parallel(structured, echo("c"), name="both")

    looped = workflow().run("x", run_id="wf", on_event=lambda event: None)

    def parse(self: WorkflowOutput, text: str) -> tuple[Any, Any]:
        raise AssertionError("the answer was decoded again")

    monkeypatch.setattr(WorkflowOutput, "parse", parse)
    lean = workflow().run("x", run_id="wf")
    awaited = asyncio.run(workflow().arun("x", run_id="wf"))
    monkeypatch.undo()
    expected = {"data": {"n": [1, 2.5, None, -0.0], "k": "v", "nested": {"t": True}}, "c": "c(x)"}
    assert lean.output == awaited.output == looped.output == expected
    assert steady(lean.state) == steady(awaited.state) == steady(looped.state)
    assert lean.state.output == json.loads(lean.state.last_text)
    assert replay(lean.state.log) == lean.state


def test_changing_a_parallels_output_before_reading_its_state_changes_no_record() -> None:
    """The answer's JSON is written when the run ends: a caller changing the output it
    shares values with, before the state is first made, does not rewrite the log."""

    def nested(x: str) -> dict[str, Any]:  # (returned as it is: no type to structure it by)
        return {"k": [1, 2]}

    def listed(x: str) -> list[Any]:
        return [3]

    response = Parallel(nested, listed, name="both").run("x")
    response.output["nested"]["k"].append(99)
    state = response.state
    assert state.last_text == '{"nested": {"k": [1, 2]}, "listed": [3]}'
    assert replay(state.log).last_text == state.last_text


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_parallels_text_answer_is_written_when_its_state_is_made(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Branches that answer text: the answer's JSON is not written when the run ends, only
    when the state is first read, and then it is the loop's."""
    from toolfold.runtime import _conduct

    def workflow() -> Workflow:
        return Parallel(echo("a"), worker("b"), echo("c"), name="all")

    looped = workflow().run("x", run_id="wf", on_event=lambda event: None)
    written: list[Any] = []
    json_text = _conduct.json_text

    def counted(value: Any) -> str:
        written.append(value)
        return json_text(value)

    monkeypatch.setattr(_conduct, "json_text", counted)
    if driver == "run":
        lean = workflow().run("x", run_id="wf")
    else:
        lean = asyncio.run(workflow().arun("x", run_id="wf"))
    assert written == []
    lean.output["a"] = "changed"  # the caller's own copy of the outputs
    assert lean.text == looped.text == '{"a": "a(x)", "b": "b done", "c": "c(x)"}'
    state = lean.state
    assert written == [{"a": "a(x)", "b": "b done", "c": "c(x)"}]
    assert steady(state) == steady(looped.state)
    assert replay(state.log) == state


def test_a_parallels_output_is_the_callers_own() -> None:
    """The default merge gives a new mapping each time, in step order, whatever order the state's has."""
    workflow = Parallel(echo("a"), echo("b"), name="both")
    response = workflow.run("x")
    assert list(response.output) == ["a", "b"]
    assert response.output is not response.state.output
    assert workflow.restore({"b": "2", "a": "1"}) == {"a": "1", "b": "2"}
    assert list(workflow.restore({"b": "2", "a": "1"})) == ["a", "b"]
    assert workflow.restore({"a": "1"}) == {"a": "1"}
    plain = {"a": "1", "b": "2"}
    assert workflow.restore(plain) == plain
    assert workflow.restore(plain) is not plain


def test_a_decision_that_raises_after_plain_rounds_carries_the_state_they_reached() -> None:
    """A loop's condition raising after an iteration: the error's state has the iteration, as the loop's has."""
    from toolfold import RunError

    def until(out: str) -> bool:
        raise KeyError("no condition")

    def looping() -> Workflow:
        return Loop(echo("e"), until=until, max_iterations=3, name="again")

    with pytest.raises(RunError) as lean:
        looping().run("x", run_id="wf")
    with pytest.raises(RunError) as looped:
        looping().run("x", run_id="wf", on_event=lambda event: None)
    assert str(lean.value) == str(looped.value)
    assert lean.value.state is not None
    assert looped.value.state is not None
    assert steady(lean.value.state) == steady(looped.value.state)
    assert lean.value.state.step == 1  # the first iteration's round is in it


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_an_agent_step_builds_no_response_of_its_own(
    driver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's agent run gives the workflow its state without a `Response` (the workflows' runs, plain to their answer, make no finished state either)."""
    from toolfold.runtime import _conduct, _run

    made: list[Any] = []
    finish = _run.finish

    def counted(state: RunState, live: Any) -> Any:
        made.append(state.agent)
        return finish(state, live)

    monkeypatch.setattr(_run, "finish", counted)
    monkeypatch.setattr(_conduct, "finish", counted)
    workflow = Sequence(worker("a"), Parallel(echo("b"), echo("c"), name="both"), echo("d"))
    response = workflow.run("x") if driver == "run" else asyncio.run(workflow.arun("x"))
    assert response.output == 'd({"b": "b(a done)", "c": "c(a done)"})'
    assert made == []  # no agent's run; the workflows' runs are deferred
    assert response.state.phase == "finished"


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_plain_runs_state_is_made_when_first_read(driver: str) -> None:
    """A run plain to its answer makes its state on first read: what the response says before equals what it says after, and the loop's."""
    import pickle

    from toolfold.runtime._conduct import Deferred
    from toolfold.runtime._workflow import _STATE_SLOT

    def workflow() -> Workflow:
        return Sequence(worker("a"), Parallel(worker("b"), echo("c"), name="both"), echo("d"))

    def ran(**kwargs: Any) -> Any:
        if driver == "run":
            return workflow().run("x", run_id="wf", **kwargs)
        return asyncio.run(workflow().arun("x", run_id="wf", **kwargs))

    looped = ran(on_event=lambda event: None)
    lean = ran()
    assert type(_STATE_SLOT.__get__(lean)) is Deferred  # nothing read it yet
    before = (lean.output, lean.text, lean.finish_reason, lean.usage, lean.run_id, lean.agent)
    shown = (repr(lean), lean.tool_calls, lean.pending_approvals)
    assert type(_STATE_SLOT.__get__(lean)) is Deferred  # none of those made it
    state = lean.state
    assert type(state) is RunState
    assert lean.state is state  # made once, then kept
    assert before == (
        looped.output,
        looped.text,
        looped.finish_reason,
        looped.usage,
        looped.run_id,
        looped.agent,
    )
    assert before == (lean.output, lean.text, lean.finish_reason, lean.usage, "wf", "sequence")
    assert shown == (repr(looped), (), ()) == (repr(lean), lean.tool_calls, lean.pending_approvals)
    assert steady(state) == steady(looped.state)
    assert replay(state.log) == state
    assert RunState.from_json(state.to_json()) == state
    assert lean.outputs == looped.outputs
    copied = pickle.loads(pickle.dumps(ran()))  # pickling reads the state like any field
    assert type(_STATE_SLOT.__get__(copied)) is RunState
    assert steady(copied.state) == steady(state)
    fresh = ran()
    assert fresh == pickle.loads(pickle.dumps(fresh))  # equality reads it too
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        fresh.state = state  # type: ignore[misc]


def test_a_plain_round_whose_calls_share_an_id_reaches_the_loops_state() -> None:
    """Calls of one decision that share an id get unique ids, as the loop gives them, in a plain round too."""
    from toolfold.runtime._planner import Call, Final, Plan

    class Twice(Parallel):
        def plan(self, plan: Plan) -> list[Call] | Final:
            if not plan.attempts:
                return [plan.call(task, "same", plan.input, {}) for task in self.tasks]
            return Final([attempt.value for attempt in plan.attempts])

    def workflow() -> Workflow:
        return Twice(echo("a"), echo("b"), name="twice")

    looped = workflow().run("x", run_id="wf", on_event=lambda event: None)
    lean = workflow().run("x", run_id="wf")
    assert lean.output == looped.output == ["a(x)", "b(x)"]
    assert steady(lean.state) == steady(looped.state)
    assert len({call.id for call in lean.state.log[1].response.tool_calls}) == 2
    assert replay(lean.state.log) == lean.state


def test_a_plan_extended_groups_attempts_by_step_as_reading_them_does() -> None:
    """`Plan.extended` files each attempt under its step's base id (``a#2`` under ``a``),
    in order, as a plan made from all of them at once does."""
    from toolfold.runtime._planner import Attempt, Plan, first_plan

    attempts = [
        Attempt("a", "a", False, "Error: no"),
        Attempt("b", "b", True, "b done"),
        Attempt("a#2", "a", True, "a done"),
        Attempt("c#10", "c", True, {"k": 1}),
    ]
    extended = first_plan("x", {}).extended(attempts[:1]).extended(attempts[1:])
    whole = Plan("x", {}, tuple(attempts))
    assert extended.attempts == whole.attempts == tuple(attempts)
    assert extended.by_step == whole.by_step
    assert extended.by_step == {
        "a": (attempts[0], attempts[2]),
        "b": (attempts[1],),
        "c": (attempts[3],),
    }


def _configured() -> Agent:
    """An agent with instructions, a tool, settings and a step limit: what `run` begins with."""
    agent = worker("w")
    return attrs.evolve(agent, instructions="Be brief.", max_steps=4, settings={"temperature": 0})


def test_a_step_begins_its_agents_run_as_run_does() -> None:
    """A step's run of an agent without handoffs (begun without `_Fresh`) ends as `run` does."""
    agent = _configured()
    assert not agent.handoffs
    step = agent._step_state("find x", None, "r1")
    assert steady(step) == steady(agent.run("find x", run_id="r1").state)


def test_an_async_step_begins_its_agents_run_as_arun_does() -> None:
    """The same for `_astep_run` against `arun`."""
    agent = _configured()

    async def both() -> tuple[RunState, RunState]:
        step = (await agent._astep_run("find x", None, "r1")).state
        return step, (await agent.arun("find x", run_id="r1")).state

    step, ran = asyncio.run(both())
    assert steady(step) == steady(ran)
