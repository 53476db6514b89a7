"""A local server that dies, fails to start or inherits the user's environment, with a stand-in
for llama-server that answers chat completions (no build, no model)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import shutil
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from toolfold import (
    ContextWindowExceededError,
    Message,
    ModelRequest,
    ProviderConnectionError,
    ProviderError,
)
from toolfold.local import CACHE_ENV, SERVER_ENV, LocalModel, LocalSetupError, _server
from toolfold.local._server import LocalServer
from toolfold.runtime.core._stream import StreamEvent

# Logs "listening on" once it holds its port, as llama-server does; /health answers with the
# LLAMA_* variables of its environment; each POST is appended to $FAKE_REQUESTS first. The
# model file says what the first POST of all does: "ok" answers; "exit" answers, then stops
# the watchdog (SIGSTOP: its exit, which follows the server's, is held back) and exits; "cut"
# stops the watchdog and exits without an answer (the request was read: it reached the server).
# "noload": it says it failed to load the model and exits 1; "badarg": it refuses a
# setting and exits 1. "die": every POST is read, then the server exits 1 (its watchdog following). "long":
# every POST is answered 400 as a prompt past the context size. "reset": every POST is read, then its connection shut without an answer, the server living on.
# "linger": as "cut", but a child of the first server (its pid in $FAKE_REQUESTS.linger) holds
# the server's pipes until killed: the server's exit pipe stays open after its exit.
FAKE_SERVER = f"""#!{sys.executable}
import http.server, json, os, signal, socket, stat, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
with open(sys.argv[sys.argv.index("--model") + 1], "rb") as file:
    model = file.read()
requests = os.environ["FAKE_REQUESTS"]
if model == b"noload":  # llama-server's words for a model file it cannot read
    print("gguf_init_from_file_impl: failed to read magic", flush=True)
    print("srv    load_model: failed to load model, 'noload.gguf'", flush=True)
    sys.exit(1)
