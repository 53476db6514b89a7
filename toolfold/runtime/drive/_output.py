"""Structured final answers: ``output_type`` → schema, answer text → value.

Object-like types (dataclasses, attrs classes, TypedDicts, ``dict[str, X]``)
are asked for as they are. Anything else (``int``, ``list[str]``, a union...)
is wrapped in ``{"result": ...}``, because providers want an object at the
root of a structured-output schema.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from toolfold._errors import OutputValidationError, ToolArgumentError, ToolDefinitionError
from toolfold.runtime.core import _events
from toolfold.runtime.core._arguments import TOO_DEEP, nesting_problem
from toolfold.runtime.core._messages import Message, TextPart
from toolfold.runtime.core._repr import short
from toolfold.runtime.core._request import OutputSpec
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._steps import last_response
from toolfold.toolkit._jsonschema import resolve_local

_DEFAULT = "final_result"
"""The name of the output spec of a type that is no class (a class's is its name)."""
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)


class OutputRejected(Exception):
    """The answer does not fit; ``message`` goes back to the model."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


#: The finish reasons of an answer that asking again would end the same way: the
#: token limit cut it (``length``), or the model refused (``content_filter``).
UNFIT_AGAIN = ("length", "content_filter")

# The provider's own words (``raw_finish_reason``) of a ``content_filter`` answer that
# the model refused (Anthropic ``refusal``; a Chat or Responses ``refusal`` part ends
# ``stop`` / ``completed``; a model of your own may give none). Any other word is the
# provider's filter (Chat ``content_filter``, Gemini ``SAFETY``, a prompt Gemini blocked).
_REFUSED = (None, "refusal", "stop", "completed", "end_turn")

# The ``length`` words that say the context window filled up, not ``max_tokens``
# [Anthropic stop reasons: model_context_window_exceeded].
_WINDOW_FULL = ("model_context_window_exceeded",)


def _why_unfit(finish: str, raw: str | None) -> str:
    """What ended an answer with ``finish`` (`UNFIT_AGAIN`) and the provider's ``raw`` word,
    and what to do, for `rejection`'s message."""
    if finish == "content_filter":
        if raw in _REFUSED:
            return "the model refused"
        return "the provider's content filter stopped it (it flagged the prompt or the answer)"
    if raw in _WINDOW_FULL:
        return (
            "the model's context window filled up (shorten the conversation: raising "
            "max_tokens does not help)"
        )
    return "the token limit cut it (raise max_tokens)"


def rejection(state: RunState, message: str) -> _events.OutputRejected | _events.RunFailed:
    """The event for the answer ``state`` validates, which did not fit (``message``: why).

    Sent back to the model to answer again (`OutputRejected`), unless the
    provider ended it with a reason another attempt would meet too (a refusal,
    the token limit: `UNFIT_AGAIN`). Each attempt is a paid request, and the
    run ended in an error saying only that the answer "did not fit": then the
    run fails at once (``output_validation``, an `OutputValidationError`)
    naming the provider's finish reason and what it answered. A driver event,
    not a reducer rule: a saved run replays its recorded events unchanged.
    """
    response = last_response(state)  # the answer ``state`` validates
    if response is None or response.finish_reason not in UNFIT_AGAIN:
        return _events.OutputRejected(message)
    raw = response.raw_finish_reason
    said = "" if raw in (None, response.finish_reason) else f" ({raw!r})"
    why = _why_unfit(response.finish_reason, raw)
    text = response.text
    # (an empty answer's problem is that: not the fields its "" lacks)
    problem = _problems(message) if text.strip() else "the answer is empty"
    return _events.RunFailed(
        "output_validation",
        f"the final answer did not fit the output type and was not asked for again: the "
        f"provider ended it with finish reason {response.finish_reason!r}{said}, {why}, "
        f"which another attempt would meet too; the answer: {short(text)}; "
        f"the problem: {problem}",
    )


def _problems(message: str) -> str:
    """The problems a rejection ``message`` lists (`_rejection`), without its words to the model."""
    listed = [line[2:] for line in message.splitlines() if line.startswith("- ")]
    return "; ".join(listed) or message


