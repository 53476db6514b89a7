"""The retry loop of the transport, written once as a plan (pure: no sleep, no socket).

`attempts` is a generator, like httpx's ``Auth.auth_flow`` and toolfold's own
``run_loop``: given what the first attempt gave (the response that started, a
`Failed` answer: a status >= 300 and its body, or the exception the client
raised), it yields `Sleep` (wait before the next attempt) and `Send` (make one
attempt with these timeouts) and receives each attempt's outcome. It returns
the response to use or raises the mapped `ProviderError`. The transport's two
shells (async and blocking) only perform what it yields, and make the first
attempt before planning (`first_timeouts`), so a call answered at once builds
no plan.

What is sent again, exactly: a status or error the `RetryPolicy` calls
retryable, while retries are left and the wait fits in the total timeout. A
connection that could not be opened (the request was never written) is a
`ProviderConnectionError`; one that dropped after the request was written is one too,
and both are retried only when ``retry_connection_errors`` is on; a timeout only
when ``retry_timeouts`` is on. An answer that arrived but is not HTTP (a bad
status line, an unasked 101) is a `ProviderConnectionError` that is never sent
again: the server read the request and answered, which no policy setting calls
a lost connection. Once a 2xx answer has started nothing is sent again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Mapping
from typing import Any

import attrs

from toolfold._errors import ProviderConnectionError, ProviderError, ProviderTimeoutError
from toolfold.adapters._http._retry import RetryPolicy, Timeouts
from toolfold.toolkit._results import one_line

__all__ = ["Failed", "Plan", "Send", "Sleep", "attempts", "cut_timeouts"]

_log = logging.getLogger("toolfold.http")


@attrs.frozen
class Send:
    """Make one attempt; ``timeout`` is None to use the client's own timeouts."""

    timeout: Timeouts | None


@attrs.frozen
class Sleep:
    """Wait this many seconds before the next attempt.

    ``retry`` is the retry it precedes (1 for the first), ``cause`` the error of
    the attempt before it: what a trace shows of the retry (`retrying`).
    """

    seconds: float
    retry: int = 0
    cause: ProviderError | None = None


@attrs.frozen
class Failed:
    """An answer with a status >= 300, its body read (and the connection released).

    ``cut``: how the body stopped before its end, for the error's message
    (``"its body was cut before its end"``: the connection closed, or its
    gzip/deflate data stops short; ``"the read of its body timed out before
    its end"``), empty when it arrived whole; ``text`` is what arrived of it.
    """

    status: int
    headers: Mapping[str, str]
    text: str
    cut: str = ""


@attrs.frozen
class Plan:
    """What `attempts` needs to decide, bound once per call by the transport.

    Attributes:
        policy: The retry policy.
        timeouts: The timeouts each attempt is capped by, or None for the client's.
        deadline: When the whole call must end (on ``clock``), or None.
        clock: A monotonic clock.
        random: A float in [0, 1), for the jitter.
        status_failure: Maps a `Failed` answer to its error and the body's
            retry verdict and hint: ``(error, retryable, hint)``.
        exception_failure: Maps a client exception to its `ProviderError` and
            whether it may be sent again: ``(error, retryable)``, ``retryable``
            False when the answer arrived but is not HTTP, else None (the
            policy decides by the error's class). Re-raises exceptions that
            are not the client's.
        total_timeout: The error for a call that ran past ``deadline``.
        label: ``POST <url>``, for the log.
        cap: Cut each attempt's timeouts to the time left before ``deadline``
            (off when the shell bounds the whole call with one timeout).
    """

    policy: RetryPolicy
    timeouts: Timeouts | None
    deadline: float | None
    clock: Callable[[], float]
    random: Callable[[], float]
    status_failure: Callable[[Failed], tuple[ProviderError, bool | None, float | None]]
    exception_failure: Callable[[BaseException], tuple[ProviderError, bool | None]]
    total_timeout: Callable[[], ProviderTimeoutError]
    label: str
    cap: bool = True


Outcome = Any  # a started response, a `Failed` answer, or an exception


def attempts(plan: Plan, first: Outcome) -> Generator[Send | Sleep, Outcome, Any]:
    """Attempts after ``first`` until one answers with status < 300; returns that response.

    The error raised at the end says how many attempts were made and why no
    other was (`_gave_up`).
    """
    retry = 0
    outcome = first
    while True:
        if isinstance(outcome, BaseException):
            error, retryable = plan.exception_failure(outcome)
            wanted = None if retryable is False else _exception_delay(plan, retry, error)
            delay = _fits(plan, wanted)
            if delay is None:
                raise _gave_up(plan, retry, error, outcome, wanted) from outcome
        elif isinstance(outcome, Failed):
            error, retryable, hint = plan.status_failure(outcome)
            wanted = plan.policy.status_delay(
                retry,
                outcome.status,
                outcome.headers,
                retryable=retryable,
                hint=hint,
                random=plan.random(),
                now=time.time(),
            )
            delay = _fits(plan, wanted)
            if delay is None:
                raise _gave_up(plan, retry, error, outcome, wanted)
        else:
            return outcome
        _log.info(
            "retrying %s in %.2f s (retry %d of %d) after: %s",
            plan.label,
            delay,
            retry + 1,
            plan.policy.max_retries,
            one_line(str(error)),  # (the provider's text: a newline in it would forge a record)
        )
        yield Sleep(delay, retry + 1, error)
        retry += 1
        outcome = yield Send(_capped(plan))


