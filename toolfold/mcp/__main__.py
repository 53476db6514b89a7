"""``python -m toolfold.mcp serve module:tools [--http] [--host H] [--port P]``."""

from __future__ import annotations

import argparse
import sys

from toolfold._errors import ModelConfigError, ToolDefinitionError, UsageError
from toolfold.mcp._server import check_address, load_tools, mcp_server, serve_server


def main(argv: list[str] | None = None, *, prog: str = "python -m toolfold.mcp") -> int:
    """Run the command line; returns the exit code (2 for a bad tool path or address,
    1 without the mcp extra)."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Serve toolfold tools to MCP hosts (docs/mcp.md)."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    serving = commands.add_parser("serve", help="serve toolfold tools as an MCP server")
    serving.add_argument("tools", help="package.module:name (a Tool, a function, or a list)")
    serving.add_argument("--http", action="store_true", help="streamable HTTP instead of stdio")
    serving.add_argument(
        "--host", default="127.0.0.1", help="for --http: a host name, IPv4 or IPv6 address"
    )
    serving.add_argument(
        "--port", type=int, default=8000, help="for --http: 0 to 65535 (0: a free one)"
    )
    serving.add_argument(
        "--path", default="/mcp", help="for --http: the endpoint path, starting with /"
    )
    serving.add_argument("--name", default="toolfold", help="the server name hosts show")
    serving.add_argument(
        "--approved-by-host",
        action="store_true",
        help="serve tools that require approval, leaving the approval to the MCP host",
    )
    args = parser.parse_args(argv)
    try:
        if args.http:  # (before the tools' module runs: a mistyped flag is said at once)
            check_address(args.host, args.port, args.path)
    except UsageError as exc:
        print(f"toolfold mcp: {exc}", file=sys.stderr)
        return 2
    try:
        tools = load_tools(args.tools)
        server = mcp_server(tools, name=args.name, approved_by_host=args.approved_by_host)
    except ToolDefinitionError as exc:
        print(f"toolfold mcp: {exc}", file=sys.stderr)
        return 2
    except ModelConfigError as exc:  # the mcp extra is not installed
        print(f"toolfold mcp: {exc}", file=sys.stderr)
        return 1
    try:
        serve_server(
            server,
            transport="http" if args.http else "stdio",
            host=args.host,
            port=args.port,
            path=args.path,
        )
    except UsageError as exc:  # it cannot listen there
        print(f"toolfold mcp: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
