"""The retry policy and timeouts as plain data: delays, headers, limits."""

from __future__ import annotations

import email.utils
from decimal import Decimal
from fractions import Fraction
from typing import Any

import attrs
import httpx
import multidict
import pytest
from backends import httpx2
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy_like import Int64

import toolfold
from toolfold import ModelConfigError
from toolfold.adapters._http._retry import (
    DEFAULT_RETRY_STATUSES,
    RetryPolicy,
    Timeouts,
    retry_after_seconds,
    should_retry_hint,
)


def test_defaults_match_the_official_sdks() -> None:
    """Two retries, 0.5 s doubling to 8 s, and the statuses the OpenAI/Anthropic SDKs retry."""
    policy = RetryPolicy()
    assert policy.max_retries == 2
    assert [policy.backoff(n, 0.0) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert {408, 409, 429} == DEFAULT_RETRY_STATUSES
    assert policy.retry_server_errors


@pytest.mark.parametrize("status", [500, 501, 502, 503, 504, 520, 524, 529, 599])
def test_every_server_error_is_retried(status: int) -> None:
    """Every 5xx is retried (Cloudflare's 520/524, 501...), unless server errors are switched off."""
    assert RetryPolicy().status_delay(0, status, {}) == 0.5
    assert RetryPolicy().should_retry_status(status, {})
    off = RetryPolicy(retry_server_errors=False)
    assert off.status_delay(0, status, {}) is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 499])
def test_client_errors_are_not_retried_by_status(status: int) -> None:
    """4xx other than 408/409/429 is never retried by status."""
    assert RetryPolicy().status_delay(0, status, {}) is None


@settings(max_examples=50)
@given(retry=st.integers(0, 20), rand=st.floats(0.0, 0.999))
def test_jitter_stays_within_its_share(retry: int, rand: float) -> None:
    """Jitter only shortens a backoff, by at most the jitter share."""
    policy = RetryPolicy(jitter=0.25)
    full = policy.backoff(retry, 0.0)
    assert 0.75 * full <= policy.backoff(retry, rand) <= full


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"retry-after-ms": "x", "retry-after": "4"}, 4.0),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after-ms": "inf", "retry-after": "3"}, 3.0),  # not an endless wait
        ({"retry-after-ms": "infinity"}, None),
        # Only digits (and a fraction): what float() also reads is nonsense here.
        ({"retry-after": "1_0"}, None),
        ({"retry-after": "+3"}, None),
        ({"retry-after": "1e3"}, None),
        ({"retry-after": "\u0661\u0662"}, None),  # Arabic-Indic digits
        # Dates the calendar cannot hold (ValueError, OverflowError in timegm).
        ({"retry-after": "Fri, 31 Dec 99999 23:59:59 GMT"}, None),
        ({"retry-after": "Fri, 31 Dec 999999999999999999999 23:59:59 GMT"}, None),
        ({"retry-after-ms": "+5", "retry-after": " 7 "}, 7.0),
        ({"retry-after": "0.30000000000000004"}, 0.30000000000000004),  # a float in full
        ({"retry-after": "5."}, 5.0),
        ({"retry-after": ".5"}, 0.5),
        ({"retry-after-ms": "1234.5678901234"}, 1.2345678901234),
        ({}, None),
    ],
)
def test_retry_after_headers(headers: dict[str, str], expected: float | None) -> None:
    """retry-after-ms, then retry-after in seconds; nonsense is ignored."""
    assert retry_after_seconds(headers) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "9" * 13}, 9_999_999_999_999.0),
        ({"retry-after": "9" * 26}, 1e26),
        ({"retry-after-ms": "9" * 23}, 1e23 / 1000),
        ({"retry-after": "9" * 400}, float("inf")),  # past a float: inf, not an OverflowError
        ({"retry-after": "9" * 400 + ".5"}, float("inf")),
    ],
)
def test_a_wait_of_any_number_of_digits_is_read(headers: dict[str, str], expected: float) -> None:
    """A retry-after of 13 digits or more is a (long) wait, not nonsense; past a float it is inf."""
    assert retry_after_seconds(headers) == expected
    assert RetryPolicy(max_retry_after=86_400).delay(0, headers, None, 0.0) is None


