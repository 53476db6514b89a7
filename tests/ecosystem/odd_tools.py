"""Tools that end in ways a tool should not: served by the MCP tests, which check one such
call does not end the server."""

from __future__ import annotations

import asyncio
import sys

from tests.ecosystem.served_tools import add
from toolfold import tool


@tool
async def stray_cancel() -> str:
    """Await an inner task that was cancelled: a CancelledError while nothing cancels the call."""
    inner = asyncio.ensure_future(asyncio.Event().wait())
    inner.cancel()
    await inner
    return "unreachable"


@tool
def exits() -> str:
    """Call sys.exit(3)."""
    sys.exit(3)


TOOLS = [stray_cancel, exits, add]
