"""A source's open run off the event loop learns that its own caller was cancelled."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from toolfold.runtime.drive._open import open_off_loop, when_open_cancelled


class _Waiting:
    """A source whose open waits, inside `when_open_cancelled`, until stopped or released."""

    def __init__(self, *, gate: threading.Event | None = None) -> None:
        self.gate = gate  # waited for before the watched wait, when given
        self.entered = threading.Event()
        self.waiting = threading.Event()
        self.stopped = threading.Event()
        self.woken = threading.Event()  # stopped or released
        self.opened = self.closed = False

    def stop(self) -> None:
        self.stopped.set()
        self.woken.set()

    def open(self) -> None:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait()
        with when_open_cancelled(self.stop):
            self.waiting.set()
            self.woken.wait()
        if self.stopped.is_set():
            raise RuntimeError("stopped while opening")
        self.opened = True

    def close(self) -> None:
        self.closed = True

    def tools(self) -> Sequence[Any]:
        return ()


def test_cancelling_the_caller_stops_only_its_own_open() -> None:
    """The cancelled caller's open is told to stop; another open running meanwhile is not."""
    cancelled, other = _Waiting(), _Waiting()

    async def main() -> None:
        first = asyncio.ensure_future(open_off_loop(cancelled))
        second = asyncio.ensure_future(open_off_loop(other))
        await asyncio.to_thread(cancelled.waiting.wait)
        await asyncio.to_thread(other.waiting.wait)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert cancelled.stopped.is_set()
        assert not other.stopped.is_set()
        other.woken.set()  # released
        await second

    asyncio.run(main())
    assert not cancelled.opened
    assert other.opened
    assert not other.closed


def test_a_caller_cancelled_before_the_open_watches_stops_it_at_once() -> None:
    """An open that starts watching after its caller was cancelled is told to stop at once."""
    gate = threading.Event()
    late = _Waiting(gate=gate)

    async def main() -> None:
        task = asyncio.ensure_future(open_off_loop(late))
        await asyncio.to_thread(late.entered.wait)  # the open runs, held at its gate
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.set()

    asyncio.run(main())  # returns once the worker thread ends: the stop came at once
    assert late.stopped.is_set()
    assert not late.opened


def test_a_blocking_open_is_never_told_to_stop() -> None:
    """Outside `open_off_loop` nothing is watched: the open runs to its end."""
    blocking = _Waiting()
    blocking.woken.set()  # released
    blocking.open()
    assert blocking.opened
    assert not blocking.stopped.is_set()
