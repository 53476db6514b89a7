"""format_result: tool return values as text for a model."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import uuid
from collections import deque
from decimal import Decimal
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import pytest

from toolfold import tool
from toolfold.toolkit._results import format_result

if TYPE_CHECKING:  # only for type checkers, as is common: the annotations below name it
    from fractions import Fraction as Money


class Color(str, enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@attrs.frozen
class Reading:
    at: dt.datetime
    celsius: Decimal
    tags: frozenset[str]


@dataclasses.dataclass
class Report:
    city: str
    readings: list[Reading]
    level: Level
    color: Color | None = None


class Pair(NamedTuple):
    left: int
    right: str


class Opaque:
    def __str__(self) -> str:
        return "opaque thing"


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no")


def test_strings_pass_through() -> None:
    """A str result is sent as it is, without JSON quoting."""
    text = 'already "text"\n'
    assert format_result(text) is text


def test_str_subclasses_become_plain_str() -> None:
    """A str subclass is sent as its plain text."""

    class Markup(str):
        def __str__(self) -> str:
            return "overridden"

    result = format_result(Markup("<b>hi</b>"))
    assert result == "<b>hi</b>"
    assert type(result) is str


def test_classes_become_compact_json() -> None:
    """attrs classes and dataclasses unstructure into compact JSON, nested values included."""
    report = Report(
        city="Zürich",
        readings=[
            Reading(
                dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc),
                Decimal("21.50"),
                frozenset({"sun"}),
            )
        ],
        level=Level.HIGH,
        color=Color.RED,
    )
    assert format_result(report) == (
        '{"city":"Zürich","readings":[{"at":"2024-05-01T12:00:00+00:00","celsius":"21.50",'
        '"tags":["sun"]}],"level":3,"color":"red"}'
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (3, "3"),
        (-(10**30), "-" + "1" + "0" * 30),
        (2.5, "2.5"),
        (True, "true"),
        (False, "false"),
        ([1, "a", None], '[1,"a",null]'),
        ((1, 2), "[1,2]"),
        ({3}, "[3]"),
        (frozenset({"x"}), '["x"]'),
        ({"k": {"n": [1]}}, '{"k":{"n":[1]}}'),
        (Color.RED, '"red"'),
        (Level.HIGH, "3"),
        (dt.date(2024, 5, 1), '"2024-05-01"'),
        (dt.time(8, 30), '"08:30:00"'),
        (uuid.UUID(int=1), '"00000000-0000-0000-0000-000000000001"'),
        (Decimal("1.10"), '"1.10"'),
        (PurePosixPath("/tmp/a"), '"/tmp/a"'),
        (Pair(1, "b"), '{"left":1,"right":"b"}'),
        ({"emoji": "🙂", "jp": "日本"}, '{"emoji":"🙂","jp":"日本"}'),
    ],
)
def test_values_become_json(value: Any, text: str) -> None:
    """Scalars, collections, enums, dates, UUIDs, decimals, paths and named tuples have a JSON form."""
    assert format_result(value) == text


def _digits(value: int) -> str:
    """``value``'s decimal digits, built without Python's int printing (and its digit limit)."""
    sign, value = ("-", -value) if value < 0 else ("", value)
    out = []
    while value:
        value, chunk = divmod(value, 10**1000)
        out.append(f"{chunk:01000d}" if value else str(chunk))
    return sign + "".join(reversed(out))


@pytest.mark.parametrize(
    "value", [10**5000, -(3**20000) - 7, 2**100_000 + 1], ids=["10**5000", "-3**20000", "2**100000"]
)
def test_an_int_too_long_to_print_is_written_in_full(value: int) -> None:
    """An int past Python's digit limit (4300) is written as all its digits, alone or nested."""
    assert format_result(value) == _digits(value)
    nested = format_result({"n": [value, float("nan")], "m": 1})
    assert nested == f'{{"n":[{_digits(value)},"NaN"],"m":1}}'


