"""Classes' fields as ``__init__`` takes them: InitVars, and generic bases' type variables."""

from __future__ import annotations

import dataclasses
import enum
from datetime import date
from typing import Annotated, ClassVar, Generic, Optional, TypeVar

import attrs
import pytest
import typing_extensions
from cattrs.errors import ClassValidationError

from toolfold import ArgumentValidationError, Field, tool
from toolfold import schema_for_type as schema
from toolfold.toolkit._converter import _reads_own_fields, get_converter
from toolfold.toolkit._problems import structure_problems

T = TypeVar("T")
U = TypeVar("U")


@dataclasses.dataclass
class Order:
    """An order.

    Attributes:
        item: What is ordered.
        scale: How many packs; builds the total, not kept.
        rush: Whether to hurry; not kept either.
    """

    item: str
    scale: dataclasses.InitVar[int]
    total: int = dataclasses.field(init=False, default=0)
    rush: dataclasses.InitVar[bool] = False
    kind: ClassVar[str] = "order"

    def __post_init__(self, scale: int, rush: bool) -> None:
        self.total = scale * (20 if rush else 10)


ORDER_SCHEMA = {
    "type": "object",
    "description": "An order.",
    "properties": {
        "item": {"type": "string", "description": "What is ordered."},
        "scale": {"type": "integer", "description": "How many packs; builds the total, not kept."},
        "rush": {
            "type": "boolean",
            "description": "Whether to hurry; not kept either.",
            "default": False,
        },
    },
    "required": ["item", "scale"],
    "additionalProperties": False,
}


def place(order: Order) -> int:
    """Place an order.

    Args:
        order: The order.
    """
    return order.total


def test_an_initvar_is_a_property_and_a_classvar_is_not() -> None:
    """An InitVar is an __init__ argument: a property of its type (required unless it has
    a default); a ClassVar and an init=False field are not properties."""
    assert schema(Order) == ORDER_SCHEMA


def test_an_initvar_reaches_init_and_is_not_stored() -> None:
    """A call's InitVar values go to __init__ (so __post_init__ sees them); its default
    applies when left out."""
    placing = tool(place)
    arguments = placing.validate_arguments({"order": {"item": "pens", "scale": 3}})
    (order,) = arguments.values()
    assert (order.item, order.total) == ("pens", 30)
    assert (
        placing.invoke(
            placing.validate_arguments({"order": {"item": "pens", "scale": 3, "rush": True}})
        )
        == 60
    )
    assert not hasattr(order, "scale")


def test_a_missing_initvar_is_an_argument_error() -> None:
    """A required InitVar left out is the schema's error, naming it."""
    with pytest.raises(ArgumentValidationError) as info:
        tool(place).validate_arguments({"order": {"item": "pens"}})
    assert tuple(info.value.errors) == ("$.order: 'scale' is a required property",)


def test_an_initvar_value_is_structured_into_its_type() -> None:
    """An InitVar's value is checked as a value of the type it wraps, at its path."""
    with pytest.raises(ClassValidationError) as info:
        get_converter().structure({"item": "pens", "scale": "three"}, Order)
    assert structure_problems(info.value, ("order",), Order) == [
        (("order", "scale"), "cannot convert to int: expected an integer, got str 'three'")
    ]


@dataclasses.dataclass
class Refund:
    reason: str


def test_a_union_picks_the_class_whose_initvars_fit_the_keys() -> None:
    """In a union, a dataclass's InitVars count among the keys it takes."""

    @tool
    def handle(request: Refund | Order) -> str:
        """Handle a request.

        Args:
            request: An order or a refund.
        """
        return type(request).__name__

    (request,) = handle.validate_arguments({"request": {"item": "pens", "scale": 1}}).values()
    assert isinstance(request, Order)
    assert request.total == 10


@dataclasses.dataclass
class Make:
    """Make something.

    Attributes:
        name: What to make.
        copies: How many copies to make at once.
    """

    name: str
    copies: dataclasses.InitVar[int] = 1
    kind: ClassVar[str] = "maker"

    def __post_init__(self, copies: int) -> None:
        self.made = [self.name] * copies


def test_a_dataclass_tools_initvar_is_a_parameter() -> None:
    """A dataclass used as a tool takes its InitVar as a parameter typed by what it wraps,
    and passes it to __init__; its ClassVar is no parameter."""
    making = tool(Make)
    assert making.parameters["properties"] == {
        "name": {"type": "string", "description": "What to make."},
        "copies": {
            "type": "integer",
            "description": "How many copies to make at once.",
            "default": 1,
        },
    }
    made = making.invoke(making.validate_arguments({"name": "cup", "copies": 2}))
    assert made.made == ["cup", "cup"]


