"""The reducer's step logic: classify a response's tool calls, collect results, commit.

Handlers write the fields they change into a ``changes`` dict (local to one
`reduce` call, so the input state is never touched); `reduce` then builds the
next state once. One state per event instead of one per helper keeps an event
at a few microseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeGuard, get_args

from toolfold._errors import ArgumentJSONError, ArgumentValidationError, InvalidEventError
from toolfold.runtime.core._approval import disposition_problem, dispositions
from toolfold.runtime.core._arguments import argument_problem, decode_arguments
from toolfold.runtime.core._build import builder, evolver
from toolfold.runtime.core._config import RunConfig, ToolSpec
from toolfold.runtime.core._events import (
    ApprovalDenied,
    ApprovalGranted,
    CallResumed,
    Event,
    ModelResponded,
    ToolResultsProvided,
    ToolReturned,
    ToolSuspended,
)
from toolfold.runtime.core._messages import (
    NO_USAGE,
    FilePart,
    FrozenDict,
    ImagePart,
    Message,
    ResultContent,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    frozen_dict,
    is_count_value,
    part_problem,
    parts_fit,
    tool_calls_of,
    usage_problem,
)
from toolfold.runtime.core._repr import near_names, shown_names
from toolfold.runtime.core._request import (
    FINISH_REASONS,
    ModelResponse,
    OutputSpec,
    finish_reason_problem,
)
from toolfold.runtime.core._state import (
    WAITING_PHASES,
    CallState,
    CallStatus,
    Disposition,
    Outcome,
    RunFailure,
    RunState,
)
from toolfold.runtime.core._stop import (
    holding_reason,
    is_tree_budget,
    stopped_at_handed,
    workflow_budget,
)
from toolfold.toolkit._arguments import too_large_problems
from toolfold.toolkit._problems import not_an_object

Changes = dict[str, Any]

DEFAULT_MAX_RETRIES = 3
"""Consecutive failures allowed for a tool the config does not know."""

FAILING_OUTCOMES: frozenset[str] = frozenset(
    {"error", "invalid_arguments", "timeout", "unknown_tool"}
)


# The reducer's records are built from values it made or checked (see `builder`).
_call_state = builder(CallState)
_result = builder(ToolResultPart)
_message = builder(Message)


# One line a field, straight into the slot (see `evolver`): no builder's frame
# with fifteen parameters and no wrapper's frame per event.
evolve: Callable[[RunState, Changes], RunState] = evolver(RunState)
"""``state`` with ``changes`` applied (field name to new value)."""


def refused(state: RunState, kind: str, reason: str) -> InvalidEventError:
    """The error for an event that ``state`` cannot accept."""
    return InvalidEventError(state.phase, kind, reason, state)


def fail(changes: Changes, failure: RunFailure) -> None:
    """Move to ``failed`` with ``failure`` as the cause."""
    changes.update(phase="failed", error=failure, finish_reason="error")


def boundary(state: RunState, changes: Changes) -> None:
    """Between steps: finish if a stop condition holds, else call the model again.

    A workflow's run with a tree budget (`workflow_budget`) does not stop at
    it after a round whose steps all answered: its planner's next decision
    costs no tokens, and a final answer hands back what the steps gave; the
    driver stops before a decision that would start steps (`steps_stop`).
    After a round with a step stopped at the budget it was handed, it stops.
    """
    config = state.config
    conditions = config.stop_when
    if conditions and workflow_budget(state):
        calls: tuple[CallState, ...] = changes.get("calls", state.calls)
        if not any(stopped_at_handed(state, call.child) for call in calls):
            conditions = tuple(c for c in conditions if not is_tree_budget(c))
    reason = holding_reason(evolve(state, changes), conditions) if conditions else None
    step = changes.get("step", state.step)
    turn_start = changes.get("turn_start", state.turn_start)
    if reason is None and step - turn_start >= config.max_steps:
        reason = "max_steps"
    if reason is not None:
        changes.update(phase="finished", finish_reason=reason, output=None)
    else:
        changes["phase"] = "awaiting_model"


# --- checks on what comes from outside -----------------------------------------

OUTCOMES: frozenset[str] = frozenset(
    {"ok", "error", "invalid_arguments", "timeout", "denied", "unknown_tool"}
)


def message_problem(message: object, roles: tuple[str, ...], position: int | None = None) -> str:
    """What makes ``message`` unfit for the conversation ("" if nothing).

    ``position`` is its index in the messages it came with, for the error.
    """
    prefix = "" if position is None else f"message {position}: "
    if not isinstance(message, Message):
        return f"{prefix}expected a Message, got {type(message).__name__}"
    if message.role not in roles:
        return (
            f"{prefix}a message with role {message.role!r} is not allowed here "
            f"(roles: {', '.join(roles)})"
        )
    # (`Message` checks its parts when it is made; this guards one made around that)
    parts: object = message.parts
    if type(parts) is not tuple:
        return f"{prefix}a message's parts must be a tuple of parts, got {type(parts).__name__}"
    if parts_fit(parts):  # (the usual case: a scan of the types only)
        return ""
    role = message.role
    name = f"the {role} message" if position is None else f"message {position} ({role})"
    for index, part in enumerate(parts):
        problem = part_problem(part)
        if problem:
            return f"part {index} of {name}: {problem}"
    return ""


def messages_problem(messages: Iterable[object], roles: tuple[str, ...]) -> str:
    """What makes one of ``messages`` unfit for the conversation ("" if nothing).

    A scan of the types only first (every message of a history is checked
    when a run starts; they are almost always fit), then `message_problem`
    on each, naming the position, when the scan finds something.
    """
    listed = tuple(messages)
    for message in listed:
        if type(message) is not Message or message.role not in roles:
            break
        parts: object = message.parts  # (typed a tuple; a message made around its check)
        if type(parts) is not tuple or not parts_fit(parts):
            break
    else:
        return ""
    for position, message in enumerate(listed):
        problem = message_problem(message, roles, position)
        if problem:
            return problem
    return ""


def _result_problem(
    content: object, is_error: object, outcome: object = "ok", parts: object = ()
) -> str:
    if type(content) is not str:
        return f"a result's content must be text (str), got {type(content).__name__}"
    if type(is_error) is not bool:
        return f"is_error must be True or False, got {is_error!r}"
    if outcome not in OUTCOMES:
        return f"unknown outcome {outcome!r} (expected one of: {', '.join(sorted(OUTCOMES))})"
    for index, part in enumerate(parts if isinstance(parts, tuple) else (parts,)):
        if not isinstance(part, _CONTENT):
            return f"a result's parts are text, images or files, got {type(part).__name__}"
        problem = part_problem(part)
        if problem:
            return f"a result's part {index}: {problem}"
    return ""


_CONTENT = (TextPart, ImagePart, FilePart)

_FINISH_REASONS = frozenset(FINISH_REASONS)  # (one hash a response, not a scan)

DISPOSITIONS: tuple[str, ...] = get_args(Disposition)
"""The values a `ModelResponded` disposition may take."""


def duration_problem(duration: object) -> str:
    """What makes a `ToolReturned` duration unfit ("" if nothing): it is seconds or None."""
    if duration is None or (isinstance(duration, (int, float)) and not isinstance(duration, bool)):
        return ""
    return f"duration must be seconds (a float) or None, got {duration!r}"


# --- a model response ------------------------------------------------------

# The reasons of an answering response that its run finishes with (any other: "stop"):
# the token limit cut it, the model refused, it ended for a reason the provider
# gives no normalised word for (``other``: not "the model answered"), or a
# workflow's `Loop` ran out.
_CARRIED = ("length", "content_filter", "other", "max_iterations")

# The ``result`` schema of a plain str output (what the driver reads as text).
_ANY_TEXT = {"type": "string"}


def takes_any_text(output: OutputSpec | None) -> bool:
    """True when ``output`` asks for a plain str: every answer fits it.

    Such an answer says no more than one with no output type at all, so its
    run finishes as that one would (a cut answer ``length``, not ``stop``).
    """
    if output is None or output.name != "final_result":
        return False
    properties = output.schema.get("properties")
    return isinstance(properties, Mapping) and properties == {"result": _ANY_TEXT}


def accepted_reason(response: ModelResponse, output: OutputSpec | None = None) -> str:
    """The finish reason of a run whose answer ``response`` gave was accepted.

    ``max_iterations`` when the response says so (a workflow's `Loop` whose
    ``until`` never held answers with its last output). With an ``output``
    that takes any text (`takes_any_text`), the response's ``length``,
    ``content_filter`` or ``other`` carries over as without an output type;
    with another type, ``stop``: the answer fit the output type.
    """
    reason = response.finish_reason
    if reason == "max_iterations":
        return reason
    return reason if reason in _CARRIED and takes_any_text(output) else "stop"


def last_response(state: RunState) -> ModelResponse | None:
    """The response of ``state``'s last `ModelResponded` (None before the first).

    The response of the current step, and of the answer a run validates: after
    it only the step's results, approvals or a changed step limit are logged.
    """
    for event in reversed(state.log):
        if event.kind == "model_responded":
            return event.response
    return None


def answered_reason(state: RunState) -> str:
    """`accepted_reason` of the response that gave the answer ``state`` validates (`last_response`)."""
    response = last_response(state)
    if response is None:  # pragma: no cover - a run validates an answer a response gave
        return "stop"
    return accepted_reason(response, state.config.output)


def model_responded(state: RunState, event: ModelResponded, changes: Changes) -> None:
    """Record the response; finish, validate the answer, or set up its tool calls."""
    response = event.response
    if type(response) is not ModelResponse and not isinstance(response, ModelResponse):
        raise refused(state, event.kind, f"expected a ModelResponse, got {type(response).__name__}")
    message = response.message
    if type(message) is not Message or message.role != "assistant":
        problem = message_problem(message, ("assistant",))
        raise refused(state, event.kind, f"the model's answer: {problem}")
    if response.finish_reason not in _FINISH_REASONS:
        problem = finish_reason_problem(response.finish_reason)
        raise refused(state, event.kind, f"the response's finish_reason: {problem}")
    usage = response.usage
    if not (
        # Exact types first (the usual case); a saved state holds ints and finite floats only.
        type(usage) is Usage
        and type(usage.input_tokens) is int
        and type(usage.output_tokens) is int
        and type(usage.cached_tokens) is int
        and type(usage.reasoning_tokens) is int
        and type(usage.requests) is int
        and type(usage.cache_write_tokens) is int
    ):
        problem = usage_problem(usage)
        if problem:
            raise refused(state, event.kind, f"the response's usage: {problem}")
    for disposition in event.dispositions or ():
        # Checked whether or not the answer calls tools: a stored log could not hold it.
        # (No count check here: a log with dispositions and no calls has always loaded.)
        if disposition not in DISPOSITIONS:
            raise refused(
                state,
                event.kind,
                f"unknown disposition {disposition!r} "
                f"(expected one of: {', '.join(map(repr, DISPOSITIONS))})",
            )
    changes["conversation"] = state.conversation.append(message)
    changes["step"] = state.step + 1
    total = state.usage
    if usage is not NO_USAGE:
        # A fresh run's first answer: the sum is its own usage (a frozen `Usage`).
        fresh = total is NO_USAGE and type(usage) is Usage
        total = usage if fresh else summed_usage(state, event.kind, total, usage)
    changes["usage"] = total
    calls = tool_calls_of(message)
    if not calls:
        changes["calls"] = ()
        if state.config.output is not None:
            changes["phase"] = "validating_output"
            return
        reason = response.finish_reason
        changes.update(
            phase="finished",
            finish_reason=reason if reason in _CARRIED else "stop",
            output=message.text,
        )
        return
    if len(calls) > 1:
        seen = set()
        for call in calls:  # a loop, not a comprehension (a function object and a frame in 3.11)
            seen.add(call.id)
        if len(seen) != len(calls):
            ids = [c.id for c in calls]
            raise refused(state, event.kind, f"the response repeats a tool call id: {ids}")
    dispositions = event.dispositions
    if not dispositions:
        dispositions = _default_dispositions(state, event.kind, calls)
    if len(dispositions) != len(calls):
        raise refused(
            state, event.kind, f"{len(dispositions)} dispositions for {len(calls)} tool calls"
        )
    # A loop, not a comprehension: no function of its own to call for every response.
    classified: list[CallState] = []
    for index, call in enumerate(calls):
        if call.arguments is not None and type(call.arguments) is not FrozenDict:
            # (`ToolCallPart` freezes a mapping and refuses anything else; this guards a
            # part made around that: arguments that are no object do not round-trip)
            problem = part_problem(call)
            if problem:
                raise refused(state, event.kind, f"the model's answer: {problem}")
        classified.append(_classify(state, event.kind, index, call, dispositions[index]))
    changes["calls"] = tuple(classified)
    _settle(state, changes)


def _default_dispositions(
    state: RunState, kind: str, calls: tuple[ToolCallPart, ...]
) -> tuple[Disposition, ...]:
    decided = dispositions(state.config, calls, None)
    for call, disposition in zip(calls, decided, strict=True):
        if disposition is None:
            raise refused(
                state,
                kind,
                f"tool {call.name!r} decides approval with a predicate: "
                "the event must carry dispositions",
            )
    return tuple(decided)  # type: ignore[arg-type]  # no None left


def _classify(
    state: RunState, kind: str, index: int, call: ToolCallPart, disposition: Disposition
) -> CallState:
    config = state.config
    if not config.auto_execute_tools:
        if disposition != "return":
            raise refused(
                state,
                kind,
                f"call {call.id!r} to {call.name!r} must be 'return' "
                f"with auto_execute_tools=False, not {disposition!r}",
            )
        return _call_state(index, call, "to_return")
    spec = config.tool(call.name)
    if spec is None:
        return _done(index, call, _unknown_tool_message(call.name, config), "unknown_tool")
    problem = disposition_problem(spec, disposition)
    if problem:
        raise refused(state, kind, f"call {call.id!r} to {call.name!r}: {problem}")
    if disposition == "return":
        return _call_state(index, call, "to_return")
    if call.arguments is None:
        return _done(index, call, _bad_json_message(call, spec), "invalid_arguments")
    status: CallStatus = "to_run" if disposition == "execute" else "awaiting_approval"
    return _call_state(index, call, status)


def _done(
    index: int,
    call: ToolCallPart,
    content: str,
    outcome: Outcome,
    child: RunState | None = None,
    parts: tuple[ResultContent, ...] = (),
) -> CallState:
    result = _result(call.id, call.name, content, outcome != "ok", parts)
    return _call_state(index, call, "done", result, outcome, child)


# Names an unknown tool's result lists at most: the model reads it, and a catalog of
# hundreds of tools made it thousands of characters (the names are in its request anyway).
_SHOWN_TOOLS = 20


def _unknown_tool_message(name: str, config: RunConfig) -> str:
    names = config.tool_names
    if not names:
        return f"Unknown tool {name!r}. No tools are available."
    near = near_names(name, names)
    meant = f" Did you mean {' or '.join(map(repr, near))}?" if near else ""
    shown = shown_names(names, near, _SHOWN_TOOLS)
    return f"Unknown tool {name!r}.{meant} Available tools: {shown}."


def _bad_json_message(call: ToolCallPart, spec: ToolSpec) -> str:
    return unread_arguments_error(call, spec).message_for_model


def unread_arguments_error(
    call: ToolCallPart, spec: ToolSpec
) -> ArgumentJSONError | ArgumentValidationError:
    """The error of ``call``, whose arguments did not read (``call.arguments`` is None).

    The core answers such a call itself, with this error's ``message_for_model``;
    a driver raises a run it failed from it (``__cause__``), as from a call
    the executor checked.
    """
    problem = argument_problem(call.arguments_text)
    schema = spec.definition.parameters
    too_large = None if problem is None else too_large_problems(call.arguments_text, schema)
    if too_large is not None:  # `1e400`: said at its path, as 400 digits would be
        return ArgumentValidationError(call.name, too_large)
    if problem is not None:
        return ArgumentJSONError(call.name, *problem)
    value = decode_arguments(call.arguments_text)
    return ArgumentValidationError(call.name, [not_an_object(call.name, value)])


# --- results and approvals -------------------------------------------------

WHY: dict[str, str] = {
    "to_run": "is to be executed",
    "awaiting_approval": "awaits approval and cannot run without it",
    "to_return": "awaits a result from the caller (tool_results_provided)",
    "suspended": "ran a sub-run that waits for the caller (call_resumed)",
    "done": "already has a result",
}


def _take(
    state: RunState, changes: Changes, kind: str, call_id: str, status: CallStatus
) -> CallState:
    calls: tuple[CallState, ...] = changes.get("calls", state.calls)
    found = _placed(calls, call_id) if len(calls) > _FEW_CALLS else None
    if found is None:
        for call in calls:
            if call.call.id == call_id:
                found = call
                break
    if found is not None:
        if found.status != status:
            why = WHY[found.status]
            raise refused(state, kind, f"call {call_id!r} to {found.call.name!r} {why}")
        return found
    known = ", ".join(repr(c.call.id) for c in state.calls) or "none"
    raise refused(state, kind, f"no tool call {call_id!r} in this step (calls: {known})")


# Above this many calls in a step, `_take` finds a call by its id in an index (a scan
# per result made a step of k calls cost O(k^2)); at or below it, the scan is cheaper.
_FEW_CALLS = 8
# The indexes of the last steps with many calls looked at, by the id of their first
# call's part: that part, the calls' count, and the position of each call id (its
# first). A step's calls keep their parts and positions as their states change, so an
# index stays good for its step; steps of several runs reduced in turns keep one each
# (the oldest goes past `_STEPS`).
_places: dict[int, tuple[ToolCallPart, int, dict[str, int]]] = {}
_STEPS = 32


def _placed(calls: tuple[CallState, ...], call_id: str) -> CallState | None:
    """The first of ``calls`` with ``call_id``, found through the step's index (None: no call).

    A memo only: what it finds is checked, and a call it does not know is
    looked for by a scan, so the answer is the scan's.
    """
    first = calls[0].call
    held = _places.get(id(first))
    if held is not None and held[0] is first and held[1] == len(calls):
        places = held[2]
    else:
        places = {}
        for position, call in enumerate(calls):
            places.setdefault(call.call.id, position)
        if len(_places) >= _STEPS:
            try:  # noqa: SIM105 (contextlib is not among the core's imports)
                del _places[next(iter(_places))]  # the oldest (another thread may take it first)
            except (StopIteration, KeyError, RuntimeError):
                pass
        _places[id(first)] = (first, len(calls), places)
    placed = places.get(call_id)
    if placed is not None:
        call = calls[placed]
        if call.call.id == call_id:
            return call
    return next((c for c in calls if c.call.id == call_id), None)


def _returned(call: CallState, event: ToolReturned) -> CallState:
    """``call`` done with ``event``'s result.

    Its outcome is the event's, but a result marked as an error of a call that
    ran is an "error".
    """
    outcome: Outcome = "error" if event.is_error and event.outcome == "ok" else event.outcome
    part = call.call
    result = _result(part.id, part.name, event.content, outcome != "ok", event.parts)
    return _call_state(call.index, part, "done", result, outcome, event.child)


def _put(state: RunState, changes: Changes, new: CallState) -> None:
    calls = changes.get("calls", state.calls)
    at = new.index  # (concatenated, not unpacked: a third cheaper at any size)
    changes["calls"] = calls[:at] + (new,) + calls[at + 1 :]  # noqa: RUF005


def tool_returned(state: RunState, event: ToolReturned, changes: Changes) -> None:
    """One executed call's result."""
    duration = event.duration
    if (
        type(event.content) is not str
        or type(event.is_error) is not bool
        or event.outcome not in OUTCOMES
        or event.parts
        or (duration is not None and type(duration) is not float)
    ):
        problem = _result_problem(
            event.content, event.is_error, event.outcome, event.parts
        ) or duration_problem(duration)
        if problem:
            raise refused(state, event.kind, f"call {event.call_id!r}: {problem}")
    call = _take(state, changes, event.kind, event.call_id, "to_run")
    if event.child is not None:
        _child(state, event.kind, event.child)
    _put(state, changes, _returned(call, event))
    _settle(state, changes)


