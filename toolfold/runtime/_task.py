"""`Task`: one step of a workflow (an agent, a workflow or a function) and its tool.

A workflow runs each of its steps as a tool call of its own run (see
`_planner`): this module turns a step into that `Tool`. The tool's arguments
are the step's input and the named values its templates need, as plain data;
its result is the step's output as JSON text. An agent or a workflow step
hands back a `SubRun`, so its whole run nests in the workflow's state, and an
approval inside it suspends the workflow like an agent used as a tool.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import math
import re
import typing
import weakref
from collections.abc import Awaitable, Callable, Mapping
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any, Literal

import attrs

from toolfold._errors import SourceCloseError, UsageError
from toolfold.runtime._agent import Agent
from toolfold.runtime._agent_tool import handed, stopped_by, sub_run_id
from toolfold.runtime._planner import json_text
from toolfold.runtime._response import RunEndEvent
from toolfold.runtime._resume import continuing
from toolfold.runtime._step_retry import MAX_STEP_DELAY, retried_step
from toolfold.runtime._template import TemplateError, names_in, placeholders, render
from toolfold.runtime.core._build import new_tuple
from toolfold.runtime.core._messages import ToolCallPart, thaw
from toolfold.runtime.core._stop import STOP_REASONS, TokenBudget, stop_answer
from toolfold.runtime.drive._executor import (
    SubRun,
    checks_resume,
    runs_sub_runs,
    with_blocking_twin,
)
from toolfold.runtime.drive._failures import handed_run, handed_to
from toolfold.toolkit._context import RunContext
from toolfold.toolkit._problems import clip
from toolfold.toolkit._results import run_kind
from toolfold.toolkit._tool import Tool

if TYPE_CHECKING:
    from toolfold.runtime._response import Response
    from toolfold.runtime.core._state import RunState
    from toolfold.runtime.drive._loop import Ended

OnError = Literal["fail", "skip", "retry"]
"""What a failing step does: fail the workflow, be skipped, or run again."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")  # fullmatch: "$" would allow a final "\n"
_SKIP_LIMIT = 1_000_000  # a skipped step never fails the run, however often it fails
_RETRY_DELAY = 1.0  # `Task.retry_delay`'s default (and a step pickled before it existed)


