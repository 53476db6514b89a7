"""The four thin shells that perform `run_loop`'s ops: blocking, async, and streaming of each."""

from __future__ import annotations

import collections
import contextvars
import logging
import queue
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Generator,
    Iterator,
    Sequence,
)
from contextlib import AsyncExitStack, ExitStack, aclosing, contextmanager, suppress
from typing import Any

import toolfold.runtime._step_retry as step_retry
from toolfold.runtime._response import (
    Response,
    RunStreamEvent,
    SubRunEvent,
)
from toolfold.runtime.core._effects import (
    CallModel,
)
from toolfold.runtime.core._messages import Usage
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._stream import StreamEvent, StreamState, finish_stream, fold_stream
from toolfold.runtime.drive._cancels import (
    cancels_of,
    check_swallowed,
)
from toolfold.runtime.drive._executor import (
    STANDING,
    Standing,
    ToolJob,
    ToolOutcome,
    asyncio_task,
    contained,
    current_task,
    forget_thrown_exit,
    forwards,
    never_began,
    raised_in_run,
    run_calls,
    thrown_exit,
)
from toolfold.runtime.drive._kept_loop import (
    INTERRUPT_WAITS,
    SIGNAL_POLL,
    RoundInterrupt,
    check_interrupt,
    check_round_on_loop,
    tell_interrupt_waits,
    watched_interrupt,
)
from toolfold.runtime.drive._loop import (
    CutAnswer,
    Ended,
    Live,
    Loop,
    _NoticeOp,
    _OpenOp,
    _RunToolsOp,
    _SettledOp,
    _SwitchOp,
    _WaitOp,
    billed_usage,
    interrupted,
    is_interruption,
    kept_standing,
    note_cut_usage,
    resumed_round,
    run_loop,
    takes_state,
)
from toolfold.runtime.drive._open import aopened, close_failed, opened
from toolfold.runtime.drive._output import restored
from toolfold.runtime.drive._relay import Relay
from toolfold.runtime.drive._sync_calls import run_calls_sync
from toolfold.runtime.drive._trace import RunTrace, ToolsTrace, end_run, start_run
from toolfold.runtime.drive._workers import Escaped

_log = logging.getLogger("toolfold.runtime")


def finish(state: RunState, live: Live, built: tuple[Any, Any] | None = None) -> Response:
    """The response for a final or suspended state (``live``: of the agent that answered;
    ``built``: the output its loop accepted, see `Ended.built`).

    Raises:
        OutputValidationError: The finished state's output, not built by this
            run (a state loaded and resumed), does not fit the output type now.
    """
    output = state.output
    if output is not None and live.output is not None and state.phase == "finished":
        if built is not None and built[0] is output:
            output = built[1]  # (built once, as the answer was accepted)
        else:
            output = restored(live.output, state)
    return Response(state, output)


def drive_sync(live: Live, state: RunState) -> Ended:
    """Drive ``state`` with `run_loop`, performing its ops with blocking calls (no event
    loop for sync tools).

    Raises:
        SourceCloseError: The run ended, but a source it opened on its way
            (a handoff target's) failed to close; ``.response`` is the run's.
    """
    trace = start_run(live, state)
    loop = run_loop(live, state)
    ended: Ended | None = None
    try:
        try:
            with ExitStack() as held:  # tool sources the run opened on its way
                ended = _drive_sync(live, loop, trace, held)
        except Exception as exc:
            if ended is None:
                raise
            raise close_failed(exc, finish(*ended)) from exc
        except BaseException as exc:  # interrupted while they close: the run ended
            if ended is not None:
                interrupted(exc, ended.state)
            raise
    except BaseException as exc:
        stamp(loop, exc)
        end_run(trace, getattr(exc, "state", None), exc)
        raise
    end_run(trace, ended.state, None)
    return ended


