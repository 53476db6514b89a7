"""Start, share and stop ``llama-server`` processes on 127.0.0.1.

One server per (binary, model) per process, started on first use and reused by
every later run; all of them stop when the process exits. Each runs under a
small watchdog (``_watchdog.py``) that stops it when this process dies, even by
SIGKILL, so no server outlives its user.

Unless the caller names a port, the server binds one itself (``--port 0``) and
``start`` learns it from the line the server logs once its model is loaded: no
port is picked here and handed over, so none can be taken in between, and no
other process's server is ever taken for ours.

Each server's log file is locked (``flock``) from its start for as long as a
process has it open: the server and its watchdog write into it, so the lock
lasts as long as they run, whichever process started them (and the starting
process's own descriptor holds it too, until `LocalServer.stop`). A start
deletes the logs of servers no longer running beyond the newest few
(`prune_logs`), and never a locked one. The log folder itself is locked
(through its hidden ``.lock`` file) around a log's rename into place and
around a deletion's check: a log that a new server's log has just replaced is
never deleted. That lock is waited for a short while only: past it, no log is
deleted and a rename goes on unprotected. Every lock is taken on a file open
for writing, as NFS and CIFS (which emulate ``flock`` with POSIX locks) need.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import IO

import httpx

from toolfold._flock import same_file, try_lock
from toolfold._ports import port_problem
from toolfold.local._paths import (
    LocalSetupError,
    cache_dir,
    cache_error,
    damage,
    make_folder,
    remedy,
)
from toolfold.local._weights import expected_size

#: toolfold's ChatML template with tools (SmolLM2's own ignores them).
TEMPLATE = "chatml-tools.jinja"
#: Context tokens per server unless ``LLAMA_ARG_CTX_SIZE`` says otherwise: the
#: tools, the worked example and a few turns fit.
CONTEXT_TOKENS = 4096
#: The variable that sets the server's context size (0: the model's own).
CONTEXT_ENV = "LLAMA_ARG_CTX_SIZE"
#: The variable that sets the server's parallel slots, which share its context.
PARALLEL_ENV = "LLAMA_ARG_N_PARALLEL"
_START_TIMEOUT = 120.0
#: What llama-server logs once its model is loaded and it answers requests
#: (``server.cpp``: ``SRV_INF("listening on %s\n", ...)``, after "model loaded";
#: while loading, its /health answers 503): the port it bound.
_LISTENING = re.compile(rb"listening on http://127\.0\.0\.1:(\d+)\s*$")
#: What llama-server logs when its port is taken (``server-http.cpp``).
_BIND_FAILED = "couldn't bind HTTP server socket"
#: The log of a start in progress, until the server says which port it holds.
_STARTING_LOG = "llama-server-starting-"
#: The log of the last start that failed (one file, whatever the port).
_FAILED_LOG = "llama-server-failed.log"
#: A server's log once it holds its port: ``llama-server-PORT.log``.
_PORT_LOG = re.compile(r"llama-server-[0-9]+\.log")
#: How many logs of servers no longer running a start keeps (the newest).
KEPT_LOGS = 3
#: The log folder's lock file (a hidden file in it, opened for writing: NFS and
#: CIFS emulate ``flock`` with POSIX locks, which need a file open for writing).
_FOLDER_LOCK = ".lock"
#: How long a start waits for the log folder's lock before it goes on without it
#: (a process forked while holding it, with its copy of the open file, holds it
#: as long as it lives).
_FOLDER_LOCK_WAIT = 2.0
#: How much of the log one read takes, how long an unfinished line may grow while
#: the "listening on" line is awaited, and how much of its end an error quotes.
_READ_SIZE = 1 << 16
_LINE_LIMIT = 4096
_TAIL_BYTES = 1 << 14
#: Compute threads: llama.cpp's workers spin while they wait, so on a small or
#: busy machine one thread per spare core is much faster than one per core.
THREADS = max(1, min(4, (os.cpu_count() or 2) - 1))
#: The flags toolfold sets with their defaults, each left out when the user's
#: environment sets the variable llama-server reads for it (a flag on the command
#: line wins over its variable: set, the variable was silently ignored).
DEFAULT_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--ctx-size", CONTEXT_ENV, str(CONTEXT_TOKENS)),
    ("--parallel", PARALLEL_ENV, "1"),
    ("--threads", "LLAMA_ARG_THREADS", str(THREADS)),
)
#: Variables of the user's environment that llama-server reads and that would
#: change the API toolfold talks to: a key it then requires (a 401 for a model
#: promised to need none), a path prefix, TLS, or a model fetched from the
#: network in place of ``--model``. The server starts without them.
SERVER_ENV_DROPPED = frozenset(
    {
        "LLAMA_API_KEY",
        "LLAMA_ARG_API_KEY",
        "LLAMA_ARG_API_KEY_FILE",
        "LLAMA_ARG_API_PREFIX",
        "LLAMA_ARG_SSL_CERT_FILE",
        "LLAMA_ARG_SSL_KEY_FILE",
        "LLAMA_ARG_HF_REPO",
        "LLAMA_ARG_HF_FILE",
        "LLAMA_ARG_HF_REPO_FILE",
        "LLAMA_ARG_MODEL_URL",
        "LLAMA_ARG_DOCKER_REPO",
        "LLAMA_ARG_MMPROJ_URL",
        "LLAMA_ARG_SPEC_DRAFT_HF_REPO",
    }
)
#: The flag of a process that is exiting, in ``/proc/PID/stat`` (``PF_EXITING``).
_PF_EXITING = 0x4
#: How long the watchdog is waited for once the server has exited (it follows
#: within milliseconds).
_WATCHDOG_FOLLOWS = 5.0


class LocalServer:
    """One running ``llama-server`` (behind its watchdog) on 127.0.0.1.

    Attributes:
        binary: The ``llama-server`` executable.
        model: The GGUF file it serves.
        port: The port it listens on: the caller's, or, when the caller gave
            none, the one the server bound itself (None until ``start`` has
            read it from the server's log).
        log_path: Where its output goes (None before ``start``): while it
            starts, ``logs/llama-server-starting-*.log`` under the cache folder;
            once it holds its port, ``logs/llama-server-PORT.log``; after a
            failed start, ``logs/llama-server-failed.log``.
    """

    def __init__(self, binary: Path, model: Path, *, port: int | None = None) -> None:
        """A server of ``model`` run by ``binary``, not started yet.

        Args:
            binary: The ``llama-server`` executable.
            model: The GGUF file to serve.
            port: The port of 127.0.0.1 to listen on, from 1 to 65535; None
                or 0 lets the server bind a free one (``port`` is None until
                it has).

        Raises:
            LocalSetupError: ``port`` is not a port (an ``int`` from 0 to 65535).
        """
        if port is not None:
            check_port(port)
        port = port or None  # (0: as None, the server picks one)
        self.binary = binary
        self.model = model
        self.port = port
        self.log_path: Path | None = None
        self._requested = port
        self._process: subprocess.Popen[bytes] | None = None
        #: `CONTEXT_ENV` and `PARALLEL_ENV` as the server was started with ("": unset).
        self._context = ("", "")
        self._log: IO[bytes] | None = None
        # The read end of a pipe whose write end only llama-server holds (not
        # on Windows): its end of file is the server's exit, seen at once,
        # where the watchdog exits a moment later. `alive` and `wait` poll it
        # as readers (`_pipe_readers`, under `_pipe_lock`); `stop` closes it
        # only when none is polling (else the last one does): a descriptor
        # closed under a poll could be reused by another file meanwhile.
        self._exit_pipe: int | None = None
        self._pipe_lock = threading.Lock()
        self._pipe_readers = 0
        self._pipe_closing: int | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible API root, ``http://127.0.0.1:PORT/v1``.

        Raises:
            LocalSetupError: No port is known yet: the server picks its own, and
                has not been started.
        """
        if self.port is None:
            raise LocalSetupError(
                "the local server has no port yet: it picks one when it starts; call start() first"
            )
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """The process id of the watchdog that owns the server (None before start)."""
        return self._process.pid if self._process else None

    def command(self) -> list[str]:
        """The ``llama-server`` command line (``--port 0`` when the server picks its port).

        The context size, parallel slots and threads are toolfold's defaults
        (`DEFAULT_FLAGS`) unless ``LLAMA_ARG_CTX_SIZE``, ``LLAMA_ARG_N_PARALLEL``
        or ``LLAMA_ARG_THREADS`` is set: then the server reads that variable.
        """
        template = resources.files("toolfold.local").joinpath(TEMPLATE)
        defaults = [
            part
            for flag, variable, value in DEFAULT_FLAGS
            if not os.environ.get(variable)
            for part in (flag, value)
        ]
        return [
            str(self.binary),
            "--model",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self._requested or 0),
            "--jinja",
            "--chat-template-file",
            str(template),
            *defaults,
            "--no-warmup",  # the first request warms it up; starting stays under a second
            # The "listening on" line `start` reads, in plain text, whatever
            # LLAMA_ARG_LOG_* the environment sets (verbosity 0 would drop it).
            "--log-verbosity",
            "3",
            "--no-log-jsonl",
            "--log-colors",
            "off",
        ]

    def alive(self) -> bool:
        """llama-server itself is running (and its watchdog with it).

        The server's own exit counts at once: the watchdog exits only a moment
        later, and a server reused in between would refuse or cut the call.
        """
        process = self._process
        if process is None or process.poll() is not None:
            return False
        return not self._exited(0)

    def exiting(self) -> bool | None:
        """Whether llama-server has exited or is exiting, seen without waiting; None
        where that cannot be seen (no ``/proc``: not Linux).

        A killed server's connections break while it exits, a moment before its
        exit pipe closes (its files are released in no set order): `alive` may
        still say yes then. Its process is already exiting (``PF_EXITING`` in
        ``/proc/PID/stat``), or a zombie, or gone.
        """
        if not self.alive():
            return True
        watchdog = self.pid
        try:
            children = Path(f"/proc/{watchdog}/task/{watchdog}/children").read_text().split()
        except OSError:
            return None
        if not children:
            return True  # (exited, and reaped by the watchdog)
        try:
            stat = Path(f"/proc/{children[0]}/stat").read_bytes()
        except OSError:
            return True
        state, *fields = stat[stat.rindex(b")") + 2 :].split()
        return state in (b"Z", b"X") or bool(int(fields[5]) & _PF_EXITING)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the server to exit; True if it has.

        Once it has, its watchdog (which follows it within milliseconds) is
        waited for too, so that its exit status is known: for what is left of
        ``timeout``, and at most `_WATCHDOG_FOLLOWS` seconds.
        """
        process = self._process
        if process is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        ended = self._exited(timeout)
        if ended is not None:
            if not ended:
                return process.poll() is not None  # (the watchdog gone: the server follows)
            left = _WATCHDOG_FOLLOWS if deadline is None else deadline - time.monotonic()
            timeout = max(0.0, min(left, _WATCHDOG_FOLLOWS))
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            return ended is not None  # (the server has exited)
        return True

    def _exited(self, timeout: float | None) -> bool | None:
        """Whether the server has exited, by its exit pipe, waiting up to ``timeout``
        seconds (None: for good); None without a pipe (not started, stopped, Windows).
        The pipe stays open while it is polled, whatever `stop` does meanwhile."""
        with self._pipe_lock:
            pipe = self._exit_pipe
            if pipe is None:
                return None
            self._pipe_readers += 1
        try:
            return _ended(pipe, timeout)
        finally:
            with self._pipe_lock:
                self._pipe_readers -= 1
                closing, self._pipe_closing = self._pipe_closing, None
                if closing is not None and self._pipe_readers:
                    self._pipe_closing = closing  # (another reader's to close)
                elif closing is not None:
                    os.close(closing)

    def _close_pipe(self) -> None:
        """Close the exit pipe now, or, while a thread polls it, when that poll ends."""
        with self._pipe_lock:
            pipe, self._exit_pipe = self._exit_pipe, None
            if pipe is not None and self._pipe_readers:
                self._pipe_closing = pipe
            elif pipe is not None:
                os.close(pipe)

    def _exit_status(self) -> str:
        """How the server ended, as its watchdog relays it (after its exit)."""
        process = self._process
        if process is None:
            return ""
        self.wait(_WATCHDOG_FOLLOWS)
        code = process.poll()
        if code is None:
            return ""
        if code < 0:
            return f" (its watchdog was killed by {_signal_name(-code)})"
        if code > 128:  # the watchdog's exit code for a death by signal (the log says too)
            return f" (exit status {code}: killed by {_signal_name(code - 128)})"
        return f" (exit status {code})"

    def context_note(self) -> str:
        """What a prompt too long for this server's context is told: the context it was
        started with, and how to give the next server a larger one."""
        size, slots = self._context
        shown = f"{CONTEXT_ENV}={size}" if size else f"{CONTEXT_TOKENS} (toolfold's default)"
        shared = f", shared by {PARALLEL_ENV}={slots} slots" if slots not in ("", "1") else ""
        return (
            f"local: llama-server was started with a context of {shown} tokens{shared}; "
            f"set {CONTEXT_ENV} (0: the model's own) before the server starts for a larger one"
        )

    def exit_report(self) -> str:
        """How the server ended and where its log is, for an error: ``llama-server
        exited (exit status 137: killed by SIGKILL); log: PATH``."""
        return f"llama-server exited{self._exit_status()}; log: {self.log_path}"

    def start(self) -> LocalServer:
        """Start the server and wait until it says it listens and its health check answers.

        Without a port from the caller, the server binds a free one itself and
        ``port`` is read from its log. Its output goes to a log file of its own
        (a new one, so no live server's log is written over), named after the
        port once the server holds it (a later server on that port replaces
        it), and locked while the server runs. Before, the logs of servers no
        longer running are deleted but the newest `KEPT_LOGS` (`prune_logs`).

        Raises:
            LocalSetupError: The port the caller chose is taken, or the server
                exited or was not listening and healthy within the start timeout
                (with its log's tail).
        """
        # Whatever holds a chosen port would answer the health check in the
        # server's place: refused here, with a clear message, before any log.
        if self._requested is not None and port_taken(self._requested):
            raise LocalSetupError(_taken(self._requested))
        self.port = self._requested  # (a start again after a failed one: no stale port)
        logs = cache_dir() / "logs"
        make_folder(logs)
        _drop_stale_starts(logs)
        prune_logs(logs)
        try:
            handle, name = tempfile.mkstemp(prefix=_STARTING_LOG, suffix=".log", dir=logs)
        except OSError as exc:
            raise cache_error(logs, exc) from None
        # From the log's creation on, all in the try: a Ctrl-C anywhere here stops the
        # server, if any, and closes and renames the starting log (one landing before
        # the try left it open under its starting name).
        try:
            self.log_path = Path(name)
            try:
                self._log = os.fdopen(handle, "wb")
            except BaseException:
                os.close(handle)  # (not the log's yet)
                raise
            if sys.platform != "win32":
                # Held by the description the watchdog and the server inherit as their
                # output: locked while any of them runs, even after this process is gone.
                # (a new file: never held; on a file system refusing locks, ENOLCK, the
                # log goes unlocked, and pruning, which cannot lock it either, keeps it)
                try_lock(handle)
            watchdog = [sys.executable, str(Path(__file__).with_name("_watchdog.py"))]
            held: tuple[int, ...] = ()
            # Without what would make the server answer another API than the one called.
            environment = {k: v for k, v in os.environ.items() if k not in SERVER_ENV_DROPPED}
            self._context = (environment.get(CONTEXT_ENV, ""), environment.get(PARALLEL_ENV, ""))
            deadline = time.monotonic() + _START_TIMEOUT
            _STARTED.add(self)
            # No fork (another thread's) between the pipe and the close of its write
            # end (`_SPAWNING`): a child would hold that end, and the server's exit
            # would never show. Both ends are close-on-exec (os.pipe, PEP 446).
            with _SPAWNING:
                if sys.platform != "win32":
                    self._exit_pipe, end = os.pipe()
                    held = (end,)
                    watchdog.append(f"--exit-pipe={end}")
                try:
                    self._process = subprocess.Popen(
                        [*watchdog, *self.command()],
                        stdin=subprocess.PIPE,
                        stdout=self._log,
                        stderr=subprocess.STDOUT,
                        env=environment,
                        pass_fds=held,
                        start_new_session=True,  # Ctrl-C reaches this process, which stops it
                    )
                finally:
                    for end in held:
                        os.close(end)  # the server's alone
            port = self._wait_listening(deadline)
            self._move_log(logs / f"llama-server-{port}.log")  # the port is ours now
            self.port = port
            self._wait_healthy(deadline)
        except BaseException as exc:
            self.stop()
            try:
                tail = self._log_tail()  # read first: another failed start may replace that file
            finally:
                self._move_log(logs / _FAILED_LOG)
            if isinstance(exc, LocalSetupError):
                raise LocalSetupError(
                    f"{exc}:\n{tail}\n(full log: {self.log_path}){self._damage_hint(exc, tail)}"
                ) from None
            raise
        return self

    def _damage_hint(self, exc: LocalSetupError, tail: str) -> str:
        """For a server that exited while starting, the file that points to the failure and
        what to do: the binary when it cannot run (exit status 126, or seen damaged), the
        model when it did not load (or seen damaged); nothing for another failure (a
        wrong setting is no reason to throw a build away)."""
        if "exited while starting" not in str(exc):
            return ""
        process = self._process
        code = process.poll() if process is not None else None
        hints = []
        problem = damage(self.binary, executable=True) or ("cannot run" if code == 126 else None)
        if problem:
            hints.append(f"\n{self.binary} may be damaged ({problem}): {remedy(self.binary)}")
        problem = damage(self.model, size=expected_size(self.model))
        if problem is None and "failed to load model" in tail:
            problem = "llama-server failed to load it"
        if problem:
            hints.append(f"\n{self.model} may be damaged ({problem}): {remedy(self.model)}")
        return "".join(hints)

    def _wait_listening(self, deadline: float) -> int:
        """The port from the server's "listening on" line; only whole lines are read
        (llama.cpp writes a line in pieces)."""
        assert self.log_path is not None
        pending = b""
        with self.log_path.open("rb") as log:
            while True:
                # A bounded read, and a bounded unfinished line: a server flooding its
                # output cannot hold this loop past the deadline, nor fill memory.
                chunk = log.read(_READ_SIZE)
                *lines, pending = (pending + chunk).split(b"\n")
                pending = pending[-_LINE_LIMIT:]
                for line in lines:
                    if found := _LISTENING.search(line):
                        return int(found[1])
                if not self.alive():
                    bind_failed = _BIND_FAILED in self._log_end().decode(errors="replace")
                    if self._requested is not None and bind_failed:
                        raise LocalSetupError(_taken(self._requested))  # since the check
                    raise LocalSetupError(
                        f"llama-server exited while starting{self._exit_status()}"
                    )
                if time.monotonic() > deadline:
                    raise LocalSetupError(
                        f"llama-server did not say it was listening within {_START_TIMEOUT:g}s"
                    )
                if not chunk:
                    time.sleep(0.05)

    def _wait_healthy(self, deadline: float) -> None:
        url = f"http://127.0.0.1:{self.port}/health"
        # Directly, whatever proxy the environment names: none reaches this loopback.
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while True:
                if not self.alive():
                    raise LocalSetupError(
                        f"llama-server exited while starting{self._exit_status()}"
                    )
                try:
                    answered = client.get(url).status_code == 200
                except httpx.TransportError:
                    answered = False
                # (the server holds the port while it runs: an answer then is its own)
                if answered and self.alive():
                    return
                if time.monotonic() > deadline:
                    raise LocalSetupError(f"llama-server was not healthy after {_START_TIMEOUT:g}s")
                time.sleep(0.05)

    def _move_log(self, path: Path) -> None:
        """Rename the log (the server writes on into it): over a dead server's log,
        never a live one's (a live server's log is named after the port it holds,
        or is a start's own new file)."""
        if self.log_path is not None and self.log_path != path:
            with _folder_locked(path.parent):  # (no pruning deletes it in between, if had)
                os.replace(self.log_path, path)
            self.log_path = path

    def stop(self) -> None:
        """Stop the server (closing the watchdog's stdin) and wait for it; idempotent."""
        process, self._process = self._process, None
        self._close_pipe()
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

    def _let_go(self) -> None:
        """In a forked child: close this process's copies of the server's pipes and log,
        leaving the server to the parent (whose exit must not wait for this child).

        The watchdog is not this child's: its `Popen` is marked as ended (as
        `Popen.wait` would), so that collecting it neither warns that it "is
        still running" (a `ResourceWarning`, an error under ``-W error``) nor
        tries to reap another process's child. The pipe's lock is a new one
        (another thread may have held it at the fork).
        """
        process, self._process = self._process, None
        self._pipe_lock = threading.Lock()
        self._pipe_readers = 0
        pipe, self._exit_pipe = self._exit_pipe, None
        closing, self._pipe_closing = self._pipe_closing, None
        log, self._log = self._log, None
        if process is not None:
            if process.stdin is not None:
                with contextlib.suppress(OSError):
                    process.stdin.close()
            if process.returncode is None:
                process.returncode = 0  # (not this child's to wait for)
        for end in (pipe, closing):
            if end is not None:
                with contextlib.suppress(OSError):
                    os.close(end)
        if log is not None:
            with contextlib.suppress(OSError):
                log.close()

    def _log_end(self) -> bytes:
        """The log's last bytes (all a start's error needs, whatever its size)."""
        assert self.log_path is not None
        with self.log_path.open("rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - _TAIL_BYTES))
            return log.read()

    def _log_tail(self, lines: int = 20) -> str:
        text = self._log_end().decode("utf-8", errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def __repr__(self) -> str:
        state = "running" if self.alive() else "stopped"
        where = self.base_url if self.port is not None else "no port yet"
        return f"LocalServer({self.model.name!r}, {where!r}, {state})"


def _ended(pipe: int, timeout: float | None) -> bool:
    """Whether the write end of ``pipe`` has closed (the server has exited), waiting up
    to ``timeout`` seconds (None: for good). Nothing is read: nobody writes into it, so
    it becomes readable only at its end of file."""
    poller = select.poll()
    poller.register(pipe, select.POLLIN | select.POLLHUP)
    waited = None if timeout is None else max(0, int(timeout * 1000))
    return bool(poller.poll(waited))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal has no name
        return f"signal {number}"


def _drop_stale_starts(logs: Path) -> None:
    """Delete the logs of starts whose process was killed before it learnt its port
    (no start lasts longer than its timeout: a log left that long is no live one's)."""
    stale = time.time() - 2 * _START_TIMEOUT
    for path in logs.glob(f"{_STARTING_LOG}*.log"):
        try:
            if path.stat().st_mtime < stale:
                path.unlink()
        except OSError:
            pass  # (gone already, or another process's to handle)


def prune_logs(logs: Path, kept: int = KEPT_LOGS) -> list[Path]:
    """Delete the ``llama-server-PORT.log`` files of servers no longer running but
    the newest ``kept`` of them (by modification time); return those deleted.

    A server's log is locked while the server runs (see `LocalServer.start`),
    whichever process owns it: a log whose lock cannot be taken is kept and
    not counted (so on a file system refusing locks none is deleted). The
    logs are taken newest first, one open at a time; the check that the file
    locked is still the one so named, and its deletion, hold the folder's
    lock, which a start's rename of its log into place also takes (a log is
    kept when that lock is not had within `_FOLDER_LOCK_WAIT`). Logs are
    opened for writing to be locked (NFS and CIFS need it). The starts' and
    the failed start's logs are left alone. On Windows (no ``flock``)
    nothing is deleted.
    """
    deleted: list[Path] = []
    if sys.platform != "win32":
        found = []
        try:
            for path in logs.iterdir():
                if _PORT_LOG.fullmatch(path.name):
                    with contextlib.suppress(OSError):  # (gone already)
                        found.append((path.stat().st_mtime, path))
        except OSError:
            return deleted  # (no logs yet)
        found.sort(reverse=True)
        dead = 0
        for _, path in found:
            try:
                # (for writing: NFS and CIFS lock only a file so opened; never written)
                handle = os.open(path, os.O_RDWR | os.O_APPEND)
            except OSError:
                continue  # (gone already, or not ours to write: not ours to delete)
            if try_lock(handle) != "locked":  # a running server's (or no locks here)
                os.close(handle)
                continue
            try:
                dead += 1
                if dead > kept and _delete_locked(path, handle):
                    deleted.append(path)
            finally:
                os.close(handle)  # (and its lock)
    return deleted


def _delete_locked(path: Path, handle: int) -> bool:
    """Delete ``path`` if it is still the file ``handle`` (locked) has open; whether it was.

    A later server on that port may have put its own log in its place since
    (a rename over it): that one stays. The folder's lock keeps such a rename
    from coming between the check and the deletion; without that lock, kept.
    """
    with _folder_locked(path.parent) as locked:
        if not locked:
            return False
        if same_file(handle, path):
            try:
                path.unlink()
                return True
            except OSError:
                pass  # (gone already, or another process's to handle)
    return False


@contextlib.contextmanager
def _folder_locked(folder: Path) -> Iterator[bool]:
    """Hold the log folder's lock, briefly: around a log's rename into place and a
    pruned log's check and deletion; yield whether it is held.

    The lock is a ``flock`` on the folder's hidden `_FOLDER_LOCK` file, opened
    for writing (NFS and CIFS lock only such a file). It is tried until
    `_FOLDER_LOCK_WAIT` has passed, never waited for longer: a process forked
    while another thread held it holds it until it exits. Where it is not had
    (that, Windows, a file system refusing locks) the caller goes on unlocked.
    """
    if sys.platform == "win32":
        yield False
    else:
        try:
            handle = os.open(folder / _FOLDER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            handle = None
        try:
            yield handle is not None and _lock_within(handle, time.monotonic() + _FOLDER_LOCK_WAIT)
        finally:
            if handle is not None:
                os.close(handle)  # (and its lock)


def _lock_within(handle: int, deadline: float) -> bool:
    """Take ``handle``'s ``flock``, trying until ``deadline`` (monotonic); whether taken."""
    while (taken := try_lock(handle)) == "held":  # try again shortly, until the deadline
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return taken == "locked"  # (else Windows, or a file system refusing locks)


def check_port(port: object) -> int:
    """``port`` itself, if it is a port: an ``int`` from 0 to 65535 (0: the server picks one).

    Raises:
        LocalSetupError: It is not (`port_problem`): out of range (``bind`` would
            raise an ``OverflowError`` only once the binary and model are ready),
            or not an ``int`` (``True`` would reach llama-server as ``--port True``).
    """
    problem = port_problem(port)
    if problem is not None:
        raise LocalSetupError(problem)
    assert isinstance(port, int)
    return port


def _taken(port: int) -> str:
    return (
        f"port {port} of 127.0.0.1 is taken: another process listens on it; "
        "pass a free port, or none to let the server pick one"
    )


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


_SERVERS: dict[tuple[Path, Path], LocalServer] = {}
_LOCK = threading.Lock()
#: Every server started in this process and not yet collected (`_forked`).
_STARTED: weakref.WeakSet[LocalServer] = weakref.WeakSet()
#: Held from a server's exit pipe made to its write end closed here, and by a fork
#: (`os.register_at_fork`): no child is forked holding that end.
_SPAWNING = threading.RLock()


def shared_server(binary: Path, model: Path) -> LocalServer:
    """The running server for ``(binary, model)`` in this process, started if needed."""
    with _LOCK:
        server = _SERVERS.get((binary, model))
        if server is None or not server.alive():
            if server is not None:
                server.stop()  # (gone: its watchdog follows at once, and its files close)
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


def _forked() -> None:
    """In a child forked from this process: the servers stay the parent's.

    The child lets go of its copies of their pipes: a child that outlived its
    parent kept the watchdog's stdin open, and the parent's exit waited 10 s
    for a watchdog that never saw it go. The child starts a server of its own
    if it needs one, and stops only that one at its exit.
    """
    global _LOCK, _SPAWNING
    _LOCK = threading.Lock()  # (another thread may have held it at the fork)
    _SPAWNING = threading.RLock()  # (held by the fork itself)
    for server in list(_STARTED):  # (before the table lets go of them: no Popen collected
        server._let_go()  # while it still looks running)
    _SERVERS.clear()


def _before_fork() -> None:
    _SPAWNING.acquire()  # (a start between its exit pipe and Popen finishes first)


def _after_fork_in_parent() -> None:
    _SPAWNING.release()


atexit.register(stop_all)  # also reached on Ctrl-C and on an uncaught error
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_forked
    )
