"""The four workflow kinds: `Sequence`, `Parallel`, `Route` and `Loop`.

Each checks its definition when it is built (every problem at once), and
decides what runs next from what has run (`plan`); `Workflow` does the rest.
"""

from __future__ import annotations

import itertools
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import attrs

from toolfold._errors import RunError
from toolfold.runtime._agent import Agent
from toolfold.runtime._agent_tool import function_name
from toolfold.runtime._planner import NO_VALUES, Call, Final, Plan, memos
from toolfold.runtime._run import RunOptions
from toolfold.runtime._task import (
    Task,
    _short,
    as_task,
    field_problems,
    fields_of,
    hints_of,
    plain_data,
    structured,
    type_accepts,
    type_name,
)
from toolfold.runtime._workflow import Workflow
from toolfold.runtime.core._build import new_tuple
from toolfold.runtime.core._messages import frozen_dict
from toolfold.runtime.drive._executor import DEFAULT_MAX_CONCURRENCY
from toolfold.toolkit._results import describe_exception


def _called(workflow: Workflow, what: str, function: Callable[..., Any], value: Any) -> Any:
    """``function(value)``, a user's function of ``workflow`` (its ``what``); what it raises
    is a `RunError` naming it (the planner's driver sets the error's state)."""
    try:
        return function(value)
    except RunError:
        raise
    except Exception as exc:
        raise RunError(
            f"the {what} function ({function_name(function)}) of {workflow.label} raised "
            f"{describe_exception(exc)}; the error's state is the workflow before this "
            "decision (resume it to try again)",
            None,
        ) from exc


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
    # Whether no step's templates need values (no `Plan.call` to pick them).
    _bare: bool = attrs.field(init=False, eq=False, repr=False, hash=False)

    def __init__(self, *steps: Any, name: str = "sequence") -> None:
        tasks = tuple(as_task(s) for s in steps)
        self.__attrs_init__(steps=tasks, name=name)
        object.__setattr__(self, "_tasks", tasks)
        object.__setattr__(self, "_bare", not any(t.free_names for t in tasks))
        problems: list[str] = [] if tasks else ["a Sequence needs at least one step"]
        names = [t.name for t in tasks]
        for index, task in enumerate(tasks):
            later = dict.fromkeys(names[index + 1 :], "which runs after it")
            _reference_problems(task, {**later, task.name: "itself"}, problems)
            earlier = {t.name: t.output_type for t in tasks[:index]}
            problems.extend(field_problems(task, earlier))
        for before, after in itertools.pairwise(tasks):
            giver = f"the step before it, {before.name!r}, gives"
            problems.extend(after.input_problems(before.output_type, giver))
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
        # The finished steps' outputs (a step's values: the inherited ones, then these).
        outputs: dict[str, Any] = {}
        by_step = plan.by_step
        for task in self._tasks:
            name = task.name
            attempts = by_step.get(name)
            if attempts and attempts[-1].ok:  # (`Plan.status` without making its `Done`)
                outputs[name] = value = attempts[-1].value
                continue
            # A step not started yet: its first attempt (`Plan.status` without its call).
            status = plan.status(task, name) if attempts else name
            if isinstance(status, str):
                if self._bare or not task.free_names:  # (`Plan.call`, no values to pick)
                    return [new_tuple(Call, (task, status, value, NO_VALUES))]
                return [plan.call(task, status, value, {**plan.values, **outputs})]
            # Skipped after failing: no output, the next step takes the same input.
        return new_tuple(Final, (value, False, "stop"))

    def spent_answer(self, plan: Plan) -> Final | None:
        """The output of the last step that answered, as when the steps after it are skipped.

        What the sequence answers once its tree budget lets it start no more
        steps: the steps not started give no output, as a step skipped after
        failing gives none (the sequence answers with the output before it).
        None (the run stops at its budget) when no step answered yet, when
        the first step not done failed and waits for its retry (its failure
        is no answer), or when the step that answered gives another type
        than the sequence's `output_type` (its last step's).
        """
        answered = _last_answer(plan, ((task, task.name) for task in self._tasks))
        if answered is None or answered[1].output_type != self.output_type:
            return None
        return Final(answered[0])


