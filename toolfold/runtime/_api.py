"""The functional API: `generate_text`, `agenerate_text`, `resume`, `aresume`.

Each call builds a run from its arguments (see `_run`) and hands it to the
driver. `Agent` (in `_agent`) is the same thing kept as a reusable spec.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, overload

from toolfold._errors import ToolfoldError
from toolfold.runtime._agent import Agent, _Answers, _listed
from toolfold.runtime._misplaced import (
    config_options,
    own_parameters,
    refuse_misspelt,
    refuse_model_options,
    refuse_run_options,
    run_options,
)
from toolfold.runtime._model import CLIENT_OPTIONS, Model, keeps_override
from toolfold.runtime._response import Response, Step
from toolfold.runtime._run import (
    RESUME,
    Approval,
    Denied,
    MessagesInput,
    RunOptions,
    RunStream,
    fresh,
    make_options,
    run_async,
    run_sync,
)
from toolfold.runtime._sources import ToolSource, split_sources
from toolfold.runtime.core._events import Event
from toolfold.runtime.core._messages import wrong_argument
from toolfold.runtime.core._state import RunState, holds_state, not_a_state
from toolfold.runtime.core._stop import StopCondition, StopPredicate
from toolfold.runtime.drive._executor import DEFAULT_MAX_CONCURRENCY
from toolfold.runtime.drive._loop import OnToolError
from toolfold.toolkit._tool import Tool

_T = TypeVar("_T")  # an output type given as a class, in the overloads

__all__ = [
    "Approval",
    "Denied",
    "RunStream",
    "agenerate_text",
    "aresume",
    "generate_text",
    "resume",
    "state_of",
]


# --- the functional API ---------------------------------------------------------


@overload
def generate_text(
    model: str | Model,
    messages: MessagesInput,
    *,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    instructions: str | None = None,
    max_steps: int = 10,
    auto_execute_tools: bool = True,
    tool_choice: str | None = None,
    reset_tool_choice: bool = True,
    output_type: None = None,
    output_retries: int = 3,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
    run_id: str | None = None,
    **settings: Any,
) -> Response[str]: ...


@overload
def generate_text(
    model: str | Model,
    messages: MessagesInput,
    *,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    instructions: str | None = None,
    max_steps: int = 10,
    auto_execute_tools: bool = True,
    tool_choice: str | None = None,
    reset_tool_choice: bool = True,
    output_type: type[_T],
    output_retries: int = 3,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
    run_id: str | None = None,
    **settings: Any,
) -> Response[_T]: ...


@overload
def generate_text(
    model: str | Model,
    messages: MessagesInput,
    *,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    instructions: str | None = None,
    max_steps: int = 10,
    auto_execute_tools: bool = True,
    tool_choice: str | None = None,
    reset_tool_choice: bool = True,
    output_type: Any,
    output_retries: int = 3,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
    run_id: str | None = None,
    **settings: Any,
) -> Response[Any]: ...


def generate_text(
    model: str | Model,
    messages: MessagesInput,
    *,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    instructions: str | None = None,
    max_steps: int = 10,
    auto_execute_tools: bool = True,
    tool_choice: str | None = None,
    reset_tool_choice: bool = True,
    output_type: Any = None,
    output_retries: int = 3,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
    run_id: str | None = None,
    **settings: Any,
) -> Response[Any]:
    """Run a model with tools until it answers (blocking).

    Tools with a function run automatically and their results go back to the
    model, up to ``max_steps`` model calls. Calls to tools without a function
    (or every call, with ``auto_execute_tools=False``) come back in
    ``response.tool_calls``; calls that need an approval suspend the run with
    ``finish_reason == "approval_required"``. Continue either with `resume`.

    Args:
        model: A ``provider:model`` string or a model object.
        messages: A prompt, a `Message`, or the conversation so far.
        tools: `Tool` objects or plain functions (made tools with ``@tool``).
        instructions: System instructions sent first with every request.
        max_steps: Model calls allowed before the run stops with
            ``finish_reason == "max_steps"`` (no exception).
        auto_execute_tools: False to return every call unexecuted.
        tool_choice: ``"auto"``, ``"none"``, ``"required"`` or a tool name.
        reset_tool_choice: True (the default) to force a ``"required"`` or
            named ``tool_choice`` on the first step only, later steps going
            ``"auto"``; False to force every step.
        output_type: A dataclass, attrs class, TypedDict or plain type; the
            final answer is validated and structured into ``response.output``.
        output_retries: Invalid final answers sent back before the run fails.
        stop_when: Extra stop conditions (``token_budget(n)``,
            ``tool_called(name)``, or any ``(state) -> bool``).
        on_tool_error: ``"return"`` (the model sees the error and may retry)
            or ``"raise"`` (raise `ToolExecutionError`).
        max_concurrency: Calls of one step that may run at once.
        deps: Anything tools need, handed to them in their `RunContext`.
        on_event: Called with every event of the run (read-only).
        on_step: Called with every completed `Step` (read-only).
        run_id: The run's id (a random one by default).
        **settings: Model settings: ``temperature``, ``max_tokens``...

    Returns:
        The `Response`.

    Raises:
        ToolRetriesExceededError: A tool failed more than its ``max_retries``
            times in a row.
        OutputValidationError: The answer never fitted ``output_type``.
        ProviderError: The model call failed; ``.state`` can be resumed.
        RunError: Any other failure of the model, an observer or a stop
            condition; ``.state`` is the run up to that point.
        UsageError: An argument cannot be used (``max_steps=0``, a
            ``tool_choice`` that is not a tool, a message that is not one),
            or a keyword is an option of a run that ``generate_text`` does
            not take (``history=``, ``prompt=``: put earlier messages in
            ``messages``; `resume`'s ``approvals=``, ``tool_results=``,
            ``message=``, ``state=``) rather than a model setting, or an
            option of the model (``api_key=``, ``base_url=``, ``timeout=``...:
            pass it to ``toolfold.model("provider:model", api_key=...)`` and
            give that model).
    """
    if settings:
        refuse_run_options(
            "generate_text()", settings, _function_run_options(), agent="Agent(model, "
        )
        refuse_model_options("generate_text()", settings, model, agent="Agent(model, ")
        refuse_misspelt("generate_text()", settings, _function_parameters(), agent="Agent(model, ")
    options = _one_off(locals(), "generate_text()")
    if isinstance(options, Agent):
        return options.run(messages, deps=deps, on_event=on_event, on_step=on_step, run_id=run_id)
    return run_sync(*fresh(options, messages, run_id, deps, on_event, on_step))


@overload
async def agenerate_text(
    model: str | Model,
    messages: MessagesInput,
    *,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    instructions: str | None = None,
    max_steps: int = 10,
    auto_execute_tools: bool = True,
    tool_choice: str | None = None,
    reset_tool_choice: bool = True,
    output_type: None = None,
    output_retries: int = 3,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
    run_id: str | None = None,
    **settings: Any,
) -> Response[str]: ...


@overload
async def agenerate_text(
    model: str | Model,
    messages: MessagesInput,
    *,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    instructions: str | None = None,
    max_steps: int = 10,
    auto_execute_tools: bool = True,
    tool_choice: str | None = None,
    reset_tool_choice: bool = True,
    output_type: type[_T],
    output_retries: int = 3,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
    run_id: str | None = None,
    **settings: Any,
) -> Response[_T]: ...


@overload
async def agenerate_text(
    model: str | Model,
    messages: MessagesInput,
    *,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    instructions: str | None = None,
    max_steps: int = 10,
    auto_execute_tools: bool = True,
    tool_choice: str | None = None,
    reset_tool_choice: bool = True,
    output_type: Any,
    output_retries: int = 3,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
    run_id: str | None = None,
    **settings: Any,
) -> Response[Any]: ...


@keeps_override
async def agenerate_text(
    model: str | Model,
    messages: MessagesInput,
    *,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    instructions: str | None = None,
    max_steps: int = 10,
    auto_execute_tools: bool = True,
    tool_choice: str | None = None,
    reset_tool_choice: bool = True,
    output_type: Any = None,
    output_retries: int = 3,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
    run_id: str | None = None,
    **settings: Any,
) -> Response[Any]:
    """Like `generate_text`, on the running event loop (see it for the arguments)."""
    if settings:
        refuse_run_options(
            "agenerate_text()", settings, _function_run_options(), agent="Agent(model, "
        )
        refuse_model_options("agenerate_text()", settings, model, agent="Agent(model, ")
        refuse_misspelt("agenerate_text()", settings, _function_parameters(), agent="Agent(model, ")
    options = _one_off(locals(), "agenerate_text()")
    if isinstance(options, Agent):
        return await options.arun(
            messages, deps=deps, on_event=on_event, on_step=on_step, run_id=run_id
        )
    return await run_async(*fresh(options, messages, run_id, deps, on_event, on_step))


# The options `generate_text` passes on as they are, by the names `Agent` and
# `make_options` give them.
_OPTIONS = (
    "instructions",
    "max_steps",
    "auto_execute_tools",
    "tool_choice",
    "reset_tool_choice",
    "output_type",
    "output_retries",
    "stop_when",
    "on_tool_error",
    "max_concurrency",
    "settings",
)


def _one_off(arguments: Mapping[str, Any], caller: str) -> RunOptions | Agent:
    """What a `generate_text` call runs: the options of the `Agent` it stands for, or the agent.

    ``arguments`` are the call's (its ``locals()``), ``caller`` the call as an
    error names it (``"generate_text()"``). Without tool sources a
    call runs the options themselves, as the agent's `run` would (an `Agent`
    made per call and dropped costs about as much as a model exchange); with
    sources, the agent, which opens them around the run.
    """
    options = {name: arguments[name] for name in _OPTIONS}
    # (checked as `Agent` checks them, naming the function called)
    tools = _listed(arguments["tools"], "tools", None, caller)
    options["stop_when"] = _listed(options["stop_when"], "stop_when", None, caller)
    static, sources = split_sources(tools)
    if not sources:
        return make_options(arguments["model"], tools=static, **options)
    return Agent(arguments["model"], tools=tools, **options)


@functools.cache
def _function_parameters() -> tuple[str, ...]:
    """`generate_text`'s parameters that a keyword may misspell (`own_parameters`)."""
    return own_parameters(generate_text)


