"""Agents with MCP servers on Temporal: the listing and every call are activities, the state is a local run's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import temporal_app
from temporal_runs import _approved_like_local, _lines, _replays, _run_like_local, _scheduled
from temporal_servers import DevServer

from toolfold.integrations.temporal import TemporalAgent
from toolfold.mcp import MCPServer

# A stdio MCP server starts per tool call (1-3 s each under load), and what is tested is
# how the workflow lists and calls them, the same code on every Python (the MCP client
# itself is tested on each, in tests/ecosystem): scripts/check runs these on its first
# Python only, as the crash tests. The first test runs the sessions as they come (a
# server started for each listing and call); the others hold the one server open
# (`held_open`), as docs/durable.md suggests around a worker, so it starts once for them.
pytestmark = pytest.mark.once

MCP_TOOLS = ("m_add", "m_fail", "m_shout", "record")
"""The tools of the MCP agent (three listed by the server, one its own), sorted."""


def _count_starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the MCP servers whose session starts (a process each) from now on."""
    started: list[str] = []
    start = MCPServer._start

    def counted(self: MCPServer) -> None:
        started.append(self.name)
        start(self)

    monkeypatch.setattr(MCPServer, "_start", counted)
    return started


@pytest.fixture(scope="module")
def held_open() -> Iterator[None]:
    """The app's MCP server held open (``with server:``) for the rest of the module: started once, every listing and call shares its session."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        started = _count_starts(monkeypatch)
        with temporal_app.SERVED:
            yield
            assert temporal_app.SERVED.is_open
        assert started == ["served"]  # no listing or call, durable or local, started another


def _listed_once(
    agent: TemporalAgent,
    node: str,
    server: DevServer,
    log_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Any, list[str]]:
    """A durable run of ``agent`` like its local run, ``node``'s servers listed once, before its first model request.

    The durable response and the activities its history scheduled; the history replays.
    """
    run_id = f"{agent.name}-1"
    durable, history, _ = _run_like_local(agent, run_id, server, log_dir, monkeypatch)
    scheduled = _scheduled(history)
    assert scheduled.count(f"{node}__list_tools") == 1  # kept across steps and handoffs
    listed_at = scheduled.index(f"{node}__list_tools")
    assert scheduled.index(f"{node}__model_request") > listed_at
    _replays(history)  # the recorded listing makes the same tools and first state
    return durable, scheduled


def _tools_called(scheduled: list[str], node: str) -> list[str]:
    """The tools ``node`` called, by the names of their activities, sorted."""
    return sorted(
        name.split("__tool__")[1] for name in scheduled if name.startswith(f"{node}__tool__")
    )


def test_an_agent_with_an_mcp_server_runs_durably_like_a_local_run(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed once in served__list_tools, each MCP call its own served__tool__<name> (a session of its own): the state is the local run's."""
    started = _count_starts(monkeypatch)
    durable, scheduled = _listed_once(temporal_app.served, "served", server, tmp_path, monkeypatch)
    # stateless sessions: the listing, the calls (those in flight together share one) and
    # the local run each start the server, and close it
    assert 3 <= len(started) <= 5
    assert not temporal_app.SERVED.is_open
    # the state holds the listed tools in the config, results and errors
    assert durable.text.startswith("results: 5 | HI | Error: MCPError: MCP server 'served'")
    assert durable.text.endswith(" | OWN")
    assert [s.name for s in durable.state.config.tools] == ["record", "m_add", "m_shout", "m_fail"]
    assert scheduled[:2] == ["served__list_tools", "served__model_request"]
    assert _tools_called(scheduled, "served") == list(MCP_TOOLS)
    assert _lines(tmp_path).count("start served-1:1:3") == 2  # the durable run once, the local once


@pytest.mark.usefixtures("held_open")
def test_a_run_with_an_mcp_server_continues_as_new_with_its_listing(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Continuing as new carries the recorded listing: the new history lists nothing and calls the same tools."""
    agent = temporal_app.served_chained
    _, history, _ = _run_like_local(agent, "served-c", server, tmp_path, monkeypatch)
    assert _scheduled(history) == ["served_chained__model_request"]  # the last history: the answer
    _replays(history)


@pytest.mark.usefixtures("held_open")
@pytest.mark.parametrize(
    ("agent", "answer"),
    [(temporal_app.served_step, "last(results: "), (temporal_app.served_boss, "boss: results: ")],
    ids=["step", "as_tool"],
)
def test_an_mcp_agent_below_the_top_runs_durably_like_a_local_run(
    agent: TemporalAgent,
    answer: str,
    server: DevServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workflow step's or a sub-agent's MCP servers are listed in <node>__list_tools as the sub-run starts: the state is the local run's."""
    sub = f"{agent.name}.served"  # the state holds the sub-run's listed tools in its config
    durable, scheduled = _listed_once(agent, sub, server, tmp_path, monkeypatch)
    assert durable.text.startswith(answer + "5 | HI | Error: MCPError: MCP server 'served'")
    assert scheduled[:3] == [
        f"{agent.name}__model_request",
        f"{sub}__list_tools",  # when the sub-run starts, before its first model request
        f"{sub}__model_request",
    ]
    assert _tools_called(scheduled, sub) == list(MCP_TOOLS)


@pytest.mark.usefixtures("held_open")
@pytest.mark.parametrize(
    ("agent", "answer"),
    [(temporal_app.served, "results: 201"), (temporal_app.served_step, "last(results: 201)")],
    ids=["top", "step"],
)
def test_an_mcp_tools_approval_predicate_suspends_the_durable_run(
    agent: TemporalAgent,
    answer: str,
    server: DevServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server's requires_approval predicate decides in workflow code (in a step too); approved, the listed tool runs."""
    run_id = f"{agent.name}-big"  # waiting (a step's sub-run too) and done as a local run
    waiting, durable = _approved_like_local(agent, "big", run_id, server, tmp_path, monkeypatch)
    assert [c.name for c in waiting.pending_approvals] == ["m_add"]
    assert durable.text == answer


@pytest.mark.usefixtures("held_open")
@pytest.mark.parametrize(
    "agent",
    [temporal_app.served_step_chained, temporal_app.served_billing_chained],
    ids=["step", "handoff-target"],
)
def test_a_run_continues_as_new_with_the_listings_of_its_sub_runs_and_handoff_targets(
    agent: TemporalAgent, server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Continuing as new after every model call carries the step's or the target's listing: it goes on with the same tools."""
    _, history, _ = _run_like_local(agent, f"{agent.name}-c", server, tmp_path, monkeypatch)
    assert "list_tools" not in " ".join(_scheduled(history))  # the last history lists nothing
    _replays(history)


@pytest.mark.usefixtures("held_open")
@pytest.mark.parametrize(
    ("agent", "node"),
    [
        (temporal_app.served_desk, "served_desk"),
        (temporal_app.served_handed, "served_handed.triage"),
        (temporal_app.served_billing, "served_billing@billing"),
        (temporal_app.served_billing_step, "served_billing_step.triage@billing"),
    ],
    ids=["first-top", "first-step", "target-top", "target-step"],
)
def test_an_mcp_agent_in_a_handoff_graph_runs_durably_like_a_local_run(
    agent: TemporalAgent,
    node: str,
    server: DevServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """triage -> billing -> triage, one of them with an MCP server: listed once (a target when reached), the state is the local run's."""
    # each agent's config after a handoff lists its tools; listed once, kept across the handoffs
    durable, scheduled = _listed_once(agent, node, server, tmp_path, monkeypatch)
    assert "5" in durable.text  # the MCP tool's result
    assert f"{node}__tool__m_add" in scheduled
