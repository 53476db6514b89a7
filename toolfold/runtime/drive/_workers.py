"""Handing a sync tool call to a worker thread from the event loop, cheaply.

`loop.run_in_executor` builds a `concurrent.futures.Future` (with its
condition and lock), chains it to an asyncio future with callbacks both ways,
and wakes the loop through its self-pipe once per finished call. Under load
(a hundred runs on one loop, each calling a small sync tool) that bookkeeping
and those wake-ups cost more than the tool. Here a call is one tuple on a
queue, the worker thread resolves the asyncio future itself via the loop, and
calls finishing together wake the loop once: whatever finished while the loop
was busy is settled in one callback.

Semantics are those of ``run_in_executor(pool, copy_context().run, ...)``:
the function runs in a worker thread in a copy of the caller's context (so
`RunContext` and context variables read as at the call, and what the tool
sets stays its own); cancelling the future before a worker picks the call up
means it never runs; a call already running cannot be interrupted and its
result is dropped. Workers are daemon threads made on demand, at most
`MAX_WORKERS`, so as many sync tools can block at once as with the shared pool.
A call that timed out keeps its thread (Python cannot kill one) but gives up
its slot (`abandon`): a replacement worker serves the queue, so stuck calls
never starve later ones, and a worker ends when the stuck call does (or,
should the replacement not have begun yet, serves on in its place).
Blocking callers use the same workers through `submit_sync`.

A call submitted from a worker thread itself (a sync tool that runs
another agent with `run`, whose step hands its calls to workers, or runs
an event loop that does) never waits in the queue: with no idle worker, it
gets a thread of its own past `MAX_WORKERS` (`_Workers.submit`). Queued,
it would wait for a worker to free, and each could be such a tool, waiting
for its own queued calls: with every worker so taken (32 runs at once
delegating from a sync tool), none ever would. A worker ends once its call
does while more than `MAX_WORKERS` are counted, so the extra threads are
gone when the nested calls are. toolfold's own hand-over of such a run to
another thread (`run_blocking` inside a running loop) gives it a thread of
its own, not one of a capped pool, and marks that thread's calls as the
worker's (`for_worker`): so at any depth of nesting. A thread of the tool's own making
(its own executor) is not known to be waited for by a worker: its calls
queue, and 32 such tools at once still hang (documented: call `run` on the
tool's thread, or `await arun` from an async tool).

Ctrl-C while a call is handed over (a worker started, the call queued, a
stuck call's slot given away) leaves the counts as they were, or as they are
with a worker that did start waiting idle: the pool keeps running as many
calls at once as before. A call whose `submit` raised either never runs
(dropped before any worker took it) or was queued and runs as any other: the
caller treats it as a call handed off, then interrupted (it cancels it, or
keeps its result once it ended). Python runs a signal handler once a C call
returned, so Ctrl-C lands in `submit` as the pool's lock is released, or
just after the call is queued, the lock still held: then no worker has
ended the call (a worker ends one under that lock), and whether one took it
is settled with the worker (see `_Workers._drop`).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import inspect
import os
import queue
import threading
import time
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from toolfold.toolkit._results import exception_text

if TYPE_CHECKING:
    import asyncio

MAX_WORKERS = 32

T = TypeVar("T")

# (inbox, future, context, function, args): the inbox is an `_Inbox` (event
# loop callers) or a `SyncInbox` (blocking callers); the future anything hashable
# with ``cancelled()``.
_Job = tuple[Any, Any, contextvars.Context, Callable[..., Any], tuple[Any, ...]]


# What a call's task, or a worker's future, returns boxed rather than raise (see `Escaped`).
ESCAPING = (KeyboardInterrupt, SystemExit, GeneratorExit)


class Escaped:
    """A KeyboardInterrupt, SystemExit or GeneratorExit a call raised, returned boxed by its
    task (`contained`) or its worker's future, for the run's code awaiting it to raise again.

    A task whose coroutine raises KeyboardInterrupt or SystemExit holds it
    for no awaiter: asyncio raises it out of the event loop at once, past
    the run that awaits the task, which never learns of it (no `.state` to
    resume from; ``asyncio.run`` then cancels the run, a cancellation nobody
    sees). A GeneratorExit a future holds is thrown into its awaiting task's
    outermost coroutine, which closes what that awaits rather than raise it
    there: an async stream's generators are left running, and
    ``asyncio.run`` fails to close them at its end ("async generator ignored
    GeneratorExit"). Raised again by a plain ``raise`` where the run awaits
    the call, it goes up through the run as any exception does, and the run
    gives it its state.
    """

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class StopIterationCarrier(RuntimeError):
    """A tool's `StopIteration`, carried through an `asyncio.Future` (which refuses one),
    or a `StopIteration` or `StopAsyncIteration` its ``validate_arguments`` raised, through
    the run's coroutine or generator (which would make it a bare `RuntimeError`), ``what``
    naming where it was raised.

    ``__cause__`` is the tool's exception; `carried` gives it back. It pickles (a run in
    another process raises it to its caller): rebuilt from its cause and ``what``, with
    its attributes (the run's ``state``).
    """

    def __init__(self, raised: StopIteration | StopAsyncIteration, what: str = "the tool") -> None:
        text = exception_text(raised)
        kind = type(raised).__name__
        super().__init__(f"{what} raised {kind}" + (f": {text}" if text else ""))
        self.__cause__ = raised
        self.raised = raised
        self.what = what

    def __reduce__(self) -> tuple[Any, ...]:
        # Python rebuilds an exception from its args (the text alone here), which this
        # __init__ refuses, and drops __cause__: rebuilt from what was raised (kept
        # apart: a process pool sets __cause__ to its remote traceback) instead.
        return (type(self), (self.raised, self.what), self.__dict__)


class CancelCarrier(Exception):
    """A sync tool's own `asyncio.CancelledError` (a library it wraps raised it), carried
    as an `Exception` from the thread that ran the call to where its outcome is made
    (`carried`). A call on a thread cannot be cancelled by the run, so it is the call's
    error, as any other the tool raises; bare, a future (and a blocking round's checks)
    would take it for a cancellation of the run, and end it."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(raised)
        self.raised = raised


def carried(exc: BaseException) -> BaseException:
    """``exc``, or the tool's own `StopIteration` (or `StopAsyncIteration`) it carries
    (`StopIterationCarrier`), or its own `CancelledError` (`CancelCarrier`)."""
    if type(exc) is StopIterationCarrier or type(exc) is CancelCarrier:
        return exc.raised
    return exc


class _Inbox:
    """Finished calls of one event loop, settled on it in batches."""

    __slots__ = ("__weakref__", "_armed", "_items", "_lock", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: `_INBOXES` holds this inbox under its loop, weakly; a strong reference
        # back would keep every loop that ever handed off a call alive for good.
        self._loop = weakref.ref(loop)
        self._items: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self._lock = threading.Lock()
        self._armed = False

    def put(self, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
        """Called from a worker: queue the result, wake the loop if it is not already due."""
        with self._lock:
            self._items.append((future, ok, value))
            if self._armed:
                return
            self._armed = True
        # A closed loop raises RuntimeError (one gone is None): nobody waits for these results then.
        loop = self._loop()
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        with self._lock:
            items = list(self._items)
            self._items.clear()
            self._armed = False
        for future, ok, value in items:
            if future.cancelled():
                if ok:  # (nothing reads it: a coroutine it returned never runs)
                    close_unstarted(value)
                continue
            if ok:
                future.set_result(value)
            elif isinstance(value, StopIteration):
                # A future refuses StopIteration; without this the caller would wait forever.
                # Carried instead, and taken out where the call's outcome is made
                # (`carried`): the model reads it as a blocking run's call shows it.
                future.set_exception(StopIterationCarrier(value))
            elif isinstance(value, GeneratorExit):  # (see `Escaped`)
                future.set_result(Escaped(value))
            else:
                future.set_exception(value)


def close_unstarted(value: Any) -> None:
    """Close ``value``, what a sync call returned, if it is a coroutine never started.

    For a value nothing will read (its future was cancelled, or its round was
    interrupted before reading it): the coroutine never runs either way (the call
    runs again on resume), and, left unclosed, would be reported as "never awaited"
    when collected, at a time and place that has nothing to do with it.
    """
    if type(value) is types.CoroutineType and inspect.getcoroutinestate(value) == "CORO_CREATED":
        value.close()


class _Start:
    """A worker being started, settled under the pool's lock.

    ``state`` is "starting" until one of: "begun" (set by the worker: it
    serves), "given_up" (its starter, interrupted, gave its slot back: it
    must not serve) or "taken_over" (it replaces an abandoned call's worker,
    and that call ended before it began: the worker that ran it serves on in
    its place, and this one must not).
    """

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state = "starting"


class _Workers:
    """Daemon threads taking calls from one queue, made when none is idle."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._count = 0
        # Running calls whose slot went away (see `abandon`), each with the start of
        # the worker that took its slot, or None when the slot was given up.
        self._abandoned: dict[Any, _Start | None] = {}
        # Calls a worker has taken and not yet given back (marked before they run,
        # cleared under the lock once done): only those can be abandoned.
        self._running: set[Any] = set()
        self._backlog = 0  # queued calls no worker is reserved for (all busy, at the cap)
        # Futures of calls whose submit was interrupted before any worker took them:
        # a worker that gets one skips it (see `_drop`). (One whose put itself failed
        # stays, and workers then read them under the lock: `SimpleQueue.put` fails
        # for want of memory only.)
        self._dropped: set[Any] = set()

    def submit(self, job: _Job) -> None:
        # An idle worker is reserved for this call (as ThreadPoolExecutor's
        # idle semaphore does), so two calls never count on the same one.
        #
        # Ctrl-C (see the module's docstring) while the lock is held drops the call
        # unless a worker took it (`_drop`); at the lock's exit, the call is queued. A
        # worker started for the call is settled as `_Start` says.
        new = False  # a worker's slot is reserved for this call, which is not queued yet
        overflow = False  # a worker's call, past the cap: a thread of its own runs it
        start: _Start | None = None
        started = False  # that worker's thread is made: it serves
        try:
            with self._lock:
                if self._idle > 0:
                    self._idle -= 1
                    try:
                        self._jobs.put(job)
                    except BaseException:
                        self._drop(job[1], "idle")
                        raise
                    return
                if self._count >= MAX_WORKERS:
                    if workers_own():
                        # A worker's own call (see the module's docstring): a thread of its
                        # own, given the call, not the queue (it would take one queued first).
                        self._count += 1
                        overflow = True
                    else:
                        self._backlog += 1
                        try:
                            self._jobs.put(job)
                        except BaseException:
                            self._drop(job[1], "backlog")
                            raise
                        return
                else:
                    new = True
                    self._count += 1
            if overflow:
                # (no Ctrl-C here: signals reach the main thread, never a worker)
                try:
                    self._start(_Start(), job)
                except BaseException:
                    with self._lock:
                        self._count -= 1
                    raise
                return
            # Started before the call is queued, so that no queued call waits for a
            # worker that never came.
            start = _Start()
            self._start(start)
            started = True
            with self._lock:
                try:
                    self._jobs.put(job)
                except BaseException:
                    new = False
                    self._drop(job[1], "idle")  # (the worker started for it waits idle)
                    raise
                new = False
        except BaseException:
            if new:
                with self._lock:
                    if started or (start is not None and start.state == "begun"):
                        self._idle += 1
                    else:  # it never serves: it ends at once if it starts
                        if start is not None:
                            start.state = "given_up"
                        self._count -= 1
            raise

    def _drop(self, future: Any, reserved: str) -> None:
        """Under the lock, ``future``'s call queued or not by an interrupted submit: unless
        a worker took it, drop it and give back the worker ``reserved`` for it.

        Noted dropped before the marks of taken calls are read, as a worker
        marks a call taken before it reads the dropped ones (without the lock,
        so that taking a call costs no lock): then either this sees the mark,
        and the call runs as any other, or the worker sees the call dropped
        (and, under the lock, skips it).
        """
        dropped = self._dropped
        # An in-place operator and `in`, not calls: no signal handler runs between
        # the mark and the check (3.11+ runs them after calls), so a second Ctrl-C
        # cannot land between them.
        dropped |= {future}
        if future in self._running:
            dropped.discard(future)
        elif reserved == "idle":
            self._idle += 1
        else:
            self._backlog -= 1

    def _start(self, start: _Start, job: _Job | None = None) -> None:
        _WorkerThread(
            target=self._work, args=(start, job), name=f"toolfold-tool-{self._count}", daemon=True
        ).start()

    def _work(self, start: _Start, first: _Job | None = None) -> None:
        """Serve calls from the queue, ``first`` (a worker's call past the cap) before them."""
        with self._lock:
            if start.state != "starting":  # given up by its starter, or taken over
                return
            start.state = "begun"
        jobs = self._jobs
        running = self._running
        dropped = self._dropped
        lock = self._lock
        while True:
            if first is None:
                inbox, future, context, function, args = jobs.get()
            else:
                inbox, future, context, function, args = first
                first = None
            # Marked taken before the cancel check, so a caller that cancels then abandons
            # either sees the mark or has the call skipped (see `abandon`), and before
            # dropped calls are read (see `_drop`).
            running.add(future)
            if dropped:
                with lock:
                    skip = future in dropped
                    if skip:  # its submit was interrupted and gave its reservation back
                        dropped.discard(future)
                        running.discard(future)
                if skip:
                    del inbox, future, context, function, args
                    continue
            if not future.cancelled():
                try:
                    value = context.run(function, *args)
                except (
                    BaseException
                ) as exc:  # delivered to the awaiting task, as run_in_executor does
                    del context, function, args  # (before the caller can see the end: below)
                    inbox.put(future, False, exc)
                else:
                    # Let go of the call's context (its context variables: a run's, a
                    # request's), its function and arguments before its end is handed on:
                    # a caller that has it sees nothing of the call kept alive by this
                    # thread. (The future and the inbox are let go of at the loop's end.)
                    del context, function, args
                    inbox.put(future, True, value)
                    del value  # (an idle worker keeps no result alive)
            else:
                del context, function, args
            with lock:
                running.discard(future)
                if self._abandoned and future in self._abandoned:
                    # Its caller gave up and its slot went away: end here, unless the
                    # worker meant to take the slot has not begun yet.
                    replacement = self._abandoned.pop(future)
                    if replacement is None or replacement.state != "starting":
                        return
                    # This worker serves in its place, reserved as it was for a queued call.
                    replacement.state = "taken_over"
                elif self._count > MAX_WORKERS:
                    # Past the cap for workers' own calls (see `submit`): one ends.
                    self._count -= 1
                    return
                elif self._backlog > 0:
                    self._backlog -= 1  # a queued call waits for a worker: this one
                else:
                    self._idle += 1
            del inbox, future

    def abandon(self, token: Any) -> bool:
        """The call of ``token`` (its future) timed out while running: give its slot away.

        Its thread cannot be stopped; it ends when the call does, and until
        then a new worker serves the queue, so stuck calls never starve
        later ones and at most `MAX_WORKERS` threads serve live calls. (A
        call that ends before the new worker began: its worker serves in the
        new one's place, which ends at once, see `_Start`.)

        Nothing happens to a call no worker runs any more (it ended, its
        worker back in service, though its caller may not know yet) or none
        took yet (cancelled first, it never runs): decided under the lock
        the worker clears its mark with, so a worker never both goes back to
        serve and gives its slot away.

        Interrupted (Ctrl-C) before the new worker began, the call still
        running, nothing is given away: the call's worker keeps its slot and
        the queued call waits for it again.

        Returns:
            Whether the call was abandoned (it was running).
        """
        start = _Start()
        spawn = False
        try:
            with self._lock:
                if token not in self._running:
                    return False
                if self._backlog > 0 and self._count <= MAX_WORKERS:
                    # A queued call gets the new worker at once (unless past the cap).
                    spawn = True
                    self._backlog -= 1
                    self._abandoned[token] = start
                else:
                    self._abandoned[token] = None
                    self._count -= 1
            if spawn:
                self._start(start)
        except BaseException:
            if spawn:
                with self._lock:
                    if start.state == "starting":
                        # No new worker: the queued call waits again, and the
                        # running call's worker keeps its slot (had the call
                        # ended, that worker would have taken this one's place).
                        start.state = "given_up"
                        self._backlog += 1
                        del self._abandoned[token]
            raise
        return True


class _WorkerThread(threading.Thread):
    """A worker's thread: what it submits is its own call (see `_Workers.submit`)."""


_FOR_WORKER = threading.local()  # ``.on``: this thread runs a call a worker waits for


def workers_own() -> bool:
    """Whether calls submitted from this thread are a worker's own (see `_Workers.submit`):
    it is a worker's, or runs what a worker blocks on (`for_worker`)."""
    return type(threading.current_thread()) is _WorkerThread or getattr(_FOR_WORKER, "on", False)


def for_worker(function: Callable[[], T]) -> Callable[[], T]:
    """``function``, to run on another thread while this one blocks until it returns: called
    from a worker (or for one), what it submits there counts as the worker's own call.

    toolfold's own hand-overs use it (`run_blocking`'s thread): without it, a sync
    tool whose event loop runs a blocking run would have that run's calls
    queued for the workers, each held by such a tool (see the module's docstring).
    """
    if not workers_own():
        return function

    def run() -> T:
        before = getattr(_FOR_WORKER, "on", False)
        _FOR_WORKER.on = True
        try:
            return function()
        finally:
            _FOR_WORKER.on = before

    return run


_WORKERS: _Workers | None = None
_WORKERS_LOCK = threading.Lock()
_INBOXES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = weakref.WeakKeyDictionary()


def _workers() -> _Workers:
    global _WORKERS
    if _WORKERS is None:
        with _WORKERS_LOCK:
            if _WORKERS is None:
                _WORKERS = _Workers()
    return _WORKERS


def _forget_workers() -> None:
    # A forked child has none of the parent's threads.
    global _WORKERS
    _WORKERS = None
    _INBOXES.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


class SyncInbox:
    """Where workers report to a blocking caller: ``(ticket, ok, value)`` items.

    ``ok`` is None for a start notice (see `submit_sync`). A call's end is
    stored on its ticket (``ticket.ended``) before it is reported, so the
    caller reads ends from its tickets and takes reports as wake-ups only: a
    report read as Ctrl-C lands (Python runs a signal handler once a C call
    returned, before its result is stored) is lost, the end it told is not.
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: queue.SimpleQueue[tuple[Ticket, bool | None, Any]] = queue.SimpleQueue()

    def put(self, ticket: Ticket, ok: bool | None, value: Any) -> None:
        """Called from a worker: a call's end (``ok`` not None) is stored on ``ticket`` first."""
        if ok is not None:
            ticket.ended = (ok, value)
        self._items.put((ticket, ok, value))

    def get(self, timeout: float | None) -> tuple[Ticket, bool | None, Any]:
        """The next report; raises ``queue.Empty`` after ``timeout`` seconds."""
        return self._items.get(timeout=timeout)


class Ticket:
    """A blocking caller's handle on one call: its index, start time, end, and cancellation.

    ``ended`` is ``(ok, value)`` once the call returned (``ok``, ``value``
    its result, `NOT_RUN` if it was cancelled as it started) or raised
    ``value``; set by the worker before it reports the end (see `SyncInbox`).
    """

    __slots__ = ("_cancelled", "ended", "index", "started")

    def __init__(self, index: int) -> None:
        self.index = index
        self.started: float | None = None
        self.ended: tuple[bool, Any] | None = None
        self._cancelled = False

    def cancelled(self) -> bool:
        """True once the caller gave up on the call (a worker then skips it)."""
        return self._cancelled

    def cancel(self) -> None:
        """Give up on the call."""
        self._cancelled = True


NOT_RUN = object()
"""What a `submit_sync` call reports as its value when it was cancelled as it started."""


def submit_sync(inbox: SyncInbox, ticket: Ticket, function: Callable[..., Any], *args: Any) -> None:
    """Run ``function(*args)`` in a worker for a blocking caller; the result goes to ``inbox``.

    The worker first sets ``ticket.started`` and reports ``(ticket, None, None)``,
    so a timeout can count from the start, not from the time spent queued. Its
    end is set as ``ticket.ended``, then reported (see `SyncInbox`).

    A caller that cancels the ticket, then reads ``ticket.started``, knows
    whether the call runs: None, it never does (a worker skips it, or sees
    the cancel once it set the start); set, its end comes, ``(True, NOT_RUN)``
    when the worker saw the cancel as it started.
    (Each side writes before it reads the other's mark: one sees the other's.)
    """

    def run() -> Any:
        ticket.started = time.monotonic()
        if ticket._cancelled:
            return NOT_RUN
        inbox.put(ticket, None, None)
        return function(*args)

    _workers().submit((inbox, ticket, contextvars.copy_context(), run, ()))


def abandon(token: Any) -> bool:
    """A call timed out or was given up: if a worker still runs it, its slot goes to a new
    worker (see `_Workers.abandon`); returns whether it did.

    ``token`` is the call's future (`hand_off_timed`) or `Ticket` (`submit_sync`).
    """
    return _workers().abandon(token)


def hand_off_timed(
    function: Callable[..., Any], *args: Any
) -> tuple[asyncio.Future[Any], asyncio.Future[float]]:
    """Like `hand_off`, plus a future set to the `time.monotonic` start when a worker starts it."""
    import asyncio

    loop = asyncio.get_running_loop()
    inbox = _INBOXES.get(loop)
    if inbox is None:
        inbox = _INBOXES.setdefault(loop, _Inbox(loop))
    future = loop.create_future()
    started: asyncio.Future[float] = loop.create_future()

    def run() -> Any:
        inbox.put(started, True, time.monotonic())
        return function(*args)

    try:
        _workers().submit((inbox, future, contextvars.copy_context(), run, ()))
    except BaseException:  # queued all the same (Ctrl-C as the lock was let go): a
        future.cancel()  # worker that takes it skips it, as nothing awaits its result
        started.cancel()
        raise
    return future, started


def hand_off(function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """Run ``function(*args)`` in a worker thread; a future of the running loop for its result.

    Must be called from a coroutine (or callback) running on the loop.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    inbox = _INBOXES.get(loop)
    if inbox is None:
        inbox = _INBOXES.setdefault(loop, _Inbox(loop))
    future = loop.create_future()
    try:
        _workers().submit((inbox, future, contextvars.copy_context(), function, args))
    except BaseException:  # queued all the same (Ctrl-C as the lock was let go): a
        future.cancel()  # worker that takes it skips it, as nothing awaits its result
        raise
    return future
