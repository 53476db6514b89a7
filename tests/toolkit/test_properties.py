"""Properties: derived schemas, argument checking and result formatting agree with each other.

For signatures built at random from the supported types:

- every instance generated from the derived schema validates and structures
  into values of the declared types;
- every value of the declared types formats (unstructures) into JSON that
  validates against the derived schema and structures back into an equal value.

``TOOLFOLD_EXAMPLES=2000`` runs a deeper search than the default 100 examples.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import itertools
import json
import os
import typing
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, TypedDict, Union

import attrs
import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from toolfold import Field
from toolfold.toolkit._arguments import ArgumentChecker
from toolfold.toolkit._converter import _kinds
from toolfold.toolkit._results import format_result
from toolfold.toolkit._signature import function_schema


class Color(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3


@dataclasses.dataclass
class Tree:
    value: int
    children: list[Tree]


class Typed(NamedTuple):
    """A type plus a strategy for its values; ``hashable`` if its values are."""

    tp: Any
    values: st.SearchStrategy[Any]
    hashable: bool

    def __repr__(self) -> str:  # short: Hypothesis prints strategies holding these
        return f"Typed({_short(self.tp)})"


def _short(tp: Any) -> str:
    return repr(tp).replace("typing.", "").split("[Field(")[0]


_ZONES = st.sampled_from(
    [
        None,
        dt.timezone.utc,
        dt.timezone(dt.timedelta(hours=5, minutes=30)),
        dt.timezone(-dt.timedelta(hours=8)),
    ]
)
_FINITE = st.floats(allow_nan=False, allow_infinity=False)
_DECIMALS = st.decimals(allow_nan=False, allow_infinity=False)
_TREES = st.recursive(
    st.builds(Tree, st.integers(), st.just([])),
    lambda kids: st.builds(Tree, st.integers(), st.lists(kids, max_size=2)),
    max_leaves=4,
)


_LEAVES = [
    Typed(str, st.text(max_size=8), True),
    Typed(int, st.integers(), True),
    Typed(float, _FINITE, True),
    Typed(bool, st.booleans(), True),
    Typed(dt.datetime, st.datetimes(timezones=_ZONES), True),
    Typed(dt.date, st.dates(), True),
    Typed(dt.time, st.times(timezones=_ZONES), True),
    Typed(uuid.UUID, st.uuids(), True),
    Typed(Decimal, _DECIMALS, True),
    Typed(Color, st.sampled_from(Color), True),
    Typed(Level, st.sampled_from(Level), True),
    Typed(Literal["a", "b", 3], st.sampled_from(["a", "b", 3]), True),
    Typed(Annotated[int, Field(ge=0, le=100)], st.integers(0, 100), True),
    Typed(Annotated[str, Field(min_length=1, max_length=5)], st.text(min_size=1, max_size=5), True),
    Typed(int | float, st.integers() | _FINITE, True),
    Typed(Path, st.text(alphabet="ab/.", max_size=6).map(Path), True),
]

_names = itertools.count()


def _fields(children: list[Typed]) -> list[tuple[str, Typed]]:
    return [(f"f{i}", c) for i, c in enumerate(children)]


def _dataclass(children: list[Typed]) -> Typed:
    fields = _fields(children)
    cls = dataclasses.make_dataclass(f"DC{next(_names)}", [(n, c.tp) for n, c in fields])
    return Typed(cls, st.builds(cls, **{n: c.values for n, c in fields}), False)


def _attrs_class(children: list[Typed]) -> Typed:
    fields = _fields(children)
    cls = attrs.make_class(f"AC{next(_names)}", {n: attrs.field(type=c.tp) for n, c in fields})
    return Typed(cls, st.builds(cls, **{n: c.values for n, c in fields}), False)


def _typed_dict(children: list[Typed], total: bool) -> Typed:
    fields = _fields(children)
    cls = TypedDict(f"TD{next(_names)}", {n: c.tp for n, c in fields}, total=total)  # type: ignore[operator]
    values = {n: c.values for n, c in fields}
    if total:
        return Typed(cls, st.fixed_dictionaries(values), False)
    return Typed(cls, st.fixed_dictionaries({}, optional=values), False)


def _named_tuple(children: list[Typed]) -> Typed:
    fields = _fields(children)
    cls = NamedTuple(f"NT{next(_names)}", [(n, c.tp) for n, c in fields])  # type: ignore[misc]
    hashable = all(c.hashable for c in children)
    return Typed(cls, st.builds(cls, **{n: c.values for n, c in fields}), hashable)


def _union(a: Typed, b: Typed) -> Typed | None:
    # Only alternatives of different JSON kinds: otherwise a value of one may
    # rightly come back as the other (a date-like string as a str).
    if _kinds(a.tp)[1] & _kinds(b.tp)[1]:
        return None
    tp = Union[a.tp, b.tp]  # noqa: UP007 (a | b fails when a is a typing special form)
    return Typed(tp, a.values | b.values, a.hashable and b.hashable)


def _extend(children: st.SearchStrategy[Typed]) -> st.SearchStrategy[Typed]:
    def unary(c: Typed) -> st.SearchStrategy[Typed]:
        small = {"max_size": 3}
        options = [
            Typed(list[c.tp], st.lists(c.values, **small), False),
            Typed(tuple[c.tp, ...], st.lists(c.values, **small).map(tuple), c.hashable),
            Typed(Sequence[c.tp], st.lists(c.values, **small), False),
            Typed(dict[str, c.tp], st.dictionaries(st.text(max_size=4), c.values, **small), False),
            Typed(
                Mapping[str, c.tp], st.dictionaries(st.text(max_size=4), c.values, **small), False
            ),
            Typed(c.tp | None, st.none() | c.values, c.hashable),
        ]
        if c.hashable:
            options.append(Typed(set[c.tp], st.sets(c.values, **small), False))
            options.append(Typed(frozenset[c.tp], st.frozensets(c.values, **small), True))
        return st.sampled_from(options)

    several = st.lists(children, min_size=1, max_size=3)
    pair = st.tuples(children, children)
    return st.one_of(
        children.flatmap(unary),
        several.map(_dataclass),
        several.map(_attrs_class),
        st.builds(_typed_dict, several, st.booleans()),
        several.map(_named_tuple),
        pair.map(
            lambda p: Typed(
                tuple[p[0].tp, p[1].tp],
                st.tuples(p[0].values, p[1].values),
                p[0].hashable and p[1].hashable,
            )
        ),
        pair.map(lambda p: _union(*p)).filter(lambda t: t is not None),  # type: ignore[arg-type]
    )


TYPES = st.recursive(st.sampled_from([*_LEAVES, Typed(Tree, _TREES, False)]), _extend, max_leaves=4)


def _function(types: list[Typed]) -> Any:
    """A real function whose parameters p0, p1, ... have these annotations."""
    params = ", ".join(f"p{i}: T{i}" for i in range(len(types)))
    namespace: dict[str, Any] = {f"T{i}": t.tp for i, t in enumerate(types)}
    exec(f"def generated({params}) -> None:\n    pass\n", namespace)
    return namespace["generated"]


def _checker(types: list[Typed]) -> tuple[ArgumentChecker, dict[str, Any], dict[str, Any]]:
    fs = function_schema(_function(types))
    checker = ArgumentChecker("generated", fs.parameters, fs.param_types, False)
    return checker, fs.parameters, fs.param_types


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _FINITE | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=5,
)


def _datetime_text(value: dt.datetime) -> str:
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


_FORMATS: dict[str, st.SearchStrategy[str]] = {
    "date-time": st.datetimes(timezones=_ZONES).map(_datetime_text),
    "date": st.dates().map(dt.date.isoformat),
    "time": st.times(timezones=_ZONES).map(dt.time.isoformat),
    "uuid": st.uuids().map(str),
    "decimal": _DECIMALS.map(str),
    # (not empty, no NUL: the path format's check)
    "path": st.text(st.characters(exclude_characters="\x00"), min_size=1, max_size=8),
}


def _unique_key(value: Any) -> Any:
    """Equal keys for values JSON Schema's uniqueItems counts as equal (1 and 1.0, not True and 1)."""
    if isinstance(value, bool) or value is None:
        return ("const", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_unique_key(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _unique_key(v)) for k, v in value.items()))
    return ("string", value)


