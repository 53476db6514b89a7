"""OpenTelemetry GenAI spans and metrics for runs, checked with the SDK's in-memory exporters."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import toolfold
import toolfold.otel
from toolfold import Agent, RunState, tool
from toolfold.adapters import RetryPolicy
from toolfold.runtime import replay
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


@tool
def add(a: int, b: int) -> int:
    """Add.

    Args:
        a: A number.
        b: Another.
    """
    return a + b


@tool
def explode(reason: str) -> str:
    """Fail.

    Args:
        reason: Why.
    """
    raise ValueError(reason)


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay.

    Args:
        amount: Cents.
    """
    return "paid"


class Traces:
    """The spans and metrics recorded while instrumented."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def metric(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        return [
            point
            for resource in (data.resource_metrics if data else [])
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def traces() -> Iterator[Traces]:
    recorded = Traces()
    toolfold.otel.instrument(recorded.tracer_provider, recorded.meter_provider)
    try:
        yield recorded
    finally:
        toolfold.otel.uninstrument()


def test_a_plain_run_makes_an_agent_span_with_chat_and_tool_children(traces: Traces) -> None:
    """invoke_agent is the root; each model request and tool call is its child, with GenAI attributes."""
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), "3"], name="scripted:m1")
    response = Agent(model, tools=[add], name="calc").run("1+2", run_id="run-1")
    (agent,) = traces.named("invoke_agent")
    chats = traces.named("chat")
    (tool_span,) = traces.named("execute_tool")
    assert agent.name == "invoke_agent calc"
    assert agent.parent is None
    assert agent.attributes["gen_ai.conversation.id"] == "run-1"
    assert agent.attributes["gen_ai.provider.name"] == "scripted"
    assert agent.attributes["toolfold.run.phase"] == "finished"
    assert [c.name for c in chats] == ["chat m1", "chat m1"]
    for child in [*chats, tool_span]:
        assert child.parent is not None
        assert child.parent.span_id == agent.context.span_id
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert chats[1].attributes["gen_ai.usage.input_tokens"] == response.steps[1].usage.input_tokens
    assert tool_span.name == "execute_tool add"
    assert tool_span.attributes["gen_ai.tool.call.id"] == response.steps[0].tool_calls[0].id
    assert "gen_ai.tool.call.arguments" not in tool_span.attributes  # content is opt-in
    assert "gen_ai.input.messages" not in chats[0].attributes


def test_parallel_tools_and_a_tool_error(traces: Traces) -> None:
    """Each parallel call gets its own span; a failing one is an ERROR span with error.type."""
    model = ScriptedModel([[call("add", {"a": 1, "b": 1}), call("explode", {"reason": "x"})], "ok"])
    Agent(model, tools=[add, explode]).run("go")
    spans = {s.name: s for s in traces.named("execute_tool")}
    assert set(spans) == {"execute_tool add", "execute_tool explode"}
    assert spans["execute_tool add"].status.status_code != StatusCode.ERROR
    failed = spans["execute_tool explode"]
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["error.type"] == "error"


def test_a_suspended_and_resumed_run_is_two_agent_spans_of_one_conversation(
    traces: Traces,
) -> None:
    """The suspension ends one invoke_agent span; the resume opens another with the same id."""
    model = ScriptedModel([call("pay", {"amount": 5}), "done"])
    agent = Agent(model, tools=[pay])
    first = agent.run("pay")
    (pending,) = first.state.pending_approvals
    agent.resume(RunState.from_json(first.state.to_json()), approvals={pending.id: True})
    spans = traces.named("invoke_agent")
    assert [s.attributes["toolfold.run.phase"] for s in spans] == ["awaiting_approval", "finished"]
    assert len({s.attributes["gen_ai.conversation.id"] for s in spans}) == 1
    assert len(traces.named("execute_tool")) == 1


def _settled_script() -> list[Any]:
    """A step whose calls the core answers itself, and one that runs, then an answer."""
    return [
        [
            call("nope", {}),
            call("add", '{"a": 1'),
            call("add", "[1, 2]"),
            call("add", {"a": 1, "b": 2}),
        ],
        "done",
    ]


def _drive(agent: Agent, how: str) -> None:
    import asyncio

    if how == "run":
        agent.run("go")
    elif how == "arun":
        asyncio.run(agent.arun("go"))
    elif how == "stream":
        list(agent.stream("go"))
    else:

        async def collect() -> None:
            async for _ in agent.stream("go"):
                pass

        asyncio.run(collect())


@pytest.mark.parametrize("how", ["run", "arun", "stream", "astream"])
def test_calls_the_core_answers_itself_get_execute_tool_spans(traces: Traces, how: str) -> None:
    """An unknown tool and argument text that is no JSON object each get an ERROR
    execute_tool span, a child of the run's span, with their outcome as error.type."""
    _drive(Agent(ScriptedModel(_settled_script()), tools=[add], name="t"), how)
    (agent,) = traces.named("invoke_agent")
    spans = traces.named("execute_tool")
    errors = sorted(
        (s.name, s.attributes.get("error.type"))
        for s in spans
        if s.status.status_code == StatusCode.ERROR
    )
    assert errors == [
        ("execute_tool add", "invalid_arguments"),
        ("execute_tool add", "invalid_arguments"),
        ("execute_tool nope", "unknown_tool"),
    ]
    assert len(spans) == 4  # and the call that ran
    for span in spans:
        assert span.parent is not None
        assert span.parent.span_id == agent.context.span_id
    settled = [s for s in spans if s.status.status_code == StatusCode.ERROR]
    assert all(s.start_time == s.end_time for s in settled)  # settled, not run: no length


def test_a_settled_call_records_its_arguments_and_result_when_asked() -> None:
    """With capture_content, a call settled without running records its arguments and result."""
    recorded = Traces()
    toolfold.otel.instrument(recorded.tracer_provider, capture_content=True)
    try:
        Agent(ScriptedModel([call("nope", {"q": 1}), "done"]), tools=[add]).run("go")
    finally:
        toolfold.otel.uninstrument()
    (span,) = recorded.named("execute_tool")
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"q": 1}'
    assert "Unknown tool 'nope'" in str(span.attributes["gen_ai.tool.call.result"])


PRIVATE = "alice.private@example.com"


