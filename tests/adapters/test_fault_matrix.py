"""The fault matrix (reliability suite): every fault x {blocking, async, streamed} x every backend.

Against ``fault_server.py`` in its own process (see ``fault_matrix``): the
documented error comes out with the run's state, resuming that state gives
the right answer without running the tool again, the server read each request
once (``reset-before``: the 2nd never), and the client process ends each cell
with the file descriptors and threads it started with. Beside the matrix, a
connection the server closed while idle: alone, the pool replaces it and the
call goes on; with the server refusing new connections, the request is never
written, and the retry policy retries it.
"""

from __future__ import annotations

import logging

import pytest
from backends import OWNED
from fault_matrix import FAULTS, MODES, expected, expected_requests, resources, run_cell

from toolfold import ProviderConnectionError
from toolfold.adapters import RetryPolicy

CELLS = [
    pytest.param(backend, fault, mode, id=f"{backend}-{fault}-{mode}")
    for backend in OWNED
    for fault in FAULTS
    for mode in MODES
    if not (backend == "aiohttp" and mode == "blocking")  # aiohttp is async only
]
PATHS = [
    pytest.param(backend, mode, id=f"{backend}-{mode}")
    for backend in OWNED
    for mode in MODES
    if not (backend == "aiohttp" and mode == "blocking")
]


@pytest.mark.parametrize(("backend", "fault", "mode"), CELLS)
def test_fault_gives_the_documented_error_and_resumes(
    fault_url: str, backend: str, fault: str, mode: str
) -> None:
    """The fault raises its documented error with a state that resumes, tool run once, no leak."""
    run_cell(fault_url, backend, "none", mode)  # warm up what lives for the process
    before = resources()
    outcome = run_cell(fault_url, backend, fault, mode)
    assert outcome.error is not None
    assert issubclass(outcome.error, expected(fault, mode))
    assert outcome.has_state
    assert outcome.resumed == "The sum is 5."
    assert outcome.tool_runs == 1
    assert outcome.received == expected_requests(fault)  # each request read once, or never
    if fault.startswith("429"):
        assert outcome.retry_after == (0.0 if fault == "429-date" else 0.01)
    assert resources() == before


@pytest.mark.parametrize(("backend", "mode"), PATHS)
def test_a_connection_closed_while_idle_is_replaced_before_the_request_is_written(
    fault_url: str, backend: str, mode: str
) -> None:
    """The server resets the pool's idle connection: the next request goes on a new one, no error."""
    run_cell(fault_url, backend, "none", mode)
    before = resources()
    outcome = run_cell(fault_url, backend, "reset-idle", mode)
    assert outcome.error is None
    assert outcome.answer == "The sum is 5."
    assert outcome.tool_runs == 1
    assert outcome.received == 2  # the request was written once, on the new connection
    assert resources() == before


@pytest.mark.parametrize(("backend", "mode"), PATHS)
def test_a_request_never_written_is_retried_and_never_reaches_the_server(
    fault_url: str, backend: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``reset-before`` with retries on: retried (refused again), the state resumes, no request read."""
    run_cell(fault_url, backend, "none", mode)
    before = resources()
    caplog.set_level(logging.INFO, logger="toolfold.http")
    retry = RetryPolicy(max_retries=2, initial_delay=0.0, max_delay=0.0)
    outcome = run_cell(fault_url, backend, "reset-before", mode, retry=retry)
    retried = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retrying")]
    assert len(retried) == 2, retried
    assert all("cannot reach" in line for line in retried), retried  # a connection error
    assert outcome.error is ProviderConnectionError
    assert outcome.resumed == "The sum is 5."
    assert outcome.tool_runs == 1
    assert outcome.received == 1  # the 2nd request reached the server neither time
    assert resources() == before
