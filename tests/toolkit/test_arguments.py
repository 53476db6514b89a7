"""ArgumentChecker: decoding, schema validation with paths, structuring into declared types."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import sys
import typing
import uuid
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Generic, Literal, NamedTuple, NewType, TypedDict, TypeVar

import attrs
import pytest
from typing_extensions import NotRequired, ReadOnly
from typing_extensions import TypedDict as TypedDictX

from toolfold import (
    ArgumentJSONError,
    ArgumentValidationError,
    Field,
    Tool,
    ToolArgumentError,
    ToolDefinitionError,
    register_type_hooks,
    tool,
)
from toolfold.toolkit._arguments import ArgumentChecker
from toolfold.toolkit._converter import get_converter
from toolfold.toolkit._problems import format_path
from toolfold.toolkit._schema import schema_for_type


class Category(enum.Enum):
    A = "A"
    B = "B"
    C = "C"


@dataclasses.dataclass
class Filters:
    category: Category
    since: dt.date | None = None
    tags: frozenset[str] = frozenset()


@attrs.frozen
class Item:
    name: str
    qty: int = 1


class Point(NamedTuple):
    x: float
    y: float = 0.0


class Options(TypedDict):
    verbose: bool


class Query(TypedDictX):
    text: str
    page: NotRequired[int]


UserId = NewType("UserId", int)
T = TypeVar("T")


@dataclasses.dataclass
class Tree:
    value: int
    children: list[Tree] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Cat:
    meows: int


@dataclasses.dataclass
class Dog:
    barks: int


def checker(required: Sequence[str] | None = None, **params: Any) -> ArgumentChecker:
    """A checker for a decorated tool with these parameters (all required by default)."""
    properties: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    for name, tp in params.items():
        schema = schema_for_type(tp)
        defs.update(schema.pop("$defs", {}))
        properties[name] = schema
    schema_out: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": list(params if required is None else required),
        "additionalProperties": False,
    }
    if defs:
        schema_out["$defs"] = defs
    return ArgumentChecker("search", schema_out, params, pass_dict=False)


def problems(check: ArgumentChecker, raw: Any) -> tuple[str, ...]:
    """The error lines a checker reports for ``raw``."""
    with pytest.raises(ArgumentValidationError) as info:
        check.check(raw)
    return info.value.errors


SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "filters": {
            "type": "object",
            "properties": {"category": {"enum": ["A", "B", "C"]}},
            "additionalProperties": False,
        },
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
        "limit": {"type": "integer", "minimum": 1},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def explicit(schema: Mapping[str, Any] = SEARCH_SCHEMA) -> ArgumentChecker:
    """A checker for an explicit-schema tool."""
    return ArgumentChecker("search", schema, None, pass_dict=True)


# -- decoding --------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["", "   ", "\n"])
def test_empty_text_means_no_arguments(raw: str) -> None:
    """An empty or blank argument string is the empty object."""
    assert ArgumentChecker("t", {"type": "object"}, None, True).check(raw) == {}


def test_malformed_json_names_line_column_and_shows_where() -> None:
    """Malformed JSON is an ArgumentJSONError with the position and an excerpt marking it."""
    with pytest.raises(ArgumentJSONError) as info:
        explicit().check('{"query": "x" "limit": 3}')
    err = info.value
    assert err.position == 14
    assert err.tool_name == "search"
    assert err.errors == (
        'Expecting \',\' delimiter at line 1, column 15 (char 14): {"query": "x" >>>"limit": 3}',
    )
    assert isinstance(err.__cause__, ValueError)


def test_malformed_json_excerpt_is_one_line_and_trimmed() -> None:
    """A long multi-line text is cut around the error, with line breaks escaped."""
    text = '{\n  "query": "' + "x" * 50 + '",\n  "limit" 3\n}'
    with pytest.raises(ArgumentJSONError) as info:
        explicit().check(text)
    (line,) = info.value.errors
    assert line.startswith("Expecting ':' delimiter at line 3, column 11 (char 77): ...")
    assert "\n" not in line
    assert line.endswith(": ..." + "x" * 17 + '",\\n  "limit" >>>3\\n}')


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_json_constants_are_rejected(constant: str) -> None:
    """NaN and the infinities, which Python's json accepts, are not JSON."""
    with pytest.raises(ArgumentJSONError) as info:
        explicit().check('{"query": "x", "limit": ' + constant + "}")
    assert info.value.errors[0].startswith(f"{constant} is not a finite JSON number at char 24")


def test_a_non_json_number_is_placed_where_it_is_a_value_not_in_a_string() -> None:
    """The excerpt points at the number itself, not at the same letters inside a string."""
    with pytest.raises(ArgumentJSONError) as info:
        explicit().check('{"query": "NaN", "limit": NaN}')
    assert info.value.errors[0] == (
        'NaN is not a finite JSON number at char 26: {"query": "NaN", "limit": >>>NaN}'
    )


def test_an_unterminated_string_is_said_once() -> None:
    """json's "Unterminated string starting at" is followed by its place only once."""
    with pytest.raises(ArgumentJSONError) as info:
        explicit().check('{"query": "x')
    assert info.value.errors[0].startswith(
        "Unterminated string starting at line 1, column 11 (char 10): "
    )


INTEGER_1E400 = (
    "the integer 1e400 must be written in digits"
    " (a number with an exponent is read as a float, at most about 1.8e308)"
)


def test_numbers_python_cannot_hold_are_refused() -> None:
    """1e400 (a float overflow) is too large at its path; a 5000-digit integer is a JSON error."""
    with pytest.raises(ArgumentValidationError) as info:
        explicit().check('{"query": "x", "limit": 1e400}')
    assert list(info.value.errors) == [f"$.limit: {INTEGER_1E400}"]
    with pytest.raises(ArgumentValidationError) as nested:
        explicit().check('{"query": "x", "limit": [1, -2E+999]}')
    assert list(nested.value.errors) == [
        "$.limit: [1, -2E+999] is not of type 'integer'",
        "$.limit[1]: the number -2E+999 is too large for float (at most about 1.8e308)",
    ]
    with pytest.raises(ArgumentJSONError):
        explicit().check('{"query": "x", "limit": ' + "9" * 5000 + "}")
    with pytest.raises(ArgumentJSONError, match="is not a finite JSON number"):  # (NaN too)
        explicit().check('{"query": "x", "limit": 1e400, "n": NaN}')


def test_a_number_too_large_for_float_leaves_the_other_problems_and_the_schema_words() -> None:
    """With 1e400 in the arguments every other problem is still listed, and the schema's
    words stand where it refuses the number itself (a string, a minimum)."""
    with pytest.raises(ArgumentValidationError) as info:
        explicit().check('{"query": 1e400, "limit": -1e400, "filters": {"category": "Z"}}')
    assert list(info.value.errors) == [
        "$.filters.category: 'Z' is not one of ['A', 'B', 'C']",
        "$.limit: -1e400 is less than the minimum of 1",
        "$.query: 1e400 is not of type 'string'",
    ]
    with pytest.raises(ArgumentValidationError) as both:
        explicit().check('{"query": "x", "limit": 1e400, "filters": {"category": "Z"}}')
    assert list(both.value.errors) == [
        "$.filters.category: 'Z' is not one of ['A', 'B', 'C']",
        f"$.limit: {INTEGER_1E400}",
    ]


