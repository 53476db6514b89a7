"""`Tool`: a name, a description, a JSON Schema and (optionally) a function.

SKELETON laid down by the lead so the runtime can build against it; the toolkit
work fills in schema derivation (`tool` decorator), structuring and results.

Contract the runtime relies on (do not change without telling everyone):

- ``tool.name``, ``tool.description``, ``tool.parameters`` (JSON Schema dict),
  ``tool.function`` (None for schema-only tools), ``tool.strict``,
  ``tool.requires_approval`` (bool or a predicate ``(call, state) -> bool``),
  ``tool.timeout`` (seconds or None), ``tool.max_retries`` (int, default 3),
  ``tool.is_async``.
- ``tool.validate_arguments(raw)`` -> dict of structured arguments, or raises
  ``ToolArgumentError`` (with ``message_for_model``).
- ``tool.invoke(arguments, context)`` calls the function with structured
  arguments (keyword arguments for decorated tools, one dict for explicit-schema
  tools), injecting ``context`` into the RunContext parameter if there is one.
  Returns whatever the function returns (a coroutine for async functions).
- ``tool.format_result(value)`` -> str for the model.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from toolfold._errors import ArgumentJSONError, ArgumentValidationError, ToolDefinitionError
from toolfold.toolkit._context import RunContext

ApprovalPolicy = bool | Callable[[Any, Any], bool]


class Tool:
    """A tool a model can call.

    Args:
        name: The tool name the model sees (``a-zA-Z0-9_-``, at most 64 characters).
        description: What the tool does, for the model.
        parameters: The JSON Schema of the arguments (an object schema).
        function: The function to run, or None for a tool whose calls are
            returned to the caller.
        strict: Ask providers for strict schema adherence (None: when possible).
        requires_approval: True, or a predicate over (call, state), to make the
            run wait for an approval before executing a call.
        timeout: Seconds a call may take before it counts as failed.
        max_retries: Consecutive failures allowed before the run fails.
    """

    def __init__(
        self,
        name: str,
        description: str = "",
        parameters: Mapping[str, Any] | None = None,
        function: Callable[..., Any] | None = None,
        *,
        strict: bool | None = None,
        requires_approval: ApprovalPolicy = False,
        timeout: float | None = None,
        max_retries: int = 3,
    ) -> None:
        self.name = name
        self.description = description
        self.parameters: dict[str, Any] = dict(
            parameters or {"type": "object", "properties": {}, "additionalProperties": False}
        )
        self.function = function
        self.strict = strict
        self.requires_approval = requires_approval
        self.timeout = timeout
        self.max_retries = max_retries
        self.is_async = function is not None and inspect.iscoroutinefunction(function)
        self._pass_dict = True  # explicit-schema tools receive one dict
        self._context_param: str | None = None
        if not name:
            raise ToolDefinitionError(repr(name), ["a tool needs a non-empty name"])

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.function is None:
            raise TypeError(f"tool {self.name!r} has no function to call")
        return self.function(*args, **kwargs)

    def validate_arguments(self, raw: str | Mapping[str, Any]) -> dict[str, Any]:
        """Parse and validate arguments from a model.

        Args:
            raw: The JSON text or the already-decoded mapping.

        Returns:
            The structured arguments by parameter name.

        Raises:
            ArgumentJSONError: The text is not JSON.
            ArgumentValidationError: The value breaks the schema.
        """
        if isinstance(raw, str):
            try:
                value = json.loads(raw) if raw.strip() else {}
            except json.JSONDecodeError as exc:
                raise ArgumentJSONError(self.name, str(exc), exc.pos) from exc
        else:
            value = dict(raw)
        if not isinstance(value, dict):
            raise ArgumentValidationError(self.name, [f"$: expected object, got {value!r}"])
        return value

    def invoke(self, arguments: Mapping[str, Any], context: RunContext[Any] | None = None) -> Any:
        """Call the function with validated arguments (a coroutine if async)."""
        if self.function is None:
            raise TypeError(f"tool {self.name!r} has no function to call")
        if self._pass_dict:
            return self.function(dict(arguments))
        kwargs = dict(arguments)
        if self._context_param is not None:
            kwargs[self._context_param] = context
        return self.function(**kwargs)

    def format_result(self, value: Any) -> str:
        """Turn a tool's return value into text for the model."""
        if isinstance(value, str):
            return value
        return json.dumps(value, default=str)
