"""`Field`: the marker that puts a description and constraints on a type.

``Annotated[int, Field(ge=0, description="How many")]`` gives
``{"type": "integer", "minimum": 0, "description": "How many"}``. A plain string
inside ``Annotated`` is a description too: ``Annotated[str, "The city"]``, and so
is a PEP 727 ``Doc``. `metadata_kind` says what toolfold makes of each item of
``Annotated`` metadata (annotated_types markers included), for the schema and
the converter alike.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any

# keyword -> (JSON Schema keyword, the schema "type"s it applies to)
_NUMBER = frozenset({"integer", "number"})
_STRING = frozenset({"string"})
_ARRAY = frozenset({"array"})
CONSTRAINTS: dict[str, tuple[str, frozenset[str]]] = {
    "ge": ("minimum", _NUMBER),
    "gt": ("exclusiveMinimum", _NUMBER),
    "le": ("maximum", _NUMBER),
    "lt": ("exclusiveMaximum", _NUMBER),
    "multiple_of": ("multipleOf", _NUMBER),
    "min_length": ("minLength", _STRING),
    "max_length": ("maxLength", _STRING),
    "pattern": ("pattern", _STRING),
    "min_items": ("minItems", _ARRAY),
    "max_items": ("maxItems", _ARRAY),
}
_KIND = {_NUMBER: "numbers", _STRING: "strings", _ARRAY: "arrays"}


_NAMES = (
    "description",
    "ge",
    "gt",
    "le",
    "lt",
    "multiple_of",
    "min_length",
    "max_length",
    "pattern",
    "min_items",
    "max_items",
    "examples",
    "extra",
)


class Field:
    """Description and constraints for a type, used inside ``Annotated``.

    Example::

        def search(
            query: Annotated[str, Field(min_length=1, description="Text to find")],
            limit: Annotated[int, Field(ge=1, le=50)] = 10,
        ) -> list[str]: ...

    Args:
        description: The property's description (wins over the docstring's).
        ge: Minimum, inclusive (numbers).
        gt: Minimum, exclusive (numbers).
        le: Maximum, inclusive (numbers).
        lt: Maximum, exclusive (numbers).
        multiple_of: The value must be a multiple of this (numbers).
        min_length: Minimum length (strings; on arrays, the same as min_items).
        max_length: Maximum length (strings; on arrays, the same as max_items).
        pattern: A regular expression the value must match (strings).
        min_items: Minimum number of items (arrays, sets, tuples).
        max_items: Maximum number of items (arrays, sets, tuples).
        examples: Example values, shown to the model.
        extra: More JSON Schema keywords, merged as they are.
    """

    # A plain class, not attrs: attrs would generate its methods at import time,
    # several milliseconds of `import toolfold` for a class most programs build twice.
    __slots__ = _NAMES

    def __init__(
        self,
        description: str | None = None,
        *,
        ge: float | None = None,
        gt: float | None = None,
        le: float | None = None,
        lt: float | None = None,
        multiple_of: float | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        pattern: str | None = None,
        min_items: int | None = None,
        max_items: int | None = None,
        examples: Iterable[Any] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.description = description
        self.ge = ge
        self.gt = gt
        self.le = le
        self.lt = lt
        self.multiple_of = multiple_of
        self.min_length = min_length
        self.max_length = max_length
        self.pattern = pattern
        self.min_items = min_items
        self.max_items = max_items
        self.examples = None if examples is None else tuple(examples)
        self.extra = None if extra is None else dict(extra)

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in _NAMES[:-1])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Field):
            return NotImplemented
        return self._key() == other._key() and self.extra == other.extra

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        set_ = ", ".join(
            f"{n}={getattr(self, n)!r}" for n in _NAMES if getattr(self, n) is not None
        )
        return f"Field({set_})"


# annotated_types markers with a JSON Schema keyword (their attributes are Field's arguments)
_AT_KEYWORDS = frozenset({"Gt", "Ge", "Lt", "Le", "MultipleOf", "MinLen", "MaxLen"})
# annotated_types markers JSON Schema cannot say, which structuring checks in Python
_AT_CHECKS = frozenset({"Predicate", "Not", "Timezone"})
# annotated_types markers that say something about a value but ask nothing of it
# ("annotated_types itself makes no use of the unit string"): ignored
_AT_INFORMATIONAL = frozenset({"Unit"})


def expand_metadata(metadata: Iterable[Any], checked: bool = False) -> Iterator[Any]:
    """``Annotated`` metadata with grouped markers (annotated_types' ``Interval``,
    ``Len``, or a ``GroupedMetadata`` of one's own) unpacked into their parts,
    as annotated_types asks of the libraries that read it.

    pydantic's metadata is read too (`pydantic_items`): a ``pydantic.Field``
    becomes a `Field` and the annotated_types markers it holds, what toolfold
    cannot honour a `Refused` (a definition error); with ``checked`` (the
    item is one of a pydantic dataclass's fields, which pydantic checks when
    the class is built), what the schema cannot say is left to pydantic.
    """
    for item in metadata:
        kind = type(item)
        if kind is PydanticChecked:
            yield from expand_metadata((item.item,), True)
        elif getattr(item, "__is_annotated_types_grouped_metadata__", False):
            yield from expand_metadata(item, checked)
        elif kind.__module__.startswith("pydantic"):
            yield from pydantic_items(item, checked)
        else:
            yield item


class Refused:
    """What toolfold cannot honour in ``Annotated`` metadata (a pydantic option): a
    definition error saying ``problem``, never dropped without a word."""

    __slots__ = ("problem",)

    def __init__(self, problem: str) -> None:
        self.problem = problem

    def __repr__(self) -> str:
        return f"Refused({self.problem!r})"


class PydanticChecked:
    """One ``Annotated`` item of a pydantic dataclass's field (or the ``pydantic.Field``
    given as its default): pydantic checks it when the class is built, so what the
    schema cannot say of it is no error. Equal (and hashed) by the item it holds,
    so the types made with it stay equal for the converters' caches."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item

    def __eq__(self, other: object) -> bool:
        return type(other) is PydanticChecked and other.item is self.item

    def __hash__(self) -> int:
        return hash((PydanticChecked, id(self.item)))

    def __repr__(self) -> str:
        return repr(self.item)


