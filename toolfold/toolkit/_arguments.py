"""Checking a model's tool arguments: decode, validate, structure.

`ArgumentChecker` does three steps for one tool, and raises one
`ToolArgumentError` naming every problem with its JSON path:

1. decode the argument text (``""`` is ``{}``; anything but an object is an
   error; malformed JSON is reported with its line, column and an excerpt);
2. validate against the tool's JSON Schema with one validator compiled per
   checker (Draft 2020-12 unless the schema names its ``$schema``), checking the
   ``date-time``, ``date``, ``time``, ``uuid``, ``decimal``, ``path`` (no
   NUL), ``email``, ``ipv4``, ``ipv6`` and ``regex`` formats. The happy path asks only a yes/no check
   compiled from the schema (`_fastcheck`); jsonschema explains failures
   (`_problems` words them);
3. structure the values into the declared parameter types with the toolkit's
   cattrs converter (decorated tools only; explicit-schema tools get the dict).

A ``null`` sent for an optional property whose schema does not admit ``null``
is read as "left out" (the default applies): OpenAI's strict mode makes every
property required and nullable, so a model may send ``null`` where a default is
meant (`toolfold.toolkit._jsonschema.drop_optional_nulls`). This is only looked at when validation fails, so it costs
nothing on the happy path. jsonschema and cattrs are imported on first use, to keep
``import toolfold`` cheap.
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
import types
import typing
import weakref
from collections.abc import Callable, Mapping
from decimal import Decimal, localcontext
from typing import TYPE_CHECKING, Any, Literal, Union

from toolfold._errors import ArgumentJSONError, ArgumentValidationError, ToolDefinitionError
from toolfold.toolkit import _field
from toolfold.toolkit._field import has_checks, is_hashable
from toolfold.toolkit._flags import flag_class
from toolfold.toolkit._frozen import thaw
from toolfold.toolkit._jsonschema import drop_optional_nulls
from toolfold.toolkit._problems import (
    Problem,
    format_path,
    json_problem,
    not_an_object,
    number_problem,
    render,
    schema_problem_list,
    short_repr,
    structure_problems,
    type_name,
)
from toolfold.toolkit._results import describe_exception

if TYPE_CHECKING:
    from jsonschema import FormatChecker
    from jsonschema.protocols import Validator

__all__ = ["MAX_DEPTH", "ArgumentChecker", "compile_validator", "parameter_hooks"]

_Hook = Callable[[Any, Any], Any]

#: Arguments nested deeper than this are refused in a run (`toolfold.runtime.core._arguments`):
#: no tool needs them, and deeper values break the recursion of everything that walks them.
MAX_DEPTH = 64
#: Why a value too deep to check is refused, as a run says it of argument text.
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep"


class NotJSONNumber(ValueError):
    """A number JSON cannot carry into Python: NaN, Infinity, or too large for a float."""


def _reject_constant(name: str) -> Any:
    raise NotJSONNumber(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):
        raise NotJSONNumber(text)
    return value


_INF = float("inf")
# NaN and Infinity are Python extensions to JSON; 1e400 is JSON but overflows.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


class _TooLarge(float):
    """A JSON number that overflows a float (``1e400``), found by `too_large_problems`.

    Its value is the largest finite float of its sign, so a schema judges it as
    the huge number it is (``1e400 is not of type 'string'``, ``... is greater
    than the maximum of 10``); its repr is the number as written.
    """

    text: str

    def __repr__(self) -> str:
        return self.text


def _marked_float(text: str) -> float:
    value = float(text)
    if value in (_INF, -_INF):
        marked = _TooLarge(math.copysign(sys.float_info.max, value))
        marked.text = text
        return marked
    return value


_MARKING = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_marked_float)


def too_large_problems(text: str, schema: Mapping[str, Any] | None = None) -> list[str] | None:
    """Every problem of argument ``text`` that holds numbers too large for a float
    (``1e400``), each at its path, as the same value written in digits is reported;
    None when the text holds none, or is not JSON for another reason (NaN, a syntax
    error).

    With the parameters ``schema``, every other path is validated too (every
    problem at once), and where the schema refuses the large number itself (a
    ``str`` parameter: ``$.s: 1e400 is not of type 'string'``) its words stand
    instead of "too large for float".
    """
    try:
        value = _MARKING.decode(text)
    except (ValueError, RecursionError):
        return None
    marks: list[tuple[tuple[Any, ...], _TooLarge]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:  # iterative: the nesting is not checked yet
        path, item = stack.pop()
        if isinstance(item, _TooLarge):
            marks.append((path, item))
        elif isinstance(item, dict):
            stack += [((*path, k), v) for k, v in reversed(item.items())]
        elif isinstance(item, list):
            stack += [((*path, i), v) for i, v in reversed(list(enumerate(item)))]
    if not marks:
        return None
    found: list[Problem] = [(path, too_large(item.text)) for path, item in marks]
    if schema is None or not isinstance(value, dict):
        return render(found)
    schema = dict(schema)
    try:
        validator = _compile(schema)
        stripped = drop_optional_nulls(value, schema, schema)
        refused = schema_problem_list(validator, stripped)
    except Exception:  # jsonschema itself fails: the sizes alone are reported
        return render(found)
    judged = {path for path, _ in refused}  # where the schema refuses the number, its words stand
    left = [(path, item) for path, item in marks if path not in judged]
    integers = _integer_places(stripped, left, validator)
    return render(refused + [(path, too_large(item.text, path in integers)) for path, item in left])


def too_large(text: str, integer: bool = False) -> str:
    """The problem of the number ``text``, too large for a float; for a place that takes
    the integer it is (``1e400`` for an ``int``), how to send it there."""
    if integer:
        return (
            f"the integer {text} must be written in digits"
            " (a number with an exponent is read as a float, at most about 1.8e308)"
        )
    return f"the number {text} is too large for float (at most about 1.8e308)"


def _integer_places(
    value: Any, marks: list[tuple[tuple[Any, ...], _TooLarge]], validator: Validator
) -> set[tuple[Any, ...]]:
    """The paths of ``marks`` (numbers too large for a float in ``value``) where the schema
    asks for an integer and takes the one the text writes (``1e400``: 10**400, as it
    would in digits), but not a number with a fraction beside it (a ``float``'s place)."""
    exact: dict[tuple[Any, ...], int] = {}
    for path, item in marks:
        try:
            number = Decimal(item.text)
        except ArithmeticError:
            continue
        # (the digits Python turns into text at most: the integer must be printable)
        if number == number.to_integral_value() and number.adjusted() < 4300:
            exact[path] = int(number)
    if not exact:
        return set()
    with localcontext() as exactly:
        exactly.prec = 4400  # (a fraction kept beside 4300 digits)
        halves = {path: Decimal(number) + Decimal("0.5") for path, number in exact.items()}
    try:
        takes_integer = _refused_at(value, exact, validator)
        takes_fraction = _refused_at(value, halves, validator)
    except Exception:  # (too deep to copy, or jsonschema fails on the number)
        return set()
    return {path for path in exact if path not in takes_integer and path in takes_fraction}


def _refused_at(
    value: Any, numbers: Mapping[tuple[Any, ...], Any], validator: Validator
) -> set[Any]:
    """The paths where the schema refuses ``value`` with these numbers put in at their paths."""
    return {path for path, _ in schema_problem_list(validator, with_values_at(value, numbers))}


def with_values_at(value: Any, values: Mapping[tuple[Any, ...], Any]) -> Any:
    """A plain copy of decoded JSON ``value`` (`thaw`: frozen arguments too) with ``values``
    put in at their paths (keys and list indexes from the root)."""
    copied = thaw(value)
    for path, number in values.items():
        place = copied
        for key in path[:-1]:
            place = place[key]
        place[path[-1]] = number
    return copied


def strict_loads(text: str) -> Any:
    """JSON text with finite numbers only: NaN, Infinity and ``1e999`` are refused.

    Raises:
        ValueError: The text is not JSON or holds a number JSON cannot carry.
        RecursionError: The text nests deeper than the interpreter decodes.
    """
    # What `decode` does, without its two whitespace scans, for text that is one
    # value from the first character to the last (the argument text of a call);
    # any other text (surrounding whitespace, an error) goes through `decode`.
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return _DECODER.decode(text)
    if end != len(text):
        return _DECODER.decode(text)
    return value


_scan = _DECODER.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__


class ArgumentChecker:
    """Validates and structures the arguments a model sends to one tool.

    Args:
        tool_name: The tool's name, used in error messages.
        schema: The tool's JSON Schema (an object schema).
        param_types: Parameter name -> annotated type, for decorated tools.
        pass_dict: True for explicit-schema tools: `check` returns the validated
            dict unchanged instead of structured keyword arguments.
        hooks: The parameters' structure hooks, built already (`parameter_hooks`);
            None: built on the first `check` that structures.
        model: The pydantic model a tool made of it (``tool(Model)``) makes: it
            validates the arguments as a whole, and `check` returns them as
            `ModelArguments` holding the model made.
    """

    __slots__ = (
        "_hooks",
        "_model",
        "_param_types",
        "_pass_dict",
        "_schema",
        "_tool_name",
        "_validator",
        "as_is",
        "is_valid",
    )

    def __init__(
        self,
        tool_name: str,
        schema: Mapping[str, Any],
        param_types: Mapping[str, Any] | None,
        pass_dict: bool,
        hooks: Mapping[str, tuple[Any, _Hook | None]] | None = None,
        model: type | None = None,
    ) -> None:
        self._tool_name = tool_name
        self._model = model
        self._schema = dict(schema)
        self._param_types = dict(param_types or {})
        self._pass_dict = pass_dict
        self._validator = _compile(self._schema)
        #: The fast yes/no check of the schema (jsonschema's own when it has none).
        self.is_valid = _fast_check(self._schema, self._validator)
        self._hooks: dict[str, tuple[Any, _Hook | None]] | None = None
        #: Per parameter of a decorated tool, the types of the JSON scalars that
        #: structuring hands on unchanged; made with the hooks (given, or on the
        #: first `check` that structures; None until then, and for explicit-schema tools).
        self.as_is: dict[str, frozenset[type]] | None = None
        if hooks is not None:
            self._keep_hooks(dict(hooks))

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
        try:
            value = self._decode(raw)
            if not self.is_valid(value):
                value = self._recover(value)
            if self._pass_dict:
                return dict(value) if value is raw else value  # never hand back the caller's dict
            return self._structure(value)
        except RecursionError:  # a value deeper than checking or structuring recurses
            self._fail([f"$: the arguments are {TOO_DEEP}"])

    def _decode(self, raw: str | Mapping[str, Any]) -> dict[str, Any]:
        value: Any = raw
        if isinstance(raw, str):
            if not raw or raw.isspace():
                return {}
            try:
                value = _DECODER.decode(raw)
            except json.JSONDecodeError as exc:
                raise ArgumentJSONError(self._tool_name, json_problem(raw, exc), exc.pos) from exc
            except NotJSONNumber as exc:
                too_large = too_large_problems(raw, self._schema)
                if too_large is not None:
                    raise ArgumentValidationError(self._tool_name, too_large) from None
                problem, pos = number_problem(raw, str(exc))
                raise ArgumentJSONError(self._tool_name, problem, pos) from exc
            except ValueError as exc:  # e.g. an integer of more than 4300 digits
                raise ArgumentJSONError(self._tool_name, str(exc), 0) from exc
            except RecursionError:
                problem = "the arguments nest deeper than can be decoded"
                raise ArgumentJSONError(self._tool_name, problem, 0) from None
        if not isinstance(value, dict):
            if isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(raw, str):
                self._fail([not_an_object(self._tool_name, value)])
            else:  # a caller outside the type checker's view
                kind = type(value).__name__
                self._fail([f"$: expected JSON text or a mapping of arguments, got {kind}"])
        if not isinstance(raw, str):
            for key in value:  # a loop, not all(<generator>): this runs for every call
                if not isinstance(key, str):
                    bad_keys = [k for k in value if not isinstance(k, str)]
                    self._fail([f"$: argument names must be strings, got {short_repr(bad_keys)}"])
        result: dict[str, Any] = value
        return result

    def _recover(self, value: dict[str, Any]) -> dict[str, Any]:
        try:
            if self.is_valid is not self._validator.is_valid and self._validator.is_valid(value):
                return value  # jsonschema has the last word
            stripped = drop_optional_nulls(value, self._schema, self._schema)
            if stripped is not value and self._validator.is_valid(stripped):
                return typing.cast("dict[str, Any]", stripped)
            found = schema_problem_list(self._validator, stripped)
        except Exception as exc:  # jsonschema itself fails, e.g. 10**400 against multipleOf 0.1
            problems = [f"$: the arguments could not be checked ({describe_exception(exc)})"]
            self._fail(self._in_flag_words(value, problems))
        # With the problems of the parameters that fit the schema but not their types (a
        # Predicate): listed now, not after the model fixed these, a paid request later.
        broken = {path[0] for path, _ in found if path}
        found.extend(self._structure_problems(stripped, broken))
        self._fail(self._in_flag_words(value, render(found)))

    def _structure_problems(self, value: Any, broken: set[Any]) -> list[Problem]:
        """The problems of structuring each parameter of ``value`` not in ``broken`` (those
        with a schema problem, whose values the types would refuse again, in other words).

        A checker that passes dicts on has no parameter types (an explicit-schema tool),
        or has its fields' types to find these with (an object output type).
        """
        if not self._param_types or not isinstance(value, dict):
            return []
        try:
            hooks = self._hooks if self._hooks is not None else self._build_hooks()
        except ToolDefinitionError:  # a field only its class's own hook structures:
            hooks = self._each_hook()  # the others are checked all the same
        problems: list[Problem] = []
        for name, item in value.items():
            entry = None if name in broken else hooks.get(name)
            if entry is None:
                continue
            tp, hook = entry
            if hook is None:  # (a value of its type once it fits the schema)
                continue
            try:
                hook(item, tp)
            except Exception as exc:
                problems.extend(structure_problems(exc, (name,), tp))
        return problems

    def _each_hook(self) -> dict[str, tuple[Any, _Hook | None]]:
        """The hooks of the parameters the converter can structure, one by one: those it
        cannot (a field of a class with its own hook) are left out, not all of them."""
        hooks: dict[str, tuple[Any, _Hook | None]] = {}
        for name, tp in self._param_types.items():
            try:
                hooks.update(parameter_hooks(self._tool_name, {name: tp}))
            except ToolDefinitionError:
                continue
        return hooks

    def _in_flag_words(self, value: dict[str, Any], problems: list[str]) -> list[str]:
        """``problems``, a flag parameter's in the converter's words, which name the flags.

        The schema bounds a `Flag` by a range (``8 is greater than the maximum of 7``),
        which does not say what the numbers mean; the converter's refusal does.
        """
        from toolfold.toolkit._converter import get_converter

        for name, tp in self._param_types.items():
            cls = _flag_of(tp)
            if cls is None or value.get(name) is None:
                continue
            prefix = f"{format_path((name,))}: "
            at = next((i for i, p in enumerate(problems) if p.startswith(prefix)), None)
            if at is None:
                continue
            try:
                get_converter().structure(value[name], cls)
            except Exception as exc:  # (a flag's own `_missing_` may raise anything)
                if not isinstance(exc, ValueError):
                    continue  # the schema's words stand
                lines = render(structure_problems(exc, (name,), cls))
                rest = [p for p in problems[at:] if not p.startswith(prefix)]
                problems = problems[:at] + lines + rest
        return problems

    def build_hooks(self) -> None:
        """Build the parameters' structure hooks now, not on the first `check`.

        Raises:
            ToolDefinitionError: The converter cannot structure a parameter's type.
        """
        if self._hooks is None:
            self._build_hooks()

    def _structure(self, value: dict[str, Any]) -> dict[str, Any]:
        hooks = self._hooks if self._hooks is not None else self._build_hooks()
        result: dict[str, Any] = {}
        problems: list[Problem] | None = None
        for name, item in value.items():
            entry = hooks.get(name)
            if entry is None:
                if self._model is not None:  # an extra key the model's schema allowed
                    result[name] = item  # (extra="allow"): the model takes it
                    continue
                problems = problems or []
                problems.append(((name,), "unexpected argument"))
                continue
            tp, hook = entry
            if hook is None or (hook in _AS_IS and type(item) in _AS_IS[hook]):
                result[name] = item  # already a value of its type
                continue
            try:
                result[name] = hook(item, tp)
            except Exception as exc:
                problems = problems or []
                problems.extend(structure_problems(exc, (name,), tp))
        if problems:
            self._fail(render(problems))
        if self._model is not None:
            return self._made(result, self._model)
        return result

    def _made(self, arguments: dict[str, Any], model: type) -> dict[str, Any]:
        """The arguments of a pydantic model's own tool, with the model they make."""
        from toolfold.toolkit._pydantic import structure_model

        try:
            built = structure_model(arguments, model)
        except Exception as exc:  # a validator may raise anything: an argument error still
            self._fail(render(structure_problems(exc, (), model)))
        return ModelArguments(arguments, model, built)

    def _build_hooks(self) -> dict[str, tuple[Any, _Hook | None]]:
        return self._keep_hooks(parameter_hooks(self._tool_name, self._param_types))

    def _keep_hooks(
        self, hooks: dict[str, tuple[Any, _Hook | None]]
    ) -> dict[str, tuple[Any, _Hook | None]]:
        self.as_is = {
            name: _SCALARS if hook is None else _AS_IS.get(hook, frozenset())
            for name, (_, hook) in hooks.items()
        }
        self._hooks = hooks
        return hooks

    def _fail(self, problems: list[str]) -> typing.NoReturn:
        raise ArgumentValidationError(self._tool_name, problems)


class ModelArguments(dict[str, Any]):
    """The checked arguments of a pydantic model's own tool (``tool(Model)``), as JSON
    data by field alias, with the model they made: `Tool.invoke` hands that on
    instead of making it again (its validators run once)."""

    __slots__ = ("built", "model")

    def __init__(self, arguments: dict[str, Any], model: type, built: Any) -> None:
        super().__init__(arguments)
        self.model = model
        self.built = built


def parameter_hooks(
    tool_name: str, param_types: Mapping[str, Any]
) -> dict[str, tuple[Any, _Hook | None]]:
    """Parameter name -> (type, structure hook) of a decorated tool (hook None: the
    validated JSON value is one of the type already).

    Raises:
        ToolDefinitionError: The converter cannot structure a parameter's type
            (every such parameter named at once).
    """
    hooks: dict[str, tuple[Any, _Hook | None]] = {}
    missing: list[str] = []
    for name, tp in param_types.items():
        light = _scalar_hook(tp)
        if light is not _NOT_SCALAR:
            hooks[name] = (tp, light)  # (no converter, so no cattrs import, for these)
            continue
        from toolfold.toolkit._converter import structure_int

        try:
            hook = structure_hook(tp)
            if tp is int and hook is structure_int:
                hook = _exact_int  # the same hook, skipped for a value that is an int
            hooks[name] = (tp, hook)
        except Exception as exc:  # cattrs has no rule for the type (or a part of it)
            missing.append(f"parameter {name!r}: {no_hook_problem(tp, exc)}")
    if missing:
        raise ToolDefinitionError(tool_name, missing)
    return hooks


_NOT_SCALAR: Any = object()


def _scalar_hook(tp: Any) -> Any:
    """The hook of a JSON scalar type (str, int, float, bool, None, a Literal of
    strs and bools, Optional of them), found without the converter; `_NOT_SCALAR`
    for any other type, or one a user registered hooks for (the converter's then)."""
    if is_plain(tp):
        return None  # (as `structure_hook`, which looks no further either)
    if not is_hashable(tp):
        return _NOT_SCALAR
    light = _LIGHT_HOOKS.get(tp)
    if light is None or _user_hooked(tp):
        return _NOT_SCALAR
    return light


def _user_hooked(tp: Any) -> bool:
    """Whether a structure hook a user registered matches ``tp`` or one of its arms."""
    from toolfold.toolkit._hooks import user_hooks

    for match, structure, _ in user_hooks:
        if structure is None:
            continue
        for part in (tp, *typing.get_args(tp)):
            try:
                if match(part):
                    return True
            except Exception:
                return True  # (the converter then says what it makes of it)
    return False


def _exact_int(value: Any, tp: Any) -> Any:
    """The converter's own ``int`` hook (`_structure` passes an ``int`` value through without it)."""
    from toolfold.toolkit._converter import structure_int

    return structure_int(value, tp)


def _exact_float(value: Any, tp: Any) -> Any:
    """The converter's own ``float`` hook (`_structure` passes a ``float`` value through without it)."""
    from toolfold.toolkit._converter import structure_float

    return structure_float(value, tp)


def _optional_int(value: Any, tp: Any) -> Any:
    """The converter's hook of ``int | None``: None, or its ``int`` hook's value."""
    return None if value is None else _exact_int(value, int)


def _optional_float(value: Any, tp: Any) -> Any:
    """The converter's hook of ``float | None``: None, or its ``float`` hook's value."""
    return None if value is None else _exact_float(value, float)


_LIGHT_HOOKS: dict[Any, _Hook] = {
    int: _exact_int,
    float: _exact_float,
    int | None: _optional_int,  # (equal to Optional[int] and Union[None, int], hash too)
    float | None: _optional_float,
}

# What `as_is` holds: any JSON scalar (nothing nested) for a parameter without a
# hook; for one with a hook of `_AS_IS`, the types it hands on unchanged (an int
# for `_exact_int`); nothing for the others.
_SCALARS: frozenset[type] = frozenset({str, int, float, bool, type(None)})
_INT: frozenset[type] = frozenset({int})
_AS_IS: dict[Any, frozenset[type]] = {
    _exact_int: _INT,
    _exact_float: frozenset({float}),
    _optional_int: frozenset({int, type(None)}),
    _optional_float: frozenset({float, type(None)}),
}


def compile_validator(schema: Mapping[str, Any]) -> Validator:
    """jsonschema's validator for ``schema`` as the argument check reads it.

    The schema's ``$schema`` draft (else 2020-12), toolfold's formats and a
    decimal-exact ``multipleOf``: what a tool call's arguments must pass
    (`toolfold.testing.sample_value` checks its samples with it).
    """
    return _compile(dict(schema))


def _compile(schema: dict[str, Any]) -> Validator:
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator)
    validator: Validator = _decimal_multiples(cls)(schema, format_checker=format_checker())
    return validator


