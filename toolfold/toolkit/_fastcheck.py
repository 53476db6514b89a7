"""A fast yes/no JSON Schema check for the keywords tool schemas use.

jsonschema walks a schema for every instance, yielding errors through layers of
generators: ~90 µs for a tool with a nested dataclass and a list of objects.
Arguments are nearly always valid, so `compile_check` turns a Draft 2020-12
schema into nested closures that only answer "valid?" (~10x faster). When the
answer is no, the caller asks jsonschema for the errors and their messages, and
trusts jsonschema if the two ever disagree; so this module must never say yes
where jsonschema says no. A property test compares them on random schemas and
instances.

A schema using anything outside the supported keywords (``not``, ``if``,
``patternProperties``, ``unevaluatedProperties``, remote ``$ref``s, another
draft, ...) is not compiled: `compile_check` returns None and jsonschema does
all the work.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable, Mapping
from typing import Any

from toolfold.toolkit._jsonschema import MISSING, resolve_local

__all__ = ["compile_check"]

Check = Callable[[Any], bool]

_DRAFT_2020_12 = {
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2020-12/schema#",
}
# Keywords that never affect validity.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$defs",
        "definitions",
        "contentMediaType",
        "contentEncoding",
    }
)


class _Unsupported(Exception):
    """The schema uses something this module does not compile."""


def compile_check(schema: Mapping[str, Any], conforms: Callable[[Any, str], bool]) -> Check | None:
    """Compile ``schema`` into a yes/no check, or None if it uses unsupported keywords.

    Args:
        schema: A Draft 2020-12 JSON Schema (a ``$schema`` naming another draft
            is unsupported).
        conforms: ``(instance, format) -> bool``, the format checker's answer.
    """
    dialect = schema.get("$schema")
    if dialect is not None and dialect not in _DRAFT_2020_12:
        return None
    try:
        return _Compiler(schema, conforms).node(schema, root=True)
    except (_Unsupported, re.error, TypeError, ValueError, KeyError):
        return None


def _always(_: Any) -> bool:
    return True


def _never(_: Any) -> bool:
    return False


def is_multiple(value: Any, step: Any) -> bool:
    """``multipleOf`` in decimal: 0.3 is a multiple of 0.1, as a person (and a model) reads it.

    Float division says otherwise (0.3 / 0.1 is 2.9999999999999996). The
    jsonschema fallback uses this same test, so both checks agree.
    """
    if type(value) is int and type(step) is int:
        return not value % step
    from fractions import Fraction

    # The shortest decimal text of each float, read exactly (no precision limit,
    # so 10**400 against 0.1 is answered too).
    try:
        exact = [Fraction(repr(n)) if type(n) is float else Fraction(n) for n in (value, step)]
        return exact[0] % exact[1] == 0
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return False


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, bool)


_TYPES: dict[str, Check] = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (
        type(v) is int  # the common case, without the two isinstance calls
        or (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": _is_number,
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}

# The type checks that every value of one Python type passes (`object_` tests that type inline).
_SURE: dict[Check, type] = {
    _TYPES["integer"]: int,
    _TYPES["number"]: float,
    _TYPES["string"]: str,
    _TYPES["boolean"]: bool,
}


def _key(value: Any) -> Any:
    """A hashable key, equal exactly when JSON Schema calls two values equal."""
    if isinstance(value, bool) or value is None:
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    if isinstance(value, list):
        return (2, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return (3, frozenset((k, _key(v)) for k, v in value.items()))
    if _is_number(value):
        return (4, value)  # 1 == 1.0, and they hash alike
    raise _Unsupported(type(value).__name__)


def _any(checks: list[Check]) -> Check:
    # Loops, not any() over a generator: this runs for every Optional value.
    def check(v: Any) -> bool:
        for c in checks:  # noqa: SIM110
            if c(v):
                return True
        return False

    return check


def _all(checks: list[Check]) -> Check:
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:  # the usual object schema: its type, then its properties
        first, second = checks
        return lambda v: first(v) and second(v)

    def check(v: Any) -> bool:
        for c in checks:  # noqa: SIM110 (a loop is faster than all() over a generator)
            if not c(v):
                return False
        return True

    return check


class _Compiler:
    def __init__(self, root: Mapping[str, Any], conforms: Callable[[Any, str], bool]) -> None:
        self.root = root
        self.conforms = conforms
        self.refs: dict[str, list[Check]] = {}

    def node(self, schema: Any, root: bool = False) -> Check:
        if schema is True:
            return _always
        if schema is False:
            return _never
        if not isinstance(schema, Mapping):
            raise _Unsupported(schema)
        checks: list[Check] = []
        handled = set(_ANNOTATIONS)
        if root:
            handled.add("$schema")
        for keyword, compile_ in _KEYWORDS.items():
            if keyword in schema:
                handled.add(keyword)
                found = compile_(self, schema[keyword], schema)
                if found is not None:
                    checks.append(found)
        unknown = set(schema) - handled
        if unknown:
            raise _Unsupported(sorted(unknown))
        return _all(checks)

    # -- keywords -------------------------------------------------------------

    def type_(self, spec: Any, schema: Mapping[str, Any]) -> Check | None:
        if spec == "object" and ("properties" in schema or "additionalProperties" in schema):
            return None  # tested by `object_`'s check: one closure fewer a call
        names = [spec] if isinstance(spec, str) else list(spec)
        preds = [_TYPES[n] for n in names]
        if len(preds) == 1:
            return preds[0]
        return _any(preds)

    def enum(self, spec: Any, _: Any) -> Check:
        keys = frozenset(_key(v) for v in spec)

        def check(v: Any) -> bool:
            try:
                return _key(v) in keys
            except _Unsupported:
                return False

        return check

    def const(self, spec: Any, _: Any) -> Check:
        return self.enum([spec], _)

    def object_(self, props: Any, schema: Mapping[str, Any]) -> Check:
        # Each property's check, with the one Python type whose values pass it
        # outright when it only tests a type (``int`` for ``{"type": "integer"}``):
        # those values skip the call.
        checks: dict[str, tuple[Check, type | None]] = {}
        for k, s in props.items():
            c = self.node(s)
            checks[k] = (c, _SURE.get(c))
        required = tuple(schema.get("required", ()))
        extra = schema.get("additionalProperties", True)
        extra_check = None if extra is True else self.node(extra)
        typed = schema.get("type") == "object"  # the type test too (see `type_`)

        def check(v: Any) -> bool:
            if not isinstance(v, dict):
                return not typed
            for k in required:
                if k not in v:
                    return False
            for k, x in v.items():
                entry = checks.get(k)
                if entry is None:
                    if extra_check is not None and not extra_check(x):
                        return False
                    continue
                c, sure = entry
                if type(x) is not sure and not c(x):
                    return False
            return True

        return check

    def required(self, spec: Any, schema: Mapping[str, Any]) -> Check | None:
        if "properties" in schema:
            return None  # done by object_
        keys = tuple(spec)
        return lambda v: not isinstance(v, dict) or all(k in v for k in keys)

    def additional(self, spec: Any, schema: Mapping[str, Any]) -> Check | None:
        if "properties" in schema:
            return None
        return self.object_({}, schema)

    def property_names(self, spec: Any, _: Any) -> Check:
        c = self.node(spec)
        return lambda v: not isinstance(v, dict) or all(c(k) for k in v)

    def items(self, spec: Any, schema: Mapping[str, Any]) -> Check:
        prefix = [self.node(s) for s in schema.get("prefixItems", ())]
        rest = self.node(spec)
        n = len(prefix)

        def check(v: Any) -> bool:
            if not isinstance(v, list):
                return True
            for c, x in zip(prefix, v):  # noqa: B905 (the list may be shorter)
                if not c(x):
                    return False
            for x in v[n:] if n else v:  # noqa: SIM110 (faster than all())
                if not rest(x):
                    return False
            return True

        return check

    def prefix_items(self, spec: Any, schema: Mapping[str, Any]) -> Check | None:
        if "items" in schema:
            return None
        return self.items(True, schema)

    def unique(self, spec: Any, _: Any) -> Check | None:
        if not spec:
            return None

        def check(v: Any) -> bool:
            if not isinstance(v, list):
                return True
            try:
                return len({_key(x) for x in v}) == len(v)
            except _Unsupported:
                return False

        return check

    def multiple_of(self, spec: Any, _: Any) -> Check:
        if not _is_number(spec) or spec <= 0:
            raise _Unsupported(spec)

        def check(v: Any) -> bool:
            return not _is_number(v) or is_multiple(v, spec)

        return check

    def pattern(self, spec: Any, _: Any) -> Check:
        search = re.compile(spec).search
        return lambda v: not isinstance(v, str) or search(v) is not None

    def format_(self, spec: Any, _: Any) -> Check:
        conforms = self.conforms
        return lambda v: conforms(v, spec)

    def any_of(self, spec: Any, _: Any) -> Check:
        return _any([self.node(s) for s in spec])

    def one_of(self, spec: Any, _: Any) -> Check:
        checks = [self.node(s) for s in spec]
        return lambda v: sum(1 for c in checks if c(v)) == 1

    def all_of(self, spec: Any, _: Any) -> Check:
        return _all([self.node(s) for s in spec])

    def ref(self, spec: Any, _: Any) -> Check:
        if not isinstance(spec, str) or not (spec == "#" or spec.startswith("#/")):
            raise _Unsupported(spec)
        cell = self.refs.get(spec)
        if cell is None:
            # A cell first, so that a recursive type finds itself while compiling.
            cell = self.refs[spec] = []
            target = resolve_local(self.root, spec)
            if target is MISSING:
                raise _Unsupported(spec)
            cell.append(self.node(target, root=target is self.root))
        return lambda v: cell[0](v)


Compile = Callable[["_Compiler", Any, Mapping[str, Any]], "Check | None"]


def _size(op: Callable[[int, int], bool], kind: type) -> Compile:
    """minItems and the like: a bound on ``len`` of values of one kind."""

    def compile_(_c: _Compiler, spec: Any, _s: Mapping[str, Any]) -> Check:
        n = int(spec)

        def check(v: Any) -> bool:
            sized: Any = v  # isinstance against a variable class narrows to object
            return not isinstance(v, kind) or op(len(sized), n)

        return check

    return compile_


def _bound(op: Callable[[Any, Any], bool]) -> Compile:
    """minimum and the like: numbers only, as in jsonschema."""

    def compile_(_c: _Compiler, spec: Any, _s: Mapping[str, Any]) -> Check:
        if not _is_number(spec):
            raise _Unsupported(spec)
        return lambda v: not _is_number(v) or op(v, spec)

    return compile_


_KEYWORDS: dict[str, Compile] = {
    "type": _Compiler.type_,
    "enum": _Compiler.enum,
    "const": _Compiler.const,
    "properties": _Compiler.object_,
    "required": _Compiler.required,
    "additionalProperties": _Compiler.additional,
    "propertyNames": _Compiler.property_names,
    "minProperties": _size(lambda a, b: a >= b, dict),
    "maxProperties": _size(lambda a, b: a <= b, dict),
    "items": _Compiler.items,
    "prefixItems": _Compiler.prefix_items,
    "minItems": _size(lambda a, b: a >= b, list),
    "maxItems": _size(lambda a, b: a <= b, list),
    "uniqueItems": _Compiler.unique,
    "minimum": _bound(lambda v, n: v >= n),
    "maximum": _bound(lambda v, n: v <= n),
    "exclusiveMinimum": _bound(lambda v, n: v > n),
    "exclusiveMaximum": _bound(lambda v, n: v < n),
    "multipleOf": _Compiler.multiple_of,
    "minLength": _size(lambda a, b: a >= b, str),
    "maxLength": _size(lambda a, b: a <= b, str),
    "pattern": _Compiler.pattern,
    "format": _Compiler.format_,
    "anyOf": _Compiler.any_of,
    "oneOf": _Compiler.one_of,
    "allOf": _Compiler.all_of,
    "$ref": _Compiler.ref,
}
