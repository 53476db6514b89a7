"""Ctrl-C in the runtime's tests: a real SIGINT, the state it leaves, the threads it
leaves running (shared by test_interrupt_waits.py and test_cancel_sub_runs.py)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from toolfold import RunState, state_of
from toolfold.runtime.drive._shells import interrupt_waits


def ctrl_c() -> None:
    """As a terminal's Ctrl-C: SIGINT to the main thread, where Python raises it."""
    signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)


def interrupted(run: Callable[[], object], tell: Callable[[], None]) -> BaseException:
    """The `KeyboardInterrupt` that ``run`` raises (it must), ``tell`` told of any wait
    for the calls still running (`interrupt_waits`)."""
    with pytest.raises(KeyboardInterrupt) as caught, interrupt_waits(tell):
        run()
    return caught.value


def thrown_into(events: Iterator[Any]) -> BaseException:
    """The `KeyboardInterrupt` a blocking stream raises once one is thrown into it where
    it waits (where Ctrl-C reaches a blocking stream)."""
    with pytest.raises(KeyboardInterrupt) as caught:
        events.throw(KeyboardInterrupt())
    return caught.value


def state_on(error: BaseException) -> RunState:
    """The run's state that the interruption ``error`` carries (it must carry one)."""
    state = state_of(error)
    assert isinstance(state, RunState), f"no state on {error!r}"
    return state


def saved_state_on(error: BaseException) -> RunState:
    """`state_on`, through JSON: as a run file saved from it holds it."""
    return RunState.from_json(state_on(error).to_json())


def join_step_threads() -> None:
    """Wait (30 s at most each) for the threads of blocking rounds (a stream's round, a cut
    sub-agent's) still going on: none is left running into the next test."""
    for thread in threading.enumerate():
        if thread.name == "toolfold-step":
            thread.join(30)
