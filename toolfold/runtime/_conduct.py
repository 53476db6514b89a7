"""Driving a workflow's run: the planner's turns without the agent loop's machinery.

A workflow's run is an ordinary run whose "model" is its `Planner` (see
`_planner`). The agent loop would build a model request for every decision,
ask the live tools' approval policies, and pass every turn through a shell;
a planner needs none of it. `conduct_sync` and `conduct_async` run each
round of agent and workflow steps in place and record each step as one
`StepEnded` (its call, result and sub-run), the workflow's output on the
last one: no decision, tool result or `OutputAccepted` of its own.

They cover the run's usual course. A function step, a step with a timeout,
and a round in which a step's run waits for the caller are recorded as the
loop records them (the planner's decision as `ModelResponded`, each result
as `ToolReturned` or `ToolSuspended`, the output as `OutputAccepted`).
Whatever else a run meets (observers, a tracer, streaming) is the loop's:
`conducted` says when a run may be driven here, and a run that stops being
ordinary on the way (suspended, failed) is handed to the loop in the state
it reached, which then does exactly what it does with any run in that state.
Both reach the same outputs, errors and sub-runs, and replay.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, NoReturn

from toolfold.runtime._agent_tool import sub_run_id_of
from toolfold.runtime._planner import Attempt, Call, Final, Plan, respond
from toolfold.runtime._run import finish, run_async, run_sync
from toolfold.runtime._task import Task, arun_sub_run, run_sub_run
from toolfold.runtime.core._approval import dispositions
from toolfold.runtime.core._effects import RunTools
from toolfold.runtime.core._events import ModelResponded, OutputAccepted, StepEnded
from toolfold.runtime.core._messages import ToolCallPart, thaw
from toolfold.runtime.core._next import next_effect
from toolfold.runtime.core._reducer import end_steps, reduce
from toolfold.runtime.core._state import CallState, RunState
from toolfold.runtime.drive._executor import (
    SubRun,
    ToolJob,
    ToolOutcome,
    gather_or_cancel,
    made_outcome,
    returned,
    run_calls,
    run_calls_sync,
    run_kept,
)
from toolfold.runtime.drive._loop import Live, _job, _model_failure, unique_call_ids
from toolfold.runtime.drive._trace import tracing
from toolfold.toolkit._results import describe_exception

if TYPE_CHECKING:
    from toolfold.runtime._planner import Planner
    from toolfold.runtime._response import Response


def conducted(live: Live) -> bool:
    """Whether a run with ``live`` may be driven here (nothing watches it but its caller)."""
    return (
        live.on_event is None
        and live.on_step is None
        and not live.stop_when
        and not live.handoffs
        and live.on_tool_error == "return"
        and not tracing()
    )


def conduct_sync(
    planner: Planner, live: Live, state: RunState, plan: Plan | None = None
) -> Response:
    """Drive a workflow's run from blocking code (see the module's docstring).

    ``plan``: what the planner reads of ``state`` when the caller knows it
    (a new run's input); None reads it from the state.
    """
    course = _course(planner, live, state, plan)
    outcomes: tuple[ToolOutcome, ...] | None = None
    try:
        while True:
            at, steps = course.send(outcomes)  # type: ignore[arg-type]  # None to start
            if steps is None:  # a function step, a timeout...: the executor runs the round
                jobs = _jobs(live, at)
                outcomes = run_calls_sync(jobs, max_concurrency=live.max_concurrency)
            elif len(steps) == 1:  # one step: right here, in this thread
                outcomes = (_ran(live, steps[0], time.monotonic()),)
            else:  # steps side by side: coroutines of one loop, as the executor runs them
                outcomes = run_kept(lambda: _side_by_side(live, steps))  # noqa: B023
    except StopIteration as stop:
        state = stop.value
    # Finished, or suspended or failed: the loop says what that gives.
    return finish(state, live) if state.phase == "finished" else run_sync(live, state)


async def conduct_async(
    planner: Planner, live: Live, state: RunState, plan: Plan | None = None
) -> Response:
    """Drive a workflow's run on the running event loop (see `conduct_sync`)."""
    course = _course(planner, live, state, plan)
    outcomes: tuple[ToolOutcome, ...] | None = None
    try:
        while True:
            at, steps = course.send(outcomes)  # type: ignore[arg-type]  # None to start
            if steps is None:
                jobs = _jobs(live, at)
                outcomes = await run_calls(jobs, max_concurrency=live.max_concurrency)
            else:
                outcomes = await _side_by_side(live, steps)
    except StopIteration as stop:
        state = stop.value
    return finish(state, live) if state.phase == "finished" else await run_async(live, state)


class _StepCall(NamedTuple):
    """A step to run in place: its task, call, the tool's own input and values, its sub-run.

    ``run_id``: a new run's id, or a function giving it (asked only when the
    step starts a run, not when it resumes ``child``).
    """

    task: Task
    call_id: str
    input: Any
    values: Mapping[str, Any]
    child: RunState | None
    run_id: str | Callable[[], str]


_Round = tuple[RunState, list[_StepCall] | None]


def _course(
    planner: Planner, live: Live, state: RunState, plan: Plan | None
) -> Generator[_Round, tuple[ToolOutcome, ...], RunState]:
    """The run's usual course, written once for both drivers.

    Yields each round of step calls to run, with the state it runs in and the
    steps to run in place (None: the executor runs the round), and is sent
    their outcomes in call order; returns the state where the usual course
    ends (finished, suspended or failed).

    A round of agent and workflow steps is recorded as one `StepEnded` per
    step, the output with the last; anything else (a function step, a step
    with a timeout, a step that suspends, a round a resumed state holds) as
    the loop records it: the decision as a model response, each result as a
    tool's. The planner decides from what the steps gave, so the `StepEnded`
    events of rounds that went well wait in ``pending`` and are reduced
    together, into one state, when the state is needed.
    """
    decision: list[Call] | Final | None = None
    pending: list[StepEnded] = []
    while True:
        phase = state.phase
        if phase == "running_tools":
            outcomes = yield state, _held(planner, state)
            for outcome in outcomes:
                state = reduce(state, returned(outcome))
            plan = decision = None
        elif phase == "validating_output":
            state = _accept(live, state)
        elif phase != "awaiting_model":
            return state
        else:
            if plan is None:
                plan = planner.read(state.messages)
            if decision is None:
                decision = _next(planner, plan, state)
            if isinstance(decision, Final) or not planner.runs_in_place(decision):
                state = _responded(end_steps(state, pending), decision)
                pending = []
                plan = decision = None
                continue
            outcomes = yield state, [_step_call(state, call) for call in decision]
            if _waits(outcomes):
                # A step's run waits for the caller: the round as the loop records it.
                state = _responded(end_steps(state, pending), decision)
                pending = []
                for outcome in outcomes:
                    state = reduce(state, returned(outcome))
                plan = decision = None
                continue
            state, pending, plan, decision = _ended(
                planner, plan, state, pending, decision, outcomes
            )


def _waits(outcomes: tuple[ToolOutcome, ...]) -> bool:
    """Whether a step's run waits for the caller (an approval inside it)."""
    for outcome in outcomes:
        child = outcome.child
        if child is not None and child.phase != "finished" and child.phase != "failed":
            return True
    return False


def _next(planner: Planner, plan: Plan, state: RunState) -> list[Call] | Final:
    """The planner's next decision; a failure is reported as the loop reports a failed model call."""
    try:
        return planner.next(plan)
    except Exception as exc:
        _report(exc, state)


def _report(exc: Exception, state: RunState) -> NoReturn:
    """Raise ``exc``, the planner's failure, as the loop reports a failed model call.

    The error carries ``state``, the state before the decision, which a
    resume goes on from.
    """
    failure = _model_failure(exc, state, state.step + 1)
    if failure is exc:
        raise exc
    raise failure from exc


def _responded(state: RunState, decision: list[Call] | Final) -> RunState:
    """``decision`` reduced as the loop reduces a model response."""
    response = unique_call_ids(respond(decision))
    # The planner's step tools need no approval: every call executes.
    decided = tuple(dispositions(state.config, response.tool_calls, None))
    return reduce(state, ModelResponded(response, decided))  # type: ignore[arg-type]


def _step_call(state: RunState, call: Call) -> _StepCall:
    # `sub_run_id_of` without the search for a reused id: the planner never
    # makes a call id twice (an attempt it made has a result the plan reads,
    # and the next attempt gets the next id), so the id is the base one.
    call_id = call.call_id
    run_id = f"{state.run_id}/{call_id}"
    return _StepCall(call.task, call_id, call.input, call.values, None, run_id)


def _held(planner: Planner, state: RunState) -> list[_StepCall] | None:
    """The round a state holds (recorded as the loop records one), when its steps run in place."""
    found = planner.in_place(state.calls)
    if found is None:
        return None
    return [
        _StepCall(task, call.call.id, *_arguments(call), call.child, _run_id(state, call.call))
        for task, call in found
    ]


def _ended(
    planner: Planner,
    plan: Plan,
    state: RunState,
    pending: list[StepEnded],
    calls: list[Call],
    outcomes: tuple[ToolOutcome, ...],
) -> tuple[RunState, list[StepEnded], Plan | None, list[Call] | Final | None]:
    """The round's `StepEnded` events, reduced or pending, and the decision after it.

    ``state`` is the state before the ``pending`` events. The planner decides
    what comes next before the round's events are reduced, so that a
    workflow ending with this round records its output on its last event;
    it is not asked when the round failed the run. Returns the state, the
    events still to reduce into it, the plan and the decision.
    """
    events = [
        StepEnded(
            call.call_id,
            call.task.name,
            call.input,
            call.values,
            outcome.content,
            outcome.is_error,
            outcome.outcome,
            outcome.duration,
            outcome.child,
        )
        for call, outcome in zip(calls, outcomes, strict=True)
    ]
    if True in [outcome.is_error for outcome in outcomes]:  # (a list: no generator to run)
        # A failure may end the run: reduced first, the planner asked only if it goes on.
        state = end_steps(state, pending)
        pending = []
        ended = end_steps(state, events)
        if ended.phase != "awaiting_model":
            return ended, pending, None, None
        plan = plan.extended([_attempt(outcome) for outcome in outcomes])
        decision = _next(planner, plan, ended)
        if not isinstance(decision, Final):
            return ended, pending, plan, decision
    else:
        plan = plan.extended([_attempt(outcome) for outcome in outcomes])
        try:
            decision = planner.next(plan)
        except Exception as exc:  # reported with the state after the round, as the loop does
            _report(exc, end_steps(state, [*pending, *events]))
        if not isinstance(decision, Final):
            return state, [*pending, *events], plan, decision
    last = events[-1]
    events[-1] = StepEnded(
        last.call_id,
        last.name,
        last.input,
        last.values,
        last.content,
        last.is_error,
        last.outcome,
        last.duration,
        last.child,
        True,
        decision.value,
    )
    return end_steps(state, [*pending, *events]), [], None, None


def _attempt(outcome: ToolOutcome) -> Attempt:
    """What the planner reads of a step's outcome (as `read_plan` reads it back)."""
    if outcome.is_error:
        return Attempt(outcome.call_id, outcome.tool_name, False, outcome.content)
    child = outcome.child
    if child is not None and type(child.output) is str:
        return Attempt(outcome.call_id, outcome.tool_name, True, child.output)
    return Attempt(outcome.call_id, outcome.tool_name, True, json.loads(outcome.content))


def _ran(live: Live, step: _StepCall, started: float) -> ToolOutcome:
    """What the executor makes of ``step``, run in place, from blocking code.

    The step's arguments are the planner's own, so there is nothing to
    validate; the rest is the executor's course for a sub-run: its state, or
    the error it raised, and the time since the round ``started``.
    """
    try:
        ran = run_sub_run(step.task, step.input, step.values, live.deps, step.child, step.run_id)
    except Exception as exc:
        return _failed(step, exc, started)
    return _outcome(step, ran, started)


async def _ran_async(live: Live, step: _StepCall, started: float) -> ToolOutcome:
    """Like `_ran`, on the running event loop."""
    try:
        ran = await arun_sub_run(
            step.task, step.input, step.values, live.deps, step.child, step.run_id
        )
    except Exception as exc:
        return _failed(step, exc, started)
    return _outcome(step, ran, started)


async def _side_by_side(live: Live, steps: list[_StepCall]) -> tuple[ToolOutcome, ...]:
    """The round's steps run concurrently (at most ``max_concurrency`` at once), in call order.

    As the executor runs sub-runs: a step that waits for its run holds no
    thread, and cancelling the round cancels every step still running.
    """
    import asyncio  # here, not at the top: `import toolfold` should not pay for asyncio

    started = time.monotonic()
    if len(steps) == 1:
        return (await _ran_async(live, steps[0], started),)
    limit = asyncio.Semaphore(max(1, live.max_concurrency))

    async def one(step: _StepCall) -> ToolOutcome:
        async with limit:
            return await _ran_async(live, step, started)

    return await gather_or_cancel([one(step) for step in steps])


def _arguments(call: CallState) -> tuple[Any, Mapping[str, Any]]:
    """The step's input and values, the tool's own copies (thawed), as the executor gives them."""
    arguments = call.call.arguments
    assert arguments is not None  # Planner.in_place checked them
    return thaw(arguments["input"]), thaw(arguments["values"])


def _run_id(state: RunState, part: ToolCallPart) -> Callable[[], str]:
    return lambda: sub_run_id_of(state.run_id, part.id, state.step, state.conversation)


def _outcome(step: _StepCall, ran: SubRun, started: float) -> ToolOutcome:
    ended = time.monotonic()
    return ToolOutcome(
        step.call_id,
        step.task.name,
        ran.content,
        ran.is_error,
        made_outcome(ran),
        None,
        ended,
        max(0.0, ended - started),
        ran.state,
    )


def _failed(step: _StepCall, exc: Exception, started: float) -> ToolOutcome:
    ended = time.monotonic()
    content = f"Error: {describe_exception(exc)}"
    return ToolOutcome(
        step.call_id,
        step.task.name,
        content,
        True,
        "error",
        exc,
        ended,
        max(0.0, ended - started),
    )


def _jobs(live: Live, state: RunState) -> tuple[ToolJob, ...]:
    effect = next_effect(state)
    assert isinstance(effect, RunTools)
    return tuple([_job(live, state, invocation) for invocation in effect.calls])


def _accept(live: Live, state: RunState) -> RunState:
    assert live.output is not None  # a workflow's run always has its output schema
    _, plain = live.output.parse(state.last_text)  # the planner wrote it: never rejected
    return reduce(state, OutputAccepted(plain))
