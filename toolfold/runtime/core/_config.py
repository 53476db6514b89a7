"""A run's configuration as plain data: tools by definition, never by function.

Live objects (tool functions, approval predicates, the model client) stay with
the driver; the config records only what the pure core needs to check events
and build requests, so that it serializes with the state and a run can be
resumed in another process by re-attaching tools and the model by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

from toolfold._errors import UsageError
from toolfold.runtime.core._messages import FrozenDict, Message
from toolfold.runtime.core._request import OutputSpec, ToolDefinition, frozen_json
from toolfold.runtime.core._stop import StopCondition

if TYPE_CHECKING:
    from toolfold.toolkit._tool import Tool

Approval = Literal["never", "always", "predicate"]
"""When a tool's calls need an approval: never, always, or when a live predicate says so."""


def _at_least(minimum: int) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            owner = type(instance).__name__
            raise UsageError(
                f"{owner}.{attribute.name} must be an integer >= {minimum}, got {value!r}"
            )

    return check


def _settings(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _NO_SETTINGS if value is None else frozen_json(value)


_NO_SETTINGS: Mapping[str, Any] = FrozenDict()


@attrs.frozen
class ToolSpec:
    """What the core knows about a tool: its definition and how its calls are handled.

    Attributes:
        definition: The tool as the model sees it.
        has_function: False for a tool whose calls go back to the caller.
        approval: ``"never"``, ``"always"`` (static ``requires_approval=True``:
            a call can never execute without an `ApprovalGranted`), or
            ``"predicate"`` (the driver asks the live predicate and says
            ``"approve"`` or ``"execute"`` in `ModelResponded.dispositions`).
        max_retries: Consecutive failures allowed before the run fails.
    """

    definition: ToolDefinition
    has_function: bool = True
    approval: Approval = "never"
    max_retries: int = attrs.field(default=3, validator=_at_least(0))

    @property
    def name(self) -> str:
        """The tool name."""
        return self.definition.name

    @classmethod
    def from_tool(cls, tool: Tool[..., Any]) -> ToolSpec:
        """The spec of a live `Tool`."""
        policy = tool.requires_approval
        approval: Approval = "predicate" if callable(policy) else ("always" if policy else "never")
        return cls(
            ToolDefinition(tool.name, tool.description, tool.parameters, tool.strict),
            has_function=tool.function is not None,
            approval=approval,
            max_retries=tool.max_retries,
        )


def _specs(items: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    return tuple(items)


def _conditions(items: Iterable[StopCondition]) -> tuple[StopCondition, ...]:
    return tuple(items)


@attrs.frozen
class RunConfig:
    """Everything the core needs to know about a run, as plain data.

    Attributes:
        model: The model's name (``provider:model``), re-attached on load.
        instructions: System instructions sent first on every request (not
            stored in the conversation), or None.
        tools: The tools the model may call.
        tool_choice: None (provider default), ``"auto"``, ``"none"``,
            ``"required"`` or a tool name.
        reset_tool_choice: After the first step of a turn, a forcing
            ``tool_choice`` (``"required"`` or a tool name) becomes ``"auto"``
            so the model can answer instead of calling tools forever.
        output: The structured output the final answer must follow, or None.
        output_retries: Rejected final answers allowed before the run fails.
        settings: Model settings (temperature, max_tokens...), kept as a
            read-only copy (a `FrozenDict`): the config is shared by every run
            made with equal options, so no run can change another's.
        max_steps: Model calls allowed per turn; reaching it finishes the run
            with ``finish_reason == "max_steps"``.
        auto_execute_tools: False to return every call to the caller unexecuted.
        stop_when: Extra stop conditions checked at every step boundary.
    """

    model: str | None = None
    instructions: str | None = None
    tools: tuple[ToolSpec, ...] = attrs.field(default=(), converter=_specs)
    tool_choice: str | None = None
    reset_tool_choice: bool = True
    output: OutputSpec | None = None
    output_retries: int = attrs.field(default=3, validator=_at_least(0))
    settings: Mapping[str, Any] = attrs.field(default=_NO_SETTINGS, converter=_settings)
    max_steps: int = attrs.field(default=10, validator=_at_least(1))
    auto_execute_tools: bool = True
    stop_when: tuple[StopCondition, ...] = attrs.field(default=(), converter=_conditions)
    _by_name: Mapping[str, ToolSpec] = attrs.field(
        init=False, eq=False, repr=False, hash=False, alias="_by_name"
    )

    _definitions: tuple[ToolDefinition, ...] = attrs.field(
        init=False, eq=False, repr=False, hash=False, alias="_definitions"
    )
    _system: Message | None = attrs.field(
        init=False, eq=False, repr=False, hash=False, alias="_system"
    )

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {t.name: t for t in self.tools})
        object.__setattr__(self, "_definitions", tuple(t.definition for t in self.tools))
        # One message for every request of every run with this config: no
        # message to build per request, and a codec encodes it once.
        system = Message.system(self.instructions) if self.instructions else None
        object.__setattr__(self, "_system", system)

    @property
    def system_message(self) -> Message | None:
        """The instructions as the system message sent first, or None without any."""
        try:
            return self._system
        except AttributeError:  # unpickled from a version without the slot
            system = Message.system(self.instructions) if self.instructions else None
            object.__setattr__(self, "_system", system)
            return system

    @property
    def definitions(self) -> tuple[ToolDefinition, ...]:
        """The tool definitions, in order, as the model sees them."""
        return self._definitions

    def tool(self, name: str) -> ToolSpec | None:
        """The spec of the tool called ``name``, or None."""
        return self._by_name.get(name)

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tool names, in order."""
        return tuple(t.name for t in self.tools)
