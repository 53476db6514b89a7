"""The Temporal tests' fixtures: dev servers and worker processes (`temporal_servers`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporal_servers import SUGGEST_AFTER, DevServer, WorkerProcess

# Temporal's workers and replayers fail a workflow activation that runs past 2 s of
# wall time ("potential deadlock"): a guard against blocking workflow code, and a
# clock these tests must not depend on. On the test command's two cores, nine suites
# and (on a fresh machine) the local model's build share the CPU, and a replay's
# activation restoring a run's state was seen to pass 2 s there: the replay then
# failed. TEMPORAL_DEBUG turns the guard off in every worker and
# replayer here, and in the worker processes the tests start (they inherit it); it
# also lets `breakpoint()` through the sandbox, which no workflow here calls.
os.environ["TEMPORAL_DEBUG"] = "1"


def _running(db: Path | None, *options: str) -> Iterator[DevServer]:
    dev = DevServer(db, *options)
    dev.start()
    yield dev
    if dev.process is not None:
        dev.kill()


@pytest.fixture(scope="session")
def server() -> Iterator[DevServer]:
    """A dev server shared by all the tests (each uses its own workflow ids and task queues)."""
    yield from _running(None)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[DevServer]:
    """A dev server of the test's own, which it may kill and restart (the database is a file)."""
    yield from _running(tmp_path / "temporal.db")


@pytest.fixture
def suggesting_server() -> Iterator[DevServer]:
    """A dev server of the test's own that suggests continuing as new after `SUGGEST_AFTER` events."""
    option = f"limit.historyCount.suggestContinueAsNew={SUGGEST_AFTER}"
    yield from _running(None, "--dynamic-config-value", option)


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """Worker processes started by a test (append to the list); all killed afterwards."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        if worker.process.poll() is None:
            worker.kill()
