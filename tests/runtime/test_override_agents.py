"""`override_models` reaches agents made from a string before the block (module-level agents)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

import toolfold
from toolfold import Agent, ModelConfigError, tool
from toolfold.testing import ScriptedModel, TestModel, override_models
from toolfold.toolkit._tool import Tool


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real provider call would go to a proxy nobody listens on, never to the internet."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: sunny"


def test_an_agent_made_before_the_block_runs_against_the_override(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module-level Agent("openai:...") uses the test model in runs started inside the block."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    agent = Agent("openai:gpt-4o-mini", instructions="Be brief.", tools=[lookup])
    real = type(agent._options.model).__name__
    with override_models(TestModel(text="Sunny.")) as resolved:
        assert agent.run("Weather in Paris?").text == "Sunny."
        assert asyncio.run(agent.arun("again")).text == "Sunny."
    assert resolved == [
        "openai:gpt-4o-mini"
    ]  # resolved once in the block, reused by the second run
    assert real == "OpenAIChatModel"
    assert type(agent._options.model).__name__ == real  # the agent itself is unchanged


def test_a_stream_and_a_resume_started_inside_the_block_are_overridden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Streams and resumes of an agent made before the block also call the override's model."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    agent = Agent("openai:gpt-4o-mini", tools=[lookup], auto_execute_tools=False)
    with override_models(TestModel(text="Done.")):
        stream = agent.stream("Weather in Paris?")
        for _ in stream:
            pass
        waiting = stream.response
        call = waiting.state.calls[0].call
        resumed = agent.resume(waiting.state, tool_results={call.id: "sunny"})
    assert resumed.text == "Done."


def test_a_handoff_target_made_before_the_block_is_overridden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run handed to an agent made from a string calls that string's override model."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-used")
    refunds = Agent("openai:gpt-4o-mini", name="refunds")
    triage = Agent("anthropic:claude-x", name="triage", handoffs=[refunds])
    scripts = {
        "anthropic:claude-x": ScriptedModel([ScriptedModel.call("transfer_to_refunds")]),
        "openai:gpt-4o-mini": ScriptedModel(["refunded"]),
    }
    with override_models(lambda name: scripts[name]) as resolved:
        assert triage.run("refund A17").text == "refunded"
    assert resolved == ["anthropic:claude-x", "openai:gpt-4o-mini"]


class _Source:
    """A tool source listing one tool (an agent with one is rebuilt per run)."""

    def open(self) -> None:
        """Nothing to start."""

    def close(self) -> None:
        """Nothing to release."""

    def tools(self) -> Sequence[Tool[..., Any]]:
        """The one tool."""
        return [lookup]


def test_an_agent_with_tool_sources_made_before_the_block_is_overridden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The per-run copy an agent with tool sources makes keeps its model string for the override."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    agent = Agent("openai:gpt-4o-mini", tools=[_Source()])
    with override_models(TestModel(text="Listed.")) as resolved:
        assert agent.run("go").text == "Listed."
    assert resolved == ["openai:gpt-4o-mini"]


def test_an_agent_made_from_a_string_without_its_key_is_refused_when_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without OPENAI_API_KEY, Agent("openai:...") raises at once, naming the variable (fail fast)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ModelConfigError, match=r"no API key for provider 'openai'.*OPENAI_API_KEY"):
        Agent("openai:gpt-4o-mini")
    with pytest.raises(ModelConfigError, match="no API key for provider 'openai'"):
        toolfold.model("openai:gpt-4o-mini")


def test_a_provider_setting_the_factory_refuses_is_raised_when_the_agent_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bad OLLAMA_HOST is the provider's ModelConfigError at Agent(...), not at the first run."""
    monkeypatch.setenv("OLLAMA_HOST", "ftp://bad host:xx")
    with pytest.raises(ModelConfigError, match="OLLAMA_HOST 'ftp://bad host'"):
        Agent("ollama:llama3")


def test_a_dummy_key_lets_a_module_level_agent_be_made_and_the_override_sends_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With any value in OPENAI_API_KEY the agent is made; inside the block the test model answers."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    agent = Agent("openai:gpt-4o-mini")
    with override_models(TestModel(text="Offline.")) as resolved:
        assert agent.run("hi").text == "Offline."
    assert resolved == ["openai:gpt-4o-mini"]


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: How much.
    """
    return f"paid {amount}"


def test_a_scripted_model_function_is_called_once_per_block_so_a_resume_continues_the_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent made before the block keeps one model per string in the block: resume goes on with its script."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    agent = Agent("openai:gpt-4o-mini", tools=[pay])

    def script(name: str) -> ScriptedModel:
        return ScriptedModel([ScriptedModel.call("pay", {"amount": 5}), "Paid 5."])

    with override_models(script) as resolved:
        waiting = agent.run("pay 5")
        call = waiting.state.calls[0].call
        done = agent.resume(waiting.state, approvals={call.id: True})
    assert done.text == "Paid 5."
    assert not done.state.calls
    assert resolved == ["openai:gpt-4o-mini"]
    with override_models(script) as again:  # a new block resolves the string again
        assert agent.run("pay 5").state.calls
    assert again == ["openai:gpt-4o-mini"]


def test_a_bad_model_string_is_still_refused_when_the_agent_is_made() -> None:
    """A typo in the provider or a string without a colon fails at Agent(...), not at the first run."""
    with pytest.raises(ModelConfigError, match="unknown provider 'opnai'"):
        Agent("opnai:gpt-4o-mini")
    with pytest.raises(ModelConfigError, match="must look like 'provider:model'"):
        Agent("gpt-4o-mini")


def test_a_model_object_made_before_the_block_is_left_alone() -> None:
    """A model object (a ScriptedModel, or toolfold.model(...) made earlier) is not overridden."""
    scripted = ScriptedModel(["scripted"])
    agent = Agent(scripted)
    with override_models(TestModel(text="test")) as resolved:
        assert agent.run("hi").text == "scripted"
    assert resolved == []


def test_an_agent_made_inside_the_block_keeps_the_test_model_after_it() -> None:
    """An agent made inside a block resolved its string then, once: it keeps that test model."""
    with override_models(TestModel(text="inside")) as resolved:
        agent = Agent("openai:gpt-4o-mini")
    assert agent.run("hi").text == "inside"
    assert resolved == ["openai:gpt-4o-mini"]


def test_an_agent_file_still_reports_a_missing_key_when_it_loads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent file reports every problem at load, a missing key too (the CLI's exit 1)."""
    from toolfold import AgentFileError
    from toolfold.files import loads

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    text = '[agents.main]\nmodel = "openai:gpt-4o-mini"\n'
    with pytest.raises(AgentFileError, match=r"agents\.main: cannot build the agent: no API key"):
        loads(text)
    with override_models(TestModel(text="offline")):
        assert loads(text).agent().run("hi").text == "offline"