def instances(schema: Any, root: Any = None, depth: int = 0) -> st.SearchStrategy[Any]:
    """JSON instances of a derived schema (the subset toolfold derives, recursion included).

    hypothesis-jsonschema 0.23 cannot draw objects with current Hypothesis
    (it calls the removed ``many.more()``) nor follow recursive ``$ref``s.
    """
    root = schema if root is None else root
    if schema is True or schema == {}:
        return _JSON
    if "$ref" in schema:
        target = root
        for part in schema["$ref"][2:].split("/"):
            target = target[part]
        return st.deferred(lambda: instances(target, root, depth + 1))
    if "anyOf" in schema:
        return st.one_of([instances(s, root, depth) for s in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    kind = schema.get("type")
    if kind == "string":
        if schema.get("format") in _FORMATS:
            return _FORMATS[schema["format"]]
        low = schema.get("minLength", 0)
        return st.text(min_size=low, max_size=schema.get("maxLength", low + 8))
    if kind == "integer":
        ints = st.integers(schema.get("minimum"), schema.get("maximum"))
        # JSON Schema counts 3.0 as an integer, and so do some models.
        return ints | ints.filter(lambda n: abs(n) < 2**53).map(float)
    if kind == "number":
        low, high = schema.get("minimum"), schema.get("maximum")
        return st.floats(low, high, allow_nan=False, allow_infinity=False) | st.integers(
            None if low is None else int(low), None if high is None else int(high)
        )
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        if "prefixItems" in schema:
            return st.tuples(*(instances(s, root, depth) for s in schema["prefixItems"])).map(list)
        low = schema.get("minItems", 0)
        if depth > 3 and low == 0:  # recursion ends in empty arrays
            return st.just([])
        items = instances(schema.get("items", {}), root, depth)
        high = schema.get("maxItems", low + 3)
        unique = _unique_key if schema.get("uniqueItems") else None
        return st.lists(items, min_size=low, max_size=high, unique_by=unique)
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        fixed = st.fixed_dictionaries(
            {k: instances(v, root, depth) for k, v in props.items() if k in required},
            optional={k: instances(v, root, depth) for k, v in props.items() if k not in required},
        )
        extra = schema.get("additionalProperties", True)
        if props or extra is False:
            return fixed
        names = instances(schema.get("propertyNames", {"type": "string"}), root, depth)
        return st.dictionaries(names, instances(extra, root, depth), max_size=3)
    raise AssertionError(f"no instance strategy for {schema!r}")


def conforms(value: Any, tp: Any) -> bool:
    """Whether ``value`` is a value of the annotation ``tp``, all the way down."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        return conforms(value, args[0])
    if origin is Union or (origin is not None and type(tp).__name__ == "UnionType"):
        return any(conforms(value, a) for a in args)
    if origin is Literal:
        return any(type(value) is type(a) and value == a for a in args)
    if tp is type(None):
        return value is None
    if tp in (bool, int, float, str, dt.date):
        return type(value) is tp
    if origin in (list, set, frozenset):
        return type(value) is origin and all(conforms(v, args[0]) for v in value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return type(value) is tuple and all(conforms(v, args[0]) for v in value)
        return (
            type(value) is tuple
            and len(value) == len(args)
            and all(conforms(v, a) for v, a in zip(value, args, strict=True))
        )
    if origin is Sequence:
        return (
            isinstance(value, Sequence)
            and not isinstance(value, str)
            and all(conforms(v, args[0]) for v in value)
        )
    if origin in (dict, Mapping):
        return isinstance(value, Mapping) and all(
            type(k) is str and conforms(v, args[1]) for k, v in value.items()
        )
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp, include_extras=True)
        return (
            type(value) is dict
            and tp.__required_keys__ <= value.keys() <= hints.keys()
            and all(conforms(value[k], hints[k]) for k in value)
        )
    if not isinstance(value, tp):
        return False
    if dataclasses.is_dataclass(tp) or (isinstance(tp, type) and issubclass(tp, tuple)):
        hints = typing.get_type_hints(tp, include_extras=True)
        return all(conforms(getattr(value, k), hints[k]) for k in hints)
    if attrs.has(tp):
        return all(conforms(getattr(value, a.name), a.type) for a in attrs.fields(tp))
    return True


def normal(value: Any) -> Any:
    """A form of ``value`` equal for equal values and different for different ones, types included."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value),
            tuple(normal(getattr(value, f.name)) for f in dataclasses.fields(value)),
        )
    if attrs.has(type(value)):
        return (
            type(value),
            tuple(normal(getattr(value, a.name)) for a in attrs.fields(type(value))),
        )
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value), tuple(normal(v) for v in value))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(normal(v) for v in value))
    if isinstance(value, (set, frozenset)):
        return ("set", frozenset(normal(v) for v in value))
    if isinstance(value, dict):
        return ("map", frozenset((k, normal(v)) for k, v in value.items()))
    if isinstance(value, (dt.date, dt.time)):
        return (type(value), value.isoformat())
    if isinstance(value, enum.Enum):
        return (type(value), value.value)
    return (type(value), str(value) if isinstance(value, Decimal) else value)


