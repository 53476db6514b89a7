"""MCP tools inside runs: opened and closed with the run, approvals, manual calls, failures."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from typing import Any

import pytest

from tests.ecosystem.conftest import ROOT, children
from toolfold import Agent, RunError, RunState, SourceCloseError, UsageError, generate_text
from toolfold.mcp import MCPError, MCPServerStdio
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


def _ours(**options: Any) -> MCPServerStdio:
    return MCPServerStdio(
        sys.executable,
        ["-m", "toolfold.mcp", "serve", "tests.ecosystem.served_tools:TOOLS"],
        cwd=str(ROOT),
        name="ours",
        **options,
    )


def _results(state: RunState) -> list[tuple[str, str, bool]]:
    return [
        (part.tool_name, part.content, part.is_error)
        for message in state.messages
        for part in message.parts
        if part.kind == "tool_result"
    ]


def test_a_run_opens_the_server_calls_its_tools_and_closes_it() -> None:
    """The model calls MCP tools like local ones; the server process ends with the run."""
    before = children()
    server = _ours(prefix="m")
    model = ScriptedModel(
        [[call("m_add", {"a": 2, "b": 40}), call("m_shout", {"text": "ok"})], "done"]
    )
    response = Agent(model, tools=[server]).run("Add and shout")
    assert response.text == "done"
    assert _results(response.state) == [("m_add", "42", False), ("m_shout", "OK", False)]
    request_tools = {t.name for t in model.requests[0].tools}
    assert {"m_add", "m_shout", "m_fail"} <= request_tools
    assert not server.is_open
    assert children() == before


def test_tool_choice_can_force_an_mcp_tool_by_the_name_the_model_is_sent() -> None:
    """A tool_choice naming an MCP server's tool (its prefixed name) is sent as it is, from
    Agent.run, generate_text, a stream and a server already open: it was refused when the
    agent was made, as naming no tool of the run ("tools: none")."""
    server = _ours(prefix="m")

    def forced(run: Any) -> None:
        model = ScriptedModel(["done"])
        run(model)
        assert model.requests[0].tool_choice == "m_add"

    forced(lambda model: Agent(model, tools=[server], tool_choice="m_add").run("go"))
    forced(lambda model: generate_text(model, "go", tools=[server], tool_choice="m_add"))
    forced(lambda model: list(Agent(model, tools=[server], tool_choice="m_add").stream("go")))
    with server:
        forced(lambda model: Agent(model, tools=[server], tool_choice="m_add").run("go"))
    assert not server.is_open


def test_a_tool_choice_naming_no_listed_tool_is_refused_naming_the_servers_and_tools() -> None:
    """A tool_choice naming no tool once the servers are listed (the server's own name of a
    prefixed tool) is a UsageError before any model call, naming the agent's own tools, each
    server and the names its tools are sent as, the near one first; the server is closed."""
    server = _ours(prefix="m")
    model = ScriptedModel(["done"])
    agent = Agent(model, tools=[add_one, server], tool_choice="add", name="lead")
    with pytest.raises(UsageError) as raised:
        agent.run("go")
    message = str(raised.value)
    assert message.startswith(
        "tool_choice 'add' is not a tool of agent 'lead': its own tools: add_one; the tools "
        "its tool sources (MCPServerStdio 'ours') listed, named as the model is sent them: m_"
    )
    assert "m_shout" in message
    assert message.endswith("; did you mean 'm_add' or 'add_one'?")
    assert model.requests == []
    assert not server.is_open


def add_one(n: int) -> int:
    """Add one.

    Args:
        n: A number.
    """
    return n + 1


def test_async_runs_and_streams_use_the_server_too() -> None:
    """arun and stream open the server for their run and close it after."""
    server = _ours()

    async def main() -> str:
        model = ScriptedModel([call("add", {"a": 1, "b": 1}), "two"])
        response = await Agent(model, tools=[server]).arun("1+1")
        return response.text

    assert asyncio.run(main()) == "two"
    model = ScriptedModel([call("add", {"a": 3, "b": 4}), "seven"])
    stream = Agent(model, tools=[server]).stream("3+4")
    kinds = [type(event).__name__ for event in stream]
    assert "ToolResultEvent" in kinds
    assert stream.response.text == "seven"
    assert _results(stream.response.state) == [("add", "7", False)]
    assert not server.is_open


def test_an_approval_suspends_and_a_resume_from_json_runs_the_mcp_tool() -> None:
    """An MCP tool that needs approval waits; the resumed run (a new session) runs it once."""
    model = ScriptedModel([call("add", {"a": 5, "b": 5}), "ten"])
    agent = Agent(model, tools=[_ours(requires_approval=["add"])])
    first = agent.run("5+5")
    (pending,) = first.state.pending_approvals
    assert pending.name == "add"
    stored = first.state.to_json()
    final = agent.resume(RunState.from_json(stored), approvals={pending.id: True})
    assert final.text == "ten"
    assert _results(final.state) == [("add", "10", False)]


def test_manual_mode_returns_mcp_calls_to_the_caller() -> None:
    """With auto_execute_tools=False an MCP call comes back unexecuted, like a local one."""
    model = ScriptedModel([call("add", {"a": 1, "b": 2})])
    response = Agent(model, tools=[_ours()], auto_execute_tools=False).run("1+2")
    assert [c.name for c in response.tool_calls] == ["add"]


def test_a_tool_error_and_a_crashing_server_reach_the_model_and_the_run_goes_on() -> None:
    """A tool exception and a server that dies mid-call become error results; the run ends well."""
    model = ScriptedModel([call("fail", {"reason": "nope"}), call("crash", {}), "recovered"])
    response = Agent(model, tools=[_ours()]).run("try")
    assert response.text == "recovered"
    (fail, crash) = _results(response.state)
    assert fail[2] is True
    assert "RuntimeError: nope" in fail[1]
    assert crash[2] is True
    assert "'crash'" in crash[1]


def test_after_a_crash_the_run_stays_resumable_on_a_new_session() -> None:
    """Calls after the crash are clear errors; the stored run resumes later on a fresh server process."""
    before = children()
    model = ScriptedModel(
        [
            call("crash", {}),
            call("add", {"a": 1, "b": 2}),
            "noted",
            call("add", {"a": 2, "b": 2}),
            "4",
        ]
    )
    agent = Agent(model, tools=[_ours()])
    first = agent.run("try")
    assert first.text == "noted"
    crash, after = _results(first.state)
    assert crash[2] is True
    assert after[2] is True
    assert "MCP server 'ours': tool 'add' failed" in after[1]
    assert children() == before
    again = agent.resume(RunState.from_json(first.state.to_json()), message="once more")
    assert again.text == "4"
    assert _results(again.state)[-1] == ("add", "4", False)
    assert children() == before


def test_a_malformed_result_in_a_run_is_an_error_result_and_the_run_goes_on() -> None:
    """A server answering a call with a broken result gives the model an error naming the server."""
    broken = MCPServerStdio(
        sys.executable, [str(ROOT / "tests/ecosystem/malformed_server.py")], name="broken"
    )
    model = ScriptedModel([call("broken", {}), "worked around it"])
    response = Agent(model, tools=[broken]).run("go")
    assert response.text == "worked around it"
    ((name, content, is_error),) = _results(response.state)
    assert name == "broken"
    assert is_error
    assert "MCP server 'broken'" in content


def test_a_hanging_server_call_times_out_into_an_error_result() -> None:
    """A call the server never answers ends at the source's timeout as an error the model reads."""
    model = ScriptedModel([call("hang", {}), "gave up"])
    response = Agent(model, tools=[_ours(timeout=1.0)]).run("wait")
    assert response.text == "gave up"
    ((name, _, is_error),) = _results(response.state)
    assert name == "hang"
    assert is_error