@dataclasses.dataclass
class Box(Generic[T]):
    """A box.

    Attributes:
        item: What is in it.
    """

    item: T


@dataclasses.dataclass
class IntBox(Box[int]):
    """A box of a number.

    Attributes:
        item: The number.
        label: What is written on it.
    """

    label: str


@dataclasses.dataclass
class ListBox(Box[list[U]], Generic[U]):
    extra: U


@dataclasses.dataclass
class IntListBox(ListBox[int]):
    pass


@attrs.define
class ABox(Generic[T]):
    item: T


@attrs.define
class AIntBox(ABox[int]):
    label: str


@attrs.define
class NoteBox(Generic[T]):
    item: Annotated[T, Field(description="What is in it.")]


@attrs.define
class IntNoteBox(NoteBox[int]):
    pass


def test_a_subclass_of_a_parametrised_generic_dataclass_binds_its_type_variable() -> None:
    """`class IntBox(Box[int])` describes Box's `item: T` as an integer."""
    assert schema(IntBox) == {
        "type": "object",
        "description": "A box of a number.",
        "properties": {
            "item": {"type": "integer", "description": "The number."},
            "label": {"type": "string", "description": "What is written on it."},
        },
        "required": ["item", "label"],
        "additionalProperties": False,
    }
    assert schema(AIntBox)["properties"] == {
        "item": {"type": "integer"},
        "label": {"type": "string"},
    }


@pytest.mark.parametrize("tp", [IntListBox, ListBox[int]])
def test_type_variables_are_bound_through_several_generic_bases(tp: object) -> None:
    """Box's T is list[U] in ListBox, whose U is int in IntListBox or ListBox[int]
    (its description is Box's docstring's)."""
    properties = schema(tp)["properties"]
    assert properties == {
        "item": {"type": "array", "items": {"type": "integer"}, "description": "What is in it."},
        "extra": {"type": "integer"},
    }


def store(box: IntBox, abox: AIntBox, deep: IntListBox, alias: ListBox[int]) -> str:
    """Store boxes.

    Args:
        box: A box of a number.
        abox: An attrs box of a number.
        deep: A box of numbers.
        alias: Another box of numbers.
    """
    return repr(box)


def test_generic_subclasses_structure_by_their_bound_types() -> None:
    """Arguments for generic subclasses become instances, their items of the bound types."""
    arguments = tool(store).validate_arguments(
        {
            "box": {"item": 1, "label": "a"},
            "abox": {"item": 2, "label": "b"},
            "deep": {"item": [3], "extra": 4},
            "alias": {"item": [5], "extra": 6},
        }
    )
    assert arguments == {
        "box": IntBox(1, "a"),
        "abox": AIntBox(2, "b"),
        "deep": IntListBox([3], 4),
        "alias": ListBox([5], 6),
    }


def test_a_value_of_the_wrong_type_for_a_bound_variable_is_refused() -> None:
    """A string where the bound type is an integer is refused at its path."""
    with pytest.raises(ClassValidationError) as info:
        get_converter().structure({"item": ["x"], "extra": 1}, IntListBox)
    assert structure_problems(info.value, ("deep",), IntListBox) == [
        (("deep", "item", 0), "cannot convert to int: expected an integer, got str 'x'")
    ]


@dataclasses.dataclass
class Tree(Box[list["Tree"]]):
    """A tree: its item is its children."""

    name: str = ""


@attrs.define
class Chain(ABox[Optional["Chain"]]):
    pass


def test_quoted_names_in_a_generic_base_are_resolved() -> None:
    """`class Tree(Box[list["Tree"]])` binds T to a list of Trees: the quoted name is looked
    up in the class's module, for the schema and for structuring alike."""
    assert schema(Tree)["$defs"]["Tree"]["properties"]["item"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Tree"},
        "description": "What is in it.",
    }
    made = get_converter().structure({"item": [{"item": [], "name": "leaf"}]}, Tree)
    assert made == Tree([Tree([], "leaf")])
    assert get_converter().structure({"item": {"item": None}}, Chain) == Chain(Chain(None))


