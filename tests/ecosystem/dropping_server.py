"""The served tools over streamable HTTP, except that a request whose body holds ``DROP``
gets an event stream that ends without an answer (as a proxy cutting one stream would),
and one holding ``REFUSE-`` and a status (``REFUSE-403``) that status, with no JSON-RPC
answer (as a gateway refusing it would). Two holding ``PAIRED``, one refused and one
dropped, meet: the refusal waits for the dropped request to arrive, which is dropped
once the refusal is sent (a call failing while another, made beside it, is refused).

Run as ``python -m tests.ecosystem.dropping_server``; prints ``serving MCP on URL`` to
stderr once it listens.
"""

from __future__ import annotations

import asyncio
import re
import socket
import sys
from typing import Any

import uvicorn

from tests.ecosystem.served_tools import TOOLS
from toolfold.mcp import mcp_server

#: The events ``PAIRED`` requests meet by: "dropping" (the dropped one arrived), "refused".
_PAIR: dict[str, asyncio.Event] = {}


def _paired(what: str) -> asyncio.Event:
    return _PAIR.setdefault(what, asyncio.Event())


_APP = mcp_server(TOOLS).streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http" or scope["method"] != "POST":
        await _APP(scope, receive, send)
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    refused = re.search(rb"REFUSE-([0-9]{3})", body)
    paired = b"PAIRED" in body
    if refused:
        if paired:
            await _paired("dropping").wait()
        start = {"type": "http.response.start", "status": int(refused[1]), "headers": []}
        await send(start)
        await send({"type": "http.response.body", "body": b"refused"})
        if paired:
            _paired("refused").set()
        return
    if b"DROP" in body:
        if paired:
            _paired("dropping").set()
            await _paired("refused").wait()
            _PAIR.clear()
        start = {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
        await send(start)
        await send({"type": "http.response.body", "body": b""})
        return
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    await _APP(scope, replay, send)


if __name__ == "__main__":
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    print(f"serving MCP on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[listener])
