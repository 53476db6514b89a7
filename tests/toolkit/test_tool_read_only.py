"""A Tool's fields are read-only once made: changes go through `Tool.replace`."""

from __future__ import annotations

import inspect
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
    advice = "replace(" if field != "parameters" else "new Tool("
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


def test_replace_function_swaps_what_runs_and_keeps_name_and_schema() -> None:
    """tool.replace(function=fake) runs the fake under the tool's name, description and schema."""
    calls: list[tuple[int, int]] = []

    def fake(a: int, b: int) -> int:
        calls.append((a, b))
        return 999

    faked = add.replace(function=fake)
    assert (faked.name, faked.description, faked.parameters) == (
        add.name,
        add.description,
        add.parameters,
    )
    model = ScriptedModel([ScriptedModel.call("add", {"a": 1, "b": 2}), "done"])
    agent = Agent(ScriptedModel(["unused"]), tools=[add])
    response = agent.evolve(model=model, tools=[faked]).run("go")
    assert response.state.conversation[2].tool_results[0].content == "999"
    assert calls == [(1, 2)]
    assert add.function is not fake
    assert add(1, 2) == 3


def test_replace_function_follows_whether_the_new_function_is_async() -> None:
    """is_async (and inspect.iscoroutinefunction) follow the new function, both ways."""

    async def later(a: int, b: int) -> int:
        return a - b

    async_add = add.replace(function=later)
    assert async_add.is_async
    assert inspect.iscoroutinefunction(async_add)
    back = async_add.replace(function=lambda a, b: a * b)
    assert not back.is_async
    assert not inspect.iscoroutinefunction(back)
    assert back(a=2, b=3) == 6


@pytest.mark.parametrize(
    ("function", "problem"),
    [
        (42, "function must be callable, not 42"),
        (lambda a: a, "cannot be called with every parameter ('a', 'b')"),
        (lambda a, b, c: a, "missing a required argument: 'c'"),
        (lambda x, y: x, "missing a required argument: 'x'"),
    ],
)
def test_replace_function_refuses_one_that_does_not_fit(function: Any, problem: str) -> None:
    """A new function that is not callable or cannot take the tool's arguments is a ToolDefinitionError."""
    from toolfold import ToolDefinitionError

    with pytest.raises(ToolDefinitionError, match="'add'") as caught:
        add.replace(function=function)
    assert problem in str(caught.value)


def test_replace_function_of_an_explicit_tool_passes_one_dict() -> None:
    """An explicit-schema tool's new function gets the arguments as one dict, as Tool(...) does."""
    explicit = Tool("echo", "Echo.", {"type": "object"}, _echo)
    assert explicit.replace(function=lambda args: sorted(args)).invoke({"y": 1, "x": 2}) == [
        "x",
        "y",
    ]
    with pytest.raises(Exception, match="one dict"):
        explicit.replace(function=lambda: None)


def test_a_subclass_setting_a_field_before_init_is_told_without_a_name() -> None:
    """A Tool subclass assigning a field before super().__init__() gets a message without "None"."""

    class Early(Tool[..., Any]):
        def __init__(self) -> None:
            self.description = "set too early"  # type: ignore[misc]
            super().__init__("early")

    with pytest.raises(AttributeError) as caught:
        Early()
    assert str(caught.value).startswith("cannot set 'description' of a tool: ")
    assert "None" not in str(caught.value)


def test_the_refusal_to_set_function_points_at_the_testing_recipe() -> None:
    """Assigning tool.function (as mock.patch.object does) names replace(function=...) for tests."""
    with pytest.raises(AttributeError) as caught:
        add.function = print  # type: ignore[misc,assignment]
    assert "agent.evolve(tools=[tool.replace(function=fake)])" in str(caught.value)


def test_replace_function_needs_no_more_than_the_required_parameters() -> None:
    """A new function requiring an argument the model may leave out (it has a default) is refused."""

    @tool
    def bump(a: int, by: int = 1) -> int:
        """Bump.

        Args:
            a: the number
            by: the step
        """
        return a + by

    with pytest.raises(Exception, match="cannot be called with the required parameters alone"):
        bump.replace(function=lambda a, by: a)
    assert bump.replace(function=lambda a, by=5: a + by)(a=1) == 6
