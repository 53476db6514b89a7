"""Fixtures shared by the runtime's tests."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from toolfold.runtime.drive import _workers


@pytest.fixture
def one_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """A private pool of one worker; the event releases tools blocked during the test."""
    monkeypatch.setattr(_workers, "MAX_WORKERS", 1)
    monkeypatch.setattr(_workers, "_WORKERS", _workers._Workers())
    release = threading.Event()
    yield release
    release.set()
