"""Every HTTP backend the transport runs on, for tests that must hold on each of them.

``OWNED`` names the clients a transport makes itself (``http=...``): httpx,
httpx2 where installed (Python 3.11+), aiohttp. aiohttp is async only: a
blocking call of a transport built with ``http="aiohttp"`` uses the default
client, so blocking cases leave it out rather than test the default twice.
"""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import Any

import pytest

from toolfold.adapters import Transport

httpx2: ModuleType | None  # None where it is not installed
try:
    import httpx2
except ImportError:  # Python 3.10: httpx2 needs 3.11+
    httpx2 = None

OWNED = ["httpx", *(["httpx2"] if httpx2 is not None else []), "aiohttp"]
ASYNC_ONLY = {"aiohttp"}
MODES = ("sync", "async")
STREAMED = ("blocking-sync", "blocking-async", "stream-sync", "stream-async")


def cases(modes: tuple[str, ...] = MODES) -> list[Any]:
    """``pytest.param(backend, mode)`` for every backend and every mode it serves."""
    return [
        pytest.param(backend, mode, id=f"{backend}-{mode}")
        for backend in OWNED
        for mode in modes
        if not (backend in ASYNC_ONLY and mode.endswith("sync") and not mode.endswith("async"))
    ]


def post_once(transport: Transport, mode: str) -> Any:
    """One POST of ``{"m": 1}`` to ``chat`` in ``mode`` (``sync`` or ``async``); the transport is closed after."""
    if mode == "sync":
        with transport:
            return transport.post_json_sync("chat", {"m": 1})

    async def run() -> Any:
        async with transport:
            return await transport.post_json("chat", {"m": 1})

    return asyncio.run(run())
