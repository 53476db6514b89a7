"""Agents as durable Temporal workflows, on a real dev server and real (killed) worker processes."""

from __future__ import annotations

import ast
import asyncio
import builtins
import inspect
import json
import textwrap
import threading
import types
import typing
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import temporal_app
from temporal_runs import (
    _activity_environment,
    _client,
    _decoded,
    _failing,
    _first_task_failure,
    _in_process,
    _lines,
    _replays,
    _run,
    _run_like_local,
    _scheduled,
)
from temporal_servers import SUGGEST_AFTER, DevServer, WorkerProcess
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHistory,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from temporalio.converter import ExternalStorage
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    Replayer,
    Worker,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)
from temporalio.workflow import NondeterminismError

import toolfold.integrations.temporal._nested as nested_module
import toolfold.integrations.temporal._workflow as workflow_module
import toolfold.runtime._run as run_module
import toolfold.runtime.drive._executor as executor_module
from toolfold import (
    Agent,
    AuthenticationError,
    BadRequestError,
    Denied,
    NotFoundError,
    OutputValidationError,
    ProviderError,
    RateLimitError,
    Response,
    RunError,
    Sequence,
    ServerError,
    TextDelta,
    ToolExecutionError,
    ToolResultPart,
    UsageError,
    WorkflowResponse,
    approval_key,
)
from toolfold.adapters._finishes import abnormal_finish
from toolfold.integrations.temporal import (
    WORKFLOW_NAME,
    AgentInput,
    AgentWorkflow,
    FileStorageDriver,
    ModelCallInput,
    TemporalAgent,
    ToolCallInput,
    ToolfoldPlugin,
    data_converter,
)
from toolfold.integrations.temporal._activities import MAX_RETRY_DELAY, _application_error
from toolfold.runtime import (
    Message,
    ModelResponse,
    StreamEvent,
    SubRunEvent,
    TextPart,
    TokenBudget,
    ToolCallPart,
    ToolCallStart,
    Usage,
)
from toolfold.runtime.core import _next, _reducer
from toolfold.runtime.core._effects import CallModel, RunTools
from toolfold.runtime.core._events import ToolReturned
from toolfold.runtime.core._state import RunState
from toolfold.testing import FunctionModel

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "toolfold"
HISTORIES = Path(__file__).resolve().parent / "histories"


def _history(name: str) -> WorkflowHistory:
    """The recorded history ``histories/<name>.json``."""
    text = (HISTORIES / f"{name}.json").read_text(encoding="utf-8")
    return WorkflowHistory.from_json(f"history-{name}", text)


def test_activity_names_are_pinned() -> None:
    """Renaming an activity breaks running workflows: the names are pinned."""

    def names(agent: TemporalAgent) -> set[str]:
        return {a.__temporal_activity_definition.name for a in agent.activities}  # type: ignore[attr-defined]

    assert names(temporal_app.steps) == {
        "steps__model_request",
        "steps__tool__record",
        "steps__tool__slow",
    }
    # Nested runs: the path of tool names from the top, joined with dots.
    assert names(temporal_app.nested) == {
        *("nested__model_request", "nested__tool__first", "nested__tool__last"),
        "nested__tool__inner",  # the whole step: for runs recorded before nested runs
        *("nested.inner__model_request", "nested.inner__tool__record", "nested.inner__tool__slow"),
    }
    assert names(temporal_app.boss) == {
        *("boss__model_request", "boss__tool__signer"),
        *("boss.signer__model_request", "boss.signer__tool__transfer"),
    }
    # Handoffs: each agent the first one reaches runs under <first agent's node>@<agent>.
    assert names(temporal_app.desk) == {
        *("desk__model_request", "desk__tool__transfer_to_billing"),
        *("desk@billing__model_request", "desk@billing__tool__record"),
        "desk@billing__tool__transfer_to_triage",
    }
    assert {n for n in names(temporal_app.handed) if "@" in n} == {
        "handed.triage@billing__model_request",
        "handed.triage@billing__tool__record",
        "handed.triage@billing__tool__transfer_to_triage",
    }
    # as_tool(output=...): the function runs in the sub-run's node's output activity.
    assert {n for n in names(temporal_app.extracting) if n.endswith("__output")} == {
        "extracting.loud__output",
        "extracting.mute__output",
    }
    # Tool sources: their listing has an activity; the calls of the tools they list go to
    # one dynamic activity of the worker, under the same <node>__tool__<tool> names.
    assert names(temporal_app.served) == {
        *("served__model_request", "served__tool__record", "served__list_tools"),
    }
    # Below the top (a workflow step's agent, an agent used as a tool): under the sub-run's node.
    assert {n for n in names(temporal_app.served_step) if n.startswith("served_step.")} == {
        "served_step.served__list_tools",
        "served_step.served__model_request",
        "served_step.served__tool__record",
    }
    assert {n for n in names(temporal_app.served_boss) if n.startswith("served_boss.")} == {
        "served_boss.served__list_tools",
        "served_boss.served__model_request",
        "served_boss.served__tool__record",
    }
    # The first agent of a handoff graph lists under its node.
    assert "served_desk__list_tools" in names(temporal_app.served_desk)
    assert "served_handed.triage__list_tools" in names(temporal_app.served_handed)
    # A handoff target lists under its node, <first agent's node>@<agent>.
    assert "served_billing@billing__list_tools" in names(temporal_app.served_billing)
    assert WORKFLOW_NAME == "toolfold_agent"


def test_payload_converter_round_trips_a_state() -> None:
    """A run state crosses Temporal's payload converter through toolfold's cattrs converter."""
    state = temporal_app.steps.agent._start("hi", (), "run-1")
    converter = data_converter.payload_converter
    (payload,) = converter.to_payloads([AgentInput("steps", state)])
    (back,) = converter.from_payloads([payload], [AgentInput])
    assert back == AgentInput("steps", state)
    assert payload.metadata["encoding"] == b"json/plain"


_BANNED_MODULES = {"time", "random", "uuid", "threading", "os", "socket", "subprocess", "secrets"}
_BANNED_CALLS = {"open", "print", "input", "now", "utcnow", "today", "sleep", "getenv", "monotonic"}


def test_workflow_code_makes_no_nondeterministic_calls() -> None:
    """reduce, next_effect and the workflow's modules import no clock, random, uuid, thread, env or I/O."""
    found = []
    for module in (_reducer, _next, workflow_module, nested_module):
        tree = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [a.name for a in node.names if a.name.split(".")[0] in _BANNED_MODULES]
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] in _BANNED_MODULES:
                    found.append(node.module)
            elif isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in _BANNED_CALLS:
                    found.append(f"{module.__name__}: {name}()")
    assert found == []


def _ours(value: Any) -> bool:
    return (getattr(value, "__module__", None) or "").startswith("toolfold")


def _methods(cls: type) -> list[Any]:
    found = []
    for value in vars(cls).values():
        function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if inspect.isfunction(function) and _ours(function):
            found.append(function)
    return found


def _defined_in(module: Any) -> list[Any]:
    """The functions and methods written in ``module``'s file (public names get another __module__)."""
    found = []
    for value in vars(module).values():
        functions = _methods(value) if inspect.isclass(value) else [value]
        found += [
            f
            for f in functions
            if inspect.isfunction(f) and f.__code__.co_filename == module.__file__
        ]
    return found


def _reachable(roots: list[Any]) -> tuple[dict[str, Any], list[str]]:
    """Every toolfold function ``roots`` may call (transitively), and the banned calls among them.

    Follows the names a function's body uses (in its module's globals) to
    toolfold functions and classes, and ``x.name`` (``x`` not a module) to
    the methods (and properties) called ``name`` of every toolfold class reached: an
    over-approximation, so what it finds nothing in is clean. A name's use
    counts, called or passed along.
    """
    todo = list(roots)
    seen: dict[str, Any] = {}
    classes: set[type] = set()
    attributes: set[str] = set()
    found: list[str] = []
    while todo:
        function = inspect.unwrap(todo.pop())
        if not Path(function.__code__.co_filename).is_relative_to(PACKAGE):
            continue  # attrs' generated __init__, __eq__...: no source, nothing but fields
        module = Path(function.__code__.co_filename).relative_to(PACKAGE).with_suffix("")
        where = f"{'.'.join(module.parts)}.{function.__qualname__}"
        if where in seen:
            continue
        seen[where] = function
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        names = function.__globals__
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                found += [
                    f"{where}: import {m}" for m in modules if m.split(".")[0] in _BANNED_MODULES
                ]
            elif isinstance(node, ast.Name):
                value = names.get(node.id, getattr(builtins, node.id, None))
                if (
                    isinstance(value, types.ModuleType)
                    and value.__name__.split(".")[0] in _BANNED_MODULES
                ):
                    found.append(f"{where}: {node.id}")
                elif inspect.isfunction(value) and _ours(value):
                    todo.append(value)
                elif inspect.isclass(value) and _ours(value) and value not in classes:
                    classes.add(value)
                    todo += [m for m in _methods(value) if m.__name__ in attributes]
            elif isinstance(node, ast.Attribute) and node.attr not in attributes:
                owner = node.value
                if isinstance(owner, ast.Name) and isinstance(
                    names.get(owner.id), types.ModuleType
                ):
                    continue  # `workflow.run`, `attrs.evolve`: a module's, not a method
                attributes.add(node.attr)
                todo += [m for cls in classes for m in _methods(cls) if m.__name__ == node.attr]
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in _BANNED_CALLS:
                    found.append(f"{where}: {name}()")
    return seen, found


