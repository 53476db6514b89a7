"""A durable run's model request whose stream an Anthropic-like server on 127.0.0.1 cuts after
reporting usage: the billed usage of every cut attempt Temporal retried is counted in the run's
state (`AttemptDropped`), as a local run counts a cut stream it is resumed after."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import temporal_app
from temporal_runs import _worker
from temporal_servers import DevServer
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowHistory
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutError
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    Replayer,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from toolfold import Agent, ProviderFinishError, RunState, StreamError, Usage, state_of
from toolfold.adapters.anthropic import AnthropicModel
from toolfold.integrations.temporal import (
    ActivitySettings,
    StreamContext,
    TemporalAgent,
    ToolfoldPlugin,
)
from toolfold.integrations.temporal import _workflow as workflow_module
from toolfold.runtime import AttemptDropped, RunEndEvent, StreamEvent, TextDelta, UsageUpdate
from toolfold.runtime.core._effects import CallModel
from toolfold.runtime.core._messages import Message
from toolfold.runtime.core._request import ModelRequest
from toolfold.runtime.core._serialize import structure
from toolfold.testing import FunctionModel

CUT_INPUT = 5000  # the input tokens a cut stream's message_start reports (billed)


def _event(name: str, **data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def _start(input_tokens: int) -> bytes:
    message = {"id": "msg_1", "model": "claude-test", "role": "assistant", "content": []}
    usage = {"input_tokens": input_tokens, "output_tokens": 1}
    return _event("message_start", message={**message, "usage": usage})


def _text(words: str) -> list[bytes]:
    block = {"type": "text", "text": ""}
    return [
        _event("content_block_start", index=0, content_block=block),
        _event("content_block_delta", index=0, delta={"type": "text_delta", "text": words}),
    ]


WHOLE = [
    _start(7),
    *_text("done"),
    _event("content_block_stop", index=0),
    _event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 3}),
    _event("message_stop"),
]
CUT = [_start(CUT_INPUT), *_text("word ")]  # then the connection drops mid-body
PAUSED = [  # a whole stream Anthropic paused (pause_turn): billed, no answer
    _start(CUT_INPUT),
    *_text("Searching"),
    _event("content_block_stop", index=0),
    _event("message_delta", delta={"stop_reason": "pause_turn"}, usage={"output_tokens": 4}),
    _event("message_stop"),
]


class _Provider(BaseHTTPRequestHandler):
    """Streams Anthropic messages; ``server.cuts`` says, per request in order, whether the
    stream is cut after its usage (``"paused"``: it ends ``pause_turn``; the requests past
    the list answer whole)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        with self.server.lock:  # type: ignore[attr-defined]
            number = self.server.served  # type: ignore[attr-defined]
            self.server.served += 1  # type: ignore[attr-defined]
        cuts: list[bool | str] = self.server.cuts  # type: ignore[attr-defined]
        cut = number < len(cuts) and cuts[number]
        if cut == "paused":
            self._send(PAUSED, cut=False)
            return
        self._send(CUT if cut else WHOLE, cut=bool(cut))

    def _send(self, chunks: list[bytes], *, cut: bool) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        if cut:  # no last chunk: the body is unfinished when the socket closes
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[ThreadingHTTPServer]:
    """The fake provider on 127.0.0.1 (set ``cuts`` before a run)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    server.lock = threading.Lock()  # type: ignore[attr-defined]
    server.served = 0  # type: ignore[attr-defined]
    server.cuts = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


async def _read_all(context: StreamContext, events: AsyncIterator[StreamEvent]) -> None:
    async for _ in events:
        pass


def _durable(provider: ThreadingHTTPServer, name: str, attempts: int = 0, **options: Any) -> Any:
    url = f"http://127.0.0.1:{provider.server_port}"
    model = AnthropicModel("claude-test", base_url=url, api_key="k", retry=0)
    policy = RetryPolicy(
        initial_interval=timedelta(milliseconds=50),
        backoff_coefficient=1.0,
        maximum_attempts=attempts,
    )
    return TemporalAgent(
        Agent(model, name=name, **options),
        settings=ActivitySettings(retry_policy=policy),
        event_stream_handler=_read_all,
    )


def _local_cut(agent: Agent, state: RunState | None, run_id: str) -> RunState:
    """The state of the error a local run's cut stream raises (started, or resumed from ``state``)."""
    stream = agent.stream("go", run_id=run_id) if state is None else agent.resume_stream(state)
    with pytest.raises(StreamError) as caught:
        for _ in stream:
            pass
    cut = state_of(caught.value)
    assert isinstance(cut, RunState)
    return cut


