"""Workflows: `Sequence`, `Parallel`, `Route` and `Loop`, frozen specs over agents.

A workflow composes agents, functions and other workflows. It runs with the
same ``run / arun / stream / resume`` as an `Agent`, on the same loop and the
same state: each step is a tool call of the workflow's run, decided by a
planner in the model's seat (see `_planner`), so the whole tree serializes,
resumes in another process and replays. A run nobody observes is driven by
`_conduct` (the same events, without the agent loop's per-turn machinery).
"""

from __future__ import annotations

import json
import typing
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from contextlib import aclosing
from typing import Any

import attrs

from toolfold._errors import (
    InvalidEventError,
    RunError,
    SourceCloseError,
    ToolRetriesExceededError,
    UsageError,
    WorkflowDefinitionError,
    add_note,
)
from toolfold.runtime._agent import Observer, StepObserver
from toolfold.runtime._conduct import Deferred, Fresh, conduct_async, conduct_sync, conducted
from toolfold.runtime._model import keeps_override
from toolfold.runtime._planner import (
    PLANNER_MODEL,
    Call,
    Final,
    Plan,
    Planner,
    envelope,
    read_plan,
    workflow_output,
)
from toolfold.runtime._response import (  # noqa: F401 (OutputT_co: see WorkflowResponse)
    OutputT_co,
    Response,
    RunEndEvent,
    RunFinishReason,
    RunStreamEvent,
    kept,
)
from toolfold.runtime._resume import Retrying, caller_answered, check_sub_run, resumed
from toolfold.runtime._retry import failed_too, held_failure, retry_state
from toolfold.runtime._run import (
    Approval,
    RunOptions,
    RunStream,
    failed_end,
    make_options,
    new_run_id,
    run_async,
    run_sync,
    within_copy,
)
from toolfold.runtime._task import STEP_CLOSE_ERRORS, Task, plain_data, structured
from toolfold.runtime.core._build import new_tuple
from toolfold.runtime.core._json_numbers import json_value
from toolfold.runtime.core._messages import Message, ToolCallPart, Usage
from toolfold.runtime.core._state import RunState, not_a_state
from toolfold.runtime.core._stop import WORKFLOW_SETTING, TokenBudget
from toolfold.runtime.core._stream import StreamEvent
from toolfold.runtime.drive._executor import DEFAULT_MAX_CONCURRENCY
from toolfold.runtime.drive._failures import run_failure
from toolfold.runtime.drive._loop import Live, apply_event
from toolfold.runtime.drive._open import note_close_error
from toolfold.runtime.drive._shells import throw_into
from toolfold.toolkit._options import ApprovalPolicy
from toolfold.toolkit._results import quoted
from toolfold.toolkit._tool import Tool