@functools.cache
def _decimal_multiples(cls: Any) -> Any:
    """``cls`` with a decimal-exact ``multipleOf``, the same test as the fast check."""
    from jsonschema import ValidationError, validators

    from toolfold.toolkit._fastcheck import is_multiple

    def multiple_of(validator: Any, step: Any, instance: Any, schema: Any) -> Any:
        if validator.is_type(instance, "number") and not is_multiple(instance, step):
            yield ValidationError(f"{short_repr(instance)} is not a multiple of {step}")

    return validators.extend(cls, {"multipleOf": multiple_of})  # type: ignore[no-untyped-call]


@functools.cache
def format_checker() -> FormatChecker:
    """The formats toolfold checks, the same in every environment (and in
    `check_arguments`, which judges arguments as the tool does).

    jsonschema's own checker depends on which optional packages are installed;
    this one checks the date/time formats with the very parsers the converter
    structures with, so whatever validates also structures.
    """
    import ipaddress

    from jsonschema import FormatChecker

    from toolfold.toolkit._converter import (
        check_path,
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
        ("path", check_path),
        ("ipv4", ipaddress.IPv4Address),
        ("ipv6", ipaddress.IPv6Address),
        ("regex", re.compile),
    ):
        checker.checks(name, raises=(ValueError, TypeError, re.error))(_string_check(parse))
    checker.checks("email")(lambda v: not isinstance(v, str) or "@" in v)
    return checker


