"""Many durable runs at once: 200 concurrent agent workflows against one worker, all right, each tool once.

It prints the runs/s it saw (never asserted: ``bench/bench_temporal.py`` measures the speed). The
engine does most of the work (about 1,400 round trips to the dev server): on a loaded
2-core machine it took 90 s, so its hang guard is longer than the suite's 120 s, and
scripts/check runs it on the main Python only, as the crash tests.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import temporal_app
from temporal_servers import DevServer
from temporalio.client import Client
from temporalio.worker import Worker

from toolfold.integrations.temporal import ToolfoldPlugin
from toolfold.runtime import Response
from toolfold.runtime.core._events import ToolReturned

# The engine's throughput is the subject: scripts/check runs this on its first Python only.
pytestmark = pytest.mark.once

RUNS = 200


@pytest.mark.timeout(600)
def test_200_concurrent_runs_all_finish_right_with_each_tool_committed_once(
    server: DevServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """200 workflows started at once on one worker all give their own answer; every tool ran and committed once."""
    monkeypatch.setattr(temporal_app, "LOG_DIR", tmp_path)
    prefix = f"many-{uuid.uuid4().hex[:8]}"

    async def go() -> list[Response]:
        client = await Client.connect(server.address, plugins=[ToolfoldPlugin(temporal_app.AGENTS)])
        queue = f"q-{prefix}"
        async with Worker(client, task_queue=queue, max_concurrent_activities=RUNS):
            handles = await asyncio.gather(
                *(
                    temporal_app.many.start(
                        client, f"run {i}", id=f"{prefix}-{i}", task_queue=queue
                    )
                    for i in range(RUNS)
                )
            )
            return list(await asyncio.gather(*(handle.result() for handle in handles)))

    began = time.perf_counter()
    responses = asyncio.run(go())
    elapsed = time.perf_counter() - began
    with capsys.disabled():  # shown in the test output (scripts/check), as the issue asks
        print(f"\n{RUNS} concurrent durable runs on one worker: {RUNS / elapsed:.1f} runs/s")
    assert [r.text for r in responses] == [f"recorded: RUN {i}" for i in range(RUNS)]
    for i, response in enumerate(responses):
        committed = [e for e in response.state.log if isinstance(e, ToolReturned)]
        assert [e.content for e in committed] == [f"RUN {i}"]
        assert response.state.run_id == f"{prefix}-{i}"
    lines = (tmp_path / "tools.log").read_text(encoding="utf-8").splitlines()
    expected = {f"{kind} {prefix}-{i}:1:0": 1 for i in range(RUNS) for kind in ("start", "done")}
    assert Counter(lines) == expected
