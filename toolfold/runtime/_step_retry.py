"""What a workflow step with ``on_error="retry"`` does between its attempts.

The core runs a failed step again while its retries last (`Task.max_retries`);
the drivers add what the core cannot see, the error itself (a provider's
error, or a nested workflow's or a function step's that it caused):

- an error that asking again cannot fix (`gives_up`: bad credentials, a bad
  request, a Gemini per-day quota: the one definition Temporal's activities
  use too), or one whose provider asked for a wait longer than its transport
  honours (``max_retry_after``), is not asked again: `not_retried` gives the
  `RunFailed` that fails the run after the round, as the core fails a step
  past its retries (resuming the state runs the step again);
- before the round of the next attempt after a provider's error, the driver
  waits (`round_wait`, `sleep`, `sleep_sync`): the wait the provider asked for
  (``retry_after``), else its `Task.retry_delay`, doubled at each attempt (at
  most `MAX_STEP_DELAY`). A step's own failure (an answer that does not fit,
  a tool's bug) is asked again at once: no wait makes it pass. The wait is
  made between rounds, outside the attempt (a step's ``timeout`` does not cut
  it), and not at all when the round failed the run (a sibling step's error
  that is not retried); a cancellation or Ctrl-C stops it.

A step's attempts multiply its transport's: three step attempts of a model
whose transport makes three each are up to nine requests.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolfold._errors import DEFAULT_MAX_RETRY_AFTER, ProviderError, RunError, gives_up
from toolfold.runtime.core._events import RunFailed
from toolfold.runtime.core._steps import FAILING_OUTCOMES

if TYPE_CHECKING:
    from toolfold.runtime._task import Task
    from toolfold.runtime.core._state import RunState
    from toolfold.runtime.drive._executor import ToolOutcome
    from toolfold.toolkit._tool import Tool

#: The longest backoff between two attempts of a step, in seconds.
MAX_STEP_DELAY = 60.0


async def sleep(seconds: float) -> None:
    """`asyncio.sleep`, imported when a wait is made: a blocking run never imports asyncio."""
    import asyncio

    await asyncio.sleep(seconds)


# The sleeps the waits are made with (tests replace them: no test waits).
sleep_sync = time.sleep

_TASK = "_toolfold_retried_task"


def retried_step(tool: Tool[..., Any], task: Task) -> Tool[..., Any]:
    """Mark ``tool`` as the tool of ``task``, a step with ``on_error="retry"`` (see `not_retried`)."""
    tool.__dict__[_TASK] = task
    return tool


def _retried_task(tool: Tool[..., Any] | None) -> Task | None:
    return None if tool is None else tool.__dict__.get(_TASK)


def attempt_of(call_id: str) -> int:
    """The attempt a step's call is: 1 for its base id, n for ``<base>#<n>`` (the planner's)."""
    _, mark, number = call_id.rpartition("#")
    return int(number) if mark and number.isdigit() else 1


def provider_error(error: BaseException) -> ProviderError | None:
    """The provider's error that failed a step with ``error``: itself, or the one a run's
    error (a nested workflow's, an agent's) was caused by; None for any other failure."""
    for _ in range(_MAX_NESTING):
        if isinstance(error, ProviderError):
            return error
        cause = error.__cause__
        if not isinstance(error, RunError) or cause is None:
            return None
        error = cause
    return None


_MAX_NESTING = 64  # (workflows nested deeper than this fail on their own depth limit)


def why_not_retried(error: BaseException) -> str | None:
    """Why a step that failed with ``error`` is not run again, or None when it may be."""
    found = provider_error(error)
    if found is None:
        return None
    if gives_up(found):
        return f"{type(found).__name__}: asking again cannot fix it"
    asked = found.retry_after
    bound = found.__dict__.get("_max_retry_after", DEFAULT_MAX_RETRY_AFTER)
    if asked is not None and asked > bound:
        return (
            f"the provider asked for a wait of {asked:g} s, over its transport's "
            f"max_retry_after={bound:g} s"
        )
    return None


def retry_wait(task: Task, call_id: str, error: BaseException) -> float | None:
    """The wait before ``task``'s next attempt after ``error`` failed attempt ``call_id``,
    or None when no attempt follows (its retries used up, or `why_not_retried`)."""
    found = provider_error(error)
    if found is None:  # (a step's own failure: waiting helps nothing)
        return None
    attempt = attempt_of(call_id)
    if task.on_error != "retry" or attempt > task.retries or why_not_retried(found):
        return None
    asked = found.retry_after
    if asked is not None and math.isfinite(asked) and asked >= 0:
        return float(asked)
    return min(task.retry_delay * 2.0 ** (attempt - 1), MAX_STEP_DELAY)


def round_wait(
    outcomes: Sequence[ToolOutcome], tools: Mapping[str, Tool[..., Any]]
) -> float | None:
    """The wait before the round after ``outcomes`` (a round that did not fail the run):
    the longest `retry_wait` of its retried steps that failed, or None when none waits."""
    longest = None
    for outcome in outcomes:
        error = outcome.exception
        if error is None or outcome.outcome not in FAILING_OUTCOMES:
            continue
        task = _retried_task(tools.get(outcome.tool_name))
        wait = None if task is None else retry_wait(task, outcome.call_id, error)
        if wait and (longest is None or wait > longest):
            longest = wait
    return longest


def not_retried(
    state: RunState, outcomes: Sequence[ToolOutcome], tools: Mapping[str, Tool[..., Any]]
) -> RunFailed | None:
    """The failure of a run (``state``, after the round of ``outcomes``) whose retried step
    failed with an error it is not asked again for (`why_not_retried`), or None.

    Worded as the core words a step past its retries, so the workflow reports it
    as the step's failure, its cause the step's error.
    """
    if state.phase == "failed":
        return None
    for outcome in outcomes:
        error = outcome.exception
        if error is None or outcome.outcome not in FAILING_OUTCOMES:
            continue
        task = _retried_task(tools.get(outcome.tool_name))
        why = None if task is None else why_not_retried(error)
        if task is not None and why is not None:
            name = outcome.tool_name
            message = (
                f"tool {name!r} failed, not retried ({why}; max_retries={task.retries}); "
                f"last error: {outcome.content}"
            )
            return RunFailed("tool_retries_exceeded", message, name)
    return None
