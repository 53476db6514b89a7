"""MCP both ways, against real servers: mcp-server-time, toolfold's own server, a broken one."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress
from typing import Any

import pytest

from tests.ecosystem.conftest import GUARD_TOKEN, ROOT, children, serving_tools
from tests.ecosystem.served_tools import (
    RELEASE,
    TOOLS,
    add,
    delete_everything,
    greet,
    slow_async,
    slow_sync,
)
from toolfold import Agent, ToolDefinitionError, UsageError, tool
from toolfold.mcp import (
    MCPError,
    MCPServerHTTP,
    MCPServerStdio,
    MCPToolsChangedWarning,
    load_tools,
    mcp_server,
    serve,
)
from toolfold.mcp.__main__ import main as mcp_main
from toolfold.testing import ScriptedModel


def _time_server(**options: Any) -> MCPServerStdio:
    return MCPServerStdio(sys.executable, ["-m", "mcp_server_time"], name="time", **options)


def _our_server(**options: Any) -> MCPServerStdio:
    return MCPServerStdio(
        sys.executable,
        ["-m", "toolfold.mcp", "serve", "tests.ecosystem.served_tools:TOOLS"],
        cwd=str(ROOT),
        name="ours",
        **options,
    )


def _everything_shown(error: BaseException) -> str:
    """The text of every exception under ``error`` (causes, contexts, exception groups'
    members) and of the requests and URLs they hold."""
    seen: set[int] = set()
    stack: list[Any] = [error]
    shown: list[str] = []
    while stack:
        exc = stack.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        shown.append(repr(exc))
        for value in vars(exc).values():
            shown.append(repr(value))
            for part in ("url", "headers"):
                shown.append(repr(getattr(value, part, "")))
                shown.append(
                    repr(dict(getattr(value, part, None) or {})) if part == "headers" else ""
                )
        stack += [exc.__cause__, exc.__context__, *getattr(exc, "exceptions", ())]
    return "\n".join(shown)


def test_a_request_whose_stream_is_cut_leaves_a_working_session_open(
    http_dropping_server: str,
) -> None:
    """Over HTTP one request's stream can end without an answer on a session that still
    works: that call fails, the session stays open, and the next call goes through on it."""
    with MCPServerHTTP(http_dropping_server) as server:
        shout = {t.name: t for t in server.tools()}["shout"]
        with pytest.raises(MCPError, match="failed") as caught:
            _call(shout, {"text": "DROP"})
        assert str(caught.value).endswith(
            "tool 'shout' failed: MCPError: SSE stream ended without a response (the server closed the "
            "connection, or ended the response, before it answered the request)"
        )
        assert server.is_open
        assert _call(shout, {"text": "next"}) == "NEXT"


def test_a_call_refused_with_an_http_status_says_it(http_dropping_server: str) -> None:
    """A call the server refuses with 401, 403 or 500 (no JSON-RPC answer) names the status
    (the SDK says only "Server returned an error response"), and for 401 and 403 what to
    check; the session goes on."""
    headers = {"X-Api-Key": "sk-DROPPING-0451"}
    with MCPServerHTTP(http_dropping_server, name="gw", headers=headers) as server:
        shout = {t.name: t for t in server.tools()}["shout"]
        said = {}
        for status in (401, 403, 500):
            with pytest.raises(MCPError) as caught:
                _call(shout, {"text": f"REFUSE-{status}"})
            said[status] = str(caught.value)
        assert _call(shout, {"text": "next"}) == "NEXT"
    failed = "MCP server 'gw': tool 'shout' failed: MCPError: Server returned an error response"
    assert said == {
        401: f"{failed} (HTTP 401 Unauthorized: check the credentials given in headers=)",
        403: f"{failed} (HTTP 403 Forbidden: check the credentials given in headers= and what "
        "they may reach)",
        500: f"{failed} (HTTP 500 Internal Server Error)",
    }


def test_a_call_failing_beside_a_refused_one_does_not_get_its_status(
    http_dropping_server: str,
) -> None:
    """Of two calls made at once, one refused with 500 and one whose stream is cut, each
    says its own failure: the cut one no longer reads "(HTTP 500 ...)", the status of
    the other."""
    with MCPServerHTTP(http_dropping_server, name="gw") as server:
        shout = {t.name: t for t in server.tools()}["shout"]

        async def both() -> list[Any]:
            return await asyncio.gather(
                shout.function({"text": "REFUSE-500 PAIRED"}),
                shout.function({"text": "DROP PAIRED"}),
                return_exceptions=True,
            )

        refused, cut = asyncio.run(both())
    failed = "MCP server 'gw': tool 'shout' failed: MCPError:"
    assert str(refused) == (
        f"{failed} Server returned an error response (HTTP 500 Internal Server Error)"
    )
    assert str(cut) == (
        f"{failed} SSE stream ended without a response (the server closed the connection, "
        "or ended the response, before it answered the request)"
    )


class _Refused:
    """An httpx response as `MCPServerHTTP._note_status` reads it: a POST of a tool call
    the server answered with ``status``."""

    def __init__(self, arguments: Any, status: int = 503) -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        body["params"] = {"name": "shout", "arguments": arguments}
        self.status_code = status
        self.request = type("Request", (), {"method": "POST", "content": json.dumps(body)})()


def _note(server: MCPServerHTTP, response: _Refused) -> None:
    """Run the response hook (a coroutine that never waits) on this thread."""
    with suppress(StopIteration):
        server._note_status(response).send(None)


def test_a_refusal_noted_while_a_failure_is_described_never_breaks_the_error() -> None:
    """The response hook notes refusals on the session's thread while a failed call's
    hint reads them on the caller's: that read raised "deque mutated during iteration"
    (359 of 20,000 hints) instead of the MCPError."""
    server = MCPServerHTTP("http://127.0.0.1:9/mcp", name="gw")
    for at in range(64):
        _note(server, _Refused({"at": at}))
    stop = threading.Event()

    def refusing() -> None:
        while not stop.is_set():
            _note(server, _Refused({"at": 0}))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    writer = threading.Thread(target=refusing)
    writer.start()
    try:
        hints = {
            server._status_hint(0, ("tools/call", {"name": "shout", "arguments": {"at": 0}}))
            for _ in range(5_000)
        }
    finally:
        stop.set()
        writer.join()
        sys.setswitchinterval(interval)
    assert hints == {" (HTTP 503 Service Unavailable)"}


def test_a_refused_calls_arguments_are_not_kept_and_a_tuple_finds_its_status() -> None:
    """Refusals are kept as digests, not the calls' arguments (64 refused calls of 5 MB
    held 590 MB); the call is found by its arguments as sent, a tuple as the list."""
    server = MCPServerHTTP("http://127.0.0.1:9/mcp", name="gw")
    blob = "x" * 100_000
    for at in range(64):
        _note(server, _Refused({"blob": blob, "at": at, "rows": [1, 2]}))
    assert all(blob not in repr(kept) for kept in server._refused)
    assert sum(len(repr(kept)) for kept in server._refused) < 64 * 200
    asked = ("tools/call", {"name": "shout", "arguments": {"blob": blob, "at": 3, "rows": (1, 2)}})
    assert server._status_hint(0, asked) == " (HTTP 503 Service Unavailable)"
    other = ("tools/call", {"name": "shout", "arguments": {"at": 3}})
    assert server._status_hint(0, other) == ""


def test_a_failure_from_a_replaced_session_leaves_the_current_one_alone() -> None:
    """A call that fails on a session since replaced (another caller restarted it) does not
    mark the fresh session ended."""
    server = MCPServerHTTP("http://127.0.0.1:9/mcp")
    old, current = object(), object()
    server._task = current  # type: ignore[assignment]
    server._note_end(old)
    assert server._ended is False
    server._note_end(current)
    assert server._ended is True


def _call(tool: Any, arguments: dict[str, Any]) -> Any:
    return asyncio.run(tool.function(arguments))


def test_time_server_tools_become_prefixed_tools_with_the_server_schema() -> None:
    """mcp-server-time's tools are listed with the prefix and their inputSchema, and run."""
    with _time_server(prefix="time") as server:
        tools = {t.name: t for t in server.tools()}
        assert set(tools) == {"time_get_current_time", "time_convert_time"}
        current = tools["time_get_current_time"]
        assert current.parameters["required"] == ["timezone"]
        assert "IANA" in current.parameters["properties"]["timezone"]["description"]
        result = _call(current, {"timezone": "Europe/Paris"})
    assert result["timezone"] == "Europe/Paris"
    assert not server.is_open


def test_a_server_error_result_is_a_tool_error_naming_server_and_tool() -> None:
    """isError from the server raises MCPError carrying the server's own text."""
    with _time_server() as server:
        current = {t.name: t for t in server.tools()}["get_current_time"]
        with pytest.raises(MCPError, match=r"'time'.*'get_current_time'.*Nowhere/Bad"):
            _call(current, {"timezone": "Nowhere/Bad"})


def test_include_and_approval_by_name_shape_the_listed_tools() -> None:
    """`include` keeps only named tools; a name list sets requires_approval per tool."""
    with _time_server(include=["convert_time"], requires_approval=["convert_time"]) as server:
        (only,) = server.tools()
    assert only.name == "convert_time"
    assert only.requires_approval is True


