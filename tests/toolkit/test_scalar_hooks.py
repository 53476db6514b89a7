"""Parameters of JSON scalar types are structured without the converter (no cattrs import)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any, Literal, Optional

import pytest

from toolfold import tool
from toolfold.toolkit._arguments import parameter_hooks
from toolfold.toolkit._converter import get_converter

AGENT_OF_SCALARS = '''
import sys
from typing import Literal, Optional
from toolfold import Agent, tool
from toolfold.testing import ScriptedModel


@tool
def scalars(
    a: int, b: float, c: str, d: bool, e: Optional[int] = None, f: "float | None" = None,
    g: Literal["x", "y"] = "x", h: None = None,
) -> str:
    """Scalars.

    Args:
        a: a.
        b: b.
        c: c.
        d: d.
        e: e.
        f: f.
        g: g.
        h: h.
    """
    return repr((a, b, c, d, e, f, g, h))


Agent(ScriptedModel(["x"]), tools=[scalars])
print("cattrs" in sys.modules)
'''


def test_an_agent_whose_tools_take_json_scalars_does_not_import_cattrs() -> None:
    """Building the first agent with a tool of str/int/float/bool/None/Optional/Literal
    parameters builds their hooks without importing cattrs."""
    out = subprocess.run(
        [sys.executable, "-c", AGENT_OF_SCALARS], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


@tool
def numbers(a: int, b: float, c: Optional[int] = None, d: float | None = None) -> str:  # noqa: UP045
    """Numbers.

    Args:
        a: a.
        b: b.
        c: c.
        d: d.
    """
    return ""


@pytest.mark.parametrize(
    ("name", "tp", "value"),
    [
        ("a", int, 3.0),
        ("a", int, 3),
        ("b", float, 2),
        ("b", float, 2.5),
        ("c", Optional[int], 4.0),  # noqa: UP045 (the typing form, as users write it)
        ("c", Optional[int], None),  # noqa: UP045
        ("d", float | None, 1),
        ("d", float | None, None),
    ],
)
def test_a_scalar_parameter_structures_as_the_converter_does(
    name: str, tp: Any, value: Any
) -> None:
    """A scalar parameter's light hook gives what the converter's hook gives: 3.0 is the
    int 3, 2 the float 2.0, None stays None."""
    expected = get_converter().structure(value, tp)
    got = numbers.validate_arguments({"a": 1, "b": 1.5, name: value})[name]
    assert got == expected
    assert type(got) is type(expected)


def test_a_literal_of_numbers_is_left_to_the_converter() -> None:
    """A type other than a JSON scalar one (a Literal of ints) gets the converter's hook."""
    hooks = parameter_hooks("t", {"n": Literal[1, 2]})
    assert hooks["n"][1] is get_converter().get_structure_hook(Literal[1, 2])