@tool
def lookup(email: str, age: int) -> str:
    """Look a user up.

    Args:
        email: Their address.
        age: Their age.
    """
    raise ValueError(f"no user with email {email}")


def _lookups() -> ScriptedModel:
    """A step calling `lookup` once with good arguments, once with bad, and an unknown tool,
    each holding `PRIVATE`."""
    return ScriptedModel(
        [
            [
                call("lookup", {"email": PRIVATE, "age": 3}),
                call("lookup", {"email": PRIVATE, "age": f"age of {PRIVATE}"}),
                call("nosuch", {"q": PRIVATE}),
            ],
            "done",
        ]
    )


def test_without_capture_span_statuses_hold_no_arguments_or_results(traces: Traces) -> None:
    """Without capture_content, an error span's status says the outcome or the exception's
    class, never a tool's arguments, result or exception text."""
    Agent(_lookups(), tools=[lookup]).run("hi")
    with pytest.raises(toolfold.ToolExecutionError):
        Agent(_lookups(), tools=[lookup], on_tool_error="raise").run("hi")
    statuses = sorted(
        (s.name, s.status.description)
        for s in traces.spans()
        if s.status.status_code == StatusCode.ERROR
    )
    assert statuses == [
        ("execute_tool lookup", "error"),
        ("execute_tool lookup", "error"),
        ("execute_tool lookup", "invalid_arguments"),
        ("execute_tool lookup", "invalid_arguments"),
        ("execute_tool nosuch", "unknown_tool"),
        ("execute_tool nosuch", "unknown_tool"),
        ("invoke_agent agent", "ToolExecutionError"),  # its message holds the tool's
    ]


def test_without_capture_a_provider_errors_status_says_provider_status_class_and_code(
    traces: Traces,
) -> None:
    """Without capture_content, a provider error's chat and agent span statuses say the
    provider, HTTP status, class and error code (not the provider's message, which may echo
    the prompt), and the chat span records the status as http.response.status_code."""
    from toolfold import RateLimitError, ServerError

    def raising(error: Exception) -> Any:
        def answer(request: Any) -> Any:
            raise error

        return answer

    errors = [
        RateLimitError(
            f"openai: HTTP 429 {PRIVATE}",
            provider="openai",
            status_code=429,
            provider_message=f"slow down, {PRIVATE}",
            code="rate_limit_exceeded",
        ),
        ServerError(f"anthropic: {PRIVATE}", provider="anthropic", code=f"bad {PRIVATE}"),
    ]
    for error in errors:
        with pytest.raises(type(error)):
            Agent(ScriptedModel([raising(error)])).run("hi")
    statuses = sorted(
        (s.name.split()[0], s.status.description, s.attributes.get("http.response.status_code"))
        for s in traces.named(("chat", "invoke_agent"))
    )
    assert statuses == [
        ("chat", "anthropic: ServerError", None),
        ("chat", "openai: HTTP 429 RateLimitError (rate_limit_exceeded)", 429),
        ("invoke_agent", "anthropic: ServerError", None),
        ("invoke_agent", "openai: HTTP 429 RateLimitError (rate_limit_exceeded)", None),
    ]


def test_with_capture_span_statuses_say_what_failed() -> None:
    """With capture_content, an error span's status holds the tool's error text."""
    recorded = Traces()
    toolfold.otel.instrument(recorded.tracer_provider, capture_content=True)
    try:
        Agent(_lookups(), tools=[lookup]).run("hi")
    finally:
        toolfold.otel.uninstrument()
    shown = [s.status.description or "" for s in recorded.named("execute_tool")]
    assert sum(f"no user with email {PRIVATE}" in text for text in shown) == 1


def test_a_denied_call_gets_an_execute_tool_span_with_error_type_denied(traces: Traces) -> None:
    """A call denied on resume gets an ERROR execute_tool span under the resume's agent span."""
    model = ScriptedModel([call("pay", {"amount": 5}), "done"])
    agent = Agent(model, tools=[pay])
    first = agent.run("pay")
    (pending,) = first.state.pending_approvals
    agent.resume(first.state, approvals={pending.id: False})
    (span,) = traces.named("execute_tool")
    assert span.name == "execute_tool pay"
    assert span.attributes["error.type"] == "denied"
    assert span.status.status_code == StatusCode.ERROR
    resumed = traces.named("invoke_agent")[1]
    assert span.parent is not None
    assert span.parent.span_id == resumed.context.span_id


def test_streamed_and_async_runs_are_traced(traces: Traces) -> None:
    """A streamed run and an async run each make their spans."""
    import asyncio

    stream = Agent(ScriptedModel([call("add", {"a": 2, "b": 2}), "4"]), tools=[add]).stream("x")
    for _ in stream:
        pass
    asyncio.run(Agent(ScriptedModel(["hi"])).arun("y"))
    assert len(traces.named("invoke_agent")) == 2
    assert len(traces.named("chat")) == 3
    assert len(traces.named("execute_tool")) == 1


def test_a_failed_model_call_marks_chat_and_run_spans(traces: Traces) -> None:
    """A model that raises gives an ERROR chat span and an ERROR run span naming the error."""
    model = ScriptedModel([])  # no entry: the request fails
    with pytest.raises(toolfold.ToolfoldError):
        Agent(model).run("x")
    (chat,) = traces.named("chat")
    (agent,) = traces.named("invoke_agent")
    assert chat.status.status_code == StatusCode.ERROR
    assert agent.status.status_code == StatusCode.ERROR
    assert "error.type" in agent.attributes


def test_content_is_recorded_only_when_asked(traces: Traces) -> None:
    """capture_content=True records messages, arguments and results."""
    toolfold.otel.instrument(traces.tracer_provider, traces.meter_provider, capture_content=True)
    Agent(ScriptedModel([call("add", {"a": 4, "b": 5}), "9"]), tools=[add]).run("4+5")
    (tool_span,) = traces.named("execute_tool")
    assert json.loads(tool_span.attributes["gen_ai.tool.call.arguments"]) == {"a": 4, "b": 5}
    assert tool_span.attributes["gen_ai.tool.call.result"] == "9"
    first_chat = traces.named("chat")[0]
    assert "4+5" in first_chat.attributes["gen_ai.input.messages"]


