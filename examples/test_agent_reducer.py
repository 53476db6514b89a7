"""Unit-testing an agent's logic with pytest: no model, no network, no clock.

The loop's core is two pure functions, ``reduce(state, event)`` and
``next_effect(state)``: feed it the events a model and the tools would
produce, and assert on what it decides next. Run it as a test file or a script:

    pytest examples/test_agent_reducer.py
    python examples/test_agent_reducer.py
"""

from __future__ import annotations

import pytest

from toolfold import Agent, tool
from toolfold.runtime import (
    CallModel,
    Finish,
    Message,
    ModelResponded,
    ModelResponse,
    RunConfig,
    RunTools,
    ToolCallPart,
    ToolReturned,
    ToolSpec,
    initial_state,
    next_effect,
    reduce,
)
from toolfold.testing import TestModel


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city name.
    """
    return f"18 degrees and sunny in {city}"


CONFIG = RunConfig(tools=[ToolSpec.from_tool(get_weather)], max_steps=2)


def _asks_for_weather(step: int) -> ModelResponded:
    call = ToolCallPart(f"call_{step}", "get_weather", '{"city": "Paris"}', {"city": "Paris"})
    return ModelResponded(ModelResponse(Message.assistant("", [call])))


def test_a_tool_call_is_run_then_the_model_is_asked_again() -> None:
    """A call leads to RunTools; its result leads back to CallModel with the result in."""
    state = initial_state("Weather in Paris?", CONFIG, run_id="run-1")
    assert isinstance(next_effect(state), CallModel)
    state = reduce(state, _asks_for_weather(1))
    effect = next_effect(state)
    assert isinstance(effect, RunTools)
    assert [c.call.name for c in effect.calls] == ["get_weather"]
    state = reduce(state, ToolReturned("call_1", "18 degrees"))
    assert isinstance(next_effect(state), CallModel)
    assert state.messages[-1].role == "tool"


def test_max_steps_stops_a_model_that_keeps_calling() -> None:
    """After max_steps model calls the run finishes with reason "max_steps"."""
    state = initial_state("Weather in Paris?", CONFIG, run_id="run-1")
    for step in (1, 2):
        state = reduce(state, _asks_for_weather(step))
        state = reduce(state, ToolReturned(f"call_{step}", "18 degrees"))
    assert isinstance(next_effect(state), Finish)
    assert state.finish_reason == "max_steps"


@pytest.mark.parametrize("city", ["Paris", "Oslo"])
def test_the_agent_end_to_end_on_a_test_model(city: str) -> None:
    """TestModel calls every tool once with schema-valid arguments, then answers."""
    agent = Agent(TestModel(text=f"Sunny in {city}."), tools=[get_weather])
    response = agent.run(f"Weather in {city}?")
    assert [c.name for c in response.steps[0].tool_calls] == ["get_weather"]
    assert response.text == f"Sunny in {city}."


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
