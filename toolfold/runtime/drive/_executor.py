"""Running one step's tool calls: validate, invoke, time out, format.

This is the only place a tool's function is called. Every failure a model can
correct (bad JSON, schema-invalid arguments, an exception, a timeout) becomes
a `ToolOutcome` with an error text for the model; nothing here raises for a
tool's sake. Results come back in call order whatever the completion order.

Sync tools run on shared worker threads (`_workers`), async tools on the
running loop; a sync tool marked ``blocking=False`` (quick, never blocks) is
called inline on the loop, skipping the hand-off. The blocking path (`run_calls_sync`) needs no event loop at all
when the step has only sync tools, and runs a lone call without a timeout in
the caller's thread. A tool's timeout counts from when it starts running, not
from when it was queued; a sync tool that times out cannot be stopped (its
thread runs on, its result is dropped) but hands its worker slot over.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from queue import Empty
from typing import Any, Literal, NamedTuple, TypeVar

from toolfold._errors import ToolArgumentError
from toolfold.runtime.core._messages import ToolCallPart, ToolResultPart, thaw
from toolfold.runtime.drive._workers import (
    SyncInbox,
    Ticket,
    abandon,
    hand_off,
    hand_off_timed,
    submit_sync,
)
from toolfold.toolkit._context import RunContext
from toolfold.toolkit._results import describe_exception
from toolfold.toolkit._tool import Tool

T = TypeVar("T")

Outcome = Literal["ok", "error", "invalid_arguments", "timeout", "unknown_tool", "denied"]

DEFAULT_MAX_CONCURRENCY = 8


# Tuples, not attrs classes: these are made for every call of every step, and
# a NamedTuple is as immutable and several times cheaper to build.


class ToolJob(NamedTuple):
    """One call to execute.

    Attributes:
        call: The call as the model made it.
        tool: The tool to run, or None when the model named an unknown tool.
        context: The run context handed to the tool.
    """

    call: ToolCallPart
    tool: Tool[..., Any] | None
    context: RunContext[Any]


class ToolOutcome(NamedTuple):
    """What one call produced.

    Attributes:
        call_id: The id of the call.
        tool_name: The tool the call named.
        content: The text the model will see.
        is_error: True unless the tool returned normally.
        outcome: ``ok``, ``error``, ``invalid_arguments``, ``timeout``,
            ``unknown_tool`` or ``denied``.
        exception: The exception a tool raised (for ``on_tool_error="raise"``).
    """

    call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    outcome: Outcome = "ok"
    exception: BaseException | None = None

    @property
    def part(self) -> ToolResultPart:
        """The result as a message part."""
        return ToolResultPart(self.call_id, self.tool_name, self.content, self.is_error)


def _error(
    call: ToolCallPart, content: str, outcome: Outcome, exc: BaseException | None = None
) -> ToolOutcome:
    return ToolOutcome(call.id, call.name, content, True, outcome, exc)


def _prepare(inv: ToolJob) -> ToolOutcome | dict[str, Any]:
    """Validated arguments, or the outcome that replaces running the tool."""
    tool = inv.tool
    if tool is None or tool.function is None:
        return _error(
            inv.call, f"Error: tool {inv.call.name!r} cannot be run here.", "unknown_tool"
        )
    stored = inv.call.arguments
    # A copy of its own: what the tool does to its arguments never reaches the state.
    raw = thaw(stored) if stored is not None else inv.call.arguments_text
    try:
        return tool.validate_arguments(raw)
    except ToolArgumentError as exc:
        return _error(inv.call, exc.message_for_model, "invalid_arguments", exc)


def _finish(inv: ToolJob, value: Any) -> ToolOutcome:
    assert inv.tool is not None
    try:
        content = inv.tool.format_result(value)
    except Exception as exc:
        return _failed(inv, exc)
    return ToolOutcome(inv.call.id, inv.call.name, content)


def _failed(inv: ToolJob, exc: BaseException) -> ToolOutcome:
    return _error(inv.call, f"Error: {describe_exception(exc)}", "error", exc)


def _timed_out(inv: ToolJob, timeout: float) -> ToolOutcome:
    return _error(
        inv.call, f"Error: tool {inv.call.name!r} timed out after {timeout:g} s.", "timeout"
    )


# --- the shared thread pool ------------------------------------------------

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


def _call_sync(inv: ToolJob, arguments: dict[str, Any]) -> Any:
    assert inv.tool is not None
    return inv.tool.invoke(arguments, inv.context)


# --- async -------------------------------------------------------------------


async def run_calls(
    invocations: Sequence[ToolJob], *, max_concurrency: int = DEFAULT_MAX_CONCURRENCY
) -> tuple[ToolOutcome, ...]:
    """Run the calls concurrently; outcomes in call order.

    Cancelling the awaiting task cancels every call still running (a sync tool
    already in a thread cannot be interrupted; its result is dropped).
    """
    import asyncio  # here, not at the top: `import toolfold` should not pay for asyncio

    if len(invocations) == 1:  # one call is always within the limit: no semaphore
        inv = invocations[0]
        prepared = _prepare(inv)
        if isinstance(prepared, ToolOutcome):
            return (prepared,)
        tool = inv.tool
        assert tool is not None
        if not tool.blocking and not tool.is_async:  # inline: one coroutine fewer
            return (await _run_on_loop(inv, prepared),)
        return (await _run_one(inv, prepared),)
    limit = asyncio.Semaphore(max(1, max_concurrency))

    async def one(inv: ToolJob) -> ToolOutcome:
        prepared = _prepare(inv)
        if isinstance(prepared, ToolOutcome):
            return prepared
        async with limit:
            return await _run_one(inv, prepared)

    tasks = [asyncio.ensure_future(one(inv)) for inv in invocations]
    try:
        return tuple(await asyncio.gather(*tasks))
    finally:
        pending = [t for t in tasks if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


async def _run_one(inv: ToolJob, arguments: dict[str, Any]) -> ToolOutcome:
    import asyncio

    assert inv.tool is not None
    if not inv.tool.blocking and not inv.tool.is_async:
        return await _run_on_loop(inv, arguments)
    timeout = inv.tool.timeout
    try:
        if inv.tool.is_async:
            # A task of its own, so the tool's context changes stay its own.
            work: asyncio.Future[Any] = asyncio.ensure_future(
                inv.tool.invoke(arguments, inv.context)
            )
        elif timeout is None:
            work = hand_off(_call_sync, inv, arguments)
        else:
            return await _run_timed_sync(inv, arguments, timeout)
    except Exception as exc:
        return _failed(inv, exc)
    if timeout is None:
        # Awaiting the future itself cancels it when the caller is cancelled,
        # as asyncio.wait below does by hand: no waiter to build per call.
        try:
            value = await work
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return _failed(inv, exc)
        return _finish(inv, value)
    try:
        # asyncio.wait, not wait_for: a TimeoutError the tool raises itself
        # must read as a tool error, not as our timeout.
        done, _ = await asyncio.wait({work}, timeout=timeout)
    except asyncio.CancelledError:
        work.cancel()
        raise
    if not done:
        work.cancel()
        await asyncio.gather(work, return_exceptions=True)
        return _timed_out(inv, timeout)
    try:
        value = work.result()
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        return _failed(inv, exc)
    return _finish(inv, value)


async def _run_on_loop(inv: ToolJob, arguments: dict[str, Any]) -> ToolOutcome:
    """A ``blocking=False`` sync tool, called right here on the loop's thread.

    No timeout applies (the definition refuses one: nothing could interrupt
    the call). A copy of the context, as a worker thread would get, keeps the
    context variables the tool sets its own.
    """
    try:
        value = contextvars.copy_context().run(_call_sync, inv, arguments)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        return _failed(inv, exc)
    return _finish(inv, value)


async def _run_timed_sync(inv: ToolJob, arguments: dict[str, Any], timeout: float) -> ToolOutcome:
    """A sync tool with a timeout counted from when a worker starts it, not from the queue."""
    import asyncio

    work, started = hand_off_timed(_call_sync, inv, arguments)
    try:
        await asyncio.wait({work, started}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            remaining = started.result() + timeout - time.monotonic()
            await asyncio.wait({work}, timeout=max(0.0, remaining))
    except asyncio.CancelledError:
        work.cancel()
        if started.done() and not work.done():
            abandon(work)
        raise
    if not work.done():
        work.cancel()
        abandon(work)  # its thread cannot be stopped: let another worker take its place
        return _timed_out(inv, timeout)
    try:
        value = work.result()
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        return _failed(inv, exc)
    return _finish(inv, value)


# --- blocking ----------------------------------------------------------------


def run_calls_sync(
    invocations: Sequence[ToolJob], *, max_concurrency: int = DEFAULT_MAX_CONCURRENCY
) -> tuple[ToolOutcome, ...]:
    """Run the calls from blocking code; outcomes in call order.

    Uses no event loop unless an async tool is among the calls.
    """
    if len(invocations) == 1:  # the common case, without the bookkeeping below
        job = invocations[0]
        tool = job.tool
        if tool is not None and not tool.is_async and tool.timeout is None:
            prepared = _prepare(job)
            if isinstance(prepared, ToolOutcome):
                return (prepared,)
            return (_run_inline(job, prepared),)
    if any(inv.tool is not None and inv.tool.is_async for inv in invocations):
        return run_blocking(lambda: run_calls(invocations, max_concurrency=max_concurrency))
    results: list[ToolOutcome | None] = []
    jobs: list[tuple[ToolJob, dict[str, Any]]] = []
    slots: list[int] = []
    for inv in invocations:
        prepared = _prepare(inv)
        if isinstance(prepared, ToolOutcome):
            results.append(prepared)
        else:
            slots.append(len(results))
            results.append(None)
            jobs.append((inv, prepared))
    if len(jobs) == 1 and jobs[0][0].tool is not None and jobs[0][0].tool.timeout is None:
        results[slots[0]] = _run_inline(*jobs[0])
    elif jobs:
        for slot, outcome in zip(slots, _run_threaded(jobs, max_concurrency), strict=True):
            results[slot] = outcome
    return tuple(r for r in results if r is not None)


def _run_inline(inv: ToolJob, arguments: dict[str, Any]) -> ToolOutcome:
    try:
        value = _call_sync(inv, arguments)
        if inspect.isawaitable(value):
            value = run_blocking(lambda: _await(value))
    except Exception as exc:
        return _failed(inv, exc)
    return _finish(inv, value)


async def _await(value: Awaitable[T]) -> T:
    return await value


def _run_threaded(
    jobs: Sequence[tuple[ToolJob, dict[str, Any]]], max_concurrency: int
) -> list[ToolOutcome]:
    limit = max(1, max_concurrency)
    outcomes: list[ToolOutcome | None] = [None] * len(jobs)
    inbox = SyncInbox()
    running: dict[int, Ticket] = {}
    queue = list(range(len(jobs)))
    queue.reverse()
    try:
        while queue or running:
            while queue and len(running) < limit:
                index = queue.pop()
                inv, arguments = jobs[index]
                ticket = Ticket(index)
                submit_sync(inbox, ticket, _call_sync, inv, arguments)
                running[index] = ticket
            try:
                ticket, ok, value = inbox.get(_next_deadline(running, jobs))
            except Empty:
                pass
            else:
                if ok is not None and running.get(ticket.index) is ticket:
                    del running[ticket.index]
                    outcomes[ticket.index] = _settled(jobs[ticket.index][0], ok, value)
            now = time.monotonic()
            for index, ticket in list(running.items()):
                timeout = _timeout_of(jobs[index][0])
                # The timeout counts from the start: time queued for a worker is not the tool's.
                started = ticket.started
                if timeout is not None and started is not None and now - started >= timeout:
                    del running[index]
                    ticket.cancel()
                    abandon(ticket)  # its thread cannot be stopped: another worker takes its place
                    outcomes[index] = _timed_out(jobs[index][0], timeout)
    finally:
        for ticket in running.values():
            ticket.cancel()
    return [o for o in outcomes if o is not None]


def _timeout_of(inv: ToolJob) -> float | None:
    return inv.tool.timeout if inv.tool is not None else None


def _next_deadline(
    running: dict[int, Ticket], jobs: Sequence[tuple[ToolJob, dict[str, Any]]]
) -> float | None:
    # Calls not started yet have no deadline: their start notice wakes the wait.
    now = time.monotonic()
    waits = [
        max(0.0, started + timeout - now)
        for index, ticket in running.items()
        if (started := ticket.started) is not None
        and (timeout := _timeout_of(jobs[index][0])) is not None
    ]
    return min(waits) if waits else None


def _settled(inv: ToolJob, ok: bool, value: Any) -> ToolOutcome:
    if not ok:
        if not isinstance(value, Exception):
            raise value  # KeyboardInterrupt, SystemExit...: not the model's to read
        return _failed(inv, value)
    try:
        if inspect.isawaitable(value):
            value = run_blocking(lambda: _await(value))
    except Exception as exc:
        return _failed(inv, exc)
    return _finish(inv, value)


def run_blocking(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to completion from blocking code.

    With no loop running in this thread, on a fresh loop here; inside a
    running loop (sync API called from async code), on a worker thread so the
    caller's loop is not re-entered.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    return _pool().submit(lambda: asyncio.run(make())).result()
