"""A raw MCP server over streamable HTTP that echoes the request's Authorization header.

It speaks just enough of the protocol for a client to list and call its tools:
``t``, whose answer is preceded by a malformed ``notifications/progress`` (its
``progress`` a string) holding the header's value, which the MCP SDK's client
logs with the validation error; and ``whoami``, which answers with the header's
value in its text and its structured content (as a key too, beside a key ``***``),
with the ``X-Tenant`` and ``User-Agent`` headers and the request's path. Run with
``python -m tests.ecosystem.echoing_server``: it listens on a free 127.0.0.1
port and prints ``serving MCP on URL`` to stderr.
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", kind: str = "application/json") -> None:
        self.send_response(status)
        if body:
            self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(405)

    def do_DELETE(self) -> None:
        self._send(200)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        if "id" not in message:
            self._send(202)
            return
        method, ident = message["method"], message["id"]
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "echoing", "version": "0"},
            }
        elif method == "tools/list":
            result = {
                "tools": [
                    {"name": name, "inputSchema": {"type": "object"}} for name in ("t", "whoami")
                ]
            }
        elif method == "tools/call" and message["params"]["name"] == "whoami":
            echoed = self.headers.get("Authorization", "")
            result = {
                "content": [{"type": "text", "text": f"you sent {echoed}"}],
                "structuredContent": {
                    "sent": echoed,
                    echoed: "as a key",
                    "***": "a key of its own",
                    "tenant": self.headers.get("X-Tenant", ""),
                    "agent": self.headers.get("User-Agent", ""),
                    "path": self.path,
                },
            }
        elif method == "tools/call":
            echoed = self.headers.get("Authorization", "")
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": f"bad {echoed}"},
            }
            answer = {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {"content": [{"type": "text", "text": "ok"}]},
            }
            events = "".join(f"event: message\ndata: {json.dumps(m)}\n\n" for m in (note, answer))
            self._send(200, events.encode(), "text/event-stream")
            return
        else:
            error = {"code": -32601, "message": "Method not found"}
            self._send(200, json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}).encode())
            return
        self._send(200, json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode())


def main() -> None:
    """Serve until killed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    print(f"serving MCP on http://127.0.0.1:{server.server_port}/mcp", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
