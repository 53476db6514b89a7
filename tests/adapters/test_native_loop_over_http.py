"""The whole tool loop against fake Anthropic and Ollama servers over real HTTP (127.0.0.1).

Blocking and streamed, sync and async: parallel calls, a tool error going
back with Anthropic's native ``is_error`` flag (Ollama has none: the text
says it), an approval with the run stored as JSON and resumed, and an
Anthropic thinking block that survives the JSON round trip to be sent back
unchanged.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_native import Calls, FakeAnthropic, FakeOllama, Text
from scripted_http import ScriptedServer

import toolfold
from toolfold import Agent, RunState, generate_text
from toolfold.runtime import TextDelta

WEATHER = {"Paris": "sunny, 22C", "Tokyo": "rainy, 18C"}
SCRIPT = (
    Calls((("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Tokyo"}))),
    Text("Paris is sunny (22C) and Tokyo is rainy (18C)."),
)
ANSWER = "Paris is sunny (22C) and Tokyo is rainy (18C)."
PROVIDERS = ["anthropic", "ollama"]


@toolfold.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name.
    """
    if city not in WEATHER:
        raise ValueError(f"no weather station in {city}")
    return WEATHER[city]


@toolfold.tool(requires_approval=True)
def book_trip(city: str) -> str:
    """Book a trip (a human approves it first).

    Args:
        city: Where to.
    """
    return f"booked a trip to {city}"


def _setup(
    provider: str, server: ScriptedServer, opened: list[Any], script: Any = SCRIPT, **fake: Any
) -> tuple[Any, Any]:
    if provider == "anthropic":
        brain: Any = FakeAnthropic(script, **fake)
        made = toolfold.model("anthropic:claude-test", base_url=server.url, api_key="k" * 24)
    else:
        brain = FakeOllama(script, **fake)
        made = toolfold.model("ollama:qwen3", base_url=server.url)
    server.handler = brain
    opened.append(made)
    return brain, made


