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

A run whose rounds are all plain up to the answer (the usual one) returns a
`Deferred` instead of a response: the state it started from and what its
rounds recorded (the planner's calls, the steps' outcomes, the answer),
from which `Deferred.state` makes the very events and state the run would
have reduced. Nothing on the way reads that state, so it is built only when
someone reads it (`WorkflowResponse.state`).

A fresh run nobody watches (`Fresh`) does not even need its start state:
its first plan is the input it was given, and a plain round needs only the
planner's calls and each step's outcome. Its course starts with plain rounds
from the `Fresh` record; the start state is made with the rest when the
state is first read, or, when a round is not plain (a step that fails or
waits, a function step, a call the core must answer, a decision that
raises, an interruption), then, and the run goes on from the state it
reached exactly as any run in that state.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Union

import toolfold.runtime._step_retry as step_retry
from toolfold._errors import SourceCloseError, ToolRetriesExceededError
from toolfold.runtime._planner import (
    Attempt,
    Call,
    Final,
    Plan,
    answer_response,
    calls_response,
    first_plan,
    json_text,
    read_plan,
    respond,
    step_calls,
)
from toolfold.runtime._run import run_async, run_sync
from toolfold.runtime._step_retry import not_retried, round_wait
from toolfold.runtime._task import (
    Task,
    close_failed_result,
    step_state,
    step_text,
    sub_run_async,
)
from toolfold.runtime.core._approval import dispositions
from toolfold.runtime.core._build import builder, new_tuple
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._effects import RunTools
from toolfold.runtime.core._events import Event, ModelResponded, OutputAccepted, planned_output
from toolfold.runtime.core._json_numbers import json_value
from toolfold.runtime.core._messages import Message, TextPart, Usage, freeze, thaw
from toolfold.runtime.core._next import next_effect
from toolfold.runtime.core._reducer import OpenStep, initial_state, open_step, reduce
from toolfold.runtime.core._rounds import reduce_all
from toolfold.runtime.core._state import DONE_PHASES, Disposition, RunState
from toolfold.runtime.core._stop import has_tree_budget, steps_stop
from toolfold.runtime.drive._executor import (
    ToolJob,
    ToolOutcome,
    asyncio_task,
    failed_sub_run,
    kept_sub_run,
    returned,
    run_calls,
)
from toolfold.runtime.drive._failures import failure_cause, model_failure, raised_from
from toolfold.runtime.drive._join import gather_or_cancel
from toolfold.runtime.drive._kept_loop import run_kept
from toolfold.runtime.drive._loop import (
    Ended,
    Live,
    _job,
    interrupted,
    is_interruption,
    resumed_round,
)
from toolfold.runtime.drive._shells import finish, stamp, wait_sync
from toolfold.runtime.drive._sync_calls import run_calls_sync
from toolfold.runtime.drive._trace import tracing
from toolfold.toolkit._results import describe_exception

if TYPE_CHECKING:
    from toolfold.runtime._planner import Planner
    from toolfold.runtime._response import Response

_Decided = tuple["list[Call] | Final", Plan]
_message = builder(Message)
_text = builder(TextPart)
_NO_USAGE = Usage()

# Its values have the event's types (a tuple of dispositions).
_responded_event = builder(ModelResponded)
_EXECUTE: tuple[Disposition, ...] = ("execute",)


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


class Answered(NamedTuple):
    """The planner's final answer, as a plain run records it.

    Attributes:
        text: The answer as the planner's response gives it (its value as JSON),
            or None when it is written when the state is made (`answer_text`):
            the value is then steps' decoded outputs that are all text or
            numbers, which nothing changes until then.
        plain: The value accepted as the run's output (plain data).
        reason: The run's finish reason (the planner's `Final`'s).
    """

    text: str | None
    plain: Any
    reason: Literal["stop", "max_iterations"] = "stop"

    def answer_text(self) -> str:
        """The answer as the planner's response gives it (see ``text``)."""
        text = self.text
        return json_text(self.plain) if text is None else text


# What plain rounds record, in order: per round, the planner's calls (its
# response is made from them) and the steps' outcomes in call order; last,
# the answer (see `events_of`).
_Record = Union[list[Call], ToolOutcome, Answered]  # noqa: UP007


