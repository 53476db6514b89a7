"""Building and driving a run: what `generate_text` and `Agent` share.

A run has two halves: the plain-data state (config, messages), which the pure
core folds, and the live half (model, tools, output type, observers), which
the driver uses. `RunOptions` holds what both are made from.
"""

from __future__ import annotations

import json
import os
import sys
import weakref
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Mapping,
    Sequence,
    Sized,
)
from contextlib import aclosing
from typing import Any, Generic, TypeVar, cast

import attrs

from toolfold._errors import InvalidEventError, ModelConfigError, ToolDefinitionError, UsageError
from toolfold.runtime._model import (
    MODEL_OVERRIDE,
    Model,
    ModelOverride,
    agent_model,
    in_force,
    overriding,
)
from toolfold.runtime._response import OutputT_co, Response, RunEndEvent, RunStreamEvent, Step
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._config import RunConfig, ToolSpec, is_count
from toolfold.runtime.core._events import (
    Event,
)
from toolfold.runtime.core._messages import Message, TextPart, frozen_dict
from toolfold.runtime.core._reducer import blank_state, history_problem, initial_state
from toolfold.runtime.core._replay import empty_run_id
from toolfold.runtime.core._repr import (
    near_names,
    not_a_choice,
    short,
    shown_names,
    value_or_type,
)
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._stop import (
    MaxSteps,
    StopCondition,
    StopPredicate,
    TokenBudget,
    ToolCalled,
)
from toolfold.runtime.drive._executor import DEFAULT_MAX_CONCURRENCY
from toolfold.runtime.drive._handoff import Handover
from toolfold.runtime.drive._loop import Ended, Live, OnToolError, run_loop
from toolfold.runtime.drive._output import OutputSchema, output_schema
from toolfold.runtime.drive._shells import (
    drive_async,
    drive_sync,
    finish,
    stream_async,
    stream_sync,
    throw_into,
)
from toolfold.toolkit import check_tool_names
from toolfold.toolkit import tool as make_tool
from toolfold.toolkit._decorator import is_unapplied
from toolfold.toolkit._tool import Tool, build_hooks, is_async_callable

MessagesInput = str | Message | Mapping[str, Any] | Iterable[Message | Mapping[str, Any]]


@attrs.frozen
class Denied:
    """Deny an approval with a reason the model will see.

    Example:
        >>> agent.resume(state, approvals={"call_1": Denied("too expensive")})

    Attributes:
        reason: Why the call was denied.
    """

    reason: str = ""


Approval = bool | Denied


# --- building a run ------------------------------------------------------------


_PROMPT_LIST = "a prompt's list must hold Messages or {'role', 'content'} dicts"


#: How an error says to go on with a run whose `Response` or `RunState` was given where
#: messages go (`pass_messages_hint`), ``{state}`` standing for the state's expression:
#: the module's `resume` (which needs the model and tools again), or an agent's.
RESUME = "resume({state}, model=..., tools=...)"
AGENT_RESUME = "agent.resume({state})"


def to_messages(
    messages: MessagesInput, head: str = _PROMPT_LIST, resume: str = RESUME
) -> tuple[Message, ...]:
    """Normalise a prompt, a message, a role/content dict, or a list of messages or dicts.

    ``head``: how the error for an item of a list that is no message begins, naming
    where the list was given (a run's ``history=``); ``resume``: how the error for a
    `Response` or a `RunState` says to go on with its run (`RESUME`, `AGENT_RESUME`).

    Raises:
        UsageError: A dict without a text ``content`` (naming its keys), with
            keys besides ``role`` and ``content`` (naming them: a message holds
            no more, so they would be lost) or with another role than system,
            user or assistant; anything else that is not text, a `Message`, or
            an iterable of them (naming its type).
    """
    if isinstance(messages, str):
        return (Message.user(messages),)
    if isinstance(messages, Message):
        return (messages,)
    if isinstance(messages, Mapping):  # one role/content dict, as in a list
        return (_dict_message(messages),)
    given: object = messages  # binary data is iterable too (of ints), but no prompt
    if isinstance(given, (bytes, bytearray, memoryview)) or not isinstance(given, Iterable):
        got = pass_messages_hint(given, "", resume) or type(given).__name__
        raise UsageError(
            "a prompt must be a str, a Message, a {'role', 'content'} dict or a list of "
            f"Messages or dicts, got {got}"
        )
    out: list[Message] = []
    for index, item in enumerate(messages):
        if isinstance(item, Message):
            out.append(item)
        elif isinstance(item, Mapping):
            out.append(_dict_message(item, f"{head}: at index {index}, "))
        else:
            raise UsageError(f"{head}, got {type(item).__name__} at index {index}")
    return tuple(out)


