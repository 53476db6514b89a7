"""One call of the transport: the retry plan's two shells, the body's limits, the errors.

A `Sender` holds what every call of one `Transport` shares (its clients, retry
policy, timeouts, limits, error parser and key) and performs a `Call`: the
shells `send` / `send_sync` drive the plan of `_attempts` (sleeping and
sending only), `body` / `body_sync` read the answer within `HttpLimits` and
the total deadline and always release the connection (`fetch` does both for
a whole answer, under one timeout), and every failure leaves as a
`ProviderError` child scrubbed of the key and the base URL's password.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterator,
    Mapping,
)
from typing import Any, TypeVar

import attrs

from toolfold._errors import (
    MalformedResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    StreamError,
    UsageError,
)
from toolfold.adapters._http._attempts import Failed, Plan, attempts, cut_timeouts
from toolfold.adapters._http._backends import (
    READ_IN_PIECES,
    ClosedUnderRead,
    loop_mismatch,
    proxy_address,
)
from toolfold.adapters._http._body import BodyCut, BodyError, BodyReader, plain_limit
from toolfold.adapters._http._clients import Clients
from toolfold.adapters._http._deadlines import sync_deadline
from toolfold.adapters._http._echoes import Echoes
from toolfold.adapters._http._http_errors import (
    ErrorInfo,
    interim_answer,
    is_client_error,
    is_proxy_refusal,
    malformed_answer,
    malformed_error,
    status_error,
    transport_error,
)
from toolfold.adapters._http._json import loads_text, shallow
from toolfold.adapters._http._keys import (
    Secret,
    mask_cut_tail,
    mask_url_password,
    redact,
    redact_chain,
    redact_header,
)
from toolfold.adapters._http._retry import HttpLimits, RetryPolicy, Timeouts
from toolfold.runtime.drive._trace import retrying
from toolfold.toolkit._results import one_line

__all__ = ["Call", "Sender", "scrub_error"]

_log = logging.getLogger("toolfold.http")
_T = TypeVar("_T")

ErrorParser = Callable[[int, str, Mapping[str, str]], ErrorInfo]
"""Reads a provider's error body: ``(status, body_text, headers) -> ErrorInfo``."""


class Call:
    """One call's fixed parts: where, what, when it must end, and whether it streams.

    ``backend`` is the client its attempts went through (set as it is sent): a
    read of its body that fails once that client is closed is the model closed
    during the call (`Sender.closed_during`), not a connection error.
    """

    __slots__ = ("backend", "content", "deadline", "headers", "streaming", "url")

    def __init__(
        self,
        url: str,
        content: bytes,
        headers: dict[str, str],
        deadline: float | None,
        streaming: bool,
    ) -> None:
        self.url, self.content, self.headers = url, content, headers
        self.deadline, self.streaming = deadline, streaming
        self.backend: Any = None


