"""`exact_loads`: orjson's value only where it is exactly the standard library's.

Every text is decoded both ways: when `exact_loads` gives a value, `json.loads`
must give the same value of the same types (an int stays an int, ``-0.0``
keeps its sign, keys keep their order); when `json.loads` refuses a text,
`exact_loads` must leave it (`UNDECODED`), so the caller's own error is raised.

``TOOLFOLD_EXAMPLES=20000`` runs a deeper search than the default 400 examples.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

import hypothesis.strategies as st
import orjson
import pytest
from hypothesis import given, settings

from toolfold.adapters._http._sse import SSEEvent
from toolfold.adapters._wire import loads as wire_loads
from toolfold.toolkit import _json
from toolfold.toolkit._arguments import NotJSONNumber, strict_loads
from toolfold.toolkit._json import UNDECODED, exact_loads

EXAMPLES = int(os.environ.get("TOOLFOLD_EXAMPLES", "400"))


def same(a: Any, b: Any) -> bool:
    """Equal values of the same types, all the way down (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def agrees(text: str | bytes) -> None:
    """`exact_loads` gives `json.loads`' value, or leaves a text to it."""
    try:
        expected = json.loads(text)
    except (ValueError, RecursionError):
        assert exact_loads(text) is UNDECODED, text
        return
    got = exact_loads(text)
    assert got is UNDECODED or same(got, expected), (text, got, expected)


_ANY_CHAR = st.characters(blacklist_categories=())  # lone surrogates too
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: past 64 bits orjson reads a float
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN, the infinities and -0.0 among them
    | st.text(_ANY_CHAR, max_size=12)
    | st.text(st.sampled_from("0123456789"), min_size=15, max_size=25),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(_ANY_CHAR, max_size=6), inner, max_size=5)
    ),
    max_leaves=20,
)
_LAYOUTS = st.fixed_dictionaries(
    {
        "ensure_ascii": st.booleans(),
        "indent": st.none() | st.integers(0, 2),
        "separators": st.none() | st.just((",", ":")),
    }
)


def _as_bytes(text: str) -> bytes | None:
    try:
        return text.encode()
    except UnicodeEncodeError:
        return None


@settings(max_examples=EXAMPLES, deadline=None)
@given(_VALUES, _LAYOUTS)
def test_agrees_on_encoded_values(value: Any, layout: dict[str, Any]) -> None:
    text = json.dumps(value, **layout)
    agrees(text)
    raw = _as_bytes(text)
    if raw is not None:
        agrees(raw)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    _VALUES,
    st.lists(
        st.tuples(
            st.integers(0, 10_000),
            st.integers(0, 3),
            st.text(
                st.sampled_from('{}[]",:.-+eE0123456789 \t\n\\uNaIfty\x00\x7f\ufeff\ud800é'),
                max_size=3,
            ),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_agrees_on_mutated_texts(value: Any, edits: list[tuple[int, int, str]]) -> None:
    text = json.dumps(value)
    for where, cut, insert in edits:
        at = where % (len(text) + 1)
        text = text[:at] + insert + text[at + cut :]
    agrees(text)
    raw = _as_bytes(text)
    if raw is not None:
        agrees(raw)


_NUMBER = r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][+-]?[0-9]{1,4})?"


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.from_regex(_NUMBER, fullmatch=True))
def test_agrees_on_numbers(number: str) -> None:
    agrees(number)
    agrees(f'{{"n":{number}}}')
    agrees(f"[{number},{number}]")


@pytest.mark.parametrize(
    ("text", "decoded"),
    [
        # Where orjson reads a value and the standard library reads the same.
        ('{"a":1,"a":2}', {"a": 2}),
        ('{"id":"call_1","n":-0.0,"m":-0}', {"id": "call_1", "n": -0.0, "m": 0}),
        ("18446744073709551615", UNDECODED),  # 20 digits: left, though orjson reads it right
        ("123456789012345678", 123456789012345678),  # 18 digits: orjson's
        ('"\\u00e9\\ud83d\\ude00"', "é😀"),
        (" [1 , 2] \n", [1, 2]),
        # Where orjson would read otherwise: left to the standard library.
        ("123456789012345678901234567890", UNDECODED),  # a float to orjson
        ("-9223372036854775809", UNDECODED),
        ('"1234567890123456789"', UNDECODED),  # a digit run in a string is left too
        # Where orjson refuses: left to the standard library, which reads or refuses it.
        ('"\\ud800"', UNDECODED),
        ("NaN", UNDECODED),
        ("-Infinity", UNDECODED),
        ("1e400", UNDECODED),
        ("\ufeff{}", UNDECODED),
        ("[" * 1100 + "]" * 1100, UNDECODED),
        ("{} x", UNDECODED),
        ("", UNDECODED),
        # Longer than a MiB: the standard library's (no copies of the text held).
        ('"' + "x" * _json.LONGEST + '"', UNDECODED),
    ],
)
def test_cases(text: str, decoded: Any) -> None:
    got = exact_loads(text)
    if decoded is UNDECODED:
        assert got is UNDECODED
    else:
        assert same(got, decoded)
        assert same(json.loads(text), decoded)
    agrees(text)


def test_a_lone_surrogate_in_text_is_the_standard_librarys() -> None:
    assert exact_loads('"\ud800"') is UNDECODED
    assert exact_loads(b'"\xed\xa0\x80"') is UNDECODED  # not UTF-8


@pytest.fixture
def without_orjson(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if orjson were not installed."""
    monkeypatch.setattr(_json._Orjson, "loads", None)
    monkeypatch.setattr(_json._Orjson, "looked", True)


def test_without_orjson_every_text_is_left(without_orjson: None) -> None:
    assert exact_loads('{"a":1}') is UNDECODED
    assert exact_loads(b"[]") is UNDECODED


@pytest.mark.parametrize("orjson_installed", [True, False])
def test_the_decoders_read_alike_with_and_without_orjson(
    orjson_installed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not orjson_installed:
        monkeypatch.setattr(_json._Orjson, "loads", None)
        monkeypatch.setattr(_json._Orjson, "looked", True)
    else:
        monkeypatch.setattr(_json._Orjson, "loads", orjson.loads)
    arguments = '{"a": 1, "b": [2.5, null], "c": "\\u00e9"}'
    assert strict_loads(arguments) == {"a": 1, "b": [2.5, None], "c": "é"}
    assert strict_loads('{"n": 12345678901234567890123}') == {"n": 12345678901234567890123}
    for refused in ("NaN", '{"a": 1e999}', '{"a": -Infinity}'):
        with pytest.raises(NotJSONNumber):
            strict_loads(refused)
    with pytest.raises(json.JSONDecodeError, match="Expecting value"):
        strict_loads("[1,")
    assert SSEEvent(data='{"choices":[]}').json() == {"choices": []}
    assert wire_loads(b'{"error":{"code":"\\u00b2"}}') == {"error": {"code": "²"}}
    with pytest.raises(ValueError, match="not a JSON number"):
        wire_loads('{"a": NaN}')


def test_orjson_is_imported_on_first_use_only() -> None:
    """``import toolfold`` does not import orjson: the first decode does."""
    import subprocess
    import sys

    code = (
        "import sys, toolfold\n"
        "print('orjson' in sys.modules)\n"
        "from toolfold.toolkit._arguments import strict_loads\n"
        "strict_loads('{}')\n"
        "print('orjson' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
