"""A module-level ``@tool`` pickles with the standard library, as the function it replaced would."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from toolfold import Agent, Tool, tool


@tool
def plain(a: int) -> int:
    """Plain.

    Args:
        a: A number.
    """
    return a


@tool
async def waiting(a: int) -> int:
    """Waiting.

    Args:
        a: A number.
    """
    return a


class Shop:
    @tool
    def search(self, q: str) -> str:
        """Search.

        Args:
            q: The query.
        """
        return q


@pytest.mark.parametrize("made", [plain, waiting, Shop.search], ids=["sync", "async", "method"])
def test_a_module_level_tool_pickles_as_its_name(made: Tool[..., Any]) -> None:
    """``pickle.dumps`` of a module-level tool (its module's attribute) works, and loads the very tool."""
    assert pickle.loads(pickle.dumps(made)) is made


def test_an_agent_holding_a_module_level_tool_pickles(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent with a module-level tool pickles and loads with that tool."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = Agent("openai:gpt-4o-mini", tools=[plain])
    loaded = pickle.loads(pickle.dumps(agent))
    assert loaded.tools == (plain,)
    assert loaded.tools[0] is plain