def test_an_integer_written_with_a_large_exponent_is_asked_for_in_digits() -> None:
    """1e400 for an int (at any depth, optional too) is asked for in digits, which an int
    takes, not called too large for float; a float's or a number's place still is."""

    @tool
    def nums(i: int, f: float, o: int | None = None, ns: list[int] | None = None) -> str:
        """N.

        Args:
            i: An int.
            f: A float.
            o: An optional int.
            ns: Ints.
        """
        return "x"

    problems = problems_of(nums, '{"i": 1e400, "f": 1e400, "o": -2E+999, "ns": [1, 1.5e400]}')
    assert problems == (
        "$.f: the number 1e400 is too large for float (at most about 1.8e308)",
        f"$.i: {INTEGER_1E400}",
        "$.ns[1]: the integer 1.5e400 must be written in digits"
        " (a number with an exponent is read as a float, at most about 1.8e308)",
        "$.o: the integer -2E+999 must be written in digits"
        " (a number with an exponent is read as a float, at most about 1.8e308)",
    )
    assert nums.validate_arguments('{"i": 1' + "0" * 400 + ', "f": 1}')["i"] == 10**400


def test_a_path_parameter_refuses_a_nul_and_takes_an_empty_string() -> None:
    """No system takes a NUL in a path: the format check refuses it. "" is taken, as
    ``Path`` takes it (a tool may default a path to "", attrs' converter pattern)."""

    @tool
    def read(p: Path, q: Path | None = None) -> str:
        """Read.

        Args:
            p: A path.
            q: Another.
        """
        return "x"

    assert problems_of(read, '{"p": "a", "q": "a\\u0000b"}') == (
        "$.q: 'a\\x00b' is not a valid path: a file system path cannot hold a NUL character",
    )
    assert read.validate_arguments({"p": "a/b"}) == {"p": Path("a/b")}
    assert read.validate_arguments({"p": ""}) == {"p": Path("")}
    with pytest.raises(ValueError, match="NUL"):
        get_converter().structure("a\x00", Path)


def test_a_run_reads_every_problem_beside_a_number_too_large_for_float() -> None:
    """The error result a run gives for 1e400 lists the other paths' problems and a str parameter's type."""
    from toolfold import generate_text, tool
    from toolfold.testing import ScriptedModel

    @tool
    def move(x: float, s: str = "", n: int = 0) -> str:
        """Move.

        Args:
            x: Distance.
            s: Label.
            n: Count.
        """
        return "moved"

    call = ScriptedModel.call("move", '{"x": 1e400, "n": "five", "s": 1e400}')
    response = generate_text(ScriptedModel([[call], "done"]), "go", tools=[move])
    (result,) = response.steps[0].tool_results
    assert result.is_error
    assert result.content.splitlines()[1:4] == [
        "- $.n: 'five' is not of type 'integer'",
        "- $.s: 1e400 is not of type 'string'",
        "- $.x: the number 1e400 is too large for float (at most about 1.8e308)",
    ]


def test_multiple_of_is_decimal_exact_in_both_checks() -> None:
    """multipleOf reads floats as decimals (0.3 is a multiple of 0.1), in the fast check and in jsonschema."""
    from toolfold.toolkit._arguments import _compile

    schema = {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.1}}}
    tiny = {"type": "object", "properties": {"n": {"type": "number", "multipleOf": 1e-9}}}
    check, check_tiny = (
        ArgumentChecker("t", schema, None, True),
        ArgumentChecker("t", tiny, None, True),
    )
    for value in (0.3, 0.7, 0.5, 3, 10**400, 1e20):
        assert check.check({"n": value}) == {"n": value}
        assert _compile(schema).is_valid({"n": value})
    for value in (3e-9, 0.000000007, 2):
        assert check_tiny.check({"n": value}) == {"n": value}
        assert _compile(tiny).is_valid({"n": value})
    assert problems(check, '{"n": 0.35}') == ("$.n: 0.35 is not a multiple of 0.1",)
    assert problems(check_tiny, '{"n": 1.5e-9}') == ("$.n: 1.5e-09 is not a multiple of 1e-09",)
    assert not _compile(schema).is_valid({"n": 0.35})


@pytest.mark.parametrize(
    ("raw", "shown"),
    [("[1, 2]", "array [1, 2]"), ('"hi"', 'string "hi"'), ("3", "number 3"), ("null", "null")],
)
def test_json_that_is_not_an_object_names_the_tool(raw: str, shown: str) -> None:
    """Arguments must be a JSON object; anything else is an error naming the tool."""
    assert problems(explicit(), raw) == (
        f"$: tool 'search' takes a JSON object of arguments, got {shown}",
    )


def test_a_mapping_is_accepted_and_not_mutated() -> None:
    """An already decoded mapping (even read-only) is validated like text."""
    raw = MappingProxyType({"query": "x", "limit": 2})
    result = explicit().check(raw)
    assert result == {"query": "x", "limit": 2}
    assert type(result) is dict


def test_mapping_keys_must_be_strings() -> None:
    """A mapping with non-string keys is rejected before validation."""
    assert problems(explicit(), {1: "x"}) == ("$: argument names must be strings, got [1]",)


def test_other_input_types_are_rejected() -> None:
    """Neither text nor a mapping (e.g. bytes) is a clear error, not a crash."""
    bad: Any = b"{}"
    assert problems(explicit(), bad) == (
        "$: expected JSON text or a mapping of arguments, got bytes",
    )


# -- schema validation -----------------------------------------------------------


def test_enum_violation_reads_with_its_json_path() -> None:
    """The problem names the JSON path and what was allowed."""
    assert problems(explicit(), {"query": "x", "filters": {"category": "D"}}) == (
        "$.filters.category: 'D' is not one of ['A', 'B', 'C']",
    )


def test_every_violation_is_reported_at_once_sorted_by_path() -> None:
    """All problems come together, sorted by path (indexes numerically)."""
    raw = {
        "filters": {"category": "D"},
        "items": [{"name": "a"}] * 2 + [{"name": 3}] + [{"name": "b"}] * 7 + [{}],
        "limit": 0,
        "extra": True,
    }
    assert problems(explicit(), raw) == (
        "$: 'query' is a required property",
        "$: unexpected property 'extra'; allowed: 'filters', 'items', 'limit', 'query'",
        "$.filters.category: 'D' is not one of ['A', 'B', 'C']",
        "$.items[2].name: 3 is not of type 'string'",
        "$.items[10]: 'name' is a required property",
        "$.limit: 0 is less than the minimum of 1",
    )


def test_message_for_model_is_short_and_actionable() -> None:
    """The model gets the tool, the problems and what to do, never a traceback."""
    with pytest.raises(ToolArgumentError) as info:
        explicit().check('{"query": 5, "limit": "five"}')
    assert info.value.message_for_model == (
        "Invalid arguments for tool 'search': the arguments do not match the parameters"
        " (2 problems)\n"
        "- $.limit: 'five' is not of type 'integer'\n"
        "- $.query: 5 is not of type 'string'\n"
        "Call the tool again with corrected arguments."
    )
    assert "Traceback" not in str(info.value)


