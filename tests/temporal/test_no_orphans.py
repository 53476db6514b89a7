"""A pytest run ended by a signal leaves no Temporal dev server or worker process running."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.once

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_pytest_takes_its_dev_server_and_workers_along(signum: int) -> None:
    """pytest killed mid-test (no fixture teardown runs) leaves its dev server and worker to die with it."""
    pytest_run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-s", "-W", "error", str(HERE / "held_servers.py")],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert pytest_run.stdout is not None
    said = next((line for line in pytest_run.stdout if line.startswith("pids ")), None)
    assert said is not None, f"the held test did not start (exit {pytest_run.wait()})"
    handles = [os.pidfd_open(int(pid)) for pid in said.split()[1:]]
    try:
        os.kill(pytest_run.pid, signum)
        assert pytest_run.wait() == -signum
        waiting = set(handles)
        while waiting:  # a pidfd turns readable when its process exits; 60 s bounds a failure
            ended, _, _ = select.select(list(waiting), [], [], 60)
            assert ended, "a server or worker outlived its pytest"
            waiting -= set(ended)
    finally:
        for handle in handles:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(handle, signal.SIGKILL)  # (what the old code left)
            os.close(handle)
        pytest_run.stdout.close()
        assert pytest_run.stdin is not None
        pytest_run.stdin.close()
