"""Durable tool failures on the real dev server: a tool past its timeout, a worker that
lacks a tool or an agent, and a state read with no worker or while a task fails."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import temporal_app
from temporal_runs import _client, _first_task_failure, _in_process, _replays
from temporal_servers import DevServer
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionResponse as DescribeResponse
from temporalio.client import Client, WorkflowHistory, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Replayer, Worker
from temporalio.workflow import NondeterminismError

from toolfold import Agent, ToolExecutionError, UsageError
from toolfold.integrations.temporal import TemporalAgent, ToolfoldPlugin
from toolfold.integrations.temporal._activities import (
    SOURCE_NOT_HERE,
    SourceCallInput,
    ToolCallInput,
    source_call_activity,
)
from toolfold.integrations.temporal._agent import AgentHandle, _unanswered
from toolfold.integrations.temporal._converter import data_converter
from toolfold.runtime.core._effects import ToolInvocation
from toolfold.runtime.core._events import ApprovalGranted, ToolReturned
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.testing import FunctionModel

dawdling = temporal_app.dawdling
dawdling_strict = temporal_app.dawdling_strict


def _starts(tmp_path: Path) -> list[str]:
    return [line for line in (tmp_path / "tools.log").read_text().splitlines() if "start" in line]


def _attempts(history: Any) -> list[int]:
    """The attempt of each activity start in ``history``."""
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]


def test_a_tool_past_its_timeout_is_the_models_error_result_and_runs_once(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool past ``tool_timeout`` is not run again: the model reads that it timed out, the run goes on."""
    (tmp_path / "hang").touch()

    async def go() -> tuple[Any, Any]:
        async with _in_process(server, tmp_path, monkeypatch, [dawdling]) as (client, queue):
            response = await dawdling.run(
                client, "go", id=f"dawdle-{uuid.uuid4()}", task_queue=queue
            )
            return response, await dawdling.handle(
                client, response.state.run_id
            ).workflow.fetch_history()

    response, history = asyncio.run(go())
    assert response.text == "slow said: Error: tool 'slow' timed out after 1 s."
    (returned,) = [e for e in response.state.events if isinstance(e, ToolReturned)]
    assert returned.outcome == "timeout"
    assert len(_starts(tmp_path)) == 1  # (it was started again at each timeout, without end)
    assert _attempts(history) == [1, 1, 1]  # model, tool, model: each on its first attempt
    _replays(history)