class Fresh(NamedTuple):
    """A fresh run of a workflow, its start state not made yet.

    Its start state (`start_state`) is ``initial_state`` of one user message,
    ``text``; its first plan is ``input`` and ``values`` (what `read_plan`
    reads from that message).

    Attributes:
        text: The first message's text (the input's envelope).
        config: The run's configuration.
        run_id: The run's id.
        agent: The workflow's name.
        input: The workflow's input, as its plan reads it.
        values: The values it inherits, as its plan reads them.
    """

    text: str
    config: RunConfig
    run_id: str
    agent: str | None
    input: Any
    values: Mapping[str, Any]

    def start_state(self) -> RunState:
        """The run's start state, as `Workflow._start` makes it."""
        message = _message("user", (_text(self.text),))
        return initial_state((message,), self.config, run_id=self.run_id, agent=self.agent)


def _reached(start: RunState | Fresh, records: list[_Record]) -> RunState:
    """The state plain rounds from ``start`` reached (``records``: what they recorded)."""
    state = start.start_state() if type(start) is Fresh else start
    assert type(state) is RunState
    return reduce_all(state, events_of(records)) if records else state


class Deferred(NamedTuple):
    """A finished run whose state is made when it is first read.

    The run's rounds were all plain from ``start`` to its answer, so the
    state is ``reduce_all(start, events_of(records))``, the one the run
    would have reduced on its way; `state` makes it.

    Attributes:
        start: The state the plain rounds started from, or the fresh run
            they started (its start state is made with the rest).
        records: What they recorded (see `events_of`).
        output: The response's output (typed).
    """

    start: RunState | Fresh
    records: list[_Record]
    output: Any

    def state(self) -> RunState:
        """The run's final state."""
        state = _reached(self.start, self.records)
        assert state.phase == "finished"  # plain rounds to an answer: `_plain_rounds`
        return state

    @property
    def plain(self) -> Any:
        """The state's output."""
        return self._answer().plain

    @property
    def finish_reason(self) -> Literal["stop", "max_iterations"]:
        """The state's ``finish_reason``."""
        return self._answer().reason

    def _answer(self) -> Answered:
        answer = self.records[-1]
        assert type(answer) is Answered
        return answer

    @property
    def run_id(self) -> str:
        """The state's ``run_id``."""
        return self.start.run_id

    @property
    def agent(self) -> str | None:
        """The state's ``agent`` (the workflow's name)."""
        return self.start.agent

    @property
    def step(self) -> int:
        """The state's ``step``: one per planner response, the answer's included."""
        start = self.start
        first = start.step if isinstance(start, RunState) else 0
        return first + sum([type(r) is list for r in self.records]) + 1

    @property
    def tree_usage(self) -> Usage:
        """The state's ``tree_usage``: the planner's responses use nothing, so it is the steps'."""
        start = self.start
        total = start.tree_usage if isinstance(start, RunState) else _NO_USAGE
        for record in self.records:
            if type(record) is ToolOutcome and record.child is not None:
                total = total + record.child.tree_usage
        return total


def events_of(records: list[_Record]) -> list[Event]:
    """The events plain rounds' ``records`` stand for, as the loop would reduce them."""
    events: list[Event] = []
    for record in records:
        kind = type(record)
        if kind is ToolOutcome:
            events.append(returned(record))  # type: ignore[arg-type]
        elif kind is Answered:
            response = answer_response(record.answer_text(), record.reason)  # type: ignore[union-attr]
            events.append(_responded_event(response, ()))
            events.append(OutputAccepted(planned_output(record.plain)))  # type: ignore[union-attr]
        else:
            parts = step_calls(record)  # type: ignore[arg-type]
            events.append(_responded_event(calls_response(parts), _EXECUTE * len(parts)))
    return events


