"""toolfold's served test tools over streamable HTTP, answering only requests that carry a token.

``python -m tests.ecosystem.guarded_server TOKEN`` serves `served_tools.TOOLS`
on a free 127.0.0.1 port (printed to stderr once it listens); a request whose
``Authorization`` header is not ``Bearer TOKEN`` gets a 401, so a client that
reaches its tools has sent the header.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import uvicorn

from tests.ecosystem.served_tools import TOOLS
from toolfold.mcp import mcp_server


def main() -> None:
    """Serve until killed."""
    expected = f"Bearer {sys.argv[1]}".encode()
    app = mcp_server(TOOLS).streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"no token"})
            return
        await app(scope, receive, send)

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    print(f"serving MCP on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[listener])


if __name__ == "__main__":
    main()
