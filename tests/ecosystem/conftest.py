"""Helpers for the MCP tests: real servers as subprocesses, stopped by pid."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

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
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolfold.mcp",
            "serve",
            "tests.ecosystem.served_tools:TOOLS",
            "--http",
            "--port",
            "0",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
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
