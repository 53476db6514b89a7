"""Testing ergonomics (session 40): sampled arguments the tool takes, overrides, clear errors."""

from __future__ import annotations

import asyncio
import inspect
import sys
import warnings
from typing import Annotated, Any

import pydantic
import pytest

from toolfold import Agent, Field, agenerate_text, tool
from toolfold.testing import ScriptedModel, TestModel, override_models, sample_value


def _takes(tp: Any) -> str:
    """The arguments TestModel makes for a tool of one parameter ``v: tp``, checked by the tool."""

    def f(v: tp) -> str:  # type: ignore[valid-type]
        return repr(v)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (types that warn of their schema, e.g. Json)
        run = Agent(TestModel(), tools=[tool(f)]).run("go")
    result = run.steps[0].tool_results[0]
    assert not result.is_error, result.content
    return run.steps[0].tool_calls[0].arguments_text


@pytest.mark.parametrize(
    "field",
    [
        pydantic.UUID1,
        pydantic.UUID3,
        pydantic.UUID4,
        pydantic.UUID5,
        pydantic.IPvAnyAddress,
        pydantic.IPvAnyInterface,
        pydantic.IPvAnyNetwork,
        pydantic.Base64Str,
        pydantic.Base64Bytes,
        pydantic.Base64UrlStr,
        pydantic.Json[list[int]],
        pydantic.Json[dict[str, pydantic.UUID4]],
    ],
)
def test_pydantic_formats_in_a_model_are_sampled_as_values_the_model_takes(field: Any) -> None:
    """A pydantic model's UUID4, IPvAnyAddress, Base64Str, Json[...] field gets a valid sample, not "aaaaa"."""
    model = pydantic.create_model("Host", v=(field, ...))
    _takes(model)


@pytest.mark.parametrize("pattern", [r"^[A-Z]{3}$", r"^(foo|bar)$", r"^[a-z]{2}\d$", r"^x$|^y$"])
def test_a_set_of_patterned_strings_gets_distinct_items_that_match(pattern: str) -> None:
    """``set[str]`` with a pattern and min_items=2 gets two distinct matching strings, not "uniqueItems needs 2"."""
    tp = Annotated[set[Annotated[str, Field(pattern=pattern)]], Field(min_items=2)]
    _takes(tp)
    value = sample_value(
        {
            "type": "array",
            "uniqueItems": True,
            "minItems": 2,
            "items": {"type": "string", "pattern": pattern},
        }
    )
    assert len(set(value)) == 2


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real provider call goes to a proxy nobody listens on, never to the internet."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")


def _triage() -> Agent[Any, str]:
    """An agent that hands the run to one made from a provider string."""
    billing = Agent("openai:gpt-4o-mini", name="billing")
    call = ScriptedModel.call("transfer_to_billing", {})
    return Agent(ScriptedModel([call]), name="triage", handoffs=[billing])


@pytest.mark.usefixtures("offline")
def test_coroutines_made_inside_override_models_keep_it_when_awaited_after() -> None:
    """arun, aresume and agenerate_text called in the block and awaited after it call the test model, handoffs too."""
    agent = Agent("openai:gpt-4o-mini")
    waits = Agent("openai:gpt-4o-mini", tools=[lookup], auto_execute_tools=False)
    with override_models(TestModel(text="offline")) as resolved:
        waiting = waits.run("x").state
        run = agent.arun("x")
        resumed = waits.aresume(waiting, tool_results={waiting.pending_calls[0].call.id: "sunny"})
        generated = agenerate_text("openai:gpt-4o-mini", "x")
        handed = _triage().arun("x")

    async def main() -> list[str]:
        return [(await c).text for c in (run, resumed, generated, handed)]

    assert asyncio.run(main()) == ["offline"] * 4
    assert resolved.count("openai:gpt-4o-mini") == 4  # both agents, agenerate_text, billing
    if sys.version_info >= (3, 12):  # (before, inspect reads the wrapper's code flags)
        assert inspect.iscoroutinefunction(agent.arun)
        assert inspect.iscoroutinefunction(agenerate_text)


@pytest.mark.usefixtures("offline")
def test_a_stream_made_inside_override_models_keeps_it_for_a_handoff_after_the_block() -> None:
    """A stream iterated after its block hands off to an agent made from a string: the test model answers."""
    with override_models(TestModel(text="offline")):
        stream = _triage().stream("x")
        astream = _triage().stream("x")
    assert list(stream)[-1].response.text == "offline"

    async def main() -> str:
        return [e async for e in astream][-1].response.text

    assert asyncio.run(main()) == "offline"


@pytest.mark.usefixtures("offline")
def test_a_coroutine_made_outside_any_block_sees_the_block_it_is_awaited_in() -> None:
    """``agent.arun`` called before a block and awaited inside it calls the block's model (as before)."""
    agent = Agent("openai:gpt-4o-mini")
    run = agent.arun("x")

    async def main() -> str:
        with override_models(TestModel(text="inside")):
            return (await run).text

    assert asyncio.run(main()) == "inside"


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: sunny"
