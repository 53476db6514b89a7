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
import random as _random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

import httpx

from toolfold._errors import ProviderError, TimeoutError
from toolfold.adapters._http_errors import (
    ErrorInfo,
    inband_error,
    is_client_error,
    parse_error_body,
    status_error,
    transport_error,
)
from toolfold.adapters._keys import Secret, redact
from toolfold.adapters._retry import RetryPolicy, Timeouts
from toolfold.adapters._sse import LineDecoder, SSEDecoder, SSEEvent

__all__ = ["ErrorParser", "Transport", "USER_AGENT"]

USER_AGENT = "toolfold/0.1.0"

ErrorParser = Callable[[int, str, Mapping[str, str]], ErrorInfo]
"""Reads a provider's error body: ``(status, body_text, headers) -> ErrorInfo``."""

_T = TypeVar("_T")


class _Decoder(Protocol[_T]):
    def feed(self, chunk: bytes) -> list[_T]: ...

    def close(self) -> list[_T]: ...


class _BytesDecoder:
    __slots__ = ()

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk] if chunk else []

    def close(self) -> list[bytes]:
        return []


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
            with the same API) to use instead of the transport's own.
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
        self._headers = self._build_headers(headers or {})
        self._httpx_timeout: Any = (
            httpx.USE_CLIENT_DEFAULT if self.timeouts is None else _httpx_timeout(self.timeouts)
        )
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

        Raises:
            ProviderError: A child for each failure: `RateLimitError`,
                `AuthenticationError`, `BadRequestError`, `ServerError`,
                `ConnectionError`, `TimeoutError`...
        """
        raise NotImplementedError

    def post_json_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Any:
        """Blocking `post_json`."""
        raise NotImplementedError

    def stream(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[SSEEvent]:
        """POST ``body`` as JSON and yield the Server-Sent Events of the answer.

        Retries happen only until the response starts. ``[DONE]`` is yielded
        like any event (see `SSEEvent.is_done`); the codec decides to stop.

        Raises:
            StreamError: The stream was cut, or sent an error in-band.
            ProviderError: As `post_json`, before the stream starts.
        """
        raise NotImplementedError

    def stream_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[SSEEvent]:
        """Blocking `stream`."""
        raise NotImplementedError

    def stream_lines(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[str]:
        """Like `stream`, for newline-delimited JSON: yields each non-empty line."""
        raise NotImplementedError

    def stream_lines_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[str]:
        """Blocking `stream_lines`."""
        raise NotImplementedError

    def stream_bytes(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[bytes]:
        """Like `stream`, yielding the decoded body bytes as they arrive (for custom formats)."""
        raise NotImplementedError

    def stream_bytes_sync(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[bytes]:
        """Blocking `stream_bytes`."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the clients this transport made (injected clients stay open)."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the sync client this transport made (injected clients stay open)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"Transport(provider={self.provider!r}, base_url={self.base_url!r}, "
            f"api_key={self._key!r})"
        )

    # --- internals ---------------------------------------------------------

    def _build_headers(self, extra: Mapping[str, str]) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "user-agent": USER_AGENT,
        }
        if self._key:
            value = self._key.reveal()
            headers[self._auth_header] = (
                f"{self._auth_scheme} {value}" if self._auth_scheme else value
            )
        for name, value in extra.items():
            headers[name.lower()] = value
        return headers

    def _scrub(self, text: str) -> str:
        return redact(text, (self._key,))


def _is_async_client(client: Any) -> bool:
    send = getattr(type(client), "send", None)
    return inspect.iscoroutinefunction(send)


def _httpx_timeout(t: Timeouts) -> httpx.Timeout:
    return httpx.Timeout(connect=t.connect, read=t.read, write=t.write, pool=t.pool)


# Silence unused-name checks until the implementation below lands.
_ = (ProviderError, TimeoutError, inband_error, is_client_error, status_error, transport_error)
_ = (json, LineDecoder, SSEDecoder, _BytesDecoder)
