"""What a run gives back: `Response`, its `Step`s, and the events `stream` yields."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar, Union

import attrs

from toolfold.runtime.core._messages import Message, ToolCallPart, ToolResultPart, Usage
from toolfold.runtime.core._repr import excerpt, fields, short
from toolfold.runtime.core._request import ModelResponse

# At run time, not only for type checkers: `typing.get_type_hints` resolves
# `Response.__init__` and `Step.__init__` with it.
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._stream import (
    MediaOutput,
    ReasoningDelta,
    ResponseInfo,
    StreamFinish,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageUpdate,
)
from toolfold.toolkit._frozen import FrozenDict, new_frozen_dict

if TYPE_CHECKING:
    # typing_extensions' TypeVar takes a default (PEP 696; typing's from Python 3.13):
    # a bare ``Response`` annotation is a ``Response[Any]`` (``output`` is Any), as
    # before it was generic. Type checkers ship its stubs; at run time the default
    # changes nothing.
    from typing_extensions import TypeVar as _TypeVarWithDefault

    OutputT_co = _TypeVarWithDefault("OutputT_co", covariant=True, default=Any)
else:
    OutputT_co = TypeVar("OutputT_co", covariant=True)

RunFinishReason = Literal[
    "stop",
    "max_steps",
    "tool_calls",
    "approval_required",
    "length",
    "content_filter",
    "other",
    "token_budget",
    "tool_called",
    "stop_condition",
    "max_iterations",
    "error",
]


@attrs.frozen
class Step:
    """One model round: the response, the calls it made and their results.

    Attributes:
        index: The step number, from 1.
        response: The model's response.
        tool_calls: The calls the response made.
        tool_results: The results those calls got so far, in call order.
        usage: Tokens this step's model call used.
        sub_runs: The sub-runs of the step's calls (agents and workflows used
            as tools) by call id: finished, or as they wait for the caller
            (read-only: a response reads its steps once).
    """

    index: int
    response: ModelResponse
    tool_calls: tuple[ToolCallPart, ...]
    tool_results: tuple[ToolResultPart, ...]
    usage: Usage
    sub_runs: Mapping[str, RunState] = attrs.field(factory=dict, eq=False, repr=False)

    def __repr__(self) -> str:
        # The full response is one attribute away (`response`).
        return fields(
            type(self).__name__,
            [
                ("index", self.index),
                ("finish_reason", repr(self.response.finish_reason)),
                ("text", excerpt(self.text) if self.text else None),
                ("tool_calls", _names(self.tool_calls)),
                ("tool_results", len(self.tool_results) or None),
                ("usage", repr(self.usage)),
            ],
        )

    @property
    def text(self) -> str:
        """The text of the step's response."""
        return self.response.text


def _names(calls: tuple[ToolCallPart, ...]) -> str | None:
    return f"[{', '.join(repr(call.name) for call in calls)}]" if calls else None


def steps_of(state: RunState) -> tuple[Step, ...]:
    """The steps of a run, rebuilt from its event log and conversation."""
    # Results in conversation order, per call id: a model may reuse an id in a later step.
    results: dict[str, list[ToolResultPart]] = {}
    for message in state.conversation:
        if message.role == "tool":
            for result in message.tool_results:
                results.setdefault(result.call_id, []).append(result)
    for call_state in state.calls:  # results not yet committed to the conversation
        committed = results.setdefault(call_state.call.id, [])
        if call_state.result is not None and call_state.result not in committed:
            committed.append(call_state.result)
    steps: list[Step] = []
    children: dict[str, RunState] = {}
    for event in state.log:
        if event.kind == "model_responded":
            response = event.response
            calls = response.tool_calls
            found = tuple(results[c.id].pop(0) for c in calls if results.get(c.id))
            children = {}
            steps.append(Step(len(steps) + 1, response, calls, found, response.usage, children))
        elif event.kind in ("tool_returned", "tool_suspended") and event.child is not None:
            children[event.call_id] = event.child
    for step in steps:  # each read of `steps` hands out these: no dict to change under another
        object.__setattr__(step, "sub_runs", new_frozen_dict(FrozenDict, step.sub_runs))
    # the current step's calls hold their sub-runs' latest states (resumed since they waited)
    children.update((c.call.id, c.child) for c in state.calls if c.child is not None)
    return tuple(steps)


