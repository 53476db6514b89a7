"""`gather_or_cancel`: coroutines side by side as tasks, results in order, at most a limit at once."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import sys
from typing import Any

import pytest

from toolfold.runtime.drive._join import gather_or_cancel

seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="none")


def test_results_come_in_order_and_no_more_than_the_limit_run_at_once() -> None:
    """Branches that wait run at most ``limit`` at a time, and their results come in declaration order."""

    async def go() -> None:
        running = 0
        most = 0
        gates = [asyncio.Event() for _ in range(7)]

        async def branch(index: int) -> int:
            nonlocal running, most
            running += 1
            most = max(most, running)
            await gates[index].wait()
            running -= 1
            return index * 10

        join = asyncio.ensure_future(gather_or_cancel([branch(i) for i in range(7)], limit=3))
        for gate in reversed(gates):  # released last first: the order is still the call order
            await asyncio.sleep(0)
            gate.set()
        assert await join == (0, 10, 20, 30, 40, 50, 60)
        assert most == 3

    asyncio.run(go())


def test_the_first_error_cancels_the_others_and_closes_those_not_started() -> None:
    """An error in one branch is raised, the branches still running are cancelled, and those never started are closed, not left unawaited."""

    async def go() -> None:
        cancelled: list[int] = []

        async def waits(index: int) -> int:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(index)
                raise
            return index

        async def fails() -> int:
            await asyncio.sleep(0)
            raise KeyError("boom")

        never = waits(9)
        with pytest.raises(KeyError):
            await gather_or_cancel([waits(0), fails(), waits(2), never], limit=3)
        assert cancelled == [0, 2]
        assert inspect.getcoroutinestate(never) == inspect.CORO_CLOSED

    asyncio.run(go())


def test_a_cancelled_join_keeps_what_ended_and_cancels_the_rest() -> None:
    """Cancelling the join cancels every branch still running and hands back, by index, the results of those that ended."""

    async def go() -> None:
        cancelled: list[int] = []

        async def quick(value: int) -> int:
            return value

        async def waits(index: int) -> int:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.append(index)
                raise
            return index

        finished: dict[int, int] = {}
        join = asyncio.ensure_future(
            gather_or_cancel([quick(5), waits(1), quick(7), waits(3)], finished)
        )
        for _ in range(3):
            await asyncio.sleep(0)
        join.cancel()
        with pytest.raises(asyncio.CancelledError):
            await join
        assert finished == {0: 5, 2: 7}
        assert cancelled == [1, 3]

    asyncio.run(go())


def test_each_branch_runs_in_its_own_copy_of_the_callers_context() -> None:
    """What a branch sets stays its own, and a branch started late (over the limit) sees the caller's values, not an earlier branch's."""

    async def go() -> None:
        async def branch(name: str) -> str:
            before = seen.get()
            seen.set(name)
            await asyncio.sleep(0)
            return before + ">" + seen.get()

        seen.set("caller")
        results = await gather_or_cancel([branch(n) for n in "abc"], limit=1)
        assert results == ("caller>a", "caller>b", "caller>c")
        assert seen.get() == "caller"

    asyncio.run(go())


def test_branches_that_never_wait_end_without_the_join_waiting_on_eager_pythons() -> None:
    """On Python 3.12+ a branch that never waits ends inside its task's creation, so the join does not give the loop a turn; before, it does."""

    async def go() -> None:
        turns: list[str] = []

        async def branch(value: int) -> int:
            return value

        asyncio.get_running_loop().call_soon(turns.append, "loop")
        assert await gather_or_cancel([branch(i) for i in range(5)], limit=2) == (0, 1, 2, 3, 4)
        assert turns == ([] if sys.version_info >= (3, 12) else ["loop"])

    asyncio.run(go())