def pass_messages_hint(value: object, passed: str, resume: str) -> str:
    """What to pass instead of ``value``, a `Response` or a `RunState` given where messages
    are expected ("" for anything else): ``a Response: pass its messages,
    <passed>response.messages (to go on with the run itself: <resume>)``, ``resume`` with
    ``{state}`` standing for the state's expression (``response.state``, ``state``)."""
    if isinstance(value, Response):
        what, name, state = "a Response", "response", "response.state"
    elif isinstance(value, RunState):
        what, name, state = "a RunState", "state", "state"
    else:
        return ""
    return (
        f"{what}: pass its messages, {passed}{name}.messages "
        f"(to go on with the run itself: {resume.format(state=state)})"
    )


_DICT_KEYS = frozenset(("role", "content"))


def _holds_something(value: object) -> bool:
    """Whether a message dict's other key would lose something: not None, not empty.

    Other libraries' dicts carry such keys empty: the OpenAI SDK's
    ``message.model_dump()`` has ``refusal``, ``tool_calls``, ``audio``...
    all None, LiteLLM's ``tool_calls`` may be ``[]``.
    """
    return value is not None and not (isinstance(value, Sized) and len(value) == 0)


def _dict_message(item: Mapping[Any, Any], where: str = "") -> Message:
    """A message from a role/content dict (role defaults to user); ``where`` begins its
    errors, naming the list and the index it was given at (see `to_messages`)."""
    if "content" not in item:
        raise UsageError(
            f"{where}a message dict needs a 'content' key (its text) and may have a 'role', "
            f"got keys {sorted(map(str, item))}"
        )
    extra = [
        key for key, value in item.items() if key not in _DICT_KEYS and _holds_something(value)
    ]
    if extra:
        keys = ", ".join(repr(key) for key in sorted(extra, key=str))
        lost = "it would be lost" if len(extra) == 1 else "they would be lost"
        raise UsageError(
            f"{where}a message dict takes only 'role' and 'content', got {keys} too: a message "
            f"holds its role and its parts, nothing else, so {lost} (for tool calls, "
            "results, images or files, build a Message)"
        )
    content = item["content"]
    if not isinstance(content, str):
        raise UsageError(
            f"{where}a message dict's 'content' must be a str, got {type(content).__name__}"
        )
    role = item.get("role", "user")
    if role not in ("system", "user", "assistant"):
        raise UsageError(
            f"{where}a message dict must have role system, user or assistant, got {role!r}"
        )
    return Message(role, (TextPart(content),))


def to_tools(
    tools: Iterable[Tool[..., Any] | Callable[..., Any]], owner: str | None = None
) -> dict[str, Tool[..., Any]]:
    """Tools by name; plain functions are made tools with ``@tool``.

    ``owner``: whose tools they are, for the error (see `check_tool_names`).
    """
    made = [
        item if isinstance(item, Tool) else make_tool(refuse_non_tool(item, index))
        for index, item in enumerate(tools)
    ]
    # ToolDefinitionError naming every duplicated name and where its tools come from
    return check_tool_names(made, owner=owner)


def refuse_non_tool(item: Any, index: int) -> Any:
    """``item``, ``tools[index]``, if it can be a tool: a `Tool` or a callable.

    Raises:
        ToolDefinitionError: None or another value that is no function, naming
            its place in ``tools=`` (an agent or a workflow: use its ``.as_tool()``;
            the decorator ``tool(name=...)`` returns, never applied).
    """
    if is_unapplied(item):  # (it would make a tool of itself)
        raise ToolDefinitionError(
            f"tools[{index}]",
            [
                "tools= got the decorator tool(...) returns, not applied to a function: "
                "write @tool(...) above the def and pass the function, or give "
                "tool(function, ...)"
            ],
        )
    if isinstance(item, Tool) or callable(item):
        return item
    if item is None:
        got = "None"
    else:
        got = f"an object of type {type(item).__qualname__}"
        if callable(getattr(item, "as_tool", None)):  # an Agent, a Workflow
            named = getattr(item, "name", None)
            which = named if isinstance(named, str) and named.isidentifier() else "it"
            got += f": to let the model call it, pass {which}.as_tool()"
    raise ToolDefinitionError(
        f"tools[{index}]",
        [f"tools= takes functions, Tools and tool sources (an MCP server), not {got}"],
    )


