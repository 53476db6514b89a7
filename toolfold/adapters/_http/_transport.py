"""The HTTP transport every provider adapter shares: one seam over httpx, async and sync.

A `Transport` posts JSON and returns JSON, or streams Server-Sent Events, NDJSON
lines or raw bytes. It owns what every provider needs the same way: the base URL
and API key (held in a `Secret`), default headers, `Timeouts`, retries with
backoff per `RetryPolicy`, and the mapping of every failure to one
`ProviderError` child at one boundary. Retries happen only before a response
starts: once a stream has delivered its first byte, a failure is a
`StreamError` for the caller, never a silent second request (the model would
bill and answer twice).

Users may inject their own ``httpx.AsyncClient`` / ``httpx.Client`` (or a client
with the same API, e.g. httpx2); an injected client is never closed by the
transport. Without one, the transport makes and owns its clients: one sync
client, and one async client per event loop (closed when that loop shuts down).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import random as _random
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

import httpx

from toolfold._errors import (
    ModelConfigError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
)
from toolfold.adapters._http._clients import (
    close_when_loop_ends,
    default_async_client,
    default_sync_client,
)
from toolfold.adapters._http._http_errors import (
    ErrorInfo,
    inband_error,
    is_client_error,
    parse_error_body,
    status_error,
    transport_error,
)
from toolfold.adapters._http._json import dumps
from toolfold.adapters._http._keys import Secret, redact, redact_chain
from toolfold.adapters._http._retry import RetryPolicy, Timeouts
from toolfold.adapters._http._sse import LineDecoder, SSEDecoder, SSEEvent
from toolfold.adapters._http._streaming import BytesDecoder, aiter_items, iter_items

__all__ = ["ErrorParser", "Transport", "USER_AGENT"]

USER_AGENT = "toolfold/0.1.0"

_log = logging.getLogger("toolfold.http")

ErrorParser = Callable[[int, str, Mapping[str, str]], ErrorInfo]
"""Reads a provider's error body: ``(status, body_text, headers) -> ErrorInfo``."""


class _Unset:
    def __repr__(self) -> str:
        return "<default>"


_UNSET: Any = _Unset()


