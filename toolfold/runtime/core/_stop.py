"""Stop conditions: pure functions over a run's state.

The built-in conditions are plain data (they go into `RunConfig.stop_when`,
serialize with the state, and the reducer checks them at every step
boundary). Any callable ``(state) -> bool`` works as a condition too; being a
live object it cannot sit in the config, so the driver checks it with
`stop_reason` and records the decision as a `StopRequested` event.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal, Union

import attrs

from toolfold._errors import UsageError

if TYPE_CHECKING:
    from toolfold.runtime.core._messages import ToolResultPart
    from toolfold.runtime.core._state import RunState


@attrs.frozen
class MaxSteps:
    """Stop once the current turn has made ``steps`` model calls.

    Attributes:
        steps: The number of model calls allowed in a turn.
    """

    steps: int
    kind: Literal["max_steps"] = "max_steps"

    def __call__(self, state: RunState) -> bool:
        return state.turn_steps >= self.steps


@attrs.frozen
class TokenBudget:
    """Stop once the run has used ``tokens`` tokens (input plus output).

    Attributes:
        tokens: The budget in total tokens over the whole run.
    """

    tokens: int
    kind: Literal["token_budget"] = "token_budget"

    def __call__(self, state: RunState) -> bool:
        return state.usage.total_tokens >= self.tokens


@attrs.frozen
class ToolCalled:
    """Stop after the step in which the model called the tool ``name``.

    Attributes:
        name: The tool name.
    """

    name: str
    kind: Literal["tool_called"] = "tool_called"

    def __call__(self, state: RunState) -> bool:
        return any(c.call.name == self.name for c in state.calls)


StopCondition = Union[MaxSteps, TokenBudget, ToolCalled]  # noqa: UP007
"""A stop condition that is plain data (serializable, checked by the reducer)."""

StopPredicate = Callable[["RunState"], bool]


def max_steps(steps: int) -> MaxSteps:
    """Stop once the current turn has made ``steps`` model calls."""
    if steps < 1:
        raise UsageError(f"max_steps must be at least 1, got {steps}")
    return MaxSteps(steps)


def token_budget(tokens: int) -> TokenBudget:
    """Stop once the run has used ``tokens`` tokens (input plus output)."""
    if tokens < 1:
        raise UsageError(f"token_budget must be at least 1, got {tokens}")
    return TokenBudget(tokens)


def tool_called(name: str) -> ToolCalled:
    """Stop after the step in which the model called the tool ``name``."""
    return ToolCalled(name)


def stop_reason(state: RunState, conditions: Iterable[StopCondition | StopPredicate]) -> str | None:
    """The reason of the first condition that holds, or None.

    A data condition's reason is its kind (``"max_steps"``,
    ``"token_budget"``, ``"tool_called"``); a callable's is
    ``"stop_condition"``.
    """
    for condition in conditions:
        if condition(state):
            return condition.kind if isinstance(condition, _DATA) else "stop_condition"
    return None


_DATA = (MaxSteps, TokenBudget, ToolCalled)


def stopping_result(state: RunState) -> ToolResultPart | None:
    """The result of the call that stopped a run finished by `tool_called`, else None.

    The call is the last of the step to the first ``tool_called`` condition's
    tool that holds (the condition `stop_reason` names). A workflow step, or
    an agent used as a tool, stopped this way passes that result on as its
    output.
    """
    if state.finish_reason != "tool_called":
        return None
    for condition in state.config.stop_when:
        if isinstance(condition, ToolCalled):
            for record in reversed(state.calls):
                if record.call.name == condition.name and record.result is not None:
                    return record.result
    return None