@functools.cache
def _function_run_options() -> Mapping[str, str]:
    """The run options `generate_text` would take as model settings, with where each goes."""
    hints = run_options({"resume": resume, "aresume": aresume}, generate_text, "toolfold.")
    fresh_run = run_options({"run": Agent.run}, generate_text, "agent.")
    for name in sorted(fresh_run.keys() - hints.keys()):  # a fresh run's prompt and history
        hints[name] = (
            f"{name}= is Agent.run()'s; here the prompt, after any earlier messages, goes in "
            "messages, e.g. messages=[*history, Message.user(prompt)]"
        )
    configured = config_options(generate_text, "Agent(model, ", Agent.__init__)
    return {**configured, **hints}


def _resume_agent(
    state: RunState,
    model: str | Model,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource],
    output_type: Any,
    stop_when: Sequence[StopCondition | StopPredicate],
    on_tool_error: OnToolError,
    max_concurrency: int,
    function: str,
) -> Agent:
    """The agent that continues ``state``: its stored configuration, the live parts given again.

    Raises:
        UsageError: ``state`` is no `RunState` (``function``: the one called).
    """
    if not isinstance(state, RunState):  # a Response, its JSON, None
        raise not_a_state(function, state)
    # (checked here, as `Agent` checks them, naming the function called)
    tools = _listed(tools, "tools", None, f"{function}()")
    stop_when = _listed(stop_when, "stop_when", None, f"{function}()")
    config = state.config
    return Agent(
        model,
        name=state.agent,  # the agent running the state now (after a handoff too)
        tools=tools,
        output_type=output_type,
        # (a state saved before a key in settings was refused keeps it: the run
        # sends it as before, but no agent can be built with it; see _check_stored)
        settings={k: v for k, v in config.settings.items() if k not in CLIENT_OPTIONS},
        instructions=config.instructions,
        max_steps=config.max_steps,
        auto_execute_tools=config.auto_execute_tools,
        tool_choice=config.tool_choice,
        reset_tool_choice=config.reset_tool_choice,
        output_retries=config.output_retries,
        stop_when=(*config.stop_when, *stop_when),
        on_tool_error=on_tool_error,
        max_concurrency=max_concurrency,
    )


