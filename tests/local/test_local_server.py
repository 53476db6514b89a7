"""End to end on a real model: SmolLM2-135M on llama.cpp's server, on 127.0.0.1.

`scripts/check` builds the server and installs the model first (once per
machine); here every test talks to the real thing. Assertions are about
structure (a call was made, its arguments fit the schema, an answer came
back, usage was counted), never about a small model's exact words.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import attrs
import httpx
import jsonschema
import pytest

from toolfold import (
    Agent,
    RunState,
    ServerError,
    StreamError,
    TextDelta,
    ToolCallEvent,
    tool,
)
from toolfold.local import LocalModel, installed_model

CALLS: list[str] = []

pytestmark = pytest.mark.local  # the real server: see scripts/check


@tool
def get_weather(city: str) -> dict[str, object]:
    """Get the current weather in a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    CALLS.append(city)
    return {"city": city, "temperature_celsius": 18, "conditions": "sunny"}


@tool(requires_approval=True)
def send_money(to: str, amount: int) -> str:
    """Send money to a person.

    Args:
        to: Who receives it.
        amount: How much, in euros.
    """
    return f"sent {amount} EUR to {to}"


@pytest.fixture(scope="module")
def local() -> Iterator[LocalModel]:
    """One model (and so one server) for the whole module."""
    model = LocalModel("smollm2")
    model.server()
    yield model
    model.close()


def _check_tool_loop(response: object) -> None:
    steps = response.steps  # type: ignore[attr-defined]
    calls = [c for step in steps for c in step.tool_calls]
    assert calls, "the model called no tool"
    assert calls[0].name == "get_weather"
    jsonschema.validate(calls[0].arguments, get_weather.parameters)
    results = [r for step in steps for r in step.tool_results]
    assert results
    assert not results[0].is_error
    assert response.text.strip()  # type: ignore[attr-defined]
    assert response.finish_reason == "stop"  # type: ignore[attr-defined]
    usage = response.usage  # type: ignore[attr-defined]
    assert usage.requests == 2
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0


def test_two_step_tool_loop(local: LocalModel) -> None:
    """The model calls the tool with schema-valid arguments, then answers; usage is counted."""
    agent = Agent(local, instructions="Use the tools.", tools=[get_weather])
    response = agent.run("What is the weather in Paris?")
    _check_tool_loop(response)


def test_two_step_tool_loop_streamed(local: LocalModel) -> None:
    """Streamed, the same loop yields the tool call and text deltas as they come."""
    agent = Agent(local, instructions="Use the tools.", tools=[get_weather])
    run = agent.stream("What is the weather in Paris?")
    events = list(run)
    assert any(isinstance(e, ToolCallEvent) for e in events)
    deltas = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert deltas.strip()
    _check_tool_loop(run.response)
    assert run.response.text == deltas


def test_two_step_tool_loop_async(local: LocalModel) -> None:
    """The async driver runs the same loop on the same server."""
    agent = Agent(local, instructions="Use the tools.", tools=[get_weather])
    _check_tool_loop(asyncio.run(agent.arun("What is the weather in Paris?")))


@attrs.frozen
class Weather:
    """The weather in a city."""

    city: str
    temperature_celsius: int


@pytest.mark.parametrize("how", ["run", "stream"])
def test_with_an_output_type_the_tool_is_called_then_the_output_filled(
    local: LocalModel, how: str
) -> None:
    """With tools and an output type, the model calls the tool, then its answer fills the
    type from the result; the first step carried ``response_format``, which the server
    followed: no tool was called and the output was made up (review s45)."""
    CALLS.clear()
    agent = Agent(local, instructions="Use the tools.", tools=[get_weather], output_type=Weather)
    question = "What is the weather in Paris?"
    if how == "run":
        response = agent.run(question)
    else:
        run = agent.stream(question)
        list(run)
        response = run.response
    assert CALLS, "the model called no tool"
    assert [len(step.tool_calls) for step in response.steps] == [1, 0]
    assert isinstance(response.output, Weather)
    assert response.output.temperature_celsius == 18  # (from the tool's result)


