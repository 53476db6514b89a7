"""What a review of durable runs found (session 37): errors a durable run raises as a local one does."""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporal_runs import _client, _worker
from temporal_servers import DevServer
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.converter import (
    BinaryNullPayloadConverter,
    BinaryPlainPayloadConverter,
    BinaryProtoPayloadConverter,
    CompositePayloadConverter,
    DataConverter,
    JSONProtoPayloadConverter,
)

from toolfold import (
    Agent,
    AuthenticationError,
    BadRequestError,
    ProviderError,
    ServerError,
    ToolDefinitionError,
    ToolfoldError,
    UsageError,
    tool,
)
from toolfold.integrations.temporal import (
    ActivitySettings,
    TemporalAgent,
    ToolfoldJSONPayloadConverter,
    ToolfoldPlugin,
)
from toolfold.integrations.temporal import _agent as temporal_agent
from toolfold.local._paths import LocalSetupError
from toolfold.mcp._client import MCPError
from toolfold.runtime import ModelRequest
from toolfold.testing import FunctionModel


def _refused(error: ProviderError) -> Any:
    def answer(request: ModelRequest) -> Any:
        raise error

    return answer


@pytest.mark.parametrize(
    "error",
    [
        AuthenticationError("401 bad key", provider="test", status_code=401),
        BadRequestError("400 context too long", provider="test", status_code=400),
    ],
)
def test_a_top_level_model_call_failing_for_good_raises_the_providers_error_with_the_state(
    server: DevServer, error: ProviderError
) -> None:
    """handle.result() raises the provider's error class (as a local run does) with .state, not Temporal's WorkflowFailureError."""
    name = f"s37refused{type(error).__name__.lower()}"
    agent = TemporalAgent(Agent(FunctionModel(_refused(error)), name=name))

    async def go() -> BaseException:
        async with _worker(server, [agent]) as (client, queue):
            handle = await agent.start(client, "hi", id=f"s37-{uuid.uuid4().hex}", task_queue=queue)
            with pytest.raises(ProviderError) as caught:
                await handle.result()
            return caught.value

    durable = asyncio.run(go())
    with pytest.raises(ProviderError) as locally:
        agent.agent.run("hi")
    assert type(durable) is type(locally.value) is type(error)
    assert str(durable) == str(locally.value) == str(error)
    assert isinstance(durable.__cause__, WorkflowFailureError)
    state = durable.state  # type: ignore[attr-defined]
    assert state is not None
    assert (state.phase, state.step) == (locally.value.state.phase, locally.value.state.step)  # type: ignore[attr-defined]
    assert state.messages == locally.value.state.messages  # type: ignore[attr-defined]


def test_a_retryable_provider_error_with_the_retries_used_up_raises_its_class(
    server: DevServer,
) -> None:
    """A ServerError retried until the retry policy's attempts are used up raises ServerError on the client."""
    policy = RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=10))
    settings = ActivitySettings(retry_policy=policy)
    error = ServerError("503 down", provider="test", status_code=503)
    agent = TemporalAgent(Agent(FunctionModel(_refused(error)), name="s37down"), settings=settings)

    async def go() -> BaseException:
        async with _worker(server, [agent]) as (client, queue):
            with pytest.raises(ServerError) as caught:
                await agent.run(client, "hi", id=f"s37-{uuid.uuid4().hex}", task_queue=queue)
            return caught.value

    assert str(asyncio.run(go())) == "503 down"


echo = TemporalAgent(Agent(FunctionModel(lambda request: "hi"), name="s37echo"))


