"""`next_effect(state) -> Effect`: what the driver must do next (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from toolfold._errors import RunError
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._effects import (
    AwaitApproval,
    AwaitToolResults,
    CallModel,
    Effect,
    Finish,
    RunTools,
    ToolInvocation,
    ValidateOutput,
)
from toolfold.runtime.core._messages import thaw
from toolfold.runtime.core._request import ModelRequest
from toolfold.runtime.core._state import RunState, not_a_state, refuse_non_state

if TYPE_CHECKING:
    from toolfold.runtime.core._events import Event

_NOT_FORCING = (None, "auto", "none")

# Built from the state's own values (see `builder`): made for every model call and tool call.
_call_model = builder(CallModel)
_invocation = builder(ToolInvocation)
_request = builder(ModelRequest)
_finish = builder(Finish)


def next_effect(state: RunState) -> Effect:
    """What must happen next for ``state``; never None.

    ``awaiting_model`` gives `CallModel`; ``running_tools`` gives `RunTools`
    (the calls still without a result); ``awaiting_approval`` gives
    `AwaitApproval`; ``awaiting_tool_results`` gives `AwaitToolResults`;
    ``validating_output`` gives `ValidateOutput`; ``finished`` and ``failed``
    give `Finish`.

    Raises:
        RunError: The state has not started (phase ``new``).
        UsageError: ``state`` is no `RunState`.
    """
    try:
        phase = state.phase
    except AttributeError:
        raise not_a_state("next_effect", state) from None
    if phase == "awaiting_model":
        step = state.step + 1
        keyed = step + earlier_steps(state)
        return _call_model(build_request(state), step, f"{state.run_id}:{keyed}:model")
    if phase == "running_tools":
        # A loop, not a comprehension (a function object and a frame in 3.11): every step
        # of a run that is streamed or observed asks for its calls here.
        invocations = []
        keyed = state.step + earlier_steps(state)
        for c in state.calls:
            if c.status == "to_run":
                key = f"{state.run_id}:{keyed}:{c.index}"
                invocations.append(_invocation(c.call, c.index, state.step, key, c.child))
        return RunTools(invocations)
    if phase == "awaiting_approval":
        return AwaitApproval(state.pending_approvals, state.tool_calls)
    if phase == "awaiting_tool_results":
        return AwaitToolResults(state.tool_calls)
    if phase == "validating_output":
        assert state.config.output is not None  # the reducer enters this phase only with one
        return ValidateOutput(state.last_text, state.config.output)
    if phase == "finished":
        return _finish(state.finish_reason or "stop", state.output)
    if phase == "failed":
        return _finish("error", None, state.error)
    if not isinstance(state, RunState):
        raise not_a_state("next_effect", state)
    raise RunError("the run has not started: reduce a RunStarted event first", state)


def earlier_steps(state: RunState) -> int:
    """The model responses before the run's own (`RunStarted.earlier_steps`), 0 if none.

    Counted on by the step of its idempotency keys (its model requests' and
    tool calls'): a conversation continued with ``history=`` under the same
    run id gets new keys; a run whose history holds no model response (and a
    run whose log was written before they were counted) the keys
    ``<run id>:<step>:<index>`` and ``<run id>:<step>:model`` it always got.
    """
    return getattr(state.log.first, "earlier_steps", 0)


_TURN_STARTS = ("run_started", "user_message_added")


def _taken_over_unanswered(state: RunState) -> bool:
    """Whether the agent running ``state`` was just handed it and has not answered in this turn.

    Its forcing ``tool_choice`` then applies to this step, as its own run's
    first step: once per agent per turn, so a run handed back to a forcing
    router (triage ``"required"``, billing handing back) ends as a run
    without handoffs would, where forcing it again would send it back and
    forth until ``max_steps``. Read from the log's end, back to the turn's
    start: a handoff after the last model response (the events between are
    the transfer step's results, a dropped attempt...), and no model
    response of this agent before it in the turn.
    """
    log = state.log
    me = state.agent
    taken = False  # the handoff to ``me`` after the last response is seen
    answered = False  # a model response in the part of the turn being read
    for index in range(len(log) - 1, -1, -1):
        kind = log[index].kind
        if kind == "model_responded":
            if not taken:
                return False  # answered since it took over
            answered = True
        elif kind == "handed_off":
            if taken and answered and getattr(log[index], "agent", None) == me:
                return False  # it ran earlier in this turn and answered then
            taken, answered = True, False
        elif kind in _TURN_STARTS:
            return taken and not (answered and _agent_at(log, index) == me)
    return False


def _agent_at(log: Sequence[Event], index: int) -> str | None:
    """The agent running the run at ``log[index]``: the last handoff's target, or its starter."""
    for back in range(index, -1, -1):
        event = log[back]
        if event.kind == "handed_off" or event.kind == "run_started":
            agent: str | None = getattr(event, "agent", None)
            return agent
    return None


def build_request(state: RunState) -> ModelRequest:
    """The model request for the next step.

    The config's instructions go first as a system message; then the
    conversation. A forcing ``tool_choice`` (``"required"`` or a tool name)
    applies to the first step of a turn only when ``reset_tool_choice`` is set
    (the default): later steps use ``"auto"``, otherwise the model could never
    give a final answer. An agent handed the run applies its own forcing
    choice to its first step after it takes over, as its own run would,
    unless it has already answered in this turn (`_taken_over_unanswered`):
    never twice per agent per turn.

    Raises:
        UsageError: ``state`` is no `RunState`.
    """
    try:
        config = state.config
        # The fields themselves, not their properties (a call each, for every request).
        messages = state.conversation.as_tuple()
    except AttributeError as error:
        refuse_non_state("build_request", state, error)
    try:
        system = config._system
    except AttributeError:  # a config unpickled from a version without the slot
        system = config.system_message
    if system is not None:
        messages = (system, *messages)
    choice = config.tool_choice
    if (
        choice not in _NOT_FORCING
        and config.reset_tool_choice
        and state.turn_steps > 0
        and not _taken_over_unanswered(state)
    ):
        choice = "auto"
    return _request(
        messages,
        config._definitions,
        choice,
        config.output,
        # A plain deep copy: an adapter or a custom model edits (and dumps, with
        # yaml.safe_dump...) its own request's settings, never the state's.
        thaw(config.settings),
    )
