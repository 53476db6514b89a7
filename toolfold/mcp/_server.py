"""toolfold tools served as an MCP server, so they work in any MCP host unchanged.

The tools keep everything `@tool` gave them: the derived schema and
descriptions are what the host lists, arguments are validated and structured
exactly as in a toolfold run, a tool's ``timeout`` holds, a tool that takes a
`RunContext` gets one made for the call (with the server's ``deps``), an agent
used as a tool runs its sub-run, and a bad argument, a tool exception or a
timeout comes back as an error result (``isError``) the host's model can read
and correct (a tool's ``sys.exit()`` or stray `CancelledError` too: one call
does not end the server; a host cancelling its request still cancels it). A
tool that requires approval is refused unless the host is trusted to ask its
user (``approved_by_host=True``): toolfold cannot ask.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import inspect
import ipaddress
import math
import os
import socket
import sys
import traceback
from collections.abc import Iterable, Sequence
from types import FunctionType
from typing import Any, cast

import anyio

from toolfold._errors import ToolArgumentError, ToolDefinitionError, UsageError
from toolfold._extras import optional
from toolfold._ports import port_problem
from toolfold.mcp._client import APPROVAL_META_KEY
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
    TextPart,
    content_problem,
    result_content,
)
from toolfold.toolkit import RunContext, Tool, tool
from toolfold.toolkit._results import describe_exception, safe_repr
from toolfold.toolkit._tool import check_tool_names, reads_context

__all__ = ["load_tools", "mcp_server", "serve"]


def mcp_server(
    tools: Iterable[Tool[..., Any]],
    *,
    name: str = "toolfold",
    instructions: str | None = None,
    deps: Any = None,
    approved_by_host: bool = False,
) -> Any:
    """An MCP server (the SDK's low-level ``Server``) that lists and runs `tools`.

    Each call runs as in a toolfold run: its ``timeout`` holds (a sync tool
    that overruns is left to finish in its thread, its result dropped), a
    tool taking a `RunContext` gets one made for the call (a fresh
    ``run_id``, ``step`` 1, the MCP request's id as ``call_id``, and
    ``deps``), and an agent used as a tool (``agent.as_tool()``) runs its
    sub-run; a sub-run that stops to wait for an approval or a tool result
    is an error result, as nothing can answer it.

    Args:
        tools: The tools to serve; names must be unique.
        name: The server name hosts show.
        instructions: Optional instructions for the host's model.
        deps: What the tools' `RunContext` carries as ``deps``.
        approved_by_host: Serve tools that require approval
            (``requires_approval``), leaving the approval to the MCP host,
            which asks its user before a call (they are listed with
            ``destructiveHint`` and ``_meta`` ``toolfold/requires_approval``
            set). Without it they are refused: toolfold cannot ask, and
            serving them would run them unchecked.

    Returns:
        An ``mcp.server.lowlevel.Server``; run it with `serve`, or mount
        ``server.streamable_http_app()`` in your own ASGI application.

    Raises:
        ToolDefinitionError: Two tools share a name, a tool has no function
            (its calls could not be answered), or a tool requires approval
            and ``approved_by_host`` is False.
        ModelConfigError: The ``mcp`` extra is not installed
            (``pip install 'toolfold[mcp]'``).
    """
    optional("mcp", "mcp", "serving tools to MCP hosts")  # (mcp_types comes with it)
    import mcp_types as types
    from mcp.server.lowlevel import Server

    by_name = check_tool_names(tools)
    problems = [
        f"tool {t.name!r} has no function, so an MCP host could not call it"
        for t in by_name.values()
        if t.function is None
    ]
    if not approved_by_host:
        problems += [
            f"tool {t.name!r} requires approval, which toolfold cannot ask an MCP host for: "
            "serve it with approved_by_host=True (--approved-by-host) to leave the approval "
            "to the host, which asks its user before each call, or without requires_approval"
            for t in by_name.values()
            if t.requires_approval is not False
        ]
    if problems:
        raise ToolDefinitionError("mcp_server", problems)
    listing = types.ListToolsResult(tools=[_listed(t) for t in by_name.values()])

    async def on_list_tools(ctx: Any, params: Any) -> Any:
        return listing

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        found = by_name.get(params.name)
        if found is None:
            known = ", ".join(sorted(by_name))
            return _error(f"unknown tool {params.name!r}; the tools are: {known}")
        call_id = str(getattr(ctx, "request_id", None) or "")
        try:
            return await _run(found, dict(params.arguments or {}), deps, call_id)
        except ToolArgumentError as exc:
            return _error(exc.message_for_model)
        except Exception as exc:  # the tool's own error: an isError result, as in a run
            return _error(describe_exception(exc))
        except SystemExit as exc:  # a tool's sys.exit(): one call must not end the server
            return _error(describe_exception(exc))
        except anyio.get_cancelled_exc_class() as exc:
            if _cancelled():  # the host cancelled the request, or the server is stopping
                raise
            # the tool's own (an inner task it awaited was cancelled): not the server's end
            return _error(describe_exception(exc))

    return Server(
        name, instructions=instructions, on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )


def _cancelled() -> bool:
    """Whether the current task is being cancelled: a cancelled anyio scope around it, or
    (Python 3.11+) a pending ``Task.cancel()``, rather than a tool's stray `CancelledError`."""
    if anyio.current_effective_deadline() == -math.inf:
        return True
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio
        return False
    cancelling = getattr(task, "cancelling", None)  # 3.11+
    return bool(cancelling is not None and cancelling())


def _listed(served: Tool[..., Any]) -> Any:
    """``served`` as the host lists it; one that requires approval says so.

    MCP has no field for "ask the user first": its annotations are hints
    about the tool's effects. A tool that requires approval gets the most
    cautious ones outright (``readOnlyHint: false``, ``destructiveHint:
    true``, what a host assumes of a tool without annotations), so no host
    takes it for a harmless one, and ``_meta`` says it requires approval.
    """
    import mcp_types as types

    cautious: dict[str, Any] = {}
    if served.requires_approval is not False:
        cautious = {
            "annotations": types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
            "_meta": {APPROVAL_META_KEY: True},
        }
    return types.Tool(
        name=served.name,
        description=served.description,
        input_schema=dict(served.parameters),
        **cautious,
    )


async def _run(found: Tool[..., Any], arguments: dict[str, Any], deps: Any, call_id: str) -> Any:
    """One call of ``found``, as a ``CallToolResult`` (an error result for a timeout)."""
    import mcp_types as types

    from toolfold.runtime._run import new_run_id
    from toolfold.runtime.drive._executor import SubRun

    values = found.validate_arguments(arguments)
    context = None
    if reads_context(found):
        context = RunContext(
            run_id=new_run_id(), step=1, call_id=call_id, tool_name=found.name, deps=deps
        )
    with anyio.move_on_after(found.timeout) as limit:  # no timeout: None, no limit
        if found.is_async:
            result = await found.invoke(values, context)
        else:
            # A thread cannot be interrupted: one that overruns finishes alone, its result dropped.
            result = await anyio.to_thread.run_sync(
                found.invoke, values, context, abandon_on_cancel=True
            )
            if inspect.isawaitable(result):
                result = await result
    if limit.cancelled_caught:
        return _error(f"tool {found.name!r} timed out after {found.timeout:g} s")
    if type(result) is SubRun:  # an agent used as a tool: its sub-run's answer
        if result.state is not None and not result.state.is_done:
            return _error(
                f"tool {found.name!r} runs an agent that stopped to wait for an approval or a "
                "tool result, which nothing can give it over MCP"
            )
        return types.CallToolResult(
            content=[types.TextContent(text=result.content)], is_error=result.is_error
        )
    if isinstance(result, TextPart):  # a text part alone: its text
        result = result.text
    parts = result_content(result, found.format_result)
    if parts is None:
        return types.CallToolResult(content=[types.TextContent(text=found.format_result(result))])
    problem = content_problem(parts)
    if problem:
        return _error(f"tool {found.name!r} returned a part the model cannot be given: {problem}")
    return types.CallToolResult(content=[_block(part) for part in parts])


def _block(part: TextPart | ImagePart | FilePart) -> Any:
    """A result part as an MCP content block.

    An image or file given as data is served inline (``ImageContent``, or an
    ``EmbeddedResource`` for a file), as is one given as a ``data:`` URL (decoded,
    as a model would be sent it: `prepared_media`); one given as any other URL
    (``https:``, and ``file:``, which a client on this machine can open) as a
    ``ResourceLink``; and one nothing can use (empty data, neither data nor url,
    a url that is a local path with no scheme, a data URL that cannot be
    decoded) as its one-line description. A media type is lower-cased.
    """
    import mcp_types as types

    from toolfold.adapters._codec import lower_media_type, prepared_media, url_scheme

    if isinstance(part, TextPart):
        return types.TextContent(text=part.text)
    url = part.url
    if part.data is None and url is not None and url_scheme(url) not in ("", "data"):
        name = getattr(part, "filename", None) or url
        return types.ResourceLink(uri=url, name=name, mime_type=lower_media_type(part.media_type))
    prepared = prepared_media(part)
    if isinstance(prepared, TextPart):
        return types.TextContent(text=prepared.text)
    # (prepared, a part has data: one given by URL alone was served above as a link)
    data = base64.b64encode(cast(bytes, prepared.data)).decode()
    if isinstance(prepared, ImagePart):
        return types.ImageContent(data=data, mime_type=prepared.media_type)
    uri = (
        prepared.filename
        if prepared.filename and ":" in prepared.filename
        else f"file:///{prepared.filename or 'file'}"
    )
    blob = types.BlobResourceContents(uri=uri, mime_type=prepared.media_type, blob=data)
    return types.EmbeddedResource(resource=blob)


def _error(text: str) -> Any:
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def load_tools(spec: str) -> tuple[Tool[..., Any], ...]:
    """Tools named by import path: ``package.module:name`` or ``package.module``.

    ``name`` may be a `Tool`, a plain function (made a tool with ``@tool``), or a
    list/tuple of either. A bare module path serves every `Tool` at the
    module's top level, those it imports included (a package's ``__init__``
    gathers its tools so), and a tool under two names (an alias) once.

    Raises:
        ToolDefinitionError: The path does not resolve (an empty or relative
            module path, a module that cannot be imported or raises while
            importing, a missing name, a module ``__getattr__`` that raises, a
            list whose iteration raises), or names something that is not a
            tool; the message says which (for a module's exception, its class
            and text: ``RuntimeError: no database``).
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or module_name.startswith("."):
        raise ToolDefinitionError(
            repr(spec),
            [
                f"{repr(module_name) if module_name else 'an empty module path'} is not an "
                "absolute module path: "
                "write package.module:name (or package.module)"
            ],
        )
    try:
        module = importlib.import_module(module_name)
    except ToolDefinitionError:  # a tool the module defines is wrong: its own error says which
        raise
    except Exception as exc:  # ImportError, or whatever the module raised importing
        raise _module_failed(spec, f"cannot import {module_name!r}", exc) from exc
    if not attribute:
        # Every Tool the module holds, imported ones too (a package's __init__
        # gathers its tools so); one under two names, once.
        found = {id(value): value for value in vars(module).values() if _is(value, Tool)}
        if not found:
            raise ToolDefinitionError(spec, [f"module {module_name!r} holds no Tool"])
        return tuple(found.values())
    try:
        value = getattr(module, attribute)
    except AttributeError as exc:
        raise ToolDefinitionError(
            spec, [f"{module_name!r} has no attribute {attribute!r}"]
        ) from exc
    except ToolDefinitionError:  # a tool a module __getattr__ makes is wrong: its own error
        raise
    except Exception as exc:  # a module __getattr__ that raises something else
        raise _module_failed(spec, f"cannot get {attribute!r} from {module_name!r}", exc) from exc
    try:
        # (a list subclass's __iter__ is the module's code too, and may raise)
        items: Sequence[Any] = tuple(value) if _is(value, (list, tuple)) else (value,)
    except Exception as exc:
        what = f"cannot read the items of {attribute!r} ({type(value).__name__})"
        raise _module_failed(spec, what, exc) from exc
    problems = [
        f"item {index} ({safe_repr(item, ' object')}) is not a Tool or a function"
        for index, item in enumerate(items)
        if not _is(item, (Tool, FunctionType))
    ]
    if problems:
        raise ToolDefinitionError(spec, problems)
    return tuple(item if isinstance(item, Tool) else tool(item) for item in items)


def _module_failed(spec: str, what: str, exc: Exception) -> ToolDefinitionError:
    """The error for the module's own code raising ``exc`` while ``what`` was done: its class,
    text and where it was raised (`describe_exception` never raises, though the exception's
    own ``__str__`` may)."""
    return ToolDefinitionError(spec, [f"{what}: {describe_exception(exc)}{_raised_at(exc)}"])


def _is(value: object, kinds: type | tuple[type, ...]) -> bool:
    """``isinstance(value, kinds)``, which never raises: False for a value whose
    ``__class__`` raises (isinstance asks it; it is the module's code)."""
    try:
        return isinstance(value, kinds)
    except Exception:
        return False


def _raised_at(exc: BaseException) -> str:
    """Where importing raised ``exc``: `` (raised at FILE, line N)``, its innermost frame.

    The module's own code or one it imports (a helper's NameError is not the
    named module's); importlib's frames and this module's say nothing, so an
    exception raised only there (no such module; a SyntaxError, whose text
    names its file and line) gets no place.
    """
    ours = {os.path.normcase(__file__), os.path.normcase(importlib.__file__ or "")}
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith("<") or os.path.normcase(frame.filename) in ours:
            continue
        return f" (raised at {frame.filename}, line {frame.lineno})"
    return ""


def serve(
    tools: Iterable[Tool[..., Any]],
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    name: str = "toolfold",
    deps: Any = None,
    approved_by_host: bool = False,
) -> None:
    """Serve `tools` over stdio or streamable HTTP until stopped.

    Args:
        tools: The tools to serve.
        transport: ``"stdio"`` or ``"http"`` (streamable HTTP).
        host: The address to listen on, for HTTP: a host name, an IPv4 or an
            IPv6 address (brackets around it are taken off), with no port.
        port: The port to listen on, for HTTP (0 picks a free one). The
            address is printed to stderr once the socket listens.
        path: The endpoint path, for HTTP: starting with ``/``, with no query
            or fragment (white space is served: ``/my path`` answers at
            ``/my%20path``).
        name: The server name hosts show.
        deps: What the tools' `RunContext` carries as ``deps`` (`mcp_server`).
        approved_by_host: Serve tools that require approval, the host asking
            its user (`mcp_server`).

    Raises:
        ValueError: An unknown transport.
        UsageError: It cannot listen on ``host`` and ``port``, or ``path``
            is not a path starting with ``/`` (`serve_server`).
        ToolDefinitionError: A tool cannot be served (`mcp_server`).
    """
    server = mcp_server(tools, name=name, deps=deps, approved_by_host=approved_by_host)
    serve_server(server, transport=transport, host=host, port=port, path=path)


def serve_server(
    server: Any,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
) -> None:
    """Serve an `mcp_server` over stdio or streamable HTTP until stopped (see `serve`).

    Raises:
        ValueError: An unknown transport.
        UsageError: It cannot listen on ``host`` and ``port`` (an invalid host
            name, a host with a port in it, a port that is not an ``int`` from
            0 to 65535 or is in use), or ``path`` is not a path alone starting
            with ``/`` (a query or a fragment in it).
    """
    if transport not in ("stdio", "http"):
        raise ValueError(f"transport must be 'stdio' or 'http', got {transport!r}")
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async def over_stdio() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(over_stdio)
    else:
        host = check_address(host, port, path)
        import uvicorn

        app = server.streamable_http_app(streamable_http_path=path, host=host)
        listener = _listening(host, port)
        bound = listener.getsockname()[1]
        # an IPv6 address in brackets, as a URL writes it; every interface as 0.0.0.0
        shown = f"[{host}]" if ":" in host else host or "0.0.0.0"
        # The socket listens before this line is printed, so a reader of it can connect at once.
        print(f"serving MCP on http://{shown}:{bound}{path}", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, log_level="warning", lifespan="on")
        uvicorn.Server(config).run(sockets=[listener])


def check_address(host: object, port: object, path: object) -> str:
    """``host`` as `serve_server` listens on it, once ``host``, ``port`` and ``path`` are
    found well formed (no socket is opened, no name looked up).

    Raises:
        UsageError: One of them is malformed (see `serve_server`).
    """
    checked = _host(host)
    _check_path(path)
    problem = port_problem(port)
    if problem is not None:
        raise UsageError(problem)
    return checked


def _host(host: object) -> str:
    """``host`` to listen on, an IPv6 address without the brackets a URL writes it in.

    Raises:
        UsageError: It is not a string, or holds a port (``localhost:8000``) or
            brackets around what is not an IPv6 address.
    """
    if not isinstance(host, str):
        raise UsageError(
            f"the host must be a string (a host name, an IPv4 or IPv6 address), got {host!r}"
        )
    inner = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if ":" in inner or "[" in inner or "]" in inner:
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise UsageError(
                f"cannot listen on host {host!r}: a host is a host name, an IPv4 or IPv6 "
                "address, with no port (give it as the port, --port) and no brackets "
                "but around an IPv6 address"
            ) from None
        return inner
    if inner != host:  # ([name] or [1.2.3.4])
        raise UsageError(f"cannot listen on host {host!r}: brackets go only around an IPv6 address")
    return host


def _check_path(path: object) -> None:
    """Refuse an endpoint path no request can reach (Starlette routes the path alone).

    Raises:
        UsageError: It is not a string, does not start with ``/``, or holds a
            query (``?``) or a fragment (``#``). White space is kept: Starlette
            matches the decoded path, so ``/my path`` answers at ``/my%20path``.
    """
    if not isinstance(path, str):
        raise UsageError(f"the endpoint path must be a string such as '/mcp', got {path!r}")
    if not path.startswith("/"):
        # (Starlette's router asserts it, with no word of the option)
        raise UsageError(f"the endpoint path must start with '/', got {path!r}; e.g. '/{path}'")
    if "?" in path or "#" in path:
        raise UsageError(
            f"the endpoint path {path!r} holds a '?' or '#': it is a path alone "
            "(no query or fragment), as requests to it are routed by path alone"
        )


def _listening(host: str, port: int) -> socket.socket:
    """A socket listening on ``host`` (a name, an IPv4 or an IPv6 address) and ``port``.

    Raises:
        UsageError: It cannot listen there (an unknown host, a port in use...).
    """
    try:
        if not host:  # every interface, as socket's own "" means
            return socket.create_server(("", port))
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family)
    except (OSError, ValueError) as exc:  # ValueError: a name idna cannot encode ("a..b")
        raise UsageError(f"cannot listen on host {host!r}, port {port}: {exc}") from exc
