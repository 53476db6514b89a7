"""The write timeout under aiohttp: a request body whose writing is bounded.

aiohttp's ``ClientTimeout`` has no write timeout: a server that accepts the
connection and never reads held a large request for ever (its read timeout
starts only once the request is written). httpx bounds the write of the body
by ``Timeouts.write``; here the body is an aiohttp payload whose write (the
whole body, as httpx's) is bounded by it, for the transport's own session and
an injected one alike, and a `WriteTimeout` is what aiohttp raises then.

Every body that can wait is wrapped, with a write timeout or without one
(``Timeouts(write=None)``, no timeouts, an injected session): a body whose
write is cancelled (the caller's cancel, the total timeout, or aiohttp itself
once the answer has arrived: an early 413, its response's end, ``release()``
and ``close()`` cancel the write) drops its connection. aiohttp waits for the connection to drain only once more than
64 KiB are queued (``StreamWriter.write``'s limit and asyncio's high-water
mark, `_backends.WAITS_ABOVE`), so a smaller body is queued at once and the read
timeout covers the rest.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any

from aiohttp.payload import BytesPayload

__all__ = ["TimedBody", "WriteTimeout"]

if sys.version_info >= (3, 11):

    class WriteTimeout(TimeoutError):
        """The request body was not written within the write timeout (aiohttp has none of its own)."""

else:  # asyncio's TimeoutError is not the built-in one: aiohttp passes on unwrapped
    # only an OSError without errno that is asyncio's (its ``ClientSession._request``).

    class WriteTimeout(asyncio.TimeoutError, TimeoutError):
        """The request body was not written within the write timeout (aiohttp has none of its own)."""


class TimedBody(BytesPayload):
    """A request body whose write is bounded by ``seconds`` (None: not bounded), aborted if cancelled."""

    def __init__(self, value: bytes, seconds: float | None) -> None:
        super().__init__(value)
        self._seconds = seconds

    async def write(self, writer: Any) -> None:
        await self._within(super().write(writer), writer)

    async def write_with_length(self, writer: Any, content_length: int | None) -> None:
        await self._within(super().write_with_length(writer, content_length), writer)

    async def _within(self, writing: Awaitable[None], writer: Any) -> None:
        # Taken now: a cancelled request closes its connection before its body's
        # write is cancelled, and the writer's transport is gone by then.
        transport = getattr(writer, "transport", None)
        try:
            if self._seconds is None:
                await writing
                return
            if sys.version_info >= (3, 11):
                scope = asyncio.timeout(self._seconds)
                try:
                    async with scope:
                        await writing
                except TimeoutError:
                    if scope.expired():
                        raise self._timed_out(transport) from None
                    raise
            else:
                try:  # Python 3.10
                    await asyncio.wait_for(writing, self._seconds)
                except asyncio.TimeoutError:
                    raise self._timed_out(transport) from None
        except asyncio.CancelledError:
            # The caller's cancel or the total timeout, mid-body: the connection
            # is half written (never to be used again) and its peer may never
            # read the rest, so its socket would be held as a timed-out one's was.
            _abort(transport)
            raise

    def _timed_out(self, transport: Any) -> WriteTimeout:
        _abort(transport)
        return WriteTimeout(
            f"the request body was not written within the write timeout of {self._seconds} s"
        )


def _abort(transport: Any) -> None:
    """Drop the connection of ``transport`` (if any) at once, its queued bytes with it.

    Aborted, not closed: a closed transport keeps its socket until the queued
    body is written, which the peer never reads (a socket held for good,
    "unclosed" when the loop ends).
    """
    if transport is not None:
        transport.abort()
