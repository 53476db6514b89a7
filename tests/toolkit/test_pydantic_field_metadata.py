"""pydantic's own metadata (``pydantic.Field``, ``constr``) on plain parameters and class fields."""

from __future__ import annotations

import dataclasses
import re
import warnings
from typing import Annotated, Any, Optional

import pydantic
import pydantic.dataclasses
import pytest

from toolfold import Agent, ArgumentValidationError, ToolDefinitionError, tool
from toolfold.testing import ScriptedModel


def _convert(
    code: Annotated[str, pydantic.Field(description="ISO code", pattern=r"^[A-Z]{3}$")],
    amount: Annotated[int, pydantic.Field(ge=1, le=100, description="How much")],
) -> str:
    """Convert money."""
    return f"{amount} {code}"


def test_a_pydantic_field_puts_its_description_and_constraints_in_the_schema() -> None:
    """Annotated[str, pydantic.Field(description=, pattern=)] and ge/le reach the schema."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no "undocumented parameter" warning: both are)
        convert = tool(_convert)
    assert convert.parameters["properties"] == {
        "code": {"type": "string", "description": "ISO code", "pattern": "^[A-Z]{3}$"},
        "amount": {"type": "integer", "minimum": 1, "maximum": 100, "description": "How much"},
    }


def test_arguments_a_pydantic_field_refuses_never_reach_the_tool() -> None:
    """A call breaking a pydantic.Field's pattern and bounds is an argument error, not a call."""
    ran: list[Any] = []

    @tool
    def convert(
        code: Annotated[str, pydantic.Field(description="ISO code", pattern=r"^[A-Z]{3}$")],
        amount: Annotated[int, pydantic.Field(ge=1, le=100, description="How much")],
    ) -> str:
        """Convert money."""
        ran.append(code)
        return "ok"

    model = ScriptedModel([ScriptedModel.call("convert", {"code": "no", "amount": -5}), "done"])
    Agent(model, tools=[convert]).run("go")
    result = model.requests[1].messages[-1].tool_results[0]
    assert result.is_error
    assert ran == []
    with pytest.raises(ArgumentValidationError) as raised:
        convert.validate_arguments({"code": "no", "amount": -5})
    assert len(raised.value.errors) == 2


def test_constr_keeps_its_pattern() -> None:
    """pydantic.constr(pattern=, min_length=) gives both keywords, as conint its bounds."""

    def f(
        x: pydantic.constr(pattern="^a", min_length=2),  # type: ignore[valid-type]
        n: pydantic.conint(ge=2, strict=True),  # type: ignore[valid-type]
    ) -> str:
        """F.

        Args:
            x: X.
            n: N.
        """
        return x

    properties = tool(f).parameters["properties"]
    assert properties["x"] == {
        "type": "string",
        "minLength": 2,
        "pattern": "^a",
        "description": "X.",
    }
    assert properties["n"] == {"type": "integer", "minimum": 2, "description": "N."}


def test_a_pydantic_field_on_a_dataclass_field_is_read() -> None:
    """A stdlib dataclass's Annotated pydantic.Field gives its description and pattern."""

    @dataclasses.dataclass
    class Order:
        code: Annotated[str, pydantic.Field(pattern="^[A-Z]+$", description="The code")]

    def place(order: Order) -> str:
        """Place.

        Args:
            order: The order.
        """
        return order.code

    placed = tool(place)
    assert placed.parameters["properties"]["order"]["properties"]["code"] == {
        "type": "string",
        "description": "The code",
        "pattern": "^[A-Z]+$",
    }
    with pytest.raises(ArgumentValidationError):
        placed.validate_arguments({"order": {"code": "x"}})


@pydantic.dataclasses.dataclass
class _Booking:
    code: Annotated[str, pydantic.Field(pattern=r"^[A-Z]{3}$")]
    name: Annotated[str, pydantic.StringConstraints(strip_whitespace=True, max_length=5)]
    nights: int = pydantic.Field(default=1, ge=1)
    tags: list[str] = pydantic.Field(default_factory=list, max_length=2)