def _plain(event: Event) -> TypeGuard[ToolReturned]:
    """Whether ``event`` is a well-formed `ToolReturned` with a text result (a finished sub-run or none)."""
    if not isinstance(event, ToolReturned):  # anything else is reduced as reduce does
        return False
    child = event.child
    duration = event.duration
    return (
        type(event.content) is str
        and type(event.is_error) is bool
        and event.outcome in OUTCOMES
        and not event.parts
        and (child is None or type(child) is RunState)
        and (duration is None or type(duration) is float)
    )


def returned_one(state: RunState, changes: Changes, event: Event) -> bool:
    """`returned_all` for a step of one call: its plain result, then the commit it completes."""
    calls: tuple[CallState, ...] = changes["calls"]
    if len(calls) != 1 or event.kind != "tool_returned":
        return False
    call = calls[0]
    if call.status != "to_run" or call.call.id != event.call_id or not _plain(event):
        return False
    changes["calls"] = (_returned(call, event),)
    _commit(state, changes)  # what settling a step with every call done does
    return True


def returned_all(state: RunState, changes: Changes, events: Sequence[Event]) -> bool:
    """``tool_returned`` for each of ``events`` in turn, in one pass, when that is plain.

    Plain: each is a well-formed `ToolReturned` with text content for a
    different call to run (a finished sub-run or none). Their results are put
    in place and the step settles once: the changes each event's turn would
    make, since settling a step with a call still to run changes nothing but
    the phase. Otherwise False, and ``changes`` is untouched.
    """
    calls: list[CallState] = list(changes["calls"])
    to_run: dict[str, CallState] = {}
    for call in calls:  # a loop, not a comprehension (a function object and a frame in 3.11)
        if call.status == "to_run":
            to_run[call.call.id] = call
    for event in events:
        taken = to_run.pop(getattr(event, "call_id", None), None)  # type: ignore[arg-type]
        if taken is None or not _plain(event):
            return False
        calls[taken.index] = _returned(taken, event)
    changes["calls"] = tuple(calls)
    _settle(state, changes)
    return True


