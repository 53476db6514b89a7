"""Lenient decoding of a tool call's argument text (no validation here).

Whatever the reason the text cannot be read (not JSON, NaN, nesting deeper than
`MAX_DEPTH`), the call gets no arguments and the model reads an argument error
(`argument_problem` says what); a decoder failure never fails the model call.
Strings escaped as lone surrogates (``"\\ud800"``), which UTF-8 cannot encode,
are replaced by U+FFFD so a tool never gets (and echoes back) text that breaks
the encoding of every later request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from toolfold._errors import ArgumentJSONError, ArgumentValidationError
from toolfold.runtime.core._json_text import LONE_SURROGATE
from toolfold.toolkit._arguments import MAX_DEPTH as MAX_DEPTH
from toolfold.toolkit._arguments import NotJSONNumber, strict_loads, with_values_at
from toolfold.toolkit._problems import (
    Problem,
    format_path,
    json_problem,
    not_an_object,
    number_problem,
    overflow_problems,
    render,
    schema_problems,
)
from toolfold.toolkit._results import describe_exception

if TYPE_CHECKING:
    from toolfold.runtime.core._messages import ToolCallPart
    from toolfold.runtime.core._request import ModelRequest, ToolDefinition


class _NotJSON(ValueError):
    def __init__(self, problem: str, pos: int = 0) -> None:
        super().__init__(problem)
        self.pos = pos


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def decode_arguments(text: str) -> Any:
    """Decode argument text strictly; ``""`` is ``{}``.

    Raises:
        ValueError: The text is not JSON, holds NaN or Infinity, or nests
            deeper than `MAX_DEPTH`; ``pos`` is the offset when known.
    """
    if not text.strip():
        return {}
    try:
        value = strict_loads(text)
    except RecursionError:
        raise _NotJSON(f"nested more than {MAX_DEPTH} levels deep") from None
    except NotJSONNumber as exc:
        problem, pos = number_problem(text, str(exc))
        raise _NotJSON(problem, pos) from None
    if text.count("{") + text.count("[") > MAX_DEPTH:
        _check_depth(value)
    if "\\u" in text and _ESCAPED_SURROGATE.search(text):
        value = _encodable(value)
    return value


def parse_arguments(text: str) -> Mapping[str, Any] | None:
    """Decode argument text into a dict; ``""`` is ``{}``; None if not a JSON object."""
    try:
        value = decode_arguments(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def argument_problem(text: str) -> tuple[str, int] | None:
    """Why ``text`` is not JSON a tool can take, with the offset; None when it decodes.

    Said as a tool's own argument check says it (`json_problem`): json's message,
    line, column and offset, and an excerpt with ``>>>`` at the spot.
    """
    try:
        decode_arguments(text)
    except json.JSONDecodeError as exc:
        return json_problem(text, exc), exc.pos
    except ValueError as exc:
        return str(exc), getattr(exc, "pos", 0)
    return None


#: Why a value is refused for its depth (`nesting_problem`).
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"


def nesting_problem(text: str, value: Any) -> str | None:
    """Why ``value``, decoded from the JSON ``text``, nests too deep to be taken (more
    than `MAX_DEPTH` levels); None when it does not.

    For text read whole with ``json.loads`` (a structured answer), which raised a
    bare RecursionError at about 1,000 levels (its reader says `TOO_DEEP` for
    that), and whose deeper values break what walks them later, as tool
    arguments would. ``text`` is only counted: the value is walked only when it
    holds more than `MAX_DEPTH` brackets.
    """
    if text.count("{") + text.count("[") <= MAX_DEPTH:
        return None
    try:
        _check_depth(value)
    except _NotJSON as exc:
        return str(exc)
    return None


def _check_depth(value: Any) -> None:
    # Iterative: the point is to refuse values too deep for recursion.
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH + 1):
        level = [
            child
            for item in level
            if isinstance(item, (dict, list))
            for child in (item.values() if isinstance(item, dict) else item)
        ]
        if not level:
            return
    raise _NotJSON(TOO_DEEP)


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_encodable(v) for v in value]
    return value


def json_path(parts: Iterable[Any]) -> str:
    """A schema error's path as a tool's own check writes it (`format_path`):
    ``$.name[0].key``, and ``$["first-name"]``, ``$["a.b"]`` for a key that is no name."""
    return format_path(parts)


def call_arguments(request: ModelRequest, call: ToolCallPart) -> tuple[ToolDefinition, Any]:
    """The tool ``call`` names in ``request``, and the call's decoded arguments.

    The first half of every model's ``check_arguments`` (provider and testing
    models), so both word an unknown tool and bad JSON the same way.

    Raises:
        ArgumentJSONError: The argument text is not JSON.
        ArgumentValidationError: The call names no tool of the request.
    """
    tool = next((t for t in request.tools if t.name == call.name), None)
    if tool is None:
        names = ", ".join(t.name for t in request.tools) or "none"
        raise ArgumentValidationError(
            call.name, [f"$: no tool {call.name!r} in the request; tools: {names}"]
        )
    arguments: Any = call.arguments
    if arguments is None:
        try:
            arguments = decode_arguments(call.arguments_text)
        except ValueError as exc:
            raise ArgumentJSONError(call.name, str(exc), getattr(exc, "pos", 0)) from exc
    return tool, arguments


def validate_arguments(name: str, validator: Any, arguments: Any) -> Mapping[str, Any]:
    """``arguments`` if ``validator`` (a jsonschema validator) finds no error and they are an object.

    The second half of every model's ``check_arguments``, worded as a tool's own
    check words its arguments' problems (`toolfold.toolkit._arguments`): arguments
    that are not an object are refused first (even where the schema does not say
    ``"type": "object"``), then each problem reads ``<$.path>: <problem>``, sorted
    by that path, a union's the problem of the branch the value was meant for.

    Raises:
        ArgumentValidationError: The arguments break the schema, or are not an object.
    """
    if not isinstance(arguments, Mapping):
        raise ArgumentValidationError(name, [not_an_object(name, arguments)])
    try:
        if validator.is_valid(arguments):
            return arguments
        problems = schema_problems(validator, arguments)
    except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
        # jsonschema itself fails on the value, e.g. 10**400 against multipleOf 0.1 (not
        # on the schema: a reference to nothing is the caller's, see check_arguments)
        found = _overflowing(validator, arguments) if isinstance(exc, OverflowError) else []
        problems = render(found) if found else [
            f"$: the arguments could not be checked ({describe_exception(exc)})"
        ]  # fmt: skip
    raise ArgumentValidationError(name, problems)


#: How many numbers too large for a float `_overflowing` judges one by one, at most:
#: beyond, the arguments' failure is said as a whole (a list of 1,000 took 5.5 s).
_JUDGED_ALONE = 16


def _overflowing(validator: Any, arguments: Mapping[str, Any]) -> list[Problem]:
    """The integers too large for a float (`overflow_problems`) that make ``validator``
    raise OverflowError (against a ``multipleOf`` of 0.1), each alone: not one
    where an ``int`` takes it."""
    found = overflow_problems(arguments)
    if len(found) > _JUDGED_ALONE:  # (each judged alone validates it all again)
        return []
    culprits = []
    for path, problem in found:
        try:  # (the others zeroed: a frozen call's arguments are copied plain first)
            validator.is_valid(with_values_at(arguments, {p: 0 for p, _ in found if p != path}))
        except OverflowError:
            culprits.append((path, problem))
        except Exception:  # (another failure: this number is not judged alone)
            continue
    return culprits
