"""`Annotated` metadata: PEP 727 Doc, annotated_types bounds, predicates and the rest."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
import operator
import warnings
from typing import Annotated, Any, NamedTuple

import annotated_types as at
import attrs
import pytest
from cattrs.errors import ClassValidationError, IterableValidationError
from typing_extensions import Doc, TypedDict

from toolfold import ArgumentValidationError, Field, ToolDefinitionError, tool
from toolfold import schema_for_type as schema
from toolfold.toolkit._converter import CheckFailedError, get_converter


def is_even(value: int) -> bool:
    """Whether a number is even."""
    return value % 2 == 0


Even = Annotated[int, at.Predicate(is_even)]


# Module-level classes: under `from __future__ import annotations` their annotations
# are strings that the converter resolves itself (a tool's local classes are resolved
# in place when it is made).
@dataclasses.dataclass
class EvenCount:
    """An even count."""

    count: Annotated[int, at.Predicate(is_even)]
    evens: list[Even] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenEven:
    """A frozen even count."""

    count: Even


@tool
def tally(counted: EvenCount, frozen: FrozenEven) -> int:
    """Tally.

    Args:
        counted: Counts.
        frozen: A count.
    """
    return counted.count + frozen.count


def test_doc_describes_a_parameter_the_docstring_leaves_out() -> None:
    """`Annotated[str, Doc("...")]` gives the description, and meets the requirement."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @tool(require_parameter_descriptions=True)
        def greet(name: Annotated[str, Doc("Who to greet.")]) -> str:
            """Greet someone."""
            return name

    assert greet.parameters["properties"]["name"] == {
        "type": "string",
        "description": "Who to greet.",
    }


def test_doc_wins_over_the_docstring_as_field_and_str_do() -> None:
    """A Doc is the annotation's own description: it wins over the docstring's entry."""

    @tool
    def greet(name: Annotated[str, Doc("From Doc.")], times: Annotated[int, "From str."]) -> str:
        """Greet someone.

        Args:
            name: From the docstring.
            times: From the docstring too.
        """
        return name * times

    properties = greet.parameters["properties"]
    assert properties["name"]["description"] == "From Doc."
    assert properties["times"]["description"] == "From str."


def test_doc_describes_a_dataclass_field() -> None:
    """Doc on a nested class's field describes the property, over the class docstring."""

    @dataclasses.dataclass
    class Person:
        """A person.

        Attributes:
            name: From the docstring.
        """

        name: Annotated[str, Doc("Full name.")]

    assert schema(Person)["properties"]["name"] == {"type": "string", "description": "Full name."}


def test_annotated_types_bounds_and_groups_become_keywords() -> None:
    """Ge, Le, MultipleOf, MinLen, MaxLen and the grouped Interval and Len are keywords."""
    assert schema(Annotated[int, at.Ge(1), at.Le(10), at.MultipleOf(2)]) == {
        "type": "integer",
        "minimum": 1,
        "maximum": 10,
        "multipleOf": 2,
    }
    assert schema(Annotated[float, at.Interval(gt=0, lt=1)]) == {
        "type": "number",
        "exclusiveMinimum": 0,
        "exclusiveMaximum": 1,
    }
    assert schema(Annotated[str, at.Len(2, 5)]) == {
        "type": "string",
        "minLength": 2,
        "maxLength": 5,
    }
    assert schema(Annotated[list[int], at.MinLen(1)]) == {
        "type": "array",
        "items": {"type": "integer"},
        "minItems": 1,
    }


def test_a_grouped_metadata_of_ones_own_is_unpacked() -> None:
    """Any annotated_types GroupedMetadata is unpacked into its parts, as the library asks."""

    @dataclasses.dataclass
    class Percent(at.GroupedMetadata):
        def __iter__(self) -> Any:
            yield at.Ge(0)
            yield at.Le(100)
            yield Doc("A percentage.")

    assert schema(Annotated[int, Percent()]) == {
        "type": "integer",
        "minimum": 0,
        "maximum": 100,
        "description": "A percentage.",
    }


@tool
def pick(
    count: Annotated[int, at.Predicate(is_even)],
    word: at.LowerCase[str],
    odd: Annotated[int, at.Predicate(lambda n: n % 2 == 1)] = 1,
    evens: list[Annotated[int, at.Predicate(is_even), at.Ge(0)]] | None = None,
) -> str:
    """Pick.

    Args:
        count: An even count.
        word: A lower-case word.
        odd: An odd number.
        evens: Even numbers.
    """
    return word * count


