"""Running the `temporal_app` agents durably (a worker in this process) and comparing with local runs."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any

import pytest
import temporal_app
from temporal_servers import DevServer
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory
from temporalio.common import RawValue
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Replayer, Worker

from toolfold import RunError
from toolfold.integrations.temporal import TemporalAgent, ToolfoldPlugin
from toolfold.integrations.temporal._converter import data_converter


def _lines(log_dir: Path) -> list[str]:
    """What the app's tools logged in ``log_dir``, a line each."""
    return (log_dir / "tools.log").read_text(encoding="utf-8").splitlines()


async def _client(server: DevServer, agents: Seq[TemporalAgent] = temporal_app.AGENTS) -> Client:
    return await Client.connect(server.address, plugins=[ToolfoldPlugin(agents)])


@contextlib.asynccontextmanager
async def _worker(
    server: DevServer, agents: Seq[TemporalAgent] = temporal_app.AGENTS
) -> AsyncIterator[tuple[Client, str]]:
    """A client, and a worker for ``agents`` in this process on a task queue of its own."""
    client = await _client(server, agents)
    queue = f"q-{uuid.uuid4().hex}"
    async with Worker(client, task_queue=queue):
        yield client, queue


def _in_process(
    server: DevServer,
    log_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    agents: Seq[TemporalAgent] = temporal_app.AGENTS,
) -> contextlib.AbstractAsyncContextManager[tuple[Client, str]]:
    """`_worker` for the app's agents, whose tools log to ``log_dir``."""
    monkeypatch.setattr(temporal_app, "LOG_DIR", log_dir)
    return _worker(server, agents)


def _run(
    agent: TemporalAgent,
    id: str,
    server: DevServer,
    log_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """A durable run of ``agent`` on the prompt "go" (on a worker in this process): its response and history."""

    async def go() -> tuple[Any, WorkflowHistory]:
        async with _in_process(server, log_dir, monkeypatch) as (client, queue):
            response = await agent.run(client, "go", id=id, task_queue=queue)
            return response, await agent.handle(client, id).workflow.fetch_history()

    return asyncio.run(go())


def _run_like_local(
    agent: TemporalAgent,
    id: str,
    server: DevServer,
    log_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Any, WorkflowHistory, Any]:
    """`_run`, then a local run of ``agent`` on "go" with the same run id, which ends in the same state and text.

    The durable response, its history and the local response.
    """
    durable, history = _run(agent, id, server, log_dir, monkeypatch)
    local = agent.agent.run("go", run_id=id)
    assert durable.state == local.state
    assert durable.text == local.text
    return durable, history, local


def _failing(
    agent: TemporalAgent,
    id: str,
    error: type[RunError],
    server: DevServer,
    log_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> RunError:
    """The ``error`` a durable run of ``agent`` on "go" raises: the one a local run raises, message and state."""

    async def go() -> RunError:
        async with _in_process(server, log_dir, monkeypatch) as (client, queue):
            with pytest.raises(error) as caught:
                await agent.run(client, "go", id=id, task_queue=queue)
        return caught.value

    durable = asyncio.run(go())
    with pytest.raises(error) as local:
        agent.agent.run("go", run_id=id)
    assert str(durable) == str(local.value)
    assert durable.state == local.value.state
    return durable


def _approved_like_local(
    agent: TemporalAgent,
    prompt: str,
    id: str,
    server: DevServer,
    log_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Any, Any]:
    """A durable run that suspends, and every call approved: its state while waiting and its response.

    A local run with the same id waits in the same state, and approved it ends in the same state and text.
    """

    async def go() -> tuple[Any, Any]:
        async with _in_process(server, log_dir, monkeypatch) as (client, queue):
            handle = await agent.start(client, prompt, id=id, task_queue=queue)
            waiting = await handle.suspended()
            await handle.approve(*(call.id for call in waiting.pending_approvals))
            return waiting, await handle.result()

    waiting, durable = asyncio.run(go())
    local = agent.agent.run(prompt, run_id=id)
    assert waiting == local.state  # a sub-run waits inside its call, with its tools
    approvals = {call.id: True for call in local.state.pending_approvals}
    finished = agent.agent.resume(local.state, approvals=approvals)
    assert durable.state == finished.state
    assert durable.text == finished.text
    return waiting, durable


def _scheduled(history: WorkflowHistory) -> list[str]:
    """The names of the activities a history scheduled, in order."""
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


async def _first_task_failure(handle: WorkflowHandle[Any, Any]) -> str:
    """The message of the first failed workflow task of ``handle``'s run, once there is one.

    Raises:
        AssertionError: The run failed instead (its failure's message).
    """
    while True:
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                message: str = event.workflow_task_failed_event_attributes.failure.message
                return message
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
                failure = event.workflow_execution_failed_event_attributes.failure
                raise AssertionError(f"the run failed: {failure.message}")
        await asyncio.sleep(0.1)  # (polling the history: the task fails once a worker took it)


def _replays(*histories: WorkflowHistory) -> None:
    """Replay ``histories`` with this code (raises on nondeterminism)."""
    replayer = Replayer(workflows=[], plugins=[ToolfoldPlugin(temporal_app.AGENTS)])
    for history in histories:
        asyncio.run(replayer.replay_workflow(history))


def _activity_environment() -> ActivityEnvironment:
    """An activity environment with toolfold's payload converter, as a worker with ToolfoldPlugin has."""
    env = ActivityEnvironment()
    env.payload_converter = data_converter.payload_converter
    return env


def _decoded(result: RawValue, type_hint: Any) -> Any:
    """An activity's result, which it returns encoded (a `RawValue`), read back as ``type_hint``."""
    assert isinstance(result, RawValue)
    return data_converter.payload_converter.from_payload(result.payload, type_hint)
