"""pydantic v2 models as tool parameters, as a tool itself (``tool(Model)``) and as output types."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any, Literal, Optional

import pydantic
import pydantic.dataclasses
import pytest
from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from pydantic.alias_generators import to_camel
from typing_extensions import TypedDict

import toolfold
from toolfold import (
    Agent,
    ArgumentValidationError,
    RunState,
    Sequence,
    Task,
    WorkflowDefinitionError,
    generate_text,
    tool,
)
from toolfold.adapters import compile_tool
from toolfold.testing import ScriptedModel
from toolfold.toolkit._pydantic import ModelRefused


class Unit(enum.Enum):
    C = "c"
    F = "f"


class Address(BaseModel):
    street: str = pydantic.Field(description="The street.")
    zip: int = pydantic.Field(ge=1000, le=99999)


class Forecast(BaseModel):
    """A forecast.

    Attributes:
        kind: What kind of forecast.
    """

    city: str = pydantic.Field(description="The city.")
    days: int = pydantic.Field(ge=1, le=7, description="How many days.")
    unit: Unit = Unit.C
    kind: Literal["short", "long"] = "short"
    address: Optional[Address] = None  # noqa: UP045 (pydantic users write it so)


@dataclasses.dataclass
class DAddress:
    street: Annotated[str, toolfold.Field(description="The street.")]
    zip: Annotated[int, toolfold.Field(ge=1000, le=99999)]


@dataclasses.dataclass
class DForecast:
    """A forecast.

    Attributes:
        kind: What kind of forecast.
    """

    city: Annotated[str, toolfold.Field(description="The city.")]
    days: Annotated[int, toolfold.Field(ge=1, le=7, description="How many days.")]
    unit: Unit = Unit.C
    kind: Literal["short", "long"] = "short"
    address: DAddress | None = None


@tool
def forecast(request: Forecast) -> str:
    """Forecast the weather.

    Args:
        request: What to forecast.
    """
    return f"{request.city}: {request.days} days"


@tool
def dforecast(request: DForecast) -> str:
    """Forecast the weather.

    Args:
        request: What to forecast.
    """
    return f"{request.city}: {request.days} days"


def _titles(node: Any) -> list[str]:
    """The ``title`` keywords a schema holds (not properties named title)."""
    found: list[str] = []
    if isinstance(node, dict):
        if isinstance(node.get("title"), str):
            found.append(node["title"])
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    found += _titles(sub)
            elif key not in ("default", "enum", "const"):
                found += _titles(value)
    elif isinstance(node, list):
        for item in node:
            found += _titles(item)
    return found


def test_a_models_schema_is_the_equivalent_dataclasss() -> None:
    """A model parameter is described as the same dataclass is: no titles, nested model
    inlined, objects closed, descriptions and bounds kept, docstring attributes read."""
    assert json.loads(json.dumps(forecast.parameters)) == json.loads(
        json.dumps(dforecast.parameters)
    )
    described = forecast.parameters["properties"]["request"]
    assert _titles(forecast.parameters) == []
    assert described["properties"]["days"]["minimum"] == 1
    assert described["properties"]["kind"]["description"] == "What kind of forecast."
    assert "$defs" not in forecast.parameters


@pytest.mark.parametrize("dialect", ["openai-chat", "openai-responses", "anthropic", "gemini"])
def test_a_models_schema_compiles_as_the_dataclasss(dialect: str) -> None:
    """Each provider's compiler makes of a model parameter what it makes of the dataclass."""
    made = compile_tool(forecast, dialect)  # type: ignore[arg-type]
    twin = compile_tool(dforecast, dialect)  # type: ignore[arg-type]
    assert made.schema_sent == twin.schema_sent
    assert made.strict == twin.strict
    assert _titles(made.schema_sent) == []


def test_a_strict_compile_closes_a_models_objects() -> None:
    """OpenAI strict mode takes a model parameter (objects closed, all keys required)."""
    made = compile_tool(forecast, "openai-chat", strict=True)
    request = made.schema_sent["properties"]["request"]
    assert made.strict is True
    assert request["additionalProperties"] is False
    assert set(request["required"]) == {"city", "days", "unit", "kind", "address"}


class Stay(BaseModel):
    when: dt.datetime
    id: uuid.UUID
    unit: Unit
    kind: Literal["a", "b"]
    guests: list[Address]


@tool
def book(stay: Stay, extra: list[Address], maybe: Address | None = None) -> str:
    """Book a stay.

    Args:
        stay: The stay.
        extra: More addresses.
        maybe: One more, or none.
    """
    return "booked"


