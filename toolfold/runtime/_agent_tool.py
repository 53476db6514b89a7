"""An agent (or a workflow) used as another agent's tool: its run nests in the caller's state.

The tool's function runs the sub-agent (or the workflow) and hands back a
`SubRun` (its state and the text the calling model sees). In an async run it is a coroutine on
the caller's event loop (the sub-agent runs with `arun`); a blocking run calls
its blocking twin, which runs the sub-agent with `run`. The executor turns that into a
`ToolReturned` carrying the finished sub-run, or a `ToolSuspended` when the
sub-run waits for approvals or tool results: the calling run then suspends
too, and its caller answers the nested calls by id (see `resume`).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from toolfold._errors import RunError, SourceCloseError, ToolDefinitionError, UsageError
from toolfold.runtime._response import Response, RunEndEvent
from toolfold.runtime._resume import continuing
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._stop import STOP_REASONS, TokenBudget
from toolfold.runtime.drive._executor import (
    SubRun,
    checks_resume,
    runs_sub_runs,
    with_blocking_twin,
)
from toolfold.runtime.drive._failures import (
    blocking_sub_run,
    nested_too_deep,
    not_started_text,
    stopped_content,
    too_deep,
)
from toolfold.toolkit._context import RunContext
from toolfold.toolkit._options import ApprovalPolicy
from toolfold.toolkit._results import describe_exception, one_line
from toolfold.toolkit._tool import MADE_AS, Tool, is_async_callable

if TYPE_CHECKING:
    from toolfold.runtime._agent import Agent
    from toolfold.runtime._workflow import Workflow
    from toolfold.runtime.core._state import RunState


def agent_tool(
    spec: Agent | Workflow,
    *,
    name: str | None,
    description: str | None,
    input_type: Any,
    requires_approval: ApprovalPolicy,
    timeout: float | None,
    output: Callable[[Response], Any] | None = None,
) -> Tool[..., Any]:
    """The `Tool` that runs ``spec``, an agent or a workflow (see `Agent.as_tool`)."""
    from toolfold.runtime._agent import Agent
    from toolfold.runtime._task import type_accepts, type_name

    if output is not None and not callable(output):
        raise UsageError(
            f"as_tool(output=...) takes a function of the sub-run's Response, "
            f"got {type(output).__name__}"
        )
    if output is not None and is_async_callable(output):
        raise UsageError(
            f"as_tool(output=...) takes a plain function of the sub-run's Response, got the "
            f"async function {function_name(output)!r}: the tool calls it without awaiting "
            f"it; make it a plain def"
        )
    made_by = AsTool(spec, name, description, input_type, requires_approval, timeout, output)
    if isinstance(spec, Agent):
        tool_name = spec.name if name is None else name  # name="" is refused by @tool
        if tool_name is None:
            raise UsageError(
                "agent.as_tool() needs a name: give the agent a name= or pass name=..."
            )
        text = description or default_description(spec, tool_name)
        doc = f"{text}\n\nArgs:\n    input: What to ask the {tool_name} agent."
        return _nested(spec, _prompt, made_by, tool_name, text, doc)
    tool_name = spec.name if name is None else name
    if not type_accepts(spec.input_type, input_type):
        raise UsageError(
            f"{spec.label}.as_tool(input_type={type_name(input_type)}): the workflow takes "
            f"{type_name(spec.input_type)}; give an input_type it accepts"
        )
    problems = spec.input_problems(input_type, "the tool's input_type is")
    if problems:  # a step inside (a Parallel's or a Route's branch) refuses it
        raise UsageError(f"{spec.label}.as_tool(input_type={type_name(input_type)}): {problems[0]}")
    text = description or default_description(spec, tool_name)
    doc = f"{text}\n\nArgs:\n    input: The {tool_name} workflow's input."
    return _nested(spec, _as_is, made_by, tool_name, text, doc)


def default_description(spec: Agent | Workflow, tool_name: str) -> str:
    """The description `agent_tool` gives the tool ``tool_name`` of ``spec`` when given none."""
    from toolfold.runtime._agent import Agent

    if isinstance(spec, Agent):
        return f"Ask the {tool_name} agent." + (
            f" Its instructions: {spec.instructions}" if spec.instructions else ""
        )
    return f"Run the {tool_name} workflow."


def _nested(
    spec: Any,
    prompt: Callable[[Any], Any],
    made_by: AsTool,
    tool_name: str,
    text: str,
    doc: str,
) -> Tool[..., Any]:
    """The tool whose call runs ``spec`` (an agent or a workflow) on ``prompt(input)`` as a sub-run."""
    who = agent_label(spec, tool_name)

    def call(ctx: RunContext[Any], input: Any) -> SubRun:  # blocking runs
        runner = _runner(spec, ctx, tool_name)
        if isinstance(runner, SubRun):  # not started: none of the caller's tree budget is left
            return runner
        try:
            if ctx.forward is not None:  # the caller streams: so does the sub-run
                stream = _stream(runner, ctx, prompt, input)
                for event in stream:
                    if not isinstance(event, RunEndEvent):
                        ctx.forward(event)
                response = stream.response
            elif ctx.sub_run is not None:  # answered by the caller: go on where it stopped
                with continuing(ctx.sub_run):
                    response = spec.resume(ctx.sub_run, deps=ctx.deps)
            else:
                with blocking_sub_run():
                    response = runner.run(prompt(input), deps=ctx.deps, run_id=sub_run_id(ctx))
        except SourceCloseError as error:
            response = _ended(error, tool_name)
        except RecursionError as exc:  # the stack ran out in this sub-run's own code
            if not nested_too_deep():
                raise
            # The state it reached (see `takes_state`): the call's error result keeps
            # the sub-run, and the model calls it made count in the caller's usage.
            reached = getattr(exc, "state", None)
            raise RunError(too_deep(f"the blocking sub-run of {who}", exc), reached) from exc
        return _sub_run(response, made_by.output, tool_name, who, spec)

    async def acall(ctx: RunContext[Any], input: Any) -> SubRun:  # async runs: on their loop
        runner = _runner(spec, ctx, tool_name)
        if isinstance(runner, SubRun):  # not started: none of the caller's tree budget is left
            return runner
        try:
            if ctx.forward is not None:
                stream = _stream(runner, ctx, prompt, input)
                async for event in stream:
                    if not isinstance(event, RunEndEvent):
                        ctx.forward(event)
                response = stream.response
            elif ctx.sub_run is not None:
                with continuing(ctx.sub_run):
                    response = await spec.aresume(ctx.sub_run, deps=ctx.deps)
            else:
                response = await runner.arun(prompt(input), deps=ctx.deps, run_id=sub_run_id(ctx))
        except SourceCloseError as error:
            response = _ended(error, tool_name)
        return _sub_run(response, made_by.output, tool_name, who, spec)

    # What built the tool, for diagrams and agent files (`as_tool_of`), and for errors.
    what = spec.label if hasattr(spec, "label") else f"agent {spec.name!r}"
    made_as = (
        f"{what}.as_tool()"
        if spec.name is not None
        else f"the as_tool() of an unnamed {type(spec).__name__}"
    )
    for function in (acall, call):
        function.__dict__[_AS_TOOL] = made_by
        function.__dict__[MADE_AS] = made_as
    try:
        made = [
            _made(
                function,
                made_by.input_type,
                doc,
                tool_name,
                text,
                made_by.requires_approval,
                made_by.timeout,
            )
            for function in (acall, call)
        ]
    except ToolDefinitionError as exc:  # name the spec, not the function made here
        raise ToolDefinitionError(f"{what}.as_tool()", exc.problems) from None

    def check(call: ToolCallPart, sub_run: RunState) -> None:
        spec._check_resume(sub_run)

    tool, twin = (checks_resume(runs_sub_runs(m, who), check) for m in made)
    return with_blocking_twin(tool, twin)


def _made(
    function: Callable[..., Any],
    input_type: Any,
    doc: str,
    name: str,
    description: str,
    requires_approval: ApprovalPolicy,
    timeout: float | None,
) -> Tool[..., Any]:
    from toolfold.toolkit import tool

    function.__annotations__ = {"ctx": RunContext, "input": input_type, "return": Any}
    function.__doc__ = doc
    made: Tool[..., Any] = tool(
        name=name, description=description, requires_approval=requires_approval, timeout=timeout
    )(function)
    return made


def _stream(spec: Any, ctx: RunContext[Any], prompt: Callable[[Any], Any], input: Any) -> Any:
    if ctx.sub_run is not None:
        with continuing(ctx.sub_run):
            return spec.resume_stream(ctx.sub_run, deps=ctx.deps)
    return spec.stream(prompt(input), deps=ctx.deps, run_id=sub_run_id(ctx))


def within(spec: Any, budget: TokenBudget) -> Any:
    """``spec`` as a sub-run of a run with a tree budget starts it.

    An agent or a workflow gets ``budget`` (what is left of its caller's, see
    `handed_budget`) among its stop conditions, so its run stores it and stops
    there too; it goes on down to the agents (or a workflow's steps) it runs
    in turn. Its callers check first that some of it is left (`handed` here;
    the Temporal integration's nested calls likewise): a spent budget starts
    no sub-run.
    """
    # (not `evolve`: an agent's resolves its model again, per call)
    return spec._within(budget)


def _runner(spec: Any, ctx: RunContext[Any], tool_name: str) -> Any:
    """What runs the call's sub-run: ``spec``, within the tree budget `handed` it when there
    is one; or, when nothing of that budget is left, the call's result (a `SubRun`)."""
    budget = handed(ctx, spec, tool_name)
    if budget is None:
        return spec
    if isinstance(budget, SubRun):
        return budget
    return within(spec, budget)


def handed(ctx: RunContext[Any], spec: Any, tool_name: str) -> TokenBudget | SubRun | None:
    """The tree budget the call's new sub-run starts within: what is left of its caller's
    (None when the caller has none).

    A sub-run the call continues (``ctx.sub_run``) goes on with the budget it
    stored (None). When nothing is left (the step's own model call spent it),
    the call's result instead: a `SubRun` saying that ``spec`` (an agent or a
    workflow, run by the tool ``tool_name``, see `agent_label`) was not started.
    """
    budget = ctx.token_budget
    if budget is None or ctx.sub_run is not None:
        return None
    if budget.tokens <= 0:
        return _not_started(ctx, agent_label(spec, tool_name))
    return budget  # type: ignore[no-any-return]


def _not_started(ctx: RunContext[Any], who: str) -> SubRun:
    reason = ctx._spent  # (set by the run, which knows its state: see `_job_in`)
    if reason is None:  # a context built by hand
        reason = f"its caller's token_budget(tree=True) has {ctx.token_budget.tokens} tokens left"
    return SubRun(None, not_started_text(who, reason), is_error=True)


def _as_is(value: Any) -> Any:
    return value


def _sub_run(
    response: Response,
    output: Callable[[Response], Any] | None,
    tool_name: str,
    who: str,
    target: Any = None,
) -> SubRun:
    """The sub-run and what the calling model sees of it.

    ``output`` (``as_tool(output=...)``) runs once the sub-run finished (a
    stop condition's finish too: the function reads why in the response);
    what it gives is the call's recorded result, so a replay or a resume
    never runs it again. If it raises, the call is an error result naming
    the tool. Without it, a sub-run that a stop condition ended answers as
    `stopped_content` says.
    """
    state = response.state
    if output is None or not state.is_done:
        if state.finish_reason in STOP_REASONS:
            return SubRun(state, *stopped_content(state, who, stopped_by(target, state)))
        value = state.output
        # The answer's text is read only when needed: it searches the conversation.
        return SubRun(state, _content(value, response.text if value is None else ""))
    try:
        extracted = output(response)
        text = extracted if isinstance(extracted, str) else _json_text(extracted)
    except Exception as exc:
        message = f"Error: the output= function of tool {tool_name!r} failed: "
        return SubRun(state, message + describe_exception(exc), is_error=True)
    return SubRun(state, text)


def function_name(function: Any) -> str:
    """A user's function as messages name it: its import path (``module:name``) where it has
    one, else its module and qualified name (``module.make.<locals>.check``, a lambda's).

    A `functools.partial` is named by the function it wraps, a callable object
    that is not bound to a module-level name by its class (never by a
    ``repr()`` with a memory address).
    """
    from toolfold.runtime._document import import_path

    if isinstance(function, functools.partial):
        return function_name(function.func)
    try:
        path = import_path(function)
    except Exception:  # (a module that cannot be imported again: the name is enough)
        path = None
    if path is not None:
        return path
    name = getattr(function, "__qualname__", None)
    if not isinstance(name, str):  # a callable object: its class says what it is
        kind = type(function)
        return f"{kind.__module__}.{kind.__qualname__} instance"
    module = getattr(function, "__module__", None)
    return f"{module}.{name}" if module else name


def stopped_by(target: Any, state: RunState) -> str | None:
    """The ``stop_when`` callable that stopped ``state``, a run of the agent ``target``, by
    name; None when a callable did not stop it or none is known.

    The callables that bound the agent running it: ``target``'s, and once it
    handed the run to another agent, that agent's beside them (``target``'s
    go on bounding the whole turn across handoffs). A run's state keeps no
    callables, so they are the specs': the only one, or with several, all of
    them (``one of a:x, a:y``). They are never called again to tell which
    held: a condition may have side effects, or hold no longer.
    """
    from toolfold.runtime._agent import Agent
    from toolfold.runtime.core._stop import MaxSteps, TokenBudget, ToolCalled

    if state.finish_reason != "stop_condition" or not isinstance(target, Agent):
        return None
    agents = [target]
    if state.agent is not None and state.agent != target.name and target.handoffs:
        try:
            agents.insert(0, target.handoff_graph().get(state.agent, target))
        except UsageError:
            return None
    callables: list[Any] = []
    for agent in agents:
        for c in agent.stop_when:
            if not isinstance(c, (MaxSteps, TokenBudget, ToolCalled)) and c not in callables:
                callables.append(c)
    if not callables:
        return None
    names = [function_name(condition) for condition in callables]
    return names[0] if len(names) == 1 else "one of " + ", ".join(names)


def agent_label(spec: Agent | Workflow, tool_name: str) -> str:
    """How an error names the agent (or workflow) a tool runs: ``agent 'research'``.

    The tool's name, which the calling model knows, and the agent's own
    name when it differs: ``agent 'research' (tool 'ask')``.
    """
    from toolfold.runtime._agent import Agent

    kind = "agent" if isinstance(spec, Agent) else "workflow"
    name = spec.name
    if name is None or name == tool_name:
        return f"{kind} {tool_name!r}"
    return f"{kind} {name!r} (tool {tool_name!r})"


def _json_text(value: Any) -> str:
    from toolfold.toolkit._converter import get_converter

    return json.dumps(get_converter().unstructure(value), ensure_ascii=False)


_AS_TOOL = "__toolfold_as_tool__"


@attrs.frozen
class AsTool:
    """The arguments of the `Agent.as_tool` (or `Workflow.as_tool`) call that made a tool.

    ``agent`` is the agent, or the workflow.
    """

    agent: Agent | Workflow
    name: str | None
    description: str | None
    input_type: Any
    requires_approval: ApprovalPolicy
    timeout: float | None
    output: Callable[[Response], Any] | None = None


def as_tool_of(tool: Tool[..., Any]) -> AsTool | None:
    """How ``tool`` was made from an agent, or None for any other tool."""
    made = getattr(tool.function, _AS_TOOL, None)
    return made if isinstance(made, AsTool) else None


def sub_run_id(ctx: RunContext[Any]) -> str:
    """The id of the sub-run a call starts: ``<run id>/<call id>``, unique in the run.

    It follows from the call, so a replay, a retry or a fork taken before the
    call gets the same id. A model may reuse a call id in a later step
    (``call_0`` every time); that call's sub-run is ``<run id>/<call id>@<step>``,
    so two sub-runs of one run never share an id (nor their tools' idempotency keys).
    """
    return sub_run_id_of(ctx.run_id, ctx.call_id, ctx.step, ctx.messages)


def sub_run_id_of(run_id: str, call_id: str, step: int, messages: Sequence[Any]) -> str:
    """`sub_run_id` from its parts: the calling run's id, the call's id and step, its conversation.

    A durable run (on Temporal) starts its sub-runs with it too, so they get a local run's ids.
    """
    base = f"{run_id}/{call_id}"
    return f"{base}@{step}" if _reused(messages, call_id) else base


def _reused(messages: Sequence[Any], call_id: str) -> bool:
    """Whether an assistant message before the last one holding ``call_id`` made a call of that id."""
    # Read the parts in place: a workflow's steps ask this once per step, over
    # a conversation whose assistant messages may hold many calls (a Parallel).
    seen = 0
    for message in messages[::-1]:  # a tuple made at C speed (a `Log` reversed is a generator)
        if message.role != "assistant":
            continue
        for part in message.parts:
            if type(part) is ToolCallPart and part.id == call_id:
                seen += 1
                if seen > 1:
                    return True
                break
    return False


def _prompt(value: Any) -> str:
    # Through the one converter, so an Enum or a datetime reads as in the tool's
    # schema (what the calling model wrote), not as its Python str().
    return value if isinstance(value, str) else _json_text(value)


def _content(output: Any, text: str) -> str:
    if output is None or isinstance(output, str):
        return text if output is None else output
    return json.dumps(output, default=str, ensure_ascii=False)


_log = logging.getLogger("toolfold.sources")


def _ended(error: SourceCloseError, tool_name: str) -> Response:
    """The response of a sub-run that ended but whose tool sources failed to close.

    The sub-run is done: its answer is the call's result (running it again
    would repeat what it did). Inside a workflow run, the close error is kept
    for the workflow, which raises it when it ends (as for its steps);
    otherwise it is logged as a warning of the ``toolfold.sources`` logger.
    """
    from toolfold.runtime._task import STEP_CLOSE_ERRORS  # (it imports this module)

    if error.response is None:
        raise error
    kept = STEP_CLOSE_ERRORS.get()
    if kept is not None:
        kept.append(error)
    else:
        failures = "; ".join(describe_exception(e) for e in error.close_errors)
        _log.warning(
            "the sub-run of tool %r ended, but closing a tool source failed (its answer is "
            "kept): %s",
            tool_name,
            one_line(failures),  # (the sources' text, a server's maybe)
        )
    return error.response