def conduct_sync(
    planner: Planner, live: Live, start: RunState | Fresh, decided: _Decided | None = None
) -> Response | Deferred:
    """Drive a workflow's run from blocking code (see the module's docstring).

    ``start``: the state it goes on from, or the fresh run it starts.
    ``decided``: the planner's decision on a ``start`` state (awaiting it),
    with its plan, when the caller has made it.
    """
    course = _course(planner, live, start, decided)
    outcomes: tuple[ToolOutcome, ...] | None = None
    try:
        while True:
            run_id, steps, at, finished = course.send(outcomes)  # type: ignore[arg-type]  # None to start
            try:
                # A round follows (the last did not fail the run): a retried step's wait first.
                wait = None if outcomes is None else round_wait(outcomes, live.tools)
                if wait:
                    wait_sync(wait)
                with resumed_round(live):
                    if steps is None:  # a function step, a timeout...: the executor runs them
                        assert at is not None
                        outcomes = run_calls_sync(
                            _jobs(live, at), max_concurrency=live.max_concurrency, finished=finished
                        )
                    elif len(steps) == 1:  # one step: right here, in this thread
                        outcomes = (_ran(live, run_id, steps[0], time.monotonic(), finished),)
                    else:  # steps side by side: coroutines of one loop, as the executor runs them
                        outcomes = run_kept(lambda: _side_by_side(live, run_id, steps, finished))  # noqa: B023
            except BaseException as exc:
                stamp(course, exc)  # an interruption (Ctrl-C) gets the workflow's state
                raise
    except StopIteration as stop:
        ended: RunState | Deferred = stop.value
    if isinstance(ended, Deferred):
        return ended
    # Finished, or suspended or failed: the loop says what that gives.
    if ended.phase == "finished":
        return finish(ended, live)
    with _caused(ended, outcomes):
        return run_sync(live, ended)


async def conduct_async(
    planner: Planner, live: Live, start: RunState | Fresh, decided: _Decided | None = None
) -> Response | Deferred:
    """Drive a workflow's run on the running event loop (see `conduct_sync`)."""
    asyncio_task()  # (a UsageError outside asyncio: a trio run, say)
    course = _course(planner, live, start, decided)
    outcomes: tuple[ToolOutcome, ...] | None = None
    try:
        while True:
            run_id, steps, at, finished = course.send(outcomes)  # type: ignore[arg-type]  # None to start
            try:
                wait = None if outcomes is None else round_wait(outcomes, live.tools)
                if wait:  # (as in `conduct_sync`)
                    await step_retry.sleep(wait)
                with resumed_round(live):
                    if steps is None:
                        assert at is not None
                        outcomes = await run_calls(
                            _jobs(live, at), max_concurrency=live.max_concurrency, finished=finished
                        )
                    else:
                        outcomes = await _side_by_side(live, run_id, steps, finished)
            except BaseException as exc:
                stamp(course, exc)  # a cancellation gets the workflow's state, not a step's
                raise
    except StopIteration as stop:
        ended: RunState | Deferred = stop.value
    if isinstance(ended, Deferred):
        return ended
    if ended.phase == "finished":
        return finish(ended, live)
    with _caused(ended, outcomes):
        return await run_async(live, ended)


@contextmanager
def _caused(ended: RunState, outcomes: tuple[ToolOutcome, ...] | None) -> Iterator[None]:
    """Raise the `ToolRetriesExceededError` of a run whose last round (``outcomes``) failed it
    (``ended``) from the exception of the step that failed (`failure_cause`), as the loop
    raises it when it drives that round itself."""
    cause = failure_cause(ended, outcomes) if ended.phase == "failed" else None
    if cause is None:
        yield
        return
    try:
        yield
    except ToolRetriesExceededError as exc:
        if exc.state is not ended or exc.__cause__ is not None:
            raise
        raise exc from cause


# A round of step calls: the run's id, its steps to run in place (None: the
# executor runs them, in the state given next), and where a driver puts, when
# the round is interrupted, the outcomes of the steps that had ended and the
# state of those stopped midway (`kept_sub_run`).
_Round = tuple[str, "Sequence[_Step] | None", RunState | None, dict[int, ToolOutcome] | None]
# A step to run in place: an `InPlace` (`Planner.in_place`), or the plain tuple of its
# fields (`_plain`: a plain round makes one a branch, without the named tuple's cost).
_Step = tuple[Task, Call, "RunState | None"]
_Course = Generator[_Round, tuple[ToolOutcome, ...], RunState | Deferred]


