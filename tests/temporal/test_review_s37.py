"""What a review of durable runs found (session 37): errors a durable run raises as a local one does."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporal_runs import _worker
from temporal_servers import DevServer
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy

from toolfold import Agent, AuthenticationError, BadRequestError, ProviderError, ServerError
from toolfold.integrations.temporal import ActivitySettings, TemporalAgent
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