_MAX_DECISIONS = 1_000_000  # the planner decides when to stop; this only bounds a runaway
_PLANNER_EVENTS: tuple[type[Any], ...] = typing.get_args(StreamEvent)  # the planner "model"'s own
# The key of the run's settings that records its workflow's shape (see `Workflow.shape`).
# A state stored before it was recorded has no such key (its settings are empty): such a
# run is checked by its step names alone, as it was then (see `Workflow._check_steps`).
SHAPE_SETTING = WORKFLOW_SETTING


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
            UsageError: A function has no import path (a lambda, a local function),
                or a tool made by ``as_tool`` has an option an agent file cannot
                hold (see `Agent.to_dict`); the error names its key path.
        """
        from toolfold.runtime._document import spec_to_dict

        return spec_to_dict(self)

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        input_type: Any = str,
        requires_approval: ApprovalPolicy = False,
        timeout: float | None = None,
        output: Callable[[Response], Any] | None = None,
    ) -> Tool[..., Any]:
        """This workflow as a tool an agent can call, like `Agent.as_tool`.

        The calling model passes one argument, ``input`` (text by default; an
        attrs class or dataclass ``input_type`` gives its schema, and the
        workflow gets the value as its input), and sees the workflow's
        output (JSON unless it is text). The workflow's run nests in the
        caller's state on the call's record: an approval inside it, at any
        depth, suspends the caller, and ``resume`` at the top answers it by
        its id; usage sums the tree, and a streaming caller gets the steps'
        events tagged with their path.

        Example:
            >>> lead = Agent(model, tools=[pipeline.as_tool(description="Researches and writes.")])

        Args:
            name: The tool's name (default: the workflow's ``name``).
            description: What the calling model reads about the tool.
            input_type: The type of the ``input`` argument (it must fit the
                workflow's input type).
            requires_approval: Ask before the workflow runs at all: True, or a
                predicate over (call, state) as `tool` takes.
            timeout: Seconds the whole workflow run may take.
            output: A function of the workflow's finished `Response`
                giving what the calling model sees instead of the output
                (text, or JSON-able data sent as JSON); see `Agent.as_tool`.

        Raises:
            UsageError: ``input_type`` does not fit the workflow's input, or
                ``output`` is not a function.
        """
        from toolfold.runtime._agent_tool import agent_tool

        return agent_tool(
            self,
            name=name,
            description=description,
            input_type=input_type,
            requires_approval=requires_approval,
            timeout=timeout,
            output=output,
        )

    @property
    def label(self) -> str:
        """The kind and name, for messages."""
        return f"{type(self).__name__} {self.name!r}"

    def _build(self, problems: list[str], max_concurrency: int = DEFAULT_MAX_CONCURRENCY) -> None:
        """Check the definition (raising every problem at once) and resolve the run options."""
        name = self.name
        if name is not None and (not isinstance(name, str) or not name):
            # Its runs' label and its default step and tool name: any non-empty text (as for
            # agents), or None as ever (no name: as a step, the step's check says so). Being a
            # step needs an identifier (the step's check), a tool a tool name (as_tool's
            # check); "My report flow" runs and is resumed as it always was.
            problems.insert(0, f"name must be non-empty text, got {type(name).__name__} {name!r}")
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
        config = attrs.evolve(
            options.config, output=output.spec, settings={SHAPE_SETTING: self.shape}
        )
        object.__setattr__(
            self, "_options", attrs.evolve(options, output=output, config=config, name=self.name)
        )

    @property
    def shape(self) -> str:
        """What decides how this workflow feeds its steps, beyond their names: its kind.

        A run records it in its state (its settings), and a resume by a
        workflow of another shape is refused (see `_check_steps`).
        """
        return type(self).__name__

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

    def spent_answer(self, plan: Plan) -> Final | None:
        """The answer to give instead of starting steps once a tree budget is spent, or None.

        A workflow used as a tool under its caller's ``token_budget(n,
        tree=True)`` starts no step once that budget is spent. When `plan`
        would start steps then, the run answers with this, if it is not
        None, and stops at the budget (``finish_reason == "token_budget"``)
        otherwise. None here: a `Sequence` answers with its last answered
        step's output and a `Loop` with its last iteration's; a `Route`
        started no branch yet (its router gave a label, no answer to the
        input) and a `Parallel` starts every branch at once, so only a retry
        is left to start.
        """
        return None

    @property
    def free_names(self) -> frozenset[str]:
        """Names the steps' templates need that no step of this workflow defines before them."""
        return self._free

    @property
    def free_references(self) -> tuple[tuple[str, ...], ...]:
        """The placeholders (as paths) of `free_names`: what an enclosing workflow checks."""
        return tuple(p for t in self._tasks for p in t.references if p[0] in self._free)

    def free_problems(self) -> list[str]:
        """What is wrong with running this workflow on its own: each name no step before its user defines."""
        return [
            f"step {', '.join(sorted(map(repr, self._steps_using(name))))} refers to "
            f"{{{name}}}, which no earlier step defines"
            for name in sorted(self._free)
        ]

    def _steps_using(self, name: str) -> set[str]:
        """The innermost steps whose own templates use ``name`` (a free name)."""
        found: set[str] = set()
        for task in self._tasks:
            if name in task.free_names:
                inner = task.target
                found |= inner._steps_using(name) if isinstance(inner, Workflow) else {task.name}
        return found

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

    def input_problems(self, source: Any, giver: str) -> list[str]:
        """Why a step of this workflow cannot take its input of type ``source`` (see `Task.input_problems`)."""
        return self._tasks[0].input_problems(source, giver)

    def restore(self, plain: Any) -> Any:
        """The output as its declared type where known (plain data otherwise)."""
        return structured(plain, self.output_type)

    def envelope(self, input: Any, values: Mapping[str, Any]) -> Input:
        """The input of a nested run of this workflow (used by the enclosing one)."""
        return Input(envelope(input, values))

    # --- running -----------------------------------------------------------------

    def _start(self, prompt: Any, run_id: str) -> RunState:
        return self._fresh(prompt, run_id).start_state()

    def _fresh(self, prompt: Any, run_id: str) -> Fresh:
        """The run of ``prompt`` not started yet: its first message and its first plan."""
        if isinstance(prompt, Input):
            text = prompt.text
            data = json_value(text)  # the first plan, as `read_plan` reads it
            input_, values = data["input"], data.get("values") or {}
        else:
            if self._free:
                raise WorkflowDefinitionError(self.label, self.free_problems())
            input_ = _input_value(prompt)
            text = envelope(input_, {})
            if type(input_) is str:  # its JSON gives it back unchanged
                values = {}
            else:  # (a NaN in it: `math.nan` itself, as the state's load gives it)
                data = json_value(text)
                input_, values = data["input"], data.get("values") or {}
        return new_tuple(Fresh, (text, self._options.config, run_id, self.name, input_, values))

    def _begin(
        self,
        prompt: Any,
        run_id: str | None,
        deps: Any,
        on_event: Observer | None,
        on_step: StepObserver | None,
        lean: bool = False,
    ) -> tuple[Live, RunState | Fresh]:
        """The run's live half and start; ``lean``: a run nobody watches starts as a `Fresh` one."""
        fresh = self._fresh(prompt, new_run_id(run_id))
        if deps is None and on_event is None and on_step is None:
            live = self._options.live(announce_start=True)  # made once, shared (see `live`)
        else:
            live = self._options.live(
                deps=deps, on_event=on_event, on_step=on_step, announce_start=True
            )
        if lean and conducted(live):  # the lean driver makes the start state with the rest
            return live, fresh
        return live, fresh.start_state()

    def _drive_sync(self, live: Live, start: RunState | Fresh) -> Response | Deferred:
        # A fresh run nobody watches (only `_begin` makes one), or any run nothing
        # watches: the lean driver (the same events).
        if type(start) is Fresh or conducted(live):
            return conduct_sync(self._planner, live, start)
        assert type(start) is RunState
        return run_sync(live, start)

    async def _drive_async(self, live: Live, start: RunState | Fresh) -> Response | Deferred:
        if type(start) is Fresh or conducted(live):
            return await conduct_async(self._planner, live, start)
        assert type(start) is RunState
        return await run_async(live, start)

    def _ran_sync(self, live: Live, start: RunState | Fresh) -> WorkflowResponse:
        """The run driven, its steps' close errors raised when it ends (see `_StepCloses`)."""
        closes = _Closes()
        try:
            response = self._drive_sync(live, start)
            _fail_held(live, response)
        except BaseException as exc:
            closes.failed(self, exc)
            raise
        return closes.ended(self, response)

    async def _ran_async(self, live: Live, start: RunState | Fresh) -> WorkflowResponse:
        closes = _Closes()
        try:
            response = await self._drive_async(live, start)
            _fail_held(live, response)
        except BaseException as exc:
            closes.failed(self, exc)
            raise
        return closes.ended(self, response)

    @property
    def _planner(self) -> Planner:
        planner = self._options.model
        assert isinstance(planner, Planner)
        return planner

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
        # Blocking all the way down: steps one at a time run in this thread;
        # steps side by side run as coroutines of one loop (see `run_calls_sync`).
        live, state = self._begin(prompt, run_id, deps, on_event, on_step, lean=True)
        return self._ran_sync(live, state)

    @keeps_override
    async def arun(
        self,
        prompt: Any,
        *,
        deps: Any = None,
        on_event: Observer | None = None,
        on_step: StepObserver | None = None,
        run_id: str | None = None,
    ) -> WorkflowResponse:
        """Like `run`, on the running event loop: steps run as coroutines of that loop.

        Only the agents' own sync tools run on worker threads.
        """
        live, state = self._begin(prompt, run_id, deps, on_event, on_step, lean=True)
        return await self._ran_async(live, state)

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
        live, state = self._begin(prompt, run_id, deps, on_event, on_step)
        assert type(state) is RunState
        return WorkflowStream(RunStream(live, state), self)

    def _resumed(
        self, state: RunState, answers: dict[str, Any], function: str
    ) -> tuple[Live, RunState]:
        if not isinstance(state, RunState):  # a WorkflowResponse, its JSON, None
            raise not_a_state(f"{type(self).__name__}.{function}", state)
        options = self._check_steps(state)
        if state.phase == "finished" and (answers["approvals"] or answers["tool_results"]):
            # (an agent's run takes a new turn here: resume(message=...); a workflow's cannot)
            event = "approval_granted" if answers["approvals"] else "tool_results_provided"
            raise InvalidEventError(
                state.phase,
                event,
                f"the run of {self.label} finished, so no call waits for an approval or a "
                "result; run the workflow again for a new run",
                state,
            )
        retrying = None
        if state.phase == "failed":  # (an answer to a call held in what failed: resume first)
            retrying, state = Retrying(state, "step"), self._retried(state)
        continued = caller_answered(state)
        return resumed(
            state,
            options,
            message=None,
            max_steps=None,
            **answers,
            continued=continued,
            retrying=retrying,
        )

    def _retried(self, state: RunState) -> RunState:
        """A failed run of this workflow as it was before what failed it (see `retry_state`).

        Raises:
            UsageError: Nothing in the run can be run again from where it failed.
        """
        again = retry_state(state)
        if again is None:
            error = state.error
            why = f"{error.kind}: {error.message}" if error is not None else "no error recorded"
            raise UsageError(
                f"the run of {self.label} failed ({why}), and not in a step that can run "
                "again: a failed state is final; fork(state, events=n) is the run after its "
                "first n events, to resume from the point to try again (with a new run_id)"
            )
        return again

    def _within(self, budget: TokenBudget) -> Workflow:
        """This workflow with ``budget`` (a caller's tree budget) among its run's stop conditions.

        Its run stores the budget and stops at its boundary once its tree
        reaches it, and each step's run gets what is left when the step
        begins (`handed_budget`), as the sub-agents of an agent with the
        budget do. A copy sharing the definition and the resolved options
        (not built again), the budget added to their plain-data config.
        """
        return within_copy(self, type(self), budget)  # (each kind is an attrs class)

    def _check_resume(self, state: RunState) -> None:
        """Refuse, running nothing, what resuming ``state`` (a suspended sub-run) would refuse."""
        check_sub_run(state, self._check_steps(state), None)

    def _check_steps(self, state: RunState) -> RunOptions:
        """Refuse a run whose steps are not this workflow's, in the same order and shape.

        The steps are the workflow's program: a step added, removed or moved
        would have the run go on with a plan it was not started with (an
        added step's call is one the stored run does not know); so would the
        same steps in a workflow of another kind (a `Parallel` feeds them
        the input, a `Sequence` each other's output) or a `Route` whose
        labels lead to other steps. A state stored before runs recorded
        their `shape` has none: it is checked by its step names alone.

        Returns:
            The options to resume ``state`` with (without the recorded shape
            for a state that has none, which its stored settings must match).
        """
        stored = [spec.name for spec in state.config.tools]
        given = [spec.name for spec in self._options.config.tools]
        if stored != given:
            raise UsageError(
                f"the steps of the resuming {self.label} ({', '.join(given)}) differ from the run's "
                f"({', '.join(stored)}): a run keeps the steps it started with (they are "
                "stored in its state); resume with the workflow that started it, or start "
                "a new run"
            )
        settings = state.config.settings
        shape = settings.get(SHAPE_SETTING)
        if shape is None:  # stored before runs recorded their shape
            if settings:
                return self._options  # (other settings: the stored ones differ, as said)
            config = attrs.evolve(self._options.config, settings={})
            return attrs.evolve(self._options, config=config)
        if shape != self.shape:
            raise UsageError(
                f"the resuming {self.label} is a {self.shape}, but the run was started by a "
                f"{shape}, with the same steps: a run keeps the workflow it started with (how "
                "it feeds its steps is stored in its state); resume with the workflow that "
                "started it, or start a new run"
            )
        return self._options

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
        """Continue a workflow that waits for approvals or tool results (at any depth), or failed.

        Answers are keyed by the id of the call that waits, however deep in
        the tree; nothing that already ran runs again. A failed run (a
        `RunError`'s ``.state``) goes on from just before what failed it:
        the failed steps run again, at any depth, and the steps and branches
        that had ended keep their results.

        Args:
            state: ``response.state``, an error's ``.state``, a state loaded
                with ``RunState.from_json``, or a `fork` of one.
            tool_results: Results for calls returned to the caller, by call id.
            approvals: By call id: True, False or `Denied(reason)`.
            deps: Dependencies for the tools' `RunContext`.
            on_event: Called with every event of the workflow's own run.
            on_step: Called with every completed round of step calls.

        Raises:
            RunError: A step failed again (as in `run`).
            UsageError: The answers or the workflow do not fit the run, or the
                run failed in a way no step can run again from (the message
                says how to fork it).
            InvalidEventError: The failed run's dropped model calls reported
                a usage count that cannot be kept (not a finite number >= 0).
        """
        live, state = self._resumed(
            state, _answers(tool_results, approvals, deps, on_event, on_step), "resume"
        )
        return self._ran_sync(live, state)

    @keeps_override
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
            state, _answers(tool_results, approvals, deps, on_event, on_step), "aresume"
        )
        return await self._ran_async(live, state)

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
            state, _answers(tool_results, approvals, deps, on_event, on_step), "resume_stream"
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


