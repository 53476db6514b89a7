"""An MCP server built with the `mcp` SDK whose tools answer with images, resources and structured content.

Structured content comes alone with its JSON text (``weather``), as the MCP SDK's
server sends a wrapped value (``wrapped``, ``items``), beside an image
(``chart_data``, ``plotted``) or a text saying more (``noted``), and in an error
result (``quota``, ``quota_said``).

Run over stdio: ``python tests/ecosystem/media_server.py``, or over streamable
HTTP with ``--http`` (on a free 127.0.0.1 port, printed to stderr once it
listens). The content is fixed, so tests can check the bytes that reach a
model's request.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

# A 1x1 PNG (the smallest valid one): what "chart" draws.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAcCBlCwAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n% a tiny stand-in document\n"
README = "# Notes\nEverything is <fine>."
EMPTY: dict[str, Any] = {"type": "object", "properties": {}}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _content(name: str) -> types.CallToolResult:
    if name == "chart":
        return types.CallToolResult(
            content=[
                types.TextContent(text="Sales by month:"),
                types.ImageContent(data=_b64(PNG), mime_type="image/png"),
            ]
        )
    if name == "readme":
        return types.CallToolResult(
            content=[
                types.EmbeddedResource(
                    resource=types.TextResourceContents(
                        uri="file:///notes/README.md", mime_type="text/markdown", text=README
                    )
                ),
                types.EmbeddedResource(
                    resource=types.BlobResourceContents(
                        uri="file:///notes/report.pdf", mime_type="application/pdf", blob=_b64(PDF)
                    )
                ),
            ]
        )
    if name == "weather":
        data = {"city": "Oslo", "celsius": -3}
        return types.CallToolResult(
            content=[types.TextContent(text='{"city": "Oslo", "celsius": -3}')],
            structured_content=data,
        )
    if name == "chart_data":  # its JSON text, an image and the data
        return types.CallToolResult(
            content=[
                types.TextContent(text='{"points": 3}'),
                types.ImageContent(data=_b64(PNG), mime_type="image/png"),
            ],
            structured_content={"points": 3},
        )
    if name == "plotted":  # an image and the data, no text
        image = types.ImageContent(data=_b64(PNG), mime_type="image/png")
        return types.CallToolResult(content=[image], structured_content={"points": 3})
    if name == "noted":  # a text that says more than the (empty) data
        text = types.TextContent(text="Important: the deploy failed on host 3")
        return types.CallToolResult(content=[text], structured_content={})
    if name == "wrapped":  # the MCP SDK's server for a tool returning a string
        text = types.TextContent(text="hello")
        return types.CallToolResult(content=[text], structured_content={"result": "hello"})
    if name == "items":  # ... and for one returning a list: a block per item
        texts = [types.TextContent(text="a"), types.TextContent(text="b")]
        return types.CallToolResult(content=texts, structured_content={"result": ["a", "b"]})
    if name in ("quota", "quota_said"):  # an error with its data (and its JSON text)
        data = {"error": "quota exceeded, retry after 60 s"}
        said = [types.TextContent(text=json.dumps(data))] if name == "quota_said" else []
        return types.CallToolResult(content=said, structured_content=data, is_error=True)
    if name in ("garbled", "garbled_error"):  # an image whose data is no base64
        image = types.ImageContent(data="!!!notbase64@@@", mime_type="image/png")
        return types.CallToolResult(content=[image], is_error=name == "garbled_error")
    if name == "link":
        return types.CallToolResult(
            content=[types.ResourceLink(uri="file:///notes/big.csv", name="big.csv")]
        )
    return types.CallToolResult(content=[types.TextContent(text=f"no tool {name}")], is_error=True)


def main() -> None:
    """Serve the tools over stdio until the client goes away."""
    tools = [
        types.Tool(name=name, description=f"The {name} tool.", input_schema=EMPTY)
        for name in (
            *("chart", "readme", "weather", "link", "garbled", "garbled_error"),
            *("chart_data", "plotted", "noted", "wrapped", "items", "quota", "quota_said"),
        )
    ]

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        return _content(params.name)

    server = Server("media", on_list_tools=on_list_tools, on_call_tool=on_call_tool)
    if "--http" in sys.argv:
        import socket

        import uvicorn

        app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        print(f"serving MCP on http://127.0.0.1:{port}/mcp", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        uvicorn.Server(config).run(sockets=[listener])
        return

    async def over_stdio() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(over_stdio)


if __name__ == "__main__":
    main()