if model == b"badarg":  # a setting it refuses (LLAMA_ARG_CTX_SIZE=abc)
    print("error while handling environment variable LLAMA_ARG_CTX_SIZE: stoi", flush=True)
    sys.exit(1)

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_GET(self):
        self._send({{"status": "ok", "env": sorted(k for k in os.environ if k.startswith("LLAMA"))}})

    def do_POST(self):
        stream = json.loads(self.rfile.read(int(self.headers["Content-Length"]))).get("stream")
        with open(requests, "a") as log:
            log.write(f"{{os.getpid()}}\\n")
        with open(requests) as log:
            first = len(log.read().split()) == 1
        if model == b"reset":
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if model == b"die":
            os._exit(1)
        if model == b"long":  # llama-server's answer to a prompt past its context
            data = json.dumps({{"error": {{"code": 400, "type": "exceed_context_size_error",
                "message": "request (5012 tokens) exceeds the available context size (4096 "
                "tokens), try increasing it"}}}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if first and model in (b"cut", b"linger"):
            os.kill(os.getppid(), signal.SIGSTOP)
            os._exit(1)
        usage = {{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        if stream:
            chunk = {{"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
                     "choices": [{{"index": 0, "delta": {{"role": "assistant", "content": "hi"}},
                                  "finish_reason": "stop"}}], "usage": usage}}
            data = f"data: {{json.dumps(chunk)}}\\n\\ndata: [DONE]\\n\\n".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        else:
            self._send({{
                "id": "c1", "object": "chat.completion", "created": 0, "model": "fake",
                "choices": [{{"index": 0, "message": {{"role": "assistant", "content": "hi"}},
                             "finish_reason": "stop"}}],
                "usage": usage,
            }})
        if first and model == b"exit":
            os.kill(os.getppid(), signal.SIGSTOP)
            os._exit(0)

    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", port), Handler)
if model == b"linger" and not os.path.exists(requests + ".linger"):
    child = os.fork()
    if child == 0:
        for fd in range(3, 256):  # (the pipes only: no socket)
            try:
                if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.close(fd)
            except OSError:
                pass
        signal.pause()
    with open(requests + ".linger", "w") as file:
        file.write(str(child))
print(f"srv  llama_server: listening on http://127.0.0.1:{{server.server_address[1]}}", flush=True)
server.serve_forever()
"""

REQUEST = ModelRequest((Message.user("Say hi."),))


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[bytes], Path]]:
    """Makes a model file of the given behaviour for the stand-in server (named by
    TOOLFOLD_LLAMA_SERVER), with a cache folder of the test's own; every server started
    from it is stopped at the end, its watchdog continued first if stopped."""
    binary = tmp_path / "llama-server"
    binary.write_text(FAKE_SERVER)
    binary.chmod(0o755)
    monkeypatch.setenv(SERVER_ENV, str(binary))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_REQUESTS", str(tmp_path / "requests"))
    (tmp_path / "requests").write_text("")
    original_stop = LocalServer.stop

    def stop(server: LocalServer) -> None:  # a stopped watchdog would hold stop() 10 s
        if server.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # (exited, and waited for)
                os.kill(server.pid, signal.SIGCONT)
        original_stop(server)

    monkeypatch.setattr(LocalServer, "stop", stop)
    models: list[Path] = []

    def make(behaviour: bytes) -> Path:
        if behaviour in (b"exit", b"cut", b"linger"):  # its watchdog stopped: no exit status
            monkeypatch.setattr(_server, "_WATCHDOG_FOLLOWS", 0.1)  # (to wait 5 s for)
        path = tmp_path / f"{behaviour.decode()}.gguf"
        path.write_bytes(behaviour)
        models.append(path)
        return path

    yield make
    with _server._LOCK:
        mine = [k for k in _server._SERVERS if k[0] == binary]
        servers = [_server._SERVERS.pop(k) for k in mine]
    for server in servers:
        server.stop()


def _requests(tmp_path: Path) -> list[str]:
    """The pids of the stand-in servers that read a POST, one per request read."""
    return (tmp_path / "requests").read_text().split()


def _serving_pid(server: LocalServer) -> int:
    """The pid of the server the watchdog runs (the watchdog's one child)."""
    watchdog = server.pid
    (child,) = Path(f"/proc/{watchdog}/task/{watchdog}/children").read_text().split()
    return int(child)


def _wait_exited(pid: int) -> None:
    """Wait (without polling) until ``pid`` has exited (a zombie counts)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        assert select.select([fd], [], [], 30)[0], f"{pid} did not exit"
    finally:
        os.close(fd)


def _call(model: LocalModel, how: str) -> str:
    """One call of ``model`` made ``how``: sync, async or stream; the text answered."""
    if how == "sync":
        return model.request_sync(REQUEST).text
    if how == "async":
        return asyncio.run(model.request(REQUEST)).text

    async def streamed() -> list[StreamEvent]:
        return [event async for event in model.stream(REQUEST)]

    events = list(model.stream_sync(REQUEST)) if how == "stream" else asyncio.run(streamed())
    return "".join(getattr(event, "text", "") for event in events)


def test_a_server_is_dead_once_it_exited_though_its_watchdog_still_runs(
    fake: Callable[[bytes], Path],
) -> None:
    """alive() follows llama-server itself: its watchdog exits only a moment after it, and a
    server reused in that moment refused the next call (review s38)."""
    server = _server.shared_server(Path(os.environ[SERVER_ENV]), fake(b"ok"))
    child = _serving_pid(server)
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)  # its exit held back, as in the moment after the server's
    os.kill(child, signal.SIGKILL)
    _wait_exited(child)
    assert not server.alive()
    assert server.wait(0)


def test_the_call_after_the_server_exited_starts_a_new_one(
    fake: Callable[[bytes], Path], tmp_path: Path
) -> None:
    """A server that exited (its watchdog not yet) is replaced by the next call, and that call
    answers: it went to the dead port and failed with 'cannot reach local' (review s38)."""
    model = LocalModel(str(fake(b"exit")))
    first = _serving_pid(model.server())
    assert model.request_sync(REQUEST).text == "hi"  # then the server exits
    _wait_exited(first)
    assert model.request_sync(REQUEST).text == "hi"
    assert _serving_pid(model.server()) != first
    assert len(_requests(tmp_path)) == 2


@pytest.mark.parametrize("how", ["sync", "async", "stream", "astream"])
def test_a_call_refused_by_a_server_that_just_died_is_sent_once_to_a_new_one(
    fake: Callable[[bytes], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The server dies between the check that it runs and the call: the connection is refused
    (the request never written), so the server is started again and the request sent to it,
    once; the call failed with 'Connection refused' (review s38)."""
    model = LocalModel(str(fake(b"ok")))
    assert model.request_sync(REQUEST).text == "hi"
    ready = LocalModel._ready
    killed: list[int] = []

    def ready_then_killed(self: LocalModel) -> object:
        ready_now = ready(self)
        server = self._server
        assert server is not None
        if not killed:
            killed.append(_serving_pid(server))
            assert server.pid is not None
            os.kill(server.pid, signal.SIGSTOP)  # (continued by the fixture's stop)
            os.kill(killed[0], signal.SIGKILL)
            _wait_exited(killed[0])
        return ready_now

    monkeypatch.setattr(LocalModel, "_ready", ready_then_killed)
    monkeypatch.setattr(_server, "_WATCHDOG_FOLLOWS", 0.1)  # (stopped: no exit status to wait for)
    assert _call(model, how) == "hi"
    assert _serving_pid(model.server()) != killed[0]
    assert len(_requests(tmp_path)) == 2  # the first call's and this one's: no duplicate


@pytest.mark.parametrize("how", ["sync", "async", "stream", "astream"])
def test_a_call_the_server_read_before_it_died_is_sent_once_to_a_new_one(
    fake: Callable[[bytes], Path], tmp_path: Path, how: str
) -> None:
    """The server read the request (on a kept-alive connection), then died without an answer:
    a dead server can neither answer nor act on it, so the call is sent once to a new server
    and answers; it failed with 'Connection reset' or 'Server disconnected' (review s38)."""
    model = LocalModel(str(fake(b"cut")))
    first = _serving_pid(model.server())
    assert _call(model, how) == "hi"
    assert _requests(tmp_path)[0] == str(first)  # read by the server that died
    assert len(_requests(tmp_path)) == 2  # and by the new one, once
    assert _serving_pid(model.server()) != first


def test_a_call_cut_by_a_server_seen_exiting_before_its_exit_pipe_closed_is_sent_again(
    fake: Callable[[bytes], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server read the request and is exiting (a zombie), its exit pipe not closed yet (as
    a killed llama-server's connections break a moment before): alive() says yes, and the call
    is still sent to a new server once its exit shows; it failed with the connection's error
    (review s38)."""
    model = LocalModel(str(fake(b"linger")))
    first = model.server()
    lingering = int((tmp_path / "requests.linger").read_text())
    seen: list[bool] = []
    wait = LocalServer.wait

    def exit_shows(self: LocalServer, timeout: float | None = None) -> bool:
        if self is first and not seen:
            seen.append(self.alive())
            os.kill(lingering, signal.SIGKILL)  # the exit pipe closes
        return wait(self, timeout)

    monkeypatch.setattr(LocalServer, "wait", exit_shows)
    try:
        assert model.request_sync(REQUEST).text == "hi"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(lingering, signal.SIGKILL)
    assert seen == [True]  # (its exit had not shown)
    assert len(_requests(tmp_path)) == 2
    assert model.server() is not first


@pytest.mark.parametrize("how", ["sync", "async", "stream", "astream"])
def test_a_connection_a_live_server_dropped_fails_at_once_and_is_not_sent_again(
    fake: Callable[[bytes], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A server that read the request and lives on, but dropped its connection: the call fails
    without waiting for the server's exit (it waited 2 s) and is not sent again (review s38)."""
    model = LocalModel(str(fake(b"reset")))
    server = model.server()
    waits: list[float | None] = []
    ended = _server._ended

    def counted(pipe: int | None, timeout: float | None) -> bool:
        if timeout != 0:
            waits.append(timeout)
        return ended(pipe, timeout)

    def wait(self: LocalServer, timeout: float | None = None) -> bool:
        waits.append(timeout)
        return False

    monkeypatch.setattr(_server, "_ended", counted)
    monkeypatch.setattr(LocalServer, "wait", wait)
    with pytest.raises(ProviderConnectionError, match="Server disconnected"):
        _call(model, how)
    assert waits == []
    assert len(_requests(tmp_path)) == 1
    assert server.exiting() is False  # (seen without waiting)
    assert model.server() is server


@pytest.mark.parametrize("how", ["async", "astream"])
def test_an_async_call_looks_at_a_lost_connection_off_the_event_loop(
    fake: Callable[[bytes], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """While an async call checks whether its server died (which may wait for the server's
    lock and exit, seconds), other coroutines on the loop run: the check ran on the loop and
    stalled it for up to 3 s (review s38)."""
    model = LocalModel(str(fake(b"reset")))
    dead = LocalModel._dead
    checking, released = threading.Event(), threading.Event()
    progress: list[str] = []
    seen: list[list[str]] = []

    def held_dead(self: LocalModel, server: LocalServer, exc: ProviderError) -> bool:
        checking.set()
        released.wait(10)  # (set by the other coroutine, if the loop runs it)
        seen.append(list(progress))
        return dead(self, server, exc)

    async def other() -> None:
        await asyncio.to_thread(checking.wait, 30)
        progress.append("ran")  # (on the loop, while the check is held)
        released.set()

    async def both() -> None:
        async def call() -> None:
            if how == "async":
                await model.request(REQUEST)
            else:
                async for _ in model.stream(REQUEST):
                    pass

        results = await asyncio.gather(call(), other(), return_exceptions=True)
        assert isinstance(results[0], ProviderConnectionError), results

    monkeypatch.setattr(LocalModel, "_dead", held_dead)
    asyncio.run(both())
    assert seen == [["ran"]]
    assert len(_requests(tmp_path)) == 1


def test_a_call_right_after_the_server_was_killed_is_answered_by_a_new_server(
    fake: Callable[[bytes], Path], tmp_path: Path
) -> None:
    """A call made at once after the server was killed (SIGKILL) answers, by a new server,
    whichever moment the kill is seen at (before the call, or by its pooled connection's reset);
    it failed with 'Connection reset by peer' (review s38). End to end only: which path a run
    takes depends on timing; a server seen exiting before its exit shows is the linger test's."""
    model = LocalModel(str(fake(b"ok")))
    assert model.request_sync(REQUEST).text == "hi"
    for _ in range(3):
        os.kill(_serving_pid(model.server()), signal.SIGKILL)
        assert model.request_sync(REQUEST).text == "hi"


def test_the_users_llama_api_key_does_not_reach_the_server(
    fake: Callable[[bytes], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """LLAMA_API_KEY (and the variables that change the server's API) are not passed on:
    the server then required the key, and every call failed with HTTP 401 (review s38)."""
    for name in ("LLAMA_API_KEY", "LLAMA_ARG_API_KEY_FILE", "LLAMA_ARG_API_PREFIX"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("LLAMA_ARG_N_GPU_LAYERS", "0")  # a tuning of the user's own: kept
    server = _server.shared_server(Path(os.environ[SERVER_ENV]), fake(b"ok"))
    seen = httpx.get(f"http://127.0.0.1:{server.port}/health").json()["env"]
    assert seen == ["LLAMA_ARG_N_GPU_LAYERS"]


def test_a_server_that_exits_at_start_is_named_with_its_exit_status(
    fake: Callable[[bytes], Path], tmp_path: Path
) -> None:
    """A server that exits with a status while starting says which: the error had only an
    empty log tail ('exited while starting:') (review s38)."""
    binary = tmp_path / "failing"
    binary.write_text("#!/bin/sh\nexit 3\n")
    binary.chmod(0o755)
    with pytest.raises(LocalSetupError, match=r"exited while starting \(exit status 3\)"):
        LocalServer(binary, fake(b"ok")).start()


def test_a_forked_child_does_not_hold_the_server_past_its_parent(
    fake: Callable[[bytes], Path],
) -> None:
    """A child forked after the server started lets go of the watchdog's stdin, so stopping
    it (as at exit) ends the watchdog by that pipe: stop() waited 10 s, then killed it (review
    s38)."""
    server = _server.shared_server(Path(os.environ[SERVER_ENV]), fake(b"ok"))
    process = server._process
    assert process is not None
    hold, release = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (3.12+: fork with threads)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: lives until the parent lets it go
        os.close(release)
        os.read(hold, 1)
        os._exit(0)
    os.close(hold)
    try:
        server.stop()
        assert process.returncode == 128 + signal.SIGTERM  # its server stopped by it, not -9
    finally:
        os.close(release)
        os.waitpid(pid, 0)


def _forked_child(run: Callable[[], bool]) -> int:
    """Fork; the child runs ``run`` under a 20 s alarm and exits 0 if it returned True (1 if
    False, 2 if it raised); the child's exit status, or -1 if a signal ended it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # (3.12+: fork with threads)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 2
        try:
            signal.alarm(20)
            code = 0 if run() else 1
        finally:
            _server.stop_all()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1


def test_a_forked_child_drops_the_watchdog_without_a_resource_warning(
    fake: Callable[[bytes], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child forked while the server runs lets go of the watchdog's Popen quietly: it said
    'ResourceWarning: subprocess N is still running', an error under -W error (review s38)."""
    _server.shared_server(Path(os.environ[SERVER_ENV]), fake(b"ok"))
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        status = _forked_child(lambda: not unraisable)  # (the fork itself let go of it)
    assert status == 0


def test_a_forked_child_uses_the_model_though_a_thread_held_its_lock_at_the_fork(
    fake: Callable[[bytes], Path],
) -> None:
    """Another thread holds the model's lock (it is starting the server) at the fork: the
    child's call starts its own server and answers; it hung on that lock (review s38)."""
    model = LocalModel(str(fake(b"ok")))
    with model._lock:  # (as a thread starting the server holds it)
        status = _forked_child(lambda: model.request_sync(REQUEST).text == "hi")
    assert status == 0


def test_stop_does_not_close_the_exit_pipe_under_a_poll(
    fake: Callable[[bytes], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """stop() in one thread while another polls the server's exit pipe: the pipe stays open
    until that poll ends, then is closed; it was closed under the poll, and its number could
    be reused by another file meanwhile (review s38)."""
    server = _server.shared_server(Path(os.environ[SERVER_ENV]), fake(b"ok"))
    pipe = server._exit_pipe
    assert pipe is not None
    ended = _server._ended
    open_after_stop: list[bool] = []

    def polled(fd: int | None, timeout: float | None) -> bool:
        server.stop()  # (another thread's, while this one polls)
        try:
            os.fstat(pipe)
            open_after_stop.append(True)
        except OSError:
            open_after_stop.append(False)
        return ended(fd, timeout)

    monkeypatch.setattr(_server, "_ended", polled)
    assert server._exited(0) is True
    assert open_after_stop == [True]
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(pipe)  # closed once the poll ended


@pytest.mark.parametrize("how", ["sync", "async", "stream", "astream"])
def test_a_call_whose_servers_died_says_how_they_ended_and_where_the_log_is(
    fake: Callable[[bytes], Path], how: str
) -> None:
    """The server dies at the call, and the new one it is sent to dies too: the error says
    llama-server exited, how, and where its log is; it said only that the connection
    failed (review s45)."""
    model = LocalModel(str(fake(b"die")))
    model.server()
    with pytest.raises(ProviderError) as caught:
        _call(model, how)
    message = str(caught.value)
    assert "(llama-server exited (exit status 1); log: " in message
    assert message.count("llama-server exited") == 1
    assert "llama-server-" in message.rsplit("log: ", 1)[1]


def test_an_empty_cached_binary_fails_to_start_naming_it_and_the_remedy(
    fake: Callable[[bytes], Path], tmp_path: Path
) -> None:
    """An empty llama-server in the cache (a damaged build): the start fails saying it cannot
    be run, naming the file and to delete it (not `clean`, which deletes the models too); it
    showed the watchdog's Python traceback (OSError: Exec format error) (review s45)."""
    binary = tmp_path / "cache" / "llama-server" / "0" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_bytes(b"")
    binary.chmod(0o755)
    with pytest.raises(LocalSetupError) as caught:
        LocalServer(binary, fake(b"ok")).start()
    message = str(caught.value)
    assert "exited while starting (exit status 126)" in message
    assert f"watchdog: cannot run {binary}: Exec format error" in message
    assert "Traceback" not in message
    assert f"\n{binary} may be damaged (empty): delete {binary}; the next use" in message
    assert "toolfold.local clean" not in message
    assert message.count("may be damaged") == 1


def test_a_start_failing_on_a_setting_suggests_no_clean(
    fake: Callable[[bytes], Path], tmp_path: Path
) -> None:
    """A cached server that refuses a setting (LLAMA_ARG_CTX_SIZE=abc) exits while starting
    with its own words and no advice to clean the cache: every failed start advised deleting
    the cache, a build of minutes, over a typo (review s45, round 2)."""
    binary = tmp_path / "cache" / "llama-server" / "0" / "llama-server"
    binary.parent.mkdir(parents=True)
    shutil.copy2(os.environ[SERVER_ENV], binary)
    with pytest.raises(LocalSetupError) as caught:
        LocalServer(binary, fake(b"badarg")).start()
    message = str(caught.value)
    assert "LLAMA_ARG_CTX_SIZE: stoi" in message
    assert "damaged" not in message
    assert "clean" not in message


def test_a_model_that_fails_to_load_is_named_alone(
    fake: Callable[[bytes], Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A model the server failed to load is named, alone, with what to do about a file of
    the user's (not `clean`, which leaves it alone); an unusable binary of the user's
    (TOOLFOLD_LLAMA_SERVER) names that variable. Both files were named, with `clean`."""
    model = fake(b"noload")
    with pytest.raises(LocalSetupError) as caught:
        LocalModel(str(model)).server()
    message = str(caught.value)
    assert f"\n{model} may be damaged (llama-server failed to load it): replace it" in message
    assert message.count("may be damaged") == 1
    assert "toolfold.local clean" not in message
    own = tmp_path / "empty-server"
    own.write_bytes(b"")
    own.chmod(0o755)
    monkeypatch.setenv(SERVER_ENV, str(own))
    with pytest.raises(LocalSetupError) as caught:
        LocalServer(own, fake(b"ok")).start()
    message = str(caught.value)
    assert f"\n{own} may be damaged (empty): point {SERVER_ENV} at a llama-server" in message
    assert "toolfold.local clean" not in message


@pytest.mark.parametrize(
    ("size", "slots", "shown"),
    [
        (None, None, "4096 (toolfold's default) tokens"),
        ("16384", None, "LLAMA_ARG_CTX_SIZE=16384 tokens"),
        (None, "4", "4096 (toolfold's default) tokens, shared by LLAMA_ARG_N_PARALLEL=4 slots"),
    ],
)
def test_a_prompt_past_the_context_says_how_to_give_the_server_a_larger_one(
    fake: Callable[[bytes], Path],
    monkeypatch: pytest.MonkeyPatch,
    size: str | None,
    slots: str | None,
    shown: str,
) -> None:
    """A prompt too long for the server's context: the error names the context the server
    was started with (a variable changed later does not count), the slots sharing it, and
    LLAMA_ARG_CTX_SIZE; it advised only "a model with a larger window", the context was
    stuck at 4096 (review s45), and then the note read the variables at the error and left
    out N_PARALLEL, which divides the context (round 2)."""
    for name, value in (("LLAMA_ARG_CTX_SIZE", size), ("LLAMA_ARG_N_PARALLEL", slots)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    model = LocalModel(str(fake(b"long")))
    model.server()
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "999")  # (after the start: not the server's)
    with pytest.raises(ContextWindowExceededError) as caught:
        model.request_sync(REQUEST)
    assert (
        f"(local: llama-server was started with a context of {shown}; set "
        "LLAMA_ARG_CTX_SIZE (0: the model's own) before the server starts for a larger one)"
    ) in str(caught.value)
