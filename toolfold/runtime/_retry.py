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
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._steps import FAILING_OUTCOMES, retry_limit


def _fatal(state: RunState, name: str, outcome: str | None) -> bool:
    """Whether a call of the failed step (tool ``name``, ending in ``outcome``) failed the run.

    The step fails the run at its first call whose tool used up its retries
    (`_commit`), but every such call's failure is fatal: a call of another tool
    past its limit in the same step (a `Parallel`'s second failed branch)
    would fail the run as soon as the first one is run again, so it runs
    again too. A failure its tool still allows (a step with
    ``on_error="skip"``, a tool with retries left) is a result like any other.
    """
    if outcome not in FAILING_OUTCOMES:
        return False
    error = state.error
    if error is not None and name == error.tool_name:
        return True
    return state.failures.get(name, 0) > retry_limit(state, name)


def retry_state(state: RunState) -> RunState | None:
    """``state`` (a failed run) as it was before what failed it, or None when nothing can.

    The calls of the last step whose results failed the run (each failed
    call whose tool used up its retries: the one ``state.error`` names and
    any other past its limit, see `_fatal`) are to run again; a run that a `RunFailed` event ended is back where it was before
    it. A failed call's own run, failed too, is retried the same way and
    kept on the call; one stopped before it ended (the run before a model
    call that failed) is kept as it is, to go on. A run whose last answer
    did not fit its output type (no ``output_retries`` left) is back where
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
    if isinstance(events[-1], RunFailed):
        kept = list(events[:-1])
    elif isinstance(events[-1], OutputRejected):
        # Its last answer did not fit the output type, with no retries left: the run just
        # before the model gave it, to ask the model again (what ran before is kept).
        answered = max(i for i, e in enumerate(events) if isinstance(e, ModelResponded))
        kept = list(events[:answered])
        last = events[answered]
        assert isinstance(last, ModelResponded)  # (the one left out)
        dropped = last.response.usage
    else:
        error = state.error
        name = error.tool_name if error is not None else None
        failing = {
            c.call.id: c.call.name for c in state.calls if _fatal(state, c.call.name, c.outcome)
        }
        opened = max(
            (i for i, e in enumerate(events) if isinstance(e, ModelResponded)), default=None
        )
        if name not in failing.values() or opened is None:  # the failure names no failed call
            return None
        kept = list(events[: opened + 1])
        rest: list[Event] = []
        over: set[str] = set()  # the failed calls that start over
        for event in events[opened + 1 :]:
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
