"""The words an older toolfold gave a call's unreadable arguments, which its saved states keep.

The reducer writes the result of a call whose arguments it cannot read (not
JSON, a NaN, ``1e400``, an array where an object goes) itself
(`_steps._bad_json_message`): no event carries that text, so replaying a log
words it as today's toolfold does. Its wording changed (12-05: the line,
column and an excerpt; 12-06: ``1e400`` said at its path as too large; after a118ac55 (12-07):
an integer's ``1e400`` asked for in digits, not too large for float), so a
state saved before holds, in its conversation (and, in the step it stopped
in, its call's result; a run that failed on those retries, its error), the
text the model was sent then, which the replay no longer gives.

The result of a call to an unknown tool, which the reducer writes too
(`_steps._unknown_tool_message`), said up to 12-07 every tool of the run and no
"Did you mean" (`unknown_in_older_words`).

`with_older_wording` lets that text through, and nothing else: a result the
reducer made itself (not one the caller gave, not one of a call that ran), saved
with the very text an older toolfold made of that call's arguments (`older_texts`)
or of its unknown tool's name. Any other difference stays a difference the loader
refuses.
"""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from toolfold._errors import ArgumentJSONError, ArgumentValidationError
from toolfold.runtime.core._approval import dispositions
from toolfold.runtime.core._arguments import argument_problem, decode_arguments
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._events import Event, HandedOff, ModelResponded, RunStarted
from toolfold.runtime.core._log import Log
from toolfold.runtime.core._messages import Message, ToolCallPart, ToolResultPart, tool_calls_of
from toolfold.runtime.core._state import CallState, RunState
from toolfold.toolkit._arguments import NotJSONNumber, strict_loads, too_large
from toolfold.toolkit._problems import json_problem, not_an_object

# How `_steps._settle` ends the message of a run failed on a tool's retries.
_LAST_ERROR = "; last error: "

# json's message of a text it cannot read differs by Python version at one place only:
# a trailing comma, which 3.13 calls "Illegal trailing comma before end of object"
# (or "array") at the comma, and 3.10-3.12 "Expecting property name enclosed in
# double quotes" (or "Expecting value") at the "}" (or "]") after it.
_TRAILING_COMMA = {
    "}": (
        "Illegal trailing comma before end of object",
        "Expecting property name enclosed in double quotes",
    ),
    "]": ("Illegal trailing comma before end of array", "Expecting value"),
}
_BEFORE_12_05 = re.compile(r"(?P<message>[^\n]{1,64}?): line \d+ column \d+ \(char (?P<pos>\d+)\)")
_SINCE_12_05 = re.compile(
    r"(?P<message>[^\n]{1,64}?) at line \d+, column \d+ \(char (?P<pos>\d+)\): [^\n]*"
)


def with_older_wording(state: RunState, replayed: RunState) -> RunState:
    """``replayed`` (``state``'s log replayed) with each argument error's text as ``state``
    saved it, where the reducer made that result and ``state``'s text is one an older
    toolfold made of the same call (`older_texts`); ``replayed`` itself where there is none.

    Pure, and run only on a state that already differs from its replay.
    """
    changes: dict[str, Any] = {}
    conversation = _conversation(state.conversation, replayed.conversation, replayed.log)
    if conversation is not None:
        changes["conversation"] = conversation
    calls = _calls(state.calls, replayed.calls, replayed.config.tool_names)
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


def older_texts(call: ToolCallPart) -> tuple[str, ...]:
    """The texts older toolfolds sent the model for ``call``, whose arguments do not read.

    12-01 and 12-03 said json's own message (``Expecting ',' delimiter: line 1
    column 9 (char 8)``), a number without its place and an array as ``got
    list``; 12-05 said a place and an excerpt, and ``1e400`` as any number JSON
    cannot hold (today: at its path, too large).
    """
    name, text = call.name, call.arguments_text
    problem = argument_problem(text)
    if problem is None:  # JSON, not an object
        value = decode_arguments(text)
        return (
            ArgumentValidationError(
                name, [f"$: expected an object, got {type(value).__name__}"]
            ).message_for_model,
            ArgumentValidationError(name, [not_an_object(name, value)]).message_for_model,
        )
    return (
        ArgumentJSONError(name, _problem_before_12_05(text), 0).message_for_model,
        ArgumentJSONError(name, *problem).message_for_model,
    )


