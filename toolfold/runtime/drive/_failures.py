"""The errors a run raises, each carrying the state to resume from.

A failed model call keeps the provider's error type with the state from
before the call; an observer (``on_event``, ``on_step``, a stop condition,
a handoff's input filter) that raises becomes a `RunError`; a run the core
failed (too many tool retries, an output it could not validate) raises the
error its failure names; ``on_tool_error="raise"`` raises a failed call's
`ToolExecutionError` with the state before the step's results.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolfold._errors import (
    OutputValidationError,
    RunError,
    ToolExecutionError,
    ToolfoldError,
    ToolRetriesExceededError,
)
from toolfold.runtime.core._state import RunState
from toolfold.runtime.drive._executor import ToolOutcome


def observer_failure(what: str, exc: Exception, state: RunState) -> RunError:
    # Tools may already have run: the error must keep the state they produced.
    return RunError(
        f"the {what} raised {type(exc).__name__}: {exc}; the error's state is the run "
        "up to that point (resume it to go on)",
        state,
    )


def raise_tool_error(state: RunState, outcomes: Sequence[ToolOutcome]) -> None:
    for outcome in outcomes:
        error = tool_failure(state, outcome.tool_name, outcome.outcome, outcome.content)
        if error is not None:
            if outcome.exception is not None:
                raise error from outcome.exception
            raise error


def tool_failure(
    state: RunState, tool_name: str, outcome: str | None, content: str
) -> ToolExecutionError | None:
    """The error ``on_tool_error="raise"`` raises for a call's outcome, or None when it succeeded.

    ``state`` is the run before the step's results (the error's state).
    """
    if outcome not in ("error", "timeout"):
        return None
    return ToolExecutionError(f"tool {tool_name!r} failed: {content}", state)


def model_failure(exc: Exception, state: RunState, step: int) -> ToolfoldError:
    if isinstance(exc, ToolfoldError):
        # Keep the provider's own error type (RateLimitError...) so callers
        # can catch it; add the state so the run can be resumed.
        exc.state = state  # type: ignore[attr-defined]
        return exc
    return RunError(
        f"the model call of step {step} failed: {type(exc).__name__}: {exc}; "
        "the error's state is the run before that call, resume it to retry",
        state,
    )


def run_failure(state: RunState) -> RunError:
    error = state.error
    assert error is not None
    if error.kind == "tool_retries_exceeded":
        return ToolRetriesExceededError(error.message, state)
    if error.kind == "output_validation":
        return OutputValidationError(error.message, state)
    return RunError(f"the run failed ({error.kind}): {error.message}", state)
