"""Helpers for the MCP tests: real servers as subprocesses, stopped by pid."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from child_processes import dies_with_this_process

ROOT = Path(__file__).resolve().parents[2]


def children() -> set[int]:
    """Pids of this process's live (non-zombie) children, read from /proc."""
    found = set()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry))
    return found


@pytest.fixture
def http_tools_server() -> Iterator[str]:
    """toolfold's own MCP server over streamable HTTP, as a subprocess; yields its URL."""
    with serving_tools("--port", "0") as url:
        yield url


@contextlib.contextmanager
def serving_tools(
    *options: str, tools: str = "tests.ecosystem.served_tools:TOOLS"
) -> Iterator[str]:
    """`python -m toolfold.mcp serve TOOLS` (the served tools) with ``--http OPTIONS``, as a
    subprocess: its URL, the server killed on exit."""
    command = ["-m", "toolfold.mcp", "serve", tools, "--http"]
    yield from _http_server([*command, *options])


@pytest.fixture
def http_media_server() -> Iterator[str]:
    """The mcp SDK media server of media_server.py over streamable HTTP; yields its URL."""
    yield from _http_server([str(ROOT / "tests/ecosystem/media_server.py"), "--http"])


#: The token `http_guarded_server` wants in ``Authorization: Bearer ...``.
GUARD_TOKEN = "sk-GUARDED-0451"


@pytest.fixture
def http_guarded_server() -> Iterator[str]:
    """The served tools over streamable HTTP, answering only ``Bearer GUARD_TOKEN``; yields its URL."""
    yield from _http_server(["-m", "tests.ecosystem.guarded_server", GUARD_TOKEN])


@pytest.fixture
def http_dropping_server() -> Iterator[str]:
    """The served tools over streamable HTTP, cutting the stream of a request holding
    ``DROP``; yields its URL."""
    yield from _http_server(["-m", "tests.ecosystem.dropping_server"])


@pytest.fixture
def http_echoing_server() -> Iterator[str]:
    """A raw MCP server over streamable HTTP that echoes the Authorization header into a
    malformed notification before a call's answer; yields its URL."""
    yield from _http_server(["-m", "tests.ecosystem.echoing_server"])


def _http_server(arguments: list[str]) -> Iterator[str]:
    """Start ``python ARGUMENTS`` (a server printing its URL to stderr); yield the URL, then kill it."""
    process = subprocess.Popen(
        [sys.executable, *arguments],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=dies_with_this_process(),
    )
    drain: threading.Thread | None = None
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # printed once the socket listens
        assert line.startswith("serving MCP on "), line
        # keep draining its stderr, so a chatty server never blocks on a full pipe
        drain = threading.Thread(target=process.stderr.read, daemon=True)
        drain.start()
        yield line.removeprefix("serving MCP on ").strip()
    finally:
        process.kill()
        process.wait(timeout=10)
        if process.stderr is not None:
            if drain is not None:
                drain.join(timeout=10)
            process.stderr.close()
