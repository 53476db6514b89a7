"""Activity results over a size limit: an image in a tool result, a model's answer over
Temporal's payload limit, an ``as_tool(output=...)`` result: each is measured as sent, on a
real dev server, and fails or becomes an error result at once, never retried; and an activity
called directly, which returns its result encoded."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from temporal_runs import _activity_environment, _decoded, _worker
from temporal_servers import DevServer
from temporalio.client import Client
from temporalio.common import RawValue, RetryPolicy
from temporalio.converter import ExternalStorage
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from toolfold import Agent, ImagePart, ModelResponse, RunError, TextPart, ToolCallPart, tool
from toolfold.integrations.temporal import (
    ActivitySettings,
    FileStorageDriver,
    TemporalAgent,
    ToolCallInput,
    ToolfoldPayloadConverter,
    ToolfoldPlugin,
)
from toolfold.integrations.temporal._activities import _within
from toolfold.runtime import ModelRequest, StreamEvent, ToolInvocation, next_effect
from toolfold.runtime.core._events import ToolReturned
from toolfold.testing import FunctionModel

# Few, quick retries: a result Temporal refuses is retried until they run out.
SETTINGS = ActivitySettings(
    retry_policy=RetryPolicy(
        initial_interval=timedelta(milliseconds=50), backoff_coefficient=1.0, maximum_attempts=3
    )
)
IMAGE = b"\x89PNG" + b"\0" * 1_700_000  # 1.7 MB: 2.3 MB as base64, over the 2 MB payload limit
ANSWER = "a" * 2_300_000  # over the 2 MB payload limit


def _results(request: ModelRequest) -> list[Any]:
    return [r for m in request.messages for r in m.tool_results]


def _checked(returned: ToolReturned, limit: int) -> ToolReturned:
    """What a tool activity sends for ``returned`` under a result limit of ``limit`` bytes."""
    checked: ToolReturned = _decoded(
        _activity_environment().run(_within, returned, "shot", limit), ToolReturned
    )
    return checked


def test_the_result_limit_counts_an_images_bytes_as_the_payload_carries_them() -> None:
    """A 3,000-byte image (4,000 as base64) with 7 bytes of text is over a 3,000-byte limit
    (the image counts, not the text alone), and within a 5,000-byte one; the error names the size."""
    returned = ToolReturned(
        "c1", "screen:", parts=(TextPart("screen:"), ImagePart(b"\0" * 3000, "image/png"))
    )
    assert _checked(returned, 5000) == returned
    refused = _checked(returned, 3000)
    assert refused.is_error
    size = int(refused.content.split(" is ", 1)[1].split(" bytes", 1)[0])
    assert 4000 < size < 4200  # (and the JSON around the parts)
    assert "over the 3000-byte limit for results of durable runs" in refused.content


def test_the_result_limit_counts_a_texts_json_escapes() -> None:
    """A text of 600 newlines is 1,200 bytes in the payload (each an escape): over a limit of 1,000."""
    assert _checked(ToolReturned("c1", "\n" * 600), 1000).is_error
    assert not _checked(ToolReturned("c1", "\n" * 400), 1000).is_error


@tool
def greet(name: str) -> str:
    """Greet someone.

    Args:
        name: Who to greet.
    """
    return f"Hello, {name}!"


def test_an_activity_called_directly_returns_its_result_encoded_by_toolfolds_converter() -> None:
    """Run in an ActivityEnvironment with toolfold's converter (as TemporalAgent.activities says),
    the model and tool activities return RawValues that decode to the answer and the result;
    temporalio's default converter cannot encode them: a TypeError naming the type."""
    agent = TemporalAgent(Agent(FunctionModel(lambda request: "hi"), tools=[greet], name="direct"))
    model_request, run_greet = agent.activities
    effect = next_effect(agent.agent._start("hi", (), "r1"))
    invocation = ToolInvocation(ToolCallPart("c1", "greet", '{"name": "Ada"}'), 0, 1, "r1:1:0")
    env = ActivityEnvironment()
    env.payload_converter = ToolfoldPayloadConverter()

    answer = asyncio.run(env.run(model_request, effect))
    assert isinstance(answer, RawValue)
    assert env.payload_converter.from_payload(answer.payload, ModelResponse).text == "hi"
    returned = asyncio.run(env.run(run_greet, ToolCallInput(invocation, run_id="r1")))
    assert isinstance(returned, RawValue)
    result = env.payload_converter.from_payload(returned.payload, ToolReturned)
    assert (result.content, result.is_error) == ("Hello, Ada!", False)

    with pytest.raises(TypeError, match="ModelResponse is not JSON serializable"):
        asyncio.run(ActivityEnvironment().run(model_request, effect))


