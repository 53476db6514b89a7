"""MCP servers held by handoff targets and sub-agents: opened when the run reaches them, closed when it ends."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from tests.ecosystem.conftest import ROOT, children
from toolfold import Agent, RunError, RunState
from toolfold.mcp import MCPServerStdio
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


def _adder(seen: list[tuple[str, ...]]) -> FunctionModel:
    """Calls the server's add tool, then answers with its result."""

    def reply(request: Any) -> Any:
        seen.append(tuple(t.name for t in request.tools))
        last = request.messages[-1]
        if last.role == "tool" and last.tool_results[0].tool_name == "add":
            return "sum is " + last.tool_results[0].content
        return call("add", {"a": 2, "b": 40})

    return FunctionModel(reply)


def _handoff(server: MCPServerStdio, seen: list[tuple[str, ...]]) -> Agent:
    calc = Agent(_adder(seen), name="calc", tools=[server])
    return Agent(ScriptedModel([call("transfer_to_calc")]), name="triage", handoffs=[calc])


@pytest.mark.parametrize("how", ["run", "arun", "stream", "astream"])
def test_a_handoff_target_opens_its_server_and_the_run_closes_it(how: str) -> None:
    """The target's model sees the server's tools and calls them; the server ends with the run."""
    before = children()
    server = _ours()
    seen: list[tuple[str, ...]] = []
    triage = _handoff(server, seen)
    if how == "run":
        response = triage.run("add")
    elif how == "arun":
        response = asyncio.run(triage.arun("add"))
    elif how == "stream":
        stream = triage.stream("add")
        list(stream)
        response = stream.response
    else:

        async def streamed() -> Any:
            stream = triage.stream("add")
            async for _ in stream:
                pass
            return stream.response

        response = asyncio.run(streamed())
    assert (response.agent, response.text) == ("calc", "sum is 42")
    assert {"add", "shout"} <= set(seen[0])
    assert "add" in {t.name for t in response.state.config.tools}
    assert not server.is_open
    assert children() == before


def test_a_handoff_targets_server_closes_at_a_suspension_and_reopens_on_resume() -> None:
    """Suspended in the target for an approval, the server is closed; resuming from JSON reopens it and runs the call once."""
    before = children()
    server = _ours(requires_approval=["add"])
    seen: list[tuple[str, ...]] = []
    triage = _handoff(server, seen)
    suspended = triage.run("add")
    assert suspended.finish_reason == "approval_required"
    assert not server.is_open
    assert children() == before
    loaded = RunState.from_json(suspended.state.to_json())
    done = triage.resume(loaded, approvals={c.id: True for c in loaded.pending_approvals})
    assert done.text == "sum is 42"
    results = [r.content for m in done.messages for r in m.tool_results]
    assert results == ["Transferred to calc.", "42"]
    assert not server.is_open
    assert children() == before


def test_an_abandoned_stream_closes_the_targets_server() -> None:
    """A caller that stops iterating after the handoff leaves no server behind."""
    before = children()
    server = _ours()
    seen: list[tuple[str, ...]] = []
    events = iter(_handoff(server, seen).stream("add"))
    for event in events:
        if type(event).__name__ == "StepStartEvent" and seen:
            break  # the target's first model call has been made
    assert server.is_open
    events.close()  # type: ignore[attr-defined]
    assert not server.is_open
    assert children() == before


def test_a_server_that_cannot_start_fails_the_handoff_with_a_resumable_state() -> None:
    """A target whose server does not start: a RunError naming it, the state before the handoff, nothing leaked."""
    before = children()
    broken = MCPServerStdio(
        sys.executable, ["-c", "raise SystemExit(3)"], name="broken", startup_timeout=20
    )
    calc = Agent(ScriptedModel(["unreachable"]), name="calc", tools=[broken])
    triage = Agent(ScriptedModel([call("transfer_to_calc")]), name="triage", handoffs=[calc])
    with pytest.raises(RunError, match="tool sources of agent 'calc'") as caught:
        triage.run("add")
    state = caught.value.state
    assert state is not None
    assert state.agent == "triage"
    assert [r.content for m in state.messages for r in m.tool_results] == ["Transferred to calc."]
    assert not broken.is_open
    assert children() == before