def _fail_held(live: Live, response: Response | Deferred) -> None:
    """Fail a run that waits while a step of its last round failed it (see `held_failure`).

    Raises:
        ToolRetriesExceededError: The run failed so (`_step_errors` reports it as the step's).
    """
    if isinstance(response, Deferred):  # (finished)
        return
    state = response.state
    failure = held_failure(state)
    if failure is not None:
        raise run_failure(apply_event(live, state, failure))


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
        failure = _step_failure(self._workflow, exc)
        if failure is not None:
            raise failure from _step_cause(exc)


_STATE_NOTE = "; the error's state is the workflow's, with the failure recorded"


def _step_failure(workflow: Workflow, exc: BaseException | None) -> RunError | None:
    """The error reporting ``exc`` as a step's failure when a step failed the workflow, else None.

    Each other step of the round that failed the workflow too (`failed_too`:
    two `Parallel` branches) is a note of it (``step 'b' failed too: Error:
    ...``), not part of its message: that message is a nested workflow's
    step result, which a state, its log and a Temporal history store.
    """
    if isinstance(exc, ToolRetriesExceededError) and exc.state is not None:
        failure = exc.state.error
        step = failure.tool_name if failure is not None else "?"
        last = failure.message.partition("last error: ")[2] if failure is not None else ""
        # A nested workflow's step error ends with this note already: said once, at the end.
        last = _without_state_note(last)
        error = RunError(
            f"step {step!r} of {workflow.label} failed: {last or exc}{_STATE_NOTE}", exc.state
        )
        for call in failed_too(exc.state):
            said = _without_state_note(call.result.content if call.result is not None else "")
            add_note(error, f"step {call.call.name!r} failed too: {quoted(said)}")
        return error
    return None


