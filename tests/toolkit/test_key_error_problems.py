"""A KeyError from the user's code while structuring is a conversion failure, not a missing property."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from cattrs.errors import ClassValidationError

from toolfold import ArgumentValidationError, register_schema_rule, register_type_hooks, tool
from toolfold.toolkit._converter import get_converter
from toolfold.toolkit._problems import render, structure_problems

RATES = {"EUR": 1.0, "USD": 1.1}


@dataclasses.dataclass
class Price:
    amount: float
    currency: str

    def __post_init__(self) -> None:
        self.rate = RATES[self.currency]


class Code:
    """A type whose own structure hook looks the value up in a table."""


def _by_table(value: Any, _: Any) -> Code:
    raise KeyError("internal")


register_schema_rule(Code, lambda tp, ctx: {"type": "string"})
register_type_hooks(Code, structure=_by_table, unstructure=str)


@dataclasses.dataclass
class Holder:
    n: int
    code: Code


@tool
def convert(price: Price) -> str:
    """Convert.

    Args:
        price: The price.
    """
    return str(price.amount * price.rate)


@tool
def coded(code: Code, holder: Holder) -> str:
    """Coded.

    Args:
        code: A code.
        holder: A code with a number.
    """
    return "ok"


def _problems(made: Any, arguments: dict[str, Any]) -> list[str]:
    with pytest.raises(ArgumentValidationError) as raised:
        made.validate_arguments(arguments)
    return list(raised.value.errors)


def test_a_key_error_of_a_post_init_is_no_missing_property() -> None:
    """`RATES[self.currency]` failing in ``__post_init__`` reads as a conversion failure
    naming the KeyError, not "missing required property 'GBP'"."""
    assert _problems(convert, {"price": {"amount": 3, "currency": "GBP"}}) == [
        "$.price: cannot convert to Price: KeyError 'GBP'"
    ]


def test_a_key_error_of_a_users_hook_is_no_missing_property() -> None:
    """A structure hook raising KeyError, for a parameter or a class's field, reads as a
    conversion failure; a field left out still reads as a required property."""
    assert _problems(coded, {"code": "a", "holder": {"n": 1, "code": "b"}}) == [
        "$.code: cannot convert to Code: KeyError 'internal'",
        "$.holder.code: cannot convert to Code: KeyError 'internal'",
    ]
    with pytest.raises(ClassValidationError) as raised:  # (the converter alone: no schema first)
        get_converter().structure({"code": "b"}, Holder)
    assert render(structure_problems(raised.value, ("holder",), Holder)) == [
        "$.holder: 'n' is a required property",
        "$.holder.code: cannot convert to Code: KeyError 'internal'",
    ]
