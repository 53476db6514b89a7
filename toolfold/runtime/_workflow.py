"""Workflows: `Sequence`, `Parallel`, `Route` and `Loop`, frozen specs over agents.

A workflow composes agents, functions and other workflows. It runs with the
same ``run / arun / stream / resume`` as an `Agent`, on the same loop and the
same state: each step is a tool call of the workflow's run, decided by a
planner in the model's seat (see `_planner`), so the whole tree serializes,
resumes in another process and replays.
"""

from __future__ import annotations

import itertools
import typing
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Literal

import attrs

from toolfold._errors import RunError, ToolRetriesExceededError, UsageError, WorkflowDefinitionError
from toolfold.runtime._agent import Agent, Observer, StepObserver
from toolfold.runtime._planner import (
    Call,
    Final,
    Plan,
    Planner,
    envelope,
    read_plan,
    workflow_output,
)
from toolfold.runtime._response import Response, RunEndEvent, RunStreamEvent
from toolfold.runtime._resume import resumed
from toolfold.runtime._run import (
    Approval,
    RunOptions,
    RunStream,
    make_options,
    run_async,
    run_sync,
    start,
)
from toolfold.runtime._task import Task, as_task, plain_data, structured, type_accepts, type_name
from toolfold.runtime.core._messages import Message
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._stream import StreamEvent
from toolfold.runtime.drive._executor import DEFAULT_MAX_CONCURRENCY
from toolfold.runtime.drive._loop import Live

_MAX_DECISIONS = 1_000_000  # the planner decides when to stop; this only bounds a runaway
_PLANNER_EVENTS: tuple[type[Any], ...] = typing.get_args(StreamEvent)  # the planner "model"'s own


@attrs.frozen
class Input:
    """A workflow's input with the named values it inherits (what a step passes down)."""

    text: str