def test_over_the_limit_a_branch_that_ends_starts_the_next_one_itself() -> None:
    """Branches that each wait once, one at a time: each that ends starts the next, so the join wakes once, after the last (one loop turn per branch, not two)."""

    async def go() -> None:
        turns = 0
        stop = False

        async def count_turns() -> None:
            nonlocal turns
            while not stop:
                await asyncio.sleep(0)
                turns += 1

        async def branch(value: int) -> int:
            await asyncio.sleep(0)
            return value

        counter = asyncio.get_running_loop().create_task(count_turns())
        await asyncio.sleep(0)  # the counter runs
        start = turns
        assert await gather_or_cancel([branch(i) for i in range(4)], limit=1) == (0, 1, 2, 3)
        used = turns - start
        stop = True
        await counter
        # A turn to start the first, then two per branch (its sleep, the next one's start);
        # with the join woken between branches to make the next task: 12 on Python 3.11.
        # Python 3.10 has no `create_task(context=)`, and the join makes its tasks one at a
        # time in its own context there, without the relay: it still takes its 12.
        assert used <= (2 * 4 + 1 if sys.version_info >= (3, 11) else 3 * 4)

    asyncio.run(go())


def test_a_task_factory_of_the_callers_makes_every_branch_task() -> None:
    """With a task factory set on the loop, each branch's task is the factory's."""

    async def go() -> None:
        made: list[Any] = []
        loop = asyncio.get_running_loop()

        def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
            task = asyncio.Task(coro, loop=loop, **kwargs)
            made.append(task)
            return task

        loop.set_task_factory(factory)

        async def branch(value: int) -> int:
            await asyncio.sleep(0)
            return value

        assert await gather_or_cancel([branch(i) for i in range(3)]) == (0, 1, 2)
        assert len(made) == 3

    asyncio.run(go())


def test_a_branch_cancelled_before_its_first_step_leaves_no_unawaited_coroutine() -> None:
    """Ctrl-C in one branch stops the loop before a sibling's task ran: its coroutine is
    closed, not reported as "never awaited" (review finding)."""
    import gc
    import warnings

    async def waits() -> int:
        await asyncio.sleep(3600)
        return 1

    async def interrupts() -> int:
        raise KeyboardInterrupt

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(gather_or_cancel([interrupts(), waits()]))
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


@pytest.mark.parametrize("debug", [False, True])
def test_names_given_name_the_branch_tasks(debug: bool) -> None:
    """Each branch's task carries the name given for it, in debug mode as well (where the loop makes the tasks)."""

    async def go() -> None:
        async def branch() -> str:
            task = asyncio.current_task()
            assert task is not None
            return task.get_name()

        names = await gather_or_cancel([branch(), branch()], names=["first", "second"])
        assert names == ("first", "second")

    asyncio.run(go(), debug=debug)


def test_a_branch_is_its_own_task_from_its_first_step_on() -> None:
    """Before its first wait, a branch already runs as the task it goes on in, not as the
    join's: a first step run outside a task of its own (a hand-made eager start on 3.11)
    would see the caller as its task."""

    async def go() -> None:
        caller = asyncio.current_task()

        async def branch() -> bool:
            first = asyncio.current_task()
            await asyncio.sleep(0)
            return first is asyncio.current_task() and first is not caller

        assert await gather_or_cancel([branch(), branch()]) == (True, True)

    asyncio.run(go())


def test_a_cancel_scope_a_branch_enters_before_it_first_waits_is_left_in_the_same_task() -> None:
    """A cancel scope (anyio's, as httpx's transports open one around a connect) entered in a
    branch's first step and left after it waits is left in the task it was entered in:
    anyio raises when it is not."""
    import anyio

    async def go() -> None:
        async def branch(value: int) -> int:
            with anyio.fail_after(3600):
                await asyncio.sleep(0)
            return value

        assert await gather_or_cancel([branch(1), branch(2)]) == (1, 2)

    asyncio.run(go())


def test_a_branch_that_cancels_its_task_before_it_first_waits_stops_itself_only() -> None:
    """What a timeout does (``asyncio.timeout``, aiohttp's): a branch that takes its task in its
    first step and has it cancelled later stops itself, not the join (the caller's task), and
    the other branches' results come back."""

    async def go() -> None:
        async def cancels_itself() -> str:
            task = asyncio.current_task()
            assert task is not None
            asyncio.get_running_loop().call_soon(task.cancel)  # as a timeout expiring
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                return "stopped"
            return "waited"

        async def other() -> str:
            await asyncio.sleep(0)
            return "other"

        assert await gather_or_cancel([cancels_itself(), other()]) == ("stopped", "other")

    asyncio.run(go())
