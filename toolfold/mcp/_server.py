"""toolfold tools served as an MCP server, so they work in any MCP host unchanged.

The tools keep everything `@tool` gave them: the derived schema and
descriptions are what the host lists, arguments are validated and structured
exactly as in a toolfold run, and a bad argument or a tool exception comes back
as an error result (``isError``) the host's model can read and correct.
"""

from __future__ import annotations

import base64
import importlib
import inspect
from collections.abc import Iterable, Sequence
from typing import Any

import anyio

from toolfold._errors import ToolArgumentError, ToolDefinitionError
from toolfold.runtime.core._messages import FilePart, ImagePart, TextPart, result_content
from toolfold.toolkit import Tool, tool
from toolfold.toolkit._tool import check_tool_names

__all__ = ["load_tools", "mcp_server", "serve"]


def mcp_server(
    tools: Iterable[Tool[..., Any]], *, name: str = "toolfold", instructions: str | None = None
) -> Any:
    """An MCP server (the SDK's low-level ``Server``) that lists and runs `tools`.

    Args:
        tools: The tools to serve; names must be unique.
        name: The server name hosts show.
        instructions: Optional instructions for the host's model.

    Returns:
        An ``mcp.server.lowlevel.Server``; run it with `serve`, or mount
        ``server.streamable_http_app()`` in your own ASGI application.

    Raises:
        ToolDefinitionError: Two tools share a name, or a tool has no function
            (its calls could not be answered).
    """
    import mcp_types as types
    from mcp.server.lowlevel import Server

    by_name = check_tool_names(tools)
    manual = [t.name for t in by_name.values() if t.function is None]
    if manual:
        raise ToolDefinitionError(
            "mcp_server",
            [f"tool {n!r} has no function, so an MCP host could not call it" for n in manual],
        )
    listing = types.ListToolsResult(
        tools=[
            types.Tool(name=t.name, description=t.description, input_schema=dict(t.parameters))
            for t in by_name.values()
        ]
    )

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return listing

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        found = by_name.get(params.name)
        if found is None:
            known = ", ".join(sorted(by_name))
            return _error(f"unknown tool {params.name!r}; the tools are: {known}")
        try:
            content = await _run(found, dict(params.arguments or {}))
        except ToolArgumentError as exc:
            return _error(exc.message_for_model)
        except Exception as exc:
            message = str(exc)
            return _error(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)
        return types.CallToolResult(content=content)

    return Server(
        name, instructions=instructions, on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )


async def _run(found: Tool[..., Any], arguments: dict[str, Any]) -> list[Any]:
    import mcp_types as types

    values = found.validate_arguments(arguments)
    if found.is_async:
        result = await found.invoke(values)
    else:
        result = await anyio.to_thread.run_sync(found.invoke, values)
        if inspect.isawaitable(result):
            result = await result
    parts = result_content(result)
    if parts is None:
        return [types.TextContent(text=found.format_result(result))]
    return [_block(part) for part in parts]


def _block(part: TextPart | ImagePart | FilePart) -> Any:
    """A result part as an MCP content block (images inline; files as embedded resources)."""
    import mcp_types as types

    if isinstance(part, TextPart):
        return types.TextContent(text=part.text)
    if part.data is None:  # by URL only: a link to it
        name = getattr(part, "filename", None) or str(part.url)
        return types.ResourceLink(uri=str(part.url), name=name, mime_type=part.media_type)
    data = base64.b64encode(part.data).decode()
    if isinstance(part, ImagePart):
        return types.ImageContent(data=data, mime_type=part.media_type)
    uri = (
        part.filename
        if part.filename and ":" in part.filename
        else f"file:///{part.filename or 'file'}"
    )
    blob = types.BlobResourceContents(uri=uri, mime_type=part.media_type, blob=data)
    return types.EmbeddedResource(resource=blob)


def _error(text: str) -> Any:
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def load_tools(spec: str) -> tuple[Tool[..., Any], ...]:
    """Tools named by import path: ``package.module:name`` or ``package.module``.

    ``name`` may be a `Tool`, a plain function (made a tool with ``@tool``), or a
    list/tuple of either. A bare module path serves every `Tool` defined at the
    module's top level.

    Raises:
        ToolDefinitionError: The path does not resolve, or names something
            that is not a tool; the message says which.
    """
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolDefinitionError(spec, [f"cannot import {module_name!r}: {exc}"]) from exc
    if not attribute:
        found = tuple(v for v in vars(module).values() if isinstance(v, Tool))
        if not found:
            raise ToolDefinitionError(spec, [f"module {module_name!r} defines no Tool"])
        return found
    try:
        value = getattr(module, attribute)
    except AttributeError as exc:
        raise ToolDefinitionError(
            spec, [f"{module_name!r} has no attribute {attribute!r}"]
        ) from exc
    items: Sequence[Any] = value if isinstance(value, (list, tuple)) else (value,)
    problems = [
        f"item {index} ({item!r}) is not a Tool or a function"
        for index, item in enumerate(items)
        if not (isinstance(item, Tool) or inspect.isfunction(item))
    ]
    if problems:
        raise ToolDefinitionError(spec, problems)
    return tuple(item if isinstance(item, Tool) else tool(item) for item in items)


def serve(
    tools: Iterable[Tool[..., Any]],
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    name: str = "toolfold",
) -> None:
    """Serve `tools` over stdio or streamable HTTP until stopped.

    Args:
        tools: The tools to serve.
        transport: ``"stdio"`` or ``"http"`` (streamable HTTP).
        host: The address to listen on, for HTTP.
        port: The port to listen on, for HTTP (0 picks a free one). The
            address is printed to stderr once the socket listens.
        path: The endpoint path, for HTTP.
        name: The server name hosts show.

    Raises:
        ValueError: An unknown transport.
    """
    server = mcp_server(tools, name=name)
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async def over_stdio() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(over_stdio)
    elif transport == "http":
        import socket
        import sys

        import uvicorn

        app = server.streamable_http_app(streamable_http_path=path, host=host)
        listener = socket.create_server((host, port))
        bound = listener.getsockname()[1]
        # The socket listens before this line is printed, so a reader of it can connect at once.
        print(f"serving MCP on http://{host}:{bound}{path}", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        uvicorn.Server(config).run(sockets=[listener])
    else:
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")