def split_stop(
    stop_when: Iterable[StopCondition | StopPredicate],
) -> tuple[tuple[StopCondition, ...], tuple[StopPredicate, ...]]:
    """Data conditions (go into the config) and live predicates (stay with the driver)."""
    data: list[StopCondition] = []
    live: list[StopPredicate] = []
    for condition in stop_when:
        if isinstance(condition, (MaxSteps, TokenBudget, ToolCalled)):
            data.append(condition)
        elif callable(condition):
            if is_async_callable(condition):  # its coroutine, never awaited, is truthy
                from toolfold.runtime._agent_tool import function_name  # (it imports this)

                raise UsageError(
                    f"stop_when takes plain functions of the run's state, got the async "
                    f"function {function_name(condition)!r}: a run calls its conditions without "
                    f"awaiting them (its coroutine would stop the run at once); make it a "
                    f"plain def"
                )
            live.append(condition)
        else:  # found now, not after the first step
            raise UsageError(
                f"stop_when takes conditions (max_steps, token_budget, tool_called) or "
                f"functions of the run's state, got {type(condition).__name__}: {condition!r}"
            )
    return tuple(data), tuple(live)


@attrs.frozen(kw_only=True)
class RunOptions:
    """A run's two halves, resolved once: the plain-data `RunConfig` and the live parts.

    Built only by `make_options` (from an `Agent`'s options); the per-run
    arguments (deps, observers) join in `live`.

    Attributes:
        model: The model to call.
        tools: The tools by name.
        output: How to read a structured answer, or None.
        config: The plain-data half, which goes into the run's state.
        stop_when: Stop predicates that are live callables (data conditions
            are in ``config``).
        on_tool_error: ``"return"`` or ``"raise"``.
        max_concurrency: Calls of one step that may run at once.
        name: The agent's name (for traces), or None.
        spec: The model string ``model`` was built from outside any
            `override_models` block, which a run starting inside one resolves
            to the override's model instead (`in_force`); None for a model
            object, or a string resolved by a block.
    """

    model: Model
    tools: Mapping[str, Tool[..., Any]]
    output: OutputSchema | None
    config: RunConfig
    stop_when: tuple[StopPredicate, ...] = ()
    on_tool_error: OnToolError = "return"
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    name: str | None = None
    spec: str | None = None
    # Not part of the value (no init, eq, hash or repr): the live half of a new
    # run that brings nothing of its own, made once and shared (see `live`).
    _plain_live: Live | None = attrs.field(
        default=None, init=False, eq=False, hash=False, repr=False
    )

    def live(
        self,
        *,
        deps: Any = None,
        on_event: Callable[[Event], object] | None = None,
        on_step: Callable[[Step], object] | None = None,
        announce_start: bool = False,
        stop_when: tuple[StopCondition | StopPredicate, ...] = (),
        handoffs: Mapping[str, Handover] | None = None,
    ) -> Live:
        """The live half for one run (``announce_start``: observers see `RunStarted`).

        ``stop_when``: conditions checked for this run only, on top of the
        options' own (a resume's extra conditions); ``handoffs``: where the
        agent's handoff tools send the run.

        A new run with none of these (the usual one) gets a `Live` made once
        and shared (it is frozen): one object fewer that each run holds until
        it ends, for the garbage collector to walk while many are in flight.

        Raises:
            ModelConfigError: The model string's provider could not be built
                (no API key) and no `override_models` block replaces it.
            UsageError: ``on_event`` or ``on_step`` is neither a function nor None,
                or is an async function.
        """
        for option, observer in (("on_event", on_event), ("on_step", on_step)):
            if observer is None:
                continue
            each = "event" if option == "on_event" else "Step"
            if not callable(observer):  # not after a paid model call
                raise UsageError(
                    f"{option} must be a function called with each {each} of the run (or "
                    f"None), got {type(observer).__name__} {short(observer)}"
                )
            if is_async_callable(observer):  # its coroutine, never awaited, would never run
                from toolfold.runtime._agent_tool import function_name  # (it imports this)

                raise UsageError(
                    f"{option} takes plain functions called with each {each} of the run, got "
                    f"the async function {function_name(observer)!r}: a run calls its observers "
                    f"without awaiting them (its coroutine would never run); make it a plain def"
                )
        # One context-variable lookup per run, for an agent made from a string.
        model = self.model if self.spec is None else in_force(self.model, self.spec)
        plain = (
            model is self.model
            and announce_start
            and deps is None
            and on_event is None
            and on_step is None
            and not stop_when
            and not handoffs
        )
        if plain:
            shared = self._plain_live
            if shared is None:
                shared = self._live(model, None, None, None, True, (), _NO_HANDOFFS)
                object.__setattr__(self, "_plain_live", shared)  # a memo: equal ones may race
            return shared
        return self._live(model, deps, on_event, on_step, announce_start, stop_when, handoffs)

    def _live(
        self,
        model: Model,
        deps: Any,
        on_event: Callable[[Event], object] | None,
        on_step: Callable[[Step], object] | None,
        announce_start: bool,
        stop_when: tuple[StopCondition | StopPredicate, ...],
        handoffs: Mapping[str, Handover] | None,
    ) -> Live:
        return _live(
            model=model,
            tools=self.tools,
            output=self.output,
            deps=deps,
            on_event=on_event,
            on_step=on_step,
            on_tool_error=self.on_tool_error,
            max_concurrency=self.max_concurrency,
            stop_when=(*self.stop_when, *stop_when),
            announce_start=announce_start,
            name=self.name,
            handoffs=handoffs if handoffs is not None else {},
        )


