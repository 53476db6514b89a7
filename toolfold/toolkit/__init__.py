"""toolkit: the tool DSL (`@tool`, `Tool`, schemas, arguments). No I/O."""

from toolfold.toolkit._context import RunContext
from toolfold.toolkit._tool import Tool

__all__ = ["RunContext", "Tool"]