def _results(provider: str, body: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """``(call id or tool name, content, error flag)`` of the results in a request body."""
    if provider == "ollama":
        return [
            (m["tool_name"], m["content"], "is_error" in m)
            for m in body["messages"]
            if m["role"] == "tool"
        ]
    return [
        (b["tool_use_id"], b["content"], b.get("is_error", False))
        for m in body["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


def _check_two_results(provider: str, brain: Any) -> None:
    assert brain.problems == []
    assert len(brain.bodies) == 2
    who = ("get_weather", "get_weather") if provider == "ollama" else ("toolu_0_0", "toolu_0_1")
    assert _results(provider, brain.bodies[1]) == [
        (who[0], "sunny, 22C", False),
        (who[1], "rainy, 18C", False),
    ]


USAGE = {"anthropic": (34, 10, 4), "ollama": (30, 10, 0)}  # input, output, cached


@pytest.mark.parametrize("provider", PROVIDERS)
def test_generate_text_runs_the_tool_loop(
    http_server: ScriptedServer, opened: list[Any], provider: str
) -> None:
    """Two parallel calls run, their results go back in the provider's shape, the text comes back."""
    brain, made = _setup(provider, http_server, opened)
    response = generate_text(made, "Weather in Paris and Tokyo?", tools=[get_weather])
    assert response.text == ANSWER
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == USAGE[provider]
    assert usage.requests == 2
    _check_two_results(provider, brain)
    assert brain.bodies[0].get("stream") in (None, False)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_streamed_run_yields_deltas_and_the_same_answer(
    http_server: ScriptedServer, opened: list[Any], provider: str
) -> None:
    """Agent.stream gets text in pieces and calls (fragmented for Anthropic) and ends like the blocking run."""
    brain, made = _setup(provider, http_server, opened)
    run = Agent(model=made, tools=[get_weather]).stream("Weather in Paris and Tokyo?")
    deltas = [e.text for e in run if isinstance(e, TextDelta)]
    assert "".join(deltas) == ANSWER
    assert len(deltas) > 1
    assert run.response.text == ANSWER
    assert run.response.usage.input_tokens == USAGE[provider][0]
    assert brain.bodies[0]["stream"] is True
    _check_two_results(provider, brain)


@pytest.mark.parametrize("streamed", [False, True], ids=["blocking", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_async_runs_over_http(
    http_server: ScriptedServer, opened: list[Any], provider: str, streamed: bool
) -> None:
    """The async driver and the async HTTP client run the same loop, blocking and streamed."""
    brain, made = _setup(provider, http_server, opened)
    agent = Agent(model=made, tools=[get_weather])

    async def main() -> str:
        if not streamed:
            return (await agent.arun("Weather in Paris and Tokyo?")).text
        run = agent.stream("Weather in Paris and Tokyo?")
        async for _ in run:
            pass
        return run.response.text

    assert asyncio.run(main()) == ANSWER
    _check_two_results(provider, brain)


@pytest.mark.parametrize("streamed", [False, True], ids=["blocking", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_tool_error_goes_back_with_the_native_flag(
    http_server: ScriptedServer, opened: list[Any], provider: str, streamed: bool
) -> None:
    """A failing tool's error reaches the model: ``is_error: true`` on Anthropic, the text on Ollama."""
    script = (Calls((("get_weather", {"city": "Atlantis"}),)), Text("No station there."))
    brain, made = _setup(provider, http_server, opened, script)
    agent = Agent(model=made, tools=[get_weather])
    if streamed:
        run = agent.stream("Weather in Atlantis?")
        for _ in run:
            pass
        response = run.response
    else:
        response = agent.run("Weather in Atlantis?")
    assert response.text == "No station there."
    assert brain.problems == []
    ((who, content, flagged),) = _results(provider, brain.bodies[1])
    assert "no weather station in Atlantis" in content
    assert flagged is (provider == "anthropic")
    assert who == ("toolu_0_0" if provider == "anthropic" else "get_weather")


@pytest.mark.parametrize("streamed", [False, True], ids=["blocking", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_approval_then_resume_from_json(
    http_server: ScriptedServer, opened: list[Any], provider: str, streamed: bool
) -> None:
    """A call waiting for approval survives JSON; resumed, it runs and its result goes back."""
    script = (Calls((("book_trip", {"city": "Paris"}),)), Text("Booked."))
    fake: dict[str, Any] = {"thinking": "The user wants a trip."} if provider == "anthropic" else {}
    brain, made = _setup(provider, http_server, opened, script, **fake)
    agent = Agent(model=made, tools=[book_trip])
    if streamed:
        run = agent.stream("Book Paris")
        for _ in run:
            pass
        first = run.response
    else:
        first = agent.run("Book Paris")
    assert first.finish_reason == "approval_required"
    saved = first.state.to_json()
    state = RunState.from_json(saved)
    (pending,) = state.pending_approvals
    if streamed:
        again = agent.resume_stream(state, approvals={pending.id: True})
        for _ in again:
            pass
        done = again.response
    else:
        done = agent.resume(state, approvals={pending.id: True})
    assert done.text == "Booked."
    assert brain.problems == []  # incl. the thinking block sent back unchanged after the JSON trip
    ((_, content, flagged),) = _results(provider, brain.bodies[1])
    assert (content, flagged) == ("booked a trip to Paris", False)
    if provider == "anthropic":
        reasoning = [p for p in state.messages[-1].parts if p.kind == "reasoning"]
        assert [(p.text, p.provider) for p in reasoning] == [
            ("The user wants a trip.", "anthropic")
        ]


def test_anthropic_parallel_switch_and_forced_tool_reach_the_wire(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """tool_choice='get_weather' and parallel_tool_calls=False become Anthropic's tool_choice object."""
    brain, made = _setup("anthropic", http_server, opened)
    generate_text(
        made,
        "Weather in Paris and Tokyo?",
        tools=[get_weather],
        tool_choice="get_weather",
        parallel_tool_calls=False,
    )
    assert brain.bodies[0]["tool_choice"] == {
        "type": "tool",
        "name": "get_weather",
        "disable_parallel_tool_use": True,
    }


def test_ollama_calls_without_ids_get_stable_ones(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Older Ollama servers send calls without ids: the run makes distinct, deterministic ones."""
    brain, made = _setup("ollama", http_server, opened, with_ids=False)
    response = generate_text(made, "Weather in Paris and Tokyo?", tools=[get_weather])
    assert response.text == ANSWER
    sent = [c["id"] for m in brain.bodies[1]["messages"] for c in m.get("tool_calls") or ()]
    assert len(set(sent)) == 2
    assert all(i.startswith("call_") for i in sent)