@attrs.frozen
class OutputSchema:
    """How one output type is asked for and read back.

    Attributes:
        type: The Python type the answer becomes.
        spec: What the model request carries.
        wrapped: True when the value sits under ``"result"``.
    """

    #: `parse` gives the value of the output type (a live run keeps it: `Ended.built`).
    parse_builds: ClassVar[bool] = True

    type: Any
    spec: OutputSpec
    wrapped: bool
    _checker: Any = attrs.field(eq=False, repr=False)
    # the converter's hook for an object type (None for a plain dict[str, str]), built
    # with the schema, so that a type it cannot structure is a definition error
    _hook: Any = attrs.field(default=None, eq=False, repr=False)

    def parse(self, text: str) -> tuple[Any, Any]:
        """Read an answer: (the structured value, the same value as plain JSON data).

        Raises:
            OutputRejected: The answer is not JSON, does not fit the type, or is
                nested deeper than tool arguments may be.
        """
        return self._read(text, limit_depth=True)

    def _read(self, text: str, *, limit_depth: bool) -> tuple[Any, Any]:
        """`parse`; ``limit_depth`` False for a value a state saved by an earlier
        version holds, which no limit refused.

        Raises:
            OutputRejected: The answer is not JSON or does not fit the type.
        """
        body = _strip_fence(text)
        # As deep as tool arguments may be: deeper, json.loads raised a bare
        # RecursionError that ended the run, its state lost. Checked on the
        # value decoded here (decoded once).
        limit = limit_depth and self.type is not str
        bare = None  # the answer read as the bare value, when it was taken as the wrapper
        if self.wrapped:
            body, bare = self._wrap(body, text, limit)
        else:
            try:
                decoded = json.loads(body)
            except RecursionError:
                if not limit:
                    raise
                raise _too_deep(TOO_DEEP) from None
            except ValueError:
                decoded = {}  # the checker says where parsing failed
            deep = nesting_problem(body, decoded) if limit else None
            if deep is not None:
                raise _too_deep(deep)
            if not isinstance(decoded, dict):
                got = _JSON_NAMES.get(type(decoded), type(decoded).__name__)
                raise OutputRejected(_rejection([f"$: expected a JSON object, got {got}"]))
        try:
            checked = self._checker.check(body)
        except ToolArgumentError as exc:
            if bare is None:
                raise OutputRejected(_rejection(exc.errors)) from exc
            # {"result": ...} is the bare value too, when the type takes an object
            # whose one key is "result" (Optional[R] for R(result: int), a dict).
            try:
                checked = self._checker.check(bare)
            except ToolArgumentError:
                raise OutputRejected(_rejection(exc.errors)) from exc
            body = bare
        plain = json.loads(body)
        if self.wrapped:
            return checked["result"], plain["result"]
        if self._hook is None:  # dict[str, str]: already a value of its type
            return checked, plain
        from toolfold.toolkit._problems import render, structure_problems

        try:
            return self._hook(checked, self.type), plain
        except Exception as exc:
            # at each field's path, in the words a tool's arguments get (a Predicate's too)
            problems = render(structure_problems(exc, (), self.type))
            raise OutputRejected(_rejection(problems)) from exc

    def _wrap(self, body: str, text: str, limit: bool) -> tuple[str, str | None]:
        """The answer as the wrapper to check, and the answer as the bare value
        (None unless ``body`` was taken as the wrapper: checked when that fails).

        The answer may come as {"result": ...} (what the schema asks for) or as
        the bare value; a plain-text answer is the value of a str output.
        ``limit``: refuse a value nested deeper than tool arguments may be.
        """
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError) as exc:  # (too deep: text for a str)
            if limit and isinstance(exc, RecursionError):
                raise _too_deep(TOO_DEEP) from None
            if self.type is str:
                return json.dumps({"result": text}), None
            return body, None  # the checker says where parsing failed
        deep = nesting_problem(body, decoded) if limit else None
        if deep is not None:
            raise _too_deep(deep)
        # The model's own text inside the wrapper (not the decoded value written
        # again): a problem is shown as it wrote it (1e999, not Infinity).
        wrapped = f'{{"result": {body}}}'
        if isinstance(decoded, dict) and set(decoded) == {"result"}:
            return body, wrapped
        if self.type is str and not isinstance(decoded, str):
            return json.dumps({"result": text}), None
        return wrapped, None

    def restore(self, plain: Any) -> Any:
        """The structured value from plain data (e.g. a state loaded from JSON).

        Raises:
            OutputRejected: The data does not fit the type (see `restored`).
        """
        text = json.dumps({"result": plain} if self.wrapped else plain)
        return self._read(text, limit_depth=False)[0]


def restored(schema: OutputSchema, state: RunState) -> Any:
    """The output of the finished ``state`` as ``schema``'s type.

    Raises:
        OutputValidationError: The output the run accepted does not fit the
            type now (the type or its validators changed since the state was
            saved, or a validator does not say the same twice); ``.state`` is
            the finished run, its output the plain data.
    """
    try:
        return schema.restore(state.output)
    except OutputRejected as rejected:
        from toolfold.toolkit._schema import type_repr

        raise OutputValidationError(
            f"the finished run's output does not fit the output type {type_repr(schema.type)} "
            f"now: {_problems(rejected.message)}; it fitted when the run accepted it, so the "
            "type or its validators changed since, or a validator does not give the same "
            f"verdict twice; the output as plain data: {short(state.output)} "
            "(the error's .state.output)",
            state,
        ) from None


def _too_deep(problem: str) -> OutputRejected:
    """The rejection of an answer nested deeper than tool arguments may be."""
    return OutputRejected(_rejection([f"$: the answer is {problem}"]))


