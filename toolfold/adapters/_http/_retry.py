"""Timeouts, limits and the retry policy of the transport (plain data plus pure functions).

The policy mirrors what the official OpenAI and Anthropic SDKs do, so a
toolfold model behaves like the SDK a user knows: retry 408, 409, 429, every
5xx (500-599, Cloudflare's 520-524 too) and lost connections, twice by default, waiting ``retry-after-ms``, else
``retry-after`` (seconds or an HTTP date), else the provider's own hint (Gemini's
``RetryInfo.retryDelay``), else an exponential backoff from 0.5 s to 8 s with
jitter. ``x-should-retry: true|false`` overrides the status check. A server that
asks for a wait longer than ``max_retry_after`` (120 s) is not retried: the error
goes to the caller with ``retry_after`` set, so a scheduler can decide.
"""

from __future__ import annotations

import decimal
import email.utils
import fractions
import numbers
import operator
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from toolfold._errors import DEFAULT_MAX_RETRY_AFTER, ModelConfigError
from toolfold.runtime.core._config import is_count
from toolfold.runtime.core._repr import HUGE, value_or_type

#: Statuses below 500 worth another attempt; every status >= 500 is retried too
#: (``RetryPolicy.retry_server_errors``), as the OpenAI and Anthropic SDKs do.
DEFAULT_RETRY_STATUSES = frozenset({408, 409, 429})


#: The longest timeout (and wait) toolfold takes, in seconds: a day. None is
#: "no limit"; a finite value past about 1e10 s overflows a socket's timeout
#: (``OverflowError: timestamp out of range for platform time_t``).
_LONGEST_WAIT = 86_400