_SETTINGS = settings(
    max_examples=int(os.environ.get("TOOLFOLD_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@_SETTINGS
@given(data=st.data(), types=st.lists(TYPES, min_size=1, max_size=3))
def test_instances_of_derived_schemas_structure_into_declared_types(
    data: st.DataObject, types: list[Typed]
) -> None:
    """Whatever the derived schema allows validates and becomes values of the declared types."""
    checker, schema, param_types = _checker(types)
    instance = data.draw(instances(schema), label="instance")
    arguments = checker.check(json.dumps(instance))
    assert arguments.keys() == param_types.keys()
    for name, tp in param_types.items():
        assert conforms(arguments[name], tp), (name, tp, arguments[name])


@_SETTINGS
@given(data=st.data(), types=st.lists(TYPES, min_size=1, max_size=3))
def test_values_of_declared_types_format_into_valid_instances(
    data: st.DataObject, types: list[Typed]
) -> None:
    """Values of the declared types unstructure into JSON that validates and structures back."""
    checker, _schema, param_types = _checker(types)
    values = {f"p{i}": data.draw(t.values, label=f"p{i}") for i, t in enumerate(types)}
    text = format_result(values)
    problems = [e.message for e in checker._validator.iter_errors(json.loads(text))]
    assert problems == [], text
    arguments = checker.check(text)
    for name, tp in param_types.items():
        assert conforms(arguments[name], tp), (name, tp, arguments[name])
        assert normal(arguments[name]) == normal(values[name]), name


# -- the compiled schema check agrees with jsonschema ---------------------------


def _paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [here]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*here, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*here, i)))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], rest, new)
    return copy


