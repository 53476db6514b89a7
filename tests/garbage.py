"""What the tests wait to be collected: a worker thread lets go of a call's future (holding
the result, and its event loop) and its loop's inbox at its loop's end, a moment after it
handed the result on (its context, function and arguments just before); on a loaded
machine the test's ``gc.collect()`` came first."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterable
from typing import Any


def still_alive(refs: Iterable[weakref.ref[Any]], seconds: float = 30.0) -> list[weakref.ref[Any]]:
    """The references of ``refs`` whose objects are still alive after collections, waited
    for (the condition, up to ``seconds``), not raced: [] once all are collected."""
    refs = list(refs)
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()
        alive = [ref for ref in refs if ref() is not None]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.001)
