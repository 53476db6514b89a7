"""Resuming a failed workflow: the run just before what failed it, finished work kept.

A failed run refuses every event (errors stick), so resuming it cannot go on
from its state. A workflow's failure comes from a step (its result failed the
run) or from an event that failed it (`RunFailed`); `retry_state` rebuilds
the run from its log without those events, so the failed steps are to run
again and nothing else is. A failed step that was itself a run (a nested
workflow, an agent) keeps that run on its call, retried the same way, as a
cancelled run keeps its sub-runs (`ToolSuspended`): the branches and steps
inside it that had ended do not run again either. The log of the state it
gives is the failed run's with those events left out (and a `ToolSuspended`
per kept sub-run), then an `AttemptDropped` carrying the usage of the model
calls left out with them (a rejected answer, the failed attempts of steps that
start over), so that what the provider billed stays counted: it replays,
serializes and signs like any other.
"""

from __future__ import annotations

from toolfold.runtime.core._events import (
    AttemptDropped,
    CallResumed,
    Event,
    ModelResponded,
    OutputRejected,
    RunFailed,
    ToolReturned,
    ToolSuspended,
)
from toolfold.runtime.core._messages import NO_USAGE
from toolfold.runtime.core._reducer import countable, reduce
from toolfold.runtime.core._replay import replay
from toolfold.runtime.core._state import WAITING_PHASES, CallState, RunState
from toolfold.runtime.core._steps import counts_as_failure, retry_limit


def held_failure(state: RunState) -> RunFailed | None:
    """The failure a waiting run holds back: a call of its step past its retries, or None.

    The core commits a step's results once every call has one, so a call
    that used up its retries (a workflow step with ``on_error="fail"``)
    fails the run only after the calls beside it that wait (an approval
    deep in another `Parallel` branch) are answered and run. A workflow
    does not wait for them: the `RunFailed` given here (the message the
    core would have given, and which calls wait, not run) fails the run
    where it waits, their sub-runs kept on their calls; `retry_state` takes
    it back like a step's failure. None when the run does not wait or no
    call of its step failed it.
    """
    if state.phase not in WAITING_PHASES:
        return None
    failed: list[tuple[str, int, int, str]] = []  # (tool, its failures, its limit, last error)
    for call in state.calls:
        name = call.call.name
        limit = retry_limit(state, name)
        count = state.failures.get(name, 0) + 1  # (as `_commit` would count it)
        if count > limit and counts_as_failure(state, call):
            last = call.result.content if call.result is not None else ""
            failed.append((name, count, limit, last))
    if not failed:
        return None
    name, count, limit, last = failed[0]  # (the one `_commit` would fail the run with)
    times = "once" if count == 1 else f"{count} times in a row"
    waiting = "; ".join(_waits(c) for c in state.calls if c.status != "done")
    rerun = ", ".join(dict.fromkeys(repr(f[0]) for f in failed))  # each failing call runs again
    also = "".join(f"; tool {other!r} failed too: {error}" for other, _, _, error in failed[1:])
    message = (
        f"tool {name!r} failed {times} (max_retries={limit}); last error: {last} "
        f"[not run, kept in the state: {waiting}; resuming the state runs {rerun} "
        f"again, then waits as it did{also}]"
    )
    return RunFailed("tool_retries_exceeded", message, name)


def failed_too(state: RunState) -> tuple[CallState, ...]:
    """The other calls of a failed run's last step whose tools used up their retries too.

    Those `retry_state` runs again beside the call of the tool ``state.error``
    names (`_fatal`: a `Parallel`'s second failed branch), by the rule
    `held_failure` names them with (a failed call past its tool's retry limit:
    not a step with ``on_error="skip"``, nor one with retries left). Empty for
    a run that no call's failure failed, and for a failure `held_failure` gave
    (its message names them): that round's failures are not counted in
    ``state.failures`` yet, so `_fatal` finds none of its calls.
    """
    error = state.error
    if error is None or error.kind != "tool_retries_exceeded" or not state.events:
        return ()
    return tuple(
        c
        for c in state.calls
        if c.call.name != error.tool_name and c.result is not None and _fatal(state, c)
    )


def _waits(call: CallState) -> str:
    """What a call that waits waits for, for a message: the calls (at any depth) and why."""
    name = call.call.name
    child = call.child
    if call.status == "awaiting_approval" or child is None:
        why = "an approval" if call.status == "awaiting_approval" else "its result"
        return f"{name!r} waits for {why} (call {call.call.id!r})"
    deep = child.pending_approvals or child.tool_calls
    what = "an approval of" if child.pending_approvals else "the caller's results of"
    calls = ", ".join(f"{c.name!r} (call {c.id!r})" for c in deep)
    return f"{name!r} waits for {what} {calls}"


def _held(events: tuple[Event, ...]) -> bool:
    """Whether the log ends with the event of a `held_failure` (not another `RunFailed`).

    Recognised by its kind and tool, where the run before it held that failure
    back: not by its message, which a later release may word otherwise (a
    saved state must resume the same way). Only `held_failure` records a
    ``tool_retries_exceeded`` `RunFailed` (the core fails a step without one).
    """
    last = events[-1]
    if not isinstance(last, RunFailed) or last.error_kind != "tool_retries_exceeded":
        return False
    try:
        held = held_failure(replay(events[:-1]))
    except Exception:  # (a log its reducer does not take: not one of these)
        return False
    return held is not None and held.tool_name == last.tool_name


