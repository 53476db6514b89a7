"""Running one step's tool calls from blocking code: `run_calls_sync`.

The blocking path needs no event loop at all when the step has only sync
tools, and runs a lone call without a timeout in the caller's thread; sync
calls side by side run on the shared worker threads (`_workers`), and a step
with async tools or sub-runs side by side runs on a kept event loop
(`_kept_loop`). Ctrl-C keeps every call that ended, and waits for the sync
calls still running (a thread cannot be stopped). What a call is (validated,
invoked, timed out, formatted) is `_executor`'s, as for the async path.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import sys
import threading
import time
from collections.abc import Callable, Sequence
from queue import Empty
from typing import Any

from toolfold.runtime.drive._executor import (
    _NOT_AWAITABLE,
    _SUB_RUN,
    _TWIN,
    DEFAULT_MAX_CONCURRENCY,
    STANDING,
    TIMED_OUT,
    Standing,
    ToolJob,
    ToolOutcome,
    _blocking,
    _call_sync,
    _ended,
    _finish,
    _prepare,
    _run_calls,
    _run_id_of,
    _time_finished,
    _timed,
    _timed_out,
    await_within,
    failed_outcome,
    kept_sub_run,
    own_cancel,
    raised_in_run,
)
from toolfold.runtime.drive._kept_loop import (
    _WATCHED,
    SIGNAL_POLL,
    RoundInterrupt,
    _interruptible,
    _nothing,
    _run_interruptible,
    run_blocking,
    run_kept,
    tell_interrupt_waits,
    watched_interrupt,
)
from toolfold.runtime.drive._workers import (
    SyncInbox,
    Ticket,
    abandon,
    submit_sync,
)
from toolfold.toolkit._tool import quick_arguments


def run_calls_sync(
    jobs: Sequence[ToolJob],
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    finished: dict[int, ToolOutcome] | None = None,
    interrupt: RoundInterrupt | None = None,
    standings: dict[int, Standing] | None = None,
) -> tuple[ToolOutcome, ...]:
    """Run the calls from blocking code; outcomes in call order, each with its duration.

    A lone sub-run interrupted (Ctrl-C) in this thread is kept in ``finished``
    (see `kept_sub_run`). With ``interrupt`` (a round on a thread of its own),
    calls run on an event loop are cancelled when it fires: their sub-runs
    are kept in ``finished`` as a cancelled async run keeps them. A lone
    sub-run runs as its blocking twin, watched: it stops at its next step
    (see `RoundInterrupt`), and is kept in ``finished`` the same way. Without
    ``interrupt``, the round answers to the one this thread is watched for
    (a round of such a blocking sub-run). With ``standings`` (a stream's round on a
    thread of its own), such a lone sub-run notes there (under index 0) where it stands,
    for the caller to keep it without waiting for it (see `Standing`).
    """
    if interrupt is None:
        interrupt = watched_interrupt()
    if interrupt is None:
        return _run_calls_now(jobs, max_concurrency, finished, None)
    # (the caller's Ctrl-C, raised there before this round began: nothing of it
    # runs, whatever it attaches)
    if not interrupt.attach(_nothing):
        raise KeyboardInterrupt
    token = _WATCHED.set((interrupt, threading.get_ident()))
    try:
        return _run_calls_now(jobs, max_concurrency, finished, interrupt, standings)
    finally:
        _WATCHED.reset(token)


def _run_calls_now(
    jobs: Sequence[ToolJob],
    max_concurrency: int,
    finished: dict[int, ToolOutcome] | None,
    interrupt: RoundInterrupt | None,
    standings: dict[int, Standing] | None = None,
) -> tuple[ToolOutcome, ...]:
    """`run_calls_sync`, its interruption (if any) attached and watched."""
    started = time.monotonic()
    try:
        if len(jobs) == 1:
            # The common step, one sync call without a timeout, run right here
            # (what `_run_calls_sync` does with it, without its checks for the rest):
            # a sync tool, or an agent or workflow step as its blocking twin.
            job = jobs[0]
            tool = job.tool
            standing = None
            if tool is not None and tool.timeout is None and _TWIN in tool.__dict__:
                if standings is not None and _SUB_RUN in tool.__dict__:
                    standing = standings[0] = Standing(job.call.id, job.call.name, _run_id_of(job))
                job = _blocking(job)
                tool = job.tool
            if tool is not None and not tool.is_async and tool.timeout is None:
                stored = job.invocation.call.arguments
                arguments = None if stored is None else quick_arguments(tool, stored)
                if arguments is not None:  # nothing between the call and the function
                    outcome = _run_inline(
                        job, arguments, finished, started, tool.function, standing=standing
                    )
                else:
                    prepared = _prepare(job, quick=False)
                    if isinstance(prepared, ToolOutcome):
                        outcome = prepared
                    else:
                        outcome = _run_inline(job, prepared, finished, started, standing=standing)
                if finished is not None:  # (a sub-run: see `_kept`)
                    finished[0] = outcome
                if outcome.duration is None:
                    return _kept(_timed((outcome,), started), finished)
                return (outcome,)
        return _kept(
            _timed(_run_calls_sync(jobs, max_concurrency, finished, interrupt), started), finished
        )
    except BaseException:  # the calls that ended before an interruption are timed too
        _time_finished(finished, started)
        raise


def _run_calls_sync(
    jobs: Sequence[ToolJob],
    max_concurrency: int,
    finished: dict[int, ToolOutcome] | None = None,
    interrupt: RoundInterrupt | None = None,
) -> tuple[ToolOutcome, ...]:
    """Run the calls from blocking code; outcomes in call order.

    Uses no event loop unless an async tool (without a blocking twin) is among the calls.
    """
    if any(_on_loop(job, len(jobs)) for job in jobs):
        # Sub-runs (agents, workflow steps) side by side, or one with a
        # timeout: coroutines of one loop, where a timeout cancels them, and
        # no blocking runs on worker threads waiting for other workers.
        return _kept(_run_on_kept_loop(jobs, max_concurrency, finished, interrupt), finished)
    jobs = [_blocking(job) for job in jobs]
    if any(job.tool is not None and job.tool.is_async for job in jobs):
        return _kept(_run_on_kept_loop(jobs, max_concurrency, finished, interrupt), finished)
    results: list[ToolOutcome | None] = []
    ready: list[tuple[ToolJob, dict[str, Any]]] = []
    slots: list[int] = []
    for job in jobs:
        prepared = _prepare(job)
        if isinstance(prepared, ToolOutcome):
            results.append(prepared)
        else:
            slots.append(len(results))
            results.append(None)
            ready.append((job, prepared))
    try:
        if len(ready) == 1 and ready[0][0].tool is not None and ready[0][0].tool.timeout is None:
            results[slots[0]] = _run_inline(*ready[0], finished, index=slots[0])
        elif ready:
            ran: list[ToolOutcome | None] = [None] * len(ready)
            kept = None
            if finished is not None:  # kept as they end (read by a caller's thread: `Standing`)

                def kept(index: int, outcome: ToolOutcome) -> None:
                    finished[slots[index]] = outcome

            try:
                _run_threaded(ready, max_concurrency, ran, interrupt, kept)
            finally:
                for slot, outcome in zip(slots, ran, strict=True):
                    results[slot] = outcome
    except BaseException:
        # Ctrl-C (or a call that raised it): the calls that had ended are kept, to be
        # committed (see `interrupted`), so that resuming runs only the others again.
        if finished is not None:
            for index, ended in enumerate(results):
                if ended is not None:
                    finished[index] = ended
        raise
    return _kept(tuple(r for r in results if r is not None), finished)


def _kept(
    outcomes: tuple[ToolOutcome, ...], finished: dict[int, ToolOutcome] | None
) -> tuple[ToolOutcome, ...]:
    """``outcomes``, the whole round's, also kept in ``finished`` (read only when the round is
    interrupted): Ctrl-C after the round ended, before the run committed it (as it is timed,
    traced, or returned), keeps every call, as one a moment earlier keeps those that ended."""
    if finished is not None:
        finished.update(enumerate(outcomes))
    return outcomes


class SyncWaits:
    """The sync calls a blocking round on an event loop left running on worker threads when
    it was stopped, and where they report their end (see `_call_ticketed`).

    Ctrl-C (or its `RoundInterrupt`) cancels such a round as `arun`'s would be
    cancelled: its async tools and sub-runs stop where they are. A sync call
    cannot be stopped, so its end is waited for (`wait`), as a round with only
    sync tools waits (`_run_threaded`): else it would run again on resume,
    perhaps beside itself. An async run has none (`run_calls`): cancelled,
    it stays prompt.
    """

    __slots__ = ("inbox", "tickets")

    def __init__(self) -> None:
        self.inbox = SyncInbox()
        # Every sync call handed to a worker, by index, its ticket noted at the hand-off: read
        # once the round was stopped, not from the calls' tasks, which a further Ctrl-C may
        # leave unfinished (in the kept loop's clean-up, see `_drop_kept`).
        self.tickets: dict[int, Ticket] = {}

    def wait(self, jobs: Sequence[ToolJob], finished: dict[int, ToolOutcome] | None) -> None:
        """Keep in ``finished`` the outcomes of the calls of ``jobs`` that had ended on their
        threads (unless kept there already), and wait for those still running (each bound by
        its timeout), keeping theirs; calls not started never start. Whoever shows the run
        is told first (see `interrupt_waits`); a second Ctrl-C stops the wait, and the calls
        still running are not kept (they run again on resume)."""
        if not self.tickets:
            return
        done = finished if finished is not None else {}
        running = {i: t for i, t in self.tickets.items() if i not in done}
        # (the arguments are not read by the wait)
        ready: list[tuple[ToolJob, dict[str, Any]]] = [(job, {}) for job in jobs]
        outcomes: list[ToolOutcome | None] = [None] * len(jobs)
        try:
            _wait_running(self.inbox, running, ready, outcomes)
        finally:
            if finished is not None:
                for index, outcome in enumerate(outcomes):
                    if outcome is not None and index not in finished:
                        finished[index] = outcome


def _run_on_kept_loop(
    jobs: Sequence[ToolJob],
    max_concurrency: int,
    finished: dict[int, ToolOutcome] | None,
    interrupt: RoundInterrupt | None,
) -> tuple[ToolOutcome, ...]:
    """The calls on an event loop, from blocking code: Ctrl-C (in this thread, or
    ``interrupt`` fired) cancels them as `arun`'s, and waits for the sync calls left
    running on worker threads (see `SyncWaits`)."""
    waits = SyncWaits()
    if interrupt is None:
        try:
            return run_kept(lambda: _run_calls(jobs, max_concurrency, finished, waits))
        except KeyboardInterrupt:  # (not SystemExit, nor a failure: those do not wait)
            waits.wait(jobs, finished)
            raise
    try:
        return _run_interruptible(
            lambda: _interruptible(_run_calls(jobs, max_concurrency, finished, waits), interrupt),
            interrupt,
        )
    except BaseException:
        if interrupt.fired:
            # This thread tells whoever shows the run: the caller's cannot know that the
            # round, on a loop, has sync calls to wait for (see `RoundInterrupt.waits`).
            waits.wait(jobs, finished)
        raise


def _on_loop(job: ToolJob, count: int) -> bool:
    """Whether a blocking step runs ``job`` (one of ``count``) on an event loop (see above)."""
    tool = job.tool
    return (
        tool is not None
        and tool.is_async
        and _SUB_RUN in tool.__dict__
        and (count > 1 or tool.timeout is not None)
    )


def _run_inline(
    job: ToolJob,
    arguments: dict[str, Any],
    finished: dict[int, ToolOutcome] | None = None,
    started: float | None = None,
    function: Callable[..., Any] | None = None,
    index: int = 0,
    standing: Standing | None = None,
) -> ToolOutcome:
    """``job`` in this thread; ``started`` and ``function`` as for `_on_loop_now`; a sub-run
    it runs that is interrupted is kept in ``finished`` under ``index`` (see `kept_sub_run`),
    and notes where it stands in ``standing``, if given (see `Standing`)."""
    handling = sys.exc_info()[1]  # (the caller's: see `own_cancel`)
    try:
        # In a copy of the context, as a worker thread would run it: what it sets stays its own.
        context = contextvars.copy_context()
        if standing is not None:
            context.run(STANDING.set, standing)
        if function is None:
            value = context.run(_call_sync, job, arguments)
        else:
            value = context.run(function, **arguments)
        if type(value) not in _NOT_AWAITABLE and inspect.isawaitable(value):
            value = run_blocking(lambda: await_within(value))
    except Exception as exc:
        return failed_outcome(job, exc)
    except BaseException as exc:  # Ctrl-C in a sub-run: keep where it stopped
        if own_cancel(job, exc, handling):  # (a sync tool's, called right here: see `own_cancel`)
            return failed_outcome(job, exc)
        raised_in_run(exc)  # (a GeneratorExit the tool raised: no stream's caller's)
        kept_sub_run(finished, index, job.call.id, job.call.name, exc, _run_id_of(job))
        raise
    return _finish(job, value, started)


def _run_threaded(
    ready: Sequence[tuple[ToolJob, dict[str, Any]]],
    max_concurrency: int,
    outcomes: list[ToolOutcome | None],
    interrupt: RoundInterrupt | None = None,
    kept: Callable[[int, ToolOutcome], None] | None = None,
) -> None:
    """Run ``ready`` on worker threads; each call's outcome is put in ``outcomes`` (by
    index) as it ends, and given to ``kept``, if given.

    Interrupted (Ctrl-C in this thread, a call that raised it, or ``interrupt``
    fired: a round on a thread of its own), ``outcomes`` holds those of the
    calls that had ended: the caller keeps them (see `run_calls_sync`). So a
    call's ticket is in ``running`` before the call is handed to a worker
    (Ctrl-C may land in the hand-off, once a worker has it: it ends, or it is
    cancelled), and leaves it only once its outcome is stored; ends are read
    from the tickets (a report only wakes the wait: see `SyncInbox`), so one
    whose report Ctrl-C took is kept all the same. Calls not started then
    never start, and those running are waited for (`_wait_running`), so that
    what they did is kept too: a thread cannot be stopped, and a call left
    running would run again on resume, beside itself.
    """
    limit = max(1, max_concurrency)
    inbox = SyncInbox()
    running: dict[int, Ticket] = {}
    queue = list(range(len(ready)))
    queue.reverse()
    try:
        while queue or running:
            # (fired from the caller's thread, which told whoever shows the run)
            if interrupt is not None and interrupt.fired:
                raise _Fired
            while queue and len(running) < limit:
                index = queue.pop()
                job, arguments = ready[index]
                ticket = running[index] = Ticket(index)  # (not started: no deadline yet)
                submit_sync(inbox, ticket, _call_sync, job, arguments)
            with contextlib.suppress(Empty):
                inbox.get(_next_deadline(running, ready))
            _store_ended(running, ready, outcomes, _settled, kept)
            _time_out(running, ready, outcomes, kept)
    except BaseException as exc:
        _store_ended(running, ready, outcomes, _ended_here, kept)
        if isinstance(exc, _Fired):
            _wait_running(inbox, running, ready, outcomes, tell=False, kept=kept)
            raise KeyboardInterrupt from None
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C (not SystemExit, nor a failure): wait
            _wait_running(inbox, running, ready, outcomes, kept=kept)
        raise
    finally:
        for ticket in running.values():
            ticket.cancel()


class _Fired(BaseException):
    """A round's `RoundInterrupt` fired while its calls ran on workers (see `_run_threaded`)."""