def test_a_client_connected_without_the_plugin_is_refused_saying_to_connect_it_with_the_plugin(
    server: DevServer,
) -> None:
    """start(), run() and the handle's methods on a client without ToolfoldPlugin raise a UsageError naming the fix, not a bare TypeError."""

    async def go() -> list[str]:
        plain = await Client.connect(server.address)
        handle = echo.handle(plain, "s37-plain")
        refused = []
        for call in (
            lambda: echo.start(plain, "hi", id="s37-plain", task_queue="s37-none"),
            lambda: echo.run(plain, "hi", id="s37-plain", task_queue="s37-none"),
            handle.result,
            handle.state,
            handle.suspended,
            lambda: handle.approve("call_1"),
        ):
            with pytest.raises(UsageError) as raised:
                await call()
            refused.append(str(raised.value))
        return refused

    started, ran, *handled = asyncio.run(go())
    fix = "connect the client with plugins=[ToolfoldPlugin(...)]"
    assert started.startswith("TemporalAgent.start(): the client has no toolfold data converter")
    assert fix in started
    assert ran == started
    methods = ["result", "state", "suspended", "approve"]
    assert [m.split("(")[0] for m in handled] == [f"AgentHandle.{m}" for m in methods]
    assert all(fix in m for m in handled)


def test_a_handle_on_a_client_without_the_plugin_still_gives_temporals_raw_operations(
    server: DevServer,
) -> None:
    """handle(plain_client, id).workflow.describe() and .cancel() work: only the handle's own methods need the plugin."""

    async def go() -> tuple[Any, list[str]]:
        id = f"s37-raw-{uuid.uuid4().hex}"
        await echo.start(await _client(server, [echo]), "hi", id=id, task_queue="s37-nobody")
        plain = await Client.connect(server.address)
        handle = echo.handle(plain, id)
        running = (await handle.workflow.describe()).status
        await handle.workflow.cancel()
        history = await handle.workflow.fetch_history()
        return running, [EventType.Name(e.event_type) for e in history.events]

    running, events = asyncio.run(go())
    assert running == WorkflowExecutionStatus.RUNNING
    assert "EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED" in events


class _Composed(CompositePayloadConverter):
    """A user's own payload converter: Temporal's, with toolfold's JSON converter composed in."""

    def __init__(self) -> None:
        super().__init__(
            BinaryNullPayloadConverter(),
            BinaryPlainPayloadConverter(),
            JSONProtoPayloadConverter(),
            BinaryProtoPayloadConverter(),
            ToolfoldJSONPayloadConverter(),
        )


def test_a_client_whose_own_composed_converter_holds_toolfolds_json_converter_runs(
    server: DevServer,
) -> None:
    """A client whose CompositePayloadConverter holds ToolfoldJSONPayloadConverter (no plugin) runs an agent, not refused."""

    async def go() -> str:
        async with _worker(server, [echo]) as (_, queue):
            composed = await Client.connect(
                server.address, data_converter=DataConverter(payload_converter_class=_Composed)
            )
            response = await echo.run(
                composed, "hi", id=f"s37-composed-{uuid.uuid4().hex}", task_queue=queue
            )
            return response.text

    assert asyncio.run(go()) == "hi"


