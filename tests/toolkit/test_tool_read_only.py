"""A Tool's fields are read-only once made: changes go through `Tool.replace`."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from toolfold import Agent, Tool, tool
from toolfold.testing import ScriptedModel


@tool
def add(a: int, b: int) -> int:
    """Add.

    Args:
        a: first
        b: second
    """
    return a + b


def _echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return arguments


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "plus"),
        ("description", "Adds"),
        ("timeout", -5),
        ("requires_approval", True),
        ("max_retries", 9),
        ("parameters", {}),
        ("function", print),
    ],
)
def test_assigning_a_field_is_refused_naming_the_tool_and_the_way_out(
    field: str, value: Any
) -> None:
    """Setting a Tool field raises AttributeError naming the field, the tool and replace() or a new Tool."""
    with pytest.raises(AttributeError, match=f"cannot set '{field}' of tool 'add'") as caught:
        setattr(add, field, value)
    advice = "replace(" if field not in ("parameters", "function") else "new Tool("
    assert advice in str(caught.value)
    assert add.name == "add"
    assert add.timeout is None
    assert add.requires_approval is False


def test_deleting_a_field_is_refused() -> None:
    """Deleting a Tool field raises AttributeError; the tool keeps it."""
    with pytest.raises(AttributeError, match="cannot delete 'description'"):
        del add.description
    assert add.description == "Add."


def test_an_agent_built_before_sees_no_change_and_replace_makes_the_copy() -> None:
    """After a refused assignment an agent still runs the tool as made; replace() gives the renamed tool."""
    with pytest.raises(AttributeError):
        add.requires_approval = True  # type: ignore[misc]
    model = ScriptedModel([ScriptedModel.call("add", {"a": 1, "b": 2}), "done"])
    response = Agent(model, tools=[add]).run("go")
    assert response.pending_approvals == ()
    assert response.state.conversation[2].tool_results[0].content == "3"
    plus = add.replace(name="plus")
    model = ScriptedModel([ScriptedModel.call("plus", {"a": 1, "b": 2}), "done"])
    response = Agent(model, tools=[plus]).run("go")
    assert [t.name for t in model.requests[0].tools] == ["plus"]
    assert response.state.conversation[2].tool_results[0].content == "3"


def test_other_attributes_pickling_and_method_tools_still_work() -> None:
    """A tool still takes attributes of its own, pickles, and binds as a method."""
    explicit = Tool("echo", "Echo.", {"type": "object"}, _echo, timeout=5)
    explicit.note = "mine"  # type: ignore[attr-defined]
    back = pickle.loads(pickle.dumps(explicit))
    assert (back.name, back.timeout, back.note) == ("echo", 5, "mine")
    assert back.invoke({"x": 1}) == {"x": 1}

    class Calculator:
        @tool
        def double(self, a: int) -> int:
            """Double.

            Args:
                a: the number
            """
            return 2 * a

    assert Calculator().double(4) == 8
    assert Calculator().double.name == "double"