class Transport:
    """POST JSON to one provider, with retries, timeouts and mapped errors.

    Args:
        provider: The provider name, used in error messages (``"openai"``).
        base_url: The API root as the provider's official SDK spells it,
            e.g. ``"https://api.openai.com/v1"``; request paths are joined to it.
        api_key: The key (a string or `Secret`), or None for servers without auth.
        auth_header: The header that carries the key (``"authorization"``,
            Anthropic ``"x-api-key"``, Gemini ``"x-goog-api-key"``).
        auth_scheme: The prefix before the key in that header (``"Bearer"``;
            empty for a bare key).
        headers: Extra headers sent with every request.
        timeout: `Timeouts`, a number of seconds, or None for no limits. By
            default: an injected client's own timeouts, else `Timeouts()`.
        retry: A `RetryPolicy`, a number of retries, or None/0 to never retry
            (e.g. when a durable-execution engine owns retries).
        http_client: An ``httpx.AsyncClient`` or ``httpx.Client`` (or a client
            with the same API, e.g. httpx2) to use instead of the transport's
            own. It serves its own mode only: a call in the other mode raises
            `ModelConfigError` rather than bypass it (give both to use both).
        async_http_client: An async client, when ``http_client`` is the sync one.
        error_parser: Reads the provider's error bodies; default
            `parse_error_body`, which knows every shape in providers.md.
        inband_errors: Raise `StreamError` for error events sent inside a 200
            stream (``event: error``, ``{"error": ...}``).
        sleep: The async sleep used between retries (tests inject a fake).
        sleep_sync: The blocking sleep used between retries.
        random: Returns a float in [0, 1) for the backoff jitter.
        clock: A monotonic clock, for the total timeout.
    """

    def __init__(
        self,
        provider: str,
        base_url: str,
        api_key: str | Secret | None = None,
        *,
        auth_header: str = "authorization",
        auth_scheme: str = "Bearer",
        headers: Mapping[str, str] | None = None,
        timeout: Timeouts | float | None = _UNSET,
        retry: RetryPolicy | int | None = _UNSET,
        http_client: httpx.AsyncClient | httpx.Client | Any = None,
        async_http_client: httpx.AsyncClient | Any = None,
        error_parser: ErrorParser | None = None,
        inband_errors: bool = True,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        sleep_sync: Callable[[float], None] | None = None,
        random: Callable[[], float] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self._key = api_key if isinstance(api_key, Secret) or api_key is None else Secret(api_key)
        self._auth_header = auth_header.lower()
        self._auth_scheme = auth_scheme
        # The whole header value, masked like the key, made once (not per request).
        self._auth_value: Secret | None = None
        if self._key:
            key = self._key.reveal()
            self._auth_value = Secret(f"{auth_scheme} {key}" if auth_scheme else key)
        self._sync_client: Any = None
        self._async_client: Any = async_http_client
        if http_client is not None:
            if _is_async_client(http_client):
                self._async_client = http_client
            else:
                self._sync_client = http_client
        self._owns_sync = self._sync_client is None
        self._owns_async = self._async_client is None
        injected = not (self._owns_sync and self._owns_async)
        # An injected client may raise its own exception classes (or TypeError
        # on an argument its API spells differently): all of them are mapped.
        self._foreign = injected
        if timeout is _UNSET:
            self.timeouts: Timeouts | None = None if injected else Timeouts()
        else:
            self.timeouts = Timeouts.of(timeout)
        if retry is _UNSET:
            retry = RetryPolicy()
        elif isinstance(retry, int) and not isinstance(retry, bool):
            retry = RetryPolicy(max_retries=retry)
        self.retry: RetryPolicy = retry if isinstance(retry, RetryPolicy) else RetryPolicy(0)
        self._error_parser = error_parser or parse_error_body
        self._inband_errors = inband_errors
        self._sleep = sleep or asyncio.sleep
        self._sleep_sync = sleep_sync or time.sleep
        self._random = random or _random.random
        self._clock = clock or time.monotonic
        # The key is not in these dicts: it is added at send time from the Secret,
        # so neither vars(transport) nor a stored header dict ever shows it.
        self._headers = self._build_headers(headers or {})
        self._stream_headers = {**self._headers, "accept": "text/event-stream"}
        # Owned clients are made with these timeouts, so requests omit the
        # argument; an injected client gets one of its own package's Timeout
        # class (httpx2 refuses httpx.Timeout), or none to keep its defaults.
        self._sync_timeout = self._timeout_kwargs(self._sync_client)
        self._async_timeout = self._timeout_kwargs(self._async_client)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_closer: Any = None

    # --- public API -------------------------------------------------------

    def url(self, path: str) -> str:
        """The full URL of ``path`` under the base URL."""
        if path.startswith(("http://", "https://")):
            return path
        return f"{self.base_url}/{path.lstrip('/')}"

    async def post_json(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Any:
        """POST ``body`` as JSON and return the parsed JSON answer.

        Args:
            path: The endpoint under the base URL (``"chat/completions"``); may
                carry a query string.
            body: Anything ``json.dumps`` accepts.
            headers: Extra headers for this request only.

        Raises:
            ProviderError: A child for each failure: `RateLimitError`,
                `AuthenticationError`, `BadRequestError`, `NotFoundError`,
                `ServerError`, `ProviderConnectionError`, `ProviderTimeoutError`.
        """
        url = self.url(path)
        content = dumps(body)
        merged = self._merge(self._headers, headers)
        total = self.timeouts.total if self.timeouts else None
        if total is None:
            response = await self._send(url, content, merged, False, None)
        else:
            deadline = self._clock() + total
            try:
                response = await asyncio.wait_for(
                    self._send(url, content, merged, False, deadline), total
                )
            except ProviderError:
                raise  # a ProviderTimeoutError is an asyncio.TimeoutError too (3.11+)
            except asyncio.TimeoutError as exc:
                raise self._total_timeout(url) from exc
        return self._json(response, url)

    def post_json_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Any:
        """Blocking `post_json`."""
        url = self.url(path)
        content = dumps(body)
        merged = self._merge(self._headers, headers)
        total = self.timeouts.total if self.timeouts else None
        deadline = None if total is None else self._clock() + total
        response = self._send_sync(url, content, merged, False, deadline)
        return self._json(response, url)

    def stream(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[SSEEvent]:
        """POST ``body`` as JSON and yield the Server-Sent Events of the answer.

        Retries happen only until the response starts. ``[DONE]`` is yielded
        like any event (see `SSEEvent.is_done`); the codec decides to stop.
        Stopping early is fine: close the iterator (``contextlib.aclosing``) to
        give the connection back at once.

        Raises:
            StreamError: The stream was cut, or sent an error in-band.
            ProviderTimeoutError: The stream stalled past the read timeout, or the whole
                call ran past the total timeout.
            ProviderError: As `post_json`, before the stream starts.
        """
        return aiter_items(self, path, body, headers, SSEDecoder(), sse=True)

    def stream_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[SSEEvent]:
        """Blocking `stream`."""
        return iter_items(self, path, body, headers, SSEDecoder(), sse=True)

    def stream_lines(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[str]:
        """Like `stream`, for newline-delimited JSON: yields each non-empty line."""
        return aiter_items(self, path, body, headers, LineDecoder(), sse=False)

    def stream_lines_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[str]:
        """Blocking `stream_lines`."""
        return iter_items(self, path, body, headers, LineDecoder(), sse=False)

    def stream_bytes(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[bytes]:
        """Like `stream`, yielding the decoded body bytes as they arrive (for custom formats)."""
        return aiter_items(self, path, body, headers, BytesDecoder(), sse=False)

    def stream_bytes_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[bytes]:
        """Blocking `stream_bytes`."""
        return iter_items(self, path, body, headers, BytesDecoder(), sse=False)

    async def aclose(self) -> None:
        """Close the clients this transport made (injected clients stay open)."""
        if self._owns_async and self._loop_closer is not None:
            closer, self._loop_closer = self._loop_closer, None
            self._async_client = None
            self._loop = None
            await closer.aclose()
        self.close()

    def close(self) -> None:
        """Close the sync client this transport made (injected clients stay open)."""
        if self._owns_sync and self._sync_client is not None:
            client, self._sync_client = self._sync_client, None
            client.close()

    async def __aenter__(self) -> Transport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Transport(provider={self.provider!r}, base_url={self.base_url!r}, "
            f"api_key={self._key!r})"
        )

    # --- internals: sending with retries (one decision, two shells) -------

    def _merge(self, base: dict[str, str], extra: Mapping[str, str] | None) -> dict[str, str]:
        if not extra:
            return base
        merged = dict(base)
        for name, value in extra.items():
            merged[name.lower()] = value
        return merged

    async def _send(
        self,
        url: str,
        content: bytes,
        headers: dict[str, str],
        stream: bool,
        deadline: float | None,
    ) -> Any:
        client = await self._client_async()
        headers = self._with_auth(headers)
        retry = 0
        while True:
            try:
                request = client.build_request(
                    "POST", url, content=content, headers=headers, **self._async_timeout
                )
                response = await client.send(request, stream=stream)
            except Exception as exc:
                if not (self._foreign or is_client_error(exc)):
                    raise
                error = self._scrubbed(transport_error(self.provider, exc, url))
                delay = self._exception_delay(retry, error, deadline)
                if delay is None:
                    raise error from exc
            else:
                if response.status_code < 300:
                    if _log.isEnabledFor(logging.DEBUG):
                        _log.debug("POST %s -> HTTP %s", url, response.status_code)
                    return response
                try:
                    text = (await response.aread()).decode("utf-8", "replace")
                except Exception as exc:
                    if not (self._foreign or is_client_error(exc)):
                        raise
                    text = ""
                finally:
                    await response.aclose()
                error, delay = self._status_failure(retry, response, text, url, deadline)
                if delay is None:
                    raise error
            self._log_retry(url, error, delay, retry)
            await self._sleep(delay)
            retry += 1

    def _send_sync(
        self,
        url: str,
        content: bytes,
        headers: dict[str, str],
        stream: bool,
        deadline: float | None,
    ) -> Any:
        client = self._client_sync()
        headers = self._with_auth(headers)
        retry = 0
        while True:
            timeout = self._sync_timeout
            if deadline is not None:
                timeout = {"timeout": self._capped_timeout(deadline, url, client)}
            try:
                request = client.build_request(
                    "POST", url, content=content, headers=headers, **timeout
                )
                response = client.send(request, stream=stream)
            except Exception as exc:
                if not (self._foreign or is_client_error(exc)):
                    raise
                error = self._scrubbed(transport_error(self.provider, exc, url))
                delay = self._exception_delay(retry, error, deadline)
                if delay is None:
                    raise error from exc
            else:
                if response.status_code < 300:
                    if _log.isEnabledFor(logging.DEBUG):
                        _log.debug("POST %s -> HTTP %s", url, response.status_code)
                    return response
                try:
                    text = response.read().decode("utf-8", "replace")
                except Exception as exc:
                    if not (self._foreign or is_client_error(exc)):
                        raise
                    text = ""
                finally:
                    response.close()
                error, delay = self._status_failure(retry, response, text, url, deadline)
                if delay is None:
                    raise error
            self._log_retry(url, error, delay, retry)
            self._sleep_sync(delay)
            retry += 1

    def _log_retry(self, url: str, error: ProviderError, delay: float, retry: int) -> None:
        _log.info(
            "retrying POST %s in %.2f s (retry %d of %d) after: %s",
            url,
            delay,
            retry + 1,
            self.retry.max_retries,
            error,
        )

    def _status_failure(
        self, retry: int, response: Any, text: str, url: str, deadline: float | None
    ) -> tuple[ProviderError, float | None]:
        status = int(response.status_code)
        headers: Mapping[str, str] = response.headers
        text = self._scrub(text)
        info = self._error_parser(status, text, headers)
        error = self._scrubbed(status_error(self.provider, status, text, headers, info, url))
        delay = self.retry.status_delay(
            retry,
            status,
            headers,
            retryable=info.retryable,
            hint=info.retry_after,
            random=self._random(),
            now=time.time(),
        )
        return error, self._fits(delay, deadline)

    def _exception_delay(
        self, retry: int, error: ProviderError, deadline: float | None
    ) -> float | None:
        if retry >= self.retry.max_retries:
            return None
        if isinstance(error, ProviderTimeoutError):
            if not self.retry.retry_timeouts:
                return None
        elif not (
            isinstance(error, ProviderConnectionError) and self.retry.retry_connection_errors
        ):
            return None
        return self._fits(self.retry.backoff(retry, self._random()), deadline)

    def _fits(self, delay: float | None, deadline: float | None) -> float | None:
        # A retry that cannot finish before the total deadline only wastes the wait.
        if delay is None or deadline is None:
            return delay
        return delay if self._clock() + delay < deadline else None

    def _capped_timeout(self, deadline: float, url: str, client: Any) -> Any:
        remaining = deadline - self._clock()
        if remaining <= 0:
            raise self._total_timeout(url)
        t = self.timeouts or Timeouts()

        def cap(value: float | None) -> float:
            return remaining if value is None else min(value, remaining)

        return _timeout_class(client)(
            connect=cap(t.connect), read=cap(t.read), write=cap(t.write), pool=cap(t.pool)
        )

    def _total_timeout(self, url: str) -> ProviderTimeoutError:
        total = self.timeouts.total if self.timeouts else None
        return ProviderTimeoutError(
            f"the call to {self.provider} at {url} ran past the total timeout of {total} s",
            provider=self.provider,
        )

    def _json(self, response: Any, url: str) -> Any:
        content: bytes = response.content
        try:
            # A body opening with "{" and no NUL after it is UTF-8 to json.loads
            # (no BOM, not UTF-16/32): decode it here and skip its detection pass.
            if content[:1] == b"{" and content[1:2] != b"\x00":
                return json.loads(content.decode("utf-8", "surrogatepass"))
            return json.loads(content)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            text = self._scrub(content.decode("utf-8", "replace"))
            raise self._scrubbed(
                ProviderError(
                    f"{self.provider} answered POST {url} with HTTP {response.status_code} "
                    f"but the body is not JSON: {text[:200]!r}",
                    provider=self.provider,
                    status_code=int(response.status_code),
                    body=text,
                    headers=response.headers,
                )
            ) from exc

    # --- internals: streaming ----------------------------------------------

    def _stream_failure(self, exc: BaseException, url: str) -> ProviderError:
        return self._scrubbed(transport_error(self.provider, exc, url, streaming=True))

    def _check_inband(self, item: object) -> None:
        if isinstance(item, SSEEvent):
            error = inband_error(self.provider, item.event, item.data)
            if error is not None:
                raise self._scrubbed(error)

    # --- internals: clients and secrets -------------------------------------

    async def _client_async(self) -> Any:
        if not self._owns_async:
            return self._async_client
        loop = asyncio.get_running_loop()
        if self._async_client is not None and self._loop is loop:
            return self._async_client
        if not self._owns_sync:
            raise _one_mode_only("an async", "httpx.AsyncClient", "async_http_client")
        # One client per event loop: connections belong to the loop that opened them.
        client = default_async_client(self._httpx_timeout_or_default())
        closer = close_when_loop_ends(client)
        await closer.__anext__()
        self._async_client, self._loop, self._loop_closer = client, loop, closer
        return client

    def _client_sync(self) -> Any:
        if self._sync_client is None:
            if not self._owns_async:
                raise _one_mode_only("a blocking", "httpx.Client", "http_client")
            self._sync_client = default_sync_client(self._httpx_timeout_or_default())
        return self._sync_client

    def _httpx_timeout_or_default(self) -> httpx.Timeout:
        return _httpx_timeout(self.timeouts or Timeouts())

    def _timeout_kwargs(self, client: Any) -> dict[str, Any]:
        if client is None or self.timeouts is None:
            return {}
        return {"timeout": _timeout_class(client)(**_timeout_fields(self.timeouts))}

    def _build_headers(self, extra: Mapping[str, str]) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": USER_AGENT,
        }
        for name, value in extra.items():
            headers[name.lower()] = value
        return headers

    def _with_auth(self, headers: dict[str, str]) -> dict[str, str]:
        # A header given by the user (headers= or per request) wins over the key.
        if self._auth_value is None or self._auth_header in headers:
            return headers
        merged = headers.copy()
        merged[self._auth_header] = self._auth_value.reveal()
        return merged

    def _scrub(self, text: str) -> str:
        return redact(text, (self._key,))

    def _scrubbed(self, error: ProviderError) -> ProviderError:
        """``error`` with the key removed from its message, body, provider message and headers."""
        return scrub_error(error, self._key)


def _is_async_client(client: Any) -> bool:
    send = getattr(type(client), "send", None)
    return inspect.iscoroutinefunction(send)


def _httpx_timeout(t: Timeouts) -> httpx.Timeout:
    return httpx.Timeout(connect=t.connect, read=t.read, write=t.write, pool=t.pool)


def _timeout_fields(t: Timeouts) -> dict[str, float | None]:
    return {"connect": t.connect, "read": t.read, "write": t.write, "pool": t.pool}


def _timeout_class(client: Any) -> Any:
    """The ``Timeout`` class of the package ``client`` comes from (httpx2's for httpx2)."""
    package = sys.modules.get(type(client).__module__.split(".")[0])
    found = getattr(package, "Timeout", None)
    return found if isinstance(found, type) else httpx.Timeout


def _one_mode_only(mode: str, kind: str, option: str) -> ModelConfigError:
    # Falling back to a client of toolfold's own would silently drop the
    # injected client's proxy, certificates and headers.
    return ModelConfigError(
        f"{mode} call needs {mode.split()[0]} {kind} too: only a client for the other mode was "
        f"injected; pass {option}=... as well (toolfold does not fall back to its own client, "
        "which would drop your client's proxy, certificates and headers)"
    )


def scrub_error(error: ProviderError, key: Secret | None) -> ProviderError:
    """Remove ``key`` from every text a `ProviderError` carries (in place; returns it).

    The message, ``body``, ``provider_message``, ``headers`` (a server may echo
    the ``Authorization`` header) and, for Groq, ``failed_generation``.
    """
    if not key:
        return error
    secrets = (key,)
    if error.args and isinstance(error.args[0], str):
        error.args = (redact(error.args[0], secrets), *error.args[1:])
    error.body = redact(error.body, secrets)
    if error.provider_message:
        error.provider_message = redact(error.provider_message, secrets)
    if error.headers:
        error.headers = {name: redact(value, secrets) for name, value in error.headers.items()}
    failed = getattr(error, "failed_generation", None)
    if isinstance(failed, str):
        error.failed_generation = redact(failed, secrets)  # type: ignore[attr-defined]
    redact_chain(error, secrets)  # what it was raised from, once chained
    return error