def test_a_wait_beyond_12_digits_goes_to_the_caller_not_the_backoff() -> None:
    """13 digits were read as nonsense and the request retried after the backoff; now it is too long."""
    policy = RetryPolicy()
    assert policy.status_delay(0, 429, {"retry-after": "1" + "0" * 12}) is None
    assert policy.status_delay(0, 429, {"retry-after-ms": "1" + "0" * 20}) is None


def _repeated(kind: str, pairs: list[tuple[str, str]]) -> Any:
    """Headers holding ``pairs`` (a name may repeat) as each client hands them over."""
    if kind == "httpx":
        return httpx.Headers(pairs)
    if kind == "httpx2":
        return httpx2.Headers(pairs) if httpx2 is not None else httpx.Headers(pairs)
    return multidict.CIMultiDictProxy(multidict.CIMultiDict(pairs))  # aiohttp's


HEADER_KINDS = ["httpx", "httpx2", "aiohttp"]


@pytest.mark.parametrize("kind", HEADER_KINDS)
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["300", "300"], 300.0),
        (["5", "300"], 300.0),  # conflicting: the longest wait
        (["300", "5"], 300.0),
        (["soon", "7"], 7.0),  # nonsense beside a number: the number
        (["soon", "later"], None),
    ],
)
def test_a_repeated_retry_after_counts_for_its_longest_wait(
    kind: str, values: list[str], expected: float | None
) -> None:
    """A retry-after sent twice is read line by line on every client: httpx's "300, 300" was nonsense."""
    headers = _repeated(kind, [("retry-after", value) for value in values])
    assert retry_after_seconds(headers) == expected
    ms = _repeated(kind, [("retry-after-ms", "2000"), ("Retry-After-Ms", "1000")])
    assert retry_after_seconds(ms) == 2.0


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("retry-after", "300, 300", 300.0),  # one line a merging proxy made
        ("retry-after", "5,300", 300.0),
        ("retry-after-ms", "2000, 1000", 2.0),
        (
            "retry-after",
            "300, soon",
            300.0,
        ),  # a part that is no delay is ignored, as on its own line
        ("retry-after", "soon, 300, -1", 300.0),
        ("retry-after-ms", "300000, soon", 300.0),
        ("retry-after", "soon, later", None),  # no part is a wait: nonsense
    ],
)
def test_one_line_of_merged_delays_counts_for_its_longest(
    name: str, value: str, expected: float | None
) -> None:
    """retry-after: 300, 300 on one line (a proxy merged two) is its longest wait, parts that are no wait ignored."""
    assert retry_after_seconds({name: value}) == expected
    policy = RetryPolicy(max_retry_after=60.0)
    assert (policy.status_delay(0, 429, {name: value}) is None) is (expected == 300.0)


def test_an_http_date_is_not_split_on_its_comma() -> None:
    """A date's own comma (Wed, 21 Oct ...) is no list of delays: the date is read."""
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now) == pytest.approx(30.0)


PAST = "Wed, 21 Oct 2015 07:28:00 GMT"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"300, {PAST}", 300.0),  # a delay and a date one proxy merged: the date, past, is 0
        (f"{PAST}, 300", 300.0),  # the date first: its trailing delay was dropped
        (f"3, {PAST}, 5", 5.0),
        (f"{PAST}, {PAST}", 0.0),
        ("3, Wednesday, 21-Oct-15 07:28:00 GMT", 3.0),  # RFC 850's date, its day in full
        ("3, Wed Oct 21 07:28:00 2015", 3.0),  # asctime's, with no comma
        (f"300, {PAST}, soon", 300.0),  # a part that is no wait is ignored: the others count
        ("300, Wed", 300.0),  # a day name with no date after it is no wait
        ("300, Fri, 31 Dec 99999 23:59:59 GMT", 300.0),  # nor a date the calendar cannot hold
        ("Wed, Fri, 31 Dec 99999 23:59:59 GMT", None),  # no part a wait: nonsense
    ],
)
def test_a_merged_line_of_delays_and_dates_counts_for_its_longest(
    value: str, expected: float | None
) -> None:
    """retry-after: 300, <HTTP date> on one line is its longest wait, a date's own comma kept."""
    assert retry_after_seconds({"retry-after": value}, 1_700_000_000.0) == expected