def _without_state_note(text: str) -> str:
    """``text`` (a step's error) without the `_STATE_NOTE`s a nested workflow's ends with."""
    while text.endswith(_STATE_NOTE):
        text = text.removesuffix(_STATE_NOTE)
    return text


def _step_cause(exc: BaseException | None) -> BaseException | None:
    """What a step's failure (`_step_failure`) is raised from: the exception of the step that
    failed (its function's, its agent's error: the `ToolRetriesExceededError`'s cause, see
    `failure_cause`), or that error when it has none (a run driven elsewhere, Temporal's)."""
    if isinstance(exc, ToolRetriesExceededError) and exc.__cause__ is not None:
        return exc.__cause__
    return exc


def _failed(workflow: Workflow, exc: BaseException, errors: list[SourceCloseError]) -> None:
    """A run of ``workflow`` failed with ``exc``: raise it as `_step_errors` and `_StepCloses` would.

    Returns when ``exc`` itself is to be raised (the caller raises it).
    """
    failure = _step_failure(workflow, exc)
    closing = _StepCloses(workflow, errors)
    if failure is None:
        closing.attach(exc)
        return
    try:
        raise failure from _step_cause(exc)
    except RunError as error:
        closing.attach(error)
        raise


class _Closes:
    """`_StepCloses` and `_step_errors` around a run, without their calls when nothing failed.

    Made when the run starts; its steps keep their close errors in ``errors``
    until it ends (`ended`) or fails (`failed`).
    """

    __slots__ = ("errors", "token")

    def __init__(self) -> None:
        self.errors: list[SourceCloseError] = []
        self.token = STEP_CLOSE_ERRORS.set(self.errors)

    def ended(self, workflow: Workflow, response: Response | Deferred) -> WorkflowResponse:
        """The run of ``workflow`` ended with ``response``: its response, or the close errors' error."""
        STEP_CLOSE_ERRORS.reset(self.token)
        wrapped = _wrapped(response)
        return _StepCloses(workflow, self.errors).checked(wrapped) if self.errors else wrapped

    def failed(self, workflow: Workflow, exc: BaseException) -> None:
        """The run of ``workflow`` failed with ``exc``: see `_failed` (the caller raises ``exc``)."""
        STEP_CLOSE_ERRORS.reset(self.token)
        _failed(workflow, exc, self.errors)