def _course(
    planner: Planner, live: Live, start: RunState | Fresh, decided: _Decided | None = None
) -> _Course:
    """The run's usual course, written once for both drivers.

    Yields each round of step calls to run (see `_Round`) and is sent their
    outcomes in call order; returns the state where the usual course ends
    (finished, suspended or failed), or a `Deferred` one.

    The course keeps the plan of the conversation it reached: a step's result
    is read into it with the output it was encoded from (not decoded again),
    and the final answer's value is the one the planner gave. Plain rounds
    (see `_plain_rounds`) run back to back, and their events are reduced in
    one pass when they end (`reduce_all`): no one sees the states between;
    when they end with the answer, not even then (a `Deferred` run). A
    `Fresh` run starts with them, on its first plan, without a state.
    ``decided``: the first decision, already made on a ``start`` state.
    """
    plan: Plan | None = None
    answer: Final | None = None
    if isinstance(start, Fresh):
        ended, decided = yield from _plain_rounds(
            planner, live, start, first_plan(start.input, start.values)
        )
        if isinstance(ended, Deferred):
            return ended
        state = ended
    else:
        state = start
    while True:
        phase = state.phase
        if phase == "awaiting_model":
            if decided is None:
                if plan is None:
                    plan = planner.read(state.messages)
                ended, decided = yield from _plain_rounds(planner, live, state, plan)
                if isinstance(ended, Deferred):
                    return ended
                state = ended
            if decided is None:  # the plain rounds reached where the state says what follows
                plan = None
                continue
            decision, plan = decided
            decided = None
            if type(decision) is list and decision and state.config.stop_when:
                spent = steps_stop(state)  # its steps would start with its tree budget spent
                if spent is not None:
                    assert plan is not None  # (the decision was made on it)
                    instead = planner.spent_decision(plan)  # a `Loop`'s or `Sequence`'s last output
                    if instead is None:
                        state, plan = reduce(state, spent), None
                        continue
                    decision = instead
            opened = open_step(state, _responded(planner, state, decision))
            if not isinstance(opened, OpenStep):  # the answer, or calls the core answered
                state, plan = opened, None
                answer = decision if isinstance(decision, Final) else None
                continue
            at = opened.base
            steps = planner.in_place(opened.changes["calls"])
            finished: dict[int, ToolOutcome] | None = {}  # (steps run sub-runs: see _Round)
            try:
                outcomes = yield at.run_id, steps, opened.state, finished
            except BaseException as exc:
                interrupted(exc, opened.state, finished)
                raise
            state = _settled(live, opened.close([returned(o) for o in outcomes]), outcomes)
            if state.phase == "awaiting_model":  # the step's results are committed: read them
                plan = read_plan((state.conversation.last(),), plan, _known(outcomes))  # type: ignore[arg-type]
            else:
                plan = None
        elif phase == "running_tools":  # resumed mid-step, or a step under a tree budget
            finished = {}
            # Under a tree budget each step gets what is left of it (`handed_budget`, read
            # from the state by the executor's jobs): none runs in place, which gives none.
            stop_when = state.config.stop_when
            steps = (
                None if stop_when and has_tree_budget(stop_when) else planner.in_place(state.calls)
            )
            try:
                outcomes = yield state.run_id, steps, state, finished
            except BaseException as exc:
                interrupted(exc, state, finished)
                raise
            for outcome in outcomes:
                state = reduce(state, returned(outcome))
            state = _settled(live, state, outcomes)
            plan = None
        elif phase == "validating_output":
            state = _accept(live, state, answer)
        else:
            return state