def test_a_merged_future_date_beside_a_delay_is_its_longest_wait() -> None:
    """retry-after: 300, <a date 600 s ahead> waits 600 s (too long to retry by default)."""
    now = 1_700_000_000.0
    ahead = email.utils.formatdate(now + 600, usegmt=True)
    for value in (f"300, {ahead}", f"{ahead}, 300"):
        assert retry_after_seconds({"retry-after": value}, now) == pytest.approx(600.0)
        assert RetryPolicy().delay(0, {"retry-after": value}, None, 0.0, now) is None
    assert retry_after_seconds({"retry-after": f"{ahead}, 900"}, now) == 900.0


@pytest.mark.parametrize("kind", HEADER_KINDS)
@pytest.mark.parametrize(
    "values",
    [
        ["600", "soon"],
        ["Tue, 14 Nov 2023 22:23:20 GMT", "soon"],
        ["soon", "Tue, 14 Nov 2023 22:23:20 GMT", "1e3"],
    ],
)
def test_a_merged_line_with_a_part_that_is_no_wait_reads_as_its_lines_apart(
    kind: str, values: list[str]
) -> None:
    """600 s beside nonsense waits 600 s whether sent as lines or merged into one: not retried after the backoff."""
    now = 1_700_000_000.0
    apart = _repeated(kind, [("retry-after", value) for value in values])
    merged = {"retry-after": ", ".join(values)}
    assert retry_after_seconds(apart, now) == retry_after_seconds(merged, now) == 600.0
    assert RetryPolicy().delay(0, merged, None, 0.0, now) is None


@pytest.mark.parametrize("kind", HEADER_KINDS)
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["false", "false"], False),
        (["true", "false"], False),  # conflicting: not sent again
        (["false", "true"], False),
        (["true", "true"], True),
        (["false, false"], False),  # one line holding a list
        (["true", "maybe"], None),  # nonsense: no verdict, the status decides
    ],
)
def test_a_repeated_x_should_retry_is_read_on_every_client(
    kind: str, values: list[str], expected: bool | None
) -> None:
    """x-should-retry sent twice decides alike everywhere, and any "false" keeps the request unsent."""
    headers = _repeated(kind, [("x-should-retry", value) for value in values])
    assert should_retry_hint(headers) is expected
    policy = RetryPolicy()
    assert policy.should_retry_status(500, headers) is (expected is not False)
    assert (policy.status_delay(0, 500, headers) is None) is (expected is False)


def test_retry_after_http_date() -> None:
    """retry-after may be an HTTP date: the wait is the time until then."""
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now) == pytest.approx(30.0)
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert retry_after_seconds({"retry-after": past}, now) == 0.0


def test_delay_order_and_limit() -> None:
    """Header wait, then the body's hint, then backoff; more than max_retry_after is refused."""
    policy = RetryPolicy()
    assert policy.delay(0, {"retry-after": "3"}, 9.0, 0.0) == 3.0
    assert policy.delay(0, {}, 9.0, 0.0) == 9.0
    assert policy.delay(1, {}, None, 0.0) == 1.0
    assert policy.delay(0, {"retry-after": "121"}, None, 0.0) is None
    assert RetryPolicy(max_retry_after=600).delay(0, {"retry-after": "121"}, None, 0.0) == 121.0


