"""Python types → JSON Schema, through a registry of rules users can extend.

A rule is a function ``(tp, ctx) -> dict`` registered for a class (it also
matches subclasses) or for a predicate over types, like cattrs hooks. User rules
are tried before the built-in ones, newest first, so a user can also override
how a built-in type is described::

    @toolfold.register_schema_rule(Money)
    def _money(tp: type, ctx: SchemaContext) -> dict[str, Any]:
        return {"type": "string", "pattern": r"^\\d+\\.\\d{2} [A-Z]{3}$"}

Schemas of classes are cached (a dataclass is described once per process); the
cache is private, callers always get a fresh dict they may mutate.
"""

from __future__ import annotations

import enum
import sys
import types
import typing
from collections.abc import Callable, Iterable
from typing import Any

from toolfold.toolkit import _field
from toolfold.toolkit._bounds import SourcedBounds, empty_bounds
from toolfold.toolkit._classes import _QUALIFIERS, substitute_type_vars
from toolfold.toolkit._field import (
    Field,
    alias_problem,
    apply_field,
    doc_text,
    expand_metadata,
    hashable_item,
    is_hashable,
    metadata_kind,
    timezone_problem,
)
from toolfold.toolkit._field import is_typeddict as _is_typeddict
from toolfold.toolkit._flags import flag_mask, flag_sums, flag_values, with_flag_note
from toolfold.toolkit._jsonschema import not_json

Rule = Callable[[Any, "SchemaContext"], dict[str, Any]]

_UNBOUND = "type variable {} is not bound to a type: "
_UNBOUND_PARAMETER = "bind {} by annotating a concrete type (int, list[str]) instead"
_UNBOUND_FIELD = (
    "write the generic class with its arguments (Box[int]) or derive from it so"
    " bound (class IntBox(Box[int]))"
)
_UNBOUND_TYPEDDICT = (
    "; before Python 3.12 a typing.TypedDict does not record a base its class"
    " statement names bare (class C(IntBox)): use typing_extensions.TypedDict"
)

_NoneType = type(None)
_UNION_ORIGINS: tuple[Any, ...] = (typing.Union, types.UnionType)
_SIMPLE: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    _NoneType: {"type": "null"},
    None: {"type": "null"},
    Any: {},
}
# By "module.qualname" so that datetime, uuid, decimal and pathlib need not be
# imported for toolfold to recognise them.
_FORMATS: dict[str, dict[str, Any]] = {
    "datetime.datetime": {"type": "string", "format": "date-time"},
    "datetime.date": {"type": "string", "format": "date"},
    "datetime.time": {"type": "string", "format": "time"},
    "uuid.UUID": {"type": "string", "format": "uuid"},
    "decimal.Decimal": {"type": "string", "format": "decimal"},
}
_PATH = {"type": "string", "format": "path"}
_ARRAY_ORIGINS = {
    list,
    typing.Sequence.__origin__,  # type: ignore[attr-defined]
    typing.MutableSequence.__origin__,  # type: ignore[attr-defined]
}
_SET_ORIGINS = {
    set,
    frozenset,
    typing.AbstractSet.__origin__,  # type: ignore[attr-defined]
    typing.MutableSet.__origin__,  # type: ignore[attr-defined]
}
_MAP_ORIGINS = {
    dict,
    typing.Mapping.__origin__,  # type: ignore[attr-defined]
    typing.MutableMapping.__origin__,  # type: ignore[attr-defined]
}
_TYPING_TUPLE: Any = getattr(typing, "Tuple")  # noqa: B009 (ruff would rewrite typing.Tuple)
# Unparametrised containers: their items are of any type.
_BARE = frozenset({tuple, *_ARRAY_ORIGINS, *_SET_ORIGINS, *_MAP_ORIGINS})

