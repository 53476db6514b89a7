"""Error lines for tool arguments: JSON paths, short values, clear messages.

Every problem becomes ``<path>: <message>``, with paths like ``$``, ``$.a.b``,
``$.items[2].name`` and ``$["odd key"]``, sorted by path (indexes in numeric
order). jsonschema's errors and cattrs' structuring errors are both translated
here, so a model reads the same kind of line whichever step refused its
arguments.
"""

from __future__ import annotations

import json
import re
import reprlib
import typing
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from toolfold.toolkit._results import class_name, describe_exception, exception_text

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = [
    "Problem",
    "excerpt",
    "format_path",
    "json_text",
    "json_kind",
    "json_problem",
    "render",
    "schema_problems",
    "short_repr",
    "structure_problems",
    "type_name",
]

Problem = tuple[tuple[Any, ...], str]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def format_path(path: Iterable[Any]) -> str:
    """Render a JSON path: ``$``, ``$.a.b``, ``$.items[2].name``, ``$["odd key"]``."""
    parts = ["$"]
    for p in path:
        if isinstance(p, int):
            parts.append(f"[{p}]")
        elif _IDENTIFIER.fullmatch(str(p)):
            parts.append(f".{p}")
        else:
            parts.append(f"[{json.dumps(str(p), ensure_ascii=False)}]")
    return "".join(parts)


_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = _REPR.maxdict = _REPR.maxtuple = 6
_REPR.maxlevel = 3


def short_repr(value: Any, limit: int = 80) -> str:
    """A repr of ``value`` short enough for an error line."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        text = _REPR.repr(value)
    else:
        text = repr(value)
        if len(text) > limit:
            text = _REPR.repr(value)
    return clip(text, limit)


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``...`` when cut.

    `short_repr` abbreviates a long value by its parts first (reprlib: a long
    string's middle, a long list's tail) and then clips; a message that quotes a
    value's repr as it is (a failed predicate's, a wrong JSON kind's) only clips.
    """
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- JSON decoding ------------------------------------------------------


def excerpt(text: str, pos: int, width: int = 30) -> str:
    """Up to ``width`` characters either side of ``pos``, ``>>>`` marking the spot, on one line."""
    start, end = max(0, pos - width), min(len(text), pos + width)
    before = ("..." if start else "") + text[start:pos]
    after = text[pos:end] + ("..." if end < len(text) else "")
    return _visible(before) + ">>>" + _visible(after)


def _visible(text: str) -> str:
    # Only line breaks and tabs are escaped: the excerpt must stay one line.
    return text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def json_problem(text: str, exc: json.JSONDecodeError) -> str:
    """The line for malformed JSON: json's message, line, column, offset and an excerpt."""
    message = exc.msg.removesuffix(" at")  # "Unterminated string starting at" (its place follows)
    return (
        f"{message} at line {exc.lineno}, column {exc.colno} (char {exc.pos}): "
        f"{excerpt(text, exc.pos)}"
    )


def number_problem(text: str, number: str) -> tuple[str, int]:
    """The line for a number JSON cannot hold (``NaN``, ``1e999``) in ``text``, and where."""
    pos = _number_position(text, number)
    return f"{number} is not a finite JSON number at char {pos}: {excerpt(text, pos)}", pos


def not_an_object(tool_name: str, value: Any) -> str:
    """The line for argument JSON that decodes to something other than an object."""
    got = "null" if value is None else f"{json_kind(value)} {json_text(value)}"
    return f"$: tool {tool_name!r} takes a JSON object of arguments, got {got}"


def _number_position(text: str, number: str) -> int:
    """Where JSON ``text`` writes the literal ``number`` (``NaN``, ``1e999``) as a value,
    not inside a string; 0 when it does not."""
    for found in re.finditer(r'"(?:[^"\\]|\\.)*"|' + re.escape(number), text):
        if found.group() == number:
            return found.start()
    return 0


