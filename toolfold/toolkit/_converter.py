"""The one cattrs converter of the toolkit, built on first use.

It structures validated JSON arguments into the Python types a tool declares
and unstructures tool results back into JSON-ready values. The rules mirror the
JSON Schemas the toolkit derives, so that anything a schema accepts structures,
and anything a declared type holds unstructures into an instance that validates:

- ``datetime`` / ``date`` / ``time`` <-> ISO 8601 text (RFC 3339, also accepting
  a missing offset, a space or lower-case ``t`` separator and any number of
  fraction digits, the same on every Python version);
- ``UUID`` / ``Path`` <-> text; ``Decimal`` <-> text (exact: its schema is a
  string, because a JSON number may lose digits in a model's or a parser's
  floats; the hook also takes a number when called directly);
- ``str`` / ``int`` / ``float`` / ``bool`` are strict: a value of another
  JSON kind is an error, never converted (``"3"`` is not an int, ``5`` not a
  str, ``1`` not a bool); an integral float is an int and an int a float, as
  in JSON Schema;
- ``Enum`` <-> its value; ``set`` / ``frozenset`` -> list;
- ``NamedTuple`` <-> an object by field name (its schema is an object; the hook
  also takes an array when called directly);
- unions try the alternative of the value's own type first (a string stays a
  ``str`` in ``str | datetime``; an integer prefers ``int`` to ``float``), then
  the others of its JSON kind (in the declared order; a pydantic model's is an
  object), then those of any kind, and keep the first that structures; objects go
  to the class whose fields fit their keys. Of several that may take the value,
  the first whose own JSON Schema accepts it goes first (``Big`` for ``{"n": 50}``
  in ``Small | Big``, told apart by ``le=10`` / ``gt=10`` only), as the
  schema's ``anyOf`` that the value passed reads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import enum
import functools
import json
import linecache
import re
import sys
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from decimal import Decimal, InvalidOperation
from enum import Enum, Flag
from pathlib import Path, PurePath
from typing import Any, Literal, Union

import attrs
import cattrs
from cattrs.cols import namedtuple_dict_structure_factory, namedtuple_dict_unstructure_factory
from cattrs.errors import AttributeValidationNote, ClassValidationError, ForbiddenExtraKeysError

from toolfold._errors import add_note, reduce_error
from toolfold.toolkit import _field, _schema
from toolfold.toolkit._field import (
    Negation,
    expand_metadata,
    has_checks,
    hashable_type,
    is_hashable,
    metadata_kind,
)
from toolfold.toolkit._field import is_typeddict as _is_typeddict
from toolfold.toolkit._flags import flag_names, is_flag_value
from toolfold.toolkit._hooks import HookEntry, user_hooks
from toolfold.toolkit._jsontypes import json_type
from toolfold.toolkit._problems import clip
from toolfold.toolkit._pydantic import is_model, structure_model, unstructure_model
from toolfold.toolkit._results import VIEWS, refuse_run

__all__ = [
    "CheckFailedError",
    "UnionStructureError",
    "check_path",
    "get_converter",
    "parse_date",
    "parse_decimal",
    "parse_datetime",
    "parse_time",
    "parse_uuid",
]

_TIME = r"(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?"
_DATE_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_TIME_RE = re.compile(_TIME)
_DATETIME_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt ]" + _TIME)


def _zone(z: str | None, sign: str | None, hh: str | None, mm: str | None) -> dt.tzinfo | None:
    if z:
        return dt.timezone.utc
    if sign is None or hh is None or mm is None:
        return None
    delta = dt.timedelta(hours=int(hh), minutes=int(mm))
    return dt.timezone(-delta if sign == "-" else delta)


def _micro(fraction: str | None) -> int:
    # RFC 3339 allows any number of fraction digits; Python keeps microseconds.
    return int((fraction or "0")[:6].ljust(6, "0"))


def parse_datetime(text: str) -> dt.datetime:
    """Parse an ISO 8601 / RFC 3339 date-time; raise ValueError if it is not one."""
    m = _DATETIME_RE.fullmatch(text)
    if m is None:
        raise ValueError("expected an ISO 8601 date-time such as 2024-05-01T13:45:00+02:00")
    y, mo, d, h, mi, s, frac, z, sign, oh, om = m.groups()
    return dt.datetime(
        int(y), int(mo), int(d), int(h), int(mi), int(s or 0), _micro(frac),
        tzinfo=_zone(z, sign, oh, om),
    )  # fmt: skip


def parse_date(text: str) -> dt.date:
    """Parse an ISO 8601 calendar date (YYYY-MM-DD); raise ValueError if it is not one."""
    m = _DATE_RE.fullmatch(text)
    if m is None:
        raise ValueError("expected an ISO 8601 date such as 2024-05-01")
    return dt.date(int(m[1]), int(m[2]), int(m[3]))


def parse_time(text: str) -> dt.time:
    """Parse an ISO 8601 time of day (HH:MM[:SS[.ffffff]][offset]); raise ValueError otherwise."""
    m = _TIME_RE.fullmatch(text)
    if m is None:
        raise ValueError("expected an ISO 8601 time such as 13:45:00 or 13:45:00+02:00")
    h, mi, s, frac, z, sign, oh, om = m.groups()
    return dt.time(int(h), int(mi), int(s or 0), _micro(frac), tzinfo=_zone(z, sign, oh, om))


def parse_decimal(text: str) -> Decimal:
    """Parse a finite decimal number written as text; raise ValueError otherwise."""
    return _structure_decimal(text, Decimal)


def check_path(text: str) -> str:
    """``text`` if it can name a file system path; raise ValueError if it cannot.

    No system takes a NUL character in a path. An empty string is taken, as
    ``Path("")`` takes it (``Path(".")``): a tool may default a path to ``""``
    (``attrs.field(default="", converter=Path)``), and refusing it refused the
    tool's own default.
    """
    if "\x00" in text:
        raise ValueError("a file system path cannot hold a NUL character")
    return text


def parse_uuid(text: str) -> uuid.UUID:
    """Parse a UUID in any form ``uuid.UUID`` accepts; raise ValueError otherwise."""
    return uuid.UUID(text)


def is_namedtuple(tp: Any) -> bool:
    """Any named tuple class: ``class`` syntax, ``NamedTuple("N", ...)`` or ``namedtuple``.

    A generic one's parametrised alias (``NBox[int]``) counts too.
    """
    cls = typing.get_origin(tp) or tp
    return isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")


def _structure_text(parse: Callable[[str], Any]) -> Callable[[Any, Any], Any]:
    def hook(value: Any, _: Any) -> Any:
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {type(value).__name__}")
        return parse(value)

    return hook


def _structure_decimal(value: Any, _: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise TypeError(f"expected a number or a numeric string, got {type(value).__name__}")
    try:
        # str() of a float is its shortest round-tripping text: 0.1 -> Decimal("0.1").
        result = Decimal(value if isinstance(value, str) else str(value))
    except InvalidOperation:
        raise ValueError("expected a decimal number such as 12.50") from None
    if not result.is_finite():
        raise ValueError("expected a finite decimal number such as 12.50")
    return result


class UnionStructureError(ValueError):
    """No alternative of a union structured a value.

    Attributes:
        type: The union type.
        errors: ``(alternative, exception)`` for each alternative that was tried.
    """

    __reduce__ = reduce_error  # (its __init__ takes more than the message)

    def __init__(self, message: str, type: Any, errors: list[tuple[Any, Exception]]) -> None:
        super().__init__(message)
        self.type = type
        self.errors = errors


_KINDS = {
    type(None): ("null", frozenset({"null"})),
    bool: ("boolean", frozenset({"boolean"})),
    int: ("integer", frozenset({"integer"})),
    float: ("number", frozenset({"number", "integer"})),
    Decimal: ("string", frozenset({"string", "number", "integer"})),  # text in schemas
    str: ("string", frozenset({"string"})),
}
_ALL_KINDS = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})


def _kinds(tp: Any) -> tuple[str, frozenset[str]]:
    """The JSON kind an instance of ``tp`` has, and every kind it may be structured from."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _kinds(typing.get_args(tp)[0])
    if origin is Literal or (isinstance(tp, type) and issubclass(tp, Enum)):
        members = typing.get_args(tp) if origin is Literal else list(tp)
        # an Enum member (in a Literal too) is sent by its value
        values = [m.value if isinstance(m, Enum) else m for m in members]
        kinds = frozenset(json_type(v) for v in values)
        return (next(iter(kinds)) if len(kinds) == 1 else "", kinds)
    if origin is Union or origin is types.UnionType:
        kinds = frozenset().union(*(_kinds(a)[1] for a in typing.get_args(tp)))
        return ("", kinds)
    if tp in _KINDS:
        return _KINDS[tp]
    cls = origin if isinstance(origin, type) else tp
    if not isinstance(cls, type):
        return ("", _ALL_KINDS)
    if is_namedtuple(cls):
        return ("object", frozenset({"object", "array"}))
    if issubclass(cls, (str, PurePath, uuid.UUID, dt.date, dt.time)):
        return ("string", frozenset({"string"}))
    if issubclass(cls, (int, float)):
        return _KINDS[float if issubclass(cls, float) else int]
    if attrs.has(cls) or hasattr(cls, "__dataclass_fields__") or issubclass(cls, Mapping):
        return ("object", frozenset({"object"}))
    if typing.is_typeddict(cls):
        return ("object", frozenset({"object"}))
    if is_model(cls) and not getattr(cls, "__pydantic_root_model__", False):
        # An object, in the declared order among the other classes of a union; its
        # own validators may take any kind (a ``mode="before"`` one a string).
        return ("object", _ALL_KINDS)
    if issubclass(cls, (list, tuple, AbstractSet)) or cls.__module__ == "collections.abc":
        return ("array", frozenset({"array"}))
    return ("", _ALL_KINDS)