@overload
def resume(
    state: RunState,
    *,
    model: str | Model,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    tool_results: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Approval] | None = None,
    message: MessagesInput | None = None,
    max_steps: int | None = None,
    output_type: None = None,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
) -> Response[str]: ...


@overload
def resume(
    state: RunState,
    *,
    model: str | Model,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    tool_results: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Approval] | None = None,
    message: MessagesInput | None = None,
    max_steps: int | None = None,
    output_type: type[_T],
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
) -> Response[_T]: ...


@overload
def resume(
    state: RunState,
    *,
    model: str | Model,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    tool_results: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Approval] | None = None,
    message: MessagesInput | None = None,
    max_steps: int | None = None,
    output_type: Any,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
) -> Response[Any]: ...


def resume(
    state: RunState,
    *,
    model: str | Model,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    tool_results: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Approval] | None = None,
    message: MessagesInput | None = None,
    max_steps: int | None = None,
    output_type: Any = None,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
) -> Response[Any]:
    """Continue a suspended, failed-before-a-model-call or finished run (blocking).

    The run's configuration (instructions, settings, tool choice, output
    retries...) comes from the state; the live parts (model, tools, output
    type) are given again, matched to the state by name.

    Args:
        state: The state from ``response.state``, an error's ``.state``, or
            ``RunState.from_json``.
        model: The model (string or object).
        tools: The run's tools.
        tool_results: Results for returned calls, by call id: text, any value
            (formatted like a tool result), an exception (an error result) or
            a `ToolResultPart`.
        approvals: By call id: True, False or `Denied(reason)`.
        message: A new user message (starts a new turn on a finished run).
        max_steps: A new limit of model calls per turn (the total, not an
            increment); a run that stopped at ``max_steps`` continues when it
            is larger.
        output_type: The run's output type, if it has one.
        stop_when: Stop conditions for this resume, on top of the run's own.
        on_tool_error: ``"return"`` or ``"raise"`` (see `generate_text`).
        max_concurrency: Calls of one step that may run at once.
        deps: Dependencies for the tools' `RunContext`.
        on_event: Called with every event (read-only).
        on_step: Called with every completed step (read-only).

    Raises:
        UsageError: ``max_steps`` is below the calls this turn made, or
            the run stopped at ``max_steps`` and nothing continues it.
    """
    answers = _Answers(tool_results, approvals, message, max_steps, deps, on_event, on_step)
    agent, begin = _resume_agent(
        state, model, tools, output_type, stop_when, on_tool_error, max_concurrency, "resume"
    )._answered(state, answers, "resume", RESUME)
    return agent._sync(begin)


