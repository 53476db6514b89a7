"""The schema of a request's structured output, compiled like a tool's (`compile_output`)."""

from __future__ import annotations

from toolfold._errors import SchemaCompileError, output_compile_error
from toolfold.adapters._dialects import CompiledTool, Dialect
from toolfold.adapters._dialects._compile import compile_schema
from toolfold.runtime.core._request import OutputSpec, ToolDefinition

__all__ = ["compile_output"]


def compile_output(
    output: OutputSpec,
    dialect: Dialect,
    *,
    strict: bool | None,
    allow_loss: bool = False,
    hint: str = "",
) -> CompiledTool:
    """``output``'s schema compiled by `compile_tool` as a tool's parameters would be, its
    problems naming the dialect's structured output (not its tools).

    Args:
        output: The request's output spec.
        dialect: The provider's schema dialect.
        strict: As `compile_tool`'s.
        allow_loss: As `compile_tool`'s.
        hint: A sentence saying what would compile, added to the error.

    Raises:
        SchemaCompileError: As `compile_tool`; its message speaks of the
            output type (no tool), every problem listed.
    """
    as_tool = ToolDefinition(output.name, "", output.schema, output.strict)
    try:
        return compile_schema(as_tool, dialect, strict, allow_loss, for_output=True)
    except SchemaCompileError as error:
        problems = [
            p.replace("the tool name must be", "the output's name must be") for p in error.problems
        ]
        error.problems = tuple(problems)
        output_compile_error(error, output, hint)  # the run names its type (`name_output`)
        raise