@attrs.frozen(init=False)
class Task:
    """A workflow step with its options: name, failure policy, prompt template.

    Agents, workflows and functions given to a workflow directly become tasks
    with the defaults; wrap one in a `Task` to change them.

    Example:
        >>> Sequence(researcher, Task(writer, prompt="Write up {researcher}.", on_error="retry"))

    Attributes:
        target: An `Agent`, a workflow, or a function of the step's input.
        name: The step's name: its output is stored under it, and templates
            refer to it as ``{name}``. Default: the agent's or workflow's
            ``name``, the function's ``__name__``.
        on_error: ``"fail"`` (the workflow fails), ``"skip"`` (the step's
            error is recorded, it has no output and the next step gets its
            input) or ``"retry"`` (run it again, up to ``retries`` times).
            A provider error that asking again cannot fix (bad credentials,
            a bad request, a Gemini per-day quota: ``retryable`` False) is
            not retried, nor one whose provider asked for a wait longer than
            its transport's ``max_retry_after``: the workflow fails at once.
            Each attempt's model calls make their transport's own retries
            too: 3 step attempts of 3 requests each are up to 9 requests.
        retries: Extra attempts with ``on_error="retry"``.
        retry_delay: Seconds waited before the first retry of a step that
            failed with a provider's error (a 503, a 429; a nested
            workflow's or a function step's too), doubled before each next
            one (at most 60 s); the error's ``retry_after`` instead, when its
            provider asked for a wait. The wait is made between attempts:
            ``timeout`` does not count it, and a run that fails (a sibling
            step's error in a `Parallel`) does not wait for it. A step's own
            failure (an answer that does not fit, a tool's bug) is retried
            at once.
        prompt: A template for the agent's prompt (``{input}`` is the step's
            input; ``{name}`` / ``{name.field}`` earlier outputs). Default:
            the input itself (JSON unless it is text).
        input_type: The type the step accepts, checked against the previous
            step's output type when the workflow is built (a function's is
            its first parameter's annotation).
        timeout: Seconds one attempt at the step may take (None: no limit).
            An attempt that runs past it is stopped and fails with
            ``tool '<name>' timed out after <n> s``, then ``on_error``
            applies. Time a sub-run waits for the caller (an approval) does
            not count.
    """

    target: Any
    name: str
    on_error: OnError
    retries: int
    prompt: str | None
    input_type: Any
    timeout: float | None
    retry_delay: float
    _free: frozenset[str] = attrs.field(init=False, eq=False, repr=False, hash=False)
    # Whether name= was given (an empty one is then the problem, not the target's name).
    _named: bool = attrs.field(init=False, eq=False, repr=False, hash=False)
    # The agent the step runs as it is, its input its prompt, when no values are
    # given (no prompt template, no brace in its instructions), else None.
    _plain_agent: Agent | None = attrs.field(init=False, eq=False, repr=False, hash=False)

    def __init__(
        self,
        target: Any,
        *,
        name: str | None = None,
        on_error: OnError = "fail",
        retries: int = 2,
        prompt: str | None = None,
        input_type: Any = None,
        timeout: float | None = None,
        retry_delay: float = _RETRY_DELAY,
    ) -> None:
        self.__attrs_init__(
            target=target,
            name=name if name is not None else default_name(target),
            on_error=on_error,
            retries=retries,
            prompt=prompt,
            input_type=input_type,
            timeout=timeout,
            retry_delay=retry_delay,
        )
        object.__setattr__(self, "_free", self._find_free_names())
        object.__setattr__(self, "_named", name is not None)
        instructions = target.instructions if isinstance(target, Agent) else None
        as_is = (
            isinstance(target, Agent)
            and not prompt
            and (not instructions or ("{" not in instructions and "}" not in instructions))
        )
        object.__setattr__(self, "_plain_agent", target if as_is else None)

    @property
    def kind(self) -> Literal["agent", "workflow", "function"]:
        """What the step runs."""
        from toolfold.runtime._workflow import Workflow

        if isinstance(self.target, Agent):
            return "agent"
        if isinstance(self.target, Workflow):
            return "workflow"
        return "function"

    def problems(self) -> list[str]:
        """What is wrong with this step's definition (every problem)."""
        if isinstance(self.target, list | tuple):  # Sequence([a, b]): the rest is moot
            return [
                f"a step is an Agent, a workflow or a function, got {type(self.target).__name__}: "
                "steps are given one by one, as arguments (pass *steps), not as a list"
            ]
        found: list[str] = []
        label = f"step {self.name!r}" if self.name else "a step"
        if self.name == "" and self._named:
            default = default_name(self.target)
            found.append(
                "a step's name is empty (name=''): give it a name"
                + (f", or leave name out for the default, {default!r}" if default else "")
            )
        elif not self.name:
            found.append(
                f"{_describe(self.target)} has no name: give the agent name=..., "
                "or wrap it in Task(..., name=...)"
            )
        elif not isinstance(typing.cast(Any, self.name), str):
            found.append(
                f"a step's name must be text, got {type(self.name).__name__} {self.name!r}"
            )
            label = f"step {self.name!r}"
        elif not _NAME.fullmatch(self.name):
            found.append(
                f"step name {self.name!r} is not a name (ASCII letters, digits and _, up to 64, "
                "not starting with a digit): templates refer to it as {name}"
            )
        if self.on_error not in ("fail", "skip", "retry"):
            found.append(
                f"{label}: on_error must be 'fail', 'skip' or 'retry', not {self.on_error!r}"
            )
        if type(self.retries) is not int or self.retries < 1:
            found.append(f"{label}: retries must be an integer >= 1, got {self.retries!r}")
        timeout = self.timeout
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)  # NaN and inf failed later, naming no step
            or timeout <= 0
        ):
            found.append(f"{label}: timeout must be a number of seconds > 0, got {timeout!r}")
        delay = self.retry_delay
        if (
            isinstance(delay, bool)
            or not isinstance(delay, int | float)
            or not 0 <= delay <= MAX_STEP_DELAY  # (NaN too)
        ):
            found.append(
                f"{label}: retry_delay must be a number of seconds from 0 to "
                f"{MAX_STEP_DELAY:g}, got {delay!r}"
            )
        if self.kind == "function" and not callable(self.target):
            found.append(
                f"{label}: a step is an Agent, a workflow or a function, "
                f"got {type(self.target).__name__}"
            )
        if self.input_type is not None and not is_type(self.input_type):
            found.append(f"{label}: {not_a_type('input_type', self.input_type, of_step=True)}")
        if self.kind == "function" and callable(self.target):
            # a model it takes or gives must validate its own JSON (an agent's output
            # type and a tool's are checked when their schema is made)
            from toolfold.toolkit._pydantic import type_problems

            for tp in (self.accepts, self.output_type):
                found.extend(f"{label}: {problem}" for problem in dict.fromkeys(type_problems(tp)))
        if self.prompt is not None and self.kind != "agent":
            found.append(f"{label}: prompt= is for agent steps (a {self.kind} gets its input)")
        for part, template in (("prompt", self.prompt), ("instructions", self.instructions)):
            if template is not None and not isinstance(typing.cast(Any, template), str):
                found.append(
                    f"{label}: {part} must be text (a template), got "
                    f"{type(template).__name__} {_short(template)}"
                )
                continue
            try:
                names_in(template)
            except TemplateError as exc:
                found.append(f"{label}, in its {part}: {exc}")
        return found

    @property
    def instructions(self) -> str | None:
        """The agent's instructions, which may hold placeholders (None for other steps)."""
        return self.target.instructions if isinstance(self.target, Agent) else None

    @property
    def free_names(self) -> frozenset[str]:
        """Names of values this step's templates need from earlier steps (any depth)."""
        return self._free

    @property
    def references(self) -> tuple[tuple[str, ...], ...]:
        """The placeholders this step's templates hold for earlier outputs, as paths (any depth).

        ``{writer.title}`` gives ``("writer", "title")``; ``{input...}`` is
        the step's own input and is left out.
        """
        from toolfold.runtime._workflow import Workflow

        if isinstance(self.target, Workflow):
            return self.target.free_references
        found: list[tuple[str, ...]] = []
        for template in (self.prompt, self.instructions):
            with contextlib.suppress(TemplateError):  # reported by problems()
                found.extend(placeholders(template) if template else ())
        return tuple(path for path in found if path[0] != "input")

    def _find_free_names(self) -> frozenset[str]:
        from toolfold.runtime._workflow import Workflow

        if isinstance(self.target, Workflow):
            return self.target.free_names
        try:
            names = names_in(self.prompt) | names_in(self.instructions)
        except TemplateError:
            return frozenset()  # reported by problems()
        return names - {"input"}

    @property
    def output_type(self) -> Any:
        """The type of this step's output (Any when unknown)."""
        from toolfold.runtime._workflow import Workflow

        target = self.target
        if isinstance(target, Agent):
            return _agent_output_type(target)
        if isinstance(target, Workflow):
            return target.output_type
        return hints_of(target).get("return", Any)

    @property
    def accepts(self) -> Any:
        """The type this step takes as input (Any when it takes anything)."""
        from toolfold.runtime._workflow import Workflow

        if self.input_type is not None:
            return self.input_type
        if isinstance(self.target, Workflow):
            return self.target.input_type
        if self.kind == "function":
            return _first_parameter_type(self.target)
        return Any  # an agent takes anything: it reads it as its prompt

    def input_problems(self, source: Any, giver: str) -> list[str]:
        """Why this step cannot take an input of type ``source`` (nothing when it can).

        ``giver`` says where the input comes from, with its verb
        (``"the step before it, 'a', gives"``).
        A workflow without a declared ``input_type`` checks each of its steps
        that gets its input (every branch of a `Parallel` or a `Route`), so the
        problem names the step inside it that refuses.
        """
        from toolfold.runtime._workflow import Workflow

        if self.input_type is None and isinstance(self.target, Workflow):
            return self.target.input_problems(source, giver)
        if type_accepts(self.accepts, source):
            return []
        return [
            f"step {self.name!r} takes {type_name(self.accepts)}, but {giver} {type_name(source)}"
        ]

    @property
    def restores_as_is(self) -> bool:
        """Whether `restore` gives any plain data back as it is (an agent without an output type)."""
        target = self.target
        return isinstance(target, Agent) and target._options.output is None

    def restore(self, plain: Any) -> Any:
        """This step's output from plain data, as its declared type where known."""
        if plain is None:
            return None
        target = self.target
        if isinstance(target, Agent):
            output = target._options.output
            return output.restore(plain) if output is not None else plain
        from toolfold.runtime._workflow import Workflow

        if isinstance(target, Workflow):
            return target.restore(plain)
        return structured(plain, self.output_type)

    @property
    def max_retries(self) -> int:
        """Consecutive failures the run allows this step's tool (see `OnError`)."""
        return {"fail": 0, "retry": self.retries, "skip": _SKIP_LIMIT}[self.on_error]

    def tool(self) -> Tool[..., Any]:
        """The tool the workflow's run calls to run this step."""
        if self.kind == "function":
            function = self._made(_function_runner(self))
            return retried_step(function, self) if self.on_error == "retry" else function
        # A sub-run: a coroutine for async runs, a blocking twin for blocking ones.
        check = _resume_check(self)
        made = checks_resume(runs_sub_runs(self._made(_run_runner(self))), check)
        if self.on_error == "retry":
            retried_step(made, self)
        if self.timeout is not None:
            # A coroutine is cancelled at its deadline; a blocking twin on a thread would run on.
            return made
        twin = checks_resume(runs_sub_runs(self._made(_run_runner_sync(self))), check)
        return with_blocking_twin(made, twin)

    def _made(self, runner: Callable[..., Any]) -> Tool[..., Any]:
        from toolfold.toolkit import tool

        runner.__doc__ = (
            f"Run step {self.name}.\n\nArgs:\n    input: The input.\n    values: Named values."
        )
        made: Tool[..., Any] = tool(
            name=self.name,
            description=f"Run step {self.name}.",
            max_retries=self.max_retries,
            timeout=self.timeout,
        )(runner)
        return made