@attrs.define(eq=False)
class Sender:
    """What every call of one transport shares; performs calls (see the module).

    Attributes:
        provider: The provider name, for messages.
        clients: The backends.
        retry: The retry policy.
        timeouts: Per-attempt timeouts (None: the injected client's own) and ``total``.
        limits: The body limits.
        error_parser: Reads error bodies.
        secrets: What to scrub from every error: the key, the base URL's password.
        foreign: An injected client: map whatever it raises.
        sleep: The async sleep between retries.
        sleep_sync: The blocking sleep between retries.
        random: A float in [0, 1), for the jitter.
        clock: A monotonic clock, for the total timeout.
    """

    provider: str
    clients: Clients
    retry: RetryPolicy
    timeouts: Timeouts | None
    limits: HttpLimits
    error_parser: ErrorParser
    secrets: tuple[Secret, ...] = attrs.field(repr=False)
    foreign: bool
    sleep: Callable[[float], Awaitable[None]]
    sleep_sync: Callable[[float], None]
    random: Callable[[], float]
    clock: Callable[[], float]
    # How much of an uncompressed body `fetch` takes as it is (`plain_limit`
    # of the limits, fixed with them): worked out once, not per answer.
    _plain: int = attrs.field(init=False, repr=False)
    # The secrets, looked for in every successful answer (`json`).
    echoes: Echoes = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        self._plain = plain_limit(self.limits)
        self.echoes = Echoes(self.secrets)

    def scrub(self, error: ProviderError) -> ProviderError:
        """``error`` with the secrets removed (in place; returns it)."""
        return scrub_error(error, *self.secrets)

    def _plan(self, call: Call, first: Any, *, cap: bool = True) -> Any:
        """The plan of the attempts after a first one that gave ``first`` (see `attempts`)."""
        return attempts(
            Plan(
                policy=self.retry,
                timeouts=self.timeouts,
                deadline=call.deadline,
                clock=self.clock,
                random=self.random,
                status_failure=lambda failed: self._status_failure(failed, call),
                exception_failure=lambda exc: self._exception_failure(exc, call),
                total_timeout=lambda: self.total_timeout(call.url),
                # The checked base URL (no query, no fragment) and a path toolfold
                # wrote: only a password to mask; Gemini's ?alt=sse stays readable.
                label=f"POST {mask_url_password(call.url)}",
                cap=cap,
            ),
            first,
        )

    def _first_timeouts(self, call: Call, *, cap: bool = True) -> Timeouts | None:
        """The first attempt's timeouts, cut to the time left when ``cap`` (as `attempts` does)."""
        if call.deadline is None or not cap:
            return self.timeouts
        left = call.deadline - self.clock()
        if left <= 0:
            raise self.total_timeout(call.url)
        return cut_timeouts(self.timeouts, left)

    async def fetch(
        self, url: str, content: bytes, headers: dict[str, str], deadline: float | None
    ) -> tuple[Any, bytes]:
        """POST ``content`` and read the whole answer: the response and its decoded body.

        The usual answer (no deadline, a status below 300, come whole with its
        head, uncompressed and within the limits) is taken without a `Call`:
        one is made for anything else (the deadline, the retries, a body read
        as it comes, decoded or refused), which needs the call's parts together.
        """
        if deadline is not None:
            left = deadline - self.clock()
            return await self._fetch_within(Call(url, content, headers, deadline, False), left)
        # No deadline: the first attempt is awaited from here, not from `send`
        # (one coroutine fewer held while the answer is awaited); a failure or
        # an answer >= 300 goes on to the retries as in `send`.
        backend = self.clients.ready_async() or await self.clients.get_async()
        call: Call | None = None
        try:
            # `_attempt` without a deadline per await: the backend's own request.
            response = await backend.send(url, content, headers, self.timeouts)
        except Exception as exc:
            if _log.isEnabledFor(logging.DEBUG):
                sent(url, exc)
            # The retries run in the handler: their error chains this one, as in `send`.
            call = _through(Call(url, content, headers, None, False), backend)
            response = await self._retried(call, backend, exc, per_await=False, bounded=False)
        else:
            if _log.isEnabledFor(logging.DEBUG):
                sent(url, response)
            if response.status_code >= 300:
                call = _through(Call(url, content, headers, None, False), backend)
                response = await self._retried(
                    call, backend, response, per_await=False, bounded=False
                )
        if response.status_code < 200:
            raise await self._interim(response, url)
        if type(response) in READ_IN_PIECES:
            body: bytes | None = response.arrived()  # taken whole, the connection given back
            # The usual small answer: no coroutine to read it, and, uncompressed
            # below the limits, the body as is, no reader to make.
            if (
                body is not None
                and len(body) <= self._plain
                and response.headers.get("content-encoding") is None
            ):
                return response, body
            call = call or _through(Call(url, content, headers, None, False), backend)
            if body is None:  # not all there yet: read as it comes
                return response, await self._read_pieces(response, call)
            return response, self._arrived(response, body, call)
        call = call or _through(Call(url, content, headers, None, False), backend)
        return response, await self._read_all(response, call, per_await=False)

    async def _fetch_within(self, call: Call, left: float) -> tuple[Any, bytes]:
        """`fetch` of a call with a deadline, ``left`` seconds away.

        On Python 3.11+ one timeout bounds the whole call (the attempts, the
        waits between them, the body) instead of one per await, and the
        attempts keep the client's own timeouts.
        """
        if sys.version_info >= (3, 11):
            if left <= 0:
                raise self.total_timeout(call.url)
            scope = asyncio.timeout(left)
            try:
                async with scope:
                    response = await self.send(call, bounded=True)
                    return response, await self._read_all(response, call, per_await=False)
            except TimeoutError as exc:
                if scope.expired():
                    raise self.total_timeout(call.url) from exc
                raise
        else:
            response = await self.send(call)  # Python 3.10: a deadline per await
            return response, await self._read_all(response, call, per_await=True)

    async def send(self, call: Call, *, bounded: bool = False) -> Any:
        """The response of the first attempt answering with status < 300 (see `attempts`).

        ``bounded``: the caller bounds the whole call by its deadline, so no
        await needs its own and the attempts' timeouts are not cut.
        """
        backend = call.backend = self.clients.ready_async() or await self.clients.get_async()
        per_await = not bounded and call.deadline is not None
        timeout = self._first_timeouts(call, cap=not bounded)
        try:
            response = await self._attempt(backend, call, timeout, per_await=per_await)
        except Exception as exc:
            if _log.isEnabledFor(logging.DEBUG):
                sent(call.url, exc)
            response = await self._retried(call, backend, exc, per_await=per_await, bounded=bounded)
        else:
            if _log.isEnabledFor(logging.DEBUG):
                sent(call.url, response)
            if response.status_code >= 300:  # (else answered at once: no plan to build)
                response = await self._retried(
                    call, backend, response, per_await=per_await, bounded=bounded
                )
        if response.status_code < 200:
            raise await self._interim(response, call.url)
        return response

    async def _retried(
        self, call: Call, backend: Any, outcome: Any, *, per_await: bool, bounded: bool
    ) -> Any:
        """`send` after a first attempt that gave ``outcome`` (an exception, or an answer >= 300)."""
        plan: Any = None
        while True:
            if not isinstance(outcome, BaseException):
                ok = outcome.status_code < 300
                outcome = outcome if ok else await self._failed(outcome, call, per_await)
            elif backend.is_closed():
                raise self.closed_during() from outcome
            plan, step = self._retry(plan, call, outcome, cap=not bounded)
            if plan is None:
                return step
            retrying(step.retry, step.seconds, step.cause)
            await self.sleep(step.seconds)
            timeout = plan.send(None).timeout  # the next Send
            try:
                outcome = await self._attempt(backend, call, timeout, per_await=per_await)
            except Exception as exc:
                outcome = exc
            if _log.isEnabledFor(logging.DEBUG):
                sent(call.url, outcome)

    def _attempt(
        self, backend: Any, call: Call, timeout: Timeouts | None, *, per_await: bool
    ) -> Awaitable[Any]:
        """One attempt's answer (its head), to await at once; within the deadline if ``per_await``."""
        if per_await:
            send = functools.partial(backend.send, call.url, call.content, call.headers, timeout)
            return self._within(call, send)
        return backend.send(call.url, call.content, call.headers, timeout)  # type: ignore[no-any-return]

    def send_sync(self, call: Call) -> Any:
        """Blocking `send`; every socket read and write is capped by the deadline."""
        backend = call.backend = self.clients.get_sync()
        timeout = self._first_timeouts(call)
        plan: Any = None
        while True:
            outcome: Any
            try:
                with sync_deadline(self._left(call)):
                    response = backend.send_sync(call.url, call.content, call.headers, timeout)
            except Exception as exc:
                if _log.isEnabledFor(logging.DEBUG):
                    sent(call.url, exc)
                if backend.is_closed():
                    raise self.closed_during() from exc
                outcome = exc
            else:
                if _log.isEnabledFor(logging.DEBUG):
                    sent(call.url, response)
                if response.status_code < 200:
                    response.close()
                    raise self._interim_error(response, call.url)
                if response.status_code < 300 and plan is None:
                    return response  # answered at once: no plan to build
                ok = response.status_code < 300
                outcome = response if ok else self._failed_sync(response, call)
            plan, step = self._retry(plan, call, outcome)
            if plan is None:
                return step
            retrying(step.retry, step.seconds, step.cause)
            self.sleep_sync(step.seconds)
            timeout = plan.send(None).timeout  # the next Send

    def _retry(self, plan: Any, call: Call, outcome: Any, *, cap: bool = True) -> tuple[Any, Any]:
        """What follows an attempt that gave ``outcome``: ``(plan, Sleep)`` or ``(None, response)``.

        The plan is made on the first failure; a `Sleep` means wait, then try again.
        """
        try:
            if plan is None:
                plan = self._plan(call, outcome, cap=cap)
                return plan, next(plan)
            return plan, plan.send(outcome)
        except StopIteration as done:
            return None, done.value

    async def _failed(self, response: Any, call: Call, per_await: bool) -> Failed:
        pieces: list[bytes] = []
        try:
            text = await self._read_all(response, call, per_await=per_await, pieces=pieces)
        except ProviderError as exc:
            return self._failed_early(response, exc, call, pieces)
        return Failed(int(response.status_code), response.headers, text.decode("utf-8", "replace"))

    def _failed_sync(self, response: Any, call: Call) -> Failed:
        pieces: list[bytes] = []
        try:
            pieces.extend(self.body_sync(response, call))  # kept as they come: a cut keeps them
            text = b"".join(pieces)
        except ProviderError as exc:
            return self._failed_early(response, exc, call, pieces)
        return Failed(int(response.status_code), response.headers, text.decode("utf-8", "replace"))

    def _failed_early(
        self, response: Any, error: ProviderError, call: Call, pieces: list[bytes]
    ) -> Failed:
        """An error answer whose body could not be read whole: what arrived, if it stopped short.

        A cut body (the connection closed, or its gzip/deflate data stops short)
        or one that stopped arriving (the read timeout passed) keeps what
        decoded, the provider's message often in it, and says how it ended; one
        over the limits is left out, and the status speaks alone. Once the call
        is out of time it is the total timeout, not the body: a body ending as
        the deadline passes reads as cut (a timeout before it is a read's).
        """
        if self._ran_out(call):
            if isinstance(error, ProviderTimeoutError):
                raise error
            raise self.total_timeout(call.url) from error
        if isinstance(error, (ProviderConnectionError, StreamError)):
            short = "its body was cut before its end"
        elif isinstance(error, ProviderTimeoutError):
            short = "the read of its body timed out before its end"
        else:
            return Failed(int(response.status_code), response.headers, "")
        text = b"".join(pieces).decode("utf-8", "replace")
        return Failed(int(response.status_code), response.headers, text, short)

    def _ran_out(self, call: Call) -> bool:
        """Whether ``call`` is past its total deadline."""
        return call.deadline is not None and self.clock() >= call.deadline

    # --- internals: reading a body within the limits and the deadline --------

    async def body(
        self, response: Any, call: Call, ended: Callable[[], bool] | None = None
    ) -> AsyncGenerator[bytes, None]:
        """The decoded body as it arrives; the connection is released however the reading ends.

        ``ended``: whether the stream's last event arrived (`SSEDecoder.ended`);
        a stream cut after it (its gzip trailer missing, the connection closed
        before the chunked body's end), or whose reading runs past the deadline
        after it, has lost nothing and ends quietly.
        """
        raw: AsyncIterator[bytes] | None = None
        try:
            reader = self._reader(response, call)
            raw = _aiter_raw(response)
            try:
                while (chunk := await self._chunk(raw, call, per_await=True)) is not None:
                    yield self._feed(reader, chunk, call)
                yield self._feed(reader, None, call)
            except (StreamError, ProviderTimeoutError) as exc:
                _cut_after_end(exc, ended)
        finally:
            await _release(raw, response)

    async def _read_all(
        self, response: Any, call: Call, *, per_await: bool, pieces: list[bytes] | None = None
    ) -> bytes:
        """The whole decoded body, read like `body` without an async generator.

        ``pieces``: where the decoded pieces go as they come (what arrived of a
        body whose reading fails); by default a list of its own.
        """
        if not per_await and type(response) in READ_IN_PIECES:
            return await self._read_pieces(response, call, pieces)
        raw: AsyncIterator[bytes] | None = None
        if pieces is None:
            pieces = []
        try:
            reader = self._reader(response, call)
            raw = _aiter_raw(response)
            while (chunk := await self._chunk(raw, call, per_await=per_await)) is not None:
                pieces.append(self._feed(reader, chunk, call))
            pieces.append(self._feed(reader, None, call))
            return b"".join(pieces)
        finally:
            await _release(raw, response)

    async def _read_pieces(
        self, response: Any, call: Call, pieces: list[bytes] | None = None
    ) -> bytes:
        """`_read_all` of an aiohttp answer with no deadline per await.

        Its pieces come straight from the stream, whose end is an empty piece:
        no iterator to make, no ``StopAsyncIteration`` to raise and catch at
        the end of every answer. The same limits, errors and release: an
        uncompressed body's pieces below the limits are taken as they are
        (`BodyReader.passthrough`), without a call to count each.
        """
        try:
            reader = self._reader(response, call)
            read = response.raw_reader()
            free = reader.passthrough()
            taken = 0
            if pieces is None:
                pieces = []
            while True:
                try:
                    chunk = await read()
                except Exception as exc:
                    # aiohttp raises a failure before what arrived before it: that first.
                    chunk = response.left_over()
                    if not chunk:
                        error = self._read_failure(exc, call)
                        if error is exc:
                            raise
                        raise error from exc
                if not chunk:
                    break
                if taken + len(chunk) <= free:
                    taken += len(chunk)
                    pieces.append(chunk)
                else:  # compressed (free is 0), or past a limit: `feed` raises its error
                    if taken:
                        reader.skip(taken)
                        taken = 0
                    pieces.append(self._feed(reader, chunk, call))
            if not free:  # a compressed body: what the decoder still holds
                pieces.append(self._feed(reader, None, call))
            return b"".join(pieces)
        finally:
            await response.aclose()

    def _arrived(self, response: Any, body: bytes, call: Call) -> bytes:
        """The decoded ``body`` of an aiohttp answer that came whole with its head, within the
        limits (`fetch` takes a small uncompressed one as it is itself)."""
        reader = self._reader(response, call)
        if len(body) <= reader.passthrough():  # "identity": as above
            return body
        content = self._feed(reader, body, call)  # past a limit, it raises the limit's error
        rest = self._feed(reader, None, call)  # what a decoder still holds
        return content + rest if rest else content

    async def _chunk(
        self, raw: AsyncIterator[bytes], call: Call, *, per_await: bool
    ) -> bytes | None:
        """The next raw piece of the body (None at its end), a failure mapped."""
        try:
            if per_await:
                return await self._within(call, raw.__anext__)
            return await raw.__anext__()
        except StopAsyncIteration:
            return None
        except Exception as exc:
            error = self._read_failure(exc, call)
            if error is exc:
                raise
            raise error from exc

    def body_sync(
        self, response: Any, call: Call, ended: Callable[[], bool] | None = None
    ) -> Generator[bytes, None, None]:
        """Blocking `body`."""
        try:
            reader = self._reader(response, call)
            raw = _iter_raw(response)
            try:
                while True:
                    try:
                        with sync_deadline(self._left(call)):
                            chunk = next(raw)
                    except StopIteration:
                        break
                    except Exception as exc:
                        error = self._read_failure(exc, call)
                        if error is exc:
                            raise
                        raise error from exc
                    if self._ran_out(call):
                        raise self.total_timeout(call.url)  # a client not capped (`cap_socket_io`)
                    yield self._feed(reader, chunk, call)
                yield self._feed(reader, None, call)
            except (StreamError, ProviderTimeoutError) as exc:
                _cut_after_end(exc, ended)
        finally:
            response.close()

    def _reader(self, response: Any, call: Call) -> BodyReader:
        try:
            return BodyReader(response.headers.get("content-encoding"), self.limits)
        except BodyError as exc:
            raise self._body_error(exc, response, call) from None

    def _feed(self, reader: BodyReader, chunk: bytes | None, call: Call) -> bytes:
        try:
            return reader.close() if chunk is None else reader.feed(chunk)
        except BodyError as exc:
            raise self._body_error(exc, None, call) from None

    async def _within(self, call: Call, start: Callable[[], Awaitable[_T]]) -> _T:
        """Await what ``start`` makes, within the call's deadline.

        It is made only once the deadline is known not to have passed: an
        awaitable made and then dropped (a generator's ``__anext__``) would be
        closed outside its task, which the clients' stream generators refuse.
        """
        left = self._left(call)
        if left is None:
            return await start()
        if left <= 0:
            raise self.total_timeout(call.url)
        if sys.version_info >= (3, 11):
            async with asyncio.timeout(left):
                return await start()
        else:
            return await asyncio.wait_for(start(), left)  # pragma: no cover (3.10)

    def _left(self, call: Call) -> float | None:
        return None if call.deadline is None else call.deadline - self.clock()

    # --- internals: errors ----------------------------------------------------

    def _status_failure(
        self, failed: Failed, call: Call
    ) -> tuple[ProviderError, bool | None, float | None]:
        text = self._redact(failed.text)
        if failed.cut:  # stopped inside an echoed secret, its start would show
            text = mask_cut_tail(text, self.secrets)
        info = self.error_parser(failed.status, text, failed.headers)
        # (a 407 is a proxy's answer: `status_error` names it)
        proxy = proxy_address(call.backend, call.url) if failed.status == 407 else None
        error = status_error(
            self.provider, failed.status, text, failed.headers, info, call.url, self.secrets, proxy
        )
        if error.retryable is False:  # (a proxy's 407: never asked again)
            info = attrs.evolve(info, retryable=False)
        if failed.cut:
            error.args = (f"{error.args[0]} ({failed.cut})", *error.args[1:])
        # The longest wait this transport honours: a workflow step retried after the
        # error waits no longer either (`toolfold.runtime._step_retry`).
        error.__dict__["_max_retry_after"] = self.retry.max_retry_after
        return self.scrub(error), info.retryable, info.retry_after

    def _exception_failure(
        self, exc: BaseException, call: Call
    ) -> tuple[ProviderError, bool | None]:
        if self._ran_out(call):
            return self.total_timeout(call.url), None
        if not (self.foreign or is_client_error(exc)):
            raise exc
        if self.foreign:
            wrong = self._wrong_loop(exc, call)
            if wrong is not None:
                raise wrong from exc
        what = malformed_answer(exc)
        if what is not None:  # answered, not lost: never sent again (see `_attempts`)
            return self.scrub(malformed_error(self.provider, call.url, what)), False
        proxy = proxy_address(call.backend, call.url) if is_proxy_refusal(exc) else None
        error = transport_error(self.provider, exc, call.url, secrets=self.secrets, proxy=proxy)
        # (False for a CONNECT a proxy refused for good: `proxy_refused`)
        return self.scrub(error), error.retryable

    async def _interim(self, response: Any, url: str) -> ProviderError:
        """The error of an answer whose final status is below 200, its connection let go.

        h11 refuses a 101 no upgrade was asked for and reads past any other 1xx
        (httpx, httpx2); aiohttp hands on a 101 and a status below 100 as the
        answer. After a 101 the connection speaks another protocol: aiohttp
        closes an upgraded connection instead of pooling it.
        """
        await response.aclose()
        return self._interim_error(response, url)

    def _interim_error(self, response: Any, url: str) -> ProviderError:
        what = interim_answer(int(response.status_code))
        return self.scrub(malformed_error(self.provider, url, what))

    def _read_failure(self, exc: Exception, call: Call) -> BaseException:
        if _closed_under(exc, call):
            return self.closed_during()
        if self.foreign:
            wrong = self._wrong_loop(exc, call)
            if wrong is not None:
                return wrong
        if self._ran_out(call):
            return self.total_timeout(call.url)
        if isinstance(exc, ProviderError) or not (self.foreign or is_client_error(exc)):
            return exc
        return self.scrub(
            transport_error(
                self.provider,
                exc,
                call.url,
                streaming=call.streaming,
                answered=not call.streaming,
                secrets=self.secrets,
            )
        )

    def _body_error(self, exc: BodyError, response: Any, call: Call) -> ProviderError | UsageError:
        """The error of a body `BodyReader` refuses or finds cut; the total timeout once the
        call is out of time (a body ending as the deadline passes reads as cut or too large),
        as `_read_failure` has it for a client's failure, 2xx and error bodies alike."""
        if isinstance(exc, BodyCut) and _closed_under(exc, call):
            return self.closed_during()
        if self._ran_out(call):
            return self.total_timeout(call.url)
        if isinstance(exc, BodyCut):  # as a body or stream cut by the connection
            where = f"{self.provider} at {call.url}"
            if call.streaming:
                return StreamError(
                    f"the stream from {where} was cut before it ended: {exc}",
                    provider=self.provider,
                )
            return ProviderConnectionError(
                f"the answer from {where} was cut before it ended: {exc}", provider=self.provider
            )
        return ProviderError(
            f"{self.provider} answered POST {call.url} with a body toolfold refuses: {exc}",
            provider=self.provider,
            status_code=None if response is None else int(response.status_code),
        )

    def _wrong_loop(self, exc: BaseException, call: Call) -> UsageError | None:
        """The error of an injected async client that failed with ``exc`` because it is used
        on an event loop other than its own (`loop_mismatch`), else None."""
        backend = call.backend
        if backend is None or backend.owned:
            return None
        problem = loop_mismatch(backend, exc)
        if problem is None:
            return None
        return UsageError(
            f"the async HTTP client given to the model (http_client= or async_http_client=) "
            f"failed its call to {self.provider}: {problem}; use it only on the loop it "
            "belongs to (make the client, and the model, on the loop that uses them: one "
            "model per loop), or give no client, and the model makes one for each loop"
        )

    def closed_during(self) -> UsageError:
        """The error of a call whose client was closed under it: never sent again."""
        return UsageError(
            f"the model was closed (model.close() or aclose(), or its injected HTTP client "
            f"closed) while its call to {self.provider} was in flight: the call is not sent "
            "again (the server may have received it); close a model once its calls have ended"
        )

    def total_timeout(self, url: str) -> ProviderTimeoutError:
        total = self.timeouts.total if self.timeouts else None
        return ProviderTimeoutError(
            f"the call to {self.provider} at {url} ran past the total timeout of {total} s",
            provider=self.provider,
        )

    def json(self, content: bytes, response: Any, url: str) -> Any:
        # A key the server wrote into the answer is masked before anything reads it
        # (`Echoes`): looked for in the text the fast path decodes anyway, else in the
        # bytes (a body in UTF-16 or UTF-32, NULs among its first bytes, read as text).
        echoes = self.echoes
        try:
            try:
                # A body opening with "{" and no NUL after it is UTF-8 to json.loads
                # (no BOM, not UTF-16/32): decode it here and skip its detection pass.
                if content[:1] == b"{" and content[1:2] != b"\x00":
                    text = content.decode("utf-8", "surrogatepass")
                    if echoes and echoes.may_hold_text(text):
                        text = echoes.masked_text(text)
                        content = text.encode("utf-8", "surrogatepass")  # (for what follows)
                    return loads_text(text)
                if echoes and (echoes.may_hold(content) or b"\x00" in content[:4]):
                    content = echoes.masked_body(content)
                return json.loads(content)
            except RecursionError:  # absurdly deep nesting: read the body cut to a sane depth
                text = content.decode(json.detect_encoding(content), "surrogatepass")
                return json.loads(shallow(text))
        except (ValueError, RecursionError) as exc:
            text = self._redact(content.decode("utf-8", "replace"))
            why = "nested too deep to decode" if isinstance(exc, RecursionError) else "not JSON"
            problem = f"{why}: {text[:200]!r} (POST {url}, HTTP {response.status_code})"
            raise self.scrub(
                MalformedResponseError(
                    f"{self.provider} sent a malformed response: {problem} @ $",
                    provider=self.provider,
                    status_code=int(response.status_code),
                    body=text,
                    headers=response.headers,
                    path="$",
                    problem=problem,
                )
            ) from exc

    def _redact(self, text: str) -> str:
        return redact(text, self.secrets)