def _problem_before_12_05(text: str) -> str:
    """`argument_problem`'s line as 12-01 and 12-03 said it."""
    try:
        strict_loads(text)
    except NotJSONNumber as exc:
        return f"{exc} is not a finite JSON number"
    except json.JSONDecodeError as exc:
        return str(exc)
    except (ValueError, RecursionError):
        pass
    problem = argument_problem(text)  # (nested too deep: said as today)
    return "" if problem is None else problem[0]


def _in_older_words(text: str, call: ToolCallPart) -> bool:
    """Whether ``text`` is what an older toolfold sent the model for ``call``, whose
    arguments do not read."""
    if text in older_texts(call):
        return True
    arguments = call.arguments_text
    try:
        decode_arguments(arguments)
    except json.JSONDecodeError as exc:  # json's own message, which may be another Python's
        readings = _json_readings(arguments, exc)
    except ValueError:
        return False
    else:
        return False
    # The one line between the opening and the last line, its place said again here.
    opening, _, closing = ArgumentJSONError(call.name, "\0", 0).message_for_model.partition("\0")
    if not (text.startswith(opening) and text.endswith(closing)):
        return False
    line = text[len(opening) : len(text) - len(closing)]
    for pattern, say in (
        (_BEFORE_12_05, str),
        (_SINCE_12_05, lambda error: json_problem(arguments, error)),
    ):
        found = pattern.fullmatch(line)
        if found is None or int(found["pos"]) > len(arguments):
            continue
        message, pos = found["message"], int(found["pos"])
        for said in (message, f"{message} at"):
            if (said, pos) in readings and say(json.JSONDecodeError(said, arguments, pos)) == line:
                return True
    return False


def _json_readings(arguments: str, error: json.JSONDecodeError) -> set[tuple[str, int]]:
    """The messages and offsets a Python's json gives for ``arguments``, which this one
    reads as ``error``: its own, and at a trailing comma another version's (`_TRAILING_COMMA`)."""
    readings = {(error.msg, error.pos)}
    for closing, (since_3_13, before_3_13) in _TRAILING_COMMA.items():
        if error.msg == since_3_13:  # (at the comma; the closing follows it)
            after = len(arguments) - len(arguments[error.pos + 1 :].lstrip())
            readings.add((before_3_13, after))
        elif error.msg == before_3_13 and arguments[error.pos : error.pos + 1] == closing:
            comma = len(arguments[: error.pos].rstrip()) - 1
            if comma >= 0 and arguments[comma] == ",":
                readings.add((since_3_13, comma))
    return readings


_Made = tuple[Message, frozenset[str], dict[str, tuple[str, ...]]]


def _made_here(log: Log[Event]) -> dict[int, _Made]:
    """By the ``id`` of each answer in ``log`` (with the answer, which keeps that id its
    own), the ids of its calls whose results the reducer made for arguments that did
    not read (`_steps._classify`): run at once, a tool of the run, no ``"return"``; and,
    by id, the run's tool names for each call to a tool it does not have."""
    made: dict[int, _Made] = {}
    config: RunConfig | None = None
    for event in log:
        if isinstance(event, (RunStarted, HandedOff)):
            config = event.config
            continue
        if not isinstance(event, ModelResponded) or config is None:
            continue
        if not config.auto_execute_tools:
            continue
        message = event.response.message
        calls = tool_calls_of(message)
        decided = event.dispositions or dispositions(config, calls, None)
        ids = frozenset(
            call.id
            for call, disposition in zip(calls, decided, strict=False)
            if call.arguments is None
            and disposition in ("execute", "approve")
            and config.tool(call.name) is not None
        )
        unknown = {call.id: config.tool_names for call in calls if config.tool(call.name) is None}
        if ids or unknown:
            made[id(message)] = (message, ids, unknown)
    return made