def _local_resumed(agent: Agent, state: RunState) -> RunState:
    """The final state of a local run resumed (streamed) from ``state``."""
    events = list(agent.resume_stream(state))
    end = events[-1]
    assert isinstance(end, RunEndEvent)
    return end.response.state


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers below register agents of their own: on a copy of the workflow's registry."""
    monkeypatch.setattr(workflow_module, "_AGENTS", dict(workflow_module._AGENTS))


def _replays(agent: TemporalAgent, history: WorkflowHistory) -> None:
    replayer = Replayer(workflows=[], plugins=[ToolfoldPlugin([agent])])
    asyncio.run(replayer.replay_workflow(history))


def _failed_run(server: DevServer, agent: TemporalAgent) -> tuple[BaseException, RunState]:
    """Run ``agent`` durably on "go" to its failure: the client's error and the run's state."""

    async def go() -> tuple[BaseException, RunState]:
        async with _worker(server, [agent]) as (client, queue):
            handle = await agent.start(
                client, "go", id=f"dropped-{uuid.uuid4().hex}", task_queue=queue
            )
            with pytest.raises(WorkflowFailureError) as caught:
                await handle.result()
            return caught.value, await handle.state()

    return asyncio.run(go())


def test_the_cut_attempts_temporal_retried_count_as_a_local_run_counts_them(
    server: DevServer, provider: ThreadingHTTPServer, registry: None
) -> None:
    """Two streams cut after their usage, then an answer: the final state counts both cut
    attempts (two AttemptDropped before the response), and equals a local run's resumed twice."""
    agent = _durable(provider, "dropped_twice")
    run_id = f"dropped-{uuid.uuid4().hex}"
    provider.cuts = [True, True]  # type: ignore[attr-defined]

    async def go() -> tuple[Any, WorkflowHistory]:
        async with _worker(server, [agent]) as (client, queue):
            response = await agent.run(client, "go", id=run_id, task_queue=queue)
            return response, await agent.handle(client, run_id).workflow.fetch_history()

    durable, history = asyncio.run(go())
    billed = Usage(input_tokens=CUT_INPUT, output_tokens=1, requests=1)
    dropped = [e for e in durable.state.log if isinstance(e, AttemptDropped)]
    assert dropped == [AttemptDropped(usage=billed)] * 2
    assert durable.usage == billed + billed + Usage(input_tokens=7, output_tokens=3, requests=1)
    provider.cuts = [True, True]  # type: ignore[attr-defined]
    provider.served = 0  # type: ignore[attr-defined]
    local = agent.agent
    cut = _local_cut(local, _local_cut(local, None, run_id), run_id)
    assert durable.state == _local_resumed(local, cut)
    _replays(agent, history)
    # What it asked the model activity is a CallModel to an activity worker from before (a
    # rolling deploy), which answers bare: the flag is a field that worker does not read.
    (scheduled,) = [
        e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    ]
    (payload,) = scheduled.activity_task_scheduled_event_attributes.input.payloads
    asked = json.loads(payload.data)
    assert structure(asked, CallModel) == CallModel(
        ModelRequest(messages=(Message.user("go"),)), 1, f"{run_id}:1:model"
    )
    assert asked["counted"] is True


def test_a_request_failing_for_good_counts_every_cut_attempt_in_its_errors_state(
    server: DevServer, provider: ThreadingHTTPServer, registry: None
) -> None:
    """Every attempt cut after its usage (retries used up): the StreamError's state counts
    them all, as a local run's error after the same cuts does."""
    agent = _durable(provider, "dropped_for_good", attempts=2)
    run_id = f"dropped-{uuid.uuid4().hex}"
    provider.cuts = [True, True]  # type: ignore[attr-defined]

    async def go() -> tuple[StreamError, WorkflowHistory]:
        async with _worker(server, [agent]) as (client, queue):
            with pytest.raises(StreamError) as caught:
                await agent.run(client, "go", id=run_id, task_queue=queue)
            return caught.value, await agent.handle(client, run_id).workflow.fetch_history()

    error, history = asyncio.run(go())
    state = state_of(error)
    assert isinstance(state, RunState)
    billed = Usage(input_tokens=CUT_INPUT, output_tokens=1, requests=1)
    assert [e for e in state.log if isinstance(e, AttemptDropped)] == [AttemptDropped(billed)] * 2
    assert state.usage == billed + billed
    provider.cuts = [True, True]  # type: ignore[attr-defined]
    provider.served = 0  # type: ignore[attr-defined]
    local = agent.agent
    assert state == _local_cut(local, _local_cut(local, None, run_id), run_id)
    _replays(agent, history)


