"""Testing ergonomics (session 40): sampled arguments the tool takes, overrides, clear errors."""

from __future__ import annotations

import warnings
from typing import Annotated, Any

import pydantic
import pytest

from toolfold import Agent, Field, tool
from toolfold.testing import TestModel, sample_value


def _takes(tp: Any) -> str:
    """The arguments TestModel makes for a tool of one parameter ``v: tp``, checked by the tool."""

    def f(v: tp) -> str:  # type: ignore[valid-type]
        return repr(v)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (types that warn of their schema, e.g. Json)
        run = Agent(TestModel(), tools=[tool(f)]).run("go")
    result = run.steps[0].tool_results[0]
    assert not result.is_error, result.content
    return run.steps[0].tool_calls[0].arguments_text


@pytest.mark.parametrize(
    "field",
    [
        pydantic.UUID1,
        pydantic.UUID3,
        pydantic.UUID4,
        pydantic.UUID5,
        pydantic.IPvAnyAddress,
        pydantic.IPvAnyInterface,
        pydantic.IPvAnyNetwork,
        pydantic.Base64Str,
        pydantic.Base64Bytes,
        pydantic.Base64UrlStr,
        pydantic.Json[list[int]],
        pydantic.Json[dict[str, pydantic.UUID4]],
    ],
)
def test_pydantic_formats_in_a_model_are_sampled_as_values_the_model_takes(field: Any) -> None:
    """A pydantic model's UUID4, IPvAnyAddress, Base64Str, Json[...] field gets a valid sample, not "aaaaa"."""
    model = pydantic.create_model("Host", v=(field, ...))
    _takes(model)


@pytest.mark.parametrize("pattern", [r"^[A-Z]{3}$", r"^(foo|bar)$", r"^[a-z]{2}\d$", r"^x$|^y$"])
def test_a_set_of_patterned_strings_gets_distinct_items_that_match(pattern: str) -> None:
    """``set[str]`` with a pattern and min_items=2 gets two distinct matching strings, not "uniqueItems needs 2"."""
    tp = Annotated[set[Annotated[str, Field(pattern=pattern)]], Field(min_items=2)]
    _takes(tp)
    value = sample_value(
        {
            "type": "array",
            "uniqueItems": True,
            "minItems": 2,
            "items": {"type": "string", "pattern": pattern},
        }
    )
    assert len(set(value)) == 2
