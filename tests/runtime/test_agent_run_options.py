"""A run's options given to `Agent(...)` are refused, not sent to the provider as settings."""

from __future__ import annotations

from typing import Any

import pytest

from toolfold import Agent, RunContext, UsageError, tool
from toolfold.runtime import ModelRequest
from toolfold.testing import FunctionModel, TestModel


@tool
def whoami(ctx: RunContext[Any]) -> str:
    """Who the run is for."""
    return str(ctx.deps)


@pytest.mark.parametrize(
    ("option", "value", "methods"),
    [
        ("deps", {"user": "ann"}, "run() / arun() / stream() / resume() / aresume()"),
        ("history", [], "run() / arun() / stream()"),
        ("run_id", "r-1", "run() / arun() / stream()"),
        ("on_event", print, "run() / arun() / stream() / resume() / aresume()"),
        ("on_step", print, "run() / arun() / stream() / resume() / aresume()"),
        ("approvals", {}, "resume() / aresume()"),
    ],
)
def test_a_run_option_given_to_agent_is_refused_naming_where_it_goes(
    option: str, value: Any, methods: str
) -> None:
    """Agent(model, deps=...) and the like are a UsageError naming the methods that take it."""
    with pytest.raises(UsageError, match=f"Agent\\(\\) got {option}=") as raised:
        Agent(TestModel(), **{option: value})
    assert f"pass {option}= to {methods}" in str(raised.value)


def test_evolve_refuses_a_run_option_too() -> None:
    """agent.evolve(deps=...) is refused as Agent(deps=...) is."""
    with pytest.raises(UsageError, match=r"pass deps= to run\(\)"):
        Agent(TestModel()).evolve(deps={"user": "ann"})


def test_deps_reach_tools_through_run_and_settings_stay_model_settings() -> None:
    """Deps given to run() reach the tool; temperature= and settings= stay model settings."""
    sent: list[dict[str, Any]] = []

    def reply(request: ModelRequest) -> Any:
        sent.append(dict(request.settings))
        if request.messages[-1].role == "tool":
            return request.messages[-1].tool_results[0].content
        return FunctionModel.call("whoami", {})

    agent = Agent(FunctionModel(reply), tools=[whoami], temperature=0, settings={"seed": 1})
    assert agent.run("who?", deps="ann").text == "ann"
    assert sent == [{"seed": 1, "temperature": 0}] * 2
