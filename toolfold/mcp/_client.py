"""MCP servers as tool sources: their tools become toolfold `Tool` values.

A source owns one MCP session, hosted on a private event loop in a background
thread (an anyio blocking portal). That one home serves blocking runs, async
runs on any event loop, and worker threads alike, and the session is entered
and left by the same task, as the SDK's cancel scopes require. Calls from an
async run are bridged with `asyncio.wrap_future`, so cancelling the run (or a
tool timeout) cancels the call on the server's side too.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import re
import threading
import urllib.parse
import warnings
from collections import Counter, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager, asynccontextmanager, suppress
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread

from toolfold._errors import ToolDefinitionError, ToolfoldError, UsageError
from toolfold._extras import optional
from toolfold.runtime.core._messages import FilePart, ImagePart, TextPart, describe_content
from toolfold.runtime.drive._loop import masked_part
from toolfold.runtime.drive._open import note_close_error, open_off_loop, when_open_cancelled
from toolfold.toolkit import Tool
from toolfold.toolkit._options import (
    RESERVED_NAMES,
    TOOL_NAME,
    TOOL_NAME_CHARACTERS,
    TOOL_NAME_LONGEST,
    ApprovalPolicy,
    with_digest,
)
from toolfold.toolkit._results import describe_exception, format_result, quoted
from toolfold.toolkit._tool import LEFT_OUT_WITH, MADE_AS, NAME_REFUSED_WITH, RENAMED_WITH

if TYPE_CHECKING:
    from toolfold.adapters._http._keys import Secret

__all__ = [
    "MCPError",
    "MCPServer",
    "MCPServerHTTP",
    "MCPServerStdio",
    "MCPToolsChangedWarning",
]


#: The ``_meta`` key (MCP's place for an implementation's own data about a tool)
#: saying that a tool requires approval: toolfold's server sets it on a tool served
#: with ``approved_by_host``, and toolfold's client makes such a tool require approval.
APPROVAL_META_KEY = "toolfold/requires_approval"

#: The most pages of a tool list (tools/list) read: a server paging on past them (each
#: with a cursor of its own) is refused, as one giving a cursor twice is.
MOST_PAGES = 1000

#: A request a client makes, as its JSON-RPC message names it: the method and what
#: of its params tells it apart (``("tools/call", {"name": ..., "arguments": ...})``).
_Asked = tuple[str, Mapping[str, Any]]

#: How many of the last requests an HTTP server refused are kept (`MCPServerHTTP`),
#: for a failed call to find its own status among those of calls made beside it.
_REFUSALS_KEPT = 64

#: The messages of the MCP SDK's errors made of an HTTP error status (a response with
#: no JSON-RPC error in it): its status is what says more.
_HTTP_ERROR_MESSAGES = frozenset(
    {"Server returned an error response", "Not Found", "Session terminated"}
)


#: The modules of the SDK a client imports as its server starts and talks (`MCPServer._start`,
#: `MCPServerStdio._target`, `_with_headers`, the errors it maps): `sdk` imports them all.
_SDK_MODULES = (
    "mcp",  # (first: a missing SDK is said as the missing extra)
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "mcp.shared._httpx_utils",
    "mcp.shared.exceptions",
    "mcp_types",
)


def sdk(what: str) -> Any:
    """The ``mcp`` package, with every module of it a client uses imported.

    ``toolfold check`` calls it for a file's MCP servers, so that an SDK that
    is installed but broken is said before a server starts.

    Args:
        what: What needs it, for the message (``"MCP server 'time'"``).

    Raises:
        ModelConfigError: A module does not import: not installed (``pip
            install 'toolfold[mcp]'``), or installed but failing in its own
            import, whatever it raises (the message gives that error, also the
            cause).
    """
    modules = [optional(name, "mcp", what) for name in _SDK_MODULES]
    return modules[0]


class MCPError(ToolfoldError, RuntimeError):
    """An MCP server failed: it could not start, crashed, hung, or answered badly.

    Raised to the caller when a server's tools cannot be listed; inside a run,
    a failing call becomes an error result the model reads, and the run stays
    resumable.
    """

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(f"MCP server {server!r}: {message}")


class MCPToolsChangedWarning(UserWarning):
    """An MCP server's tool list differs from the one it gave the last time it was listed."""