def test_a_predicate_is_not_in_the_schema() -> None:
    """JSON Schema cannot say a Python predicate: the schema is the type's, with no extra."""
    assert pick.parameters["properties"]["count"] == {
        "type": "integer",
        "description": "An even count.",
    }


def test_a_predicate_is_checked_when_called_naming_the_parameter() -> None:
    """A value that breaks a Predicate is an argument error at its path, naming the
    predicate (a lambda has no name to give); every broken predicate is listed."""
    with pytest.raises(ArgumentValidationError) as info:
        pick.validate_arguments({"count": 3, "word": "ABC", "odd": 2, "evens": [2, 5]})
    assert tuple(info.value.errors) == (
        "$.count: 3 does not satisfy the predicate is_even",
        "$.evens[1]: 5 does not satisfy the predicate is_even",
        "$.odd: 2 does not satisfy the predicate (a lambda)",
        "$.word: 'ABC' does not satisfy the predicate str.islower",
    )


class InRange:
    """A callable object: a bound check with its limits."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def __call__(self, value: int) -> bool:
        return self.low <= value <= self.high


def test_a_partial_or_a_callable_object_is_named_in_the_error() -> None:
    """A functools.partial is named by its function only (not the arguments given, which
    may be large or secret), a callable object by its class: neither is called a lambda."""

    @tool
    def bounded(
        small: Annotated[int, at.Predicate(InRange(0, 5))],
        big: Annotated[int, at.Predicate(functools.partial(operator.lt, 10))],
        key: Annotated[str, at.Predicate(functools.partial(operator.eq, "s3cr3t"))],
        near: Annotated[int, at.Predicate(functools.partial(lambda a, b: b < a, 3))],
    ) -> int:
        """Bounded.

        Args:
            small: A small number.
            big: A number over ten.
            key: The key.
            near: A number under three.
        """
        return small + big

    with pytest.raises(ArgumentValidationError) as info:
        bounded.validate_arguments({"small": 50, "big": 5, "key": "k", "near": 9})
    assert tuple(info.value.errors) == (
        "$.big: 5 does not satisfy the predicate lt(...)",
        "$.key: 'k' does not satisfy the predicate eq(...)",
        "$.near: 9 does not satisfy the predicate (a lambda)",
        "$.small: 50 does not satisfy the predicate InRange",
    )
    assert "s3cr3t" not in str(info.value)


def test_values_that_satisfy_their_predicates_pass() -> None:
    """Values that satisfy the predicates reach the function unchanged."""
    arguments = pick.validate_arguments({"count": 2, "word": "ab", "odd": 3, "evens": [0, 4]})
    assert arguments == {"count": 2, "word": "ab", "odd": 3, "evens": [0, 4]}
    assert pick.invoke(arguments) == "abab"


def test_a_predicate_on_a_dataclass_field_is_checked() -> None:
    """A Predicate on a nested class's field is checked too, at the field's path."""

    @dataclasses.dataclass
    class Pair:
        left: Annotated[int, at.Predicate(is_even)]

    @tool
    def take(pair: Pair) -> int:
        """Take.

        Args:
            pair: The pair.
        """
        return pair.left

    with pytest.raises(ArgumentValidationError) as info:
        take.validate_arguments({"pair": {"left": 1}})
    assert tuple(info.value.errors) == ("$.pair.left: 1 does not satisfy the predicate is_even",)
    assert take.validate_arguments({"pair": {"left": 2}}) == {"pair": Pair(2)}


def test_a_predicate_on_a_module_level_dataclass_field_is_checked() -> None:
    """Under ``from __future__ import annotations`` a module-level dataclass's Predicates
    (on a field, inside its list, through an alias) are checked as a local class's are."""
    with pytest.raises(ArgumentValidationError) as info:
        tally.validate_arguments({"counted": {"count": 1, "evens": [2, 3]}, "frozen": {"count": 5}})
    assert tuple(info.value.errors) == (
        "$.counted.count: 1 does not satisfy the predicate is_even",
        "$.counted.evens[1]: 3 does not satisfy the predicate is_even",
        "$.frozen.count: 5 does not satisfy the predicate is_even",
    )
    arguments = tally.validate_arguments({"counted": {"count": 2}, "frozen": {"count": 4}})
    assert arguments == {"counted": EvenCount(2), "frozen": FrozenEven(4)}


@dataclasses.dataclass
class Reading:
    """A reading."""

    value: at.IsNotNan[float]
    values: list[at.IsNotInfinite[float]] = dataclasses.field(default_factory=list)


@attrs.define
class Sample:
    value: at.IsNotFinite[float]


class Halves(NamedTuple):
    left: at.IsNotNan[float]


