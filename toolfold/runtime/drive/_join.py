"""Running coroutines side by side as tasks, their results in order: `gather_or_cancel`.

What ``asyncio.gather`` and a semaphore did for the executor's calls and a
workflow's branches, for less: each coroutine still runs in a task of its
own (its own copy of the context, a cancellation seen at once), but at most
``limit`` tasks exist at a time (the next one is made when one ends, so no
semaphore to pass), the branches tell the join themselves when they end (no
done callback per task, no gather future), and the join waits on one future
only while some branch is still running. On Python 3.12+ a task starts
eagerly (`asyncio.Task`'s ``eager_start``): a branch that never waits ends
inside its task's creation, and a round of such branches never suspends.
Before, a branch that ends makes the next one's task itself, so the join
is not woken (a turn of the loop) between branches to make it.
"""

from __future__ import annotations

import contextvars
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

# Eager tasks (3.12+): the task's first step runs inside its creation. Not
# made by hand before 3.12: a first step run before its task exists sees the
# join's task as its own (`asyncio.current_task`), so a timeout or a cancel
# scope it enters there (httpx's transports, aiohttp's) would cancel the join,
# or fail when left in the task made after (see tests/runtime/test_join.py).
_EAGER = sys.version_info >= (3, 12)
# `create_task(..., context=)` (3.11+); before, the task is made inside the context.
_CONTEXT_ARG = sys.version_info >= (3, 11)


_NONE: Any = object()

# What a task re-raises out of the event loop rather than hold until awaited.
_ESCAPING = (KeyboardInterrupt, SystemExit)


class _Join:
    """The state of one `gather_or_cancel`: what ended, its tasks, and the join's waiter."""

    __slots__ = ("failed", "failure", "finished", "relay", "results", "running", "tasks", "waiter")

    def __init__(self, count: int, finished: dict[int, Any] | None = None) -> None:
        # What each coroutine returned, by index (`_NONE`: it has not returned).
        self.results: list[Any] = [_NONE] * count
        # The caller's record of what returned, written as each returns (see `_branch`).
        self.finished = finished
        self.running = 0
        self.failure: BaseException | None = None
        self.failed: list[asyncio.Task[Any] | None] = []  # the tasks that raised
        self.waiter: asyncio.Future[None] | None = None
        self.tasks: list[asyncio.Task[Any]] = []  # those made so far, by index
        # Makes the task of the coroutine of that index, when a branch that ends
        # makes the next one in its place (plain tasks; None once the join ends).
        self.relay: Callable[[int], None] | None = None


async def _branch(join: _Join, index: int, coroutine: Coroutine[Any, Any, T]) -> T:
    """``coroutine`` in its task, telling ``join`` when it ends (and waking it).

    With a relay, it starts the next coroutine's task in its place instead,
    if any is left to start and none failed: the join has nothing to do
    until the last one ends (no turn of the loop to wake it in between).
    """
    try:
        join.results[index] = value = await coroutine
        # Kept as it returns: Ctrl-C landing once the join (or the loop) ended raises
        # where the join's own keeping (`gather_or_cancel`) never runs.
        finished = join.finished
        if finished is not None:
            finished[index] = value
    except BaseException as exc:
        import asyncio

        this = asyncio.current_task()
        join.failed.append(this)
        escapes = isinstance(exc, _ESCAPING)
        if join.failure is None or (escapes and not isinstance(join.failure, _ESCAPING)):
            join.failure = exc
        if escapes:
            # Left to the join to raise: a task raising it would raise it out of the event
            # loop at once, past the join and whoever awaits it (a run, which then keeps
            # no state). So the task returns, and the join raises it in its own task; the
            # other tasks are cancelled now, as they are once it leaves the loop (Ctrl-C
            # in a blocking run): one that had not begun never begins.
            for task in join.tasks:
                if task is not this and not task.done():
                    task.cancel()
            return cast(T, _NONE)
        raise
    finally:
        join.running -= 1
        relay = join.relay
        if relay is not None and join.failure is None and len(join.tasks) < len(join.results):
            relay(len(join.tasks))
        else:
            waiter = join.waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
    return value


