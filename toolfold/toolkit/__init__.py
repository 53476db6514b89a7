"""toolkit: the tool DSL (`@tool`, `Tool`, schemas, arguments). No I/O."""

from toolfold._public import publish as _publish
from toolfold.toolkit._context import RunContext
from toolfold.toolkit._decorator import tool
from toolfold.toolkit._docstrings import ToolDefinitionWarning, UndocumentedParameterWarning
from toolfold.toolkit._field import Field
from toolfold.toolkit._hooks import register_type_hooks
from toolfold.toolkit._schema import SchemaContext, register_schema_rule, schema_for_type
from toolfold.toolkit._signature import FunctionSchema, function_schema
from toolfold.toolkit._tool import Tool, check_tool_names

__all__ = [
    "Field",
    "FunctionSchema",
    "RunContext",
    "SchemaContext",
    "Tool",
    "ToolDefinitionWarning",
    "UndocumentedParameterWarning",
    "check_tool_names",
    "function_schema",
    "register_schema_rule",
    "register_type_hooks",
    "schema_for_type",
    "tool",
]

_publish(globals(), __all__, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
