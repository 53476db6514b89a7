"""A class whose __signature__ differs from its __init__ is a tool with the signature's hints."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from toolfold import ToolDefinitionError, tool


class _Box:
    """A box."""

    def __init__(self, **data: Any) -> None:
        self.data = data


_Box.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter("width", inspect.Parameter.KEYWORD_ONLY, annotation=int),
        inspect.Parameter("label", inspect.Parameter.KEYWORD_ONLY, annotation="str", default="x"),
    ]
)


class _Unannotated:
    """A box whose signature annotates nothing."""

    def __init__(self, **data: Any) -> None:
        self.data = data


_Unannotated.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [inspect.Parameter("width", inspect.Parameter.KEYWORD_ONLY)]
)


def test_a_class_declaring_its_signature_reads_its_hints_from_it() -> None:
    """The parameters and their types come from __signature__ (a string annotation resolved)."""
    made = tool(_Box)
    assert made.parameters["properties"] == {
        "width": {"type": "integer"},
        "label": {"type": "string", "default": "x"},
    }
    assert made(width=3).data == {"width": 3}


def test_a_declared_signature_without_annotations_is_still_named_as_unannotated() -> None:
    """A parameter its declared signature does not annotate is reported as unannotated."""
    with pytest.raises(ToolDefinitionError, match=r"parameter 'width' has no type annotation"):
        tool(_Unannotated)