def output_schema(tp: Any, name: str | None = None) -> OutputSchema:
    """Describe ``tp`` as structured output.

    Raises:
        ToolDefinitionError: The type has no JSON Schema rule, or no structure
            hook (a class with only `register_schema_rule`, or a part of one).
    """
    from toolfold.toolkit._arguments import ArgumentChecker
    from toolfold.toolkit._schema import schema_for_type

    try:
        schema = schema_for_type(tp)
    except ToolDefinitionError as exc:  # ("no JSON Schema for socket" never said where)
        raise _not_an_output(tp, list(exc.problems)) from exc
    is_object = _is_object_schema(schema)
    title = name or (tp.__name__ if is_object and isinstance(tp, type) else _DEFAULT)
    title = re.sub(r"[^a-zA-Z0-9_-]", "_", title)[:64]
    if is_object:
        checker = ArgumentChecker(title, schema, _field_types(tp), True)
        hook = _structure_hook(tp, title)
        return OutputSchema(tp, OutputSpec(title, schema), False, checker, hook)
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
        "additionalProperties": False,
    }
    if defs:
        wrapped["$defs"] = defs
    checker = ArgumentChecker(title, wrapped, {"result": tp}, False)
    try:
        checker.build_hooks()  # a type it cannot structure is a definition error now
    except ToolDefinitionError as exc:
        raise _not_an_output(
            tp, [p.replace("parameter 'result': ", "", 1) for p in exc.problems]
        ) from exc
    return OutputSchema(tp, OutputSpec(title, wrapped), True, checker)


def _field_types(tp: Any) -> dict[str, Any] | None:
    """The types of an object output type's fields by name (None for a mapping type, a
    generic alias...): the checker finds with them the problems of the fields that fit
    the schema (a Predicate) as it lists the schema's, all in one rejection."""
    from toolfold.toolkit._classes import class_fields, unqualified

    if not isinstance(tp, type):
        return None
    try:
        fields = class_fields(tp)
    except Exception:  # (resolved already as its schema was made; then, not at all)
        return None
    # a TypedDict's NotRequired[str] is a str to structure (as its schema made it)
    return None if fields is None else {field[0]: unqualified(field[1])[0] for field in fields}


def name_the_output_type(exc: Exception, output: OutputSchema | None) -> None:
    """Name the user's type in a `SchemaCompileError` about this run's output schema
    (`name_output`): the adapter knows only the spec's name, ``'final_result'`` for a type
    that is no class (``int | None``, ``dict[str, Any]``), wrapped or not."""
    from toolfold._errors import name_output
    from toolfold.toolkit._schema import type_repr

    if output is not None:
        spec = output.spec
        # (on Python 3.10 ``dict[str, Any]`` is a class: its spec was named ``dict``, and a
        # saved state keeps that name, so the name is not changed; the error names the type)
        generic = typing.get_origin(output.type) is not None
        named = spec.name != _DEFAULT and not generic
        name_output(exc, spec, spec.name if named else type_repr(output.type))


def _not_an_output(tp: Any, problems: list[str]) -> ToolDefinitionError:
    """The definition error of an output type the converter cannot structure, in
    words about the output type (it is no tool, whatever the error's class says)."""
    from toolfold.toolkit._schema import type_repr

    error = ToolDefinitionError(type_repr(tp), problems)
    count = len(problems)
    lines = "\n".join(f"  - {p}" for p in problems)
    noun = "problem" if count == 1 else "problems"
    error.args = (
        f"cannot use {type_repr(tp)} as the output type (output_type=): {count} {noun}\n{lines}",
    )
    return error


def _structure_hook(tp: Any, title: str) -> Any:
    """The converter's hook for an object output type; None for one JSON already is
    (``dict[str, str]``).

    Raises:
        ToolDefinitionError: The converter has no hook for the type or a part of it.
    """
    from toolfold.toolkit._arguments import no_hook_problem, structure_hook

    try:
        return structure_hook(tp)
    except Exception as exc:  # cattrs has no rule for the type (or a part of it)
        raise _not_an_output(tp, [no_hook_problem(tp, exc)]) from exc


_JSON_NAMES: dict[type, str] = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def _is_object_schema(schema: Mapping[str, Any]) -> bool:
    if schema.get("type") == "object":
        return True
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = resolve_local(schema, ref)
        return isinstance(target, Mapping) and target.get("type") == "object"
    return False


def _strip_fence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text.strip()


REJECTION_HEAD = "Your final answer does not match the required output schema:\n"
"""How the message asking the model again for its final answer begins (`_rejection`):
a retry of the turn, not a new one (the testing models read it so)."""

REJECTION_TAIL = "\nAnswer again with only a JSON value that matches the schema."
"""How that message ends (`_rejection`)."""


def is_rejection(message: Message) -> bool:
    """Whether ``message`` (a user message) is the run asking again for its final answer."""
    parts = message.parts
    return (
        len(parts) == 1
        and isinstance(parts[0], TextPart)
        and parts[0].text.startswith(REJECTION_HEAD)
        and parts[0].text.endswith(REJECTION_TAIL)
    )


def _rejection(errors: tuple[str, ...] | list[str]) -> str:
    lines = "\n".join(f"- {e}" for e in errors)
    return f"{REJECTION_HEAD}{lines}{REJECTION_TAIL}"