@st.composite
def corrupted(draw: st.DrawFn, schema: Any) -> Any:
    """An instance of ``schema`` with one part replaced by any JSON value (often invalid)."""
    value = draw(instances(schema))
    path = draw(st.sampled_from(_paths(value)))
    return _replace(value, path, draw(_JSON | instances(schema)))


def _agree(schema: Any, instance: Any) -> None:
    from toolfold.toolkit._arguments import _compile, format_checker
    from toolfold.toolkit._fastcheck import compile_check

    checker = format_checker()
    fast = compile_check(schema, checker.conforms)
    assert fast is not None, schema
    # the checker's own validator: Draft 2020-12 with a decimal-exact multipleOf
    expected = _compile(schema).is_valid(instance)
    assert fast(instance) == expected, (schema, instance)


@_SETTINGS
@given(data=st.data(), types=st.lists(TYPES, min_size=1, max_size=3))
def test_compiled_check_agrees_with_jsonschema_on_derived_schemas(
    data: st.DataObject, types: list[Typed]
) -> None:
    """On derived schemas, the fast check says valid exactly when jsonschema does."""
    _, schema, _ = _checker(types)
    _agree(schema, data.draw(corrupted(schema), label="instance"))


_SCALAR_SCHEMAS = st.one_of(
    st.sampled_from(
        [
            {"type": "string", "minLength": 2, "maxLength": 4},
            {"type": "string", "pattern": "^a+b?$"},
            {"type": "string", "format": "date-time"},
            {"type": "string", "format": "email"},
            {"type": "integer", "minimum": -3, "exclusiveMaximum": 10},
            {"type": "number", "exclusiveMinimum": 0.5, "maximum": 1e6},
            {"type": "number", "multipleOf": 0.5},
            {"type": "integer", "multipleOf": 3},
            {"type": ["string", "null"]},
            {"type": "boolean"},
            {"enum": [1, "1", True, None, [1, 2], {"a": 1}]},
            {"const": 0},
            {"const": [False]},
            {"minimum": 2},
            {"maxLength": 1},
            {},
            True,
            False,
        ]
    )
)