class _Kept:
    """A response's own slot for what it reads from its state once (see `Response.steps`).

    Not an attrs field: the slot stays out of equality, hashing, the repr,
    pickling and ``attrs.evolve`` (a copy reads its state again).
    """

    __slots__ = ("_kept",)


def kept(response: Any, key: str, make: Callable[[], Any]) -> Any:
    """``make()``, made once per response (its state never changes) under ``key``."""
    try:
        held: dict[str, Any] = response._kept
    except AttributeError:
        held = {}
        object.__setattr__(response, "_kept", held)
    if key in held:
        return held[key]
    value = held[key] = make()
    return value


@attrs.frozen
class Response(_Kept, Generic[OutputT_co]):
    """The result of a run (or of a run suspended for the caller).

    Generic over the run's output type, for type checkers only: an agent's
    ``run`` gives a ``Response[Weather]`` for ``output_type=Weather`` and a
    ``Response[str]`` without one; a bare ``Response`` is ``Response[Any]``,
    whose ``output`` is Any.

    Attributes:
        state: The run's state: serialize it with ``state.to_json()``, pass it
            to ``resume`` to go on.
        output: The structured answer when the run had an ``output_type``,
            else the answer text. None when the run stopped without an
            answer: it waits for the caller (``finish_reason``
            ``"approval_required"`` or ``"tool_calls"``) or stopped at
            ``"max_steps"`` or by a stop condition. Type checkers see the
            output type all the same (``Weather``, not ``Weather | None``, as
            in pydantic-ai): where a run can stop early, check
            ``output is not None`` (or ``finish_reason``) before reading it.
    """

    # What a tool returning one is told (`toolfold.toolkit._results.run_kind`): its
    # JSON would give the model the other run's instructions, messages and config.
    _no_tool_result: ClassVar[str] = (
        "return response.text or response.output (or run the agent as a tool: agent.as_tool())"
    )

    state: RunState
    # Typed as the output, not Optional, so `response.output.city` type-checks
    # as it did when `output` was Any; None is the value of a run that stopped
    # without an answer (see the docstring).
    output: OutputT_co = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        # The whole run is one attribute away (`state`, `steps`, `messages`).
        text = self.text
        structured = self.output is not None and self.output != text
        return fields(
            type(self).__name__,
            [
                ("finish_reason", repr(self.finish_reason)),
                ("text", excerpt(text)),
                ("output", short(self.output) if structured else None),
                ("steps", self._step_count()),
                ("pending_approvals", _names(self.pending_approvals)),
                ("tool_calls", _names(self.tool_calls)),
                ("usage", repr(self.usage)),
                ("run_id", repr(self.run_id)),
            ],
        )

    def _step_count(self) -> int:
        return self.state.step

    def to_html(self, *, title: str | None = None) -> str:
        """The run as one self-contained HTML page: a timeline of its steps.

        Each step shows the model's text and reasoning, each tool call with its
        arguments, result or error, duration and how it was handled (auto,
        approved, denied, manual), usage per step and in total, and where the
        run suspended and resumed. Nothing in the page loads from the network.
        ``toolfold view STATE.json`` writes the same page from a stored state.
        """
        from toolfold.runtime._view import to_html

        return to_html(self.state, title=title)

    @property
    def text(self) -> str:
        """The text of the last model response."""
        return self.state.last_text

    @property
    def finish_reason(self) -> RunFinishReason:
        """Why the run stopped.

        ``stop`` (the model answered), ``max_steps``, ``length``,
        ``content_filter``, ``other`` (the provider ended the answer for a
        reason it gives no normalised word for: it may be incomplete),
        ``tool_calls`` (calls wait for the caller's results),
        ``approval_required`` (calls wait for approvals), ``error``, the
        reason of a stop condition (``token_budget``, ``tool_called``,
        ``stop_condition``), or ``max_iterations``: a workflow's `Loop` ran
        out of iterations before its ``until`` held (its output is the
        last iteration's).
        """
        phase = self.state.phase
        if phase == "awaiting_approval":
            return "approval_required"
        if phase == "awaiting_tool_results":
            return "tool_calls"
        if phase == "failed":
            return "error"
        return self.state.finish_reason or "stop"  # type: ignore[return-value]

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """Calls that were not executed and wait for the caller's results."""
        return self.state.tool_calls

    @property
    def pending_approvals(self) -> tuple[ToolCallPart, ...]:
        """Calls that wait for an approval (see ``resume(approvals=...)``)."""
        return self.state.pending_approvals

    @property
    def messages(self) -> tuple[Message, ...]:
        """The whole conversation, to continue it in a new run."""
        return self.state.messages

    @property
    def usage(self) -> Usage:
        """Usage summed over every model call of the run and of its sub-runs (agents as tools)."""
        return self.state.tree_usage

    @property
    def steps(self) -> tuple[Step, ...]:
        """Every step of the run, in order (read from the state once per response)."""
        return kept(self, "steps", lambda: steps_of(self.state))  # type: ignore[no-any-return]

    @property
    def agent(self) -> str | None:
        """The name of the agent that answered last (the last one handed to), if named."""
        return self.state.agent

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.state.run_id