def test_what_workflow_code_calls_in_toolfold_makes_no_nondeterministic_calls() -> None:
    """The helpers workflow code reaches in other modules (start, argument checks, templates...) are deterministic too."""
    roots = [*_defined_in(workflow_module), *_defined_in(nested_module)]
    reached, found = _reachable([*roots, _reducer.reduce, _next.next_effect])
    assert found == []
    # it does follow the helpers in other modules...
    for helper in (
        "runtime._run.start",
        "runtime._agent.Agent._start",
        "runtime._workflow.Workflow._start",
        "runtime.drive._executor.checked_arguments",
        "runtime._task._scope",
        "runtime._template.render",
        "runtime._agent_tool._prompt",
        "runtime._resume.nest_answers",
        "runtime.drive._loop.unique_call_ids",
    ):
        assert helper in reached, helper
    # ...and never reaches the clock or the random run id they replaced on this path
    assert "runtime.drive._executor._prepare" not in reached
    assert "runtime._run.new_run_id" not in reached
    # the scan finds what it looks for
    _, dirty = _reachable([executor_module._prepare, run_module.new_run_id])
    assert set(dirty) == {
        "runtime.drive._executor._prepare: monotonic()",
        "runtime.drive._executor._prepare: time",
        "runtime._run.new_run_id: os",
    }