def _child(state: RunState, kind: str, child: object) -> RunState | None:
    if child is not None and not isinstance(child, RunState):
        raise refused(state, kind, f"a sub-run must be a RunState, got {type(child).__name__}")
    return child


def tool_suspended(state: RunState, event: ToolSuspended, changes: Changes) -> None:
    """An executed call's sub-run waits for the caller: the call waits with it.

    A sub-run interrupted before it ended (a cancellation) neither waits nor
    ended: the call stays to run, holding it, and continues it when it runs.
    """
    call = _take(state, changes, event.kind, event.call_id, "to_run")
    child = _child(state, event.kind, event.child)
    if child is None or child.phase in ("new", "finished", "failed"):
        phase = child.phase if child is not None else None
        raise refused(
            state, event.kind, f"call {event.call_id!r}: its sub-run does not wait ({phase})"
        )
    status: CallStatus = "suspended" if child.phase in WAITING_PHASES else "to_run"
    _put(state, changes, CallState(call.index, call.call, status, child=child))
    _settle(state, changes)


def call_resumed(state: RunState, event: CallResumed, changes: Changes) -> None:
    """The caller's answers reach a suspended call's sub-run; the call runs again if it can."""
    call = _take(state, changes, event.kind, event.call_id, "suspended")
    assert call.child is not None  # a suspended call always has its sub-run
    from toolfold.runtime.core._reducer import reduce  # the reducer dispatches to this module

    child = call.child
    for inner in event.events:
        child = reduce(child, inner)
    status: CallStatus = "suspended" if child.phase in WAITING_PHASES else "to_run"
    _put(state, changes, CallState(call.index, call.call, status, child=child))
    _settle(state, changes)


