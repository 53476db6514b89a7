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
from typing import TYPE_CHECKING

from toolfold._errors import ToolfoldError
from toolfold.runtime._agent_tool import call_run_id
from toolfold.runtime._run import finish, run_async, run_sync
from toolfold.runtime._task import Task, run_sub_run
from toolfold.runtime.core._approval import dispositions
from toolfold.runtime.core._effects import RunTools
from toolfold.runtime.core._events import Event, ModelResponded, OutputAccepted
from toolfold.runtime.core._messages import thaw
from toolfold.runtime.core._next import next_effect
from toolfold.runtime.core._reducer import reduce
from toolfold.runtime.core._state import CallState, RunState
from toolfold.runtime.drive._executor import (
    ToolJob,
    ToolOutcome,
    made_outcome,
    returned,
    run_calls,
    run_calls_sync,
)
from toolfold.runtime.drive._loop import Live, _job
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
    while True:
        phase = state.phase
        if phase == "awaiting_model":
            state = _decide(planner, state)
        elif phase == "running_tools":
            lone = planner.lone_step(state.calls)
            if lone is not None:  # one agent or workflow step: run right here
                state = reduce(state, _ran(live, state, *lone))
                continue
            jobs = _jobs(live, state)
            for outcome in run_calls_sync(jobs, max_concurrency=live.max_concurrency):
                state = reduce(state, returned(outcome))
        elif phase == "validating_output":
            state = _accept(live, state)
        elif phase == "finished":
            return finish(state, live)
        else:  # suspended or failed: the loop says what that gives
            return run_sync(live, state)


async def conduct_async(planner: Planner, live: Live, state: RunState) -> Response:
    """Drive a workflow's run on the running event loop (see the module's docstring)."""
    while True:
        phase = state.phase
        if phase == "awaiting_model":
            state = _decide(planner, state)
        elif phase == "running_tools":
            jobs = _jobs(live, state)
            for outcome in await run_calls(jobs, max_concurrency=live.max_concurrency):
                state = reduce(state, returned(outcome))
        elif phase == "validating_output":
            state = _accept(live, state)
        elif phase == "finished":
            return finish(state, live)
        else:
            return await run_async(live, state)


def _decide(planner: Planner, state: RunState) -> RunState:
    """The planner's next decision, reduced as the loop reduces a model response."""
    try:
        response = planner.decide(state.messages)
    except ToolfoldError as exc:
        # As the loop does with a failed model call: the error carries the
        # state before it, which a resume goes on from.
        exc.state = state  # type: ignore[attr-defined]
        raise
    # The planner's step tools need no approval: every call executes.
    decided = tuple(dispositions(state.config, response.tool_calls, None))
    return reduce(state, ModelResponded(response, decided))  # type: ignore[arg-type]


def _ran(live: Live, state: RunState, task: Task, call: CallState) -> Event:
    """What the executor's blocking path reports of ``call``, a lone sub-run step, run here.

    The step's arguments are the planner's own (``lone_step`` checked their
    shape), so there is nothing to validate; the rest is `run_calls_sync`'s
    course for one call: the sub-run, or the error it raised, and its duration.
    """
    part = call.call
    arguments = part.arguments
    assert arguments is not None  # lone_step checked them
    started = time.monotonic()
    try:
        ran = run_sub_run(
            task,
            thaw(arguments["input"]),
            thaw(arguments["values"]),
            live.deps,
            call.child,
            lambda: call_run_id(state.run_id, part.id, state.step, state.conversation),
        )
    except Exception as exc:
        content = f"Error: {describe_exception(exc)}"
        outcome = ToolOutcome(part.id, part.name, content, True, "error", exc, time.monotonic())
    else:
        outcome = ToolOutcome(
            part.id,
            part.name,
            ran.content,
            ran.is_error,
            made_outcome(ran),
            ended=time.monotonic(),
            child=ran.state,
        )
    return returned(outcome._replace(duration=max(0.0, outcome.ended - started)))


def _jobs(live: Live, state: RunState) -> tuple[ToolJob, ...]:
    effect = next_effect(state)
    assert isinstance(effect, RunTools)
    return tuple([_job(live, state, invocation) for invocation in effect.calls])


def _accept(live: Live, state: RunState) -> RunState:
    assert live.output is not None  # a workflow's run always has its output schema
    _, plain = live.output.parse(state.last_text)  # the planner wrote it: never rejected
    return reduce(state, OutputAccepted(plain))
