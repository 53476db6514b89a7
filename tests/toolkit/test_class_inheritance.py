"""What a subclass takes from its bases: their docstrings' field descriptions, and for a
TypedDict the type variables its generic bases' class statements bind."""

from __future__ import annotations

import dataclasses
import sys
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs
import pytest
import typing_extensions
from cattrs.errors import ClassValidationError

from toolfold import ArgumentValidationError, Tool, ToolDefinitionError, tool
from toolfold import schema_for_type as schema
from toolfold.toolkit._converter import get_converter
from toolfold.toolkit._problems import structure_problems

T = TypeVar("T")
U = TypeVar("U")


@dataclasses.dataclass
class Shape:
    """A shape.

    Attributes:
        name: What the shape is called.
        sides: How many sides it has.
    """

    name: str
    sides: int = 0


@dataclasses.dataclass
class Polygon(Shape):
    """A polygon.

    Attributes:
        sides: At least three.
        closed: Whether its ends meet.
    """

    closed: bool = True


@dataclasses.dataclass
class Square(Polygon):
    """A square (its docstring describes only its own field).

    Attributes:
        length: The length of a side.
    """

    length: float = 1.0


def test_a_dataclass_field_takes_its_description_from_the_nearest_base_describing_it() -> None:
    """Square's inherited `name` and `sides` keep the descriptions of Shape and Polygon,
    the nearest base that describes each; a class's own docstring wins over its bases'."""
    assert {k: v.get("description") for k, v in schema(Square)["properties"].items()} == {
        "name": "What the shape is called.",
        "sides": "At least three.",
        "closed": "Whether its ends meet.",
        "length": "The length of a side.",
    }
    assert schema(Square)["description"] == "A square (its docstring describes only its own field)."


@attrs.define
class Animal:
    """An animal.

    Attributes:
        legs: How many legs it walks on.
        name: What it is called.
    """

    legs: int
    name: str = attrs.field(default="", metadata={"description": "Its name, from metadata."})


@attrs.define
class Dog(Animal):
    """A dog.

    Attributes:
        name: Its name, from the dog's docstring.
    """

    breed: str = ""


def test_an_attrs_field_takes_its_description_from_its_base_unless_described_nearer() -> None:
    """Dog's `legs` is described by Animal's docstring; field metadata still comes first."""
    properties = schema(Dog)["properties"]
    assert properties["legs"]["description"] == "How many legs it walks on."
    assert properties["name"]["description"] == "Its name, from metadata."
    assert "description" not in properties["breed"]


def test_a_class_tool_takes_its_inherited_fields_descriptions_from_its_bases() -> None:
    """A dataclass used as a tool describes its inherited parameters as its bases do."""
    made = tool(Square)
    assert made.parameters["properties"]["name"]["description"] == "What the shape is called."
    assert made.parameters["properties"]["sides"]["description"] == "At least three."


class Base(typing_extensions.TypedDict):
    """A base.

    Attributes:
        city: Where it is.
    """

    city: str


class Derived(Base):
    """Derived, describing only its own key.

    Attributes:
        zip: The postal code.
    """

    zip: str


def test_a_typeddict_key_takes_its_description_from_its_base() -> None:
    """A TypedDict subclass (typing_extensions', which records its bases on every Python
    version) describes its base's keys as the base's docstring does."""
    assert schema(Derived)["properties"] == {
        "city": {"type": "string", "description": "Where it is."},
        "zip": {"type": "string", "description": "The postal code."},
    }


# typing's TypedDict is generic from Python 3.11, typing_extensions' on every version
# (3.10 has only that one); typing_extensions' records unparametrised bases too, as
# typing's does from 3.12
KINDS: list[Any] = [typing_extensions.TypedDict]
if sys.version_info >= (3, 11):
    KINDS.append(typing.TypedDict)