@attrs.frozen(init=False)
class Parallel(Workflow):
    """Steps that run at the same time on the same input; their outputs are merged.

    Results are committed in declaration order whatever order they finish in,
    so a replay reaches the same state.

    Example:
        >>> views = Parallel(optimist, pessimist, merge=lambda out: " / ".join(out.values()))

    Attributes:
        steps: The steps, as tasks.
        merge: A function of the mapping step name -> output (a step
            skipped after failing has no entry) whose result is the
            workflow's output; by default the mapping itself.
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
    # Whether every step's output is its plain data as it is (see `restore`).
    _as_is: bool = attrs.field(init=False, eq=False, repr=False, hash=False)
    _names: tuple[str, ...] = attrs.field(init=False, eq=False, repr=False, hash=False)  # in order

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
        object.__setattr__(self, "_as_is", all(t.restores_as_is for t in tasks))
        object.__setattr__(self, "_names", tuple(t.name for t in tasks))
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

    def input_problems(self, source: Any, giver: str) -> list[str]:
        """Every step gets the input: each one's problems with it."""
        return [p for task in self._tasks for p in task.input_problems(source, giver)]

    @property
    def output_type(self) -> Any:
        """The merge's return type, or ``dict[str, Any]``."""
        if self.merge is None:
            return dict[str, Any]
        return hints_of(self.merge).get("return", Any)

    def restore(self, plain: Any) -> Any:
        """The merged output; by default each step's output as its type."""
        if self.merge is None and isinstance(plain, dict):  # a skipped step has no entry
            if self._as_is:  # (`_restored` gives each output back as it is)
                if tuple(plain) == self._names:  # every step's, in order (the usual output)
                    return dict(plain)
                return {t.name: plain[t.name] for t in self._tasks if t.name in plain}
            return {t.name: _restored(t, plain[t.name]) for t in self._tasks if t.name in plain}
        return structured(plain, self.output_type)

    def plan(self, plan: Plan) -> list[Call] | Final:
        """Every step not yet done (retries included), or the merged output."""
        calls: list[Call] = []
        outputs: dict[str, Any] = {}
        by_step = plan.by_step
        input_ = plan.input
        bare = not self._free  # no step's templates need values
        for task in self._tasks:
            name = task.name
            attempts = by_step.get(name)
            if not attempts:  # not started yet: its first attempt (`Plan.status` without its call)
                status = name
            elif (last := attempts[-1]).ok:  # (`Plan.status` without making its `Done`)
                outputs[name] = last.value
                continue
            else:  # its next attempt, or skipped after failing: no output, so no entry
                next_attempt = plan.status(task, name)
                if not isinstance(next_attempt, str):
                    continue
                status = next_attempt
            if bare or not task.free_names:  # (`Plan.call`, no values to pick; a call per branch)
                calls.append(new_tuple(Call, (task, status, input_, NO_VALUES)))
            else:
                calls.append(plan.call(task, status, input_, plan.values))
        if calls:
            return calls
        if self.merge is None:  # the steps' outputs, as their results decode
            return new_tuple(Final, (outputs, True, "stop"))
        typed = {t.name: _restored(t, outputs[t.name]) for t in self._tasks if t.name in outputs}
        return Final(plain_data(_called(self, "merge", self.merge, typed)))


def _restored(task: Task, plain: Any) -> Any:
    try:
        return task.restore(plain)
    except Exception:
        return plain