def test_a_paused_answer_counts_its_billed_usage_in_the_errors_state(
    server: DevServer, provider: ThreadingHTTPServer, registry: None
) -> None:
    """An answer Anthropic paused (ProviderFinishError, not retried) counts the usage it
    reported in the durable run's state, as a local run's error does (before: Usage())."""
    agent = _durable(provider, "paused_for_good", attempts=2)
    run_id = f"paused-{uuid.uuid4().hex}"
    provider.cuts = ["paused"]  # type: ignore[attr-defined]

    async def go() -> ProviderFinishError:
        async with _worker(server, [agent]) as (client, queue):
            with pytest.raises(ProviderFinishError) as caught:
                await agent.run(client, "go", id=run_id, task_queue=queue)
            return caught.value

    state = state_of(asyncio.run(go()))
    assert isinstance(state, RunState)
    billed = Usage(input_tokens=CUT_INPUT, output_tokens=4, requests=1)
    assert [e for e in state.log if isinstance(e, AttemptDropped)] == [AttemptDropped(billed)]
    assert state.usage == billed
    provider.cuts = ["paused"]  # type: ignore[attr-defined]
    provider.served = 0  # type: ignore[attr-defined]
    with pytest.raises(ProviderFinishError) as local:
        for _ in agent.agent.stream("go", run_id=run_id):
            pass
    assert state_of(local.value) == state


HISTORIES = Path(__file__).parent / "histories"


def _replayed_state(name: str) -> RunState:
    """The state the workflow of the recorded history ``name`` holds once this code replayed it
    (its result, or the state its failure leaves for the `state` query)."""
    text = (HISTORIES / f"{name}.json").read_text(encoding="utf-8")
    history = WorkflowHistory.from_json(f"history-{name}", text)
    states: list[RunState] = []

    class Inbound(WorkflowInboundInterceptor):
        async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
            try:
                return await super().execute_workflow(input)
            finally:
                states.append(workflow.instance()._state)

    class Capture(Interceptor):
        def workflow_interceptor_class(
            self, input: WorkflowInterceptorClassInput
        ) -> type[WorkflowInboundInterceptor]:
            return Inbound

    plugin = ToolfoldPlugin(temporal_app.AGENTS)
    replayer = Replayer(workflows=[], plugins=[plugin], interceptors=[Capture()])
    asyncio.run(replayer.replay_workflow(history))
    (state,) = states
    return state


BILLED = Usage(input_tokens=CUT_INPUT, output_tokens=1, requests=1)
ANSWER = Usage(input_tokens=7, output_tokens=3, requests=1)


@pytest.mark.parametrize(
    ("name", "usage", "dropped"),
    [
        ("cut_retried", ANSWER, 0),  # recorded before: the answer's usage alone
        ("cut_retried_counted", BILLED + ANSWER, 1),
        ("cut_failed", Usage(), 0),
        ("cut_failed_counted", BILLED + BILLED, 2),
    ],
)
def test_recorded_cut_runs_replay_to_the_usage_they_recorded(
    name: str, usage: Usage, dropped: int
) -> None:
    """A history recorded before the cut attempts were counted replays without them (its state as
    it was); one recorded with the patch replays with them."""
    state = _replayed_state(name)
    assert state.usage == usage
    assert [e for e in state.log if isinstance(e, AttemptDropped)] == [
        AttemptDropped(BILLED)
    ] * dropped