def _is_seconds(value: Any, *, zero: bool) -> bool:
    """Whether ``value`` is a number of seconds up to a day (above 0 unless ``zero``).

    bool is an int, but True is no number of seconds; NaN compares false and an
    int too large for a float is compared exactly, so both fail the range check.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    low = value >= 0 if zero else value > 0
    return low and value <= _LONGEST_WAIT


def _seconds(value: Any) -> Any:
    """A real number of seconds as a float (Decimal, Fraction, numpy's numbers); anything else as it is.

    An int or float is kept as given; a bool, a string or what no float holds
    (an int past the largest float) is left for the validator to refuse by
    its own repr.
    """
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        try:
            return float(value)
        except (OverflowError, ValueError, TypeError):
            return value
    return value


def _count(value: Any) -> Any:
    """An integral number (numpy's int64 included) as an int; anything else as it is (a bool too)."""
    if isinstance(value, (bool, int)) or not isinstance(value, numbers.Integral):
        return value
    return operator.index(value)


def _timeout(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    # 0 is no "no limit": httpx reads it as no time at all (a connect then fails
    # with EINPROGRESS, reported as a connection error, not a timeout) where
    # aiohttp reads it as no limit. None says "no limit" on every client.
    if value is not None and not _is_seconds(value, zero=False):
        raise ModelConfigError(
            f"Timeouts.{attribute.name} must be a number of seconds above 0 and at most "
            f"{_LONGEST_WAIT:,} (a day), or None for no limit, got {value!r}"
        )


@attrs.frozen
class Timeouts:
    """How long the transport waits, in seconds (None: no limit).

    Attributes:
        connect: To open a connection (TCP and TLS).
        read: Between two pieces of the response (a stalled stream times out).
        write: To send the request body.
        pool: To get a connection from a full pool.
        total: For the whole call, retries and the streamed body included.

    Raises:
        ModelConfigError: A limit that is not None and not a number of seconds
            above 0 and at most 86,400 (a day): 0, a negative number, NaN,
            ``inf``, a bool or a string. None is "no limit" on every client.
    """

    connect: float | None = attrs.field(default=10.0, converter=_seconds, validator=_timeout)
    read: float | None = attrs.field(default=600.0, converter=_seconds, validator=_timeout)
    write: float | None = attrs.field(default=600.0, converter=_seconds, validator=_timeout)
    pool: float | None = attrs.field(default=60.0, converter=_seconds, validator=_timeout)
    total: float | None = attrs.field(default=None, converter=_seconds, validator=_timeout)

    @classmethod
    def of(cls, value: Timeouts | float | None) -> Timeouts:
        """A `Timeouts` from a number (read, write and total, with the default connect) or None.

        Raises:
            ModelConfigError: ``value`` is neither a `Timeouts`, None nor a
                number of seconds above 0 and at most 86,400 (a day).
        """
        if isinstance(value, Timeouts):
            return value
        if value is None:
            return cls(connect=None, read=None, write=None, pool=None, total=None)
        seconds: Any = _seconds(value)
        if not _is_seconds(seconds, zero=False):
            raise ModelConfigError(
                "expected a Timeouts, None (no limit) or a number of seconds above 0 and "
                f"at most {_LONGEST_WAIT:,} (a day), got {value!r}"
            )
        return cls(read=float(seconds), write=float(seconds), total=float(seconds))


def _whole(value: Any) -> Any:
    """A whole number as an int: numpy's integers, a float such as ``8e6``, an
    integral Decimal or Fraction (``Decimal(10)``); anything else as it is."""
    if isinstance(value, (float, decimal.Decimal, fractions.Fraction)) and not isinstance(
        value, bool
    ):
        number: float | decimal.Decimal | fractions.Fraction = value
        try:  # (inf, NaN, past Decimal's range, past HUGE: left for the validator, as 1e100000 is)
            if abs(float(number)) < HUGE and number == int(number):
                return int(number)
        except (ArithmeticError, ValueError):
            pass
        return value
    return _count(value)


def _connections(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not is_count(value, 1):
        raise ModelConfigError(
            f"HttpLimits.{attribute.name} must be a whole number of connections >= 1 (an int), "
            f"or None, got {value_or_type(value)}"
        )


def _keepalive(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not is_count(value, 0):
        raise ModelConfigError(
            f"HttpLimits.{attribute.name} must be a whole number of connections >= 0 (an int), "
            f"got {value_or_type(value)}"
        )


def _expiry_seconds(value: Any) -> Any:
    """Seconds as a float (`_seconds`), an int too; what no float holds is left as it is."""
    value = _seconds(value)
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # (10**400: refused by its range)
            return value
    return value


def _expiry(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    # Finite and at most a day, as a Timeouts' limit: ``inf`` or ``1e300`` is taken
    # here but breaks a request later (OverflowError from the pool's timer).
    if value is not None and not _is_seconds(value, zero=True):
        raise ModelConfigError(
            f"HttpLimits.{attribute.name} must be a number of seconds >= 0 and at most "
            f"{_LONGEST_WAIT:,} (a day), or None, got {value_or_type(value)}"
        )


def _bytes(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not is_count(value, 1):
        raise ModelConfigError(
            f"HttpLimits.{attribute.name} must be a whole number of bytes >= 1 (an int), "
            f"or None for no limit, got {value_or_type(value)}"
        )


@attrs.frozen
class HttpLimits:
    """How many connections the transport keeps, and how big an answer may be.

    The body limits hold on every backend and for streams too: an answer that
    goes past one ends with a `ProviderError` naming the limit, long before
    memory grows (a gzip bomb is inflated at most 1 MiB at a time).

    Attributes:
        max_connections: Open connections per client (the pool size).
        max_keepalive: Idle connections kept for reuse.
        keepalive_expiry: Seconds an idle connection is kept.
        max_body_bytes: Bytes read from the network for one answer (None: no limit).
        max_decoded_bytes: Bytes after decompression (gzip/deflate) for one
            answer (None: no limit).

    Raises:
        ModelConfigError: A field that cannot be used, naming it and what it
            takes: a count or a byte limit that is no whole number (a bool, a
            string, ``2.5``) or is too small, an expiry that is negative, NaN,
            past a day (86,400 s; ``inf`` too) or no number. A whole float
            (``8e6``, ``10.0``) or an integral Decimal or Fraction is taken
            as an int; an expiry is kept as a float.
    """

    max_connections: int = attrs.field(default=100, converter=_whole, validator=_connections)
    max_keepalive: int = attrs.field(default=100, converter=_whole, validator=_keepalive)
    keepalive_expiry: float = attrs.field(
        default=30.0, converter=_expiry_seconds, validator=_expiry
    )
    max_body_bytes: int | None = attrs.field(default=64 * 2**20, converter=_whole, validator=_bytes)
    max_decoded_bytes: int | None = attrs.field(
        default=128 * 2**20, converter=_whole, validator=_bytes
    )


def _finite_seconds(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    # A wait toolfold takes, or the bound on one: inf would let a single
    # retry-after header (the parser reads any number of digits, or a date in 9999)
    # stall a call for good, or crash the blocking sleep (OverflowError): so
    # does a finite bound past what `time.sleep` takes (about 9.2e9 s), so
    # the bound is a day.
    if not _is_seconds(value, zero=True):
        raise ModelConfigError(
            f"RetryPolicy.{attribute.name} must be a finite number of seconds from 0 to "
            f"{_LONGEST_WAIT:,} (a day), got {value!r}"
        )


def _retries(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ModelConfigError(
            f"RetryPolicy.{attribute.name} must be a whole number of retries >= 0 "
            f"(an int, 0: never retry), got {value!r}"
        )


def _share(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ModelConfigError(
            f"RetryPolicy.{attribute.name} must be a number from 0 to 1, got {value!r}"
        )


def _flag(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    # A truthy string ("no") would turn an option on: only True and False are taken.
    if not isinstance(value, bool):
        raise ModelConfigError(f"RetryPolicy.{attribute.name} must be True or False, got {value!r}")


def _statuses(value: Any) -> frozenset[int]:
    """``retry_statuses`` as a frozenset, each an HTTP status a failed answer can have."""
    # A string is iterable too: frozenset("429") would be {"4", "2", "9"}.
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ModelConfigError(
            f"RetryPolicy.retry_statuses must be a set of HTTP statuses, got {value!r}"
        )
    statuses = frozenset(_count(status) for status in value)  # numpy's int64 too
    # An answer below 300 is a success: it is never a failure to retry.
    bad = [
        status
        for status in statuses
        if isinstance(status, bool) or not isinstance(status, int) or not 300 <= status <= 599
    ]
    if bad:
        raise ModelConfigError(
            "RetryPolicy.retry_statuses must hold HTTP statuses from 300 to 599 (ints; "
            f"an answer below 300 is no failure), got {', '.join(sorted(map(repr, bad)))}"
        )
    return statuses


@attrs.frozen
class RetryPolicy:
    """When and how long to wait before sending a failed request again.

    Attributes:
        max_retries: Retries after the first attempt (0: never retry).
        initial_delay: The first backoff, in seconds; doubles on each retry.
        max_delay: The largest backoff, in seconds.
        jitter: The share of each backoff that is random (0.25: 75-100 %).
        retry_statuses: HTTP statuses worth another attempt.
        retry_server_errors: Also retry every status >= 500 (501, 520, 529...).
        max_retry_after: The longest server-requested wait that is honoured;
            a longer one makes the error go to the caller. Like the two
            delays, a finite number of seconds: there is no "honour any
            wait" (``inf``), which would let one header stall a call for
            good; give a large bound (at most a day) and a
            ``Timeouts(total=...)`` instead.
        retry_connection_errors: Retry when the connection failed or dropped
            before any response arrived. An answer that arrived but is not
            HTTP (a bad status line, an unasked 101) is never retried.
        retry_timeouts: Retry after a connect or read timeout.

    Raises:
        ModelConfigError: A field that cannot be used, naming it: a delay or
            ``max_retry_after`` that is not a number of seconds from 0 to
            86,400 (a day) (``inf``, NaN, None, a negative number, or a longer
            wait than any sleep should take); a ``max_retries`` that is not an
            int >= 0 (1.5, "3", True); a ``jitter`` outside 0-1; a
            ``retry_statuses`` entry that is no status from 300 to 599; a
            flag that is not a bool.
    """

    max_retries: int = attrs.field(default=2, converter=_count, validator=_retries)
    initial_delay: float = attrs.field(default=0.5, converter=_seconds, validator=_finite_seconds)
    max_delay: float = attrs.field(default=8.0, converter=_seconds, validator=_finite_seconds)
    jitter: float = attrs.field(default=0.25, converter=_seconds, validator=_share)
    retry_statuses: frozenset[int] = attrs.field(
        default=DEFAULT_RETRY_STATUSES, converter=_statuses
    )
    retry_server_errors: bool = attrs.field(default=True, validator=_flag)
    max_retry_after: float = attrs.field(
        default=DEFAULT_MAX_RETRY_AFTER, converter=_seconds, validator=_finite_seconds
    )
    retry_connection_errors: bool = attrs.field(default=True, validator=_flag)
    retry_timeouts: bool = attrs.field(default=True, validator=_flag)

    def should_retry_status(self, status: int, headers: Mapping[str, str]) -> bool:
        """Whether a response with ``status`` deserves another attempt (ignoring the count)."""
        hint = should_retry_hint(headers)
        if hint is not None:
            return hint
        return self._retries_status(status)

    def _retries_status(self, status: int) -> bool:
        return status in self.retry_statuses or (self.retry_server_errors and status >= 500)

    def status_delay(
        self,
        retry: int,
        status: int,
        headers: Mapping[str, str],
        *,
        retryable: bool | None = None,
        hint: float | None = None,
        random: float = 0.0,
        now: float | None = None,
    ) -> float | None:
        """The wait before retrying a failed response, or None to give up.

        Args:
            retry: 0 for the first retry.
            status: The failed response's status.
            headers: Its headers (``x-should-retry``, ``retry-after``...).
            retryable: The body's verdict, when it has one (a per-day quota: False).
            hint: A wait the body asked for (Gemini ``retryDelay``).
            random: A number in [0, 1) for the jitter.
            now: The wall-clock time, to read an HTTP-date ``retry-after``.
        """
        if retry >= self.max_retries:
            return None
        header = should_retry_hint(headers)
        if header is not None:
            should = header
        elif retryable is not None:
            should = retryable
        else:
            should = self._retries_status(status)
        if not should:
            return None
        return self.delay(retry, headers, hint, random, now)

    def backoff(self, retry: int, random: float) -> float:
        """The backoff before retry number ``retry`` (0-based), with ``random`` in [0, 1)."""
        delay = min(self.initial_delay * 2.0**retry, self.max_delay)
        return delay * (1.0 - self.jitter * random)

    def delay(
        self,
        retry: int,
        headers: Mapping[str, str],
        hint: float | None,
        random: float,
        now: float | None = None,
    ) -> float | None:
        """The wait before retry number ``retry``, or None when the server asks for too long.

        Args:
            retry: 0 for the first retry.
            headers: The failed response's headers (empty for connection errors).
            hint: A wait the provider gave in its body (Gemini ``retryDelay``).
            random: A number in [0, 1) for the jitter.
            now: The wall-clock time, to read an HTTP-date ``retry-after``.
        """
        asked = retry_after_seconds(headers, now)
        if asked is None:
            asked = hint
        if asked is not None:
            return asked if asked <= self.max_retry_after else None
        return self.backoff(retry, random)


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a server asked for: ``retry-after-ms``, else ``retry-after`` (seconds or date).

    A header sent more than once (by a server, or by two proxies on the way)
    counts for its longest wait, on every client alike: httpx joined the lines
    into one value (``300, 300``) that read as nonsense, and the call was
    retried at once; one line of waits a proxy merged (``300, 300``, or
    ``300, Wed, 21 Oct 2015 07:28:00 GMT``: a date keeps its own comma) counts
    for its longest too. A part of such a line that is no wait (``300,
    soon``) is ignored as a line of its own would be: the line counts for
    the longest of the parts that are waits, and is nonsense only when none
    is. A number of seconds of any length is read: one past what a float
    holds is ``inf``, beyond any ``max_retry_after``, so the error goes to
    the caller (only nonsense is ignored, and the backoff used).
    """
    waits = [
        float(ms) / 1000.0
        for value in header_values(headers, "retry-after-ms")
        for ms in _delays(value)
    ]
    if waits:
        return max(waits)
    clock = time.time() if now is None else now
    for raw in header_values(headers, "retry-after"):
        # Its parts that are waits, as if each had come on a line of its own.
        waits.extend(wait for part in _parts(raw) if (wait := _wait(part, clock)) is not None)
    return max(waits) if waits else None


def _wait(part: str, now: float) -> float | None:
    """One ``retry-after`` value as seconds from ``now``: a delay, or an HTTP date (a
    past one is 0); None for nonsense (``inf``, ``-3``, ``1_0``, ``+3``, a year past 9999)."""
    if _DELAY.fullmatch(part):
        return float(part)
    parsed = email.utils.parsedate_tz(part)
    if parsed is None:
        return None
    try:
        at = email.utils.mktime_tz(parsed)
    except (ValueError, OverflowError):  # a year past 9999: no date the calendar holds
        return None
    return max(at - now, 0.0)


def _parts(value: str) -> list[str]:
    """The values in one header line a proxy may have merged: split on commas, but a
    day name before a comma stays with what follows (``Wed, 21 Oct 2015 07:28:00
    GMT``, RFC 850's ``Wednesday, 21-Oct-15 ...``: the date's own comma)."""
    pieces = [piece.strip() for piece in value.split(",")]
    parts: list[str] = []
    at = 0
    while at < len(pieces):
        if pieces[at].lower() in _DAY_NAMES and at + 1 < len(pieces):
            parts.append(f"{pieces[at]}, {pieces[at + 1]}")
            at += 2
        else:
            parts.append(pieces[at])
            at += 1
    return parts


# The day names an HTTP date starts with (IMF-fixdate's "Wed", RFC 850's "Wednesday").
_DAY_NAMES = frozenset(
    [
        "mon",
        "tue",
        "wed",
        "thu",
        "fri",
        "sat",
        "sun",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
)


def _delays(value: str) -> list[str]:
    """The delays in one header line: ``300``, or ``300, 300`` (a proxy merged two lines).

    Its parts that are no delay (``2000, soon``) are left out, as lines of their own would be.
    """
    return [part for part in (p.strip() for p in value.split(",")) if _DELAY.fullmatch(part)]


# RFC 9110's delay-seconds is digits; a fraction (some providers send one) is read too.
_DELAY = re.compile(r"(?:[0-9]+(?:\.[0-9]{0,32})?|\.[0-9]{1,32})", re.ASCII)


def should_retry_hint(headers: Mapping[str, str]) -> bool | None:
    """What ``x-should-retry`` says: True, False, or None (absent or nonsense).

    Sent more than once (or as a list, ``false, false``), any ``false`` wins:
    a request is sent again only when every value says ``true``. httpx joined
    the lines into one value, which read as nonsense, and the request was retried.
    """
    said = {
        token.strip().lower()
        for value in header_values(headers, "x-should-retry")
        for token in value.split(",")
    }
    if "false" in said:
        return False
    if said == {"true"}:
        return True
    return None


def header_values(headers: Mapping[str, str], name: str) -> list[str]:
    """Every value of header ``name`` (lower case), each line apart and stripped."""
    if not headers:
        return []
    get_list = getattr(headers, "get_list", None)  # httpx, httpx2: lines apart
    if get_list is not None:
        values: list[str] = get_list(name)
    else:
        getall = getattr(headers, "getall", None)  # aiohttp's multidict
        if getall is not None:
            values = getall(name, [])
        else:  # a plain mapping may hold any case
            values = [value for key, value in headers.items() if key.lower() == name]
    return [value.strip() for value in values]
