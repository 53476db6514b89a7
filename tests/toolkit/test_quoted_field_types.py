"""Quoted names inside a class's field types (``Optional["Node"]``), structured as schemas show them.

No ``from __future__ import annotations`` here: the quoted names must stay inside
real types, as a recursive class is usually written.
"""

import dataclasses
from typing import Optional

import attrs
import pytest

from toolfold import Agent, ToolDefinitionError, generate_text, register_schema_rule, tool
from toolfold.testing import ScriptedModel


@dataclasses.dataclass
class Node:
    v: int
    nxt: Optional["Node"] = None


@dataclasses.dataclass
class Tree:
    v: int
    kids: list["Tree"]


@attrs.define
class Link:
    v: int
    nxt: Optional["Link"] = None


@dataclasses.dataclass
class Order:
    sku: str
    parent: Optional["Order"] = None


@tool
def walk(n: Node, t: Tree, link: Link) -> str:
    """Walk.

    Args:
        n: A chain of nodes.
        t: A tree.
        link: An attrs chain.
    """
    return f"{n!r} {t!r} {link!r}"


def test_a_quoted_name_inside_a_field_type_structures_in_a_run() -> None:
    """A tool taking dataclasses and attrs classes with ``Optional["Node"]`` / ``list["Tree"]``
    fields gets the classes built in a run, not a definition error after the model was asked."""
    arguments = {
        "n": {"v": 1, "nxt": {"v": 2}},
        "t": {"v": 1, "kids": [{"v": 2, "kids": []}]},
        "link": {"v": 1, "nxt": {"v": 2}},
    }
    response = generate_text(
        ScriptedModel([ScriptedModel.call("walk", arguments), "ok"]), "go", tools=[walk]
    )
    assert response.steps[0].tool_results[0].content == (
        "Node(v=1, nxt=Node(v=2, nxt=None)) Tree(v=1, kids=[Tree(v=2, kids=[])])"
        " Link(v=1, nxt=Link(v=2, nxt=None))"
    )


@pytest.mark.parametrize(
    ("cls", "arguments", "field", "expected"),
    [
        (Node, {"v": 1, "nxt": {"v": 2}}, "nxt", Node(2)),
        (Tree, {"v": 1, "kids": [{"v": 2, "kids": []}]}, "kids", [Tree(2, [])]),
        (Link, {"v": 1, "nxt": {"v": 2}}, "nxt", Link(2)),
    ],
)
def test_a_class_with_a_quoted_name_inside_a_field_type_is_a_tool(
    cls: type, arguments: dict[str, object], field: str, expected: object
) -> None:
    """``tool(Node)`` structures its self-referring field into the class itself."""
    assert tool(cls).validate_arguments(arguments)[field] == expected


def plant(forest: list["Tree"], named: "dict[str, list[Tree]] | None" = None) -> str:
    """Plant.

    Args:
        forest: Trees.
        named: Trees by name.
    """
    return repr(forest)


def test_a_quoted_name_inside_a_builtin_generic_parameter_type_is_resolved() -> None:
    """A parameter typed ``list["Tree"]`` (a string Python 3.10's typing leaves unresolved)
    is a tool whose arguments structure into the class, on every supported Python."""
    made = tool(plant)
    arguments = {"forest": [{"v": 1, "kids": []}], "named": {"a": [{"v": 2, "kids": []}]}}
    assert made.validate_arguments(arguments) == {
        "forest": [Tree(1, [])],
        "named": {"a": [Tree(2, [])]},
    }


def test_a_quoted_name_inside_a_field_type_structures_as_the_output_type() -> None:
    """An output type with an ``Optional["Order"]`` field is built from the answer."""
    model = ScriptedModel(['{"sku": "A", "parent": {"sku": "B"}}'])
    assert Agent(model, output_type=Order).run("go").output == Order("A", Order("B"))


class Money:
    pass


register_schema_rule(Money, lambda tp, ctx: {"type": "string"})


@dataclasses.dataclass
class Bill:
    due: Money


@pytest.mark.parametrize("output_type", [Bill, list[Money]])
def test_an_output_type_without_hooks_is_named_as_the_output_type(output_type: object) -> None:
    """The definition error of an output type the converter cannot build speaks of the output
    type, not of "a tool", and names what to register."""
    with pytest.raises(ToolDefinitionError) as raised:
        Agent(ScriptedModel(["{}"]), output_type=output_type).run("go")
    message = str(raised.value)
    assert message.startswith("cannot use ")
    assert " as the output type (output_type=): 1 problem\n" in message
    assert "Money" in message
    assert "register_type_hooks()" in message
    assert "cannot make a tool" not in message
