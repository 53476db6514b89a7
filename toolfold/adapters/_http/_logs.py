"""Keys kept out of the HTTP stacks' own DEBUG logs, with nothing for the user to install.

httpcore and httpcore2 log the response headers at DEBUG, and a server may
echo the key in one. A filter on the ``httpcore`` logger does not see the
records of ``httpcore.http11``, so the filter goes on each logger that emits
(their names are fixed in those packages). Every transport adds its key here,
and the password of its base URL (httpx logs each request's URL at INFO); the
filter only runs for records a logger actually emits, so it costs nothing while
DEBUG logging is off. `redact_logs` still covers handlers and loggers of the
user's own.
"""

from __future__ import annotations

import logging

from toolfold.adapters._http._keys import Scrubs, Secret, scrub_record, scrubs

__all__ = ["guard_logs"]

_EMITTERS = (
    *(
        f"{core}.{part}"
        for core in ("httpcore", "httpcore2")
        for part in ("connection", "connection_pool", "http11", "http2", "proxy", "socks")
    ),
    "httpx",
    "httpx2",
    "aiohttp.client",
    "aiohttp.internal",
    "toolfold.http",
    # the MCP SDK's client, which logs an HTTP server's URL and answers (`MCPServerHTTP`)
    "mcp.client.streamable_http",
    "mcp.client.sse",
    "mcp.client.client",
    "mcp.shared.jsonrpc_dispatcher",
)


class _KeyFilter(logging.Filter):
    """Scrubs every key a transport was given from the records it sees.

    What to replace is worked out (`scrubs`) when a key
    is added, not for each record; a record sees one tuple, swapped whole, so
    a transport made on another thread never changes it under a filter.
    """

    def __init__(self) -> None:
        super().__init__()
        self.keys: frozenset[Secret] = frozenset()
        self.scrubs: Scrubs = ()

    def add(self, secret: Secret) -> None:
        """Scrub ``secret`` too."""
        self.keys = self.keys | {secret}
        self.scrubs = scrubs(self.keys)

    def filter(self, record: logging.LogRecord) -> bool:
        scrub_record(record, self.scrubs)
        return True


_FILTER = _KeyFilter()


def guard_logs(*secrets: Secret | None) -> None:
    """Keep ``secrets`` out of the DEBUG records of httpx, httpcore, httpx2, httpcore2, aiohttp
    and the MCP SDK's client."""
    for secret in secrets:
        if not secret or secret in _FILTER.keys:
            continue
        if not _FILTER.keys:
            for name in _EMITTERS:
                logging.getLogger(name).addFilter(_FILTER)
        _FILTER.add(secret)