def sent(url: str, outcome: Any) -> None:
    """One request, logged at DEBUG once it answered (its status: a blocking call's, a
    stream's, a failed one's) or failed (the error's class): never a header, a body, nor
    the error's text. Callers check ``isEnabledFor(DEBUG)`` first (free when it is off)."""
    if isinstance(outcome, BaseException):
        _log.debug("POST %s -> %s", mask_url_password(url), type(outcome).__qualname__)
    else:
        _log.debug("POST %s -> HTTP %s", mask_url_password(url), outcome.status_code)


def _through(call: Call, backend: Any) -> Call:
    """``call``, sent through ``backend``."""
    call.backend = backend
    return call


def _closed_under(exc: Exception, call: Call) -> bool:
    """Whether a read of ``call``'s answer failed with ``exc`` as its client was closed
    (by the model's ``close()`` / ``aclose()``, or an injected client's owner)."""
    if isinstance(exc, ClosedUnderRead):
        return True
    backend = call.backend
    return backend is not None and bool(backend.is_closed())


def _cut_after_end(
    error: StreamError | ProviderTimeoutError, ended: Callable[[], bool] | None
) -> None:
    """``error`` raised, unless the stream's last event had arrived (``ended``):
    a stream cut after it has lost nothing of the answer, only its end. ``ended``
    is asked first, so a stream that had ended stays ended when its end is
    found as the deadline passes (the total timeout, not the cut)."""
    if ended is None or not ended():
        raise error
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("the stream ended after its last event, then: %s", one_line(str(error)))