def test_long_values_are_abbreviated_in_messages() -> None:
    """A huge wrong value does not flood the message."""
    (line,) = problems(explicit(), {"query": ["word"] * 1000})
    assert line.startswith("$.query: ['word', 'word',")
    assert line.endswith("is not of type 'string'")
    assert len(line) < 120


def test_odd_keys_are_quoted_in_paths() -> None:
    """Keys that are not identifiers are written in brackets."""
    assert format_path(["a b", 0, "ok", 'q"x', "é"]) == '$["a b"][0].ok["q\\"x"]["é"]'
    assert format_path([]) == "$"


def test_optional_scalar_says_which_types_were_expected() -> None:
    """For int | None sent a string, the message lists the types, not 'any of the schemas'."""
    assert problems(checker(count=int | None), {"count": "five"}) == (
        "$.count: 'five' is not of type 'integer', 'null'",
    )


def test_optional_object_reports_the_inner_problem() -> None:
    """An dataclass | None with a bad field reports that field's path, as if not optional."""
    check = checker(filters=Filters | None)
    assert problems(check, {"filters": {"category": "D", "tags": [1]}}) == (
        "$.filters.category: 'D' is not one of ['A', 'B', 'C']",
        "$.filters.tags[0]: 1 is not of type 'string'",
    )


@dataclasses.dataclass
class TaggedCat:
    kind: Literal["cat"]
    meows: int


@dataclasses.dataclass
class TaggedDog:
    kind: Literal["dog"]
    barks: int


@dataclasses.dataclass
class NamedCat:
    meows: int
    name: str


@dataclasses.dataclass
class NamedDog:
    barks: int
    name: str


def test_a_tagged_union_explains_the_branch_its_tag_names() -> None:
    """The value's tag names the class it meant: that class's problems, not another's."""
    check = checker(pet=TaggedCat | TaggedDog)
    assert problems(check, {"pet": {"kind": "dog", "barks": "x"}}) == (
        "$.pet.barks: 'x' is not of type 'integer'",
    )
    assert problems(check, {"pet": {"kind": "cat", "meows": "x"}}) == (
        "$.pet.meows: 'x' is not of type 'integer'",
    )
    assert problems(check, {"pet": {"kind": "cow"}}) == (
        "$.pet.kind: 'cow' is not one of ['cat', 'dog']",
    )


@dataclasses.dataclass
class StrictConfig:
    mode: Literal["strict"]
    level: int


@dataclasses.dataclass
class NamedThing:
    name: str


@dataclasses.dataclass
class Meowing:
    sound: Literal["meow"]
    kind: Literal["cat"]


@dataclasses.dataclass
class Woofing:
    sound: Literal["woof"]
    kind: Literal["dog"]


def test_a_fixed_field_that_tags_no_other_branch_does_not_discard_its_class() -> None:
    """A one-value field only one class has is no tag: that class still counts (and the
    closest problem names the field); two fixed fields a class are no single tag."""
    (line,) = problems(checker(x=StrictConfig | NamedThing), {"x": {"mode": "lax", "level": 3}})
    assert line.endswith("closest: $.x.mode: 'lax' is not one of ['strict']")
    (line,) = problems(checker(x=Meowing | Woofing), {"x": {"sound": "bark", "kind": "cat"}})
    assert line.endswith("closest: $.x.sound: 'bark' is not one of ['meow']")


def test_an_untagged_union_names_the_closest_branchs_problem() -> None:
    """Without a tag, the branch with the fewest problems is the one explained."""
    (line,) = problems(checker(pet=NamedCat | NamedDog), {"pet": {"barks": "two", "name": "Rex"}})
    assert line.endswith("closest: $.pet.barks: 'two' is not of type 'integer'")


def test_ambiguous_union_reports_closest_alternative() -> None:
    """When several alternatives could have been meant, the closest mismatch is named."""
    (line,) = problems(checker(pet=Cat | Dog), {"pet": {"meows": "x"}})
    assert line.startswith("$.pet: {'meows': 'x'} does not match any of the allowed shapes; ")
    assert "closest:" in line


@pytest.mark.parametrize(
    ("tp", "value", "expected"),
    [
        (
            dt.datetime,
            "yesterday",
            "'yesterday' is not a valid date-time: expected an ISO 8601 date-time such as"
            " 2024-05-01T13:45:00+02:00",
        ),
        (dt.date, "2024-13-01", "'2024-13-01' is not a valid date: month must be in 1..12"),
        (
            dt.time,
            "25:00",
            "'25:00' is not a valid time: hour must be in 0..23",
        ),
        (uuid.UUID, "nope", "'nope' is not a valid uuid: badly formed hexadecimal UUID string"),
        (
            Decimal,
            "1,5",
            "'1,5' is not a valid decimal: expected a decimal number such as 12.50",
        ),
    ],
)
def test_formats_are_checked_with_the_converters_parsers(
    tp: Any, value: str, expected: str
) -> None:
    """date-time, date, time, uuid and decimal formats are validated, with a hint."""
    assert problems(checker(v=tp), {"v": value}) == (f"$.v: {expected}",)


def test_explicit_formats_email_and_ip_are_checked() -> None:
    """Formats available from the standard library are checked for explicit schemas too."""
    schema = {
        "type": "object",
        "properties": {
            "to": {"type": "string", "format": "email"},
            "ip": {"type": "string", "format": "ipv4"},
            "host": {"type": "string", "format": "hostname"},
        },
    }
    assert problems(explicit(schema), {"to": "nobody", "ip": "1.2.3", "host": "!!"}) == (
        "$.ip: '1.2.3' is not a valid ipv4: Expected 4 octets in '1.2.3'",
        "$.to: 'nobody' is not a valid email",
    )


def test_schema_dialect_is_taken_from_dollar_schema() -> None:
    """A draft-07 schema is validated as draft-07 (array-form items checks each position)."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}
        },
    }
    assert problems(explicit(schema), {"pair": ["a", "b"]}) == (
        "$.pair[0]: 'a' is not of type 'integer'",
    )


def test_validator_is_compiled_once_per_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The jsonschema validator is built when the checker is, never per call."""
    from toolfold.toolkit import _arguments

    calls: list[object] = []
    real = _arguments._compile
    monkeypatch.setattr(_arguments, "_compile", lambda s: calls.append(s) or real(s))
    check = explicit()
    for _ in range(3):
        check.check('{"query": "x"}')
    with pytest.raises(ArgumentValidationError):
        check.check("{}")
    assert len(calls) == 1


# -- strict-mode nulls -----------------------------------------------------------


def test_null_for_an_optional_non_nullable_parameter_means_default() -> None:
    """Strict mode makes models send null for defaults; such a null is dropped."""
    check = checker(required=["query"], query=str, limit=int)
    assert check.check('{"query": "x", "limit": null}') == {"query": "x"}


def test_null_for_a_required_parameter_is_still_an_error() -> None:
    """Only optional parameters may be nulled away."""
    check = checker(required=["query"], query=str, limit=int)
    assert problems(check, {"query": None, "limit": None}) == (
        "$.query: None is not of type 'string'",
    )