def test_token_and_duration_metrics(traces: Traces) -> None:
    """Each model request records input and output token counts and its duration."""
    Agent(ScriptedModel(["one two three"])).run("count me")
    tokens = traces.metric("gen_ai.client.token.usage")
    assert {p.attributes["gen_ai.token.type"] for p in tokens} == {"input", "output"}
    (duration,) = traces.metric("gen_ai.client.operation.duration")
    assert duration.count == 1


def test_replay_and_uninstrumented_runs_emit_nothing(traces: Traces) -> None:
    """Replaying a log performs nothing, so it traces nothing; after uninstrument, runs are quiet."""
    response = Agent(ScriptedModel([call("add", {"a": 1, "b": 1}), "2"]), tools=[add]).run("x")
    before = len(traces.spans())
    assert replay(response.state.events) == response.state
    assert len(traces.spans()) == before
    toolfold.otel.uninstrument()
    assert not toolfold.otel.is_instrumented()
    Agent(ScriptedModel(["quiet"])).run("x")
    assert len(traces.spans()) == before


def test_the_api_key_is_never_an_attribute(traces: Traces) -> None:
    """A real provider model over httpx.MockTransport: no span attribute holds its key."""
    key = "sk-test-SECRET-0123456789abcdef"

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "id": "r1",
                "model": "gpt-test",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "hello"},
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            },
        )

    toolfold.otel.instrument(traces.tracer_provider, traces.meter_provider, capture_content=True)
    client = httpx.Client(transport=httpx.MockTransport(answer))
    model = toolfold.model("openai:gpt-test", api_key=key, http_client=client)
    assert Agent(model).run("hi").text == "hello"
    everything = json.dumps([dict(s.attributes or {}) for s in traces.spans()], default=str)
    assert "gpt-test" in everything
    assert key not in everything
    assert "SECRET" not in everything


