"""A raw JSON-RPC MCP server over stdio listing tool names providers refuse.

Its tools are named with dots (MCP allows ``^[A-Za-z0-9._-]{1,128}$``) and one
is 70 characters long; each call answers with the name the server was called
by. With ``clash`` as its argument it also lists ``files_read``, which a dot
mapped to ``_`` would make ``files.read``'s twin; with ``reserved``, ``auto``,
``none`` and ``required`` (toolfold's reserved tool names, the ``tool_choice``
values) and ``Auto`` (not reserved: the check is case-sensitive); with ``cjk``,
``天気``, ``時間`` (both ``__`` once their characters become ``_``) and ``天気予報``. With ``keys``,
``files.read`` takes a parameter ``rule_name[]`` (a key Anthropic refuses).
"""

from __future__ import annotations

import json
import sys

LONG = "long." + "x" * 65
EXTRA = {
    "clash": ["files_read"],
    "reserved": ["auto", "none", "required", "Auto"],
    "cjk": ["天気", "時間", "天気予報"],
}
NAMES = ["files.read", LONG, *EXTRA.get(" ".join(sys.argv[1:]), [])]
KEYS = sys.argv[1:] == ["keys"]


def main() -> None:
    """Answer requests line by line until stdin closes."""
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "dotted", "version": "0"},
            }
        elif method == "tools/list":
            schema: dict[str, object] = {"type": "object", "properties": {}}
            keyed = {"type": "object", "properties": {"rule_name[]": {"type": "string"}}}
            result = {
                "tools": [
                    {
                        "name": name,
                        "inputSchema": keyed if KEYS and name == "files.read" else schema,
                    }
                    for name in NAMES
                ]
            }
        elif method == "tools/call":
            called = message["params"]["name"]
            result = {"content": [{"type": "text", "text": f"server called as {called}"}]}
        else:
            error = {"code": -32601, "message": method}
            print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}), flush=True)
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)


if __name__ == "__main__":
    main()