def _generic_family(kind: Any) -> dict[str, Any]:
    class Box(kind, Generic[T]):  # type: ignore[misc,valid-type]
        """A box.

        Attributes:
            item: What is in it.
        """

        item: T
        note: typing_extensions.NotRequired[str]

    class IntBox(Box[int]):  # type: ignore[misc,valid-type]
        pass

    class ListBox(Box[list[U]], Generic[U]):  # type: ignore[misc,valid-type]
        extra: U

    class StrListBox(ListBox[str]):  # type: ignore[misc,valid-type]
        pass

    class PartBox(Box["Part"]):  # type: ignore[misc,valid-type]
        pass

    return {
        "Box": Box,
        "IntBox": IntBox,
        "ListBox": ListBox,
        "StrListBox": StrListBox,
        "PartBox": PartBox,
    }


class Part(typing_extensions.TypedDict):
    number: int


@pytest.mark.parametrize("kind", KINDS)
def test_a_typeddict_subclass_of_a_parametrised_generic_binds_its_type_variable(
    kind: Any,
) -> None:
    """`class IntBox(Box[int])` over a generic TypedDict describes `item: T` as an integer,
    keeping Box's description and its NotRequired key."""
    family = _generic_family(kind)
    assert schema(family["IntBox"]) == {
        "type": "object",
        "properties": {
            "item": {"type": "integer", "description": "What is in it."},
            "note": {"type": "string"},
        },
        "required": ["item"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("kind", KINDS)
def test_typeddict_type_variables_are_bound_through_several_levels(kind: Any) -> None:
    """Box's T is list[U] in ListBox, whose U is str in StrListBox or ListBox[str]."""
    family = _generic_family(kind)
    for tp in (family["StrListBox"], family["ListBox"][str]):
        properties = schema(tp)["properties"]
        assert properties["item"]["items"] == {"type": "string"}
        assert properties["extra"] == {"type": "string"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_quoted_name_in_a_generic_typeddict_base_is_resolved(kind: Any) -> None:
    """`class PartBox(Box["Part"])` binds T to the module's Part TypedDict."""
    family = _generic_family(kind)
    assert schema(family["PartBox"])["properties"]["item"]["required"] == ["number"]


def _tool_over(tp: Any) -> Tool[..., Any]:
    def keep(box: Any) -> str:
        """Keep a box.

        Args:
            box: The box.
        """
        return repr(box)

    keep.__annotations__ = {"box": tp, "return": str}
    return tool(keep)


@pytest.mark.parametrize("kind", KINDS)
def test_typeddict_arguments_structure_by_their_bound_types(kind: Any) -> None:
    """A call's arguments for generic TypedDict subclasses are checked against and
    structured into the bound types, a quoted TypedDict name included."""
    family = _generic_family(kind)
    conv = get_converter()
    assert conv.structure({"item": 1}, family["IntBox"]) == {"item": 1}
    made = conv.structure({"item": ["a"], "extra": "b"}, family["StrListBox"])
    assert made == {"item": ["a"], "extra": "b"}
    assert conv.structure({"item": {"number": 2}}, family["PartBox"]) == {"item": {"number": 2}}
    keep = _tool_over(family["StrListBox"])
    assert keep.validate_arguments({"box": {"item": ["a"], "extra": "b", "note": "n"}}) == {
        "box": {"item": ["a"], "extra": "b", "note": "n"}
    }
    with pytest.raises(ArgumentValidationError, match=r"box\.item"):
        keep.validate_arguments({"box": {"item": [1], "extra": "b"}})


def test_a_typeddict_structure_refuses_a_value_of_the_wrong_bound_type() -> None:
    """The converter itself (no schema first) refuses a string for Box's T bound to int."""
    family = _generic_family(typing_extensions.TypedDict)
    with pytest.raises(ClassValidationError) as info:
        get_converter().structure({"item": "x"}, family["IntBox"])
    assert structure_problems(info.value, ("box",), family["IntBox"]) == [
        (("box", "item"), "cannot convert to int: expected an integer, got str 'x'")
    ]


def test_an_unparametrised_typeddict_subclass_keeps_its_bases_bindings() -> None:
    """`class Labelled(IntBox)` (typing_extensions' TypedDict, which records that base)
    still reads Box's T as int, and takes its own key too."""
    family = _generic_family(typing_extensions.TypedDict)

    class Labelled(family["IntBox"]):  # type: ignore[misc,name-defined]
        label: str

    assert schema(Labelled)["properties"] == {
        "item": {"type": "integer", "description": "What is in it."},
        "note": {"type": "string"},
        "label": {"type": "string"},
    }
    assert get_converter().structure({"item": 3, "label": "x"}, Labelled) == {
        "item": 3,
        "label": "x",
    }


def _local_tree_tool() -> Callable[..., Any]:
    @dataclasses.dataclass
    class Node(Generic[T]):
        item: T

    @dataclasses.dataclass
    class Tree(Node[list["Tree"]]):
        name: str = ""

    @tool
    def count(tree: Tree) -> int:
        """Count the nodes of a tree.

        Args:
            tree: The tree.
        """
        return 1 + sum(count(child) for child in tree.item)

    return count


def test_a_local_self_referencing_generic_subclass_structures_after_its_function_returned() -> None:
    """`class Tree(Node[list["Tree"]])` made in a function that has returned: a later
    call structures the nested children into Trees, as the schema says."""
    count = _local_tree_tool()
    items = count.parameters["$defs"]["Tree"]["properties"]["item"]["items"]
    assert items == {"$ref": "#/$defs/Tree"}
    arguments = count.validate_arguments(
        {"tree": {"item": [{"item": [], "name": "a"}, {"item": [{"item": []}]}]}}
    )
    assert count.invoke(arguments) == 4
    with pytest.raises(ArgumentValidationError, match="item"):
        count.validate_arguments({"tree": {"item": ["leaf"]}})


def test_an_unbound_type_variable_is_a_problem_that_says_how_to_bind_it() -> None:
    """A generic class used bare leaves `item: T` unbound: the definition error names the
    type variable and says to give the class its arguments or derive from it so bound."""
    family = _generic_family(typing_extensions.TypedDict)
    with pytest.raises(ToolDefinitionError) as info:
        schema(family["Box"])
    (problem,) = info.value.problems
    assert problem.startswith("at .item: type variable ~T is not bound to a type:")
    assert "Box[int]" in problem
    assert ("typing_extensions.TypedDict" in problem) is (sys.version_info < (3, 12))


def test_an_unbound_type_variable_in_a_dataclass_field_gives_no_typeddict_advice() -> None:
    """A bare generic dataclass leaves `item: T` unbound: the message says to give the
    class its arguments, and says nothing about TypedDict, which it is not."""

    @dataclasses.dataclass
    class DBox(Generic[T]):
        item: T

    with pytest.raises(ToolDefinitionError) as info:
        schema(DBox)
    (problem,) = info.value.problems
    assert problem.startswith("at .item: type variable ~T is not bound to a type:")
    assert "Box[int]" in problem
    assert "TypedDict" not in problem


def test_an_unbound_type_variable_as_a_tool_parameter_says_to_annotate_a_concrete_type() -> None:
    """`def ident(x: T)` is refused with advice for a parameter (annotate a concrete
    type), not the generic class or TypedDict advice for a class's fields."""

    def ident(x: T) -> str:
        """Echo.

        Args:
            x: The value.
        """
        return str(x)

    with pytest.raises(ToolDefinitionError) as info:
        tool(ident)
    (problem,) = info.value.problems
    assert problem == (
        "parameter 'x': type variable ~T is not bound to a type: bind T by annotating"
        " a concrete type (int, list[str]) instead"
    )


@dataclasses.dataclass
class Sized:
    """Something sized.

    Attributes:
        name: The name.
        size: The size, in metres.
    """

    name: str
    size: float = 1.0


@dataclasses.dataclass
class Counted(Sized):
    """Something counted."""

    size: int = 2


@dataclasses.dataclass
class Labelled(Counted):
    """Something labelled.

    Attributes:
        size: How many there are.
    """


def test_a_redeclared_field_takes_only_its_own_class_description() -> None:
    """`size: int` re-declared over the base's `size: float` is not described by the
    base's docstring; an inherited field still is, and a subclass may describe it."""
    props = schema(Counted)["properties"]
    assert props["name"]["description"] == "The name."
    assert "description" not in props["size"]
    assert schema(Labelled)["properties"]["size"]["description"] == "How many there are."