@pytest.mark.parametrize("name", ["cut_retried", "cut_failed"])
def test_a_bare_response_reads_as_an_answer_without_dropped_attempts(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """The patched workflow reads the bare response an activity worker from before answers (a
    rolling deploy), as these histories recorded it, as an answer without dropped attempts."""
    patched = workflow_module.workflow.patched
    monkeypatch.setattr(  # only this patch taken regardless of the history
        workflow_module.workflow,
        "patched",
        lambda given: given == workflow_module.DROPPED_ATTEMPTS or patched(given),
    )
    state = _replayed_state(name)  # (it failed to decode the response as the answer)
    assert state.usage == (ANSWER if name == "cut_retried" else Usage())
    assert not [e for e in state.log if isinstance(e, AttemptDropped)]


class _Cutting:
    """A stream function whose first ``cuts`` streams report ``BILLED`` and are cut; the
    later ones answer "done" (a counter, so a local run cuts the same streams)."""

    def __init__(self, cuts: int) -> None:
        self.cuts = cuts
        self.streams = 0

    def __call__(self, request: Any) -> Iterator[object]:
        self.streams += 1
        if self.streams <= self.cuts:
            yield UsageUpdate(BILLED)
            yield TextDelta("word ")
            raise StreamError("the stream ended before the message finished", provider="test")
        yield UsageUpdate(ANSWER)
        yield TextDelta("done")


def _asks_expert(request: Any) -> Any:
    if any(m.role == "tool" for m in request.messages):
        return "asked"
    return FunctionModel.call("expert", {"input": "q"})


@pytest.mark.parametrize("attempts", [0, 1])
def test_a_sub_runs_cut_attempts_count_in_its_state(
    server: DevServer, registry: None, attempts: int
) -> None:
    """An agent used as a tool whose stream is cut after its usage: retried and answered, its
    state counts the cut attempt; failed for good (one attempt), the call's error result keeps
    its state counting it, as a local run's does."""
    cutting = _Cutting(1)
    expert = Agent(FunctionModel(lambda r: "done", stream_function=cutting), name="expert")
    boss = Agent(
        FunctionModel(_asks_expert), tools=[expert.as_tool()], name=f"dropped_boss{attempts}"
    )
    policy = RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=attempts)
    agent = TemporalAgent(
        boss, settings=ActivitySettings(retry_policy=policy), event_stream_handler=_read_all
    )
    run_id = f"dropped-{uuid.uuid4().hex}"

    async def go() -> tuple[Any, WorkflowHistory]:
        async with _worker(server, [agent]) as (client, queue):
            response = await agent.run(client, "go", id=run_id, task_queue=queue)
            return response, await agent.handle(client, run_id).workflow.fetch_history()

    durable, history = asyncio.run(go())
    (child,) = durable.state.sub_runs.values()
    assert [e for e in child.log if isinstance(e, AttemptDropped)] == [AttemptDropped(BILLED)]
    assert durable.usage == durable.state.usage + child.usage
    if attempts == 1:  # the same cut locally: the sub-run's error, its state kept on the call
        cutting.streams = 0
        events = list(boss.stream("go", run_id=run_id))
        end = events[-1]
        assert isinstance(end, RunEndEvent)
        assert durable.state == end.response.state
    else:
        assert child.usage == BILLED + ANSWER
    _replays(agent, history)


class _CutThenHung(FunctionModel):
    """Its first stream reports ``BILLED`` and is cut; the next one never ends (until cancelled)."""

    def __init__(self) -> None:
        super().__init__(lambda request: "done")
        self.streams = 0

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        self.streams += 1
        yield UsageUpdate(BILLED)
        if self.streams == 1:
            raise StreamError("the stream ended before the message finished", provider="test")
        await asyncio.Future()  # (the attempt times out here)


def test_a_request_whose_last_attempt_timed_out_counts_the_cut_attempts_before(
    server: DevServer, registry: None
) -> None:
    """A cut attempt, then one that times out: the run's state counts the cut attempt, read from
    the last heartbeat's details that Temporal's timeout failure carries."""
    policy = RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=2)
    settings = ActivitySettings(model_timeout=timedelta(seconds=1), retry_policy=policy)
    agent = TemporalAgent(
        Agent(_CutThenHung(), name="dropped_hung"),
        settings=settings,
        event_stream_handler=_read_all,
    )

    error, state = _failed_run(server, agent)
    assert isinstance(error.__cause__, ActivityError)
    assert isinstance(error.__cause__.cause, TimeoutError)
    assert [e for e in state.log if isinstance(e, AttemptDropped)] == [AttemptDropped(BILLED)]
    assert state.usage == BILLED


class _CutThenHeld(FunctionModel):
    """Its first stream reports ``BILLED`` and is cut; the next one reports ``BILLED`` too, says
    so (``held``), and never ends (until cancelled)."""

    def __init__(self) -> None:
        super().__init__(lambda request: "done")
        self.streams = 0
        self.held = asyncio.Event()

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        self.streams += 1
        yield UsageUpdate(BILLED)
        if self.streams == 1:
            raise StreamError("the stream ended before the message finished", provider="test")
        self.held.set()
        await asyncio.Future()