def _store_ended(
    running: dict[int, Ticket],
    ready: Sequence[tuple[ToolJob, dict[str, Any]]],
    outcomes: list[ToolOutcome | None],
    outcome_of: Callable[[ToolJob, bool, Any, float | None], ToolOutcome | None],
    kept: Callable[[int, ToolOutcome], None] | None = None,
) -> None:
    """Put in ``outcomes`` those of the running calls that ended (``ticket.ended``), each
    made by ``outcome_of`` (`_settled`; `_ended_here` once the round was interrupted: nothing
    more of them runs), given to ``kept`` too, and take them out of ``running``.

    A call leaves ``running`` only once its outcome is stored (unless it has none:
    see `_ended`): interrupted in between, this called again keeps what is stored.
    """
    for index, ticket in list(running.items()):
        ended = ticket.ended
        if ended is None:
            continue
        if outcomes[index] is None:
            outcome = outcome_of(ready[index][0], *ended, ticket.started)
            if outcome is not None:
                outcomes[index] = outcome
                if kept is not None:
                    kept(index, outcome)
        del running[index]


def _time_out(
    running: dict[int, Ticket],
    ready: Sequence[tuple[ToolJob, dict[str, Any]]],
    outcomes: list[ToolOutcome | None],
    kept: Callable[[int, ToolOutcome], None] | None = None,
) -> None:
    """Give up on the running calls that outlived their timeout: each gets a timed-out outcome
    (given to ``kept`` too, if given)."""
    now = time.monotonic()
    for index, ticket in list(running.items()):
        timeout = _timeout_of(ready[index][0])
        # The timeout counts from the start: time queued for a worker is not the tool's.
        started = ticket.started
        if timeout is not None and started is not None and now - started >= timeout:
            ticket.cancel()
            outcomes[index] = timed_out = _timed_out(ready[index][0], timeout)
            if kept is not None:
                kept(index, timed_out)
            del running[index]
            # Its thread cannot be stopped: another worker takes its place
            # (unless the call ended on its thread meanwhile, see `abandon`).
            abandon(ticket)