def test_only_what_cattrs_misreads_goes_through_the_own_fields_hook() -> None:
    """cattrs' generated hook (the fast one) binds one generic base's variables by itself:
    `IntBox(Box[int])` keeps it; several levels of generic bases and InitVars do not."""
    assert not _reads_own_fields(IntBox)
    assert not _reads_own_fields(AIntBox)
    assert _reads_own_fields(IntListBox)
    assert _reads_own_fields(ListBox[int])
    assert _reads_own_fields(Order)
    assert _reads_own_fields(IntNoteBox)  # Annotated[T, ...], which cattrs leaves unbound


def test_an_annotated_type_variable_of_a_generic_base_is_bound() -> None:
    """A base field `Annotated[T, Field(...)]`, which cattrs' generated hook leaves an
    unbound T, goes through the own-fields hook: the tool is made and takes an int."""
    # a dataclass with real (not string) annotations: cattrs keeps their Annotated
    box = dataclasses.make_dataclass(
        "Box", [("item", Annotated[T, Field(description="What is in it.")])], bases=(Generic[T],)
    )

    @dataclasses.dataclass
    class IntAnnotatedBox(box[int]):  # type: ignore[valid-type,misc]
        pass

    for cls in (IntNoteBox, IntAnnotatedBox):
        assert _reads_own_fields(cls)

        @tool
        def put(b: cls) -> int:  # type: ignore[valid-type]
            """Put a box.

            Args:
                b: The box.
            """
            return b.item  # type: ignore[no-any-return]

        assert put.invoke(put.validate_arguments({"b": {"item": 3}})) == 3
        with pytest.raises(ArgumentValidationError, match="integer"):
            put.validate_arguments({"b": {"item": "3"}})


def test_a_class_tool_of_a_generic_subclass_binds_its_type_variable() -> None:
    """A generic subclass used as a tool takes `item` as an integer, not an unknown T."""
    made = tool(IntBox)
    assert made.parameters["properties"]["item"] == {
        "type": "integer",
        "description": "The number.",
    }
    assert made.invoke(made.validate_arguments({"item": 7, "label": "x"})) == IntBox(7, "x")


def test_a_local_dataclass_initvar_of_a_local_type_structures() -> None:
    """A dataclass defined in a function, its InitVar naming another local class (string
    annotations), is described and structured with the InitVar passed to __init__."""

    class Mode(enum.Enum):
        FAST = "fast"
        SLOW = "slow"

    @dataclasses.dataclass
    class Job:
        name: str
        mode: dataclasses.InitVar[Mode] = Mode.SLOW

        def __post_init__(self, mode: Mode) -> None:
            self.seconds = 1 if mode is Mode.FAST else 10

    @tool
    def run(job: Job) -> int:
        """Run a job.

        Args:
            job: The job.
        """
        return job.seconds

    assert run.parameters["properties"]["job"]["properties"]["mode"] == {
        "type": "string",
        "enum": ["fast", "slow"],
        "default": "slow",
    }
    assert run.invoke(run.validate_arguments({"job": {"name": "a", "mode": "fast"}})) == 1


def test_a_local_generic_base_over_a_quoted_local_name_structures() -> None:
    """`class LBox(Box[list["Inner"]])` in a function, Inner local too, is structured
    on a call as its schema describes it: a list of Inner, not the string 'Inner'."""

    @dataclasses.dataclass
    class Inner:
        v: int

    @dataclasses.dataclass
    class LBox(Box[list["Inner"]]):
        pass

    @tool
    def use(b: LBox) -> int:
        """Use a box.

        Args:
            b: The box.
        """
        return sum(i.v for i in b.item)

    assert use.parameters["properties"]["b"]["properties"]["item"]["items"]["type"] == "object"
    assert use.invoke(use.validate_arguments({"b": {"item": [{"v": 3}, {"v": 4}]}})) == 7


@dataclasses.dataclass
class Part:
    number: int


def test_a_local_class_shadowing_a_module_class_is_the_one_used() -> None:
    """A string annotation in a function's local class names the function's own class,
    not a module class of the same name (locals first, as typing.get_type_hints does)."""

    @dataclasses.dataclass
    class Part:
        label: str

    @dataclasses.dataclass
    class Kit:
        part: Part

    @tool
    def use(kit: Kit) -> str:
        """Use a kit.

        Args:
            kit: The kit.
        """
        return kit.part.label

    assert use.parameters["properties"]["kit"]["properties"]["part"]["required"] == ["label"]
    assert use.invoke(use.validate_arguments({"kit": {"part": {"label": "bolt"}}})) == "bolt"


