"""Driving a workflow's run: the planner's turns without the agent loop's machinery.

A workflow's run is an ordinary run whose "model" is its `Planner` (see
`_planner`). The agent loop would build a model request for every decision,
ask the live tools' approval policies, and pass every turn through a shell;
a planner needs none of it. `conduct_sync` and `conduct_async` reduce the
very events the loop would (the planner's decision as `ModelResponded`, each
step's result as `ToolReturned`, the output as `OutputAccepted`), running the
steps with the same executor, so a run driven here and one driven by the loop
have the same log, state and response.

They cover the run's usual course. Whatever else a run meets (observers,
a tracer, streaming, a step that suspends or fails, a resume) is the loop's:
`conducted` says when a run may be driven here, and a run that stops being
ordinary on the way (suspended, failed) is handed to the loop in the state
it reached, which then does exactly what it does with any run in that state.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, Any

from toolfold.runtime._run import finish, run_async, run_sync
from toolfold.runtime._task import Task, arun_sub_run, run_sub_run
from toolfold.runtime.core._approval import dispositions
from toolfold.runtime.core._effects import RunTools
from toolfold.runtime.core._events import ModelResponded, OutputAccepted
from toolfold.runtime.core._messages import ToolCallPart, thaw
from toolfold.runtime.core._next import next_effect
from toolfold.runtime.core._reducer import reduce
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


def conduct_sync(planner: Planner, live: Live, state: RunState) -> Response:
    """Drive a workflow's run from blocking code (see the module's docstring)."""
    course = _course(planner, live, state)
    outcomes: tuple[ToolOutcome, ...] | None = None
    try:
        while True:
            at, steps = course.send(outcomes)  # type: ignore[arg-type]  # None to start
            if steps is None:  # a function step, a timeout...: the executor runs the round
                jobs = _jobs(live, at)
                outcomes = run_calls_sync(jobs, max_concurrency=live.max_concurrency)
            elif len(steps) == 1:  # one step: right here, in this thread
                outcomes = (_ran(live, at, *steps[0], time.monotonic()),)
            else:  # steps side by side: coroutines of one loop, as the executor runs them
                outcomes = run_kept(lambda: _side_by_side(live, at, steps))  # noqa: B023
    except StopIteration as stop:
        state = stop.value
    # Finished, or suspended or failed: the loop says what that gives.
    return finish(state, live) if state.phase == "finished" else run_sync(live, state)


async def conduct_async(planner: Planner, live: Live, state: RunState) -> Response:
    """Drive a workflow's run on the running event loop (see the module's docstring)."""
    course = _course(planner, live, state)
    outcomes: tuple[ToolOutcome, ...] | None = None
    try:
        while True:
            at, steps = course.send(outcomes)  # type: ignore[arg-type]  # None to start
            if steps is None:
                jobs = _jobs(live, at)
                outcomes = await run_calls(jobs, max_concurrency=live.max_concurrency)
            else:
                outcomes = await _side_by_side(live, at, steps)
    except StopIteration as stop:
        state = stop.value
    return finish(state, live) if state.phase == "finished" else await run_async(live, state)


_Round = tuple[RunState, list[tuple[Task, CallState]] | None]


def _course(
    planner: Planner, live: Live, state: RunState
) -> Generator[_Round, tuple[ToolOutcome, ...], RunState]:
    """The run's usual course, written once for both drivers.

    Yields each round of step calls to run, with the state it runs in and the
    steps to run in place (None: the executor runs the round), and is sent
    their outcomes in call order; returns the state where the usual course
    ends (finished, suspended or failed).
    """
    while True:
        phase = state.phase
        if phase == "awaiting_model":
            state = _decide(planner, state)
        elif phase == "running_tools":
            outcomes = yield state, planner.in_place(state.calls)
            for outcome in outcomes:
                state = reduce(state, returned(outcome))
        elif phase == "validating_output":
            state = _accept(live, state)
        else:
            return state


def _decide(planner: Planner, state: RunState) -> RunState:
    """The planner's next decision, reduced as the loop reduces a model response."""
    try:
        response = planner.decide(state.messages)
    except Exception as exc:
        # As the loop reports a failed model call: the error carries the state
        # before it, which a resume goes on from.
        failure = _model_failure(exc, state, state.step + 1)
        if failure is exc:
            raise
        raise failure from exc
    response = unique_call_ids(response)
    # The planner's step tools need no approval: every call executes.
    decided = tuple(dispositions(state.config, response.tool_calls, None))
    return reduce(state, ModelResponded(response, decided))  # type: ignore[arg-type]