class _StepCloses:
    """The close errors of a workflow run's steps whose runs ended (see `_task._kept`).

    Such a step is done and the workflow goes on with its result; the errors
    are raised when the run ends: as a `SourceCloseError` carrying the
    workflow's response when it ended too, attached to its error (a note and
    ``close_errors``) when it failed.
    """

    __slots__ = ("_token", "errors", "workflow")

    def __init__(self, workflow: Workflow, errors: list[SourceCloseError] | None = None) -> None:
        self.workflow = workflow
        self.errors: list[SourceCloseError] = [] if errors is None else errors

    def __enter__(self) -> None:
        """Steps started in the block keep their close errors here."""
        self._token = STEP_CLOSE_ERRORS.set(self.errors)

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> None:
        STEP_CLOSE_ERRORS.reset(self._token)

    def _failures(self) -> list[BaseException]:
        return [failure for error in self.errors for failure in error.close_errors]

    def attach(self, error: BaseException) -> None:
        """The run failed with ``error``: the close errors go with it.

        A caller that stops iterating a stream (`GeneratorExit`) has no error
        to attach them to: they are raised instead, as when an agent's
        stream is closed early.
        """
        if not self.errors:
            return
        failures = self._failures()
        if isinstance(error, GeneratorExit):
            raise SourceCloseError(
                f"closing the tool sources of a step of {self.workflow.label} failed: "
                f"{type(failures[0]).__name__}: {failures[0]}",
                None,
                failures,
            ) from failures[0]
        for failure in failures:
            note_close_error(
                error, failure, f"closing a tool source of a step of {self.workflow.label}"
            )

    def checked(self, response: WorkflowResponse) -> WorkflowResponse:
        """``response``, unless a step's sources failed to close: then the error carrying it."""
        if not self.errors:
            return response
        failures = self._failures()
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        raise SourceCloseError(
            f"{self.workflow.label} ended ({response.state.phase}) but closing a tool source of a step "
            f"failed: {type(failures[0]).__name__}: {failures[0]}{more}; the error's response "
            "and state are the workflow's",
            response,
            failures,
        ) from failures[0]