def test_a_cancelled_run_counts_the_cut_attempt_and_the_one_it_cancelled(
    server: DevServer, registry: None
) -> None:
    """A cut attempt, then one cancelled with the workflow after its usage: the cancelled run's
    state counts both (billed), as a local run cancelled mid-stream counts its stream."""
    policy = RetryPolicy(initial_interval=timedelta(milliseconds=50), backoff_coefficient=1.0)
    model = _CutThenHeld()
    agent = TemporalAgent(
        Agent(model, name="dropped_cancelled"),
        settings=ActivitySettings(retry_policy=policy, heartbeat_timeout=timedelta(seconds=3)),
        event_stream_handler=_read_all,
    )
    run_id = f"dropped-{uuid.uuid4().hex}"

    async def go() -> tuple[BaseException, RunState, WorkflowHistory]:
        async with _worker(server, [agent]) as (client, queue):
            handle = await agent.start(client, "go", id=run_id, task_queue=queue)
            await asyncio.wait_for(model.held.wait(), 60)
            await handle.workflow.cancel()
            with pytest.raises(WorkflowFailureError) as caught:
                await handle.result()
            return caught.value, await handle.state(), await handle.workflow.fetch_history()

    error, state, history = asyncio.run(go())
    assert isinstance(error.__cause__, CancelledError)  # cancelled, not failed
    assert [e for e in state.log if isinstance(e, AttemptDropped)] == [AttemptDropped(BILLED)] * 2
    assert state.usage == BILLED + BILLED
    assert state.phase == "awaiting_model"
    _replays(agent, history)


async def _cancel_requested(handle: Any) -> bool:
    """Whether the workflow asked its activity to cancel (its history has the request)."""
    events = [e.event_type async for e in handle.workflow.fetch_history_events()]
    return EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in events


class _Held(FunctionModel):
    """Its request (unstreamed) says so (``held``) and never ends; ``stopped`` once it is cancelled."""

    def __init__(self) -> None:
        super().__init__(lambda request: "done")
        self.held = asyncio.Event()
        self.stopped = asyncio.Event()

    async def request(self, request: Any) -> Any:
        self.held.set()
        try:
            await asyncio.Future()
        finally:
            self.stopped.set()


