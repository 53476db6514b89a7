"""Effects: what must happen next, as plain data (see `next_effect`).

Drivers perform effects and report the outcome as events. Each effect has a
stable ``kind``; a tool invocation's `ToolInvocation.effect_kind` is
``tool:<name>`` and its `ToolInvocation.key` is an idempotency key
(``<run id>:<step>:<call index>``) because durable engines deliver effects at
least once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, Union

import attrs

from toolfold.runtime.core._messages import ToolCallPart, as_item
from toolfold.runtime.core._request import ModelRequest, OutputSpec
from toolfold.runtime.core._state import RunFailure, RunState


def _calls(items: Iterable[ToolCallPart]) -> tuple[ToolCallPart, ...]:
    return tuple(items)


def _invocations(items: Iterable[ToolInvocation]) -> tuple[ToolInvocation, ...]:
    return tuple(items)


@attrs.frozen
class CallModel:
    """Ask the model for the next response.

    Attributes:
        request: The request, built from the state.
        step: The step this call will be (1 for the first).
        key: An idempotency key, ``<run id>:<step>:model``; its step counts on
            from the model responses of the run's history (`RunStarted.earlier_steps`).
    """

    request: ModelRequest
    step: int
    key: str
    kind: Literal["model_request"] = "model_request"


@attrs.frozen
class ToolInvocation:
    """One tool call to execute.

    Attributes:
        call: The call as the model made it.
        index: Its position among the step's calls.
        step: The step that made it.
        key: An idempotency key, ``<run id>:<step>:<index>``; its step counts on
            from the model responses of the run's history (`RunStarted.earlier_steps`).
        child: The sub-run this call continues (an agent used as a tool that
            suspended and got the caller's answers), or None.
    """

    call: ToolCallPart
    index: int
    step: int
    key: str
    child: RunState | None = None

    @property
    def tool_name(self) -> str:
        """The tool to run."""
        return self.call.name

    @property
    def effect_kind(self) -> str:
        """The stable effect name, ``tool:<name>``."""
        return f"tool:{self.call.name}"


@attrs.frozen
class RunTools:
    """Execute these calls and report each with a `ToolReturned` event.

    Lists every call of the step that may run and has no result yet, in call
    order. The results may be reported in any order; the reducer commits them
    in call order.

    Attributes:
        calls: The calls to run.
    """

    calls: tuple[ToolInvocation, ...] = attrs.field(converter=_invocations)
    kind: Literal["run_tools"] = "run_tools"


@attrs.frozen
class AwaitApproval:
    """Suspend: these calls need an approval (`ApprovalGranted`/`ApprovalDenied`).

    Attributes:
        calls: The calls awaiting approval.
        tool_calls: Calls also waiting for the caller's results (answerable in
            the same resume with `ToolResultsProvided`).
    """

    calls: tuple[ToolCallPart, ...] = attrs.field(converter=_calls)
    tool_calls: tuple[ToolCallPart, ...] = attrs.field(default=(), converter=_calls)
    kind: Literal["await_approval"] = "await_approval"


@attrs.frozen
class AwaitToolResults:
    """Suspend: the caller must supply these calls' results (`ToolResultsProvided`).

    Attributes:
        calls: The calls returned to the caller.
    """

    calls: tuple[ToolCallPart, ...] = attrs.field(converter=_calls)
    kind: Literal["await_tool_results"] = "await_tool_results"


@attrs.frozen
class ValidateOutput:
    """Check the final answer against the output type (`OutputAccepted`/`OutputRejected`).

    Attributes:
        text: The answer's text.
        output: The output spec it must follow.
    """

    text: str
    output: OutputSpec
    kind: Literal["validate_output"] = "validate_output"


@attrs.frozen
class Finish:
    """The run is over.

    Attributes:
        reason: ``stop``, ``length``, ``content_filter``, ``other``, ``max_steps``,
            ``token_budget``, ``tool_called``, ``stop_condition``,
            ``max_iterations`` (a workflow's `Loop` whose ``until`` never
            held), or ``error`` for a failed run.
        output: The final output (plain data), or None.
        error: Why the run failed, when it did.
    """

    reason: str
    output: Any = attrs.field(default=None, eq=as_item)
    error: RunFailure | None = None
    kind: Literal["finish"] = "finish"


Effect = Union[  # noqa: UP007
    CallModel, RunTools, AwaitApproval, AwaitToolResults, ValidateOutput, Finish
]

EFFECT_TYPES: tuple[type[Any], ...] = (
    CallModel,
    RunTools,
    AwaitApproval,
    AwaitToolResults,
    ValidateOutput,
    Finish,
)