def format_conforms(value: Any, format: str) -> bool:
    """Whether ``value`` conforms to ``format`` as the argument check judges it (`format_checker`)."""
    return format_checker().conforms(value, format)


def _string_check(parse: Callable[[str], object]) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        if isinstance(value, str):  # formats apply to strings only
            parse(value)
        return True

    return check


def _fast_check(schema: dict[str, Any], validator: Validator) -> Callable[[Any], bool]:
    """The fast yes/no check of `_fastcheck`, or jsonschema's own when it cannot compile it."""
    from toolfold.toolkit._fastcheck import compile_check

    check = compile_check(schema, format_checker().conforms)
    return validator.is_valid if check is None else check


def _flag_of(tp: Any) -> Any:
    """The `Flag` class of a parameter typed with one (optional, annotated or not), else None."""
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0] if len(args) == 1 else None
    return flag_class(tp)


def structure_hook(tp: Any) -> _Hook | None:
    """The converter's structure hook for ``tp``; None for a type whose validated JSON
    value already is one (`is_plain`).

    Raises:
        Exception: The converter has no hook for the type or a part of it
            (`no_hook_problem` words the definition error).
    """
    if is_plain(tp):
        return None
    from toolfold.toolkit._converter import get_converter

    converter = get_converter()
    hook: _Hook = converter.get_structure_hook(tp)
    _look_up_parts(converter, tp, hook)
    return hook


