"""The fault matrix: each fault x {blocking, async, streamed} x each backend, through the public API.

Shared by ``test_fault_matrix.py`` (which asserts every cell) and
``bench/bench_faults.py`` (which prints the table). A cell runs an agent whose
first model call asks for ``add(2, 3)`` and whose second meets the fault (see
``fault_server``), with retries off; the documented error must come out
carrying the run's state, and resuming that state (the fault gone) must give
the right answer without running the tool again.

Each cell also counts the requests of the run the server read: 2 for every
fault (each request sent once: retries are off) but ``reset-before``, whose
2nd request never reaches the server.

``reset-before`` fails before the request is written, with no race: the run
talks to a listener of its own (a door of ``fault_server``), and its tool,
which runs between the 1st and the 2nd model request, has the server reset
the connection the 1st request left idle in the pool and stop listening,
and returns once that is done. The 2nd request finds its connection closed
(the pool drops it before writing) and a new one refused: a
`ProviderConnectionError` of a request never written, which the retry policy
may retry (`run_cell`'s ``retry``: retried, and refused again). ``reset-idle``,
not in the table, resets the idle connection only: the pool opens a new one
and the call goes on, no error, each request read once.

Only the timeout faults run with short timeouts (`timeouts_for`); the other
cells, and every resume, allow 30 s per read, so a loaded machine cannot turn
their answer into a timeout. (With 0.5 s everywhere, the first ``reset-before``,
a reset after the server had read the request's head, flaked: a 2nd request
timed out before the threaded server read it, and the server, counting by
arrival, gave the fault to the resume instead.)
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import http.client
import json
import os
import subprocess
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from child_processes import dies_with_this_process

import toolfold
from toolfold import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    StreamError,
)
from toolfold.adapters import Timeouts

HERE = Path(__file__).resolve().parent
KEY = "sk-fault-matrix-0123456789"

FAULTS = (
    "429-seconds",
    "429-ms",
    "429-date",
    "500",
    "reset-before",
    "reset-after",
    "read-timeout",
    "total-timeout",
    "cut-stream",
    "inband-error",
    "malformed-json",
)
MODES = ("blocking", "async", "streamed")
#: Faults on the run's own listener (see the module): the matrix's, and one that is no error.
DOOR_FAULTS = ("reset-before", "reset-idle")

#: The documented error of each fault, blocking (and async) / streamed.
EXPECTED: dict[str, tuple[type[ProviderError], type[ProviderError]]] = {
    "429-seconds": (RateLimitError, RateLimitError),
    "429-ms": (RateLimitError, RateLimitError),
    "429-date": (RateLimitError, RateLimitError),
    "500": (ServerError, ServerError),
    "reset-before": (ProviderConnectionError, ProviderConnectionError),
    "reset-after": (ProviderConnectionError, ProviderConnectionError),
    "read-timeout": (ProviderTimeoutError, ProviderTimeoutError),
    "total-timeout": (ProviderTimeoutError, ProviderTimeoutError),
    "cut-stream": (ProviderConnectionError, StreamError),
    "inband-error": (ProviderError, StreamError),
    "malformed-json": (ProviderError, ProviderError),
}


def expected_requests(fault: str) -> int:
    """How many requests of a cell's run the server reads (retries off): each sent once."""
    return 1 if fault == "reset-before" else 2


def expected(fault: str, mode: str) -> type[ProviderError]:
    """The error class a fault must raise in a mode."""
    blocking, streamed = EXPECTED[fault]
    return streamed if mode == "streamed" else blocking


def resources() -> tuple[int, int]:
    """Open file descriptors and live threads of this process (garbage collected first)."""
    gc.collect()
    return len(os.listdir("/proc/self/fd")), threading.active_count()


def fault_server() -> contextlib.AbstractContextManager[str]:
    """Start ``fault_server.py`` in its own process; yield its base URL."""
    return server_process("fault_server.py")