class MCPServer:
    """Base of the MCP tool sources: lists a server's tools and calls them.

    Use as ``Agent(tools=[..., server])``: the run opens the session when it
    starts and closes it when it ends, unless the session is already open
    (``with server:`` or ``async with server:``), in which case it stays open
    for the whole block and is shared by every run inside it.

    Args:
        name: A name for messages and logs.
        prefix: Put before every tool name (``prefix_toolname``) to avoid
            collisions between servers.
        timeout: Seconds each call (and each listing) may take; a call that
            takes longer is an error result for the model.
        startup_timeout: Seconds the server may take to start and answer the
            handshake.
        requires_approval: An approval policy for every tool of the server
            (True, or a predicate over (call, state)), or a list of the
            server's own tool names (without ``prefix``) that need approval.
        include: Only these tools, by the server's own names (without
            ``prefix``), when given.

    Raises:
        UsageError: An option has the wrong type (a single string where a
            list of names is wanted, a timeout that is no positive, finite
            number).

    A name in ``include`` or ``requires_approval`` that the server does not
    list is a `ToolDefinitionError` when its tools are listed: a misspelt
    name would otherwise let a tool run without its approval.
    """

    def __init__(
        self,
        name: str,
        *,
        prefix: str | None = None,
        timeout: float = 30.0,
        startup_timeout: float = 30.0,
        requires_approval: ApprovalPolicy | Sequence[str] | frozenset[str] = False,
        include: Sequence[str] | None = None,
    ) -> None:
        for option, value in (("timeout", timeout), ("startup_timeout", startup_timeout)):
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not 0 < value <= threading.TIMEOUT_MAX  # not NaN, nor infinite
            ):
                raise UsageError(
                    f"MCP server {name!r}: {option} takes a positive, finite number of "
                    f"seconds, got {value!r}"
                )
        self.name = name
        self.prefix = prefix
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.requires_approval: ApprovalPolicy | frozenset[str] = (
            requires_approval
            if isinstance(requires_approval, bool) or callable(requires_approval)
            else _tool_names(name, "requires_approval", requires_approval)
        )
        self.include = None if include is None else _tool_names(name, "include", include)
        self.fingerprint: str | None = None
        self._lock = threading.Lock()
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._client: Any = None
        self._stop: anyio.Event | None = None
        self._task: Future[None] | None = None
        self._ended = False  # the session's connection closed (its server crashed or went away)
        self._holders = 0

    def file_entry(self) -> dict[str, Any]:
        """This server as an agent file's ``[[agents.<name>.mcp]]`` entry.

        A file is text that gets shared, so what may be a credential is not
        written: such a server is refused, naming what it holds and where,
        never its value (an HTTP server's headers; a URL's
        ``user:password@``, query values, fragment or a token in its path, in
        its ``url`` or in a stdio server's ``env`` value or argument; an ``Authorization``
        value; ``env`` entries named like a credential, ``GITHUB_TOKEN``,
        ``API_KEY``...; an argument after a flag so named, ``--api-key
        sk-...``, or joined to it, ``--token=...``; mysql's ``-phunter2``;
        docs/mcp.md lists every rule).

        Raises:
            UsageError: ``requires_approval`` is a predicate (a file names
                tools, it cannot hold a function), or the server holds what
                may be a credential.
        """
        approval = self.requires_approval
        if callable(approval):
            raise UsageError(
                f"MCP server {self.name!r}: a requires_approval predicate cannot be "
                "written to an agent file (list the tool names instead)"
            )
        entry: dict[str, Any] = {
            **self._target_entry(),
            "prefix": self.prefix,
            "timeout": self.timeout,
            "startup_timeout": self.startup_timeout,
            "requires_approval": approval if isinstance(approval, bool) else sorted(approval),
            "include": None if self.include is None else sorted(self.include),
        }
        return {key: value for key, value in entry.items() if value is not None}

    #: The credentials of the server's address, scrubbed from every `MCPError`
    #: (an HTTP server's URL and headers; none for the others).
    _scrub: tuple[Any, ...] = ()
    #: What masks those credentials in a successful result's text (its text parts and
    #: structured data), as a run masks its model's key in a tool's result
    #: (``secret_masker``): None when there are none.
    _mask: Callable[[str], str] | None = None

    # -- to be provided by a transport -------------------------------------

    def _target_entry(self) -> dict[str, Any]:
        """The transport's own keys of `file_entry`."""
        raise NotImplementedError

    def _target(self) -> Any:
        """What `mcp.Client` connects to (a URL, or stdio parameters)."""
        raise NotImplementedError

    # -- session lifetime ----------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Whether a session to the server is open now.

        False once a call or a listing found its server gone (crashed, or an
        HTTP server that went away). A server that dies while nothing is
        asked of it is not watched for: it stays True until the next request
        finds it gone; the next listing (each run lists its tools) starts a
        fresh one.
        """
        task = self._task
        return self._client is not None and not self._ended and task is not None and not task.done()

    def open(self) -> None:
        """Open the session (or count one more holder of an open one).

        A session whose server crashed or went away is replaced: its remains
        are released and a fresh server process (or connection) started.

        Raises:
            MCPError: The server could not be started or did not answer in time.
            ModelConfigError: The ``mcp`` extra is not installed
                (``pip install 'toolfold[mcp]'``).
        """
        with self._lock:
            self._holders += 1
            if self.is_open:
                return
            try:
                self._restart()
            except BaseException:
                self._holders -= 1
                raise

    def _restart(self) -> None:
        """Release what an ended session left (no error: its calls failed already), start anew."""
        with suppress(MCPError):
            self._shutdown()
        try:
            self._start()
        except BaseException as exc:
            try:
                self._shutdown()
            except MCPError as failure:  # the start's error is the one raised
                note_close_error(exc, failure, f"closing MCP server {self.name!r}")
            raise

    def close(self) -> None:
        """Release one holder; the last one closes the session and ends the server process.

        Raises:
            MCPError: The session's shutdown failed (chained to the failure);
                what it held is released all the same. A run closing its
                sources reports it like any source's close error (see
                `SourceCloseError`).
        """
        with self._lock:
            self._holders = max(0, self._holders - 1)
            if self._holders == 0:
                self._shutdown()

    def __enter__(self) -> MCPServer:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> MCPServer:
        await open_off_loop(self)  # a cancel while it starts does not leave it open
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)

    def _start(self) -> None:
        Client = sdk(f"MCP server {self.name!r}").Client

        self._ended = False
        mark = self._mark()
        self._portal_cm = anyio.from_thread.start_blocking_portal()
        self._portal = portal = self._portal_cm.__enter__()
        ready: Future[None] = Future()

        async def hold() -> None:
            self._stop = stop = anyio.Event()
            client = None
            try:
                async with Client(self._target(), read_timeout_seconds=self.timeout) as client:
                    self._client = client
                    try:
                        ready.set_result(None)
                    except InvalidStateError:  # its opener was cancelled meanwhile
                        return
                    await stop.wait()
            except BaseException as exc:
                with suppress(InvalidStateError):  # done, or its opener cancelled meanwhile
                    ready.set_exception(exc)
                raise
            finally:
                if self._client is client:
                    self._client = None

        self._task = task = portal.start_task_soon(hold)
        cancelled = MCPError(self.name, "stopped while starting: the task opening it was cancelled")

        def stop_starting() -> None:  # on the opener's event loop: must not block
            try:
                ready.set_exception(cancelled)
            except InvalidStateError:  # it started (or failed) already: its opener closes it
                return
            task.cancel()  # the SDK then ends the process (bounded)

        try:
            with when_open_cancelled(stop_starting):  # an async opener's cancellation
                ready.result(timeout=self.startup_timeout)
        except FutureTimeout:  # concurrent.futures' own on 3.10, the builtin after
            # Stop the handshake it is stuck in: the SDK then ends the process (bounded).
            task.cancel()
            raise MCPError(self.name, f"did not start within {self.startup_timeout:g} s") from None
        except Exception as exc:
            if exc is cancelled:
                raise
            said = f"could not start: {_describe(exc)}{self._start_hint(exc, mark)}"
            raise self._error(said, exc) from exc
        except BaseException:  # Ctrl-C: stop the handshake too, rather than wait `timeout` for it
            task.cancel()
            raise

    def _mark(self) -> int:
        """Where the transport's record of failed HTTP requests is now, for `_call_hint`
        and `_start_hint` to tell the failures of a request made after it (0: none kept)."""
        return 0

    def _start_hint(self, exc: BaseException, mark: int) -> str:
        """What a failed start's message adds to what the SDK raised (``exc``), the
        transport's own failures since ``mark`` (`_mark`) in view: nothing here."""
        return ""

    def _call_hint(self, exc: BaseException, mark: int, asked: _Asked) -> str:
        """What a failed request's message adds to what the SDK raised (``exc``), the
        transport's own failures since ``mark`` (`_mark`) of the request ``asked``
        in view: nothing here."""
        return ""

    def _shutdown(self) -> None:
        """End the session and the portal; every step runs, then a failure is raised.

        The MCP SDK bounds a session's shutdown itself (a stdio server that
        does not exit when its stdin closes is terminated, then killed): a
        slow server is not a failure. A shutdown still running after
        ``timeout`` seconds (an HTTP server that does not answer) is
        cancelled, and the SDK's bounded cleanup ends it. What the shutdown
        raises is a failure, and so is a session that did not end. A session
        that had ended before (a crashed server) is not: the calls made after
        the crash failed with it.
        """
        portal, task, stop = self._portal, self._task, self._stop
        self._portal = self._task = self._stop = None
        ended_before = task is None or task.done() or self._ended
        if portal is not None and stop is not None:
            with suppress(Exception):  # the loop may already be gone: nothing left to stop
                portal.call(stop.set)
        if task is not None:
            try:
                task.result(timeout=self.timeout)
            except FutureTimeout:
                task.cancel()
            except Exception:  # judged below, once the portal is closed
                pass
        failure: BaseException | None = None
        if self._portal_cm is not None:
            cm, self._portal_cm = self._portal_cm, None
            try:
                cm.__exit__(None, None, None)  # waits for the session's task
            except Exception as exc:
                failure = exc
        if task is not None and not ended_before:
            if not task.done():
                raise MCPError(self.name, "did not stop: its session is still running")
            if failure is None and not task.cancelled():
                failure = task.exception()
        if failure is not None:
            raise self._error(f"could not close: {_describe(failure)}", failure) from failure

    # -- tools -----------------------------------------------------------------

    def tools(self) -> tuple[Tool[..., Any], ...]:
        """List the server's tools as toolfold tools (opens the session if needed).

        Raises:
            MCPError: The server could not be reached or listed no valid tools.
            ToolDefinitionError: A listed tool has an invalid name or schema.
        """
        return self.tools_from(self.listing())

    def listing(self) -> list[dict[str, Any]]:
        """The server's tools as it lists them, as plain data (opens the session if needed).

        Each entry has the tool's remote ``name``, ``description`` and
        ``inputSchema``, and ``_meta`` ``{"toolfold/requires_approval":
        true}`` for a tool the server says requires approval (a toolfold
        server's tool served with ``approved_by_host``). `tools_from` makes
        toolfold tools of it; a durable run records it and rebuilds the same
        tools from it on replay.

        Raises:
            MCPError: The server could not be reached.
            ToolDefinitionError: ``include`` or ``requires_approval`` names a
                tool the server does not list.
        """
        with self:
            try:
                listed: list[dict[str, Any]] = self._call(self._list, ("tools/list", {}))
            except MCPError:
                if not self._ended:
                    raise
                # its server crashed (or went away) since the session opened: a fresh one
                with self._lock:
                    if not self.is_open:
                        self._restart()
                listed = self._call(self._list, ("tools/list", {}))
        self._check_names(listed)
        fingerprint = _fingerprint(listed)
        if self.fingerprint is not None and fingerprint != self.fingerprint:
            warnings.warn(
                f"MCP server {self.name!r} changed its tools since it was last listed",
                MCPToolsChangedWarning,
                stacklevel=3,
            )
        self.fingerprint = fingerprint
        return listed

    def _check_names(self, listed: Sequence[Mapping[str, Any]]) -> None:
        """Every name of ``include`` and ``requires_approval`` is one the server lists.

        Raises:
            ToolDefinitionError: One is not, named with the server's names
                (and, for a name written with the prefix, the name to write).
        """
        remote = {str(spec["name"]) for spec in listed}
        chosen = [("include", self.include or frozenset())]
        if isinstance(self.requires_approval, frozenset):
            chosen.append(("requires_approval", self.requires_approval))
        problems = []
        listed_names = ", ".join(sorted(remote)) or "none"
        for option, names in chosen:
            for unknown in sorted(names - remote):
                hint = ""
                if self.prefix and unknown.startswith(f"{self.prefix}_"):
                    bare = unknown.removeprefix(f"{self.prefix}_")
                    if bare in remote:
                        hint = f" (names are the server's own, without the prefix: write {bare!r})"
                problems.append(
                    f"{option} names {unknown!r}, a tool the server does not list{hint}; "
                    f"its tools are: {listed_names}"
                )
        if problems:
            raise ToolDefinitionError(f"MCP server {self.name!r}", problems)

    def tools_from(self, listed: Sequence[Mapping[str, Any]]) -> tuple[Tool[..., Any], ...]:
        """Toolfold tools for a `listing` (no I/O: their calls go to the open session).

        The server's ``include``, ``prefix`` and ``requires_approval`` apply;
        a tool the listing marks as requiring approval (``_meta``
        ``toolfold/requires_approval``) requires it whatever
        ``requires_approval`` says.

        A listed name providers refuse (a ``.``, which MCP allows, or over 64
        characters with the prefix) or toolfold reserves (``auto``, ``none``,
        ``required``) is given to the model as `model_name` makes it; calls
        go to the server under its own name. Two such names that would be
        one (``天気`` and ``時間``, both ``__``; ``files.read`` and
        ``files_read``) each end with a hash of the tool's name, the one that
        fits too (see `_told_apart`): the names depend on the whole
        listing (after ``include``), not its order.

        Raises:
            ToolDefinitionError: A listed tool has an invalid name or schema,
                or two listed tools still get one name for the model (a
                hashed name the server lists too: ``a.b`` with ``a_b`` and
                ``a_b_2e7336dc``). A name listed twice is made twice (the
                agent's duplicate-name check refuses it).
        """
        made: list[Tool[..., Any]] = []
        problems: list[str] = []
        remotes: dict[str, str] = {}  # the model's name -> the server's
        kept = [s for s in listed if self.include is None or s["name"] in self.include]
        told_apart = _told_apart([self._listed_name(str(spec["name"])) for spec in kept])
        for spec in kept:
            try:
                tool = self._tool(spec, told_apart)
            except ToolDefinitionError as exc:  # each named by its tool: the server lists many
                problems.extend(f"tool {spec['name']!r}: {problem}" for problem in exc.problems)
                continue
            other = remotes.setdefault(tool.name, str(spec["name"]))
            if other != spec["name"]:  # (only a hashed name the server lists too)
                problems.append(
                    f"tools {other!r} and {spec['name']!r} are both {tool.name!r} for the "
                    "model: keep one of them with include=[...]"
                )
                continue
            made.append(tool)
        if problems:
            raise ToolDefinitionError(f"MCP server {self.name!r}", problems)
        return tuple(made)

    async def _list(self, client: Any) -> list[dict[str, Any]]:
        """Every page of the server's tools/list.

        Raises:
            MCPError: The server gave a cursor it gave before (paging on, each
                page asked again, would go on until the timeout), or more than
                `MOST_PAGES` pages.
        """
        listed: list[dict[str, Any]] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = await client.list_tools(cursor=cursor)
            listed.extend(_listed(item) for item in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return listed
            if cursor in seen or len(seen) + 1 >= MOST_PAGES:
                again = cursor in seen
                why = (
                    f"gave the cursor {quoted(cursor, 200)!r} again, after {len(seen) + 1} "
                    "pages: paging on would list the same tools forever"
                    if again
                    else f"was still paging after {MOST_PAGES:,} pages"
                )
                raise self._error(f"its tool list (tools/list) {why}")
            seen.add(cursor)

    def _listed_name(self, remote: str) -> str:
        """A listed tool's name with the prefix: what `model_name` makes the model's name of."""
        return f"{self.prefix}_{remote}" if self.prefix else remote

    def _other_prefix(self) -> str:
        """How a message about this server's tool names asks for a prefix: ``prefix=...``,
        or, with one given, another, saying what it becomes in a tool name if `model_name`
        changes it (``'文档'`` and ``'时间'`` both become ``'__'``)."""
        if not self.prefix:
            return "prefix=..."
        cleaned = _REFUSED.sub("_", str(self.prefix))
        if cleaned == self.prefix:
            return f"another prefix than {self.prefix!r}"
        return (
            f"another prefix than {self.prefix!r} (it becomes {cleaned!r} in tool names: "
            "a-z A-Z 0-9 _ - only, a letter first)"
        )

    def _tool(
        self, spec: Mapping[str, Any], told_apart: frozenset[str] = frozenset()
    ) -> Tool[..., Any]:
        remote = spec["name"]
        listed = self._listed_name(remote)
        name = model_name(listed, collides=listed in told_apart)
        policy: ApprovalPolicy
        if (spec.get("_meta") or {}).get(APPROVAL_META_KEY) is True:
            policy = True  # the server says so (a toolfold server's tool served approved_by_host)
        elif isinstance(self.requires_approval, frozenset):
            policy = remote in self.requires_approval
        else:
            policy = self.requires_approval

        async def call(arguments: dict[str, Any]) -> Any:
            return await self._acall(remote, arguments)

        call.__name__ = name
        call.__qualname__ = f"{type(self).__name__}({self.name}).{remote}"
        # what a duplicate-name error names, and its remedy: an MCP tool takes no name=
        call.__dict__[MADE_AS] = f"tool {remote!r} of MCP server {self.name!r}"
        other = self._other_prefix()
        call.__dict__[RENAMED_WITH] = (
            f"{other} on MCP server {self.name!r}, or include=[...] to leave {remote!r} out"
        )
        # what an error about a tool name a provider refuses says (Gemini: a letter or _ first)
        call.__dict__[NAME_REFUSED_WITH] = (
            f"a tool of MCP server {self.name!r}, named by the server: give the server "
            f"{other} starting with a letter (prefix={_EXAMPLE!r} gives "
            f"{model_name(f'{_EXAMPLE}_{remote}')!r}), or include=[...] to leave {remote!r} out"
        )
        # what an error about a parameter name a provider refuses says (its schema is the server's)
        call.__dict__[LEFT_OUT_WITH] = (
            f"include=[...] on MCP server {self.name!r}, without {remote!r}"
        )
        return Tool(
            name,
            spec["description"],
            spec["inputSchema"],
            call,
            requires_approval=policy,
            timeout=self.timeout,
        )

    async def _acall(self, remote: str, arguments: dict[str, Any]) -> Any:
        """Call one remote tool from any event loop; map its result for the model."""
        portal, client, task = self._portal, self._client, self._task
        if portal is None:
            raise MCPError(self.name, "the session is closed (the run that opened it has ended)")
        if client is None:
            raise MCPError(self.name, f"tool {remote!r} failed: the session has ended")

        async def call(session: Any) -> Any:
            return await session.call_tool(remote, arguments)

        mark = self._mark()
        asked = portal.start_task_soon(self._on_session, call, client, task)
        try:
            result = await asyncio.wrap_future(asked)
        except Exception as exc:
            hint = self._call_hint(
                exc, mark, ("tools/call", {"name": remote, "arguments": arguments})
            )
            said = f"tool {remote!r} failed: {_describe(exc)}{hint}"
            raise self._error(said, exc) from exc
        try:  # a block the SDK let through may still be unreadable (data that is no base64)
            if not result.is_error:
                return _result_for_model(result, self._mask)
            shown = _error_text(result)
        except Exception as exc:
            raise self._error(
                f"tool {remote!r} answered a malformed result: {_describe(exc)}", exc
            ) from exc
        raise self._error(f"tool {remote!r} reported an error: {shown}")

    def _call(self, fn: Callable[[Any], Any], asked: _Asked) -> Any:
        """``fn(client)`` on the session's loop, waited for at most ``timeout``: the
        requests ``asked`` (`_Asked`, what a failure's HTTP status is looked up by)."""
        portal = self._portal
        assert portal is not None
        mark = self._mark()
        sent = portal.start_task_soon(self._on_session, fn, self._client, self._task)
        try:
            # an async caller's cancellation (`tools_off_loop`) cancels the request too,
            # rather than leave it, and this thread holding the session, until `timeout`
            with when_open_cancelled(sent.cancel):
                return sent.result(timeout=self.timeout)
        except FutureTimeout:  # concurrent.futures' own on 3.10, the builtin after
            sent.cancel()  # the request is not left waiting on the server
            raise MCPError(self.name, f"no answer within {self.timeout:g} s") from None
        except FutureCancelled:
            raise MCPError(self.name, "stopped: the task listing it was cancelled") from None
        except MCPError:  # what `fn` found wrong itself (`_list`: a cursor given twice)
            raise
        except Exception as exc:
            hint = self._call_hint(exc, mark, asked)
            raise self._error(f"{_describe(exc)}{hint}", exc) from exc

    async def _on_session(self, fn: Callable[[Any], Any], client: Any, task: Any) -> Any:
        """``await fn(client)`` on the session's loop; a failure that ends the session
        (the one on ``task``) marks it ended, for the next `open` to replace."""
        try:
            return await fn(client)
        except Exception as exc:
            if await self._lost(exc, client):
                self._note_end(task)
            raise

    async def _lost(self, exc: BaseException, client: Any) -> bool:
        """Whether ``exc``, from a request of ``client``'s session, means the session is gone.

        The SDK fails every request of a session whose transport closed (a
        crashed stdio server, an HTTP server gone) with ``CONNECTION_CLOSED``.
        Over HTTP one request's own stream ending early gives that code too,
        on a session that still works: there a second request decides.
        """
        if not _connection_closed(exc):
            return False
        return await self._gone(client)

    async def _gone(self, client: Any) -> bool:
        """After a ``CONNECTION_CLOSED``: the session is gone (stdio: the server's output ended)."""
        return True

    def _note_end(self, task: Any) -> None:
        """Mark the session that ran on ``task`` ended: the next `open` starts a fresh one.

        A failure from a session replaced since (another caller restarted it)
        leaves the current one alone.
        """
        if task is not None and task is self._task:
            self._ended = True

    def _error(self, message: str, cause: BaseException | None = None) -> MCPError:
        """An `MCPError` of this server, its credentials scrubbed from the text and from ``cause``."""
        from toolfold.adapters._http._keys import redact, redact_chain

        secrets = self._scrub
        error = MCPError(self.name, redact(message, secrets))
        if cause is not None:
            error.__cause__ = cause
            redact_chain(error, secrets)  # an HTTP client's error holds the URL and headers
        return error

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"{type(self).__name__}(name={self.name!r}, {state})"


class MCPServerStdio(MCPServer):
    """An MCP server started as a subprocess and spoken to over its stdin/stdout.

    Args:
        command: The executable, e.g. ``"mcp-server-time"`` or ``sys.executable``.
        args: Its arguments (one holding a credential, ``--api-key sk-...``,
            is not written to an agent file: see `MCPServer.file_entry`).
        env: Environment variables for it, over the few the MCP SDK passes
            on (on POSIX ``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``,
            ``USER``): the caller's other variables are not inherited. Pass
            one through by name (``env={"GITHUB_TOKEN":
            os.environ["GITHUB_TOKEN"]}``), or all with ``env=dict(os.environ)``.
            An entry named like a credential is not written to an agent file
            (see `MCPServer.file_entry`).
        cwd: Its working directory.
        name: A name for messages (default: the command and what it runs,
            ``npx @modelcontextprotocol/server-github``, ``python -m
            mcp_server_time``, after the ``prefix`` when one is given:
            ``time (python -m mcp_server_time)``; an argument that may be a
            credential is never part of it).
        **options: `MCPServer`'s options (``prefix``, ``timeout``,
            ``startup_timeout``, ``requires_approval``, ``include``).

    Raises:
        UsageError: ``args`` is a single string, or an option is wrong (see
            `MCPServer`).
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        name: str | None = None,
        **options: Any,
    ) -> None:
        from toolfold.mcp._entry import server_name

        if isinstance(args, (str, bytes)):  # tuple() would split it into characters
            raise UsageError(
                f"MCP server {name or command!r}: args takes a list of arguments, got the "
                f"string {args!r} (write [{args!r}]; split a command line with shlex.split)"
            )
        args = tuple(args)
        # Two servers launched with one command (python, npx) are told apart by what they
        # run, and their prefixes: ``time (python -m mcp_server_time)``.
        shown = server_name(command, args) if isinstance(command, str) else command
        prefix = options.get("prefix")
        self._default_name = f"{prefix} ({shown})" if prefix else shown
        super().__init__(name or self._default_name, **options)
        self.command = command
        self.args = args
        self.env = None if env is None else dict(env)
        self.cwd = cwd

    def _target_entry(self) -> dict[str, Any]:
        from toolfold.mcp._entry import args_held, env_held

        found = (("args hold", args_held(self.args)), ("env holds", env_held(self.env or {})))
        held = [f"its {where} {', '.join(items)}" for where, items in found if items]
        if held:
            raise UsageError(
                f"MCP server {self.name!r}: {'; '.join(held)}, which may be credentials, and "
                "is not written to an agent file (give the file a server without them: build "
                "the server in code, passing the secret through its environment at run time, "
                "env={'NAME': os.environ['NAME']}; or point the server at a file holding it, a "
                "*_FILE or --...-file option; or write a $NAME reference where the server "
                "expands one)"
            )
        return {
            "command": self.command,
            "args": list(self.args),
            "env": self.env,
            "cwd": self.cwd,
            "name": None if self.name == self._default_name else self.name,
        }

    def _start_hint(self, exc: BaseException, mark: int) -> str:
        """Where to look when the process went away during the handshake.

        The SDK's ``Connection closed`` says only that the server's stdout
        ended. Its exit code stays inside the SDK (``stdio_client`` keeps the
        process to itself), and what it wrote to stderr went, as the SDK
        passes it on, to this process's stderr: the message says so.
        """
        return self._closed_hint(exc, "the MCP handshake")

    def _call_hint(self, exc: BaseException, mark: int, asked: _Asked) -> str:
        """Where to look when the process went away during a call (or before it):
        as `_start_hint` says for the handshake."""
        return self._closed_hint(exc, "the request")

    def _closed_hint(self, exc: BaseException, what: str) -> str:
        if not _connection_closed(exc):
            return ""
        return (
            f" (the server's process ended, or closed its stdout, before it answered {what}; "
            "what it wrote to stderr went to this process's stderr)"
        )

    def _target(self) -> Any:
        from mcp.client.stdio import StdioServerParameters

        return StdioServerParameters(
            command=self.command, args=list(self.args), env=self.env, cwd=self.cwd
        )


class MCPServerHTTP(MCPServer):
    """An MCP server reached over streamable HTTP.

    Credentials never show: the default name (in ``repr``, errors, and the
    error results a model reads) is the URL with its ``user:password@``, its
    query values and its fragment masked (``http://host/mcp?api_key=***``),
    and what the URL and ``headers`` carry is scrubbed from every `MCPError`.

    Args:
        url: The endpoint, e.g. ``"http://127.0.0.1:8000/mcp"``.
        headers: HTTP headers sent with every request, e.g.
            ``{"Authorization": f"Bearer {token}"}``: the place for
            credentials, rather than the URL. Their values are never shown.
            A value may be a `toolfold.adapters.Secret`, as in a model's
            ``headers=``.
        name: A name for messages (default: the URL, its credentials and
            the path segments holding a token masked).
        **options: `MCPServer`'s options (``prefix``, ``timeout``,
            ``startup_timeout``, ``requires_approval``, ``include``).

    Raises:
        UsageError: ``headers`` is not a mapping of header names to strings,
            or holds one a model's ``headers=`` refuses too: a name that is
            no HTTP token or is given twice, a framing header
            (``Content-Length``), a value with CR, LF or NUL, a credential's
            value (``Authorization``, ``x-api-key``..., a `Secret`) that is not
            ASCII. A non-ASCII value of another header is sent UTF-8 encoded.
    """

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str | Secret] | None = None,
        name: str | None = None,
        **options: Any,
    ) -> None:
        from toolfold.adapters._http._keys import mask_url_credentials
        from toolfold.mcp._entry import mask_path_tokens

        # Not recorded in run states nor Temporal histories (sources go by index):
        # masking the path's tokens too changes only what is shown.
        shown = mask_path_tokens(mask_url_credentials(url))
        self._shown_url = shown
        super().__init__(name or shown, **options)
        self.url = url
        self._headers = _checked_headers(self.name, headers)
        from toolfold.adapters._http._logs import guard_logs

        self._scrub = self._secrets()
        # httpx logs each request's URL at INFO, the MCP SDK a server's messages
        guard_logs(*self._scrub, package="mcp")
        from toolfold.adapters._http._keys import quoted_masker, scrubs

        self._mask = quoted_masker(scrubs(self._quoted()))
        # The requests (POSTs) the server answered with an HTTP error status: how many,
        # and the last ones' (number, `_request_key`, status) (`_status_hint`; the SDK's
        # error does not say it): a digest, not the arguments, which may be large.
        # Noted on the portal's thread, read on the caller's: under `_refused_lock`.
        self._refusals = 0
        self._refused: deque[tuple[int, str | None, int]] = deque(maxlen=_REFUSALS_KEPT)
        self._refused_lock = threading.Lock()

    def _target_entry(self) -> dict[str, Any]:
        from toolfold.mcp._entry import url_held

        name = self.name
        if self._headers:
            raise UsageError(
                f"MCP server {name!r}: its headers carry credentials and are not written "
                "to an agent file (give the file a server without headers)"
            )
        held = url_held(self.url)
        if held:
            raise UsageError(
                f"MCP server {name!r}: its URL carries {' and '.join(held)}, which may "
                "be credentials, and is not written to an agent file (give the file a URL "
                "without them, and pass the credential in headers= where the server is built "
                "in code)"
            )
        return {"url": self.url, "name": None if self.name == self._shown_url else self.name}

    async def _gone(self, client: Any) -> bool:
        """One request's stream can end early on a session that still works: a request
        decides (a listing past the SDK's cache: ``ping`` is gone from the protocol)."""
        try:
            with anyio.fail_after(min(self.timeout, 10)):
                await client.list_tools(cache_mode="bypass")
        except Exception:
            return True
        return False

    def _target(self) -> Any:
        from toolfold.adapters._http._checks import utf8_headers

        # a non-ASCII value goes out UTF-8 encoded, as a model's does (httpx encodes text as ASCII)
        sent = utf8_headers({key: value.reveal() for key, value in self._headers})
        return _with_headers(self.url, sent, self._note_status)

    async def _note_status(self, response: Any) -> None:
        """An httpx response hook: note a POST (an MCP message) answered with an error
        status. The GET stream's and the closing DELETE's are not: a server may answer
        them 405 (it offers no stream, no termination) and work."""
        if response.status_code >= 400 and response.request.method == "POST":
            key = _request_key(*_posted(response.request))
            with self._refused_lock:
                self._refusals += 1
                self._refused.append((self._refusals, key, response.status_code))

    def _mark(self) -> int:
        return self._refusals

    def _start_hint(self, exc: BaseException, mark: int) -> str:
        # (nothing else is asked while the handshake runs: any refusal since is its own)
        return self._status_hint(mark, None)

    def _call_hint(self, exc: BaseException, mark: int, asked: _Asked) -> str:
        """When the SDK's error is the one it makes of an HTTP error status
        (`_http_refused`), the status of the request ``asked``, refused since ``mark``
        (another request, made in parallel, may have been refused with another);
        else, when the SDK says ``Connection closed``, that the server ended the
        response without an answer."""
        said = self._status_hint(mark, asked) if _http_refused(exc) else ""
        if said or not _connection_closed(exc):
            return said
        return (
            " (the server closed the connection, or ended the response, before it "
            "answered the request)"
        )

    def _status_hint(self, mark: int, asked: _Asked | None) -> str:
        """The HTTP status the server refused the request ``asked`` with since ``mark``
        (None: the handshake's, any request), with what to check for an authentication
        failure (never a header's value): empty when none was, or when requests like it
        were refused with different ones. Its standard reason phrase, not the server's
        (which could echo anything)."""
        wanted = None if asked is None else _request_key(*asked)
        with self._refused_lock:
            refused = tuple(self._refused)
        statuses = {
            status
            for at, key, status in refused
            if at > mark and (asked is None or (wanted is not None and key == wanted))
        }
        if len(statuses) != 1:
            return ""
        (status,) = statuses
        starting = asked is None
        try:
            said = f"HTTP {status} {HTTPStatus(status).phrase}"
        except ValueError:  # a status of no standard
            said = f"HTTP {status}"
        if status in (401, 403):
            given = "the credentials given in headers=" if self._headers else "headers="
            more = " and what they may reach" if status == 403 else ""
            said += f": check {given}{more}"
            if not self._headers:
                said += ", where credentials go (headers={'Authorization': 'Bearer ...'})"
        elif status == 404 and starting:
            said += ": check the URL's path, often /mcp"
        return f" ({said})"

    def _secrets(self) -> tuple[Any, ...]:
        """The credentials of the URL and the headers, worked out once (see `_scrub`)."""
        from toolfold.adapters._http._keys import (
            MIN_BARE_PASSWORD,
            Secret,
            url_query_secrets,
            url_secrets,
            url_userinfo,
        )
        from toolfold.mcp._entry import path_tokens, url_path

        user = url_userinfo(self.url) or ""
        segments = url_path(self.url).split("/")
        forms = [
            self.url.partition("#")[2],
            *(segments[at] for at in path_tokens(self.url)),  # a webhook's secret, a key
            user.partition(":")[0],  # a token as the user: https://ghp_...@host
            *(value.reveal() for _, value in self._headers),
            # the credential after a scheme word: "Bearer sk-..."
            *(
                value.reveal().split(None, 1)[-1]
                for _, value in self._headers
                if value.reveal().strip()
            ),
        ]
        bare = [Secret(form) for form in forms if len(form) >= MIN_BARE_PASSWORD]
        return (*url_secrets(self.url), *url_query_secrets(self.url), *bare)

    def _quoted(self) -> tuple[Any, ...]:
        """What a successful result's text is masked of (`_mask`), as a model's transport
        masks a tool's result (``quoted_scrubs``): the URL's ``user:password@`` (a
        token as the user too), the values of credential headers
        (`is_credential_header`: ``Authorization``, ``x-api-key``, not ``X-Tenant``
        or ``User-Agent``), a token in the URL's path (`path_tokens`), and query
        values that are credentials (`_query_credential`: ``?api_key=``, ``?code=``,
        a token's shape, not ``?workspace=``). One shorter than `QUOTED_BARE` only
        where it is written as a credential (``Bearer abc``, ``x-api-key: abc``,
        ``api_key=abc``, ``user:pw@``), not as a word a result's data may hold.
        What else `_scrub` holds (every header's value, every query value) is
        masked in errors only: data a tool returns may well hold a tenant's or a
        workspace's name."""
        from toolfold.adapters._http._keys import (
            QUOTED_BARE,
            Secret,
            api_key_secrets,
            header_secrets,
            is_credential_header,
            url_secrets,
            url_userinfo,
        )
        from toolfold.mcp._entry import path_tokens, token_shaped, url_path

        user = urllib.parse.unquote((url_userinfo(self.url) or "").partition(":")[0])
        query = self.url.partition("#")[0].partition("?")[2]
        named = [piece.partition("=") for piece in query.split("&") if "=" in piece]
        segments = url_path(self.url).split("/")
        in_path = [segments[at] for at in path_tokens(self.url)]
        return (
            *url_secrets(self.url, bare=QUOTED_BARE),
            *((Secret(user),) if user and token_shaped(user) else ()),
            # a token in the path (``/mcp/sk-ak-.../sse``), as sent and decoded
            *(
                Secret(form)
                for segment in in_path
                for form in dict.fromkeys((segment, urllib.parse.unquote(segment)))
                if len(form) >= QUOTED_BARE
            ),
            *(
                found
                for name, value in self._headers
                if is_credential_header(name)
                for found in header_secrets(name, value, bare=QUOTED_BARE)
            ),
            *(
                found
                for name, _, value in named
                if _query_credential(urllib.parse.unquote_plus(name), value)
                for form in dict.fromkeys((value, urllib.parse.unquote_plus(value)))
                if form
                for found in api_key_secrets(Secret(form), name, "", bare=QUOTED_BARE)
            ),
        )


#: Query parameters whose value is a credential though no word of their name says so:
#: an Azure Functions key (``?code=``), a shared access signature (``?sig=``).
_QUERY_CREDENTIALS = frozenset({"code", "sig"})


def _query_credential(name: str, value: str) -> bool:
    """Whether a URL's query value is masked in a successful result (`MCPServerHTTP._quoted`):
    its parameter is named like a credential (``api_key``, `credential_name`) or is one
    of `_QUERY_CREDENTIALS`, or the value has a token's shape (`token_shaped`), not a
    word a result's data may hold (``?workspace=engineering-team-alpha``)."""
    from toolfold.mcp._entry import credential_name, token_shaped

    return (
        credential_name(name)
        or name.lower() in _QUERY_CREDENTIALS
        or token_shaped(urllib.parse.unquote_plus(value))
    )


def _checked_headers(
    server: str, headers: Mapping[str, str | Secret] | None
) -> tuple[tuple[str, Secret], ...]:
    """``headers`` as (name, `Secret` value) pairs; a value given as a `Secret` is kept.

    Raises:
        UsageError: Not a mapping of strings to strings or Secrets, or one a
            model's ``headers=`` refuses too (see `check_headers`): a name that
            is no HTTP token or is given twice, a framing header
            (``Content-Length``), a value with CR, LF, NUL or another control
            character, a credential's value (``Authorization``, a `Secret`)
            that is not ASCII. The message never quotes a value.
    """
    from toolfold.adapters._http._keys import Secret

    if headers is None:
        return ()
    if not isinstance(headers, Mapping):
        raise UsageError(
            f"MCP server {server!r}: headers must be a mapping of header names to values, "
            f"got {type(headers).__name__}"
        )
    wrong = [
        repr(key)
        for key, value in headers.items()
        if not isinstance(key, str) or not isinstance(value, (str, Secret))
    ]
    if wrong:
        raise UsageError(
            f"MCP server {server!r}: header names must be strings and values strings or "
            f"Secrets (not so for {', '.join(wrong)})"
        )
    from toolfold._errors import ModelConfigError
    from toolfold.adapters._http._checks import check_headers

    # A model's headers= checks (names, framing headers, a name given twice, CR/LF/NUL,
    # a credential's non-ASCII), as a UsageError: the server's other options raise one.
    # Unchecked, such a value failed only when the server opened, as the HTTP client's
    # own "could not start" error (retried by a durable run's listing); a non-ASCII one
    # never went out, where a model sends it as UTF-8.
    try:
        check_headers(headers, f"MCP server {server!r}: headers")
    except ModelConfigError as exc:
        raise UsageError(str(exc)) from None
    return tuple(
        (key, value if isinstance(value, Secret) else Secret(value))
        for key, value in headers.items()
    )


@asynccontextmanager
async def _with_headers(
    url: str,
    headers: Mapping[str, str | bytes],
    on_response: Callable[[Any], Awaitable[None]],
) -> AsyncIterator[Any]:
    """The SDK's streamable-HTTP transport to ``url`` on a client sending ``headers``.

    The client is the SDK's own (its timeouts for MCP's long-lived streams),
    given the headers and ``on_response`` as a response hook (the SDK's
    errors do not say a response's status); the transport leaves a client it
    was given open, so it is closed here.
    """
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=dict(headers)) as client:  # type: ignore[arg-type]
        client.event_hooks["response"].append(on_response)
        async with streamable_http_client(url, http_client=client) as streams:
            yield streams


def _tool_names(server: str, option: str, names: object) -> frozenset[str]:
    """``names``, a collection of tool names, as a frozenset.

    Raises:
        UsageError: A single string (it would be read letter by letter), or
            not a collection of strings.
    """
    if isinstance(names, str):
        raise UsageError(
            f"MCP server {server!r}: {option} takes a list of tool names, got the string "
            f"{names!r} (write [{names!r}])"
        )
    if not isinstance(names, (list, tuple, set, frozenset)) or not all(
        isinstance(one, str) for one in names
    ):
        wanted = (
            "True, a predicate over (call, state), or " if option == "requires_approval" else ""
        )
        raise UsageError(
            f"MCP server {server!r}: {option} takes {wanted}a list of tool names, got {names!r}"
        )
    return frozenset(names)


def _listed(item: Any) -> dict[str, Any]:
    """A listed MCP ``Tool`` as plain data: its name, description and input schema, and
    ``_meta`` `APPROVAL_META_KEY` when the server marks it (only then, so a listing
    recorded before is the same)."""
    entry: dict[str, Any] = {
        "name": item.name,
        "description": item.description or "",
        "inputSchema": dict(item.input_schema),
    }
    if (item.meta or {}).get(APPROVAL_META_KEY) is True:
        entry["_meta"] = {APPROVAL_META_KEY: True}
    return entry


def _fingerprint(listed: Sequence[Mapping[str, Any]]) -> str:
    canonical = json.dumps(
        sorted(listed, key=lambda spec: str(spec["name"])), sort_keys=True, ensure_ascii=True
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _describe(exc: BaseException, depth: int = 0) -> str:
    """``exc`` as `describe_exception` reads it (never raising), each member of a group
    in turn (groups nested more than 20 deep as `describe_exception` reads them).

    Not `describe_exception` itself: that one says the group's own text first
    (``ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception): ...``),
    and this text is the MCP tool's error result the model reads, kept as it was.
    """
    inner = getattr(exc, "exceptions", None)  # anyio task groups wrap what the server did
    if isinstance(inner, (list, tuple)) and inner and depth < 20:
        return "; ".join(_describe(one, depth + 1) for one in inner)
    return describe_exception(exc)


def _connection_closed(exc: BaseException, depth: int = 0) -> bool:
    """Whether ``exc`` (or a member of its group) is the SDK's ``Connection closed``."""
    from mcp.shared.exceptions import MCPError as SDKError
    from mcp_types import CONNECTION_CLOSED

    inner = getattr(exc, "exceptions", None)  # anyio task groups wrap what the server did
    if isinstance(inner, (list, tuple)) and depth < 20:
        return any(_connection_closed(one, depth + 1) for one in inner)
    return isinstance(exc, SDKError) and exc.code == CONNECTION_CLOSED


def _http_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is the MCP SDK's error for a request answered with an HTTP error
    status (`_HTTP_ERROR_MESSAGES`), not an error the server wrote."""
    from mcp.shared.exceptions import MCPError as SDKError

    return isinstance(exc, SDKError) and exc.message in _HTTP_ERROR_MESSAGES


def _posted(request: Any) -> tuple[str, Any]:
    """The JSON-RPC method and params of an HTTP request's body (``""`` and None when
    it holds none)."""
    try:
        message = json.loads(request.content)
    except Exception:  # no body read, no JSON
        return "", None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return "", None
    return message["method"], message.get("params")


def _request_key(method: str, params: Any) -> str | None:
    """A digest of what tells a request apart (`_status_hint`): its JSON-RPC ``method``
    and the ``name`` and ``arguments`` of its ``params`` (a tool call's; a listing's
    cursor is not), as canonical JSON (a tuple given is the list sent). None when
    they are no JSON."""
    held = params if isinstance(params, Mapping) else {}
    try:
        canonical = json.dumps(
            [method, held.get("name"), held.get("arguments")],
            sort_keys=True,
            ensure_ascii=False,
        )
    except (TypeError, ValueError, RecursionError):
        return None
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def _result_for_model(result: Any, mask: Callable[[str], str] | None = None) -> Any:
    """A `CallToolResult` that is no error (``isError``) as a tool's return value.

    The content blocks become text, or, when there is an image, audio or an
    embedded resource among them, a list of parts (`TextPart`, `ImagePart`,
    `FilePart`) that each provider adapter sends in its own format.
    ``structuredContent`` alone is returned as is (a structured result) when
    the blocks are text that says no more than it (`_all_said`: the JSON of
    it the spec has servers send too, or nothing); otherwise nothing is lost:
    the blocks are kept, and the structured data, as JSON, is one more text
    part unless a text block carries it already.

    ``mask`` (a server's credentials, `MCPServer._mask`) is applied to the
    text parts and to the structured data's text.
    """
    parts = [part for block in result.content for part in _block_parts(block)]
    if mask is not None:
        parts = [masked_part(mask, part) for part in parts]
    structured = result.structured_content
    if structured is not None:
        if mask is not None:
            structured = _masked_data(mask, structured)
        texts = [part.text for part in parts if isinstance(part, TextPart)]
        media = len(texts) < len(parts)
        # Each text's forms worked out once: the checks below are linear in the
        # result's size (a list of 1,000 rows is 1,000 blocks).
        forms = [_text_forms(text) for text in texts]
        carried = _carried(forms, structured)
        if not media and (carried == "all" or _all_said(texts, structured)):
            return structured
        if not carried:
            parts.append(TextPart(format_result(structured)))
    if any(not isinstance(part, TextPart) for part in parts):
        return parts
    texts = [part.text for part in parts if isinstance(part, TextPart)]
    return texts[0] if len(texts) == 1 else "\n".join(texts)


def _error_text(result: Any) -> str:
    """What an ``isError`` result says: its blocks' text (each image or file described),
    and its ``structuredContent`` as JSON unless a text block carries it already."""
    texts = [describe_content(_block_parts(block)) for block in result.content]
    structured = result.structured_content
    if structured is not None and not _carried([_text_forms(t) for t in texts], structured):
        texts.append(format_result(structured))
    return " ".join(texts) or "(no text)"


def _canonical(value: Any) -> str | None:
    """``value``'s JSON with sorted keys, what two equal JSON values share (None: none)."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None


def _text_forms(text: str) -> frozenset[str]:
    """What a text block may stand for, canonical (`_canonical`): its text, and the JSON
    value it holds, if any."""
    forms = {_canonical(text)}
    with suppress(ValueError, RecursionError):  # (no JSON, or nested too deep: the text alone)
        forms.add(_canonical(json.loads(text)))
    return frozenset(form for form in forms if form is not None)


def _carried(forms: Sequence[frozenset[str]], structured: Any) -> str:
    """Whether a result's text blocks (their `_text_forms`) carry ``structured`` whole:
    one of them is its JSON, or, for data wrapped in one key (the MCP SDK's
    ``{"result": ...}`` for a tool returning no object), the wrapped value, as one block
    or one block per item. ``"all"`` when the blocks say nothing else (one block, or one
    per item), ``"one"`` when one block of more does, ``""`` when none does."""
    whole = _canonical(structured)
    if whole is not None and any(whole in found for found in forms):
        return "all" if len(forms) == 1 else "one"
    if not (isinstance(structured, dict) and len(structured) == 1 and forms):
        return ""
    (wrapped,) = structured.values()
    if len(forms) == 1:
        return "all" if _canonical(wrapped) in forms[0] else ""
    if (
        isinstance(wrapped, list)
        and len(wrapped) == len(forms)
        and all(_canonical(item) in found for item, found in zip(wrapped, forms, strict=True))
    ):
        return "all"
    return ""


def _all_said(texts: Sequence[str], structured: Any) -> bool:
    """Whether each text block says no more than ``structured``: it is blank, or it (or
    the JSON value it holds) is the data or a value inside it (the MCP SDK writes a list
    returned by a tool one item per block). The data's values are digested once
    (`_values_inside`), each block's looked up in them."""
    inside: set[bytes] | None = None
    for text in texts:
        if not text.strip():
            continue
        if inside is None:
            inside = _values_inside(structured)
        said = {_value_digest(text)}
        with suppress(ValueError, RecursionError):  # (no JSON, or nested too deep)
            said.add(_value_digest(json.loads(text)))
        if inside.isdisjoint(said):
            return False
    return True


def _value_digest(value: Any) -> bytes | None:
    """A digest two equal JSON values share (what their `_canonical` JSON is equal for):
    see `_values_inside`. None: no JSON."""
    return _digests(value, None)


def _values_inside(data: Any) -> set[bytes]:
    """The digests (`_value_digest`) of ``data`` and of each value inside it (nested up
    to 100 deep), walked once: in time linear in the data's size, however nested."""
    found: set[bytes] = set()
    _digests(data, found)
    return found


def _digests(data: Any, found: set[bytes] | None) -> bytes | None:
    """``data``'s digest, each value's inside it added to ``found``: a scalar's is that of
    its canonical JSON (`_canonical`), a list's or an object's that of its items' digests
    (an object's by its keys' JSON, sorted), so no value's JSON is written but a
    scalar's. Walked without recursion; past 100 deep, a value's digest is that of its
    canonical JSON (the values inside it are not looked up)."""
    results: list[bytes | None] = []
    stack: list[tuple[Any, int, bool]] = [(data, 0, False)]
    while stack:
        value, level, ready = stack.pop()
        is_list = isinstance(value, (list, tuple))
        if not (is_list or isinstance(value, dict)) or (level >= 100 and not ready):
            form = _canonical(value)
            digest = None if form is None else _sha(b"s" if level < 100 else b"j", form)
        elif not ready:
            stack.append((value, level, True))
            inner = value if is_list else value.values()
            stack.extend((item, level + 1, False) for item in inner)
            continue
        else:
            count = len(value)
            kids = results[len(results) - count :][::-1]
            del results[len(results) - count :]
            digest = _container_digest(value, kids)
        if found is not None and digest is not None:
            found.add(digest)
        results.append(digest)
    return results[0]


def _container_digest(value: Any, kids: list[bytes | None]) -> bytes | None:
    """A list's or an object's digest from its items' (`_digests`), in its order."""
    known = [kid for kid in kids if kid is not None]
    if len(known) < len(kids):
        return None
    if not isinstance(value, dict):
        return hashlib.sha256(b"[" + b"".join(known)).digest()
    keys = [_canonical(key if isinstance(key, str) else str(key)) or "" for key in value]
    pairs = sorted(zip(keys, known, strict=True))
    return hashlib.sha256(
        b"{" + b"".join(key.encode("utf-8", "surrogatepass") + kid for key, kid in pairs)
    ).digest()


def _sha(kind: bytes, form: str) -> bytes:
    return hashlib.sha256(kind + form.encode("utf-8", "surrogatepass")).digest()


def _masked_data(mask: Callable[[str], str], data: Any, depth: int = 0) -> Any:
    """JSON data with ``mask`` applied to its strings, keys too (nested up to 100 deep;
    deeper, as JSON text). A key masked like another key (two keys holding a secret,
    or a key ``***`` beside one) is told apart by a number, ``*** (2)``: no value is
    lost."""
    if isinstance(data, str):
        return mask(data)
    if not isinstance(data, (dict, list)):
        return data
    if depth >= 100:
        return mask(json.dumps(data))
    if isinstance(data, list):
        return [_masked_data(mask, item, depth + 1) for item in data]
    keys = {key: mask(key) for key in data}
    taken = {key for key, shown in keys.items() if shown == key}
    masked: dict[str, Any] = {}
    for key, item in data.items():
        shown = keys[key]
        if shown != key:
            number = 1
            while shown in taken:
                number += 1
                shown = f"{keys[key]} ({number})"
            taken.add(shown)
        masked[shown] = _masked_data(mask, item, depth + 1)
    return masked


def _block_parts(block: Any) -> list[TextPart | ImagePart | FilePart]:
    """One MCP content block as message parts (a resource link, a pointer only, as text)."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return [TextPart(str(block.text))]
    if kind == "image":
        return [ImagePart(_bytes(block.data, kind), media_type=block.mime_type)]
    if kind == "audio":
        return [FilePart(_bytes(block.data, kind), media_type=block.mime_type)]
    if kind == "resource":
        resource = block.resource
        uri = str(resource.uri)
        mime = getattr(resource, "mime_type", None)
        text = getattr(resource, "text", None)
        if text is not None:
            data = str(text).encode()
            return [FilePart(data, media_type=mime or "text/plain", filename=uri)]
        data = _bytes(resource.blob, "resource")
        if mime and mime.startswith("image/"):
            return [ImagePart(data, media_type=mime)]
        return [FilePart(data, media_type=mime or "application/octet-stream", filename=uri)]
    if kind == "resource_link":
        return [TextPart(f"[resource link {block.uri}: {block.name}]")]
    return [TextPart(json.dumps(block.model_dump(mode="json"), sort_keys=True))]


def _bytes(data: str, block: str) -> bytes:
    """A block's base64 ``data`` decoded.

    Raises:
        ValueError: It is no base64, naming the ``block``.
    """
    try:
        return base64.b64decode(data, validate=False)
    except binascii.Error as exc:
        raise ValueError(f"its {block} block's data is not base64 ({exc})") from None


_REFUSED = re.compile(f"[^{TOOL_NAME_CHARACTERS}]")
# The prefix a message about a refused tool name shows, as an example.
_EXAMPLE = "s"


def model_name(listed: str, *, collides: bool = False) -> str:
    """A listed tool's name as providers accept it and toolfold allows.

    Providers take 1 to 64 of ``a-z A-Z 0-9 _ -``, and toolfold reserves
    the ``tool_choice`` values ``auto``, ``none`` and ``required`` (a tool
    so named could not be forced). A name that fits is kept. A reserved
    name gets a final ``_``, as Python's ``class_``. Otherwise each other
    character (MCP allows ``.``) becomes ``_``, and a name still over 64
    characters keeps its first 55 and ends with ``_`` and 8 hex digits of
    its SHA-256, so that two long names stay apart. A name that
    ``collides`` with another tool's of the same listing (``天気`` and
    ``時間`` are both ``__``; ``files.read`` is ``files_read``, listed too;
    see `_told_apart`) ends with ``_`` and those 8 hex digits too (within 64
    characters), even one that fits: ``files_read`` too. Pure: the same
    listing gives the same names (a durable run makes its tools again from
    the recorded listing).

    Example:
        >>> model_name("files.read")
        'files_read'
        >>> model_name("auto")
        'auto_'
        >>> model_name("天気", collides=True)
        '___bc79d84d'
    """
    # Safe for recorded runs: a listing with a reserved name used to be refused whole
    # (ToolDefinitionError), so no run or history holds tools made from one; nor one
    # with two names made one (`collides`).
    if listed in RESERVED_NAMES:
        name = f"{listed}_"
    elif not listed or (not collides and TOOL_NAME.fullmatch(listed)):
        return listed
    else:
        name = _REFUSED.sub("_", listed)  # (a name that fits has none to replace)
    if collides or len(name) > TOOL_NAME_LONGEST:
        name = with_digest(name, listed)
    return name


def _told_apart(listed: Sequence[str]) -> frozenset[str]:
    """The names of ``listed`` (with their prefix) that `model_name` changes into one another's.

    ``天気`` and ``時間`` (both ``__``), ``files.read`` beside ``files_read``,
    ``auto`` beside ``auto_``: every one of them gets its hash, the one that
    fits too, so that a name a saved run called (``files_read``, before the
    server listed ``files.read`` too) no longer exists (a resume refuses the
    call as an unknown tool) rather than reaching another server tool.
    Whatever the order of the listing; a name colliding with no other keeps
    the name it always had, so a run recorded with a listing that works
    keeps its names (such listings were refused before). Distinct names are
    counted: a name listed twice is not told apart from itself (the two
    tools have one name, which a duplicate-name check refuses).
    """
    made = {each: model_name(each) for each in set(listed)}
    counts = Counter(made.values())
    return frozenset(each for each, name in made.items() if counts[name] > 1)