_HINT = "; use a supported type or register a rule with toolfold.register_schema_rule()"
_class_rules: dict[type, Rule] = {}
_predicate_rules: list[tuple[Callable[[Any], bool], Rule]] = []
_cache: dict[Any, dict[str, Any]] = {}
#: How many rules were registered: a cache of what schemas say (the converter's
#: union choice) is stale once it changes.
rules_registered = 0


def register_schema_rule(match: type | Callable[[Any], bool], rule: Rule | None = None) -> Any:
    """Teach toolfold the JSON Schema of a type.

    Args:
        match: A class (the rule also covers its subclasses) or a predicate
            ``(tp) -> bool`` over type annotations.
        rule: ``(tp, ctx) -> dict`` returning the schema; ``ctx.schema_for(t)``
            derives the schema of an inner type. Omit it to use this function
            as a decorator.

    Returns:
        The rule (so that it works as a decorator).
    """

    def register(fn: Rule) -> Rule:
        global rules_registered
        if isinstance(match, type):
            _class_rules[match] = fn
        else:
            _predicate_rules.insert(0, (match, fn))
        _cache.clear()
        rules_registered += 1
        return fn

    return register if rule is None else register(rule)


def copy_json(value: Any) -> Any:
    """Deep-copy a JSON value made of dicts and lists (faster than copy.deepcopy)."""
    if type(value) is dict:
        return {k: copy_json(v) for k, v in value.items()}
    if type(value) is list:
        return [copy_json(v) for v in value]
    return value


def type_repr(tp: Any) -> str:
    """A short, readable name for a type annotation (``list[int]``, ``Point``)."""
    if isinstance(tp, type) and typing.get_origin(tp) is None:  # list[int] is a type on 3.10
        return tp.__qualname__
    if tp is None:
        return "None"
    return repr(tp).replace("typing.", "").replace("typing_extensions.", "")


