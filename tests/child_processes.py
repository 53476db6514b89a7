"""Tying the helper processes the tests start (servers, workers, held commands) to pytest's life.

A fixture's teardown stops what it started, but a pytest ended by a signal
(SIGTERM, SIGKILL, a CI timeout) runs no teardown: a Temporal dev server, a
worker, an HTTP server or a command held at a gate ran on, holding its ports
and memory, some forever. Started with `dies_with_this_process` as their
``preexec_fn``, the kernel kills them when pytest ends (``PR_SET_PDEATHSIG``).

On the path as a top-level module: pytest puts ``tests/`` there when it imports
``tests/conftest.py`` (``tests/`` has no ``__init__.py``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
# Looked up here: the child between fork and exec only calls it.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _die_with(parent: int, then: Callable[[], object] | None) -> None:  # pragma: no cover
    """In the forked child: SIGKILL it when ``parent`` ends, or at once if it already has."""
    assert _PRCTL is not None
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # it ended between the fork and the prctl
        os._exit(1)
    if then is not None:
        then()


def dies_with_this_process(
    then: Callable[[], object] | None = None,
) -> Callable[[], object] | None:
    """A ``preexec_fn`` (running ``then`` too, if given) killing the child when this process ends.

    The kernel ties ``PR_SET_PDEATHSIG`` to the thread that started the child:
    started from another thread, the child would die with that thread. So the
    start must come from the main thread, where pytest runs fixtures and tests.
    Off Linux the child is not tied (and ``then`` alone is returned).
    """
    assert threading.current_thread() is threading.main_thread(), (
        "start test processes from the main thread: PR_SET_PDEATHSIG kills them when "
        "the thread that started them ends"
    )
    if _PRCTL is None:
        return then
    return functools.partial(_die_with, os.getpid(), then)


def in_forked_child(call: Callable[[], object]) -> dict[str, object]:
    """``call()`` run in a forked child process: ``{"value": what it returned}`` (JSON),
    ``{"raised": repr of what it raised}``, or ``{"died": ...}`` when the child gave no
    answer.

    The child always leaves by ``os._exit`` and is killed by SIGALRM after 30 s at most
    (a safety limit: a child that hangs fails the test instead of hanging it).
    """
    import json
    import warnings

    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # (3.12+ warns of forking a process with threads; the child uses none of them)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # (the kernel ends it: no handler)
            signal.alarm(30)
            try:
                outcome: dict[str, object] = {"value": call()}
            except BaseException as exc:
                outcome = {"raised": repr(exc)}
            os.write(write_end, json.dumps(outcome).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    answer: dict[str, object] = (
        json.loads(data) if data else {"died": "no answer (hung, killed by SIGALRM)"}
    )
    return answer
