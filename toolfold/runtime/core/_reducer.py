"""`reduce(state, event) -> state`: the run's only transition function.

Pure: no I/O, no clock, no randomness, inputs never mutated. Which event each
phase accepts, and which phases it may lead to, is the one table
`TRANSITIONS`; anything else raises `InvalidEventError` naming the phase and
the event. A failed run keeps its cause and refuses every later event.

Invariant: every tool call of a step gets exactly one result (ok, error or
denied) before the next model call; the results are committed to the
conversation in call order when the step's last one arrives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from toolfold._errors import InvalidEventError, UsageError
from toolfold.runtime.core import _steps
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._events import (
    EVENT_TYPES,
    AttemptDropped,
    Event,
    EventKind,
    HandedOff,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    RunFailed,
    RunStarted,
    StepLimitChanged,
    StopRequested,
    UserMessageAdded,
)
from toolfold.runtime.core._log import Log
from toolfold.runtime.core._messages import (
    NO_USAGE,
    FrozenDict,
    FrozenList,
    Message,
    NotJSONError,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    frozen_json,
    is_count_value,
)
from toolfold.runtime.core._repr import short
from toolfold.runtime.core._state import (
    Phase,
    RunFailure,
    RunState,
    not_a_state,
    refuse_non_state,
)
from toolfold.runtime.core._steps import Changes, boundary, evolve, fail, refused, summed_usage
from toolfold.runtime.core._stop import (
    MaxSteps,
    TokenBudget,
    ToolCalled,
    describe_condition,
    has_tree_budget,
    holding_reason,
)

_TOOLS: tuple[Phase, ...] = (
    "running_tools",
    "awaiting_approval",
    "awaiting_tool_results",
    "awaiting_model",
    "finished",
    "failed",
)

TRANSITIONS: Mapping[Phase, Mapping[EventKind, tuple[Phase, ...]]] = {
    "new": {"run_started": ("awaiting_model",)},
    "awaiting_model": {
        "model_responded": ("validating_output", *_TOOLS),
        "user_message_added": ("awaiting_model",),
        "stop_requested": ("finished",),
        "step_limit_changed": ("awaiting_model", "finished"),
        "run_failed": ("failed",),
        "handed_off": ("awaiting_model",),
        # `retry_state`: a rejected answer dropped, the model to be asked again
        "attempt_dropped": ("awaiting_model",),
    },
    "running_tools": {
        "tool_returned": _TOOLS,
        "tool_suspended": _TOOLS,
        "approval_granted": _TOOLS,
        "approval_denied": _TOOLS,
        "tool_results_provided": _TOOLS,
        # answers for several suspended sub-runs: the first one's leaves the step running
        "call_resumed": _TOOLS,
        "step_limit_changed": ("running_tools",),
        "run_failed": ("failed",),
        # `retry_state` (or an on_tool_error="raise" error's state): sub-runs dropped,
        # their calls to run again
        "attempt_dropped": ("running_tools",),
    },
    "awaiting_approval": {
        "approval_granted": _TOOLS,
        "approval_denied": _TOOLS,
        "tool_results_provided": _TOOLS,
        "call_resumed": _TOOLS,
        "step_limit_changed": ("awaiting_approval",),
        "run_failed": ("failed",),
    },
    "awaiting_tool_results": {
        "tool_results_provided": _TOOLS,
        "call_resumed": _TOOLS,
        "step_limit_changed": ("awaiting_tool_results",),
        "run_failed": ("failed",),
    },
    "validating_output": {
        "output_accepted": ("finished",),
        "output_rejected": ("awaiting_model", "finished", "failed"),
        "step_limit_changed": ("validating_output",),
        "run_failed": ("failed",),
    },
    "finished": {
        "user_message_added": ("awaiting_model",),
        "step_limit_changed": ("finished", "awaiting_model"),
        # the step that reached max_steps called a transfer tool: its tools ran, so
        # the handoff happens, and the run stays stopped with the new agent
        "handed_off": ("finished",),
    },
    "failed": {},
}
"""Which events each phase accepts, and the phases each may lead to."""


_EVENT_CLASSES = frozenset(EVENT_TYPES)

# Frozen, so every run may share it (one config fewer to build per run).
_DEFAULT_CONFIG = RunConfig()


# Built from values of the fields' final types (see `builder`).
_blank = builder(RunState)
_usage = builder(Usage)
_started = builder(RunStarted)


def blank_state() -> RunState:
    """A run that has not started: it accepts only `RunStarted`."""
    return _blank("", "new", _DEFAULT_CONFIG, Log())


# Read by `initial_state`, never reduced into (its log is never appended to).
_BLANK = blank_state()


def initial_state(
    messages: str | Iterable[Message] = (),
    config: RunConfig | None = None,
    *,
    run_id: str,
    agent: str | None = None,
    earlier_steps: int | None = None,
) -> RunState:
    """The state of a run that has just started.

    Args:
        messages: The conversation to start from: a prompt (a user message)
            or messages (history, then the prompt).
        config: The run's configuration.
        run_id: The run's id (the driver makes it; the core reads no uuid).
        agent: The name of the agent that runs it.
        earlier_steps: `RunStarted.earlier_steps`; None counts the assistant
            messages of ``messages`` (a run remade from a stored one passes
            that run's, so its calls keep their idempotency keys).

    Raises:
        UsageError: ``run_id`` is no str, ``agent`` neither a str nor None,
            or ``messages`` neither a str nor an iterable (bytes and a dict included).
        InvalidEventError: The history or the config is refused (as `reduce`
            refuses their `RunStarted`).
    """
    if type(run_id) is not str and not isinstance(run_id, str):
        raise UsageError(
            f"initial_state(): run_id must be a str, got {type(run_id).__name__} {run_id!r}"
        )
    if agent is not None and not isinstance(agent, str):
        raise UsageError(
            f"initial_state(): agent must be a str or None, got {type(agent).__name__} {agent!r}"
        )
    given: object = messages
    if isinstance(given, (bytes, bytearray, memoryview)):  # iterable, but of ints
        raise UsageError(
            f"initial_state(): messages must be a prompt (a str) or an iterable of Messages, "
            f"got {type(given).__name__} {given!r:.60} (decode binary text first)"
        )
    if isinstance(given, Mapping):  # iterable, but of its keys
        raise UsageError(
            f"initial_state(): messages must be a prompt (a str) or an iterable of Messages, "
            f"got a {type(given).__name__} {given!r:.60}, which is no message list (its keys "
            f"would be read as messages): give [Message.user(...)] (a Message, not a dict)"
        )
    try:
        initial = (Message.user(messages),) if isinstance(messages, str) else tuple(messages)
    except TypeError:
        if hasattr(messages, "__iter__"):
            raise  # the iterable's own failure
        raise UsageError(
            f"initial_state(): messages must be a prompt (a str) or an iterable of Messages, "
            f"got {type(messages).__name__} {messages!r:.60}"
        ) from None
    # `initial_state` makes the messages a tuple: the event's converter would only copy it.
    earlier = earlier_steps
    if earlier is None:  # (0 without history: a first run's keys are what they always were)
        earlier = sum(1 for m in initial if getattr(m, "role", None) == "assistant")
    event = _started(run_id, config or _DEFAULT_CONFIG, initial, agent, earlier_steps=earlier)
    # `reduce(blank_state(), event)` without a blank state to build per run: the
    # shared one is only read (the new state gets a log of its own). A refused
    # event goes through `reduce` on a fresh blank state, which raises the same
    # error with a state no other run shares.
    changes: Changes = {}
    try:
        _run_started(_BLANK, event, changes)
    except InvalidEventError:
        return reduce(blank_state(), event)
    changes["log"] = Log((event,))
    return evolve(_BLANK, changes)


def reduce(state: RunState, event: Event) -> RunState:
    """The state after ``event``; ``state`` itself is never changed.

    Raises:
        UsageError: ``state`` is no `RunState`.
        InvalidEventError: The event is not allowed in the state's phase, or
            contradicts the state (unknown call id, second result for a call,
            a result for a call awaiting approval...), or is no event at
            all. The state is attached.
    """
    if type(event) not in _EVENT_CLASSES and not isinstance(event, EVENT_TYPES):
        if not isinstance(state, RunState):
            raise not_a_state("reduce", state)
        got = type(event).__name__
        raise refused(state, got, f"expected an event, got {got} {event!r:.60}")
    kind = event.kind
    try:
        targets = TRANSITIONS[state.phase].get(kind)
    except (AttributeError, KeyError) as error:
        # Only here is the state's type tested: a state costs no test on the way in.
        refuse_non_state("reduce", state, error)
    if targets is None:
        raise refused(state, kind, _why_not(state, event))
    changes: Changes = {}
    _HANDLERS[kind](state, event, changes)
    phase = changes.get("phase", state.phase)
    if phase not in targets:  # pragma: no cover - guards the table against the handlers
        raise AssertionError(f"{kind} led from {state.phase} to {phase}, not in the table")
    changes["log"] = state.log.append(event)
    return evolve(state, changes)


class OpenStep:
    """A step whose tool calls are to run: ``reduce(base, responded)``, not built yet.

    A tool loop makes two states per step: one after the model's response
    (``running_tools``), one after its calls' results. The first is read only
    for the calls to run, their step and the conversation they see, which
    ``changes`` holds; `close` reduces the results into the state after the
    step in one go. Both give exactly the states and the log that reducing
    each event in turn gives (`state` builds the first one on demand).

    Attributes:
        base: The state before the response.
        responded: The response's event.
        changes: What ``reduce(base, responded)`` changes (field name to
            value, without the log); its ``calls`` and ``conversation`` are
            the step's.
    """

    __slots__ = ("base", "changes", "responded")

    def __init__(self, base: RunState, responded: ModelResponded, changes: Changes) -> None:
        self.base = base
        self.responded = responded
        self.changes = changes

    @property
    def state(self) -> RunState:
        """The state after the response: ``reduce(base, responded)``."""
        return evolve(self.base, {**self.changes, "log": self.base.log.append(self.responded)})

    def close(self, events: Sequence[Event]) -> RunState:
        """The state after ``events`` (the calls' results), as reducing each in turn gives.

        Call it once: it reuses ``changes``. A run of `ToolReturned` events
        is reduced in one pass; anything else (another kind, an event the
        state refuses) is reduced one event at a time, so a refusal raises
        the same `InvalidEventError`, with the same state, as `reduce`.

        Raises:
            InvalidEventError: As `reduce`.
        """
        base, changes = self.base, self.changes
        log = base.log.append(self.responded)
        if len(events) == 1 and changes["phase"] == "running_tools":
            changes["log"] = log  # what a stop condition sees at the step's boundary
            if _steps.returned_one(base, changes, events[0]):
                changes["log"] = log.append(events[0])
                return evolve(base, changes)
        elif len(events) > 1 and changes["phase"] == "running_tools":
            # Many results: put in place at once, where the loop below looks each call up.
            full = log.extend(events)
            # What a stop condition sees at the step's boundary: the log before the last result.
            changes["log"] = full.prefix(len(full) - 1)
            if _steps.returned_all(base, changes, events):
                changes["log"] = full
                return evolve(base, changes)
        try:
            for event in events:
                if event.kind != "tool_returned" or changes["phase"] != "running_tools":
                    raise _Unfused
                changes["log"] = log  # what a stop condition sees at the step's boundary
                _steps.tool_returned(base, event, changes)
                log = log.append(event)
        except (_Unfused, InvalidEventError):
            state = reduce(base, self.responded)
            for event in events:
                state = reduce(state, event)
            return state
        changes["log"] = log
        return evolve(base, changes)


class _Unfused(Exception):
    """An event `OpenStep.close` does not reduce in one pass."""


def open_step(state: RunState, event: ModelResponded) -> RunState | OpenStep:
    """``reduce(state, event)``, or an `OpenStep` when the response has calls to run.

    Raises:
        InvalidEventError: As `reduce`.
    """
    if state.phase != "awaiting_model" or event.kind != "model_responded":
        return reduce(state, event)
    stop_when = state.config.stop_when
    if stop_when and has_tree_budget(stop_when):  # its tools' jobs read the state (`handed_budget`)
        return reduce(state, event)
    changes: Changes = {}
    _steps.model_responded(state, event, changes)
    if changes.get("phase") != "running_tools":
        changes["log"] = state.log.append(event)
        return evolve(state, changes)
    return OpenStep(state, event, changes)


def transition_table() -> str:
    """The transition table as a Markdown table (used by the docs)."""
    rows = ["| phase | event | next phases |", "|---|---|---|"]
    for phase, events in TRANSITIONS.items():
        if not events:
            rows.append(f"| `{phase}` | (none: terminal) | |")
        for kind, targets in events.items():
            rows.append(f"| `{phase}` | `{kind}` | {', '.join(f'`{t}`' for t in targets)} |")
    return "\n".join(rows)


def transition_diagram() -> str:
    """The transition table as a Mermaid state diagram (used by the docs)."""
    lines = ["stateDiagram-v2", "    [*] --> new"]
    for phase, events in TRANSITIONS.items():
        for kind, targets in events.items():
            lines.extend(f"    {phase} --> {target}: {kind}" for target in targets)
    lines.extend(["    finished --> [*]", "    failed --> [*]"])
    return "\n".join(lines)


def _why_not(state: RunState, event: Event) -> str:
    if state.phase == "failed" and state.error is not None:
        return (
            f"the run failed ({state.error.kind}: {state.error.message}) and accepts no more events"
        )
    if state.phase == "finished":
        return "the run finished; add a user message to start a new turn"
    allowed = ", ".join(TRANSITIONS[state.phase]) or "nothing"
    reason = f"this phase accepts: {allowed}"
    call_id = getattr(event, "call_id", None)
    for call in state.calls:
        if call.call.id == call_id:
            reason += f"; call {call_id!r} to {call.call.name!r} {_steps.WHY[call.status]}"
    return reason


# --- handlers of the events that are not about tool calls (see _steps) -----


def _refuse_bad_tools(state: RunState, kind: str, config: Any, agent: str | None = None) -> None:
    """Refuse ``kind`` when its config is no `RunConfig` or gives two tools one name.

    ``agent``: the agent a handoff switches to, named in the refusal (None: a run's start).
    """
    if not isinstance(config, RunConfig):
        # (read for its tools at once: anything else would fail as an AttributeError)
        of = "" if agent is None else f" of agent {agent!r}"
        raise refused(
            state, kind, f"the config{of} must be a RunConfig, got {type(config).__name__}"
        )
    # Read from the tools now, not from the config's index by name: a duck-typed
    # definition may have been renamed since the config was made.
    names = config.tool_names
    if len(set(names)) != len(names):
        duplicates = ", ".join(sorted({n for n in names if names.count(n) > 1}))
        of = "" if agent is None else f" in the configuration of agent {agent!r}"
        raise refused(state, kind, f"duplicate tool names{of}: {duplicates}")


def _run_started(state: RunState, event: RunStarted, changes: Changes) -> None:
    # (a stored log holds text here: its run id is a str, its agent a str or None)
    if type(event.run_id) is not str and not isinstance(event.run_id, str):
        raise refused(state, event.kind, f"the run id must be a str, got {event.run_id!r}")
    if event.agent is not None and not isinstance(event.agent, str):
        raise refused(state, event.kind, f"the agent must be a str or None, got {event.agent!r}")
    earlier = event.earlier_steps
    if type(earlier) is not int or earlier < 0:
        raise refused(state, event.kind, f"earlier_steps must be an int >= 0, got {earlier!r}")
    _refuse_bad_tools(state, event.kind, event.config)
    problem = _steps.messages_problem(event.messages, ("system", "user", "assistant", "tool"))
    if problem:
        raise refused(state, event.kind, f"the history: {problem}")
    unanswered = _unanswered_calls(event.messages)
    if unanswered:
        raise refused(
            state,
            event.kind,
            f"the history has tool calls without results: {', '.join(unanswered)}; "
            "every call needs a tool result before the next assistant message",
        )
    changes.update(
        run_id=event.run_id,
        phase="awaiting_model",
        config=event.config,
        conversation=Log(event.messages),
        agent=event.agent,
    )


def _unanswered_calls(messages: tuple[Message, ...]) -> list[str]:
    # Providers reject a request whose history leaves a call unanswered, so say
    # which ones at the start rather than on the first model call.
    for message in messages:
        if message.role == "assistant":
            break
    else:  # no assistant message: no call, so none unanswered (a prompt)
        return []
    open_calls: dict[str, str] = {}
    missing: list[str] = []
    for message in messages:
        if message.role == "assistant":
            missing.extend(f"{i!r} ({n})" for i, n in open_calls.items())
            open_calls = {c.id: c.name for c in message.tool_calls}
        elif not open_calls:  # nothing a result could answer (a prompt): no parts to scan
            continue
        for result in message.tool_results:
            open_calls.pop(result.call_id, None)
    if open_calls:
        missing.extend(f"{i!r} ({n})" for i, n in open_calls.items())
    return missing


def handed_conversation_problem(messages: tuple[Message, ...]) -> str:
    """What keeps a handoff's filtered conversation from any provider ("" if nothing).

    A tool call left without its result, or what `history_problem` refuses
    in a new run's history (a result that answers no call...). Checked where
    a run hands off (`toolfold.runtime.drive._handoff.handed_off`); `HandedOff`
    itself refuses only the calls without results, so a stored log replays as
    it did.
    """
    unanswered = _unanswered_calls(messages)
    if unanswered:
        return f"it has tool calls without results: {', '.join(unanswered)}"
    return history_problem(messages)


def history_problem(messages: Iterable[Message]) -> str:
    """What in a new run's history is not a well-formed conversation ("" if nothing), beyond `RunStarted`'s checks.

    A tool call outside an assistant message, a tool result outside a tool
    message, a tool message with no result (it answers no call), or a
    result that answers no call of the assistant message right before it (a
    user or system message in between closes its calls). Checked
    where a local run starts (`fresh`), not when `RunStarted` is reduced: a
    stored log (or a durable workflow's history) with such a history replays
    as it did.
    """
    open_calls: set[str] = set()
    for position, message in enumerate(messages):
        role = message.role
        if role == "assistant":
            open_calls = {c.id for c in message.tool_calls}
        elif role != "tool":
            # Results follow their calls' assistant message at once: after a user or
            # system message in between, no provider takes them.
            if open_calls:
                open_calls = set()
            parts = message.parts
            if role == "user" and len(parts) == 1 and type(parts[0]) is TextPart:
                continue  # (a prompt, the usual history: nothing more to look at)
        problem = _history_part_problem(message, open_calls)
        if problem:
            return f"message {position} ({role}): {problem}"
    return ""


def _history_part_problem(message: Message, open_calls: set[str]) -> str:
    """`history_problem` for one message, ``open_calls`` the ids it may answer (taken off)."""
    role = message.role
    for part in message.parts:
        if isinstance(part, ToolCallPart) and role != "assistant":
            return f"a tool call ({part.id!r}) belongs in an assistant message"
        if isinstance(part, ToolResultPart):
            if role != "tool":
                return (
                    f"a tool result (for {part.call_id!r}) belongs in a tool "
                    "message answering the assistant message before it"
                )
            if part.call_id not in open_calls:
                return (
                    f"the result for {part.call_id!r} answers no open call of "
                    "the assistant message before it (results follow their calls' "
                    "assistant message with no other message between)"
                )
            open_calls.discard(part.call_id)
    if role == "tool" and not message.tool_results:
        return "a tool message needs tool results (it answers no call)"
    return ""


def _user_message_added(state: RunState, event: UserMessageAdded, changes: Changes) -> None:
    problem = _steps.message_problem(event.message, ("user", "system", "assistant"))
    if not problem and any(
        isinstance(p, (ToolCallPart, ToolResultPart)) for p in event.message.parts
    ):
        # A call added here would never get a result (only model responses
        # open a step), and a result here would answer no call.
        problem = "an added message cannot carry tool calls or tool results"
    if problem:
        raise refused(state, event.kind, problem)
    changes["conversation"] = state.conversation.append(event.message)
    if state.phase == "finished":
        changes.update(
            phase="awaiting_model",
            turn_start=state.step,
            calls=(),
            output_retries=0,
            finish_reason=None,
            output=None,
        )


def _output_accepted(state: RunState, event: OutputAccepted, changes: Changes) -> None:
    value = event.value
    kind = type(value)
    if kind is not FrozenDict and kind is not FrozenList and kind is not str:
        try:  # (the event's converter checks it: an event made around it)
            frozen_json(value)
        except NotJSONError as error:
            raise refused(state, event.kind, f"the output{error.path}: {error.problem}") from None
    changes.update(
        phase="finished", finish_reason=_steps.answered_reason(state), output=event.value
    )


def _output_rejected(state: RunState, event: OutputRejected, changes: Changes) -> None:
    problem = event.message
    if type(problem) is not str and not isinstance(problem, str):  # (a stored state holds text)
        raise refused(
            state, event.kind, f"the message for the model must be text (str), got {short(problem)}"
        )
    retries = state.output_retries + 1
    changes.update(
        conversation=state.conversation.append(Message.user(event.message)),
        output_retries=retries,
    )
    limit = state.config.output_retries
    if retries > limit:
        message = (
            f"the final answer did not fit the output type after {retries} attempts "
            f"(output_retries={limit}); last problem: {event.message}"
        )
        fail(changes, RunFailure("output_validation", message))
    else:
        boundary(state, changes)


def _stop_requested(state: RunState, event: StopRequested, changes: Changes) -> None:
    reason = event.reason
    if type(reason) is not str and not isinstance(reason, str):  # (a stored state holds text)
        raise refused(state, event.kind, f"the reason must be text (str), got {event.reason!r}")
    condition = event.condition
    if condition is not None:
        if not isinstance(condition, (MaxSteps, TokenBudget, ToolCalled)):
            raise refused(
                state,
                event.kind,
                f"the condition must be max_steps, token_budget or tool_called, got {condition!r}",
            )
        named = describe_condition(condition)
        if event.reason != condition.kind:
            raise refused(
                state,
                event.kind,
                f"the reason {event.reason!r} is not that of its condition {named}",
            )
        if not condition(state):
            raise refused(state, event.kind, f"its condition {named} does not hold")
    changes.update(phase="finished", finish_reason=event.reason, output=None)


def _step_limit_changed(state: RunState, event: StepLimitChanged, changes: Changes) -> None:
    limit = event.max_steps
    if type(limit) is not int or limit < 1:
        raise refused(state, event.kind, f"max_steps must be an integer >= 1, got {limit!r}")
    made = state.turn_steps
    if limit < made:
        raise refused(
            state,
            event.kind,
            f"max_steps={limit} is below the {made} model calls this turn has already made",
        )
    config = state.config
    changes["config"] = attrs.evolve(config, max_steps=limit)
    if state.phase == "awaiting_model" and made >= limit:
        changes.update(phase="finished", finish_reason="max_steps", output=None)
    elif (
        state.phase == "finished"
        and state.finish_reason == "max_steps"
        and made < limit
        # A max_steps(n) stop condition finishes with the same reason: it still holds.
        and holding_reason(state, config.stop_when) is None
    ):
        changes.update(phase="awaiting_model", finish_reason=None)


def _handed_off(state: RunState, event: HandedOff, changes: Changes) -> None:
    if type(event.agent) is not str or not event.agent:
        raise refused(state, event.kind, f"the agent must be a name, got {event.agent!r}")
    if state.phase == "finished" and (not state.calls or state.finish_reason != "max_steps"):
        raise refused(
            state,
            event.kind,
            "a finished run hands off only right after the step that called the transfer "
            "tool and reached max_steps; this one "
            + (
                f"finished with {state.finish_reason!r}"
                if state.finish_reason != "max_steps"
                else "made no tool call in its last step, or has handed off already"
            ),
        )
    # The tools change here as they do when a run starts: the same check, or
    # the target would run with a tool set whose calls name no single tool.
    _refuse_bad_tools(state, event.kind, event.config, event.agent)
    if event.messages is not None:
        problem = _steps.messages_problem(event.messages, ("system", "user", "assistant", "tool"))
        if problem:
            raise refused(state, event.kind, f"the filtered conversation: {problem}")
        unanswered = _unanswered_calls(event.messages)
        if unanswered:
            raise refused(
                state,
                event.kind,
                f"the filtered conversation has tool calls without results: "
                f"{', '.join(unanswered)}",
            )
        changes["conversation"] = Log(event.messages)
    changes.update(agent=event.agent, config=event.config, calls=())


def _attempt_dropped(state: RunState, event: AttemptDropped, changes: Changes) -> None:
    # Where `retry_state` puts it: a dropped answer is the run's own (awaiting its
    # model again), dropped sub-runs are its calls' (to run again). Nothing else
    # changes: the usage only grows, by counts that can be summed.
    own, sub_runs = event.usage, event.sub_run_usage
    for name, usage in (("usage", own), ("sub_run_usage", sub_runs)):
        problem = _usage_problem(usage)
        if problem:
            raise refused(state, event.kind, f"its {name}: {problem}")
    if own == NO_USAGE and sub_runs == NO_USAGE:
        raise refused(state, event.kind, "it carries no usage (both usage and sub_run_usage are 0)")
    # (`TRANSITIONS` takes the event only awaiting_model and running_tools.)
    stray = sub_runs if state.phase == "awaiting_model" else own
    if stray != NO_USAGE:
        raise refused(state, event.kind, _STRAY_USAGE[state.phase])
    if own != NO_USAGE:
        changes["usage"] = summed_usage(state, event.kind, state.usage, own)


# Why `AttemptDropped` is refused a usage its phase does not keep, by phase.
_STRAY_USAGE: Mapping[Phase, str] = {
    "awaiting_model": (
        "sub_run_usage is kept only while the dropped sub-runs' calls are to run again "
        "(running_tools); a run waiting for its model takes only its own usage"
    ),
    "running_tools": (
        "the run's own usage is kept only for a dropped answer, before the model is asked "
        "again (awaiting_model); a run whose calls are to run takes only sub_run_usage"
    ),
}


def _usage_problem(usage: object) -> str:
    """What makes ``usage`` unfit to add to a run's usage ("" if nothing)."""
    if not isinstance(usage, Usage):
        return f"expected a Usage, got {type(usage).__name__}"
    for field in attrs.fields(Usage):
        count = getattr(usage, field.name)
        if not _is_count(count):
            return f"{field.name} must be a finite number >= 0, got {count!r}"
    return ""


def _is_count(count: object) -> bool:
    # What `Usage` holds (`is_count_value`: an int or a finite float, a custom
    # model's float counts too), but a sum that stays a count: no negative.
    return is_count_value(count) and count >= 0  # type: ignore[operator]


def countable(usage: Usage) -> Usage:
    """``usage`` with each count `AttemptDropped` refuses (a negative one) as 0.

    A model may report a negative count, and `ModelResponded` takes it as
    given (it refuses NaN and infinities, which no saved state can hold); the
    usage a resume or a raised tool error keeps of dropped work is what of it
    can be counted, so that a bad count never stops a run's resume.
    """
    bad = [a.name for a in attrs.fields(Usage) if not _is_count(getattr(usage, a.name))]
    # (built around `Usage`'s check: the counts kept passed it, the zeros are ints)
    return _usage(**{**attrs.asdict(usage), **dict.fromkeys(bad, 0)}) if bad else usage


def _run_failed(state: RunState, event: RunFailed, changes: Changes) -> None:
    for name, value in (("error_kind", event.error_kind), ("message", event.message)):
        if type(value) is not str and not isinstance(value, str):
            raise refused(state, event.kind, f"{name} must be text (str), got {value!r}")
    if event.tool_name is not None and not isinstance(event.tool_name, str):
        raise refused(
            state, event.kind, f"tool_name must be text (str) or None, got {event.tool_name!r}"
        )
    fail(changes, RunFailure(event.error_kind, event.message, event.tool_name))


_HANDLERS: Mapping[str, Callable[[RunState, Any, Changes], None]] = {
    "run_started": _run_started,
    "user_message_added": _user_message_added,
    "model_responded": _steps.model_responded,
    "tool_returned": _steps.tool_returned,
    "approval_granted": _steps.approval_granted,
    "approval_denied": _steps.approval_denied,
    "tool_results_provided": _steps.tool_results_provided,
    "output_accepted": _output_accepted,
    "output_rejected": _output_rejected,
    "stop_requested": _stop_requested,
    "step_limit_changed": _step_limit_changed,
    "run_failed": _run_failed,
    "tool_suspended": _steps.tool_suspended,
    "call_resumed": _steps.call_resumed,
    "handed_off": _handed_off,
    "attempt_dropped": _attempt_dropped,
}
