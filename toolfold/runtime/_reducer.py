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

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from toolfold._errors import ArgumentJSONError, ArgumentValidationError, InvalidEventError
from toolfold.runtime._config import RunConfig, ToolSpec
from toolfold.runtime._events import (
    ApprovalDenied,
    ApprovalGranted,
    Event,
    EventKind,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    RunFailed,
    RunStarted,
    StopRequested,
    ToolResultsProvided,
    ToolReturned,
    UserMessageAdded,
)
from toolfold.runtime._log import Log
from toolfold.runtime._messages import Message, ToolCallPart, ToolResultPart
from toolfold.runtime._state import (
    CallState,
    CallStatus,
    Disposition,
    Outcome,
    Phase,
    RunFailure,
    RunState,
)
from toolfold.runtime._stop import stop_reason

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
        "run_failed": ("failed",),
    },
    "running_tools": {
        "tool_returned": _TOOLS,
        "approval_granted": _TOOLS,
        "approval_denied": _TOOLS,
        "tool_results_provided": _TOOLS,
        "run_failed": ("failed",),
    },
    "awaiting_approval": {
        "approval_granted": _TOOLS,
        "approval_denied": _TOOLS,
        "tool_results_provided": _TOOLS,
        "run_failed": ("failed",),
    },
    "awaiting_tool_results": {
        "tool_results_provided": _TOOLS[2:],
        "run_failed": ("failed",),
    },
    "validating_output": {
        "output_accepted": ("finished",),
        "output_rejected": ("awaiting_model", "finished", "failed"),
        "run_failed": ("failed",),
    },
    "finished": {"user_message_added": ("awaiting_model",)},
    "failed": {},
}
"""Which events each phase accepts, and the phases each may lead to."""

DEFAULT_MAX_RETRIES = 3
"""Consecutive failures allowed for a tool the config does not know."""

_FAILING: frozenset[str] = frozenset({"error", "invalid_arguments", "timeout", "unknown_tool"})
_FIELDS = tuple(a.name for a in attrs.fields(RunState))


def blank_state() -> RunState:
    """A run that has not started: it accepts only `RunStarted`."""
    return RunState(run_id="", phase="new", config=RunConfig(), conversation=Log())


def initial_state(
    messages: str | Iterable[Message] = (),
    config: RunConfig | None = None,
    *,
    run_id: str,
) -> RunState:
    """The state of a run that has just started.

    Args:
        messages: The conversation to start from: a prompt (a user message)
            or messages (history, then the prompt).
        config: The run's configuration.
        run_id: The run's id (the driver makes it; the core reads no uuid).
    """
    initial = (Message.user(messages),) if isinstance(messages, str) else tuple(messages)
    return reduce(blank_state(), RunStarted(run_id, config or RunConfig(), initial))


def reduce(state: RunState, event: Event) -> RunState:
    """The state after ``event``.

    Raises:
        InvalidEventError: The event is not allowed in the state's phase, or
            contradicts the state (unknown call id, second result for a call,
            a result for a call awaiting approval...). The state is attached.
    """
    kind = event.kind
    targets = TRANSITIONS[state.phase].get(kind)
    if targets is None:
        raise _refused(state, kind, _why_not(state))
    handler: Callable[[RunState, Any], RunState] = _HANDLERS[kind]
    new = handler(state, event)
    if new.phase not in targets:  # pragma: no cover - guards the table against the handlers
        raise AssertionError(f"{kind} led from {state.phase} to {new.phase}, not in the table")
    return _evolve(new, log=state.log.append(event))


def transition_table() -> str:
    """The transition table as a Markdown table (used by the docs)."""
    rows = ["| phase | event | next phases |", "|---|---|---|"]
    for phase, events in TRANSITIONS.items():
        if not events:
            rows.append(f"| `{phase}` | (none: terminal) | |")
        for kind, targets in events.items():
            rows.append(f"| `{phase}` | `{kind}` | {', '.join(f'`{t}`' for t in targets)} |")
    return "\n".join(rows)