def test_arguments_become_the_model() -> None:
    """The JSON arguments become the models, their fields of their types; lists and
    optional models too."""
    ident = uuid.uuid4()
    made = book.validate_arguments(
        {
            "stay": {
                "when": "2026-05-01T10:00:00Z",
                "id": str(ident),
                "unit": "f",
                "kind": "b",
                "guests": [{"street": "Main", "zip": 12345}],
            },
            "extra": [{"street": "Side", "zip": 2000}],
            "maybe": None,
        }
    )
    stay = made["stay"]
    assert isinstance(stay, Stay)
    assert stay.when == dt.datetime(2026, 5, 1, 10, tzinfo=dt.timezone.utc)
    assert stay.id == ident
    assert stay.unit is Unit.F
    assert stay.guests == [Address(street="Main", zip=12345)]
    assert made["extra"] == [Address(street="Side", zip=2000)]
    assert made["maybe"] is None


class Checked(BaseModel):
    city: str
    nights: int

    @field_validator("city")
    @classmethod
    def _capitalised(cls, value: str) -> str:
        if not value[:1].isupper():
            raise ValueError("the city must be capitalised")
        return value

    @model_validator(mode="after")
    def _short(self) -> Checked:
        if self.nights > 30:
            raise ValueError("at most 30 nights")
        return self


@tool
def reserve(request: Checked, rooms: list[Checked]) -> str:
    """Reserve.

    Args:
        request: The request.
        rooms: The rooms.
    """
    return "ok"


def test_a_validators_refusal_is_an_argument_error_at_its_path() -> None:
    """A field validator's and a model validator's refusals are argument problems at the
    paths their locs name, every one listed, naming the tool."""
    with pytest.raises(ArgumentValidationError) as raised:
        reserve.validate_arguments(
            {
                "request": {"city": "paris", "nights": 2},
                "rooms": [{"city": "Oslo", "nights": 1}, {"city": "Oslo", "nights": 40}],
            }
        )
    assert list(raised.value.errors) == [
        "$.request.city: Value error, the city must be capitalised",
        "$.rooms[1]: Value error, at most 30 nights",
    ]
    assert "reserve" in raised.value.message_for_model


def test_the_model_reads_a_validators_refusal_and_calls_again() -> None:
    """In a run, the refusal goes back to the model as the call's result; its next call runs."""
    model = ScriptedModel(
        [
            ScriptedModel.call("reserve", {"request": {"city": "paris", "nights": 2}, "rooms": []}),
            ScriptedModel.call("reserve", {"request": {"city": "Paris", "nights": 2}, "rooms": []}),
            "Reserved.",
        ]
    )
    response = Agent(model, tools=[reserve]).run("reserve")
    assert response.text == "Reserved."
    refused = model.requests[1].messages[-1].tool_results[0]
    assert refused.is_error
    assert "$.request.city: Value error, the city must be capitalised" in refused.content
    assert model.requests[2].messages[-1].tool_results[0].content == "ok"


class Strict(BaseModel):
    model_config = ConfigDict(strict=True)

    on: dt.date


@tool
def plan(strict: Strict) -> str:
    """Plan.

    Args:
        strict: A strict model.
    """
    return strict.on.isoformat()


def test_a_strict_model_takes_its_values_as_json() -> None:
    """A strict model is given the arguments as the JSON they are: a date from its text."""
    assert plan.validate_arguments({"strict": {"on": "2026-01-02"}})["strict"].on == dt.date(
        2026, 1, 2
    )


class Node(BaseModel):
    value: int
    children: list[Node] = []


@tool
def walk(tree: Node, other: Node | None = None) -> int:
    """Walk a tree.

    Args:
        tree: The tree.
        other: Another.
    """
    return tree.value


