"""A run's options given to `Agent(...)` are refused, not sent to the provider as settings."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from toolfold import Agent, Message, RunContext, UsageError, agenerate_text, generate_text, tool
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
    """agent.evolve(deps=...) is refused as Agent(deps=...) is, naming evolve()."""
    with pytest.raises(UsageError, match=r"^evolve\(\) got deps=: .*pass deps= to run\(\)"):
        Agent(TestModel()).evolve(deps={"user": "ann"})


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("prompt", "give the prompt to run() / arun() / stream(), e.g. agent.run(prompt, ...)"),
        ("state", "give the state to resume() / aresume() / resume_stream()"),
    ],
)
def test_a_run_methods_positional_parameter_given_to_agent_is_refused(
    option: str, hint: str
) -> None:
    """Agent(model, prompt=...) or state=... (run's and resume's first parameters) is a UsageError."""
    with pytest.raises(UsageError, match=f"^Agent\\(\\) got {option}=") as raised:
        Agent(TestModel(), **{option: "hi"})
    assert hint in str(raised.value)
    assert f"A model setting of that name goes in settings={{'{option}': ...}}" in str(raised.value)


_GENERATE_HINTS = {
    "history": "here the prompt, after any earlier messages, goes in messages",
    "prompt": "here the prompt, after any earlier messages, goes in messages",
    "approvals": "pass approvals= to resume() / aresume()",
    "tool_results": "pass tool_results= to resume() / aresume()",
    "message": "pass message= to resume() / aresume()",
    "state": "give the state to resume() / aresume()",
}


@pytest.mark.parametrize("option", sorted(_GENERATE_HINTS))
def test_generate_text_refuses_a_run_option_it_does_not_take(option: str) -> None:
    """generate_text(..., history=...) and resume's options are refused, not sent as settings."""
    sent: list[dict[str, Any]] = []

    def reply(request: ModelRequest) -> str:
        sent.append(dict(request.settings))
        return "ok"

    with pytest.raises(UsageError, match=f"^generate_text\\(\\) got {option}=") as raised:
        generate_text(FunctionModel(reply), "hi", **{option: []})
    assert _GENERATE_HINTS[option] in str(raised.value)
    assert f"goes in Agent(model, settings={{'{option}': ...}})" in str(raised.value)
    assert sent == []


def test_generate_text_history_hint_is_a_call_that_works() -> None:
    """The call generate_text(..., history=) hints at runs, prompt after the earlier messages."""
    seen: list[tuple[str, ...]] = []

    def reply(request: ModelRequest) -> str:
        seen.append(tuple(message.text for message in request.messages))
        return "ok"

    model = FunctionModel(reply)
    history = generate_text(model, "hello").messages
    with pytest.raises(UsageError) as raised:
        generate_text(model, "And now?", history=history)
    hinted = re.search(r"e\.g\. messages=(\[.*?\])", str(raised.value))
    assert hinted is not None
    namespace = {"history": history, "prompt": "And now?", "Message": Message}
    messages = eval(hinted.group(1), namespace)  # the hint's own example, run as written
    assert generate_text(model, messages).text == "ok"
    assert seen[-1] == ("hello", "ok", "And now?")


def test_agenerate_text_refuses_a_run_option_naming_itself() -> None:
    """agenerate_text(..., approvals=...) is refused naming agenerate_text()."""
    with pytest.raises(UsageError, match=r"^agenerate_text\(\) got approvals=: "):
        asyncio.run(agenerate_text(TestModel(), "hi", approvals={}))


def test_generate_text_keeps_its_own_run_options_and_settings() -> None:
    """generate_text's deps=, run_id= reach the run and temperature= stays a model setting."""
    sent: list[dict[str, Any]] = []

    def reply(request: ModelRequest) -> Any:
        sent.append(dict(request.settings))
        if request.messages[-1].role == "tool":
            return request.messages[-1].tool_results[0].content
        return FunctionModel.call("whoami", {})

    response = generate_text(
        FunctionModel(reply), "who?", tools=[whoami], deps="ann", run_id="r-1", temperature=0
    )
    assert response.text == "ann"
    assert response.state.run_id == "r-1"
    assert sent == [{"temperature": 0}] * 2


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