def _is_union(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    return origin is Union or origin is types.UnionType


def _object_keys(tp: Any) -> tuple[frozenset[str], frozenset[str]] | None:
    """(required, allowed) keys of a class structured from an object, else None."""
    if typing.get_origin(tp) is typing.Annotated:
        return _object_keys(typing.get_args(tp)[0])
    if not isinstance(tp, type):
        return None
    if attrs.has(tp):
        fields = [a for a in attrs.fields(tp) if a.init]
        required = [a.name for a in fields if a.default is attrs.NOTHING]
        return frozenset(required), frozenset(a.name for a in fields)
    if dataclasses.is_dataclass(tp):
        from toolfold.toolkit._classes import UnresolvedHints, class_fields

        try:
            init = class_fields(tp) or []  # its InitVars are keys too
        except UnresolvedHints:
            return None  # tried in turn; its own hook says what it cannot resolve
        return frozenset(n for n, _t, r, _d, _doc in init if r), frozenset(f[0] for f in init)
    if _is_typeddict(tp):
        found = _typeddict_fields(tp)
        return frozenset(n for n, (_t, r) in found.items() if r), frozenset(found)
    if is_namedtuple(tp):
        nt: Any = tp
        return frozenset(nt._fields) - frozenset(nt._field_defaults), frozenset(nt._fields)
    return None


def _union_factory(tp: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    arms = typing.get_args(tp)
    optional = type(None) in arms
    others = [a for a in arms if a is not type(None)]
    built: list[list[_Arm]] = []

    def build() -> list[_Arm]:
        plan = []
        for arm in others:
            primary, kinds = _kinds(arm)
            keys = _object_keys(arm) if "object" in kinds else None
            plan.append((arm, primary, kinds, keys, converter.get_structure_hook(arm)))
        built.append(plan)  # whole or not at all; racing threads build equal plans
        return plan

    # The alternatives' hooks are looked up now, so that a type with no hook is
    # found when the tool's checker is made (a ToolDefinitionError), as it is
    # outside a union; an alternative whose class is still being generated (a
    # recursive class, which cattrs signals with RecursionError) is looked up
    # on the first call instead.
    with contextlib.suppress(RecursionError):
        build()

    # Keys of an object -> whether the alternatives that fit them are alike for them
    # (`_alike_for_keys`), for the schema rules registered when it was found.
    told: dict[tuple[Any, ...], bool] = {}
    told_for = [_schema.rules_registered]

    def alike(viable: list[_Arm], present: Any) -> bool:
        rules = _schema.rules_registered
        keys = tuple(present)
        found = told.get(keys) if told_for[0] == rules else None
        if found is None:
            found = _alike_for_keys(viable, present)
            if told_for[0] != rules or len(told) >= _KEY_SETS_KEPT:
                told.clear()
                told_for[0] = rules
            told[keys] = found
        return found

    def structure(value: Any, _: Any) -> Any:
        if value is None and optional:
            return None
        plan = built[0] if built else build()
        if len(plan) == 1:
            arm, _p, _k, _keys, hook = plan[0]
            return hook(value, arm)
        kind = json_type(value)
        # JSON Schema counts 3.0 as an integer, so an int alternative may take it.
        also = "integer" if kind == "number" and float(value).is_integer() else kind
        # The alternative of exactly the value's own type first (a str stays a str
        # in str | datetime, as in pydantic's smart mode), then the others of its
        # JSON kind, then those that accept its kind too. typing treats
        # Union[A, B] and Union[B, A] as one type, so the order cannot matter here.
        same = type(value)
        exact = [p for p in plan if p[1] == kind]
        exact.sort(key=lambda p: p[0] is not same)
        loose = [p for p in plan if p[1] != kind and (kind in p[2] or also in p[2])]
        candidates = exact + loose
        if kind == "array" and len(candidates) > 1 and _has_duplicates(value):
            # A set's schema has uniqueItems: the value validated against another
            # alternative (a list), which keeps its repeated items.
            candidates.sort(key=lambda p: _is_set_type(p[0]))
        viable = candidates
        present = None
        if kind == "object":
            # Classes whose fields fit the keys first: no exception on the happy path.
            present = value.keys()
            viable = [p for p in candidates if p[3] is None or p[3][0] <= present <= p[3][1]]
            candidates = viable + [p for p in candidates if p not in viable]
        if len(viable) > 1 and not (present is not None and alike(viable, present)):
            # Several may structure the value, which cattrs does without the schema's
            # constraints (a pattern, a bound): the first whose own schema accepts it
            # goes first, as the schema the arguments passed means (its anyOf branch).
            # Not where their schemas say the same of these keys: all would answer
            # alike, and checking the value whole at every level of a recursive union
            # would cost its depth times its size.
            chosen = next((p for p in viable if _accepts(p[0], value)), None)
            if chosen is not None and chosen is not candidates[0]:
                candidates = [chosen, *(p for p in candidates if p is not chosen)]
        errors: list[tuple[Any, Exception]] = []
        for arm, _p, _k, _keys, hook in candidates:
            try:
                return hook(value, arm)
            except Exception as exc:
                errors.append((arm, exc))
        if len(errors) == 1:
            raise errors[0][1]
        names = ", ".join(_type_name(a) for a in arms)
        raise UnionStructureError(f"expected one of {names}, got {kind}", tp, errors)

    return structure


def _accepts(tp: Any, value: Any) -> bool:
    """Whether the JSON Schema of union alternative ``tp`` accepts JSON ``value``.

    False when unsure too (a type with no schema rule, a schema the fast check
    does not compile): the alternatives are then tried in their usual order.
    """
    check = _per_type(_SCHEMA_CHECKS, tp, _schema_check)
    try:
        return check is not None and check(value)
    except Exception:  # (a check that cannot judge the value judges no alternative)
        return False


def _per_type(cache: dict[Any, tuple[int, Any]], tp: Any, make: Callable[[Any], Any]) -> Any:
    """``make(tp)``, kept in ``cache`` for the schema rules registered when it was made.

    The count of rules (`_schema.rules_registered`) is read before ``make`` runs: a
    rule registered meanwhile (another thread) leaves it stale, and it is made again.
    """
    rules = _schema.rules_registered
    entry = cache.get(tp) if is_hashable(tp) else None
    if entry is not None and entry[0] == rules:
        return entry[1]
    made = make(tp)
    if is_hashable(tp):
        if len(cache) >= _field.TYPES_KEPT:  # classes made at run time must not pile up
            cache.clear()
        cache[tp] = (rules, made)
    return made


def _schema_check(tp: Any) -> Callable[[Any], bool] | None:
    """The fast yes/no check of ``tp``'s JSON Schema (`_fastcheck`), or None when
    ``tp`` has no schema or the check cannot be compiled."""
    from toolfold.toolkit._arguments import format_conforms
    from toolfold.toolkit._fastcheck import compile_check

    try:
        return compile_check(_schema.schema_for_type(tp), format_conforms)
    except Exception:
        return None


def _alike_for_keys(viable: list[_Arm], present: Any) -> bool:
    """Whether the schemas of the object alternatives ``viable`` judge any object of the
    keys ``present`` alike: they differ at most in keys it does not have (``M`` has an
    ``extra`` that ``N`` lacks), so each accepts it if and only if the others do."""
    first: _Shape | None = None
    for arm in viable:
        shape = _per_type(_SHAPES, arm[0], _object_shape)
        if shape is None or not shape[2] <= present:
            return False
        if first is None:
            first = shape
        elif shape[0] is not first[0] and shape[0] != first[0]:
            return False
        props = shape[1]
        for key in present:
            mine, theirs = props.get(key), first[1].get(key)
            if mine is None or (mine is not theirs and mine != theirs):
                return False
    return True


# The key sets of objects a union keeps its judgement of (`_alike_for_keys`) for.
_KEY_SETS_KEPT = 64

# (the schema bar its properties and annotations, each property's schema, the required
# keys): JSON text with sorted keys, interned so that equal ones are mostly identical.
_Shape = tuple[str, dict[str, str], frozenset[str]]


def _object_shape(tp: Any) -> _Shape | None:
    """What ``tp``'s schema says of an object, for `_alike_for_keys`; None if unsure."""
    from toolfold.toolkit._jsonschema import deref

    try:
        root = _schema.schema_for_type(tp)
        # (``{"$ref": "#/$defs/N", "$defs": ...}`` for a class that names itself)
        target = deref(root, {k: v for k, v in root.items() if k != "$defs"})
        if not isinstance(target, dict) or not isinstance(target.get("properties"), dict):
            return None
        rest = {k: v for k, v in target.items() if k not in ("properties", "required")}
        if "$defs" in root:  # (what its $refs name)
            rest["$defs"] = root["$defs"]
        props = {name: _text(sub) for name, sub in target["properties"].items()}
        return _text(rest), props, frozenset(target.get("required", ()))
    except Exception:
        return None


def _text(schema: Any) -> str:
    return sys.intern(json.dumps(_bare(schema), sort_keys=True, default=repr))


# Keywords that say nothing of what validates, and keywords whose value is data.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
    }
)
_NAMED = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"})


