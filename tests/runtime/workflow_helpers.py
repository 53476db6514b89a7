"""Steps and comparisons shared by the workflow tests: agents on `FunctionModel`, states compared."""

from __future__ import annotations

import re
from typing import Any

from toolfold import Agent, RunState, tool
from toolfold.runtime import replay
from toolfold.testing import FunctionModel, ScriptedModel


def echo(name: str) -> Agent:
    """An agent that answers ``name(<its prompt>)``."""
    return Agent(FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name)


@tool
def lookup(key: str) -> str:
    """Look something up.

    Args:
        key: What to look up.
    """
    return f"value of {key}"


def worker(name: str) -> Agent:
    """An agent that makes one tool call (`lookup`), then answers."""

    def reply(request: Any) -> Any:
        done = any(m.role == "tool" for m in request.messages)
        return f"{name} done" if done else ScriptedModel.call("lookup", {"key": name})

    return Agent(FunctionModel(reply), name=name, tools=[lookup])


def broken(name: str) -> Agent:
    """An agent whose model raises."""

    def reply(request: Any) -> Any:
        raise ValueError("no model here")

    return Agent(FunctionModel(reply), name=name)


def steady(state: RunState) -> str:
    """The state as JSON without the calls' durations (the only thing timing changes)."""
    return re.sub(r'"duration":[-0-9.e]+', '"duration":0', state.to_json())


def exact(state: RunState) -> None:
    """The state replays from its log and survives JSON exactly."""
    assert replay(state.log) == state
    assert RunState.from_json(state.to_json()) == state