def _ran(live: Live, state: RunState, task: Task, call: CallState, started: float) -> ToolOutcome:
    """What the executor makes of ``call``, a step run in place, from blocking code.

    The step's arguments are the planner's own (`Planner.in_place` checked
    their shape), so there is nothing to validate; the rest is the executor's
    course for a sub-run: its state, or the error it raised, and the time
    since the round ``started``.
    """
    part = call.call
    try:
        ran = run_sub_run(task, *_arguments(call), live.deps, call.child, _run_id(state, part))
    except Exception as exc:
        return _failed(part, exc, started)
    return _outcome(part, ran, started)


async def _ran_async(
    live: Live, state: RunState, task: Task, call: CallState, started: float
) -> ToolOutcome:
    """Like `_ran`, on the running event loop."""
    part = call.call
    try:
        ran = await arun_sub_run(
            task, *_arguments(call), live.deps, call.child, _run_id(state, part)
        )
    except Exception as exc:
        return _failed(part, exc, started)
    return _outcome(part, ran, started)


async def _side_by_side(
    live: Live, state: RunState, steps: list[tuple[Task, CallState]]
) -> tuple[ToolOutcome, ...]:
    """The round's steps run concurrently (at most ``max_concurrency`` at once), in call order.

    As the executor runs sub-runs: a step that waits for its run holds no
    thread, and cancelling the round cancels every step still running.
    """
    import asyncio  # here, not at the top: `import toolfold` should not pay for asyncio

    started = time.monotonic()
    if len(steps) == 1:
        return (await _ran_async(live, state, *steps[0], started),)
    limit = asyncio.Semaphore(max(1, live.max_concurrency))

    async def one(task: Task, call: CallState) -> ToolOutcome:
        async with limit:
            return await _ran_async(live, state, task, call, started)

    return await gather_or_cancel([one(task, call) for task, call in steps])


def _arguments(call: CallState) -> tuple[Any, Mapping[str, Any]]:
    """The step's input and values, the tool's own copies (thawed), as the executor gives them."""
    arguments = call.call.arguments
    assert arguments is not None  # Planner.in_place checked them
    return thaw(arguments["input"]), thaw(arguments["values"])


def _run_id(state: RunState, part: ToolCallPart) -> Callable[[], str]:
    # `sub_run_id_of` without its search of the conversation for a reused id:
    # the planner never makes a call id twice (a step's attempt has a result
    # the plan reads, and the next attempt gets the next id, ``<base>#<n>``),
    # so the id is always the base one, as the loop finds it.
    return lambda: f"{state.run_id}/{part.id}"


def _outcome(part: ToolCallPart, ran: SubRun, started: float) -> ToolOutcome:
    ended = time.monotonic()
    return ToolOutcome(
        part.id,
        part.name,
        ran.content,
        ran.is_error,
        made_outcome(ran),
        ended=ended,
        duration=max(0.0, ended - started),
        child=ran.state,
    )


def _failed(part: ToolCallPart, exc: Exception, started: float) -> ToolOutcome:
    ended = time.monotonic()
    content = f"Error: {describe_exception(exc)}"
    return ToolOutcome(
        part.id, part.name, content, True, "error", exc, ended, max(0.0, ended - started)
    )


def _jobs(live: Live, state: RunState) -> tuple[ToolJob, ...]:
    effect = next_effect(state)
    assert isinstance(effect, RunTools)
    return tuple([_job(live, state, invocation) for invocation in effect.calls])


def _accept(live: Live, state: RunState) -> RunState:
    assert live.output is not None  # a workflow's run always has its output schema
    _, plain = live.output.parse(state.last_text)  # the planner wrote it: never rejected
    return reduce(state, OutputAccepted(plain))