class Code(TypedDict):
    code: Annotated[str, at.Not(str.isdigit)]


def test_annotated_types_not_is_checked_where_it_appears() -> None:
    """at.IsNotNan/IsNotInfinite/IsNotFinite (Predicate(Not(f))) and a bare Not(f) are
    checked on the structured value, in a parameter, a list's items and the fields of
    dataclasses, attrs classes, NamedTuples and TypedDicts, named `not f`."""
    conv = get_converter()
    assert math.isnan(conv.structure(math.nan, at.IsNotInfinite[float]))
    refusals = [
        (math.nan, at.IsNotNan[float], "nan does not satisfy the predicate not isnan"),
        (1.0, at.IsNotFinite[float], "1.0 does not satisfy the predicate not isfinite"),
        ([1.0, math.inf], list[at.IsNotInfinite[float]], "not isinf"),
        ({"value": math.nan}, Reading, "nan does not satisfy the predicate not isnan"),
        ({"value": 1.0, "values": [math.inf]}, Reading, "not isinf"),
        ({"value": 2.0}, Sample, "2.0 does not satisfy the predicate not isfinite"),
        ({"left": math.nan}, Halves, "not isnan"),
        ({"code": "12"}, Code, "'12' does not satisfy the predicate not str.isdigit"),
    ]
    for value, tp, message in refusals:
        with pytest.raises(
            (CheckFailedError, ClassValidationError, IterableValidationError)
        ) as info:
            conv.structure(value, tp)
        assert message in repr(info.value), tp
    assert conv.structure({"value": 1.0, "values": [2.0]}, Reading) == Reading(1.0, [2.0])
    assert conv.structure({"code": "a1"}, Code) == {"code": "a1"}


def test_a_not_predicate_refusal_is_an_argument_error_the_model_reads() -> None:
    """A tool taking Annotated[str, Predicate(Not(str.isdigit))] is made, its schema has no
    trace of the check, and a call breaking it is an argument error at its path."""

    @tool
    def name(
        text: Annotated[str, at.Predicate(at.Not(str.isdigit))],
        code: Code,
        ratio: at.IsNotNan[float],
    ) -> str:
        """Name.

        Args:
            text: Not only digits.
            code: A code.
            ratio: A ratio.
        """
        return text

    assert name.parameters["properties"]["text"] == {
        "type": "string",
        "description": "Not only digits.",
    }
    with pytest.raises(ArgumentValidationError) as info:
        name.validate_arguments({"text": "123", "code": {"code": "4"}, "ratio": 0.5})
    assert tuple(info.value.errors) == (
        "$.code.code: '4' does not satisfy the predicate not str.isdigit",
        "$.text: '123' does not satisfy the predicate not str.isdigit",
    )
    assert name.validate_arguments({"text": "a", "code": {"code": "b"}, "ratio": 0.5}) == {
        "text": "a",
        "code": {"code": "b"},
        "ratio": 0.5,
    }


class Unhashable:
    """A predicate object with __eq__ and so no hash."""

    def __call__(self, value: object) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Unhashable)

    __hash__ = None  # type: ignore[assignment]


def test_an_unhashable_predicate_function_is_refused_naming_the_parameter() -> None:
    """A Predicate whose function has no hash cannot be dispatched on: a definition
    error naming the parameter and saying what to write instead."""
    with pytest.raises(ToolDefinitionError) as info:

        @tool
        def name(text: Annotated[str, at.Predicate(Unhashable())]) -> str:
            """Name.

            Args:
                text: Anything.
            """
            return text

    (problem,) = info.value.problems
    assert problem.startswith("parameter 'text': Predicate(")
    assert "use a function, a lambda or a functools.partial of hashable arguments" in problem


@tool
def meet(
    local: Annotated[dt.datetime, at.Timezone(None)],
    aware: Annotated[dt.datetime, at.Timezone(...)],
    oslo: Annotated[dt.datetime, at.Timezone("Europe/Oslo")],
    utc: Annotated[dt.time, at.Timezone(dt.timezone.utc)],
) -> str:
    """Meet.

    Args:
        local: A local time.
        aware: Any zone.
        oslo: Oslo's time.
        utc: A time of day in UTC.
    """
    return local.isoformat()