def test_names_that_match_no_listed_tool_are_errors() -> None:
    """A misspelt or prefixed name in include / requires_approval fails the listing, naming it."""
    with pytest.raises(ToolDefinitionError, match=r"include names 'convert_tme'.*get_current_time"):
        _time_server(include=["convert_tme"]).tools()
    prefixed = _time_server(prefix="time", requires_approval=["time_convert_time"])
    with pytest.raises(ToolDefinitionError, match=r"without the prefix: write 'convert_time'"):
        prefixed.tools()
    assert not prefixed.is_open
    with pytest.raises(
        UsageError, match=r"got the string 'convert_time' \(write \['convert_time'\]\)"
    ):
        _time_server(requires_approval="convert_time")
    with pytest.raises(UsageError, match="include takes a list of tool names"):
        _time_server(include="convert_time")
    with pytest.raises(UsageError, match="requires_approval takes True, a predicate"):
        _time_server(requires_approval=3)


@pytest.mark.parametrize("bad", ["5", None, True, 0, -1.0, float("nan"), float("inf")])
@pytest.mark.parametrize("option", ["timeout", "startup_timeout"])
def test_a_timeout_that_is_no_positive_finite_number_is_a_usage_error(
    option: str, bad: Any
) -> None:
    """A timeout given as a string, None, a bool, zero or less, NaN or infinity is refused
    when the server is made, naming the server, the option and the value."""
    for make in (
        lambda: MCPServerStdio(sys.executable, ["x"], name="s", **{option: bad}),
        lambda: MCPServerHTTP("http://127.0.0.1:9/mcp", name="s", **{option: bad}),
    ):
        with pytest.raises(UsageError) as caught:
            make()
        assert str(caught.value) == (
            f"MCP server 's': {option} takes a positive, finite number of seconds, got {bad!r}"
        )


def test_stdio_args_given_as_one_string_is_a_usage_error() -> None:
    """``args`` as one string (which would be split into its characters) is refused,
    saying to give a list."""
    with pytest.raises(UsageError) as caught:
        MCPServerStdio(sys.executable, "server.py")
    assert str(caught.value) == (
        f"MCP server {sys.executable!r}: args takes a list of arguments, got the string "
        "'server.py' (write ['server.py']; split a command line with shlex.split)"
    )
    assert MCPServerStdio(sys.executable, ["server.py"]).args == ("server.py",)


def test_a_local_tool_named_as_an_mcp_tool_is_refused_saying_prefix_or_include() -> None:
    """A local tool sharing a name with an unprefixed MCP server's tool is refused naming
    both, with the remedies each takes: name= for the local one, prefix= or include= for
    the server's (which takes no name=)."""
    before = children()
    server = _our_server()
    with pytest.raises(ToolDefinitionError) as caught:
        Agent(ScriptedModel(["done"]), tools=[add, server]).run("x")
    assert str(caught.value).endswith(
        "tool name 'add' is used by 2 tools (made from tests.ecosystem.served_tools:add, "
        "tool 'add' of MCP server 'ours'); give them distinct names: name=... for a tool "
        "of your own; prefix=... on MCP server 'ours', or include=[...] to leave 'add' out"
    )
    assert not server.is_open
    assert children() == before


def test_two_mcp_servers_of_one_name_sharing_a_tool_name_offer_no_name_remedy() -> None:
    """Two server objects of one name sharing a tool name are refused offering only what an
    MCP tool takes (prefix= or include=), not name= for a tool of one's own: there is none."""
    first, second = _our_server(include=["add"]), _our_server(include=["add"])
    with pytest.raises(ToolDefinitionError) as caught:
        Agent(ScriptedModel(["done"]), tools=[first, second]).run("x")
    assert str(caught.value).endswith(
        "tool name 'add' is used by 2 tools (2 tools made from tool 'add' of MCP server "
        "'ours'); give them distinct names: prefix=... on MCP server 'ours', or "
        "include=[...] to leave 'add' out"
    )


def test_one_mcp_server_listed_twice_is_refused_saying_so() -> None:
    """The same server object twice in an agent's tools is refused when the agent is made,
    saying it is listed twice (not as tools sharing names at the run)."""
    server = _our_server()
    with pytest.raises(ToolDefinitionError) as caught:
        Agent(ScriptedModel(["done"]), tools=[server, add, server], name="a")
    assert str(caught.value) == (
        "the tool source MCPServerStdio 'ours' is listed 2 times in the tools of agent 'a': "
        "list it once (each of its tools would be there twice)"
    )
    assert not server.is_open


def test_our_server_lists_the_derived_schemas_to_the_sdk_client() -> None:
    """`python -m toolfold.mcp serve` lists each tool with exactly its derived schema."""

    async def main() -> dict[str, Any]:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters

        target = StdioServerParameters(
            command=sys.executable,
            args=["-m", "toolfold.mcp", "serve", "tests.ecosystem.served_tools:TOOLS"],
            cwd=str(ROOT),
        )
        async with Client(target) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            ok = await client.call_tool("add", {"a": 2, "b": 3})
            bad = await client.call_tool("add", {"a": "two", "b": 3})
            failed = await client.call_tool("fail", {"reason": "on purpose"})
            unknown = await client.call_tool("nope", {})
        return {"listed": listed, "ok": ok, "bad": bad, "failed": failed, "unknown": unknown}

    got = asyncio.run(main())
    assert got["listed"]["add"].input_schema == add.parameters
    assert got["listed"]["add"].description == add.description
    assert [c.text for c in got["ok"].content] == ["5"]
    assert not got["ok"].is_error
    assert got["bad"].is_error
    assert "a" in got["bad"].content[0].text
    assert got["failed"].is_error
    assert got["failed"].content[0].text == "RuntimeError: on purpose"
    assert got["unknown"].is_error
    assert "unknown tool 'nope'" in got["unknown"].content[0].text