def approval_granted(state: RunState, event: ApprovalGranted, changes: Changes) -> None:
    """An approved call becomes runnable."""
    call = _take(state, changes, event.kind, event.call_id, "awaiting_approval")
    _put(state, changes, _call_state(call.index, call.call, "to_run"))
    _settle(state, changes)


def approval_denied(state: RunState, event: ApprovalDenied, changes: Changes) -> None:
    """A denied call gets an error result saying so."""
    call = _take(state, changes, event.kind, event.call_id, "awaiting_approval")
    if type(event.reason) is not str:
        raise refused(state, event.kind, f"the reason must be text, got {event.reason!r}")
    reason = event.reason.strip()
    content = "The user denied this tool call" + (f": {reason}" if reason else ".")
    _put(state, changes, _done(call.index, call.call, content, "denied"))
    _settle(state, changes)


def tool_results_provided(state: RunState, event: ToolResultsProvided, changes: Changes) -> None:
    """The caller's results for calls returned to it."""
    results: object = event.results
    if not isinstance(results, tuple) or not results:
        # (no result would leave the step as it is, with nothing for the log to say)
        got = f"{type(results).__name__}" if not isinstance(results, tuple) else "none"
        raise refused(state, event.kind, f"expected one or more ToolResultParts, got {got}")
    for index, result in enumerate(results):
        problem = (
            _result_problem(result.content, result.is_error, "ok", result.parts)
            if isinstance(result, ToolResultPart)
            else f"expected a ToolResultPart, got {type(result).__name__}"
        )
        if problem:
            raise refused(state, event.kind, f"result {index}: {problem}")
    ids = [r.call_id for r in event.results]
    if len(set(ids)) != len(ids):
        raise refused(state, event.kind, f"results repeat a call id: {ids}")
    for result in event.results:
        call = _take(state, changes, event.kind, result.call_id, "to_return")
        outcome: Outcome = "error" if result.is_error else "ok"
        _put(
            state,
            changes,
            _done(call.index, call.call, result.content, outcome, None, result.parts),
        )
    _settle(state, changes)