def _bare(schema: Any) -> Any:
    """``schema`` without the annotations of its (sub)schemas."""
    if isinstance(schema, list):
        return [_bare(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _NAMED and isinstance(value, dict):
            out[key] = {name: _bare(sub) for name, sub in value.items()}
        elif key in ("enum", "const"):
            out[key] = value
        else:
            out[key] = _bare(value)
    return out


# Union alternative -> (the count of schema rules it was made for, its schema's check
# (None: none) / what its schema says of objects), made on first use.
_SCHEMA_CHECKS: dict[Any, tuple[int, Callable[[Any], bool] | None]] = {}
_SHAPES: dict[Any, tuple[int, _Shape | None]] = {}


def _is_set_type(tp: Any) -> bool:
    """Whether ``tp`` (``set[int]``, ``Annotated[frozenset[str], ...]``) is a set type."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    cls = typing.get_origin(tp) or tp
    return isinstance(cls, type) and issubclass(cls, AbstractSet)


def _has_duplicates(items: Any) -> bool:
    """Whether JSON array ``items`` repeats an item, as JSON Schema's uniqueItems
    counts it (``1`` and ``1.0`` are one item, ``1`` and ``true`` two)."""
    seen: set[Any] = set()
    for item in items:
        key: tuple[Any, Any] = (type(item) is bool, item)
        if isinstance(item, (dict, list)):
            try:
                key = (None, json.dumps(item, sort_keys=True))
            except (TypeError, ValueError):  # (not from JSON text: counted as its own)
                key = (None, id(item))
        if key in seen:
            return True
        seen.add(key)
    return False


_Arm = tuple[
    Any,
    str,
    frozenset[str],
    "tuple[frozenset[str], frozenset[str]] | None",
    Callable[[Any, Any], Any],
]


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is typing.Annotated:
        return _type_name(typing.get_args(tp)[0])
    if tp is type(None):
        return "null"
    if isinstance(tp, type):
        return tp.__name__
    return repr(tp).replace("typing.", "")


def _namedtuple_structure(tp: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    cls = typing.get_origin(tp) or tp
    # Read only for the plain class: NBox[int]'s fields come from class_fields, which
    # also knows the local names a local NamedTuple's string annotations use.
    hints = typing.get_type_hints(cls, include_extras=True) if cls is tp else None
    if hints is not None and all(is_hashable(t) for t in hints.values()):
        # (no source kept in `linecache`: see `_sourceless`)
        from_dict = namedtuple_dict_structure_factory(cls, converter, "from_converter", True, False)
        fields = [(hints.get(name, Any), name) for name in cls._fields]
    else:
        # NBox[int]: cattrs' factory takes no type arguments; the fields are the
        # class's with its type variables replaced, as in its schema (and, like
        # at.IsNotNan[float], in a form cattrs can hash).
        from toolfold.toolkit._classes import MISSING, class_fields, substitute_type_vars

        found = substitute_type_vars(cls, typing.get_args(tp), class_fields(cls) or [])
        named = {n: (Any if t is MISSING else t, r) for n, t, r, _d, _doc in found}
        fields = [(t, n) for n, (t, _r) in named.items()]
        from_dict = _fields_structure(cls, named, converter, lambda out: cls(**out))
    least = len(fields) - len(cls._field_defaults)
    built: list[list[Callable[[Any, Any], Any]]] = []

    def from_list(value: Any, _: Any) -> Any:
        if not least <= len(value) <= len(fields):
            raise ValueError(f"expected {least} to {len(fields)} items, got {len(value)}")
        if not built:  # looked up late: the fields may refer back to cls
            built.append([converter.get_structure_hook(tp) for tp, _ in fields])
        hooks = built[0]
        return cls(*[hooks[i](v, fields[i][0]) for i, v in enumerate(value)])

    def structure(value: Any, tp: Any) -> Any:
        return (from_dict if isinstance(value, Mapping) else from_list)(value, tp)

    return structure


def _namedtuple_unstructure(tp: Any, converter: cattrs.Converter) -> Callable[[Any], Any]:
    # (no source kept in `linecache`: see `_sourceless`)
    return namedtuple_dict_unstructure_factory(typing.get_origin(tp) or tp, converter, False, False)


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is Literal


def _literal_factory(tp: Any) -> Callable[[Any, Any], Any]:
    # Keyed by (type, value) so that True and 1, which Python holds equal, stay apart;
    # an Enum member in a Literal is sent by its value.
    members: dict[tuple[type, Any], Any] = {}
    for arg in typing.get_args(tp):
        value = arg.value if isinstance(arg, Enum) else arg
        members[(type(value), value)] = arg
    allowed = ", ".join(repr(v) for _, v in members)

    def structure(value: Any, _: Any) -> Any:
        try:
            return members[(type(value), value)]
        except (KeyError, TypeError):
            pass
        if type(value) is float and value.is_integer():  # JSON 1.0 for a Literal[1]
            found = members.get((int, int(value)))
            if found is not None:
                return found
        raise ValueError(f"{value!r} is not one of {allowed}")

    return structure


def _typeddict_fields(tp: Any) -> dict[str, tuple[Any, bool]]:
    """Field name -> (type without Required/NotRequired/ReadOnly, required?), of a
    TypedDict class or of a generic one given its arguments (``Page[int]``).

    The types are the schema's (`class_fields`): the type variables of generic bases
    bound as the class statements bind them (``class IntBox(Box[int])``), the
    qualifiers taken off inside ``Annotated`` too (`unqualified`).
    """
    from toolfold.toolkit._classes import class_fields, substitute_type_vars, unqualified

    origin = typing.get_origin(tp)
    cls = tp if origin is None else origin
    found = class_fields(cls) or []
    if origin is not None:
        found = substitute_type_vars(cls, typing.get_args(tp), found)
    return {name: (unqualified(hint)[0], required) for name, hint, required, *_ in found}


def _is_typeddict_type(tp: Any) -> bool:
    """A TypedDict class, or a generic one given its arguments (``Page[int]``)."""
    return _is_typeddict(tp) or _is_typeddict(typing.get_origin(tp))


def _typeddict_factory(tp: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Structure a TypedDict, reading Required/NotRequired from the resolved hints.

    With string annotations (``from __future__ import annotations``) a TypedDict
    cannot see ``NotRequired`` when the class is made, so ``__required_keys__``
    (which cattrs trusts, for a generic one's ``Page[int]`` too) calls every key
    required; the schema does not.
    """
    return _fields_structure(tp, _typeddict_fields(tp), converter, lambda out: out)


def _fields_structure(
    cls: Any,
    fields: dict[str, tuple[Any, bool]],
    converter: cattrs.Converter,
    make: Callable[[dict[str, Any]], Any],
) -> Callable[[Any, Any], Any]:
    """Structure an object into ``make(structured fields)``, every field's problem at once.

    Args:
        cls: The class, named in the errors.
        fields: Field name -> (type, required?).
        converter: Where the fields' hooks come from.
        make: Builds the value from the structured fields, by name.
    """
    built: list[dict[str, Callable[[Any, Any], Any]]] = []

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected an object, got {type(value).__name__}")
        if not built:  # looked up late: a field may refer back to cls
            built.append({n: converter.get_structure_hook(t) for n, (t, _r) in fields.items()})
        hooks = built[0]
        out: dict[str, Any] = {}
        errors: list[Exception] = []
        for name, (tp, required) in fields.items():
            if name not in value:
                if required:
                    errors.append(_noted(KeyError(name), cls, name, tp))
                continue
            try:
                out[name] = hooks[name](value[name], tp)
            except Exception as exc:
                errors.append(_noted(exc, cls, name, tp))
        extra = set(value) - set(fields)
        if extra:
            errors.append(ForbiddenExtraKeysError("", cls, extra))
        if errors:
            raise ClassValidationError(f"While structuring {cls.__name__}", errors, cls)
        return make(out)

    return structure


def _noted(exc: Exception, cls: Any, name: str, tp: Any) -> Exception:
    note = AttributeValidationNote(f"Structuring {cls.__name__} @ attribute {name}", name, tp)
    add_note(exc, note)
    return exc


class CheckFailedError(ValueError):
    """A value broke an ``annotated_types.Predicate`` (or ``Timezone``) of its type.

    JSON Schema cannot say what a Python function accepts, so such a check is
    made on the structured value, after the schema's, as pydantic does.
    """


def _has_checks(tp: Any) -> bool:
    return typing.get_origin(tp) is typing.Annotated and has_checks(tp.__metadata__)


def _checked_structure(tp: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Structure ``Annotated[X, ..., Predicate(f)]`` as ``X``, then check ``f`` of the value.

    (annotated_types' ``Not``, which has no hash, gets here as a `Negation`.)
    """
    inner = typing.get_args(tp)[0]
    hook = converter.get_structure_hook(inner)
    checks = [
        _timezone_check(m.tz) if type(m).__name__ == "Timezone" else _predicate_check(m.func)
        for m in expand_metadata(tp.__metadata__)
        if metadata_kind(m) == "check"
    ]

    def structure(value: Any, _: Any) -> Any:
        made = hook(value, inner)
        for check in checks:
            refusal = check(made)
            if refusal is not None:
                raise CheckFailedError(refusal)
        return made

    return structure


_Check = Callable[[Any], "str | None"]  # the value's refusal, or None


def _predicate_check(func: Callable[[Any], Any]) -> _Check:
    def check(value: Any) -> str | None:
        return None if func(value) else f"{_short(value)} does not satisfy {_check_name(func)}"

    return check


def _timezone_check(tz: Any) -> _Check:
    """``annotated_types.Timezone(tz)``: None asks for a naive datetime or time, ``...``
    for an aware one, a zone (a tzinfo or an IANA name) for that zone's UTC offset."""
    if tz is None:
        return lambda v: (
            None if v.utcoffset() is None else f"{_iso(v)} must have no UTC offset (a local time)"
        )
    if tz is ...:
        return lambda v: (
            None
            if v.utcoffset() is not None
            else f"{_iso(v)} must have a UTC offset, such as Z or +02:00"
        )
    zone = tz
    if isinstance(tz, str):
        import zoneinfo

        zone = zoneinfo.ZoneInfo(tz)  # the schema refused a name not found

    def check(value: Any) -> str | None:
        offset = value.utcoffset()
        if isinstance(value, dt.datetime):
            expected = _zone_offset(value, zone) if offset is not None else None
        else:
            expected = value.replace(tzinfo=zone).utcoffset()
        if offset is not None and offset == expected:
            return None
        wanted = f" (UTC offset {_offset(expected)})" if expected is not None else ""
        return f"{_iso(value)} must be in the time zone {tz}{wanted}"

    return check


def _zone_offset(value: dt.datetime, zone: dt.tzinfo) -> dt.timedelta | None:
    """``zone``'s UTC offset at the instant ``value`` (an aware datetime) names.

    Near year 1 or 9999 that instant in ``zone`` may fall outside what a datetime
    holds (``astimezone`` overflows): the zone's offset at ``value``'s own wall
    time then says, which is the same whenever ``value`` is in ``zone``.
    """
    try:
        return value.astimezone(zone).utcoffset()
    except OverflowError:
        return zone.utcoffset(value.replace(tzinfo=None))


def _offset(delta: dt.timedelta) -> str:
    """A UTC offset as ISO 8601 writes it: ``+02:00``, ``-03:30``, ``+00:09:21``."""
    seconds = int(delta.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}"
    return f"{text}:{seconds:02d}" if seconds else text


def _check_name(func: Any) -> str:
    """How an error names a check's function: ``is_even``, ``str.islower``, ``lt(...)``
    for a ``functools.partial`` (by its function only: the model reads this, and the
    arguments given may be large or secret), the class of a callable object; a lambda
    has no name."""
    return "the predicate " + _callable_name(func)


def _callable_name(func: Any) -> str:
    if isinstance(func, Negation):  # annotated_types' Not(math.isnan): "not isnan"
        return "not " + _callable_name(func.func)
    if isinstance(func, functools.partial):
        inner = _callable_name(func.func)
        return inner if inner == "(a lambda)" or inner.endswith("(...)") else inner + "(...)"
    qualname = getattr(func, "__qualname__", None) or ""
    name = getattr(func, "__name__", None) or ""
    if "<lambda>" in qualname or name == "<lambda>":
        return "(a lambda)"
    if not name:  # an instance of a class with __call__
        return type(func).__qualname__.rsplit("<locals>.", 1)[-1]
    return qualname if qualname and "<locals>" not in qualname else name


def _short(value: Any) -> str:
    return clip(repr(value), 60)


def _reads_own_fields(tp: Any) -> bool:
    """A dataclass or attrs class (or a generic alias of one) whose ``__init__``
    arguments cattrs would read wrongly, so that they are read as its schema is.

    cattrs builds a dataclass from ``dataclasses.fields``, which leaves its
    ``InitVar``s out (``__init__`` then misses them), and replaces the type
    variables of one generic base only (``class IntBox(Box[int])``, not
    ``class B(ListBox[int])`` over ``ListBox(Box[list[U]])``, nor ``ListBox[int]``);
    it reads a dataclass's string annotations without their ``Annotated``
    metadata, so that a Predicate there would go unchecked; and it resolves a
    string annotation only when the whole annotation is one: a quoted name inside
    a type (``Optional["Node"]``, ``list["B"]``) would reach it unresolved.
    """
    cls = typing.get_origin(tp) or tp
    if not isinstance(cls, type):
        return False
    from toolfold.toolkit._classes import (
        UnresolvedHints,
        binds_one_generic_base,
        class_fields,
        inherits_type_vars,
    )

    if dataclasses.is_dataclass(cls):
        own = dataclasses.fields(cls)
        stored = {f.name for f in own}
        try:
            found = class_fields(cls) or []
        except UnresolvedHints:
            return False  # cattrs says what it cannot resolve
        if any(f[0] not in stored for f in found):  # an InitVar
            return True
        if any(type(f.type) is str for f in own) and any(_holds_checks(f[1]) for f in found):
            # cattrs resolves string annotations (`from __future__ import annotations`)
            # without their Annotated metadata, and would drop the Predicates
            return True
        if any(_nests_forward_ref(f.type) for f in own):
            return True
    elif not attrs.has(cls):
        return False
    elif any(_nests_forward_ref(a.type) for a in attrs.fields(cls)):
        try:
            class_fields(cls)
        except UnresolvedHints:
            return False  # cattrs says what it cannot resolve
        return True
    field_types = _cattrs_field_types(cls)
    if not all(is_hashable(t) for t in field_types):
        return True  # annotated_types' Not (at.IsNotNan[float]): its fields' hashable form
    if not inherits_type_vars(cls):
        return False
    if tp is not cls or not binds_one_generic_base(cls):
        return True
    # cattrs binds one generic base's variables itself, in its faster generated hook:
    # a field typed by a variable, or by a generic alias holding one; not a field
    # typed ``Annotated[T, ...]`` (or ``Annotated[list[T], ...]``), which it leaves as is
    return any(_left_unbound(t) for t in field_types)


def _nests_forward_ref(tp: Any) -> bool:
    """Whether annotation ``tp`` holds a quoted name inside it (``Optional["Node"]``
    holds ``ForwardRef('Node')``, ``list["B"]`` holds ``'B'``), which cattrs would
    meet unresolved; not a string that is the whole annotation (cattrs resolves
    that), nor a `Literal`'s strings or ``Annotated`` metadata."""
    if isinstance(tp, typing.ForwardRef):
        return True
    origin = typing.get_origin(tp)
    if origin is Literal:
        return False
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        args = args[:1]
    return any(isinstance(a, str) or _nests_forward_ref(a) for a in args)


def _cattrs_field_types(cls: type) -> list[Any]:
    """The field types cattrs' generated hook starts from (`cattrs._compat.adapted_fields`):
    a dataclass's annotations, resolved without their Annotated metadata when one of
    them is a string; an attrs class's, with it."""
    if dataclasses.is_dataclass(cls):
        own = dataclasses.fields(cls)
        return [] if any(type(f.type) is str for f in own) else [f.type for f in own]
    found = attrs.fields(cls)
    if not any(type(a.type) is str for a in found):
        return [a.type for a in found]
    try:
        return list(typing.get_type_hints(cls, include_extras=True).values())
    except Exception:
        return []  # cattrs says what it cannot resolve


def _left_unbound(tp: Any) -> bool:
    """Whether cattrs' generated hook would leave a type variable in field type ``tp``
    unbound: it replaces one standing alone or inside a generic alias, not one under
    an ``Annotated`` at the top."""
    return typing.get_origin(tp) is typing.Annotated and bool(getattr(tp, "__parameters__", ()))


def _holds_checks(tp: Any) -> bool:
    """Whether ``tp`` has a Predicate to check in its Annotated metadata, at any depth
    (``list[Annotated[int, Predicate(f)]]``); not in the fields of classes it names,
    which their own hooks check."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return has_checks(tp.__metadata__) or _holds_checks(typing.get_args(tp)[0])
    if origin is Literal:
        return False
    return any(_holds_checks(arg) for arg in typing.get_args(tp))


def _own_fields_structure(tp: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Structure a class (`_reads_own_fields`) from the fields its schema shows,
    ``InitVar``s included, with the type variables its bases bind replaced."""
    from toolfold.toolkit._classes import MISSING, class_fields, substitute_type_vars

    cls = typing.get_origin(tp) or tp
    found = substitute_type_vars(cls, typing.get_args(tp), class_fields(cls) or [])
    fields = {n: (Any if t is MISSING else t, r) for n, t, r, _d, _doc in found}
    if attrs.has(cls):  # attrs' __init__ takes `_x` as `x`
        aliases = {a.name: a.alias or a.name for a in attrs.fields(cls)}
        return _fields_structure(
            cls, fields, converter, lambda out: cls(**{aliases[k]: v for k, v in out.items()})
        )
    return _fields_structure(cls, fields, converter, lambda out: cls(**out))


def _is_run_record(tp: Any) -> bool:
    """Whether ``tp`` is a class of a run's whole record (`toolfold.toolkit._results.run_kind`)."""
    return isinstance(getattr(tp, "_no_tool_result", None), str)


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Enum)


def _iso(value: dt.date | dt.time) -> str:
    return value.isoformat()


def _structure_enum(value: Any, tp: Any) -> Any:
    if issubclass(tp, Flag) and type(value) is float and value.is_integer():
        value = int(value)  # JSON counts 3.0 as an integer
    return _made(tp, value)


def _own_missing(tp: type[Enum]) -> bool:
    """Whether ``tp`` (or a base of the user's) defines ``_missing_``, not the enum module."""
    return next(c for c in tp.__mro__ if "_missing_" in c.__dict__).__module__ != "enum"


def _flag_value(tp: type[Flag], value: Any) -> bool:
    """Whether ``value`` may be a ``tp``: a member, or 0 or a sum of flags (an int, not a bool).

    As the schema says (`toolfold.toolkit._flags`): an `IntFlag`'s unknown bits
    and a negative number (Python's every-flag -1) are refused too.
    """
    if isinstance(value, tp):
        return True
    return isinstance(value, int) and not isinstance(value, bool) and is_flag_value(tp, value)


def _made(tp: Any, value: Any) -> Any:
    """``tp(value)``; an enum's refusal (a str or int enum's too) names the values it takes.

    Any other class's own ``ValueError`` (a validating ``str`` subclass) is its
    message, and stays as it is; so is the one an enum's own ``_missing_``
    raises. A `Flag`'s refusal names its flags, which combine; an `IntFlag`
    (made here by the ``int`` hook) is held to its flags like any `Flag`.
    """
    if (
        isinstance(tp, type)
        and issubclass(tp, Flag)
        and not _flag_value(tp, value)
        and (isinstance(value, int) or not _own_missing(tp))
    ):
        # (Python 3.10's Flag raises a TypeError for a str; a `_missing_` of the
        # flag's own may take one, e.g. "R|W"; a number is held to the flags)
        raise _refusal(tp, value)
    try:
        return tp(value)
    except ValueError as exc:
        if not _is_enum(tp) or _own_refusal(exc):
            raise
        raise _refusal(tp, value) from None


def _refusal(tp: type[Enum], value: Any) -> ValueError:
    """The error for a ``value`` that ``tp`` refused: the values it takes."""
    if issubclass(tp, Flag):
        said = f"a flag ({flag_names(tp)}) or a sum of several"
    else:
        said = "one of " + ", ".join(repr(m.value) for m in tp)
    return ValueError(f"{value!r} is not a valid {tp.__name__} ({said})")


def _own_refusal(exc: ValueError) -> bool:
    """Whether ``exc`` is the message of the enum's own ``_missing_``, not the enum module's.

    Python re-raises what ``_missing_`` raised, with the frames it was raised
    from; when it returns None instead (or hands the value to the enum
    module's, a STRICT flag's bits), the refusal is raised in the module.
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_globals is not enum.__dict__


def apply_user_hook(entry: HookEntry) -> None:
    """Apply a hook registered after the converter was built (see `_hooks`)."""
    if get_converter.cache_info().currsize:
        _apply_hooks(get_converter(), [entry])


def _apply_hooks(conv: cattrs.Converter, hooks: list[HookEntry]) -> None:
    for predicate, structure, unstructure in hooks:
        if structure is not None:
            conv.register_structure_hook_func(predicate, structure)
        if unstructure is not None:
            conv.register_unstructure_hook_func(predicate, unstructure)


class _Converter(cattrs.Converter):
    """cattrs' converter, given types it can hash.

    It finds hooks by type, in dicts and caches: a type holding annotated_types'
    unhashable ``Not`` (``at.IsNotNan[float]``) is first given an equal `Negation`.
    Only a type the lookup could not hash is rewritten, so that the common case
    (every output the runtime structures) costs what cattrs' own lookup does.

    Its lookups are cached as cattrs caches them, but emptied once they hold
    `TYPES_KEPT` types: a class made per request (and whatever it refers to)
    is then freed, not kept by the process-wide converter for ever.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        _bound_cache(self._structure_func)
        _bound_cache(self._unstructure_func)

    def structure(self, obj: Any, cl: Any) -> Any:
        lookup: Any = self._structure_func.dispatch  # what super().structure calls
        try:
            hook = lookup(cl)
        except TypeError:
            if is_hashable(cl):  # a hook factory's own TypeError
                raise
            cl = hashable_type(cl)
            hook = lookup(cl)
        return hook(obj, cl)

    def get_structure_hook(self, type: Any, cache_result: bool = True) -> Any:
        try:
            return super().get_structure_hook(type, cache_result)
        except TypeError:
            if is_hashable(type):
                raise
            return super().get_structure_hook(hashable_type(type), cache_result)

    # The hooks cattrs writes for a class, without their source kept in `linecache`.
    def gen_structure_attrs_fromdict(self, cl: Any) -> Any:
        return _sourceless(super().gen_structure_attrs_fromdict(cl))

    def gen_unstructure_attrs_fromdict(self, cl: Any) -> Any:
        return _sourceless(super().gen_unstructure_attrs_fromdict(cl))

    def gen_structure_typeddict(self, cl: Any) -> Any:
        return _sourceless(super().gen_structure_typeddict(cl))

    def gen_unstructure_typeddict(self, cl: Any) -> Any:
        return _sourceless(super().gen_unstructure_typeddict(cl))


def _sourceless(hook: Any) -> Any:
    """``hook``, a function cattrs wrote, its source taken back out of `linecache`.

    cattrs keeps the source of each hook it writes there, under the class's name,
    for ever: a class made per request would leave its text behind (a few kB), and
    classes of one name with other fields each a new entry, which the next one's
    name is looked for past (one more each time). A traceback through the hook then
    shows its line number without the line.
    """
    code = getattr(hook, "__code__", None)
    if code is not None and code.co_filename.startswith("<cattrs generated "):
        linecache.cache.pop(code.co_filename, None)
    return hook


def _bound_cache(dispatch: Any) -> None:
    """Give a cattrs `MultiStrategyDispatch` a cache emptied at `TYPES_KEPT` types.

    cattrs caches every lookup without limit (``lru_cache(maxsize=None)``). The
    cache stays unbounded, so a hit costs what it did; only a miss, which makes
    a hook anyway, checks the size. Emptying it all (as `register_*` does)
    rather than one entry at a time keeps a hook built from another's hook
    from outliving it.

    cattrs also keeps the hooks it makes for a mapping, an iterable or a tuple
    (``dict[str, Form]``) in the dispatch's ``_direct_dispatch``, which it
    empties only when a hook is registered; registering one empties the lookup
    cache too, so that dict, not the cache, is what grows with such types, and
    both are counted and emptied together.
    """
    find = dispatch.dispatch_without_caching
    direct = dispatch._direct_dispatch

    def found(tp: Any) -> Any:
        if looked_up.cache_info().currsize + len(direct) >= _field.TYPES_KEPT:
            looked_up.cache_clear()
            dispatch.clear_direct()
        return find(tp)

    looked_up = functools.cache(found)
    dispatch.dispatch = looked_up


@functools.cache
def get_converter() -> cattrs.Converter:
    """Return the toolkit's cattrs converter (built once, on first use)."""
    conv = _Converter(
        detailed_validation=True,
        # Schemas forbid unknown keys anyway; forbidding them here too makes a
        # union of classes pick the class whose fields fit.
        forbid_extra_keys=True,
        unstruct_collection_overrides={AbstractSet: list},
    )
    # Strict primitives: cattrs' defaults call the type (int("3") -> 3, str(5) -> "5"),
    # which would let a value of the wrong type through wherever no schema checked it
    # first (a workflow's steps). JSON's 3.0 is still an int and 3 still a float.
    for primitive, hook in _STRICT_PRIMITIVES.items():
        conv.register_structure_hook(primitive, hook)
    conv.register_structure_hook(dt.datetime, _structure_text(parse_datetime))
    conv.register_structure_hook(dt.date, _structure_text(parse_date))
    conv.register_structure_hook(dt.time, _structure_text(parse_time))
    conv.register_structure_hook(uuid.UUID, _structure_text(parse_uuid))
    conv.register_structure_hook(Decimal, _structure_decimal)
    # By class: cattrs' own hook for Path (which calls it with anything) wins over a
    # predicate.
    for path_class in (PurePath, Path):
        conv.register_structure_hook(path_class, _structure_text_path)
    conv.register_structure_hook_func(_is_enum, _structure_enum)
    conv.register_structure_hook_factory(_is_literal, _literal_factory)
    conv.register_unstructure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, (dt.date, dt.time)), _iso
    )
    conv.register_unstructure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, (uuid.UUID, PurePath, Decimal)), str
    )
    # A dict's views and a range are arrays, as sets and deques are (not their repr).
    conv.register_unstructure_hook_func(
        lambda t: isinstance(t, type) and issubclass(t, VIEWS),
        lambda view: [conv.unstructure(item) for item in view],
    )
    conv.register_structure_hook_factory(is_namedtuple, _namedtuple_structure)
    conv.register_unstructure_hook_factory(is_namedtuple, _namedtuple_unstructure)
    conv.register_structure_hook_factory(_is_union, _union_factory)
    conv.register_structure_hook_factory(_is_typeddict_type, _typeddict_factory)
    conv.register_structure_hook_factory(_reads_own_fields, _own_fields_structure)
    conv.register_structure_hook_factory(_has_checks, _checked_structure)
    # pydantic models make themselves (their validators run), recognised without importing it
    conv.register_structure_hook_func(is_model, structure_model)
    conv.register_unstructure_hook_func(is_model, unstructure_model)
    # A run's `Response` or `RunState` in a result is refused, not written out (`run_kind`).
    conv.register_unstructure_hook_func(_is_run_record, refuse_run)
    _apply_hooks(conv, user_hooks)  # last registered wins, so users override the above
    return conv


# Each calls the declared type, as cattrs' default does, once the value is of its
# JSON kind: a subclass (an IntEnum, a str Enum) is still made by its own class.


def _structure_str(value: Any, tp: Any) -> Any:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {_json_name(value)}")
    return _made(tp, value)


def structure_int(value: Any, tp: Any) -> Any:
    if type(value) is float and value.is_integer():  # JSON counts 3.0 as an integer
        value = int(value)
    elif not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {_json_name(value)}")
    return _made(tp, value)


def structure_float(value: Any, tp: Any) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _made(tp, value)
    raise TypeError(f"expected a number, got {_json_name(value)}")


def _structure_bool(value: Any, tp: Any) -> Any:
    if isinstance(value, bool):
        return value
    raise TypeError(f"expected a boolean, got {_json_name(value)}")


def _json_name(value: Any) -> str:
    return f"{type(value).__name__} {clip(repr(value), 40)}"


_STRICT_PRIMITIVES: dict[type, Callable[[Any, Any], Any]] = {
    str: _structure_str,
    int: structure_int,
    float: structure_float,
    bool: _structure_bool,
}


def _structure_text_path(value: Any, tp: Any) -> Any:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return tp(check_path(value))