def _served(server: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """What the SDK's client gets calling ``server`` (in process) with each of ``calls``."""
    from mcp import Client

    async def main() -> list[Any]:
        async with Client(server) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return asyncio.run(main())


def _texts(result: Any) -> list[str]:
    return [block.text for block in result.content]


class _BadStr(Exception):
    """An exception whose ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("str fails")


def test_a_served_tool_raising_an_unprintable_exception_is_an_error_result() -> None:
    """A tool exception whose str() fails reaches the host as an isError result, not an internal error."""

    @tool
    def lookup() -> str:
        """Look up."""
        raise _BadStr()

    @tool
    def quiet() -> str:
        """Fail with no message."""
        raise ValueError()

    failed, empty, ok = _served(
        mcp_server([lookup, quiet, add]),
        [("lookup", {}), ("quiet", {}), ("add", {"a": 1, "b": 2})],
    )
    assert (_texts(failed), failed.is_error) == (["_BadStr: <unprintable _BadStr>"], True)
    assert (_texts(empty), empty.is_error) == (["ValueError"], True)
    assert (_texts(ok), ok.is_error) == (["3"], False)


@pytest.mark.parametrize("http", [False, True])
def test_a_tool_raising_a_stray_cancel_or_system_exit_is_an_error_result(http: bool) -> None:
    """A served tool that raises CancelledError while its call was not cancelled, or calls
    sys.exit(), gives an isError result; the server goes on serving (stdio and HTTP)."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    odd = "tests.ecosystem.odd_tools:TOOLS"

    async def calls(target: Any) -> list[Any]:
        with anyio.fail_after(60):  # bounds a hang
            async with Client(target) as client:
                names = [("stray_cancel", {}), ("exits", {}), ("add", {"a": 1, "b": 2})]
                return [await client.call_tool(name, arguments) for name, arguments in names]

    if http:
        with serving_tools("--port", "0", tools=odd) as url:
            stray, exited, added = asyncio.run(calls(url))
    else:
        arguments = ["-m", "toolfold.mcp", "serve", odd]
        target = StdioServerParameters(command=sys.executable, args=arguments, cwd=str(ROOT))
        stray, exited, added = asyncio.run(calls(target))
    assert (_texts(stray), stray.is_error) == (["CancelledError"], True)
    assert (_texts(exited), exited.is_error) == (["SystemExit: 3"], True)
    assert (_texts(added), added.is_error) == (["3"], False)


def test_a_cancelled_scope_is_a_real_cancel_and_a_tools_own_cancelled_error_is_not() -> None:
    """The server tells the host's cancel (a cancelled scope around the call) from a
    CancelledError a tool raised while nothing cancelled it."""
    import anyio

    from toolfold.mcp._server import _cancelled

    seen: list[bool] = []

    async def main() -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()
            try:
                await anyio.sleep(0)
            except anyio.get_cancelled_exc_class():
                seen.append(_cancelled())
                raise
        inner = asyncio.ensure_future(asyncio.Event().wait())
        inner.cancel()
        try:
            await inner
        except asyncio.CancelledError:
            seen.append(_cancelled())

    asyncio.run(main())
    assert seen == [True, False]


def test_the_client_describes_an_unprintable_failure_without_raising() -> None:
    """The MCP client names a failure whose str() fails, each in a group, as describe_exception does."""
    from toolfold.mcp._client import _describe

    group = Exception("task group")
    group.exceptions = (_BadStr(), OSError("pipe closed"))  # type: ignore[attr-defined]
    assert _describe(group) == "_BadStr: <unprintable _BadStr>; OSError: pipe closed"
    assert _describe(_BadStr()) == "_BadStr: <unprintable _BadStr>"


def test_the_client_describes_a_very_deeply_nested_group_without_recursion_error() -> None:
    """A server failure nested 30,000 groups deep is described (as describe_exception reads the
    rest past 20 levels), not a RecursionError."""
    from toolfold.mcp._client import _describe

    error = Exception("leaf")
    for _ in range(30_000):
        outer = Exception("group")
        outer.exceptions = (error,)  # type: ignore[attr-defined]
        error = outer
    assert _describe(error) == "Exception: group"


def _nested(error: BaseException, depth: int) -> BaseException:
    for _ in range(depth):
        error = _Group("task group", [error])
    return error


def _sdk_error(code: int) -> BaseException:
    from mcp.shared.exceptions import MCPError as SDKError

    return SDKError(code, "Connection closed" if code == _CONNECTION_CLOSED else "boom")


if sys.version_info >= (3, 11):
    _Group: Any = ExceptionGroup  # noqa: F821 (a builtin from 3.11)
else:  # Python 3.10: the backport anyio brings
    from exceptiongroup import ExceptionGroup as _Group

#: The SDK's code of a request failed because its session's transport closed.
_CONNECTION_CLOSED = -32000


@pytest.mark.parametrize(
    ("failure", "lost"),
    [
        (lambda: _sdk_error(_CONNECTION_CLOSED), True),
        (lambda: _Group("task group", [_sdk_error(_CONNECTION_CLOSED)]), True),
        (lambda: _Group("task group", [ValueError("x"), _sdk_error(_CONNECTION_CLOSED)]), True),
        (lambda: _nested(_sdk_error(_CONNECTION_CLOSED), 2), True),
        (lambda: _nested(_sdk_error(_CONNECTION_CLOSED), 20), True),
        (lambda: _Group("task group", [ValueError("x")]), False),
        (lambda: _sdk_error(-32603), False),  # another code: that request's failure only
        (lambda: _nested(_sdk_error(_CONNECTION_CLOSED), 21), False),  # read 20 deep at most
        (lambda: ValueError("x"), False),
    ],
    ids=[
        "closed",
        "group[closed]",
        "group[ValueError,closed]",
        "nested",
        "nested-20",
        "group[ValueError]",
        "other-code",
        "nested-21",
        "ValueError",
    ],
)
def test_a_session_is_lost_when_a_failure_holds_the_closed_connection_error(
    failure: Any, lost: bool
) -> None:
    """A request failing with the SDK's CONNECTION_CLOSED, alone or inside a task group's
    exception group (nested up to 20 deep), marks the session lost (a stdio server: no
    second request asked); any other failure, another code included, does not."""
    from mcp_types import CONNECTION_CLOSED

    from toolfold.mcp._client import _connection_closed

    assert CONNECTION_CLOSED == _CONNECTION_CLOSED
    server = MCPServerStdio(sys.executable, ["x"], name="s")
    error = failure()
    assert _connection_closed(error) is lost
    assert asyncio.run(server._lost(error, None)) is lost


def test_served_tools_get_a_run_context_their_timeout_and_sub_runs() -> None:
    """A RunContext (with deps), a tool's timeout and an agent as a tool work over MCP."""
    helper = Agent(ScriptedModel(["the helper's answer"]), name="helper").as_tool()
    waiting = Agent(
        ScriptedModel([ScriptedModel.call("delete_everything", {"path": "/"})]),
        name="careful",
        tools=[delete_everything],
    ).as_tool()
    server = mcp_server([greet, slow_sync, slow_async, helper, waiting], deps={"user": "Ada"})
    try:
        greeted, sync, asynchronous, helped, waited = _served(
            server,
            [
                ("greet", {"greeting": "Hello"}),
                ("slow_sync", {}),
                ("slow_async", {}),
                ("helper", {"input": "help"}),
                ("careful", {"input": "clean up"}),
            ],
        )
    finally:
        RELEASE.set()  # the thread slow_sync was left in ends
    assert (_texts(greeted), greeted.is_error) == (["Hello, Ada (greet)"], False)
    assert sync.is_error
    assert _texts(sync) == ["tool 'slow_sync' timed out after 0.5 s"]
    assert asynchronous.is_error
    assert _texts(asynchronous) == ["tool 'slow_async' timed out after 0.5 s"]
    assert (_texts(helped), helped.is_error) == (["the helper's answer"], False)
    assert waited.is_error
    assert "wait for an approval" in _texts(waited)[0]


def test_a_tool_requiring_approval_is_served_only_when_the_host_approves() -> None:
    """mcp_server refuses a tool with requires_approval, unless approved_by_host=True."""
    with pytest.raises(ToolDefinitionError, match=r"'delete_everything' requires approval"):
        mcp_server([add, delete_everything])
    (deleted,) = _served(
        mcp_server([add, delete_everything], approved_by_host=True),
        [("delete_everything", {"path": "/tmp/x"})],
    )
    assert _texts(deleted) == ["deleted /tmp/x"]


def test_a_served_tool_requiring_approval_says_so_to_the_host() -> None:
    """A tool served with approved_by_host lists the cautious annotations and the approval _meta
    key; one without requires_approval lists neither."""
    from mcp import Client

    async def listed() -> dict[str, Any]:
        async with Client(mcp_server([add, delete_everything], approved_by_host=True)) as client:
            tools = (await client.list_tools()).tools
        return {t.name: t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools}

    tools = asyncio.run(listed())
    assert tools["delete_everything"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
    }
    assert tools["delete_everything"]["_meta"] == {"toolfold/requires_approval": True}
    assert "annotations" not in tools["add"]
    assert "_meta" not in tools["add"]


def test_toolfold_as_host_requires_approval_for_a_tool_served_so() -> None:
    """Listing a toolfold server run with --approved-by-host, a tool it marks in _meta requires
    approval (its server's policy False or not), so a run stops for it; others do not."""
    command = ["-m", "toolfold.mcp", "serve", "tests.ecosystem.served_tools:APPROVAL_TOOLS"]
    server = MCPServerStdio(
        sys.executable, [*command, "--approved-by-host"], cwd=str(ROOT), name="served"
    )
    with server:
        listed = {spec["name"]: spec for spec in server.listing()}
        tools = {t.name: t for t in server.tools()}
        assert listed["delete_everything"]["_meta"] == {"toolfold/requires_approval": True}
        assert "_meta" not in listed["add"]
        assert (tools["delete_everything"].requires_approval, tools["add"].requires_approval) == (
            True,
            False,
        )
        model = ScriptedModel([ScriptedModel.call("delete_everything", {"path": "/"})])
        paused = Agent(model, tools=[server]).run("clean up")
    assert [call.name for call in paused.state.pending_approvals] == ["delete_everything"]


def test_streamable_http_both_ways(http_tools_server: str) -> None:
    """MCPServerHTTP lists and calls toolfold's own server over streamable HTTP."""
    with MCPServerHTTP(http_tools_server, prefix="remote") as server:
        tools = {t.name: t for t in server.tools()}
        assert {"remote_add", "remote_shout"} <= set(tools)
        assert _call(tools["remote_add"], {"a": 20, "b": 22}) == "42"
        assert _call(tools["remote_shout"], {"text": "hi"}) == "HI"


def test_credentials_in_the_url_never_show(
    http_tools_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A key in the URL's query or password is masked in repr, errors, the model's input, the
    state and the HTTP stack's and MCP SDK's log lines."""
    caplog.set_level(logging.DEBUG)
    assert repr(MCPServerHTTP("http://user:sk-SECRET456@127.0.0.1:9/mcp")) == (
        "MCPServerHTTP(name='http://***@127.0.0.1:9/mcp', closed)"
    )
    for token_as_user in ("ghp_TOKEN12345:x-oauth-basic", "sk_live_ABCDEFG123:"):
        shown = repr(MCPServerHTTP(f"http://{token_as_user}@127.0.0.1:9/mcp"))
        assert token_as_user.partition(":")[0] not in shown
    assert "ghp_TOKEN" not in repr(MCPServerHTTP("https://ghp_TOKEN@127.0.0.1:9/mcp#ghp_TOKEN"))
    server = MCPServerHTTP(f"{http_tools_server}?api_key=sk-SECRET123&v=2")
    assert server.name == f"{http_tools_server}?api_key=***&v=***"
    with server:
        fail = {t.name: t for t in server.tools()}["fail"]
        with pytest.raises(MCPError) as caught:
            _call(fail, {"reason": "bad key sk-SECRET123"})  # echoed by the server
    assert "sk-SECRET123" not in str(caught.value)
    assert "bad key ***" in str(caught.value)
    model = ScriptedModel([ScriptedModel.call("fail", {"reason": "no"}), "ok"])
    response = Agent(model, tools=[server]).run("hi")
    (result,) = model.requests[1].messages[-1].tool_results
    assert result.is_error
    assert "MCP server 'http://127.0.0.1:" in result.content
    assert "?api_key=***" in result.content
    assert "sk-SECRET123" not in response.state.to_json()
    assert "/mcp?api_key=" in caplog.text  # the requests were logged, the key masked
    assert "sk-SECRET123" not in caplog.text


def test_a_server_refusing_the_start_with_401_says_the_status_and_where_credentials_go(
    http_guarded_server: str,
) -> None:
    """A server answering the handshake 401 reads with the status and a hint to check
    headers= (it read only "Server returned an error response"), never a header's value."""
    with pytest.raises(MCPError) as caught:
        MCPServerHTTP(http_guarded_server, name="guarded").open()
    assert str(caught.value) == (
        "MCP server 'guarded': could not start: MCPError: Server returned an error response "
        "(HTTP 401 Unauthorized: check headers=, where credentials go "
        "(headers={'Authorization': 'Bearer ...'}))"
    )
    wrong = MCPServerHTTP(
        http_guarded_server, name="guarded", headers={"Authorization": "Bearer sk-WRONG-0451"}
    )
    with pytest.raises(MCPError) as caught:
        wrong.open()
    assert str(caught.value) == (
        "MCP server 'guarded': could not start: MCPError: Server returned an error response "
        "(HTTP 401 Unauthorized: check the credentials given in headers=)"
    )
    assert "WRONG" not in _everything_shown(caught.value)


def test_a_successful_result_echoing_a_header_secret_is_scrubbed(
    http_echoing_server: str,
) -> None:
    """A result echoing the Authorization header is masked as an error result is, in its
    text and its structured content (it reached the model and the state as sent)."""
    headers = {"Authorization": f"Bearer {GUARD_TOKEN}"}
    server = MCPServerHTTP(http_echoing_server, headers=headers, name="echoing")
    model = ScriptedModel([ScriptedModel.call("whoami", {}), "ok"])
    response = Agent(model, tools=[server]).run("hi")
    (result,) = model.requests[1].messages[-1].tool_results
    assert not result.is_error
    sent = json.loads(result.content.partition("\n")[2])
    assert result.content.startswith("you sent ***\n")
    assert {key: sent[key] for key in ("sent", "***", "*** (2)")} == {
        "sent": "***",
        "***": "a key of its own",  # the echoed key masked, kept apart from it
        "*** (2)": "as a key",
    }
    assert GUARD_TOKEN not in response.state.to_json()


def test_a_successful_result_keeps_data_that_is_no_credential(
    http_echoing_server: str,
) -> None:
    """Only what a model's transport masks is masked in a successful result: credential
    headers' values, a query value named like a credential or shaped like a token. A
    tenant header, the user agent, a workspace in the query are data a tool may return
    (they read ``***`` in round 1)."""
    headers = {
        "Authorization": f"Bearer {GUARD_TOKEN}",
        "X-Tenant": "acme-production-eu",
        "User-Agent": "MyCompanyAgent/2.4.1",
    }
    url = f"{http_echoing_server}?workspace=engineering-team-alpha&api_key=k-0451"
    server = MCPServerHTTP(url, headers=headers, name="echoing")
    model = ScriptedModel([ScriptedModel.call("whoami", {}), "ok"])
    Agent(model, tools=[server]).run("hi")
    (result,) = model.requests[1].messages[-1].tool_results
    sent = json.loads(result.content.partition("\n")[2])
    assert sent["tenant"] == "acme-production-eu"
    assert sent["agent"] == "MyCompanyAgent/2.4.1"
    assert sent["path"] == "/mcp?workspace=engineering-team-alpha&api_key=***"
    assert sent["sent"] == "***"


def test_a_successful_result_masks_a_token_in_the_urls_path_or_query() -> None:
    """A token in the URL's path (Zapier's ``/mcp/sk-ak-.../sse``) and a query value that
    is a credential though not named so (``?code=``, ``?sig=``, or shaped like a token)
    are masked in a successful result as in an error (they were shown as sent); a word
    a result may hold (``?workspace=engineering-team-alpha``) is not."""
    key = "Zk3pQ9vX2mN7bL4wR8tY"
    random = "q8ZrT2vLx9Kp4WnB7cYd3HsJ"
    cases = {
        f"https://actions.zapier.com/mcp/sk-ak-{key}/sse": f"sk-ak-{key}",
        f"https://h.example/api/mcp?code={key}": key,
        f"https://h.example/mcp?sv=2024&sig={key}": key,
        f"https://h.example/mcp?session={random}": random,
    }
    for url, secret in cases.items():
        server = MCPServerHTTP(url)
        said = server._mask(f"called {url}; the key {secret}")
        assert secret not in said, url
        assert "***" in said
    server = MCPServerHTTP("https://h.example/mcp?workspace=engineering-team-alpha&code=k-1")
    said = server._mask("workspace engineering-team-alpha, code=k-1")
    assert said == "workspace engineering-team-alpha, code=***"


def test_headers_carry_credentials_and_never_show(http_guarded_server: str) -> None:
    """`headers=` reaches the server with every request; its values show nowhere."""
    with pytest.raises(MCPError, match="could not start") as caught:
        MCPServerHTTP(http_guarded_server, startup_timeout=10).open()  # no token: 401
    headers = {"Authorization": f"Bearer {GUARD_TOKEN}"}
    with pytest.raises(MCPError, match="could not start") as caught:
        MCPServerHTTP(
            f"{http_guarded_server}?api_key=sk-QUERY-0451", headers={"Authorization": "Bearer no"}
        ).open()
    # the chain under it, exception groups' members and the requests they hold included
    assert "sk-QUERY-0451" not in _everything_shown(caught.value)
    server = MCPServerHTTP(http_guarded_server, headers=headers)
    assert GUARD_TOKEN not in repr(server)
    with server:
        tools = {t.name: t for t in server.tools()}
        assert _call(tools["add"], {"a": 1, "b": 2}) == "3"
        with pytest.raises(MCPError) as caught:
            _call(tools["fail"], {"reason": f"echo {GUARD_TOKEN}"})
    assert GUARD_TOKEN not in str(caught.value)
    with pytest.raises(UsageError, match="header names must be strings and values strings or"):
        MCPServerHTTP(http_guarded_server, headers={"X-Port": 8000})  # type: ignore[dict-item]
    with pytest.raises(UsageError, match="not written to an agent file"):
        server.file_entry()
    with pytest.raises(UsageError, match=r"its URL carries a user:password@, which may"):
        MCPServerHTTP("http://bob:sk-PASS-0451@127.0.0.1:9/mcp").file_entry()
    assert MCPServerHTTP("http://127.0.0.1:9/mcp").file_entry()["url"] == "http://127.0.0.1:9/mcp"


def test_a_header_a_server_echoes_into_the_sdks_own_log_lines_never_shows(
    http_echoing_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A header echoed by the server into a message the MCP SDK's client logs (its
    ``client`` logger's WARNING, with a traceback) is scrubbed from the record."""
    caplog.set_level(logging.DEBUG)
    headers = {"Authorization": f"Bearer {GUARD_TOKEN}"}
    server = MCPServerHTTP(http_echoing_server, headers=headers, name="echoing")
    with server:
        echo = {tool.name: tool for tool in server.tools()}["t"]
        assert _call(echo, {}) == "ok"
    warned = [r for r in caplog.records if r.name == "client" and r.levelno == logging.WARNING]
    assert warned  # the SDK logged the malformed notification
    assert "Failed to validate notification" in caplog.text
    assert GUARD_TOKEN not in caplog.text


_LOGGERS_MADE = """
import importlib, json, logging, pathlib, sys
made, server_side = set(), set()
real = logging.getLogger
def recording(name=None):
    module = sys._getframe(1).f_globals.get("__name__", "")
    if module.split(".")[0] == "mcp":
        (server_side if module.startswith(("mcp.server", "mcp.cli")) else made).add(name)
    return real(name)
logging.getLogger = recording
import mcp
root = pathlib.Path(mcp.__file__).parent
for path in sorted(root.rglob("*.py")):
    parts = ("mcp", *path.relative_to(root).with_suffix("").parts)
    try:
        importlib.import_module(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    except (Exception, SystemExit):  # for another platform (mcp.os.win32), an extra (mcp.cli)
        pass
from toolfold.adapters._http._logs import _LEFT, package_loggers
found = package_loggers("mcp", _LEFT["mcp"])
print(json.dumps([len(made), sorted(made - found), sorted(found & {"server", "cli"})]))
"""


def test_every_logger_the_mcp_sdks_client_side_makes_is_guarded() -> None:
    """Every logger an MCP SDK module outside its server side and CLI makes as it is
    imported (recorded by a getLogger wrapper, in a fresh interpreter) is one
    `package_loggers` finds; the server side's ``server`` and the CLI's ``cli`` are not."""
    found = subprocess.run(
        [sys.executable, "-c", _LOGGERS_MADE], capture_output=True, text=True, cwd=ROOT, check=True
    )
    made, missed, server_side = json.loads(found.stdout.splitlines()[-1])
    assert made > 4  # the SDK's modules were imported
    assert missed == []
    assert server_side == []


def _fresh_sdk(where: Any, name: str) -> Any:
    """A package ``name`` under ``where`` whose modules make loggers (one fails if imported)."""
    package = where / name
    for part in ("client", "server"):
        (package / part).mkdir(parents=True)
        (package / part / "__init__.py").write_text("")
    (package / "__init__.py").write_text("import logging\nlog = logging.getLogger(__name__)\n")
    (package / "client" / "session.py").write_text(
        "import no_such_module_0451  # never imported\nimport logging\n"
        "a = logging.getLogger(__name__)\nb = logging.getLogger( 'plain' )\n"
        "def later():\n    return logging.getLogger('inside')\n"
    )
    (package / "server" / "main.py").write_text(
        "import logging\nlog = logging.getLogger('server')\n"
    )
    return package


@pytest.mark.parametrize("installed", ["source", "compiled only", "zipped"])
def test_a_logger_a_new_sdk_module_makes_is_found(
    installed: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`package_loggers` finds, without importing them, a module's own-named logger and
    literal names, in any module of the package outside the parts left, whether it is
    installed as source, as compiled files only or in a zip."""
    import compileall
    import shutil
    import zipfile

    from toolfold.adapters._http._logs import package_loggers

    name = "fresh_sdk_" + installed.replace(" ", "_")
    package = _fresh_sdk(tmp_path / "src", name)
    where = tmp_path / "src"
    if installed == "compiled only":
        assert compileall.compile_dir(package, legacy=True, quiet=1)
        for source in package.rglob("*.py"):
            source.unlink()
    elif installed == "zipped":
        where = tmp_path / "sdk.zip"
        with zipfile.ZipFile(where, "w") as zipped:
            for source in package.rglob("*.py"):
                zipped.write(source, source.relative_to(tmp_path / "src").as_posix())
        shutil.rmtree(package)
    monkeypatch.syspath_prepend(str(where))
    assert package_loggers(name, (f"{name}.server",)) == {
        name,
        f"{name}.client.session",
        "plain",
        "inside",
    }
    assert "server" in package_loggers(name)


def test_the_logger_scan_writes_no_bytecode(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`package_loggers` on a package installed without ``.pyc`` files (uv's default, pip
    --no-compile) writes none next to it, even where Python would write bytecode, and
    still finds its loggers; a valid cached ``.pyc`` is read as it is."""
    import compileall

    from toolfold.adapters._http._logs import package_loggers

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    package = _fresh_sdk(tmp_path / "src", "fresh_sdk_no_pyc")
    before = sorted(path.relative_to(package) for path in package.rglob("*"))
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    found = package_loggers("fresh_sdk_no_pyc", ("fresh_sdk_no_pyc.server",))
    assert sorted(path.relative_to(package) for path in package.rglob("*")) == before
    assert found == {"fresh_sdk_no_pyc", "fresh_sdk_no_pyc.client.session", "plain", "inside"}
    assert compileall.compile_dir(package, quiet=1)
    pycs = {path: path.stat().st_mtime_ns for path in package.rglob("*.pyc")}
    assert package_loggers("fresh_sdk_no_pyc") >= found | {"server"}
    assert {path: path.stat().st_mtime_ns for path in package.rglob("*.pyc")} == pycs


_ZIPPED_SDK = """
import json, logging, sys
sys.path.insert(0, sys.argv[1])
import mcp
from toolfold.mcp import MCPServerHTTP
MCPServerHTTP("http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer sk-ZIPPED-0451"})
guarded = [n for n in ("client", "mcp.client.streamable_http", "mcp.client.stdio",
                       "mcp.shared.dispatcher", "mcp.client.added_0451", "added_inside_0451",
                       "server", "cli") if logging.getLogger(n).filters]
slip = logging.getLogger("client")
try:
    slip.warning("port %d", "x")  # a format mistake: logging reports it and carries on
    raised = None
except Exception as error:
    raised = type(error).__name__
print(json.dumps([mcp.__file__, guarded, raised]))
"""


def test_an_mcp_sdk_installed_in_a_zip_has_its_client_loggers_guarded(tmp_path: Any) -> None:
    """With the MCP SDK imported from a zip (no source files to read), its client session's
    ``client`` logger and its client modules' loggers (those of a module no list names
    among them) are guarded, its server side's and CLI's names (``server``, ``cli``, often
    an application's own) are not, and a format mistake in a guarded logger's call is
    reported by logging, not raised at the call."""
    import zipfile

    import mcp

    installed = os.path.dirname(mcp.__file__)
    zipped = tmp_path / "mcp.zip"
    with zipfile.ZipFile(zipped, "w") as archive:
        for folder, _, files in os.walk(installed):
            for file in files:
                if file.endswith(".py"):
                    path = os.path.join(folder, file)
                    archive.write(path, os.path.relpath(path, os.path.dirname(installed)))
        # a client module no list names, whose loggers only the scan can find
        archive.writestr(
            "mcp/client/added_0451.py",
            "import logging\nlog = logging.getLogger(__name__)\n"
            "def later():\n    return logging.getLogger('added_inside_0451')\n",
        )
    found = subprocess.run(
        [sys.executable, "-c", _ZIPPED_SDK, str(zipped)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    where, guarded, raised = json.loads(found.stdout.splitlines()[-1])
    assert where.startswith(str(zipped))
    assert guarded == [
        "client",
        "mcp.client.streamable_http",
        "mcp.client.stdio",
        "mcp.shared.dispatcher",
        "mcp.client.added_0451",
        "added_inside_0451",
    ]
    assert raised is None
    assert "--- Logging error ---" in found.stderr
    assert "sk-ZIPPED-0451" not in found.stderr


def test_an_applications_server_and_cli_loggers_are_left_alone() -> None:
    """An HTTP server's key guards the MCP SDK's client loggers, not the names its server
    side and CLI log as (``server``, ``cli``), which an application's own loggers often have."""
    from toolfold.adapters._http._logs import _FILTER

    MCPServerHTTP("http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer sk-APP-0451"})
    assert _FILTER in logging.getLogger("client").filters
    assert _FILTER not in logging.getLogger("server").filters
    assert _FILTER not in logging.getLogger("cli").filters


def test_an_mcp_logger_made_after_a_first_server_is_guarded_by_the_next() -> None:
    """A logger under ``mcp.`` made after a first HTTP server was built (the SDK's modules
    scanned) is guarded when the next one adds its key."""
    from toolfold.adapters._http._logs import _FILTER

    MCPServerHTTP("http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer sk-FIRST-0451"})
    later = logging.getLogger("mcp.client.made_later_by_a_test")
    assert _FILTER not in later.filters
    MCPServerHTTP("http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer sk-NEXT-0451"})
    assert _FILTER in later.filters


def test_a_header_value_given_as_a_secret_is_sent_and_never_shown(
    http_guarded_server: str,
) -> None:
    """headers= takes a Secret value as a model's headers= does: sent as its value, scrubbed as a string one is."""
    from toolfold.adapters import Secret

    server = MCPServerHTTP(
        http_guarded_server, headers={"Authorization": Secret(f"Bearer {GUARD_TOKEN}")}
    )
    assert GUARD_TOKEN not in repr(server)
    with server:
        tools = {t.name: t for t in server.tools()}
        assert _call(tools["add"], {"a": 1, "b": 2}) == "3"
        with pytest.raises(MCPError) as caught:
            _call(tools["fail"], {"reason": f"echo {GUARD_TOKEN}"})
    assert GUARD_TOKEN not in str(caught.value)


def test_a_server_crashing_mid_call_is_a_clear_error_and_leaves_no_process() -> None:
    """A server process that dies during a call raises MCPError; nothing is left running."""
    before = children()
    with _our_server() as server:
        crash = {t.name: t for t in server.tools()}["crash"]
        with pytest.raises(MCPError, match=r"'ours'.*'crash'"):
            _call(crash, {})
    assert children() == before


def test_a_server_crashing_mid_call_says_where_its_reason_went() -> None:
    """A server process that dies during a call: the error says it ended before answering
    and where its stderr went (it read "Connection closed" alone), for the later calls too."""
    with _our_server() as server:
        tools = {t.name: t for t in server.tools()}
        for name, arguments in (("crash", {}), ("add", {"a": 1, "b": 2})):
            with pytest.raises(MCPError) as caught:
                _call(tools[name], arguments)
            assert str(caught.value) == (
                f"MCP server 'ours': tool {name!r} failed: MCPError: Connection closed (the "
                "server's process ended, or closed its stdout, before it answered the request; "
                "what it wrote to stderr went to this process's stderr)"
            )


def test_a_server_repeating_a_tool_list_cursor_is_refused_at_once() -> None:
    """A tools/list that gives the same cursor again is an MCPError naming it, at once (it
    was paged until the timeout); one paging on past MOST_PAGES is refused too."""
    script = str(ROOT / "tests/ecosystem/malformed_server.py")
    looping = MCPServerStdio(sys.executable, [script, "cursor"], name="looping", timeout=60)
    started = time.monotonic()
    with pytest.raises(MCPError) as caught:
        looping.tools()
    assert time.monotonic() - started < 30
    assert str(caught.value) == (
        "MCP server 'looping': its tool list (tools/list) gave the cursor 'again' again, "
        "after 2 pages: paging on would list the same tools forever"
    )
    paging = MCPServerStdio(sys.executable, [script, "pages"], name="paging", timeout=60)
    with pytest.raises(MCPError) as caught:
        paging.tools()
    assert str(caught.value) == (
        "MCP server 'paging': its tool list (tools/list) was still paging after 1,000 pages"
    )


def test_stdio_servers_of_one_command_are_told_apart_by_default() -> None:
    """The default name is the command and what it runs (a script, python's -m module,
    npx's package), after the prefix: two servers of one command no longer read alike.
    An argument that may be a credential is never in it; name= wins; an agent file
    leaves the default out."""
    script = str(ROOT / "tests/ecosystem/media_server.py")
    python = os.path.basename(sys.executable)
    assert MCPServerStdio(sys.executable, [script]).name == f"{python} media_server.py"
    assert MCPServerStdio("python", ["-m", "mcp_server_time"], prefix="time").name == (
        "time (python -m mcp_server_time)"
    )
    npx = MCPServerStdio("npx", ["-y", "@modelcontextprotocol/server-github"])
    assert npx.name == "npx @modelcontextprotocol/server-github"
    assert "name" not in npx.file_entry()
    for args in (
        ["-c", "import server"],  # a flag that may take a value: nothing after it
        ["sk-abcdefghijklmnopqrstu0451"],
        ["--token", "t0451"],
        ["Zv8QpL2mWx7Rt4Ky9Jb3xY7q"],
        ["postgresql://bob:pw0451@db/x"],
    ):
        assert MCPServerStdio("python", args).name == "python"
    named = MCPServerStdio("npx", ["-y", "pkg"], name="npx", prefix="p")
    assert named.name == "npx"
    assert named.file_entry()["name"] == "npx"
    # one of two servers of one command fails to start: the error says which
    missing = str(ROOT / "tests/ecosystem/no_such_server.py")  # python exits at once
    crashing = MCPServerStdio(sys.executable, [missing], prefix="gone")
    with pytest.raises(MCPError) as caught:
        Agent(ScriptedModel(["done"]), tools=[_our_server(), crashing]).run("hi")
    assert f"MCP server 'gone ({python} no_such_server.py)': could not start" in str(caught.value)


def test_a_stdio_servers_default_name_shows_no_path_nor_token_and_is_cut() -> None:
    """The default name shows a path by its last part (it showed the user's home and
    project), no argument shaped like a token (32 hex digits were shown), a docker
    server's image, never an -e value (every one read ``docker run``), and is cut
    (a 5,000-character argument made a 5,005-character name)."""
    home = "/home/alice.smith/projects/secret-client/server.py"
    assert MCPServerStdio("python", [home]).name == "python server.py"
    assert MCPServerStdio("python", ["C:\\Users\\jdoe\\server.py"]).name == "python server.py"
    assert MCPServerStdio("/home/alice/venv/bin/python", ["-m", "srv"]).name == "python -m srv"
    hexed = "a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6"
    assert MCPServerStdio("node", [f"/tmp/{hexed}"]).name == "node"
    assert MCPServerStdio("npx", [hexed]).name == "npx"
    token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    for flags in (
        ["-i", "--rm", "-e", f"GITHUB_TOKEN={token}"],
        ["-it", "--env", "X=y", "-v", "a:b"],
    ):
        docker = MCPServerStdio("docker", ["run", *flags, "ghcr.io/github/github-mcp-server"])
        assert docker.name == "docker run ghcr.io/github/github-mcp-server"
    assert MCPServerStdio("docker", ["run", "-e", token]).name == "docker run"
    for flag in ("-q", "--quiet", "--sig-proxy", "-itq"):  # flags of no value (they took one)
        docker = MCPServerStdio("docker", ["run", flag, "ghcr.io/github/github-mcp-server"])
        assert docker.name == "docker run ghcr.io/github/github-mcp-server", flag
    for folder in ("/home/alice/", "/home/alice", "C:\\Users\\jdoe\\"):  # was "python alice"
        assert MCPServerStdio("python", [folder]).name == "python", folder
    assert MCPServerStdio("python", ["/srv/mcp-server/"]).name == "python mcp-server"
    long = MCPServerStdio("node", ["x" * 5000])
    assert long.name == f"node {'x' * 75}… (5,005 characters)"


def test_a_hanging_call_ends_at_the_timeout() -> None:
    """A call the server never answers fails after the source's timeout, with MCPError."""
    with _our_server(timeout=1.0) as server:
        hang = {t.name: t for t in server.tools()}["hang"]
        assert hang.timeout == 1.0
        with pytest.raises(MCPError, match="'hang'"):
            _call(hang, {})


def test_a_malformed_result_is_a_clear_error() -> None:
    """A tools/call answer that breaks the protocol raises MCPError, not a raw exception."""
    broken = MCPServerStdio(sys.executable, [str(ROOT / "tests/ecosystem/malformed_server.py")])
    with broken:
        (tool,) = broken.tools()
        with pytest.raises(MCPError, match="'broken'"):
            _call(tool, {})


def test_a_server_that_cannot_start_is_a_clear_error() -> None:
    """A command that does not exist raises MCPError on open, and nothing stays open."""
    missing = MCPServerStdio("/nonexistent/mcp-server", name="missing")
    with pytest.raises(MCPError, match=r"'missing'.*could not start"):
        missing.open()
    assert not missing.is_open


def test_a_server_exiting_before_the_handshake_says_where_its_reason_went() -> None:
    """A server that writes its reason to stderr and exits: the error says the process went
    away during the handshake and where its stderr went (the SDK keeps its exit code)."""
    crash = "import sys; sys.stderr.write('fatal: bad config\\n'); sys.exit(3)"
    crashing = MCPServerStdio(sys.executable, ["-c", crash], name="crashing")
    with pytest.raises(MCPError) as caught:
        crashing.open()
    assert str(caught.value) == (
        "MCP server 'crashing': could not start: MCPError: Connection closed (the server's "
        "process ended, or closed its stdout, before it answered the MCP handshake; what it "
        "wrote to stderr went to this process's stderr)"
    )
    assert not crashing.is_open


def test_a_server_that_never_answers_fails_at_the_startup_timeout() -> None:
    """A handshake never answered fails near startup_timeout (not after `timeout`s), leaving nothing."""
    before = children()
    silent = "import sys, time\nfor line in sys.stdin: pass\ntime.sleep(3600)"
    mute = MCPServerStdio(sys.executable, ["-c", silent], name="mute", startup_timeout=1)
    started = time.monotonic()
    with pytest.raises(MCPError, match=r"'mute': did not start within 1 s"):
        mute.open()
    assert time.monotonic() - started < 15  # 42 s when the handshake was left to time out
    assert not mute.is_open
    assert children() == before  # stdin closed, then terminated by the SDK


def test_ctrl_c_while_a_server_starts_returns_promptly(tmp_path: Any) -> None:
    """Ctrl-C during a blocking open of a server stuck in its handshake stops it at once
    (not after `timeout`), leaving no process and nothing open."""
    before = children()
    asked = tmp_path / "asked"
    os.mkfifo(asked)
    # reads the handshake's first request, says so through the fifo, then never answers
    silent = f"import sys, time\nsys.stdin.readline()\nopen({str(asked)!r}, 'w').close()\ntime.sleep(3600)"
    mute = MCPServerStdio(
        sys.executable, ["-c", silent], name="mute", timeout=20, startup_timeout=60
    )

    def interrupt() -> None:
        asked.open().close()  # returns once the server has the handshake's request
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        mute.open()
    assert time.monotonic() - started < 12  # 22.7 s when the shutdown waited `timeout` out
    assert not mute.is_open
    assert children() == before  # terminated by the SDK


def _stuck(asked: Any, name: str) -> MCPServerStdio:
    """A server that reads the handshake's first request, says so through the FIFO
    ``asked``, then never answers."""
    silent = f"import sys, time\nsys.stdin.readline()\nopen({str(asked)!r}, 'w').close()\ntime.sleep(3600)"
    return MCPServerStdio(sys.executable, ["-c", silent], name=name, timeout=20, startup_timeout=60)


def _gated(gate: Any) -> MCPServerStdio:
    """Our server, which starts serving only once something is written to the FIFO ``gate``."""
    start = (
        "import sys; open(sys.argv[1]).read(); from toolfold.mcp.__main__ import main; "
        "sys.exit(main(sys.argv[2:]))"
    )
    arguments = ["-c", start, str(gate), "serve", "tests.ecosystem.served_tools:TOOLS"]
    return MCPServerStdio(sys.executable, arguments, cwd=str(ROOT), name="gated")


def _run_in_a_thread(main: Any) -> threading.Thread:
    """``asyncio.run(main)`` in a thread, joined: it returns once the loop's worker threads end."""
    runner = threading.Thread(target=asyncio.run, args=(main,))
    runner.start()
    # bounds a hang, well under startup_timeout (60 s), which ended the start before
    runner.join(timeout=30)
    return runner


def test_cancelling_an_async_open_stops_the_servers_start(tmp_path: Any) -> None:
    """A task cancelled in `async with server:` while the server is stuck in its handshake
    stops that start: asyncio.run's end does not wait for startup_timeout, no thread or
    process is left."""
    before, threads = children(), threading.active_count()
    asked = tmp_path / "asked"
    os.mkfifo(asked)
    mute = _stuck(asked, "mute")

    async def enter() -> None:
        async with mute:
            pass

    async def main() -> None:
        task = asyncio.ensure_future(enter())
        await asyncio.to_thread(lambda: asked.open().close())  # the server has the request
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    runner = _run_in_a_thread(main())
    assert not runner.is_alive()  # the open's worker thread ended, so asyncio.run returned
    assert threading.active_count() == threads  # no portal or worker thread left
    assert not mute.is_open
    assert children() == before  # the server's process was ended by the SDK


def test_cancelling_an_async_run_while_its_server_lists_stops_the_listing(tmp_path: Any) -> None:
    """A run cancelled while its server has not answered tools/list cancels the request and
    closes the server: asyncio.run's end does not wait for `timeout`, nothing is left."""
    before, threads = children(), threading.active_count()
    asked = tmp_path / "asked"
    os.mkfifo(asked)
    script = str(ROOT / "tests/ecosystem/hanging_list_server.py")
    # timeout is past _run_in_a_thread's join: a listing left to time out keeps asyncio.run going
    server = MCPServerStdio(sys.executable, [script, str(asked)], name="hanging", timeout=60)

    async def main() -> None:
        task = asyncio.ensure_future(Agent(ScriptedModel(["done"]), tools=[server]).arun("x"))
        await asyncio.to_thread(lambda: asked.open().close())  # the server has tools/list
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    runner = _run_in_a_thread(main())
    assert not runner.is_alive()  # the listing's worker thread ended, so asyncio.run returned
    assert threading.active_count() == threads
    assert not server.is_open
    assert children() == before


def test_cancelling_one_async_open_leaves_another_servers_open_alone(tmp_path: Any) -> None:
    """Of two servers opening at once, cancelling the task opening one stops only that
    one's start: the other opens and serves."""
    before, threads = children(), threading.active_count()
    asked, gate = tmp_path / "asked", tmp_path / "gate"
    os.mkfifo(asked)
    os.mkfifo(gate)
    mute, gated = _stuck(asked, "mute"), _gated(gate)
    listed: list[str] = []

    async def main() -> None:
        opening_gated = asyncio.ensure_future(gated.__aenter__())
        opening_mute = asyncio.ensure_future(mute.__aenter__())
        await asyncio.to_thread(lambda: asked.open().close())  # mute has the request
        opened = await asyncio.to_thread(open, gate, "w")  # gated waits at its gate
        opening_mute.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening_mute
        with opened:
            opened.write("go")  # gated starts only now, after the cancellation
        await opening_gated
        try:
            listed.extend(spec["name"] for spec in await asyncio.to_thread(gated.listing))
        finally:
            await gated.__aexit__(None, None, None)

    runner = _run_in_a_thread(main())
    assert not runner.is_alive()
    assert "add" in listed
    assert not mute.is_open
    assert not gated.is_open
    assert threading.active_count() == threads
    assert children() == before


def test_an_http_server_that_never_answers_fails_at_the_startup_timeout() -> None:
    """Over HTTP too: a socket that accepts and never answers fails the open near startup_timeout."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        with suppress(OSError):  # the listener closed: the test is over
            while True:
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        port = listener.getsockname()[1]
        mute = MCPServerHTTP(f"http://127.0.0.1:{port}/mcp", startup_timeout=1, timeout=3)
        started = time.monotonic()
        with pytest.raises(MCPError, match="did not start within 1 s"):
            mute.open()
        assert time.monotonic() - started < 8  # 13.9 s when the shutdown waited it out
        assert not mute.is_open
    finally:
        with suppress(OSError):
            listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        listener.close()
        for connection in accepted:
            connection.close()
        thread.join(timeout=10)


def test_a_changed_tool_list_is_noticed(tmp_path: Any) -> None:
    """Listing again after the server's tools changed warns with MCPToolsChangedWarning."""
    module = tmp_path / "changing_tools.py"
    module.write_text(
        "import os\nfrom tests.ecosystem.served_tools import add, shout\n"
        "TOOLS = [add, shout] if os.environ.get('MORE') else [add]\n"
    )
    server = MCPServerStdio(
        sys.executable,
        ["-m", "toolfold.mcp", "serve", "changing_tools:TOOLS"],
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}"},
        name="changing",
    )
    assert [t.name for t in server.tools()] == ["add"]
    first = server.fingerprint
    assert [t.name for t in server.tools()] == ["add"]  # same list: no warning (-W error)
    server.env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "MORE": "1"}
    with pytest.warns(MCPToolsChangedWarning, match="'changing'"):
        assert [t.name for t in server.tools()] == ["add", "shout"]
    assert server.fingerprint != first


def test_holders_share_one_session() -> None:
    """Nested opens share the session; it closes when the last holder leaves."""
    server = _time_server()
    with server:
        with server:
            assert server.is_open
        assert server.is_open
    assert not server.is_open


def test_load_tools_names_what_is_wrong() -> None:
    """Bad import paths and non-tools are ToolDefinitionErrors naming the problem."""
    assert [t.name for t in load_tools("tests.ecosystem.served_tools:TOOLS")][:2] == [
        "add",
        "shout",
    ]
    assert {t.name for t in load_tools("tests.ecosystem.served_tools")} >= {"add", "hang"}
    with pytest.raises(ToolDefinitionError, match="cannot import 'no_such_module'"):
        load_tools("no_such_module:x")
    with pytest.raises(ToolDefinitionError, match="has no attribute 'missing'"):
        load_tools("tests.ecosystem.served_tools:missing")
    with pytest.raises(ToolDefinitionError, match="is not a Tool or a function"):
        load_tools("tests.ecosystem.conftest:ROOT")


def test_a_bare_module_serves_the_tools_it_holds_once(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An alias serves its tool once; a tool the module imports is served (a package's
    __init__ gathers its tools so); bad paths are named."""
    (tmp_path / "defining.py").write_text(
        "from toolfold import tool\n\n\n@tool\ndef add(a: int, b: int) -> int:\n"
        '    """Add."""\n    return a + b\n\n\nplus = add\n'
    )
    (tmp_path / "importing.py").write_text(
        "from toolfold import tool\nfrom defining import add\n\n\n@tool\n"
        'def sub(a: int, b: int) -> int:\n    """Subtract."""\n    return a - b\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [t.name for t in load_tools("defining")] == ["add"]
    assert [t.name for t in load_tools("importing")] == ["add", "sub"]
    for spec in ("", ":x"):
        with pytest.raises(ToolDefinitionError, match="an empty module path is not an absolute"):
            load_tools(spec)
    with pytest.raises(ToolDefinitionError, match=r"'\.rel' is not an absolute module path"):
        load_tools(".rel:x")


_UNPRINTABLE_MODULE = """
class Unprintable(ImportError):
    def __str__(self):
        raise RuntimeError("str() of this error fails")


raise Unprintable("x")
"""


def test_load_tools_names_what_a_module_raised_importing_even_if_unprintable(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module raising while importing is a ToolDefinitionError naming its exception's class
    (an exception whose str() raises reads '<unprintable ...>')."""
    (tmp_path / "unprintable_import.py").write_text(_UNPRINTABLE_MODULE)
    (tmp_path / "no_database.py").write_text('raise RuntimeError("no database")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ToolDefinitionError) as raised:
        load_tools("unprintable_import:TOOLS")
    assert raised.value.problems == (
        "cannot import 'unprintable_import': Unprintable: <unprintable Unprintable> "
        f"(raised at {tmp_path / 'unprintable_import.py'}, line 7)",
    )
    with pytest.raises(ToolDefinitionError) as raised:
        load_tools("no_database")
    assert raised.value.problems == (
        "cannot import 'no_database': RuntimeError: no database "
        f"(raised at {tmp_path / 'no_database.py'}, line 1)",
    )


_RAISING_MODULE = """
class Unshowable:
    def __repr__(self):
        raise RuntimeError("repr() of this value fails")


VALUE = Unshowable()


def __getattr__(name):
    raise KeyError(name)
"""


def test_load_tools_names_a_value_whose_repr_raises_and_a_raising_module_getattr(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A non-tool whose repr() raises, or a module __getattr__ raising other than
    AttributeError, is a ToolDefinitionError naming it, and `serve` exits 2."""
    from toolfold.mcp.__main__ import main

    (tmp_path / "raising_values_s36.py").write_text(_RAISING_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ToolDefinitionError) as raised:
        load_tools("raising_values_s36:VALUE")
    assert raised.value.problems == (
        "item 0 (<unprintable Unshowable object>) is not a Tool or a function",
    )
    with pytest.raises(ToolDefinitionError) as raised:
        load_tools("raising_values_s36:lazy")
    assert raised.value.problems == (
        "cannot get 'lazy' from 'raising_values_s36': KeyError: 'lazy' "
        f"(raised at {tmp_path / 'raising_values_s36.py'}, line 11)",
    )
    for spec in ("raising_values_s36:VALUE", "raising_values_s36:lazy"):
        assert main(["serve", spec]) == 2
    assert "cannot get 'lazy' from 'raising_values_s36'" in capsys.readouterr().err


_CLASS_RAISING_MODULE = """
from toolfold import tool


class Liar:
    @property
    def __class__(self):
        raise RuntimeError("no class")


LIAR = Liar()


@tool
def add(a: int, b: int) -> int:
    \"\"\"Add.\"\"\"
    return a + b
"""


def test_load_tools_takes_a_value_whose_class_attribute_raises_for_no_tool(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module value whose __class__ raises (isinstance asks it) is no tool: a bare module
    serves its other tools, and naming it is a ToolDefinitionError, not its RuntimeError."""
    (tmp_path / "class_raising_s36.py").write_text(_CLASS_RAISING_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [t.name for t in load_tools("class_raising_s36")] == ["add"]
    with pytest.raises(ToolDefinitionError) as raised:
        load_tools("class_raising_s36:LIAR")
    (problem,) = raised.value.problems
    assert problem.startswith("item 0 (<class_raising_s36.Liar object at ")
    assert problem.endswith(") is not a Tool or a function")


def test_load_tools_names_the_file_and_line_an_imported_module_raised_at(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NameError in a helper the tools module imports names the helper's file and line, not only the module."""
    (tmp_path / "helper_b.py").write_text("X = 1\n\n\nVALUE = X + undefined_name\n")
    (tmp_path / "tools_a.py").write_text("import helper_b\n")
    (tmp_path / "needs_missing.py").write_text("\n\nimport no_such_dependency_s35\n")
    (tmp_path / "broken_syntax.py").write_text("def f(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    problems = {}
    for spec in ("tools_a", "needs_missing", "broken_syntax", "no_such_module_s35"):
        with pytest.raises(ToolDefinitionError) as raised:
            load_tools(spec)
        (problems[spec],) = raised.value.problems
    assert problems["tools_a"] == (
        "cannot import 'tools_a': NameError: name 'undefined_name' is not defined "
        f"(raised at {tmp_path / 'helper_b.py'}, line 4)"
    )
    assert problems["needs_missing"].endswith(
        f"(raised at {tmp_path / 'needs_missing.py'}, line 3)"
    )
    assert "raised at" not in problems["broken_syntax"]
    assert "broken_syntax.py, line 1" in problems["broken_syntax"]  # the SyntaxError's own text
    assert problems["no_such_module_s35"] == (
        "cannot import 'no_such_module_s35': ModuleNotFoundError: No module named "
        "'no_such_module_s35'"
    )


def test_load_tools_raises_a_tool_definition_error_of_the_module_as_it_is(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module whose @tool is wrong raises that ToolDefinitionError itself, not one nested in 'cannot import'."""
    (tmp_path / "bad_tools_s35.py").write_text(
        'from toolfold import tool\n\n\n@tool\ndef bad(x) -> str:\n    """Bad."""\n    return "hi"\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ToolDefinitionError) as raised:
        load_tools("bad_tools_s35")
    assert raised.value.problems == (
        "parameter 'x' has no type annotation; annotate it (e.g. x: str)",
    )
    assert str(raised.value).startswith("cannot make a tool of bad: 1 problem")


def test_the_command_line_exits_2_naming_an_unprintable_import_error(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`serve` of a module whose import error's str() raises prints the error's class, exits 2."""
    from toolfold.mcp.__main__ import main

    (tmp_path / "unprintable_cli.py").write_text(_UNPRINTABLE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["serve", "unprintable_cli:TOOLS"]) == 2
    assert (
        "cannot import 'unprintable_cli': Unprintable: <unprintable Unprintable>"
        in capsys.readouterr().err
    )


def test_toolfold_mcp_without_its_extra_names_an_unprintable_import_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`toolfold mcp` whose import fails with an error whose str() raises says what to
    install and the error's class, exiting 1."""
    from toolfold._cli import main

    class Unprintable(ImportError):
        def __str__(self) -> str:
            raise RuntimeError("str() of this error fails")

    class Refusing:
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if name == "toolfold.mcp.__main__":
                raise Unprintable("x")

    monkeypatch.delitem(sys.modules, "toolfold.mcp.__main__", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Refusing(), *sys.meta_path])
    assert main(["mcp", "serve", "tests.ecosystem.served_tools:TOOLS"]) == 1
    assert capsys.readouterr().err == (
        "toolfold mcp: needs the mcp extra (pip install 'toolfold[mcp]'): "
        "Unprintable: <unprintable Unprintable>\n"
    )


def test_the_command_line_serves_http_on_an_ipv6_host() -> None:
    """`--host ::1` listens on IPv6 and prints the URL with the address in brackets."""
    with serving_tools("--host", "::1", "--port", "0") as url:
        assert url.startswith("http://[::1]:"), url
        with MCPServerHTTP(url) as server:
            add_tool = {t.name: t for t in server.tools()}["add"]
            assert _call(add_tool, {"a": 1, "b": 2}) == "3"


def test_the_command_line_serves_a_path_with_white_space() -> None:
    """`--path '/my path'` is served, and a request to `/my%20path` reaches the tools."""
    with serving_tools("--host", "127.0.0.1", "--port", "0", "--path", "/my path") as url:
        assert url.startswith("http://127.0.0.1:"), url
        assert url.endswith("/my path"), url
        with MCPServerHTTP(url.replace(" ", "%20")) as server:
            add_tool = {t.name: t for t in server.tools()}["add"]
            assert _call(add_tool, {"a": 1, "b": 2}) == "3"


def _serve(*arguments: str) -> subprocess.CompletedProcess[str]:
    """`python -m toolfold.mcp serve ARGUMENTS`, run to its end (each case here exits at once)."""
    return subprocess.run(
        [sys.executable, "-m", "toolfold.mcp", "serve", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_command_line_exits_2_on_a_bad_path(capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m toolfold.mcp serve` with a bad path prints the problem and exits 2."""
    done = _serve("no_such_module:x")
    assert done.returncode == 2
    assert "cannot import 'no_such_module'" in done.stderr
    done = _serve("tests.ecosystem.served_tools:delete_everything")
    assert done.returncode == 2
    assert "'delete_everything' requires approval" in done.stderr
    assert "--approved-by-host" in done.stderr
    # (an address of no interface here: refused at the bind, with no DNS query; in a
    # process of its own, as the tests' guard refuses an address beyond this machine)
    done = _serve("tests.ecosystem.served_tools:TOOLS", "--http", "--host", "192.0.2.1")
    assert done.returncode == 2, done.stderr
    assert "cannot listen" in done.stderr
    assert "Traceback" not in done.stderr
    for arguments, problem in [
        ([""], "an empty module path"),
        ([".rel:x"], "'.rel' is not an absolute module path"),
        (
            ["tests.ecosystem.served_tools:TOOLS", "--http", "--port", "70000"],
            "toolfold mcp: port 70000 is not a port: a port is a whole number from 0 to 65535",
        ),
        (
            ["tests.ecosystem.served_tools:TOOLS", "--http", "--host", "localhost:8000"],
            "toolfold mcp: cannot listen on host 'localhost:8000': a host is a host name, an "
            "IPv4 or IPv6 address, with no port",
        ),
        (
            ["tests.ecosystem.served_tools:TOOLS", "--http", "--path", "/mcp?x=1"],
            "toolfold mcp: the endpoint path '/mcp?x=1' holds a '?' or '#'",
        ),
        (
            # (a name idna cannot encode: refused before any DNS query)
            ["tests.ecosystem.served_tools:TOOLS", "--http", "--host", "not..valid"],
            "toolfold mcp: cannot listen on host 'not..valid', port 8000: ",
        ),
        (
            ["tests.ecosystem.served_tools:TOOLS", "--http", "--path", "mcp2"],
            "toolfold mcp: the endpoint path must start with '/', got 'mcp2'",
        ),
    ]:
        # In this process, not a new one each (the two above are the real command line):
        # ten more interpreters importing the mcp SDK cost ~30 s of a loaded CI's core.
        assert mcp_main(["serve", *arguments]) == 2
        said = capsys.readouterr().err
        assert problem in said
        assert "Traceback" not in said


def test_the_command_line_says_a_bad_address_before_it_runs_the_tools_module() -> None:
    """A malformed ``--host``/``--port``/``--path`` is said before the module is imported:
    a mistyped flag is not said after the module's import time and side effects, and not
    hidden behind a problem of the module's."""
    done = _serve("no_such_module:x", "--http", "--port", "70000")
    assert done.returncode == 2
    assert "port 70000 is not a port" in done.stderr
    assert "no_such_module" not in done.stderr
    done = _serve("no_such_module:x", "--port", "70000")  # (no --http: the flag is unused)
    assert "cannot import 'no_such_module'" in done.stderr


_PORT = "a port is a whole number from 0 to 65535 (0: a free one is picked)"


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        (
            {"host": "not..valid"},
            "cannot listen on host 'not..valid', port 0: ",
        ),
        ({"path": "mcp2"}, "the endpoint path must start with '/', got 'mcp2'; e.g. '/mcp2'"),
        ({"port": -5}, f"port -5 is not a port: {_PORT}"),
        ({"port": "8000"}, f"port '8000' is not a port: {_PORT}"),
        ({"port": 80.5}, f"port 80.5 is not a port: {_PORT}"),
        ({"port": True}, f"port True is not a port: {_PORT}"),
        ({"host": None}, "the host must be a string (a host name, an IPv4 or IPv6 address)"),
        ({"path": None}, "the endpoint path must be a string such as '/mcp', got None"),
        (
            {"host": "localhost:8000"},
            "cannot listen on host 'localhost:8000': a host is a host name, an IPv4 or IPv6 "
            "address, with no port",
        ),
        (
            {"host": "[localhost]"},
            "cannot listen on host '[localhost]': brackets go only around an IPv6 address",
        ),
        *(
            ({"path": path}, f"the endpoint path {path!r} holds a '?' or '#'")
            for path in ("/mcp?x=1", "/mcp#top", "/my path?x=1")
        ),
    ],
)
def test_serve_refuses_an_address_it_cannot_serve_with_a_usage_error(
    where: dict[str, Any], problem: str
) -> None:
    """`serve` over HTTP with an invalid host name, a host with a port or brackets, a port that
    is not an int in range, or a path no request reaches raises a `UsageError` naming it,
    before anything listens."""
    options: dict[str, Any] = {"transport": "http", "port": 0, **where}
    with pytest.raises(UsageError) as caught:
        serve(TOOLS, **options)
    assert str(caught.value).startswith(problem)


def test_an_ipv6_host_in_brackets_is_taken_without_them() -> None:
    """A host written as in a URL, ``[::1]``, is the IPv6 address ``::1`` (not a failed lookup)."""
    from toolfold.mcp._server import _host

    assert _host("[::1]") == "::1"
    assert _host("::1") == "::1"
    assert _host("localhost") == "localhost"


_ITER_RAISING_MODULE = """
class BadList(list):
    def __iter__(self):
        raise RuntimeError("iter fails")


TOOLS = BadList([1])
"""


def test_load_tools_names_a_list_whose_iteration_raises(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A list subclass whose __iter__ raises is a ToolDefinitionError naming the attribute
    and the module's error and line, not its bare RuntimeError."""
    module = tmp_path / "iter_raising_s36.py"
    module.write_text(_ITER_RAISING_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ToolDefinitionError) as raised:
        load_tools("iter_raising_s36:TOOLS")
    assert raised.value.problems == (
        "cannot read the items of 'TOOLS' (BadList): RuntimeError: iter fails "
        f"(raised at {module}, line 4)",
    )


def _without_mcp(monkeypatch: pytest.MonkeyPatch) -> None:
    """Imports of the mcp SDK fail, as where the mcp extra is not installed."""
    for name in ("mcp", "mcp_types"):
        monkeypatch.setitem(sys.modules, name, None)  # what Python does for a missing module


def test_an_mcp_server_without_the_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without the mcp SDK, a run holding an MCP server raises a ModelConfigError naming
    `pip install 'toolfold[mcp]'`, not a bare ModuleNotFoundError."""
    from toolfold import ModelConfigError
    from toolfold.testing import TestModel

    _without_mcp(monkeypatch)
    agent = Agent(TestModel(), tools=[MCPServerStdio("mcp-server-time", prefix="time")])
    with pytest.raises(ModelConfigError) as info:
        agent.run("what time is it?")
    assert str(info.value) == (
        "MCP server 'time (mcp-server-time)' needs 'mcp': pip install 'toolfold[mcp]'"
    )


def test_mcp_server_and_serve_without_the_extra_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the mcp SDK, `mcp_server` raises a ModelConfigError naming the extra, and
    `toolfold mcp serve` says so and exits 1 (it said "No module named 'mcp_types'")."""
    from toolfold import ModelConfigError
    from toolfold._cli import main

    _without_mcp(monkeypatch)
    with pytest.raises(ModelConfigError, match=r"pip install 'toolfold\[mcp\]'"):
        mcp_server(TOOLS)
    assert main(["mcp", "serve", "tests.ecosystem.served_tools:TOOLS"]) == 1
    assert capsys.readouterr().err == (
        "toolfold mcp: serving tools to MCP hosts needs 'mcp': pip install 'toolfold[mcp]'\n"
    )