# --- stream events -------------------------------------------------------------


@attrs.frozen
class StepStartEvent:
    """A step begins: the model is about to be called."""

    step: int
    kind: Literal["step_start"] = "step_start"


@attrs.frozen
class ToolCallEvent:
    """The model called a tool; ``disposition`` says what happens to the call.

    Attributes:
        call: The call.
        disposition: ``execute``, ``approve`` (waits for an approval) or
            ``return`` (goes back to the caller).
    """

    call: ToolCallPart
    disposition: str
    kind: Literal["tool_call"] = "tool_call"


@attrs.frozen
class ToolResultEvent:
    """A call got its result.

    Attributes:
        result: The result as the model will see it.
        outcome: ``ok``, ``error``, ``invalid_arguments``, ``timeout``,
            ``denied`` or ``unknown_tool``.
    """

    result: ToolResultPart
    outcome: str
    kind: Literal["tool_result"] = "tool_result"


@attrs.frozen
class OutputInvalidEvent:
    """The final answer did not fit the output type (``output_type``).

    It goes back to the model, which answers again in a new step; once
    ``output_retries`` are used up the run fails with `OutputValidationError`
    right after this event. The same rejection is the run's `OutputRejected`
    event (`on_event`), whose kind, ``output_rejected``, this stream kind
    (``output_invalid``) differs from: code keyed by ``kind`` over both
    unions tells them apart.

    Attributes:
        step: The index of the step whose answer was rejected.
        message: What was wrong, as the model is told.
    """

    step: int
    message: str
    kind: Literal["output_invalid"] = "output_invalid"


@attrs.frozen
class StepEndEvent:
    """A step is complete: its calls all have results."""

    step: Step
    kind: Literal["step_end"] = "step_end"


@attrs.frozen
class RunEndEvent:
    """The run returned (finished, or suspended for the caller)."""

    response: Response
    kind: Literal["run_end"] = "run_end"


@attrs.frozen
class SubRunEvent:
    """An event of a sub-run (an agent used as a tool), tagged with where it happened.

    A streaming caller sees a sub-agent's events live, as the sub-agent runs
    (those of calls running at once interleaved), each wrapped once with the
    full path from the top run.

    Attributes:
        path: Tool name and call id per level, from the top: ``("researcher",
            "call_2")``, or ``("mid", "call_1", "bottom", "call_1")`` two deep.
        event: The sub-run's own event (never another `SubRunEvent`).
    """

    path: tuple[str, ...]
    event: Any
    kind: Literal["sub_run"] = "sub_run"


RunStreamEvent = Union[  # noqa: UP007
    StepStartEvent,
    TextDelta,
    ReasoningDelta,
    ToolCallStart,
    ToolCallDelta,
    ToolCallEnd,
    UsageUpdate,
    StreamFinish,
    ResponseInfo,
    MediaOutput,
    ToolCallEvent,
    ToolResultEvent,
    OutputInvalidEvent,
    StepEndEvent,
    RunEndEvent,
    SubRunEvent,
]
"""What ``Agent.stream`` yields: step boundaries, the model's stream events as
they arrive, tool calls and results, and finally the response."""
