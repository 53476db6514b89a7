"""An MCP server built with the `mcp` SDK that answers the handshake, then never answers tools/list.

Run over stdio: ``python tests/ecosystem/hanging_list_server.py FIFO``. When the
tools/list request arrives it opens the FIFO ``FIFO`` for writing (so a test
reading it knows the listing is under way), then waits for good.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def main() -> None:
    """Serve over stdio until the client goes away."""
    fifo = sys.argv[1]

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        await anyio.to_thread.run_sync(lambda: open(fifo, "w").close())
        await anyio.sleep_forever()

    server = Server("hanging-list", on_list_tools=on_list_tools)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