def test_two_agents_made_before_the_block_on_one_string_get_a_model_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two pre-built agents on the same string each resolve it, as two agents made inside the block do."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    first = Agent("openai:gpt-4o-mini", name="first")
    second = Agent("openai:gpt-4o-mini", name="second")
    with override_models(lambda spec: ScriptedModel(["only answer"])) as resolved:
        assert first.run("x").text == "only answer"
        assert second.run("y").text == "only answer"  # it had no entry left for request 2
    assert resolved == ["openai:gpt-4o-mini", "openai:gpt-4o-mini"]


def test_the_per_run_copy_of_an_agent_with_tool_sources_reuses_its_model_in_the_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each run of an agent with tool sources (a copy per run) goes on with the one model of the block."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    agent = Agent("openai:gpt-4o-mini", tools=[_Source()])
    with override_models(lambda spec: ScriptedModel(["one", "two"])) as resolved:
        assert agent.run("go").text == "one"
        assert agent.run("go").text == "two"
    assert resolved == ["openai:gpt-4o-mini"]


def test_a_raising_override_function_is_called_again_by_the_next_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A function that raised resolves nothing: the agent's next run in the block calls it again."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    agent = Agent("openai:gpt-4o-mini")
    calls: list[str] = []

    def flaky(spec: str) -> TestModel:
        calls.append(spec)
        if len(calls) == 1:
            raise RuntimeError("not yet")
        return TestModel(text="second try")

    with override_models(flaky):
        with pytest.raises(RuntimeError, match="not yet"):
            agent.run("x")
        assert agent.run("x").text == "second try"
        assert agent.run("x").text == "second try"
    assert len(calls) == 2


def test_a_string_whose_override_function_raised_is_listed_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`resolved` lists an agent's string once, after the function answered, not per attempt."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    agent = Agent("openai:gpt-4o-mini")
    attempts: list[str] = []

    def flaky(spec: str) -> TestModel:
        attempts.append(spec)
        if len(attempts) == 1:
            raise RuntimeError("not yet")
        return TestModel(text="second try")

    with override_models(flaky) as resolved:
        with pytest.raises(RuntimeError, match="not yet"):
            agent.run("x")
        assert resolved == []
        agent.run("x")
        agent.run("y")
    assert resolved == ["openai:gpt-4o-mini"]


def test_threads_sharing_the_block_resolve_an_agent_made_before_it_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A thread started with copy_context while another resolves the agent's string waits: one call."""
    import contextvars
    import linecache
    import sys
    import threading

    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    agent = Agent("openai:gpt-4o-mini")
    calls: list[str] = []
    entered_twice = threading.Event()
    answers: list[str] = []

    def waiting_on_the_lock(thread: threading.Thread) -> bool:
        frame = sys._current_frames().get(thread.ident or -1)
        line = "" if frame is None else linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        return frame is not None and frame.f_code.co_name == "again" and "_lock" in line

    def resolve(spec: str) -> TestModel:
        calls.append(spec)
        if len(calls) > 1:
            entered_twice.set()
        elif len(calls) == 1:  # the first resolve lets another thread's run start meanwhile
            other = threading.Thread(
                target=contextvars.copy_context().run,
                args=(lambda: answers.append(agent.run("b").text),),
            )
            other.start()
            while not (entered_twice.is_set() or waiting_on_the_lock(other)):
                entered_twice.wait(0.001)
            threads.append(other)
        return TestModel(text="t")

    threads: list[threading.Thread] = []
    with override_models(resolve) as resolved:
        answers.append(agent.run("a").text)
        for thread in threads:
            thread.join()
    assert answers == ["t", "t"]
    assert len(calls) == 1
    assert resolved == ["openai:gpt-4o-mini"]


def test_an_agent_made_in_an_outer_block_keeps_its_model_in_an_inner_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent made inside an outer block answers with the outer model in an inner block; a pre-built one with the inner."""
    monkeypatch.setenv("OPENAI_API_KEY", "dummy")
    prebuilt = Agent("openai:gpt-4o-mini")
    with override_models(TestModel(text="outer")):
        made_inside = Agent("openai:gpt-4o-mini")
        with override_models(TestModel(text="inner")):
            assert made_inside.run("x").text == "outer"
            assert prebuilt.run("x").text == "inner"