def _drive_sync(live: Live, loop: Loop, trace: RunTrace | None, held: ExitStack) -> Ended:
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, failure = None, None
        # The ops of every step first: one type test each.
        if isinstance(op, CallModel):
            # (a blocking sub-run of a stream's round stops here once Ctrl-C reached it)
            check_interrupt(watched_interrupt())
            if trace is None:
                try:
                    value = live.model.request_sync(op.request)
                except Exception as exc:
                    failure = exc
            else:
                value, failure = _request_traced_sync(live, op, trace)
        elif isinstance(op, _RunToolsOp):
            tools = None if trace is None else trace.tools(op.jobs)
            jobs = op.jobs if tools is None else tools.jobs
            try:
                with resumed_round(live):
                    value = run_calls_sync(
                        jobs, max_concurrency=live.max_concurrency, finished=op.finished
                    )
            except BaseException:
                cut_tools(tools, op)
                raise
            if tools is not None:
                tools.end(value)
        elif isinstance(op, _SwitchOp):
            live = _switched(op, trace)
        elif isinstance(op, _OpenOp):
            try:
                value = held.enter_context(opened(op.sources))
            except Exception as exc:
                failure = exc
        elif isinstance(op, _SettledOp) and trace is not None:
            trace.settled(op.calls)
        elif isinstance(op, _WaitOp):  # (rare: a retried workflow step waits)
            wait_sync(op.seconds)


def wait_sync(seconds: float) -> None:
    """Make a retried step's wait (`_step_retry`) on this thread: a blocking sub-run of a
    stream's round waits in slices of `SIGNAL_POLL` and stops once Ctrl-C reached the round
    (its thread gets no signal: it waited the whole wait before)."""
    interrupt = watched_interrupt()
    if interrupt is None:
        step_retry.sleep_sync(seconds)
        return
    while seconds > 0 and not interrupt.fired:
        step = min(seconds, SIGNAL_POLL)
        step_retry.sleep_sync(step)
        seconds -= step
    check_interrupt(interrupt)


def cut_tools(tools: ToolsTrace | None, op: _RunToolsOp) -> None:
    """A round of calls that an interruption (Ctrl-C, a cancellation, a caller that stopped
    the stream) or an error cut short: its spans end with the outcomes of the calls that had
    ended (``op.finished``, read before the loop drops from it what it does not commit), the
    others as interrupted. Without this the run's end marks every call interrupted."""
    if tools is not None:
        tools.end(tuple(op.finished.values()) if op.finished else ())


def stamp(loop: Generator[Any, Any, Any], exc: BaseException, *, streamed: bool = False) -> None:
    """An interruption of the run (a cancellation, Ctrl-C) gets the state it reached.

    Thrown into the run's loop (or a workflow's course) where it waits for
    the interrupted I/O, which sets ``exc.state`` (`interrupted`) and raises
    it again. Errors carry their own state already. A `GeneratorExit` of a
    stream (``streamed``) is its caller stopping iterating, which abandons
    the run; elsewhere one came from the run's own code (a tool that raised
    it) and interrupts the run as a `SystemExit` does (`raised_in_run`).
    """
    if not streamed:
        raised_in_run(exc)
    try:
        if not is_interruption(exc) and not takes_state(exc):
            return
        # A GeneratorExit thrown into a generator where it delegates (``yield from``) closes
        # what it delegates to with a new one, which would get the state: thrown in its place.
        thrown = _InPlaceOfExit() if isinstance(exc, GeneratorExit) else exc
        with suppress(BaseException):  # the very exception comes back: the caller raises it
            loop.throw(thrown)
        if thrown is not exc:
            state = getattr(thrown, "state", None)
            if state is not None:
                exc.state = state  # type: ignore[attr-defined]
                noted = thrown_exit()  # (see `note_thrown_exit`)
                if noted is not None:
                    noted.state = state  # type: ignore[attr-defined]
    finally:  # the run has handed its state (if any) to a tool's GeneratorExit: the run ends
        forget_thrown_exit()


class _InPlaceOfExit(BaseException):
    """Thrown into a run's loop in place of a GeneratorExit that interrupts it (`stamp`)."""


async def throw_into(events: AsyncGenerator[Any, Any], exc: BaseException) -> None:
    """Pass an interruption thrown into an async stream at an event it yielded (Ctrl-C,
    a cancellation, while the caller's code handled the event) on to ``events``, the
    stream the event came from, so the run under it gets the state it reached (`stamp`),
    as a blocking stream's ``yield from`` does; the caller raises ``exc`` again after.

    Errors and a caller that stops iterating (GeneratorExit) are not passed on: they
    carry their own state, or abandon the run. ``events`` raises ``exc`` back (or an
    error of its own, such as a source's close error, which then propagates).
    """
    if isinstance(exc, (Exception, GeneratorExit)):
        return
    with suppress(StopAsyncIteration):
        await events.athrow(exc)