def _children(traces: Traces, parent: ReadableSpan) -> list[str]:
    return [
        s.name
        for s in traces.spans()
        if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def _nested_agents(bottom_model: ScriptedModel) -> Agent:
    bottom = Agent(bottom_model, name="bottom", tools=[add, pay])
    mid = Agent(
        ScriptedModel([call("bottom", {"input": "sum"}), "mid done"]),
        name="mid",
        tools=[bottom.as_tool()],
    )
    return Agent(
        ScriptedModel([call("mid", {"input": "go"}), "top done"]),
        name="top",
        tools=[mid.as_tool()],
    )


def test_a_nested_sub_agent_nests_under_its_tool_call(traces: Traces) -> None:
    """Two levels of agents as tools: each invoke_agent span is a child of the execute_tool span that ran it."""
    top = _nested_agents(ScriptedModel([call("add", {"a": 1, "b": 2}), "3"]))
    assert top.run("start", run_id="r").text == "top done"
    (root,) = [s for s in traces.named("invoke_agent") if s.parent is None]
    assert root.name == "invoke_agent top"
    assert _children(traces, root) == ["chat model", "execute_tool mid", "chat model"]
    (mid_call,) = traces.named("execute_tool mid")
    assert _children(traces, mid_call) == ["invoke_agent mid"]
    (mid_run,) = traces.named("invoke_agent mid")
    assert _children(traces, mid_run) == ["chat model", "execute_tool bottom", "chat model"]
    (bottom_call,) = traces.named("execute_tool bottom")
    (bottom_run,) = traces.named("invoke_agent bottom")
    assert _children(traces, bottom_call) == ["invoke_agent bottom"]
    assert _children(traces, bottom_run) == ["chat model", "execute_tool add", "chat model"]
    # one trace, and every parent spans its children in time
    assert len({s.context.trace_id for s in traces.spans()}) == 1
    for parent, child in [(mid_call, mid_run), (bottom_call, bottom_run)]:
        assert parent.start_time <= child.start_time
        assert child.end_time <= parent.end_time
    mid_id = f"r/{mid_call.attributes['gen_ai.tool.call.id']}"
    assert mid_run.attributes["gen_ai.conversation.id"] == mid_id
    bottom_id = f"{mid_id}/{bottom_call.attributes['gen_ai.tool.call.id']}"
    assert bottom_run.attributes["gen_ai.conversation.id"] == bottom_id


def test_a_nested_sub_agent_suspended_and_resumed(traces: Traces) -> None:
    """An approval two levels down suspends the tree; on resume the sub-runs nest again under new tool spans."""
    top = _nested_agents(ScriptedModel([call("pay", {"amount": 3}), "paid"]))
    first = top.run("start")
    (pending,) = first.state.pending_approvals
    stored = RunState.from_json(first.state.to_json())
    assert top.resume(stored, approvals={pending.id: True}).text == "top done"
    bottoms = traces.named("invoke_agent bottom")
    assert [s.attributes["toolfold.run.phase"] for s in bottoms] == [
        "awaiting_approval",
        "finished",
    ]
    for run in traces.named("invoke_agent"):
        if run.name != "invoke_agent top":
            parent = next(s for s in traces.spans() if s.context.span_id == run.parent.span_id)
            assert parent.name == "execute_tool " + run.name.removeprefix("invoke_agent ")
    (pay_span,) = traces.named("execute_tool pay")  # ran once, after the approval
    assert pay_span.parent.span_id == bottoms[1].context.span_id
    roots = [s for s in traces.spans() if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent top", "invoke_agent top"]


def test_a_handoff_opens_the_target_agent_span_under_the_run(traces: Traces) -> None:
    """After transfer_to_billing, the next chat spans nest under invoke_agent billing, a child of the run's span."""
    billing = Agent(ScriptedModel(["billed"]), name="billing")
    triage = Agent(ScriptedModel([call("transfer_to_billing")]), name="triage", handoffs=[billing])
    assert triage.run("invoice").text == "billed"
    (root,) = traces.named("invoke_agent triage")
    (target,) = traces.named("invoke_agent billing")
    assert root.parent is None
    assert target.parent is not None
    assert target.parent.span_id == root.context.span_id
    assert _children(traces, root) == [
        "chat model",
        "execute_tool transfer_to_billing",
        "invoke_agent billing",
    ]
    assert _children(traces, target) == ["chat model"]
    assert target.attributes["toolfold.handoff"] is True
    assert [e.name for e in root.events] == ["gen_ai.handoff"]
    assert root.events[0].attributes["gen_ai.agent.name"] == "billing"
    assert root.attributes["toolfold.run.phase"] == "finished"


def test_a_workflow_nests_its_steps_and_traces_no_planner_calls(traces: Traces) -> None:
    """A Sequence with a Parallel: each step's run nests under its execute_tool span; the planner makes no chat spans."""
    from toolfold import Parallel, Sequence

    writer = Agent(ScriptedModel(["draft"]), name="writer")
    editor = Agent(ScriptedModel(["edited"]), name="editor")
    checker = Agent(ScriptedModel(["checked"]), name="checker")
    pipeline = Sequence(writer, Parallel(editor, checker, name="review"), name="pipeline")
    pipeline.run("topic")
    (root,) = [s for s in traces.spans() if s.parent is None]
    assert root.name == "invoke_agent pipeline"
    assert root.attributes["toolfold.workflow"] is True
    assert "gen_ai.request.model" not in root.attributes
    assert _children(traces, root) == ["execute_tool writer", "execute_tool review"]
    (review,) = traces.named("invoke_agent review")
    assert sorted(_children(traces, review)) == ["execute_tool checker", "execute_tool editor"]
    for name in ("writer", "editor", "checker"):
        (call_span,) = traces.named(f"execute_tool {name}")
        assert _children(traces, call_span) == [f"invoke_agent {name}"]
        (run,) = traces.named(f"invoke_agent {name}")
        assert _children(traces, run) == ["chat model"]
    assert len(traces.named("chat")) == 3  # the three agents' model calls, no planner's
    tokens = traces.metric("gen_ai.client.token.usage")
    assert len(tokens) == 2  # input and output points of the one real model name


def _chat_ended_as(traces: Traces, error_type: str) -> ReadableSpan:
    (chat,) = traces.named("chat")
    (agent,) = traces.named("invoke_agent")
    assert chat.parent is not None
    assert chat.parent.span_id == agent.context.span_id
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["error.type"] == error_type
    return chat


def test_a_run_cancelled_during_the_model_call_ends_its_chat_span(traces: Traces) -> None:
    """Cancelling an async run while the model answers ends the chat span, marked CancelledError."""
    import asyncio

    async def main() -> None:
        asked = asyncio.Event()

        async def never(request: Any) -> str:
            asked.set()
            await asyncio.Event().wait()
            return "late"

        run = asyncio.ensure_future(Agent(FunctionModel(never), name="a1").arun("hi"))
        await asked.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(main())
    chat = _chat_ended_as(traces, "CancelledError")
    assert "cancelled" in (chat.status.description or "")
    (duration,) = traces.metric("gen_ai.client.operation.duration")
    assert duration.attributes["error.type"] == "CancelledError"


def test_a_stream_stopped_mid_answer_ends_its_chat_span(traces: Traces) -> None:
    """A caller that stops a stream while the model answers: the chat span ends, marked abandoned."""
    stream = iter(Agent(ScriptedModel(["a long answer " * 20]), name="a2").stream("hi"))
    for index, _ in enumerate(stream):
        if index == 3:
            break
    stream.close()
    chat = _chat_ended_as(traces, "GeneratorExit")
    assert "abandoned" in (chat.status.description or "")
    (agent,) = traces.named("invoke_agent")
    assert agent.status.status_code != StatusCode.ERROR  # stopping is not the run's error


def test_an_async_stream_stopped_mid_answer_ends_its_chat_span(traces: Traces) -> None:
    """The same for an async stream closed while the model answers."""
    import asyncio

    async def main() -> None:
        stream = aiter(Agent(ScriptedModel(["a long answer " * 20]), name="a3").stream("hi"))
        index = 0
        async for _ in stream:
            index += 1
            if index == 3:
                break
        await stream.aclose()

    asyncio.run(main())
    _chat_ended_as(traces, "GeneratorExit")


def _parent_name(traces: Traces, span: ReadableSpan) -> str:
    assert span.parent is not None
    (parent,) = [s for s in traces.spans() if s.context.span_id == span.parent.span_id]
    assert parent.context.trace_id == span.context.trace_id
    return parent.name


def test_spans_a_tool_makes_nest_under_its_execute_tool_span(traces: Traces) -> None:
    """A tool's own spans are children of its call's span: sync tools inline and on worker
    threads, async tools in blocking and async runs, each call under its own span."""
    import asyncio

    mine = traces.tracer_provider.get_tracer("mine")

    @tool
    def look_up(q: str) -> str:
        """Look up.

        Args:
            q: The query.
        """
        with mine.start_as_current_span(f"db {q}"):
            return "found"

    @tool
    async def fetch(q: str) -> str:
        """Fetch.

        Args:
            q: The query.
        """
        with mine.start_as_current_span(f"http {q}"):
            await asyncio.sleep(0)
            return "fetched"

    def script() -> ScriptedModel:
        return ScriptedModel(
            [
                call("look_up", {"q": "alone"}),  # inline, in the caller's thread
                [call("look_up", {"q": "one"}), call("look_up", {"q": "two"})],  # workers
                [call("fetch", {"q": "three"}), call("fetch", {"q": "four"})],  # tasks
                "done",
            ]
        )

    Agent(script(), tools=[look_up, fetch]).run("go")
    asyncio.run(Agent(script(), tools=[look_up, fetch]).arun("go"))
    for _ in Agent(script(), tools=[look_up, fetch]).stream("go"):
        pass
    made = [s for s in traces.spans() if s.name.startswith(("db ", "http "))]
    assert len(made) == 15  # five calls in each of the three runs
    for span in made:
        tool_name = "look_up" if span.name.startswith("db ") else "fetch"
        assert _parent_name(traces, span) == f"execute_tool {tool_name}"
    parents = {span.parent.span_id for span in made if span.parent is not None}
    assert len(parents) == 15  # each under its own call's span, not a sibling's


def test_the_awaitable_a_sync_tool_returns_runs_under_its_execute_tool_span(
    traces: Traces,
) -> None:
    """A sync tool returning a coroutine: what the coroutine does nests under the call's span,
    inline and on worker threads, in blocking, async and streamed runs."""
    import asyncio

    mine = traces.tracer_provider.get_tracer("mine")

    async def query(q: str) -> str:
        await asyncio.sleep(0)
        with mine.start_as_current_span(f"db {q}"):
            return "found"

    @tool
    def look_up(q: str) -> str:
        """Look up.

        Args:
            q: The query.
        """
        return query(q)  # type: ignore[return-value]

    def script() -> ScriptedModel:
        return ScriptedModel(
            [
                call("look_up", {"q": "alone"}),
                [call("look_up", {"q": "one"}), call("look_up", {"q": "two"})],
                "done",
            ]
        )

    assert Agent(script(), tools=[look_up]).run("go").text == "done"
    asyncio.run(Agent(script(), tools=[look_up]).arun("go"))
    for _ in Agent(script(), tools=[look_up]).stream("go"):
        pass
    made = traces.named("db ")
    assert len(made) == 9  # three calls in each of the three runs
    assert {_parent_name(traces, span) for span in made} == {"execute_tool look_up"}
    assert len({span.parent.span_id for span in made if span.parent is not None}) == 9


def test_a_renamed_agent_tool_renames_its_blocking_twin_once_when_traced(
    traces: Traces, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replaced agent tool's blocking twin is renamed once for all steps, traced as untraced
    (each step's traced copy renamed it again, its argument checker built anew)."""
    from toolfold.toolkit import Tool

    renames: list[dict[str, Any]] = []
    replace = Tool.replace

    def counted(self: Tool[..., Any], **changes: Any) -> Tool[..., Any]:
        renames.append(changes)
        return replace(self, **changes)

    helper = Agent(ScriptedModel(["a", "b", "c"]), name="helper").as_tool()
    assistant = helper.replace(name="assistant")
    monkeypatch.setattr(Tool, "replace", counted)
    steps = [call("assistant", {"input": word}) for word in ("x", "y", "z")]
    assert Agent(ScriptedModel([*steps, "done"]), tools=[assistant]).run("go").text == "done"
    assert renames == [{"name": "assistant", "timeout": None}]
    assert len(traces.named("execute_tool assistant")) == 3


def test_spans_made_during_a_model_call_nest_under_its_chat_span(traces: Traces) -> None:
    """What the model does (an HTTP client's instrumentation) nests under the chat span,
    blocking, async and streamed; the caller's code between stream events does not."""
    import asyncio

    mine = traces.tracer_provider.get_tracer("mine")

    def answer(request: Any) -> str:
        with mine.start_as_current_span("POST"):
            return "hello"

    async def answer_async(request: Any) -> str:
        with mine.start_as_current_span("POST"):
            await asyncio.sleep(0)
            return "hello"

    def events(request: Any) -> Iterator[Any]:
        from toolfold.testing import response_events

        with mine.start_as_current_span("POST"):
            pass
        yield from response_events(FunctionModel(answer).request_sync(request))

    Agent(FunctionModel(answer)).run("hi")
    asyncio.run(Agent(FunctionModel(answer_async)).arun("hi"))
    outside: list[Any] = []
    for _ in Agent(FunctionModel(answer, stream_function=events)).stream("hi"):
        outside.append(trace.get_current_span())

    async def streamed() -> None:
        async for _ in Agent(FunctionModel(answer_async)).stream("hi"):
            outside.append(trace.get_current_span())

    asyncio.run(streamed())
    posts = traces.named("POST")
    assert len(posts) == 5  # the streamed sync model answers twice: its stream's and its own
    assert {_parent_name(traces, post) for post in posts} == {"chat model"}
    assert not any(span.get_span_context().is_valid for span in outside)


def test_captured_messages_carry_tool_calls_and_results(traces: Traces) -> None:
    """capture_content=True spells calls and results as the GenAI conventions' parts:
    tool_call {id, name, arguments} and tool_call_response {id, response}."""
    toolfold.otel.instrument(traces.tracer_provider, traces.meter_provider, capture_content=True)
    model = ScriptedModel([["Adding.", call("add", {"a": 2, "b": 3}, id="c1")], "5"])
    Agent(model, tools=[add], instructions="Be terse.").run("2+3?")
    first, second = traces.named("chat")
    assert json.loads(first.attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Adding."},
                {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 2, "b": 3}},
            ],
            "finish_reason": "tool_calls",
        }
    ]
    sent = json.loads(second.attributes["gen_ai.input.messages"])
    assert sent[0] == {"role": "system", "parts": [{"type": "text", "content": "Be terse."}]}
    assert sent[-2]["parts"][1]["type"] == "tool_call"
    assert sent[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "c1", "response": "5"}],
    }