def test_a_recursive_model_is_one_definition_in_the_roots_defs() -> None:
    """A model that holds itself is a ``$ref`` to one definition in the root's ``$defs``,
    as a recursive dataclass is, and its values are structured at any depth."""
    parameters = walk.parameters
    assert parameters["properties"]["tree"] == {"$ref": "#/$defs/Node", "description": "The tree."}
    assert list(parameters["$defs"]) == ["Node"]
    node = parameters["$defs"]["Node"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    made = walk.validate_arguments({"tree": {"value": 1, "children": [{"value": 2}]}})
    assert made["tree"].children[0] == Node(value=2)


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"]
    age: int


class Pet(BaseModel):
    pet: Annotated[Cat | Dog, pydantic.Field(discriminator="kind")]
    other: Cat | Dog | None = None


@tool
def adopt(request: Pet) -> str:
    """Adopt a pet.

    Args:
        request: Which pet.
    """
    return request.pet.kind


def test_a_tagged_union_is_an_anyof_strict_dialects_take() -> None:
    """A discriminated union is an ``anyOf`` without OpenAPI's ``discriminator`` (whose
    mapping names ``$defs`` no longer there), which OpenAI's strict mode takes."""
    pet = adopt.parameters["properties"]["request"]["properties"]["pet"]
    assert "discriminator" not in pet
    assert [branch["properties"]["kind"]["const"] for branch in pet["anyOf"]] == ["cat", "dog"]
    assert compile_tool(adopt, "openai-chat", strict=True).strict is True


def test_a_union_members_name_is_no_part_of_a_problems_path() -> None:
    """The member a loc names (``dog`` of a tagged union) is left out of the JSON path."""

    class Puppy(BaseModel):
        kind: Literal["puppy"]
        age: int

        @field_validator("age")
        @classmethod
        def _young(cls, value: int) -> int:
            if value > 1:
                raise ValueError("a puppy is at most 1")
            return value

    class Kennel(BaseModel):
        pet: Annotated[Cat | Puppy, pydantic.Field(discriminator="kind")]

    with pytest.raises(ArgumentValidationError) as raised:
        tool(Kennel).validate_arguments({"pet": {"kind": "puppy", "age": 3}})
    assert list(raised.value.errors) == ["$.pet.age: Value error, a puppy is at most 1"]
    value = {"pet": {"kind": "dog", "age": 3}}
    errors = [{"type": "value_error", "loc": ("pet", "dog", "age"), "msg": "too old"}]
    assert ModelRefused(Pet, errors, value).problems(("request",)) == [
        (("request", "pet", "age"), "too old")
    ]


class SmallCount(TypedDict):
    n: int


@dataclasses.dataclass
class FewItems:
    n: Annotated[int, pydantic.Field(le=10)]


class ManyItems(BaseModel):
    n: int = pydantic.Field(gt=10)


def test_a_model_in_a_union_of_classes_is_tried_in_its_place() -> None:
    """A pydantic model is an object's class like the others of a union: of those whose
    schema accepts the value, the first declared structures it, not a later TypedDict."""

    @tool
    def count(v: FewItems | ManyItems | SmallCount) -> str:
        """Count.

        Args:
            v: How many.
        """
        return repr(v)

    assert count.validate_arguments({"v": {"n": 50}}) == {"v": ManyItems(n=50)}
    assert count.validate_arguments({"v": {"n": 5}}) == {"v": FewItems(5)}


calls: list[str] = []


class Booking(BaseModel):
    """Book a room.

    Attributes:
        city: Where.
    """

    city: str
    nights: int = pydantic.Field(1, ge=1, description="How many nights.")
    check_in: dt.date = pydantic.Field(alias="checkIn")

    @model_validator(mode="after")
    def _noted(self) -> Booking:
        calls.append(self.city)
        if self.nights > 30:
            raise ValueError("at most 30 nights")
        return self


def test_a_model_is_a_tool_of_its_fields() -> None:
    """``tool(Model)``: its fields (by alias) are the parameters, its docstring the
    description; the check makes the model (validators run once) and the call returns it."""
    booking = tool(Booking)
    assert booking.description == "Book a room."
    assert booking.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Where."},
            "nights": {
                "default": 1,
                "description": "How many nights.",
                "minimum": 1,
                "type": "integer",
            },
            "checkIn": {"format": "date", "type": "string"},
        },
        "required": ["city", "checkIn"],
        "additionalProperties": False,
    }
    calls.clear()
    made = booking.invoke(booking.validate_arguments({"city": "Oslo", "checkIn": "2026-03-01"}))
    assert made == Booking(city="Oslo", checkIn=dt.date(2026, 3, 1))
    assert calls == ["Oslo", "Oslo"]  # the check's, and the comparison's model above
    with pytest.raises(ArgumentValidationError) as raised:
        booking.validate_arguments({"city": "Oslo", "checkIn": "2026-03-01", "nights": 31})
    assert list(raised.value.errors) == ["$: Value error, at most 30 nights"]


class Weather(BaseModel):
    """A forecast."""

    city: str = pydantic.Field(description="The city.")
    celsius: float = pydantic.Field(ge=-90, le=60)
    seen: dt.datetime

    @field_validator("city")
    @classmethod
    def _capitalised(cls, value: str) -> str:
        if not value[:1].isupper():
            raise ValueError("the city must be capitalised")
        return value


_GOOD = '{"city": "Oslo", "celsius": 3, "seen": "2026-01-01T12:00:00Z"}'