async def drive_async(live: Live, state: RunState) -> Ended:
    """Drive ``state`` with `run_loop`, performing its ops on the running event loop.

    One coroutine for the whole run, with nothing else to hold across its
    awaits (no nested driver, no context manager's bound exit, not the first
    state: the loop holds the newest): while many runs are in flight, each
    object one keeps across an await is one more for the garbage collector
    to walk and promote. A caller awaiting it should not hold ``state``
    either (see `toolfold.runtime._run.run_async`).
    """
    task = asyncio_task()  # (a UsageError outside asyncio: a trio run, say)
    trace = start_run(live, state)
    loop = run_loop(live, state)
    del state  # the run's first state and its two logs, not kept until the run ends
    # A count higher than at the start: a cancellation of the run that a model call, or
    # anything in a round of calls, swallowed (Python 3.11+, see `_cancels`); it ends
    # the run, before a further model call is made.
    cancelling = cancels_of(task)
    uncancelled = cancelling()
    # The tool sources the run opened on its way (a handoff's), closed when it
    # ends; the stack is made on the first, as most runs open none.
    held: AsyncExitStack | None = None
    value: Any = None
    failure: Exception | None = None
    ended: Ended
    try:
        try:
            while True:
                try:
                    op = loop.send(value) if failure is None else loop.throw(failure)
                except StopIteration as stop:
                    ended = stop.value
                    break
                value, failure = None, None
                # The ops of every step first: one type test each.
                if isinstance(op, CallModel):
                    # (a sub-run of a blocking round on a loop stops here once it was stopped)
                    await check_round_on_loop()
                    check_swallowed(cancelling, uncancelled)  # in the last round: no call
                    if trace is None:
                        try:
                            value = await live.model.request(op.request)
                        except Exception as exc:
                            failure = exc
                    else:
                        value, failure = await _request_traced(live, op, trace)
                    # (the run was cancelled, the model went on)
                    check_swallowed(cancelling, uncancelled)
                elif isinstance(op, _RunToolsOp):
                    await check_round_on_loop()  # (and before its round of calls)
                    tools = None if trace is None else trace.tools(op.jobs)
                    jobs = op.jobs if tools is None else tools.jobs
                    try:
                        with resumed_round(live):
                            value = await run_calls(
                                jobs, max_concurrency=live.max_concurrency, finished=op.finished
                            )
                    except BaseException:
                        cut_tools(tools, op)
                        raise
                    if tools is not None:
                        tools.end(value)
                elif isinstance(op, _SwitchOp):
                    live = _switched(op, trace)
                elif isinstance(op, _OpenOp):
                    if held is None:
                        held = AsyncExitStack()
                    try:
                        value = await held.enter_async_context(aopened(op.sources))
                    except Exception as exc:
                        failure = exc
                elif isinstance(op, _SettledOp) and trace is not None:
                    trace.settled(op.calls)
                elif isinstance(op, _WaitOp):  # (rare: a retried workflow step waits)
                    await step_retry.sleep(op.seconds)
        except BaseException as exc:
            stamp(loop, exc)
            if held is not None:  # told the error, so a close error is noted on it, not raised
                await held.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        if held is not None:
            try:
                await held.aclose()
            except Exception as exc:
                raise close_failed(exc, finish(*ended)) from exc
            except BaseException as exc:  # interrupted while they close: the run ended
                interrupted(exc, ended.state)
                raise
    except BaseException as exc:
        end_run(trace, getattr(exc, "state", None), exc)
        raise
    end_run(trace, ended.state, None)
    return ended


def stream_sync(live: Live, loop: Loop, state: RunState) -> Generator[RunStreamEvent, None, Ended]:
    """Like `drive_sync`, streaming the model and yielding events as they happen."""
    trace = start_run(live, state)
    ended: Ended | None = None
    try:
        try:
            with ExitStack() as held:  # closed too when the caller stops iterating
                ended = yield from _stream_sync(live, loop, trace, held)
        except Exception as exc:
            if ended is None:
                raise
            raise close_failed(exc, finish(*ended)) from exc
    except BaseException as exc:
        stamp(loop, exc, streamed=True)
        end_run(trace, getattr(exc, "state", None), _failure(exc))
        raise
    end_run(trace, ended.state, None)
    return ended