def test_a_stream_event_that_is_none_fails_the_run_traced_as_untraced(traces: Traces) -> None:
    """A model stream yielding None: the same UsageError naming the event (with the run's
    state) with tracing on as off, not an early end."""
    import asyncio

    from toolfold import UsageError
    from toolfold.runtime import StreamFinish, TextDelta

    def events(request: Any) -> Iterator[Any]:
        yield TextDelta("Hello")
        yield None
        yield TextDelta(" world")
        yield StreamFinish("stop", "stop")

    agent = Agent(FunctionModel(lambda request: "unused", stream_function=events))
    with pytest.raises(UsageError, match=r"must be a stream event .*got NoneType None") as raised:
        list(agent.stream("hi"))
    assert raised.value.state.messages[-1].text == "hi"  # type: ignore[attr-defined]
    chat = traces.named("chat")[-1]
    assert chat.status.status_code == StatusCode.ERROR

    async def main() -> None:
        async for _ in agent.stream("hi"):
            pass

    with pytest.raises(UsageError, match=r"must be a stream event .*got NoneType None"):
        asyncio.run(main())


def test_closing_a_traced_async_stream_closes_the_model_stream_at_once(traces: Traces) -> None:
    """While traced too, aclosing a run's async stream after a break closes the model's
    stream before the next line, not when asyncio closes the dropped one later."""
    closed: list[bool] = []

    class Closing(ScriptedModel):
        async def stream(self, request: Any) -> Any:
            try:
                async for event in super().stream(request):
                    yield event
            finally:
                closed.append(True)

    agent = Agent(Closing(["hello world"]), name="calc")
    closed_at_exit: list[bool] = []

    async def stop_early() -> None:
        async with contextlib.aclosing(aiter(agent.stream("go"))) as events:
            async for event in events:
                if event.kind == "text_delta":
                    break
        closed_at_exit.append(bool(closed))  # (no await since: the loop has not run)

    asyncio.run(stop_early())
    assert closed_at_exit == [True]
    assert len(traces.named("chat")) == 1  # its span ended (only ended spans are exported)


