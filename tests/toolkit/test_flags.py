"""A `Flag` / `IntFlag` parameter: its schema takes any sum of its flags, and so does the converter."""

from __future__ import annotations

import enum
from typing import Annotated

import pytest
from jsonschema import Draft202012Validator

from toolfold import Agent, ArgumentValidationError, ToolDefinitionError, generate_text, tool
from toolfold import schema_for_type as schema
from toolfold.testing import ScriptedModel, TestModel
from toolfold.toolkit._arguments import ArgumentChecker
from toolfold.toolkit._converter import get_converter
from toolfold.toolkit._flags import flag_mask


class Perm(enum.Flag):
    """File permissions."""

    R = 1
    W = 2
    X = 4


class Mode(enum.IntFlag):
    READ = 1
    WRITE = 2


class Sparse(enum.Flag):
    A = 1
    C = 4


NONE = Perm(0)
NOTE = "Flags R=1, W=2, X=4, combined by adding (0 for none)."


def test_a_flags_schema_is_a_range_with_its_flags_in_the_description() -> None:
    """Flag and IntFlag give 0..(all flags or'ed), not an enum of the single flags; the class docstring stays."""
    assert schema(Perm) == {
        "type": "integer",
        "minimum": 0,
        "maximum": 7,
        "description": f"File permissions. {NOTE}",
    }
    assert schema(Mode) == {
        "type": "integer",
        "minimum": 0,
        "maximum": 3,
        "description": "Flags READ=1, WRITE=2, combined by adding (0 for none).",
    }
    assert schema(Sparse)["enum"] == [0, 1, 4, 5]  # a gap in the bits: the sums, listed


def test_a_described_flag_parameter_keeps_its_description_and_the_flags() -> None:
    """A docstring's or Annotated's description of the parameter comes first, the flags after it."""

    @tool
    def chmod(path: str, perm: Perm, mask: Annotated[Perm, "bits to clear"] = NONE) -> str:
        """Change a file's permissions.

        Args:
            path: The file.
            perm: The permissions to set
        """
        return path

    properties = chmod.parameters["properties"]
    assert properties["perm"]["description"] == f"The permissions to set. {NOTE}"
    assert properties["mask"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 7,
        "description": f"bits to clear. {NOTE}",
        "default": 0,
    }


def test_a_flag_with_no_flags_or_no_int_values_is_a_definition_error() -> None:
    """JSON has no sum of flags that are not ints: refused at definition (Python itself may refuse first)."""

    class Empty(enum.Flag):
        pass

    with pytest.raises(ToolDefinitionError, match=r"Flag .*Empty has no flags"):
        schema(Empty)
    try:

        class Letters(enum.Flag):  # Python 3.11/3.12 refuse this class; 3.13 makes it
            A = "a"
            B = "b"

    except TypeError:
        return
    with pytest.raises(ToolDefinitionError, match=r"values that are not integers \('a', 'b'\)"):
        schema(Letters)


@pytest.mark.parametrize("cls", [Perm, Mode, Sparse])
def test_the_converter_takes_what_the_schema_takes(cls: type[enum.Flag]) -> None:
    """The schema and the converter take 0 and every sum of flags; a bit of no flag, a number past the range and a negative one neither."""
    convert = get_converter().structure
    accepts = Draft202012Validator(schema(cls)).is_valid
    mask = flag_mask(cls)
    sums = {0}
    for member in cls.__members__.values():
        sums |= {s | member.value for s in sums}
    for value in range(-1, mask + 2):
        assert accepts(value) == (value in sums)
        if value in sums:
            assert convert(value, cls) == cls(value)
        else:
            with pytest.raises(ValueError, match=f"{value} is not a valid {cls.__name__} "):
                convert(value, cls)


def test_an_out_of_range_flag_is_refused_naming_the_tool_the_parameter_and_the_flags() -> None:
    """The schema's bound refuses 8 first; the message is the converter's, which names the flags."""
    check = ArgumentChecker("chmod", chmod.parameters, {"path": str, "perm": Perm}, False)
    with pytest.raises(ArgumentValidationError) as info:
        check.check('{"path": "a", "perm": 8}')
    assert str(info.value) == (
        "invalid arguments for tool 'chmod': the arguments do not match the parameters"
        " (1 problem)\n  $.perm: cannot convert to Perm: 8 is not a valid Perm"
        " (a flag (R=1, W=2, X=4) or a sum of several)"
    )


@tool
def chmod(path: str, perm: Perm) -> str:
    """Change a file's permissions.

    Args:
        path: The file.
        perm: The permissions to set.
    """
    received.append(perm)
    return path


received: list[Perm] = []


def test_a_combination_goes_through_a_tool_call() -> None:
    """A model's 3 passes validation and reaches the tool as R|W; its 8 comes back as an error naming the flags."""
    model = ScriptedModel(
        [
            [ScriptedModel.call("chmod", {"path": "a", "perm": 3})],
            [ScriptedModel.call("chmod", {"path": "b", "perm": 8})],
            "done",
        ]
    )
    received.clear()
    response = generate_text(model, "go", tools=[chmod])
    first, second = response.steps[0].tool_results[0], response.steps[1].tool_results[0]
    assert (first.content, first.is_error) == ("a", False)
    assert received == [Perm.R | Perm.W]
    assert second.is_error
    assert "'chmod'" in second.content
    assert "$.perm: cannot convert to Perm: 8 is not a valid Perm (a flag (R=1, W=2, X=4)" in (
        second.content
    )