@pytest.mark.parametrize("how", ["run", "arun", "astream"])
def test_a_sub_agent_opens_its_server_for_its_run(how: str) -> None:
    """An agent used as a tool holding a server lists and calls its tools; the server ends with the sub-run."""
    before = children()
    server = _ours()
    seen: list[tuple[str, ...]] = []
    calc = Agent(_adder(seen), name="calc", tools=[server])
    lead = Agent(ScriptedModel([call("calc", {"input": "add"}), "done"]), tools=[calc.as_tool()])
    if how == "run":
        response = lead.run("go")
    elif how == "arun":
        response = asyncio.run(lead.arun("go"))
    else:

        async def streamed() -> Any:
            stream = lead.stream("go")
            async for _ in stream:
                pass
            return stream.response

        response = asyncio.run(streamed())
    assert response.text == "done"
    assert response.steps[0].tool_results[0].content == "sum is 42"
    assert {"add", "shout"} <= set(seen[0])
    assert not server.is_open
    assert children() == before


def test_a_sub_agents_server_is_closed_while_it_waits_and_reopened_by_the_top_resume() -> None:
    """An approval asked by a sub-agent's MCP tool: closed while suspended, reopened by resume at the top, run once."""
    before = children()
    server = _ours(requires_approval=["add"])
    seen: list[tuple[str, ...]] = []
    calc = Agent(_adder(seen), name="calc", tools=[server])
    lead = Agent(
        FunctionModel(
            lambda r: (
                "lead: " + r.messages[-1].tool_results[0].content
                if r.messages[-1].role == "tool"
                else call("calc", {"input": "add"})
            )
        ),
        name="lead",
        tools=[calc.as_tool()],
    )
    suspended = lead.run("go")
    assert [c.name for c in suspended.pending_approvals] == ["add"]
    assert not server.is_open
    assert children() == before
    loaded = RunState.from_json(suspended.state.to_json())
    done = asyncio.run(
        lead.aresume(loaded, approvals={c.id: True for c in loaded.pending_approvals})
    )
    assert done.text == "lead: sum is 42"
    (sub_run,) = done.state.sub_runs.values()
    assert [r.content for m in sub_run.messages for r in m.tool_results] == ["42"]
    assert not server.is_open
    assert children() == before


def test_a_sub_agent_that_hands_off_opens_the_targets_server() -> None:
    """A sub-agent handing off to an agent with a server: the server is opened inside the sub-run and closed after."""
    before = children()
    server = _ours()
    seen: list[tuple[str, ...]] = []
    desk = _handoff(server, seen)
    lead = Agent(ScriptedModel([call("triage", {"input": "add"}), "done"]), tools=[desk.as_tool()])
    response = asyncio.run(lead.arun("go"))
    assert response.steps[0].tool_results[0].content == "sum is 42"
    (sub_run,) = response.state.sub_runs.values()
    assert sub_run.agent == "calc"
    assert not server.is_open
    assert children() == before


def test_the_resume_function_opens_the_mcp_servers_among_its_tools() -> None:
    """toolfold.resume(state, tools=[server]) opens the server for the resumed run and closes it."""
    from toolfold import generate_text, resume

    before = children()
    server = _ours(requires_approval=["add"])
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), "three"])
    suspended = generate_text(model, "1+2", tools=[server])
    assert not server.is_open
    loaded = RunState.from_json(suspended.state.to_json())
    done = resume(
        loaded, model=model, tools=[server], approvals={loaded.pending_approvals[0].id: True}
    )
    assert done.text == "three"
    assert [r.content for m in done.messages for r in m.tool_results] == ["3"]
    assert not server.is_open
    assert children() == before


def test_the_resume_function_continues_a_handed_off_run() -> None:
    """toolfold.aresume on a state handed to an agent with a server goes on under that agent, server opened."""
    from toolfold import aresume

    before = children()
    server = _ours(requires_approval=["add"])
    calc = Agent(ScriptedModel([call("add", {"a": 1, "b": 1})]), name="calc", tools=[server])
    triage = Agent(ScriptedModel([call("transfer_to_calc")]), name="triage", handoffs=[calc])
    suspended = triage.run("1+1")
    assert (suspended.agent, suspended.finish_reason) == ("calc", "approval_required")
    approvals = {c.id: True for c in suspended.pending_approvals}
    done = asyncio.run(
        aresume(suspended.state, model=ScriptedModel(["two"]), tools=[server], approvals=approvals)
    )
    assert (done.agent, done.text) == ("calc", "two")
    assert [r.content for m in done.messages for r in m.tool_results][-1] == "2"
    assert not server.is_open
    assert children() == before