def test_an_int_key_too_long_to_print_is_written_in_full() -> None:
    """A mapping's int key past the digit limit is its digits as the JSON key."""
    assert format_result({10**5000: "big"}) == f'{{"{_digits(10**5000)}":"big"}}'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({1: "a", "1": "b"}, "{1: 'a', '1': 'b'}"),
        ([{True: 1, "true": 2}], "[{True: 1, 'true': 2}]"),
        ({"x": {None: 1, "null": 2}}, "{'x': {None: 1, 'null': 2}}"),
    ],
)
def test_keys_json_would_write_alike_fall_back_to_repr(value: Any, text: str) -> None:
    """Two keys JSON writes as one text (1 and "1") are never sent as duplicate JSON keys."""
    assert format_result(value) == text


def test_keys_of_other_types_that_do_not_clash_stay_json() -> None:
    """Non-text keys that stay distinct as JSON text are written as JSON as before."""
    assert format_result({1: "a", 2: "b", None: 0, "x": [{True: 1}]}) == (
        '{"1":"a","2":"b","null":0,"x":[{"true":1}]}'
    )


@pytest.mark.parametrize(
    "value",
    [
        {1.5: "a", "1.5": "b"},
        [{-3: "a", "-3": "b"}],
        {"x": [{1e-05: 1, "1e-05": 2}]},
        {False: 0, "false": 1},
        {10**5000: "a", _digits(10**5000): "b"},
    ],
    ids=["float", "negative int", "float with exponent", "false", "huge int"],
)
def test_every_kind_of_key_that_is_no_text_is_checked_for_a_clash(value: Any) -> None:
    """Floats, negative ints, booleans and huge ints as keys are found to clash with text."""
    expected = "<unprintable dict>" if 10**5000 in value else repr(value)  # (repr refuses it)
    assert format_result(value) == expected


