"""Sync tool workers: timeouts count from the start, stuck tools do not starve later calls."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from toolfold import agenerate_text, generate_text, tool
from toolfold.runtime import _handoff
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@pytest.fixture
def one_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """A private pool of one worker; the event releases tools blocked during the test."""
    monkeypatch.setattr(_handoff, "MAX_WORKERS", 1)
    monkeypatch.setattr(_handoff, "_WORKERS", _handoff._Workers())
    release = threading.Event()
    yield release
    release.set()


def _tools(release: threading.Event) -> list[object]:
    @tool(timeout=0.05)
    def stuck() -> str:
        """Never returns in time."""
        release.wait()
        return "late"

    @tool(timeout=30)
    def quick() -> str:
        """Returns at once."""
        return "quick"

    return [stuck, quick]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stuck_tool_does_not_starve_later_calls(one_worker: threading.Event, mode: str) -> None:
    """After a sync tool times out on the only worker, later calls still run (a replacement worker)."""
    script = [[call("stuck", {}), call("quick", {})], call("quick", {}), "done"]
    tools = _tools(one_worker)
    if mode == "sync":
        response = generate_text(ScriptedModel(script), "go", tools=tools)
    else:
        response = asyncio.run(agenerate_text(ScriptedModel(script), "go", tools=tools))
    first, second = response.steps[0].tool_results, response.steps[1].tool_results
    assert "timed out after 0.05 s" in first[0].content
    assert (first[1].content, first[1].is_error) == ("quick", False)
    assert (second[0].content, second[0].is_error) == ("quick", False)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_timeout_counts_from_the_start_not_the_queue(
    one_worker: threading.Event, mode: str
) -> None:
    """A call queued behind a busy worker longer than its timeout still runs and succeeds."""
    started = threading.Event()

    @tool
    def busy() -> str:
        """Holds the only worker until the timed call has waited past its timeout."""
        started.set()
        one_worker.wait(0.3)
        return "busy"

    @tool(timeout=0.1)
    def timed() -> str:
        """Fast once it runs."""
        return "timed"

    script = [[call("busy", {}), call("timed", {})], "done"]
    if mode == "sync":
        response = generate_text(ScriptedModel(script), "go", tools=[busy, timed])
    else:
        response = asyncio.run(agenerate_text(ScriptedModel(script), "go", tools=[busy, timed]))
    results = response.steps[0].tool_results
    assert started.is_set()
    assert [(r.content, r.is_error) for r in results] == [("busy", False), ("timed", False)]