def test_an_output_model_is_asked_for_and_a_refusal_asked_again() -> None:
    """``output_type=Model``: its schema is asked for, and an answer its validator refuses
    goes back to the model with the problem at its path, then the next answer is the model."""
    model = ScriptedModel(['{"city": "oslo", "celsius": 3, "seen": "2026-01-01T12:00:00Z"}', _GOOD])
    response = generate_text(model, "go", output_type=Weather, output_retries=2)
    assert response.output == Weather(
        city="Oslo", celsius=3, seen=dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
    )
    spec = model.requests[0].output
    assert spec is not None
    assert spec.name == "Weather"
    assert _titles(spec.schema) == []
    assert spec.schema["properties"]["city"]["description"] == "The city."
    feedback = model.requests[1].messages[-1].text
    assert "- $.city: Value error, the city must be capitalised" in feedback


def test_an_output_model_saved_in_a_state_round_trips_and_resumes() -> None:
    """The state holds the output as JSON; loaded, it equals the saved one, and resuming it
    rebuilds the model."""
    done = Agent(ScriptedModel([_GOOD]), output_type=Weather).run("q")
    assert isinstance(done.output, Weather)
    assert done.state.output == {"city": "Oslo", "celsius": 3, "seen": "2026-01-01T12:00:00Z"}
    loaded = RunState.from_json(done.state.to_json())
    assert loaded == done.state
    resumed = Agent(ScriptedModel([]), output_type=Weather).resume(loaded)
    assert resumed.output == done.output


def test_a_list_of_models_is_an_output_type() -> None:
    """``list[Model]`` is asked for wrapped, and read back as models."""
    response = generate_text(
        ScriptedModel([f'{{"result": [{_GOOD}]}}']), "go", output_type=list[Weather]
    )
    assert [w.city for w in response.output] == ["Oslo"]


def test_a_model_default_is_written_as_its_json() -> None:
    """A parameter defaulting to a model instance shows the model's JSON dump."""

    @tool
    def ship(to: Address = Address(street="Main", zip=1234)) -> str:  # noqa: B008
        """Ship.

        Args:
            to: Where to.
        """
        return to.street

    assert ship.parameters["properties"]["to"]["default"] == {"street": "Main", "zip": 1234}


def test_import_toolfold_does_not_import_pydantic() -> None:
    """toolfold recognises models through ``sys.modules``: importing it loads no pydantic."""
    code = "import sys, toolfold; print('pydantic' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


class Draft(BaseModel):
    text: str
    check_in: str = pydantic.Field(alias="checkIn")


def test_a_workflow_checks_a_model_outputs_fields_when_built() -> None:
    """A placeholder naming a field a model output lacks is a definition error when the
    workflow is built, the fields named by the keys of its JSON (aliases), which it reads."""
    reviser = Agent(
        ScriptedModel(['{"text": "v1", "checkIn": "x1"}']), name="reviser", output_type=Draft
    )
    editor = Agent(ScriptedModel(["edited"]), name="editor")
    with pytest.raises(WorkflowDefinitionError) as raised:
        Sequence(reviser, Task(editor, prompt="Edit {reviser.check_in}"))
    assert list(raised.value.problems) == [
        "step 'editor' refers to {reviser.check_in}, but step 'reviser' gives Draft, which"
        " has no field 'check_in' (fields: text, checkIn)"
    ]
    Sequence(reviser, Task(editor, prompt="Edit {reviser.checkIn}")).run("go")
    assert editor.model.requests[0].messages[-1].text == "Edit x1"  # type: ignore[attr-defined]


@pydantic.dataclasses.dataclass
class Counted:
    count: int

    @field_validator("count")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError("count must be positive")
        return value


@tool
def tally(counted: Counted) -> str:
    """Tally.

    Args:
        counted: How many.
    """
    return str(counted.count)


def test_a_pydantic_dataclasss_refusal_is_listed_by_loc() -> None:
    """A pydantic dataclass is read as a dataclass; its validator's ValidationError (from
    its ``__init__``) is a problem at the field's path, not the error's text whole."""
    assert tally.validate_arguments({"counted": {"count": 2}})["counted"] == Counted(count=2)
    with pytest.raises(ArgumentValidationError) as raised:
        tally.validate_arguments({"counted": {"count": 0}})
    assert list(raised.value.errors) == ["$.counted.count: Value error, count must be positive"]


