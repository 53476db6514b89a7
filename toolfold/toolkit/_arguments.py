"""Checking a model's tool arguments: decode, validate, structure.

`ArgumentChecker` does three steps for one tool, and raises one
`ToolArgumentError` naming every problem with its JSON path:

1. decode the argument text (``""`` is ``{}``; anything but an object is an
   error; malformed JSON is reported with its line, column and an excerpt);
2. validate against the tool's JSON Schema with one validator compiled per
   checker (Draft 2020-12 unless the schema names its ``$schema``), checking the
   ``date-time``, ``date``, ``time``, ``uuid``, ``decimal``, ``email``, ``ipv4``,
   ``ipv6`` and ``regex`` formats;
3. structure the values into the declared parameter types with the toolkit's
   cattrs converter (decorated tools only; explicit-schema tools get the dict).

A ``null`` sent for an optional property whose schema does not admit ``null``
is read as "left out" (the default applies): OpenAI's strict mode makes every
property required and nullable, so a model may send ``null`` where a default is
meant. This is only looked at when validation fails, so it costs nothing on the
happy path. jsonschema and cattrs are imported on first use, to keep
``import toolfold`` cheap.
"""

from __future__ import annotations

import functools
import json
import re
import reprlib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Union

from toolfold._errors import ArgumentJSONError, ArgumentValidationError, ToolDefinitionError

if TYPE_CHECKING:
    from jsonschema import FormatChecker
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

__all__ = ["ArgumentChecker", "format_path", "short_repr"]

_Hook = Callable[[Any, Any], Any]
_MISSING = object()


class _NotJSONNumber(ValueError):
    """A number JSON cannot carry into Python: NaN, Infinity, or too large for a float."""


def _reject_constant(name: str) -> Any:
    raise _NotJSONNumber(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):
        raise _NotJSONNumber(text)
    return value


_INF = float("inf")
# NaN and Infinity are Python extensions to JSON; 1e400 is JSON but overflows.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