def test_nested_nulls_for_defaults_are_dropped_through_refs_and_unions() -> None:
    """Null defaults are dropped inside Optional dataclasses and list items too."""
    check = checker(filters=Filters | None, items=list[Item])
    raw = {"filters": {"category": "A", "tags": None}, "items": [{"name": "a", "qty": None}]}
    result = check.check(raw)
    assert result == {"filters": Filters(Category.A), "items": [Item("a")]}
    assert raw["filters"] == {"category": "A", "tags": None}  # the input is not changed


def test_null_where_null_is_allowed_is_kept() -> None:
    """An Optional parameter sent null receives None."""
    check = checker(required=[], since=dt.date | None)
    assert check.check({"since": None}) == {"since": None}


# -- structuring -----------------------------------------------------------------


def test_explicit_schema_tools_get_the_validated_dict() -> None:
    """pass_dict tools receive the decoded dict with string keys, unstructured."""
    assert explicit().check('{"query": "q", "filters": {"category": "A"}}') == {
        "query": "q",
        "filters": {"category": "A"},
    }


def test_values_are_structured_into_declared_types() -> None:
    """Dataclasses, attrs classes, enums, dates, tuples and sets arrive as Python values."""
    check = checker(
        filters=Filters,
        items=list[Item],
        when=dt.datetime,
        at=dt.time,
        pair=tuple[int, str],
        ids=set[uuid.UUID],
        price=Decimal,
        where=Path,
        point=Point,
        options=Options,
        mode=Literal["fast", "slow"],
        seq=Sequence[int],
        mapping=Mapping[str, float],
        ratio=float,
        size=Annotated[int, "how many"],
    )
    u = uuid.UUID(int=7)
    result = check.check(
        {
            "filters": {"category": "B", "since": "2024-05-01", "tags": ["x", "y"]},
            "items": [{"name": "pen", "qty": 2}, {"name": "ink"}],
            "when": "2024-05-01T13:45:00.5+02:00",
            "at": "08:30:00Z",
            "pair": [1, "one"],
            "ids": [str(u)],
            "price": "12.50",
            "where": "/tmp/x",
            "point": {"x": 1.5},
            "options": {"verbose": True},
            "mode": "slow",
            "seq": [1, 2],
            "mapping": {"a": 1},
            "ratio": 2,
            "size": 3,
        }
    )
    tz = dt.timezone(dt.timedelta(hours=2))
    assert result == {
        "filters": Filters(Category.B, dt.date(2024, 5, 1), frozenset({"x", "y"})),
        "items": [Item("pen", 2), Item("ink", 1)],
        "when": dt.datetime(2024, 5, 1, 13, 45, 0, 500000, tzinfo=tz),
        "at": dt.time(8, 30, tzinfo=dt.timezone.utc),
        "pair": (1, "one"),
        "ids": {u},
        "price": Decimal("12.50"),
        "where": Path("/tmp/x"),
        "point": Point(1.5, 0.0),
        "options": {"verbose": True},
        "mode": "slow",
        "seq": (1, 2),
        "mapping": {"a": 1.0},
        "ratio": 2.0,
        "size": 3,
    }
    assert type(result["ratio"]) is float
    assert type(result["mapping"]["a"]) is float


