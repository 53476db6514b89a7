"""The fault matrix (reliability suite): every fault x {blocking, async, streamed} x every backend.

Against ``fault_server.py`` in its own process (see ``fault_matrix``): the
documented error comes out with the run's state, resuming that state gives
the right answer without running the tool again, and the client process ends
each cell with the file descriptors and threads it started with.
"""

from __future__ import annotations

import pytest
from backends import OWNED
from fault_matrix import FAULTS, MODES, expected, resources, run_cell

CELLS = [
    pytest.param(backend, fault, mode, id=f"{backend}-{fault}-{mode}")
    for backend in OWNED
    for fault in FAULTS
    for mode in MODES
    if not (backend == "aiohttp" and mode == "blocking")  # aiohttp is async only
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
    if fault.startswith("429"):
        assert outcome.retry_after == (0.0 if fault == "429-date" else 0.01)
    assert resources() == before