SHOTS: list[str] = []


@tool
def shot() -> list[Any]:
    """A screenshot."""
    SHOTS.append("shot")
    return ["screen:", ImagePart(IMAGE, "image/png")]


def _screenshot(request: ModelRequest) -> Any:
    done = _results(request)
    return done[0].content if done else FunctionModel.call("shot", {})


def test_a_tool_result_holding_a_large_image_becomes_an_error_result_with_the_tool_run_once(
    server: DevServer,
) -> None:
    """A 1.7 MB image, over max_result_bytes, reaches the model as the error result naming the
    limit; the tool ran once (it is not sent for Temporal to refuse, which would run the tool
    again until the retries ran out, then fail the run with a bare ActivityError)."""
    agent = TemporalAgent(
        Agent(FunctionModel(_screenshot), tools=[shot], name="sizedshot"), settings=SETTINGS
    )
    SHOTS.clear()

    async def go() -> Any:
        async with _worker(server, [agent]) as (client, queue):
            return await agent.run(client, "go", id=f"sized-{uuid.uuid4().hex}", task_queue=queue)

    response = asyncio.run(go())
    assert SHOTS == ["shot"]
    size = int(response.text.split(" is ", 1)[1].split(" bytes", 1)[0])
    assert size > len(IMAGE) * 4 // 3
    assert response.text.startswith("the result of tool 'shot' is ")
    assert "over the 1000000-byte limit for results of durable runs" in response.text


DUMPS: list[int] = []


@tool
def dump(size: int) -> str:
    """A result of ``size`` bytes.

    Args:
        size: How many bytes.
    """
    DUMPS.append(size)
    return "y" * size


def _dumps(request: ModelRequest) -> Any:
    done = _results(request)
    return done[0].content if done else FunctionModel.call("dump", {"size": 2_500_000})


def test_a_tool_result_over_the_payload_limit_within_max_result_bytes_is_an_error_result(
    server: DevServer,
) -> None:
    """max_result_bytes=3,000,000 without external storage: a 2.5 MB result, within it but over
    Temporal's payload limit, is the error result naming that limit; the tool ran once."""
    settings = attrs.evolve(SETTINGS, max_result_bytes=3_000_000)
    agent = TemporalAgent(
        Agent(FunctionModel(_dumps), tools=[dump], name="sizeddump"), settings=settings
    )
    DUMPS.clear()

    async def go() -> Any:
        async with _worker(server, [agent]) as (client, queue):
            return await agent.run(client, "go", id=f"sized-{uuid.uuid4().hex}", task_queue=queue)

    response = asyncio.run(go())
    assert DUMPS == [2_500_000]
    assert response.text.startswith("the result of tool 'dump' is ")
    assert "bytes as its payload, over Temporal's 2097152-byte payload limit" in response.text


ASKED: list[str] = []


def _huge(request: ModelRequest) -> str:
    ASKED.append("asked")
    return ANSWER