def _plain_rounds(
    planner: Planner, live: Live, start: RunState | Fresh, plan: Plan
) -> Generator[_Round, tuple[ToolOutcome, ...], tuple[RunState | Deferred, _Decided | None]]:
    """Plain rounds from ``start`` on ``plan``: the run they finished, or the state they reached.

    A round is plain when each of its calls (each id once) is a step run in
    place that executes in ``start``'s config (`Planner.lean_steps`), and
    each comes back ``ok`` from a finished sub-run: the run then only waits
    for the next decision, so nothing needs the state in between, and the
    rounds keep only what they did (see `events_of`). The final answer ends
    them: the run finished, its state made when read (`Deferred`). Else they
    return the state they reached, with the first decision that is not
    plain and the plan it was made on, for the caller to take on that state;
    or None when the state says what follows (a step failed or waits, no
    steps left).
    """
    records: list[_Record] = []
    config = start.config
    steps_named = planner.lean_steps(config)
    # Rounds before the step limit (the last one's boundary finishes the run).
    if isinstance(start, Fresh):
        rounds = config.max_steps
    else:
        rounds = config.max_steps + start.turn_start - start.step
        if start.failures:
            steps_named = None
    if steps_named is None or rounds < 0:
        rounds = 0
    run_id = start.run_id
    decide = planner.decision
    while True:
        try:
            decision = decide(plan)
        except Exception as exc:  # reported as the loop reports a model call's failure
            # The error carries the state before the decision, which a resume goes on from.
            state = _reached(start, records)
            failure = model_failure(exc, state, state.step + 1)
            if failure is exc:
                raise
            raise failure from raised_from(exc, failure)
        if type(decision) is not list:
            if not rounds and not records:
                return _reached(start, records), (decision, plan)
            assert isinstance(decision, Final)
            value = decision.value
            if decision.decoded:
                # Its text is written when the state is made, if ever, unless the
                # caller could change the values by then: the output shares them.
                text = None if _unchanging(value) else json_text(value)
                records.append(new_tuple(Answered, (text, value, decision.reason)))
            else:
                text = json_text(value)
                # The output the run accepts for it: text as it is, else what its JSON gives.
                plain = value if type(value) is str else _accepted(live, decision, text).value
                records.append(new_tuple(Answered, (text, plain, decision.reason)))
            return _deferred(live, start, records), None
        steps = _plain(steps_named, decision) if rounds else None
        if steps is None:
            return _reached(start, records), (decision, plan)
        records.append(decision)
        finished: dict[int, ToolOutcome] | None = {}
        try:
            outcomes = yield run_id, steps, None, finished
        except BaseException as exc:
            if is_interruption(exc):
                interrupted(exc, _reached(start, records), finished)
            raise
        records.extend(outcomes)
        attempts = _attempts(outcomes)
        rounds -= 1
        if attempts is None or not rounds:
            return _settled(live, _reached(start, records), outcomes), None
        plan = plan.extended(attempts)


# The values a decoded answer may hold for its text to be written later (see `Answered`).
_UNCHANGING = frozenset({str, int, float, bool, type(None)})


def _unchanging(value: Any) -> bool:
    """Whether ``value`` (a decoded answer: plain data) is a dict of values nothing can change."""
    return type(value) is dict and _UNCHANGING.issuperset(map(type, value.values()))


def _plain(steps_named: Mapping[str, Task] | None, decision: list[Call]) -> list[_Step] | None:
    """The steps of a plain round's ``decision`` (see `_plain_rounds`), else None.

    None for no calls (the core reads it as an answer), two calls with one id
    (the core's response makes them unique), or a call whose step does not
    run in place (``steps_named``: those that do, by name).
    """
    if not decision or steps_named is None:
        return None
    # (Each step as the plain tuple of an `InPlace`'s fields: one a branch.)
    if len(decision) == 1:  # the usual round: one step
        call = decision[0]
        task = steps_named.get(call.task.name)
        return None if task is None else [(task, call, None)]
    if len({call.call_id for call in decision}) < len(decision):
        return None
    steps: list[_Step] = []
    for call in decision:
        task = steps_named.get(call.task.name)
        if task is None:
            return None
        steps.append((task, call, None))
    return steps


def _responded(planner: Planner, state: RunState, decision: list[Call] | Final) -> ModelResponded:
    """The decision as the loop reduces a model response."""
    response = respond(decision)
    if type(decision) is not list:  # the final answer: no calls
        decided: tuple[Disposition, ...] = ()
    elif planner.executes(state.config):
        # The planner's step tools need no approval: every call executes.
        decided = _EXECUTE * len(decision)
    else:
        calls = response.message.tool_calls
        decided = tuple(dispositions(state.config, calls, None))  # type: ignore[arg-type]
    return _responded_event(response, decided)


def _attempts(outcomes: tuple[ToolOutcome, ...]) -> list[Attempt] | None:
    """The finished attempts of a plain round's outcomes; None unless each is ``ok`` from a finished sub-run.

    A step's result is its sub-run's output as JSON; text comes back from it unchanged.
    """
    found: list[Attempt] = []
    for outcome in outcomes:
        call_id, name, content, is_error, kind, _, _, _, child, parts = outcome
        if kind != "ok" or is_error or parts or child is None or child.phase not in DONE_PHASES:
            return None
        output = child.output
        value = output if type(output) is str else json_value(content)
        found.append(new_tuple(Attempt, (call_id, name, True, value)))
    return found