def _wait_running(
    inbox: SyncInbox,
    running: dict[int, Ticket],
    ready: Sequence[tuple[ToolJob, dict[str, Any]]],
    outcomes: list[ToolOutcome | None],
    *,
    tell: bool = True,
    kept: Callable[[int, ToolOutcome], None] | None = None,
) -> None:
    """Once the round was interrupted: the calls that had not started never start, and those
    running are waited for, their outcomes put in ``outcomes`` (and given to ``kept``, if
    given) as they end (a call's timeout still ends the wait for it, with a timed-out outcome).

    Whoever shows the run is told first (see `interrupt_waits`), unless ``tell`` is False
    (the thread Ctrl-C reached told it). A second Ctrl-C stops the wait: the calls that had
    ended are kept, and the others are left running (they run again on resume).
    """
    for ticket in running.values():
        ticket.cancel()
    # Read after every cancel: unstarted now, a call never runs (see `submit_sync`).
    for index, ticket in list(running.items()):
        if ticket.started is None:
            del running[index]
    _store_ended(running, ready, outcomes, _ended_here, kept)
    if not running:
        return
    try:
        if tell:
            tell_interrupt_waits()
        while running:
            with contextlib.suppress(Empty):
                inbox.get(_next_deadline(running, ready))
            _store_ended(running, ready, outcomes, _ended_here, kept)
            _time_out(running, ready, outcomes, kept)
    except BaseException:  # a second Ctrl-C: what ended is kept, the rest runs again on resume
        _store_ended(running, ready, outcomes, _ended_here, kept)
        raise