def _compound(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(["a", "b", "c"])
    return st.one_of(
        st.builds(
            lambda props, req, extra: {
                "type": "object",
                "properties": props,
                "required": sorted(set(req) & set(props)),
                "additionalProperties": extra,
            },
            st.dictionaries(names, inner, max_size=3),
            st.lists(names, max_size=3),
            st.sampled_from([True, False]) | inner,
        ),
        st.builds(
            lambda i: {"type": "object", "additionalProperties": i, "maxProperties": 2}, inner
        ),
        st.builds(
            lambda i: {"propertyNames": {"maxLength": 1}, "minProperties": 1, "items": i}, inner
        ),
        st.builds(
            lambda items, unique: {
                "type": "array",
                "items": items,
                "uniqueItems": unique,
                "maxItems": 3,
            },
            inner,
            st.booleans(),
        ),
        st.builds(
            lambda pre, rest: {"prefixItems": pre, "items": rest},
            st.lists(inner, max_size=2),
            inner,
        ),
        st.builds(lambda alts: {"anyOf": alts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda alts: {"oneOf": alts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda alts: {"allOf": alts}, st.lists(inner, min_size=1, max_size=2)),
        st.builds(lambda i: {"$ref": "#/$defs/node", "minLength": 1}, inner),
    )


@st.composite
def keyword_schemas(draw: st.DrawFn) -> Any:
    """A schema using every supported keyword in random combinations, with a $defs target."""
    body = draw(st.recursive(_SCALAR_SCHEMAS, _compound, max_leaves=5))
    node = draw(st.recursive(_SCALAR_SCHEMAS, _compound, max_leaves=3))
    if isinstance(body, bool):
        body = {"allOf": [body]}
    return {**body, "$defs": {"node": _strip_refs(node)}}


def _strip_refs(schema: Any) -> Any:
    """The $defs target must not point at itself forever without consuming input."""
    if isinstance(schema, dict):
        return {k: _strip_refs(v) for k, v in schema.items() if k != "$ref"}
    if isinstance(schema, list):
        return [_strip_refs(v) for v in schema]
    return schema


_ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 12)
    | st.sampled_from([0.5, 1.0, 2.5, -0.0, 1e300])
    | st.sampled_from(["", "a", "ab", "aab", "b", "2024-05-01T10:00:00Z", "x@y", "1"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "c", "dd"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@_SETTINGS
@given(schema=keyword_schemas(), instance=_ANY_JSON)
def test_compiled_check_agrees_with_jsonschema_on_every_keyword(schema: Any, instance: Any) -> None:
    """For schemas mixing all supported keywords, the fast check and jsonschema agree."""
    _agree(schema, instance)


def test_unsupported_keywords_are_left_to_jsonschema() -> None:
    """A schema with a keyword the compiler does not know is not compiled at all."""
    from toolfold.toolkit._fastcheck import compile_check

    conforms = lambda v, f: True  # noqa: E731
    assert compile_check({"not": {"type": "string"}}, conforms) is None
    assert compile_check({"properties": {"a": {"if": {}}}}, conforms) is None
    assert compile_check({"$ref": "other.json#/x"}, conforms) is None
    assert compile_check({"$schema": "http://json-schema.org/draft-07/schema#"}, conforms) is None
    assert compile_check({"type": "object", "description": "x"}, conforms) is not None


_BOUNDARIES: list[tuple[Any, list[Any]]] = [
    ({"minLength": 2}, ["a", "ab", "é", "éé", 5]),
    ({"maxLength": 2}, ["ab", "abc", "🙂🙂", "🙂🙂🙂", None]),
    ({"minimum": 2}, [1, 2, 2.0, 1.999, True, "1"]),
    ({"maximum": 2}, [2, 3, 2.0001, False]),
    ({"exclusiveMinimum": 2}, [2, 2.0, 2.5, 3]),
    ({"exclusiveMaximum": 2}, [2, 1.9, 2.0]),
    ({"multipleOf": 0.1}, [0.3, 0.7, 1, 10**300, 2**70 * 1.0]),
    ({"multipleOf": 3}, [9, 10, 9.0, 9.5, True]),
    ({"minItems": 1, "maxItems": 2}, [[], [1], [1, 2], [1, 2, 3], "ab"]),
    ({"minProperties": 1, "maxProperties": 1}, [{}, {"a": 1}, {"a": 1, "b": 2}, [1]]),
    (
        {"uniqueItems": True},
        [[1, 1.0], [1, True], [0, False], [[1], [1.0]], [{"a": 1}, {"a": 1.0}]],
    ),
    ({"enum": [1, [1], {"a": [True]}]}, [1.0, True, [1.0], [True], {"a": [1]}, {"a": [True]}]),
    ({"const": False}, [False, 0, 0.0, None, []]),
    ({"type": "integer"}, [1, 1.0, 1.5, True, 10**30, float(10**30)]),
    ({"type": "number"}, [1, 1.5, True, "1", None]),
    ({"pattern": "b"}, ["abc", "a", 3]),
    ({"format": "date"}, ["2024-02-30", "2024-02-28", 7]),
    ({"prefixItems": [{"type": "string"}], "items": False}, [["a"], ["a", 1], [], [1]]),
    ({"properties": {"a": {"type": "string"}}, "required": ["a"]}, [{"a": "x"}, {}, {"a": 1}, []]),
    ({"additionalProperties": {"type": "integer"}}, [{"x": 1}, {"x": "1"}, {}]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, [1, -1, 0.5, "x"]),
    (
        {"$ref": "#/$defs/a", "$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}}}},
        [[[[]]], [[1]]],
    ),
]


def test_compiled_check_agrees_with_jsonschema_at_boundaries() -> None:
    """Each keyword's edge cases (equal bounds, 1 vs 1.0 vs True, code points) match jsonschema."""
    for schema, values in _BOUNDARIES:
        for value in values:
            _agree(schema, value)


# --- the same property with instances drawn by hypothesis-jsonschema ------------
#
# hypothesis-jsonschema reads the derived schema independently of our own
# `instances` strategy above, so a schema that says more (or less) than the
# types accept is caught by a generator we did not write. It cannot follow
# recursive `$ref`s, so those signatures are left to the strategy above.

# formats it does not know (it generates any string for them)
_CUSTOM_FORMATS = {name: _FORMATS[name] for name in ("decimal", "uuid", "path")}


def _has_ref(schema: Any) -> bool:
    return "$ref" in json.dumps(schema)


def _draft7(schema: Any) -> Any:
    """The same schema in draft 7 words (hypothesis-jsonschema predates `prefixItems`)."""
    if isinstance(schema, list):
        return [_draft7(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _draft7(v) for k, v in schema.items() if k != "prefixItems"}
    if "prefixItems" in schema:
        out["items"] = _draft7(schema["prefixItems"])
        if "items" in schema:
            out["additionalItems"] = _draft7(schema["items"])
    return out


@_SETTINGS
@given(data=st.data(), types=st.lists(TYPES, min_size=1, max_size=3))
def test_hypothesis_jsonschema_instances_structure_into_declared_types(
    data: st.DataObject, types: list[Typed]
) -> None:
    """Instances hypothesis-jsonschema draws from a derived schema validate and structure."""
    from hypothesis_jsonschema import from_schema

    checker, schema, param_types = _checker(types)
    if _has_ref(schema):
        return
    instance = data.draw(
        from_schema(_draft7(schema), custom_formats=_CUSTOM_FORMATS), label="instance"
    )
    arguments = checker.check(json.dumps(instance))
    assert arguments.keys() <= param_types.keys()
    for name, value in arguments.items():
        assert conforms(value, param_types[name]), (name, param_types[name], value)