@pytest.mark.parametrize("option", ["max_retry_after", "initial_delay", "max_delay"])
@pytest.mark.parametrize(
    "bad", [float("inf"), float("nan"), None, -1.0, True, 86_400.5, 1e12, 10**400]
)
def test_a_wait_that_is_not_a_finite_number_of_seconds_is_refused(option: str, bad: Any) -> None:
    """``max_retry_after=inf`` is no "honour any wait": it, and the delays, must be finite.

    inf was accepted, so one ``retry-after: 999999999999`` stalled the call; None was
    accepted too and failed as a TypeError at the first retry. A finite bound past a
    day is refused too: 1e12 let that header crash the blocking sleep (OverflowError).
    """
    with pytest.raises(ModelConfigError, match=f"^RetryPolicy.{option} must be a finite number"):
        RetryPolicy(**{option: bad})
    with pytest.raises(ValueError, match="finite"):  # a ModelConfigError is a ValueError too
        RetryPolicy(**{option: bad})


def test_a_large_finite_max_retry_after_honours_long_waits() -> None:
    """The way to honour long waits: a large bound (with a total timeout to end the call)."""
    policy = RetryPolicy(max_retry_after=86_400)
    assert policy.delay(0, {"retry-after": "3600"}, None, 0.0) == 3600.0


def test_x_should_retry() -> None:
    """x-should-retry overrides the status list either way."""
    policy = RetryPolicy()
    assert policy.should_retry_status(400, {"x-should-retry": "true"})
    assert not policy.should_retry_status(503, {"X-Should-Retry": "false"})
    assert policy.should_retry_status(529, {})
    assert not policy.should_retry_status(401, {})


def test_invalid_settings_are_refused() -> None:
    """Negative retries, waits or timeouts and a jitter above 1 are errors naming the field."""
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=2.0)
    with pytest.raises(ValueError, match="read"):
        Timeouts(read=-1.0)


def test_policies_are_frozen_data() -> None:
    """Policies are frozen and changed with attrs.evolve; statuses become a frozenset."""
    policy = attrs.evolve(RetryPolicy(), retry_statuses=[429])
    assert policy.retry_statuses == frozenset({429})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        policy.max_retries = 3  # type: ignore[misc]


def test_status_delay_order_of_verdicts() -> None:
    """x-should-retry beats the body's verdict, which beats the status list; the count caps all."""
    policy = RetryPolicy()
    assert policy.status_delay(0, 429, {}) == 0.5
    assert policy.status_delay(0, 429, {}, retryable=False) is None
    assert policy.status_delay(0, 400, {}, retryable=True) == 0.5
    assert policy.status_delay(0, 429, {"x-should-retry": "true"}, retryable=False) == 0.5
    assert policy.status_delay(0, 503, {"x-should-retry": "false"}) is None
    assert policy.status_delay(2, 503, {}) is None
    assert policy.status_delay(0, 429, {}, hint=12.0) == 12.0


@pytest.mark.parametrize(
    ("option", "bad"),
    [
        ("max_retries", -1),
        ("max_retries", 1.5),
        ("max_retries", "3"),
        ("max_retries", True),
        ("max_retries", None),
        ("jitter", -0.1),
        ("jitter", 2.0),
        ("jitter", float("nan")),
        ("jitter", "0.5"),
        ("jitter", True),
        ("retry_statuses", 429),
        ("retry_statuses", "429"),
        ("retry_statuses", {200}),
        ("retry_statuses", {429, "503"}),
        ("retry_statuses", {True}),
        ("retry_server_errors", "no"),
        ("retry_connection_errors", 0),
        ("retry_timeouts", None),
    ],
)
def test_a_retry_policy_field_that_cannot_be_used_is_a_model_config_error(
    option: str, bad: Any
) -> None:
    """Each RetryPolicy field refuses a wrong value with a ModelConfigError naming it.

    ``max_retries=1.5`` and a truthy string flag were taken silently, ``max_retries="3"``
    was a TypeError from a comparison, and ``max_retries=-1`` attrs' bare ValueError.
    """
    with pytest.raises(ModelConfigError, match=f"^RetryPolicy.{option} must "):
        RetryPolicy(**{option: bad})