def test_recursive_types_structure() -> None:
    """A recursive dataclass (via $defs/$ref) structures at every depth."""
    check = checker(tree=Tree)
    raw = {"tree": {"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}}
    assert check.check(raw) == {"tree": Tree(1, [Tree(2, [Tree(3)])])}
    assert problems(check, {"tree": {"value": 1, "children": [{"value": "x"}]}}) == (
        "$.tree.children[0].value: 'x' is not of type 'integer'",
    )


def test_params_left_out_are_omitted_so_defaults_apply() -> None:
    """Absent optional parameters are not filled in by the checker."""
    check = checker(required=["query"], query=str, limit=int, when=dt.date | None)
    assert check.check('{"query": "x"}') == {"query": "x"}


def test_unions_prefer_the_alternative_of_the_values_own_type() -> None:
    """An int stays an int in float|int, a str a str in date|str; else the kind decides."""
    check = checker(
        a=float | int,
        b=int | float,
        c=dt.date | str,
        f=dt.date | int,
        d=Cat | Dog,
        e=int | str,
        g=Decimal | int,
    )
    raw = {"a": 3, "b": 2.5, "c": "2024-01-02", "f": "2024-01-02", "d": {"barks": 2}, "e": "x"}
    result = check.check({**raw, "g": "0.10"})
    assert result == {
        "a": 3,
        "b": 2.5,
        "c": "2024-01-02",
        "f": dt.date(2024, 1, 2),
        "d": Dog(2),
        "e": "x",
        "g": Decimal("0.10"),
    }
    assert type(result["a"]) is int


@dataclasses.dataclass
class ById:
    key: Annotated[str, Field(pattern=r"^[0-9]+$")]


@dataclasses.dataclass
class ByName:
    key: str


@dataclasses.dataclass
class Small:
    n: Annotated[int, Field(le=10)]


@dataclasses.dataclass
class Big:
    n: Annotated[int, Field(gt=10)]


def test_a_union_of_classes_takes_the_class_whose_own_schema_accepts_the_value() -> None:
    """Classes whose fields fit the same keys are told apart by their constraints, as the schema's anyOf is."""
    check = checker(required=["q"], q=ById | ByName, size=Small | Big | None)
    assert check.check({"q": {"key": "123"}}) == {"q": ById("123")}
    assert check.check({"q": {"key": "alice"}, "size": {"n": 50}}) == {
        "q": ByName("alice"),
        "size": Big(50),
    }
    assert check.check({"q": {"key": "1"}, "size": {"n": 3}}) == {"q": ById("1"), "size": Small(3)}
    assert check.check({"q": {"key": "1"}, "size": None}) == {"q": ById("1"), "size": None}
    # scalars alike: the first alternative's bound refuses 50, the second takes it
    low_high = checker(n=Annotated[int, Field(le=10)] | Annotated[int, Field(ge=20)])
    assert low_high.check({"n": 50}) == {"n": 50}
    # the converter called directly (a workflow's step) chooses alike
    hook = get_converter().get_structure_hook(Small | Big)
    assert hook({"n": 50}, Small | Big) == Big(50)


class Level(int):
    """An int whose schema a rule gives (registered in a test)."""


@dataclasses.dataclass
class Low:
    n: Level


@dataclasses.dataclass
class High:
    n: int


def test_a_union_choice_follows_a_schema_rule_registered_later() -> None:
    """The alternatives' schemas are read again once a schema rule is registered."""
    from toolfold import register_schema_rule
    from toolfold.toolkit import _schema

    hook = get_converter().get_structure_hook(Low | High)
    register_schema_rule(Level, lambda tp, ctx: {"type": "integer", "maximum": 5})
    try:
        assert hook({"n": 9}, Low | High) == High(9)
        register_schema_rule(Level, lambda tp, ctx: {"type": "integer", "maximum": 50})
        assert type(hook({"n": 9}, Low | High)) is Low
    finally:
        del _schema._class_rules[Level]


def test_a_union_choice_made_while_a_rule_is_registered_is_made_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A check made from the rules before another thread registers one is not kept as new."""
    from toolfold import register_schema_rule
    from toolfold.toolkit import _converter, _schema

    real = _converter._schema_check
    raced: list[Any] = []

    def racing(tp: Any) -> Any:
        made = real(tp)  # made from the rules registered so far
        if tp is Low and not raced:
            raced.append(tp)  # meanwhile another thread registers a rule,
            register_schema_rule(Level, lambda tp, ctx: {"type": "integer", "maximum": 50})
            _converter._accepts(High, {"n": 1})  # and another's union choice reads the count
        return made

    hook = get_converter().get_structure_hook(Low | High)
    register_schema_rule(Level, lambda tp, ctx: {"type": "integer", "maximum": 5})
    try:
        monkeypatch.setattr(_converter, "_schema_check", racing)
        assert hook({"n": 9}, Low | High) == High(9)  # (chosen by the rules it began with)
        assert raced == [Low]
        assert type(hook({"n": 9}, Low | High)) is Low  # the rule registered meanwhile
    finally:
        del _schema._class_rules[Level]


@dataclasses.dataclass
class Stem:
    name: str
    kids: list[Stem | Shoot] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Shoot:
    name: str
    kids: list[Stem | Shoot] = dataclasses.field(default_factory=list)
    weight: int = 0


def test_a_recursive_union_of_classes_alike_but_for_keys_checks_no_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Alternatives whose schemas differ only in keys the value lacks are not told apart
    by checking the value against each: at every level of a tree that checked it whole."""
    from toolfold.toolkit import _converter

    checked: list[Any] = []
    real = _converter._accepts
    monkeypatch.setattr(_converter, "_accepts", lambda tp, v: checked.append(tp) or real(tp, v))
    tree: dict[str, Any] = {"name": "leaf"}
    for _ in range(30):
        tree = {"name": "x", "kids": [tree, {"name": "b", "weight": 2}]}
    check = checker(t=Stem | Shoot)
    result = check.check({"t": tree})["t"]
    assert checked == []  # no schema check, where each level's checked the tree below it
    assert type(result) is Stem
    assert type(result.kids[1]) is Shoot
    # alternatives that differ in what they take of a key are still told apart
    assert check.check({"t": {"name": "x", "kids": []}}) == {"t": Stem("x")}
    hook = get_converter().get_structure_hook(Small | Big)
    assert hook({"n": 50}, Small | Big) == Big(50)
    assert checked  # (the check ran: Small and Big say different things of "n")


def test_datetime_forms_accepted_on_every_python() -> None:
    """Z, lower-case t, a space, no offset and long fractions parse alike on 3.10+."""
    check = checker(when=dt.datetime)
    for text, expected in [
        ("2024-05-01T13:45:00Z", dt.datetime(2024, 5, 1, 13, 45, tzinfo=dt.timezone.utc)),
        ("2024-05-01t13:45:00z", dt.datetime(2024, 5, 1, 13, 45, tzinfo=dt.timezone.utc)),
        ("2024-05-01 13:45", dt.datetime(2024, 5, 1, 13, 45)),
        ("2024-05-01T13:45:00.123456789-03:30", None),
    ]:
        value = check.check({"when": text})["when"]
        if expected is not None:
            assert value == expected
    assert value.microsecond == 123456
    assert value.utcoffset() == -dt.timedelta(hours=3, minutes=30)


def test_structuring_failures_are_reported_with_paths() -> None:
    """When a loose schema lets through what the type refuses, cattrs' errors get JSON paths."""
    schema = {
        "type": "object",
        "properties": {
            "when": {"type": "string"},
            "items": {"type": "array"},
            "level": {},
        },
    }
    check = ArgumentChecker(
        "log", schema, {"when": dt.datetime, "items": list[Item], "level": Category}, False
    )
    assert problems(
        check, {"when": "soon", "items": [{"name": "a"}, {"qty": "x"}], "level": "Z"}
    ) == (
        "$.items[1]: 'name' is a required property",
        "$.items[1].qty: cannot convert to int: expected an integer, got str 'x'",
        "$.level: cannot convert to Category: 'Z' is not a valid Category (one of 'A', 'B', 'C')",
        "$.when: cannot convert to datetime: expected an ISO 8601 date-time such as"
        " 2024-05-01T13:45:00+02:00",
    )


class Shade(str, enum.Enum):
    """A str Enum (what StrEnum is, on 3.11+)."""

    LIGHT = "light"
    DARK_BLUE = "dark-blue"


class Rank(enum.IntEnum):
    LOW = 1
    HIGH = 2


def test_a_value_of_no_str_or_int_enum_member_names_the_values() -> None:
    """A str or int Enum is made by the primitive's strict hook; a refused value names the enum's values, as a plain Enum's does."""
    check = ArgumentChecker("paint", {"type": "object"}, {"shade": Shade, "rank": Rank}, False)
    assert problems(check, {"shade": "DARK_BLUE", "rank": 3}) == (
        "$.rank: cannot convert to Rank: 3 is not a valid Rank (one of 1, 2)",
        "$.shade: cannot convert to Shade: 'DARK_BLUE' is not a valid Shade"
        " (one of 'light', 'dark-blue')",
    )
    assert check.check({"shade": "dark-blue", "rank": 2.0}) == {
        "shade": Shade.DARK_BLUE,
        "rank": Rank.HIGH,
    }


class Colour(enum.Enum):
    """An enum whose ``_missing_`` refuses with its own message (or takes a spelling)."""

    RED = "red"
    BLUE = "blue"

    @classmethod
    def _missing_(cls, value: object) -> Colour | None:
        if value == "crimson":
            return cls.RED
        if isinstance(value, str) and value.upper() == value:
            raise ValueError(f"colours are lower case: {value.lower()!r}, not {value!r}")
        return None  # the enum module's refusal


class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


def test_an_enums_own_missing_keeps_its_message() -> None:
    """A ValueError raised by the enum's own _missing_ is what the model reads; one it leaves to the enum module names the values."""
    check = ArgumentChecker("paint", {"type": "object"}, {"a": Colour, "b": Colour}, False)
    assert problems(check, {"a": "RED", "b": "green"}) == (
        "$.a: cannot convert to Colour: colours are lower case: 'red', not 'RED'",
        "$.b: cannot convert to Colour: 'green' is not a valid Colour (one of 'red', 'blue')",
    )
    assert check.check({"a": "crimson", "b": "blue"}) == {"a": Colour.RED, "b": Colour.BLUE}


def test_a_flags_refusal_names_its_flags_which_combine() -> None:
    """A Flag takes any sum of its flags: the message says so, not "one of" the single flags."""
    check = ArgumentChecker("chmod", {"type": "object"}, {"perm": Perm}, False)
    assert problems(check, {"perm": 8}) == (
        "$.perm: cannot convert to Perm: 8 is not a valid Perm (a flag (R=1, W=2, X=4) or a "
        "sum of several)",
    )
    assert problems(check, {"perm": "x"}) == (
        "$.perm: cannot convert to Perm: 'x' is not a valid Perm (a flag (R=1, W=2, X=4) or "
        "a sum of several)",
    )
    assert problems(check, {"perm": True}) == (
        "$.perm: cannot convert to Perm: True is not a valid Perm (a flag (R=1, W=2, X=4) or "
        "a sum of several)",
    )
    assert check.check({"perm": 3}) == {"perm": Perm.R | Perm.W}
    assert check.check({"perm": 2.0}) == {"perm": Perm.W}  # JSON's integer 2.0


class Spelled(enum.Flag):
    """A Flag whose own ``_missing_`` takes a spelling (``"R|W"``) and leaves ints to Flag's."""

    R = 1
    W = 2
    X = 4

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if isinstance(value, str):
            made = cls(0)
            for part in value.split("|"):
                if part not in cls.__members__:
                    raise ValueError(f"unknown permission {part!r}; use R, W, X joined by |")
                made |= cls[part]
            return made
        return super()._missing_(value)


def test_a_flags_own_missing_takes_its_values_and_keeps_its_message() -> None:
    """A Flag's own _missing_ sees values that are no int (and its message is kept); what it
    hands to Flag's own (a value with bits no flag has) is refused naming the flags."""
    check = ArgumentChecker("chmod", {"type": "object"}, {"perm": Spelled}, False)
    assert check.check({"perm": "R|W"}) == {"perm": Spelled.R | Spelled.W}
    assert problems(check, {"perm": "R|Q"}) == (
        "$.perm: cannot convert to Spelled: unknown permission 'Q'; use R, W, X joined by |",
    )
    assert problems(check, {"perm": 8}) == (
        "$.perm: cannot convert to Spelled: 8 is not a valid Spelled (a flag (R=1, W=2, X=4) "
        "or a sum of several)",
    )


class Email(str):
    """A validating str subclass: its own refusal is the message."""

    def __new__(cls, value: str) -> Email:
        if "@" not in value:
            raise ValueError(f"{value!r} is not an email address")
        return super().__new__(cls, value)


class Even(int):
    def __new__(cls, value: int) -> Even:
        if value % 2:
            raise ValueError(f"{value} is odd")
        return super().__new__(cls, value)


def test_a_str_or_int_subclass_refusal_keeps_its_own_message() -> None:
    """Only an enum's refusal is rewritten to name its values; a validating subclass's stays."""
    check = ArgumentChecker("send", {"type": "object"}, {"to": Email, "n": Even}, False)
    assert problems(check, {"to": "nobody", "n": 3}) == (
        "$.n: cannot convert to Even: 3 is odd",
        "$.to: cannot convert to Email: 'nobody' is not an email address",
    )
    assert check.check({"to": "a@b", "n": 4}) == {"to": "a@b", "n": 4}


def test_argument_without_a_declared_type_is_refused() -> None:
    """A decorated tool never receives a keyword it does not declare."""
    check = ArgumentChecker("t", {"type": "object"}, {"a": int}, False)
    assert problems(check, {"a": 1, "b": 2}) == ("$.b: unexpected argument",)


def test_plain_json_values_are_passed_through_without_copying() -> None:
    """str, bool, list[str] and dict[str, Any] need no structuring: the same objects arrive."""
    check = checker(tags=list[str], meta=dict[str, Any], flag=bool)
    raw = {"tags": ["a"], "meta": {"k": [1]}, "flag": True}
    result = check.check(raw)
    assert result["tags"] is raw["tags"]
    assert result["meta"] is raw["meta"]


# -- user types ------------------------------------------------------------------


class Money:
    """A type toolfold knows nothing about."""

    def __init__(self, text: str) -> None:
        self.amount, self.currency = text.split()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and vars(self) == vars(other)


def test_type_without_converter_hooks_is_a_definition_error() -> None:
    """A type cattrs cannot build is reported as a ToolDefinitionError naming the parameter."""
    schema = {"type": "object", "properties": {"price": {"type": "string"}}}
    check = ArgumentChecker("pay", schema, {"price": Money}, False)
    with pytest.raises(ToolDefinitionError) as info:
        check.check({"price": "3 EUR"})
    (problem,) = info.value.problems
    assert problem.startswith("parameter 'price': cannot structure JSON into Money")
    assert problem.endswith("register hooks for the type with register_type_hooks()")


@dataclasses.dataclass
class Invoice:
    total: Money | None = None


def test_a_type_without_hooks_in_a_union_is_a_definition_error_too() -> None:
    """Money | None, or a class with a Money | None field, is refused when the checker is
    made, as Money alone is: never an argument error the model cannot fix."""
    schema = {"type": "object", "properties": {"maybe": {}, "invoice": {}}}
    check = ArgumentChecker("pay", schema, {"maybe": Money | None, "invoice": Invoice}, False)
    with pytest.raises(ToolDefinitionError) as info:
        check.check({"maybe": "3 EUR"})
    maybe, invoice = info.value.problems
    assert maybe.startswith("parameter 'maybe': cannot structure JSON into ")
    assert maybe.split(" (")[0].endswith("Money | None")
    assert invoice.startswith("parameter 'invoice': cannot structure JSON into Invoice (")
    assert all(p.endswith("register_type_hooks()") for p in info.value.problems)


class MoneyFields(TypedDictX):
    paid: NotRequired[ReadOnly[Money]]
    note: str


@attrs.define
class MoneyBag:
    coins: set[Money]


class AnnotatedMoney(TypedDictX):
    paid: Annotated[NotRequired[Money], Field(description="What was paid.")]
    note: str


class MoneyPage(TypedDictX, Generic[T]):
    items: list[int]
    cursor: Annotated[NotRequired[T], "Where the next page starts."]


@pytest.mark.parametrize(
    "tp",
    [
        set[Money],
        frozenset[Money],
        tuple[Money, ...],
        tuple[int, Money],
        MoneyFields,
        AnnotatedMoney,
        MoneyPage[Money],
        dict[str, frozenset[Money]],
        list[tuple[int, Money | None]],
        MoneyBag,
    ],
)
def test_a_type_without_hooks_anywhere_in_a_parameter_is_a_definition_error(tp: Any) -> None:
    """Money in a set, frozenset, tuple, TypedDict field (under NotRequired/ReadOnly, inside
    or outside Annotated, of a generic TypedDict too) or a class's set field is refused when the checker is made, not blamed on the model by a call."""
    schema = {"type": "object", "properties": {"price": {}}}
    check = ArgumentChecker("pay", schema, {"price": tp}, False)
    with pytest.raises(ToolDefinitionError) as info:
        check.build_hooks()
    (problem,) = info.value.problems
    assert problem.startswith("parameter 'price': cannot structure JSON into ")
    assert f"Unsupported type: {Money!r}" in problem
    assert problem.endswith("register_type_hooks()")


class Receipt(TypedDictX):
    paid: Annotated[NotRequired[Decimal], Field(description="What was paid.")]
    number: Annotated[ReadOnly[int], "The receipt's number."]


class Page(TypedDictX, Generic[T]):
    items: list[T]
    cursor: Annotated[NotRequired[T], Field(description="Where the next page starts.")]


def test_typeddict_qualifiers_inside_annotated_are_optional_keys_with_their_metadata() -> None:
    """Annotated[NotRequired[T], Field(...)] and Annotated[ReadOnly[T], ...] TypedDict fields:
    the key is optional as qualified, described by the metadata, and calls structure it
    (no error blamed on the model)."""

    def file(receipt: Receipt) -> None:
        """File a receipt.

        Args:
            receipt: The receipt.
        """

    made = tool(file)
    schema = made.parameters["properties"]["receipt"]
    assert schema["properties"] == {
        "paid": {"type": "string", "format": "decimal", "description": "What was paid."},
        "number": {"type": "integer", "description": "The receipt's number."},
    }
    assert schema["required"] == ["number"]
    full = {"receipt": {"paid": "1.50", "number": 7}}
    assert made.validate_arguments(full) == {"receipt": {"paid": Decimal("1.50"), "number": 7}}
    assert made.validate_arguments({"receipt": {"number": 7}}) == {"receipt": {"number": 7}}


def test_a_generic_typeddicts_annotated_not_required_field_is_optional_in_calls() -> None:
    """Page[Decimal]'s Annotated[NotRequired[T], Field(...)] field (string annotations too)
    is an optional, described key that calls structure, not a definition error."""

    def read(page: Page[Decimal]) -> None:
        """Read a page.

        Args:
            page: A page of amounts.
        """

    made = tool(read)
    schema = made.parameters["properties"]["page"]
    assert schema["required"] == ["items"]
    assert schema["properties"]["cursor"]["description"] == "Where the next page starts."
    assert made.validate_arguments({"page": {"items": ["1"], "cursor": "2"}}) == {
        "page": {"items": [Decimal("1")], "cursor": Decimal("2")}
    }
    assert made.validate_arguments({"page": {"items": []}}) == {"page": {"items": []}}


@dataclasses.dataclass
class Branch:
    label: str
    children: tuple[Branch, ...] = ()


Box = TypeVar("Box")


@dataclasses.dataclass
class Wrapper(Generic[Box]):
    inner: frozenset[Box]


def test_the_definition_time_walk_stops_at_recursion_and_at_the_users_own_hooks() -> None:
    """A recursive class is walked once, and the parts of a type the user's hook
    structures (Wrapper[Money]) are that hook's business, not a definition error."""
    schema = {"type": "object", "properties": {"tree": {}, "wrapped": {}}}
    register_type_hooks(
        lambda tp: typing.get_origin(tp) is Wrapper,
        structure=lambda value, tp: Wrapper(frozenset(value)),
    )
    check = ArgumentChecker("walk", schema, {"tree": Branch, "wrapped": Wrapper[Money]}, False)
    got = check.check({"tree": {"label": "a", "children": [{"label": "b"}]}, "wrapped": ["1 EUR"]})
    assert got["tree"] == Branch("a", (Branch("b"),))
    assert got["wrapped"] == Wrapper(frozenset({"1 EUR"}))


def test_registered_hooks_structure_and_unstructure_a_user_type() -> None:
    """register_type_hooks teaches the converter both directions, even once it is built."""
    from toolfold.toolkit._converter import get_converter
    from toolfold.toolkit._results import format_result

    get_converter()

    class Euro(Money):
        pass

    register_type_hooks(Euro, lambda v, t: t(v), lambda m: f"{m.amount} {m.currency}")
    schema = {"type": "object", "properties": {"price": {"type": "string"}}}
    check = ArgumentChecker("pay", schema, {"price": Euro}, False)
    assert check.check({"price": "3 EUR"}) == {"price": Euro("3 EUR")}
    assert format_result({"p": Euro("4 EUR")}) == '{"p":"4 EUR"}'


# -- through the public API ------------------------------------------------------


def test_decorated_tool_validates_and_structures() -> None:
    """@tool's validate_arguments returns keyword arguments of the declared types."""

    @tool
    def find(filters: Filters, since: dt.datetime, limit: int = 10) -> list[str]:
        """Find things.

        Args:
            filters: What to match.
            since: Only newer than this.
            limit: At most this many.
        """
        return []

    args = find.validate_arguments(
        '{"filters": {"category": "C", "tags": ["a"]}, "since": "2024-01-01T00:00:00Z"}'
    )
    assert args == {
        "filters": Filters(Category.C, None, frozenset({"a"})),
        "since": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc),
    }
    assert find.invoke(args) == []
    with pytest.raises(ArgumentValidationError) as info:
        find.validate_arguments({"filters": {"category": "D"}, "since": "x", "limit": "ten"})
    assert info.value.tool_name == "find"
    assert info.value.errors == (
        "$.filters.category: 'D' is not one of ['A', 'B', 'C']",
        "$.limit: 'ten' is not of type 'integer'",
        "$.since: 'x' is not a valid date-time: expected an ISO 8601 date-time such as"
        " 2024-05-01T13:45:00+02:00",
    )


def test_explicit_schema_tool_receives_the_dict() -> None:
    """A Tool built from a JSON Schema validates and hands back the dict with string keys."""
    search = Tool(name="search", description="Search.", parameters=SEARCH_SCHEMA, function=dict)
    assert search.validate_arguments('{"query": "x", "limit": 2}') == {"query": "x", "limit": 2}
    with pytest.raises(ArgumentValidationError) as info:
        search.validate_arguments('{"query": "x", "filters": {"category": "D"}}')
    assert info.value.errors == ("$.filters.category: 'D' is not one of ['A', 'B', 'C']",)
    with pytest.raises(ArgumentJSONError):
        search.validate_arguments("{")


def test_tool_builds_its_checker_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many calls to validate_arguments compile the schema only once."""
    from toolfold.toolkit import _arguments

    calls: list[object] = []
    real = _arguments._compile
    monkeypatch.setattr(_arguments, "_compile", lambda s: calls.append(s) or real(s))

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    for i in range(5):
        assert add.validate_arguments({"a": i, "b": 1}) == {"a": i, "b": 1}
    assert len(calls) == 1


def test_explicit_schema_tools_get_a_copy_of_a_passed_dict() -> None:
    """The dict handed to an explicit-schema function is not the caller's own."""
    raw = {"query": "x"}
    result = explicit().check(raw)
    assert result == raw
    assert result is not raw


def test_more_annotation_forms_structure() -> None:
    """Literal of enum members, NewType, Any and a TypedDict with NotRequired keys."""
    check = checker(
        pick=Literal[Category.A, Category.B],
        user=UserId,
        blob=Any,
        query=Query,
        mixed=list[int | str],
    )
    result = check.check(
        {"pick": "B", "user": 7, "blob": {"x": [1]}, "query": {"text": "t"}, "mixed": [1, "a"]}
    )
    assert result == {
        "pick": Category.B,
        "user": 7,
        "blob": {"x": [1]},
        "query": {"text": "t"},
        "mixed": [1, "a"],
    }
    assert result["pick"] is Category.B


def test_a_literal_of_an_enum_member_in_a_union_takes_the_members_value() -> None:
    """Literal[Category.A] | int: "A" (what the schema asks for) is the member, 2 the int."""

    @tool
    def pick(
        choice: Literal[Category.A] | int, more: Literal[Category.B, 3] | list[int] = 3
    ) -> str:
        return repr(choice)

    assert pick.parameters["properties"]["choice"]["anyOf"][0] == {"type": "string", "enum": ["A"]}
    assert pick.validate_arguments({"choice": "A", "more": "B"}) == {
        "choice": Category.A,
        "more": Category.B,
    }
    assert pick.validate_arguments({"choice": 2, "more": 3}) == {"choice": 2, "more": 3}


def test_typeddict_problems_have_paths_and_not_required_keys_stay_optional() -> None:
    """A TypedDict's missing, wrong and extra keys are reported; NotRequired keys may be absent."""
    schema = {"type": "object", "properties": {"query": {"type": "object"}}}
    check = ArgumentChecker("t", schema, {"query": Query}, False)
    assert check.check({"query": {"text": "a", "page": 2}}) == {"query": {"text": "a", "page": 2}}
    assert problems(check, {"query": {"page": "x", "zz": 1}}) == (
        "$.query: 'text' is a required property",
        "$.query: unexpected property 'zz'",
        "$.query.page: cannot convert to int: expected an integer, got str 'x'",
    )


def test_a_generic_named_tuple_structures_from_its_object() -> None:
    """NBox[str] (Python 3.11+) is an object in its schema, and an NBox from it, not a tuple of keys."""
    if sys.version_info < (3, 11):
        with pytest.raises(TypeError):  # Python refuses a generic NamedTuple before 3.11

            class Refused(NamedTuple, Generic[T]):
                item: T

        return

    class NBox(NamedTuple, Generic[T]):
        item: T
        count: int = 0

    @tool
    def put(x: NBox[str], y: NBox[list[int]] | None = None) -> str:
        return repr((x, y))

    assert put.parameters["properties"]["x"]["properties"]["item"] == {"type": "string"}
    arguments = put.validate_arguments({"x": {"item": "ab"}, "y": {"item": [1], "count": 2}})
    assert arguments == {"x": NBox(item="ab"), "y": NBox(item=[1], count=2)}
    assert type(arguments["x"]) is NBox
    schema = {"type": "object", "properties": {"x": {}}}  # the converter's own refusals
    check = ArgumentChecker("t", schema, {"x": NBox[str]}, False)
    assert check.check({"x": ["ab", 3]}) == {"x": NBox("ab", 3)}
    assert problems(check, {"x": {"item": 5, "zz": 1}}) == (
        "$.x: unexpected property 'zz'",
        "$.x.item: cannot convert to str: expected a string, got int 5",
    )
    assert problems(check, {"x": {}}) == ("$.x: 'item' is a required property",)
    assert get_converter().unstructure(NBox("ab"), NBox[str]) == {"item": "ab", "count": 0}


def test_message_for_model_keeps_fifteen_problem_lines() -> None:
    """500 bad items give a short message for the model; errors keep every problem."""

    @tool
    def f(xs: list[int]) -> None:
        """F.

        Args:
            xs: Numbers.
        """

    with pytest.raises(ArgumentValidationError) as info:
        f.validate_arguments({"xs": ["a"] * 500})
    lines = info.value.message_for_model.splitlines()
    assert len(info.value.errors) == 500
    assert lines[-2] == "... and 485 more problems"
    assert len(lines) == 1 + 15 + 1 + 1
    assert len(info.value.message_for_model) < 1000


@pytest.mark.parametrize(
    ("count", "shown", "more"), [(15, 15, None), (16, 15, "... and 1 more problem")]
)
def test_the_model_reads_at_most_15_problem_lines(count: int, shown: int, more: str | None) -> None:
    """15 problems are all shown; a 16th is summed up on a line of its own after 15."""

    @tool
    def f(xs: list[int]) -> None:
        """F.

        Args:
            xs: Numbers.
        """

    with pytest.raises(ArgumentValidationError) as info:
        f.validate_arguments({"xs": ["a"] * count})
    lines = info.value.message_for_model.splitlines()
    assert sum(line.startswith("- ") for line in lines) == shown
    assert [line for line in lines if line.startswith("...")] == ([more] if more else [])


def test_size_bounds_and_overflow_are_worded_plainly() -> None:
    """Too short / too long say what was expected; a huge number for a float names the limit."""

    @tool
    def f(
        point: tuple[int, int],
        code: Annotated[str, Field(min_length=3)] = "abc",
        x: float = 0.0,
    ) -> None:
        """F.

        Args:
            point: A point.
            code: A code.
            x: A number.
        """

    assert problems_of(f, '{"point": [1], "code": "ab"}') == (
        "$.code: 'ab' has 2 characters; expected at least 3",
        "$.point: [1] has 1 item; expected at least 2",
    )
    assert problems_of(f, '{"point": [1, 2, 3]}') == (
        "$.point: [1, 2, 3] has 3 items; expected at most 2",
    )
    assert problems_of(f, '{"point": [1, 2], "x": 1' + "0" * 400 + "}") == (
        "$.x: the number is too large for float (at most about 1.8e308)",
    )


def problems_of(t: Any, raw: str) -> tuple[str, ...]:
    """The error lines a tool reports for ``raw``."""
    with pytest.raises(ArgumentValidationError) as info:
        t.validate_arguments(raw)
    return info.value.errors


def test_integer_arguments_keep_their_value_and_type_on_the_fast_path() -> None:
    """An int passes through as is, 3.0 becomes the int 3, a bool and a string are refused."""

    @tool
    def count(n: int, m: int = 0) -> int:
        """Count."""
        return n + m

    big = 10**30
    arguments = count.validate_arguments({"n": big, "m": 3.0})
    assert arguments["n"] is big
    assert arguments["m"] == 3
    assert type(arguments["m"]) is int
    with pytest.raises(ArgumentValidationError, match=r"\$\.n"):
        count.validate_arguments({"n": True})
    with pytest.raises(ArgumentValidationError, match=r"\$\.n"):
        count.validate_arguments({"n": "5"})


def _even(n: int) -> bool:
    return n % 2 == 0


def test_predicates_of_parameters_that_fit_the_schema_are_listed_with_its_problems() -> None:
    """A schema problem in one parameter and a broken Predicate in another are listed
    together, at their paths, in one rejection (the predicate is not held back)."""
    import annotated_types as at

    check = checker(n=Annotated[int, at.Predicate(_even)], m=Annotated[int, at.Gt(0)])
    assert problems(check, '{"n": 3, "m": 0}') == (
        "$.m: 0 is less than or equal to the minimum of 0",
        "$.n: 3 does not satisfy the predicate _even",
    )
    # a parameter with a schema problem of its own is not structured too
    assert problems(check, '{"n": "x", "m": 1}') == ("$.n: 'x' is not of type 'integer'",)


class _Opaque:
    """A class the converter has no hook for (its owner's class structures it)."""

    def __init__(self, a: int, b: int) -> None:
        self.a, self.b = a, b


def test_a_field_without_a_hook_leaves_the_others_predicates_checked() -> None:
    """A parameter the converter cannot structure on its own (a field of an output class
    with its own hook) is skipped; the other parameters' predicates are still listed."""
    import annotated_types as at

    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "m": {"type": "integer", "exclusiveMinimum": 0},
            "w": {"type": "string"},
        },
        "required": ["n", "m", "w"],
        "additionalProperties": False,
    }
    types = {"n": Annotated[int, at.Predicate(_even)], "m": Annotated[int, at.Gt(0)], "w": _Opaque}
    check = ArgumentChecker("out", schema, types, True)
    assert problems(check, '{"n": 3, "m": 0, "w": "a"}') == (
        "$.m: 0 is less than or equal to the minimum of 0",
        "$.n: 3 does not satisfy the predicate _even",
    )