async def _streams(context: Any, events: AsyncIterator[StreamEvent]) -> None:
    async for _ in events:
        pass


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_a_model_answer_over_the_payload_limit_fails_the_run_at_once_with_its_state(
    server: DevServer, streamed: bool
) -> None:
    """A 2.3 MB answer fails the run with a RunError naming the model activity and the limit,
    its .state the run before that request with the billed answer counted; the model was
    asked once (the request is not retried, nor the answer sent for Temporal to refuse)."""
    name = f"sizedhuge{'streamed' if streamed else ''}"
    agent = TemporalAgent(
        Agent(FunctionModel(_huge), name=name),
        settings=SETTINGS,
        event_stream_handler=_streams if streamed else None,
    )
    ASKED.clear()

    async def go() -> RunError:
        async with _worker(server, [agent]) as (client, queue):
            with pytest.raises(RunError) as caught:
                await agent.run(client, "go", id=f"sized-{uuid.uuid4().hex}", task_queue=queue)
            return caught.value

    error = asyncio.run(go())
    assert ASKED == ["asked"]
    message = str(error)
    assert message.startswith(f"the answer of activity '{name}__model_request' is ")
    size = int(message.split(" is ", 1)[1].split(" bytes", 1)[0])
    assert size > len(ANSWER)
    assert "over Temporal's 2097152-byte payload limit: the request is not retried" in message
    assert error.state is not None
    assert error.state.phase == "awaiting_model"
    assert error.state.usage.requests == 1  # the answer was billed: counted, not taken
    assert error.state.messages == agent.agent._start("go", (), "x").messages


def _asks_helper(request: ModelRequest) -> Any:
    done = _results(request)
    return done[0].content if done else FunctionModel.call("ask", {"input": "hi"})


def test_a_sub_runs_answer_over_the_payload_limit_is_its_calls_error_result(
    server: DevServer,
) -> None:
    """An agent used as a tool whose model answers 2.3 MB: its call's error result names the
    activity; the run goes on (as a sub-run's failed request does), the model asked once."""
    helper = Agent(FunctionModel(_huge), name="helper")
    agent = TemporalAgent(
        Agent(
            FunctionModel(_asks_helper),
            tools=[helper.as_tool(name="ask", description="Ask.")],
            name="sizedouter",
        ),
        settings=SETTINGS,
    )
    ASKED.clear()

    async def go() -> Any:
        async with _worker(server, [agent]) as (client, queue):
            return await agent.run(client, "go", id=f"sized-{uuid.uuid4().hex}", task_queue=queue)

    response = asyncio.run(go())
    assert ASKED == ["asked"]
    assert response.text.startswith(
        "Error: PayloadTooLargeError: the answer of activity 'sizedouter.ask__model_request' is "
    )


OUTPUTS: list[str] = []


def _big_output(response: Any) -> str:
    OUTPUTS.append("output")
    return "z" * 1_500_000


def test_an_output_functions_result_over_the_limit_becomes_an_error_result(
    server: DevServer,
) -> None:
    """as_tool(output=fn) giving 1.5 MB, over max_result_bytes: the call's error result names
    the limit, the function ran once."""
    helper = Agent(FunctionModel(lambda request: "fine"), name="helper")
    ask = helper.as_tool(name="ask", description="Ask.", output=_big_output)
    agent = TemporalAgent(
        Agent(FunctionModel(_asks_helper), tools=[ask], name="sizedoutput"), settings=SETTINGS
    )
    OUTPUTS.clear()

    async def go() -> Any:
        async with _worker(server, [agent]) as (client, queue):
            return await agent.run(client, "go", id=f"sized-{uuid.uuid4().hex}", task_queue=queue)

    response = asyncio.run(go())
    assert OUTPUTS == ["output"]
    assert response.text.startswith("the result of tool 'ask' is 1500000 bytes, over the ")
    assert "1000000-byte limit" in response.text


def test_a_model_answer_over_the_payload_limit_goes_by_reference_with_external_storage(
    server: DevServer, tmp_path: Path
) -> None:
    """With external storage the answer is not limited: a 2.3 MB answer is the run's answer."""
    storage = ExternalStorage(drivers=[FileStorageDriver(tmp_path / "payloads")])
    agent = TemporalAgent(Agent(FunctionModel(_huge), name="sizedstored"), settings=SETTINGS)

    async def go() -> Any:
        client = await Client.connect(
            server.address, plugins=[ToolfoldPlugin([agent], external_storage=storage)]
        )
        queue = f"q-{uuid.uuid4().hex}"
        async with Worker(client, task_queue=queue):
            return await agent.run(client, "go", id=f"sized-{uuid.uuid4().hex}", task_queue=queue)

    assert asyncio.run(go()).text == ANSWER