def _settle(state: RunState, changes: Changes) -> None:
    # One loop, no set or generator: this runs for every result of every step.
    calls = changes["calls"]
    if (
        calls and calls[-1].status == "to_run"
    ):  # any call to run says it; results mostly come in order
        changes["phase"] = "running_tools"
        return
    approval = waiting = False
    for c in calls:
        status = c.status
        if status == "done":
            continue
        if status == "to_run":
            changes["phase"] = "running_tools"
            return
        if status == "awaiting_approval" or (
            status == "suspended" and c.child is not None and c.child.phase == "awaiting_approval"
        ):
            approval = True
        else:  # to_return, or a sub-run that waits for results
            waiting = True
    if approval:
        changes["phase"] = "awaiting_approval"
    elif waiting:
        changes["phase"] = "awaiting_tool_results"
    else:
        _commit(state, changes)


def retry_limit(state: RunState, name: str) -> int:
    """How many failed calls in a row tool ``name`` may have before its next failure fails
    the run: its ``max_retries``, or `DEFAULT_MAX_RETRIES` for a tool the run does not know."""
    spec = state.config.tool(name)
    return spec.max_retries if spec is not None else DEFAULT_MAX_RETRIES


def counts_as_failure(state: RunState, call: CallState) -> bool:
    """Whether ``call``, of ``state``'s current step, counts as its tool's failure (`_commit`).

    A call that ended in a failing outcome does, unless it is a workflow's
    step whose run stopped at the tree budget the workflow handed it
    (`stopped_at_handed`): that is no failure of the step (its ``on_error``
    does not apply), and the workflow stops at its boundary. Only a workflow
    used as a tool under a tree budget has one in its config (see
    `Workflow._within`), so every run recorded before counts as it did: an
    agent's sub-agent stopped there is a failed call as ever (its caller's
    driver reads it as the budget's stop for ``on_tool_error="raise"``).
    `held_failure` and `retry_state` count with this too.
    """
    if call.outcome not in FAILING_OUTCOMES:
        return False
    return not (workflow_budget(state) and stopped_at_handed(state, call.child))