def test_run_end_to_end_gives_the_local_response(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A durable run answers like a local run of the same agent, parallel results in call order."""

    async def go() -> None:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            response = await temporal_app.steps.run(client, "go", id="e2e-1", task_queue=queue)
            handle = temporal_app.steps.handle(client, "e2e-1")
            queried = await handle.state()
            history = await handle.workflow.fetch_history()
        local = temporal_app.steps.agent.run("go")
        assert response.text == local.text == "answer: A,B,C"
        assert response.state.messages == local.state.messages
        assert queried == response.state
        assert response.state.run_id == "e2e-1"
        # the determinism guard: the recorded history replays with this code...
        replayer = Replayer(workflows=[], plugins=[ToolfoldPlugin(temporal_app.AGENTS)])
        await replayer.replay_workflow(history)
        # ...and not once the effect sequence changes (tools skipped at step 1)
        real = workflow_module.next_effect

        def changed(state: RunState) -> Any:
            effect = real(state)
            if isinstance(effect, RunTools) and state.step == 1:
                return CallModel(_next.build_request(state), 2, "changed")
            return effect

        monkeypatch.setattr(workflow_module, "next_effect", changed)
        with pytest.raises(NondeterminismError):
            await replayer.replay_workflow(history)

    asyncio.run(go())


def test_unknown_agent_leaves_the_run_waiting_with_a_clear_error(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow for an agent the worker does not have fails its task, naming it: the run waits for a worker that has it."""

    async def go() -> tuple[str, WorkflowExecutionStatus | None]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            state = temporal_app.steps.agent._start("go", (), "x")
            handle = await client.start_workflow(
                WORKFLOW_NAME, AgentInput("nobody", state), id="unknown-1", task_queue=queue
            )
            failure = await _first_task_failure(handle)
            status = (await handle.describe()).status
            await handle.terminate()
        return failure, status

    failure, status = asyncio.run(go())
    assert "agent 'nobody' is not registered on this worker (registered: " in failure
    assert status == WorkflowExecutionStatus.RUNNING


def test_a_tool_the_worker_lacks_leaves_the_run_waiting_naming_it(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call to a tool the client's agent has and the worker's does not fails the workflow task, naming it; the run waits."""
    client_side = TemporalAgent(
        temporal_app.lopsided.agent.evolve(tools=[temporal_app.record]), name="lopsided"
    )

    async def go() -> tuple[str, WorkflowExecutionStatus | None]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await client_side.start(client, "hi", id="lopsided-1", task_queue=queue)
            failure = await _first_task_failure(handle.workflow)
            status = (await handle.workflow.describe()).status
            await handle.workflow.terminate()
        return failure, status

    failure, status = asyncio.run(go())
    assert "tool 'record' of agent 'lopsided' is not registered on this worker" in failure
    assert status == WorkflowExecutionStatus.RUNNING
    assert not (tmp_path / "tools.log").exists()


def test_denied_call_never_runs(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A denial sent by update reaches the model as an error result; the tool never runs."""

    async def go() -> str:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await temporal_app.approval.start(client, "pay", id="deny-1", task_queue=queue)
            waiting = await handle.suspended()
            await handle.approve(deny={waiting.pending_approvals[0].id: "not today"})
            return (await handle.result()).text

    assert "not today" in asyncio.run(go())
    assert not (tmp_path / "tools.log").exists()


def test_a_manual_tool_call_suspends_the_run_until_the_caller_provides_its_result(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call to a tool without a function suspends the durable run; provide() ends it as a local resume."""

    async def go() -> tuple[RunState, Response]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await temporal_app.asking.start(client, "go", id="ask-1", task_queue=queue)
            waiting = await handle.suspended()
            [call] = waiting.pending_calls
            await handle.provide([ToolResultPart(call.call.id, "ask_user", "Paris")])
            return waiting, await handle.result()

    waiting, response = asyncio.run(go())
    assert waiting.phase == "awaiting_tool_results"
    assert [c.call.name for c in waiting.pending_calls] == ["ask_user"]
    assert response.text == "the user said: ASKED / Paris"
    # The function tool beside it ran once, before the run suspended, and never again.
    assert (tmp_path / "tools.log").read_text(encoding="utf-8").count("start") == 1
    local = temporal_app.asking.agent.run("go", run_id="ask-1")
    assert local.finish_reason == "tool_calls"
    resumed = temporal_app.asking.agent.resume(
        local.state, tool_results={local.state.pending_calls[0].call.id: "Paris"}
    )
    assert response.state == resumed.state


def test_provider_errors_map_to_temporal_retries(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rate limit is retried by Temporal (after retry-after); a bad key fails the run at once."""

    async def go() -> None:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            response = await temporal_app.flaky.run(client, "hi", id="flaky-1", task_queue=queue)
            assert response.text == "answered on attempt 2"
            with pytest.raises(AuthenticationError) as caught:
                await temporal_app.unauthorized.run(client, "hi", id="unauth-1", task_queue=queue)
        assert isinstance(caught.value.__cause__, WorkflowFailureError)
        failure = caught.value.__cause__.cause
        assert isinstance(failure, ActivityError)
        assert isinstance(failure.cause, ApplicationError)
        assert failure.cause.type == "AuthenticationError"
        assert failure.cause.non_retryable
        assert failure.retry_state == RetryState.NON_RETRYABLE_FAILURE

    asyncio.run(go())


def test_temporal_agent_refuses_what_it_cannot_run() -> None:
    """Names with '__' and nameless agents are refused up front."""
    model = temporal_app.steps.agent.model
    with pytest.raises(UsageError, match="must not contain '__'"):
        TemporalAgent(Agent(model, name="a__b"))
    with pytest.raises(UsageError, match="needs a name"):
        TemporalAgent(Agent(model))


def test_live_stop_predicates_run_in_workflow_code(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop_when callable ends the durable run where it ends a local run."""

    durable, _ = _run(temporal_app.stopper, "stopper-1", server, tmp_path, monkeypatch)
    local = temporal_app.stopper.agent.run("go")
    assert durable.state.step == local.state.step == 1
    assert durable.state.messages == local.state.messages
    assert durable.state.finish_reason == local.state.finish_reason == "stop_condition"


def _tool_activity_order(history: WorkflowHistory) -> list[str]:
    """The history's tool activity events in order: ``scheduled`` and ``completed``."""
    order = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if "__tool__" in event.activity_task_scheduled_event_attributes.activity_type.name:
                order.append("scheduled")
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            order.append("completed")
    return order


def test_max_concurrency_bounds_the_tool_activities_in_flight(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With max_concurrency=1 a step's calls run one after another; by default together."""

    response, one = _run(temporal_app.one_at_a_time, "single-1", server, tmp_path, monkeypatch)
    assert response.text == "answer: A,B,C"
    # model, (record a), (record b), model, (slow), model: each tool alone in flight
    assert _tool_activity_order(one)[:6] == [
        "completed",
        *["scheduled", "completed"] * 2,
        "completed",
    ]
    _, both = _run(temporal_app.steps, "both-1", server, tmp_path, monkeypatch)
    assert _tool_activity_order(both)[:4] == ["completed", "scheduled", "scheduled", "completed"]


def test_continue_as_new_carries_the_state(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that continues as new after every step gives the same answer and the whole state."""

    async def go() -> None:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await temporal_app.chained.start(client, "go", id="chain-1", task_queue=queue)
            response = await handle.result()
            latest = await client.get_workflow_handle("chain-1").describe()
        assert response.text == "answer: A,B,C"
        assert response.state.step == 3
        assert response.state.messages == temporal_app.steps.agent.run("go").state.messages
        assert latest.run_id != handle.workflow.first_execution_run_id

    asyncio.run(go())


def test_oversized_tool_result_becomes_a_clear_error_result(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool result over the payload budget reaches the model as an error naming the limit."""

    response, _ = _run(temporal_app.oversized, "big-1", server, tmp_path, monkeypatch)
    (result,) = [r for m in response.state.messages for r in m.tool_results]
    assert result.is_error
    assert response.text == (
        "the result of tool 'big' is 101 bytes, over the 100-byte limit for results of "
        "durable runs (Temporal payloads are limited to 2 MB): return a reference to the "
        "data instead, or give ToolfoldPlugin an external_storage and raise "
        "ActivitySettings.max_result_bytes"
    )


def test_cancelling_a_suspended_run_ends_it_cancelled(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelling a run that waits for approval ends the workflow as cancelled; the tool never runs."""

    async def go() -> BaseException | None:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await temporal_app.approval.start(
                client, "pay", id="cancel-1", task_queue=queue
            )
            await handle.suspended()
            await handle.workflow.cancel()
            with pytest.raises(WorkflowFailureError) as caught:
                await handle.result()
            return caught.value.cause

    assert isinstance(asyncio.run(go()), CancelledError)
    assert not (tmp_path / "tools.log").exists()


async def _until(
    events: asyncio.Queue[tuple[int, int, Any]],
    seen: list[tuple[int, int, Any]],
    done: Callable[[tuple[int, int, Any]], bool],
) -> None:
    """Take events off the side channel into ``seen`` until one satisfies ``done``."""
    while not (seen and done(seen[-1])):
        seen.append(await events.get())


def test_model_output_streams_to_the_side_channel_while_the_run_goes_on(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Token events reach the caller through the handler while the model answers; the result is a local run's."""
    channel = temporal_app.Channel()
    channel.gate = asyncio.Event()
    monkeypatch.setattr(temporal_app, "CHANNEL", channel)

    async def go() -> tuple[Any, ...]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await temporal_app.streamed.start(
                client, "hi", id="stream-1", task_queue=queue
            )
            seen: list[tuple[int, int, Any]] = []
            events = channel.queue("stream-1")
            await _until(events, seen, lambda item: isinstance(item[2], TextDelta))
            # the model is held at the gate after its first piece: the run cannot be over
            status = (await handle.workflow.describe()).status
            assert channel.gate is not None
            channel.gate.set()
            await _until(events, seen, lambda item: item == (2, 1, None))
            response = await handle.result()
            history = await handle.workflow.fetch_history()
        return seen, status, response, history

    seen, status, response, history = asyncio.run(go())
    assert status == WorkflowExecutionStatus.RUNNING
    text = "".join(e.text for step, _, e in seen if step == 2 and isinstance(e, TextDelta))
    assert text == response.text == "Hello, world: A"
    assert [e.name for step, _, e in seen if step == 1 and isinstance(e, ToolCallStart)] == [
        "record"
    ]
    assert {attempt for _, attempt, _ in seen} == {1}
    assert response.state.messages == temporal_app.streamed.agent.run("hi").state.messages
    # the workflow saw final responses only: its history replays as any other
    _replays(history)


def test_a_retried_model_request_streams_again_as_its_next_attempt(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream broken by a provider error streams again as attempt 2; the answer is attempt 2's."""
    channel = temporal_app.Channel()
    monkeypatch.setattr(temporal_app, "CHANNEL", channel)

    async def go() -> tuple[list[tuple[int, int, Any]], str]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await temporal_app.hiccup.start(client, "hi", id="hiccup-1", task_queue=queue)
            seen: list[tuple[int, int, Any]] = []
            await _until(channel.queue("hiccup-1"), seen, lambda item: item == (1, 2, None))
            return seen, (await handle.result()).text

    seen, text = asyncio.run(go())
    first = [e for _, attempt, e in seen if attempt == 1]
    assert [e for e in first if isinstance(e, TextDelta)] == [TextDelta("hicc")]
    again = "".join(e.text for _, attempt, e in seen if attempt == 2 and isinstance(e, TextDelta))
    assert again == text == "hiccup, then the whole answer"


def test_approval_predicates_decide_in_workflow_code(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A predicate approval policy decides per call in the workflow, as in a local run."""

    async def go() -> tuple[RunState, str]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await temporal_app.gated.start(client, "go", id="gated-1", task_queue=queue)
            waiting = await handle.suspended()
            await handle.approve(*(call.id for call in waiting.pending_approvals))
            return waiting, (await handle.result()).text

    waiting, text = asyncio.run(go())
    assert [call.arguments for call in waiting.pending_approvals] == [{"amount": 50}]
    assert text == "payments: paid 5, paid 50"
    assert Counter(_lines(tmp_path)) == {"pay 5": 1, "pay 50": 1}
    local = temporal_app.gated.agent.run("go")  # runs "pay 5" before it waits, as the workflow did
    assert waiting.pending_approvals == local.state.pending_approvals
    assert waiting.calls == local.state.calls


def test_a_changed_approval_rule_replays_only_behind_workflow_patched(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run decided under rule 1 breaks replay under rule 2, replays under a patched rule 2; new runs get rule 2."""
    # the workers and replayers below register other versions of "limits": on a copy
    monkeypatch.setattr(workflow_module, "_AGENTS", dict(workflow_module._AGENTS))
    version_2 = temporal_app.payments(temporal_app.over_twenty_patched, "limits")

    def replayer(rule: Any) -> Replayer:
        agent = temporal_app.payments(rule, "limits")
        return Replayer(workflows=[], plugins=[ToolfoldPlugin([agent])])

    async def go() -> RunState:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            response = await temporal_app.limits.run(client, "go", id="limits-1", task_queue=queue)
            handle = temporal_app.limits.handle(client, "limits-1")
            history = await handle.workflow.fetch_history()
        assert response.text == "payments: paid 5, paid 50"  # rule 1: no approval under 100
        with pytest.raises(NondeterminismError):
            await replayer(temporal_app.over_twenty).replay_workflow(history)
        await replayer(temporal_app.over_twenty_patched).replay_workflow(history)
        async with _in_process(server, tmp_path, monkeypatch, [version_2]) as (client, queue):
            handle = await version_2.start(client, "go", id="limits-2", task_queue=queue)
            waiting = await handle.suspended()
            await handle.workflow.cancel()
        return waiting

    waiting = asyncio.run(go())
    assert [call.arguments for call in waiting.pending_approvals] == [{"amount": 50}]


@pytest.mark.parametrize(
    "name",
    [
        "steps",
        "gated",
        "tree",
        "nested",
        "signed",
        "handoffs",
        "relayed",
        "timed_out",
        "timed_out_kept",
        "stopped_transfer",
        "stopped_transfer_handed",
        "raised_sub_run",
        "raised_sub_run_counted",
        "ambiguous_answer",
        "workflow_tool_failed",
        "refused_output_retried",
        "handoff_stops_dropped",
        "orphan_filtered",
        "handed_stop",
        "handed_stop_named",
        "renamed_failure",
        "renamed_failure_named",
        "cut_retried",
        "cut_retried_counted",
        "cut_failed",
        "cut_failed_counted",
        "handed_step_stop",
        "handed_step_stop_named",
        "tool_timed_out",
        "tool_timed_out_returned",
        "tool_timed_out_raised",
        "lacked_tool",
    ],
)
def test_recorded_histories_still_replay(name: str) -> None:
    """Histories recorded by an earlier toolfold replay with this one: running workflows survive the upgrade."""
    _replays(_history(name))


def _replayed_result(history: WorkflowHistory) -> Any:
    """What the workflow of ``history`` returns when this code replays it, as its JSON."""
    results: list[Any] = []

    class Inbound(WorkflowInboundInterceptor):
        async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
            result = await super().execute_workflow(input)
            results.append(result)
            return result

    class Capture(Interceptor):
        def workflow_interceptor_class(
            self, input: WorkflowInterceptorClassInput
        ) -> type[WorkflowInboundInterceptor]:
            return Inbound

    plugin = ToolfoldPlugin(temporal_app.AGENTS)
    replayer = Replayer(workflows=[], plugins=[plugin], interceptors=[Capture()])
    asyncio.run(replayer.replay_workflow(history))
    (result,) = results
    (payload,) = data_converter.payload_converter.to_payloads([result])
    return json.loads(payload.data)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("handed_stop", "Error: agent 'worker' stopped at its limit"),
        (
            "handed_stop_named",
            "Error: the run of agent 'worker', handed to agent 'scribe', stopped",
        ),
        ("renamed_failure", "ToolExecutionError: tool 'check' failed: Error: "),
        ("renamed_failure_named", "ToolExecutionError: tool 'check' failed in agent 'strict': "),
        ("handed_step_stop", "Error: the step's run stopped at its limit"),
        (
            "handed_step_stop_named",
            "Error: the run of agent 'desk', handed to agent 'looper', stopped",
        ),
    ],
)
def test_recorded_histories_replay_to_the_texts_recorded(name: str, text: str) -> None:
    """A history recorded with (or before) a patched text replays to the result it recorded,
    with that text: a text changed without its patch would replay, but to another result."""
    history = _history(name)
    completed = history.events[-1]
    assert completed.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    (recorded,) = completed.workflow_execution_completed_event_attributes.result.payloads
    assert text in recorded.data.decode()
    assert _replayed_result(history) == json.loads(recorded.data)


@pytest.mark.parametrize("name", ["timed_out", "timed_out_kept"])
def test_a_history_replays_when_building_a_timed_out_sub_runs_state_fails(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a timed-out sub-run's state is built from failing at the deadline (it runs whether
    or not the history has the patch) does not fail the replay: no state is kept."""
    asked: list[tuple[str, ...]] = []

    class Rounds(dict[Any, Any]):
        """The sub-runs' rounds in flight, by path: reading one for a kept state raises."""

        def get(self, path: Any, default: Any = None) -> Any:
            asked.append(path)
            raise RuntimeError("broken")

    made = workflow_module.AgentWorkflow.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self._rounds = Rounds()

    monkeypatch.setattr(workflow_module.AgentWorkflow, "__init__", init)
    _replays(_history(name))
    assert asked  # (it ran at the deadline, and raised)


def test_a_handler_that_stops_reading_early_still_gets_the_whole_response() -> None:
    """The model activity reads the rest of the stream when the handler stops early."""
    taken: list[Any] = []

    async def first_only(context: Any, events: AsyncIterator[Any]) -> None:
        async for event in events:
            taken.append(event)
            return

    agent = TemporalAgent(
        Agent(FunctionModel(lambda request: "a long answer, in many pieces"), name="early"),
        event_stream_handler=first_only,
    )
    model_request = agent.activities[0]
    state = agent.agent._start("hi", (), "early-1")
    effect = _next.next_effect(state)
    assert isinstance(effect, CallModel)
    raw = asyncio.run(_activity_environment().run(model_request, effect))
    assert _decoded(raw, ModelResponse).text == "a long answer, in many pieces"
    assert len(taken) == 1


@pytest.mark.parametrize("streamed", [False, True])
def test_the_model_activity_drops_a_custom_models_cut_call(streamed: bool) -> None:
    """A custom model's answer cut at the token limit comes back from the model activity without its call, whole or streamed."""
    call = ToolCallPart("c1", "send_email", '{"to": "ceo"}', {"to": "ceo"})
    cut = ModelResponse(Message("assistant", (TextPart("x"), call)), Usage(1, 1), "length")

    async def reads_all(context: Any, events: AsyncIterator[Any]) -> None:
        async for _ in events:
            pass

    agent = TemporalAgent(
        Agent(FunctionModel(lambda request: cut), name="cut"),
        event_stream_handler=reads_all if streamed else None,
    )
    state = agent.agent._start("hi", (), "cut-1")
    effect = _next.next_effect(state)
    assert isinstance(effect, CallModel)
    raw = asyncio.run(_activity_environment().run(agent.activities[0], effect))
    response = _decoded(raw, ModelResponse)
    assert (response.finish_reason, response.text, response.tool_calls) == ("length", "x", ())


def test_a_workflow_spec_runs_durably_like_a_local_run(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sequence, Route, Loop and Parallel on Temporal: the same output, step outputs and messages as locally."""

    durable, history, local = _run_like_local(
        temporal_app.tree, "tree-1", server, tmp_path, monkeypatch
    )
    assert isinstance(durable, WorkflowResponse)
    assert (
        durable.output
        == local.output
        == {
            "pros": "pros(louder(louder(brief(go1))))",
            "cons": "cons(louder(louder(brief(go1))))",
        }
    )
    assert durable.outputs == local.outputs  # the state, every step's sub-run, is the local one
    names = {a.__temporal_activity_definition.name for a in temporal_app.tree.activities}  # type: ignore[attr-defined]
    assert names == {
        "tree__model_request",
        # each step as one activity: what runs recorded before nested runs call
        *(f"tree__tool__{step}" for step in ("first", "desk", "again", "views")),
        # the nested runs: each planner's decisions and each agent's model requests
        *(
            f"tree.{path}__model_request"
            for path in ("desk", "desk.brief", "desk.digest", "again", "again.louder")
        ),
        *(f"tree.{path}__model_request" for path in ("views", "views.pros", "views.cons")),
    }
    scheduled = _scheduled(history)
    assert "tree__tool__desk" not in scheduled  # the steps ran as nested runs
    assert scheduled.count("tree.again.louder__model_request") == 2
    _replays(history)


def test_a_loop_out_of_iterations_finishes_durably_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Loop whose until never held finishes with max_iterations on Temporal too, its last
    output the output, in the state a local run reaches; the history replays."""
    durable, history, local = _run_like_local(
        temporal_app.hoarse, "hoarse-1", server, tmp_path, monkeypatch
    )
    assert (durable.output, durable.finish_reason) == ("louder(louder(go))", "max_iterations")
    assert local.finish_reason == "max_iterations"
    _replays(history)


def test_a_failing_workflow_step_raises_the_local_runs_error(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step that fails a durable workflow raises the RunError a local run raises, naming the step."""

    durable = _failing(temporal_app.broken, "broken-1", RunError, server, tmp_path, monkeypatch)
    assert "step 'explode' of Sequence 'broken' failed" in str(durable)
    assert durable.state is not None
    assert durable.state.phase == "failed"


@pytest.mark.parametrize("agent", [temporal_app.signed, temporal_app.boss], ids=["step", "as_tool"])
def test_an_approval_inside_a_nested_run_suspends_the_durable_run(
    agent: TemporalAgent, server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An approval in a workflow step or a sub-agent suspends the run; approving its call id finishes it as locally."""
    run_id = f"deep-{agent.name}"

    async def go() -> tuple[RunState, RunState, Any]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, "pay", id=run_id, task_queue=queue)
            waiting = await handle.suspended()
            seen = await handle.state()
            await handle.approve(*(call.id for call in waiting.pending_approvals))
            return waiting, seen, await handle.result()

    waiting, seen, durable = asyncio.run(go())
    ran = _lines(tmp_path)
    assert ran == (["first pay"] if agent is temporal_app.signed else []) + ["transfer 5"]
    assert waiting.phase == seen.phase == "awaiting_approval"
    (call,) = waiting.pending_approvals
    assert call.name == "transfer"
    path = waiting.path_to(call.id, "awaiting_approval")
    assert path is not None
    assert len(path) == 1
    (outer,) = (c for c in waiting.calls if c.status == "suspended")
    assert outer.child is not None
    assert outer.child.pending_approvals == (call,)
    local = agent.agent.run("pay", run_id=run_id)
    assert waiting == seen == local.state
    finished = agent.agent.resume(local.state, approvals={call.id: True})
    assert durable.state == finished.state
    assert durable.output == finished.output


def test_sub_runs_waiting_on_one_call_id_are_approved_and_denied_by_path_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sub-runs waiting on one call id: a plain id is refused as a local resume refuses it; paths approve one and deny the other, each in its own sub-run."""
    agent = temporal_app.twins
    run_id = "twins-by-path"

    async def go() -> tuple[BaseException | None, Response, WorkflowHistory]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, "go", id=run_id, task_queue=queue)
            await handle.suspended()
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.approve("call_1_0")
            await handle.approve("right/call_1_0", deny={"left/call_1_0": "not this one"})
            durable = await handle.result()
            return refused.value.cause, durable, await handle.workflow.fetch_history()

    cause, durable, history = asyncio.run(go())
    assert _lines(tmp_path) == ["transfer 7"]  # the right branch's call, and only it
    local = agent.agent.run("go", run_id=run_id)
    with pytest.raises(UsageError) as local_refusal:
        agent.agent.resume(local.state, approvals={"call_1_0": True})
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.message) == ("UsageError", str(local_refusal.value))
    assert "'left/call_1_0', 'right/call_1_0'" in cause.message
    approvals = {"right/call_1_0": True, "left/call_1_0": Denied("not this one")}
    finished = agent.agent.resume(local.state, approvals=approvals)
    assert durable.output == finished.output
    assert durable.state == finished.state
    _replays(history)


def test_a_bound_approval_key_approves_its_call_in_a_durable_run_as_in_a_local_resume(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """handle.approve(approval_key(...)) approves the one call the key was made for; a key made for another state is refused as a local resume refuses it."""
    agent = temporal_app.twins

    async def go() -> tuple[BaseException | None, list[str], Response, WorkflowHistory]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, "go", id="twins-bound", task_queue=queue)
            waiting = await handle.suspended()
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.approve(stale)
            await handle.approve(approval_key(waiting, "right/call_1_0"))
            still = await handle.suspended()
            pending = [k for k, _ in still.keyed_pending_approvals]
            await handle.approve(approval_key(still, "call_1_0"))
            durable = await handle.result()
            return refused.value.cause, pending, durable, await handle.workflow.fetch_history()

    other = agent.agent.run("go", run_id="another-run")
    stale = approval_key(other.state, "right/call_1_0")  # the same call, of another run
    cause, pending, durable, history = asyncio.run(go())
    with pytest.raises(UsageError) as local_refusal:
        agent.agent.resume(
            agent.agent.run("go", run_id="twins-bound").state, approvals={stale: True}
        )
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.message) == ("UsageError", str(local_refusal.value))
    assert pending == ["call_1_0"]  # the right branch's call was approved, the left's waits
    assert sorted(_lines(tmp_path)) == ["transfer 5", "transfer 7"]
    assert "transfer said" in str(durable.output)
    _replays(history)


def test_every_key_keyed_pending_approvals_lists_is_answered_by_a_durable_run(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A top-run call and a sub-run's call waiting under one id: the keys keyed_pending_approvals lists (a bound key, a path) approve each, in one update, as a local resume does."""
    agent = temporal_app.lead_and_helper

    async def go() -> tuple[list[str], Response, WorkflowHistory]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, "go", id="lead-and-helper", task_queue=queue)
            waiting = await handle.suspended()
            keys = [k for k, _ in waiting.keyed_pending_approvals]
            await handle.approve(*keys)
            durable = await handle.result()
            return keys, durable, await handle.workflow.fetch_history()

    keys, durable, history = asyncio.run(go())
    assert sorted(_lines(tmp_path)) == ["transfer 1", "transfer 2"]
    local = agent.agent.run("go", run_id="lead-and-helper")
    assert keys == [k for k, _ in local.state.keyed_pending_approvals]
    assert keys[0].startswith("call_1_0#")
    assert keys[1] == "call_1_1/call_1_0"
    finished = agent.agent.resume(local.state, approvals=dict.fromkeys(keys, True))
    assert durable.output == finished.output
    assert durable.state == finished.state
    _replays(history)


def test_every_key_keyed_tool_calls_lists_is_given_its_result_by_a_durable_run(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A top-run call and a sub-run's call waiting for results under one id: handle.provide takes the keys keyed_tool_calls lists (a bound key, a path), as a local resume does."""
    agent = temporal_app.ask_and_helper

    async def go() -> tuple[list[str], Response, WorkflowHistory]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, "go", id="ask-and-helper", task_queue=queue)
            waiting = await handle.suspended()
            keys = [k for k, _ in waiting.keyed_tool_calls]
            answers = dict(zip(keys, ("Paris", "Rome"), strict=True))
            await handle.provide([ToolResultPart(k, "ask_user", v) for k, v in answers.items()])
            durable = await handle.result()
            return keys, durable, await handle.workflow.fetch_history()

    keys, durable, history = asyncio.run(go())
    local = agent.agent.run("go", run_id="ask-and-helper")
    assert keys == [k for k, _ in local.state.keyed_tool_calls]
    assert keys[0].startswith("call_1_0#")
    answers = dict(zip(keys, ("Paris", "Rome"), strict=True))
    finished = agent.agent.resume(local.state, tool_results=answers)
    assert durable.output == finished.output
    assert durable.output == "lead: Paris | the user said: Rome"
    assert durable.state == finished.state
    _replays(history)


def test_sub_runs_waiting_on_one_call_id_are_given_results_by_path_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sub-runs waiting for a manual tool's result under one call id: a plain id is refused, paths give each its own result."""
    agent = temporal_app.twin_askers
    run_id = "twin-askers-by-path"

    async def go() -> tuple[BaseException | None, Response, WorkflowHistory]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, "go", id=run_id, task_queue=queue)
            await handle.suspended()
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.provide([ToolResultPart("call_1_0", "ask_user", "Oslo")])
            await handle.provide(
                [
                    ToolResultPart("left/call_1_0", "ask_user", "Paris"),
                    ToolResultPart("right/call_1_0", "ask_user", "Rome"),
                ]
            )
            durable = await handle.result()
            return refused.value.cause, durable, await handle.workflow.fetch_history()

    cause, durable, history = asyncio.run(go())
    local = agent.agent.run("go", run_id=run_id)
    with pytest.raises(UsageError) as local_refusal:
        agent.agent.resume(local.state, tool_results={"call_1_0": "Oslo"})
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.message) == ("UsageError", str(local_refusal.value))
    results = {"left/call_1_0": "Paris", "right/call_1_0": "Rome"}
    finished = agent.agent.resume(local.state, tool_results=results)
    assert durable.output == finished.output
    assert durable.output == {"left": "the user said: Paris", "right": "the user said: Rome"}
    assert durable.state == finished.state
    _replays(history)


def test_a_workflow_streams_its_agents_output_tagged_with_the_path(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow's side channel gets its step agents' model events with a local stream's paths, never the planner's."""
    temporal_app.CHANNEL.tagged.clear()
    durable, _ = _run(temporal_app.voiced, "voiced-1", server, tmp_path, monkeypatch)
    tagged = list(temporal_app.CHANNEL.tagged)
    local = temporal_app.voiced.agent.stream("go", run_id="voiced-1")

    async def read() -> list[Any]:  # async, as the activity streams (Dripping.stream)
        return [e async for e in local]

    streamed = [
        (e.path, e.event)
        for e in asyncio.run(read())
        if isinstance(e, SubRunEvent) and isinstance(e.event, typing.get_args(StreamEvent))
    ]
    assert {agent for agent, _, _ in tagged} == {"voiced.voice"}
    assert [(path, event) for _, path, event in tagged] == streamed
    assert "".join(e.text for _, e in streamed if isinstance(e, TextDelta)) == "Hello from the step"
    assert durable.output == local.response.output == "Hello from the step"


class _Busy(BaseHTTPRequestHandler):
    """Answers every request with a 503 and counts them on its server."""

    def do_POST(self) -> None:
        self.server.hits += 1  # type: ignore[attr-defined]
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"error": "busy"}'
        self.send_response(503)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_nested_models_leave_retries_to_temporal(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step's or sub-agent's model string gets retry=0: its model activity fails at the first 503, for Temporal to retry."""
    busy = ThreadingHTTPServer(("127.0.0.1", 0), _Busy)
    busy.hits = 0  # type: ignore[attr-defined]
    threading.Thread(target=busy.serve_forever, daemon=True).start()
    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{busy.server_port}")
    try:
        inner = Agent("ollama:m", name="inner")
        durables = [
            ("outer.inner", TemporalAgent(Sequence(inner, name="outer"))),
            ("boss.inner", TemporalAgent(Agent("ollama:m", tools=[inner.as_tool()], name="boss"))),
            ("top", TemporalAgent(Agent("ollama:m", name="top"))),
        ]
        for name, agent in durables:
            (model_request,) = (
                a
                for a in agent.activities
                if a.__temporal_activity_definition.name == f"{name}__model_request"  # type: ignore[attr-defined]
            )
            effect = _next.next_effect(inner._start("hi", (), "run-1/call-1"))
            given = effect if name == "top" else ModelCallInput(effect, ("inner", "call-1"))
            before = busy.hits  # type: ignore[attr-defined]
            with pytest.raises(ApplicationError) as caught:
                asyncio.run(ActivityEnvironment().run(model_request, given))
            assert not caught.value.non_retryable
            assert busy.hits - before == 1  # type: ignore[attr-defined]
        before = busy.hits  # type: ignore[attr-defined]
        with pytest.raises(ProviderError):  # a local run's transport retries by itself
            inner.run("hi")
        assert busy.hits - before > 1  # type: ignore[attr-defined]
    finally:
        busy.shutdown()
        busy.server_close()


def test_results_over_the_payload_limit_travel_through_external_storage(
    server: DevServer, tmp_path: Path
) -> None:
    """A 3 MB tool result and a 2.4 MB first state, over Temporal's 2 MB limit, and a state over a query's 4 MB go by reference through a FileStorageDriver."""
    storage = ExternalStorage(drivers=[FileStorageDriver(tmp_path / "payloads")])
    agent = temporal_app.huge
    prompt = "p" * 1_200_000  # the first state holds it twice: 2.4 MB

    async def go() -> tuple[Any, WorkflowHistory]:
        plugin = ToolfoldPlugin([agent], external_storage=storage)
        client = await Client.connect(server.address, plugins=[plugin])
        async with Worker(client, task_queue="huge"):
            response = await agent.run(client, prompt, id="huge-1", task_queue="huge")
            workflow = agent.handle(client, "huge-1").workflow
            # a state over a query answer's 4 MB: by reference too, in one query
            queried = await workflow.query(AgentWorkflow.state)
            assert queried == response.state
            return response, await workflow.fetch_history()

    durable, history = asyncio.run(go())
    assert durable.text == "got 3000000 bytes"
    assert len(durable.state.to_json()) > workflow_module.QUERY_LIMIT
    assert durable.state == agent.agent.run(prompt, run_id="huge-1").state
    assert max(event.ByteSize() for event in history.events) < 300_000  # references only
    assert len(list((tmp_path / "payloads").iterdir())) >= 2  # the result, the states carrying it


def test_an_unlimited_result_size_needs_external_storage() -> None:
    """max_result_bytes=None without external storage is refused up front, naming the agent."""
    with pytest.raises(UsageError, match=r"\['huge'\] have max_result_bytes=None"):
        ToolfoldPlugin([temporal_app.huge])


def test_runs_recorded_before_nested_runs_replay_only_through_the_patch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A workflow spec's history from before nested runs breaks replay unless the workflow.patched branch keeps its steps whole."""
    history = _history("tree")
    patched = workflow_module.workflow.patched
    monkeypatch.setattr(  # (every patch but the counting of cut attempts, which is no command)
        workflow_module.workflow,
        "patched",
        lambda patch_id: patch_id != workflow_module.DROPPED_ATTEMPTS or patched(patch_id),
    )
    replayer = Replayer(workflows=[], plugins=[ToolfoldPlugin(temporal_app.AGENTS)])
    with pytest.raises(NondeterminismError, match="tree__tool__desk"):
        asyncio.run(replayer.replay_workflow(history))


def test_runs_that_stopped_on_a_transfer_before_the_handoff_at_stop_replay_through_the_patch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A history of a run that stopped at max_steps on a transfer, from before it handed over
    there, breaks replay unless the workflow.patched branch keeps its stop as it was."""
    history = _history("stopped_transfer")
    patched = workflow_module.workflow.patched
    monkeypatch.setattr(  # (every patch but the counting of cut attempts, which is no command)
        workflow_module.workflow,
        "patched",
        lambda patch_id: patch_id != workflow_module.DROPPED_ATTEMPTS or patched(patch_id),
    )
    replayer = Replayer(workflows=[], plugins=[ToolfoldPlugin(temporal_app.AGENTS)])
    # (the patched branch lists billing's tools where the run had completed)
    with pytest.raises(NondeterminismError, match="Activity machine does not handle"):
        asyncio.run(replayer.replay_workflow(history))


@pytest.mark.parametrize(
    ("name", "patch_id", "where"),
    [
        # (kept, triage's callable ends the run where the history has refunds' next request)
        (
            "handoff_stops_dropped",
            workflow_module.HANDOFF_KEEPS_STOPS,
            "Complete workflow machine does not handle this event.*ActivityTaskScheduled",
        ),
        # (checked, the filter's conversation fails the run where refunds' model was called)
        (
            "orphan_filtered",
            workflow_module.FILTERED_CONVERSATION_CHECKED,
            "Fail workflow machine does not handle this event.*ActivityTaskScheduled",
        ),
    ],
)
def test_runs_recorded_before_a_handoff_kept_stops_or_checked_its_filter_replay_through_the_patch(
    monkeypatch: pytest.MonkeyPatch, name: str, patch_id: str, where: str
) -> None:
    """A history of a handoff that dropped the first agent's stop conditions, or handed on an
    unfit filtered conversation, breaks replay unless its workflow.patched branch keeps it so."""
    _replays(_history(name))  # (through the unpatched branch)
    patched = workflow_module.workflow.patched
    monkeypatch.setattr(  # only this patch taken regardless of the history
        workflow_module.workflow,
        "patched",
        lambda given: given == patch_id or patched(given),
    )
    replayer = Replayer(workflows=[], plugins=[ToolfoldPlugin(temporal_app.AGENTS)])
    with pytest.raises(NondeterminismError, match=where):
        asyncio.run(replayer.replay_workflow(_history(name)))


def test_a_workflow_used_as_a_tool_suspends_for_approval_and_finishes_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Workflow.as_tool() inside a TemporalAgent runs as a nested run: its step's approval suspends the run, as locally."""
    agent = temporal_app.workflow_tool
    run_id = "workflow-tool-1"

    async def go() -> tuple[RunState, Response, WorkflowHistory]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, "go", id=run_id, task_queue=queue)
            waiting = await handle.suspended()
            await handle.approve("call_1_0")
            durable = await handle.result()
            return waiting, durable, await handle.workflow.fetch_history()

    waiting, durable, history = asyncio.run(go())
    assert _lines(tmp_path) == ["transfer 3"]  # once, after the approval
    local = agent.agent.run("go", run_id=run_id)
    assert local.state.phase == "awaiting_approval"
    assert waiting == local.state
    finished = agent.agent.resume(local.state, approvals={"call_1_0": True})
    assert durable.output == finished.output == "outer: transfer said: moved 3"
    assert durable.state == finished.state
    _replays(history)


@pytest.mark.parametrize("name", ["typed_agent_tool", "typed_workflow_tool"])
def test_a_sub_run_tool_with_an_attrs_input_type_runs_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """An agent's or a workflow's as_tool(input_type=<attrs class>) structures its input in
    workflow code (cattrs and attrs pass through the sandbox): the same answer as locally."""
    agent = getattr(temporal_app, name)
    durable, history, local = _run_like_local(agent, f"{name}-1", server, tmp_path, monkeypatch)
    assert durable.output == local.output == 'outer: step saw: {"city": "Paris", "days": 3}'
    _replays(history)


def test_runs_recorded_before_workflow_tools_ran_replay_only_through_the_patch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A history whose workflow-as-tool call failed with AssertionError breaks replay unless the workflow.patched branch gives that result again."""
    history = _history("workflow_tool_failed")
    patched = workflow_module.workflow.patched
    monkeypatch.setattr(  # only this patch taken regardless of the history
        workflow_module.workflow,
        "patched",
        lambda patch_id: patch_id == workflow_module.WORKFLOW_TOOLS or patched(patch_id),
    )
    replayer = Replayer(workflows=[], plugins=[ToolfoldPlugin(temporal_app.AGENTS)])
    # (the workflow's step's model is called where the history has the caller's next call)
    with pytest.raises(NondeterminismError, match=r"workflow_tool\.payflow__model_request"):
        asyncio.run(replayer.replay_workflow(history))


def test_a_model_failing_inside_a_step_fails_the_step_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step agent's model failing for good fails that step (skipped here), not the durable run, as in a local run."""
    durable, _, local = _run_like_local(
        temporal_app.skipping, "skipping-1", server, tmp_path, monkeypatch
    )
    assert durable.output == local.output == "last(go1)"
    assert durable.errors == local.errors == {"denied": "Error: AuthenticationError: 401 bad key"}


def test_provider_errors_map_to_application_errors_with_the_providers_delay() -> None:
    """A 429's retry-after becomes Temporal's next retry delay; auth and bad requests are non-retryable."""
    limited = _application_error(RateLimitError("429", provider="p", retry_after=7.5))
    assert limited.next_retry_delay == timedelta(seconds=7.5)
    assert not limited.non_retryable
    assert limited.type == "RateLimitError"
    assert _application_error(RateLimitError("429", provider="p")).next_retry_delay is None
    for permanent in (
        AuthenticationError("401", provider="p", status_code=401),
        BadRequestError("400", provider="p", status_code=400),
        NotFoundError("404", provider="p", status_code=404),
    ):
        mapped = _application_error(permanent)
        assert mapped.non_retryable, permanent
        assert mapped.next_retry_delay is None
    busy = _application_error(ProviderError("503", provider="p", status_code=503))
    assert not busy.non_retryable
    assert busy.next_retry_delay is None


def test_a_provider_s_own_no_retry_verdict_is_not_retried_by_temporal() -> None:
    """A 429 the provider says will not clear soon (a Gemini per-day quota) is non-retryable: it was asked every second, without end."""
    per_day = RateLimitError("429", provider="gemini", status_code=429, retryable=False)
    mapped = _application_error(per_day)
    assert mapped.non_retryable
    assert mapped.next_retry_delay is None
    # x-should-retry: true lifts no permanent class: under the default policy (no attempt
    # limit) a 400 sent with it was asked again without end
    for asked in (
        BadRequestError("400", provider="p", status_code=400, retryable=True),
        AuthenticationError("401", provider="p", status_code=401, retryable=True),
    ):
        assert _application_error(asked).non_retryable, asked
    busy = ServerError("503", provider="p", status_code=503, retryable=True)
    assert not _application_error(busy).non_retryable


def test_a_server_error_s_retry_after_is_the_next_delay() -> None:
    """A 503's (or Anthropic 529's) retry-after is Temporal's next retry delay, as a 429's is: it was lost."""
    busy = _application_error(ServerError("503", provider="p", status_code=503, retry_after=3.0))
    assert busy.next_retry_delay == timedelta(seconds=3)
    assert not busy.non_retryable


def test_an_abnormal_finish_is_not_retried() -> None:
    """A ProviderFinishError is non-retryable: the default policy (no attempt limit) paid for it again and again."""
    mapped = _application_error(abnormal_finish("anthropic", "pause_turn", None, why="paused"))
    assert mapped.type == "ProviderFinishError"
    assert mapped.non_retryable
    assert mapped.next_retry_delay is None


@pytest.mark.parametrize(
    "retry_after", [float("inf"), 99_999_999_999_999.0, 1e300, MAX_RETRY_DELAY + 1.0]
)
def test_a_retry_after_past_a_day_is_not_retried(retry_after: float) -> None:
    """A retry_after past a day (inf too) is non-retryable with no delay: it waited ~forever between attempts."""
    mapped = _application_error(RateLimitError("429", provider="p", retry_after=retry_after))
    assert mapped.next_retry_delay is None
    assert mapped.type == "RateLimitError"
    assert mapped.non_retryable


def test_a_retry_after_of_a_day_is_still_the_next_delay() -> None:
    """A retry_after of exactly the bound (a day) is Temporal's next retry delay, retryable."""
    mapped = _application_error(RateLimitError("429", provider="p", retry_after=MAX_RETRY_DELAY))
    assert mapped.next_retry_delay == timedelta(seconds=MAX_RETRY_DELAY)
    assert not mapped.non_retryable


@pytest.mark.parametrize("retry_after", [float("nan"), -5.0, float("-inf")])
def test_a_nan_or_negative_retry_after_gives_no_delay(retry_after: float) -> None:
    """A NaN or negative retry_after (a model of the user's own) is no next delay, still retryable."""
    mapped = _application_error(RateLimitError("429", provider="p", retry_after=retry_after))
    assert mapped.next_retry_delay is None
    assert not mapped.non_retryable


def test_retry_after_is_the_next_delay_in_the_history(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 with retry-after 2 s (the policy's interval: 200 ms) is retried after 2 s, as the server recorded it."""
    response, history = _run(temporal_app.patient, "patient-1", server, tmp_path, monkeypatch)
    assert response.text == "answered on attempt 2"
    scheduled = next(
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    )
    started = next(
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    )
    attributes = started.activity_task_started_event_attributes
    assert attributes.attempt == 2
    info = attributes.last_failure.application_failure_info
    assert info.type == "RateLimitError"
    assert info.next_retry_delay.ToTimedelta() == timedelta(seconds=temporal_app.PATIENT_DELAY)
    # the server's own clock: the retry started no sooner than the provider asked
    waited = started.event_time.ToDatetime() - scheduled.event_time.ToDatetime()
    assert waited >= timedelta(seconds=temporal_app.PATIENT_DELAY)


def test_parallel_results_commit_in_call_order_when_the_second_finishes_first(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two calls of one step where the second completes first: results commit in call order, as locally."""
    temporal_app.RELAY.clear()

    async def go() -> tuple[Any, WorkflowHistory]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await temporal_app.relay.start(client, "go", id="relay-1", task_queue=queue)
            # the first call waits until the server has recorded the second one's result
            names: dict[int, str] = {}
            async for event in handle.workflow.fetch_history_events(wait_new_event=True):
                if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    attributes = event.activity_task_scheduled_event_attributes
                    names[event.event_id] = attributes.activity_type.name
                elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                    done = names[event.activity_task_completed_event_attributes.scheduled_event_id]
                    if done == "relay__tool__opens":
                        temporal_app.RELAY.set()
                        break
            response = await handle.result()
            return response, await handle.workflow.fetch_history()

    durable, history = asyncio.run(go())
    assert _lines(tmp_path) == ["opens second", "waits first"]
    completed = [
        e.activity_task_completed_event_attributes.scheduled_event_id
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ]
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    tools = [scheduled[i] for i in completed if "__tool__" in scheduled[i]]
    assert tools == ["relay__tool__opens", "relay__tool__waits"]  # the second finished first
    returned = [e for e in durable.state.log if isinstance(e, ToolReturned)]
    assert [e.content for e in returned] == ["FIRST", "SECOND"]
    assert durable.text == "in call order: FIRST,SECOND"
    local = temporal_app.relay.agent.run("go", run_id="relay-1")  # RELAY is set: no waiting
    assert durable.state == local.state


def test_cancelling_a_run_mid_tool_cancels_the_activity_and_ends_the_run_cancelled(
    server: DevServer, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    """handle.cancel() while a tool activity runs: the tool is cancelled, the run ends cancelled, its state still answers."""
    (tmp_path / "hang").touch()
    workers.append(WorkerProcess(server.address, "cancel", tmp_path))

    async def go() -> tuple[BaseException | None, Any, RunState]:
        client = await _client(server)
        handle = await temporal_app.steps.start(client, "go", id="cancel-mid", task_queue="cancel")
        hanging = workers[0].wait_for("hanging")
        await handle.workflow.cancel()
        assert workers[0].wait_for("cancelled") == f"cancelled {hanging.split()[1]}"
        with pytest.raises(WorkflowFailureError) as caught:
            await handle.result()
        described = await handle.workflow.describe()
        return caught.value.cause, described.status, await handle.state()

    cause, status, state = asyncio.run(go())
    assert isinstance(cause, CancelledError)
    assert status == WorkflowExecutionStatus.CANCELED
    assert state.step == 2  # the step whose `slow` call was in flight
    assert state.phase == "running_tools"
    # the step's two parallel calls ran whole; the cancelled one never got to "done"
    assert Counter(_lines(tmp_path)) == {
        **{f"{kind} cancel-mid:1:{i}": 1 for kind in ("start", "done") for i in (0, 1)},
        "start cancel-mid:2:0": 1,
    }


def test_a_conversation_over_the_payload_limit_fails_the_run_clearly(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model request over Temporal's 2 MB limit fails the run at once (no endless retry), naming the activity, the size and the way out."""
    agent = temporal_app.swelling
    prompt = "p" * 800_000

    async def go() -> tuple[RunError, Any]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, prompt, id="swelling-1", task_queue=queue)
            with pytest.raises(RunError) as caught:
                await handle.result()
            return caught.value, await handle.workflow.describe()

    error, described = asyncio.run(go())
    assert described.status == WorkflowExecutionStatus.FAILED
    message = str(error)
    assert message.startswith("the input of activity 'swelling__model_request' (the conversation ")
    size = int(message.split(" is ", 1)[1].split(" bytes", 1)[0])
    assert size > 2_200_000
    assert (
        "over Temporal's 2097152-byte payload limit: give ToolfoldPlugin an external_storage"
        in message
    )
    local = agent.agent.run(prompt, run_id="swelling-1")
    assert local.text == "got 1400000 bytes"
    # the last state: twice the conversation (its events too), over a query's 4 MB, read in parts
    assert error.state is not None
    assert error.state.phase == "awaiting_model"
    assert error.state.messages == local.state.messages[:-1]
    assert len(error.state.to_json()) > workflow_module.QUERY_LIMIT


def test_a_first_state_over_the_payload_limit_is_refused_before_it_is_sent(
    server: DevServer,
) -> None:
    """A prompt that makes the workflow's input larger than 2 MB is a UsageError naming the size and limit; nothing starts."""

    async def go() -> tuple[UsageError, BaseException]:
        client = await _client(server)
        with pytest.raises(UsageError) as caught:
            await temporal_app.swelling.start(client, "p" * 1_100_000, id="too-big", task_queue="q")
        with pytest.raises(RPCError) as missing:
            await client.get_workflow_handle("too-big").describe()
        return caught.value, missing.value

    error, missing = asyncio.run(go())
    message = str(error)
    assert message.startswith("the run's first state (its prompt and history) is ")
    assert int(message.split(" is ", 1)[1].split(" bytes", 1)[0]) > 2_200_000
    assert "over Temporal's 2097152-byte payload limit for a workflow's input" in message
    assert "workflow not found" in str(missing)


def test_answers_to_a_state_over_the_payload_limit_apply_and_the_helpers_read_it_by_query(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Updates whose answer, the state, is over 2 MB fail at once, clearly (no retry loop); the helpers read the state by query instead."""
    agent = temporal_app.bulky
    prompt = "p" * 900_000

    async def go() -> tuple[BaseException | None, RunState, RunState, RunError]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, prompt, id="bulky-1", task_queue=queue)
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await handle.workflow.execute_update(AgentWorkflow.suspended)
            waiting = await handle.suspended()
            approved = await handle.approve(*(call.id for call in waiting.pending_approvals))
            with pytest.raises(RunError) as failed:
                await handle.result()
            return refused.value.cause, waiting, approved, failed.value

    cause, waiting, approved, error = asyncio.run(go())
    assert isinstance(cause, ApplicationError)
    assert cause.type == "PayloadTooLargeError"
    assert cause.message.startswith("the state of the run is ")
    assert "over Temporal's 2097152-byte payload limit for an update's answer" in cause.message
    local = agent.agent.run(prompt, run_id="bulky-1")
    assert waiting == local.state
    assert approved.pending_approvals == ()  # applied
    assert _lines(tmp_path) == ["transfer 5"]  # the durable run ran it, once
    finished = agent.agent.resume(local.state, approvals={waiting.pending_approvals[0].id: True})
    assert finished.text == "got 300000 bytes, moved 5"
    # the finished state is itself too large to be the workflow's result: RunError with it
    assert str(error).startswith("the run's result (the conversation so far) is ")
    assert error.state == finished.state


@pytest.mark.parametrize(
    "agent", [temporal_app.deadline, temporal_app.impatient], ids=["step", "as_tool"]
)
def test_a_nested_run_over_its_timeout_is_cancelled_and_its_call_fails_as_locally(
    agent: TemporalAgent, server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's or an as_tool() timeout is a workflow timer: the sub-run's activity in flight is cancelled, the call ends as a local run's."""
    temporal_app.STUCK.clear()
    run_id = f"timed-{agent.name}"
    durable, history = _run(agent, run_id, server, tmp_path, monkeypatch)
    assert temporal_app.STUCK.wait(timeout=60)  # the activity learnt of it (its heartbeat)
    (key,) = [line.split()[1] for line in _lines(tmp_path) if line.startswith("stuck")]
    # as locally, the call is over once its tool stopped: "cancelled" comes before "last"
    cancelled = [f"stuck {key}", f"cancelled {key}"]
    if agent is temporal_app.deadline:
        assert _lines(tmp_path) == ["first go", *cancelled, "last go1"]
    else:
        assert _lines(tmp_path) == cancelled
    kinds = [e.event_type for e in history.events]
    assert EventType.EVENT_TYPE_TIMER_FIRED in kinds
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in kinds
    message = f"Error: tool 'dawdler' timed out after {temporal_app.TIMEOUT:g} s."
    local = agent.agent.run("go", run_id=run_id)
    assert durable.state == local.state
    if agent is temporal_app.deadline:
        assert durable.output == local.output == "last(go1)"
        assert durable.errors == local.errors == {"dawdler": message}
    else:
        assert durable.text == local.text == f"impatient: {message}"
    _replays(history)


async def _chain(client: Client, id: str, first_run_id: str | None) -> list[WorkflowHistory]:
    """The histories of workflow ``id``, from its first run along its continue-as-new chain."""
    histories = []
    run_id = first_run_id
    while run_id:
        history = await client.get_workflow_handle(id, run_id=run_id).fetch_history()
        histories.append(history)
        last = history.events[-1]
        run_id = None
        if last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return histories


def _run_chain(
    agent: TemporalAgent,
    id: str,
    server: DevServer,
    log_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Any, list[WorkflowHistory]]:
    """A durable run of ``agent`` on "go": its response and the histories of its chain."""

    async def go() -> tuple[Any, list[WorkflowHistory]]:
        async with _in_process(server, log_dir, monkeypatch) as (client, queue):
            handle = await agent.start(client, "go", id=id, task_queue=queue)
            response = await handle.result()
            first = handle.workflow.first_execution_run_id
            return response, await _chain(client, id, first)

    return asyncio.run(go())


def _carried(history: WorkflowHistory) -> AgentInput:
    """The input a history's run started with."""
    attributes = history.events[0].workflow_execution_started_event_attributes
    (given,) = data_converter.payload_converter.from_payloads(
        attributes.input.payloads, [AgentInput]
    )
    assert isinstance(given, AgentInput)
    return given


@pytest.mark.parametrize(
    ("name", "where"),
    [("relayed", "server"), ("nested", "suggesting_server")],
    ids=["every-request", "suggested"],
)
def test_a_run_continues_as_new_inside_nested_runs_and_nothing_runs_again(
    name: str,
    where: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Continuing as new mid-step (after every model request, or when the server suggests it): the local run's state, every tool ran once."""
    agent: TemporalAgent = getattr(temporal_app, name)
    server: DevServer = request.getfixturevalue(where)
    durable, histories = _run_chain(agent, f"{name}-chain", server, tmp_path, monkeypatch)
    ran = _lines(tmp_path)
    local = agent.agent.run("go", run_id=f"{name}-chain")
    assert durable.state == local.state
    assert sorted(ran) == sorted(_lines(tmp_path)[len(ran) :])  # each tool once, as locally
    assert len(ran) == len(set(ran))
    carried = [_carried(history) for history in histories[1:]]
    assert len(carried) >= 3
    # some runs began mid-step, a sub-run in flight in the state
    assert any(c.child is not None for given in carried for c in given.state.calls)
    if agent is temporal_app.relayed:  # a Parallel's: a call's result, a deadline beside it
        assert durable.output == {"long": "answer: A,B,C", "short": "short(go1)"}
        assert any(given.calls and given.calls[0].event is not None for given in carried)
        assert any(given.calls and given.calls[0].deadline is not None for given in carried)
    else:  # only the server's suggestion
        assert agent.settings.continue_as_new_steps is None
        assert all(len(history.events) < 3 * SUGGEST_AFTER for history in histories)
    _replays(*histories)


def test_a_waiting_suspended_update_lets_the_run_continue_as_new(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update waiting in suspended() while the run continues as new answers with the running state; the run goes on."""
    temporal_app.RELAY.clear()
    agent = temporal_app.relayed_chain

    async def go() -> tuple[RunState, Any]:
        async with _in_process(server, tmp_path, monkeypatch) as (client, queue):
            handle = await agent.start(client, "go", id="chain-wait-1", task_queue=queue)
            update = await handle.workflow.start_update(
                AgentWorkflow.suspended, wait_for_stage=WorkflowUpdateStage.ACCEPTED
            )
            temporal_app.RELAY.set()  # the step ends: the run continues as new
            early: RunState = await update.result()
            response = await handle.result()
            latest = await client.get_workflow_handle("chain-wait-1").describe()
            assert latest.run_id != handle.workflow.first_execution_run_id
            return early, response

    early, response = asyncio.run(go())
    assert early.phase == "awaiting_model"  # not waiting, not over: the client asks again
    assert response.text == "in call order: FIRST,SECOND"


@pytest.mark.parametrize(
    "agent", [temporal_app.misfit, temporal_app.misfit_step], ids=["as_tool", "step"]
)
def test_a_sub_run_failing_inside_its_own_run_stays_in_the_durable_tree(
    agent: TemporalAgent, server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sub-agent whose output never fits fails in its own run: durably as locally, its
    failed state stays on the call's error result and its model calls count in the usage."""
    durable, history, local = _run_like_local(
        agent, f"{agent.name}-1", server, tmp_path, monkeypatch
    )
    (failed,) = durable.state.sub_runs.values()
    assert failed.phase == "failed"
    assert durable.usage.requests == local.usage.requests
    assert durable.usage.requests >= 2  # the sub-run's two tries are counted
    _replays(history)


def test_a_refused_answer_under_an_output_type_fails_at_once_as_locally(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal that does not fit the output type fails the durable run at once, naming it,
    with the message and state a local run gets (one model call, not output_retries more)."""
    error = _failing(
        temporal_app.refusing, "refusing-1", OutputValidationError, server, tmp_path, monkeypatch
    )
    assert "finish reason 'content_filter' ('refusal'), the model refused" in str(error)
    assert error.state.usage.requests == 1


@pytest.mark.parametrize(
    "agent",
    [
        temporal_app.budgeted,
        temporal_app.broke,
        temporal_app.budgeted_raising,
        temporal_app.broke_raising,
    ],
    ids=["left", "spent", "left-raise", "spent-raise"],
)
def test_a_tree_budget_goes_down_a_durable_tree_as_locally(
    agent: TemporalAgent, server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """token_budget(n, tree=True) durably: the workers of one step start with what was left
    (stored in their states) and stop there, or do not start when nothing is left: as locally."""
    durable, history, _ = _run_like_local(agent, f"{agent.name}-1", server, tmp_path, monkeypatch)
    state = durable.state
    assert state.finish_reason == "token_budget"
    workers = list(state.sub_runs.values())
    if agent in (temporal_app.budgeted, temporal_app.budgeted_raising):
        assert [w.config.stop_when for w in workers] == [(TokenBudget(600, tree=True),)] * 2
        assert [w.finish_reason for w in workers] == ["token_budget"] * 2
        assert state.tree_usage.total_tokens == 100 + 2 * 600
    else:
        assert workers == []
        assert state.tree_usage.total_tokens == 100
    _replays(history)


_HANDED_STOP = (
    "Error: the run of agent 'worker', handed to agent 'scribe', stopped at its limit "
    "token_budget=600, tree=True (600 tokens used, 0 of them by its sub-runs) after 6 model "
    "calls without answering"
)


@pytest.mark.parametrize(
    "agent",
    [temporal_app.budgeted_handed, temporal_app.budgeted_handed_raising],
    ids=["return", "raise"],
)
def test_a_handed_sub_run_stopped_at_the_tree_budget_names_its_agent_durably_as_locally(
    agent: TemporalAgent, server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that handed its run to scribe, which spent the handed budget: durably as
    locally the calls' errors name scribe, and the lead stops at its budget (raise or not)."""
    durable, history, _ = _run_like_local(agent, f"{agent.name}-1", server, tmp_path, monkeypatch)
    assert durable.state.finish_reason == "token_budget"
    results = [p.content for m in durable.messages for p in m.tool_results]
    assert results == [_HANDED_STOP] * 2
    _replays(history)


@pytest.mark.parametrize(
    "agent",
    [temporal_app.budgeted_handed, temporal_app.budgeted_handed_raising],
    ids=["return", "raise"],
)
def test_a_run_recorded_before_a_handed_sub_run_named_its_agent_replays_so(
    agent: TemporalAgent, server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run as a toolfold before the toolfold-stop-names-handed-agent patch ran it (the patch
    not taken): the calls' errors name the worker the call started, the lead still stops at
    its budget (under raise too), and its history replays with this code."""
    patched = workflow_module.workflow.patched
    monkeypatch.setattr(
        workflow_module.workflow,
        "patched",
        lambda given: given != workflow_module.STOP_NAMES_HANDED and patched(given),
    )
    durable, history = _run(agent, f"{agent.name}-old", server, tmp_path, monkeypatch)
    assert durable.state.finish_reason == "token_budget"
    results = [p.content for m in durable.messages for p in m.tool_results]
    old = (
        "Error: agent 'worker' stopped at its limit token_budget=600, tree=True (600 tokens "
        "used, 0 of them by its sub-runs) after 6 model calls without answering"
    )
    assert results == [old] * 2
    monkeypatch.setattr(workflow_module.workflow, "patched", patched)
    _replays(history)


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        (
            temporal_app.budgeted_summary_raising,
            "tool 'worker' failed: Error: the output= function of tool 'worker' failed",
        ),
        (
            temporal_app.broke_deploy_raising,
            "tool 'deploy' failed: Error: RuntimeError: service 'db' was not started",
        ),
    ],
    ids=["output-function", "plain-tool"],
)
def test_under_a_spent_tree_budget_other_failures_still_raise_durably(
    agent: TemporalAgent,
    message: str,
    server: DevServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """on_tool_error="raise": a failing output= function on a worker stopped at the handed
    budget, or a plain tool failing in a spent step, raises durably as locally."""
    durable = _failing(agent, f"{agent.name}-1", ToolExecutionError, server, tmp_path, monkeypatch)
    assert str(durable).startswith(message)


def test_a_tool_activity_reads_what_is_left_of_the_tree_budget(
    server: DevServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ctx.token_budget in a durable tool activity is the step's handed budget, as locally (not None)."""
    agent = temporal_app.peeking
    durable, history, _ = _run_like_local(agent, "peeking-1", server, tmp_path, monkeypatch)
    assert durable.text == "900"
    _replays(history)


def test_a_tool_call_input_carries_a_tree_budget_and_reads_old_payloads() -> None:
    """ToolCallInput's payload leaves token_budget out when None (as recorded before it existed); a set one round-trips."""
    from toolfold.runtime.core._effects import ToolInvocation
    from toolfold.runtime.core._messages import ToolCallPart

    convert = data_converter.payload_converter
    invocation = ToolInvocation(ToolCallPart("c", "peek", "{}"), 0, 1, "k")
    plain = ToolCallInput(invocation, "r")
    payload = convert.to_payloads([plain])[0]
    assert b"token_budget" not in payload.data
    assert convert.from_payloads([payload], [ToolCallInput]) == [plain]
    given = ToolCallInput(invocation, "r", (), TokenBudget(900, tree=True))
    (back,) = convert.from_payloads(convert.to_payloads([given]), [ToolCallInput])
    assert back == given
