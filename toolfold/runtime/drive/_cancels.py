"""Keeping a run's own cancellation when what it awaits swallows it.

Cancelling a task that awaits a coroutine or another task throws the
`CancelledError` into what it awaits: a tool (or a model's request) that
catches it and returns ("graceful shutdown") hands its value back to the
run as if nothing happened, and the cancelled run would go on, making a
further model call, and `asyncio.timeout` around it would be overrun
without a word. So the run checks, once what it awaited has ended, whether
its task was cancelled meanwhile, and then ends as cancelled (with its
state, as any cancellation of it).

Python 3.11 and later count a task's pending cancellations
(`asyncio.Task.cancelling`, lowered by `uncancel` once a timeout took its
own back): a count higher after the await than before it is a cancellation
of the run that was swallowed. Python 3.10 keeps no trace of it. There a
lone async tool, which runs as a task of its own anyway (as does what a
``blocking=False`` sync tool returns to await), is awaited apart: a
cancellation of the run interrupts the wait without passing it on; the tool
is then cancelled and waited for (`awaited_apart`). A model
call is not made a task of its own for this (what it raises that is not an
`Exception`, Ctrl-C's KeyboardInterrupt, would leave the event loop at once,
past the run, and a stream's pieces would each be read by another task): on
3.10 a model call that swallows the cancellation goes on.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

COUNTS_CANCELS = sys.version_info >= (3, 11)
"""Whether tasks count their cancellations (`asyncio.Task.cancelling`): Python 3.11+."""


def _none() -> int:
    return 0


def cancels_of(task: asyncio.Task[Any] | None) -> Callable[[], int]:
    """What counts the pending cancellations of ``task`` (always 0 where they are not counted,
    or with no task): read before and after an await, a higher count is a cancellation of
    the task that what it awaited swallowed."""
    # (`getattr`: Python 3.10's tasks have no `cancelling`)
    cancelling: Callable[[], int] | None = getattr(task, "cancelling", None)
    return _none if cancelling is None else cancelling


def check_swallowed(cancelling: Callable[[], int], before: int) -> None:
    """Raise the `CancelledError` of a run whose cancellation was swallowed: ``cancelling()``
    (see `cancels_of`) counts more than the ``before`` read before the await."""
    if cancelling() > before:
        import asyncio

        raise asyncio.CancelledError()


async def awaited_apart(work: asyncio.Future[Any]) -> None:
    """Wait for ``work`` (a task of its own) to end; a cancellation of the awaiting task
    (Python 3.10: see the module's docstring) cancels ``work``, waits for its end, and is
    raised, whatever ``work`` did with it."""
    import asyncio

    # A bare future woken by ``work``'s end: what `asyncio.wait` builds (a set, a
    # counter, a callback per future), without the rest, once per call.
    waiter = work.get_loop().create_future()

    def wake(_: object) -> None:
        if not waiter.done():
            waiter.set_result(None)

    work.add_done_callback(wake)
    try:
        await waiter
    except asyncio.CancelledError:
        work.remove_done_callback(wake)
        work.cancel()
        try:
            await asyncio.wait((work,))
        finally:
            if work.done() and not work.cancelled():
                work.exception()  # (read: not logged as never retrieved)
        raise
