"""A run's configuration as plain data: tools by definition, never by function.

Live objects (tool functions, approval predicates, the model client) stay with
the driver; the config records only what the pure core needs to check events
and build requests, so that it serializes with the state and a run can be
resumed in another process by re-attaching tools and the model by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

import attrs

from toolfold._errors import UsageError
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._messages import (
    EMPTY_MAPPING,
    SETTING_MAX_DEPTH,
    FrozenDict,
    FrozenList,
    Message,
    NotJSONError,
    frozen_dict,
    frozen_output,
)
from toolfold.runtime.core._repr import short, value_or_type
from toolfold.runtime.core._request import OutputSpec, ToolDefinition, type_problem
from toolfold.runtime.core._same_json import frozen_schema
from toolfold.runtime.core._stop import MaxSteps, StopCondition, TokenBudget, ToolCalled
from toolfold.toolkit._frozen import CallersDict

if TYPE_CHECKING:
    from toolfold.toolkit._tool import Tool

Approval = Literal["never", "always", "predicate"]
"""When a tool's calls need an approval: never, always, or when a live predicate says so."""


def is_count(value: object, minimum: int) -> bool:
    """Whether ``value`` is an integer (not a bool) of at least ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _at_least(minimum: int) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
        if not is_count(value, minimum):
            owner = type(instance).__name__
            raise UsageError(
                f"{owner}.{attribute.name} must be an integer >= {minimum}, "
                f"got {value_or_type(value)}"
            )

    return check


_APPROVALS = ("never", "always", "predicate")


def _spec_fields(owner: ToolSpec, attribute: attrs.Attribute[Any], value: Any) -> None:
    """`ToolSpec`'s check of ``has_function`` and ``approval`` (one validator: exact
    types first), so that what `to_json` writes loads back."""
    # (The definition is not checked: the core reads only its name and fields,
    # and a look-alike whose name can change is a tested use.)
    definition: object = owner.definition
    has_function: object = owner.has_function
    if type(has_function) is bool and type(value) is str and value in _APPROVALS:
        return
    problems = []
    if type(has_function) is not bool:
        problems.append(type_problem("has_function", has_function, "True or False"))
    if not (isinstance(value, str) and value in _APPROVALS):
        allowed = ", ".join(repr(a) for a in _APPROVALS)
        problems.append(type_problem("approval", value, f"one of {allowed}"))
    if problems:
        name = getattr(definition, "name", None)
        raise UsageError(f"ToolSpec {short(name)}: " + "; ".join(problems))


def _optional_text(owner: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise UsageError(type_problem(f"RunConfig.{attribute.name}", value, "a str or None"))


def _flag(owner: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not bool:
        raise UsageError(type_problem(f"RunConfig.{attribute.name}", value, "True or False"))


def _output(owner: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, OutputSpec):
        raise UsageError(type_problem("RunConfig.output", value, "an OutputSpec or None"))


def _tool_specs(owner: Any, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    for index, spec in enumerate(value):
        if type(spec) is not ToolSpec and not isinstance(spec, ToolSpec):
            raise UsageError(type_problem(f"RunConfig.tools[{index}]", spec, "a ToolSpec"))


def _setting_names(owner: Any, attribute: attrs.Attribute[Any], value: Mapping[str, Any]) -> None:
    if type(value) is not FrozenDict and not isinstance(value, Mapping):
        raise UsageError(type_problem("RunConfig.settings", value, "a mapping or None"))
    for key in value:
        if type(key) is not str and not isinstance(key, str):  # (exact type first)
            raise UsageError(
                f"RunConfig.settings: a setting's name must be a str, got "
                f"{type(key).__name__} {short(key)} (a saved state would load it back as text)"
            )


_JSON_ATOMS = frozenset({str, float, bool, type(None)})  # (an int: its digits are checked)


def _settings(value: Any) -> Mapping[str, Any]:
    """The config's own deep read-only copy of ``settings``, each setting checked as
    `frozen_json` checks (a saved state's JSON gives it back equal), to
    `SETTING_MAX_DEPTH` levels (the user's data, not a model's text).

    A settings dict the caller keeps (an agent's ``settings``) can change
    afterwards without reaching into a saved state, and the config's cannot
    change at all (it is shared by every run made with equal options). A
    nested key JSON writes as text (``logit_bias``'s token ids) is that text
    from the start. A setting that is toolfold's own `FrozenDict` or
    `FrozenList` is taken as it is (one a caller built is checked): one read
    from a saved state's JSON (states saved before the
    depth was checked load as they did), or from another config.

    Raises:
        UsageError: A setting is no JSON (a set, an object), has a key JSON
            does not write (a tuple), two keys written as the same text, an
            int too long for JSON text, or nests too deep; the error names
            its path (``RunConfig.settings['k']['a']``).
    """
    if value is None:
        return EMPTY_MAPPING
    if type(value) is not dict and not isinstance(value, Mapping):
        return cast(Mapping[str, Any], value)  # refused by `_setting_names`, naming its type
    frozen: dict[Any, Any] = {}
    # (a caller's FrozenDict: its nested frozen values are the caller's too)
    own = type(value) is not CallersDict
    for key, setting in value.items():
        kind = type(setting)
        if kind in _JSON_ATOMS or (own and (kind is FrozenDict or kind is FrozenList)):
            frozen[key] = setting
        else:
            frozen[key] = _frozen_setting(key, setting)
    if type(value) is FrozenDict and all(frozen[k] is v for k, v in value.items()):
        return cast(Mapping[str, Any], value)  # (unchanged: a loaded state's, another config's)
    return cast(Mapping[str, Any], frozen_dict(frozen))


def _frozen_setting(key: Any, setting: Any) -> Any:
    """``setting`` frozen by `frozen_output` (to `SETTING_MAX_DEPTH` levels); a refusal
    names ``RunConfig.settings[key]...``."""
    try:
        return frozen_output(setting, SETTING_MAX_DEPTH)
    except NotJSONError as error:
        path = f"RunConfig.settings[{key!r}]{error.path}"
        stored = "the setting is stored with the run as JSON"
        if error.refused == "value":
            problem = type_problem(
                path,
                error.got,
                "JSON data (str, number, bool, None, or lists and dicts of them: the setting "
                "is stored with the run)",
            )
        elif error.refused == "key":
            got = error.got
            problem = (
                f"{path}: a key must be a str, got {type(got).__name__} {short(got)} ({stored})"
            )
        else:
            problem = f"{path}: {error.problem} ({stored})"
        raise UsageError(problem) from None


_definition = builder(ToolDefinition)


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

    Raises:
        UsageError: A field of another type or value (``approval="sometimes"``,
            ``has_function`` not a bool), naming the tool.
    """

    definition: ToolDefinition
    has_function: bool = True
    approval: Approval = attrs.field(default="never", validator=_spec_fields)
    max_retries: int = attrs.field(default=3, validator=_at_least(0))

    @property
    def name(self) -> str:
        """The tool name."""
        return self.definition.name

    @classmethod
    def from_tool(cls, tool: Tool[..., Any]) -> ToolSpec:
        """The spec of a live `Tool`.

        Raises:
            UsageError: ``tool`` is no `Tool` (a plain function, an agent,
                a name), naming what it is and what to give.
        """
        try:
            policy = tool.requires_approval
            name, description, schema, strict = (
                tool.name,
                tool.description,
                tool.parameters,
                tool.strict,
            )
            function, max_retries = tool.function, tool.max_retries
        except AttributeError:
            raise UsageError(_not_a_tool(tool)) from None
        approval: Approval = "predicate" if callable(policy) else ("always" if policy else "never")
        if (
            type(name) is str
            and type(description) is str
            and (type(schema) is FrozenDict or type(schema) is dict)
            and (strict is None or type(strict) is bool)
        ):
            # What ToolDefinition's check passes at once (a Tool checked them when it was
            # made): built without it, once per tool per config (generate_text, listed tools).
            definition = _definition(name, description, frozen_schema(schema), strict)
        else:
            definition = ToolDefinition(name, description, schema, strict)
        return cls(
            definition,
            has_function=function is not None,
            approval=approval,
            max_retries=max_retries,
        )


def _not_a_tool(value: object) -> str:
    """Why ``value`` gives no `ToolSpec` (`ToolSpec.from_tool`), and what to give instead."""
    given = f"ToolSpec.from_tool(tool): expected a Tool, got {type(value).__name__} {short(value)}"
    if hasattr(value, "as_tool"):  # an Agent, a Workflow
        return f"{given}; for an agent or a workflow give ToolSpec.from_tool(agent.as_tool())"
    if callable(value):
        return f"{given}; make a function a Tool first: ToolSpec.from_tool(tool(function))"
    return f"{given}; give a Tool (made with @tool or tool(function))"


def _specs(items: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    return tuple(items)


def _conditions(items: Iterable[StopCondition]) -> tuple[StopCondition, ...]:
    return tuple(items)


def _data_conditions(owner: Any, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    for index, condition in enumerate(value):
        if not isinstance(condition, (MaxSteps, TokenBudget, ToolCalled)):
            raise UsageError(
                type_problem(
                    f"RunConfig.stop_when[{index}]",
                    condition,
                    "a MaxSteps, TokenBudget or ToolCalled (plain data the state can "
                    "hold; give a callable to the run's stop_when)",
                )
            )


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

    Raises:
        UsageError: A field of another type (``model=5``, ``tool_choice=5``,
            ``auto_execute_tools="no"``, a setting named by a number or one
            that is not JSON data (a set, an object, at any depth), a stop
            condition that is not `MaxSteps`, `TokenBudget` or `ToolCalled`:
            a callable goes to the driver's ``stop_when``), naming it, or a
            count out of range.
    """

    model: str | None = attrs.field(default=None, validator=_optional_text)
    instructions: str | None = attrs.field(default=None, validator=_optional_text)
    tools: tuple[ToolSpec, ...] = attrs.field(default=(), converter=_specs, validator=_tool_specs)
    tool_choice: str | None = attrs.field(default=None, validator=_optional_text)
    reset_tool_choice: bool = attrs.field(default=True, validator=_flag)
    output: OutputSpec | None = attrs.field(default=None, validator=_output)
    output_retries: int = attrs.field(default=3, validator=_at_least(0))
    settings: Mapping[str, Any] = attrs.field(
        default=EMPTY_MAPPING, converter=_settings, validator=_setting_names
    )
    max_steps: int = attrs.field(default=10, validator=_at_least(1))
    auto_execute_tools: bool = attrs.field(default=True, validator=_flag)
    stop_when: tuple[StopCondition, ...] = attrs.field(
        default=(), converter=_conditions, validator=_data_conditions
    )
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
