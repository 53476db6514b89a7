"""`reduce_all`: a run of events reduced in one pass where its rounds are plain.

A driver that keeps no observer (a workflow's conductor) needs no state
between the rounds of a run: only the one where it ends. Reducing each
event builds two states a round, and checks and classifies every call
again; `reduce_all` gives the very state reducing each event in turn gives,
building it once for the plain rounds at the head of ``events``:

- a `ModelResponded` whose tool calls each execute (a known tool with a
  function that needs no approval, arguments that are a JSON object), with
  no usage, in a run with no stop condition, no failures, and steps left;
- then a `ToolReturned` per call, in call order, each an ``ok`` text result
  of a finished sub-run or none;
- and, last, a `ModelResponded` without calls followed by `OutputAccepted`
  in a run with an output schema.

Whatever comes after them (anything else) is reduced event by event with
`reduce`, from the state the plain rounds reached, so an event the state
refuses raises as it would there.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolfold.runtime.core._approval import disposition_problem
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._events import Event, ModelResponded, OutputAccepted, ToolReturned
from toolfold.runtime.core._messages import NO_USAGE, Message, ToolCallPart, ToolResultPart
from toolfold.runtime.core._reducer import reduce
from toolfold.runtime.core._state import CallState, RunState
from toolfold.runtime.core._steps import Changes, accepted_reason, evolve

_result = builder(ToolResultPart)
_message = builder(Message)
_call_state = builder(CallState)


def reduce_all(state: RunState, events: Sequence[Event]) -> RunState:
    """``state`` after each of ``events`` in turn: what folding `reduce` over them gives.

    Raises:
        InvalidEventError: As `reduce`, for the first event the state refuses.
    """
    config = state.config
    if (
        state.phase != "awaiting_model"
        or config.stop_when
        or not config.auto_execute_tools
        or state.failures
    ):
        return _each(state, events, 0)
    messages: list[Message] = []
    step, limit = state.step, state.turn_start + config.max_steps
    changes: Changes = {}
    last: tuple[tuple[ToolCallPart, ...], list[ToolResultPart], list[RunState | None]] | None = None
    at, count = 0, len(events)
    while at < count:
        event = events[at]
        if type(event) is not ModelResponded:
            break
        response = event.response
        message = response.message
        if type(message) is not Message or message.role != "assistant":
            break
        if response.usage is not NO_USAGE:
            break
        calls = message.tool_calls
        if not calls:
            # The answer: validated, then accepted (nothing else is plain here).
            after = events[at + 1] if at + 1 < count else None
            if config.output is None or type(after) is not OutputAccepted:
                break
            messages.append(message)
            changes = {
                "phase": "finished",
                "step": step + 1,
                "calls": (),
                "finish_reason": accepted_reason(response, config.output),
                "output": after.value,
            }
            last = None
            at += 2
            break
        width = len(calls)
        if at + width >= count or step + 1 >= limit or event.dispositions != _execute(width):
            break
        children: list[RunState | None] = []
        made = _results(config, calls, events[at + 1 : at + 1 + width], children)
        if made is None:
            break
        messages.append(message)
        messages.append(_message("tool", tuple(made)))
        step += 1
        at += 1 + width
        changes = {"phase": "awaiting_model", "step": step}
        last = (calls, made, children)
    if not at:
        return _each(state, events, 0)
    if last is not None:  # the run stops at a round's boundary: its calls, done
        calls, made, children = last
        changes["calls"] = tuple(
            [
                _call_state(index, call, "done", result, "ok", child)
                for index, (call, result, child) in enumerate(
                    zip(calls, made, children, strict=True)
                )
            ]
        )
    changes["conversation"] = state.conversation.extend(messages)
    changes["log"] = state.log.extend(events[:at])
    return _each(evolve(state, changes), events, at)


def _results(
    config: RunConfig,
    calls: tuple[ToolCallPart, ...],
    events: Sequence[Event],
    children: list[RunState | None],
) -> list[ToolResultPart] | None:
    """The results of a plain round's calls, from their ``events`` in call order; None unless plain.

    The calls' sub-runs are added to ``children``.
    """
    made: list[ToolResultPart] = []
    for call, event in zip(calls, events, strict=True):
        if (
            type(event) is not ToolReturned
            or event.call_id != call.id
            or call.arguments is None
            or event.outcome != "ok"
            or event.is_error is not False
            or type(event.content) is not str
            or event.parts != ()
        ):
            return None
        child = event.child
        if child is not None and (type(child) is not RunState or not child.is_done):
            return None
        spec = config.tool(call.name)
        if spec is None or disposition_problem(spec, "execute"):
            return None
        made.append(_result(call.id, call.name, event.content, False, ()))
        children.append(child)
    if len(made) > 1 and len({call.id for call in calls}) < len(made):
        return None
    return made


_EXECUTE: dict[int, tuple[str, ...]] = {}


def _execute(width: int) -> tuple[str, ...]:
    found = _EXECUTE.get(width)
    if found is None:
        found = _EXECUTE[width] = ("execute",) * width
    return found


def _each(state: RunState, events: Sequence[Event], start: int) -> RunState:
    for index in range(start, len(events)):
        state = reduce(state, events[index])
    return state