_Spec = TypeVar("_Spec")


def within_copy(spec: _Spec, kind: type[_Spec], budget: TokenBudget, **changes: Any) -> _Spec:
    """A copy of ``spec`` (an `Agent`, or a workflow of class ``kind``) with ``budget``, a
    caller's tree budget, after the stop conditions of its resolved options' plain-data config.

    Nothing is built again: the copy shares ``spec``'s field values (``kind``'s
    attrs fields) and options, but for that config; ``changes`` are fields
    set on it besides (see `Agent._within`, `Workflow._within`).
    """
    made = object.__new__(kind)
    for field in attrs.fields(cast(Any, kind)):
        object.__setattr__(made, field.name, getattr(spec, field.name))
    options: RunOptions = cast(Any, spec)._options
    config = attrs.evolve(options.config, stop_when=(*options.config.stop_when, budget))
    object.__setattr__(made, "_options", attrs.evolve(options, config=config))
    for name, value in changes.items():
        object.__setattr__(made, name, value)
    return made


def _json_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings as JSON data, so the state round-trips (a tuple comes back a list).

    Raises:
        ModelConfigError: A setting that is no JSON data, named (an int of more
            digits than ``sys.get_int_max_str_digits()`` too, which Python neither
            writes as JSON nor repr()s).
    """
    out: dict[str, Any] = {}
    for key, value in settings.items():
        try:
            out[key] = json.loads(json.dumps(value, allow_nan=False))
        except (TypeError, ValueError) as exc:
            try:
                got = f"{value!r}: {exc}"
            except ValueError as unshown:
                # Past sys.get_int_max_str_digits(), json.dumps refused it too; else a repr()
                # of the value's own that raised: named by its type and json's error.
                if "sys.set_int_max_str_digits" not in str(unshown):
                    got = f"a value of type {type(value).__name__} ({exc})"
                else:
                    got = (
                        f"an int of more than {sys.get_int_max_str_digits():,} digits, which "
                        "Python does not write as JSON text by default (give it as a str)"
                    )
                    if type(value) is not int:
                        got = f"a value holding {got}"
            raise ModelConfigError(
                f"model setting {key!r} must be JSON data (str, finite number, bool, None, "
                f"or lists and dicts of them) to be stored with the run, got {got}"
            ) from exc
    return out


def make_options(
    model: str | Model,
    *,
    tools: Iterable[Tool[..., Any] | Callable[..., Any]] = (),
    output_type: Any = None,
    settings: Mapping[str, Any] | None = None,
    instructions: str | None = None,
    max_steps: int = 10,
    auto_execute_tools: bool = True,
    tool_choice: str | None = None,
    reset_tool_choice: bool = True,
    output_retries: int = 3,
    stop_when: Iterable[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    owner: str | None = None,
    sourced: bool = False,
) -> RunOptions:
    """`RunOptions` from an `Agent`'s options (resolves the model, tools and output type).

    ``owner`` names whose options they are (``"agent 'billing'"``) in the
    error for two tools of one name. ``sourced``: the run also has the tools
    of tool sources (MCP servers), not known before they are listed, so a
    ``tool_choice`` naming none of ``tools`` is checked then
    (`refuse_unlisted_choice`), not here.

    Raises:
        UsageError: ``max_steps`` or ``max_concurrency`` not an integer >= 1, an
            ``on_tool_error`` other than ``"return"`` / ``"raise"``, a
            ``tool_choice`` naming no tool, or an ``output_type`` that is a
            value (``5``, ``"str"``, an instance), not a type.
    """
    # Checked before the cache below, which keys neither: a typo of "raise" ran as "return".
    if on_tool_error not in ("return", "raise"):
        raise UsageError(
            "on_tool_error must be 'return' or 'raise', got "
            f"{not_a_choice(on_tool_error, ('return', 'raise'))}"
        )
    if type(max_concurrency) is not int or max_concurrency < 1:
        raise UsageError(
            f"max_concurrency must be an integer >= 1, got {value_or_type(max_concurrency)}"
        )
    if not is_count(max_steps, 1):  # (as `RunConfig` checks it: "3", None failed comparing)
        raise UsageError(f"max_steps must be an integer >= 1, got {value_or_type(max_steps)}")
    resolved, spec = agent_model(model)
    tools = tuple(tools)
    key = _made_key(
        resolved.name,
        tools,
        output_type,
        stop_when,
        settings or {},
        (
            instructions,
            max_steps,
            auto_execute_tools,
            tool_choice,
            reset_tool_choice,
            output_retries,
            sourced,
        ),
    )
    made = _MADE.get(key) if key else None
    if made is not None and _alive(made[0], tools):
        kept = cast("tuple[Tool[..., Any], ...]", tools)  # `_made_key` keeps only `Tool`s
        return _options(
            model=resolved,
            tools={t.name: t for t in kept},
            output=None,
            config=made[1],
            on_tool_error=on_tool_error,
            max_concurrency=max_concurrency,
            spec=spec,
        )
    output = None
    if output_type is not None:
        from toolfold.runtime._task import is_type, not_a_type

        if not is_type(output_type):  # (5, "str", an instance: a value, not a type)
            raise UsageError(not_a_type("output_type", output_type, by_name=False))
        output = output_schema(output_type)
    by_name = to_tools(tools, owner)
    for made_tool in by_name.values():  # a type no hook builds fails here, not in a paid call
        build_hooks(made_tool)
    if tool_choice is not None and type(tool_choice) is not str:
        raise UsageError(tool_choice_problem(tool_choice, by_name))
    if not sourced and tool_choice not in CHOICES and tool_choice not in by_name:
        raise UsageError(unknown_choice(tool_choice, list(by_name)))
    data, predicates = split_stop(stop_when)
    config = RunConfig(
        model=resolved.name,
        instructions=instructions,
        tools=tuple(ToolSpec.from_tool(t) for t in by_name.values()),
        tool_choice=tool_choice,
        reset_tool_choice=reset_tool_choice,
        output=output.spec if output is not None else None,
        output_retries=output_retries,
        settings=_json_settings(settings or {}),
        max_steps=max_steps,
        auto_execute_tools=auto_execute_tools,
        stop_when=data,
    )
    if key:
        if len(_MADE) >= 64:
            _MADE.clear()
        drop = _dropper(key)
        _MADE[key] = (tuple(weakref.ref(t, drop) for t in by_name.values()), config)
    return RunOptions(
        model=resolved,
        tools=by_name,
        output=output,
        config=config,
        stop_when=predicates,
        on_tool_error=on_tool_error,
        max_concurrency=max_concurrency,
        spec=spec,
    )


# The tool_choice values that name no tool.
CHOICES = (None, "auto", "none", "required")


def unknown_choice(tool_choice: str, names: Sequence[str]) -> str:
    """The error for a ``tool_choice`` naming none of ``names``, the run's tools (those it
    is near named)."""
    near = near_names(tool_choice, names)
    shown = shown_names(names, near, SHOWN_CHOICES) or "none"
    return f"tool_choice {tool_choice!r} is not a tool of this run (tools: {shown}){meant(near)}"


def meant(near: Sequence[str]) -> str:
    """What an error about a name says of the ``near`` names (`near_names`), if any."""
    return f"; did you mean {' or '.join(map(repr, near))}?" if near else ""


# The tool names an error about a tool_choice lists at most (a catalog may have hundreds).
SHOWN_CHOICES = 30


def tool_choice_problem(tool_choice: object, names: Iterable[str]) -> str:
    """The error for a ``tool_choice`` that is no text (the AI SDK's ``{"type": "tool", ...}``)."""
    shown = ", ".join(repr(n) for n in names)
    named = ""
    if isinstance(tool_choice, Mapping):
        name = tool_choice.get("toolName", tool_choice.get("name"))
        function = tool_choice.get("function")
        if name is None and isinstance(function, Mapping):
            name = function.get("name")  # (OpenAI's {"type": "function", "function": {...}})
        if isinstance(name, str):
            named = f"; to force that tool, tool_choice={name!r}"
    return (
        f"tool_choice must be a str: 'auto', 'none', 'required' or the name of one of the "
        f"run's tools ({shown or 'it has none'}), or None, got {type(tool_choice).__name__} "
        f"{short(tool_choice)}{named}"
    )


# The plain-data config of the runs `make_options` made lately, by their options
# (`_made_key`), with weak references to their tools: `generate_text` and
# `agenerate_text` make an agent per call, and most calls repeat the last
# one's tools and options. The config is frozen data, shared like an agent's.
# An entry goes when one of its tools does (`_dropper`): a service that makes
# its tools per request (a closure over the request's user) would otherwise
# keep the last 64 runs' configs, their tools' definitions and schemas, alive.
_MADE: dict[tuple[Any, ...], tuple[tuple[weakref.ref[Tool[..., Any]], ...], RunConfig]] = {}


def _dropper(key: tuple[Any, ...]) -> Callable[[weakref.ref[Any]], None]:
    """The weak references' callback that takes ``key``'s entry out of `_MADE`.

    Only the entry holding the reference that died: a tool made later may
    have its id, and so the key, with an entry of its own.
    """

    def drop(ref: weakref.ref[Any]) -> None:
        entry = _MADE.get(key)
        if entry is not None and ref in entry[0]:
            _MADE.pop(key, None)

    return drop


_PLAIN = frozenset({str, int, float, bool, type(None)})

# Options with values of the fields' types (see `builder`): the cached path of `make_options`.
_options = builder(RunOptions)


def _alive(refs: tuple[weakref.ref[Tool[..., Any]], ...], tools: tuple[Any, ...]) -> bool:
    """Whether ``refs`` still point at ``tools``, one by one (ids can be reused)."""
    for ref, tool in zip(refs, tools, strict=True):  # noqa: SIM110 (faster than all())
        if ref() is not tool:
            return False
    return True


# A run's live half, from the options' own values (see `builder`): one per run.
_live = builder(Live)
# The handoffs of a run without any: read-only, as its `Live` may be shared.
_NO_HANDOFFS: Mapping[str, Handover] = frozen_dict()


def _made_key(
    model: str,
    tools: tuple[Any, ...],
    output_type: Any,
    stop_when: Iterable[Any],
    settings: Mapping[str, Any],
    scalars: tuple[Any, ...],
) -> tuple[Any, ...] | None:
    """The key of a run's options in `_MADE`, or None for options it does not keep.

    Kept: `Tool` objects (a plain function is made a tool again, warnings and
    all), no output type and no stop conditions, settings and other options
    of plain values. Each value goes in with its type, so ``1``, ``1.0`` and
    ``True`` differ (the config stores and checks them as given).
    """
    if output_type is not None or stop_when:
        return None
    ids = []
    for tool in tools:
        if type(tool) is not Tool:
            return None
        ids.append(id(tool))
    values = (*settings.values(), *scalars)
    types = []
    for value in values:
        kind = type(value)
        if kind not in _PLAIN:
            return None
        types.append(kind)
    return (model, tuple(ids), tuple(settings), tuple(types), values)


def new_run_id(run_id: str | None = None) -> str:
    """``run_id``, or a fresh random one (``uuid.uuid4().hex``) when it is None.

    Raises:
        UsageError: ``run_id`` is empty (given, say, from an empty order key).
    """
    if run_id is not None:
        if run_id == "":  # not a random one: a caller's keys built on it would not hold
            raise empty_run_id("", "a run's", "for a random one")
        if not isinstance(run_id, str):
            raise UsageError(f"run_id must be a str, got {type(run_id).__name__} {run_id!r}")
        return run_id
    # What `uuid.uuid4().hex` gives (version 4, RFC 4122 variant), without
    # building a `UUID`: a third of the cost, once per run.
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return raw.hex()


def start(
    options: RunOptions,
    messages: MessagesInput,
    run_id: str,
    agent: str | None = None,
    *,
    resume: str = RESUME,
) -> RunState:
    """The first state of a run (``agent``: the name of the agent that runs it; ``resume``:
    see `to_messages`).

    Deterministic (durable workflow code calls it): the caller picks the run id,
    with `new_run_id` for a fresh one.
    """
    listed = to_messages(messages, resume=resume)
    return initial_state(listed, options.config, run_id=run_id, agent=agent)


def fresh(
    options: RunOptions,
    messages: MessagesInput,
    run_id: str | None,
    deps: Any,
    on_event: Callable[[Event], object] | None,
    on_step: Callable[[Step], object] | None,
    agent: str | None = None,
    handoffs: Mapping[str, Handover] | None = None,
    *,
    resume: str = RESUME,
) -> tuple[Live, RunState]:
    """A new run of ``options``: its live half and first state (``run_id`` None: a random one;
    ``resume``: see `to_messages`).

    Raises:
        InvalidEventError: The history holds what no provider takes
            (`history_problem`) or what `RunStarted` refuses.
    """
    listed = to_messages(messages, resume=resume)
    # Here, where a local run starts, not in `start` (durable workflow code calls it).
    problem = history_problem(listed)
    if problem:
        raise InvalidEventError("new", "run_started", f"the history: {problem}", blank_state())
    # (`start` with the messages listed once)
    state = initial_state(listed, options.config, run_id=new_run_id(run_id), agent=agent)
    live = options.live(
        deps=deps, on_event=on_event, on_step=on_step, announce_start=True, handoffs=handoffs
    )
    return live, state


# --- running -------------------------------------------------------------------


def run_sync(live: Live, state: RunState) -> Response:
    """Drive a state to its end from blocking code."""
    return finish(*drive_sync(live, state))


def run_async(live: Live, state: RunState) -> Coroutine[Any, Any, Response]:
    """Drive a state to its end on the running event loop (await the result).

    Not a coroutine function: a coroutine of its own would hold ``state``,
    the run's first state, until the run ends (see `drive_async`). The
    coroutine it gives holds `drive_async`'s: await it (a task cancelled or
    a coroutine closed before its first step warns that ``drive_async`` was
    never awaited).
    """
    return _response(drive_async(live, state))


async def _response(ended: Awaitable[Ended]) -> Response:
    return finish(*await ended)


class RunStream(Generic[OutputT_co]):
    """A run as a stream of events; iterate it with ``for`` or ``async for``.

    Yields step boundaries, the model's stream events (text deltas...), tool
    calls and results, and finally a `RunEndEvent` with the response, which
    is also `response` afterwards. A stream can be iterated once. A caller
    that stops iterating before the end (``break``, or closing the
    iteration) abandons the run: it has no response, and its state is not
    kept. For type checkers it is a ``RunStream[Output]``, as its agent's
    runs give a ``Response[Output]`` (see `Agent`).
    """

    def __init__(self, live: Live, state: RunState) -> None:
        self._live = live
        self._state = state
        # The `override_models` block the stream was made in holds while it is
        # iterated, after the block too: a handoff's or sub-agent's model string
        # resolves to the test model, as it does for `arun`'s coroutine.
        self._override = MODEL_OVERRIDE.get()
        self._response: Response[OutputT_co] | None = None
        self._started = False
        self._stopped = False
        self._failed: str | None = None  # how the run failed (`failed_end`), once it did

    @property
    def response(self) -> Response[OutputT_co]:
        """The response, once the stream is exhausted.

        Raises:
            UsageError: The stream has not been iterated to its end yet, was
                stopped before it (the run was then abandoned), or raised (the
                run failed: the state it reached is the error's ``.state``).
        """
        if self._response is None:
            if self._stopped:
                raise UsageError(f"the stream has no response: {_STOPPED}")
            if self._failed is not None:
                raise UsageError(f"the stream has no response: {self._failed}")
            if self._started:  # still iterated, or an ``async for`` left not closed yet
                raise UsageError(
                    "the stream has not finished: iterate it to the end first (a stream "
                    "the caller stops before its end abandons its run: no response)"
                )
            raise UsageError("the stream has not finished: iterate it to the end first")
        return self._response

    def _claim(self) -> Live:
        self._claim_once()
        return self._live

    def _claim_once(self) -> None:
        """Mark the stream iterated, refusing a second iteration (naming how the first ended)."""
        if self._started:
            if self._stopped:
                raise UsageError(f"a run stream can be iterated only once: {_STOPPED}")
            if self._failed is not None:
                raise UsageError(f"a run stream can be iterated only once: {self._failed}")
            if self._response is not None:
                raise UsageError(
                    "a run stream can be iterated only once: this one ended, its response "
                    "is `stream.response`"
                )
            raise UsageError("a run stream can be iterated only once")
        self._started = True

    def __iter__(self) -> Generator[RunStreamEvent, None, None]:
        live = self._claim()
        try:
            items = stream_sync(live, run_loop(live, self._state, notify=True), self._state)
            ended = yield from (items if self._override is None else _held(items, self._override))
        except GeneratorExit:
            self._stopped = True
            raise
        except BaseException as exc:
            self._failing(exc)
            raise
        self._response = finish(*ended)
        yield RunEndEvent(self._response)

    async def __aiter__(self) -> AsyncGenerator[RunStreamEvent, None]:
        live = self._claim()
        items = stream_async(live, run_loop(live, self._state, notify=True), self._state)
        try:
            async with aclosing(items):  # closing this stream closes the run's at once
                override = self._override  # (see `__init__`)
                while True:
                    try:
                        if override is None:  # (the usual stream: no context manager per event)
                            item = await items.__anext__()
                        else:
                            with overriding(override):
                                item = await items.__anext__()
                    except StopAsyncIteration:
                        break
                    if isinstance(item, Ended):
                        self._response = finish(*item)
                        yield RunEndEvent(self._response)
                        continue
                    try:
                        yield item
                    except GeneratorExit:
                        self._stopped = True
                        raise
                    except BaseException as exc:
                        # Ctrl-C or a cancellation thrown in here (``athrow``): into the
                        # run's stream, so it carries the state the run reached.
                        await throw_into(items, exc)
                        raise
        except BaseException as exc:
            self._failing(exc)
            raise

    def _failing(self, exc: BaseException) -> None:
        """The iteration raises ``exc``: unless the caller stopped it (or the run had ended),
        the run failed, as `response` says from now on."""
        if not isinstance(exc, GeneratorExit) and not self._stopped and self._response is None:
            self._failed = failed_end(exc)


def _held(items: Generator[_Y, Any, _E], override: ModelOverride) -> Generator[_Y, Any, _E]:
    """``yield from items``, with ``override`` in force while ``items`` runs (not between
    its items, where the caller runs: a context variable set across a ``yield`` would
    hold in the caller's code too, and be reset from another context if abandoned)."""
    sent: Any = None
    thrown: BaseException | None = None
    while True:
        try:
            with overriding(override):
                item = items.send(sent) if thrown is None else items.throw(thrown)
        except StopIteration as stop:
            return cast("_E", stop.value)
        sent, thrown = None, None
        try:
            sent = yield item
        except GeneratorExit:
            items.close()
            raise
        except BaseException as exc:
            thrown = exc


_Y = TypeVar("_Y")
_E = TypeVar("_E")


def failed_end(exc: BaseException) -> str:
    """What a stream's `response` (or a second iteration) says once its run raised ``exc``."""
    failed = f"its run failed with {type(exc).__name__}"
    if getattr(exc, "state", None) is None:
        return f"{failed} (raised by the iteration)"
    return (
        f"{failed} (raised by the iteration); the state the run reached is that error's "
        "`.state` (`toolfold.state_of(error)`), to inspect or resume"
    )


_STOPPED = (
    "the caller stopped iterating it before its end (a `break` out of the loop, or the "
    "iteration closed), which abandoned the run there: it has no response and its state "
    "was not kept; iterate a stream to its end (or use `run`) to get the response and its "
    "state, and start a new run to go on"
)
