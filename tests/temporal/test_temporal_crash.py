"""Crash tests: real worker and server processes SIGKILLed mid-run; the runs still finish right.

Slow (each waits out a heartbeat timeout): scripts/check runs them on the main Python only.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import temporal_app
from temporal_runs import _client, _lines
from temporal_servers import DevServer, WorkerProcess
from temporalio.client import WorkflowUpdateFailedError

from toolfold.runtime.core._state import RunState

# The engine's recovery (heartbeat timeouts, ~30 s) is the subject: scripts/check runs
# these on its first Python only.
pytestmark = pytest.mark.once


def _hanging_worker(
    workers: list[WorkerProcess], server: DevServer, queue: str, log_dir: Path
) -> None:
    """Start a worker on ``queue`` whose `slow` tool hangs (it prints "hanging <key>") until the test lets it go."""
    (log_dir / "hang").touch()
    workers.append(WorkerProcess(server.address, queue, log_dir))


def _kill_in_the_tool(
    workers: list[WorkerProcess], server: DevServer, queue: str, log_dir: Path
) -> str:
    """Once the worker hangs in a tool, SIGKILL it and start another on ``queue``: the tool's key."""
    hanging = workers[0].wait_for("hanging")
    (log_dir / "hang").unlink()
    workers[0].kill()
    workers.append(WorkerProcess(server.address, queue, log_dir))
    return hanging.split()[1]