@pytest.mark.parametrize("option", ["connect", "read", "write", "pool", "total"])
@pytest.mark.parametrize(
    "bad", [0, 0.0, -1.0, float("nan"), float("inf"), 1e12, 10**400, True, "5"]
)
def test_a_timeout_that_is_no_positive_number_of_seconds_is_refused(option: str, bad: Any) -> None:
    """Timeouts(connect=0) is refused, naming the field: 0 meant no time on httpx, no limit on aiohttp."""
    with pytest.raises(ModelConfigError, match=f"^Timeouts.{option} must be a number of seconds"):
        Timeouts(**{option: bad})


def test_usable_retry_and_timeout_values_are_kept() -> None:
    """The boundaries that make sense stay accepted: 0 retries, jitter 0-1, a tiny or day-long timeout, None."""
    policy = RetryPolicy(max_retries=0, jitter=1, retry_statuses=[429, 503], retry_timeouts=False)
    assert (policy.max_retries, policy.retry_statuses) == (0, frozenset({429, 503}))
    assert Timeouts(connect=0.001, read=86_400, total=None).connect == 0.001
    assert Timeouts.of(5) == Timeouts(read=5.0, write=5.0, total=5.0)


@pytest.mark.parametrize("retry", [-1, 2.5, True, "3"])
def test_a_bad_retry_option_is_refused_when_the_model_is_built(retry: Any) -> None:
    """toolfold.model(retry=-1 / 2.5 / True) is a ModelConfigError naming the option (2.5 was "never retry")."""
    with pytest.raises(ModelConfigError, match=r"^retry=.* is not valid: expected a RetryPolicy"):
        toolfold.model("openai:gpt-4o-mini", api_key="sk-x", retry=retry)


@pytest.mark.parametrize("timeout", [0, 0.0, True, float("inf")])
def test_a_zero_timeout_option_is_refused_when_the_model_is_built(timeout: Any) -> None:
    """toolfold.model(timeout=0) is a ModelConfigError naming the option: None is "no limit"."""
    with pytest.raises(ModelConfigError, match=r"^timeout=.* is not valid: expected a Timeouts"):
        toolfold.model("openai:gpt-4o-mini", api_key="sk-x", timeout=timeout)


@pytest.mark.parametrize("seconds", [Decimal("2.5"), Fraction(5, 2), Int64(30)])
def test_a_real_number_of_seconds_of_any_type_is_taken_as_a_float(seconds: Any) -> None:
    """Timeouts, Timeouts.of, timeout= and RetryPolicy delays take Decimal, Fraction or numpy-like numbers."""
    expected = float(seconds)
    assert Timeouts(read=seconds).read == expected
    assert type(Timeouts(connect=seconds).connect) is float
    assert Timeouts.of(seconds).total == expected
    assert RetryPolicy(initial_delay=seconds).initial_delay == expected
    toolfold.model("openai:gpt-4o-mini", api_key="sk-x", timeout=seconds)


@pytest.mark.parametrize("bad", [Decimal(0), Decimal("NaN"), Decimal("Infinity"), Fraction(-1, 2)])
def test_a_real_number_outside_the_range_is_still_refused(bad: Any) -> None:
    """A Decimal or Fraction of 0, NaN, inf or below 0 is refused like the float."""
    with pytest.raises(ModelConfigError, match=r"^Timeouts\.read must be a number of seconds"):
        Timeouts(read=bad)


def test_an_integral_retry_count_of_any_type_is_taken_as_an_int() -> None:
    """retry=numpy.int64(3) and RetryPolicy(max_retries=...) take integral numbers that are no bool."""
    assert RetryPolicy(max_retries=Int64(3)).max_retries == 3
    assert type(RetryPolicy(max_retries=Int64(3)).max_retries) is int
    assert RetryPolicy(retry_statuses=[Int64(429)]).retry_statuses == frozenset({429})
    toolfold.model("openai:gpt-4o-mini", api_key="sk-x", retry=Int64(3))
    with pytest.raises(ModelConfigError, match=r"^RetryPolicy\.max_retries must be"):
        RetryPolicy(max_retries=Int64(-1))
