"""Replay an event log into a state, and fork a run from an earlier point."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from toolfold._errors import UsageError
from toolfold.runtime.core._events import Event, RunStarted
from toolfold.runtime.core._reducer import blank_state, reduce
from toolfold.runtime.core._state import RunState, not_a_state


def replay(events: Iterable[Event], initial: RunState | None = None) -> RunState:
    """Fold ``events`` into a state (from a blank run unless ``initial`` is given).

    ``replay(state.events)`` equals ``state``.

    Raises:
        UsageError: ``events`` is not iterable, or ``initial`` is neither a
            `RunState` nor None.
        InvalidEventError: As `reduce`, for the first event refused.
    """
    if initial is None:
        state = blank_state()
    elif isinstance(initial, RunState):
        state = initial
    else:
        raise not_a_state("replay", initial)
    try:
        iterator = iter(events)
    except TypeError:
        raise UsageError(
            f"replay(): events must be an iterable of events, "
            f"got {type(events).__name__} {events!r:.60}"
        ) from None
    for event in iterator:
        state = reduce(state, event)
    return state


def empty_run_id(function: str, whose: str, left_out: str) -> UsageError:
    """The error for ``run_id=''`` given to ``function`` (``"fork(): "``, or ``""`` for a run,
    which names no function): ``whose`` id it is (``"a run's"``), and what ``run_id=None``
    gives instead (``left_out``: ``"for a random one"``)."""
    return UsageError(
        f"{function}run_id='' is empty: {whose} id begins its tool calls' idempotency keys "
        f"(<run id>:<step>:<index>); give a non-empty id, or leave run_id out (None) {left_out}"
    )


def fork(
    state: RunState,
    *,
    step: int | None = None,
    events: int | None = None,
    run_id: str | None = None,
) -> RunState:
    """The run as it was at an earlier point, to continue differently.

    Args:
        state: The run to fork.
        step: Fork just before the model response of step ``step + 1``
            (so ``step=0`` is the run before its first model response).
        events: Fork after the first ``events`` events instead.
        run_id: A new run id for the fork (recommended: idempotency keys
            include it). The log's `RunStarted` is rewritten to match, so the
            fork still replays to itself.

    Raises:
        UsageError: Neither or both of ``step`` and ``events`` are given, one
            is no int (a bool neither; a numpy int is one), the point lies
            beyond the run, or
            ``run_id`` is no str or is empty, or ``state`` is no `RunState`.
    """
    if not isinstance(state, RunState):
        raise not_a_state("fork", state)
    if (step is None) == (events is None):
        raise UsageError("fork needs exactly one of step= or events=")
    step = _index("step", step)
    events = _index("events", events)
    if run_id is not None and not isinstance(run_id, str):
        raise UsageError(f"fork(): run_id= must be a str, got {type(run_id).__name__} {run_id!r}")
    if run_id == "":  # its keys would be ":<step>:<index>", the same for every such fork
        raise empty_run_id("fork(): ", "the fork's", "to keep the run's")
    log = state.events
    if events is not None:
        if not 1 <= events <= len(log):
            raise UsageError(f"events={events} outside 1..{len(log)}")
        prefix = log[:events]
    else:
        assert step is not None
        if not 0 <= step <= state.step:
            raise UsageError(f"step={step} outside 0..{state.step}")
        prefix = _before_step(log, step + 1)
    if run_id is not None:
        first = prefix[0]
        assert isinstance(first, RunStarted)
        prefix = (attrs.evolve(first, run_id=run_id), *prefix[1:])
    return replay(prefix)


def _index(name: str, value: Any) -> int | None:
    """``value`` as an int: an int, or what ``operator.index`` takes (a numpy int); no bool."""
    if value is None or type(value) is int:
        return value
    index = getattr(type(value), "__index__", None)  # (what ``operator.index`` calls)
    if index is not None and not isinstance(value, bool):
        number = index(value)
        if type(number) is int:
            return number
    raise UsageError(f"fork(): {name}= must be an int, got {type(value).__name__} {value!r}")


def _before_step(log: tuple[Event, ...], step: int) -> tuple[Event, ...]:
    seen = 0
    for position, event in enumerate(log):
        if event.kind == "model_responded":
            seen += 1
            if seen == step:
                return log[:position]
    return log