def test_worker_killed_mid_tool_resumes_and_each_tool_runs_once(
    server: DevServer, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    """SIGKILL the worker inside a tool: the run completes; done tools ran once, the killed one twice."""
    _hanging_worker(workers, server, "crash", tmp_path)

    async def go() -> str:
        client = await _client(server)
        handle = await temporal_app.steps.start(client, "go", id="crash-1", task_queue="crash")
        killed = _kill_in_the_tool(workers, server, "crash", tmp_path)
        response = await handle.result()
        assert response.text == "answer: A,B,C"
        return killed

    killed = asyncio.run(go())
    assert killed == "crash-1:2:0"
    counts = Counter(_lines(tmp_path))
    assert counts == {
        "start crash-1:1:0": 1,
        "done crash-1:1:0": 1,
        "start crash-1:1:1": 1,
        "done crash-1:1:1": 1,
        "start crash-1:2:0": 2,
        "done crash-1:2:0": 1,
    }


def test_worker_killed_inside_a_handoff_target_resumes_with_that_agent(
    server: DevServer,
    workers: list[WorkerProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGKILL the worker in the tool of the agent a handoff reached: the run finishes as a local run does."""
    _hanging_worker(workers, server, "crash-h", tmp_path)

    async def go() -> tuple[str, RunState]:
        client = await _client(server)
        agent = temporal_app.slow_desk
        handle = await agent.start(client, "go", id="crash-h", task_queue="crash-h")
        killed = _kill_in_the_tool(workers, server, "crash-h", tmp_path)
        return killed, (await handle.result()).state

    killed, durable = asyncio.run(go())
    assert killed == "crash-h:2:0"  # billing's first step, after triage's transfer
    assert Counter(_lines(tmp_path)) == {"start crash-h:2:0": 2, "done crash-h:2:0": 1}
    monkeypatch.setattr(temporal_app, "LOG_DIR", tmp_path)
    local = temporal_app.slow_desk.agent.run("go", run_id="crash-h")
    assert durable == local.state
    assert local.text == "sorted: GO"


def test_worker_and_server_killed_mid_tool_resume(
    own_server: DevServer, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    """SIGKILL the worker and the server inside a tool: restarted on the same database, the run completes."""
    _hanging_worker(workers, own_server, "crash2", tmp_path)

    async def start() -> None:
        client = await _client(own_server)
        await temporal_app.steps.start(client, "go", id="crash-2", task_queue="crash2")

    asyncio.run(start())
    workers[0].wait_for("hanging")
    (tmp_path / "hang").unlink()
    workers[0].kill()
    own_server.kill()
    own_server.start()  # same port, same database file
    workers.append(WorkerProcess(own_server.address, "crash2", tmp_path))

    async def finish() -> str:
        client = await _client(own_server)
        response = await temporal_app.steps.handle(client, "crash-2").result()
        return response.text

    assert asyncio.run(finish()) == "answer: A,B,C"
    counts = Counter(_lines(tmp_path))
    assert counts["done crash-2:1:0"] == counts["done crash-2:1:1"] == 1
    assert counts["done crash-2:2:0"] == 1
    assert counts["start crash-2:2:0"] == 2


def test_approval_waits_across_a_worker_restart(
    server: DevServer, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    """A run suspended for approval survives its worker's death and finishes once approved."""
    workers.append(WorkerProcess(server.address, "hitl", tmp_path))

    async def go() -> None:
        client = await _client(server)
        handle = await temporal_app.approval.start(client, "pay", id="hitl-1", task_queue="hitl")
        waiting = await handle.suspended()
        assert waiting.phase == "awaiting_approval"
        (call,) = waiting.pending_approvals
        workers[0].kill()
        workers.append(WorkerProcess(server.address, "hitl", tmp_path))
        assert (await handle.state()).phase == "awaiting_approval"
        with pytest.raises(WorkflowUpdateFailedError) as caught:
            await handle.approve("no-such-call")
        assert "no-such-call" in str(caught.value.cause)
        await handle.approve(call.id)
        response = await handle.result()
        assert response.text == "transfer said: moved 5"

    asyncio.run(go())
    assert _lines(tmp_path) == ["transfer 5"]


def test_workflow_spec_survives_a_worker_killed_mid_step(
    server: DevServer, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    """SIGKILL the worker inside a Sequence's agent step: the run completes; the other steps ran once."""
    _hanging_worker(workers, server, "crash-wf", tmp_path)

    async def go() -> tuple[str, Any]:
        client = await _client(server)
        handle = await temporal_app.pipeline.start(
            client, "go", id="crash-wf-1", task_queue="crash-wf"
        )
        killed = _kill_in_the_tool(workers, server, "crash-wf", tmp_path)
        return killed, await handle.result()

    killed, response = asyncio.run(go())
    assert response.output == "last(middle(GO1))"
    assert response.outputs == {
        "first": "go1",
        "middle": "middle(GO1)",
        "last": "last(middle(GO1))",
    }
    assert Counter(_lines(tmp_path)) == {
        "first go": 1,
        f"start {killed}": 2,  # the killed step ran again, its agent's tool under one key
        f"done {killed}": 1,
        "last middle(GO1)": 1,
    }


def test_a_worker_killed_inside_a_workflow_step_reruns_only_the_tool_in_flight(
    server: DevServer,
    workers: list[WorkerProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGKILL the worker at a tool inside a Sequence's agent step: the step's finished tools ran once."""
    _hanging_worker(workers, server, "crash-nested", tmp_path)

    async def go() -> tuple[str, RunState, Any]:
        client = await _client(server)
        handle = await temporal_app.nested.start(
            client, "go", id="crash-nested-1", task_queue="crash-nested"
        )
        hanging = workers[0].wait_for("hanging")
        seen = await handle.state()  # the step's sub-run, in flight
        (tmp_path / "hang").unlink()
        workers[0].kill()
        workers.append(WorkerProcess(server.address, "crash-nested", tmp_path))
        return hanging.split()[1], seen, await handle.result()

    killed, seen, response = asyncio.run(go())
    (step,) = (c for c in seen.calls if c.call.name == "inner")
    assert step.child is not None
    assert step.child.phase == "running_tools"
    sub_run = step.child.run_id
    assert killed == f"{sub_run}:2:0"
    assert Counter(_lines(tmp_path)) == {
        "first go": 1,
        **{f"{event} {sub_run}:1:{i}": 1 for event in ("start", "done") for i in (0, 1)},
        f"start {killed}": 2,  # the killed tool, under one key; nothing else ran again
        f"done {killed}": 1,
        "last answer: A,B,C": 1,
    }
    local_logs = tmp_path / "local"
    local_logs.mkdir()
    monkeypatch.setattr(temporal_app, "LOG_DIR", local_logs)
    local = temporal_app.nested.agent.run("go", run_id="crash-nested-1")
    assert response.output == local.output == "last(answer: A,B,C)"
    assert response.state == local.state


@pytest.mark.parametrize("agent", [temporal_app.signed, temporal_app.boss], ids=lambda a: a.name)
def test_an_approval_inside_a_nested_run_waits_across_a_worker_restart(
    agent: Any,
    server: DevServer,
    workers: list[WorkerProcess],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An approval inside a workflow step or a sub-agent survives a SIGKILLed worker; approving its nested id finishes the run, each tool once."""
    queue = f"hitl-{agent.name}"
    workers.append(WorkerProcess(server.address, queue, tmp_path))

    async def go() -> tuple[RunState, Any]:
        client = await _client(server)
        handle = await agent.start(client, "pay", id=f"{queue}-1", task_queue=queue)
        waiting = await handle.suspended()
        assert waiting.phase == "awaiting_approval"
        workers[0].kill()
        workers.append(WorkerProcess(server.address, queue, tmp_path))
        assert await handle.state() == waiting
        (call,) = waiting.pending_approvals
        await handle.approve(call.id)  # the call's id, deep in the step's or sub-agent's run
        return waiting, await handle.result()

    waiting, durable = asyncio.run(go())
    assert _lines(tmp_path) == (["first pay"] if agent is temporal_app.signed else []) + [
        "transfer 5"
    ]
    (call,) = waiting.pending_approvals
    assert call.name == "transfer"
    assert waiting.path_to(call.id, "awaiting_approval") is not None
    local_logs = tmp_path / "local"
    local_logs.mkdir()
    monkeypatch.setattr(temporal_app, "LOG_DIR", local_logs)
    local = agent.agent.run("pay", run_id=f"{queue}-1")
    assert waiting == local.state
    finished = agent.agent.resume(local.state, approvals={call.id: True})
    assert durable.state == finished.state
    assert durable.output == finished.output