def _known(outcomes: tuple[ToolOutcome, ...]) -> dict[str, Any]:
    """The outputs that successful step results were encoded from, by call id (text only).

    A step's result is its sub-run's output as JSON; text comes back from it unchanged.
    """
    known: dict[str, Any] = {}
    for outcome in outcomes:
        child = outcome.child
        if child is not None and outcome.outcome == "ok" and not outcome.is_error:
            output = child.output
            if type(output) is str:
                known[outcome.call_id] = output
    return known


def _ran(
    live: Live,
    run_id: str,
    step: _Step,
    started: float,
    finished: dict[int, ToolOutcome] | None = None,
    index: int = 0,
) -> ToolOutcome:
    """What the executor makes of ``step``'s call, a step run in place, from blocking code.

    The step's arguments are the planner's own (`Planner.in_place` checked
    their shape), so there is nothing to validate; the rest is the executor's
    course for a sub-run: its state, or the error it raised, and the time
    since the round ``started``; interrupted, the state it reached is kept
    in ``finished`` under ``index``. The sub-run's id is ``<run_id>/<call id>``:
    `sub_run_id_of` without its search of the conversation for a reused id
    (the planner never makes a call id twice: a step's attempt has a result
    the plan reads, and the next attempt gets the next id, ``<base>#<n>``).
    The sub-run asks for it with the id's own ``__str__``: no function to
    make and call per step.
    """
    task, call, child = step
    try:
        # `run_sub_run`, its run's state read right here: no `SubRun` per step.
        try:
            state = step_state(
                task, *_arguments(call), live.deps, child, f"{run_id}/{call.call_id}".__str__
            )
        except SourceCloseError as error:
            closed = close_failed_result(error)
            assert closed.state is not None  # (a step's sub-run ran: its close failed after)
            state, text, is_error = closed.state, closed.content, closed.is_error
        else:
            text, is_error = step_text(state, task.target)
    except Exception as exc:
        return _failed(call, exc, started, run_id)
    except BaseException as exc:
        kept_sub_run(finished, index, call.call_id, call.task.name, exc, run_id)
        raise
    return _outcome(call, state, text, is_error, started)


async def _ran_async(
    live: Live,
    run_id: str,
    step: _Step,
    started: float,
    finished: dict[int, ToolOutcome] | None = None,
    index: int = 0,
) -> ToolOutcome:
    """Like `_ran`, on the running event loop.

    One block from the step's run to its outcome kept in ``finished`` (see `kept_now`):
    Ctrl-C landing once the sub-run had ended keeps what it ended with, so resuming
    does not run it again.
    """
    task, call, child = step
    ended: Response | Ended | None = None
    try:
        try:
            # `arun_sub_run`, its run awaited right here: one coroutine fewer per step.
            try:
                ended = await sub_run_async(
                    task, *_arguments(call), live.deps, child, f"{run_id}/{call.call_id}".__str__
                )
            except SourceCloseError as error:
                closed = close_failed_result(error)
                assert closed.state is not None  # (a step's sub-run ran: its close failed after)
                state, text, is_error = closed.state, closed.content, closed.is_error
            else:  # (`ended_result` without its `SubRun`)
                state = ended.state
                text, is_error = step_text(state, task.target)
        except Exception as exc:
            outcome = _failed(call, exc, started, run_id)
        except BaseException as exc:
            kept_sub_run(finished, index, call.call_id, call.task.name, exc, run_id)
            raise
        else:
            outcome = _outcome(call, state, text, is_error, started)
        if finished is not None:
            finished[index] = outcome
    except BaseException:
        if ended is not None and finished is not None and index not in finished:
            state = ended.state
            finished[index] = _outcome(call, state, *step_text(state, task.target), started)
        raise
    return outcome