def test_an_unstreamed_run_is_cancelled_without_waiting_for_its_model_activity(
    server: DevServer, registry: None
) -> None:
    """No event_stream_handler (no usage to count): the cancelled run ends while its model
    activity still runs (it hears of the cancel at its next heartbeat), as before counting."""
    model = _Held()
    agent = TemporalAgent(
        Agent(model, name="dropped_unstreamed"),
        settings=ActivitySettings(heartbeat_timeout=timedelta(seconds=60)),  # heartbeats at 20 s
    )

    async def go() -> tuple[BaseException, bool, WorkflowHistory]:
        async with _worker(server, [agent]) as (client, queue):
            handle = await agent.start(
                client, "go", id=f"dropped-{uuid.uuid4().hex}", task_queue=queue
            )
            await asyncio.wait_for(model.held.wait(), 60)
            await handle.workflow.cancel()
            with pytest.raises(WorkflowFailureError) as caught:
                await handle.result()
            stopped = model.stopped.is_set()
            return caught.value, stopped, await handle.workflow.fetch_history()

    error, stopped, history = asyncio.run(go())
    assert isinstance(error.__cause__, CancelledError)
    assert not stopped  # the workflow ended before its activity heard of the cancel
    events = [event.event_type for event in history.events]
    assert events[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED not in events
    _replays(agent, history)
    # a worker given a handler since replays it as it ran (it did not wait)
    _replays(_with_handler(agent, _read_all), history)


def _with_handler(agent: TemporalAgent, handler: Any) -> TemporalAgent:
    """``agent`` on a worker with ``handler`` as its event_stream_handler (None: without one)."""
    assert isinstance(agent.agent, Agent)
    return TemporalAgent(agent.agent, settings=agent.settings, event_stream_handler=handler)


LATE = Usage(input_tokens=100, output_tokens=50, requests=1)


class _AnsweringLate(FunctionModel):
    """Its stream reports input usage, then answers (``LATE`` in all) once ``release`` is set."""

    def __init__(self) -> None:
        super().__init__(lambda request: "done")
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        yield UsageUpdate(Usage(input_tokens=100, requests=1))
        yield TextDelta("done")
        self.held.set()
        await self.release.wait()
        yield UsageUpdate(LATE)


def test_an_answer_arriving_after_the_cancel_is_dropped_and_counted(
    server: DevServer, registry: None
) -> None:
    """A streamed request that answers after the workflow asked its activity to cancel (before
    the activity heard of it): the run ends cancelled, the answer dropped and its usage counted."""
    model = _AnsweringLate()
    agent = TemporalAgent(
        Agent(model, name="dropped_late_answer"),
        settings=ActivitySettings(heartbeat_timeout=timedelta(seconds=30)),  # heartbeats at 10 s
        event_stream_handler=_read_all,
    )

    async def go() -> tuple[BaseException, RunState, WorkflowHistory]:
        async with _worker(server, [agent]) as (client, queue):
            handle = await agent.start(
                client, "go", id=f"dropped-{uuid.uuid4().hex}", task_queue=queue
            )
            await asyncio.wait_for(model.held.wait(), 60)
            await handle.workflow.cancel()
            while not await _cancel_requested(handle):
                await asyncio.sleep(0.05)
            model.release.set()  # the answer comes after the workflow asked to cancel
            with pytest.raises(WorkflowFailureError) as caught:
                await handle.result()
            return caught.value, await handle.state(), await handle.workflow.fetch_history()

    error, state, history = asyncio.run(go())
    assert isinstance(error.__cause__, CancelledError)
    assert [e for e in state.log if isinstance(e, AttemptDropped)] == [AttemptDropped(LATE)]
    assert state.usage == LATE
    assert (state.phase, len(state.conversation)) == ("awaiting_model", 1)
    _replays(agent, history)
    _replays(_with_handler(agent, None), history)  # a worker whose handler was taken away


class _CutThenRaising(FunctionModel):
    """Its first stream reports ``BILLED`` and is cut; the next one reports ``BILLED`` and raises
    a non-retryable `ApplicationError` of its own."""

    def __init__(self) -> None:
        super().__init__(lambda request: "done")
        self.streams = 0

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        self.streams += 1
        yield UsageUpdate(BILLED)
        if self.streams == 1:
            raise StreamError("the stream ended before the message finished", provider="test")
        raise ApplicationError(
            "the model's own failure", {"said": 1}, type="Own", non_retryable=True
        )


def test_an_application_error_the_model_raises_keeps_the_cut_attempts(
    server: DevServer, registry: None
) -> None:
    """A cut attempt, then one whose model raises its own ApplicationError: the failure is the
    model's (message, type, details) and the run's state counts both attempts."""
    policy = RetryPolicy(initial_interval=timedelta(milliseconds=50), backoff_coefficient=1.0)
    agent = TemporalAgent(
        Agent(_CutThenRaising(), name="dropped_own_error"),
        settings=ActivitySettings(retry_policy=policy),
        event_stream_handler=_read_all,
    )

    error, state = _failed_run(server, agent)
    assert isinstance(error.__cause__, ActivityError)
    failure = error.__cause__.cause
    assert isinstance(failure, ApplicationError)
    assert (failure.message, failure.type, failure.non_retryable) == (
        "the model's own failure",
        "Own",
        True,
    )
    assert failure.details[0] == {"said": 1}
    assert [e for e in state.log if isinstance(e, AttemptDropped)] == [AttemptDropped(BILLED)] * 2
    assert state.usage == BILLED + BILLED


@pytest.mark.parametrize("counted", [False, True])
def test_the_top_runs_model_input_is_read_once(
    monkeypatch: pytest.MonkeyPatch, counted: bool
) -> None:
    """The top run's model activity reads its input's JSON once (a CallModel recorded before, or
    one with "counted": true), and gets the request and whether to count its dropped attempts."""
    from temporalio.common import RawValue

    from toolfold.integrations.temporal import _activities as activities_module
    from toolfold.integrations.temporal._converter import ToolfoldPayloadConverter

    reads: list[object] = []

    class Counting(ToolfoldPayloadConverter):
        def from_payload(self, payload: Any, type_hint: Any = None) -> Any:
            reads.append(type_hint)
            return super().from_payload(payload, type_hint)

    convert = Counting()
    monkeypatch.setattr(activities_module.activity, "payload_converter", lambda: convert)
    effect = CallModel(ModelRequest(messages=(Message.user("x" * 100),)), 1, "run:1:model")
    sent = activities_module.counted_request(effect) if counted else effect
    got = activities_module._top_request(RawValue(convert.to_payload(sent)))
    assert got == (effect, counted)
    assert len(reads) == 1
