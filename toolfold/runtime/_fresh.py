"""Conducting a fresh workflow run that keeps only what its steps need.

`_conduct` drives a run from its start state, reducing nothing between
plain rounds. A fresh run (`Fresh`: a new run nobody watches) does not even
need that state: its first plan is the input it was given, a plain round
needs the planner's calls (not the model response they make) and each
step's outcome, and the answer ends it. `conduct_fresh_sync` and
`conduct_fresh_async` keep just that, and the run's response makes the start
state, the events and the final state together when its state is first read
(`Deferred`), equal to those `_conduct` makes.

A round that is not plain (a step that fails or waits, a function step, a
call the core must answer, a decision that raises, an interruption) hands
the run to `_conduct` in the state it reached, made then: from there, the
run goes exactly as it went before.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from toolfold.runtime._conduct import (
    Answered,
    Deferred,
    Fresh,
    _arguments,
    _attempts,
    _plain_answer,
    _Record,
    _side_by_side,
    conduct_async,
    conduct_sync,
    events_of,
)
from toolfold.runtime._planner import (
    Attempt,
    Call,
    Final,
    InPlace,
    first_plan,
    json_text,
    step_calls,
)
from toolfold.runtime._task import Task, arun_sub_run, run_sub_run
from toolfold.runtime.core._rounds import reduce_all
from toolfold.runtime.drive._executor import (
    SubRun,
    ToolOutcome,
    kept_sub_run,
    run_kept,
)
from toolfold.runtime.drive._failures import model_failure
from toolfold.runtime.drive._loop import Live, interrupted
from toolfold.toolkit._results import describe_exception

_tuple_new: Any = tuple.__new__

if TYPE_CHECKING:
    from toolfold.runtime._planner import Planner
    from toolfold.runtime._response import Response
    from toolfold.runtime.core._state import RunState


def conduct_fresh_sync(planner: Planner, live: Live, fresh: Fresh) -> Response | Deferred:
    """Drive the fresh run ``fresh`` from blocking code (see the module's docstring)."""
    steps_named = planner.lean_steps(fresh.config)
    rounds = fresh.config.max_steps  # (`_conduct._plain_rounds` counts them so from the start)
    if steps_named is None or rounds <= 0:
        return conduct_sync(planner, live, fresh.state())
    plan = first_plan(fresh.input, fresh.values)
    records: list[_Record] = []
    decide = planner.decision
    while True:
        try:
            decision = decide(plan)
        except Exception as exc:
            failure = _failure(exc, fresh, records)
            if failure is exc:
                raise
            raise failure from exc
        if type(decision) is not list:
            return _answered(live, fresh, records, decision)  # type: ignore[arg-type]
        if len(decision) == 1:  # one step: right here, in this thread
            call = decision[0]
            task = steps_named.get(call.task.name)
            if task is None:
                return conduct_sync(planner, live, _reached(fresh, records), (decision, plan))
            records.append(decision)
            try:
                outcome = _ran(live, fresh, task, call, time.monotonic())
            except BaseException as exc:
                _stopped(exc, fresh, records, call)
                raise
            records.append(outcome)
            attempt = _attempt(outcome)
            rounds -= 1
            if attempt is None or not rounds:
                return conduct_sync(planner, live, _reached(fresh, records))
            plan = plan.extended((attempt,))
            continue
        tasks = _plain(steps_named, decision)
        if tasks is None:
            return conduct_sync(planner, live, _reached(fresh, records), (decision, plan))
        records.append(decision)
        finished: dict[int, ToolOutcome] = {}
        steps = _in_place(tasks, decision)
        try:  # steps side by side: coroutines of one loop, as `conduct_sync` runs them
            outcomes = run_kept(lambda: _side_by_side(live, fresh.run_id, steps, finished))  # noqa: B023
        except BaseException as exc:
            if not isinstance(exc, (Exception, GeneratorExit)):  # an interruption
                interrupted(exc, _reached(fresh, records), finished)
            raise
        records.extend(outcomes)
        attempts = _attempts(outcomes)
        rounds -= 1
        if attempts is None or not rounds:
            return conduct_sync(planner, live, _reached(fresh, records))
        plan = plan.extended(attempts)


async def conduct_fresh_async(planner: Planner, live: Live, fresh: Fresh) -> Response | Deferred:
    """Drive the fresh run ``fresh`` on the running event loop (see `conduct_fresh_sync`)."""
    steps_named = planner.lean_steps(fresh.config)
    rounds = fresh.config.max_steps
    if steps_named is None or rounds <= 0:
        return await conduct_async(planner, live, fresh.state())
    plan = first_plan(fresh.input, fresh.values)
    records: list[_Record] = []
    decide = planner.decision
    while True:
        try:
            decision = decide(plan)
        except Exception as exc:
            failure = _failure(exc, fresh, records)
            if failure is exc:
                raise
            raise failure from exc
        if type(decision) is not list:
            return _answered(live, fresh, records, decision)  # type: ignore[arg-type]
        if len(decision) == 1:
            call = decision[0]
            task = steps_named.get(call.task.name)
            if task is None:
                return await conduct_async(
                    planner, live, _reached(fresh, records), (decision, plan)
                )
            records.append(decision)
            try:
                outcome = await _ran_async(live, fresh, task, call, time.monotonic())
            except BaseException as exc:
                _stopped(exc, fresh, records, call)
                raise
            records.append(outcome)
            attempt = _attempt(outcome)
            rounds -= 1
            if attempt is None or not rounds:
                return await conduct_async(planner, live, _reached(fresh, records))
            plan = plan.extended((attempt,))
            continue
        tasks = _plain(steps_named, decision)
        if tasks is None:
            return await conduct_async(planner, live, _reached(fresh, records), (decision, plan))
        records.append(decision)
        finished: dict[int, ToolOutcome] = {}
        try:
            outcomes = await _side_by_side(live, fresh.run_id, _in_place(tasks, decision), finished)
        except BaseException as exc:
            if not isinstance(exc, (Exception, GeneratorExit)):  # an interruption
                interrupted(exc, _reached(fresh, records), finished)
            raise
        records.extend(outcomes)
        attempts = _attempts(outcomes)
        rounds -= 1
        if attempts is None or not rounds:
            return await conduct_async(planner, live, _reached(fresh, records))
        plan = plan.extended(attempts)


def _reached(fresh: Fresh, records: list[_Record]) -> RunState:
    """The state the run reached: its start state with what it recorded."""
    return reduce_all(fresh.state(), events_of(records))


def _failure(exc: Exception, fresh: Fresh, records: list[_Record]) -> BaseException:
    """The error a decision that raised ``exc`` fails the run with, as `_conduct` reports it.

    It carries the state before the decision, which a resume goes on from.
    """
    state = _reached(fresh, records)
    return model_failure(exc, state, state.step + 1)


def _answered(live: Live, fresh: Fresh, records: list[_Record], answer: Final) -> Deferred:
    """The run finished with ``answer``: `_conduct._plain_rounds`'s record and `_conduct._deferred`."""
    value = answer.value
    text = json_text(value)
    plain = value if type(value) is str else _plain_answer(live, answer, text)
    records.append(_tuple_new(Answered, (text, plain)))  # (`Answered(...)` without its frame)
    output = plain
    if output is not None and live.output is not None:  # as `finish` types it
        output = live.output.restore(output)
    deferred: Deferred = _tuple_new(Deferred, (fresh, records, output))
    return deferred


def _plain(steps_named: Mapping[str, Task], decision: list[Call]) -> list[Task] | None:
    """The steps of a plain round's ``decision`` (see `_conduct._plain_rounds`), else None.

    None for no calls (the core reads it as an answer), two calls with one id
    (the core's response makes them unique), or a call whose step does not
    run in place (``steps_named``: those that do, by name).
    """
    if not decision:
        return None
    if len(decision) > 1 and len({call.call_id for call in decision}) < len(decision):
        return None
    tasks: list[Task] = []
    for call in decision:
        task = steps_named.get(call.task.name)
        if task is None:
            return None
        tasks.append(task)
    return tasks


def _attempt(outcome: ToolOutcome) -> Attempt | None:
    """`_conduct._attempts` of one outcome: its attempt when plain, else None."""
    child = outcome.child
    if outcome.is_error or child is None or outcome.outcome != "ok" or not child.is_done:
        return None  # (a step's outcome has no ``parts``)
    output = child.output
    value = output if type(output) is str else json.loads(outcome.content)
    attempt: Attempt = _tuple_new(Attempt, (outcome.call_id, outcome.tool_name, True, value))
    return attempt  # (`Attempt(...)` without its ``__new__``'s frame)


def _stopped(exc: BaseException, fresh: Fresh, records: list[_Record], call: Call) -> None:
    """An interruption of a round of one ``call``: its state, as `_conduct` gives it."""
    if isinstance(exc, (Exception, GeneratorExit)):
        return
    finished: dict[int, ToolOutcome] = {}
    kept_sub_run(finished, 0, step_calls([call])[0], exc, fresh.run_id)
    interrupted(exc, _reached(fresh, records), finished)


def _in_place(tasks: list[Task], decision: list[Call]) -> list[InPlace]:
    return [
        InPlace(task, part, None) for task, part in zip(tasks, step_calls(decision), strict=True)
    ]


def _ran(
    live: Live,
    fresh: Fresh,
    task: Task,
    call: Call,
    started: float,
) -> ToolOutcome:
    """What `_conduct._ran` makes of the call's part, without the part (an interruption: `_stopped`)."""
    run_id = f"{fresh.run_id}/{call.call_id}"
    try:
        input_ = call.input
        if type(input_) is str and not call.values:  # the usual step call: nothing to copy
            ran = run_sub_run(task, input_, None, live.deps, None, lambda: run_id)
        else:  # the tool's own copies, as `_conduct._arguments` gives them from the call's part
            ran = run_sub_run(
                task, *_arguments(step_calls([call])[0]), live.deps, None, lambda: run_id
            )
    except Exception as exc:
        return _failed(call, exc, started)
    return _outcome(call, ran, started)


async def _ran_async(
    live: Live,
    fresh: Fresh,
    task: Task,
    call: Call,
    started: float,
) -> ToolOutcome:
    """Like `_ran`, on the running event loop."""
    run_id = f"{fresh.run_id}/{call.call_id}"
    try:
        input_ = call.input
        if type(input_) is str and not call.values:  # the usual step call: nothing to copy
            ran = await arun_sub_run(task, input_, None, live.deps, None, lambda: run_id)
        else:  # the tool's own copies, as `_conduct._arguments` gives them from the call's part
            ran = await arun_sub_run(
                task, *_arguments(step_calls([call])[0]), live.deps, None, lambda: run_id
            )
    except Exception as exc:
        return _failed(call, exc, started)
    return _outcome(call, ran, started)


def _outcome(call: Call, ran: SubRun, started: float) -> ToolOutcome:
    ended = time.monotonic()
    is_error = ran.is_error
    # `ToolOutcome(...)` with every field given, without its ``__new__``'s frame.
    outcome: ToolOutcome = _tuple_new(
        ToolOutcome,
        (
            call.call_id,
            call.task.name,
            ran.content,
            is_error,
            "error" if is_error else "ok",  # `made_outcome`
            None,
            ended,
            max(0.0, ended - started),
            ran.state,
            (),
        ),
    )
    return outcome


def _failed(call: Call, exc: Exception, started: float) -> ToolOutcome:
    ended = time.monotonic()
    content = f"Error: {describe_exception(exc)}"
    return ToolOutcome(
        call.call_id, call.task.name, content, True, "error", exc, ended, max(0.0, ended - started)
    )