async def gather_or_cancel(
    coroutines: list[Coroutine[Any, Any, T]],
    finished: dict[int, T] | None = None,
    limit: int | None = None,
    names: Sequence[str] | None = None,
) -> tuple[T, ...]:
    """Run ``coroutines`` as tasks (at most ``limit`` at once), their results in order;
    any that still run when this ends (an error, a cancellation) are cancelled and
    awaited, none left behind, and those not started are closed.

    The first error (an exception a coroutine raised, or its cancellation)
    is raised as ``asyncio.gather`` raises it. ``finished`` (if given) receives
    each coroutine's result, by index, as it returns: when the join is cancelled
    (or Ctrl-C stops it, even once it returned), it holds those that had returned. ``names``: the tasks' names, by
    index (what a debugger or ``asyncio.all_tasks`` shows; default ``Task-<n>``).
    """
    import asyncio

    loop = asyncio.get_running_loop()
    count = len(coroutines)
    assert names is None or len(names) == count, "a name for each coroutine"
    most = count if limit is None else max(1, limit)
    join = _Join(count, finished)
    tasks = join.tasks
    base = contextvars.copy_context()  # each task runs in its own copy of it
    # Tasks made here as `loop.create_task` makes them (without its checks of
    # the running loop, once per task) when the loop makes plain ones: a task
    # factory of the caller's (uvloop, tracing) makes them all. Eager ones
    # (3.12+) in debug mode too; otherwise a loop in debug mode makes them
    # (it trims the traceback of their creation).
    own = loop.get_task_factory() is None  # (no factory of the caller's)
    eager = _EAGER and own
    plain = not eager and _CONTEXT_ARG and own and not loop.get_debug()

    def relay(index: int) -> None:
        """Make the plain task of the coroutine at ``index`` (it starts at the loop's next turn)."""
        join.running += 1
        tasks.append(
            asyncio.Task(  # type: ignore[call-arg,unused-ignore]
                _branch(join, index, coroutines[index]),
                loop=loop,
                name=None if names is None else names[index],
                context=base.copy(),
            )
        )

    if plain:
        join.relay = relay
    try:
        while True:
            if plain:
                if join.failure is None:
                    # Such a task starts at the loop's next turn: none ends (nor fails) while
                    # they are made, so every one the limit allows is made at once; then each
                    # that ends makes the next (`_branch`).
                    for index in range(len(tasks), min(count, len(tasks) + most - join.running)):
                        relay(index)
            else:
                while len(tasks) < count and join.running < most and join.failure is None:
                    index = len(tasks)
                    coroutine = _branch(join, index, coroutines[index])
                    name = None if names is None else names[index]
                    join.running += 1
                    if eager:
                        task: asyncio.Task[T] = asyncio.Task(
                            coroutine,
                            loop=loop,
                            name=name,
                            context=base.copy(),
                            eager_start=True,  # type: ignore[call-arg,unused-ignore]
                        )
                    elif _CONTEXT_ARG:
                        task = loop.create_task(coroutine, name=name, context=base.copy())  # type: ignore[call-arg,unused-ignore]
                    else:
                        task = base.run(loop.create_task, coroutine, name=name)
                    tasks.append(task)
            if join.failure is not None:
                raise join.failure
            if join.running == 0 and len(tasks) == count:
                return tuple(join.results)
            join.waiter = loop.create_future()
            await join.waiter
            join.waiter = None
    except BaseException:  # (a cancellation, or Ctrl-C raised in one of them)
        for ended in (*join.failed, *tasks):  # their errors are raised here: not "never retrieved"
            if ended is not None and ended.done() and not ended.cancelled():
                ended.exception()
        if finished is not None:
            # What returned, read as it was stored: a branch whose coroutine returned
            # can still fail after (Ctrl-C landing in its ``finally``), its result kept.
            for index, result in enumerate(join.results):
                if result is not _NONE:
                    finished[index] = result
        raise
    finally:
        join.relay = None  # (no branch ending now starts another)
        if join.running or len(tasks) < count:  # (else every task has ended: nothing to do)
            for coroutine in coroutines[len(tasks) :]:
                coroutine.close()  # never started: nothing ran
            pending = [t for t in tasks if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            if join.failure is not None or pending:
                # A task cancelled before its first step never awaited its coroutine:
                # closed here (the others have ended, and closing them does nothing),
                # it is not reported as "never awaited".
                for coroutine in coroutines[: len(tasks)]:
                    coroutine.close()
