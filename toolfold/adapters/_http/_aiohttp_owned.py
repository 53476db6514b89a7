"""What the aiohttp session a transport makes has of its own: its read timer and its responses.

`Reply` is the session's response class: an ``aiohttp.ClientResponse`` with
the names the transport reads (``status_code``, ``raw_reader()``,
``aclose()``...), so a request's coroutine is aiohttp's own, awaited
directly, with no wrapper coroutine or object per request (each one more the
garbage collector walks while many runs wait on their answers).

**The read timeout.** aiohttp's connection protocol (``ResponseHandler``) restarts the read
timeout at each point where the peer showed progress: when the request is
written (``start_timeout``), on every piece of data, when reading resumes;
and stops it when the answer ends or reading pauses. Each restart cancels an
``asyncio.TimerHandle`` and schedules a new one, 3 timers an exchange or so
(bench/bench_aiohttp_split.py: 160k instructions of a 3-step run, a twentieth
of its client work).

`WatchedReads` keeps the same points and the same deadline (the last
progress plus ``sock_read``) and only records the time of each: a single
timer per connection, when it fires, ends the read if the deadline has passed
and otherwise waits again until the deadline it now sees. A read times out
exactly when aiohttp's would, with aiohttp's own error (``_on_read_timeout``);
the timer is replaced only when it would fire after a shorter timeout's
deadline, and cancelled when the connection is lost.

**A body aiohttp's parser refuses.** A bad chunk size or an over-long trailer
line after the head fails the connection only; the same protocol also fails
the body being read (`WatchedReads.set_exception`), which otherwise waited for good.

The hooks are aiohttp's internal methods ``_reschedule_timeout`` and
``_drop_timeout`` (both in aiohttp since 3.3) and the connector's protocol
factory; should a release rename them, aiohttp's own timers run instead
(correct, only slower: tests/adapters/test_aiohttp_owned.py checks both).
"""

from __future__ import annotations

import asyncio
import functools
import operator
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from aiohttp import ClientPayloadError, ClientResponse
from aiohttp.client_proto import ResponseHandler
from aiohttp.http_exceptions import HttpProcessingError

from toolfold.adapters._http._backends import (
    READ_IN_PIECES,
    AiohttpPieces,
    arrived_body,
    left_over,
)

__all__ = ["Reply", "WatchedReads", "watch_reads"]


class Reply(ClientResponse):
    """The owned session's response: aiohttp's, with the names the transport reads."""

    # aiohttp's ``status`` read in C: no Python call on every answer.
    status_code = property(operator.attrgetter("status"), doc="The status (aiohttp's ``status``).")

    def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives; what arrived before a failure comes before it."""
        return AiohttpPieces(self.content)

    def raw_reader(self) -> Callable[[], Awaitable[bytes]]:
        """What gives the next piece of the body as it arrives (empty at its end).

        It raises a failure before the data that arrived before it: `left_over` has that.
        """
        return self.content.readany

    def left_over(self) -> bytes:
        """What arrived of the body before its connection failed (see `_backends.left_over`)."""
        return left_over(self.content)

    # The whole body when it came with the head (taken, the connection given
    # back), else None: `arrived_body` itself, one call fewer per answer.
    arrived = arrived_body

    async def aclose(self) -> None:
        """Give the connection back (a body not read to its end closes it)."""
        if self.content.at_eof():
            self.release()
        else:
            self.close()


class WatchedReads(ResponseHandler):
    """aiohttp's connection protocol, its read timeout kept by one timer (see the module),
    and its parser's failure in a body given to that body (`set_exception`)."""

    __slots__ = ("_due", "_progress_at", "_watching")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self._watching = False  # whether a read deadline is running
        self._progress_at = 0.0  # when it started: the peer's last progress
        self._due = 0.0  # when the timer fires (its handle's `when()`, kept without a call)

    def _reschedule_timeout(self) -> None:
        timeout = self._read_timeout
        if not timeout:
            self._watching = False
            return
        now = self._loop.time()
        self._watching, self._progress_at = True, now
        handle = self._read_timeout_handle
        due = now + timeout
        if handle is None or self._due > due:
            # No timer, or one set for a longer timeout than this one.
            if handle is not None:
                handle.cancel()
            self._read_timeout_handle = self._loop.call_at(due, self._check_reads)
            self._due = due

    def _drop_timeout(self) -> None:
        self._watching = False  # the timer, when it fires, does nothing

    # aiohttp starts the read timeout once the request is written with
    # ``start_timeout``, which only restarts it: the restart itself, one call
    # fewer per request (`_hooks_present` checks that is all it does).
    start_timeout = _reschedule_timeout

    def _check_reads(self) -> None:
        self._read_timeout_handle = None
        timeout = self._read_timeout
        if not (self._watching and timeout):
            return
        due = self._progress_at + timeout
        if self._loop.time() >= due:
            self._watching = False
            self._on_read_timeout()
        else:
            self._read_timeout_handle = self._loop.call_at(due, self._check_reads)
            self._due = due

    def set_exception(self, exc: BaseException, *cause: BaseException) -> None:
        """Fail the connection, and the body being read with it.

        aiohttp (3.14) puts its parser's failure in the middle of a body (a bad
        chunk size, an over-long trailer line, after the head was handed on)
        on the connection alone and stops its read timeout: the body's reader
        then waited for data that could no longer come, for ever under the
        default timeouts. It gets the failure as aiohttp gives a body cut by
        the connection, a ``ClientPayloadError``.
        """
        payload = getattr(self, "_payload", None)  # (an aiohttp internal: checked, not assumed)
        super().set_exception(exc, *cause)
        if not isinstance(exc, HttpProcessingError):
            return  # a read timeout, a lost connection: aiohttp fails the body itself
        if payload is not None and not payload.is_eof() and payload.exception() is None:
            failure = ClientPayloadError(f"Response payload is not completed: {exc!r}")
            payload.set_exception(failure, *cause)

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        handle, self._read_timeout_handle = self._read_timeout_handle, None
        if handle is not None:
            handle.cancel()


def _hooks_present() -> bool:
    """Whether this aiohttp's protocol has every internal `WatchedReads` builds on.

    The methods it overrides and calls, the two attributes its ``__init__``
    sets, and a ``start_timeout`` that only calls ``_reschedule_timeout`` (the
    watcher takes one for the other): with any of them changed, the watcher
    could miss a restart or fail in its timer, so aiohttp's own timers are
    kept instead.
    """
    methods = ("_reschedule_timeout", "_drop_timeout", "_on_read_timeout", "connection_lost")
    if not all(callable(getattr(ResponseHandler, name, None)) for name in methods):
        return False
    names = getattr(getattr(ResponseHandler.__init__, "__code__", None), "co_names", ())
    if "_read_timeout" not in names or "_read_timeout_handle" not in names:
        return False
    start = getattr(getattr(ResponseHandler, "start_timeout", None), "__code__", None)
    return getattr(start, "co_names", None) == ("_reschedule_timeout",)


HOOKS_PRESENT = _hooks_present()


def watch_reads(connector: Any) -> None:
    """Make ``connector`` (an ``aiohttp.BaseConnector``) open connections with `WatchedReads`.

    Nothing changes when this aiohttp lacks one of the internals the watcher
    builds on (`HOOKS_PRESENT`): its own timers then keep the read timeout.
    """
    factory = getattr(connector, "_factory", None)
    if HOOKS_PRESENT and isinstance(factory, functools.partial) and factory.func is ResponseHandler:
        connector._factory = functools.partial(WatchedReads, *factory.args, **factory.keywords)


READ_IN_PIECES.add(Reply)