def _fatal(state: RunState, call: CallState, held: bool = False) -> bool:
    """Whether ``call``, of the failed step, failed the run.

    The step fails the run at its first call whose tool used up its retries
    (`_commit`), but every such call's failure is fatal: a call of another tool
    past its limit in the same step (a `Parallel`'s second failed branch)
    would fail the run as soon as the first one is run again, so it runs
    again too. A failure its tool still allows (a step with
    ``on_error="skip"``, a tool with retries left) is a result like any other.
    """
    if not counts_as_failure(state, call):
        return False
    name = call.call.name
    error = state.error
    if error is not None and name == error.tool_name:
        return True
    # (a `held_failure`'s run failed before its step's failures were counted)
    return state.failures.get(name, 0) + held > retry_limit(state, name)


def retry_state(state: RunState) -> RunState | None:
    """``state`` (a failed run) as it was before what failed it, or None when nothing can.

    The calls of the last step whose results failed the run (each failed
    call whose tool used up its retries: the one ``state.error`` names and
    any other past its limit, see `_fatal`) are to run again, as are those of
    a run that a `held_failure` failed where it waited (the calls that
    waited keep waiting); a run that another `RunFailed` event ended is back
    where it was before it. A failed call's own run, failed too, is retried the same way and
    kept on the call; one stopped before it ended (the run before a model
    call that failed) is kept as it is, to go on. A run whose last answer
    did not fit its output type (no ``output_retries`` left, or one the
    provider ended with a refusal or at the token limit) is back where
    it was before the model gave that answer, to ask again: its tools'
    results are kept. A failed call whose sub-run ended with an error of its
    own (``max_steps`` reached...) runs again from the start. The usage of
    what is left out (the rejected answer; the `tree_usage` of the sub-runs
    that start over) stays counted: an `AttemptDropped` at the end of the log
    carries it. None when the failure came from none of these, or the log
    without those events still fails.

    Raises:
        InvalidEventError: The usage left out has a count `AttemptDropped`
            refuses (not a finite number >= 0, as a model may report).
    """
    if state.phase != "failed":
        return None
    events = state.events
    if not events:
        return None
    kept: list[Event]
    retried: list[tuple[str, RunState]] = []
    dropped = NO_USAGE  # the run's own model calls left out (a rejected answer)
    dropped_sub_runs = NO_USAGE  # the sub-runs left out, to start over
    held = _held(events)
    last_event = events[-1]
    unfit = isinstance(last_event, RunFailed) and last_event.error_kind == "output_validation"
    if isinstance(last_event, RunFailed) and not held and not unfit:
        kept = list(events[:-1])
    elif isinstance(last_event, OutputRejected) or (unfit and not held):
        # Its last answer did not fit the output type, with no retries left (or ended by a
        # refusal or the token limit, which the driver does not ask again: `rejection`):
        # the run just before the model gave it, to ask the model again (what ran before
        # is kept); re-validating that answer would only fail the same way.
        answered = max(i for i, e in enumerate(events) if isinstance(e, ModelResponded))
        kept = list(events[:answered])
        last = events[answered]
        assert isinstance(last, ModelResponded)  # (the one left out)
        dropped = last.response.usage
    else:
        error = state.error
        name = error.tool_name if error is not None else None
        failing = {c.call.id: c.call.name for c in state.calls if _fatal(state, c, held)}
        opened = max(
            (i for i, e in enumerate(events) if isinstance(e, ModelResponded)), default=None
        )
        if name not in failing.values() or opened is None:  # the failure names no failed call
            return None
        kept = list(events[: opened + 1])
        rest: list[Event] = []
        over: set[str] = set()  # the failed calls that start over
        for event in events[opened + 1 : -1 if held else None]:
            if isinstance(event, ToolReturned) and event.call_id in failing:
                child = event.child
                again: RunState | None = None
                if child is not None and child.phase == "failed":
                    again = retry_state(child)
                elif child is not None and child.phase != "finished":
                    again = child  # the run before its failing model call: it goes on
                if again is not None:
                    retried.append((event.call_id, again))
                else:
                    over.add(event.call_id)
                    if child is not None:  # what it used stays counted (its whole tree)
                        dropped_sub_runs = dropped_sub_runs + child.tree_usage
            else:
                rest.append(event)
        # A call that starts over starts with no sub-run: an earlier resume's or an
        # approval's `ToolSuspended` / `CallResumed` for it would give it back its old one
        # (counted a second time, next to the dropped tree that holds it), and the
        # caller's answers given in the old attempt go with it.
        kept += [
            e
            for e in rest
            if not (isinstance(e, (ToolSuspended, CallResumed)) and e.call_id in over)
        ]
    try:
        base = replay(kept)
        for call_id, child in retried:
            base = reduce(base, ToolSuspended(call_id, child))
    except Exception:  # a log the run's reducer does not take without them: no way back here
        return None
    if base.phase == "failed":
        return None
    dropped, dropped_sub_runs = countable(dropped), countable(dropped_sub_runs)
    if dropped != NO_USAGE or dropped_sub_runs != NO_USAGE:
        # (A count a model reported that no sum can take, a NaN, is left out as 0.)
        base = reduce(base, AttemptDropped(dropped, dropped_sub_runs))
    return base