def test_results_whose_keys_are_all_text_are_not_walked_for_clashes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk over every dict for clashing keys is skipped when no key could be no text."""

    def walked(data: Any) -> bool:
        raise AssertionError("walked")

    monkeypatch.setattr("toolfold.toolkit._results._keys_clash", walked)
    value = [{"id": i, "name": f"n{i}", "tags": ["a", "b"], "meta": {"x": i}} for i in range(3)]
    assert json.loads(format_result(value)) == value
    assert (
        format_result({"a": 'say "1": or true": here'}) == '{"a":"say \\"1\\": or true\\": here"}'
    )


def test_bytes_become_text_or_base64() -> None:
    """UTF-8 bytes are sent as text, other bytes as base64."""
    assert format_result({"a": b"caf\xc3\xa9", "b": b"\xff\x00"}) == '{"a":"café","b":"/wA="}'
    assert format_result(b"caf\xc3\xa9") == "café"  # on their own too, not "b'caf...'"
    assert format_result(bytearray(b"\xff\x00")) == "/wA="


def test_nan_and_infinity_become_strings() -> None:
    """JSON has no NaN or Infinity; they are written as strings so the output stays valid JSON."""
    text = format_result({"x": [float("nan"), float("inf"), -float("inf"), 1.0]})
    assert text == '{"x":["NaN","Infinity","-Infinity",1.0]}'
    json.loads(text)


def test_unknown_objects_inside_json_become_their_str() -> None:
    """An object JSON cannot hold is written as its str() in its place; the rest stays JSON."""
    assert format_result({"thing": Opaque(), "n": 1}) == '{"thing":"opaque thing","n":1}'


class BadStr:
    """Neither str() nor repr() works (both raise)."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class ReprOnly:
    """str() raises, repr() works."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        return "ReprOnly()"


def test_an_item_whose_str_raises_is_replaced_in_its_place() -> None:
    """Only the item whose str() raises is replaced (by its repr, else <unprintable T>)."""
    assert format_result({"ok": 1, "bad": BadStr()}) == '{"ok":1,"bad":"<unprintable BadStr>"}'
    assert format_result([ReprOnly(), 2]) == '["ReprOnly()",2]'


def test_cycles_fall_back_to_repr() -> None:
    """A self-referencing value cannot be JSON; its repr is sent instead of crashing."""
    loop: list[Any] = [1]
    loop.append(loop)
    assert format_result(loop) == "[1, [...]]"


def test_unprintable_values_never_raise() -> None:
    """Even a value whose repr raises gives some text."""
    loop: list[Any] = [BadRepr()]
    loop.append(loop)
    assert format_result(loop) == "<unprintable list>"


def test_tool_format_result_uses_the_same_rules() -> None:
    """Tool.format_result is this function."""

    @tool
    def when() -> dt.date:
        """Today."""
        return dt.date(2024, 1, 2)

    assert when.format_result(when()) == '"2024-01-02"'
    assert when.format_result("plain") == "plain"


class FakeModel:
    """Stands in for a pydantic v2 model (pydantic is not a dependency)."""

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        assert mode == "json"
        return {"id": 1, "at": "2024-01-01T00:00:00"}


def test_models_with_model_dump_are_dumped() -> None:
    """pydantic-style models are written with their own JSON dump, alone or nested."""
    assert format_result(FakeModel()) == '{"id":1,"at":"2024-01-01T00:00:00"}'
    assert format_result([FakeModel()]) == '[{"id":1,"at":"2024-01-01T00:00:00"}]'


class HugeModel:
    """A pydantic-style model whose dump holds an int past the digit limit."""

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        assert mode == "json"
        return {"n": 10**5000, "x": float("inf")}


def test_a_huge_int_inside_a_nested_model_is_written_in_full() -> None:
    """A huge int in what a model inside a list or dict dumps is its digits, the rest JSON."""
    inner = f'{{"n":{_digits(10**5000)},"x":"Infinity"}}'
    assert format_result([HugeModel()]) == f"[{inner}]"
    assert format_result({"m": HugeModel(), "k": 1}) == f'{{"m":{inner},"k":1}}'


def test_many_huge_ints_each_land_in_their_own_place() -> None:
    """Each of many huge ints (placeholders 1 and 10 alike) is written where it stood."""
    values = [10**4400 + i for i in range(12)]
    assert format_result(values) == "[" + ",".join(_digits(v) for v in values) + "]"


def test_an_unknown_object_alone_is_sent_as_its_text() -> None:
    """An object with no JSON form returned on its own is its str(), not a quoted string."""
    assert format_result(Opaque()) == "opaque thing"
    assert format_result(dt.timedelta(hours=1)) == "1:00:00"


def test_one_line_escapes_the_line_and_paragraph_separators() -> None:
    """U+2028 and U+2029 (line breaks to str.splitlines and many log readers) are escaped as a newline is."""
    from toolfold.toolkit._results import one_line

    said = one_line("overloaded\u2028toolfold run: all fine\u2029\nend")
    assert said == "overloaded\\u2028toolfold run: all fine\\u2029\\x0aend"
    assert len(said.splitlines()) == 1
    assert one_line("café ✓ plain") == "café ✓ plain"


@dataclasses.dataclass
class Invoice:
    """A dataclass whose annotation names a type imported only for type checkers."""

    number: str
    total: Money
    notes: list[str]


@attrs.define
class Receipt:
    """An attrs class whose annotation names a type imported only for type checkers."""

    total: Money
    day: dt.date


def test_a_class_whose_annotation_cannot_be_read_is_written_by_its_values() -> None:
    """A dataclass or attrs class whose annotations cannot be resolved (a TYPE_CHECKING
    import, untyped make_dataclass fields) is JSON by its fields' values, and so is the
    rest of the result (it was all sent as Python's repr)."""
    value = {
        "invoice": Invoice("A1", Decimal("9.90"), ["x"]),  # type: ignore[arg-type]
        "receipt": Receipt(Decimal("1.5"), dt.date(2024, 1, 2)),  # type: ignore[arg-type]
        "when": dt.date(2024, 1, 1),
    }
    assert format_result(value) == (
        '{"invoice":{"number":"A1","total":"9.90","notes":["x"]},'
        '"receipt":{"total":"1.5","day":"2024-01-02"},"when":"2024-01-01"}'
    )
    untyped = dataclasses.make_dataclass("Untyped", ["x", "when"])
    assert format_result(untyped(float("nan"), dt.date(2024, 1, 1))) == (
        '{"x":"NaN","when":"2024-01-01"}'
    )
    assert format_result([untyped(1, Opaque()), 2]) == '[{"x":1,"when":"opaque thing"},2]'


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({("eu", "tea"): 9.9, "n": Decimal("1")}, """{"('eu', 'tea')":9.9,"n":"1"}"""),
        ({"ratio": {float("nan"): 1, float("-inf"): 2}}, '{"ratio":{"NaN":1,"-Infinity":2}}'),
        (
            {"k": {frozenset({1}): 1}, "when": dt.date(2024, 1, 1)},
            '{"k":{"frozenset({1})":1},"when":"2024-01-01"}',
        ),
        (
            {Color.RED: 1, uuid.UUID(int=1): 2},
            '{"red":1,"00000000-0000-0000-0000-000000000001":2}',
        ),
    ],
    ids=["tuple", "nan", "frozenset", "enum and uuid"],
)
def test_a_key_json_cannot_hold_is_written_as_its_text(value: Any, text: str) -> None:
    """A mapping key JSON cannot hold (a tuple, as pandas' groupby gives, NaN, a
    frozenset) is written as its text (a key with a JSON form of text as that), and
    the rest stays JSON (all of it was Python's repr)."""
    assert format_result(value) == text