class Unschemable(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    apply: Callable[[int], int]


def test_a_model_pydantic_cannot_describe_is_a_definition_error() -> None:
    """A model whose JSON Schema pydantic cannot make is a definition error naming it, in
    pydantic's one line (not its link to its documentation)."""

    def run(model: Unschemable) -> str:
        """Run.

        Args:
            model: The model.
        """
        return ""

    with pytest.raises(toolfold.ToolDefinitionError) as raised:
        tool(run)
    (problem,) = raised.value.problems
    assert problem.startswith(
        "parameter 'model': pydantic cannot make the JSON Schema of Unschemable:"
        " PydanticInvalidForJsonSchema: Cannot generate a JsonSchema"
    )
    assert "\n" not in problem


class Zeroless(BaseModel):
    """Zeroless."""

    a: int

    @model_validator(mode="before")
    @classmethod
    def _not_zero(cls, data: Any) -> Any:
        if data.get("a") == 0:
            raise TypeError("a is zero")
        return data


def test_a_model_tools_validator_raising_any_error_is_an_argument_error() -> None:
    """``tool(Model)`` whose validator raises a TypeError: the model reads it as an argument
    error at ``$`` and the run goes on (it used to end the run with the TypeError)."""
    zeroless = tool(Zeroless)
    model = ScriptedModel([ScriptedModel.call("Zeroless", {"a": 0}), "done"])
    assert Agent(model, tools=[zeroless]).run("go").text == "done"
    result = model.requests[1].messages[-1].tool_results[0].content
    assert "- $: cannot convert to Zeroless: a is zero" in result


class Doubled(BaseModel):
    x: int

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def doubled(self) -> int:
        return self.x * 2


def make_draft(value: str) -> Draft:
    return Draft(text=value, checkIn="x1")


def make_doubled(value: str) -> Doubled:
    return Doubled(x=2)


def test_a_placeholder_reads_an_aliased_field_and_no_computed_one() -> None:
    """A function step's model output is JSON by the keys of its schema, as the build check
    names its fields: ``{make_draft.checkIn}`` runs, and a computed field (not in the JSON,
    not in the schema) is refused when built."""
    editor = Agent(ScriptedModel(["edited"]), name="editor")
    Sequence(make_draft, Task(editor, prompt="Edit {make_draft.checkIn}")).run("go")
    assert editor.model.requests[0].messages[-1].text == "Edit x1"  # type: ignore[attr-defined]
    with pytest.raises(WorkflowDefinitionError):
        Sequence(make_draft, Task(editor, prompt="Edit {make_draft.check_in}"))
    doubler = Agent(ScriptedModel(["ok"]), name="doubler")
    with pytest.raises(WorkflowDefinitionError) as raised:
        Sequence(make_doubled, Task(doubler, prompt="D {make_doubled.doubled}"))
    assert "has no field 'doubled' (fields: x)" in str(raised.value)
    Sequence(make_doubled, Task(doubler, prompt="D {make_doubled.x}")).run("go")
    assert doubler.model.requests[0].messages[-1].text == "D 2"  # type: ignore[attr-defined]


class SerAliased(BaseModel):
    a: int = pydantic.Field(serialization_alias="sA")


class Inside(BaseModel):
    inner: list[SerAliased]
    both: int = pydantic.Field(validation_alias="vB", serialization_alias="sB")


def make_ser(value: str) -> SerAliased:
    return SerAliased(a=1)


def use_ser(x: SerAliased) -> int:
    return x.a


class ByName(BaseModel):
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=False)
    a_b: int = pydantic.Field(alias="AB")


def test_a_model_written_by_a_key_it_does_not_read_is_a_definition_error() -> None:
    """A model (at any depth) whose field pydantic writes under a key it does not read (a
    ``serialization_alias``, ``validate_by_alias=False``) is a definition error naming the
    field, as a tool's parameter, an agent's output type and a function step's input and
    output (its JSON was refused by the next step, or by the tool it was sent back to)."""

    def run(s: SerAliased, i: list[Inside], v: ByName) -> str:
        """Run.

        Args:
            s: S.
            i: I.
            v: V.
        """
        return ""

    with pytest.raises(toolfold.ToolDefinitionError) as raised:
        tool(run)
    fix = (
        ", so the model would not validate its own JSON (give it one key: an alias,"
        " or the same validation_alias and serialization_alias)"
    )
    assert list(raised.value.problems) == [
        "parameter 's': field 'a' of SerAliased: written to JSON as 'sA' but read as 'a'" + fix,
        "parameter 'i' at i[]: field 'both' of Inside: written to JSON as 'sB' but read as 'vB'"
        + fix,
        "parameter 'i' at i[]: field 'a' of SerAliased: written to JSON as 'sA' but read as 'a'"
        + fix,
        "parameter 'v': field 'a_b' of ByName: written to JSON as 'AB' but read as 'a_b'"
        " (validate_by_alias=False)" + fix,
    ]
    with pytest.raises(WorkflowDefinitionError) as built:
        Sequence(make_ser, use_ser)
    assert "step 'use_ser': field 'a' of SerAliased: written to JSON as 'sA'" in str(built.value)
    with pytest.raises(toolfold.ToolDefinitionError):
        Agent(ScriptedModel(['{"a": 1}']), name="maker", output_type=SerAliased)


