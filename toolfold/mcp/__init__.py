"""MCP (Model Context Protocol) both ways, with the official ``mcp`` SDK.

As a client, an MCP server is a tool source an agent holds next to its tools::

    Agent(model, tools=[get_weather, MCPServerStdio("mcp-server-time", prefix="time")])

As a server, any list of toolfold tools is served to MCP hosts::

    python -m toolfold.mcp serve mypackage.tools:TOOLS            # stdio
    python -m toolfold.mcp serve mypackage.tools:TOOLS --http --port 8000

Install with ``pip install 'toolfold[mcp]'``. Nothing in toolfold's core imports
this package.
"""

from toolfold.mcp._client import (
    MCPError,
    MCPServer,
    MCPServerHTTP,
    MCPServerStdio,
    MCPToolsChangedWarning,
)
from toolfold.mcp._server import load_tools, mcp_server, serve

__all__ = [
    "MCPError",
    "MCPServer",
    "MCPServerHTTP",
    "MCPServerStdio",
    "MCPToolsChangedWarning",
    "load_tools",
    "mcp_server",
    "serve",
]

for _name in __all__:
    globals()[_name].__module__ = __name__