def _look_up_parts(converter: Any, tp: Any, hook: _Hook) -> None:
    """Look up the hook of every type inside ``tp`` now, not on the first value.

    cattrs makes the hook of a set, a frozenset or a tuple (and the toolkit the
    hook of a TypedDict, or of a class that may refer back to itself) without
    its parts' hooks, which it looks up as values come. A part with no hook
    (a class with a schema rule and no `register_type_hooks`) would then be
    found by a call, and blamed on the model, instead of at definition time.
    The walk stops at a type the user's own hook structures, which handles its parts.

    Raises:
        StructureHandlerNotFoundError: The converter has no hook for a part.
    """
    from cattrs.errors import StructureHandlerNotFoundError

    from toolfold.toolkit._hooks import user_hooks

    done = _LOOKED_UP.setdefault(converter, set())
    if is_hashable(tp) and tp in done:
        return
    users = {id(structure) for _, structure, _ in user_hooks if structure is not None}
    seen: set[Any] = {tp if is_hashable(tp) else id(tp)}
    todo: list[tuple[Any, _Hook | None]] = [(tp, hook)]
    while todo:
        node, found = todo.pop()
        if found is None:
            try:
                found = converter.get_structure_hook(node)
            except StructureHandlerNotFoundError:
                raise
            except Exception:  # e.g. a class whose hints do not resolve: a call says why
                continue
        if id(found) in users:
            continue
        for part in _parts(node):
            key = part if is_hashable(part) else id(part)
            if key not in seen and not is_plain(part):  # (None has no hook of its own)
                seen.add(key)
                todo.append((part, None))
    if is_hashable(tp):
        if len(done) >= _field.TYPES_KEPT:  # classes made at run time must not pile up
            done.clear()
        done.add(tp)  # a hook added later cannot make a part go missing