class SchemaContext:
    """The state of one derivation: ``$defs`` for recursive types, problems.

    Rules receive it and call ``ctx.schema_for(inner)`` for the types they
    contain, so recursion, caching and error paths work through user rules too.

    Attributes:
        defs: Schemas of recursive types, by name, for the root's ``$defs``.
        problems: (path, message) for each type that could not be described.
    """

    __slots__ = (
        "_names",
        "_path",
        "_recursive",
        "_refs",
        "_stack",
        "defs",
        "localns",
        "problems",
        "unresolved",
    )

    def __init__(self, localns: dict[str, Any] | None = None) -> None:
        # names local to the function that defines a tool, for classes' string annotations
        self.localns = localns
        self.unresolved = False  # a class's annotations name something unknown
        self.defs: dict[str, dict[str, Any]] = {}
        self.problems: list[tuple[str, str]] = []
        self._path: list[str] = []
        self._stack: list[Any] = []
        self._recursive: set[Any] = set()
        self._names: dict[Any, str] = {}
        self._refs = 0

    def problem(self, message: str, segment: str = "") -> dict[str, Any]:
        """Record that the type at the current path cannot be described."""
        self.problems.append(("".join(self._path) + segment, message))
        return {}

    def schema_for(self, tp: Any, segment: str = "") -> dict[str, Any]:
        """The schema of ``tp`` (a fresh dict); ``segment`` extends the error path."""
        if segment:
            self._path.append(segment)
        # Only classes are cached: equal generic aliases can differ in order
        # (Literal["a", "b"] == Literal["b", "a"]), and they are cheap to rebuild
        # once the classes inside them are cached.
        cacheable = isinstance(tp, type) and typing.get_origin(tp) is None and not self.localns
        cached = _cache.get(tp) if cacheable else None
        if cached is not None:
            schema: dict[str, Any] = copy_json(cached)
        else:
            refs, problems = self._refs, len(self.problems)
            schema = self._derive(tp)
            if cacheable and refs == self._refs and problems == len(self.problems):
                if len(_cache) >= _field.TYPES_KEPT:  # classes made at run time must not pile up
                    _cache.clear()
                _cache[tp] = copy_json(schema)
        if segment:
            self._path.pop()
        return schema

    def _derive(self, tp: Any) -> dict[str, Any]:
        simple = _SIMPLE.get(tp) if is_hashable(tp) else None
        if simple is not None and not _class_rules and not _predicate_rules:
            return dict(simple)
        rule = _user_rule(tp)
        if rule is not None:
            made = rule(tp, self)
            wrong = not_json(made)
            if wrong:  # else every run would fail when its request is written
                where = "; ".join(wrong)
                return self.problem(f"the schema rule for {type_repr(tp)} made no JSON: at {where}")
            return made
        if simple is not None:
            return dict(simple)
        origin = typing.get_origin(tp)
        if origin is not None:
            return self._generic(tp, origin, typing.get_args(tp))
        if isinstance(tp, type):
            return self._class(tp)
        supertype = getattr(tp, "__supertype__", None)  # NewType
        if supertype is not None:
            return self.schema_for(supertype)
        extensions = sys.modules.get("typing_extensions")
        if extensions is not None and tp is extensions.Any:  # its own class before 3.11
            return {}
        if isinstance(tp, typing.TypeVar):
            return self.problem(self._unbound(tp))
        return self.problem(f"type {type_repr(tp)} has no JSON Schema rule" + _HINT)

    def _unbound(self, tp: typing.TypeVar) -> str:
        name = type_repr(tp)
        if not self._stack:  # def ident(x: T): no class to bind it through
            return _UNBOUND.format(name) + _UNBOUND_PARAMETER.format(tp.__name__)
        owner = self._stack[-1]
        owner = typing.get_origin(owner) or owner
        message = _UNBOUND.format(name) + _UNBOUND_FIELD
        if sys.version_info < (3, 12) and _is_typeddict(owner):
            message += _UNBOUND_TYPEDDICT
        return message

    def _generic(self, tp: Any, origin: Any, args: tuple[Any, ...]) -> dict[str, Any]:
        if origin is typing.Annotated:
            return self._annotated(tp.__origin__, tp.__metadata__)
        if origin in _UNION_ORIGINS:
            return {"anyOf": [self.schema_for(a) for a in args]}
        if origin is typing.Literal:
            return self._literal(args)
        if origin in _ARRAY_ORIGINS or origin in _SET_ORIGINS:
            schema: dict[str, Any] = {"type": "array"}
            if args and args[0] is not Any:
                schema["items"] = self.schema_for(args[0], "[]")
            if origin in _SET_ORIGINS:
                schema["uniqueItems"] = True
            return schema
        if origin is tuple:
            if tp is tuple or tp is _TYPING_TUPLE:  # bare: any length; tuple[()] is empty
                return self._tuple((Any, ...))
            return self._tuple(args)
        if origin in _MAP_ORIGINS:
            return self._mapping(args)
        if getattr(origin, "_name", None) in _QUALIFIERS:
            return self.schema_for(args[0])
        if isinstance(origin, type) and origin is not type:
            return self._class(origin, tp)
        return self.problem(f"type {type_repr(tp)} has no JSON Schema rule" + _HINT)

    def _annotated(self, inner: Any, metadata: Iterable[Any]) -> dict[str, Any]:
        schema = self.schema_for(inner)
        problems: list[str] = []
        shown = inner  # named without a TypedDict key's qualifiers (NotRequired[...])
        while getattr(typing.get_origin(shown), "_name", None) in _QUALIFIERS:
            shown = typing.get_args(shown)[0]
        name = type_repr(shown)
        bounds: SourcedBounds | None = None  # made by the first item that bounds the value
        for original in metadata:
            for item in expand_metadata((original,)):
                kind = metadata_kind(item)
                if kind == "field" or kind == "keyword":
                    bounds = bounds or SourcedBounds(schema, name, _branch_names(shown))
                    field = item if kind == "field" else _from_annotated_types(item)
                    apply_field(schema, field, problems, name)
                    bounds.note(schema, original)
                else:
                    _other_metadata(schema, inner, item, kind, problems)
        if bounds is not None and not problems:  # each part fine, together perhaps not
            problems = empty_bounds(schema, bounds)
        for message in problems:
            self.problem(message)
        if "description" in schema:  # a Flag's names stay in a description given here
            schema["description"] = with_flag_note(schema["description"], inner)
        return schema

    def _literal(self, args: tuple[Any, ...]) -> dict[str, Any]:
        values = [a.value if isinstance(a, enum.Enum) else a for a in args]
        return _enum_schema(self, values, "Literal")

    def _tuple(self, args: tuple[Any, ...]) -> dict[str, Any]:
        if len(args) == 2 and args[1] is Ellipsis:
            schema: dict[str, Any] = {"type": "array"}
            if args[0] is not Any:
                schema["items"] = self.schema_for(args[0], "[]")
            return schema
        if args == ((),):  # tuple[()] on Python 3.10
            args = ()
        items = [self.schema_for(a, f"[{i}]") for i, a in enumerate(args)]
        schema = {"type": "array", "minItems": len(items), "maxItems": len(items)}
        if items:
            schema["prefixItems"] = items
        return schema

    def _mapping(self, args: tuple[Any, ...]) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object"}
        if not args:
            return schema
        if len(args) != 2:
            return self.problem(
                f"a mapping takes a key type and a value type (dict[str, int]), not"
                f" {len(args)} type{'' if len(args) == 1 else 's'}"
                f" ({', '.join(type_repr(a) for a in args)})"
            )
        key, value = args
        if key is not str and key is not Any:
            names = self.schema_for(key, "{key}")
            if names.get("type") != "string":
                return self.problem(
                    f"dict keys must be str (JSON object keys are strings), not {type_repr(key)}"
                )
            if len(names) > 1:
                schema["propertyNames"] = names
        if value is not Any:
            schema["additionalProperties"] = self.schema_for(value, "{}")
        return schema

    def _class(self, cls: type, alias: Any = None) -> dict[str, Any]:
        if issubclass(cls, enum.Flag):
            return _flag_class(self, cls)
        if issubclass(cls, enum.Enum):
            return _enum_class(self, cls)
        if cls in _BARE:  # list, collections.abc.Sequence...: of anything
            return self._generic(cls, cls, ())
        found = _FORMATS.get(f"{cls.__module__}.{cls.__qualname__}")
        if found is not None:
            return dict(found)
        if cls.__module__.startswith("pathlib"):  # pathlib._local on 3.13
            return dict(_PATH)
        from toolfold.toolkit._pydantic import is_model, model_schema

        if is_model(cls):  # its own schema, in toolfold's conventions
            return model_schema(self, cls)
        from toolfold.toolkit._classes import UnresolvedHints, class_fields

        try:
            fields = class_fields(cls, self.localns)
        except UnresolvedHints as exc:
            self.unresolved = True
            return self.problem(f"{exc}{exc.advice}")
        if fields is None:
            return self.problem(f"type {type_repr(cls)} has no JSON Schema rule" + _HINT)
        if alias is not None:  # Box[int]: the class's type variables stand for the args
            fields = substitute_type_vars(cls, typing.get_args(alias), fields)
            return self.object_schema(alias, fields, cls)
        return self.object_schema(cls, fields)

    def object_schema(self, cls: Any, fields: Any, origin: type | None = None) -> dict[str, Any]:
        """The schema of a class with named fields, with ``$ref`` for recursion.

        ``cls`` may be a parametrised generic (``Box[int]``), ``origin`` its class.
        """
        if cls in self._stack:
            self._recursive.add(cls)
            self._refs += 1
            return {"$ref": f"#/$defs/{self._def_name(cls)}"}
        self._stack.append(cls)
        try:
            from toolfold.toolkit._classes import build_object

            schema = build_object(self, cls if origin is None else origin, fields)
        finally:
            self._stack.pop()
        if cls in self._recursive:
            self._refs += 1
            name = self._def_name(cls)
            self.defs[name] = schema
            return {"$ref": f"#/$defs/{name}"}
        return schema

    def add_def(self, key: Any, name: str) -> tuple[str, bool]:
        """The name in the root's ``$defs`` of a schema made elsewhere (a pydantic model's),
        known by ``key``: ``name`` or a free name like it; and whether it is new (then the
        caller puts the schema in `defs`)."""
        self._refs += 1  # (a schema holding a $ref to the root's $defs is not cached)
        known = self._names.get(key)
        if known is not None:
            return known, False
        base, n = name, 2
        taken = set(self._names.values()) | set(self.defs)
        while name in taken:
            name, n = f"{base}{n}", n + 1
        self._names[key] = name
        return name, True

    def _def_name(self, cls: type) -> str:
        name = self._names.get(cls)
        if name is None:
            base = getattr(typing.get_origin(cls) or cls, "__name__", "Type")
            name = base
            taken = set(self._names.values())
            n = 2
            while name in taken:
                name, n = f"{base}{n}", n + 1
            self._names[cls] = name
        return name