def _failure(exc: BaseException) -> BaseException | None:
    # A caller that stops iterating abandons the run: not an error of the run.
    return None if isinstance(exc, GeneratorExit) else exc


def _stream_sync(
    live: Live, loop: Loop, trace: RunTrace | None, held: ExitStack
) -> Generator[RunStreamEvent, None, Ended]:
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, failure = None, None
        if isinstance(op, _SwitchOp):
            live = _switched(op, trace)
        elif isinstance(op, _OpenOp):
            try:
                value = held.enter_context(opened(op.sources))
            except Exception as exc:
                failure = exc
        elif isinstance(op, _SettledOp) and trace is not None:
            trace.settled(op.calls)
        elif isinstance(op, _NoticeOp):
            yield op.event
        elif isinstance(op, CallModel):
            # A blocking sub-run of a stream's round stops before the call once Ctrl-C
            # reached it. Once the call began, its reply is read to its end and kept, as a
            # call that does not stream is (the caller said it waits for it): the sub-run
            # stops at its next step. A second Ctrl-C does not wait: the call is made again
            # on resume (see `Standing`).
            # Once the caller left the run (abandoned, or a second Ctrl-C), nobody keeps the
            # reply: it stops at its next chunk (`RoundInterrupt.cut`).
            interrupt = watched_interrupt()
            check_interrupt(interrupt)
            if trace is not None:
                value, failure = yield from _stream_traced_sync(live, op, trace, interrupt)
                continue
            folded = StreamState()
            try:
                for event in live.model.stream_sync(op.request):
                    folded = fold_stream(folded, event)
                    yield event
                    if interrupt is not None and interrupt.is_cut:
                        raise KeyboardInterrupt
                value = finish_stream(folded, call_id_maker(op.step))
            except Exception as exc:
                value, failure = cut_answer(exc, folded)
            except BaseException as exc:  # Ctrl-C: the loop's state counts what it reported
                note_cut_usage(exc, reported(folded))
                raise
        elif isinstance(op, _RunToolsOp):
            tools = None if trace is None else trace.tools(op.jobs)
            jobs = op.jobs if tools is None else tools.jobs
            try:
                if op.relay is not None and any(forwards(job) for job in jobs):
                    value = yield from _relayed_sync(op, jobs, op.relay, live, tools)
                else:
                    with resumed_round(live):
                        value = run_calls_sync(
                            jobs, max_concurrency=live.max_concurrency, finished=op.finished
                        )
            except BaseException:
                cut_tools(tools, op)
                raise
            if tools is not None:
                tools.end(value)
        elif isinstance(op, _WaitOp):  # (rare: a retried workflow step waits)
            wait_sync(op.seconds)


# How long a caller that leaves a blocking stream during a round of sub-runs waits at most
# for the interrupted round to stop (at its next check: most often at once).
ABANDON_WAIT = SIGNAL_POLL