def test_a_pydantic_dataclass_field_gives_its_pydantic_field_to_the_schema() -> None:
    """A pydantic dataclass's pattern, bounds and Field default are in the schema; what the
    schema cannot say (strip_whitespace) is left to pydantic, which builds the class."""

    def book(booking: _Booking) -> str:
        """Book.

        Args:
            booking: The booking.
        """
        return booking.name

    booked = tool(book)
    schema = booked.parameters["properties"]["booking"]
    assert schema["properties"] == {
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "name": {"type": "string", "maxLength": 5},
        "nights": {"type": "integer", "minimum": 1, "default": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    }
    assert schema["required"] == ["code", "name"]
    made = booked.validate_arguments({"booking": {"code": "ABC", "name": " Ada "}})
    assert made["booking"] == _Booking(code="ABC", name="Ada")
    with pytest.raises(ArgumentValidationError, match="nights"):
        booked.validate_arguments({"booking": {"code": "ABC", "name": "a", "nights": 0}})


@pytest.mark.parametrize(
    ("annotation", "named"),
    [
        (Annotated[str, pydantic.Field(alias="y")], "alias='y'"),
        (Annotated[int, pydantic.Field(default=3)], "pydantic.Field(default=3) inside Annotated"),
        (Annotated[int, pydantic.Field(strict=False)], "strict=False"),
        (Annotated[float, pydantic.Field(max_digits=3)], "max_digits=3"),
        (Annotated[str, pydantic.StringConstraints(to_lower=True)], "to_lower=True"),
        (Annotated[str, pydantic.Field(validate_default=True)], "validate_default=True"),
    ],
)
def test_a_pydantic_option_toolfold_cannot_honour_is_a_definition_error(
    annotation: Any, named: str
) -> None:
    """An option the argument check cannot apply names the tool, the parameter and the option."""

    def f(x: Any) -> str:
        """F.

        Args:
            x: X.
        """
        return ""

    f.__annotations__["x"] = annotation
    with pytest.raises(ToolDefinitionError) as raised:
        tool(f)
    message = str(raised.value)
    assert ".<locals>.f: 1 problem" in message
    assert "parameter 'x'" in message
    assert named in message


def test_a_pydantic_field_as_a_parameters_default_says_what_to_write() -> None:
    """``n: int = pydantic.Field(default=1, ge=1)`` names the default and the Annotated form."""

    def f(n: int = pydantic.Field(default=1, ge=1)) -> str:
        """F.

        Args:
            n: N.
        """
        return ""

    with pytest.raises(ToolDefinitionError) as raised:
        tool(f)
    message = str(raised.value)
    assert "parameter 'n'" in message
    assert "pydantic.Field(default=1)" in message
    assert "Annotated[<type>, pydantic.Field(...)]" in message
    assert "not JSON-representable" not in message


def test_bounds_of_a_pydantic_field_that_admit_nothing_name_it() -> None:
    """ge=5 with le=1 is a definition error naming the pydantic.Field by its constraints."""

    def f(x: Annotated[int, pydantic.Field(ge=5, le=1)]) -> str:
        """F.

        Args:
            x: X.
        """
        return ""

    with pytest.raises(ToolDefinitionError, match=r"pydantic\.Field\(ge=5, le=1\) admits no value"):
        tool(f)


def test_a_pydantic_field_constrains_an_optional_parameter() -> None:
    """pydantic.Field(ge=1) on Optional[int] bounds its integer branch."""

    def f(x: Annotated[Optional[int], pydantic.Field(ge=1)] = None) -> str:  # noqa: UP045
        """F.

        Args:
            x: X.
        """
        return ""

    assert tool(f).parameters["properties"]["x"]["anyOf"][0] == {"type": "integer", "minimum": 1}


def test_title_examples_and_json_schema_extra_are_kept() -> None:
    """A pydantic.Field's title, examples and json_schema_extra dict reach the schema."""

    def f(
        x: Annotated[int, pydantic.Field(title="T", examples=[3], json_schema_extra={"k": 1})],
    ) -> str:
        """F.

        Args:
            x: X.
        """
        return ""

    assert tool(f).parameters["properties"]["x"] == {
        "type": "integer",
        "examples": [3],
        "title": "T",
        "k": 1,
        "description": "X.",
    }


@pytest.mark.parametrize("option", ["alias", "validation_alias", "serialization_alias"])
def test_an_alias_on_a_pydantic_dataclass_field_is_a_definition_error(option: str) -> None:
    """A pydantic dataclass field with an alias is refused, naming it: pydantic would read
    the alias while the schema offers the name, so the model's value would be dropped."""

    @pydantic.dataclasses.dataclass
    class Aliased:
        a: int = pydantic.Field(default=2, **{option: "bee"})  # type: ignore[call-overload]

    def f(p: Aliased) -> str:
        """F.

        Args:
            p: The p.
        """
        return repr(p)

    with pytest.raises(ToolDefinitionError) as raised:
        tool(f)
    assert "parameter 'p' at p.a" in str(raised.value)
    assert f"{option}='bee'" in str(raised.value)


def test_options_with_no_effect_on_an_argument_are_accepted_and_deprecated_is_said() -> None:
    """frozen, exclude and field_title_generator change nothing for an argument and are
    ignored; deprecated (a message too) is ``"deprecated": true`` in the schema."""

    def f(
        a: Annotated[
            int,
            pydantic.Field(frozen=True, exclude=True, field_title_generator=lambda n, i: n),
        ],
        b: Annotated[int, pydantic.Field(deprecated="use a")],
        c: Annotated[int, pydantic.Field(deprecated="")],
    ) -> str:
        """F.

        Args:
            a: A.
            b: B.
            c: C.
        """
        return f"{a} {b} {c}"

    made = tool(f)
    assert made.parameters["properties"] == {
        "a": {"type": "integer", "description": "A."},
        "b": {"type": "integer", "deprecated": True, "description": "B."},
        "c": {"type": "integer", "deprecated": True, "description": "C."},
    }
    assert made.invoke(made.validate_arguments({"a": 1, "b": 2, "c": 3})) == "1 2 3"


@pytest.mark.parametrize(
    "annotation",
    [
        Annotated[str, pydantic.Field(pattern=re.compile(r"^[a-z]+$", re.IGNORECASE))],
        Annotated[str, pydantic.StringConstraints(pattern=re.compile(r"^[a-z]+$", re.I))],
    ],
    ids=["Field", "StringConstraints"],
)
def test_a_compiled_pattern_with_flags_is_a_definition_error(annotation: Any) -> None:
    """A compiled pattern's flags are not dropped (refusing 'ABC' pydantic accepts): the
    pattern is refused, naming it and its flags; one without flags is its text."""

    def f(x: Any) -> str:
        """F.

        Args:
            x: X.
        """
        return x  # type: ignore[no-any-return]

    f.__annotations__["x"] = annotation
    with pytest.raises(
        ToolDefinitionError, match=r"re\.compile\('\^\[a-z\]\+\$', re\.IGNORECASE\)"
    ):
        tool(f)
    f.__annotations__["x"] = Annotated[str, pydantic.Field(pattern=re.compile(r"^[a-z]+$"))]
    assert tool(f).parameters["properties"]["x"]["pattern"] == "^[a-z]+$"
