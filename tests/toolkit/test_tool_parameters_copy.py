"""`Tool(parameters=...)` keeps a read-only deep copy: the caller's dict is not shared."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolfold import ArgumentValidationError, Tool, tool
from toolfold.adapters import compile_tool
from toolfold.runtime import FrozenDict, ToolSpec


def _echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return arguments


def _template() -> dict[str, Any]:
    return {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_changing_the_callers_schema_later_changes_no_tool() -> None:
    """Editing the dict given as ``parameters`` after the tool is made leaves the tool's
    schema, its argument check and the schema sent to a provider as they were."""
    template = _template()
    made = Tool("t", "d", template, _echo)
    assert made.validate_arguments({"a": 1}) == {"a": 1}
    template["properties"]["a"]["type"] = "string"
    template["required"].append("b")
    assert made.parameters == _template()
    assert made.validate_arguments({"a": 2}) == {"a": 2}
    with pytest.raises(ArgumentValidationError, match="'x' is not of type 'integer'"):
        made.validate_arguments({"a": "x"})
    sent = compile_tool(made, "openai-chat").schema_sent
    assert sent["properties"]["a"]["type"] == "integer"
    spec = ToolSpec.from_tool(made)
    assert spec.definition.parameters["properties"]["a"] == {"type": "integer"}


@pytest.mark.parametrize("made", [Tool("t", "d", _template(), _echo), tool(_echo)])
def test_a_tools_parameters_are_read_only(made: Tool[..., Any]) -> None:
    """``tool.parameters`` (explicit or derived) refuses changes at any depth, and is still
    JSON to ``json.dumps`` and equal to the plain dict."""
    assert type(made.parameters) is FrozenDict
    with pytest.raises(TypeError, match="read-only"):
        made.parameters["type"] = "array"
    with pytest.raises(TypeError, match="read-only"):
        made.parameters["properties"]["extra"] = {}
    assert json.loads(json.dumps(made.parameters)) == made.parameters
    assert made.parameters.thaw() == made.parameters