def json_kind(value: Any) -> str:
    """The JSON name of a decoded value's kind (``"array"``, ``"null"``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    return "array" if isinstance(value, (list, tuple)) else type(value).__name__


# -- schema problems -------------------------------------------------------------


def _sort_key(path: Any) -> tuple[tuple[int, int, str], ...]:
    return tuple((1, p, "") if isinstance(p, int) else (0, 0, str(p)) for p in path)


def schema_problems(validator: Validator, value: Any) -> list[str]:
    """Every way ``value`` breaks the validator's schema, one sorted line each."""
    return render(schema_problem_list(validator, value))


def schema_problem_list(validator: Validator, value: Any) -> list[Problem]:
    """Every way ``value`` breaks the validator's schema, as ``(path, message)`` pairs."""
    problems: list[Problem] = []
    for error in validator.iter_errors(value):
        problems.extend(_problems(error))
    return problems


def render(problems: list[Problem]) -> list[str]:
    """``<path>: <message>`` lines, sorted by path (indexes numerically), without repeats."""
    problems.sort(key=lambda p: (_sort_key(p[0]), p[1]))
    lines = [f"{format_path(path)}: {message}" for path, message in problems]
    return list(dict.fromkeys(lines))  # one line per distinct problem, order kept


def _problems(error: ValidationError) -> list[Problem]:
    path = tuple(error.absolute_path)
    if error.validator in ("anyOf", "oneOf") and error.context:
        return _union_problems(error, path)
    return [(path, _message(error))]


def _message(error: ValidationError) -> str:
    kind, instance = error.validator, error.instance
    spec: Any = error.validator_value
    if kind == "type":
        expected = [spec] if isinstance(spec, str) else list(spec)
        return f"{short_repr(instance)} is not of type {', '.join(map(repr, expected))}"
    if kind == "enum":
        return f"{short_repr(instance)} is not one of {short_repr(spec, 200)}"
    if kind == "format":
        cause = f": {error.cause}" if error.cause is not None and str(error.cause) else ""
        return f"{short_repr(instance)} is not a valid {spec}{cause}"
    if kind in _BOUNDS and isinstance(spec, int) and hasattr(instance, "__len__"):
        unit, side = _BOUNDS[kind]
        size = len(instance)
        return (
            f"{short_repr(instance)} has {size} {unit}{'' if size == 1 else 's'};"
            f" expected {side} {spec}"
        )
    if kind == "const":
        return f"{short_repr(spec)} was expected, got {short_repr(instance)}"
    if kind == "additionalProperties" and isinstance(error.schema, Mapping):
        allowed = sorted(error.schema.get("properties", ()))
        extra = (
            sorted(k for k in instance if k not in allowed) if isinstance(instance, dict) else []
        )
        if extra:
            noun = "property" if len(extra) == 1 else "properties"
            hint = f"; allowed: {', '.join(map(repr, allowed))}" if allowed else ""
            return f"unexpected {noun} {', '.join(map(repr, extra))}{hint}"
    message = error.message
    return clip(message, 300)


_BOUNDS = {
    "minItems": ("item", "at least"),
    "maxItems": ("item", "at most"),
    "minLength": ("character", "at least"),
    "maxLength": ("character", "at most"),
    "minProperties": ("property", "at least"),
    "maxProperties": ("property", "at most"),
}


