"""The fault matrix's tool faults (reliability suite): each x {blocking, async, streamed} x every backend.

The cells are ``tool_fault_matrix``'s (see there); the transport faults are in
``test_fault_matrix.py``. An answered fault is an error result the model
reads and the run answers, its state replaying and surviving JSON; a cancel
(mid-tool, mid-call, mid-stream) reaches the caller with a state that resumes
to the answer without running again a tool that had returned. Every cell ends
with the file descriptors and threads the process had before it.
"""

from __future__ import annotations

import pytest
from fault_matrix import resources
from tool_fault_matrix import (
    ANSWERED,
    CANCELLED,
    CANCELLED_RUNS,
    run_answered,
    run_tool_cell,
    tool_cells,
)

CELLS = [
    pytest.param(backend, fault, mode, id=f"{backend}-{fault}-{mode}")
    for backend, fault, mode in tool_cells()
]


@pytest.mark.parametrize(("backend", "fault", "mode"), CELLS)
def test_tool_fault_is_read_by_the_model_or_cancels_cleanly(
    fault_url: str, backend: str, fault: str, mode: str
) -> None:
    """An answered fault is an error result the model reads, the state intact; a cancel reaches the caller; nothing leaks."""
    warm = "async" if mode == "streamed" else mode
    for kind in ("tool-raises", "tool-timeout"):  # a sync tool's worker, a blocking run's loop
        run_answered(fault_url, backend, kind, warm)
    before = resources()  # after a warm-up: what lives for the process exists already
    outcome = run_tool_cell(fault_url, backend, fault, mode)
    assert outcome.answer == "The sum is 5.", outcome
    assert outcome.replays, outcome
    if fault in CANCELLED:
        assert outcome.waited, outcome  # the run waited on the tool or on the server
        assert outcome.cancelled, outcome  # the CancelledError reached the caller with a state
        # Mid-stream, the answer's first text had arrived; before, none had.
        assert outcome.texts == (("The sum",) if fault == "cancel-mid-stream" else ()), outcome
        # Cancelled mid-tool, the tool runs again when resumed; mid-call or
        # mid-stream, it had returned and does not.
        assert outcome.runs == CANCELLED_RUNS[fault], outcome
    else:
        _, words, tool_runs = ANSWERED[fault]
        assert outcome.result is not None, outcome  # the model read an error result
        assert words in outcome.result, outcome.result
        assert len(outcome.runs) == tool_runs, outcome
    assert outcome.ok(fault)
    assert resources() == before
