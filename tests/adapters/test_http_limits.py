"""HttpLimits refuses values it cannot use with a ModelConfigError naming the field."""

from __future__ import annotations

import decimal
import fractions
from typing import Any

import pytest
from numpy_like import Int64

from toolfold import ModelConfigError
from toolfold.adapters import HttpLimits

_SECONDS = "a number of seconds >= 0 and at most 86,400 (a day), or None"

_REFUSED = [
    ("max_connections", 0, "a whole number of connections >= 1", "got 0"),
    ("max_connections", 2.5, "a whole number of connections >= 1", "got 2.5"),
    ("max_connections", True, "a whole number of connections >= 1", "got True"),
    ("max_connections", "10", "a whole number of connections >= 1", "got str"),
    ("max_keepalive", -1, "a whole number of connections >= 0", "got -1"),
    ("max_keepalive", None, "a whole number of connections >= 0", "got None"),
    ("keepalive_expiry", -1.0, _SECONDS, "got -1.0"),
    ("keepalive_expiry", float("nan"), _SECONDS, "got nan"),
    ("keepalive_expiry", True, _SECONDS, "got True"),
    ("keepalive_expiry", "30", _SECONDS, "got str"),
    ("keepalive_expiry", float("inf"), _SECONDS, "got inf"),
    ("keepalive_expiry", 86_401, _SECONDS, "got 86401.0"),
    ("keepalive_expiry", 10**400, _SECONDS, "got an int of about 401 digits"),
    (
        "max_body_bytes",
        decimal.Decimal("1e1000000"),
        "a whole number of bytes >= 1",
        "got Decimal('1E+1000000')",
    ),
    ("max_body_bytes", 0, "a whole number of bytes >= 1", "got 0"),
    ("max_body_bytes", 1.5, "a whole number of bytes >= 1", "got 1.5"),
    ("max_decoded_bytes", False, "a whole number of bytes >= 1", "got False"),
    ("max_decoded_bytes", [1], "a whole number of bytes >= 1", "got list"),
]


@pytest.mark.parametrize(("field", "value", "expected", "got"), _REFUSED)
def test_http_limits_refuses_a_bad_value_naming_the_field(
    field: str, value: Any, expected: str, got: str
) -> None:
    """A bad count, expiry or byte limit is a ModelConfigError naming the field and what it takes."""
    with pytest.raises(ModelConfigError) as caught:
        HttpLimits(**{field: value})
    message = str(caught.value)
    assert message.startswith(f"HttpLimits.{field} must be {expected}")
    assert message.endswith(got)


def test_http_limits_does_not_echo_a_string_it_refuses() -> None:
    """A string put in a limit (a key pasted in the wrong place) is named by its type only."""
    with pytest.raises(ModelConfigError) as caught:
        HttpLimits(max_body_bytes="sk-secret-0123456789")  # type: ignore[arg-type]
    assert "sk-secret" not in str(caught.value)
    assert "got str" in str(caught.value)


def test_http_limits_takes_whole_numbers_of_any_type() -> None:
    """Integral numbers (numpy's) and whole floats (8e6) become ints; None stays no limit."""
    limits = HttpLimits(
        max_connections=Int64(20),  # type: ignore[arg-type]
        max_keepalive=Int64(0),  # type: ignore[arg-type]
        max_body_bytes=8e6,  # type: ignore[arg-type]
        max_decoded_bytes=None,
        keepalive_expiry=0,
    )
    assert limits == HttpLimits(20, 0, 0, 8_000_000, None)
    assert type(limits.max_connections) is int
    assert type(limits.max_body_bytes) is int


def test_http_limits_takes_whole_floats_decimals_and_fractions_as_counts() -> None:
    """10.0, Decimal(10) and Fraction(8) are whole numbers: every count and byte limit takes them."""
    limits = HttpLimits(
        max_connections=10.0,  # type: ignore[arg-type]
        max_keepalive=decimal.Decimal(5),  # type: ignore[arg-type]
        max_body_bytes=decimal.Decimal("8000000"),  # type: ignore[arg-type]
        max_decoded_bytes=fractions.Fraction(8),  # type: ignore[arg-type]
    )
    assert (limits.max_connections, limits.max_keepalive) == (10, 5)
    assert (limits.max_body_bytes, limits.max_decoded_bytes) == (8_000_000, 8)
    assert {type(getattr(limits, f)) for f in ("max_connections", "max_keepalive")} == {int}
    with pytest.raises(ModelConfigError, match="max_keepalive"):
        HttpLimits(max_keepalive=decimal.Decimal("2.5"))  # type: ignore[arg-type]


def test_http_limits_keeps_an_expiry_as_a_float_up_to_a_day() -> None:
    """An expiry of a day or less (an int, a Decimal) is kept as a float, as a Timeouts' limit."""
    assert HttpLimits(keepalive_expiry=86_400).keepalive_expiry == 86_400.0
    assert type(HttpLimits(keepalive_expiry=86_400).keepalive_expiry) is float
    assert HttpLimits(keepalive_expiry=decimal.Decimal("1.5")).keepalive_expiry == 1.5  # type: ignore[arg-type]


def test_http_limits_names_an_int_too_large_to_print_by_its_size() -> None:
    """An int past Python's 4,300 digits of repr is named by its size, not a ValueError."""
    with pytest.raises(ModelConfigError) as caught:
        HttpLimits(keepalive_expiry=10**5000)
    assert str(caught.value).endswith("got an int of about 5001 digits")
