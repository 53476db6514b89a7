"""The total deadline of blocking calls, kept by every socket read and write.

A blocking call cannot be interrupted from outside: a server dripping one
byte a second never lets a read timeout pass, so checking the deadline between
the pieces of an answer would let it run on while the head (or one piece of
the body) arrives. Instead the transport sets the time left before the call's
deadline for its thread (`sync_deadline`), and the httpcore pools of the
blocking httpx/httpx2 clients it uses, its own and injected ones alike, give
each socket read and write no more than that (`cap_socket_io`). Outside a
call, and in any other thread, the thread has no deadline and the sockets
keep the client's own timeouts: a user's client serves its other requests as
before.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["cap_socket_io", "sync_deadline"]

_local = threading.local()


def sync_deadline(seconds_left: float | None) -> contextlib.AbstractContextManager[None]:
    """Cap every socket read and write of this thread's capped clients to ``seconds_left``."""
    # A class, not a generator-based context manager: the transport enters one
    # per request and per piece of a body.
    if seconds_left is None:
        return _NO_DEADLINE
    return _Deadline(time.monotonic() + seconds_left)


class _Deadline:
    """Sets the thread's deadline to ``at`` while entered, then puts the outer one back."""

    __slots__ = ("_at", "_outer")

    def __init__(self, at: float) -> None:
        self._at = at
        self._outer: float | None = None

    def __enter__(self) -> None:
        self._outer = getattr(_local, "at", None)
        _local.at = self._at

    def __exit__(self, *exc_info: object) -> None:
        _local.at = self._outer


_NO_DEADLINE = contextlib.nullcontext()


def cap_socket_io(client: Any) -> None:
    """Make the socket reads and writes of blocking ``client`` keep the thread's deadline.

    The pools of the client's transport and of its mounts (the proxies named
    in the environment) get a network backend whose streams end each read
    and write by the deadline (`_DeadlineBackend`), and the connections they
    hold open already get such a stream: httpx builds its httpcore pool
    without a way to pass a network backend, so the pool's is the one hook.
    Done once per client (a client given to two models is capped once); a
    transport without an httpcore pool (``MockTransport``, a user's own) is
    left as it is, and ``total`` is then checked between the pieces of the answer.
    """
    mounts: Mapping[Any, Any] = getattr(client, "_mounts", None) or {}
    for transport in (getattr(client, "_transport", None), *mounts.values()):
        pool: Any = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None or isinstance(backend, _DeadlineBackend):
            continue
        core = _core(pool)
        if core is None or not callable(getattr(pool, "handle_request", None)):
            continue  # not httpcore's, or an async pool (async calls are cancelled instead)
        pool._network_backend = _DeadlineBackend(backend, core)
        for connection in list(getattr(pool, "_connections", ())):
            _cap_open(connection, core)


def _core(pool: Any) -> Any:
    """The package of ``pool``, httpcore or httpcore2, whose timeouts its streams raise; else None."""
    for cls in type(pool).__mro__:
        name = cls.__module__.split(".")[0]
        if name in ("httpcore", "httpcore2"):
            return importlib.import_module(name)
    return None


def _cap_open(connection: Any, core: Any) -> None:
    """Wrap the stream of a connection opened before its pool was capped, if it has one yet.

    An origin connection holds its HTTP/1.1 or HTTP/2 connection, which holds
    the stream; a proxy's connection holds one more level.
    """
    for _ in range(3):
        stream = getattr(connection, "_network_stream", None)
        if stream is not None:
            if not isinstance(stream, _DeadlineStream):
                connection._network_stream = _DeadlineStream(stream, core)
            return
        connection = getattr(connection, "_connection", None)
        if connection is None:
            return


def _capped(timeout: float | None, error: type[Exception]) -> float | None:
    at: float | None = getattr(_local, "at", None)
    if at is None:
        return timeout
    left: float = at - time.monotonic()
    if left <= 0:
        raise error("the total timeout ran out")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    """An httpcore network stream whose reads and writes end by the thread's deadline."""

    def __init__(self, stream: Any, core: Any) -> None:
        self._stream, self._core = stream, core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._stream.read(max_bytes, _capped(timeout, self._core.ReadTimeout))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _capped(timeout, self._core.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: Any = None
    ) -> Any:
        capped = _capped(timeout, self._core.ConnectTimeout)
        return _DeadlineStream(
            self._stream.start_tls(ssl_context, server_hostname, capped), self._core
        )

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend:
    """httpcore's blocking network backend, its streams wrapped in `_DeadlineStream`."""

    def __init__(self, inner: Any, core: Any) -> None:
        self._inner, self._core = inner, core

    def connect_tcp(
        self, host: str, port: int, timeout: float | None = None, **options: Any
    ) -> Any:
        capped = _capped(timeout, self._core.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, capped, **options), self._core)

    def connect_unix_socket(self, path: str, timeout: float | None = None, **options: Any) -> Any:
        capped = _capped(timeout, self._core.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, capped, **options), self._core)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