def _labelled(branches: Any) -> tuple[dict[Any, Any] | None, list[Any]]:
    """A Route's ``branches`` as a dict, and the labels its pairs gave more than once: a
    mapping (or what has ``keys``, as `dict` reads one), or ``(label, step)`` pairs (2-tuples
    or 2-lists); None for what gives no labels (a list of steps or of strings, one step, a
    string, what fails to iterate or to read: a label whose hash fails, a pair whose length
    fails), which `dict` refuses with a bare error of its own or, for strings of two
    characters, misreads."""
    if isinstance(branches, (str, bytes)):
        return None, []
    try:
        # (a mapping by duck typing too: `keys` and item access, as `dict` reads it)
        if isinstance(branches, Mapping) or hasattr(branches, "keys"):
            return dict(branches), []
        pairs = list(branches)
    except Exception:  # (not a mapping, and no pairs: the caller names its type)
        return None, []
    labelled: dict[Any, Any] = {}
    twice: list[Any] = []
    for pair in pairs:
        try:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                return None, []
            label, step = pair
            if label in labelled and label not in twice:
                twice.append(label)
            labelled[label] = step
        except Exception:  # (an unhashable label, a hash or length that fails: never a pair)
            return None, []
    return labelled, twice


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
        branches: The step to run for each label (read-only: a `FrozenDict`,
            a copy of the mapping, or of the ``(label, step)`` pairs, given;
            make another `Route` to change them).
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
        branches: Mapping[str, Any] | Iterable[tuple[str, Any]],
        default: Any = None,
        *,
        name: str = "route",
    ) -> None:
        is_step = isinstance(router, (Agent, Workflow, Task))
        routing = as_task(router) if is_step else router
        # Read-only: the workflow is checked (labels, references) once, here.
        labelled, twice = _labelled(branches)
        tasks_by_label = frozen_dict(
            {label: as_task(step) for label, step in (labelled or {}).items()}
        )
        fallback = as_task(default) if default is not None else None
        self.__attrs_init__(router=routing, branches=tasks_by_label, default=fallback, name=name)
        branch_tasks = [*tasks_by_label.values(), *([fallback] if fallback else [])]
        tasks = ([routing] if is_step else []) + branch_tasks
        object.__setattr__(self, "_tasks", tuple(tasks))
        problems: list[str] = []
        if labelled is None:
            problems.append(
                "branches maps each label to its step (branches={'label': step, ...}), got "
                f"{type(branches).__name__}"
            )
        elif not tasks_by_label:
            problems.append("a Route needs at least one branch")
        problems.extend(
            f"branch label {label!r} is given more than once (each label has one step)"
            for label in twice
        )
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
            for task in branch_tasks:
                problems.extend(field_problems(task, {routing.name: routing.output_type}))
        router_name = routing.name if is_step else getattr(router, "__name__", "router")
        giver = f"it gets the route's input, and the router {router_name!r} takes"
        for task in branch_tasks:
            problems.extend(task.input_problems(self.input_type, giver))
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
    def shape(self) -> str:
        """The kind, the router (a step's name, or "a function") and which step each label runs."""
        router = self._router_task
        chooser = f"router {router.name!r}" if router is not None else "a router function"
        labels = ", ".join(f"{label!r} -> {task.name!r}" for label, task in self.branches.items())
        default = f"; default {self.default.name!r}" if self.default is not None else ""
        return f"Route ({chooser}; {labels}{default})"

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

    def input_problems(self, source: Any, giver: str) -> list[str]:
        """The router and every branch get the input: each one's problems with it."""
        router = self._router_task
        found = router.input_problems(source, giver) if router is not None else []
        if router is None and not type_accepts(self.input_type, source):
            found.append(
                f"the router {getattr(self.router, '__name__', 'router')!r} of {self.label} "
                f"takes {type_name(self.input_type)}, but {giver} {type_name(source)}"
            )
        return found + [p for t in self._branch_tasks for p in t.input_problems(source, giver)]

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
            from toolfold.runtime._task import _first_parameter_name, strict_value

            name = getattr(self.router, "__name__", "router")
            typed = strict_value(
                plan.input,
                self.input_type,
                f"the router {name!r} of {self.label}",
                _first_parameter_name(self.router),
            )
            label = _called(self, "router", self.router, typed)
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
            A run that reaches them before ``until`` holds finishes with
            ``finish_reason == "max_iterations"`` (else ``"stop"``).
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
            fields = fields_of(task.output_type)
            if fields is not None and until not in fields:
                lacks = (
                    f"no field {until!r} (fields: {', '.join(fields)})" if fields else "no fields"
                )
                problems.append(
                    f"until={until!r}: step {task.name!r} gives {type_name(task.output_type)}, "
                    f"which has {lacks}"
                )
        _reference_problems(task, {task.name: "itself"}, problems)
        problems.extend(task.input_problems(task.output_type, "its previous iteration gives"))
        self._build(problems)

    def _arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        options = {"until": self.until, "max_iterations": self.max_iterations, "name": self.name}
        return (self.step,), options

    def _free_names(self) -> frozenset[str]:
        """Names the step needs."""
        return self.step.free_names

    def input_problems(self, source: Any, giver: str) -> list[str]:
        """The step's problems with the input (its first iteration gets it)."""
        return self.step.input_problems(source, giver)

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
        passed, value = self._passed(plan)
        for iteration in range(passed + 1, self.max_iterations + 1):
            status = plan.status(task, f"{task.name}.{iteration}")
            if isinstance(status, str):
                self._keep(plan, iteration - 1, value)
                return [plan.call(task, status, value, dict(plan.values))]
            before = value
            if not status.skipped:
                value = status.value
            if plan.started(f"{task.name}.{iteration + 1}"):
                continue  # decided when this iteration ended: the condition did not hold
            self._keep(plan, iteration - 1, before)
            if not status.skipped and self._holds(value):
                return Final(value)
        # Out of iterations: the last output is the answer, and the run says `until` never held.
        self._keep(plan, self.max_iterations, value)
        return Final(value, reason="stop" if self.until is None else "max_iterations")

    def _passed(self, plan: Plan) -> tuple[int, Any]:
        """How many iterations an earlier decision on this run read past, and the value after them.

        An iteration is read past when it is done and the next one started
        (`plan` continues over it). The decision before this one kept that
        (`_keep`, on the run's plan chain: it goes with the run); it holds
        for ``plan`` when ``plan`` extends the plan it was kept for and no
        attempt since is at an iteration read past. Else (0, the input): the
        iterations are read from the first, as always. So a decision costs the
        same at every iteration instead of growing with the iterations before it.
        """
        kept_on = memos(plan)
        kept = None if kept_on is None else kept_on.get(id(self))
        if kept is None:
            return 0, plan.input
        attempts = plan.attempts
        loop, last, count, passed, value = kept
        if loop is not self or len(attempts) < count or attempts[count - 1] is not last:
            return 0, plan.input
        prefix = f"{self.step.name}."
        for attempt in attempts[count:]:
            base = attempt.base
            if base.startswith(prefix):
                number = base[len(prefix) :]
                if number.isdigit() and int(number) <= passed:
                    return 0, plan.input
        return passed, value

    def _keep(self, plan: Plan, passed: int, value: Any) -> None:
        """Keep that this decision read past ``passed`` iterations to ``value`` (see `_passed`)."""
        if not passed:
            return
        kept_on = memos(plan)
        if kept_on is None:
            return
        attempts = plan.attempts
        kept_on[id(self)] = (self, attempts[-1], len(attempts), passed, value)

    def spent_answer(self, plan: Plan) -> Final | None:
        """The last output of the iterations that answered, as at ``max_iterations``.

        None when no iteration answered yet, or when an iteration failed and
        waits for its retry (its failure is no answer). Its reason is the one
        the loop would end with having run out of iterations (``stop`` with
        no ``until``, else ``max_iterations``: ``until`` never held).
        """
        task = self.step
        iterations = range(1, self.max_iterations + 1)
        answered = _last_answer(plan, ((task, f"{task.name}.{i}") for i in iterations))
        if answered is None:
            return None
        return Final(answered[0], reason="stop" if self.until is None else "max_iterations")

    def _holds(self, plain: Any) -> bool:
        until = self.until
        if until is None:
            return False
        if isinstance(until, str):
            if not isinstance(plain, Mapping) or until not in plain:
                raise RunError(
                    f"{self.label}: until={until!r}, but step {self.step.name!r} gave "
                    f"{_short(plain)}, which has no field {until!r}"
                )
            return bool(plain[until])
        return bool(_called(self, "until", until, _restored(self.step, plain)))


def _last_answer(plan: Plan, steps: Iterable[tuple[Task, str]]) -> tuple[Any, Task] | None:
    """The output of the last of ``steps`` (a task, its base name) that answered, and its task.

    Steps are read in order up to the first not done. None when none
    answered, or when that first step not done has started: it failed and
    its retry is still to start (its failure is no answer).
    """
    last: tuple[Any, Task] | None = None
    for task, base in steps:
        status = plan.status(task, base)
        if isinstance(status, str):  # the first step not done: none after it started
            if plan.started(base):  # it failed and its retry is still to start
                return None
            break
        if not status.skipped:
            last = (status.value, task)
    return last