class Leaf(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel)
    first_name: str


class Leaves(pydantic.RootModel[list[Leaf]]):
    """Leaves."""


class OpenLeaf(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, extra="allow")
    some_leaf: Leaf


class BaseItem(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel)
    base_id: int


class SubItem(BaseItem):
    sub_note: str


@dataclasses.dataclass
class LeafBox:
    inner_leaf: Leaf


class Grove(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel)
    leaf_list: list[Leaf]
    leaf_map: dict[str, Leaf]
    rooted: Leaves
    opened: OpenLeaf
    item: BaseItem
    box: LeafBox


def make_grove(value: str) -> Grove:
    return Grove.model_validate(
        {
            "leafList": [{"firstName": "a"}],
            "leafMap": {"k": {"firstName": "b"}},
            "rooted": [{"firstName": "c"}],
            "opened": {"someLeaf": {"firstName": "d"}, "extra_key": 1},
            "item": SubItem(baseId=1, subNote="n"),
            "box": LeafBox(inner_leaf=Leaf(firstName="e")),
        }
    )


def use_grove(grove: Grove) -> str:
    return grove.box.inner_leaf.first_name + grove.leaf_map["k"].first_name


def test_an_aliased_model_is_written_by_its_keys_at_any_depth() -> None:
    """A to_camel model nested in a list, a dict, a RootModel, an extra="allow" model, as a
    subclass in a base-typed field and in a stdlib dataclass is written by its aliases
    (pydantic's by-alias dump), which the model, a tool's schema and a next step take back
    (a subclass and a dataclass's model were written by field name, and refused)."""
    from toolfold.toolkit._pydantic import unstructure_model

    data = unstructure_model(make_grove("go"))
    assert data == {
        "leafList": [{"firstName": "a"}],
        "leafMap": {"k": {"firstName": "b"}},
        "rooted": [{"firstName": "c"}],
        "opened": {"someLeaf": {"firstName": "d"}, "extra_key": 1},
        "item": {"baseId": 1},
        "box": {"innerLeaf": {"firstName": "e"}},
    }
    assert unstructure_model(Grove.model_validate(data)) == data

    @tool
    def take(grove: Grove) -> str:
        """Take.

        Args:
            grove: The grove.
        """
        return use_grove(grove)

    assert take.invoke(take.validate_arguments({"grove": data})) == "eb"
    assert Sequence(make_grove, use_grove).run("go").output == "eb"


def test_a_computed_field_is_not_in_a_default() -> None:
    """A default holding a model with a computed field is written without it, so the closed
    schema takes it back (it was refused: unexpected property 'doubled')."""

    @tool
    def take(d: Doubled = Doubled(x=1)) -> int:  # noqa: B008
        """Take.

        Args:
            d: D.
        """
        return d.x

    default = take.parameters["properties"]["d"]["default"]
    assert default == {"x": 1}
    assert take.invoke(take.validate_arguments({"d": default})) == 1


def test_an_agent_steps_placeholders_name_the_keys_the_llm_answers_with() -> None:
    """An agent step with a model output: the build takes a field by the key the LLM's JSON
    has (``{maker.firstName}``) and refuses a field name the JSON lacks or a computed field
    (they passed the build and failed at run time)."""
    for model, answer, good, bad in [
        (Leaf, '{"firstName": "2"}', "{maker.firstName}", "{maker.first_name}"),
        (Doubled, '{"x": 2}', "{maker.x}", "{maker.doubled}"),
    ]:
        maker = Agent(ScriptedModel([answer]), name="maker", output_type=model)
        reader = Agent(ScriptedModel(["ok"]), name="reader")
        with pytest.raises(WorkflowDefinitionError):
            Sequence(maker, Task(reader, prompt="R " + bad))
        Sequence(maker, Task(reader, prompt="R " + good)).run("go")
        assert reader.model.requests[0].messages[-1].text == "R 2"  # type: ignore[attr-defined]


class Hidden(BaseModel):
    x: int
    hidden: str = pydantic.Field(default="h", exclude=True)


def make_hidden(value: str) -> Hidden:
    return Hidden(x=1, hidden="s")


def test_an_excluded_field_is_no_field_of_a_step() -> None:
    """A ``Field(exclude=True)`` field (left out of the model's JSON) is no field to a
    placeholder: refused when built (it passed and failed at run time)."""
    reader = Agent(ScriptedModel(["ok"]), name="reader")
    with pytest.raises(WorkflowDefinitionError) as raised:
        Sequence(make_hidden, Task(reader, prompt="R {make_hidden.hidden}"))
    assert "has no field 'hidden' (fields: x)" in str(raised.value)