async def _side_by_side(
    live: Live,
    run_id: str,
    steps: Sequence[_Step],
    finished: dict[int, ToolOutcome] | None = None,
) -> tuple[ToolOutcome, ...]:
    """The round's steps run concurrently (at most ``max_concurrency`` at once), in call order.

    As the executor runs sub-runs: a step that waits for its run holds no
    thread, each step of several runs in its own task (its own copy of the
    context variables, as a branch the loop runs), an error in one cancels the
    others at once, and cancelling the round cancels every step still running.
    """
    started = time.monotonic()
    if len(steps) == 1:
        return (await _ran_async(live, run_id, steps[0], started, finished),)
    # At most ``max_concurrency`` steps run at once: the join makes the next
    # step's task when one ends. Each task is named by its call's id.
    return await gather_or_cancel(
        [_ran_async(live, run_id, s, started, finished, i) for i, s in enumerate(steps)],
        finished,
        live.max_concurrency,
        [call.call_id for _, call, _ in steps],
    )


def _arguments(call: Call) -> tuple[Any, Mapping[str, Any] | None]:
    """The step's input and values, the tool's own copies, as the executor gives them.

    The executor thaws the frozen arguments of the call's part: a plain,
    independent copy the step may change (of a call read from a state, whose
    arguments are frozen already, or one the planner just made).
    """
    input_, values = call.input, call.values
    if type(input_) is str and not values:  # the usual step call: nothing to copy
        return input_, None
    return (
        input_ if type(input_) is str else thaw(freeze(input_)),
        thaw(freeze(values)) if values else None,
    )


def _outcome(
    call: Call, state: RunState, content: str, is_error: bool, started: float
) -> ToolOutcome:
    """The outcome of ``call``, whose step ran a sub-run, as the executor makes it of the
    sub-run's `SubRun` (``state``, ``content``, ``is_error``)."""
    ended = time.monotonic()
    return new_tuple(
        ToolOutcome,
        (
            call.call_id,
            call.task.name,
            content,
            is_error,
            "error" if is_error else "ok",  # `made_outcome`
            None,
            ended,
            max(0.0, ended - started),
            state,
            (),
        ),
    )


def _failed(call: Call, exc: Exception, started: float, run_id: str) -> ToolOutcome:
    """The outcome of ``call``, whose step raised ``exc``, as the executor makes it (the
    failed sub-run kept, see `failed_sub_run`)."""
    ended = time.monotonic()
    content = f"Error: {describe_exception(exc)}"
    child = failed_sub_run(exc, call.call_id, run_id)
    took = max(0.0, ended - started)
    return ToolOutcome(
        call.call_id, call.task.name, content, True, "error", exc, ended, took, child
    )


def _settled(live: Live, state: RunState, outcomes: tuple[ToolOutcome, ...]) -> RunState:
    """``state`` after a round of ``outcomes``, failed when a retried step's error is not
    asked again (`not_retried`)."""
    failure = not_retried(state, outcomes, live.tools)
    return state if failure is None else reduce(state, failure)


def _jobs(live: Live, state: RunState) -> tuple[ToolJob, ...]:
    effect = next_effect(state)
    assert isinstance(effect, RunTools)
    return tuple([_job(live, state, invocation) for invocation in effect.calls])


def _accept(live: Live, state: RunState, answer: Final | None) -> RunState:
    return reduce(state, _accepted(live, answer, state.last_text))


def _deferred(live: Live, start: RunState | Fresh, records: list[_Record]) -> Deferred:
    """The run that plain rounds from ``start`` finished (``records``: theirs, the answer last)."""
    answer = records[-1]
    assert type(answer) is Answered
    output = answer.plain
    if output is not None and live.output is not None:  # as `finish` types it
        output = live.output.restore(output)
    return new_tuple(Deferred, (start, records, output))


def _accepted(live: Live, answer: Final | None, text: str) -> OutputAccepted:
    """The event accepting the planner's answer ``text`` (``answer``: its value, when known)."""
    if answer is not None and (type(answer.value) is str or answer.decoded):
        # The planner's text answer, or steps' decoded outputs: its JSON gives them back unchanged.
        return OutputAccepted(planned_output(answer.value))
    assert live.output is not None  # a workflow's run always has its output schema
    _, plain = live.output.parse(text)  # the planner wrote it: never rejected
    # (the workflow's own data: it may nest deeper than a model's text may)
    return OutputAccepted(planned_output(plain))