def test_a_required_first_step_with_an_output_type_answers_typed(local: LocalModel) -> None:
    """With ``tool_choice="required"`` (sent as "auto" after the first step) and an output
    type, the tool is called and the answer fills the type: the step after the results went
    without ``response_format``, and the run failed with OutputValidationError after four
    answers in words (review s45, round 2)."""
    CALLS.clear()
    agent = Agent(
        local,
        instructions="Use the tools.",
        tools=[get_weather],
        output_type=Weather,
        tool_choice="required",
    )
    response = agent.run("What is the weather in Paris?")
    assert CALLS == ["Paris"]
    assert [len(step.tool_calls) for step in response.steps] == [1, 0]
    assert isinstance(response.output, Weather)
    assert response.output.temperature_celsius == 18


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: first
        b: second
    """
    return a + b


def test_a_step_that_must_call_a_tool_calls_one(local: LocalModel) -> None:
    """The first step ("required") calls the tool: for this question the model wrote words
    until max_tokens and called nothing, which the grammar allows; the template's worked
    example (a population of Lyon) led it there (review s45)."""
    response = Agent(local, instructions="Use the tools.", tools=[add]).run("What is 0 plus 0?")
    assert response.steps[0].tool_calls, response.text
    assert response.steps[0].tool_calls[0].arguments == {"a": 0, "b": 0}
    assert response.finish_reason == "stop"


def test_the_servers_500_is_a_server_error_and_the_run_resumes(local: LocalModel) -> None:
    """With ``tool_choice="auto"`` the server may reject its own output (HTTP 500): a
    `ServerError` with the server's message, and ``.state`` resumes under the default policy."""
    agent = Agent(local, instructions="Use the tools.", tools=[get_weather], tool_choice="auto")
    with pytest.raises(ServerError, match="does not match the expected") as caught:
        agent.run("What is the weather in Paris?")
    error = caught.value
    assert error.status_code == 500
    assert error.provider == "local"
    state = RunState.from_json(error.state.to_json())  # still plain, loadable data
    assert [m.role for m in state.messages] == ["user"]  # nothing half-written was kept
    _check_tool_loop(_resume_with_the_default_policy(local, state))


def test_an_error_inside_the_stream_is_a_stream_error_and_the_run_resumes(
    local: LocalModel,
) -> None:
    """Streamed, the same failure arrives as an error event inside HTTP 200: a `StreamError`,
    and the state the error carries resumes."""
    agent = Agent(local, instructions="Use the tools.", tools=[get_weather], tool_choice="auto")
    with pytest.raises(StreamError, match="does not match the expected") as caught:
        list(agent.stream("What is the weather in Paris?"))
    assert caught.value.status_code == 200
    state = caught.value.state
    assert [m.role for m in state.messages] == ["user"]
    _check_tool_loop(_resume_with_the_default_policy(local, state))


def _resume_with_the_default_policy(local: LocalModel, state: RunState) -> object:
    """The state keeps its run's settings; clear ``tool_choice`` and resume it."""
    state = attrs.evolve(state, config=attrs.evolve(state.config, tool_choice=None))
    return Agent(local, instructions="Use the tools.", tools=[get_weather]).resume(state)


def test_approval_round_trip(local: LocalModel) -> None:
    """A call needing approval suspends the run; approved, the tool runs and the model answers."""
    agent = Agent(local, instructions="Use the tools.", tools=[send_money])
    first = agent.run("Send 20 euros to Bob.")
    assert first.finish_reason == "approval_required"
    (pending,) = first.pending_approvals
    jsonschema.validate(pending.arguments, send_money.parameters)
    done = agent.resume(first.state, approvals={pending.id: True})
    (result,) = done.steps[0].tool_results
    assert result.content.startswith("sent ")
    assert done.text.strip()
    assert done.finish_reason == "stop"


CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from test_local_server import send_money  # the same tool, by its module
    from toolfold import Agent, RunState
    from toolfold.local import LocalModel

    state = RunState.from_json(sys.stdin.read())
    agent = Agent(LocalModel("smollm2"), instructions="Use the tools.", tools=[send_money])
    (pending,) = state.pending_approvals
    done = agent.resume(state, approvals={pending.id: True})
    print(json.dumps({
        "results": [r.content for r in done.steps[0].tool_results],
        "text": done.text,
        "finish": done.finish_reason,
        "requests": done.usage.requests,
    }))
    """
)


def test_resume_from_json_in_another_process(local: LocalModel) -> None:
    """A suspended run saved as JSON resumes in a fresh process, on that process's own server."""
    agent = Agent(local, instructions="Use the tools.", tools=[send_money])
    first = agent.run("Send 20 euros to Bob.")
    assert first.finish_reason == "approval_required"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(Path(__file__).parent)],
        input=first.state.to_json(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["results"][0].startswith("sent ")
    assert out["text"].strip()
    assert out["finish"] == "stop"
    assert out["requests"] == 2  # the first request came from this process


def test_a_gguf_path_is_served(local: LocalModel) -> None:
    """``local:PATH.gguf`` serves that file (here, the cached SmolLM2) and answers."""
    path = installed_model("smollm2")
    assert path is not None
    agent = Agent(f"local:{path}", instructions="Use the tools.", tools=[get_weather])
    _check_tool_loop(agent.run("What is the weather in Paris?"))


def test_one_server_per_process_is_shared(local: LocalModel) -> None:
    """Two models of the same file in one process talk to one server."""
    other = LocalModel("smollm2")
    assert other.server() is local.server()
    assert httpx.get(f"http://127.0.0.1:{local.server().port}/health").status_code == 200