def _timeout_of(job: ToolJob) -> float | None:
    return job.tool.timeout if job.tool is not None else None


def _next_deadline(
    running: dict[int, Ticket], ready: Sequence[tuple[ToolJob, dict[str, Any]]]
) -> float | None:
    """How long to wait for the next report: until the next timeout, and in the main
    thread (where Ctrl-C lands) at most `SIGNAL_POLL`; None: no limit."""
    # Calls not started yet have no deadline: their start notice wakes the wait.
    now = time.monotonic()
    waits = [
        max(0.0, started + timeout - now)
        for index, ticket in running.items()
        if (started := ticket.started) is not None
        and (timeout := _timeout_of(ready[index][0])) is not None
    ]
    if threading.current_thread() is threading.main_thread():
        waits.append(SIGNAL_POLL)
    return min(waits) if waits else None


def _settled(job: ToolJob, ok: bool, value: Any, started: float | None) -> ToolOutcome:
    """The outcome of a call that ended on its thread (``started``: when, by
    `time.monotonic`): what it returned to await is awaited here, within its timeout."""
    if not ok:
        if not isinstance(value, Exception):
            raised_in_run(value)  # (a GeneratorExit the tool raised: no stream's caller's)
            raise value  # KeyboardInterrupt, SystemExit...: not the model's to read
        return failed_outcome(job, value)
    try:
        if type(value) not in _NOT_AWAITABLE and inspect.isawaitable(value):
            timeout = _timeout_of(job)
            if timeout is None or started is None:
                value = run_blocking(lambda: await_within(value))
            else:
                left = started + timeout - time.monotonic()
                value = run_blocking(lambda: await_within(value, left))
                if value is TIMED_OUT:
                    return _timed_out(job, timeout)
    except Exception as exc:
        return failed_outcome(job, exc)
    return _finish(job, value)


def _ended_here(job: ToolJob, ok: bool, value: Any, started: float | None) -> ToolOutcome | None:
    """`_ended`, for `_store_ended` once the round was interrupted (``started`` unread)."""
    return _ended(job, ok, value)