class _BadCloseEvents:
    """A model stream that is an async iterator class (not a generator) whose ``aclose``
    fails; ``broken_at`` makes its n-th event a ConnectionError instead."""

    def __init__(self, events: Any, broken_at: int | None) -> None:
        self.events = aiter(events)
        self.broken_at = broken_at
        self.served = 0

    def __aiter__(self) -> _BadCloseEvents:
        return self

    async def __anext__(self) -> Any:
        self.served += 1
        if self.served == self.broken_at:
            raise ConnectionError("model stream broke")
        return await anext(self.events)

    async def aclose(self) -> None:
        raise RuntimeError("aclose failed")


@pytest.mark.parametrize("broken_at", [None, 2])
def test_a_traced_model_stream_whose_aclose_fails_ends_its_chat_span(
    traces: Traces, broken_at: int | None
) -> None:
    """Traced, a model stream whose aclose fails: the chat span still ends, and the run
    answers (stream ended) or fails with the model's own error (stream broke)."""

    class BadClose(ScriptedModel):
        def stream(self, request: Any) -> Any:
            return _BadCloseEvents(super().stream(request), broken_at)

    stream = Agent(BadClose(["hello"]), name="calc").stream("go")

    async def read_all() -> None:
        async for _event in stream:
            pass

    if broken_at is None:
        asyncio.run(read_all())
        assert stream.response.text == "hello"
        (chat,) = traces.named("chat")
        assert chat.status.status_code != StatusCode.ERROR
    else:
        with pytest.raises(toolfold.RunError, match="model stream broke"):
            asyncio.run(read_all())
        assert _chat_ended_as(traces, "ConnectionError").end_time is not None


def test_tracing_a_module_level_tool_leaves_the_tool_as_it_was() -> None:
    """Traced calls of a module-level tool wrap a copy: the tool itself gets no ``invoke``, during or after."""
    recorded = Traces()
    toolfold.otel.instrument(recorded.tracer_provider, recorded.meter_provider)
    try:
        for b in range(3):
            model = ScriptedModel([call("add", {"a": 1, "b": b}), "done"])
            Agent(model, tools=[add]).run("go")
            assert "invoke" not in add.__dict__
    finally:
        toolfold.otel.uninstrument()
    assert len(recorded.named("execute_tool")) == 3
    assert "invoke" not in add.__dict__
    assert add.invoke({"a": 1, "b": 2}) == 3


def test_a_marker_part_is_not_recorded_as_empty_reasoning(traces: Traces) -> None:
    """An answer's marker part (no text, no signature) is left out of gen_ai.output.messages."""
    from toolfold.runtime import ReasoningPart, TextPart

    toolfold.otel.instrument(traces.tracer_provider, traces.meter_provider, capture_content=True)
    marker = ReasoningPart("", None, "openai", {"audio": {"id": "audio_1"}})
    Agent(ScriptedModel([[TextPart("hello"), marker]])).run("hi")
    (chat,) = traces.named("chat")
    (message,) = json.loads(chat.attributes["gen_ai.output.messages"])
    assert message["parts"] == [{"type": "text", "content": "hello"}]


def _status(span: ReadableSpan) -> tuple[str, Any]:
    return span.status.status_code.name, span.attributes.get("error.type")


def test_calls_that_ended_before_ctrl_c_keep_their_outcomes_on_their_spans(
    traces: Traces,
) -> None:
    """Ctrl-C in a blocking round: the calls that ended are ok (or their error), not interrupted."""
    import signal
    import threading

    from toolfold.runtime.drive._shells import interrupt_waits

    ended, failed, release = threading.Event(), threading.Event(), threading.Event()

    @tool
    def quick(x: int) -> int:
        """Return at once.

        Args:
            x: A number.
        """
        ended.set()
        return x

    @tool
    def broken(reason: str) -> str:
        """Fail at once.

        Args:
            reason: Why.
        """
        failed.set()
        raise ValueError(reason)

    @tool
    def slow(x: int) -> int:
        """Send Ctrl-C once quick and broken ended, then wait to be released.

        Args:
            x: A number.
        """
        assert ended.wait(30)
        assert failed.wait(30)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        assert release.wait(30)
        return x

    model = ScriptedModel(
        [[call("quick", {"x": 1}), call("broken", {"reason": "r"}), call("slow", {"x": 2})], "d"]
    )
    agent = Agent(model, tools=[quick, broken, slow], name="ki")
    with pytest.raises(KeyboardInterrupt) as caught, interrupt_waits(release.set):
        agent.run("go")
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert [c.result is not None for c in state.calls] == [True, True, True]
    spans = {s.name: s for s in traces.named("execute_tool")}
    assert _status(spans["execute_tool quick"]) == ("UNSET", None)
    assert _status(spans["execute_tool slow"]) == ("UNSET", None)
    assert _status(spans["execute_tool broken"]) == ("ERROR", "error")


def test_a_cancelled_round_marks_only_the_unfinished_calls_interrupted(traces: Traces) -> None:
    """Cancelling an async round: the call that returned is ok, the one still running interrupted."""
    import asyncio

    async def main() -> None:
        returned, blocked = asyncio.Event(), asyncio.Event()

        @tool
        async def quick(x: int) -> int:
            """Return at once.

            Args:
                x: A number.
            """
            returned.set()
            return x

        @tool
        async def stuck(x: int) -> int:
            """Never return.

            Args:
                x: A number.
            """
            await returned.wait()
            blocked.set()
            await asyncio.Event().wait()
            return x

        model = ScriptedModel([[call("quick", {"x": 1}), call("stuck", {"x": 2})], "d"])
        run = asyncio.ensure_future(Agent(model, tools=[quick, stuck]).arun("go"))
        await blocked.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await run
        state = toolfold.state_of(caught.value)
        assert state is not None
        assert [c.result is not None for c in state.calls] == [True, False]

    asyncio.run(main())
    spans = {s.name: s for s in traces.named("execute_tool")}
    assert _status(spans["execute_tool quick"]) == ("UNSET", None)
    assert _status(spans["execute_tool stuck"]) == ("ERROR", "interrupted")