def test_timezone_is_checked_when_called() -> None:
    """annotated_types' Timezone is checked on the structured datetime or time: None asks
    for no UTC offset, ``...`` for one, a zone for that zone's offset at that instant."""
    with pytest.raises(ArgumentValidationError) as info:
        meet.validate_arguments(
            {
                "local": "2024-01-01T09:00:00Z",
                "aware": "2024-01-01T09:00:00",
                "oslo": "2024-01-01T09:00:00+02:00",
                "utc": "09:00:00+01:00",
            }
        )
    assert tuple(info.value.errors) == (
        "$.aware: 2024-01-01T09:00:00 must have a UTC offset, such as Z or +02:00",
        "$.local: 2024-01-01T09:00:00+00:00 must have no UTC offset (a local time)",
        "$.oslo: 2024-01-01T09:00:00+02:00 must be in the time zone Europe/Oslo"
        " (UTC offset +01:00)",
        "$.utc: 09:00:00+01:00 must be in the time zone UTC (UTC offset +00:00)",
    )
    summer = meet.validate_arguments(
        {
            "local": "2024-07-01T09:00:00",
            "aware": "2024-07-01T09:00:00-05:00",
            "oslo": "2024-07-01T09:00:00+02:00",
            "utc": "09:00:00Z",
        }
    )
    assert summer["oslo"].utcoffset() == dt.timedelta(hours=2)


def test_a_timezone_that_cannot_be_checked_is_refused() -> None:
    """A Timezone on a type that is no datetime or time, or naming a zone not known,
    is a definition error naming the parameter."""
    with pytest.raises(ToolDefinitionError) as info:

        @tool
        def when(
            text: Annotated[str, at.Timezone(None)],
            there: Annotated[dt.datetime, at.Timezone("Mars/Olympus_Mons")],
            hour: Annotated[dt.datetime, at.Timezone(3600)],
        ) -> str:
            """When.

            Args:
                text: A time.
                there: Somewhere.
                hour: An offset in seconds, which is no zone.
            """
            return text

    assert info.value.problems == (
        "parameter 'text': Timezone(tz=None) applies to a datetime or time, not str",
        "parameter 'there': Timezone(tz='Mars/Olympus_Mons') names no time zone known here"
        " (an IANA name such as Europe/Oslo)",
        "parameter 'hour': Timezone(tz=3600) names no time zone: use None (no UTC offset),"
        " ... (any offset), an IANA name such as 'Europe/Oslo' or a tzinfo such as"
        " datetime.timezone.utc",
    )


def test_a_timezone_is_checked_at_the_ends_of_the_datetime_range() -> None:
    """Near year 9999 or 1, where the instant in the zone falls outside datetime's range,
    the offset is still compared (no 'number too large'); an offset with seconds is
    written with them."""
    west = dt.timezone(dt.timedelta(hours=-3, minutes=-30))
    east = dt.timezone(dt.timedelta(hours=5, seconds=30))

    @tool
    def at_end(
        late: Annotated[dt.datetime, at.Timezone(west)],
        early: Annotated[dt.datetime, at.Timezone(east)] | None = None,
    ) -> str:
        """At the end.

        Args:
            late: A late time.
            early: An early time.
        """
        return late.isoformat()

    made = at_end.validate_arguments({"late": "9999-12-31T23:00:00-03:30"})
    assert made["late"].utcoffset() == west.utcoffset(None)
    with pytest.raises(ArgumentValidationError) as info:
        at_end.validate_arguments(
            {"late": "9999-12-31T23:00:00-03:00", "early": "0001-01-01T01:00:00+05:00"}
        )
    assert tuple(info.value.errors) == (
        "$.early: 0001-01-01T01:00:00+05:00 must be in the time zone UTC+05:00:30"
        " (UTC offset +05:00:30)",
        "$.late: 9999-12-31T23:00:00-03:00 must be in the time zone UTC-03:30 (UTC offset -03:30)",
    )


def test_an_annotated_types_alias_written_as_metadata_is_refused() -> None:
    """`Annotated[str, at.LowerCase]` checks nothing (LowerCase is a type alias, not a
    marker): a definition error that says to write `at.LowerCase[str]`."""
    with pytest.raises(ToolDefinitionError) as info:

        @tool
        def shout(word: Annotated[str, at.LowerCase]) -> str:
            """Shout.

            Args:
                word: A word.
            """
            return word

    assert info.value.problems == (
        "parameter 'word': annotated_types.LowerCase is a type, not metadata:"
        " Annotated[str, annotated_types.LowerCase] checks nothing;"
        " write annotated_types.LowerCase[str] as the type",
    )


Positive = Annotated[int, at.Gt(0)]


