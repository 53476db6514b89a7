"""The whole tool loop against fake Gemini and Responses servers over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_gemini_responses import FakeGemini, FakeResponses
from fake_openai import Calls, Text
from scripted_http import ScriptedServer
from test_native_loop_over_http import ANSWER, SCRIPT, book_trip, get_weather

import toolfold
from toolfold import Agent, generate_text
from toolfold.runtime import RunState, TextDelta

PROVIDERS = ["gemini-sse", "gemini-json", "responses"]


def _setup(
    provider: str, server: ScriptedServer, opened: list[Any], script: Any = SCRIPT
) -> tuple[Any, Any]:
    if provider == "responses":
        fake: Any = FakeResponses(script)
        model = toolfold.model(
            "openai-responses:gpt-5-mini", base_url=f"{server.url}/v1", api_key="sk-" + "k" * 20
        )
    else:
        fake = FakeGemini(script)
        model = toolfold.model(
            "gemini:gemini-2.5-flash",
            base_url=server.url,
            api_key="AIza" + "k" * 20,
            stream_format="json" if provider == "gemini-json" else "sse",
        )
    server.handler = fake
    opened.append(model)
    return model, fake


def _results(provider: str, body: dict[str, Any]) -> list[tuple[str, Any]]:
    """(call id, result) pairs the request sends back."""
    if provider == "responses":
        return [
            (i["call_id"], i["output"])
            for i in body["input"]
            if i.get("type") == "function_call_output"
        ]
    return [
        (p["functionResponse"]["id"], p["functionResponse"]["response"])
        for c in body["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]


def _call_ids(provider: str, body: dict[str, Any]) -> list[str]:
    if provider == "responses":
        return [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]
    return [
        p["functionCall"]["id"] for c in body["contents"] for p in c["parts"] if "functionCall" in p
    ]


def _check(provider: str, fake: Any) -> None:
    assert fake.problems == []
    assert len(fake.bodies) == 2
    second = fake.bodies[1]
    ids = _call_ids(provider, second)
    assert len(set(ids)) == 2
    results = _results(provider, second)
    if provider == "responses":
        assert results == [(ids[0], "sunny, 22C"), (ids[1], "rainy, 18C")]
    else:
        assert results == [(ids[0], {"output": "sunny, 22C"}), (ids[1], {"output": "rainy, 18C"})]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_generate_text_runs_the_tool_loop(
    provider: str, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Two parallel calls run, their results go back linked to the calls, the final text comes back."""
    model, fake = _setup(provider, http_server, opened)
    response = generate_text(model, "Weather in Paris and Tokyo?", tools=[get_weather])
    assert response.text == ANSWER
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.requests) == (30, 2)
    _check(provider, fake)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_streamed_run_yields_deltas_and_the_same_answer(
    provider: str, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Agent.stream gets text deltas (and calls) in the provider's framing, and ends like the blocking run."""
    model, fake = _setup(provider, http_server, opened)
    run = Agent(model=model, tools=[get_weather]).stream("Weather in Paris and Tokyo?")
    deltas = [e.text for e in run if isinstance(e, TextDelta)]
    assert "".join(deltas) == ANSWER
    assert len(deltas) > 1
    assert run.response.text == ANSWER
    if provider == "responses":
        assert fake.bodies[0]["stream"] is True
    else:
        assert all(":streamGenerateContent" in p for p in fake.paths)
    _check(provider, fake)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_async_streamed_run(provider: str, http_server: ScriptedServer, opened: list[Any]) -> None:
    """``async for`` over Agent.stream drives the async HTTP path to the same answer."""
    model, fake = _setup(provider, http_server, opened)
    agent = Agent(model=model, tools=[get_weather])

    async def main() -> str:
        run = agent.stream("Weather in Paris and Tokyo?")
        async for _ in run:
            pass
        await model.aclose()
        return run.response.text

    assert asyncio.run(main()) == ANSWER
    _check(provider, fake)


def _finish(run: Any) -> Any:
    """Drain a streamed run and return its response."""
    for _ in run:
        pass
    return run.response


def _stream_used(provider: str, fake: Any, streamed: bool) -> bool:
    """Whether every request the fake got asked for a stream."""
    if provider == "responses":
        return all(b.get("stream") is True for b in fake.bodies) is streamed
    return all(":streamGenerateContent" in p for p in fake.paths) is streamed


@pytest.mark.parametrize("streamed", [False, True], ids=["blocking", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_tool_error_goes_back_in_the_native_form(
    provider: str, streamed: bool, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A failing tool's error reaches the model, streamed or not: Gemini ``response.error``, Responses the output text."""
    script = (Calls((("get_weather", {"city": "Atlantis"}),)), Text("Sorry."))
    model, fake = _setup(provider, http_server, opened, script)
    agent = Agent(model=model, tools=[get_weather])
    if streamed:
        response = _finish(agent.stream("Weather in Atlantis?"))
    else:
        response = agent.run("Weather in Atlantis?")
    assert response.text == "Sorry."
    assert fake.problems == []
    assert _stream_used(provider, fake, streamed)
    ((_, result),) = _results(provider, fake.bodies[1])
    if provider == "responses":
        assert "no weather station in Atlantis" in result
    else:
        assert set(result) == {"error"}
        assert "no weather station in Atlantis" in result["error"]


@pytest.mark.parametrize("streamed", [False, True], ids=["blocking", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_approval_then_a_resume_from_json(
    provider: str, streamed: bool, http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A call waits for approval; the state goes through JSON; the resumed run answers over HTTP, streamed or not."""
    script = (Calls((("book_trip", {"city": "Paris"}),)), Text("Done."))
    model, fake = _setup(provider, http_server, opened, script)
    agent = Agent(model=model, tools=[book_trip])
    first = _finish(agent.stream("Book Paris")) if streamed else agent.run("Book Paris")
    assert first.finish_reason == "approval_required"
    assert len(fake.bodies) == 1  # the tool has not run: nothing went back yet
    (call,) = first.pending_approvals
    state = RunState.from_json(first.state.to_json())
    if streamed:
        done = _finish(agent.resume_stream(state, approvals={call.id: True}))
    else:
        done = agent.resume(state, approvals={call.id: True})
    assert done.text == "Done."
    assert fake.problems == []
    assert _stream_used(provider, fake, streamed)
    ((result_id, result),) = _results(provider, fake.bodies[1])
    assert "booked a trip to Paris" in str(result)
    assert result_id == call.id