# attrs makes this class's __init__ in this module: `OutputT_co` (the type of
# the `output` field it inherits) is imported so that `typing.get_type_hints`
# resolves it. A workflow's output type is not known to type checkers: Any.
@attrs.frozen(repr=False)  # Response's own repr
class WorkflowResponse(Response[Any]):
    """The result of a workflow run: a `Response` with each step's output and error.

    ``output`` is the workflow's output (typed where the last step's type is
    known), ``text`` the same as text (JSON unless it is text).

    A run that went its usual way (see `_conduct.Deferred`) makes its
    ``state`` when it is first read: ``output``, ``text``, ``finish_reason``,
    ``usage``, ``run_id``, ``agent``, ``tool_calls``, ``pending_approvals``
    and its repr need none. Equality, hashing,
    pickling and ``attrs`` functions read ``state`` like any field.
    """

    def _deferred(self) -> Deferred | None:
        """The run whose state is not made yet, if any."""
        held = _STATE_SLOT.__get__(self, WorkflowResponse)
        return held if type(held) is Deferred else None

    @property
    def text(self) -> str:
        """The output as text (JSON unless it is text); "" while suspended."""
        deferred = self._deferred()
        if deferred is not None:  # finished
            plain = deferred.plain
        elif not self.state.is_done or self.state.phase == "failed":
            return ""
        else:
            plain = self.state.output
        return (
            plain if isinstance(plain, str) else json.dumps(plain, default=str, ensure_ascii=False)
        )

    @property
    def finish_reason(self) -> RunFinishReason:
        """Why the run stopped (see `Response.finish_reason`)."""
        deferred = self._deferred()
        if deferred is not None:  # finished with the planner's answer
            return deferred.finish_reason
        return super().finish_reason

    @property
    def usage(self) -> Usage:
        """Usage summed over every step's run, any depth (the workflow's own planner uses none)."""
        deferred = self._deferred()
        return deferred.tree_usage if deferred is not None else super().usage

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """Calls that were not executed and wait for the caller's results."""
        return () if self._deferred() is not None else super().tool_calls

    @property
    def pending_approvals(self) -> tuple[ToolCallPart, ...]:
        """Calls that wait for an approval (see ``resume(approvals=...)``)."""
        return () if self._deferred() is not None else super().pending_approvals

    def _step_count(self) -> int:
        deferred = self._deferred()
        return deferred.step if deferred is not None else self.state.step

    @property
    def run_id(self) -> str:
        """The run's id."""
        deferred = self._deferred()
        return deferred.run_id if deferred is not None else self.state.run_id

    @property
    def agent(self) -> str | None:
        """The workflow's name (no handoffs in a workflow's own run)."""
        deferred = self._deferred()
        return deferred.agent if deferred is not None else self.state.agent

    @property
    def outputs(self) -> Mapping[str, Any]:
        """Each finished step's output as plain data, by step name (the latest for a loop).

        Each read gives values of its own: changing one changes no later read.
        """
        outputs = kept(self, "outputs", lambda: _outputs_of(self.state))
        return {name: _fresh(value) for name, value in outputs.items()}

    @property
    def errors(self) -> Mapping[str, str]:
        """The error of each step whose last attempt failed (skipped, or failing the run).

        A step skipped inside a nested workflow that ended is listed under
        its path, the nested workflow's step name first: ``"par/bad"``.
        """
        return dict(kept(self, "errors", lambda: _step_errors_of(self.state, "")))