class Workflow:
    """What every workflow kind shares: running, resuming, streaming, its types.

    Subclasses define their steps (`tasks`) and `plan`, the decision of what
    runs next given what has run.
    """

    __slots__ = ()
    name: str
    _tasks: tuple[Task, ...]
    _options: RunOptions
    _free: frozenset[str]

    # --- the definition -------------------------------------------------------

    @property
    def tasks(self) -> tuple[Task, ...]:
        """The workflow's own steps, as tasks (nested workflows are one task each)."""
        return self._tasks

    def to_mermaid(self) -> str:
        """This workflow as a Mermaid flowchart: its steps, their shape, and the agents inside."""
        from toolfold.runtime._mermaid import to_mermaid

        return to_mermaid(self)

    def to_dict(self) -> dict[str, Any]:
        """This workflow, and every agent and workflow it refers to, as an agent file's document.

        ``toolfold.files.from_dict(workflow.to_dict())`` builds it again.
        Functions (steps, ``merge``, ``until``, a router) are written as import
        paths.

        Raises:
            UsageError: A function has no import path (a lambda, a local function).
        """
        from toolfold.runtime._document import spec_to_dict

        return spec_to_dict(self)

    @property
    def label(self) -> str:
        """The kind and name, for messages."""
        return f"{type(self).__name__} {self.name!r}"

    def _build(self, problems: list[str], max_concurrency: int = DEFAULT_MAX_CONCURRENCY) -> None:
        """Check the definition (raising every problem at once) and resolve the run options."""
        for task in self._tasks:
            problems.extend(task.problems())
        seen: dict[str, int] = {}
        for task in self._tasks:
            seen[task.name] = seen.get(task.name, 0) + 1
        problems.extend(
            f"step name {name!r} is used {count} times: names must be unique within a "
            "workflow; wrap one in Task(..., name=...)"
            for name, count in seen.items()
            if count > 1 and name
        )
        if "input" in seen:
            problems.append("step name 'input' is reserved: {input} is a step's own input")
        if problems:
            raise WorkflowDefinitionError(self.label, problems)
        object.__setattr__(self, "_free", self._free_names())
        options = make_options(
            Planner(self),
            tools=[task.tool() for task in self._tasks],
            max_steps=_MAX_DECISIONS,
            max_concurrency=max_concurrency,
        )
        output = workflow_output(self)
        config = attrs.evolve(options.config, output=output.spec)
        object.__setattr__(
            self, "_options", attrs.evolve(options, output=output, config=config, name=self.name)
        )

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:  # pragma: no cover
        """The constructor's arguments that build this workflow again."""
        raise NotImplementedError

    def __reduce__(self) -> tuple[Any, ...]:
        # A workflow travels (to another process) as its spec: the resolved
        # options hold the planner and the step tools, rebuilt where it lands.
        args, kwargs = self._arguments()
        return (_rebuild, (type(self), args, kwargs))

    def plan(self, plan: Plan) -> list[Call] | Final:  # pragma: no cover - abstract
        """The step calls to make next, or the final output."""
        raise NotImplementedError

    @property
    def free_names(self) -> frozenset[str]:
        """Names the steps' templates need that no step of this workflow defines before them."""
        return self._free

    def _free_names(self) -> frozenset[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def output_type(self) -> Any:
        """The type of the workflow's output (Any when it cannot be known)."""
        raise NotImplementedError  # pragma: no cover - abstract

    @property
    def input_type(self) -> Any:
        """The type the workflow takes (Any when it takes anything)."""
        return self._tasks[0].accepts

    def restore(self, plain: Any) -> Any:
        """The output as its declared type where known (plain data otherwise)."""
        return structured(plain, self.output_type)

    def envelope(self, input: Any, values: Mapping[str, Any]) -> Input:
        """The input of a nested run of this workflow (used by the enclosing one)."""
        return Input(envelope(input, values))

    # --- running -----------------------------------------------------------------

    def _start(self, prompt: Any, run_id: str | None) -> RunState:
        if isinstance(prompt, Input):
            text = prompt.text
        else:
            free = sorted(self.free_names)
            if free:
                raise WorkflowDefinitionError(
                    self.label,
                    [f"a template refers to {{{n}}}, which no earlier step defines" for n in free],
                )
            text = envelope(_input_value(prompt), {})
        return start(self._options, (Message.user(text),), run_id, agent=self.name)

    def _begin(
        self,
        prompt: Any,
        run_id: str | None,
        deps: Any,
        on_event: Observer | None,
        on_step: StepObserver | None,
    ) -> tuple[Live, RunState]:
        state = self._start(prompt, run_id)
        live = self._options.live(
            deps=deps, on_event=on_event, on_step=on_step, announce_start=True
        )
        return live, state

    def run(
        self,
        prompt: Any,
        *,
        deps: Any = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
        run_id: str | None = None,
    ) -> WorkflowResponse:
        """Run the workflow until it ends or waits for the caller (blocking).

        Args:
            prompt: The first step's input: text, or plain data (a dict, a
                list, an attrs instance...) that steps receive as JSON.
            deps: Anything tools need, handed to every step's tools.
            on_event: Called with every event of the workflow's own run.
            on_step: Called with every completed round of step calls.
            run_id: The run's id (random by default); step runs get
                ``<run id>/<step call id>``.

        Raises:
            RunError: A step failed with ``on_error="fail"`` (or used up its
                retries); ``.state`` is the workflow's state, error included.
        """
        state = self._start(prompt, run_id)
        live = self._options.live(
            deps=deps, on_event=on_event, on_step=on_step, announce_start=True
        )
        with _step_errors(self):
            return _wrapped(run_sync(live, state))

    async def arun(
        self,
        prompt: Any,
        *,
        deps: Any = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
        run_id: str | None = None,
    ) -> WorkflowResponse:
        """Like `run`, on the running event loop (agent steps run on worker threads)."""
        state = self._start(prompt, run_id)
        live = self._options.live(
            deps=deps, on_event=on_event, on_step=on_step, announce_start=True
        )
        with _step_errors(self):
            return _wrapped(await run_async(live, state))

    def stream(
        self,
        prompt: Any,
        *,
        deps: Any = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
        run_id: str | None = None,
    ) -> WorkflowStream:
        """Run with streaming: each step's events arrive as `SubRunEvent`, tagged with its path.

        The workflow's own events are `ToolCallEvent` (a step starts),
        `ToolResultEvent` (it ended), `StepStartEvent` / `StepEndEvent` (a
        round of step calls) and last a `RunEndEvent` with the response.
        """
        state = self._start(prompt, run_id)
        live = self._options.live(
            deps=deps, on_event=on_event, on_step=on_step, announce_start=True
        )
        return WorkflowStream(RunStream(live, state), self)

    def _resumed(self, state: RunState, answers: dict[str, Any]) -> tuple[Live, RunState]:
        return resumed(state, self._options, message=None, max_steps=None, **answers)

    def resume(
        self,
        state: RunState,
        *,
        tool_results: Mapping[str, Any] | None = None,
        approvals: Mapping[str, Approval] | None = None,
        deps: Any = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
    ) -> WorkflowResponse:
        """Continue a workflow that waits for approvals or tool results (at any depth).

        Answers are keyed by the id of the call that waits, however deep in
        the tree; nothing that already ran runs again.

        Args:
            state: ``response.state``, an error's ``.state``, a state loaded
                with ``RunState.from_json``, or a `fork` of one.
            tool_results: Results for calls returned to the caller, by call id.
            approvals: By call id: True, False or `Denied(reason)`.
            deps: Dependencies for the tools' `RunContext`.
            on_event: Called with every event of the workflow's own run.
            on_step: Called with every completed round of step calls.
        """
        live, state = self._resumed(
            state, _answers(tool_results, approvals, deps, on_event, on_step)
        )
        with _step_errors(self):
            return _wrapped(run_sync(live, state))

    async def aresume(
        self,
        state: RunState,
        *,
        tool_results: Mapping[str, Any] | None = None,
        approvals: Mapping[str, Approval] | None = None,
        deps: Any = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
    ) -> WorkflowResponse:
        """Like `resume`, on the running event loop."""
        live, state = self._resumed(
            state, _answers(tool_results, approvals, deps, on_event, on_step)
        )
        with _step_errors(self):
            return _wrapped(await run_async(live, state))

    def resume_stream(
        self,
        state: RunState,
        *,
        tool_results: Mapping[str, Any] | None = None,
        approvals: Mapping[str, Approval] | None = None,
        deps: Any = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
    ) -> WorkflowStream:
        """Like `resume`, streaming (see `stream`)."""
        live, state = self._resumed(
            state, _answers(tool_results, approvals, deps, on_event, on_step)
        )
        return WorkflowStream(RunStream(live, state), self)


def _rebuild(kind: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A workflow rebuilt from its pickled spec (see `Workflow.__reduce__`)."""
    return kind(*args, **kwargs)


def _answers(
    tool_results: Mapping[str, Any] | None,
    approvals: Mapping[str, Approval] | None,
    deps: Any,
    on_event: Observer | None,
    on_step: StepObserver | None,
) -> dict[str, Any]:
    return {
        "tool_results": tool_results,
        "approvals": approvals,
        "deps": deps,
        "on_event": on_event,
        "on_step": on_step,
    }


def _input_value(prompt: Any) -> Any:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Message):
        return prompt.text
    return plain_data(prompt)


class _step_errors:
    """A step that failed the workflow is reported as the step's failure, not a tool's."""

    def __init__(self, workflow: Workflow) -> None:
        self._workflow = workflow

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, ToolRetriesExceededError) and exc.state is not None:
            failure = exc.state.error
            step = failure.tool_name if failure is not None else "?"
            last = failure.message.partition("last error: ")[2] if failure is not None else ""
            raise RunError(
                f"step {step!r} of {self._workflow.label} failed: {last or exc}; the error's "
                "state is the workflow's, with the failure recorded",
                exc.state,
            ) from exc


@attrs.frozen(repr=False)  # Response's own repr
class WorkflowResponse(Response):
    """The result of a workflow run: a `Response` with each step's output and error.

    ``output`` is the workflow's output (typed where the last step's type is
    known), ``text`` the same as text (JSON unless it is text).
    """

    @property
    def text(self) -> str:
        """The output as text (JSON unless it is text); "" while suspended."""
        import json

        if not self.state.is_done or self.state.phase == "failed":
            return ""
        plain = self.state.output
        return plain if isinstance(plain, str) else json.dumps(plain, default=str)

    @property
    def outputs(self) -> Mapping[str, Any]:
        """Each finished step's output as plain data, by step name (the latest for a loop)."""
        found: dict[str, Any] = {}
        for attempt in read_plan(self.state.messages).attempts:
            if attempt.ok:
                found[attempt.name] = attempt.value
        return found

    @property
    def errors(self) -> Mapping[str, str]:
        """The error of each step whose last attempt failed (skipped, or failing the run)."""
        found: dict[str, str] = {}
        for attempt in read_plan(self.state.messages).attempts:
            if attempt.ok:
                found.pop(attempt.name, None)
            else:
                found[attempt.name] = attempt.value
        return found


def _wrapped(response: Response) -> WorkflowResponse:
    return WorkflowResponse(response.state, response.output)


class WorkflowStream:
    """A workflow run as a stream of events; iterate it with ``for`` or ``async for``."""

    def __init__(self, stream: RunStream, workflow: Workflow) -> None:
        self._stream = stream
        self._workflow = workflow
        self._response: WorkflowResponse | None = None

    @property
    def response(self) -> WorkflowResponse:
        """The response, once the stream is exhausted."""
        if self._response is None:
            raise UsageError("the stream has not finished: iterate it to the end first")
        return self._response

    def _shown(self, event: RunStreamEvent) -> RunStreamEvent | None:
        if isinstance(event, _PLANNER_EVENTS):
            return None  # the planner's own "model" output: the steps' events say it all
        if isinstance(event, RunEndEvent):
            self._response = _wrapped(event.response)
            return RunEndEvent(self._response)
        return event

    def __iter__(self) -> Iterator[RunStreamEvent]:
        with _step_errors(self._workflow):
            for event in self._stream:
                shown = self._shown(event)
                if shown is not None:
                    yield shown

    async def __aiter__(self) -> AsyncIterator[RunStreamEvent]:
        with _step_errors(self._workflow):
            async for event in self._stream:
                shown = self._shown(event)
                if shown is not None:
                    yield shown


# --- the four kinds -------------------------------------------------------------


def _reference_problems(task: Task, forbidden: Mapping[str, str], problems: list[str]) -> None:
    for name in sorted(task.free_names & set(forbidden)):
        problems.append(f"step {task.name!r} refers to {{{name}}}, {forbidden[name]}")


@attrs.frozen(init=False)
class Sequence(Workflow):
    """Steps one after another: each step's output is the next step's input.

    Example:
        >>> pipeline = Sequence(researcher, writer, Task(editor, prompt="Edit: {writer}"))
        >>> pipeline.run("the history of tea").text

    Attributes:
        steps: The steps, as tasks.
        name: The workflow's name (its step name inside another workflow).
    """

    steps: tuple[Task, ...]
    name: str
    _tasks: tuple[Task, ...] = attrs.field(init=False, eq=False, repr=False, hash=False)
    _options: RunOptions = attrs.field(init=False, eq=False, repr=False, hash=False)
    _free: frozenset[str] = attrs.field(init=False, eq=False, repr=False, hash=False)

    def __init__(self, *steps: Any, name: str = "sequence") -> None:
        tasks = tuple(as_task(s) for s in steps)
        self.__attrs_init__(steps=tasks, name=name)
        object.__setattr__(self, "_tasks", tasks)
        problems: list[str] = [] if tasks else ["a Sequence needs at least one step"]
        names = [t.name for t in tasks]
        for index, task in enumerate(tasks):
            later = dict.fromkeys(names[index + 1 :], "which runs after it")
            _reference_problems(task, {**later, task.name: "itself"}, problems)
        for before, after in itertools.pairwise(tasks):
            if not type_accepts(after.accepts, before.output_type):
                problems.append(
                    f"step {after.name!r} takes {type_name(after.accepts)}, but the step "
                    f"before it, {before.name!r}, gives {type_name(before.output_type)}"
                )
        self._build(problems)

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return self.steps, {"name": self.name}

    def _free_names(self) -> frozenset[str]:
        """Names the steps need that no earlier step of this sequence defines."""
        free: set[str] = set()
        defined: set[str] = set()
        for task in self._tasks:
            free |= task.free_names - defined
            defined.add(task.name)
        return frozenset(free)

    @property
    def output_type(self) -> Any:
        """The last step's output type."""
        return self._tasks[-1].output_type

    def restore(self, plain: Any) -> Any:
        """The output as the last step's type (plain data when it does not fit)."""
        try:
            return self._tasks[-1].restore(plain)
        except Exception:
            return plain

    def plan(self, plan: Plan) -> list[Call] | Final:
        """The next step, or the last output."""
        value = plan.input
        values = dict(plan.values)
        for task in self._tasks:
            status = plan.status(task, task.name)
            if isinstance(status, str):
                return [plan.call(task, status, value, values)]
            if not status.skipped:
                values[task.name] = value = status.value
        return Final(value)


@attrs.frozen(init=False)
class Parallel(Workflow):
    """Steps that run at the same time on the same input; their outputs are merged.

    Results are committed in declaration order whatever order they finish in,
    so a replay reaches the same state.

    Example:
        >>> views = Parallel(optimist, pessimist, merge=lambda out: " / ".join(out.values()))

    Attributes:
        steps: The steps, as tasks.
        merge: A function of the mapping step name -> output (None for a
            skipped step) whose result is the workflow's output; by default
            the mapping itself.
        max_concurrency: Steps that may run at once.
        name: The workflow's name.
    """

    steps: tuple[Task, ...]
    merge: Callable[[dict[str, Any]], Any] | None
    max_concurrency: int
    name: str
    _tasks: tuple[Task, ...] = attrs.field(init=False, eq=False, repr=False, hash=False)
    _options: RunOptions = attrs.field(init=False, eq=False, repr=False, hash=False)
    _free: frozenset[str] = attrs.field(init=False, eq=False, repr=False, hash=False)

    def __init__(
        self,
        *steps: Any,
        merge: Callable[[dict[str, Any]], Any] | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        name: str = "parallel",
    ) -> None:
        tasks = tuple(as_task(s) for s in steps)
        self.__attrs_init__(steps=tasks, merge=merge, max_concurrency=max_concurrency, name=name)
        object.__setattr__(self, "_tasks", tasks)
        problems: list[str] = [] if tasks else ["a Parallel needs at least one step"]
        names = {t.name for t in tasks}
        for task in tasks:
            _reference_problems(task, dict.fromkeys(names, "which runs at the same time"), problems)
        if merge is not None and not callable(typing.cast(Any, merge)):
            problems.append(f"merge must be a function, got {type(merge).__name__}")
        if type(max_concurrency) is not int or max_concurrency < 1:
            problems.append(f"max_concurrency must be an integer >= 1, got {max_concurrency!r}")
        self._build(problems, max_concurrency if isinstance(max_concurrency, int) else 1)

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        options = {"merge": self.merge, "max_concurrency": self.max_concurrency, "name": self.name}
        return self.steps, options

    def _free_names(self) -> frozenset[str]:
        """Names any step needs."""
        return frozenset().union(*(t.free_names for t in self._tasks))

    @property
    def input_type(self) -> Any:
        """Any: every step gets the same input (each checks its own)."""
        return Any

    @property
    def output_type(self) -> Any:
        """The merge's return type, or ``dict[str, Any]``."""
        if self.merge is None:
            return dict[str, Any]
        try:
            return typing.get_type_hints(self.merge).get("return", Any)
        except Exception:
            return Any

    def restore(self, plain: Any) -> Any:
        """The merged output; by default each step's output as its type."""
        if self.merge is None and isinstance(plain, dict):
            return {t.name: _restored(t, plain.get(t.name)) for t in self._tasks}
        return structured(plain, self.output_type)

    def plan(self, plan: Plan) -> list[Call] | Final:
        """Every step not yet done (retries included), or the merged output."""
        calls: list[Call] = []
        outputs: dict[str, Any] = {}
        for task in self._tasks:
            status = plan.status(task, task.name)
            if isinstance(status, str):
                calls.append(plan.call(task, status, plan.input, plan.values))
            else:
                outputs[task.name] = status.value
        if calls:
            return calls
        if self.merge is None:
            return Final(outputs)
        typed = {t.name: _restored(t, outputs[t.name]) for t in self._tasks}
        return Final(plain_data(self.merge(typed)))


def _restored(task: Task, plain: Any) -> Any:
    try:
        return task.restore(plain)
    except Exception:
        return plain


@attrs.frozen(init=False)
class Route(Workflow):
    """One branch, chosen by a router: an agent answering a label, or a function.

    Example:
        >>> triage = Agent(model, name="triage", output_type=Literal["billing", "tech"])
        >>> desk = Route(triage, {"billing": billing, "tech": tech})

    Attributes:
        router: An agent (or workflow) whose output is a label, typically with
            ``output_type=Literal[...]`` of the labels; or a function of the
            input returning a label (called once per run; keep it
            deterministic).
        branches: The step to run for each label.
        default: The step for any other label (None: another label fails
            the workflow).
        name: The workflow's name.
    """

    router: Any
    branches: Mapping[str, Task]
    default: Task | None
    name: str
    _tasks: tuple[Task, ...] = attrs.field(init=False, eq=False, repr=False, hash=False)
    _options: RunOptions = attrs.field(init=False, eq=False, repr=False, hash=False)
    _free: frozenset[str] = attrs.field(init=False, eq=False, repr=False, hash=False)

    def __init__(
        self,
        router: Any,
        branches: Mapping[str, Any],
        default: Any = None,
        *,
        name: str = "route",
    ) -> None:
        is_step = isinstance(router, (Agent, Workflow, Task))
        routing = as_task(router) if is_step else router
        tasks_by_label = {label: as_task(step) for label, step in dict(branches).items()}
        fallback = as_task(default) if default is not None else None
        self.__attrs_init__(router=routing, branches=tasks_by_label, default=fallback, name=name)
        branch_tasks = [*tasks_by_label.values(), *([fallback] if fallback else [])]
        tasks = ([routing] if is_step else []) + branch_tasks
        object.__setattr__(self, "_tasks", tuple(tasks))
        problems: list[str] = []
        if not tasks_by_label:
            problems.append("a Route needs at least one branch")
        problems.extend(
            f"branch label {label!r} must be text"
            for label in tasks_by_label
            if not isinstance(label, str)
        )
        if not is_step and not callable(router):
            problems.append(
                f"the router is an Agent, a workflow or a function, got {type(router).__name__}"
            )
        if is_step:
            self._check_labels(routing, problems)
        names = {t.name for t in branch_tasks}
        for task in branch_tasks:
            others = dict.fromkeys(names - {task.name}, "another branch, which does not run")
            _reference_problems(task, others, problems)
        if is_step:
            _reference_problems(
                routing, dict.fromkeys(names, "a branch, which runs after it"), problems
            )
        self._build(problems)

    def _check_labels(self, router: Task, problems: list[str]) -> None:
        out = router.output_type
        if typing.get_origin(out) is Literal and self.default is None:
            missing = [v for v in typing.get_args(out) if v not in self.branches]
            if missing:
                problems.append(
                    f"router {router.name!r} may answer {', '.join(map(repr, missing))}, "
                    "which no branch takes (add them, or a default=)"
                )
        elif out is not str and typing.get_origin(out) is not Literal and out is not Any:
            problems.append(
                f"router {router.name!r} gives {type_name(out)}; a router answers a label "
                "(text, e.g. output_type=Literal[...] of the labels)"
            )

    @property
    def _router_task(self) -> Task | None:
        return self.router if isinstance(self.router, Task) else None

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (self.router, dict(self.branches), self.default), {"name": self.name}

    def _free_names(self) -> frozenset[str]:
        """Names the router and branches need (a branch may use the router's output)."""
        router = self._router_task
        names: set[str] = set(router.free_names) if router else set()
        for task in self._tasks:
            if task is not router:
                names |= task.free_names - ({router.name} if router else set())
        return frozenset(names)

    @property
    def input_type(self) -> Any:
        """The router's input type."""
        router = self._router_task
        if router is not None:
            return router.accepts
        from toolfold.runtime._task import _first_parameter_type

        return _first_parameter_type(self.router)

    @property
    def output_type(self) -> Any:
        """The branches' output type when they all give the same one, else Any."""
        types = {repr(t.output_type): t.output_type for t in self._branch_tasks}
        return next(iter(types.values())) if len(types) == 1 else Any

    @property
    def _branch_tasks(self) -> list[Task]:
        return [*self.branches.values(), *([self.default] if self.default else [])]

    def plan(self, plan: Plan) -> list[Call] | Final:
        """The router, then the branch it chose, then that branch's output."""
        values = dict(plan.values)
        router = self._router_task
        chosen = next((t for t in self._branch_tasks if plan.started(t.name)), None)
        if router is not None:
            status = plan.status(router, router.name)
            if isinstance(status, str):
                return [plan.call(router, status, plan.input, values)]
            if not status.skipped:
                values[router.name] = status.value
            label = status.value
        elif chosen is None:
            from toolfold.runtime._task import _first_parameter_type

            label = self.router(structured(plan.input, _first_parameter_type(self.router)))
        if chosen is None:
            chosen = self._branch(label)
        status = plan.status(chosen, chosen.name)
        if isinstance(status, str):
            return [plan.call(chosen, status, plan.input, values)]
        return Final(status.value)

    def _branch(self, label: Any) -> Task:
        if isinstance(label, str) and label in self.branches:
            return self.branches[label]
        if self.default is not None:
            return self.default
        labels = ", ".join(map(repr, self.branches))
        raise RunError(
            f"{self.label}: the router chose {label!r}, which is not a label ({labels}) "
            "and there is no default branch"
        )


@attrs.frozen(init=False)
class Loop(Workflow):
    """One step repeated, each time on the previous output, until a condition holds.

    Example:
        >>> Loop(Task(reviser, prompt="Improve: {input}"), until="done", max_iterations=5)

    Attributes:
        step: The step to repeat.
        until: A function of the step's output returning True to stop, or
            the name of a field of a structured output (``"done"``) that
            stops the loop when true. None: run ``max_iterations`` times.
        max_iterations: Iterations at most; the last output is the result.
        name: The workflow's name.
    """

    step: Task
    until: Callable[[Any], bool] | str | None
    max_iterations: int
    name: str
    _tasks: tuple[Task, ...] = attrs.field(init=False, eq=False, repr=False, hash=False)
    _options: RunOptions = attrs.field(init=False, eq=False, repr=False, hash=False)
    _free: frozenset[str] = attrs.field(init=False, eq=False, repr=False, hash=False)

    def __init__(
        self,
        step: Any,
        *,
        until: Callable[[Any], bool] | str | None = None,
        max_iterations: int = 10,
        name: str = "loop",
    ) -> None:
        task = as_task(step)
        self.__attrs_init__(step=task, until=until, max_iterations=max_iterations, name=name)
        object.__setattr__(self, "_tasks", (task,))
        problems: list[str] = []
        if type(max_iterations) is not int or max_iterations < 1:
            problems.append(f"max_iterations must be an integer >= 1, got {max_iterations!r}")
        if (
            until is not None
            and not callable(typing.cast(Any, until))
            and not isinstance(until, str)
        ):
            problems.append(f"until is a function or a field name, got {type(until).__name__}")
        if isinstance(until, str):
            fields = _field_names(task.output_type)
            if fields is not None and until not in fields:
                problems.append(
                    f"until={until!r}: step {task.name!r} gives {type_name(task.output_type)}, "
                    f"which has no field {until!r} (fields: {', '.join(fields)})"
                )
        _reference_problems(task, {task.name: "itself"}, problems)
        if not type_accepts(task.accepts, task.output_type):
            problems.append(
                f"step {task.name!r} takes {type_name(task.accepts)}, but its previous "
                f"iteration gives {type_name(task.output_type)}"
            )
        self._build(problems)

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        options = {"until": self.until, "max_iterations": self.max_iterations, "name": self.name}
        return (self.step,), options

    def _free_names(self) -> frozenset[str]:
        """Names the step needs."""
        return self.step.free_names

    @property
    def output_type(self) -> Any:
        """The step's output type."""
        return self.step.output_type

    def restore(self, plain: Any) -> Any:
        """The output as the step's type."""
        return _restored(self.step, plain)

    def plan(self, plan: Plan) -> list[Call] | Final:
        """The next iteration, or the last output once ``until`` holds."""
        task = self.step
        value = plan.input
        values = dict(plan.values)
        for iteration in range(1, self.max_iterations + 1):
            status = plan.status(task, f"{task.name}.{iteration}")
            if isinstance(status, str):
                return [plan.call(task, status, value, values)]
            if not status.skipped:
                value = status.value
            if plan.started(f"{task.name}.{iteration + 1}"):
                continue  # decided when this iteration ended: the condition did not hold
            if not status.skipped and self._holds(value):
                return Final(value)
        return Final(value)

    def _holds(self, plain: Any) -> bool:
        until = self.until
        if until is None:
            return False
        if isinstance(until, str):
            return isinstance(plain, Mapping) and bool(plain.get(until))
        return bool(until(_restored(self.step, plain)))


def _field_names(tp: Any) -> list[str] | None:
    if isinstance(tp, type) and attrs.has(tp):
        return [f.name for f in attrs.fields(tp)]
    fields = getattr(tp, "__dataclass_fields__", None)
    if isinstance(fields, dict):
        return list(fields)
    return None