# --- helpers ---------------------------------------------------------------


def _evolve(state: RunState, **changes: Any) -> RunState:
    # attrs.evolve re-runs __init__ with introspection; this copies the slots.
    new = object.__new__(RunState)
    for name in _FIELDS:
        object.__setattr__(new, name, changes[name] if name in changes else getattr(state, name))
    return new


def _refused(state: RunState, kind: str, reason: str) -> InvalidEventError:
    return InvalidEventError(state.phase, kind, reason, state)


def _why_not(state: RunState) -> str:
    if state.phase == "failed" and state.error is not None:
        return (
            f"the run failed ({state.error.kind}: {state.error.message}) and accepts no more events"
        )
    if state.phase == "finished":
        return "the run finished; add a user message to start a new turn"
    allowed = ", ".join(TRANSITIONS[state.phase]) or "nothing"
    return f"this phase accepts: {allowed}"


# --- handlers --------------------------------------------------------------


def _run_started(state: RunState, event: RunStarted) -> RunState:
    names = [t.name for t in event.config.tools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise _refused(state, event.kind, f"duplicate tool names: {', '.join(duplicates)}")
    return RunState(
        run_id=event.run_id,
        phase="awaiting_model",
        config=event.config,
        conversation=Log(event.messages),
    )


def _user_message_added(state: RunState, event: UserMessageAdded) -> RunState:
    conversation = state.conversation.append(event.message)
    if state.phase == "finished":
        return _evolve(
            state,
            phase="awaiting_model",
            conversation=conversation,
            turn_start=state.step,
            calls=(),
            output_retries=0,
            finish_reason=None,
            output=None,
        )
    return _evolve(state, conversation=conversation)


def _model_responded(state: RunState, event: ModelResponded) -> RunState:
    response = event.response
    message = response.message
    step = state.step + 1
    base = _evolve(
        state,
        conversation=state.conversation.append(message),
        step=step,
        usage=state.usage + response.usage,
        calls=(),
    )
    calls = message.tool_calls
    if not calls:
        if state.config.output is not None:
            return _evolve(base, phase="validating_output")
        reason = response.finish_reason
        return _evolve(
            base,
            phase="finished",
            finish_reason=reason if reason in ("length", "content_filter") else "stop",
            output=message.text,
        )
    ids = [c.id for c in calls]
    if len(set(ids)) != len(ids):
        raise _refused(state, event.kind, f"the response repeats a tool call id: {ids}")
    dispositions = event.dispositions or _default_dispositions(state, event.kind, calls)
    if len(dispositions) != len(calls):
        raise _refused(
            state,
            event.kind,
            f"{len(dispositions)} dispositions for {len(calls)} tool calls",
        )
    states = tuple(
        _classify(state, event.kind, index, call, disposition)
        for index, (call, disposition) in enumerate(zip(calls, dispositions, strict=True))
    )
    return _settle(_evolve(base, calls=states))


def _default_dispositions(
    state: RunState, kind: str, calls: tuple[ToolCallPart, ...]
) -> tuple[Disposition, ...]:
    config = state.config
    out: list[Disposition] = []
    for call in calls:
        spec = config.tool(call.name)
        if not config.auto_execute_tools or (spec is not None and not spec.has_function):
            out.append("return")
        elif spec is None or spec.approval == "never":
            out.append("execute")
        elif spec.approval == "always":
            out.append("approve")
        else:
            raise _refused(
                state,
                kind,
                f"tool {call.name!r} decides approval with a predicate: "
                "the event must carry dispositions",
            )
    return tuple(out)


def _classify(
    state: RunState, kind: str, index: int, call: ToolCallPart, disposition: Disposition
) -> CallState:
    config = state.config
    if not config.auto_execute_tools:
        if disposition != "return":
            raise _refused(
                state,
                kind,
                f"call {call.id!r} to {call.name!r} must be 'return' "
                f"with auto_execute_tools=False, not {disposition!r}",
            )
        return CallState(index, call, "to_return")
    spec = config.tool(call.name)
    if spec is None:
        return _done(index, call, _unknown_tool_message(call.name, config), "unknown_tool")
    problem = _disposition_problem(spec, disposition)
    if problem:
        raise _refused(state, kind, f"call {call.id!r} to {call.name!r}: {problem}")
    if disposition == "return":
        return CallState(index, call, "to_return")
    if call.arguments is None:
        return _done(index, call, _bad_json_message(call), "invalid_arguments")
    status: CallStatus = "to_run" if disposition == "execute" else "awaiting_approval"
    return CallState(index, call, status)


def _disposition_problem(spec: ToolSpec, disposition: Disposition) -> str:
    if disposition == "return":
        return "" if not spec.has_function else "a tool with a function is not returned"
    if not spec.has_function:
        return f"a tool without a function cannot be {disposition!r}, only 'return'"
    if disposition == "execute" and spec.approval == "always":
        return "the tool requires approval and cannot execute without one"
    if disposition == "approve" and spec.approval == "never":
        return "the tool never requires approval"
    return ""


def _done(index: int, call: ToolCallPart, content: str, outcome: Outcome) -> CallState:
    result = ToolResultPart(call.id, call.name, content, outcome != "ok")
    return CallState(index, call, "done", result, outcome)


def _unknown_tool_message(name: str, config: RunConfig) -> str:
    names = config.tool_names
    available = f"Available tools: {', '.join(names)}." if names else "No tools are available."
    return f"Unknown tool {name!r}. {available}"


def _bad_json_message(call: ToolCallPart) -> str:
    try:
        value = json.loads(call.arguments_text)
    except ValueError as exc:
        position = getattr(exc, "pos", 0)
        return ArgumentJSONError(call.name, str(exc), position).message_for_model
    got = type(value).__name__
    return ArgumentValidationError(
        call.name, [f"$: expected an object, got {got}"]
    ).message_for_model


def _find(state: RunState, kind: str, call_id: str) -> CallState:
    for call in state.calls:
        if call.call.id == call_id:
            return call
    known = ", ".join(repr(c.call.id) for c in state.calls) or "none"
    raise _refused(state, kind, f"no tool call {call_id!r} in this step (calls: {known})")


def _expect(state: RunState, kind: str, call: CallState, status: CallStatus) -> None:
    if call.status == status:
        return
    what = {
        "to_run": "is to be executed",
        "awaiting_approval": "awaits approval and cannot run without it",
        "to_return": "awaits a result from the caller (tool_results_provided)",
        "done": "already has a result",
    }[call.status]
    raise _refused(state, kind, f"call {call.call.id!r} to {call.call.name!r} {what}")


def _replace_call(state: RunState, new: CallState) -> RunState:
    calls = state.calls
    return _evolve(state, calls=(*calls[: new.index], new, *calls[new.index + 1 :]))


def _tool_returned(state: RunState, event: ToolReturned) -> RunState:
    call = _find(state, event.kind, event.call_id)
    _expect(state, event.kind, call, "to_run")
    outcome: Outcome = "error" if event.is_error and event.outcome == "ok" else event.outcome
    return _settle(_replace_call(state, _done(call.index, call.call, event.content, outcome)))


def _approval_granted(state: RunState, event: ApprovalGranted) -> RunState:
    call = _find(state, event.kind, event.call_id)
    _expect(state, event.kind, call, "awaiting_approval")
    return _settle(_replace_call(state, attrs.evolve(call, status="to_run")))


def _approval_denied(state: RunState, event: ApprovalDenied) -> RunState:
    call = _find(state, event.kind, event.call_id)
    _expect(state, event.kind, call, "awaiting_approval")
    reason = event.reason.strip()
    content = "The user denied this tool call" + (f": {reason}" if reason else ".")
    return _settle(_replace_call(state, _done(call.index, call.call, content, "denied")))


def _tool_results_provided(state: RunState, event: ToolResultsProvided) -> RunState:
    ids = [r.call_id for r in event.results]
    if len(set(ids)) != len(ids):
        raise _refused(state, event.kind, f"results repeat a call id: {ids}")
    new = state
    for result in event.results:
        call = _find(state, event.kind, result.call_id)
        _expect(state, event.kind, call, "to_return")
        outcome: Outcome = "error" if result.is_error else "ok"
        new = _replace_call(new, _done(call.index, call.call, result.content, outcome))
    return _settle(new)


def _settle(state: RunState) -> RunState:
    statuses = {c.status for c in state.calls}
    if "to_run" in statuses:
        return _evolve(state, phase="running_tools")
    if "awaiting_approval" in statuses:
        return _evolve(state, phase="awaiting_approval")
    if "to_return" in statuses:
        return _evolve(state, phase="awaiting_tool_results")
    return _commit(state)


def _commit(state: RunState) -> RunState:
    results = tuple(c.result for c in state.calls if c.result is not None)
    failures = dict(state.failures)
    for call in state.calls:
        name = call.call.name
        if call.outcome in _FAILING:
            failures[name] = failures.get(name, 0) + 1
        elif call.outcome == "ok":
            failures.pop(name, None)
    committed = _evolve(
        state, conversation=state.conversation.append(Message.tool(*results)), failures=failures
    )
    for call in state.calls:
        name = call.call.name
        spec = state.config.tool(name)
        limit = spec.max_retries if spec is not None else DEFAULT_MAX_RETRIES
        if failures.get(name, 0) > limit:
            last = call.result.content if call.result is not None else ""
            message = (
                f"tool {name!r} failed {failures[name]} times in a row "
                f"(max_retries={limit}); last error: {last}"
            )
            return _fail(committed, RunFailure("tool_retries_exceeded", message, name))
    return _boundary(committed)


def _boundary(state: RunState) -> RunState:
    """Between steps: finish if a stop condition holds, else call the model again."""
    reason = stop_reason(state, state.config.stop_when)
    if reason is None and state.turn_steps >= state.config.max_steps:
        reason = "max_steps"
    if reason is not None:
        return _evolve(state, phase="finished", finish_reason=reason, output=None)
    return _evolve(state, phase="awaiting_model")


def _fail(state: RunState, failure: RunFailure) -> RunState:
    return _evolve(state, phase="failed", error=failure, finish_reason="error")


def _output_accepted(state: RunState, event: OutputAccepted) -> RunState:
    return _evolve(state, phase="finished", finish_reason="stop", output=event.value)


def _output_rejected(state: RunState, event: OutputRejected) -> RunState:
    retries = state.output_retries + 1
    rejected = _evolve(
        state,
        conversation=state.conversation.append(Message.user(event.message)),
        output_retries=retries,
    )
    limit = state.config.output_retries
    if retries > limit:
        message = (
            f"the final answer did not fit the output type after {retries} attempts "
            f"(output_retries={limit}); last problem: {event.message}"
        )
        return _fail(rejected, RunFailure("output_validation", message))
    return _boundary(rejected)


def _stop_requested(state: RunState, event: StopRequested) -> RunState:
    return _evolve(state, phase="finished", finish_reason=event.reason, output=None)


def _run_failed(state: RunState, event: RunFailed) -> RunState:
    return _fail(state, RunFailure(event.error_kind, event.message, event.tool_name))


_HANDLERS: Mapping[str, Callable[[RunState, Any], RunState]] = {
    "run_started": _run_started,
    "user_message_added": _user_message_added,
    "model_responded": _model_responded,
    "tool_returned": _tool_returned,
    "approval_granted": _approval_granted,
    "approval_denied": _approval_denied,
    "tool_results_provided": _tool_results_provided,
    "output_accepted": _output_accepted,
    "output_rejected": _output_rejected,
    "stop_requested": _stop_requested,
    "run_failed": _run_failed,
}