def _relayed_sync(
    op: _RunToolsOp,
    jobs: Sequence[ToolJob],
    relay: Relay,
    live: Live,
    tools: ToolsTrace | None = None,
) -> Generator[RunStreamEvent, None, tuple[ToolOutcome, ...]]:
    """The step's calls (``jobs``: ``op``'s, or its trace's) on a thread of their own, their
    sub-runs' events yielded as they come.

    The calls run in a copy of the caller's context (as they would inline). A
    caller that stops iterating (``break``: GeneratorExit), or whose error is
    thrown in at an event, abandons the run: the round is interrupted as by
    Ctrl-C, so that its sub-runs make no further model call, and waited for
    at most `ABANDON_WAIT` (what it had begun, a model call or a blocking tool,
    which cannot be stopped from outside, then ends on its thread, unkept).

    Ctrl-C reaches the caller's thread, here: the round is interrupted (see
    `RoundInterrupt`: calls on an event loop are cancelled, a lone sub-run
    run blocking stops at its next model call or round of calls), and once
    it has ended (``done``: no queue is drained to learn it) its sub-runs
    are kept in ``op.finished`` as an interruption in this thread keeps them.
    The round of a blocking sub-run that such a round runs (a sub-agent's
    sub-agents, this thread being the outer round's) is interrupted with it.
    A second Ctrl-C stops waiting for it: the lone sub-run still running is
    kept where it stood (`Standing`), as Ctrl-C landing in it would keep it.
    """
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    ended: list[tuple[bool, Any]] = []
    done = threading.Event()
    interrupt = RoundInterrupt()
    # The round's thread keeps what ended in a dict of its own, copied into ``op.finished``
    # in this thread only: after a second Ctrl-C the round goes on writing to it while this
    # thread builds the interrupted state from ``op.finished`` (settles, filters, reads it).
    own: dict[int, ToolOutcome] | None = None if op.finished is None else {}
    # Where the round's lone blocking sub-run stands (see `Standing`), noted by it as it
    # goes: after a second Ctrl-C this thread keeps it from there, not waiting for it.
    standings: dict[int, Standing] | None = None if op.finished is None else {}
    above = STANDING.get()  # (this round is a sub-run's, itself run so: noted on its standing)
    if standings is not None and own is not None and above is not None:
        at = above.at
        if at is not None and at.finished is op.finished:
            # (with ``own``: a second Ctrl-C while this thread waits for the round keeps
            # what it kept, such as a sub-run beside a sync tool that the first one stopped)
            above.calls = (op.finished, standings, own)

    def keep() -> None:
        """What the round's thread kept so far, into ``op.finished`` (one `dict.update` of an
        int-keyed dict: it runs in C, whole, under the GIL: no write of the thread's lands
        midway)."""
        if own is not None and op.finished is not None:
            op.finished.update(own)

    def keep_standing() -> None:
        """The sub-runs still running on the round's thread (a second Ctrl-C stopped the wait
        for them), into ``op.finished`` where they stand, as Ctrl-C landing in them keeps them
        (the non-streamed run's sub-run runs in this thread: it does so)."""
        if standings is None or op.finished is None:
            return
        for index, standing in list(standings.items()):
            if index in op.finished:
                continue
            try:
                outcome = kept_standing(standing)
            except Exception:  # (not expected) the interruption must stay what is raised
                _log.debug("keeping a sub-run where it stood failed", exc_info=True)
                continue
            if outcome is not None:
                op.finished[index] = outcome

    def work() -> None:
        try:
            # Calls that ended before an interruption are kept (`own`), as inline.
            outcomes = run_calls_sync(
                jobs,
                max_concurrency=live.max_concurrency,
                finished=own,
                interrupt=interrupt,
                standings=standings,
            )
            ended.append((True, outcomes))
        except BaseException as exc:  # handed to the caller's thread, raised there
            ended.append((False, exc))
        finally:
            done.set()
            inbox.put(_STEP_DONE)

    relay.target = inbox.put
    # A blocking sub-run's own round, in a stream's round that Ctrl-C may interrupt
    # (this thread waits for it here, at no check): interrupting that one interrupts it.
    outer = watched_interrupt()
    if outer is not None and not outer.attach(interrupt):
        interrupt.fire()  # (then the round does not start)
    with resumed_round(live):  # (the round's context: set and reset in this one next())
        context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(work,), name="toolfold-step", daemon=True)
    # In the main thread (where Ctrl-C lands) the waits are bounded: a signal that
    # arrives just before one blocks wakes no wait, and would be raised only once
    # the round ended (its queued calls started meanwhile).
    poll = SIGNAL_POLL if threading.current_thread() is threading.main_thread() else None
    try:
        thread.start()
        while True:
            try:
                item = inbox.get(timeout=poll)
            except queue.Empty:
                continue
            if item is _STEP_DONE:
                break
            yield item
        keep()
    except BaseException as exc:
        if isinstance(exc, (Exception, GeneratorExit)):
            if tools is not None:  # (told first: its sub-runs stop because the caller left)
                tools.abandon()
            interrupt.cut()  # (the run is abandoned: what its round runs stops, reply or not)
            done.wait(ABANDON_WAIT)
            keep()
            raise
        # A second Ctrl-C stops waiting, also as the wait is told (from the round's own
        # thread, it can land as soon as the round is interrupted: inside this try too).
        try:
            if not interrupt.fire():
                keep()
                raise
            if interrupt.waits and not done.is_set():
                tell_interrupt_waits()
            while not done.wait(poll):
                pass
        finally:
            # Whether the round still runs, read first: were it to end between the two, the
            # sub-runs it kept as it ended would not be kept (they are in ``own`` only then).
            running = not done.is_set()
            keep()  # (after a second Ctrl-C: what had ended by then...)
            if running:
                interrupt.cut()  # (nobody keeps the reply it reads: it stops at its next chunk)
                keep_standing()  # (...and the sub-runs still running, where they stood)
        ok, value = ended[0]
        if ok and op.finished is not None:  # it ended before the cancel: every call is kept
            op.finished.update(enumerate(value))
        raise
    ok, value = ended[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


_STEP_DONE = object()


@contextmanager
def interrupt_waits(tell: Callable[[], object]) -> Iterator[None]:
    """Call ``tell`` (in the thread Ctrl-C reached, or in a stream's round's own thread once
    its round on an event loop was cancelled: see `SyncWaits`) when Ctrl-C, in a blocking
    run or a blocking stream iterated inside this, interrupts a round that goes on until its
    blocking calls return (sync tools running on worker threads; in a stream, a sub-run's
    blocking model call or tool too: see `RoundInterrupt.waits`) and the run waits for them
    before it raises the KeyboardInterrupt that keeps the run. A second Ctrl-C stops the
    wait (the calls still running are not kept; a sub-run is, where it stood).

    What shows a run to a person says so then (``toolfold run``): the run is not stuck.
    """
    token = INTERRUPT_WAITS.set(tell)
    try:
        yield
    finally:
        INTERRUPT_WAITS.reset(token)


async def _relayed_async(
    op: _RunToolsOp,
    jobs: Sequence[ToolJob],
    relay: Relay,
    live: Live,
    outcomes: list[tuple[ToolOutcome, ...]],
    tools: ToolsTrace | None = None,
) -> AsyncGenerator[RunStreamEvent, None]:
    """The step's calls (``jobs``: ``op``'s, or its trace's) as a task; their sub-runs'
    events yielded as they come.

    ``outcomes`` receives the calls' outcomes. Stopping the iteration cancels
    the calls still running, as cancelling the awaited calls would (``tools``, the
    step's trace, is told first that the caller left).
    """
    import asyncio

    loop = asyncio.get_running_loop()
    items: collections.deque[SubRunEvent] = collections.deque()
    wake = asyncio.Event()
    home = threading.get_ident()

    def put(item: SubRunEvent) -> None:
        if threading.get_ident() == home:
            items.append(item)
            wake.set()
        else:  # a sub-run on a worker thread
            loop.call_soon_threadsafe(put, item)

    relay.target = put
    with resumed_round(live):  # (the task's context is a copy made here)
        # (contained: a call's Ctrl-C or SystemExit is raised here, not out of the loop)
        calls = run_calls(jobs, max_concurrency=live.max_concurrency, finished=op.finished)
        task = asyncio.ensure_future(contained(calls))
    task.add_done_callback(lambda _: wake.set())
    try:
        while True:
            while items:
                yield items.popleft()
            if task.done():
                break
            wake.clear()
            await wake.wait()
        ran = task.result()
        if type(ran) is Escaped:
            raise ran.exc
        outcomes.append(ran)
    except (Exception, GeneratorExit):
        if tools is not None and not task.done():
            tools.abandon()
        raise
    finally:
        never_began(task, calls)  # (cancelled before it began, it never runs)
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def stream_async(
    live: Live, loop: Loop, state: RunState
) -> AsyncGenerator[RunStreamEvent | Ended, None]:
    """Like `drive_async`, streaming; the last item yielded is how the loop ended."""
    asyncio_task()  # (a UsageError outside asyncio: a trio run, say)
    trace = start_run(live, state)
    ended: Ended | None = None
    try:
        try:
            async with AsyncExitStack() as held:  # closed too when the caller stops iterating
                # Closed with this generator, so a step's calls stop when the caller
                # does, and before the sources they may use close.
                items = _stream_async(live, loop, trace, held)
                async with aclosing(items):
                    async for item in items:
                        if isinstance(item, Ended):
                            end_run(trace, item.state, None)
                            trace, ended = None, item
                        try:
                            yield item
                        except BaseException as exc:
                            # Ctrl-C or a cancellation thrown in here (``athrow``): on down
                            # to the stream the item came from (as a blocking stream's
                            # ``yield from`` passes it), so a model's stream it cuts counts
                            # the usage it reported; then stamped below.
                            await throw_into(items, exc)
                            raise
        except Exception as exc:
            if ended is None:
                raise
            raise close_failed(exc, finish(*ended)) from exc
    except BaseException as exc:
        stamp(loop, exc, streamed=True)
        end_run(trace, getattr(exc, "state", None), _failure(exc))
        raise


async def _stream_async(
    live: Live, loop: Loop, trace: RunTrace | None, held: AsyncExitStack
) -> AsyncGenerator[RunStreamEvent | Ended, None]:
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            yield stop.value
            return
        value, failure = None, None
        if isinstance(op, _SwitchOp):
            live = _switched(op, trace)
        elif isinstance(op, _OpenOp):
            try:
                value = await held.enter_async_context(aopened(op.sources))
            except Exception as exc:
                failure = exc
        elif isinstance(op, _SettledOp) and trace is not None:
            trace.settled(op.calls)
        elif isinstance(op, _NoticeOp):
            yield op.event
        elif isinstance(op, CallModel):
            await check_round_on_loop()  # (as in `drive_async`)
            # A model's stream that swallowed a cancellation of the run ends it all the
            # same, once the stream ends (Python 3.11+, see `_cancels`).
            cancelling = cancels_of(current_task())
            before = cancelling()
            if trace is not None:
                answered: list[tuple[Any, Exception | None]] = []
                traced = _stream_traced(live, op, trace, answered)
                async with aclosing(traced):
                    async for event in traced:
                        try:
                            yield event
                        except BaseException as exc:  # (as in `stream_async`)
                            await throw_into(traced, exc)
                            raise
                value, failure = answered[0]
                check_swallowed(cancelling, before)
                continue
            folded = StreamState()
            events: AsyncIterator[StreamEvent] | None = None
            try:
                events = live.model.stream(op.request)
                async for event in events:
                    folded = fold_stream(folded, event)
                    yield event
                value = finish_stream(folded, call_id_maker(op.step))
            except Exception as exc:
                value, failure = cut_answer(exc, folded)
            except BaseException as exc:  # cancelled: the loop's state counts what it reported
                note_cut_usage(exc, reported(folded))
                raise
            finally:
                await close_stream(events)
            check_swallowed(cancelling, before)
        elif isinstance(op, _RunToolsOp):
            await check_round_on_loop()
            tools = None if trace is None else trace.tools(op.jobs)
            jobs = op.jobs if tools is None else tools.jobs
            try:
                if op.relay is not None and any(forwards(job) for job in jobs):
                    ended: list[tuple[ToolOutcome, ...]] = []
                    relayed = _relayed_async(op, jobs, op.relay, live, ended, tools)
                    async with aclosing(relayed):
                        async for item in relayed:
                            try:
                                yield item
                            except BaseException as exc:  # (as in `stream_async`)
                                await throw_into(relayed, exc)
                                raise
                    value = ended[0]
                else:
                    with resumed_round(live):
                        value = await run_calls(
                            jobs, max_concurrency=live.max_concurrency, finished=op.finished
                        )
            except BaseException:
                cut_tools(tools, op)
                raise
            if tools is not None:
                tools.end(value)
        elif isinstance(op, _WaitOp):  # (rare: a retried workflow step waits)
            await step_retry.sleep(op.seconds)


# --- a model call while a trace is on: its span current while the model runs, ended
# however the call ends (a cancellation, or a caller that stops the stream, too)


def _request_traced_sync(
    live: Live, op: CallModel, trace: RunTrace
) -> tuple[Any, Exception | None]:
    call = trace.model_call(op.request)
    try:
        token = call.attach()
        try:
            value = live.model.request_sync(op.request)
        finally:
            call.detach(token)
    except BaseException as exc:
        call.end(None, exc)
        if isinstance(exc, Exception):
            return None, exc
        raise
    call.end(value, None)
    return value, None


async def _request_traced(
    live: Live, op: CallModel, trace: RunTrace
) -> tuple[Any, Exception | None]:
    call = trace.model_call(op.request)
    try:
        token = call.attach()
        try:
            value = await live.model.request(op.request)
        finally:
            call.detach(token)
    except BaseException as exc:
        call.end(None, exc)
        if isinstance(exc, Exception):
            return None, exc
        raise
    call.end(value, None)
    return value, None


# The end of a traced stream: a private object, so that a stream yielding None
# fails as it does untraced, rather than ending early.
_END: Any = object()


def _stream_traced_sync(
    live: Live, op: CallModel, trace: RunTrace, interrupt: RoundInterrupt | None = None
) -> Generator[StreamEvent, None, tuple[Any, Exception | None]]:
    """The model's stream, its span current while the model makes each event (not while
    the caller holds it); stopped at the next event once ``interrupt`` is cut."""
    call = trace.model_call(op.request)
    folded = StreamState()
    try:
        token = call.attach()
        try:
            events = iter(live.model.stream_sync(op.request))
            event = next(events, _END)
        finally:
            call.detach(token)
        while event is not _END:
            folded = fold_stream(folded, event)
            yield event
            if interrupt is not None and interrupt.is_cut:
                raise KeyboardInterrupt
            token = call.attach()
            try:
                event = next(events, _END)
            finally:
                call.detach(token)
        value = finish_stream(folded, call_id_maker(op.step))
    except BaseException as exc:
        call.end(None, exc, reported(folded))
        if isinstance(exc, Exception):
            return cut_answer(exc, folded)
        note_cut_usage(exc, reported(folded))  # (Ctrl-C: counted in its state, as on the span)
        raise
    call.end(value, None)
    return value, None


async def _stream_traced(
    live: Live, op: CallModel, trace: RunTrace, answered: list[tuple[Any, Exception | None]]
) -> AsyncGenerator[StreamEvent, None]:
    """Like `_stream_traced_sync`; ``answered`` receives the response or the error."""
    call = trace.model_call(op.request)
    folded = StreamState()
    events: AsyncIterator[StreamEvent] | None = None
    try:  # (the span ends before the model's stream is closed, however the call ends)
        try:
            token = call.attach()
            try:
                events = aiter(live.model.stream(op.request))
                event = await anext(events, _END)
            finally:
                call.detach(token)
            while event is not _END:
                folded = fold_stream(folded, event)
                yield event
                token = call.attach()
                try:
                    event = await anext(events, _END)
                finally:
                    call.detach(token)
            value = finish_stream(folded, call_id_maker(op.step))
        except BaseException as exc:
            call.end(None, exc, reported(folded))
            if isinstance(exc, Exception):
                answered.append(cut_answer(exc, folded))
                return
            note_cut_usage(exc, reported(folded))  # (cancelled: counted in its state too)
            raise
        call.end(value, None)
        answered.append((value, None))
    finally:
        await close_stream(events)


# What a stream's state holds until its provider reports usage.
_UNREPORTED = StreamState().usage


def reported(folded: StreamState) -> Usage | None:
    """The usage a model's stream had reported by ``folded`` (None if it reported none)."""
    usage = folded.usage
    return None if usage == _UNREPORTED else usage


def cut_answer(exc: Exception, folded: StreamState) -> tuple[Any, Exception | None]:
    """The value and failure for the loop of a stream that failed with ``exc`` at
    ``folded``: once the provider had reported usage (the call was billed, as a cut
    Anthropic stream's ``message_start`` says), a `CutAnswer` the loop counts it from.
    An answer the provider ended abnormally (`billed_usage`) counts what it reported
    last, with the event that ended it (not folded)."""
    usage = billed_usage(exc)
    if usage is None:
        usage = reported(folded)
    return (None, exc) if usage is None else (CutAnswer(exc, usage), None)


async def close_stream(events: AsyncIterator[StreamEvent] | None) -> None:
    """Close a model's stream the run stops reading (the caller stopped the run's stream,
    a cancellation), at once: one left to the garbage collector keeps its HTTP
    connection open until asyncio's async-generator hook closes it, turns of the
    event loop later. One that ended or failed is closed too (a generator's ``aclose``
    then does nothing). An ``aclose`` that fails is dropped (logged at debug): the run
    already has its answer, its own error, or the caller's stop to report, and a
    finished run must not fail over a stream it no longer reads."""
    aclose = getattr(events, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:
        _log.debug("closing the model's stream failed; ignored", exc_info=True)


def call_id_maker(step: int) -> Callable[[int], str]:
    """Ids for the calls of ``step`` a streamed response left without one (by position)."""
    return lambda index: f"call_{step}_{index}"


def _switched(op: _SwitchOp, trace: RunTrace | None) -> Live:
    """A handoff: the next agent's model and limits, with the trace told."""
    if trace is not None:
        trace.handoff(op.live)
    return op.live
