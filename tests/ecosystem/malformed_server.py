"""A raw JSON-RPC MCP server over stdio whose tools/call answer is malformed.

It speaks just enough of the handshake for a client to list its one tool; the
call's result has ``content`` as a number, which no MCP client can accept.
With ``cursor`` as its argument its tools/list pages never end, each giving
the cursor ``again`` as the next one; with ``pages``, each a new one
(``page-1``, ``page-2``...).
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    """Answer requests line by line until stdin closes."""
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "malformed", "version": "0"},
            }
        elif method == "tools/list":
            schema = {"type": "object", "properties": {}}
            result = {"tools": [{"name": "broken", "inputSchema": schema}]}
            if sys.argv[1:] == ["cursor"]:
                result["nextCursor"] = "again"
            elif sys.argv[1:] == ["pages"]:
                cursor = (message.get("params") or {}).get("cursor") or "page-0"
                result["nextCursor"] = f"page-{int(cursor.removeprefix('page-')) + 1}"
        elif method == "tools/call":
            result = {"content": 5}
        else:
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32601, "message": method},
            }
            print(json.dumps(reply), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)


if __name__ == "__main__":
    main()
