"""Events: what happened to a run, as plain data.

Drivers make events (ids, timestamps and anything else impure arrive inside
them); `reduce` folds them into the state. Each event has a stable ``kind``
that names it in the transition table and in the JSON form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal, Union

import attrs

from toolfold._errors import UsageError
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._messages import (
    NO_USAGE,
    FrozenDict,
    FrozenList,
    Message,
    NotJSONError,
    ResultContent,
    ToolResultPart,
    Usage,
    as_item,
    content_tuple,
    frozen_json,
    frozen_output,
)
from toolfold.runtime.core._repr import excerpt, fields, short
from toolfold.runtime.core._request import ModelResponse
from toolfold.runtime.core._state import Disposition, Outcome, RunState, refreeze_on_unpickle
from toolfold.runtime.core._stop import StopCondition


def _messages(items: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(items)


def _dispositions(items: Iterable[Disposition]) -> tuple[Disposition, ...]:
    return tuple(items)


def _results(items: Iterable[ToolResultPart]) -> tuple[ToolResultPart, ...]:
    return tuple(items)


@attrs.frozen
class RunStarted:
    """A run began (always the first event of a log).

    Attributes:
        run_id: The run's id, made by the driver.
        config: The run's configuration.
        messages: The conversation to start from (history and the prompt).
        agent: The name of the agent that runs it, if it has one.
        earlier_steps: The model responses in ``messages`` (the history's
            assistant messages), counted by `initial_state`: the step in the
            run's tool calls' idempotency keys counts on from them, so a
            conversation continued under the same run id gets new keys. 0 in a
            log written before they were counted, whose keys stay as they were.
    """

    run_id: str
    config: RunConfig
    messages: tuple[Message, ...] = attrs.field(default=(), converter=_messages)
    agent: str | None = None
    kind: Literal["run_started"] = "run_started"
    earlier_steps: int = attrs.field(default=0, kw_only=True)

    def __repr__(self) -> str:
        return fields(
            "RunStarted",
            [
                ("run_id", excerpt(self.run_id)),
                ("agent", None if self.agent is None else excerpt(self.agent)),
                ("messages", len(self.messages)),
            ],
        )


@attrs.frozen
class HandedOff:
    """The run continues with another agent (a handoff), on the same conversation.

    Attributes:
        agent: The name of the agent that takes over.
        config: Its configuration (instructions, tools, settings...).
        messages: The conversation it continues with, when an input filter
            chose it, or when a transfer call of the step committed as
            ``Transferred`` lost to an earlier one approved after it ran
            (its result then reads ``Not transferred``); None keeps the
            conversation as it is.
    """

    agent: str
    config: RunConfig
    messages: tuple[Message, ...] | None = None
    kind: Literal["handed_off"] = "handed_off"

    def __repr__(self) -> str:
        messages = None if self.messages is None else len(self.messages)
        return fields("HandedOff", [("agent", excerpt(self.agent)), ("messages", messages)])


@attrs.frozen
class UserMessageAdded:
    """A message was added before the next model call (a new turn once finished).

    Attributes:
        message: The message, usually from the user.
    """

    message: Message
    kind: Literal["user_message_added"] = "user_message_added"

    def __repr__(self) -> str:
        return fields("UserMessageAdded", [("message", repr(self.message))])


@attrs.frozen
class ModelResponded:
    """The model answered.

    Attributes:
        response: The response.
        dispositions: How each tool call must be handled, one per call in
            order: ``"execute"``, ``"approve"`` or ``"return"``. Empty means
            "derive from the config", which works unless a tool's approval is
            a live predicate. The reducer refuses dispositions the config
            forbids (executing a tool that always needs approval or has no
            function, or executing at all with ``auto_execute_tools=False``).
            Calls to unknown tools and calls whose argument text is not a JSON
            object get an error result at once (unless every call is
            returned), whatever their disposition.
    """

    response: ModelResponse
    dispositions: tuple[Disposition, ...] = attrs.field(default=(), converter=_dispositions)
    kind: Literal["model_responded"] = "model_responded"

    def __repr__(self) -> str:
        response = self.response
        return fields(
            "ModelResponded",
            [
                ("message", repr(response.message)),
                ("finish_reason", repr(response.finish_reason)),
                ("usage", repr(response.usage)),
                ("dispositions", len(self.dispositions) or None),
            ],
        )


@attrs.frozen
class ToolReturned:
    """The executor finished one call (results may arrive in any order).

    Attributes:
        call_id: The call's id.
        content: The result as text for the model.
        is_error: True for a failed call.
        outcome: How it ended; any outcome but ``ok`` makes an error result.
        duration: Seconds the call took, as the driver measured it (None when
            not measured); for viewers and traces, never read by `reduce`, and
            left out of equality, so two runs that did the same compare equal.
        child: The finished sub-run the call made (an agent used as a tool),
            kept on the call's record; None for other tools.
        parts: The result's content when it holds images or files (see
            `ToolResultPart.parts`); empty for a text result.
    """

    call_id: str
    content: str
    is_error: bool = False
    outcome: Outcome = "ok"
    duration: float | None = attrs.field(default=None, eq=False)
    child: RunState | None = None
    parts: tuple[ResultContent, ...] = attrs.field(default=(), converter=content_tuple)
    kind: Literal["tool_returned"] = "tool_returned"

    def __repr__(self) -> str:
        return fields(
            "ToolReturned",
            [
                ("call_id", excerpt(self.call_id)),
                ("content", excerpt(self.content)),
                ("is_error", self.is_error or None),
                ("outcome", None if self.outcome == "ok" else repr(self.outcome)),
                ("child", None if self.child is None else repr(self.child)),
                ("parts", len(self.parts) or None),
            ],
        )


@attrs.frozen
class ToolSuspended:
    """An executed call's sub-run (an agent used as a tool) waits for the caller.

    The call stays open (``suspended``) with the sub-run's state on its
    record; the run suspends once nothing else can run, and `CallResumed`
    brings the caller's answers down to the sub-run. A sub-run interrupted
    before it ended (the run was cancelled, or Ctrl-C) is kept the same way:
    the call stays to run with it, and running it continues the sub-run
    instead of starting it again.

    Attributes:
        call_id: The call's id.
        child: The suspended sub-run's state.
    """

    call_id: str
    child: RunState
    kind: Literal["tool_suspended"] = "tool_suspended"

    def __repr__(self) -> str:
        return fields(
            "ToolSuspended", [("call_id", excerpt(self.call_id)), ("child", repr(self.child))]
        )


def _events(items: Iterable[Event]) -> tuple[Event, ...]:
    return tuple(items)


@attrs.frozen
class CallResumed:
    """The caller answered inside a suspended call's sub-run.

    ``events`` are reduced into the sub-run's state (approvals, tool results,
    or a `CallResumed` for a sub-run deeper down); the call runs again, to
    drive the sub-run on, unless the sub-run still waits for more answers.

    Attributes:
        call_id: The suspended call's id.
        events: The events for its sub-run, in order.
    """

    call_id: str
    events: tuple[Event, ...] = attrs.field(converter=_events)
    kind: Literal["call_resumed"] = "call_resumed"

    def __repr__(self) -> str:
        return fields(
            "CallResumed", [("call_id", excerpt(self.call_id)), ("events", len(self.events))]
        )


@attrs.frozen
class ApprovalGranted:
    """The user approved a call that awaited approval; it will run.

    Attributes:
        call_id: The call's id.
    """

    call_id: str
    kind: Literal["approval_granted"] = "approval_granted"


@attrs.frozen
class ApprovalDenied:
    """The user denied a call; the model sees an error result saying so.

    Attributes:
        call_id: The call's id.
        reason: Why, for the model ("" for no reason).
    """

    call_id: str
    reason: str = ""
    kind: Literal["approval_denied"] = "approval_denied"

    def __repr__(self) -> str:
        return fields(
            "ApprovalDenied", [("call_id", excerpt(self.call_id)), ("reason", excerpt(self.reason))]
        )


@attrs.frozen
class ToolResultsProvided:
    """The caller supplied results for calls returned to it.

    Attributes:
        results: One result per call answered (a subset is fine).
    """

    results: tuple[ToolResultPart, ...] = attrs.field(converter=_results)
    kind: Literal["tool_results_provided"] = "tool_results_provided"

    def __repr__(self) -> str:
        return fields("ToolResultsProvided", [("results", short(list(self.results)))])


def planned_output(value: Any) -> Any:
    """A workflow's output (its planner's: the workflow's own data) frozen for
    `OutputAccepted`, allowed to nest deeper than a model's (`frozen_output`).

    Raises:
        UsageError: The value is no JSON a saved state could hold; it names where.
    """
    return _output_value(value, frozen_output)


def _output_value(value: Any, check: Callable[[Any], Any] = frozen_json) -> Any:
    """The output frozen, checked (``check``: `frozen_json`, or `frozen_output` for a
    workflow's own) to come back equal from a saved state.

    A frozen mapping or list is taken as it is: one is made from JSON just read
    (a saved state's own output) or by an earlier check.
    """
    kind = type(value)
    if kind is FrozenDict or kind is FrozenList or kind is str:
        return value
    try:
        return check(value)
    except NotJSONError as error:
        raise UsageError(
            f"OutputAccepted.value{error.path}: {error.problem}; an output is JSON data, "
            "stored with the run"
        ) from None


@attrs.frozen
class OutputAccepted:
    """The final answer fits the output type.

    Attributes:
        value: The validated answer as plain data (JSON values), read-only:
            objects are `FrozenDict`s and arrays `FrozenList`s (equal to plain
            dicts and lists), so an observer cannot change the run's output.
            A value a saved state could not give back equal raises `UsageError`
            naming where (see `ToolCallPart.arguments`); an int, float, bool or
            None key is held as the text JSON writes for it.
    """

    value: Any = attrs.field(converter=_output_value, eq=as_item)
    kind: Literal["output_accepted"] = "output_accepted"

    def __repr__(self) -> str:
        return fields("OutputAccepted", [("value", short(self.value))])


refreeze_on_unpickle(OutputAccepted, "value")  # (pickled by an older toolfold: mutable)


@attrs.frozen
class OutputRejected:
    """The final answer does not fit the output type; the model is told why.

    Attributes:
        message: What was wrong, for the model.
    """

    message: str
    kind: Literal["output_rejected"] = "output_rejected"

    def __repr__(self) -> str:
        return fields("OutputRejected", [("message", excerpt(self.message))])


@attrs.frozen
class StopRequested:
    """A stop condition the driver checks held at a step boundary.

    The reducer checks the conditions the state stores (`RunConfig.stop_when`)
    itself; a driver checks the others before the next model call: a callable,
    and a plain-data condition the state does not store (one given to
    `resume` only, which holds for that resume).

    Attributes:
        reason: The finish reason to record.
        condition: The plain-data condition that held, or None for a
            callable. The stop names it so that it says what ended the run
            when the state does not: the tool of a ``tool_called`` stop (whose
            call's result `stopping_result` finds), the limit of a
            ``max_steps`` or ``token_budget`` one. It must hold, and
            ``reason`` must be its kind.
    """

    reason: str = "stop_condition"
    condition: StopCondition | None = None
    kind: Literal["stop_requested"] = "stop_requested"


@attrs.frozen
class StepLimitChanged:
    """The caller set a new ``max_steps`` (model calls per turn), usually on resume.

    The new limit is stored in the config. A run that finished because it
    reached the old limit continues (back to ``awaiting_model``) when the new
    one allows more calls this turn; a run waiting for its next model call
    finishes when the new limit is already reached. A limit below the calls
    this turn has already made is refused.

    Attributes:
        max_steps: The new limit, at least 1.
    """

    max_steps: int
    kind: Literal["step_limit_changed"] = "step_limit_changed"


@attrs.frozen
class AttemptDropped:
    """A failed attempt left the log to run again; the model calls it made stay counted.

    `retry_state` rebuilds a failed run without the events that failed it: an
    answer that did not fit the output type, or the results of calls whose
    sub-runs ended with an error of their own (they start over). The provider
    billed those model calls all the same, so it appends this event, with what
    they used, to the log it rebuilds: ``usage`` is added to
    `RunState.usage`, ``sub_run_usage`` counts in `RunState.tree_usage`.
    The error ``on_tool_error="raise"`` raises carries one too: its state
    holds the results of the step's calls that ended and the failed calls
    still to run, without the sub-runs (agents used as tools) the failed
    calls made, whose usage it keeps in ``sub_run_usage``. So does the error
    of a model's stream that failed after its provider reported usage (a
    stream cut midway), in ``usage``: that call was billed.

    Attributes:
        usage: Usage of the run's own dropped answer (the one its output
            type rejected, or a failed stream's), before the model is asked
            again; the run then waits for its model (``awaiting_model``).
        sub_run_usage: Usage of the dropped sub-runs (their `tree_usage`),
            before their calls run again (``running_tools``).
    """

    usage: Usage = NO_USAGE
    sub_run_usage: Usage = NO_USAGE
    kind: Literal["attempt_dropped"] = "attempt_dropped"


@attrs.frozen
class RunFailed:
    """The driver could not go on (model error, tool error, cancellation).

    Attributes:
        error_kind: A short name: ``model_error``, ``tool_error``, ``cancelled``...
        message: What went wrong.
        tool_name: The tool involved, if any.
    """

    error_kind: str
    message: str
    tool_name: str | None = None
    kind: Literal["run_failed"] = "run_failed"

    def __repr__(self) -> str:
        return fields(
            "RunFailed",
            [
                ("error_kind", excerpt(self.error_kind)),
                ("message", excerpt(self.message)),
                ("tool_name", None if self.tool_name is None else excerpt(self.tool_name)),
            ],
        )


Event = Union[  # noqa: UP007
    RunStarted,
    UserMessageAdded,
    ModelResponded,
    ToolReturned,
    ApprovalGranted,
    ApprovalDenied,
    ToolResultsProvided,
    OutputAccepted,
    OutputRejected,
    StopRequested,
    StepLimitChanged,
    RunFailed,
    ToolSuspended,
    CallResumed,
    HandedOff,
    AttemptDropped,
]

EVENT_TYPES: tuple[type[Any], ...] = (
    RunStarted,
    UserMessageAdded,
    ModelResponded,
    ToolReturned,
    ApprovalGranted,
    ApprovalDenied,
    ToolResultsProvided,
    OutputAccepted,
    OutputRejected,
    StopRequested,
    StepLimitChanged,
    RunFailed,
    ToolSuspended,
    CallResumed,
    HandedOff,
    AttemptDropped,
)

EventKind = Literal[
    "run_started",
    "user_message_added",
    "model_responded",
    "tool_returned",
    "approval_granted",
    "approval_denied",
    "tool_results_provided",
    "output_accepted",
    "output_rejected",
    "stop_requested",
    "step_limit_changed",
    "run_failed",
    "tool_suspended",
    "call_resumed",
    "handed_off",
    "attempt_dropped",
]
