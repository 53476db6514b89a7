"""The server's port and log, with a stand-in for llama-server (no build, no model)."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolfold.local import CACHE_ENV, SERVER_ENV, LocalSetupError, _server
from toolfold.local._server import LocalServer, free_port

# Binds --port as llama-server does (SO_REUSEADDR), says so in its log and answers
# /health; on a taken port it logs llama-server's own message and exits 1.
FAKE_SERVER = f"""#!{sys.executable}
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{{"status": "ok"}}')

    def log_message(self, *args):
        pass

try:
    server = http.server.HTTPServer(("127.0.0.1", port), Health)
except OSError:
    print(f"main: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {{port}}", flush=True)
    sys.exit(1)
print("listening", flush=True)
server.serve_forever()
"""


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A stand-in llama-server and a GGUF file for it, with a cache folder of the test's own."""
    binary = tmp_path / "llama-server"
    binary.write_text(FAKE_SERVER)
    binary.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    return binary, model


@pytest.fixture
def answering() -> Iterator[int]:
    """A port another process's server holds, answering /health with 200 as a llama-server would."""

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_taken_port_the_caller_chose_is_an_error_though_its_owner_answers_health(
    fake: tuple[Path, Path], answering: int
) -> None:
    """The owner's /health answer is not taken for the server's: start fails naming the port,
    and starts nothing."""
    server = LocalServer(*fake, port=answering)
    before = server.log_path.read_bytes() if server.log_path.exists() else None
    with pytest.raises(LocalSetupError, match=f"port {answering} of 127.0.0.1 is taken"):
        server.start()
    assert server.pid is None
    after = server.log_path.read_bytes() if server.log_path.exists() else None
    assert after == before  # no log opened (an earlier run's, for this port, is left whole)


def test_a_second_server_on_a_running_ones_port_fails_and_leaves_its_log(
    fake: tuple[Path, Path],
) -> None:
    """A second server asked for the first one's port fails; the first runs on, its log whole."""
    first = LocalServer(*fake).start()
    try:
        second = LocalServer(*fake, port=first.port)
        with pytest.raises(LocalSetupError, match="is taken"):
            second.start()
        assert first.alive()
        assert "listening" in first.log_path.read_text()
        assert second.pid is None  # nothing started, nothing written over
    finally:
        first.stop()


def test_a_picked_port_found_taken_is_picked_again(
    fake: tuple[Path, Path], answering: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A port picked here that another server holds by the start is replaced, not served by it."""
    picks = iter([answering])
    monkeypatch.setattr(_server, "free_port", lambda: next(picks, None) or free_port())
    server = LocalServer(*fake)
    assert server.port == answering
    server.start()
    try:
        assert server.port != answering
        assert server.alive()
        assert "listening" in server.log_path.read_text()
    finally:
        server.stop()


def test_cli_serve_on_a_taken_port_is_an_error(fake: tuple[Path, Path], answering: int) -> None:
    """``serve --port N`` with N taken exits 1 saying so, and never says it is serving."""
    binary, model = fake
    environment = {**os.environ, SERVER_ENV: str(binary)}
    done = subprocess.run(
        [sys.executable, "-m", "toolfold.local", "serve", str(model), "--port", str(answering)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 1
    assert f"port {answering} of 127.0.0.1 is taken" in done.stderr
    assert "serving" not in done.stdout


def test_port_taken_sees_a_listening_socket() -> None:
    """`port_taken`: a listening socket's port is taken; once it closes, the port is free."""
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        assert _server.port_taken(port)
    assert not _server.port_taken(port)