def _conversation(saved: Log[Message], given: Log[Message], log: Log[Event]) -> Log[Message] | None:
    """``given`` with the saved text of its argument errors, or None where nothing is taken."""
    if len(saved) != len(given) or saved == given:
        return None
    made: dict[int, _Made] | None = None
    messages: list[Message] | None = None
    calls: tuple[ToolCallPart, ...] = ()  # the calls of the last answer whose results it made
    unknown: dict[str, tuple[str, ...]] = {}  # and the run's tools, by call to another tool
    for index, (mine, theirs) in enumerate(zip(saved, given, strict=True)):
        if theirs.role == "assistant":
            calls, unknown = (), {}
            if tool_calls_of(theirs):
                if made is None:
                    made = _made_here(log)
                entry = made.get(id(theirs))
                if entry is not None and entry[0] is theirs:
                    calls = tuple(c for c in tool_calls_of(theirs) if c.id in entry[1])
                    unknown = entry[2]
            continue
        if theirs.role != "tool" or mine == theirs or len(mine.parts) != len(theirs.parts):
            continue
        parts = [
            a
            if _older(a, b, _call_of(b, calls))
            or (type(b) is ToolResultPart and unknown_in_older_words(a, b, unknown.get(b.call_id)))
            else b
            for a, b in zip(mine.parts, theirs.parts, strict=True)
        ]
        if any(p is not q for p, q in zip(parts, theirs.parts, strict=True)):
            if messages is None:
                messages = list(given)
            messages[index] = Message(theirs.role, tuple(parts))
    return None if messages is None else Log(messages)


def _call_of(part: object, calls: tuple[ToolCallPart, ...]) -> ToolCallPart | None:
    """The call of ``calls`` a result ``part`` answers; None for any other part."""
    if type(part) is not ToolResultPart:
        return None
    return next((call for call in calls if call.id == part.call_id), None)


def _calls(
    saved: tuple[CallState, ...], given: tuple[CallState, ...], names: tuple[str, ...]
) -> tuple[CallState, ...] | None:
    """``given`` with the saved result of each call the reducer found ``invalid_arguments``
    (no other outcome of a call whose arguments did not read), or ``unknown_tool`` (the
    run's tools ``names``), or None."""
    if len(saved) != len(given) or saved == given:
        return None
    taken = [
        mine
        if theirs.outcome in ("invalid_arguments", "unknown_tool")
        and mine != theirs
        and mine.result is not None
        and attrs.evolve(mine, result=theirs.result) == theirs
        and (
            _older(mine.result, theirs.result, theirs.call)
            if theirs.outcome == "invalid_arguments"
            else unknown_in_older_words(mine.result, theirs.result, names)
        )
        else theirs
        for mine, theirs in zip(saved, given, strict=True)
    ]
    if all(a is b for a, b in zip(taken, given, strict=True)):
        return None
    return tuple(taken)


def unknown_in_older_words(saved: object, given: object, names: tuple[str, ...] | None) -> bool:
    """Whether ``saved`` is ``given`` (the reducer's result for a call to a tool the run,
    whose tools are ``names``, does not have) as toolfold said it up to e52e49a2 (12-07):
    every tool listed, no "Did you mean"."""
    return (
        bool(names)
        and type(saved) is ToolResultPart
        and type(given) is ToolResultPart
        and given.is_error
        and attrs.evolve(saved, content=given.content) == given
        and saved.content
        == f"Unknown tool {given.tool_name!r}. Available tools: {', '.join(names or ())}."
    )


def _older(saved: object, given: object, call: ToolCallPart | None) -> bool:
    """Whether ``saved`` is ``given`` (the reducer's result for ``call``, whose arguments
    did not read) in an older toolfold's words."""
    return (
        call is not None
        and call.arguments is None
        and type(saved) is ToolResultPart
        and type(given) is ToolResultPart
        and given.is_error
        and given.call_id == call.id
        and given.tool_name == call.name
        and attrs.evolve(saved, content=given.content) == given
        and (
            _in_older_words(saved.content, call)
            or _integer_said_too_large(saved.content, given.content)
        )
    )


# Today's line for an integer too large for a float (`too_large`), its number a group.
_INTEGER_TOO_LARGE = re.compile(
    r"(?P<number>[^ ()]+)".join(map(re.escape, too_large("\0", integer=True).split("\0")))
)


def _integer_said_too_large(saved: str, given: str) -> bool:
    """Whether ``saved`` is ``given`` as toolfold said it up to a118ac55 (12-07): an integer's
    ``1e400`` (today asked for in digits) said too large for float."""
    older = _INTEGER_TOO_LARGE.sub(lambda found: too_large(found["number"]), given)
    return older != given and older == saved


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
