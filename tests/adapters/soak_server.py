"""A faulty Chat Completions server on asyncio (aiohttp.web) that keeps a ledger, run as its own process.

    python tests/adapters/soak_server.py      # prints "READY <port>", serves until killed

Made for the soak test (``soak.py``): thousands of concurrent requests on a
loaded 2-core machine, so it runs on one event loop with a listen backlog of
4096 instead of a thread per connection. It answers
``POST /v1/chat/completions`` with JSON, or SSE when the body asks for
``"stream": true``, and decides what to do from the request body alone: the
first user message reads ``"add 2 and 3 #run=<id> fault=<name> times=<n>"``.
The 1st step of a run (one message) gets a call of ``add(2, 3)``; its 2nd
step (the tool's result appended) gets the fault on its first ``times``
sightings, then the answer ``The sum is 5.``. A request with the header
``x-phase: resume`` (a user resuming the failed run) always gets the answer.

Faults: ``none``; ``429`` (``retry-after-ms: 1``) and ``500``, retryable;
``reset`` (the request is read, then the connection is reset with no
answer); ``cut`` (half the announced body, then the connection closes);
``inband`` (an error object inside a 200); ``malformed`` (a 200 whose body is
not JSON); ``big`` (a 200 with a 300 KiB body); ``bomb`` (a 200 whose gzip
body inflates to 16 MiB); ``hang`` (no answer until the client leaves);
``drip`` (a 200 whose body comes a byte every 20 ms until the client leaves);
``barrier-<n>`` (held until ``n`` such requests are held at once, then all
are answered: only a client with ``n`` free connections gets through).

Every request is written to a ledger before it is answered: ``GET /ledger``
returns it as ``[run, phase, step, sha256 of the body, action]`` rows, so a
test can account for every request the server saw.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import re
import socket
import struct
import sys
from collections import Counter
from typing import Any

from aiohttp import web
from fault_server import ANSWER, TOOL_CALL, chunks

_PROMPT = re.compile(r"#run=(\S+) fault=(\S+) times=(\d+)")


ERROR = {"error": {"message": "injected", "type": "server_error"}}
BOMB = gzip.compress(b"\0" * 16 * 2**20)


def _sse(completion: dict[str, Any]) -> bytes:
    return b"".join(chunks(completion))


class Soak:
    """The server's state: the ledger, sightings per body, the barriers."""

    def __init__(self) -> None:
        self.ledger: list[tuple[str, str, int, str, str]] = []
        self.seen: Counter[str] = Counter()
        self.barriers: dict[str, tuple[asyncio.Event, list[int]]] = {}

    async def chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body = json.loads(raw)
        stream = bool(body.get("stream"))
        messages = body["messages"]
        match = _PROMPT.search(messages[0]["content"])
        assert match is not None, messages[0]
        run, fault, times = match[1], match[2], int(match[3])
        phase = request.headers.get("x-phase", "main")
        step = 1 if len(messages) == 1 else 2
        digest = hashlib.sha256(raw).hexdigest()
        self.seen[digest] += 1
        action = "answer"
        if fault.startswith("barrier-"):
            action = fault
        elif step == 1:
            action = "tool-call"
        elif phase == "main" and fault != "none" and self.seen[digest] <= times:
            action = fault
        self.ledger.append((run, phase, step, digest, action))
        if action == "tool-call":
            return _reply(TOOL_CALL, stream)
        if action == "answer":
            return _reply(ANSWER, stream)
        return await self.fault(request, action, stream)

    async def fault(self, request: web.Request, fault: str, stream: bool) -> web.StreamResponse:
        if fault == "429":
            return _json(ERROR, status=429, headers={"retry-after-ms": "1"})
        if fault == "500":
            return _json(ERROR, status=500)
        if fault == "inband":
            if stream:
                return _raw(f"data: {json.dumps(ERROR)}\n\n".encode(), "text/event-stream")
            return _json(ERROR)
        if fault == "malformed":
            if stream:
                return _raw(b'data: {"choices": [\n\n', "text/event-stream")
            return _raw(b'{"choices": [', "application/json")
        if fault == "big":
            return _raw(b" " * 300 * 2**10, "application/json")
        if fault == "bomb":
            response = _raw(BOMB, "application/json")
            response.headers["content-encoding"] = "gzip"
            return response
        if fault.startswith("barrier-"):
            await self.barrier(fault, int(fault.split("-")[1]))
            return _reply(ANSWER, stream)
        if fault == "reset":
            _reset(request)
        elif fault == "cut":
            await _cut(request, stream)
        elif fault == "hang":
            await asyncio.Event().wait()  # until the client leaves (the handler is cancelled)
        elif fault == "drip":
            await _drip(request)
        raise web.HTTPBadRequest(text=f"unknown fault {fault}")

    async def barrier(self, name: str, size: int) -> None:
        event, held = self.barriers.setdefault(name, (asyncio.Event(), [0]))
        held[0] += 1
        if held[0] == size:
            event.set()
            del self.barriers[name]
        await event.wait()

    async def get_ledger(self, request: web.Request) -> web.Response:
        return web.json_response(self.ledger)


def _reply(completion: dict[str, Any], stream: bool) -> web.Response:
    if stream:
        return _raw(_sse(completion), "text/event-stream")
    return _json(completion)


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=json.dumps(body).encode(), status=status, headers=headers,
                        content_type="application/json")  # fmt: skip


def _raw(body: bytes, content_type: str) -> web.Response:
    return web.Response(body=body, headers={"content-type": content_type})


def _reset(request: web.Request) -> None:
    transport = request.transport
    assert transport is not None
    sock = transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def _cut(request: web.Request, stream: bool) -> None:
    whole = _sse(ANSWER) if stream else json.dumps(ANSWER).encode()
    response = web.StreamResponse(headers={"content-length": str(len(whole))})
    response.content_type = "text/event-stream" if stream else "application/json"
    await response.prepare(request)
    await response.write(whole[: len(whole) // 2])
    assert request.transport is not None
    request.transport.close()  # flushes the half, then closes


async def _drip(request: web.Request) -> None:
    response = web.StreamResponse(headers={"content-length": "100000"})
    response.content_type = "application/json"
    await response.prepare(request)
    while True:
        await response.write(b" ")
        await asyncio.sleep(0.02)


async def serve() -> None:
    soak = Soak()
    app = web.Application(client_max_size=2**24)
    app.router.add_post("/v1/chat/completions", soak.chat)
    app.router.add_get("/ledger", soak.get_ledger)
    # handler_cancellation: a hang or drip handler ends when its client leaves.
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    port = runner.addresses[0][1]
    print(f"READY {port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    import logging

    # A client that hangs up on a cut, reset, hanging or dripping answer is the point of the fault.
    logging.getLogger("aiohttp").setLevel(logging.CRITICAL)
    asyncio.run(serve())


if __name__ == "__main__":
    sys.exit(main())