def test_a_resumptions_agent_span_counts_only_its_own_tokens(traces: Traces) -> None:
    """The resumed run's invoke_agent span has the usage of its own requests, not the first turn's."""
    model = ScriptedModel([call("pay", {"amount": 5}), "done"])
    agent = Agent(model, tools=[pay])
    first = agent.run("pay")
    (pending,) = first.state.pending_approvals
    second = agent.resume(RunState.from_json(first.state.to_json()), approvals={pending.id: True})
    spans = traces.named("invoke_agent")
    own = second.usage.input_tokens - first.usage.input_tokens
    assert own > 0
    assert [s.attributes["gen_ai.usage.input_tokens"] for s in spans] == [
        first.usage.input_tokens,
        own,
    ]
    assert spans[1].attributes["gen_ai.usage.output_tokens"] == (
        second.usage.output_tokens - first.usage.output_tokens
    )


def test_each_handoff_event_is_on_the_runs_span(traces: Traces) -> None:
    """Two handoffs in a row: both gen_ai.handoff events are on the run's span, none on an agent's."""
    refunds = Agent(ScriptedModel(["refunded"]), name="refunds")
    billing = Agent(
        ScriptedModel([call("transfer_to_refunds")]), name="billing", handoffs=[refunds]
    )
    triage = Agent(ScriptedModel([call("transfer_to_billing")]), name="triage", handoffs=[billing])
    assert triage.run("invoice").text == "refunded"
    (root,) = traces.named("invoke_agent triage")
    (middle,) = traces.named("invoke_agent billing")
    assert [e.attributes["gen_ai.agent.name"] for e in root.events] == ["billing", "refunds"]
    assert list(middle.events) == []


def test_sub_runs_of_two_live_runs_with_one_run_id_nest_in_their_own_traces(
    traces: Traces,
) -> None:
    """Two runs sharing a run_id at once: each sub-agent's span is under its own caller's call."""
    import threading

    met, asked = threading.Barrier(2, timeout=30), threading.Barrier(2, timeout=30)

    @tool
    def meet() -> str:
        """Wait until the other run's step has started too."""
        met.wait()
        return "met"

    def top(n: int) -> Agent:

        def answer(request: Any) -> str:
            asked.wait()  # both sub-runs have started: neither round has ended
            return f"sub {n} done"

        sub = Agent(FunctionModel(answer), name=f"sub{n}")
        steps = [[call("meet", {}), call(f"sub{n}", {"input": "x"})], "top done"]
        return Agent(
            ScriptedModel(steps), tools=[meet, sub.as_tool()], name=f"top{n}", max_concurrency=1
        )

    failed: list[BaseException] = []

    def run(n: int) -> None:
        try:
            top(n).run("go", run_id="conv-42")
        except BaseException as exc:  # (reported below)
            failed.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failed == []
    for n in (1, 2):
        (sub,) = traces.named(f"invoke_agent sub{n}")
        assert _parent_name(traces, sub) == f"execute_tool sub{n}"


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_stream_cut_after_reporting_usage_records_it(traces: Traces, how: str) -> None:
    """A traced stream that fails after its usage came: the chat span, the token metric and
    the error's state hold that usage."""
    from toolfold import StreamError, Usage
    from toolfold.runtime import ModelRequest, TextDelta, UsageUpdate

    billed = Usage(input_tokens=5000, output_tokens=1, requests=1)

    def events(request: ModelRequest) -> Iterator[object]:
        yield UsageUpdate(billed)
        yield TextDelta("word ")
        raise StreamError("the stream ended before the message finished", provider="p")

    agent = Agent(FunctionModel(lambda request: "x", stream_function=events), name="cut")

    async def drain() -> None:
        async for _ in agent.stream("hi"):
            pass

    with pytest.raises(StreamError) as caught:
        _ = list(agent.stream("hi")) if how == "sync" else asyncio.run(drain())
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.usage == billed
    chat = _chat_ended_as(traces, "StreamError")
    assert chat.attributes["gen_ai.usage.input_tokens"] == 5000
    assert chat.attributes["gen_ai.usage.output_tokens"] == 1
    tokens = {
        p.attributes["gen_ai.token.type"]: p.sum for p in traces.metric("gen_ai.client.token.usage")
    }
    assert tokens == {"input": 5000, "output": 1}
    (run,) = traces.named("invoke_agent")
    assert run.attributes["gen_ai.usage.input_tokens"] == 5000


def test_ctrl_c_in_a_traced_stream_after_its_usage_counts_it_in_the_state(traces: Traces) -> None:
    """Ctrl-C while a traced stream answers, after its usage came: the chat span, the run's
    span and the interruption's state each count it once."""
    from toolfold import Usage
    from toolfold.runtime import ModelRequest, TextDelta, UsageUpdate

    billed = Usage(input_tokens=5000, output_tokens=1, requests=1)

    def events(request: ModelRequest) -> Iterator[object]:
        yield UsageUpdate(billed)
        yield TextDelta("word ")
        raise KeyboardInterrupt

    agent = Agent(FunctionModel(lambda request: "x", stream_function=events), name="cut")
    with pytest.raises(KeyboardInterrupt) as caught:
        list(agent.stream("hi"))
    state = toolfold.state_of(caught.value)
    assert state is not None
    assert state.usage == billed
    chat = _chat_ended_as(traces, "KeyboardInterrupt")
    assert chat.attributes["gen_ai.usage.input_tokens"] == 5000
    (run,) = traces.named("invoke_agent")
    assert run.attributes["gen_ai.usage.input_tokens"] == 5000


@pytest.mark.parametrize("thrown", [KeyboardInterrupt, asyncio.CancelledError])
def test_an_interruption_thrown_into_a_traced_async_stream_counts_its_usage(
    traces: Traces, thrown: type[BaseException]
) -> None:
    """Ctrl-C or a cancellation thrown (``athrow``) into a traced async stream at the word the
    caller holds, after the usage came: the chat span ends with it (not a GeneratorExit), and
    the run's span and the interruption's state count the usage."""
    from toolfold import Usage
    from toolfold.runtime import ModelRequest, TextDelta, UsageUpdate

    billed = Usage(input_tokens=5000, output_tokens=1, requests=1)

    def events(request: ModelRequest) -> Iterator[object]:
        yield UsageUpdate(billed)
        yield TextDelta("word ")
        yield TextDelta("more")

    agent = Agent(FunctionModel(lambda request: "x", stream_function=events), name="cut")

    async def main() -> RunState | None:
        stream = agent.stream("hi").__aiter__()
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        with pytest.raises(thrown) as caught:
            await stream.athrow(thrown())
        return toolfold.state_of(caught.value)

    state = asyncio.run(main())
    assert state is not None
    assert state.usage == billed
    chat = _chat_ended_as(traces, thrown.__name__)
    assert chat.attributes["gen_ai.usage.input_tokens"] == 5000
    (run,) = traces.named("invoke_agent")
    assert run.attributes["gen_ai.usage.input_tokens"] == 5000