def test_an_open_server_is_shared_by_the_runs_inside_the_block() -> None:
    """Inside `with server:` the runs reuse the one session; it closes at the block's end."""
    server = _ours()
    with server:
        for n in range(2):
            model = ScriptedModel([call("add", {"a": n, "b": 1}), "ok"])
            assert Agent(model, tools=[server]).run("go").text == "ok"
            assert server.is_open
    assert not server.is_open


def test_the_toolfold_command_serves_tools_over_mcp() -> None:
    """`toolfold mcp serve ...` reaches the same server as `python -m toolfold.mcp`."""
    done = subprocess.run(
        [sys.executable, "-m", "toolfold._cli", "mcp", "serve", "nowhere:x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "cannot import 'nowhere'" in done.stderr


def _breaking_on_close(monkeypatch: pytest.MonkeyPatch) -> None:
    """The MCP SDK's client raises as it leaves its session, after closing it (server ended).

    The SDK (2.3) bounds and logs its own shutdown failures, so a real server
    cannot make it raise on demand: the failure is injected where one would
    come out of it.
    """
    from mcp import Client

    original = Client.__aexit__

    async def leave(self: Any, *exc: Any) -> None:
        await original(self, *exc)
        raise OSError("the transport broke while closing")

    monkeypatch.setattr(Client, "__aexit__", leave)


_CLOSE_FAILED = "MCP server 'ours': could not close: OSError: the transport broke while closing"


def test_a_session_that_fails_to_close_raises_mcp_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Closing a session whose shutdown raises gives MCPError (chained to it), once the process ended."""
    _breaking_on_close(monkeypatch)
    before = children()
    server = _ours()
    with pytest.raises(MCPError) as caught, server:
        assert "add" in {t.name for t in server.tools()}
    assert str(caught.value) == _CLOSE_FAILED
    assert isinstance(caught.value.__cause__, OSError)
    assert not server.is_open
    assert children() == before


def test_a_run_whose_server_fails_to_close_keeps_its_response(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run that ended with an MCP server failing to close raises SourceCloseError with its answer (run and arun)."""
    _breaking_on_close(monkeypatch)
    before = children()
    for drive in (
        lambda agent: agent.run("add"),
        lambda agent: asyncio.run(agent.arun("add")),
    ):
        model = ScriptedModel([call("add", {"a": 2, "b": 40}), "42 it is"])
        with pytest.raises(SourceCloseError) as caught:
            drive(Agent(model, tools=[_ours()]))
        assert caught.value.response.text == "42 it is"
        assert _results(caught.value.state) == [("add", "42", False)]
        assert str(caught.value.__cause__) == _CLOSE_FAILED
    assert children() == before


def test_a_failed_run_carries_its_servers_close_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that fails and whose MCP server fails to close raises its RunError with the close error attached."""
    _breaking_on_close(monkeypatch)

    def down(request: Any) -> Any:
        raise ConnectionError("the model is down")

    with pytest.raises(RunError, match="the model is down") as caught:
        Agent(FunctionModel(down), tools=[_ours()]).run("hi")
    assert [str(e) for e in caught.value.close_errors] == [_CLOSE_FAILED]  # type: ignore[attr-defined]


def _stuck(asked: str) -> MCPServerStdio:
    """A server that reads the handshake's first request, says so through the FIFO
    ``asked``, then never answers (it ends when its stdin closes).

    The cancel comes once the request is read, so after the SDK started the process
    and connected its pipes: asyncio leaks the pipes of a process whose start is
    cancelled while they connect (CPython gh-103847), which a cancel racing the spawn
    left for a later test's garbage collection to report.
    """
    silent = "import sys; sys.stdin.readline(); open(sys.argv[1], 'w').close(); sys.stdin.read()"
    return MCPServerStdio(sys.executable, ["-c", silent, asked], name="stuck")


@pytest.mark.parametrize("how", ["arun", "async with"])
def test_a_cancel_while_the_server_starts_leaves_nothing_running(tmp_path: Any, how: str) -> None:
    """Cancelled while its server is in its handshake, a run (or `async with`) stops that
    start, and leaves nothing running."""
    before = children()
    asked = tmp_path / "asked"
    os.mkfifo(asked)
    server = _stuck(str(asked))

    async def enter() -> None:
        if how == "arun":
            await Agent(ScriptedModel(["hi"]), tools=[server]).arun("x")
        else:
            async with server:
                pass

    async def main() -> None:
        task = asyncio.ensure_future(enter())
        await asyncio.to_thread(lambda: asked.open().close())  # the server has the request
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())  # waits for the worker thread: it stopped the start
        assert not server.is_open
        assert children() == before
    finally:
        while server.is_open:
            server.close()


def test_after_a_crash_inside_the_block_the_next_run_gets_a_fresh_server() -> None:
    """A server that crashed inside `with server:` is closed; the next run (and listing) starts a new one."""
    before = children()
    server = _ours()
    model = ScriptedModel(
        [
            call("crash", {}),
            "noted",
            call("add", {"a": 2, "b": 2}),
            "4",
            call("add", {"a": 1, "b": 1}),
            "2",
        ]
    )
    agent = Agent(model, tools=[server])
    with server:
        first = agent.run("crash it")
        assert first.text == "noted"
        assert not server.is_open  # its process is gone
        second = agent.run("again")
        assert second.text == "4"
        assert _results(second.state)[-1] == ("add", "4", False)
        assert server.is_open
        # a server that dies between runs: the next listing starts a fresh one
        (process,) = children() - before
        os.kill(process, signal.SIGKILL)
        third = agent.run("once more")
        assert third.text == "2"
        assert _results(third.state)[-1] == ("add", "2", False)
    assert not server.is_open
    assert children() == before