class ArgumentChecker:
    """Validates and structures the arguments a model sends to one tool.

    Args:
        tool_name: The tool's name, used in error messages.
        schema: The tool's JSON Schema (an object schema).
        param_types: Parameter name -> annotated type, for decorated tools.
        pass_dict: True for explicit-schema tools: `check` returns the validated
            dict unchanged instead of structured keyword arguments.
    """

    __slots__ = (
        "_hooks",
        "_is_valid",
        "_param_types",
        "_pass_dict",
        "_schema",
        "_tool_name",
        "_validator",
    )

    def __init__(
        self,
        tool_name: str,
        schema: Mapping[str, Any],
        param_types: Mapping[str, Any] | None,
        pass_dict: bool,
    ) -> None:
        self._tool_name = tool_name
        self._schema = dict(schema)
        self._param_types = dict(param_types or {})
        self._pass_dict = pass_dict
        self._validator = _compile(self._schema)
        self._is_valid = _fast_check(self._schema, self._validator)
        self._hooks: dict[str, tuple[Any, _Hook | None]] | None = None

    def check(self, raw: str | Mapping[str, Any]) -> dict[str, Any]:
        """Decode, validate and structure arguments from a model.

        Args:
            raw: The argument JSON text, or an already decoded mapping.

        Returns:
            The validated dict (explicit-schema tools), or the keyword
            arguments with values of the declared types (decorated tools).
            Parameters left out are left out, so Python defaults apply.

        Raises:
            ArgumentJSONError: The text is not JSON.
            ArgumentValidationError: The value breaks the schema or cannot
                become the declared types; every problem is listed with its path.
        """
        value = self._decode(raw)
        if not self._is_valid(value):
            value = self._recover(value)
        if self._pass_dict:
            return value
        return self._structure(value)

    def _decode(self, raw: str | Mapping[str, Any]) -> dict[str, Any]:
        value: Any = raw
        if isinstance(raw, str):
            if not raw or raw.isspace():
                return {}
            try:
                value = _DECODER.decode(raw)
            except json.JSONDecodeError as exc:
                raise ArgumentJSONError(self._tool_name, _json_problem(raw, exc), exc.pos) from exc
            except _NotJSONNumber as exc:
                pos = max(0, raw.find(str(exc)))
                problem = f"{exc} is not a finite JSON number at char {pos}: {_excerpt(raw, pos)}"
                raise ArgumentJSONError(self._tool_name, problem, pos) from exc
            except ValueError as exc:  # e.g. an integer of more than 4300 digits
                raise ArgumentJSONError(self._tool_name, str(exc), 0) from exc
        if not isinstance(value, dict):
            if isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(raw, str):
                self._fail(
                    [
                        f"$: tool {self._tool_name!r} takes a JSON object of arguments, "
                        f"got {_json_kind(value)} {short_repr(value)}"
                    ]
                )
            else:  # a caller outside the type checker's view
                kind = type(value).__name__
                self._fail([f"$: expected JSON text or a mapping of arguments, got {kind}"])
        if not isinstance(raw, str) and not all(isinstance(k, str) for k in value):
            bad_keys = [k for k in value if not isinstance(k, str)]
            self._fail([f"$: argument names must be strings, got {short_repr(bad_keys)}"])
        return typing.cast("dict[str, Any]", value)

    def _recover(self, value: dict[str, Any]) -> dict[str, Any]:
        try:
            if self._is_valid is not self._validator.is_valid and self._validator.is_valid(value):
                return value  # jsonschema has the last word
            stripped = _drop_optional_nulls(self._schema, self._schema, value)
            if stripped is not value and self._validator.is_valid(stripped):
                return typing.cast("dict[str, Any]", stripped)
            problems = _schema_problems(self._validator, stripped)
        except Exception as exc:  # jsonschema itself fails, e.g. 10**400 against multipleOf 0.1
            problems = [f"$: the arguments could not be checked ({type(exc).__name__}: {exc})"]
        self._fail(problems)

    def _structure(self, value: dict[str, Any]) -> dict[str, Any]:
        hooks = self._hooks if self._hooks is not None else self._build_hooks()
        result: dict[str, Any] = {}
        problems: list[_Problem] | None = None
        for name, item in value.items():
            entry = hooks.get(name)
            if entry is None:
                problems = problems or []
                problems.append(((name,), "unexpected argument"))
                continue
            tp, hook = entry
            if hook is None:
                result[name] = item
                continue
            try:
                result[name] = hook(item, tp)
            except Exception as exc:
                problems = problems or []
                problems.extend(_structure_problems(exc, (name,), tp))
        if problems:
            self._fail(_render(problems))
        return result

    def _build_hooks(self) -> dict[str, tuple[Any, _Hook | None]]:
        from toolfold.toolkit._converter import get_converter

        converter = get_converter()
        hooks: dict[str, tuple[Any, _Hook | None]] = {}
        missing: list[str] = []
        for name, tp in self._param_types.items():
            try:
                hooks[name] = (tp, None if _is_plain(tp) else converter.get_structure_hook(tp))
            except Exception as exc:  # cattrs has no rule for the type (or a part of it)
                missing.append(
                    f"parameter {name!r}: cannot structure JSON into {_type_name(tp)} ({exc});"
                    " register hooks for the type with register_type_hooks()"
                )
        if missing:
            raise ToolDefinitionError(self._tool_name, missing)
        self._hooks = hooks
        return hooks

    def _fail(self, problems: list[str]) -> typing.NoReturn:
        raise ArgumentValidationError(self._tool_name, problems)


def _compile(schema: dict[str, Any]) -> Validator:
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    return cls(schema, format_checker=_format_checker())


@functools.cache
def _format_checker() -> FormatChecker:
    """The formats toolfold checks, the same in every environment.

    jsonschema's own checker depends on which optional packages are installed;
    this one checks the date/time formats with the very parsers the converter
    structures with, so whatever validates also structures.
    """
    import ipaddress

    from jsonschema import FormatChecker

    from toolfold.toolkit._converter import (
        parse_date,
        parse_datetime,
        parse_decimal,
        parse_time,
        parse_uuid,
    )

    checker = FormatChecker(formats=())
    for name, parse in (
        ("date-time", parse_datetime),
        ("date", parse_date),
        ("time", parse_time),
        ("uuid", parse_uuid),
        ("decimal", parse_decimal),
        ("ipv4", ipaddress.IPv4Address),
        ("ipv6", ipaddress.IPv6Address),
        ("regex", re.compile),
    ):
        checker.checks(name, raises=(ValueError, TypeError, re.error))(_string_check(parse))
    checker.checks("email")(lambda v: not isinstance(v, str) or "@" in v)
    return checker


