"""The ``toolfold`` command run in a subprocess, as the CLI tests run it (test_cli.py and
test_cli_guards.py): no API keys, this checkout's toolfold first on the path."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from child_processes import dies_with_this_process

ROOT = Path(__file__).resolve().parents[2]
COMMAND = [sys.executable, "-m", "toolfold._cli"]


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """This environment with no API keys, ``env`` added, and this checkout's toolfold first
    on the path (the interpreter's installed one may be another checkout's)."""
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    given = {**clean, **(env or {})}
    paths = [str(ROOT), *filter(None, [given.get("PYTHONPATH")])]
    return {**given, "PYTHONPATH": os.pathsep.join(paths)}


def toolfold(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``toolfold ARGS`` in a subprocess with no API keys and stdin not a terminal."""
    return subprocess.run(
        [*COMMAND, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=environment(env),
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def with_stdout_closed(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``toolfold ARGS >&-``: the command starts with no descriptor 1 at all."""
    return _with_stdout(args, cwd, None, lambda: os.close(1))


def into_closed_pipe(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``toolfold ARGS | true``: stdout a pipe whose reader has already gone away."""
    read, write = os.pipe()
    os.close(read)
    try:
        return _with_stdout(args, cwd, write, None)
    finally:
        os.close(write)


def _with_stdout(
    args: list[str], cwd: Path, stdout: int | None, preexec_fn: Callable[[], object] | None
) -> subprocess.CompletedProcess[str]:
    """``toolfold ARGS`` with ``stdout`` (None: this process's), stderr read as text."""
    return subprocess.run(
        [*COMMAND, *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=environment(),
        text=True,
        timeout=60,
        preexec_fn=preexec_fn,
    )


def interruptible(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``toolfold ARGS`` started with Ctrl-C's default handling, its output piped; used as
    ``with interruptible(...) as proc``."""
    return subprocess.Popen(
        [*COMMAND, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=environment(env),
        # (a process started in the background inherits SIGINT ignored: Python's own handler)
        preexec_fn=dies_with_this_process(lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)),
    )


def read_until(stream: IO[Any] | None, marker: bytes, missing: str, name: str) -> bytes:
    """What ``stream`` (a pipe) gives until ``marker`` is in it, within 60 s a read;
    failing with ``missing`` (or that ``name`` ended) and what came so far otherwise."""
    assert stream is not None
    seen = b""
    while marker not in seen:
        ready, _, _ = select.select([stream], [], [], 60)
        assert ready, f"{missing}; so far: {seen!r}"
        chunk = os.read(stream.fileno(), 1024)
        assert chunk, f"{name} ended early; so far: {seen!r}"
        seen += chunk
    return seen