def has_own_description(annotation: Any) -> bool:
    """Whether ``Annotated[...]`` metadata gives this annotation its description."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return False
    return any(
        metadata_kind(m) == "description" or (isinstance(m, Field) and m.description is not None)
        for m in expand_metadata(annotation.__metadata__)
    )


def _user_rule(tp: Any) -> Rule | None:
    if _class_rules and isinstance(tp, type):
        # bool is an int subclass, but a rule for int must not describe bool
        for klass in (tp,) if tp in _SIMPLE else tp.__mro__:
            rule = _class_rules.get(klass)
            if rule is not None:
                return rule
    for predicate, rule in _predicate_rules:
        if predicate(tp):
            return rule
    return None


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", _NoneType: "null"}


def _enum_schema(ctx: SchemaContext, values: list[Any], what: str) -> dict[str, Any]:
    kinds = []
    for value in values:
        kind = _JSON_TYPES.get(type(value))
        if kind is None:
            return ctx.problem(
                f"{what} value {value!r} is not a JSON value (use str, int, float, bool or None)"
            )
        if kind not in kinds:
            kinds.append(kind)
    schema: dict[str, Any] = {"enum": values}
    if len(kinds) == 1:
        schema = {"type": kinds[0], "enum": values}
    return schema


def _enum_class(ctx: SchemaContext, cls: type[enum.Enum]) -> dict[str, Any]:
    members = [m.value for m in cls]
    if not members:  # `{"enum": []}` admits no value: no call could ever be valid
        return ctx.problem(
            f"Enum {cls.__qualname__} has no members, so no value fits it; give it members"
        )
    schema = _enum_schema(ctx, members, cls.__qualname__)
    description = _class_description(cls)
    if description and schema:
        schema["description"] = description
    return schema


def _class_description(cls: type[enum.Enum]) -> str:
    doc = cls.__doc__
    if not doc or doc == "An enumeration.":
        return ""
    from toolfold.toolkit._docstrings import parse_docstring

    return parse_docstring(doc).description


def _flag_class(ctx: SchemaContext, cls: type[enum.Flag]) -> dict[str, Any]:
    """Any sum of the flags, 0 (none) included, the flags named in the description.

    Flags that are the lowest bits (1, 2, 4) give the range 0..all or'ed, which
    is exact; others (``READ=4, WRITE=2``) give an ``enum`` of every sum
    (`flag_sums`), so that the schema refuses what the converter refuses (3 has
    a bit of no flag) and a model or `TestModel` is never offered a number in
    the range the tool refuses. Past `_FLAG_ENUM_BITS` such flags, flags that
    are consecutive bits (2, 4, 8...) are the range's multiples of the lowest
    (exact too); otherwise the range stands (JSON Schema has no keyword for "a
    sum of these bits") and the converter refuses a number in it that has a
    bit of no flag.
    """
    values = flag_values(cls)
    if not values:
        return ctx.problem(f"Flag {cls.__qualname__} has no flags")
    odd = [v for v in values if not isinstance(v, int) or isinstance(v, bool)]
    if odd:
        return ctx.problem(
            f"Flag {cls.__qualname__} has values that are not integers"
            f" ({', '.join(map(repr, odd))}); a flag is a bit of an int"
        )
    mask = flag_mask(cls)
    description = with_flag_note(_class_description(cls), cls)
    if mask & (mask + 1) and mask.bit_count() <= _FLAG_ENUM_BITS:  # (a gap in the bits)
        return {"type": "integer", "enum": flag_sums(mask), "description": description}
    schema: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": mask}
    low = mask & -mask
    if low > 1 and not (mask // low) & (mask // low + 1):  # 2, 4, 8...: the multiples of 2
        schema["multipleOf"] = low
    schema["description"] = description
    return schema


#: The most flags whose sums a schema lists (`_flag_class`): 64 values.
_FLAG_ENUM_BITS = 6


def _branch_names(tp: Any) -> list[str]:
    """How messages name the branches of a union's schema, one per argument in order
    (``int``, without its own Annotated metadata); empty for another type."""
    if typing.get_origin(tp) not in _UNION_ORIGINS:
        return []
    return [
        type_repr(arg.__origin__ if typing.get_origin(arg) is typing.Annotated else arg)
        for arg in typing.get_args(tp)
    ]


def _other_metadata(
    schema: dict[str, Any], inner: Any, item: Any, kind: str, problems: list[str]
) -> None:
    """Apply one ``Annotated`` item that bounds nothing (`metadata_kind`) to ``schema``,
    or append what is wrong with it to ``problems``."""
    if kind == "description":
        schema["description"] = item if isinstance(item, str) else doc_text(item)
    elif kind == "unsupported":
        problems.append(
            f"annotated_types.{type(item).__name__} ({item!r}) has no JSON Schema"
            " keyword and toolfold does not check it; check the value in the"
            " function, or with annotated_types.Predicate(...)"
        )
    elif kind == "check" and not is_hashable(hashable_item(item)):
        problems.append(
            f"{item!r} cannot be checked: converters find hooks by type, and a type"
            " holding it is not hashable (its function is not); use a function,"
            " a lambda or a functools.partial of hashable arguments"
        )
    elif kind == "refused":
        problems.append(item.problem)
    elif kind == "alias":
        problems.append(alias_problem(item, inner))
    elif kind == "check" and type(item).__name__ == "Timezone":
        wrong = timezone_problem(item, inner)
        if wrong is not None:
            problems.append(wrong)
    # a hashable "check" (Predicate, Timezone) is structuring's; "other" is ignored


def _from_annotated_types(item: Any) -> Field:
    names = ("ge", "gt", "le", "lt", "multiple_of", "min_length", "max_length", "pattern")
    found = {n: getattr(item, n) for n in names if getattr(item, n, None) is not None}
    return Field(**found)


def schema_for_type(tp: Any) -> dict[str, Any]:
    """The JSON Schema of one type annotation, with ``$defs`` if recursive.

    Args:
        tp: A type annotation (``int``, ``list[Point]``, ``Annotated[...]``).

    Returns:
        A fresh JSON Schema dict.

    Raises:
        ToolDefinitionError: No rule describes the type (or a part of it).
    """
    ctx = SchemaContext()
    schema = ctx.schema_for(tp)
    if ctx.problems:
        from toolfold._errors import ToolDefinitionError

        problems = [f"at {p}: {m}" if p else m for p, m in ctx.problems]
        error = ToolDefinitionError(type_repr(tp), problems)
        count = len(problems)
        lines = "\n".join(f"  - {p}" for p in problems)
        noun = "problem" if count == 1 else "problems"
        error.args = (f"no JSON Schema for {type_repr(tp)}: {count} {noun}\n{lines}",)
        raise error
    if ctx.defs:
        schema["$defs"] = ctx.defs
    return schema
