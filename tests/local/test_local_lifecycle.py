"""No local server outlives the process that started it, however that process ends."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from child_processes import dies_with_this_process

from toolfold.local import LocalSetupError, _server, built_binary, installed_model

CHILD = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from toolfold.local import LocalModel

    server = LocalModel("smollm2").server()
    watchdog = server.pid
    (llama,) = Path(f"/proc/{watchdog}/task/{watchdog}/children").read_text().split()
    print(json.dumps({"watchdog": watchdog, "server": int(llama), "port": server.port}), flush=True)
    sys.stdin.readline()  # the test says how to end: SIGKILL, SIGINT, or a line
    if sys.argv[1] == "error":
        raise RuntimeError("the user's code failed")
    """
)

pytestmark = pytest.mark.local  # the real server: see scripts/check


def free_port() -> int:
    """A port nothing listens on right now (for a test's own use: it may be taken later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


PROXIED = textwrap.dedent(
    """
    import asyncio, json
    from toolfold import Agent
    from toolfold.local import LocalModel

    model = LocalModel("smollm2")
    agent = Agent(model, max_tokens=8)
    blocking = agent.run("Say hello.")
    awaited = asyncio.run(agent.arun("Say hello."))
    model.close()
    print(json.dumps([blocking.usage.requests, awaited.usage.requests]), flush=True)
    """
)


def test_the_local_model_is_reached_directly_whatever_proxy_the_environment_names() -> None:
    """Behind a proxy (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY set, NO_PROXY not naming 127.0.0.1), the
    local server is still reached: no proxy reaches this machine's loopback. Its health check
    and its model calls went to the proxy: the first run waited out the start timeout."""
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    environment = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    environment.update(
        dict.fromkeys(("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "http_proxy"), dead)
    )
    done = subprocess.run(
        [sys.executable, "-c", PROXIED],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [1, 1]


def _wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """Wait (without polling) until ``pid`` has exited; False if it is still alive then."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("ending", ["SIGKILL", "SIGTERM", "SIGINT", "error", "exit"])
def test_the_server_stops_with_its_process(ending: str) -> None:
    """Killed, interrupted, failing or exiting, the parent takes its server and watchdog along."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, ending],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdin is not None
    line = proc.stdout.readline()
    assert line, proc.communicate()[1]
    pids = json.loads(line)
    assert _running(pids["server"])
    assert httpx.get(f"http://127.0.0.1:{pids['port']}/health").status_code == 200
    if ending.startswith("SIG"):
        proc.send_signal(getattr(signal, ending))
        proc.communicate(timeout=30)
    else:
        proc.communicate("go\n", timeout=30)
    expected = {"SIGKILL": -9, "SIGTERM": -15, "SIGINT": -2, "error": 1, "exit": 0}[ending]
    assert proc.returncode == expected
    assert _wait_gone(pids["server"])
    assert _wait_gone(pids["watchdog"])
    assert not _running(pids["server"])


def test_cli_status_names_the_build_and_the_model() -> None:
    """``python -m toolfold.local status`` shows where the binary and the model are."""
    out = subprocess.run(
        [sys.executable, "-m", "toolfold.local", "status"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(built_binary()) in out
    assert str(installed_model("smollm2")) in out


def test_the_toolfold_command_has_the_same_subcommands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``toolfold local status`` is ``python -m toolfold.local status``."""
    from toolfold._cli import main

    assert main(["local", "status"]) == 0
    assert str(built_binary()) in capsys.readouterr().out


def test_cli_serve_runs_until_ctrl_c() -> None:
    """``python -m toolfold.local serve --port N`` serves until SIGINT, then stops cleanly."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolfold.local", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=dies_with_this_process(),  # its watchdog then stops llama-server
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"http://127.0.0.1:{port}/v1" in line, proc.communicate()[1]
        reply = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8},
            timeout=60,
        )
        assert reply.status_code == 200
        assert reply.json()["choices"][0]["message"]["content"]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
        assert proc.returncode == 0
    finally:  # a failed test leaves no server running, nor its pipes to a later test
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health")


def test_with_no_port_the_server_says_which_port_it_bound_whatever_its_log_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no port given, the real server binds one and ``start`` reads it from the server's
    "listening on" line, even where LLAMA_ARG_LOG_* would silence or reshape its log."""
    binary, model = built_binary(), installed_model("smollm2")
    assert binary is not None
    assert model is not None
    for name, value in {"VERBOSITY": "0", "JSONL": "1", "COLORS": "on", "PREFIX": "0"}.items():
        monkeypatch.setenv(f"LLAMA_ARG_LOG_{name}", value)
    monkeypatch.setattr(_server, "_START_TIMEOUT", 60.0)  # a silenced line: fail within the test
    server = _server.LocalServer(binary, model).start()
    try:
        assert server.port is not None
        assert server.log_path is not None
        assert server.log_path.name == f"llama-server-{server.port}.log"
        assert f"listening on http://127.0.0.1:{server.port}\n" in server.log_path.read_text()
        assert httpx.get(f"http://127.0.0.1:{server.port}/health").status_code == 200
    finally:
        server.stop()


def test_a_chosen_port_taken_after_the_check_fails_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A port the caller chose that another process binds after `start`'s check: the server's own
    bind failure is reported as that port being taken."""
    binary, model = built_binary(), installed_model("smollm2")
    assert binary is not None
    assert model is not None
    with socket.create_server(("127.0.0.1", 0)) as taken:
        taken_port = taken.getsockname()[1]
        monkeypatch.setattr(_server, "port_taken", lambda port: False)  # taken after the check
        server = _server.LocalServer(binary, model, port=taken_port)
        with pytest.raises(
            LocalSetupError, match=f"port {taken_port} of 127.0.0.1 is taken"
        ) as caught:
            server.start()
        assert _server._BIND_FAILED in str(caught.value)  # llama-server's own words, as expected
        assert not server.alive()


def test_a_port_the_caller_chose_is_not_changed() -> None:
    """A taken port given by the caller fails to start, naming the port."""
    binary, model = built_binary(), installed_model("smollm2")
    assert binary is not None
    assert model is not None
    with socket.create_server(("127.0.0.1", 0)) as taken:
        taken_port = taken.getsockname()[1]
        server = _server.LocalServer(binary, model, port=taken_port)
        with pytest.raises(LocalSetupError, match=f"port {taken_port} of 127.0.0.1 is taken"):
            server.start()
        assert server.port == taken_port
        assert not server.alive()