def _string_check(parse: Callable[[str], object]) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        if isinstance(value, str):  # formats apply to strings only
            parse(value)
        return True

    return check


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
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _fast_check(schema: dict[str, Any], validator: Validator) -> Callable[[Any], bool]:
    """The fast yes/no check of `_fastcheck`, or jsonschema's own when it cannot compile it."""
    from toolfold.toolkit._fastcheck import compile_check

    check = compile_check(schema, _format_checker().conforms)
    return validator.is_valid if check is None else check


def _is_plain(tp: Any) -> bool:
    """Whether a validated JSON value already is a value of ``tp`` (no structuring needed)."""
    if tp in (str, bool, Any, object, type(None)):
        return True
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _is_plain(args[0])
    if origin is Literal:
        return all(isinstance(a, (str, bool)) or a is None for a in args)
    if origin is Union or origin is types.UnionType:
        return all(_is_plain(a) for a in args)
    if origin is list:
        return not args or _is_plain(args[0])
    if origin is dict:
        return not args or (args[0] is str and _is_plain(args[1]))
    return tp is list or tp is dict


# -- JSON decoding problems ------------------------------------------------------


def _excerpt(text: str, pos: int, width: int = 30) -> str:
    start, end = max(0, pos - width), min(len(text), pos + width)
    before = ("..." if start else "") + text[start:pos]
    after = text[pos:end] + ("..." if end < len(text) else "")
    return _visible(before) + ">>>" + _visible(after)


def _visible(text: str) -> str:
    # Only line breaks and tabs are escaped: the excerpt must stay one line.
    return text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def _json_problem(text: str, exc: json.JSONDecodeError) -> str:
    return (
        f"{exc.msg} at line {exc.lineno}, column {exc.colno} (char {exc.pos}): "
        f"{_excerpt(text, exc.pos)}"
    )


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else type(value).__name__


# -- schema problems -------------------------------------------------------------

_Problem = tuple[tuple[Any, ...], str]


def _sort_key(path: Any) -> tuple[tuple[int, int, str], ...]:
    return tuple((1, p, "") if isinstance(p, int) else (0, 0, str(p)) for p in path)


def _schema_problems(validator: Validator, value: Any) -> list[str]:
    problems: list[_Problem] = []
    for error in validator.iter_errors(value):
        problems.extend(_problems(error))
    return _render(problems)


def _render(problems: list[_Problem]) -> list[str]:
    problems.sort(key=lambda p: (_sort_key(p[0]), p[1]))
    lines = [f"{format_path(path)}: {message}" for path, message in problems]
    return list(dict.fromkeys(lines))  # one line per distinct problem, order kept


def _problems(error: ValidationError) -> list[_Problem]:
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
    return message if len(message) <= 300 else message[:297] + "..."


def _union_problems(error: ValidationError, path: tuple[Any, ...]) -> list[_Problem]:
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
    if len(meant) == 1:
        out: list[_Problem] = []
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
    best = best_match([e for errs in meant for e in errs])
    if best is None:
        return [(path, head)]
    best_path = tuple(best.absolute_path)
    where = "" if best_path == path else f"{format_path(best_path)}: "
    return [(path, f"{head}; closest: {where}{_message(best)}")]


# -- lenient nulls ---------------------------------------------------------------


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    for _ in range(32):  # a chain of plain $refs; more than this is a cycle
        if not isinstance(schema, Mapping) or "$ref" not in schema:
            return schema
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, Mapping) or part not in target:
                return schema
            target = target[part]
        schema = target
    return schema