def json_text(value: Any, limit: int = 80) -> str:
    """A decoded JSON value as JSON text (``null``, ``true``, ``[1, 2]``), shortened."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = short_repr(value, limit)
    return clip(text, limit)


def _union_problems(error: ValidationError, path: tuple[Any, ...]) -> list[Problem]:
    """Explain an anyOf/oneOf failure by the alternatives the value could have meant."""
    context = error.context or []
    branches: dict[Any, list[ValidationError]] = {}
    for e in context:
        branches.setdefault(e.schema_path[0] if e.schema_path else None, []).append(e)
    # A branch whose type the value does not even have is not what the model meant.
    meant = [
        errs
        for errs in branches.values()
        if not any(e.validator == "type" and not e.relative_path for e in errs)
    ]
    # With several left, nor is a branch whose tag differs (a property held to a const
    # or enum, as a tagged union's ``kind`` is): the value names the branch it meant.
    if len(meant) > 1:
        tagged = [errs for errs in meant if not any(_is_tag(e) for e in errs)]
        tags = {e.relative_path[0] for errs in meant for e in errs if _is_tag(e)}
        if tagged and len(tags) == 1:
            # a tag only if a branch left takes that property as the value has it
            (tag,) = tags  # (a property name: `_is_tag`)
            if any(_takes(errs, str(tag)) for errs in tagged):
                meant = tagged
        elif not tagged:  # every branch's tag differs: say which tags there are
            wrong = _wrong_tag(meant)
            if wrong is not None:
                return [((*path, wrong[0]), wrong[1])]
    if len(meant) == 1:
        out: list[Problem] = []
        for e in meant[0]:
            out.extend(_problems(e))
        return out
    if not meant:
        expected: list[str] = []
        for errs in branches.values():
            for e in errs:
                if e.validator == "type" and not e.relative_path:
                    spec: Any = e.validator_value
                    expected.extend([spec] if isinstance(spec, str) else spec)
        names = ", ".join(repr(t) for t in dict.fromkeys(expected))
        return [(path, f"{short_repr(error.instance)} is not of type {names}")]
    from jsonschema.exceptions import best_match

    head = f"{short_repr(error.instance)} does not match any of the allowed shapes"
    # The branches the value comes closest to (fewest problems), then jsonschema's pick.
    fewest = min(len(errs) for errs in meant)
    best = best_match([e for errs in meant if len(errs) == fewest for e in errs])
    if best is None:
        return [(path, head)]
    best_path = tuple(best.absolute_path)
    where = "" if best_path == path else f"{format_path(best_path)}: "
    return [(path, f"{head}; closest: {where}{_message(best)}")]


def _is_tag(error: ValidationError) -> bool:
    """``error`` is a property held to one value failing (``const``, or an ``enum`` of
    one, as ``Literal["cat"]`` gives): a tag that names another branch."""
    if len(error.relative_path) != 1 or not isinstance(error.relative_path[0], str):
        return False
    one_of = error.validator_value
    return error.validator == "const" or (
        error.validator == "enum" and isinstance(one_of, list) and len(one_of) == 1
    )


def _takes(branch: list[ValidationError], name: str) -> bool:
    """Whether the branch whose problems are ``branch`` takes property ``name`` as given:
    neither its value refused nor the property itself (as unexpected)."""
    for e in branch:
        if _is_tag(e) and e.relative_path[0] == name:
            return False
        if not e.relative_path and e.validator in ("additionalProperties", "unevaluatedProperties"):
            known = e.schema.get("properties") if isinstance(e.schema, dict) else None
            if name not in (known or {}):
                return False
    return True


def _wrong_tag(branches: list[list[ValidationError]]) -> tuple[Any, str] | None:
    """When every branch refused the same one property's value, and nothing else held to
    one value: (the property, why), listing the values the branches take; else None."""
    found = [[e for e in errs if _is_tag(e)] for errs in branches]
    if any(len(tags) != 1 for tags in found):
        return None  # several fixed values in a branch: which one is the tag is unclear
    tags = [tags[0] for tags in found]
    names = {e.relative_path[0] for e in tags}
    if len(names) != 1:
        return None
    allowed: list[Any] = []  # (values may be lists: no set)
    for e in tags:
        held: Any = e.validator_value  # (an enum's is its one-value list: `_is_tag`)
        for value in [held] if e.validator == "const" else held:
            if value not in allowed:
                allowed.append(value)
    (name,) = names
    return name, f"{short_repr(tags[0].instance)} is not one of {allowed!r}"


# -- structuring problems --------------------------------------------------------


def structure_problems(exc: BaseException, path: tuple[Any, ...], tp: Any) -> list[Problem]:
    """Walk a cattrs error (with detailed validation) into problems at JSON paths."""
    from cattrs.errors import (
        ClassValidationError,
        ForbiddenExtraKeysError,
        IterableValidationError,
    )

    from toolfold.toolkit._converter import UnionStructureError

    if isinstance(exc, IterableValidationError):
        out: list[Problem] = []
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            out.extend(structure_problems(sub, (*path, note.index), note.type))
        for sub in without:
            out.extend(structure_problems(sub, path, None))
        return out
    if isinstance(exc, ClassValidationError):
        found: list[Problem] = []
        by_field, unnamed = exc.group_exceptions()
        for sub, field in by_field:
            if _missing_key(sub):  # said of the object, as jsonschema does
                found.append((path, f"{field.name!r} is a required property"))
            else:
                found.extend(structure_problems(sub, (*path, field.name), field.type))
        for sub in unnamed:
            found.extend(structure_problems(sub, path, exc.cl))
        return found
    if isinstance(exc, ForbiddenExtraKeysError):
        extra = ", ".join(repr(k) for k in sorted(exc.extra_fields))
        noun = "property" if len(exc.extra_fields) == 1 else "properties"
        return [(path, f"unexpected {noun} {extra}")]
    from toolfold.toolkit._pydantic import UNKNOWN, ModelRefused, is_validation_error

    if isinstance(exc, ModelRefused):  # a pydantic model's: each error at the path its loc names
        return exc.problems(path)
    if is_validation_error(exc):  # a pydantic dataclass's, made by its __init__
        errors = exc.errors(include_url=False)  # type: ignore[attr-defined]
        return ModelRefused(tp, errors, UNKNOWN).problems(path)
    if isinstance(exc, UnionStructureError):
        tried = "; ".join(
            f"as {type_name(arm)}: {_leaf_message(sub, arm)}" for arm, sub in exc.errors
        )
        return [(path, f"{exc}" + (f" ({tried})" if tried else ""))]
    return [(path, _leaf_message(exc, tp))]


def _missing_key(exc: BaseException) -> bool:
    """Whether a field's ``KeyError`` is the structuring's own for a key the object
    lacks: raised by the field's lookup in the hook that caught it (cattrs' generated
    one: no frame below it), or made without raising (`_fields_structure`'s). One
    from the user's code (a field type's own hook, a lookup it made) came from a
    frame below, and is a conversion failure like any other exception."""
    if type(exc) is not KeyError:
        return False
    raised = exc.__traceback__
    return raised is None or raised.tb_next is None


def _leaf_message(exc: BaseException, tp: Any) -> str:
    from toolfold.toolkit._converter import CheckFailedError

    if isinstance(exc, CheckFailedError):  # says what the value failed, not a conversion
        return exception_text(exc)
    if isinstance(exc, OverflowError):  # float(10**400)
        return too_large_for(type_name(tp) if tp is not None else "a float")

    if isinstance(exc, (ValueError, TypeError)) and tp is not None:
        return f"cannot convert to {type_name(tp)}: {exception_text(exc)}"
    if isinstance(exc, LookupError) and tp is not None:
        # the user's code looked a key up (a __post_init__'s ``RATES[currency]``,
        # a hook's table): no property is missing, the value could not be converted
        return f"cannot convert to {type_name(tp)}: {class_name(exc)} {exception_text(exc)}"
    return describe_exception(exc)


def too_large_for(kind: str) -> str:
    """The problem of an integer too large for ``kind`` (``float``), as structuring says it."""
    return f"the number is too large for {kind} (at most about 1.8e308)"


def overflow_problems(value: Any) -> list[Problem]:
    """The integers in JSON ``value`` too large for a float, each at its path with
    `too_large_for`: what a schema check that raised OverflowError could not judge."""
    found: list[Problem] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:  # iterative: the nesting is not bounded here
        path, item = stack.pop()
        if isinstance(item, Mapping):
            stack += [((*path, k), v) for k, v in item.items()]
        elif isinstance(item, list):
            stack += [((*path, i), v) for i, v in enumerate(item)]
        elif isinstance(item, int) and not isinstance(item, bool):
            try:
                float(item)
            except OverflowError:
                found.append((path, too_large_for("float")))
    return found


def type_name(tp: Any) -> str:
    """A short name for a type in messages (``int``, ``Filters``, ``list[str]``)."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if tp is type(None):
        return "null"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")
