"""Start, share and stop ``llama-server`` processes on 127.0.0.1.

One server per (binary, model) per process, started on first use and reused by
every later run; all of them stop when the process exits. Each runs under a
small watchdog (``_watchdog.py``) that stops it when this process dies, even by
SIGKILL, so no server outlives its user.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
import time
from importlib import resources
from pathlib import Path
from typing import IO

import httpx

from toolfold.local._paths import LocalSetupError, cache_dir

#: toolfold's ChatML template with tools (SmolLM2's own ignores them).
TEMPLATE = "chatml-tools.jinja"
#: Context tokens per server: the tools, the worked example and a few turns fit.
CONTEXT_TOKENS = 4096
_START_TIMEOUT = 120.0
#: What llama-server logs when its port is taken (``server.cpp``), and how many
#: ports ``start`` tries when it picked the port itself.
_BIND_FAILED = "couldn't bind HTTP server socket"
_BIND_ATTEMPTS = 5
#: What ``start`` says when something already holds the port.
_PORT_TAKEN = "is taken"
#: Compute threads: llama.cpp's workers spin while they wait, so on a small or
#: busy machine one thread per spare core is much faster than one per core.
THREADS = max(1, min(4, (os.cpu_count() or 2) - 1))


class LocalServer:
    """One running ``llama-server`` (behind its watchdog) on 127.0.0.1.

    Attributes:
        binary: The ``llama-server`` executable.
        model: The GGUF file it serves.
        port: The port it listens on.
        log_path: Where its output goes.
    """

    def __init__(self, binary: Path, model: Path, *, port: int | None = None) -> None:
        self.binary = binary
        self.model = model
        self.port = port or free_port()
        # A port picked here may be taken between the pick and the server's bind
        # (another process asking the OS for a free port at the same moment):
        # then ``start`` picks another. A port the caller chose is kept.
        self._picked = port is None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The process id of the watchdog that owns the server (None before start)."""
        return self._process.pid if self._process else None

    def command(self) -> list[str]:
        """The ``llama-server`` command line."""
        template = resources.files("toolfold.local").joinpath(TEMPLATE)
        return [
            str(self.binary),
            "--model",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--jinja",
            "--chat-template-file",
            str(template),
            "--ctx-size",
            str(CONTEXT_TOKENS),
            "--parallel",
            "1",
            "--threads",
            str(THREADS),
            "--no-warmup",  # the first request warms it up; starting stays under a second
        ]

    def alive(self) -> bool:
        """The server process is running."""
        return self._process is not None and self._process.poll() is None

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the server to exit; True if it has."""
        if self._process is None:
            return True
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    @property
    def log_path(self) -> Path:
        """Where the server's output goes (one file per port: `start` checks the port is
        free before it opens the file, so it does not write over a live server's log, and
        the logs do not pile up)."""
        return cache_dir() / "logs" / f"llama-server-{self.port}.log"

    def start(self) -> LocalServer:
        """Start the server and wait until its health check answers.

        When the port was picked here and another process took it before the
        server could bind it, the server starts again on a new port (up to
        ``_BIND_ATTEMPTS`` times).

        Raises:
            LocalSetupError: The port the caller chose is taken, or the server
                exited or never became healthy (with its log's tail).
        """
        for attempt in range(1, _BIND_ATTEMPTS + 1):
            try:
                return self._start_once()
            except LocalSetupError as exc:
                # A taken port, or a bind failure in the server's log (which the message ends with).
                taken = _PORT_TAKEN in str(exc) or _BIND_FAILED in str(exc)
                if not (self._picked and taken) or attempt == _BIND_ATTEMPTS:
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self) -> LocalServer:
        # Whatever holds the port would answer the health check in the server's
        # place (and the server, failing to bind, exit soon after): refused here,
        # before its log is opened.
        if port_taken(self.port):
            raise LocalSetupError(
                f"port {self.port} of 127.0.0.1 {_PORT_TAKEN}: another process listens "
                "on it; pass a free port, or none to get one"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        watchdog = Path(__file__).with_name("_watchdog.py")
        self._process = subprocess.Popen(
            [sys.executable, str(watchdog), *self.command()],
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches this process, which stops the server
        )
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        url = f"http://127.0.0.1:{self.port}/health"
        # Directly, whatever proxy the environment names: none reaches this loopback.
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                if not self.alive():
                    raise LocalSetupError(
                        f"llama-server exited while starting:\n{self._log_tail()}"
                    )
                try:
                    answered = client.get(url).status_code == 200
                except httpx.TransportError:
                    answered = False  # not listening yet
                # (an answer while its own process is gone came from another server)
                if answered and self.alive():
                    return
                if time.monotonic() > deadline:
                    raise LocalSetupError(
                        f"llama-server was not healthy after {_START_TIMEOUT:g}s:\n"
                        f"{self._log_tail()}"
                    )
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server (closing the watchdog's stdin) and wait for it; idempotent."""
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()  # the server has PR_SET_PDEATHSIG and follows
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def _log_tail(self, lines: int = 20) -> str:
        if self._log is not None:
            self._log.flush()
        text = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        return "\n".join(text[-lines:]) + f"\n(full log: {self.log_path})"

    def __repr__(self) -> str:
        state = "running" if self.alive() else "stopped"
        return f"LocalServer({self.model.name!r}, {self.base_url!r}, {state})"


def port_taken(port: int) -> bool:
    """Whether a socket on 127.0.0.1 holds ``port``: one listening there, or bound.

    Bound with ``SO_REUSEADDR``, as llama-server binds: a port a closed
    connection left in TIME_WAIT is free to it.
    """
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


_SERVERS: dict[tuple[Path, Path], LocalServer] = {}
_LOCK = threading.Lock()


def shared_server(binary: Path, model: Path) -> LocalServer:
    """The running server for ``(binary, model)`` in this process, started if needed."""
    with _LOCK:
        server = _SERVERS.get((binary, model))
        if server is None or not server.alive():
            server = LocalServer(binary, model).start()
            _SERVERS[binary, model] = server
        return server


def stop_all() -> None:
    """Stop every server this process started (runs at exit)."""
    with _LOCK:
        servers = list(_SERVERS.values())
        _SERVERS.clear()
    for server in servers:
        server.stop()


def running_servers() -> list[LocalServer]:
    """The servers this process is running."""
    with _LOCK:
        return [s for s in _SERVERS.values() if s.alive()]


atexit.register(stop_all)  # also reached on Ctrl-C and on an uncaught error
