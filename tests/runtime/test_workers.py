"""The worker-thread hand-off of sync tools: context, results, errors, cancellation, parallelism."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import inspect
import threading
import weakref
from typing import Any

import pytest
from garbage import still_alive

from toolfold.runtime.drive._workers import (
    MAX_WORKERS,
    NOT_RUN,
    SyncInbox,
    Ticket,
    hand_off,
    submit_sync,
)

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def test_runs_in_a_worker_thread_with_the_callers_context() -> None:
    """The function runs off the loop's thread and reads the caller's context variables."""

    def read() -> tuple[str, str]:
        return threading.current_thread().name, VAR.get()

    async def main() -> tuple[str, str]:
        VAR.set("caller")
        return await hand_off(read)

    name, value = asyncio.run(main())
    assert name != threading.current_thread().name
    assert value == "caller"


def test_context_changes_stay_with_the_call() -> None:
    """What the function sets in its context does not leak to the caller."""

    def write() -> str:
        VAR.set("tool")
        return VAR.get()

    async def main() -> tuple[str, str]:
        VAR.set("caller")
        inside = await hand_off(write)
        return inside, VAR.get()

    assert asyncio.run(main()) == ("tool", "caller")


def test_exceptions_reach_the_awaiting_task() -> None:
    """An exception the function raises is raised by the await, StopIteration as RuntimeError."""

    def fail(kind: type[Exception]) -> None:
        raise kind("boom")

    async def main() -> None:
        with pytest.raises(ValueError, match="boom"):
            await hand_off(fail, ValueError)
        with pytest.raises(RuntimeError, match="StopIteration") as info:
            await hand_off(fail, StopIteration)
        assert isinstance(info.value.__cause__, StopIteration)

    asyncio.run(main())


def test_many_calls_settle_with_their_own_results() -> None:
    """Calls finishing together each get their own result."""

    async def main() -> list[int]:
        return list(await asyncio.gather(*[hand_off(pow, i, 2) for i in range(200)]))

    assert asyncio.run(main()) == [i * i for i in range(200)]


def test_blocking_calls_run_side_by_side() -> None:
    """Several blocking calls run at once: each waits for all the others to start."""
    count = 6
    barrier = threading.Barrier(count, timeout=10)

    async def main() -> list[int]:
        return list(await asyncio.gather(*[hand_off(barrier.wait) for _ in range(count)]))

    assert sorted(asyncio.run(main())) == list(range(count))


def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    """Cancelling a queued call means its function is never called."""
    gate = threading.Event()
    ran: list[str] = []
    started = threading.Barrier(MAX_WORKERS + 1, timeout=10)

    def hold() -> None:
        started.wait()
        gate.wait(10)

    async def main() -> None:
        holders = [hand_off(hold) for _ in range(MAX_WORKERS)]  # every worker busy
        await asyncio.get_running_loop().run_in_executor(None, started.wait)
        queued = hand_off(ran.append, "late")
        queued.cancel()
        gate.set()
        await asyncio.gather(*holders)
        await hand_off(ran.append, "after")

    asyncio.run(main())
    assert ran == ["after"]


def test_works_across_successive_loops() -> None:
    """A new event loop gets its results too (the workers outlive a loop)."""
    for i in range(3):
        assert asyncio.run(_square(i)) == i * i


async def _square(i: int) -> int:
    return int(await hand_off(pow, i, 2))


def test_a_blocking_call_cancelled_as_a_worker_starts_it_reports_that_it_did_not_run() -> None:
    """A ticket cancelled once a worker checked it, before the call began, reports NOT_RUN."""

    class CancelledLate(Ticket):
        """Reads as not cancelled at the worker's check: the cancel came just after it."""

        def cancelled(self) -> bool:
            self.cancel()
            return False

    ran: list[int] = []
    inbox, ticket = SyncInbox(), CancelledLate(0)
    submit_sync(inbox, ticket, ran.append, 1)
    assert inbox.get(30) == (ticket, True, NOT_RUN)  # no start notice: it never began
    assert ticket.started is not None  # what the caller reads to know a report comes
    assert ran == []