@overload
async def aresume(
    state: RunState,
    *,
    model: str | Model,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    tool_results: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Approval] | None = None,
    message: MessagesInput | None = None,
    max_steps: int | None = None,
    output_type: None = None,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
) -> Response[str]: ...


@overload
async def aresume(
    state: RunState,
    *,
    model: str | Model,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    tool_results: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Approval] | None = None,
    message: MessagesInput | None = None,
    max_steps: int | None = None,
    output_type: type[_T],
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
) -> Response[_T]: ...


@overload
async def aresume(
    state: RunState,
    *,
    model: str | Model,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    tool_results: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Approval] | None = None,
    message: MessagesInput | None = None,
    max_steps: int | None = None,
    output_type: Any,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
) -> Response[Any]: ...


@keeps_override
async def aresume(
    state: RunState,
    *,
    model: str | Model,
    tools: Sequence[Tool[..., Any] | Callable[..., Any] | ToolSource] = (),
    tool_results: Mapping[str, Any] | None = None,
    approvals: Mapping[str, Approval] | None = None,
    message: MessagesInput | None = None,
    max_steps: int | None = None,
    output_type: Any = None,
    stop_when: Sequence[StopCondition | StopPredicate] = (),
    on_tool_error: OnToolError = "return",
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    deps: Any = None,
    on_event: Callable[[Event], object] | None = None,
    on_step: Callable[[Step], object] | None = None,
) -> Response[Any]:
    """Like `resume`, on the running event loop."""
    answers = _Answers(tool_results, approvals, message, max_steps, deps, on_event, on_step)
    agent, begin = _resume_agent(
        state, model, tools, output_type, stop_when, on_tool_error, max_concurrency, "aresume"
    )._answered(state, answers, "aresume", RESUME)
    return await agent._async(begin)