class Choices(BaseModel):
    a: int = pydantic.Field(validation_alias=pydantic.AliasChoices("a", "A"))


class MustHide(BaseModel):
    x: int
    secret: str = pydantic.Field(exclude=True)


def test_a_field_with_no_one_key_is_a_definition_error() -> None:
    """A field whose validation alias is an ``AliasChoices`` (no one key to write it
    under), or a required ``exclude=True`` one, is a definition error naming it."""

    def run(c: Choices, h: MustHide) -> str:
        """Run.

        Args:
            c: C.
            h: H.
        """
        return ""

    with pytest.raises(toolfold.ToolDefinitionError) as raised:
        tool(run)
    assert list(raised.value.problems) == [
        "parameter 'c': field 'a' of Choices: pydantic validation_alias of kind AliasChoices"
        " is not supported (give it one key: a str validation_alias or alias)",
        "parameter 'h': field 'secret' of MustHide is Field(exclude=True) and required:"
        " pydantic leaves it out of the model's JSON, which then does not validate back"
        " (give it a default)",
    ]


class Named(BaseModel):
    user_name: str = pydantic.Field(alias="userName")


def test_an_aliased_model_default_is_written_by_alias_and_taken_back() -> None:
    """A parameter defaulting to an aliased model shows its JSON by alias, so the default
    sent back as the argument passes the check (it was written by field name, refused)."""

    @tool
    def greet(who: Named = Named(userName="x")) -> str:  # noqa: B008
        """Greet.

        Args:
            who: Whom.
        """
        return who.user_name

    default = greet.parameters["properties"]["who"]["default"]
    assert default == {"userName": "x"}
    assert greet.invoke(greet.validate_arguments({"who": default})) == "x"


class Open(BaseModel):
    """Open."""

    model_config = ConfigDict(extra="allow")
    a: int


def test_a_model_tool_allowing_extra_keys_takes_them() -> None:
    """``tool(Model)`` of a model with ``extra="allow"`` takes the extra keys its schema
    allows (they were refused as unexpected arguments)."""
    opened = tool(Open)
    assert opened.parameters["additionalProperties"] is True
    made = opened.invoke(opened.validate_arguments({"a": 1, "zz": 2}))
    assert made == Open(a=1, zz=2)


class Numbers(pydantic.RootModel[list[int]]):
    """Numbers."""


def test_a_model_tool_of_a_model_not_an_object_is_a_definition_error() -> None:
    """``tool(RootModel[list[int]])`` is a definition error (it was a tool with no
    parameters whose every call failed)."""
    with pytest.raises(toolfold.ToolDefinitionError) as raised:
        tool(Numbers)
    (problem,) = raised.value.problems
    assert problem.startswith("model Numbers is not an object of fields (its schema is array)")


class Configured(BaseModel):
    model_config = ConfigDict(json_schema_extra={"description": "Set by config."})
    a: int


def test_a_description_set_by_json_schema_extra_is_kept() -> None:
    """A model's description from ``json_schema_extra`` (not its docstring) is the tool's
    (it was dropped as if it were pydantic's docstring)."""
    assert tool(Configured).description == "Set by config."


class Plan(BaseModel):
    """Plan."""

    model_config = ConfigDict(strict=True)
    on: dt.date
    n: int


def test_a_model_tool_in_a_run_is_checked_by_its_model() -> None:
    """In a run, ``tool(StrictModel)`` is checked by the model (no quick path by the
    parameters): each call returns the model's JSON, not pydantic's error text."""
    plan = tool(Plan)
    arguments = {"on": "2026-01-01", "n": 1}
    plan.validate_arguments(arguments)  # its checker built, as after a first call
    call = ScriptedModel.call("Plan", arguments)
    model = ScriptedModel([call, call, "done"])
    Agent(model, tools=[plan]).run("go")
    for request in model.requests[1:]:
        assert request.messages[-1].tool_results[0].content == '{"on":"2026-01-01","n":1}'


@dataclasses.dataclass
class Room:
    """A room.

    Attributes:
        beds: How many beds.
    """

    beds: int


class Hotel(BaseModel):
    room: Room
    price: Decimal


def test_a_dataclass_and_decimal_in_a_model_are_described_as_toolfold_does() -> None:
    """In a model, a dataclass's docstring is read as toolfold reads it (its summary; its
    ``Attributes:`` the fields'), and a Decimal is toolfold's decimal string."""
    schema = toolfold.schema_for_type(Hotel)
    assert schema["properties"]["room"]["description"] == "A room."
    assert schema["properties"]["room"]["properties"]["beds"]["description"] == "How many beds."
    assert schema["properties"]["price"] == {"type": "string", "format": "decimal"}


