"""Which HTTP clients a transport makes for itself, and how they are closed.

The lean clients (`_aio_http`, `_sync_http`) are the default: in
``bench/bench_http.py`` they answer several times faster than httpx 0.28 and
keep up with aiohttp under 100 concurrent runs. They speak no proxy protocol,
so when ``HTTP(S)_PROXY`` / ``ALL_PROXY`` is set the transport makes httpx
clients instead (httpx reads those variables). A user who wants httpx anyway
injects one: ``http_client=httpx.AsyncClient()``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import httpx

from toolfold.adapters._http._aio_http import LeanClient
from toolfold.adapters._http._sync_http import LeanSyncClient

# Generous pool: a keep-alive cap below the concurrency makes httpx close and
# reopen connections under load (its default keeps 20).
_LIMITS = httpx.Limits(max_connections=1000, max_keepalive_connections=1000, keepalive_expiry=30.0)


def default_async_client(timeout: httpx.Timeout) -> Any:
    """The async client a transport makes for itself: lean, or httpx behind a proxy."""
    # The lean client is several times faster under concurrency (bench/bench_http.py);
    # it speaks no proxy protocol, so httpx takes over when a proxy is configured.
    if _proxy_configured():
        return httpx.AsyncClient(limits=_LIMITS, timeout=timeout)
    return LeanClient(timeout=timeout)


def default_sync_client(timeout: httpx.Timeout) -> Any:
    """The blocking client a transport makes for itself: lean, or httpx behind a proxy."""
    if _proxy_configured():
        return httpx.Client(limits=_LIMITS, timeout=timeout)
    return LeanSyncClient(timeout=timeout)


def _proxy_configured() -> bool:
    return any(
        os.environ.get(name)
        for name in _PROXY_VARIABLES + tuple(v.upper() for v in _PROXY_VARIABLES)
    )


_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


async def close_when_loop_ends(client: Any) -> AsyncIterator[None]:
    """An async generator to start on a loop; when the loop shuts down it closes ``client``."""
    # asyncio.run() finalises live async generators before closing the loop, so
    # the owned client's connections close on the loop that opened them.
    try:
        yield
    finally:
        await client.aclose()