def _fresh(value: Any) -> Any:
    """A copy of the plain data ``value`` sharing no list or dict with it (the rest is immutable)."""
    kind = type(value)
    if kind is dict:
        return {key: _fresh(item) for key, item in value.items()}
    if kind is list:
        return [_fresh(item) for item in value]
    return value


def _outputs_of(state: RunState) -> dict[str, Any]:
    """`WorkflowResponse.outputs` of the workflow run ``state``."""
    found: dict[str, Any] = {}
    for attempt in read_plan(state.messages).attempts:
        if attempt.ok:
            found[attempt.name] = attempt.value
    return found


def _step_errors_of(state: RunState, prefix: str) -> dict[str, str]:
    """`WorkflowResponse.errors` of the workflow run ``state``, its keys after ``prefix``."""
    found: dict[str, str] = {}
    sub_runs: Mapping[str, RunState] | None = None
    for attempt in read_plan(state.messages).attempts:
        key = prefix + attempt.name
        # Each attempt replaces what the step's earlier attempts left, nested keys too
        # (a Loop's second iteration that succeeds clears the first one's skips).
        for stale in [k for k in found if k.startswith(key + "/")]:
            del found[stale]
        if not attempt.ok:
            found[key] = attempt.value
            continue
        found.pop(key, None)
        if sub_runs is None:
            sub_runs = state.sub_runs
        child = sub_runs.get(attempt.call_id)
        if child is not None and child.config.model == PLANNER_MODEL:  # a nested workflow's run
            found.update(_step_errors_of(child, key + "/"))
    return found


class _State:
    """`WorkflowResponse.state`: the field's slot, a `Deferred` run's state made on first read.

    Reading it replaces the `Deferred` in the slot with the state (two
    threads reading at once both make it, equal states: either one stays).
    Setting it is the class's own ``__init__`` and ``__setstate__``;
    anything else is refused by the frozen class's ``__setattr__`` first.
    """

    def __get__(self, response: WorkflowResponse | None, owner: Any = None) -> Any:
        if response is None:
            return self
        held = _STATE_SLOT.__get__(response, owner)
        if type(held) is Deferred:
            held = held.state()
            _STATE_SLOT.__set__(response, held)
        return held

    def __set__(self, response: WorkflowResponse, value: Any) -> None:
        _STATE_SLOT.__set__(response, value)