@attrs.define
class Sku:
    """A stock item.

    Attributes:
        sku: The stock code.
    """

    sku: str


@attrs.define
class Shipment:
    """A shipment.

    Attributes:
        items: What is shipped.
        when: The day it leaves.
    """

    items: list[Sku]
    when: date


def test_a_local_class_sharing_a_module_class_name_leaves_the_module_class_unchanged() -> None:
    """Making a tool in a function whose local class shares a name that a module attrs
    class's fields use leaves that module class's field types and structuring alone."""

    @attrs.define
    class Sku:
        weight: float

    @tool
    def ship(shipment: Shipment) -> str:
        """Ship a shipment.

        Args:
            shipment: The shipment.
        """
        return type(shipment.items[0]).__qualname__

    arguments = {"shipment": {"items": [{"sku": "a1"}], "when": "2024-02-03"}}
    assert ship.invoke(ship.validate_arguments(arguments)) == "Sku"
    assert attrs.fields(Sku)[0].name == "weight"
    assert attrs.fields(Shipment).items.type in ("list[Sku]", list[globals()["Sku"]])
    structured = get_converter().structure(arguments["shipment"], Shipment)
    assert structured == Shipment(items=[globals()["Sku"]("a1")], when=date(2024, 2, 3))


def test_a_local_value_named_like_an_annotation_does_not_change_the_tool() -> None:
    """A local non-class value sharing a name with a string annotation (date, list) is
    not read as that annotation: the tools work as they would without the local."""
    date = "2024-01-01"
    list = [1]

    @tool
    def book(when: date) -> str:
        """Book a day.

        Args:
            when: The day.
        """
        return when.isoformat()

    @tool
    def count(xs: list[int]) -> int:
        """Count numbers.

        Args:
            xs: The numbers.
        """
        return len(xs)

    @tool
    def ship(shipment: Shipment) -> str:
        """Ship a shipment.

        Args:
            shipment: The shipment.
        """
        return shipment.when.isoformat()

    assert date == "2024-01-01"
    assert list == [1]
    assert book.parameters["properties"]["when"]["format"] == "date"
    assert book.invoke(book.validate_arguments({"when": "2024-02-03"})) == "2024-02-03"
    assert count.invoke(count.validate_arguments({"xs": [1, 2, 3]})) == 3
    arguments = {"shipment": {"items": [], "when": "2024-02-03"}}
    assert ship.invoke(ship.validate_arguments(arguments)) == "2024-02-03"


def test_a_local_generic_named_tuple_names_another_local_class() -> None:
    """A local generic NamedTuple used as NBox[int], its string annotation naming another
    local class, structures into NBox with that class inside."""

    class Inner(typing_extensions.NamedTuple):
        n: int

    class NBox(typing_extensions.NamedTuple, Generic[T]):
        item: T
        inner: Inner

    @tool
    def use(box: NBox[int]) -> str:
        """Use a box.

        Args:
            box: The box.
        """
        return repr(box)

    assert use.parameters["properties"]["box"]["properties"]["inner"]["required"] == ["n"]
    arguments = use.validate_arguments({"box": {"item": 1, "inner": {"n": 2}}})
    assert arguments == {"box": NBox(item=1, inner=Inner(n=2))}
    assert type(arguments["box"].inner) is Inner
    assert use.invoke(arguments) == "NBox(item=1, inner=Inner(n=2))"


@attrs.define
class Crate:
    """A crate.

    Attributes:
        items: What it holds.
    """

    items: list[Sku]


def test_a_tool_using_local_names_leaves_a_module_attrs_class_meaning_its_module_names() -> None:
    """A tool that needs its function's names (a local Note) and also takes a module
    attrs class whose field names Sku, which a local class shadows, structures the
    module's Sku and leaves that class's field type as the module wrote it."""

    @attrs.define
    class Sku:
        weight: float

    @attrs.define
    class Note:
        text: str

    @tool
    def pack(crate: Crate, note: Note) -> str:
        """Pack a crate.

        Args:
            crate: The crate.
            note: A note.
        """
        return type(crate.items[0]).__module__ + ":" + type(crate.items[0]).__qualname__

    arguments = {"crate": {"items": [{"sku": "a1"}]}, "note": {"text": "x"}}
    assert pack.invoke(pack.validate_arguments(arguments)) == f"{__name__}:Sku"
    assert attrs.fields(Crate).items.type in ("list[Sku]", list[globals()["Sku"]])
    assert attrs.fields(Sku)[0].name == "weight"