@pytest.mark.parametrize(
    "value",
    [{("a",): 1, "('a',)": 2}, {"x": [{float("nan"): 1, "NaN": 2}]}, {(1,): 1, "(1,)": 2}],
    ids=["tuple", "nan", "tuple of int"],
)
def test_a_key_written_as_its_text_that_clashes_falls_back_to_repr(value: Any) -> None:
    """A key written as its text that is another key's text is never sent as a duplicate
    JSON key: the result is its repr, as for other clashing keys."""
    assert format_result(value) == repr(value)


def test_dict_views_and_ranges_become_arrays() -> None:
    """A dict's keys, values and items and a range are arrays, alone or nested, as sets
    and deques are (they were their Python text, "dict_keys([...])", "range(0, 3)")."""
    cities = {"paris": 1, "rome": 2}
    assert format_result(cities.keys()) == '["paris","rome"]'
    assert format_result(cities.values()) == "[1,2]"
    assert format_result(cities.items()) == '[["paris",1],["rome",2]]'
    assert format_result(range(3)) == "[0,1,2]"
    assert format_result({"cities": cities.keys(), "r": range(2), "d": deque([1])}) == (
        '{"cities":["paris","rome"],"r":[0,1],"d":[1]}'
    )
    assert (
        format_result({"k": {(1, 2): cities.items()}})
        == '{"k":{"(1, 2)":[["paris",1],["rome",2]]}}'
    )


def test_a_bytes_key_is_written_as_a_bytes_value_is() -> None:
    """A key of bytes is its text when UTF-8, else base64, as a value of bytes is (it was
    Python's ``"b'ab'"`` beside the value's ``"ab"``); one that becomes another key's text
    falls back to the repr, as other clashing keys do."""
    assert format_result({b"ab": b"ab", 1: {2}}) == '{"ab":"ab","1":[2]}'
    assert format_result({b"\xff": b"\xff"}) == '{"/w==":"/w=="}'
    clashing = {b"ab": 1, "ab": 2}
    assert format_result(clashing) == repr(clashing)
