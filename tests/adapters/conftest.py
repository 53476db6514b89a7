"""Fixtures shared by the adapter tests: a scripted HTTP server on 127.0.0.1, the events it
waits on, the fault server, models made from a spec.

Import the building blocks in a test module with
``from scripted_http import Cut, Recorded, Reply, ScriptedServer, sse``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fault_matrix import fault_server
from scripted_http import ScriptedServer

import toolfold


@pytest.fixture
def http_server() -> Iterator[ScriptedServer]:
    """A scripted HTTP server on 127.0.0.1, stopped after the test."""
    server = ScriptedServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def made() -> Iterator[Any]:
    """``made(spec, **options)``: a model of ``toolfold.model`` (with an API key
    but for Ollama), closed after the test."""
    models: list[Any] = []

    def make(spec: str, **options: Any) -> Any:
        if not spec.startswith("ollama:"):
            options.setdefault("api_key", "k")
        models.append(toolfold.model(spec, **options))
        return models[-1]

    yield make
    for model in models:
        model.close()


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    """Models (and clients) made by a test, closed after it: they hold sockets."""
    models: list[Any] = []
    yield models
    for made in models:
        made.close()


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port of 127.0.0.1 where a connection is refused, for the whole test.

    A socket bound to it and not listening holds it: a port found free and
    closed again could be taken by a server of another test run on the machine
    (scripts/check runs three at once) or be the client's own port (TCP
    self-connect) before the test connects.
    """
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


@pytest.fixture
def released() -> Iterator[list[threading.Event]]:
    """Events the server may wait on (`scripted_http.gate`); all set at teardown, so no server thread hangs."""
    events: list[threading.Event] = []
    yield events
    for event in events:
        event.set()


@pytest.fixture(scope="module")
def fault_url() -> Iterator[str]:
    """The fault server's base URL (``fault_server.py`` in its own process), one per module."""
    with fault_server() as url:
        yield url
