"""Opening tool sources for a run, and closing them however it ends.

The drivers open the sources of the agents a run reaches (a handoff target's
MCP servers...) and close them when the run ends; `Agent` opens its own the
same way when a run starts.

When the run fails (or is cancelled) and a source's close fails too, the
run's error is the one raised, as it carries what the caller needs (a
`RunError`'s ``state`` to resume from, a cancellation): the close error is
attached to it, as a note (``__notes__``, printed with the traceback on
Python 3.11+) and in its ``close_errors`` list. A close that fails after a run
that ended (finished, or suspended for the caller) raises a `SourceCloseError`
carrying the run's response (`close_failed`), so the state to resume goes
with it; one that fails after a caller stopped iterating a stream raises the
close error itself (there is no response).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any, Protocol, TypeVar, runtime_checkable

from toolfold._errors import SourceCloseError, add_note
from toolfold.toolkit._results import exception_text, one_line
from toolfold.toolkit._tool import Tool

_log = logging.getLogger("toolfold.sources")
T = TypeVar("T")


@runtime_checkable
class ToolSource(Protocol):
    """What a run needs of a tool source.

    ``open`` and ``close`` nest (a source counts its holders); ``tools`` lists
    the tools of an open source as `Tool` values whose calls go to it.
    """

    def open(self) -> None:
        """Make the tools callable (start a process, connect...)."""

    def close(self) -> None:
        """Release what `open` took."""

    def tools(self) -> Sequence[Tool[..., Any]]:
        """The source's tools, listed now."""
        ...


@contextmanager
def opened(sources: Sequence[ToolSource]) -> Iterator[list[Tool[..., Any]]]:
    """Open every source, yield their tools, close them all however the block ends."""
    with ExitStack() as stack:
        listed: list[Tool[..., Any]] = []
        for source in sources:
            source.open()
            stack.push(_closer(source))
            listed.extend(source.tools())
        yield listed


@asynccontextmanager
async def aopened(sources: Sequence[ToolSource]) -> AsyncIterator[list[Tool[..., Any]]]:
    """`opened` for async runs: opening and closing happen off the event loop."""
    import asyncio  # here, so that blocking runs never import asyncio

    async with AsyncExitStack() as stack:  # each one closed, even when another's close fails
        listed: list[Tool[..., Any]] = []
        for source in sources:
            await open_off_loop(source)
            stack.push_async_exit(source_closer(source, partial(asyncio.to_thread, source.close)))
            listed.extend(await tools_off_loop(source))
        yield listed


async def open_off_loop(source: ToolSource) -> None:
    """Open ``source`` in a worker thread, and never leave it open when the caller is cancelled.

    A thread cannot be stopped: a caller cancelled while the source opens
    (a run under ``asyncio.wait_for``, a server slow to start) gets its
    `CancelledError` at once, and the source's open, if it watches for that
    (`when_open_cancelled`, as an MCP server's handshake does), stops; the
    worker closes the source as soon as its open ends (a failure to close is
    logged as a warning of the ``toolfold.sources`` logger: there is no
    caller left to raise it to). A source that had opened already when the
    cancellation came is closed here before it propagates, a close error
    attached to it (`note_close_error`).
    """
    import asyncio

    opening = _Opening(source)
    try:
        await asyncio.to_thread(opening.run)
    except asyncio.CancelledError as cancelled:
        if opening.abandon():
            raise
        await source_closer(source, partial(asyncio.to_thread, source.close))(
            type(cancelled), cancelled, cancelled.__traceback__
        )
        raise


async def tools_off_loop(source: ToolSource) -> list[Tool[..., Any]]:
    """``source.tools()`` in a worker thread, stopped when the caller is cancelled.

    As for `open_off_loop`: a thread cannot be stopped, so the caller gets its
    `CancelledError` at once, and a listing that watches for it
    (`when_open_cancelled`, as an MCP server's request does) stops waiting,
    rather than hold the worker thread, and the source, until its timeout.
    """
    return await listing_off_loop(lambda: list(source.tools()))


async def listing_off_loop(listing: Callable[[], T]) -> T:
    """``listing()`` (a source's listing: its ``tools``, an MCP server's ``listing``) in a
    worker thread, stopped when the caller is cancelled, as `tools_off_loop` does."""
    import asyncio

    watched = _Listing()
    try:
        return await asyncio.to_thread(watched.run, listing)
    except asyncio.CancelledError:
        watched.abandon()
        raise


@contextmanager
def when_open_cancelled(stop: Callable[[], object]) -> Iterator[None]:
    """Within the block, ``stop()`` is called if the caller of this open (or listing) is cancelled.

    For a source's ``open`` that waits (a server's handshake), or its
    ``tools`` (a server's listing): run by `open_off_loop` or
    `tools_off_loop`, whose caller may be cancelled while it waits, the open
    can then stop waiting rather than hold the worker thread (which
    ``asyncio.run`` waits for at its end) until it finishes. ``stop`` is
    called on the event loop's thread (it must not block), or at once when
    the caller was cancelled before the block; only this open's caller
    counts, not other opens running meanwhile, even of the same source.
    Outside those two (a blocking open or listing) it is never called.
    """
    opening = _current_opening.get()
    if opening is None:
        yield
        return
    opening.watch(stop)
    try:
        yield
    finally:
        opening.unwatch(stop)


