"""The words an older toolfold gave a call's unreadable arguments, which its saved states keep.

The reducer writes the result of a call whose arguments it cannot read (not
JSON, a NaN, ``1e400``, an array where an object goes) itself
(`_steps._bad_json_message`): no event carries that text, so replaying a log
words it as today's toolfold does. Its wording changed (12-05: the line,
column and an excerpt; 12-06: ``1e400`` said at its path as too large), so a
state saved before holds, in its conversation (and, in the step it stopped
in, its call's result; a run that failed on those retries, its error), the
text the model was sent then, which the replay no longer gives.

`with_older_wording` lets that text through, and nothing else: a result the
log shows as such an argument error of the same call, saved with another
text that reads as an argument error of that tool. Any other difference
stays a difference the loader refuses.
"""

from __future__ import annotations

from typing import Any

import attrs

from toolfold.runtime.core._log import Log
from toolfold.runtime.core._messages import Message, ToolCallPart, ToolResultPart, tool_calls_of
from toolfold.runtime.core._state import CallState, RunState

# What every toolfold has begun and ended an argument error's text with (`_message_for_model`).
_LAST_LINE = "\nCall the tool again with corrected arguments."
# How `_steps._settle` ends the message of a run failed on a tool's retries.
_LAST_ERROR = "; last error: "


def _opening(name: str) -> str:
    return f"Invalid arguments for tool {name!r}: "


def with_older_wording(state: RunState, replayed: RunState) -> RunState:
    """``replayed`` (``state``'s log replayed) with each argument error's text as ``state``
    saved it, where the log judges the same call's arguments unreadable and ``state``'s
    text reads as an argument error of that tool; ``replayed`` itself where there is none.

    Pure, and run only on a state that already differs from its replay.
    """
    changes: dict[str, Any] = {}
    conversation = _conversation(state.conversation, replayed.conversation)
    if conversation is not None:
        changes["conversation"] = conversation
    calls = _calls(state.calls, replayed.calls)
    if calls is not None:
        changes["calls"] = calls
        error, given = state.error, replayed.error
        if (
            error is not None
            and given is not None
            and error != given
            and error == attrs.evolve(given, message=_reworded(given.message, calls, replayed))
        ):
            changes["error"] = error
    return attrs.evolve(replayed, **changes) if changes else replayed


def _conversation(saved: Log[Message], given: Log[Message]) -> Log[Message] | None:
    """``given`` with the saved text of its argument errors, or None where nothing is taken."""
    if len(saved) != len(given) or saved == given:
        return None
    messages: list[Message] | None = None
    calls: dict[str, ToolCallPart] = {}  # the calls of the last answer, by id
    for index, (mine, theirs) in enumerate(zip(saved, given, strict=True)):
        if theirs.role == "assistant":
            calls = {}
            for call in tool_calls_of(theirs):
                calls.setdefault(call.id, call)
            continue
        if theirs.role != "tool" or mine == theirs or len(mine.parts) != len(theirs.parts):
            continue
        parts = [
            a
            if _older(a, b, calls.get(b.call_id) if isinstance(b, ToolResultPart) else None)
            else b
            for a, b in zip(mine.parts, theirs.parts, strict=True)
        ]
        if any(p is not q for p, q in zip(parts, theirs.parts, strict=True)):
            if messages is None:
                messages = list(given)
            messages[index] = Message(theirs.role, tuple(parts))
    return None if messages is None else Log(messages)


def _calls(
    saved: tuple[CallState, ...], given: tuple[CallState, ...]
) -> tuple[CallState, ...] | None:
    """``given`` with the saved result of each call the log finds ``invalid_arguments``, or None."""
    if len(saved) != len(given) or saved == given:
        return None
    taken = [
        mine
        if theirs.outcome == "invalid_arguments"
        and mine != theirs
        and mine.result is not None
        and attrs.evolve(mine, result=theirs.result) == theirs
        and _older(mine.result, theirs.result, theirs.call)
        else theirs
        for mine, theirs in zip(saved, given, strict=True)
    ]
    if all(a is b for a, b in zip(taken, given, strict=True)):
        return None
    return tuple(taken)


def _older(saved: object, given: object, call: ToolCallPart | None) -> bool:
    """Whether ``saved`` is ``given`` (the log's result for ``call``, which the reducer made:
    the call's arguments did not read) in an older toolfold's words."""
    return (
        call is not None
        and call.arguments is None
        and type(saved) is ToolResultPart
        and type(given) is ToolResultPart
        and given.is_error
        and given.call_id == call.id
        and given.tool_name == call.name
        and given.content.startswith(_opening(call.name))
        and saved.content.startswith(_opening(call.name))
        and saved.content.endswith(_LAST_LINE)
        and attrs.evolve(saved, content=given.content) == given
    )


def _reworded(message: str, calls: tuple[CallState, ...], replayed: RunState) -> str:
    """A ``tool_retries_exceeded`` message of ``replayed`` ended by the saved text of
    the last error it quotes, where ``calls`` took that result in older words."""
    for mine, theirs in zip(calls, replayed.calls, strict=True):
        if mine is theirs or mine.result is None or theirs.result is None:
            continue
        quoted = _LAST_ERROR + theirs.result.content
        if message.endswith(quoted):
            return message[: -len(quoted)] + _LAST_ERROR + mine.result.content
    return message
