"""Blocking code's event loops, and stopping a blocking round: Ctrl-C and `RoundInterrupt`.

The main thread keeps one event loop for its blocking calls (`run_kept`),
dropped once Ctrl-C (or a failure) interrupts it, with what it still ran
cancelled and run to its end; other threads run a fresh one (`run_blocking`).
A round that runs on a thread of its own is stopped from the caller's by its
`RoundInterrupt` (`_interruptible`, `_run_interruptible`; `watched_interrupt`
and `check_interrupt` for the blocking sub-runs it runs). `_executor` runs a
blocking step's calls on them (`run_calls_sync`).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import contextvars
import logging
import os
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from toolfold.runtime.drive._workers import for_worker, workers_own

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")


_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = concurrent.futures.ThreadPoolExecutor(
                    max_workers=32, thread_name_prefix="toolfold-tool"
                )
    return _POOL


class RoundInterrupt:
    """Stops a round of calls that runs on a thread of its own (Ctrl-C reaches the caller's).

    The round's thread attaches how to cancel what it runs on an event loop
    (several calls, or a lone sub-run with a timeout: `run_calls_sync`); `fire`
    cancels it. Fired before the round attached, the round never starts. A
    lone sub-run runs as its blocking twin on the round's thread, watched
    (`watched_interrupt`): it stops at its next model call or round of calls
    once `fire` was called (a reply it is reading, streamed or not, is read to
    its end and kept first), and the
    async tools it runs on an event loop are cancelled as the round's are.
    A blocking tool cannot be stopped from outside: the round ends once it
    returns. Once nobody keeps what the round does (the caller abandoned the
    run, or a second Ctrl-C stopped waiting for it), `cut` stops a streamed
    reply such a sub-run reads at its next chunk too.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancel: Callable[[], object] | RoundInterrupt | None = None
        self._fired = False
        self._cut = False

    @property
    def is_cut(self) -> bool:
        """Whether `cut` was called (checked at each chunk of a streamed reply)."""
        return self._cut

    @property
    def fired(self) -> bool:
        """Whether `fire` was called."""
        return self._fired

    def attach(self, cancel: Callable[[], object] | RoundInterrupt) -> bool:
        """Set how to cancel what the round runs now (replacing what was set before): a
        function, or the interruption of another round it waits for (a blocking sub-run's:
        see `_relayed_sync`), fired with it; False if `fire` came first (it must not start)."""
        with self._lock:
            if self._fired:
                return False
            self._cancel = cancel
            return True

    @property
    def waits(self) -> bool:
        """Whether what the round runs now goes on once fired, until what it is in returns:
        blocking calls (a sync tool, a blocking sub-run's model call or tool), which stop only
        at their next check (`check_interrupt`), not cancelled on an event loop."""
        cancel = self._cancel
        if isinstance(cancel, RoundInterrupt):
            return cancel.waits
        return cancel is _nothing

    def fire(self) -> bool:
        """Cancel the round; whether it ran on a loop (it is cancelled, or had ended).

        False: the round attached nothing because it has not started (it never will).
        """
        with self._lock:
            self._fired = True
            cancel = self._cancel
            if cancel is None:
                return False
            if isinstance(cancel, RoundInterrupt):
                cancel.fire()
            else:
                cancel()
            return True

    def cut(self) -> None:
        """`fire`, and stop a streamed reply a blocking sub-run of the round reads (at its
        next chunk), in the rounds it waits for too: nobody keeps it (the caller left)."""
        with self._lock:
            self._cut = True
            cancel = self._cancel
        if isinstance(cancel, RoundInterrupt):
            cancel.cut()
        self.fire()


def _nothing() -> None:
    """What cancels a round's blocking calls: nothing (they check `watched_interrupt`)."""


# Told when Ctrl-C waits for a round's blocking calls to return (set by `interrupt_waits`):
# a blocking stream's round, or the sync calls a blocking run's round runs on workers.
INTERRUPT_WAITS: contextvars.ContextVar[Callable[[], object] | None] = contextvars.ContextVar(
    "toolfold_interrupt_waits", default=None
)


# The interruption a round on this thread (the thread's ident) answers to, for
# the blocking sub-runs it runs (and their own rounds, on the same thread).
_WATCHED: contextvars.ContextVar[tuple[RoundInterrupt, int] | None] = contextvars.ContextVar(
    "toolfold_round_interrupt", default=None
)


def watched_interrupt() -> RoundInterrupt | None:
    """The interruption of the round this thread runs (a blocking sub-run's model call or
    round of calls in it stops once it fired), or None.

    Worker threads the round hands sync tools to inherit the context, not the
    interruption: only the round's own thread raises there, and not while an
    event loop runs in it (a tool of a round on a loop, which the
    interruption cancels: what it attached is not to be replaced).
    """
    watched = _WATCHED.get()
    if watched is None or watched[1] != threading.get_ident():
        return None
    running = sys.modules.get("asyncio")
    if running is not None and running._get_running_loop() is not None:
        return None
    return watched[0]


def check_interrupt(interrupt: RoundInterrupt | None) -> None:
    """Raise KeyboardInterrupt where a blocking sub-run stops once ``interrupt`` fired.

    Raised between its steps, the run's loop gives it the state the sub-run
    reached (see `interrupted`), and the call that ran it keeps it (`kept_sub_run`).
    """
    if interrupt is not None and interrupt.fired:
        raise KeyboardInterrupt


# The interruption of the round whose event loop runs this task, and that loop (set by
# `_interruptible`; the tasks the round makes inherit it), for `check_round_on_loop`. The
# threads the round hands sync tools to (and `asyncio.to_thread`) inherit it as well, with
# the event loops they run of their own (a sync tool's `asyncio.run`): only the round's
# loop answers to it, as only the round's thread answers to `_WATCHED`.
_ON_LOOP: contextvars.ContextVar[tuple[RoundInterrupt, asyncio.AbstractEventLoop] | None] = (
    contextvars.ContextVar("toolfold_round_on_loop", default=None)
)


async def check_round_on_loop() -> None:
    """Cancel the running task (a sub-run's, about to call its model or run its calls)
    once the round whose event loop runs it was interrupted.

    `fire` cancels such a round from another thread, by a callback the loop
    runs only after what it runs first: a sub-run whose turn came while
    another's blocking model call held the loop (a sync model function) would
    start its model call before it, after the caller had stopped the round.
    """
    on_loop = _ON_LOOP.get()
    if on_loop is None or not on_loop[0].fired:
        return
    import asyncio

    if asyncio.get_running_loop() is on_loop[1]:  # (not a loop a sync tool runs: it finishes)
        task = asyncio.current_task()
        if task is not None:
            task.cancel()
            await asyncio.sleep(0)  # (CancelledError, here)


async def _interruptible(work: Coroutine[Any, Any, T], interrupt: RoundInterrupt) -> T:
    """``work`` on the running loop, cancelled when ``interrupt`` fires (from another thread)."""
    import asyncio

    loop = asyncio.get_running_loop()
    current = asyncio.current_task()
    assert current is not None
    # Weakly: ``interrupt`` outlives the round (a caller's frame, a traceback), which must
    # not keep its task (and the task, its frames) alive.
    task = weakref.ref(current)

    def cancel() -> None:
        # (once the round is over its loop is closed, and this raises RuntimeError)
        running = task()
        if running is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(running.cancel)

    if not interrupt.attach(cancel):  # interrupted before it began: nothing runs
        work.close()
        raise asyncio.CancelledError
    # (this task's own context: the loop's only task, and its tasks)
    _ON_LOOP.set((interrupt, loop))
    return await work


# `shutdown_default_executor(timeout)` (3.12+), as `asyncio.run` gives it.
_JOIN_TIMEOUT: tuple[float, ...] = (300.0,) if sys.version_info >= (3, 12) else ()


def _run_interruptible(make: Callable[[], Coroutine[Any, Any, T]], interrupt: RoundInterrupt) -> T:
    """``asyncio.run(make())`` on the round's thread, except that once ``interrupt``
    fired, closing the loop does not wait for its executor's threads.

    A cancelled call stops waiting for work it handed to a thread
    (``asyncio.to_thread``), but the thread cannot be stopped; ``asyncio.run``
    would wait for it (on 3.11 without limit) before the caller, waiting for
    the round to end, could raise. The thread finishes on its own.
    """
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(make())
    finally:
        try:
            _cancel_leftovers(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
            if not interrupt.fired:  # as `asyncio.run` waits (3.12+: at most 300 s)
                loop.run_until_complete(loop.shutdown_default_executor(*_JOIN_TIMEOUT))
        finally:
            asyncio.set_event_loop(None)
            loop.close()


async def _await(value: Awaitable[T]) -> T:
    return await value


def tell_interrupt_waits() -> None:
    """Tell whoever shows the run (see `interrupt_waits`) that Ctrl-C waits for blocking
    calls to return (the command line's "stopping once ... returns"); a notice that fails
    must not lose the run, so what it raises (an `Exception`) is dropped."""
    tell = INTERRUPT_WAITS.get()
    if tell is not None:
        with contextlib.suppress(Exception):
            tell()


# How long the main thread waits for a report at most: Ctrl-C that arrives just before it
# blocks (after Python last checked for signals) wakes no wait, and is raised once it returns.
SIGNAL_POLL = 0.25


class _KeptLoop:
    """One event loop kept for blocking calls from the main thread (see `run_kept`)."""

    loop: asyncio.AbstractEventLoop | None = None
    # One dropped whose clean-up a further Ctrl-C stopped (see `_drop_kept`).
    dropped: asyncio.AbstractEventLoop | None = None
    closed_at_exit = False  # (`_close_kept` registered with atexit)


def _close_kept() -> None:
    dropped = _KeptLoop.dropped
    if dropped is not None:
        _drop_kept(dropped)
    loop, _KeptLoop.loop = _KeptLoop.loop, None
    if loop is not None and not loop.is_running() and _close_whole(loop):
        raise KeyboardInterrupt


#: In a child forked from this process: what it inherited and must not use (see `_forked`).
_INHERITED: list[object] = []


def _forked() -> None:
    """In a forked child, forget the parent's pool and kept loop (without closing them).

    The pool's threads are not in the child, yet the pool counts them idle: a
    blocking call inside a running loop handed its run to one and waited for
    good. The kept loop's selector is the parent's epoll/kqueue, shared: the
    child's sockets registered in it would wake the parent's loop, and its
    events be taken by either process. Both are kept (collected, the loop would
    warn as unclosed), never used; the child makes its own at its first call.
    """
    global _POOL, _POOL_LOCK
    _INHERITED.extend(held for held in (_POOL, _KeptLoop.loop, _KeptLoop.dropped) if held)
    _POOL, _POOL_LOCK = None, threading.Lock()
    _KeptLoop.loop = _KeptLoop.dropped = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def run_kept(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Like `run_blocking`, on one event loop kept for the main thread.

    ``asyncio.run`` builds and tears down a loop each time (~130 us); a
    blocking call from the main thread reuses one instead (a blocking
    workflow run, a blocking step of sub-runs). What the coroutine leaves
    running is cancelled, as ``asyncio.run`` does. Other threads, and code
    already inside a running loop, use `run_blocking`.

    Ctrl-C reaches the loop as Python's KeyboardInterrupt, raised in this
    thread where it runs, most often as the loop waits for its next event.
    A signal that lands just before that wait begins (or on another thread)
    wakes no wait: Python raises it once the wait returns. So while the
    coroutine runs, the loop's wait lasts at most `SIGNAL_POLL`, as the main
    thread's other waits do (toolfold leaves the process's signal wakeup fd to
    the program). Interrupted, or failing, the loop is dropped: the next call
    builds a new one, with nothing of the interrupted one left on it.
    """
    import asyncio  # here: `import toolfold` must not pay for asyncio

    if not _in_running_loop() and threading.current_thread() is threading.main_thread():
        dropped = _KeptLoop.dropped
        if dropped is not None:  # (its clean-up interrupted: done before this call's)
            _drop_kept(dropped)
        loop = _KeptLoop.loop
        if loop is None or loop.is_closed():
            if not _KeptLoop.closed_at_exit:
                # Once: a loop dropped since (`_drop_kept`) is closed there, not kept alive.
                _KeptLoop.closed_at_exit = True
                atexit.register(_close_kept)
            loop = _KeptLoop.loop = asyncio.new_event_loop()
        try:
            result = _run_polled(loop, make())
            _cancel_leftovers(loop)  # as asyncio.run does: nothing runs on later
        except BaseException:
            _drop_kept(loop)
            raise
        return result
    return run_blocking(make)


def _in_running_loop() -> bool:
    """Whether this thread runs an event loop.

    Asked apart, not by running in the ``except RuntimeError`` of
    ``asyncio.get_running_loop()``: an error raised in the run would have that
    RuntimeError as its context ("During handling of the above exception"), whose
    traceback holds the frame the run's result ends in, a reference cycle that
    keeps a failed run's state until the cyclic collector's next pass.

    Asked on every blocking call, so without importing asyncio here (about 0.4 us
    a call even once imported); a thread with a running loop has imported it.
    ``_get_running_loop`` is ``get_running_loop`` that returns None rather than
    raising, in ``asyncio.events.__all__``.
    """
    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and asyncio._get_running_loop() is not None


def _run_polled(loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, T]) -> T:
    """``loop.run_until_complete(coroutine)``, the loop's waits bounded by `SIGNAL_POLL`
    (see `run_kept`)."""
    poll = _Poll(loop)
    try:
        return loop.run_until_complete(coroutine)
    finally:
        poll.stop()


class _Poll:
    """A no-op the loop runs every `SIGNAL_POLL` until stopped: its wait for the next event
    returns at least that often, and Python runs a signal's handler (see `run_kept`)."""

    __slots__ = ("handle", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.handle: asyncio.TimerHandle | None = loop.call_later(SIGNAL_POLL, self.again)

    def again(self) -> None:
        if self.handle is not None:
            self.handle = self.loop.call_later(SIGNAL_POLL, self.again)

    def stop(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            handle.cancel()


def _drop_kept(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what ``loop`` still runs and close it, the kept loop no more: after an
    interruption or a failure (see `run_kept`), the next call builds a new one.

    Ctrl-C landing once the coroutine had ended, before the loop ran the callback
    that stops it, leaves that callback queued: run again, the loop would stop
    the next call early ("Event loop stopped before Future completed"). Ctrl-C
    landing as leftovers were cancelled leaves them on it. A new loop has neither.
    A further Ctrl-C landing here leaves ``loop`` to the next call (or the exit) to
    finish (`_KeptLoop.dropped`): closed now, its tasks would be destroyed pending.
    One landing as it closes waits until it is closed (`_close_whole`).
    """
    import asyncio

    if _KeptLoop.loop is loop:
        _KeptLoop.loop = None
    if loop.is_closed():
        if _KeptLoop.dropped is loop:  # (closed, then Ctrl-C: see `_close_whole`)
            _KeptLoop.dropped = None
        return
    if loop.is_running():
        return
    _KeptLoop.dropped = loop
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    # One turn runs what is queued (a stale stop callback with it: the loop stops
    # after this turn anyway), then the cancelled tasks run to their end.
    loop.stop()
    loop.run_forever()
    pending = [task for task in tasks if not task.done()]
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    held = _close_whole(loop)
    _KeptLoop.dropped = None
    if held:
        raise KeyboardInterrupt


def _close_whole(loop: asyncio.AbstractEventLoop) -> bool:
    """``loop.close()``, not cut short by Ctrl-C; whether a Ctrl-C was held meanwhile.

    A close cut short leaves the loop half closed, and its garbage collection
    closes it again, which fails ("Exception ignored in BaseEventLoop.__del__
    ... Invalid file descriptor: -1"). So in the main thread, while Python's
    own handler is SIGINT's, a SIGINT that arrives during the close is held,
    for the caller to raise KeyboardInterrupt once it is done.
    """
    import signal

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        loop.close()
        return False
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        loop.close()
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return bool(held)


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    import asyncio

    # Before 3.12 `all_tasks` walks one set of every task of every loop: empty (the
    # usual end: each task has ended and is gone), there is nothing to walk for.
    every = getattr(asyncio.tasks, "_all_tasks", None)
    if every is not None and not every:
        return
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    _tell_leftovers(tasks)
    for task in tasks:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


_OWN_FILES = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tell_leftovers(tasks: set[asyncio.Task[Any]]) -> None:
    """Warn that a blocking run's loop ends with ``tasks`` a tool started still running.

    They are cancelled, as ``asyncio.run`` cancels what is left when its coroutine
    returns: the loop a blocking run made runs nothing once the run is over. In
    ``arun`` they run on in the caller's loop, so a tool firing and forgetting one
    would see it cut short only in ``run``. Toolfold's own tasks are not named.
    """
    names = []
    for task in tasks:
        coroutine = task.get_coro()
        code = getattr(coroutine, "cr_code", None)
        where = getattr(code, "co_filename", "")
        if where.startswith(_OWN_FILES):
            continue
        names.append(getattr(coroutine, "__qualname__", None) or task.get_name())
    if names:
        logging.getLogger("toolfold.runtime").warning(
            "a blocking run ended with %d task(s) a tool started still running (%s): they are "
            "cancelled, as asyncio.run cancels what is left, since the run's event loop runs "
            "nothing after it; await them in the tool, or run with arun() on a loop of your own",
            len(names),
            ", ".join(sorted(names)),
        )


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from blocking code.

    With no loop running in this thread, on a fresh loop here; inside a
    running loop (sync API called from async code), on another thread so the
    caller's loop is not re-entered: one of a pool of 32, or, called from a
    worker (or for one: `workers_own`), a thread of its own that ends with
    the run, so that nested sync tools doing so never wait for a pool thread
    held by the runs they wait for, however deep.

    On another thread the coroutine runs in a copy of the caller's context
    (its context variables: a request's id, a tenant), as ``asyncio.run``
    here would. Ctrl-C (or any exception) that lands in the caller's wait for
    it, a notebook cell's, cancels it there and waits for it to end before it
    is raised, as `run_kept` does: what it ran is what the run's state says
    (an async tool that had not returned stays to run). A second Ctrl-C stops
    that wait.
    """
    import asyncio

    if not _in_running_loop():
        return asyncio.run(make())
    interrupt = RoundInterrupt()
    context = contextvars.copy_context()

    def run() -> T:
        return context.run(_run_interruptible, lambda: _interruptible(make(), interrupt), interrupt)

    if workers_own():
        # A worker's thread (or one a worker waits for) blocks here: the run gets a thread
        # of its own, not one of the pool's (each could be held by such a run, waiting for
        # a tool two levels down that waits for a pool thread), and what it hands to
        # workers is the worker's own call (`for_worker`).
        return _waited(_on_own_thread(for_worker(run)), interrupt)
    return _waited(_pool().submit(run), interrupt)


def _waited(future: concurrent.futures.Future[T], interrupt: RoundInterrupt) -> T:
    """``future``'s outcome; interrupted while waiting, the work is cancelled (``interrupt``)
    and waited for before the interruption is raised (see `run_blocking`)."""
    # In the main thread the waits are bounded (`SIGNAL_POLL`): Ctrl-C is raised at once.
    poll = SIGNAL_POLL if threading.current_thread() is threading.main_thread() else None
    try:
        while not future.done():
            concurrent.futures.wait((future,), timeout=poll)
    except BaseException:
        if not future.done():
            interrupt.fire()
            try:
                while not future.done():
                    concurrent.futures.wait((future,), timeout=poll)
            except BaseException:  # a second Ctrl-C: stop waiting, nobody keeps a reply it reads
                interrupt.cut()
                raise
        raise
    return future.result()


def _on_own_thread(function: Callable[[], T]) -> concurrent.futures.Future[T]:
    """``function()`` run on a new daemon thread (ending when it returns): its future.

    Outcomes as from `_pool`'s ``submit``: its value, or what it raised.
    """
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        future.set_running_or_notify_cancel()
        try:
            result = function()
        except BaseException as exc:  # delivered to the waiting caller, as the pool does
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=run, name="toolfold-run", daemon=True).start()
    return future
