"""Fixtures shared by the runtime's tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from core_helpers import private_pool


@pytest.fixture
def one_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """A private pool of one worker; the event releases tools blocked during the test."""
    private_pool(monkeypatch, 1)
    release = threading.Event()
    yield release
    release.set()