def is_field_info(value: Any) -> bool:
    """Whether ``value`` is a ``pydantic.Field(...)`` (pydantic's ``FieldInfo``)."""
    kind = type(value)
    return kind.__name__ == "FieldInfo" and kind.__module__ == "pydantic.fields"


def field_info_default(info: Any) -> tuple[Any, bool]:
    """The default a ``pydantic.Field`` gives, as (value or ``MISSING``, has a factory)."""
    from toolfold.toolkit._classes import MISSING

    default = info.default
    if type(default).__name__ == "PydanticUndefinedType":
        default = MISSING
    return default, info.default_factory is not None


# pydantic.Field options that change how a value is read or written, not what is
# accepted: an alias would change the argument's key (toolfold reads it by its name)
_KEYED = ("alias", "validation_alias", "serialization_alias")
_UNHONOURED = ("exclude_if", "validate_default")
# (``exclude``, ``frozen`` and ``field_title_generator`` concern a model's dump, its
# instances and its titles, never an argument: ignored; ``deprecated`` is said in the
# schema as ``"deprecated": true``)
# pydantic's general metadata (`StringConstraints`, `Field(pattern=..., max_digits=...)`)
# that asks nothing of a JSON argument: its default, or what a JSON value always is
_GENERAL_KEPT = {"strict": True, "allow_inf_nan": False, "union_mode": "smart"}


def pydantic_items(item: Any, checked: bool = False) -> Iterator[Any]:
    """What toolfold reads of one item of pydantic's metadata (see `expand_metadata`).

    A ``pydantic.Field``: its description, title, examples and
    ``json_schema_extra`` dict as a `Field`, its constraints (annotated_types
    markers and pydantic's own) as their items. ``Strict(True)`` and
    ``AllowInfNan(False)`` ask what a JSON argument checked by its schema is
    already, ``FailFast`` nothing of the value: read as nothing. Other
    pydantic metadata (validators, serializers) is given back as it is. An
    option toolfold cannot honour is a `Refused` naming it, unless ``checked``.
    """
    name = type(item).__name__
    if name == "FieldInfo":
        yield from _field_info_items(item, checked)
    elif name == "_PydanticGeneralMetadata":
        options = dict(vars(item))
        pattern = options.pop("pattern", None)
        if pattern is not None:
            yield _pattern_item(pattern)
        left = [
            f"{k}={v!r}"
            for k, v in options.items()
            if v is not None and _GENERAL_KEPT.get(k, ...) != v
        ]
        if left and not checked:
            yield Refused(_not_honoured(left))
    elif name == "Strict" or name == "AllowInfNan":
        value = item.strict if name == "Strict" else item.allow_inf_nan
        if value is not (name == "Strict") and not checked:
            option = "strict" if name == "Strict" else "allow_inf_nan"
            yield Refused(_not_honoured([f"{option}={value!r}"]))
    elif name != "FailFast":
        yield item