def test_a_tool_past_its_timeout_raises_the_run_error_under_on_tool_error_raise(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``on_tool_error="raise"`` a timed-out tool fails the run as locally: a ToolExecutionError with .state."""
    (tmp_path / "hang").touch()

    async def go() -> ToolExecutionError:
        async with _in_process(server, tmp_path, monkeypatch, [dawdling_strict]) as (c, queue):
            with pytest.raises(ToolExecutionError) as caught:
                await dawdling_strict.run(c, "go", id=f"strict-{uuid.uuid4()}", task_queue=queue)
        return caught.value

    error = asyncio.run(go())
    assert str(error) == "tool 'slow' failed: Error: tool 'slow' timed out after 1 s."
    assert error.state is not None
    assert [c.call.name for c in error.state.calls] == ["slow"]  # the call still to run
    assert len(_starts(tmp_path)) == 1


async def _on(
    server: DevServer,
    agents: list[TemporalAgent],
    queue: str,
    work: Callable[[Client], Awaitable[Any]],
) -> Any:
    """``work(client)`` while a worker for ``agents`` (their code, registered now) polls ``queue``."""
    client = await _client(server, agents)
    async with Worker(client, task_queue=queue):
        return await work(client)


def test_a_worker_without_the_agent_leaves_the_run_waiting_for_one_that_has_it(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of an agent its worker lacks waits (its task fails, naming the agent); a worker with it finishes it."""
    monkeypatch.setattr(temporal_app, "LOG_DIR", tmp_path)
    name = f"ghost{uuid.uuid4().hex[:8]}"
    ghost = TemporalAgent(
        Agent(FunctionModel(temporal_app._record_prompt), tools=[temporal_app.record], name=name),
        settings=temporal_app.SETTINGS,
    )
    queue = f"q-{uuid.uuid4().hex}"

    async def go() -> tuple[str, str]:
        async def start(client: Client) -> str:
            handle = await ghost.start(client, "boo", id=f"{name}-1", task_queue=queue)
            return await _first_task_failure(handle.workflow)

        failure = await _on(server, list(temporal_app.AGENTS), queue, start)

        async def finish(client: Client) -> str:
            return (await ghost.handle(client, f"{name}-1").result()).text

        return failure, await _on(server, [ghost], queue, finish)

    failure, text = asyncio.run(go())
    assert f"agent '{name}' is not registered on this worker (registered: " in failure
    assert "the run waits until a worker that registers it takes it" in failure
    assert text == "recorded: BOO"


def test_a_worker_without_an_approved_tool_keeps_the_run_and_its_approval(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run approved on a worker that lacks the tool waits (the task fails naming it); a worker with it runs it once."""
    monkeypatch.setattr(temporal_app, "LOG_DIR", tmp_path)
    queue = f"q-{uuid.uuid4().hex}"
    full = temporal_app.approval
    lacking = TemporalAgent(full.agent.evolve(tools=[]), settings=temporal_app.SETTINGS)
    run_id = f"approval-{uuid.uuid4().hex}"

    async def go() -> tuple[str, str]:
        async def suspend(client: Client) -> str:
            handle = await full.start(client, "pay", id=run_id, task_queue=queue)
            return (await handle.suspended()).pending_approvals[0].id

        call_id = await _on(server, [full], queue, suspend)
        client = await _client(server, [lacking])
        approving = asyncio.ensure_future(lacking.handle(client, run_id).approve(call_id))
        async with Worker(client, task_queue=queue):
            failure = await _first_task_failure(lacking.handle(client, run_id).workflow)
        assert not approving.done()  # the approval waits with the run

        async def finish(client: Client) -> str:
            await approving
            return (await full.handle(client, run_id).result()).text

        return failure, await _on(server, [full], queue, finish)

    failure, text = asyncio.run(go())
    assert "tool 'transfer' of agent 'approval' is not registered on this worker" in failure
    assert "(its tools: none)" in failure
    assert text == "transfer said: moved 5"
    assert (tmp_path / "tools.log").read_text().splitlines() == ["transfer 5"]


def test_state_with_no_worker_polling_is_a_usage_error_naming_the_cause(server: DevServer) -> None:
    """A state read when no worker polls the run's task queue raises a UsageError saying so
    (`_state`, which `state()` and `result()` read through; 1 s, not Temporal's 30 s)."""
    queue = f"nobody-{uuid.uuid4().hex}"

    async def go() -> UsageError:
        client = await _client(server)
        agent = temporal_app.steps
        handle = await agent.start(client, "go", id=f"unpolled-{uuid.uuid4()}", task_queue=queue)
        with pytest.raises(UsageError) as caught:
            await handle._state(timedelta(seconds=1))
        await handle.workflow.terminate()
        return caught.value

    error = asyncio.run(go())
    assert "no worker answered the state query" in str(error)
    assert f"no worker polls its task queue {queue!r}" in str(error)
    assert isinstance(error.__cause__, RPCError)


class _FailingTask:
    """A stand-in for Temporal's handle of a run whose workflow task failed ``attempt - 1``
    times (a worker without its tool took it), each of its calls raising ``raised``."""

    id = "room-9"

    def __init__(self, raised: BaseException, attempt: int) -> None:
        self.raised = raised
        self.attempt = attempt

    async def query(self, *args: Any, **kwargs: Any) -> Any:
        raise self.raised

    async def execute_update(self, *args: Any, **kwargs: Any) -> Any:
        raise self.raised

    async def describe(self) -> Any:
        described = SimpleNamespace(task_queue="rooms", raw_description=DescribeResponse())
        described.raw_description.pending_workflow_task.attempt = self.attempt
        return described

    async def fetch_history_events(self) -> Any:
        failed = HistoryEvent(event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED)
        failed.workflow_task_failed_event_attributes.failure.message = "tool 'transfer' is gone"
        for event in (HistoryEvent(event_type=EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED), failed):
            yield event


_REFUSED = RPCError(
    "Unable to perform workflow execution update due to Workflow Task in failed state.",
    RPCStatusCode.FAILED_PRECONDITION,
    b"",
)


@pytest.mark.parametrize("refusal", [_REFUSED, WorkflowUpdateRPCTimeoutOrCancelledError()])
def test_an_answer_refused_while_the_task_fails_is_a_usage_error_quoting_the_failure(
    refusal: BaseException,
) -> None:
    """Temporal refuses an update while the run's workflow task keeps failing: approve()
    raises a UsageError quoting the failure and saying to send it again (it raised Temporal's
    RPCError)."""
    handle = AgentHandle(temporal_app.approval, _FailingTask(refusal, 3))  # type: ignore[arg-type]
    with pytest.raises(UsageError) as caught:
        asyncio.run(handle._send("approve()", (ApprovalGranted("call_1"),)))
    assert str(caught.value).startswith(
        "AgentHandle.approve(): the run 'room-9' did not take the answer: its workflow task "
        "failed 2 times, Temporal retrying it: tool 'transfer' is gone; the run waits, its "
        "state kept: send the answer again once the failure quoted is fixed (a worker that "
        "registers the run's agent and tools runs, when one is missing) and Temporal retried "
        "the task (its retries back off, up to 10 minutes apart; until then this is refused "
        "again)"
    )
    assert caught.value.__cause__ is refusal


@pytest.mark.parametrize("refusal", [_REFUSED, WorkflowUpdateRPCTimeoutOrCancelledError()])
def test_suspended_refused_while_the_task_fails_is_a_usage_error_quoting_the_failure(
    refusal: BaseException,
) -> None:
    """suspended() refused while the run's workflow task keeps failing raises a UsageError
    quoting the failure, as approve() (it raised Temporal's RPCError, "Unable to perform
    workflow execution update due to Workflow Task in failed state")."""
    handle = AgentHandle(temporal_app.approval, _FailingTask(refusal, 3))  # type: ignore[arg-type]
    with pytest.raises(UsageError) as caught:
        asyncio.run(handle._suspended())
    assert str(caught.value).startswith(
        "AgentHandle.suspended(): the run 'room-9' did not answer: its workflow task failed "
        "2 times, Temporal retrying it: tool 'transfer' is gone; the run waits, its state "
        "kept: call suspended() again once the failure quoted is fixed"
    )
    assert caught.value.__cause__ is refusal


def test_suspended_timing_out_with_the_task_not_failing_stays_temporals_error() -> None:
    """suspended() timed out on a run whose task does not fail is Temporal's error."""
    refusal = WorkflowUpdateRPCTimeoutOrCancelledError()
    handle = AgentHandle(temporal_app.approval, _FailingTask(refusal, 1))  # type: ignore[arg-type]
    with pytest.raises(WorkflowUpdateRPCTimeoutOrCancelledError):
        asyncio.run(handle._suspended())


def test_an_update_timeout_with_the_task_not_failing_stays_temporals_error() -> None:
    """An update timed out on a run whose task does not fail is Temporal's error, unchanged."""
    refusal = WorkflowUpdateRPCTimeoutOrCancelledError()
    handle = AgentHandle(temporal_app.approval, _FailingTask(refusal, 1))  # type: ignore[arg-type]
    with pytest.raises(WorkflowUpdateRPCTimeoutOrCancelledError):
        asyncio.run(handle._send("approve()", (ApprovalGranted("call_1"),)))


_QUERY_REFUSED = RPCError(
    "Unable to query workflow due to Workflow Task in failed state.",
    RPCStatusCode.FAILED_PRECONDITION,
    b"",
)


@pytest.mark.parametrize(
    "unanswered", [RPCError("Timeout expired", RPCStatusCode.CANCELLED, b""), _QUERY_REFUSED]
)
def test_state_while_the_task_fails_quotes_the_failure_not_a_missing_worker(
    unanswered: RPCError,
) -> None:
    """A state read unanswered, or refused, because the polling worker fails the run's task
    (it lacks a tool) quotes that failure (it said that no worker polls the queue, or raised
    Temporal's RPCError)."""
    handle = AgentHandle(temporal_app.approval, _FailingTask(unanswered, 4))  # type: ignore[arg-type]
    with pytest.raises(UsageError) as caught:
        asyncio.run(handle._state(timedelta(seconds=1)))
    message = str(caught.value)
    assert "its workflow task failed 3 times, Temporal retrying it: tool 'transfer' is gone" in (
        message
    )
    assert "no worker polls" not in message
    assert "the run waits, its state kept, until the failure quoted is fixed (a worker" in (message)


def test_the_servers_no_poller_answer_reads_as_unanswered_too() -> None:
    """Temporal's "no poller seen" (a finished run's queue its worker left), and its own query
    deadline, read as no worker answering."""
    seen = "no poller seen for task queue recently, worker may be down"
    assert _unanswered(RPCError(seen, RPCStatusCode.FAILED_PRECONDITION, b""))
    late = "query timed out before a worker could process it"  # (the server's deadline)
    assert _unanswered(RPCError(late, RPCStatusCode.DEADLINE_EXCEEDED, b""))
    assert not _unanswered(RPCError("other", RPCStatusCode.FAILED_PRECONDITION, b""))
    assert not _unanswered(RPCError("Timeout expired", RPCStatusCode.NOT_FOUND, b""))


def test_a_history_replayed_without_a_tool_it_called_is_a_nondeterminism_error() -> None:
    """A worker without a tool a recorded run called fails the task with Temporal's bare
    nondeterminism error (the documented cost of asking `toolfold-missing-waits` only where
    something is missing: the history has no marker there); the run waits all the same."""
    text = (Path(__file__).parent / "histories" / "tool_timed_out_returned.json").read_text()
    history = WorkflowHistory.from_json("tool-timed-out", text)
    lacking = TemporalAgent(dawdling.agent.evolve(tools=[]), settings=dawdling.settings)
    replayer = Replayer(workflows=[], plugins=[ToolfoldPlugin([lacking])])
    try:
        with pytest.raises(NondeterminismError):
            asyncio.run(replayer.replay_workflow(history))
    finally:
        ToolfoldPlugin(temporal_app.AGENTS)  # (agents register per process: the app's again)


def test_a_source_call_on_a_worker_without_the_source_is_retried() -> None:
    """A worker that lacks a tool source fails its call with an error of its own type that
    Temporal retries until a worker with the source takes it (it was non-retryable: the
    model read an error result while a worker with the source ran)."""
    call = source_call_activity({})  # (a worker registering no source)
    invocation = ToolInvocation(ToolCallPart("c1", "echo", "{}", {}), 0, 1, "r:1:0")
    entry = {"name": "echo", "inputSchema": {"type": "object"}}
    given = SourceCallInput("desk", 0, entry, ToolCallInput(invocation, "r"))
    (payload,) = data_converter.payload_converter.to_payloads([given])
    env = ActivityEnvironment()
    env.payload_converter = data_converter.payload_converter
    with pytest.raises(ApplicationError) as caught:
        asyncio.run(env.run(call, [RawValue(payload)]))
    assert caught.value.type == SOURCE_NOT_HERE == "ToolSourceNotOnThisWorker"
    assert not caught.value.non_retryable
    assert "no tool source of agent 'desk' is registered on this worker" in caught.value.message
