"""Run by `test_no_orphans` alone (no ``test_`` prefix: never collected otherwise).

Its one test starts a dev server and a worker process through the fixtures,
prints their pids, and blocks reading stdin until its pytest is killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from temporal_servers import DevServer, WorkerProcess


def test_holds_a_server_and_a_worker(
    server: DevServer, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    """Prints the dev server's and the worker's pids, then waits to be killed."""
    workers.append(WorkerProcess(server.address, "held", tmp_path))
    assert server.process is not None
    print("pids", server.process.pid, workers[0].process.pid, flush=True)
    assert sys.stdin.read() == ""  # the killing test never writes: this returns only if it died