def _pattern_item(pattern: Any) -> Any:
    """A pydantic ``pattern`` (a str or a compiled ``re.Pattern``) as a `Field`, or `Refused`.

    A compiled pattern's flags (``re.IGNORECASE``...) are no part of its text,
    which is all a JSON Schema ``pattern`` (and a provider's ECMA-262 regex)
    carries: one with flags is refused rather than checked without them.
    """
    if isinstance(pattern, str):
        return Field(pattern=pattern)
    flags = pattern.flags & ~re.UNICODE  # (a str pattern's default)
    if flags:
        named = re.RegexFlag(flags)
        return Refused(
            f"pydantic's pattern=re.compile({pattern.pattern!r}, {named!s}) is not supported on a"
            " tool's argument: a JSON Schema pattern is the text alone, without the compiled"
            " flags; write them into the text (such as [A-Za-z] for IGNORECASE) and give a str"
        )
    return Field(pattern=pattern.pattern)


def _not_honoured(options: list[str]) -> str:
    """The definition error of pydantic ``options`` toolfold cannot honour."""
    verb = "is" if len(options) == 1 else "are"
    return (
        f"pydantic's {', '.join(options)} {verb} not supported on a tool's argument: toolfold"
        " checks a JSON argument against its schema, which cannot say it (use a pydantic"
        " model, whose fields pydantic reads, or check the value in the function)"
    )


def field_info_repr(info: Any) -> str:
    """How messages name a ``pydantic.Field``: by its constraints, ``pydantic.Field(ge=5, le=1)``."""
    shown = []
    for item in info.metadata:
        text = repr(item)
        start = text.find("(")
        shown.append(text[start + 1 : -1] if start > 0 and text.endswith(")") else text)
    return f"pydantic.Field({', '.join(shown)})"


def _field_info_items(info: Any, checked: bool) -> Iterator[Any]:
    """The items of one ``pydantic.Field`` (see `pydantic_items`)."""
    refused: list[str] = []
    for (
        option
    ) in _KEYED:  # (a pydantic dataclass too: pydantic reads the alias, the schema the name)
        value = getattr(info, option, None)
        if value is not None:
            yield Refused(
                f"pydantic.Field({option}={value!r}) is not supported here: the argument"
                " is read by the parameter's (or field's) own name; rename it instead"
            )
            break
    if not checked:
        default, factory = field_info_default(info)
        if default is not _missing() or factory:
            given = "default_factory" if factory else f"default={default!r}"
            yield Refused(
                f"pydantic.Field({given}) inside Annotated is not supported: give the"
                " default as the parameter's (or field's) own (`= value`)"
            )
        refused = [
            f"{o}={getattr(info, o)!r}" for o in _UNHONOURED if getattr(info, o, None) is not None
        ]
    extra: dict[str, Any] = {}
    if info.title is not None:
        extra["title"] = info.title
    if info.deprecated not in (None, False):  # (True, a message, even "", or a
        # warnings.deprecated: pydantic says true)
        extra["deprecated"] = True
    schema_extra = info.json_schema_extra
    if isinstance(schema_extra, dict):
        extra.update(schema_extra)
    elif schema_extra is not None and not checked:
        refused.append("json_schema_extra=<a function>")
    if refused:
        yield Refused(_not_honoured(refused))
    if info.description is not None or info.examples is not None or extra:
        yield Field(info.description, examples=info.examples, extra=extra or None)
    yield from expand_metadata(info.metadata, checked)