def _iter_raw(response: Any) -> Iterator[bytes]:
    if getattr(response, "is_stream_consumed", False):
        # A response made with content= (httpx.MockTransport): its body is at hand.
        return iter((response.content,))
    raw: Iterator[bytes] = response.iter_raw()
    return raw


def _aiter_raw(response: Any) -> AsyncIterator[bytes]:
    if getattr(response, "is_stream_consumed", False):
        return _one(response.content)
    raw: AsyncIterator[bytes] = response.aiter_raw()
    return raw


async def _one(content: bytes) -> AsyncIterator[bytes]:
    yield content


async def _release(raw: AsyncIterator[bytes] | None, response: Any) -> None:
    # Close the client's own body iterator here, in this task: left suspended
    # (a deadline between chunks, an early stop), it would be finalized later
    # by the garbage collector in another task, where httpcore's locks and
    # cancel scopes refuse to be released.
    try:
        aclose = getattr(raw, "aclose", None)
        if aclose is not None:
            await aclose()
    finally:
        await response.aclose()


def scrub_error(error: ProviderError, *secrets: Secret | None) -> ProviderError:
    """Remove ``secrets`` from every text a `ProviderError` carries (in place; returns it).

    The message, ``body``, ``provider_message``, ``code``, ``headers`` (a
    server may echo the ``Authorization`` header), a malformed answer's
    ``problem`` and, for Groq, ``failed_generation``; then the exceptions
    chained under it (`redact_chain`).
    """
    secrets = tuple(secret for secret in secrets if secret)
    if not secrets:
        return error
    if error.args and isinstance(error.args[0], str):
        error.args = (redact(error.args[0], secrets), *error.args[1:])
    error.body = redact(error.body, secrets)
    if error.provider_message:
        error.provider_message = redact(error.provider_message, secrets)
    if error.code:
        error.code = redact(error.code, secrets)
    if error.headers:
        error.headers = {
            name: redact_header(name, value, secrets) for name, value in error.headers.items()
        }
    failed = getattr(error, "failed_generation", None)
    if isinstance(failed, str):
        error.failed_generation = redact(failed, secrets)  # type: ignore[attr-defined]
    if isinstance(error, MalformedResponseError):
        error.problem = redact(error.problem, secrets)
    redact_chain(error, secrets)  # what it was raised from, once chained
    return error