_unpickle_task = Task.__setstate__  # type: ignore[attr-defined]


def _task_setstate(self: Task, state: Any) -> None:
    """Unpickle a step, one pickled before `Task.retry_delay` existed with its default."""
    _unpickle_task(self, state)
    if not hasattr(self, "retry_delay"):  # (attrs' state of a slotted class: present names only)
        object.__setattr__(self, "retry_delay", _RETRY_DELAY)


_task_setstate.__qualname__ = "Task.__setstate__"
Task.__setstate__ = _task_setstate  # type: ignore[attr-defined]


def as_task(step: Any) -> Task:
    """``step`` as a `Task` (agents, workflows and functions get the defaults)."""
    return step if isinstance(step, Task) else Task(step)


def default_name(target: Any) -> str:
    """The default step name: the agent's or workflow's name, the function's ``__name__``."""
    if isinstance(target, Agent):
        return target.name or ""
    name = getattr(target, "name", None)
    if isinstance(name, str):
        return name
    return getattr(target, "__name__", "") or ""


def _describe(target: Any) -> str:
    if isinstance(target, Agent):
        return "an agent"
    return type(target).__name__


_HINTS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def hints_of(fn: Any) -> dict[str, Any]:
    """``fn``'s resolved annotations ({} when they cannot be resolved yet).

    Resolved once per plain function (a function step's output is typed on
    every run); a failure is not kept, so a forward reference defined later
    resolves.
    """
    if not inspect.isfunction(fn):
        # Only functions are kept: a class's hints may name the class itself
        # (``children: list[Node]``), and the entry would then keep its key alive.
        try:
            return typing.get_type_hints(fn)
        except Exception:
            return {}
    try:
        return _HINTS[fn]
    except KeyError:
        pass
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return {}
    _HINTS[fn] = hints
    return hints