def test_a_user_alias_written_as_metadata_is_refused_with_advice_that_works() -> None:
    """A user's own alias (no type variable) written as metadata: the advice is to use
    the alias as the type, not to subscript it (`Positive[int]` is no valid type)."""
    with pytest.raises(ToolDefinitionError) as info:

        @tool
        def count(n: Annotated[int, Positive]) -> int:
            """Count.

            Args:
                n: How many.
            """
            return n

    (problem,) = info.value.problems
    assert problem.endswith(" checks nothing; write typing.Annotated[int, Gt(gt=0)] as the type")


def test_unit_is_ignored() -> None:
    """annotated_types' Unit is informational (annotated_types asks nothing of the value):
    the schema and the arguments are those of the plain type."""

    @tool
    def walk(distance: Annotated[float, at.Unit("m"), at.Ge(0)]) -> float:
        """Walk.

        Args:
            distance: How far.
        """
        return distance

    assert walk.parameters["properties"]["distance"] == {
        "type": "number",
        "minimum": 0,
        "description": "How far.",
    }
    assert walk.validate_arguments({"distance": 2}) == {"distance": 2.0}


def test_metadata_of_other_libraries_is_ignored() -> None:
    """An object toolfold does not know (another library's marker) changes nothing."""

    class Marker:
        pass

    assert schema(Annotated[int, Marker(), Field(ge=0)]) == {"type": "integer", "minimum": 0}


def _python_unions_a_not() -> bool:
    try:
        at.IsNotNan[float] | None
    except TypeError:  # Python 3.10 and 3.11 hash a Union's members; Not has no hash
        return False
    return True


def is_not_nan(x: float) -> bool:
    """Whether ``x`` is a number (not NaN)."""
    return not math.isnan(x)


@dataclasses.dataclass
class MaybeReading:
    value: at.IsNotNan[float] | None = None


def test_an_optional_not_constraint_python_refuses_says_what_to_write() -> None:
    """Optional[at.IsNotNan[float]], which Python's typing refuses before 3.13 (unhashable
    Not), is refused naming that and the Optional[Annotated[float, Predicate(f)]] form
    that works; where Python accepts it, it is checked."""

    def read(x: at.IsNotNan[float] | None = None) -> str:
        """Read.

        Args:
            x: The value.
        """
        return repr(x)

    if _python_unions_a_not():
        made = tool(read)
        assert made.invoke(made.validate_arguments({"x": 1.5})) == "1.5"
        assert schema(MaybeReading)["properties"]["value"]["anyOf"][1] == {"type": "null"}
        return
    with pytest.raises(ToolDefinitionError) as info:
        tool(read)
    (problem,) = info.value.problems
    assert "typing cannot put annotated_types' Not" in problem
    assert "Optional[Annotated[float, at.Predicate(is_not_nan)]]" in problem
    assert "import the names" not in problem
    with pytest.raises(ToolDefinitionError) as info:
        schema(MaybeReading)
    (problem,) = info.value.problems
    assert "cannot resolve the annotations of MaybeReading: Python 3." in problem
    assert "import the names" not in problem


def test_the_advised_optional_predicate_is_checked_on_every_python() -> None:
    """Optional[Annotated[float, at.Predicate(is_not_nan)]], the form the message advises,
    takes a number or null and refuses NaN on every supported Python."""

    def read(x: Annotated[float, at.Predicate(is_not_nan)] | None = None) -> str:
        """Read.

        Args:
            x: The value.
        """
        return repr(x)

    made = tool(read)
    assert made.invoke(made.validate_arguments({"x": 1.5})) == "1.5"
    assert made.invoke(made.validate_arguments({"x": None})) == "None"
    with pytest.raises(ArgumentValidationError, match="does not satisfy the predicate is_not_nan"):
        made.validate_arguments({"x": math.nan})


def test_the_converter_rewrites_only_a_type_it_cannot_hash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """structure() and get_structure_hook() skip the hashable rewrite (and its cost) for
    a type cattrs can look up, and still rewrite list[at.IsNotNan[float]]."""
    from toolfold.toolkit import _converter

    seen: list[Any] = []
    real = _converter.hashable_type

    def counted(tp: Any) -> Any:
        seen.append(tp)
        return real(tp)

    monkeypatch.setattr(_converter, "hashable_type", counted)
    converter = get_converter()
    assert converter.structure({"a": [1]}, dict[str, list[Annotated[int, at.Gt(0)]]]) == {"a": [1]}
    assert converter.get_structure_hook(int)(3, int) == 3
    assert seen == []
    assert converter.structure([1.5], list[at.IsNotNan[float]]) == [1.5]
    with pytest.raises(IterableValidationError):
        converter.get_structure_hook(list[at.IsNotNan[float]])([math.nan], list)
    assert len(seen) == 2
