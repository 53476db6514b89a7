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
per kept sub-run): it replays, serializes and signs like any other.
"""

from __future__ import annotations

from toolfold.runtime.core._events import (
    Event,
    ModelResponded,
    RunFailed,
    ToolReturned,
    ToolSuspended,
)
from toolfold.runtime.core._reducer import reduce
from toolfold.runtime.core._replay import replay
from toolfold.runtime.core._state import RunState


def retry_state(state: RunState) -> RunState | None:
    """``state`` (a failed run) as it was before what failed it, or None when nothing can.

    The calls of the last step whose results failed the run (the tool
    ``state.error`` names, with an outcome other than ``ok``) are to run
    again; a run that a `RunFailed` event ended is back where it was before
    it. A failed call's own run, failed too, is retried the same way and
    kept on the call; one stopped before it ended (the run before a model
    call that failed) is kept as it is, to go on. None when the failure came from neither (an output
    that failed validation, say), or the log without those events still
    fails.
    """
    if state.phase != "failed":
        return None
    events = state.events
    if not events:
        return None
    kept: list[Event]
    retried: list[tuple[str, RunState]] = []
    if isinstance(events[-1], RunFailed):
        kept = list(events[:-1])
    else:
        error = state.error
        name = error.tool_name if error is not None else None
        failing = {
            c.call.id for c in state.calls if c.call.name == name and c.outcome not in (None, "ok")
        }
        opened = max(
            (i for i, e in enumerate(events) if isinstance(e, ModelResponded)), default=None
        )
        if not failing or opened is None:
            return None
        kept = list(events[: opened + 1])
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
                kept.append(event)
    try:
        base = replay(kept)
        for call_id, child in retried:
            base = reduce(base, ToolSuspended(call_id, child))
    except Exception:  # a log the run's reducer does not take without them: no way back here
        return None
    return None if base.phase == "failed" else base