_STATE_SLOT: Any = Response.__dict__["state"]  # the slot that holds the field
# Set here, not in the class body: attrs drops a body attribute named like a field.
type.__setattr__(WorkflowResponse, "state", _State())


def _wrapped(response: Response | Deferred) -> WorkflowResponse:
    if isinstance(response, Deferred):  # its state is made when it is read
        # The class's ``__init__`` without its call of `_State.__set__`: the slots set directly.
        wrapped = _new(WorkflowResponse)
        _STATE_SLOT.__set__(wrapped, response)
        _OUTPUT_SLOT.__set__(wrapped, response.output)
        return wrapped
    return WorkflowResponse(response.state, response.output)


_OUTPUT_SLOT: Any = Response.__dict__["output"]
_new = object.__new__


class WorkflowStream:
    """A workflow run as a stream of events; iterate it with ``for`` or ``async for``."""

    def __init__(self, stream: RunStream, workflow: Workflow) -> None:
        self._stream = stream
        self._workflow = workflow
        self._response: WorkflowResponse | None = None
        self._failed: str | None = None  # how the run failed (`failed_end`), once it did

    @property
    def response(self) -> WorkflowResponse:
        """The response, once the stream is exhausted.

        Raises:
            UsageError: The stream has not been iterated to its end yet, was
                stopped before it (the run was then abandoned), or raised (the
                run failed: the state it reached is the error's ``.state``).
        """
        if self._response is None:
            if self._failed is not None:
                raise UsageError(f"the stream has no response: {self._failed}")
            _ = self._stream.response  # raises, saying whether the caller stopped it
            raise UsageError("the stream has not finished: iterate it to the end first")
        return self._response

    def _shown(self, event: RunStreamEvent) -> RunStreamEvent | None:
        if isinstance(event, _PLANNER_EVENTS):
            return None  # the planner's own "model" output: the steps' events say it all
        if isinstance(event, RunEndEvent):
            _fail_held(self._stream._live, event.response)
            self._response = _wrapped(event.response)
            return RunEndEvent(self._response)
        return event

    # The steps' close errors are watched only while the run works (a context
    # variable set across a yield would leak into the caller's code).

    def __iter__(self) -> Iterator[RunStreamEvent]:
        closing = _StepCloses(self._workflow)
        events = iter(self._stream)
        try:
            with _step_errors(self._workflow):
                while True:
                    with closing:
                        event = next(events, None)
                    if event is None:
                        break
                    shown = self._shown(event)
                    if shown is not None:
                        try:
                            yield shown
                        except BaseException as exc:
                            if isinstance(exc, (Exception, GeneratorExit)):
                                raise
                            # Ctrl-C thrown in here (the caller was busy with the event):
                            # into the run's stream, so it carries the state the run reached.
                            events.throw(exc)
                            raise
        except BaseException as exc:
            self._failing(exc)
            closing.attach(exc)
            raise
        closing.checked(self.response)

    def _failing(self, exc: BaseException) -> None:
        """The iteration raises ``exc``: unless the caller stopped it (or the run had ended),
        the run failed, as `response` says from now on."""
        # As `RunStream._failing`, without its ``_stopped`` check: this stream keeps
        # no stop flag of its own. A caller's stop is the inner `RunStream`'s (closing
        # this iteration closes it, and it records the stop), and `response` asks it.
        if not isinstance(exc, GeneratorExit) and self._response is None:
            self._failed = failed_end(exc)

    async def __aiter__(self) -> AsyncGenerator[RunStreamEvent, None]:
        closing = _StepCloses(self._workflow)
        events = self._stream.__aiter__()
        try:
            with _step_errors(self._workflow):
                async with aclosing(events):
                    while True:
                        with closing:
                            try:
                                event = await events.__anext__()
                            except StopAsyncIteration:
                                break
                        shown = self._shown(event)
                        if shown is not None:
                            try:
                                yield shown
                            except BaseException as exc:
                                await throw_into(events, exc)  # (as in __iter__)
                                raise
        except BaseException as exc:
            self._failing(exc)
            closing.attach(exc)
            raise
        closing.checked(self.response)