def _commit(state: RunState, changes: Changes) -> None:
    calls: tuple[CallState, ...] = changes["calls"]
    results: list[ToolResultPart] = []
    # One failure per tool per step: four parallel failing calls are one
    # failed attempt, not four; any failing call makes the step count.
    # A dict, not a set: the counts are written in call order, so a state's
    # ``failures`` (and its JSON) do not depend on the process's hash seed.
    failed: dict[str, None] = {}
    for call in calls:
        if call.result is not None:
            results.append(call.result)
        if counts_as_failure(state, call):
            failed[call.call.name] = None
    conversation = changes.get("conversation", state.conversation)
    failures = state.failures
    if failed or failures:
        counts = dict(failures)
        for call in calls:
            if call.outcome == "ok" and call.call.name not in failed:
                counts.pop(call.call.name, None)
        for name in failed:
            counts[name] = counts.get(name, 0) + 1
        failures = frozen_dict(counts)
    changes["conversation"] = conversation.append(_message("tool", tuple(results)))
    changes["failures"] = failures
    for call in calls if failed else ():
        name = call.call.name
        if name not in failed:
            continue
        limit = retry_limit(state, name)
        count = failures[name]
        if count > limit:
            last = call.result.content if call.result is not None else ""
            times = "once" if count == 1 else f"{count} times in a row"
            message = f"tool {name!r} failed {times} (max_retries={limit}); last error: {last}"
            fail(changes, RunFailure("tool_retries_exceeded", message, name))
            return
    boundary(state, changes)


