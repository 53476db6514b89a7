"""The streaming half of the transport: read an answer's body as it arrives.

`aiter_items` and `iter_items` drive one streamed request for a `Transport`:
send it (with the transport's retries, which end once the answer starts), then
feed the body to a decoder (SSE, lines, bytes) and yield what it completes.
Failures after the start are `StreamError` / `ProviderTimeoutError`, never a resend.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from toolfold._errors import ProviderError
from toolfold.adapters._http._http_errors import is_client_error
from toolfold.adapters._http._json import dumps

if TYPE_CHECKING:
    from toolfold.adapters._http._transport import Transport

_T = TypeVar("_T")


class Decoder(Protocol[_T]):
    """Turns body bytes into items: `SSEDecoder`, `LineDecoder`, `BytesDecoder`."""

    def feed(self, chunk: bytes) -> list[_T]: ...

    def close(self) -> list[_T]: ...


class BytesDecoder:
    """Passes the body through as it arrives."""

    __slots__ = ()

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk] if chunk else []

    def close(self) -> list[bytes]:
        return []


async def aiter_items(
    t: Transport,
    path: str,
    body: Any,
    headers: Mapping[str, str] | None,
    decoder: Decoder[_T],
    *,
    sse: bool,
) -> AsyncIterator[_T]:
    url = t.url(path)
    content = dumps(body)
    merged = t._merge(t._stream_headers if sse else t._headers, headers)
    total = t.timeouts.total if t.timeouts else None
    deadline = None if total is None else t._clock() + total
    if deadline is None:
        response = await t._send(url, content, merged, True, None)
    else:
        try:
            response = await asyncio.wait_for(t._send(url, content, merged, True, deadline), total)
        except ProviderError:
            raise  # a ProviderTimeoutError is an asyncio.TimeoutError too (3.11+)
        except asyncio.TimeoutError as exc:
            raise t._total_timeout(url) from exc
    try:
        chunks = response.aiter_bytes()
        while True:
            try:
                if deadline is None:
                    chunk = await chunks.__anext__()
                else:
                    chunk = await asyncio.wait_for(
                        chunks.__anext__(), max(deadline - t._clock(), 0.0)
                    )
            except StopAsyncIteration:
                break
            except asyncio.TimeoutError as exc:
                if deadline is not None and t._clock() >= deadline:
                    raise t._total_timeout(url) from exc
                raise t._stream_failure(exc, url) from exc
            except Exception as exc:
                if not (t._foreign or is_client_error(exc)):
                    raise
                raise t._stream_failure(exc, url) from exc
            for item in decoder.feed(chunk):
                if sse and t._inband_errors:
                    t._check_inband(item)
                yield item
        for item in decoder.close():
            if sse and t._inband_errors:
                t._check_inband(item)
            yield item
    finally:
        await response.aclose()


def iter_items(
    t: Transport,
    path: str,
    body: Any,
    headers: Mapping[str, str] | None,
    decoder: Decoder[_T],
    *,
    sse: bool,
) -> Iterator[_T]:
    url = t.url(path)
    content = dumps(body)
    merged = t._merge(t._stream_headers if sse else t._headers, headers)
    total = t.timeouts.total if t.timeouts else None
    deadline = None if total is None else t._clock() + total
    response = t._send_sync(url, content, merged, True, deadline)
    try:
        chunks = response.iter_bytes()
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                break
            except Exception as exc:
                if not (t._foreign or is_client_error(exc)):
                    raise
                raise t._stream_failure(exc, url) from exc
            if deadline is not None and t._clock() >= deadline:
                raise t._total_timeout(url)
            for item in decoder.feed(chunk):
                if sse and t._inband_errors:
                    t._check_inband(item)
                yield item
        for item in decoder.close():
            if sse and t._inband_errors:
                t._check_inband(item)
            yield item
    finally:
        response.close()