def _admits_null(schema: Any, root: Mapping[str, Any]) -> bool:
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return schema is not False
    if "const" in schema:
        return schema["const"] is None
    if "enum" in schema:
        return None in schema["enum"]
    if "type" in schema:
        t = schema["type"]
        return t == "null" or (isinstance(t, list) and "null" in t)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return any(_admits_null(s, root) for s in schema[key])
    if "allOf" in schema:
        return all(_admits_null(s, root) for s in schema["allOf"])
    return "$ref" not in schema


def _drop_optional_nulls(schema: Any, root: Mapping[str, Any], value: Any) -> Any:
    """``value`` without the nulls of optional, non-nullable properties (copied only if changed)."""
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, dict):
        branch = _only_branch(schema, root, "properties")
        if branch is not None:
            return _drop_optional_nulls(branch, root, value)
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            return value
        required = schema.get("required", ())
        out: dict[str, Any] | None = None
        for key, item in value.items():
            sub = props.get(key, _MISSING)
            if sub is _MISSING:
                continue
            if item is None and key not in required and not _admits_null(sub, root):
                new: Any = _MISSING
            else:
                new = _drop_optional_nulls(sub, root, item)
                if new is item:
                    continue
            if out is None:
                out = dict(value)
            if new is _MISSING:
                del out[key]
            else:
                out[key] = new
        return value if out is None else out
    if isinstance(value, list):
        branch = _only_branch(schema, root, "items")
        if branch is not None:
            return _drop_optional_nulls(branch, root, value)
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return value
        new_items = [_drop_optional_nulls(items, root, v) for v in value]
        changed = any(a is not b for a, b in zip(new_items, value, strict=True))
        return new_items if changed else value
    return value


def _only_branch(schema: Mapping[str, Any], root: Mapping[str, Any], key: str) -> Any:
    """The one branch of an anyOf/oneOf that has ``key`` (``properties``/``items``), if exactly one."""
    for combinator in ("anyOf", "oneOf"):
        branches = schema.get(combinator)
        if isinstance(branches, list):
            found = [
                b
                for b in (_resolve(s, root) for s in branches)
                if isinstance(b, Mapping) and key in b
            ]
            return found[0] if len(found) == 1 else None
    return None


# -- structuring problems --------------------------------------------------------


def _structure_problems(exc: BaseException, path: tuple[Any, ...], tp: Any) -> list[_Problem]:
    from cattrs.errors import (
        ClassValidationError,
        ForbiddenExtraKeysError,
        IterableValidationError,
    )

    from toolfold.toolkit._converter import UnionStructureError

    if isinstance(exc, IterableValidationError):
        out: list[_Problem] = []
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            out.extend(_structure_problems(sub, (*path, note.index), note.type))
        for sub in without:
            out.extend(_structure_problems(sub, path, None))
        return out
    if isinstance(exc, ClassValidationError):
        found: list[_Problem] = []
        by_field, unnamed = exc.group_exceptions()
        for sub, field in by_field:
            if type(sub) is KeyError:  # said of the object, as jsonschema does
                found.append((path, f"{field.name!r} is a required property"))
            else:
                found.extend(_structure_problems(sub, (*path, field.name), field.type))
        for sub in unnamed:
            found.extend(_structure_problems(sub, path, exc.cl))
        return found
    if isinstance(exc, ForbiddenExtraKeysError):
        extra = ", ".join(repr(k) for k in sorted(exc.extra_fields))
        return [(path, f"unexpected properties {extra}")]
    if isinstance(exc, UnionStructureError):
        tried = "; ".join(
            f"as {_type_name(arm)}: {_leaf_message(sub, arm)}" for arm, sub in exc.errors
        )
        return [(path, f"{exc}" + (f" ({tried})" if tried else ""))]
    if isinstance(exc, KeyError):
        return [
            (
                path,
                f"missing required property {exc.args[0]!r}"
                if exc.args
                else "missing required property",
            )
        ]
    return [(path, _leaf_message(exc, tp))]


def _leaf_message(exc: BaseException, tp: Any) -> str:
    if isinstance(exc, (ValueError, TypeError)) and tp is not None:
        return f"cannot convert to {_type_name(tp)}: {exc}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if tp is type(None):
        return "null"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")