def summed_usage(state: RunState, kind: str, total: Usage, usage: Usage) -> Usage:
    """``total + usage`` (the run's usage and what an event adds), refused with
    `InvalidEventError` when a count no longer is one (see `usage_sum_problem`).
    """
    try:
        summed = total + usage
    except OverflowError:  # (an int count too large for the float it is added to)
        summed = None
    if summed is not None:
        if (
            # Exact types first (the usual case), inline (each answer sums).
            type(summed.input_tokens) is int
            and type(summed.output_tokens) is int
            and type(summed.cached_tokens) is int
            and type(summed.reasoning_tokens) is int
            and type(summed.requests) is int
            and type(summed.cache_write_tokens) is int
            # Ints never overflow, but one of more than 4300 digits cannot be saved:
            # counts none negative and each below 2**62 (what codecs make) pass
            # on one bound of the counts or'ed together, the rest count by count.
            and not (
                summed.input_tokens
                | summed.output_tokens
                | summed.cached_tokens
                | summed.reasoning_tokens
                | summed.requests
                | summed.cache_write_tokens
            )
            >> 62
        ):
            return summed
        if not usage_problem(summed):
            return summed
    raise refused(
        state,
        kind,
        f"the run's usage {total!r} plus this {usage!r} overflows: a count is no "
        "finite number (or an int of more than 4300 digits), which a saved state cannot hold",
    )


def usage_sum_problem(total: Usage, usage: Usage) -> str:
    """The count of ``total + usage`` that is no finite number, named (``""`` if none):
    float counts summed past the largest float give infinity, an int too large
    for a float count it is added to overflows, and an int of more than 4300 digits
    cannot be saved (`COUNT_LIMIT`).
    """
    for name in _COUNTS:
        try:
            count = getattr(total, name) + getattr(usage, name)
        except OverflowError:
            return f"Usage.{name}"
        if not is_count_value(count):
            return f"Usage.{name}"
    return ""


_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "reasoning_tokens",
    "requests",
    "cache_write_tokens",
)
