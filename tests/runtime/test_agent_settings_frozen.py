"""An agent keeps a read-only deep copy of its settings."""

from __future__ import annotations

import pickle

import pytest

from toolfold import Agent, Sequence, Task
from toolfold.files import from_dict, loads
from toolfold.runtime import FrozenDict, FrozenList
from toolfold.testing import ScriptedModel


def test_agent_settings_refuse_changes() -> None:
    """agent.settings (nested values too) raises TypeError on a change; the agent's runs and copies keep it."""
    model = ScriptedModel(["a", "b"])
    agent = Agent(model, settings={"temperature": 0.1, "stop": ["END"]})
    assert type(agent.settings) is FrozenDict
    with pytest.raises(TypeError, match="read-only"):
        agent.settings["temperature"] = 0.9  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        agent.settings["stop"].append("X")
    agent.evolve().run("x")
    assert dict(model.requests[-1].settings) == {"temperature": 0.1, "stop": ["END"]}


def test_the_callers_mapping_is_copied_at_construction() -> None:
    """Changing the dict (and nested list) given to Agent(...) afterwards changes nothing of the agent."""
    stop = ["END"]
    given = {"stop": stop, "extra_body": {"metadata": {"team": "a"}}}
    agent = Agent(ScriptedModel(["a"]), settings=given)
    stop.append("LATER")
    given["temperature"] = 1
    assert agent.settings == {"stop": ["END"], "extra_body": {"metadata": {"team": "a"}}}
    assert type(agent.settings["extra_body"]["metadata"]) is FrozenDict


def test_pickled_agents_keep_equal_read_only_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent pickled (as Ray does) comes back equal, its settings still read-only."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "k" * 20)
    agent = Agent("openai:gpt-4o-mini", settings={"temperature": 0.1, "stop": ["END"]})
    clone = pickle.loads(pickle.dumps(agent))
    assert clone == agent
    assert type(clone.settings["stop"]) is FrozenList


def test_agents_and_workflows_hash_like_equal_ones() -> None:
    """Equal agents (with settings) hash equal, and so do tasks and sequences of them."""
    model = ScriptedModel(["a"])
    one = Agent(model, name="a", settings={"t": 1, "stop": ["x"]})
    two = Agent(model, name="a", settings={"stop": ["x"], "t": 1})
    assert one == two
    assert hash(one) == hash(two)
    assert hash(Task(one)) == hash(Task(two))
    assert hash(Sequence(one)) == hash(Sequence(two))


def test_agent_file_settings_are_not_shared_with_the_document() -> None:
    """An agent file's agent keeps its settings when AgentFile.document or a from_dict input is edited."""
    text = """
entry = "a"
[agents.a]
model = "openai:gpt-4o-mini"
settings = { temperature = 0, stop = ["END"] }
"""
    loaded = loads(text, model=ScriptedModel(["ok"]))
    loaded.document["agents"]["a"]["settings"]["stop"].append("DOC-EDIT")
    assert loaded.agent().settings == {"temperature": 0, "stop": ["END"]}
    document = {
        "entry": "b",
        "agents": {"b": {"model": "openai:gpt-4o-mini", "settings": {"stop": ["X"]}}},
    }
    built = from_dict(document, model=ScriptedModel(["ok"]))
    document["agents"]["b"]["settings"]["stop"].append("CALLER-EDIT")
    assert built.agent().settings == {"stop": ["X"]}


def test_to_dict_writes_plain_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """agent.to_dict() gives plain dicts and lists for the settings, not the agent's read-only ones."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-" + "k" * 20)
    agent = Agent("openai:gpt-4o-mini", name="a", settings={"stop": ["END"]})
    written = agent.to_dict()["agents"]["a"]["settings"]
    assert type(written) is dict
    assert type(written["stop"]) is list
    written["stop"].append("MINE")
    assert agent.settings == {"stop": ["END"]}