def test_a_provider_failed_run_with_no_worker_left_raises_its_error_without_its_state(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """result() of a run failed by a provider error, with no worker running, raises the provider's class (.state None), not Temporal's RPCError after the query's wait."""
    monkeypatch.setattr(temporal_agent, "_STATE_TIMEOUT", timedelta(seconds=1))
    error = AuthenticationError("401 bad key", provider="test", status_code=401)
    agent = TemporalAgent(Agent(FunctionModel(_refused(error)), name="s37gone"))

    async def go() -> BaseException:
        id = f"s37-gone-{uuid.uuid4().hex}"
        async with _worker(server, [agent]) as (client, queue):
            handle = await agent.start(client, "hi", id=id, task_queue=queue)
            with pytest.raises(AuthenticationError):
                await handle.result()
        # the worker is stopped: nobody answers the state query
        with pytest.raises(ProviderError) as caught:
            await agent.handle(client, id).result()
        return caught.value

    failed = asyncio.run(go())
    assert type(failed) is AuthenticationError
    assert str(failed) == "401 bad key"
    assert failed.state is None  # type: ignore[attr-defined]
    assert isinstance(failed.__cause__, WorkflowFailureError)


def test_a_client_that_is_none_is_refused_naming_the_argument() -> None:
    """start(None, ...) and handle(None, ...) raise a UsageError naming client, not an AttributeError."""
    with pytest.raises(UsageError) as started:
        asyncio.run(echo.start(None, "hi", id="s37-none", task_queue="q"))  # type: ignore[arg-type]
    with pytest.raises(UsageError) as handled:
        echo.handle(None, "s37-none")  # type: ignore[arg-type]
    assert str(started.value).startswith(
        "TemporalAgent.start(): client must be a temporalio.client.Client, got NoneType None"
    )
    assert str(handled.value).startswith("TemporalAgent.handle(): client must be a temporalio")


def test_the_plugin_given_one_agent_not_in_a_list_says_to_list_it() -> None:
    """ToolfoldPlugin(agent) and ToolfoldPlugin([Agent(...)]) raise a UsageError saying what to pass."""
    with pytest.raises(UsageError) as one:
        ToolfoldPlugin(echo)  # type: ignore[arg-type]
    with pytest.raises(UsageError) as plain:
        ToolfoldPlugin([echo.agent])  # type: ignore[list-item]
    assert str(one.value).startswith(
        "ToolfoldPlugin(): agents must be a list of TemporalAgent, got TemporalAgent "
    )
    assert str(one.value).endswith(" (ToolfoldPlugin([agent]))")
    assert str(plain.value).startswith(
        "ToolfoldPlugin(): agents[0] must be a TemporalAgent, got Agent "
    )
    assert str(plain.value).endswith(" (TemporalAgent(agent))")


_RAN: list[str] = []


@tool
async def flaky_library(kind: str) -> str:
    """Call a library that raises CancelledError of its own (no cancellation).

    Args:
        kind: What to ask.
    """
    _RAN.append(kind)
    raise asyncio.CancelledError("lib said cancelled")


def _call_then_answer(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if last.role == "tool":
        result = last.tool_results[0]
        return f"is_error={result.is_error}: {result.content}"
    return FunctionModel.call("flaky_library", {"kind": "x"})


def test_a_tool_raising_cancelled_error_itself_is_its_error_result_not_retried(
    server: DevServer,
) -> None:
    """A tool that raises asyncio.CancelledError with no cancellation gives the model its error result, run once, not a retried activity."""
    policy = RetryPolicy(maximum_attempts=2, initial_interval=timedelta(milliseconds=10))
    agent = TemporalAgent(
        Agent(FunctionModel(_call_then_answer), tools=[flaky_library], name="s37cancelling"),
        settings=ActivitySettings(retry_policy=policy),
    )
    _RAN.clear()

    async def go() -> str:
        async with _worker(server, [agent]) as (client, queue):
            response = await agent.run(
                client, "go", id=f"s37-cancel-{uuid.uuid4().hex}", task_queue=queue
            )
            return response.text

    text = asyncio.run(go())
    # (Python 3.10 loses a CancelledError's message on its way out of the tool's task.)
    said = "" if sys.version_info < (3, 11) else ": lib said cancelled"
    assert text == f"is_error=True: Error: CancelledError{said}"
    assert _RAN == ["x"]  # run once: the activity did not fail, so nothing was retried


@pytest.mark.parametrize(
    ("type_name", "rebuilt"),
    [
        ("RateLimitError", "RateLimitError"),
        ("MalformedResponseError", "MalformedResponseError"),
        ("ModelConfigError", "ModelConfigError"),
        ("UsageError", "UsageError"),
        ("ToolDefinitionError", None),  # made from a qualname and problems, not a message
        ("RunError", None),  # a run's failure: its type carries the 'toolfold.' prefix
        ("ValueError", None),
        (None, None),
    ],
)
def test_an_activity_failure_comes_back_as_the_toolfold_class_it_names(
    type_name: str | None, rebuilt: str | None
) -> None:
    """An ApplicationError naming a toolfold error made from its message alone is rebuilt as that class, with its message."""
    from temporalio.exceptions import ApplicationError

    from toolfold.integrations.temporal._activities import rebuilt_error

    made = rebuilt_error(ApplicationError("the message", type=type_name))
    assert (type(made).__name__ if made is not None else None) == rebuilt
    assert made is None or str(made) == "the message"


@pytest.mark.parametrize(
    ("exc", "rebuilt"),
    [
        (LocalSetupError("the server did not start"), "LocalSetupError"),
        (MCPError("files", "it crashed"), "MCPError"),
        (ToolDefinitionError("f", ["bad"]), None),  # made from a qualname and problems
    ],
)
def test_a_toolfold_error_outside_toolfold_errors_comes_back_as_its_class(
    exc: ToolfoldError, rebuilt: str | None
) -> None:
    """LocalSetupError and MCPError (not in toolfold._errors) come back as their class from the details an activity's failure carries."""
    from temporalio.exceptions import ApplicationError

    from toolfold.integrations.temporal._activities import _details, rebuilt_error

    made = rebuilt_error(ApplicationError(str(exc), *_details(exc), type=type(exc).__name__))
    assert (type(made).__name__ if made is not None else None) == rebuilt
    assert made is None or str(made) == str(exc)
    if isinstance(made, MCPError):
        assert made.server == "files"


def test_a_third_party_class_named_like_a_toolfold_error_is_not_rebuilt_as_toolfolds() -> None:
    """A failure whose details name another module's AuthenticationError is not rebuilt; one with no details (an older worker's) still is, by its name."""
    from temporalio.exceptions import ApplicationError

    from toolfold.integrations.temporal._activities import rebuilt_error

    theirs = ApplicationError("401", "class:openai:AuthenticationError", type="AuthenticationError")
    older = ApplicationError("401", type="AuthenticationError")
    assert rebuilt_error(theirs) is None
    assert type(rebuilt_error(older)) is AuthenticationError


class AuthenticationError3p(Exception):
    """A library's own error (as openai.AuthenticationError), raised by a custom model."""


AuthenticationError3p.__name__ = "AuthenticationError"
AuthenticationError3p.__qualname__ = "AuthenticationError"


def test_a_custom_models_own_error_named_like_a_toolfold_one_comes_back_raw(
    server: DevServer,
) -> None:
    """A third-party AuthenticationError escaping a custom model is Temporal's WorkflowFailureError on the client, not toolfold's AuthenticationError."""
    policy = RetryPolicy(maximum_attempts=1)

    def refuse(request: ModelRequest) -> Any:
        raise AuthenticationError3p("their 401")

    def setup(request: ModelRequest) -> Any:
        raise LocalSetupError("the local server did not start")

    theirs = TemporalAgent(
        Agent(FunctionModel(refuse), name="s37theirs"),
        settings=ActivitySettings(retry_policy=policy),
    )
    local = TemporalAgent(
        Agent(FunctionModel(setup), name="s37setup"), settings=ActivitySettings(retry_policy=policy)
    )

    async def go() -> tuple[BaseException, BaseException]:
        caught = []
        async with _worker(server, [theirs, local]) as (client, queue):
            for agent in (theirs, local):
                handle = await agent.start(
                    client, "hi", id=f"s37-3p-{uuid.uuid4().hex}", task_queue=queue
                )
                with pytest.raises((WorkflowFailureError, ToolfoldError)) as raised:
                    await handle.result()
                caught.append(raised.value)
        return caught[0], caught[1]

    raw, setup_error = asyncio.run(go())
    assert type(raw) is WorkflowFailureError
    assert type(setup_error) is LocalSetupError
    assert str(setup_error) == "the local server did not start"
