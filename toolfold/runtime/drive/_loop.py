"""The one run loop, written once as a generator of ops.

`run_loop` is a generator written once: it asks the pure core what to do
(`next_effect`), yields the I/O it needs as an `_Op` (call the model, run
tools, tell a streaming caller something), and feeds what comes back to
`reduce` as events. Four shells perform the ops: blocking, async, and a
streaming variant of each. None of them contains loop logic (httpx drives its
auth flows the same way).

The state a caller holds is never corrupted by a failed step: when the model
call raises, the error carries the state from before the call, and
``resume(error.state)`` retries it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from contextvars import ContextVar
from typing import Any, Literal, NamedTuple, Union

import attrs

from toolfold._errors import (
    InvalidEventError,
    MalformedResponseError,
    ProviderError,
    RunError,
    ToolDefinitionError,
)
from toolfold.runtime._model import Model
from toolfold.runtime._response import (
    OutputInvalidEvent,
    RunStreamEvent,
    Step,
    StepEndEvent,
    StepStartEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from toolfold.runtime._step_retry import not_retried, round_wait
from toolfold.runtime.core._approval import dispositions, policy_says
from toolfold.runtime.core._build import builder, new_tuple
from toolfold.runtime.core._effects import (
    CallModel,
    Effect,
    Finish,
    RunTools,
    ToolInvocation,
    ValidateOutput,
)
from toolfold.runtime.core._events import (
    AttemptDropped,
    Event,
    ModelResponded,
    OutputAccepted,
    StopRequested,
)
from toolfold.runtime.core._messages import (
    NO_USAGE,
    Message,
    ResultContent,
    TextPart,
    ToolCallPart,
    Usage,
    freeze,
    tool_calls_of,
)
from toolfold.runtime.core._next import earlier_steps, next_effect
from toolfold.runtime.core._reducer import OpenStep, countable, open_step, reduce
from toolfold.runtime.core._request import ModelResponse, ToolDefinition, without_cut_calls
from toolfold.runtime.core._state import WAITING_PHASES, CallState, Disposition, RunState
from toolfold.runtime.core._steps import last_response, usage_sum_problem
from toolfold.runtime.core._stop import (
    StopPredicate,
    handed_budget,
    has_tree_budget,
    spent_reason,
    steps_stop,
    stop_event,
)
from toolfold.runtime.drive._cancels import COUNTS_CANCELS
from toolfold.runtime.drive._executor import (
    DEFAULT_MAX_CONCURRENCY,
    STANDING,
    Stand,
    Standing,
    ToolJob,
    ToolOutcome,
    agent_run_by,
    checker_failed,
    forwards,
    kept_sub_run,
    returned,
    thrown_exit,
    was_raised_in_run,
)
from toolfold.runtime.drive._failures import (
    answered_cause,
    failure_cause,
    model_failure,
    nested_too_deep,
    observer_failure,
    raise_sub_run_misuse,
    raise_tool_error,
    raised_from,
    run_failure,
    tool_failure,
)
from toolfold.runtime.drive._handoff import (
    Handover,
    at_limit,
    handed_off,
    handover_of,
    settle_finished,
    settle_outcomes,
)
from toolfold.runtime.drive._open import ToolSource
from toolfold.runtime.drive._output import OutputRejected as _Rejected
from toolfold.runtime.drive._output import OutputSchema, name_the_output_type, rejection
from toolfold.runtime.drive._relay import Relay
from toolfold.runtime.drive._trace import tracing
from toolfold.toolkit._context import RunContext
from toolfold.toolkit._results import describe_exception
from toolfold.toolkit._tool import Tool, advise_on_parameter_names, reads_context

OnToolError = Literal["return", "raise"]


# Records the loop builds for every step, from values of their final types (see `builder`).
_responded = builder(ModelResponded)
_invocation = builder(ToolInvocation)

# Phases in which the current step still has calls without a result.
_STEP_OPEN = frozenset({"running_tools", "awaiting_approval", "awaiting_tool_results"})


class Answered(NamedTuple):
    """The waiting step's calls a resume's answers settled (denied, or given results):
    their results with outcomes, and the step when the answers closed it."""

    results: tuple[tuple[Any, Any], ...]
    step: Step | None


def answered(state: RunState, waiting: frozenset[str]) -> Answered | None:
    """What answers did to the calls ``waiting`` before them: the calls now settled, and
    the step if no call of it is left open; None when they settled none (approved calls
    run in the loop, which shows them)."""
    results = tuple(
        (c.result, c.outcome or "error")
        for c in state.calls
        if c.result is not None and c.call.id in waiting
    )
    if not results:
        return None
    closed = not state.pending_calls and state.phase not in _STEP_OPEN
    return Answered(results, _current_step(state) if closed else None)


@attrs.frozen(kw_only=True)
class Live:
    """The live half of a run: what cannot be serialized with the state.

    Attributes:
        model: The model to call.
        tools: The tools by name.
        output: How to read a structured answer, or None.
        deps: User dependencies handed to tools in their `RunContext`.
        on_event: Called with every event reduced into the state.
        on_step: Called with every completed step.
        on_tool_error: ``"return"`` (the model sees the error) or ``"raise"``.
        max_concurrency: Calls of one step allowed to run at once.
        stop_when: Stop predicates that are live callables.
        first_stop_when: The live conditions of the agent that began the run
            (or the resume), which bound the whole turn across handoffs beside
            each agent's own (see `Agent._takes_over`), or None when no
            handoff happened since: ``stop_when`` are them.
        announce_start: The run has just started: ``on_event`` sees its
            `RunStarted` first.
        name: The agent's name, for traces (None when it has none).
        handoffs: The agents this one may hand the run to, by the name of
            the tool that does it (``transfer_to_<name>``).
        opened: Tool sources already open for the run (its first agent's,
            opened around it) with the tools they listed: a handoff back to
            an agent holding them reuses them.
        answered: What the resume's own answers did to the waiting step, which
            no loop showed: shown first (see `answered`).
        from_waiting: The run is a resume of a tree that waited for answers
            (or a sub-run such a resume continues): its tool rounds tell the
            sub-runs they continue so (see `resumed_round`).
        definitions: The tool definitions each model request carries in place
            of those stored in the run's configuration, or None to send the
            stored ones: a resume's live tools, when one of the run's tools
            changed its description or schema since the run started (the
            live tool checks the calls, so the model must see its schema).
            Never stored: a request is not part of the state. A handoff
            makes a live half without it (the next agent's tools are its
            configuration's).
    """

    model: Model
    tools: Mapping[str, Tool[..., Any]]
    output: OutputSchema | None = None
    deps: Any = None
    on_event: Callable[[Event], object] | None = None
    on_step: Callable[[Step], object] | None = None
    on_tool_error: OnToolError = "return"
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    stop_when: tuple[StopPredicate, ...] = ()
    first_stop_when: tuple[StopPredicate, ...] | None = None
    announce_start: bool = False
    name: str | None = None
    handoffs: Mapping[str, Handover] = attrs.field(factory=dict)
    opened: tuple[tuple[tuple[ToolSource, ...], Sequence[Tool[..., Any]]], ...] = ()
    answered: Answered | None = None
    from_waiting: bool = False
    definitions: tuple[ToolDefinition, ...] | None = None
    # What masks the model's credentials (a provider's model's `secret_masker`), or None:
    # a tool's result or error text that quotes them is masked before the state holds it.
    mask: Callable[[str], str] | None = attrs.field(
        init=False,
        default=attrs.Factory(lambda self: mask_of(self.model), takes_self=True),
    )


def mask_of(model: object) -> Callable[[str], str] | None:
    """``model.secret_masker()``, or None when it has none (a test model, a user's)."""
    masker = getattr(model, "secret_masker", None)
    return masker() if callable(masker) else None


def masked_result(
    mask: Callable[[str], str], content: str, parts: tuple[ResultContent, ...]
) -> tuple[str, tuple[ResultContent, ...]] | None:
    """A tool result's ``content`` and ``parts`` with ``mask`` applied to its text (the
    content, each `TextPart`'s text: the two copies of it agree), or None when neither
    holds anything to mask."""
    masked = mask(content)
    changed = masked is not content
    if parts:
        given = parts
        parts = tuple(masked_part(mask, part) for part in parts)
        changed = changed or any(a is not b for a, b in zip(parts, given, strict=True))
    return (masked, parts) if changed else None


def masked_part(mask: Callable[[str], str], part: ResultContent) -> ResultContent:
    """``part`` with ``mask`` applied to its text, if it is a `TextPart` (the same part
    when there is nothing to mask)."""
    if not isinstance(part, TextPart):
        return part
    text = mask(part.text)
    return part if text is part.text else attrs.evolve(part, text=text)


def _masked(live: Live, outcomes: Sequence[ToolOutcome]) -> Sequence[ToolOutcome]:
    """``outcomes`` with the run's model credentials masked in their text (a tool that
    quotes the key it shares with the model, in a result or an error): the same
    outcomes when there is nothing to mask (`Live.mask`)."""
    return masked_outcomes(live.mask, outcomes)


def masked_outcomes(
    mask: Callable[[str], str] | None, outcomes: Sequence[ToolOutcome]
) -> Sequence[ToolOutcome]:
    """``outcomes`` with ``mask`` applied to their text (`masked_result`): the same
    outcomes when it is None or finds nothing."""
    if mask is None:
        return outcomes
    masked: list[ToolOutcome] | None = None
    for at, outcome in enumerate(outcomes):
        found = masked_result(mask, outcome.content, outcome.parts)
        if found is not None:
            if masked is None:
                masked = list(outcomes)
            masked[at] = outcome._replace(content=found[0], parts=found[1])
    return outcomes if masked is None else masked


def _masked_finished(live: Live, finished: dict[int, ToolOutcome] | None) -> None:
    """`_masked` for the calls of an interrupted round that had ended, in place."""
    if finished and live.mask is not None:
        finished.update(zip(finished, _masked(live, tuple(finished.values())), strict=True))


# Whether the tool round under way is one of a run resumed from waiting for answers
# (`Live.from_waiting`): set by the shells for the round only, read by the resume of a
# sub-run one of its calls continues (`toolfold.runtime._resume.caller_answered`).
FROM_WAITING: ContextVar[bool] = ContextVar("toolfold_resumed_from_waiting", default=False)

_NOT_RESUMED = nullcontext()


def resumed_round(live: Live) -> AbstractContextManager[object]:
    """What a shell runs a tool round of ``live``'s run in: `FROM_WAITING` set for the round
    (and reset when it ends) if the run was resumed from waiting, else nothing.

    Carried by the run's live half rather than set by the resume in its
    caller's context, where it outlived the run and the next resume begun
    there (another stream made before this one is iterated) replaced it.
    """
    return _set_true(FROM_WAITING) if live.from_waiting else _NOT_RESUMED


@contextmanager
def _set_true(var: ContextVar[bool]) -> Iterator[None]:
    token = var.set(True)
    try:
        yield
    finally:
        var.reset(token)


class CutAnswer(NamedTuple):
    """What a shell gives the loop for a model's stream that failed (``error``) after the
    provider reported its ``usage``: the call was billed, so the error's state counts it."""

    error: Exception
    usage: Usage


def billed_usage(exc: BaseException) -> Usage | None:
    """The usage a provider reported for the answer ``exc`` ended abnormally or that
    toolfold could not read (`ProviderError.usage`: a `ProviderFinishError` for
    ``pause_turn``, ``MALFORMED_FUNCTION_CALL``...; a Responses ``response.failed``; a
    `MalformedResponseError`), or None: that answer was billed, so the error's state
    counts it as a cut stream's (`with_cut_usage`)."""
    usage = exc.usage if isinstance(exc, ProviderError) else None
    return usage if type(usage) is Usage else None


def with_cut_usage(state: RunState, usage: Usage) -> RunState:
    """``state`` (waiting for its model) counting the usage a failed stream reported, as an
    `AttemptDropped` (what a resume counts once, as `token_budget` does): the answer is
    dropped, the model is asked again on resume. Kept as it was should the reducer refuse
    the event (not expected): the model's error stays the one raised. Not shown to
    ``on_event`` here: the caller shows it where the run fails (an interruption's state,
    as its committed results, is not shown)."""
    usage = countable(usage)
    if usage == NO_USAGE:
        return state
    try:
        return reduce(state, AttemptDropped(usage=usage))
    except InvalidEventError:
        return state


# Where an interruption (Ctrl-C, a cancellation) that cut a model's stream carries, to the
# loop it is thrown into, the usage the stream had reported (see `note_cut_usage`).
_CUT_USAGE = "_toolfold_cut_usage"


def note_cut_usage(exc: BaseException, usage: Usage | None) -> None:
    """Give ``exc``, an interruption that cut a model's stream after the provider reported
    ``usage``, that usage for the run's loop: the call was billed, so the interruption's
    state counts it (`with_cut_usage`), as an error's does (`CutAnswer`)."""
    if usage is not None and not isinstance(exc, Exception):
        with suppress(AttributeError, TypeError):  # (an exception class without a __dict__)
            setattr(exc, _CUT_USAGE, usage)


def _taken_cut_usage(exc: BaseException) -> Usage:
    """The usage `note_cut_usage` gave ``exc``, taken off it: one loop counts it, once."""
    usage = getattr(exc, _CUT_USAGE, None)
    if usage is None:
        return NO_USAGE
    with suppress(AttributeError):
        delattr(exc, _CUT_USAGE)
    return usage if isinstance(usage, Usage) else NO_USAGE


class Ended(NamedTuple):
    """How a loop ends: the final (or suspended) state, and the live half of the agent running it.

    ``built``: the output the run accepted, as its answer's type built it, with the
    plain value the state holds for it (``(plain, value)``: `finish` gives the
    value when the state's output is that very ``plain``), or None (no answer
    accepted by this loop: a state it resumed had finished already).
    """

    state: RunState
    live: Live
    built: tuple[Any, Any] | None = None


class _SwitchOp(NamedTuple):
    """The run continues with another agent: shells perform ops with its live half."""

    live: Live


class _OpenOp(NamedTuple):
    """Open these tool sources until the run ends; the shell answers with their tools."""

    sources: tuple[ToolSource, ...]


class _RunToolsOp(NamedTuple):
    jobs: tuple[ToolJob, ...]
    relay: Relay | None = None  # a streaming run's: where sub-runs send their events
    # A round of several calls: where the shell puts, when the round is
    # interrupted, the outcomes of the calls that had ended (by index).
    finished: dict[int, ToolOutcome] | None = None


class _NoticeOp(NamedTuple):
    event: RunStreamEvent


class _WaitOp(NamedTuple):
    """Wait ``seconds`` before the next round: a retried workflow step's provider error
    asked for it (`round_wait`); shells wait with `_step_retry`'s sleeps."""

    seconds: float


class _SettledOp(NamedTuple):
    """Calls settled without the executor (an unknown tool, arguments that are no JSON
    object, a denial, a result the caller gave), for a trace to record; yielded only
    while one is installed."""

    calls: tuple[CallState, ...]


def _settled(calls: Iterable[CallState]) -> _SettledOp | None:
    """The op for those of ``calls`` that have their result, or None when none has."""
    done = tuple(c for c in calls if c.result is not None)
    return _SettledOp(done) if done else None


# The model op is the core's own `CallModel` effect: no wrapper to build.
_Op = Union[CallModel, _RunToolsOp, _NoticeOp, _SwitchOp, _OpenOp, _SettledOp, _WaitOp]  # noqa: UP007
Loop = Generator[_Op, Any, Ended]
_Part = Generator[_Op, Any, RunState]  # a piece of the loop: the state after it


def run_loop(live: Live, state: RunState, *, notify: bool = False) -> Loop:
    """Drive ``state`` until the run finishes or waits for the caller.

    Yields the I/O to perform (and, with ``notify``, the events a streaming
    caller shows); returns the final (or suspended) state with the live half
    of the agent that runs it then (another one after a handoff).

    Raises:
        RunError: The run failed; ``.state`` is the last consistent state.
    """
    reported = state.step if not state.pending_calls else state.step - 1
    built: tuple[Any, Any] | None = None  # the output an accepted answer built (`Ended.built`)
    # The exception of the call whose tool used up its retries, once a round failed the
    # run (`failure_cause`): its error is raised from it. Held only from then on.
    failed_by: list[BaseException] = []
    # Sources opened for this run, by identity, with their tools: a handoff cycle
    # reaching an agent again reuses them (the shell closes them when the run ends).
    listings: dict[tuple[int, ...], Sequence[Tool[..., Any]]] = {}
    for sources, its_tools in live.opened:
        listings[_identity(sources)] = its_tools
    # The call that runs this run as a sub-run on a stream's round thread notes where it
    # stands before each model call and round of calls (see `Standing`); else None.
    standing = STANDING.get()
    if standing is not None and not standing.is_of(state):
        standing = None
    if live.announce_start and live.on_event is not None and len(state.log) == 1:
        _observe(live.on_event, state.log[0], state, "on_event")
    if live.answered is not None:  # a resume's denials and results: shown as a step's are
        try:
            if tracing():  # (their spans: no executor ran them)
                ids = {result.call_id for result, _ in live.answered.results}
                answered_op = _settled(c for c in state.calls if c.call.id in ids)
                if answered_op is not None:
                    yield answered_op
            if notify:
                for result, outcome in live.answered.results:
                    yield _NoticeOp(ToolResultEvent(result, outcome))
            closed = live.answered.step  # ...and the step they closed
            if closed is not None:
                if live.on_step is not None:
                    _observe(live.on_step, closed, state, "on_step")
                if notify:
                    yield _NoticeOp(StepEndEvent(closed))
        except BaseException as exc:  # Ctrl-C thrown in by the stream's reader (see below)
            interrupted(exc, state)
            raise
        live = attrs.evolve(live, answered=None)  # (once: a handoff keeps `live`)
    while True:
        effect = next_effect(state)
        if isinstance(effect, CallModel):
            if live.handoffs:
                handover = handover_of(state, live.handoffs)
                if handover is not None:
                    live, state = yield from _handing_over(live, state, handover, listings)
                    continue
            # The model call, in the loop itself: no generator of its own to make
            # and resume through for every step (unless a live stop condition holds first).
            stop = _live_stop(live, state) if live.stop_when and state.turn_steps > 0 else None
            if stop is not None:
                state = apply_event(live, state, stop)
            else:
                if live.definitions is not None:  # a resume's live tools (see `Live`)
                    effect = _with_tools(effect, live.definitions)
                # A workflow's planner with its tree budget spent may still answer (its
                # decision costs nothing) but starts no step (`steps_stop`): its step is
                # shown started once the decision is known, so a stop shows none.
                spent = steps_stop(state) if state.config.stop_when else None
                if notify and spent is None:
                    try:
                        yield _NoticeOp(StepStartEvent(effect.step))
                    except BaseException as exc:  # (Ctrl-C thrown in by the stream's reader)
                        interrupted(exc, state)
                        raise
                if standing is not None:
                    standing.at = Stand(live, state, None)
                before = state
                try:
                    response = yield effect
                    if type(response) is CutAnswer:  # a stream that failed, its usage billed
                        state = with_cut_usage(state, response.usage)
                        raise response.error
                except Exception as exc:
                    name_the_output_type(exc, live.output)
                    advise_on_parameter_names(exc, live.tools)
                    billed = billed_usage(exc) if state is before else None
                    if billed is not None:  # an answer that ended abnormally, whole
                        state = with_cut_usage(state, billed)
                    counted = state is not before  # (the cut stream's usage, an AttemptDropped)
                    failure = model_failure(exc, state, effect.step, counted=counted)
                    try:
                        if failure is exc:
                            raise  # "raise exc from exc" would make the error its own cause
                        raise failure from raised_from(exc, failure)
                    except Exception:
                        if counted:  # shown as every event is, once raised (see `show_failing`)
                            show_failing(live, state.log[-1], state)
                        raise
                except BaseException as exc:  # cancelled while the model answers: the run before
                    # (counting what a cut stream had reported: billed, asked again on resume)
                    interrupted(exc, with_cut_usage(state, _taken_cut_usage(exc)))
                    raise
                # A call the provider cut never runs, whichever model answered, whole
                # or streamed: dropped once here, where the answer becomes the event
                # the log records (a logged answer replays as it ran).
                response = unique_call_ids(without_cut_calls(response))
                if spent is not None:
                    if response.tool_calls:  # steps to start with the budget spent: stop...
                        # ...unless the workflow has an answer by then (`Workflow.spent_answer`).
                        spent_response = getattr(live.model, "spent_response", None)
                        instead = (
                            spent_response(effect.request.messages)
                            if spent_response is not None
                            else None
                        )
                        if instead is None:
                            state = apply_event(live, state, spent)
                            continue
                        response = instead
                    if notify:  # the final answer: its step after all
                        try:
                            yield _NoticeOp(StepStartEvent(effect.step))
                        except BaseException as exc:  # (Ctrl-C thrown in by the stream's reader)
                            interrupted(exc, state)
                            raise
                dispositions = _dispositions(live, state, response)
                event = _responded(response, dispositions)
                if (
                    not notify
                    and live.on_event is None
                    and live.on_tool_error == "return"
                    and not (live.stop_when and has_tree_budget(live.stop_when))
                ):
                    # Nobody watches the state between the response and the results:
                    # the step runs its calls from an `OpenStep` and builds one state.
                    try:
                        opened = open_step(state, event)
                    except InvalidEventError:
                        _check_usage(state, response, effect.step)
                        raise
                    if tracing():  # the calls the core answered at once: their spans
                        at_once = _settled(
                            opened.changes["calls"]
                            if isinstance(opened, OpenStep)
                            else opened.calls
                        )
                        if at_once is not None:
                            yield at_once
                    if not isinstance(opened, OpenStep):
                        state = opened
                    else:  # `_run_tools` for an `OpenStep`, here: no generator of its own
                        changes = opened.changes
                        run_id, number = state.run_id, changes["step"]
                        keyed = number + earlier_steps(state)  # (as `next_effect` keys them)
                        messages = changes["conversation"]
                        # (Loops and `map`, not comprehensions: no function and frame to make a step.)
                        to_run: list[ToolJob] = []
                        for c in changes["calls"]:  # (a running step has calls: ``c`` is bound)
                            if c.status == "to_run":
                                to_run.append(
                                    _job_in(
                                        live,
                                        run_id,
                                        messages,
                                        _invocation(
                                            c.call,
                                            c.index,
                                            number,
                                            f"{run_id}:{keyed}:{c.index}",
                                            c.child,
                                        ),
                                    )
                                )
                        jobs = tuple(to_run)
                        finished = _round_record(jobs)
                        # (No `Standing` to note here: only a stream's sub-run has one, and
                        # it streams: ``notify``.)
                        try:
                            outcomes: Sequence[ToolOutcome] = yield new_tuple(
                                _RunToolsOp, (jobs, None, finished)
                            )
                        except BaseException as exc:
                            # (not the shell's own error; a tool unfit at its call is not either)
                            if not isinstance(exc, Exception) or takes_state(exc):
                                _masked_finished(live, finished)
                                if finished and live.handoffs:
                                    settle_finished(changes["calls"], finished, live.handoffs)
                                interrupted(exc, opened.state, finished)
                            raise
                        outcomes = _masked(live, outcomes)
                        if _raised(outcomes):  # (a sub-run's misuse raised on, prefixed)
                            commit = functools.partial(_committed, live)
                            raise_sub_run_misuse(opened.state, outcomes, live.tools, commit)
                        if live.handoffs:  # the step's transfer calls that do not hand over
                            outcomes = settle_outcomes(changes["calls"], outcomes, live.handoffs)
                        state = opened.close(list(map(returned, outcomes)))
                        if state.error is not None:
                            _note_cause(failed_by, state, outcomes)
                        # The open step is not held across the next step's awaits (nor
                        # the state before it: see `drive_async`); what stays bound (the
                        # response, its event and dispositions) is in the new state's log.
                        del opened, changes, messages, c, to_run, jobs, finished, outcomes
                else:
                    try:
                        state = apply_event(live, state, event)
                    except InvalidEventError:
                        _check_usage(state, response, effect.step)
                        raise
                    if standing is not None and state.phase == "running_tools":
                        # Its reply kept from here on, not only once its calls run (see below).
                        standing.at = Stand(live, state, None)
                    if tracing():  # the calls the core answered at once: their spans
                        at_once = _settled(state.calls)
                        if at_once is not None:
                            yield at_once
                    if notify:
                        try:
                            for call, disposition in zip(
                                response.tool_calls, dispositions, strict=True
                            ):
                                yield _NoticeOp(ToolCallEvent(call, disposition))
                            for settled in state.calls:  # calls the core answered at once
                                if settled.result is not None:
                                    yield _NoticeOp(
                                        ToolResultEvent(settled.result, settled.outcome or "error")
                                    )
                        except BaseException as exc:  # (Ctrl-C thrown in by the stream's reader)
                            interrupted(exc, state)
                            raise
        elif isinstance(effect, RunTools):
            state = yield from _run_tools(live, state, effect, notify, standing, failed_by)
        elif isinstance(effect, ValidateOutput):
            state, built = _validate(live, state, effect)
            rejected = state.log.last() if notify else None
            if rejected is not None and rejected.kind == "output_rejected":
                try:  # (after its step_end; before the error, when retries are used up)
                    yield _NoticeOp(OutputInvalidEvent(state.step, rejected.message))
                except BaseException as exc:  # Ctrl-C thrown in by the stream's reader
                    interrupted(exc, state)
                    raise
        else:  # Finish, or AwaitApproval / AwaitToolResults: the caller decides
            if live.handoffs and at_limit(state):
                # The step that reached max_steps called a transfer tool: its tools ran,
                # so the run is handed over before it stops, and the stopped run keeps
                # the agent it went to (as a new turn or more steps find it).
                handover = handover_of(state, live.handoffs)
                if handover is not None:
                    live, state = yield from _handing_over(live, state, handover, listings)
                    continue
            # (`Ended(...)` without its Python __new__.)
            return new_tuple(Ended, (_finish(state, effect, failed_by), live, built))
        if reported < state.step and state.phase not in _STEP_OPEN:
            reported = state.step
            if live.on_step is not None or notify:
                yield from _step_end(live, state, notify)


def _with_tools(effect: CallModel, definitions: tuple[ToolDefinition, ...]) -> CallModel:
    """``effect`` with its request carrying ``definitions`` as its tools."""
    return attrs.evolve(effect, request=attrs.evolve(effect.request, tools=definitions))


def _identity(sources: tuple[ToolSource, ...]) -> tuple[int, ...]:
    return tuple(map(id, sources))


def _handing_over(
    live: Live,
    state: RunState,
    handover: Handover,
    listings: dict[tuple[int, ...], Sequence[Tool[..., Any]]],
) -> Generator[_Op, Any, tuple[Live, RunState]]:
    """The live half and state after ``handover`` (its sources opened first), the shell told."""
    listed = (yield from _open(handover, state, listings)) if handover.sources else ()
    live, state = _hand_off(live, state, handover, listed)
    yield _SwitchOp(live)
    return live, state


def _open(
    handover: Handover, state: RunState, listings: dict[tuple[int, ...], Sequence[Tool[..., Any]]]
) -> Generator[_Op, Any, Sequence[Tool[..., Any]]]:
    """The handoff target's sources opened (by the shell, until the run ends), their tools.

    Sources the run opened before (an earlier handoff to the same agent) are
    not opened again: their tools are listed once per run.
    """
    key = _identity(handover.sources)
    if key in listings:
        return listings[key]
    try:
        listed: Sequence[Tool[..., Any]] = yield _OpenOp(handover.sources)
    except BaseException as exc:
        if not isinstance(exc, Exception):
            interrupted(exc, state)
            raise
        raise RunError(
            f"the tool sources of agent {handover.agent!r} could not be opened for the "
            f"handoff: {describe_exception(exc)}; the error's state is the run before "
            "the handoff, resume it to try again",
            state,
        ) from exc
    listings[key] = listed
    return listed


def _hand_off(
    live: Live, state: RunState, handover: Handover, listed: Sequence[Tool[..., Any]]
) -> tuple[Live, RunState]:
    try:
        config, new_live = handover.take_over(live, listed)
    except Exception as exc:  # e.g. a source listing a tool named like one of the agent's
        raise RunError(
            f"agent {handover.agent!r} could not take the run over: "
            f"{describe_exception(exc)}; the error's state is the run before the handoff, resume it to try again",
            state,
        ) from exc
    event = handed_off(state, handover.agent, config, handover.input_filter, live.handoffs)
    return new_live, apply_event(new_live, state, event)


def _live_stop(live: Live, state: RunState) -> StopRequested | None:
    try:
        return stop_event(state, live.stop_when)
    except Exception as exc:
        raise observer_failure("stop_when condition", exc, state, "stop_when") from exc


def _run_tools(
    live: Live,
    state: RunState,
    effect: RunTools,
    notify: bool,
    standing: Standing | None = None,
    failed_by: list[BaseException] | None = None,
) -> _Part:
    """Run the step's calls and report each outcome (``standing``, ``failed_by``: see `run_loop`)."""
    relay = Relay() if notify else None
    jobs = tuple(
        [
            _job(live, state, invocation, None if relay is None else relay.sender(invocation.call))
            for invocation in effect.calls
        ]
    )
    finished = _round_record(jobs)
    if standing is not None:
        standing.at = Stand(live, state, finished)
    try:
        outcomes: Sequence[ToolOutcome] = yield _RunToolsOp(jobs, relay, finished)
    except BaseException as exc:
        _round_interrupted(exc, live, state, finished)
        raise
    outcomes = _masked(live, outcomes)
    if relay is not None:
        try:
            for item in relay.held:  # sub-runs' events no shell showed as they came
                yield _NoticeOp(item)
        except BaseException as exc:  # Ctrl-C thrown in by the stream's reader: the round ended
            _round_interrupted(exc, live, state, dict(enumerate(outcomes)))
            raise
    commit = functools.partial(_committed, live)
    raising = live.on_tool_error == "raise"
    show = functools.partial(show_failing, live)
    raise_sub_run_misuse(state, outcomes, live.tools, commit, raising, live.stop_when, show)
    if raising:
        raise_tool_error(
            state,
            outcomes,
            live.stop_when,
            live.tools,
            commit,
            show,
        )
    if live.handoffs:  # the step's transfer calls that do not hand over say so
        outcomes = settle_outcomes(state.calls, outcomes, live.handoffs)
    events = list(map(returned, outcomes))
    # Every call of the round has run: all are in the state before ``on_event``
    # sees the first, so an observer that raises leaves none to run again.
    for event in events:
        state = reduce(state, event)
    raised = _raised(outcomes)
    if raised:  # a retried workflow step's error that is not asked again fails it
        failure = not_retried(state, outcomes, live.tools)
        if failure is not None:
            state = reduce(state, failure)
    if state.error is not None and failed_by is not None:
        _note_cause(failed_by, state, outcomes)
    try:
        for outcome, event in zip(outcomes, events, strict=True):
            show_event(live, event, state)
            if notify and event.kind == "tool_returned":
                yield _NoticeOp(ToolResultEvent(outcome.part, outcome.outcome))
        if raised and state.phase not in _NO_NEXT_ROUND:
            wait = round_wait(outcomes, live.tools)  # (a retried step's, outside its attempt)
            if wait:
                yield _WaitOp(wait)
    except BaseException as exc:  # Ctrl-C thrown in at a result shown: the round is in the state
        interrupted(exc, state)
        raise
    return state


# The phases after a round in which the run makes no next round now (it ended, or it stops
# for its caller's answers): a retried step's wait waits for the round that runs it again.
_NO_NEXT_ROUND = ("finished", "failed", *WAITING_PHASES)


def _raised(outcomes: Sequence[ToolOutcome]) -> bool:
    """Whether a call of the round raised (its outcome holds the exception)."""
    return any(outcome.exception is not None for outcome in outcomes)


def _committed(live: Live, state: RunState, ended: dict[int, ToolOutcome]) -> RunState:
    """``state`` (where a round began) with the outcomes of its calls that had ended (by index)."""
    if live.handoffs:
        settle_finished(state.calls, ended, live.handoffs)
    for index in sorted(ended):
        state = reduce(state, returned(ended[index]))
    return state


def _round_interrupted(
    exc: BaseException, live: Live, state: RunState, finished: dict[int, ToolOutcome] | None
) -> None:
    """Give ``exc``, which interrupted the round of calls that began at ``state``, the state
    with the calls that had ended (``finished``) committed (see `interrupted`)."""
    _masked_finished(live, finished)
    if finished and live.handoffs:
        settle_finished(state.calls, finished, live.handoffs)
    if finished and live.on_tool_error == "raise":
        # A failed call raises when its round ends: kept out of the state, it
        # runs again on resume and raises there, as it would have.
        for index, outcome in list(finished.items()):
            failure = tool_failure(
                state,
                outcome.tool_name,
                outcome.outcome,
                outcome.content,
                outcome.child,
                live.stop_when,
                who=agent_run_by(live.tools.get(outcome.tool_name)),
            )
            if failure is not None:
                del finished[index]
    interrupted(exc, state, finished)


def kept_standing(standing: Standing) -> ToolOutcome | None:
    """What Ctrl-C landing in the sub-run of ``standing``'s call where it stands would keep
    of the call (see `kept_sub_run`): read from another thread while the sub-run's goes on
    (see `Standing`), or None when it noted nothing to keep.

    Its round's calls that had ended are kept, and its round's own sub-runs where they
    stand, as an interruption of its round keeps them.
    """
    at = standing.at
    if at is None:
        return None
    # Copies (one C call each: no write of the other thread's lands midway), read once.
    finished = None if at.finished is None else dict(at.finished)
    calls = standing.calls
    if finished is not None and calls is not None and calls[0] is at.finished:
        # What the round's thread kept (not yet copied to the record: its caller's thread,
        # waiting for it, copies it once it ends), such as a sub-run Ctrl-C stopped.
        finished.update(dict(calls[2]))
        for index, inner in list(calls[1].items()):
            if index not in finished:
                kept = kept_standing(inner)
                if kept is not None:
                    finished[index] = kept
    exc = KeyboardInterrupt()
    _round_interrupted(exc, at.live, at.state, finished)
    kept_here: dict[int, ToolOutcome] = {}
    kept_sub_run(kept_here, 0, standing.call_id, standing.name, exc, standing.run_id)
    return kept_here.get(0)


def _round_record(jobs: Sequence[ToolJob]) -> dict[int, ToolOutcome] | None:
    """Where the shell puts what a round had done when it is interrupted: the outcomes of
    the calls that had ended, and the state of sub-runs stopped midway (by index).

    None for a lone call that runs no sub-run and is no async tool: it has nothing to
    keep. (An async tool may catch the run's cancellation and return: the run ends
    cancelled all the same, its result kept, see `_cancels`. So may what a
    ``blocking=False`` sync tool returns to await: on Python 3.10 that ends the run
    before the round returns, and is kept here; 3.11+ finds it once the round returned.)
    """
    if len(jobs) > 1:
        return {}
    if jobs:
        tool = jobs[0].tool
        if tool is not None and (
            tool.is_async or forwards(jobs[0]) or (not COUNTS_CANCELS and not tool.blocking)
        ):
            return {}
    return None


def is_interruption(exc: BaseException) -> bool:
    """Whether ``exc`` interrupts a run, which then hands it its state (`interrupted`).

    Any exception but an `Exception` (an error carries its own state) or a
    `GeneratorExit` thrown in by a caller that stops iterating a stream (it
    abandons the run): one a tool, a step or a hook raised is marked so by
    `stamp` and interrupts the run as a `SystemExit` would.
    """
    if isinstance(exc, Exception):
        return False
    return not isinstance(exc, GeneratorExit) or was_raised_in_run(exc)


def is_unfit_tool(exc: BaseException) -> bool:
    """Whether ``exc`` is a `ToolDefinitionError` a call raised without a state: a tool
    found unfit only at its call (a `Tool` subclass's own checker), which is no error
    of the run's. The shell throws it into the run's loop, as an interruption, so that
    it gets the state to resume from once the tool is fixed (`interrupted`): the paid
    answer and the results of the round's calls that had ended are kept."""
    return isinstance(exc, ToolDefinitionError) and getattr(exc, "state", None) is None


def takes_state(exc: BaseException) -> bool:
    """Whether ``exc``, an error, is thrown into the run's loop as an interruption is, to
    get the state it reached (`interrupted`): a tool unfit at its call (`is_unfit_tool`),
    any error a tool's ``validate_arguments`` raised without a state (`checker_failed`:
    a bug of its check, not the call's failure), or a `RecursionError` without a state in
    blocking sub-runs nested too deep (`nested_too_deep`: raised by the run's own round).
    The error keeps the paid answer; the caller of a sub-run that raised it (`as_tool`'s
    call) keeps that sub-run, and with it the model calls it was billed for, on the
    call's error result (`failed_sub_run`)."""
    if is_unfit_tool(exc):
        return True
    if getattr(exc, "state", None) is not None:
        return False
    return checker_failed(exc) or (isinstance(exc, RecursionError) and nested_too_deep())


def interrupted(
    exc: BaseException, state: RunState, finished: Mapping[int, ToolOutcome] | None = None
) -> None:
    """Give an interruption (a cancellation, Ctrl-C) the state to resume from, as ``exc.state``.

    ``state`` is the run where the interrupted I/O began; ``finished`` the
    outcomes of that round's calls that had ended, which are committed, so
    that resuming runs only the calls that had not. The outermost run sets
    it last: a sub-run's state is replaced by its caller's. Errors
    (`Exception`) carry their own, but for a tool found unfit at its call, a
    call's check that raised, and a sub-run nested too deep (`takes_state`),
    and a generator's exit is no interruption unless the run's own code
    raised it (`is_interruption`).
    """
    if not is_interruption(exc) and not takes_state(exc):
        return
    state = _with_finished(state, finished)
    exc.state = state  # type: ignore[attr-defined]
    if isinstance(exc, GeneratorExit):
        thrown = thrown_exit()
        if thrown is not None:
            thrown.state = state  # type: ignore[attr-defined]


def _with_finished(state: RunState, finished: Mapping[int, ToolOutcome] | None) -> RunState:
    """``state`` with the outcomes of the round's calls that had ended committed (by index)."""
    base = state
    try:
        for index in sorted(finished or ()):
            assert finished is not None
            state = reduce(state, returned(finished[index]))
    except Exception:  # (not expected) the exception raised must stay the one raised
        return base
    return state


def _validate(
    live: Live, state: RunState, effect: ValidateOutput
) -> tuple[RunState, tuple[Any, Any] | None]:
    """Check the final answer against the output type: the state after, and the
    output built, when accepted (see `Ended.built`)."""
    output = live.output
    assert output is not None, "a run with an output spec needs its output type"
    try:
        value, plain = output.parse(effect.text)
    except _Rejected as rejected:
        return apply_event(live, state, rejection(state, rejected.message)), None
    # Decoded from the answer's text, its depth checked: JSON a saved state holds, frozen
    # without the second walk the event's check would give a mapping or a list.
    state = apply_event(live, state, OutputAccepted(freeze(plain)))
    # The value built once: building the user's class again from the plain data
    # ran its __attrs_post_init__ and validators twice (and a second verdict may differ).
    return state, ((state.output, value) if output.parse_builds else None)


def _note_cause(
    failed_by: list[BaseException], state: RunState, outcomes: Sequence[ToolOutcome]
) -> None:
    """Keep in ``failed_by`` the exception of the call that failed ``state``'s run, if one
    of ``outcomes`` (its last round) did (`failure_cause`)."""
    cause = failure_cause(state, outcomes)
    if cause is not None:
        failed_by[:] = [cause]


def _finish(state: RunState, effect: Effect, failed_by: Sequence[BaseException] = ()) -> RunState:
    """The state to return to the caller, or the error of a failed run (raised from the
    exception of the call that failed it, in ``failed_by``: see `failure_cause`)."""
    if isinstance(effect, Finish) and effect.error is not None:
        if failed_by:
            raise run_failure(state) from failed_by[0]
        # A call the core answered itself (its arguments did not read) holds no exception.
        cause = answered_cause(state)
        if cause is not None:
            raise run_failure(state) from cause
        raise run_failure(state)
    return state


def _step_end(live: Live, state: RunState, notify: bool) -> Generator[_Op, Any, None]:
    """A step is complete: tell ``on_step`` and a streaming caller."""
    step = _current_step(state)
    if live.on_step is not None:
        _observe(live.on_step, step, state, "on_step")
    if notify:
        try:
            yield _NoticeOp(StepEndEvent(step))
        except BaseException as exc:  # Ctrl-C thrown in by the stream's reader: the step is done
            interrupted(exc, state)
            raise


def apply_event(live: Live, state: RunState, event: Event) -> RunState:
    """``state`` after ``event``, shown to the ``on_event`` observer (a failing one raises `RunError`)."""
    new = reduce(state, event)
    show_event(live, event, new)
    return new


def show_event(live: Live, event: Event, state: RunState) -> None:
    """Show ``event``, already reduced into ``state``, to the ``on_event`` observer."""
    if live.on_event is not None:
        _observe(live.on_event, event, state, "on_event")


def show_failing(live: Live, event: Event, state: RunState) -> None:
    """Show ``event``, reduced into ``state``, the state of the error the run is raising
    (called in its ``except`` handler), to the ``on_event`` observer.

    An observer that raises stops the run with its `RunError` (`show_event`),
    that error's context the observer's exception, whose context is the run's
    error. Ctrl-C or a cancellation landing in the observer is raised instead,
    with ``state`` to resume from (`interrupted`): the state the error held.
    """
    try:
        show_event(live, event, state)
    except BaseException as exc:
        interrupted(exc, state)
        raise


def _observe(observer: Callable[[Any], object], value: Any, state: RunState, name: str) -> None:
    try:
        observer(value)
    except Exception as exc:
        raise observer_failure(f"{name} observer", exc, state, "observer") from exc


def _check_usage(state: RunState, response: ModelResponse, step: int) -> None:
    """Refuse, as the model's fault, an answer whose usage the run cannot add up.

    Called when the reducer refused the answer (`InvalidEventError`), so that a
    usage that would sum to no finite count with the run's (float counts past
    1.8e308, an int too large for a float count, an int of more than 4300 digits,
    which JSON text cannot hold) is a `MalformedResponseError`
    naming the count, with the run before the answer as its state, not a bare
    refusal. (Nothing is checked on the way of an answer the reducer takes.)
    """
    usage = response.usage
    if type(usage) is not Usage or type(state.usage) is not Usage:
        return  # (no `Usage` at all: the reducer names it)
    field = usage_sum_problem(state.usage, usage)
    if field:
        problem = (
            f"the run's {state.usage!r} plus this {usage!r} is no finite number "
            "(nor an int of at most 4300 digits)"
        )
        raise model_failure(
            MalformedResponseError(
                f"the model's answer in step {step} reports a usage the run cannot add "
                f"up: {field} of {problem}, which a saved state cannot hold",
                path=f"$.usage.{field.partition('.')[2]}",
                problem=problem,
            ),
            state,
            step,
            own=True,
        )


def unique_call_ids(response: ModelResponse) -> ModelResponse:
    """``response`` with repeated tool call ids made unique (``<id>_<index>``).

    Some models repeat an id within one response; every call must be answered
    under its own id, so a later duplicate gets a new one, the same on replay.
    """
    parts = response.message.parts
    if len(parts) < 2:
        return response
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    seen = {c.id for c in calls}
    if len(seen) == len(calls):
        return response
    used: set[str] = set()
    renamed: list[Any] = []
    index = 0
    for part in parts:
        if isinstance(part, ToolCallPart):
            if part.id in used:
                new_id = f"{part.id}_{index}"
                while new_id in seen or new_id in used:
                    new_id += "_"
                part = attrs.evolve(part, id=new_id)
            used.add(part.id)
            index += 1
        renamed.append(part)
    message = attrs.evolve(response.message, parts=tuple(renamed))
    return attrs.evolve(response, message=message)


def _current_step(state: RunState) -> Step:
    response = _last_response(state)
    results = tuple(c.result for c in state.calls if c.result is not None)
    children = {c.call.id: c.child for c in state.calls if c.child is not None}
    return Step(state.step, response, response.tool_calls, results, response.usage, children)


def _last_response(state: RunState) -> ModelResponse:
    response = last_response(state)
    if response is None:  # pragma: no cover
        raise AssertionError("a step without a model response")
    return response


# A one-call answer's dispositions, shared (see `_dispositions`).
_ONE: dict[Disposition, tuple[Disposition, ...]] = {
    kind: (kind,) for kind in ("execute", "approve", "return")
}


def _dispositions(live: Live, state: RunState, response: ModelResponse) -> tuple[Disposition, ...]:
    calls = tool_calls_of(response.message)  # (not through two properties)
    if not calls:  # an answer: nothing to decide
        return ()

    def live_says(call: ToolCallPart) -> bool:
        return policy_says(live.tools.get(call.name), call, state, unknown=True)

    decided = dispositions(state.config, calls, live_says)
    if len(decided) == 1:
        # A one-call answer's disposition is one of three tuples, shared: the
        # event keeps it for the whole run, one object fewer per step to collect.
        return _ONE[decided[0]]  # type: ignore[index]  # the live policy always decides
    return tuple(decided)  # type: ignore[arg-type]  # the live policy always decides


def _job(
    live: Live,
    state: RunState,
    invocation: ToolInvocation,
    forward: Callable[[Any], object] | None = None,
) -> ToolJob:
    return _job_in(live, state.run_id, state.conversation, invocation, forward, state)


def _job_in(
    live: Live,
    run_id: str,
    messages: Sequence[Message],
    invocation: ToolInvocation,
    forward: Callable[[Any], object] | None = None,
    state: RunState | None = None,
) -> ToolJob:
    """The job running ``invocation``; its context's ``token_budget`` read from ``state``.

    ``state`` is the run as its step runs, given when the run has a tree
    budget (a step opened without its state has none: see `open_step`).
    """
    call = invocation.call
    tool = live.tools.get(call.name)
    if tool is None or not reads_context(tool):  # (nor its blocking twin: `with_blocking_twin`)
        # Nothing reads a context: none to build (`ToolJob(...)` without its Python __new__).
        return new_tuple(ToolJob, (invocation, tool, None))
    budget = spent = None
    if state is not None and (state.config.stop_when or live.stop_when):
        budget = handed_budget(state, live.stop_when)
        if budget is not None and budget.tokens <= 0:
            spent = spent_reason(state, live.stop_when)
    context: RunContext[Any] = RunContext(
        run_id,
        invocation.step,
        call.id,
        call.name,
        messages,
        live.deps,
        invocation.key,
        invocation.child,
        forward,
        budget,
        spent,
    )
    return ToolJob(invocation, tool, context)