def field_info_default_problem(info: Any) -> str:
    """Why a ``pydantic.Field(...)`` given as a parameter's (or a plain class field's)
    default is refused, and what to write: Python would hand the function (the class)
    the ``FieldInfo`` itself for an argument left out."""
    default, factory = field_info_default(info)
    if factory:
        given, fix = "default_factory=...", "None (and make the value inside the function)"
    elif default is _missing():
        given, fix = "...", "no default"
    else:
        given, fix = f"default={default!r}", repr(default)
    return (
        f"the default pydantic.Field({given}) works in a pydantic model or dataclass only:"
        " Python would pass the FieldInfo itself for an argument left out; put the"
        f" pydantic.Field in Annotated[<type>, pydantic.Field(...)] and give {fix} as the"
        " default"
    )


def _missing() -> Any:
    from toolfold.toolkit._classes import MISSING

    return MISSING


def doc_text(item: Any) -> str | None:
    """The text of a PEP 727 ``Doc("...")`` (typing_extensions', which annotated_types
    re-exports, or a later ``typing.Doc``), else None."""
    kind = type(item)
    if kind.__name__ in ("Doc", "DocInfo") and kind.__module__ in _DOC_MODULES:
        text = getattr(item, "documentation", None)
        return text if isinstance(text, str) else None
    return None


_DOC_MODULES = frozenset({"typing", "typing_extensions", "annotated_types"})


def metadata_kind(item: Any) -> str:
    """What toolfold makes of one item of ``Annotated`` metadata:

    - ``"description"``: a str, or a PEP 727 ``Doc``;
    - ``"field"``: a `Field`;
    - ``"keyword"``: an annotated_types bound with a JSON Schema keyword (``Ge``...);
    - ``"check"``: an annotated_types ``Predicate``, ``Not`` or ``Timezone``, which
      JSON Schema cannot say: structuring checks it in Python;
    - ``"unsupported"``: an annotated_types marker toolfold does not know (a later
      version's), neither in the schema nor checked: a definition error, never ignored;
    - ``"refused"``: a `Refused` (a pydantic option toolfold cannot honour): a
      definition error saying its ``problem``;
    - ``"alias"``: an annotated_types type alias (``LowerCase``, ``IsDigits``) written
      as metadata, ``Annotated[str, LowerCase]``: a definition error, as it says
      nothing there;
    - ``"other"``: anything else (metadata for other libraries, annotated_types'
      informational ``Unit``), ignored.
    """
    if isinstance(item, str) or doc_text(item) is not None:
        return "description"
    if isinstance(item, Field):
        return "field"
    if type(item) is Refused:
        return "refused"
    if _is_annotated_types_alias(item):
        return "alias"
    kind = type(item)
    if kind.__module__ != "annotated_types":
        return "other"
    if kind.__name__ in _AT_KEYWORDS:
        return "keyword"
    if kind.__name__ in _AT_INFORMATIONAL:
        return "other"
    return "check" if kind.__name__ in _AT_CHECKS else "unsupported"


def _is_annotated_types_alias(item: Any) -> bool:
    import typing

    return typing.get_origin(item) is typing.Annotated and any(
        type(m).__module__ == "annotated_types" for m in item.__metadata__
    )


def alias_problem(item: Any, inner: Any) -> str:
    """The definition error for an annotated_types alias written as metadata."""
    import sys

    module = sys.modules.get("annotated_types")
    names = vars(module) if module is not None else {}
    alias = next((f"annotated_types.{n}" for n, v in names.items() if v is item), repr(item))
    inner_name = getattr(inner, "__name__", None) or repr(inner)
    # (a generic alias, as annotated_types' own are, takes the type; another is the type)
    fix = f"{alias}[{inner_name}]" if getattr(item, "__parameters__", ()) else alias
    return (
        f"{alias} is a type, not metadata: Annotated[{inner_name}, {alias}] checks nothing;"
        f" write {fix} as the type"
    )