class Spelled(enum.Flag):
    """A flag whose own ``_missing_`` looks names up (and lets their KeyError out)."""

    R = 1
    W = 2

    @classmethod
    def _missing_(cls, value: object) -> Spelled | None:
        if isinstance(value, str):
            made = cls(0)
            for part in value.split("|"):
                made |= cls[part]  # a KeyError for a name of no flag
            return made
        return super()._missing_(value)  # type: ignore[no-any-return]


@tool
def mode(perm: Spelled) -> str:
    """Set a mode.

    Args:
        perm: The mode.
    """
    return str(perm.value)


def test_a_flags_own_missing_that_raises_anything_is_an_argument_error_not_a_crash() -> None:
    """Rewording a refused flag runs the converter; what a flag's own `_missing_` raises
    there (a KeyError) leaves the schema's words, and the run goes on."""
    model = ScriptedModel([[ScriptedModel.call("mode", {"perm": "R|Z"})], "done"])
    response = generate_text(model, "go", tools=[mode])
    result = response.steps[0].tool_results[0]
    assert result.is_error
    assert "$.perm: 'R|Z' is not of type 'integer'" in result.content
    assert response.text == "done"


class Gapped(enum.IntFlag):
    """An IntFlag with its own ``_missing_`` that hands numbers to IntFlag's (which keeps bits)."""

    A = 1
    C = 4

    @classmethod
    def _missing_(cls, value: object) -> Gapped | None:
        return super()._missing_(value)  # type: ignore[no-any-return]


def test_a_number_is_held_to_the_flags_even_with_a_missing_of_the_flags_own() -> None:
    """2 (a bit of no flag) is refused naming the flags, though IntFlag's own _missing_ keeps it."""
    with pytest.raises(ValueError, match=r"2 is not a valid Gapped \(a flag \(A=1, C=4\)"):
        get_converter().structure(2, Gapped)
    assert get_converter().structure(5, Gapped) == Gapped.A | Gapped.C


class Everything(enum.IntFlag):
    """The old spelling of every flag: a member of -1."""

    A = 1
    B = 2
    ALL = -1


def test_a_negative_member_adds_no_bit_to_the_range() -> None:
    """``ALL = -1`` does not make the schema's maximum -1 (which no value meets)."""
    found = schema(Everything)
    assert (found["minimum"], found["maximum"]) == (0, 3)
    assert get_converter().structure(3, Everything) == Everything.A | Everything.B


class Gaps(enum.IntFlag):
    """Flags without bit 1: 1 and 3 are in 0..6 but are no sum of them."""

    READ = 4
    WRITE = 2


def test_flags_with_a_gap_give_an_enum_of_their_sums_and_test_model_calls_with_one() -> None:
    """READ=4, WRITE=2 is ``enum [0, 2, 4, 6]`` (not 0..6, which lets 1 through), so TestModel's argument is taken."""
    assert schema(Gaps)["enum"] == [0, 2, 4, 6]
    assert "minimum" not in schema(Gaps)

    @tool
    def set_perm(p: Gaps) -> str:
        return repr(p)

    run = Agent(TestModel(), tools=[set_perm]).run("go")
    assert not run.steps[0].tool_results[0].is_error
    assert Agent(TestModel(), output_type=Gaps).run("go").output in set(Gaps) | {Gaps(0)}


def test_many_flags_with_a_gap_keep_the_range_or_state_their_multiples() -> None:
    """Seven flags with a gap would list 128 sums: consecutive bits from 2 are the multiples of 2 in
    the range (exact), other gaps keep the range alone (the converter refuses the gaps)."""
    shifted = enum.IntFlag("Shifted", {f"F{i}": 1 << (i + 1) for i in range(7)})
    assert schema(shifted)["minimum"] == 0
    assert (schema(shifted)["maximum"], schema(shifted)["multipleOf"]) == (254, 2)
    gapped = enum.IntFlag("Gapped7", {f"F{i}": 1 << (2 * i) for i in range(7)})
    assert (schema(gapped)["minimum"], schema(gapped)["maximum"]) == (0, 5461)
    assert "multipleOf" not in schema(gapped)
    assert "enum" not in schema(gapped)


def test_a_bound_no_sum_of_gapped_flags_meets_is_a_definition_error() -> None:
    """``Field(ge=7)`` on READ=4, WRITE=2 (sums up to 6) is refused naming both, as the range's clash was."""
    from toolfold import Field

    def chmod(perm: Annotated[Gaps, Field(ge=7)]) -> None:
        """Chmod."""

    with pytest.raises(
        ToolDefinitionError,
        match=r"Gaps's own enum=\[0, 2, 4, 6\] and Field\(ge=7\) admit no value",
    ):
        tool(chmod)