class _Watched:
    """Work on a worker thread that its caller may abandon: the stops to call then."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._abandoned = False
        self._stops: list[Callable[[], object]] = []

    def watch(self, stop: Callable[[], object]) -> None:
        """Call ``stop`` when the caller abandons the work (now, if it has)."""
        with self._lock:
            if not self._abandoned:
                self._stops.append(stop)
                return
        stop()

    def unwatch(self, stop: Callable[[], object]) -> None:
        """No longer call ``stop``."""
        with self._lock:
            if stop in self._stops:  # not when it was called at once
                self._stops.remove(stop)

    def abandon(self) -> bool:
        """Mark the work abandoned and tell it to stop (`when_open_cancelled`): True, or
        False, telling nothing, when it is past stopping (`_ended`)."""
        with self._lock:
            self._abandoned = True
            if self._ended():
                return False
            stops = list(self._stops)
        for stop in stops:
            stop()
        return True

    def _ended(self) -> bool:
        """Whether the work is past stopping (asked holding the lock)."""
        return False


class _Listing(_Watched):
    """A source's listing on a worker thread, which its caller may abandon (`listing_off_loop`)."""

    def run(self, listing: Callable[[], T]) -> T:
        """List, watched for the caller's cancellation."""
        _current_opening.set(self)  # in the worker's copy of the caller's context only
        return listing()


class _Opening(_Watched):
    """A source's open on a worker thread, which its caller may abandon (`open_off_loop`).

    `abandon` is True when the worker closes the source (its open had not
    ended), False when the open had ended (the caller closes it).
    """

    def __init__(self, source: ToolSource) -> None:
        super().__init__()
        self._source = source
        self._opened = False

    def run(self) -> None:
        """Open the source; close it again if the caller abandoned it meanwhile."""
        _current_opening.set(self)  # in the worker's copy of the caller's context only
        self._source.open()
        with self._lock:
            self._opened = True
            if not self._abandoned:
                return
        try:
            self._source.close()
        except Exception as failure:
            name = getattr(self._source, "name", None) or type(self._source).__name__
            _log.warning(
                "closing tool source %r, opened for a caller that was cancelled meanwhile, "
                "failed: %s: %s",
                name,
                type(failure).__name__,
                one_line(exception_text(failure)),  # (the source's text, a server's maybe)
            )

    def _ended(self) -> bool:
        # abandoned before its open ended, the worker closes the source (`run`)
        return self._opened


#: The open (or listing) `open_off_loop` (`tools_off_loop`) runs in this (worker) thread's
#: context, for `when_open_cancelled`.
_current_opening: ContextVar[_Watched | None] = ContextVar("toolfold_opening", default=None)


def _closer(source: ToolSource) -> Callable[..., bool]:
    """An exit callback closing ``source``: its error is raised, or noted on the error in flight."""

    def close(kind: Any, error: BaseException | None, traceback: Any) -> bool:
        try:
            source.close()
        except Exception as failure:
            if not _noted(error, failure, source):
                raise
        return False

    return close


def source_closer(
    source: Any, closing: Callable[[], Awaitable[object]]
) -> Callable[..., Awaitable[bool]]:
    """An async exit callback (`AsyncExitStack.push_async_exit`) awaiting ``closing()``.

    ``closing`` closes ``source`` (off the event loop); its error is raised,
    or, when the block raised, noted on the block's error (see the module).
    """

    async def close(kind: Any, error: BaseException | None, traceback: Any) -> bool:
        try:
            await closing()
        except Exception as failure:
            if not _noted(error, failure, source):
                raise
        return False

    return close


def _noted(error: BaseException | None, failure: Exception, source: Any) -> bool:
    """Attach ``failure`` (closing ``source``) to ``error``, the block's; False to raise it instead.

    A caller that stops iterating a stream (`GeneratorExit`) has no error to
    attach it to: the close error is raised, not dropped.
    """
    if error is None or isinstance(error, GeneratorExit):
        return False
    name = getattr(source, "name", None) or type(source).__name__
    note_close_error(error, failure, f"closing tool source {name!r}")
    return True


def note_close_error(error: BaseException, failure: BaseException, what: str) -> None:
    """Attach ``failure`` to ``error`` as a note saying ``what`` failed, and in ``close_errors``."""
    note = f"{what} failed as well: {type(failure).__name__}: {failure}"
    add_note(error, note)
    error.__dict__.setdefault("close_errors", []).append(failure)


def close_failed(failure: Exception, response: Any) -> SourceCloseError:
    """The error to raise, from ``failure``, when closing a run's sources failed after ``response``.

    ``failure`` is the first close error, the others attached to it (see `_noted`).
    """
    errors: list[BaseException] = [failure, *failure.__dict__.get("close_errors", ())]
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return SourceCloseError(
        f"the run ended ({response.state.phase}) but closing a tool source failed: "
        f"{type(failure).__name__}: {failure}{more}; the error's response and state are the run's",
        response,
        errors,
    )