class _Held:
    """What a call's context, function or arguments hold (a run's, a request's values)."""


HELD: contextvars.ContextVar[_Held] = contextvars.ContextVar("HELD")


@pytest.mark.parametrize("ends", ["returns", "raises"])
def test_a_worker_lets_go_of_a_calls_context_before_handing_its_end_on(ends: str) -> None:
    """When a worker hands a call's end on, it holds the call's context, function and
    arguments no more: a caller that has the end and collects sees none of them kept.
    (They were let go of at the worker's loop's end, after the hand-off: under load the
    caller's collection came first.)"""
    kept: list[list[str]] = []
    refs: dict[str, weakref.ref[_Held]] = {}

    class Watched(SyncInbox):
        """Notes, as the end is handed on (on the worker's thread), what is still alive."""

        __slots__ = ()

        def put(self, ticket: Ticket, ok: bool | None, value: Any) -> None:
            if ok is not None:
                gc.collect()
                kept.append([name for name, ref in refs.items() if ref() is not None])
            super().put(ticket, ok, value)

    def submit(inbox: SyncInbox, ticket: Ticket) -> None:
        in_context, in_function, in_args = _Held(), _Held(), _Held()
        refs["context"] = weakref.ref(in_context)
        # (A raised error's traceback holds its frames' function and arguments.)
        if ends == "returns":
            refs.update(function=weakref.ref(in_function), args=weakref.ref(in_args))

        def call(held: _Held) -> str:
            submitted.wait(30)  # (until the test's own frames let go of them)
            if ends == "raises":
                raise ValueError("no")
            return f"ran with {in_function}"

        def start() -> None:
            HELD.set(in_context)
            submit_sync(inbox, ticket, call, in_args)

        contextvars.Context().run(start)

    inbox, ticket, submitted = Watched(), Ticket(0), threading.Event()
    submit(inbox, ticket)
    submitted.set()
    assert inbox.get(30)[1] is None  # (the start notice)
    assert inbox.get(30)[1] is (ends == "returns")
    assert kept == [[]]


def test_an_idle_worker_keeps_no_result_alive() -> None:
    """Once a worker has handed a call's result on and gone idle, it holds no reference to it."""
    import weakref

    class Big:
        pass

    made: list[weakref.ref[Big]] = []

    def make() -> Big:
        big = Big()
        made.append(weakref.ref(big))
        return big

    async def main() -> None:
        got = await hand_off(make)
        assert isinstance(got, Big)

    asyncio.run(main())
    assert still_alive(made) == []  # (waited for: the worker lets go at its loop's end)


async def _never_awaited() -> None:
    """A coroutine a sync tool returns, for the run to await."""


def test_a_coroutine_returned_to_a_cancelled_call_is_closed_not_left_to_warn() -> None:
    """A sync call whose future was cancelled before its result was settled (its round
    interrupted) returned a coroutine nothing will await: it is closed as it is dropped,
    not reported as "never awaited" when collected, in whatever test or request comes next."""
    from toolfold.runtime.drive._workers import _Inbox

    coroutine = _never_awaited()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        inbox = _Inbox(loop)
        dropped, read = loop.create_future(), loop.create_future()
        dropped.cancel()
        inbox.put(dropped, True, coroutine)
        inbox.put(read, True, "read")  # (settled in the same batch, after it)
        assert await read == "read"

    asyncio.run(main())
    assert inspect.getcoroutinestate(coroutine) == inspect.CORO_CLOSED


def test_a_coroutine_a_round_never_read_is_closed() -> None:
    """The result of a call's future that its interrupted round never read: a coroutine
    never started is closed; other results, cancelled futures and no future are let be."""
    from toolfold.runtime.drive._executor import _close_unread

    unread = _never_awaited()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        holding, plain, cancelled = loop.create_future(), loop.create_future(), loop.create_future()
        holding.set_result(unread)
        plain.set_result("text")
        cancelled.cancel()
        for future in (holding, plain, cancelled, None):
            _close_unread(future)
        assert plain.result() == "text"

    asyncio.run(main())
    assert inspect.getcoroutinestate(unread) == inspect.CORO_CLOSED