def _first_parameter_name(fn: Any) -> str | None:
    params = _positional(fn)
    return params[0].name if params else None


def _positional(fn: Any) -> list[inspect.Parameter]:
    try:
        return [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        return []


def _first_parameter_type(fn: Any) -> Any:
    name = _first_parameter_name(fn)
    return Any if name is None else hints_of(fn).get(name, Any)


def structured(plain: Any, tp: Any) -> Any:
    """``plain`` structured into ``tp`` (plain data when ``tp`` is Any or does not fit)."""
    if tp is Any or tp is None or tp is object:
        return plain
    from toolfold.toolkit._converter import get_converter

    try:
        return get_converter().structure(plain, tp)
    except Exception:
        return plain


def plain_data(value: Any) -> Any:
    """A step's output as JSON-ready plain data (attrs classes, dataclasses... unstructured).

    Raises:
        TypeError: Something in it is not data the converter writes as JSON
            (an arbitrary object, bytes...), named by its type: its ``str()``
            used to be kept silently (``"<Thing object at 0x...>"``).
    """
    from toolfold.toolkit._converter import get_converter
    from toolfold.toolkit._results import NoResultError

    try:
        plain = get_converter().unstructure(value)
    except NoResultError as exc:  # a run's Response or RunState: a TypeError, as below
        # Said of the value, not of a step: a workflow's input and a merge's output come
        # here (so the advice is to use, not to return, its text).
        advice = exc.advice.removeprefix("return ")
        raise TypeError(
            f"a {exc.kind} is another run's whole record, not JSON data: use {advice}"
        ) from None
    return json.loads(json.dumps(plain, default=_not_data))


def _step_output(value: Any) -> str:
    """A function step's output ``value`` as JSON text (`plain_data`).

    Raises:
        TypeError: ``value`` is a run's whole record (`run_kind`: the step
            returned it), or no data (`plain_data`).
    """
    returned = run_kind(value)
    if returned:
        raise TypeError(f"the step {returned}")
    return json.dumps(plain_data(value))


def _not_data(value: Any) -> Any:
    raise TypeError(
        f"a {type(value).__name__} is not JSON data: return text, numbers, booleans, None, "
        "lists, dicts, or attrs classes, dataclasses, enums, datetimes... holding them"
    )


# --- the tools -----------------------------------------------------------------


def _scope(input: Any, values: Mapping[str, Any] | None) -> dict[str, Any]:
    return {**(values or {}), "input": input}


def _prompt_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


# The close errors of a workflow run's steps whose runs ended (see `_kept`):
# the workflow run sets a list here, and its steps run in copies of its context.
STEP_CLOSE_ERRORS: contextvars.ContextVar[list[SourceCloseError] | None] = contextvars.ContextVar(
    "toolfold_step_close_errors", default=None
)


def _kept(error: SourceCloseError) -> Response:
    """The response of a step's run that ended but whose tool sources failed to close.

    The step is done (nothing runs it again): its response is its result, and
    the error is kept for the workflow run, which raises it when it ends.
    Outside a workflow run, the error is raised.
    """
    kept = STEP_CLOSE_ERRORS.get()
    if kept is None or error.response is None:
        raise error
    kept.append(error)
    return error.response


def _run_runner(task: Task) -> Callable[..., Any]:
    """The tool function of an agent or workflow step: runs it as a sub-run.

    A coroutine, so a step waiting for its run holds no worker thread: the
    whole tree of a workflow runs on one event loop, and nested parallels
    cannot starve the shared workers (the agents' own sync tools still use them).
    """

    async def run_step(
        ctx: RunContext[Any], input: Any = None, values: dict[str, Any] | None = None
    ) -> SubRun:
        budget = handed(ctx, task.target, task.name)
        if isinstance(budget, SubRun):  # not started: none of the workflow's tree budget is left
            return budget
        if ctx.forward is not None:  # the workflow streams: so does the step
            target, prompt = _target_and_prompt(task, input, values)
            stream = _step_stream(target if budget is None else target._within(budget), prompt, ctx)
            try:
                async for event in stream:
                    if not isinstance(event, RunEndEvent):
                        ctx.forward(event)
            except SourceCloseError as error:
                return close_failed_result(error)
            return _step_result(stream.response, target)
        return await arun_sub_run(
            task, input, values, ctx.deps, ctx.sub_run, lambda: sub_run_id(ctx), budget
        )

    return run_step


async def arun_sub_run(
    task: Task,
    input: Any,
    values: Mapping[str, Any] | None,
    deps: Any,
    sub_run: RunState | None,
    run_id: Callable[[], str],
    budget: TokenBudget | None = None,
) -> SubRun:
    """Like `run_sub_run`, on the running event loop."""
    try:
        ended = await sub_run_async(task, input, values, deps, sub_run, run_id, budget)
    except SourceCloseError as error:
        return close_failed_result(error)
    return ended_result(ended, task.target)


def sub_run_async(
    task: Task,
    input: Any,
    values: Mapping[str, Any] | None,
    deps: Any,
    sub_run: RunState | None,
    run_id: Callable[[], str],
    budget: TokenBudget | None = None,
) -> Awaitable[Response | Ended]:
    """The run `arun_sub_run` awaits, for a caller that awaits it itself (one coroutine
    fewer per step): its end's ``.state`` gives the step's result (`ended_result`), and a
    `SourceCloseError` it raises is `close_failed_result`'s. ``budget``: the workflow's
    tree budget left for a new step (`handed`), among its run's stop conditions."""
    agent = _plain_start(task, input, values, sub_run)
    if agent is not None:  # the usual step (`_target_and_prompt`, without its call)
        if budget is not None:
            agent = agent._within(budget)
        return agent._astep_run(input, deps, run_id())
    target, prompt = _target_and_prompt(task, input, values)
    if sub_run is not None:  # answered by the caller: go on where it stopped
        return _aresumed(target, sub_run, deps)
    if budget is not None:
        target = target._within(budget)
    if isinstance(target, Agent):  # the step reads the run's state only
        return target._astep_run(prompt, deps, run_id())
    return target.arun(prompt, deps=deps, run_id=run_id())  # type: ignore[no-any-return]


async def _aresumed(target: Any, sub_run: RunState, deps: Any) -> Response:
    """``target.aresume(sub_run)``, a sub-run its caller's answers reached (see `continuing`)."""
    with continuing(sub_run):
        response: Response = await target.aresume(sub_run, deps=deps)
    return response


def ended_result(ended: Response | Ended, target: Any = None) -> SubRun:
    """The result of a step whose run ended with ``ended`` (a response, or an agent run's end):
    ``ended.state`` and its `step_text` (``target``: the step's agent, see `step_result`)."""
    return _state_result(ended.state, target)


def close_failed_result(error: SourceCloseError) -> SubRun:
    """The result of a step whose run ended but failed to close its sources (see `_kept`)."""
    return _step_result(_kept(error))


def _run_runner_sync(task: Task) -> Callable[..., Any]:
    """The blocking twin of `_run_runner`: a blocking run calls it in its own thread.

    A blocking workflow run then needs no event loop for steps that run one
    at a time (sub-runs side by side still run as coroutines of one loop,
    see `run_calls_sync`).
    """

    def run_step(
        ctx: RunContext[Any], input: Any = None, values: dict[str, Any] | None = None
    ) -> SubRun:
        budget = handed(ctx, task.target, task.name)
        if isinstance(budget, SubRun):  # not started: none of the workflow's tree budget is left
            return budget
        if ctx.forward is not None:
            target, prompt = _target_and_prompt(task, input, values)
            stream = _step_stream(target if budget is None else target._within(budget), prompt, ctx)
            try:
                for event in stream:
                    if not isinstance(event, RunEndEvent):
                        ctx.forward(event)
            except SourceCloseError as error:
                return close_failed_result(error)
            return _step_result(stream.response, target)
        return run_sub_run(
            task, input, values, ctx.deps, ctx.sub_run, lambda: sub_run_id(ctx), budget
        )

    return run_step


def run_sub_run(
    task: Task,
    input: Any,
    values: Mapping[str, Any] | None,
    deps: Any,
    sub_run: RunState | None,
    run_id: Callable[[], str],
    budget: TokenBudget | None = None,
) -> SubRun:
    """An agent or workflow step's run from blocking code (not streamed): a new one, or
    ``sub_run`` (suspended, answered) resumed; ``run_id`` gives a new run's id, ``budget``
    the tree budget a new one gets (see `sub_run_async`)."""
    try:
        state = step_state(task, input, values, deps, sub_run, run_id, budget)
    except SourceCloseError as error:
        return close_failed_result(error)
    return _state_result(state, task.target)


def step_state(
    task: Task,
    input: Any,
    values: Mapping[str, Any] | None,
    deps: Any,
    sub_run: RunState | None,
    run_id: Callable[[], str],
    budget: TokenBudget | None = None,
) -> RunState:
    """The end state of `run_sub_run`'s run, for a caller that reads it itself (no
    `SubRun` made to be taken apart): its `step_text` is the step's result, and a
    `SourceCloseError` it raises is `close_failed_result`'s."""
    agent = _plain_start(task, input, values, sub_run)
    if agent is not None:  # the usual step (`_target_and_prompt`, without its call)
        if budget is not None:
            agent = agent._within(budget)
        return agent._step_state(input, deps, run_id())
    target, prompt = _target_and_prompt(task, input, values)
    if sub_run is None and budget is not None:
        target = target._within(budget)
    if sub_run is not None:  # answered by the caller: go on where it stopped
        with continuing(sub_run):
            response: Response = target.resume(sub_run, deps=deps)
    elif isinstance(target, Agent):  # the step reads the run's state only
        return target._step_state(prompt, deps, run_id())
    else:
        response = target.run(prompt, deps=deps, run_id=run_id())
    return response.state


def _plain_start(
    task: Task, input: Any, values: Mapping[str, Any] | None, sub_run: RunState | None
) -> Agent | None:
    """The agent a new step runs as it is, its text input its prompt; else None."""
    if sub_run is None and type(input) is str and not values:
        return task._plain_agent
    return None


def _target_and_prompt(task: Task, input: Any, values: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """The step's target (placeholders filled) and what it is run with."""
    agent = task._plain_agent
    if agent is not None and not values:
        # (`_bound` and a prompt without placeholders; text is its own prompt)
        return agent, input if type(input) is str else _prompt_text(input)
    scope = _scope(input, values)
    target = _bound(task, scope)
    if isinstance(target, Agent):
        return target, render(task.prompt, scope) if task.prompt else _prompt_text(input)
    return target, target.envelope(input, values or {})


def _resume_check(task: Task) -> Callable[[ToolCallPart, RunState], None]:
    """The check a resume makes of the step's suspended sub-run first (see `checks_resume`)."""

    def check(call: ToolCallPart, sub_run: RunState) -> None:
        arguments = thaw(call.arguments) if call.arguments is not None else None
        if not isinstance(arguments, dict):
            return  # (not a step's call as the planner makes it: the resume says what it is)
        input, values = arguments.get("input"), arguments.get("values")
        try:  # the target the resume runs (`_target_and_prompt`)
            agent = task._plain_agent
            target = (
                agent if agent is not None and not values else _bound(task, _scope(input, values))
            )
        except TemplateError:
            return  # the resumed step fails as it would have
        target._check_resume(sub_run)

    return check


def _step_stream(target: Any, prompt: Any, ctx: RunContext[Any]) -> Any:
    if ctx.sub_run is not None:
        with continuing(ctx.sub_run):
            return target.resume_stream(ctx.sub_run, deps=ctx.deps)
    return target.stream(prompt, deps=ctx.deps, run_id=sub_run_id(ctx))


def _step_result(response: Response, target: Any = None) -> SubRun:
    return _state_result(response.state, target)


def _state_result(state: RunState, target: Any = None) -> SubRun:
    text, is_error = step_text(state, target)
    # `SubRun(...)` without its ``__new__``'s frame.
    return new_tuple(SubRun, (state, text, is_error))


def step_text(state: RunState, target: Any = None) -> tuple[str, bool]:
    """`step_result`, without its look at how a run that answered stopped."""
    if state.finish_reason in STOP_REASONS:
        return step_result(state, target)
    output = state.output
    # (`json_text`, without its call for text: most steps answer text)
    return encode_basestring_ascii(output) if type(output) is str else json_text(output), False


def step_result(
    state: RunState, target: Any = None, names_handed: Callable[[], bool] | None = None
) -> tuple[str, bool]:
    """What a step passes on from its finished run, as (text, is_error).

    The text is JSON: the run's output, or the result of the call that
    stopped it (`tool_called`). A run stopped at a limit (``max_steps``,
    ``token_budget``) or by a ``stop_when`` callable has no output (it would
    pass ``null``): the step failed, with an error saying why, and its
    ``on_error`` applies; so it does when the `tool_called` call failed.
    Durable runs (Temporal) say the same, except that a run stopped by a
    ``stop_when`` callable says ``(stop_condition)`` there, not the callable's
    name: the text is computed in the workflow and becomes part of the
    history the model calls recorded, so naming the callable would change how
    recorded histories replay. ``target``: the step's agent, whose
    ``stop_when`` callable the error names (see `stopped_by`).

    A step's run that its agent handed to another agent is named as that
    run, as an agent tool's is (`handed_run`): ``Error: the run of agent
    'support', handed to agent 'refunds', stopped at ...``, unless
    ``names_handed`` (asked only for such a run) says not to: results
    recorded before said ``the step's run`` (a durable run's replay).
    """
    who = "the step's run"
    handed = handed_to(state)
    if handed is not None and (names_handed is None or names_handed()):
        who = handed_run(f"agent {handed[1]!r}", handed[0]) + ","
    answer = stop_answer(state, who, stopped_by(target, state))
    if answer is None:
        return json_text(state.output), False
    if isinstance(answer, str):  # stopped without answering
        return answer, True
    if answer.is_error:
        return (
            f"Error: the call to {answer.tool_name!r} that stopped the step's run failed: "
            f"{answer.content}",
            True,
        )
    return json_text(answer.content), False


def _bound(task: Task, scope: Mapping[str, Any]) -> Any:
    """The step's target with its instructions' placeholders filled."""
    target = task.target
    if not isinstance(target, Agent):
        return target
    instructions = target.instructions
    # Text without braces has nothing to fill (and no "{{" to unescape).
    if instructions and ("{" in instructions or "}" in instructions):
        text = render(instructions, scope)
        return target if text == instructions else target.evolve(instructions=text)
    return target


def _function_runner(task: Task) -> Callable[..., Any]:
    """The tool function of a function step: its input structured, its output as JSON."""
    fn = task.target
    tp = task.accepts
    who, parameter = f"step {task.name!r}", _first_parameter_name(fn)

    def typed(input: Any) -> Any:
        return strict_value(input, tp, who, parameter)

    # an object whose __call__ is async is a coroutine function too
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):

        async def run_async_step(input: Any = None, values: dict[str, Any] | None = None) -> str:
            return _step_output(await fn(typed(input)))

        return run_async_step

    def run_step(input: Any = None, values: dict[str, Any] | None = None) -> str:
        return _step_output(fn(typed(input)))

    return run_step


# --- types ---------------------------------------------------------------------


def strict_value(plain: Any, tp: Any, who: str, parameter: str | None) -> Any:
    """``plain`` (a step's output, as plain data) structured into ``tp`` strictly.

    The toolkit's one converter does it: text is never turned into a number,
    nor a number into text, and an object with keys the class lacks is refused.

    Raises:
        TypeError: It is not a ``tp``, naming ``who`` takes it (and its
            ``parameter``), the type expected, the value got and each problem.
    """
    if tp is Any or tp is None or tp is object:
        return plain
    from toolfold.toolkit._converter import get_converter
    from toolfold.toolkit._problems import render, structure_problems

    try:
        return get_converter().structure(plain, tp)
    except Exception as exc:
        # what is wrong inside the value (a field, an extra key): the top level is said below
        inside = [p for p in structure_problems(exc, (), tp) if p[0] or tp not in _PRIMITIVE]
        details = f" ({'; '.join(render(inside))})" if inside else ""
        where = f"{who} (parameter {parameter!r})" if parameter else who
        raise TypeError(
            f"{where} takes {type_name(tp)}, but got {type(plain).__name__} {_short(plain)}"
            + details
        ) from None


_PRIMITIVE = (str, int, float, bool)


def field_problems(task: Task, known: typing.Mapping[str, Any]) -> list[str]:
    """The placeholders of ``task`` naming a field that an earlier step's output type lacks.

    ``known``: the output type of each earlier step whose value the task may
    read. Only definite misses are problems: a type whose fields cannot be
    known (Any, a mapping, a union) is checked when the step runs.
    """
    found: list[str] = []
    for path in task.references:
        if len(path) < 2 or path[0] not in known:
            continue
        tp = known[path[0]]
        for depth, key in enumerate(path[1:], start=1):
            fields = fields_of(tp)
            if fields is None:
                break
            if key not in fields:
                where = f"step {path[0]!r} gives" if depth == 1 else f"{'.'.join(path[:depth])} is"
                has = f"fields: {', '.join(fields)}" if fields else "it has no fields"
                found.append(
                    f"step {task.name!r} refers to {{{'.'.join(path)}}}, but {where} "
                    f"{type_name(tp)}, which has no field {key!r} ({has})"
                )
                break
            tp = fields[key]
        if len(found) > 20:
            break
    return found


_NO_FIELDS = (str, bytes, int, float, bool, list, tuple, set, frozenset)


def fields_of(tp: Any) -> dict[str, Any] | None:
    """The fields of a step output of type ``tp`` with their types; None when they cannot be known.

    Attrs classes, dataclasses, TypedDicts and pydantic models have their fields; text,
    numbers, lists and literals have none; anything else (Any, a mapping, a
    union) is unknown until the value exists.
    """
    import dataclasses

    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return fields_of(typing.get_args(tp)[0])
    if origin is Literal or (origin or tp) in _NO_FIELDS:
        return {}
    if not isinstance(tp, type):
        return None
    from toolfold.toolkit._pydantic import is_model, model_fields

    if is_model(tp):  # by the keys of its JSON, which placeholders read
        return model_fields(tp)
    if attrs.has(tp):
        names = [f.name for f in attrs.fields(tp)]
    elif dataclasses.is_dataclass(tp):
        names = [f.name for f in dataclasses.fields(tp)]
    elif typing.is_typeddict(tp):
        names = list(tp.__annotations__)  # resolved below, leniently (forward references)
    else:
        return None
    hints = hints_of(tp)
    return {name: hints.get(name, Any) for name in names}


def _short(value: Any) -> str:
    return clip(repr(value), 60)


def is_type(value: Any) -> bool:
    """Whether ``value`` is a type annotation a step can take (a class, ``list[str]``, a
    ``Union``, ``Literal[...]``, ``Annotated[...]``, `Any`, a ``NewType``...), not a value."""
    return (
        isinstance(value, type)
        or value is Any
        or typing.get_origin(value) is not None
        or isinstance(value, typing.TypeVar)
        or hasattr(value, "__supertype__")  # a NewType
        or type(value).__name__ == "TypeAliasType"  # ``type X = ...`` (3.12)
        or any(value is form for form in _SPECIAL_TYPES)
    )


def _special_types() -> tuple[Any, ...]:
    """Special forms that are types of values (the structurer takes them): not ClassVar, Never...

    LiteralString is Python 3.11's, and typing_extensions' on 3.10 (checked by
    identity: special forms are not hashable).
    """
    forms = [getattr(typing, "LiteralString", None)]
    try:
        import typing_extensions
    except ImportError:  # (not installed: only typing's spelling exists)
        pass
    else:
        forms.append(getattr(typing_extensions, "LiteralString", None))
    return tuple(form for form in forms if form is not None)


_SPECIAL_TYPES = _special_types()


def not_a_type(what: str, value: Any, *, by_name: bool = True, of_step: bool = False) -> str:
    """The problem of ``what`` given ``value``, which `is_type` refuses.

    A type's name (``"int"``, a ``ForwardRef``) is refused saying so; ``of_step``
    (a step's input type) adds that it used to be ignored, the step taking any
    input. ``by_name=False``: ``value`` was found by its import path (an agent
    file's), so text is a value.
    """
    if isinstance(value, typing.ForwardRef) or (by_name and isinstance(value, str)):
        name = value if isinstance(value, str) else value.__forward_arg__
        before = " (a name was ignored before, the step taking any input)" if of_step else ""
        return (
            f"{what} must be a type, got its name {name!r}: give the type itself, not its "
            f"name{before}"
        )
    return (
        f"{what} must be a type (str, int, an attrs class or dataclass, list[str]...), "
        f"got {type(value).__name__} {_short(value)}"
    )


def _agent_output_type(agent: Agent) -> Any:
    """What an agent step gives: its output type (text without one), or Any when the run may
    end with an agent it hands off to that gives another type (which one answers is known
    only when it runs; the step's output is then checked as the next step takes it)."""
    own = agent.output_type if agent.output_type is not None else str
    if not agent.handoffs:
        return own
    try:
        graph = agent.handoff_graph()
    except UsageError:  # (the run says what is wrong with its handoffs)
        return Any
    for other in graph.values():
        given = other.output_type if other.output_type is not None else str
        if repr(given) != repr(own):
            return Any
    return own


def type_accepts(target: Any, source: Any) -> bool:
    """Whether a step declared to take ``target`` accepts an output of type ``source``.

    Lenient where it cannot know (Any, generics' arguments, forward references):
    only a definite mismatch is refused.
    """
    if target is Any or target is object or source is Any or target is None:
        return True
    origin_t, origin_s = typing.get_origin(target), typing.get_origin(source)
    if origin_s in (typing.Union, _union_type()):
        return all(type_accepts(target, member) for member in typing.get_args(source))
    if origin_t in (typing.Union, _union_type()):
        return any(type_accepts(member, source) for member in typing.get_args(target))
    if origin_s is Literal:
        values = typing.get_args(source)
        if origin_t is Literal:
            return set(values) <= set(typing.get_args(target))
        return all(type_accepts(target, type(v)) for v in values)
    if origin_t is Literal:
        return False
    base_t = origin_t or target
    base_s = origin_s or source
    # A TypedDict is a dict at run time, and issubclass() raises for one: compare
    # it as a dict (its fields are checked on the value when the step runs).
    base_t = dict if typing.is_typeddict(base_t) else base_t
    base_s = dict if typing.is_typeddict(base_s) else base_s
    if isinstance(base_t, type) and isinstance(base_s, type):
        if base_t is float and base_s is int:
            return True
        return issubclass(base_s, base_t)
    return True


def _union_type() -> Any:
    import types

    return types.UnionType


def type_name(tp: Any) -> str:
    """A short readable name for a type."""
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__name__
    return repr(tp).replace("typing.", "")