def _exception_delay(plan: Plan, retry: int, error: ProviderError) -> float | None:
    policy = plan.policy
    if retry >= policy.max_retries:
        return None
    if isinstance(error, ProviderTimeoutError):
        if not policy.retry_timeouts:
            return None
    elif not (isinstance(error, ProviderConnectionError) and policy.retry_connection_errors):
        return None
    return policy.backoff(retry, plan.random())


def _gave_up(
    plan: Plan,
    retry: int,
    error: ProviderError,
    outcome: Outcome,
    wanted: float | None,
) -> ProviderError:
    """``error``, the last attempt's, with a note on its message: how many attempts were
    made and why no other was, when that is not plain from the error (logged at INFO).

    ``wanted``: the wait the policy would have made (None when it would not retry).
    The error's class and attributes stay as they are; the note holds numbers only.
    """
    policy = plan.policy
    said = [f"{retry + 1} attempts"] if retry else []
    past = plan.deadline is not None and plan.clock() >= plan.deadline  # (the error says so)
    if wanted is not None:  # a retry the total timeout has no room for
        if not past:
            said.append(
                f"not retried: a wait of {_seconds(wanted)} s would end past the total timeout"
            )
    elif retry >= policy.max_retries and policy.max_retries:
        said.append(f"max_retries={policy.max_retries} used up")
    elif (
        isinstance(outcome, Failed)
        and retry < policy.max_retries
        and _retried(plan, outcome, error)
    ):
        asked = error.retry_after  # (the headers', else the body's: `status_error`)
        if asked is not None and asked > policy.max_retry_after:
            said.append(
                f"not retried: the server asked for a wait of {_seconds(asked)} s, over "
                f"max_retry_after={_seconds(policy.max_retry_after)} s"
            )
    read = plan.timeouts.read if plan.timeouts is not None else None
    if read is not None and not past and _read_timeout(outcome):
        said.append(f"the read timeout is {_seconds(read)} s")
    if said:
        note = "; ".join(said)
        error.args = (f"{error.args[0]} ({note})", *error.args[1:]) if error.args else (note,)
        _log.info(
            "giving up on %s after %d attempt%s: %s",
            plan.label,
            retry + 1,
            "s" if retry else "",
            one_line(str(error)),  # (the provider's text: a newline in it would forge a record)
        )
    return error


def _seconds(value: float) -> str:
    """``value`` seconds as a note shows them: ``0.95``, ``500``, ``inf``."""
    return f"{value:.2f}".rstrip("0").rstrip(".") if value < float("inf") else "inf"


def _retried(plan: Plan, failed: Failed, error: ProviderError) -> bool:
    """Whether the policy sends ``failed``'s request again, but for the wait it asks
    (the error's verdict, as `RetryPolicy.status_delay` reads it, else its status)."""
    if error.retryable is not None:
        return error.retryable
    return plan.policy.should_retry_status(failed.status, failed.headers)


def _read_timeout(exc: Outcome) -> bool:
    """Whether ``exc``, a client's, is its read timeout (httpx's ``ReadTimeout``, aiohttp's
    ``SocketTimeoutError``): the one limit its message does not name."""
    if not isinstance(exc, BaseException):
        return False
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"ReadTimeout", "SocketTimeoutError"})


def _fits(plan: Plan, delay: float | None) -> float | None:
    # A retry that cannot finish before the total deadline only wastes the wait.
    if delay is None or plan.deadline is None:
        return delay
    return delay if plan.clock() + delay < plan.deadline else None


def _capped(plan: Plan) -> Timeouts | None:
    """The attempt's timeouts, each cut to what is left before the deadline."""
    if plan.deadline is None or not plan.cap:
        return plan.timeouts
    remaining = plan.deadline - plan.clock()
    if remaining <= 0:
        raise plan.total_timeout()
    return cut_timeouts(plan.timeouts, remaining)


def cut_timeouts(timeouts: Timeouts | None, remaining: float) -> Timeouts:
    """``timeouts`` (None: no limits) with each cut to ``remaining`` seconds, and no total."""
    t = timeouts or Timeouts()

    def cap(value: float | None) -> float:
        return remaining if value is None else min(value, remaining)

    return Timeouts(
        connect=cap(t.connect), read=cap(t.read), write=cap(t.write), pool=cap(t.pool), total=None
    )