def test_a_traced_async_stream_cancelled_after_its_usage_counts_it_in_the_state(
    traces: Traces,
) -> None:
    """A task cancelled while its traced async stream waits, after the usage came: the
    CancelledError's state and the run's span count it."""
    from toolfold import Usage
    from toolfold.runtime import ModelRequest, StreamEvent, TextDelta, UsageUpdate

    billed = Usage(input_tokens=5000, output_tokens=1, requests=1)
    sent = asyncio.Event()

    class Cut(FunctionModel):
        async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
            yield UsageUpdate(billed)
            yield TextDelta("word ")
            sent.set()
            await asyncio.Future()  # (cancelled here)

    agent = Agent(Cut(lambda request: "x"), name="cut")
    states: list[RunState | None] = []

    async def consume() -> None:
        try:
            async for _ in agent.stream("hi"):
                pass
        except asyncio.CancelledError as exc:
            states.append(toolfold.state_of(exc))
            raise

    async def main() -> None:
        task = asyncio.create_task(consume())
        await sent.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    (state,) = states
    assert state is not None
    assert state.usage == billed
    chat = _chat_ended_as(traces, "CancelledError")
    assert chat.attributes["gen_ai.usage.input_tokens"] == 5000
    (run,) = traces.named("invoke_agent")
    assert run.attributes["gen_ai.usage.input_tokens"] == 5000


def _abandoned_sub_run_agents(slow: Any) -> Agent:
    sub = Agent(ScriptedModel([call("slow", {}), "sub done"]), tools=[slow], name="sub")
    return Agent(ScriptedModel([call("sub", {"input": "x"}), "top done"]), tools=[sub.as_tool()])


def test_a_stream_stopped_during_a_sub_run_leaves_no_error_on_the_sub_runs_span(
    traces: Traces,
) -> None:
    """Breaking out of a blocking stream at a sub-run's event: the sub-run's span is not an
    error (it stopped because the caller left, not on Ctrl-C)."""
    import threading

    from toolfold import SubRunEvent

    release = threading.Event()

    @tool
    def slow() -> str:
        """Wait until released."""
        assert release.wait(30)
        return "late"

    stream = iter(_abandoned_sub_run_agents(slow).stream("go"))
    for event in stream:
        if isinstance(event, SubRunEvent):
            break
    stream.close()
    release.set()
    for thread in threading.enumerate():
        if thread.name == "toolfold-step":
            thread.join(30)
    (sub,) = traces.named("invoke_agent sub")
    assert sub.status.status_code != StatusCode.ERROR, sub.attributes.get("error.type")
    assert "error.type" not in sub.attributes


def test_an_async_stream_stopped_during_a_sub_run_leaves_no_error_on_its_span(
    traces: Traces,
) -> None:
    """The same for an async stream closed at a sub-run's event: no CancelledError on it."""
    from toolfold import SubRunEvent

    @tool
    async def slow() -> str:
        """Never return."""
        await asyncio.Event().wait()
        return "late"

    async def main() -> None:
        stream = aiter(_abandoned_sub_run_agents(slow).stream("go"))
        async for event in stream:
            if isinstance(event, SubRunEvent):
                break
        await stream.aclose()

    asyncio.run(main())
    (sub,) = traces.named("invoke_agent sub")
    assert sub.status.status_code != StatusCode.ERROR, sub.attributes.get("error.type")


def test_ctrl_c_thrown_into_an_async_stream_at_a_sub_runs_event_traces_it_interrupted(
    traces: Traces,
) -> None:
    """Ctrl-C thrown (``athrow``) into an async stream at a sub-run's event interrupts the
    sub-run, as a cancellation of the stream's task there does: its span is an error (not
    left as if the caller had stopped iterating), and the state keeps the sub-run."""
    from toolfold import SubRunEvent

    @tool
    async def slow() -> str:
        """Never return."""
        await asyncio.Event().wait()
        return "late"

    async def main() -> RunState | None:
        stream = aiter(_abandoned_sub_run_agents(slow).stream("go"))
        async for event in stream:
            if isinstance(event, SubRunEvent):
                break
        with pytest.raises(KeyboardInterrupt) as caught:
            await stream.athrow(KeyboardInterrupt())
        return toolfold.state_of(caught.value)

    state = asyncio.run(main())
    assert state is not None
    assert [e.kind for e in state.log][-1] == "tool_suspended"
    (sub,) = traces.named("invoke_agent sub")
    assert sub.status.status_code == StatusCode.ERROR
    assert sub.attributes["error.type"] == "CancelledError"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_each_retry_is_an_event_on_the_chat_span(traces: Traces, mode: str) -> None:
    """A request sent again is a toolfold.retry event on its chat span (which retry, the wait,
    the failed attempt's error): two 503s then an answer showed one plain chat span."""
    answers = iter([503, 503, 200])
    ok = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }

    def answer(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        return httpx.Response(status, json=ok if status == 200 else {"error": {"message": "x"}})

    transport = httpx.MockTransport(answer)
    client: dict[str, Any] = (
        {"http_client": httpx.Client(transport=transport)}
        if mode == "sync"
        else {"async_http_client": httpx.AsyncClient(transport=transport)}
    )
    retry = RetryPolicy(initial_delay=0, jitter=0)  # (no wait: nothing sleeps)
    model = toolfold.model("openai:gpt-4o-mini", api_key="sk-x", retry=retry, **client)
    agent = Agent(model)
    if mode == "sync":
        agent.run("x")
    else:
        asyncio.run(agent.arun("x"))
    (chat,) = traces.named("chat")
    events = [(e.name, dict(e.attributes or {})) for e in chat.events]
    assert events == [
        (
            "toolfold.retry",
            {
                "toolfold.retry.number": number,
                "toolfold.retry.wait": 0.0,
                "error.type": "ServerError",
                "http.response.status_code": 503,
            },
        )
        for number in (1, 2)
    ]