# Per converter, the types whose parts were all found (a program uses a class in
# many tools); a converter is only replaced by tests. Bounded as the converter's
# own caches are (`TYPES_KEPT`).
_LOOKED_UP: weakref.WeakKeyDictionary[Any, set[Any]] = weakref.WeakKeyDictionary()


def _parts(tp: Any) -> list[Any]:
    """The types a value of ``tp`` holds: a generic's arguments, a class's fields."""
    from toolfold.toolkit._classes import (
        MISSING,
        UnresolvedHints,
        class_fields,
        substitute_type_vars,
        unqualified,
    )

    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Literal:
        return []
    if origin is typing.Annotated:
        return [args[0]]
    cls = origin if origin is not None else tp
    found = None
    if isinstance(cls, type):
        try:
            found = class_fields(cls)
        except (UnresolvedHints, NameError, TypeError):
            return []  # its own hook says what it cannot resolve
    if found is not None:
        if origin is not None:
            found = substitute_type_vars(cls, args, found)
        types_ = [unqualified(t)[0] for _n, t, *_ in found]
    else:
        types_ = list(args)
    return [
        t
        for t in types_
        if t is not MISSING and t is not Ellipsis and not isinstance(t, (typing.TypeVar, str, list))
    ]


def no_hook_problem(tp: Any, exc: Exception) -> str:
    """The definition problem for ``tp``, which `structure_hook` failed on with ``exc``."""
    return (
        f"cannot structure JSON into {type_name(tp)} ({exc});"
        " register hooks for the type with register_type_hooks()"
    )


def is_plain(tp: Any) -> bool:
    """Whether a validated JSON value already is a value of ``tp`` (no structuring needed)."""
    if tp in (str, bool, Any, object, type(None)):
        return True
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:  # a Predicate in the metadata is checked when structuring
        return is_plain(args[0]) and not has_checks(tp.__metadata__)
    if origin is Literal:
        return all(isinstance(a, (str, bool)) or a is None for a in args)
    if origin is Union or origin is types.UnionType:
        return all(is_plain(a) for a in args)
    if origin is list:
        return not args or is_plain(args[0])
    if origin is dict:
        return not args or (args[0] is str and is_plain(args[1]))
    return tp is list or tp is dict
