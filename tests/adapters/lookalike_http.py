"""A client package with httpx's API but its own classes, as httpx2 is.

httpx2 needs Python 3.11+, and CI also runs on 3.10, so the tests check the
"same API, other classes" contract with this stand-in everywhere, and with
httpx2 itself where it is installed. Like httpx2, the clients refuse
another package's ``Timeout`` and raise exceptions of their own classes
(same names as httpx's, no common base with them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

_DEFAULT: Any = object()


class Timeout:
    """This package's timeout settings (not an ``httpx.Timeout``)."""

    def __init__(
        self,
        timeout: float | None = None,
        *,
        connect: float | None = _DEFAULT,
        read: float | None = _DEFAULT,
        write: float | None = _DEFAULT,
        pool: float | None = _DEFAULT,
    ) -> None:
        def pick(value: float | None) -> float | None:
            return timeout if value is _DEFAULT else value

        self.connect, self.read, self.write, self.pool = (
            pick(connect),
            pick(read),
            pick(write),
            pick(pool),
        )

    def as_httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)


class HTTPError(Exception):
    """The root of this package's exceptions."""


class TransportError(HTTPError): ...


class TimeoutException(TransportError): ...


class ConnectTimeout(TimeoutException): ...


class ReadTimeout(TimeoutException): ...


class WriteTimeout(TimeoutException): ...


class PoolTimeout(TimeoutException): ...


class NetworkError(TransportError): ...


class ConnectError(NetworkError): ...


class ReadError(NetworkError): ...


class WriteError(NetworkError): ...


class RemoteProtocolError(TransportError): ...


class DecodingError(HTTPError): ...


_CLASSES = {
    cls.__name__: cls
    for cls in (
        TransportError,
        TimeoutException,
        ConnectTimeout,
        ReadTimeout,
        WriteTimeout,
        PoolTimeout,
        NetworkError,
        ConnectError,
        ReadError,
        WriteError,
        RemoteProtocolError,
        DecodingError,
    )
}


def _translate(exc: httpx.HTTPError) -> HTTPError:
    return _CLASSES.get(type(exc).__name__, HTTPError)(str(exc))


def _inner_timeout(timeout: Any) -> httpx.Timeout:
    if isinstance(timeout, Timeout):
        return timeout.as_httpx()
    return httpx.Timeout(timeout)


def _request_timeout(timeout: Any) -> dict[str, Any]:
    if timeout is _DEFAULT:
        return {}
    if not isinstance(timeout, Timeout):
        # What httpx2 does with an httpx.Timeout: refuse it.
        raise TypeError(f"timeout must be a lookalike_http.Timeout, not {type(timeout).__name__}")
    return {"timeout": timeout.as_httpx()}


class Response:
    """A response whose reads raise this package's exceptions."""

    def __init__(self, inner: httpx.Response) -> None:
        self._inner = inner
        self.status_code = inner.status_code
        self.headers = inner.headers

    @property
    def content(self) -> bytes:
        return self._inner.content

    def read(self) -> bytes:
        try:
            return self._inner.read()
        except httpx.HTTPError as exc:
            raise _translate(exc) from exc

    def iter_raw(self) -> Iterator[bytes]:
        try:
            yield from self._inner.iter_raw()
        except httpx.HTTPError as exc:
            raise _translate(exc) from exc

    def close(self) -> None:
        self._inner.close()

    async def aread(self) -> bytes:
        try:
            return await self._inner.aread()
        except httpx.HTTPError as exc:
            raise _translate(exc) from exc

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise _translate(exc) from exc

    async def aclose(self) -> None:
        await self._inner.aclose()


class Client:
    """A blocking client with httpx's API and this package's classes."""

    def __init__(self, *, timeout: Any = 5.0, headers: Any = None) -> None:
        self._inner = httpx.Client(timeout=_inner_timeout(timeout), headers=headers)

    def build_request(
        self,
        method: str,
        url: str,
        *,
        content: bytes = b"",
        headers: Any = None,
        timeout: Any = _DEFAULT,
    ) -> httpx.Request:
        return self._inner.build_request(
            method, url, content=content, headers=headers, **_request_timeout(timeout)
        )

    def send(self, request: httpx.Request, *, stream: bool = False) -> Response:
        try:
            return Response(self._inner.send(request, stream=stream))
        except httpx.HTTPError as exc:
            raise _translate(exc) from exc

    def close(self) -> None:
        self._inner.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClient:
    """An async client with httpx's API and this package's classes."""

    def __init__(self, *, timeout: Any = 5.0, headers: Any = None) -> None:
        self._inner = httpx.AsyncClient(timeout=_inner_timeout(timeout), headers=headers)

    def build_request(
        self,
        method: str,
        url: str,
        *,
        content: bytes = b"",
        headers: Any = None,
        timeout: Any = _DEFAULT,
    ) -> httpx.Request:
        return self._inner.build_request(
            method, url, content=content, headers=headers, **_request_timeout(timeout)
        )

    async def send(self, request: httpx.Request, *, stream: bool = False) -> Response:
        try:
            return Response(await self._inner.send(request, stream=stream))
        except httpx.HTTPError as exc:
            raise _translate(exc) from exc

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