@contextlib.contextmanager
def server_process(script: str) -> Iterator[str]:
    """Start ``script`` (next to this file; it prints ``READY <port>``) in its own process; yield its base URL."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / script)],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=dies_with_this_process(),
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("READY "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


@attrs.frozen
class Outcome:
    """What one cell gave."""

    error: type[BaseException] | None
    has_state: bool
    resumed: str | None
    tool_runs: int
    retry_after: float | None = None
    received: int | None = None  # the run's requests the server read (`run_cell` sets it)
    answer: str | None = None  # the call's answer, when it raised nothing

    def ok(self, fault: str, mode: str) -> bool:
        """Whether this is what the docs promise for the cell."""
        want = expected(fault, mode)
        return (
            self.error is not None
            and issubclass(self.error, want)
            and self.has_state
            and self.resumed == "The sum is 5."
            and self.tool_runs == 1
            and self.received == expected_requests(fault)
        )

    def cell(self) -> str:
        """A short text for the printed table: the error, whether it resumed, the requests read."""
        name = self.error.__name__ if self.error else "no error"
        name = SHORT_NAMES.get(name, name)
        resumed = "resumed" if self.resumed == "The sum is 5." else "NOT resumed"
        return f"{name}, {resumed}, {self.received} read"


#: Shorter names of errors in the printed table.
SHORT_NAMES = {
    "ProviderConnectionError": "ConnectionError",
    "ProviderTimeoutError": "TimeoutError",
    "MalformedResponseError": "Malformed...",
}


#: Timeouts that only an injected fault (or a stall of many seconds) can reach.
GENEROUS = Timeouts(connect=30.0, read=30.0, write=30.0, pool=30.0, total=60.0)


def timeouts_for(fault: str) -> Timeouts:
    """The cell's timeouts: short only where the fault is a timeout."""
    if fault == "read-timeout":
        return Timeouts(connect=30.0, read=0.5, write=30.0, pool=30.0, total=None)
    if fault == "total-timeout":
        return Timeouts(connect=30.0, read=30.0, write=30.0, pool=30.0, total=1.5)
    return GENEROUS


def control(url: str, what: str, run: str | None = None) -> Any:
    """POST to the fault server's control path ``what`` (see ``fault_server``); its JSON answer.

    With `http.client`, which reads no proxy settings: the server is on 127.0.0.1.
    """
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
    try:
        connection.request("POST", f"{parts.path}/faults/{what}", headers={"x-run": run or ""})
        return json.loads(connection.getresponse().read())
    finally:
        connection.close()


def run_cell(url: str, backend: str, fault: str, mode: str, retry: Any = 0) -> Outcome:
    """Run one cell of the matrix (see the module docstring); ``retry``: the model's policy."""
    runs: list[int] = []
    door = control(url, "door")["port"] if fault in DOOR_FAULTS else None
    main_url = url if door is None else f"http://127.0.0.1:{door}/v1"

    @toolfold.tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        runs.append(a + b)
        if door is not None:  # the server resets the run's idle connection before this returns
            control(url, f"door/{door}/{'shut' if fault == 'reset-before' else 'reset'}")
        return a + b

    run = uuid.uuid4().hex

    def model(base_url: str, timeout: Timeouts, phase: str, retry: Any) -> Any:
        headers = {"x-fault": fault, "x-run": run, "x-phase": phase}
        return toolfold.model(
            "openai:m", base_url=base_url, api_key=KEY, http=backend, retry=retry,
            timeout=timeout, headers=headers,
        )  # fmt: skip

    models = (
        model(main_url, timeouts_for(fault), "main", retry),
        model(url, GENEROUS, "resume", 0),
    )
    try:
        if mode == "blocking":
            outcome = _blocking(models, add, runs)
        else:
            outcome = asyncio.run(_async(models, add, runs, streamed=mode == "streamed"))
    finally:
        for made in models:
            made.close()
    return attrs.evolve(outcome, received=control(url, "count", run)["requests"])


def _blocking(models: tuple[Any, Any], add: Any, runs: list[int]) -> Outcome:
    model, resume_model = models
    try:
        response = toolfold.generate_text(model, "add 2 and 3", tools=[add])
    except ProviderError as err:
        state = getattr(err, "state", None)
        resumed = toolfold.resume(state, model=resume_model, tools=[add]).text if state else None
        return Outcome(
            type(err), state is not None, resumed, len(runs), getattr(err, "retry_after", None)
        )
    return Outcome(None, False, None, len(runs), answer=response.text)


async def _async(models: tuple[Any, Any], add: Any, runs: list[int], *, streamed: bool) -> Outcome:
    model, resume_model = models
    try:
        if streamed:
            stream = toolfold.Agent(model, tools=[add]).stream("add 2 and 3")
            async for _ in stream:
                pass
            text = stream.response.text
        else:
            text = (await toolfold.agenerate_text(model, "add 2 and 3", tools=[add])).text
    except ProviderError as err:
        state = getattr(err, "state", None)
        resumed = None
        if state is not None:
            resumed = (await toolfold.aresume(state, model=resume_model, tools=[add])).text
        return Outcome(
            type(err), state is not None, resumed, len(runs), getattr(err, "retry_after", None)
        )
    finally:
        for made in models:
            await made.aclose()
    return Outcome(None, False, None, len(runs), answer=text)