def timezone_problem(item: Any, inner: Any) -> str | None:
    """What is wrong with an ``annotated_types.Timezone`` on ``inner``, if anything:
    it applies to a ``datetime`` or ``time``, names a zone (None, ``...``, a name or a
    tzinfo), and a zone it names must exist."""
    import datetime as dt

    if not (isinstance(inner, type) and issubclass(inner, (dt.datetime, dt.time))):
        return f"{item!r} applies to a datetime or time, not {getattr(inner, '__name__', inner)}"
    zone = item.tz
    if not (zone is None or zone is ... or isinstance(zone, (str, dt.tzinfo))):
        return (
            f"{item!r} names no time zone: use None (no UTC offset), ... (any offset),"
            " an IANA name such as 'Europe/Oslo' or a tzinfo such as datetime.timezone.utc"
        )
    if isinstance(zone, str):
        import zoneinfo

        try:
            zone = zoneinfo.ZoneInfo(zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return f"{item!r} names no time zone known here (an IANA name such as Europe/Oslo)"
    if isinstance(zone, dt.tzinfo) and issubclass(inner, dt.time) and zone.utcoffset(None) is None:
        return f"{item!r} has no one UTC offset for a time of day (no date): use a datetime"
    return None


def has_checks(metadata: Iterable[Any]) -> bool:
    """Whether ``Annotated`` metadata holds a Predicate or Not for structuring to check."""
    return any(metadata_kind(m) == "check" for m in expand_metadata(metadata))


def _schema_types(schema: Mapping[str, Any]) -> frozenset[str]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset((kind,))
    if isinstance(kind, list):
        return frozenset(kind)
    return frozenset()


def apply_field(
    schema: dict[str, Any], field: Field, problems: list[str], type_name: str = "this type"
) -> dict[str, Any]:
    """Put a Field's constraints on ``schema`` (in place) and return it.

    Constraints go on the schema itself or, for a union, on each branch they fit
    (``Optional[int]`` with ``ge=0`` constrains the integer branch). A constraint
    that fits nowhere, and a Field whose values are no valid JSON Schema (see
    `_json_values`), are problems, appended to ``problems``.
    """
    values, examples, extra, found = _json_values(field)
    if found:
        problems.extend(found)
        return schema
    for key, value in values.items():
        keyword, kinds = CONSTRAINTS[key]
        if _place(schema, key, keyword, kinds, value, True):
            continue
        branches = schema.get("anyOf", ())
        # the branches of the constraint's kind; failing that, min/max_length on array ones
        placed = [b for b in branches if _place(b, key, keyword, kinds, value, False)] or [
            b for b in branches if _place(b, key, keyword, kinds, value, True)
        ]
        if not placed:
            problems.append(
                f"constraint {key}={getattr(field, key)!r} applies to {_KIND[kinds]} only,"
                f" not to {type_name}{_decimal_hint(schema, keyword)}"
            )
    if examples is not None:
        schema["examples"] = examples
    if extra:
        schema.update(extra)
    if field.description is not None:
        schema["description"] = field.description
    return schema


def _decimal_hint(schema: Mapping[str, Any], keyword: str) -> str:
    """What to do instead of a numeric bound on a `Decimal` (sent as text: JSON Schema's
    bounds, which apply to numbers, cannot hold it); empty for another schema."""
    if schema.get("format") != "decimal" or keyword not in _NUMERIC:
        return ""
    return (
        " (a Decimal is sent as text, format decimal, which JSON Schema's number bounds do "
        "not apply to): check the bound in the tool and raise an error the model reads, or "
        "take a float or an int, which the bound applies to"
    )


_NUMERIC = frozenset(keyword for keyword, kinds in CONSTRAINTS.values() if kinds is _NUMBER)


def _place(
    node: dict[str, Any], key: str, keyword: str, kinds: frozenset[str], value: Any, arrays: bool
) -> bool:
    """Put one constraint on ``node`` if it fits its type; whether it did.

    With ``arrays``, min_length / max_length fit an array too, as minItems /
    maxItems (as pydantic and annotated-types spell them).
    """
    types = _schema_types(node)
    if arrays and kinds is _STRING and key != "pattern" and types & _ARRAY:
        node["minItems" if key == "min_length" else "maxItems"] = value
        return True
    if types & kinds:
        node[keyword] = value
        return True
    return False


_Values = tuple[dict[str, Any], "list[Any] | None", dict[str, Any], list[str]]


def _json_values(field: Field) -> _Values:
    """The Field's constraints (by argument name), examples and extra keywords as
    JSON, and everything wrong with them (empty if they are fine).

    They are turned into JSON as defaults are (an Enum gives its value, a date
    its ISO text); then they must be what the JSON Schema meta-schema allows
    (``multiple_of`` above 0, lengths whole and not negative, numbers for
    bounds, a string for ``pattern``...) and a ``pattern`` must compile.
    """
    from toolfold.toolkit._classes import to_json
    from toolfold.toolkit._jsonschema import short_int, too_many_digits

    problems: list[str] = []
    values: dict[str, Any] = {}
    for key in CONSTRAINTS:
        value = getattr(field, key)
        if value is None:
            continue
        if isinstance(value, Decimal):  # a bound is a JSON number (to_json makes a Decimal text)
            # Decimal("1E+5000") is an int json.dumps cannot write; one of more
            # digits than _MANY_DIGITS is not made an int at all (it would take long)
            huge = value.is_finite() and value.adjusted() >= _MANY_DIGITS
            number = None if huge else _decimal_number(value)
            if huge or (isinstance(number, int) and too_many_digits(number)):
                problems.append(f"Field {key}={value!r} is more than JSON text can carry")
            elif number is None:
                problems.append(
                    f"Field {key}={value!r} is no JSON number a schema can hold (a float "
                    "keeps about 17 digits): give the bound as an int or a float"
                )
            else:
                values[key] = number
            continue
        if isinstance(value, int) and not isinstance(value, bool) and too_many_digits(value):
            problems.append(f"Field {key}={short_int(value)} is more than JSON text can carry")
            continue
        try:
            values[key] = to_json(value)
        except ValueError:
            what = "a finite number" if isinstance(value, float) else "a JSON value"
            problems.append(f"Field {key}={value!r} is not {what}")
    examples: list[Any] | None = None
    if field.examples is not None:
        examples = []
        for example in field.examples:
            try:
                examples.append(to_json(example))
            except ValueError:
                problems.append(
                    f"Field example {example!r} is not JSON-representable; use JSON values"
                    " (str, int, float, bool, None, list, dict), enums, dates, UUIDs or decimals"
                )
    extra: dict[str, Any] = {}
    for name, value in (field.extra or {}).items():
        try:
            extra[name] = to_json(value)
        except ValueError:
            problems.append(f"Field extra[{name!r}]={value!r} is not a JSON value")
    if not problems:
        problems = _schema_problems(field, values, examples, extra)
    if isinstance(field.pattern, str):
        _check_pattern(field.pattern, problems)
    return values, examples, extra, problems


_MANY_DIGITS = 100_000
"""A Decimal bound with more digits is refused before it is made an int."""


def _decimal_number(value: Decimal) -> int | float | None:
    """``value`` as the JSON number it is written as (``Decimal("0.5")`` is 0.5), None when
    no int or float is that number (infinite, NaN, more digits than a float keeps)."""
    if not value.is_finite():
        return None
    if value == value.to_integral_value():
        return int(value)
    number = float(value)
    return number if Decimal(repr(number)) == value else None


def _schema_problems(
    field: Field, values: dict[str, Any], examples: list[Any] | None, extra: dict[str, Any]
) -> list[str]:
    """What the meta-schema refuses in the Field's keywords (bounds that admit nothing
    together are `toolfold.toolkit._bounds`'s, which sees every item of the Annotated)."""
    labels = {CONSTRAINTS[key][0]: f"{key}={getattr(field, key)!r}" for key in values}
    fragment = {CONSTRAINTS[key][0]: value for key, value in values.items()}
    if examples is not None:
        fragment["examples"] = examples
        labels["examples"] = "examples"
    problems = _meta_problems(fragment, labels)
    if extra:
        extra_labels = {k: f"extra[{k!r}]={v!r}" for k, v in (field.extra or {}).items()}
        problems += _meta_problems(extra, extra_labels)
        labels.update(extra_labels)
    return problems


_checked: dict[str, list[tuple[str, str]]] = {}


def _meta_problems(fragment: dict[str, Any], labels: dict[str, str]) -> list[str]:
    """What the JSON Schema meta-schema (Draft 2020-12) refuses in ``fragment``, by keyword.

    Results are kept by the fragment's JSON text: programs repeat the same few
    constraints (``ge=0``, ``min_length=1``) in many tools.
    """
    if not fragment:  # (a description alone: jsonschema is not even imported)
        return []
    import json

    key = json.dumps(fragment, sort_keys=True)
    found = _checked.get(key)
    if found is None:
        found = [
            (str(e.absolute_path[0]) if e.absolute_path else "", e.message)
            for e in _meta_validator().iter_errors(fragment)
        ]
        if len(_checked) > 4096:
            _checked.clear()
        _checked[key] = found
    return [
        f"Field {labels.get(keyword, keyword or 'keywords')} is not a valid {keyword or 'schema'}:"
        f" {message}"
        for keyword, message in found
    ]


@functools.cache
def _meta_validator() -> Any:
    """A validator of schemas against the Draft 2020-12 meta-schema (jsonschema's own)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    meta = validator_for(Draft202012Validator.META_SCHEMA, default=Draft202012Validator)
    return meta(Draft202012Validator.META_SCHEMA)


def _check_pattern(pattern: str, problems: list[str]) -> None:
    import re

    try:
        re.compile(pattern)
    except re.error as exc:
        problems.append(f"pattern {pattern!r} is not a valid regular expression ({exc})")


class Negation:
    """``annotated_types.Not(func)`` as a check that can be hashed.

    annotated_types makes ``Not`` a plain (unfrozen) dataclass, so it has no hash,
    and neither has the ``Predicate(Not(math.isnan))`` of ``at.IsNotNan[float]``
    nor any type holding it; converters find hooks by type (cattrs caches them in
    a dict), so `hashable_type` puts this equal-meaning check in its place.

    Attributes:
        func: The predicate negated (itself a `Negation` for ``Not(Not(f))``).
    """

    __slots__ = ("func",)

    def __init__(self, func: Any) -> None:
        self.func = func

    def __call__(self, value: Any) -> bool:
        return not self.func(value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Negation) and self.func == other.func

    def __hash__(self) -> int:
        return hash((Negation, self.func))

    def __repr__(self) -> str:
        return f"Not({self.func!r})"


def _is_not(item: Any) -> bool:
    kind = type(item)
    return kind.__name__ == "Not" and kind.__module__ == "annotated_types"


def _negated(func: Any) -> Any:
    """``func`` with each annotated_types ``Not`` in it a `Negation`."""
    return Negation(_negated(func.func)) if _is_not(func) else func


def hashable_item(item: Any) -> Any:
    """One item of ``Annotated`` metadata with annotated_types' ``Not`` made a
    `Negation`: ``Predicate(Not(f))`` -> ``Predicate(Negation(f))``; a bare
    ``Not(f)`` (a check on its own) -> ``Predicate(Negation(f))`` too."""
    kind = type(item)
    if kind.__module__ != "annotated_types":
        return item
    if _is_not(item):
        return _predicate(_negated(item))
    if kind.__name__ == "Predicate" and _is_not(item.func):
        return _predicate(_negated(item.func))
    return item


def _predicate(func: Any) -> Any:
    import annotated_types

    return annotated_types.Predicate(func)


def hashable_type(tp: Any) -> Any:
    """``tp`` with annotated_types' ``Not`` in its ``Annotated`` metadata (at any depth:
    ``list[at.IsNotNan[float]]``) made a `Negation`, so that converters can hash it;
    ``tp`` itself when it can be hashed already (or cannot be rebuilt)."""
    return tp if is_hashable(tp) else _rebuilt(tp)


# How many types a process-wide cache keyed by type keeps before it is emptied:
# classes made at run time (a `make_dataclass` or `pydantic.create_model` per
# request) must not pile up forever, with all they refer to. Read at each use.
TYPES_KEPT = 4096


def is_hashable(value: Any) -> bool:
    """Whether ``value`` (a type, a metadata item) can be hashed, as dict keys and
    caches need (annotated_types' ``Not`` cannot)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _rebuilt(tp: Any) -> Any:
    import types
    import typing

    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        parts = (_rebuilt(args[0]), *(hashable_item(m) for m in tp.__metadata__))
        return typing.Annotated[parts]
    if not args or origin is typing.Literal:
        return tp
    rebuilt = tuple(_rebuilt(a) if not isinstance(a, list) else [*map(_rebuilt, a)] for a in args)
    if origin is typing.Union or isinstance(tp, types.UnionType):
        return typing.Union[rebuilt]  # noqa: UP007 (made from a tuple of arguments)
    try:
        return origin[rebuilt] if origin is not None else tp
    except TypeError:
        return tp


def is_typeddict(cls: Any) -> bool:
    """A TypedDict class, typing's or typing_extensions' (which is not typing's on 3.12)."""
    return isinstance(cls, type) and issubclass(cls, dict) and hasattr(cls, "__required_keys__")