@tool
def book_hotel(hotel: Hotel) -> str:
    """Book.

    Args:
        hotel: The hotel.
    """
    return str(hotel.price)


def test_a_decimal_in_a_model_is_taken_as_a_string() -> None:
    """A Decimal in a model is sent and checked as text, as a dataclass's is."""
    hotel = {"room": {"beds": 2}, "price": "1.50"}
    assert book_hotel.invoke(book_hotel.validate_arguments({"hotel": hotel})) == "1.50"


class Sometimes(BaseModel):
    a: int = pydantic.Field(alias="A")
    b: Optional[int] = pydantic.Field(  # noqa: UP045
        default=None, alias="B", exclude_if=lambda value: value is None
    )


def test_a_field_left_out_by_exclude_if_keeps_the_others_keys() -> None:
    """A field ``exclude_if`` leaves out of a value's dump is left out, the other fields
    still by their keys (the dump fell back to field names, which the model refuses)."""
    from toolfold.toolkit._pydantic import unstructure_model

    assert unstructure_model(Sometimes(A=1)) == {"A": 1}
    assert unstructure_model(Sometimes(A=1, B=2)) == {"A": 1, "B": 2}
    assert Sometimes.model_validate(unstructure_model(Sometimes(A=1))) == Sometimes(A=1)


class OldDump(Doubled):
    def model_dump(self, *, mode: str = "python", by_alias: bool = False) -> dict[str, Any]:  # type: ignore[override]
        """As before pydantic 2.12: no ``exclude_computed_fields``."""
        return super().model_dump(mode=mode, by_alias=by_alias)


def test_a_pydantic_without_exclude_computed_fields_drops_the_top_ones() -> None:
    """Under a pydantic before 2.12 (no ``exclude_computed_fields``), a model's own
    computed fields are still left out of its JSON."""
    from toolfold.toolkit._pydantic import unstructure_model

    assert unstructure_model(OldDump(x=1)) == {"x": 1}


class Blob(BaseModel):
    """A model holding bytes pydantic cannot write as JSON text."""

    data: bytes
    day: dt.date = dt.date(2024, 1, 2)


def test_a_model_pydantic_cannot_dump_as_json_is_written_by_its_values() -> None:
    """A model whose JSON dump fails (bytes that are not UTF-8) is written by its Python
    dump, its bytes as base64 like bytes elsewhere, and the rest stays JSON (it was its
    repr, ``Blob(data=b'\\xff')``)."""
    from toolfold.toolkit._results import format_result

    assert format_result([Blob(data=b"\xff"), {"ok": True}]) == (
        '[{"data":"/w==","day":"2024-01-02"},{"ok":true}]'
    )


def test_a_method_tool_in_a_pydantic_model_binds_to_each_instance() -> None:
    """@tool on a method of a BaseModel is no field: each instance has its bound tool.

    Before, the class statement failed with pydantic's "A non-annotated attribute
    was detected: `search = Tool(...)`".
    """

    class _Search(BaseModel):
        city: str = "paris"

        @tool
        def search(self, q: str) -> str:
            """Search in the model's city.

            Args:
                q: What to search.
            """
            return f"{q} in {self.city}"

    class _OnlyTools(BaseModel):
        @tool
        def ping(self) -> str:
            """Ping."""
            return "pong"

    rome = _Search(city="rome")
    model = ScriptedModel([ScriptedModel.call("search", {"q": "hi"}), "done"])
    response = Agent(model, tools=[rome.search]).run("go")
    assert response.steps[0].tool_results[0].content == "hi in rome"
    assert list(_Search.model_fields) == ["city"]
    assert rome.model_dump() == {"city": "rome"}
    assert rome == _Search(city="rome")
    assert _Search(city="oslo").search("x") == "x in oslo"
    assert _OnlyTools().ping() == "pong"
    assert not _OnlyTools.model_fields


def test_a_method_tool_annotated_in_a_pydantic_model_keeps_its_annotation() -> None:
    """A tool the model's body annotates itself (``ClassVar[Tool]``) is left as written."""
    from typing import ClassVar

    class Annotated_(BaseModel):
        search: ClassVar[toolfold.Tool[Any, Any]]

        @tool
        def search(self, q: str) -> str:  # type: ignore[no-redef]
            """Search.

            Args:
                q: What to search.
            """
            return q

    assert Annotated_.__annotations__["search"] == "ClassVar[toolfold.Tool[Any, Any]]"
    assert Annotated_().search("x") == "x"