def _check_exception(value: object) -> None:
    """Refuse ``value`` with a `UsageError` unless it is an exception (state_of's argument).

    A type test up front: a `Response` has a ``.state`` of its own, which
    `state_of` would otherwise return as if it came from an error.
    """
    if not isinstance(value, BaseException):
        hint = " (read its .state)" if holds_state(value) else ""  # (a Response)
        raise wrong_argument("state_of", "error", "an exception", value, hint)


def state_of(error: BaseException) -> RunState | None:
    """The run state an error or a cancellation carries, to inspect, save or resume.

    A `RunError` (and a provider's error raised by a run) has ``.state``. So has
    the `asyncio.CancelledError` of a cancelled `arun`, async stream or
    workflow: the run where the interrupted model call or tool round began, with
    the results of that round's calls that had ended (a resume runs only the
    others). asyncio sometimes raises another exception to the awaiting code: a
    `TimeoutError` from `asyncio.timeout` or `wait_for` (raised from the
    cancellation), or on Python 3.10 a new `CancelledError` whose context is the
    cancelled one. (``asyncio.gather(..., return_exceptions=True)`` gives a
    `CancelledError` of its own, with no state, for a cancelled task, and on
    3.11+ so does a task asked a second time: ask the task itself once,
    ``task.result()``, for the one with the state.) This looks at the error,
    then along the chain a traceback shows, nearest first: its cause (``raise
    ... from err``) and its context (an error raised while handling ``err``, as
    a ``raise ValueError(...)`` in an ``except RunError:`` block), unless
    ``raise ... from None`` hid it. A context is followed only from an error
    that is no `ToolfoldError`: a toolfold error without a state is a failure of
    its own (a fallback ``generate_text`` that fails in an ``except RunError:``
    block gives None, not the first run's state); its cause is still followed.

    Example:
        >>> try:
        ...     response = await asyncio.wait_for(agent.arun(prompt), 30)  # doctest: +SKIP
        ... except TimeoutError as exc:
        ...     state = toolfold.state_of(exc)  # resume it later

    Args:
        error: The exception caught.

    Returns:
        The state, or None when no exception in the chain carries one.

    Raises:
        UsageError: ``error`` is no exception.
    """
    _check_exception(error)
    seen: set[int] = set()
    todo = [error]
    while todo:
        exc = todo.pop(0)
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        state = getattr(exc, "state", None)
        if isinstance(state, RunState):
            return state
        if exc.__cause__ is not None:
            todo.append(exc.__cause__)
        # The chain a traceback prints: asyncio's re-made exceptions keep the
        # cancelled one as their context, and an error raised while handling a
        # run's error (a wrapper in an ``except`` block) has it as its context.
        # Not a toolfold error's context: one without a state is a failure of
        # its own (a fallback run's, raised while handling another run's error),
        # not the failure of the run it was raised next to.
        if (
            exc.__context__ is not None
            and not exc.__suppress_context__
            and not isinstance(exc, ToolfoldError)
        ):
            todo.append(exc.__context__)
    return None