def test_an_agent_with_a_server_resolves_its_model_string_once() -> None:
    """Runs and handoffs that list a server's tools reuse the model the agent resolved when it was made."""
    from toolfold.testing import override_models

    server = _ours()
    with override_models(lambda spec: ScriptedModel(["ok"] * 4)) as resolved:
        solo = Agent("openai:gpt-4o-mini", name="solo", tools=[server])
        assert solo.run("a").text == "ok"
        assert asyncio.run(solo.arun("b")).text == "ok"
        triage = Agent(ScriptedModel([call("transfer_to_solo")]), name="t", handoffs=[solo])
        assert triage.run("c").text == "ok"
    assert resolved == ["openai:gpt-4o-mini"]
    assert not server.is_open


class _Counted(MCPServerStdio):
    """Our server, counting its process starts and tool listings (the server itself is real)."""

    def __init__(self) -> None:
        super().__init__(
            sys.executable,
            ["-m", "toolfold.mcp", "serve", "tests.ecosystem.served_tools:TOOLS"],
            cwd=str(ROOT),
            name="ours",
        )
        self.starts = 0
        self.listings = 0

    def _start(self) -> None:
        self.starts += 1
        super()._start()

    def tools(self) -> Any:
        self.listings += 1
        return super().tools()


def _cycle(server: MCPServerStdio, fail_on_visit: int | None = None) -> Agent:
    """triage <-> calc three times (calc holds the server), then triage answers.

    calc adds each time it is reached; with ``fail_on_visit`` its model fails that time.
    """
    visits: list[int] = []

    def calc_model(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool" and last.tool_results[0].tool_name == "add":
            return call("transfer_to_triage")
        visits.append(1)
        if len(visits) == fail_on_visit:
            raise RuntimeError("calc's model is down")
        return call("add", {"a": len(visits), "b": 40})

    triage_turns = iter([call("transfer_to_calc")] * 3 + ["all added"])
    calc = Agent(FunctionModel(calc_model), name="calc", tools=[server], handoffs=["triage"])
    return Agent(
        FunctionModel(lambda r: next(triage_turns)), name="triage", handoffs=[calc], max_steps=20
    )


@pytest.mark.parametrize("how", ["run", "arun", "stream"])
def test_a_handoff_cycle_opens_the_targets_server_once_per_run(how: str) -> None:
    """Reached three times in a cycle, the target's server is opened and listed once, and closed at the end."""
    before = children()
    server = _Counted()
    triage = _cycle(server)
    if how == "run":
        response = triage.run("add")
    elif how == "arun":
        response = asyncio.run(triage.arun("add"))
    else:
        stream = triage.stream("add")
        list(stream)
        response = stream.response
    assert response.text == "all added"
    assert [
        r.content for m in response.messages for r in m.tool_results if r.tool_name == "add"
    ] == [
        "41",
        "42",
        "43",
    ]
    assert (server.starts, server.listings) == (1, 1)
    assert not server.is_open
    assert children() == before


def test_a_cycle_that_fails_after_reaching_the_server_again_closes_it_once() -> None:
    """A run failing on the second visit to the target: one open, and the server is closed with the error."""
    before = children()
    server = _Counted()
    with pytest.raises(RunError, match="calc's model is down"):
        _cycle(server, fail_on_visit=2).run("add")
    assert (server.starts, server.listings) == (1, 1)
    assert not server.is_open
    assert children() == before


def test_a_cycle_cancelled_in_the_target_closes_its_server() -> None:
    """An async run cancelled while the target (reached a second time) works leaves no server behind."""
    before = children()
    server = _Counted()
    reached = asyncio.Event()
    visits: list[int] = []

    async def calc_model(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool" and last.tool_results[0].tool_name == "add":
            return call("transfer_to_triage")
        visits.append(1)
        if len(visits) == 2:
            reached.set()
            await asyncio.Event().wait()  # never answers: the caller cancels
        return call("add", {"a": 1, "b": 1})

    calc = Agent(FunctionModel(calc_model), name="calc", tools=[server], handoffs=["triage"])
    triage = Agent(
        FunctionModel(lambda r: call("transfer_to_calc")), name="triage", handoffs=[calc]
    )

    async def cancelled() -> None:
        task = asyncio.ensure_future(triage.arun("add"))
        await reached.wait()
        assert server.is_open
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert (server.starts, server.listings) == (1, 1)
    assert not server.is_open
    assert children() == before
