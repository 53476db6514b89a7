"""Stop conditions: pure functions over a run's state.

The built-in conditions are plain data (they go into `RunConfig.stop_when`,
serialize with the state, and the reducer checks them at every step
boundary). Any callable ``(state) -> bool`` works as a condition too; being a
live object it cannot sit in the config, so the driver checks it and records
the decision as a `StopRequested` event (`stop_event`). So does a plain-data
condition given to `resume` only: it holds for that resume, so the state does
not store it, and the event names it instead (the stop says which tool, or
which limit, ended the run).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, Union, cast

import attrs

from toolfold._errors import UsageError

if TYPE_CHECKING:
    from toolfold.runtime.core._events import StopRequested
    from toolfold.runtime.core._messages import ToolResultPart
    from toolfold.runtime.core._state import RunState


def _finite_bound(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Refuse anything but a number as a bound, and NaN and infinities: a saved state
    cannot hold them (a text or a bool would fail, or change, at the first check)."""
    if type(value) is bool or not isinstance(value, (int, float)):
        name = f"{type(instance).__name__}.{attribute.name}"
        raise UsageError(f"{name}: expected a number, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        name = f"{type(instance).__name__}.{attribute.name}"
        raise UsageError(
            f"{name}: expected a finite number, got {value!r} (a saved state cannot "
            f"hold it); for no limit, leave {type(instance).__name__} out of stop_when"
        )


def _a_bool(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if type(value) is not bool:
        name = f"{type(instance).__name__}.{attribute.name}"
        raise UsageError(f"{name}: expected True or False, got {value!r}")


def _a_tool_name(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str):
        name = f"{type(instance).__name__}.{attribute.name}"
        raise UsageError(
            f"{name}: expected a tool name (str), got {type(value).__name__} {value!r}"
        )


def _at_least_one(function: str, argument: str, value: Any) -> None:
    """Refuse a bound that is not a number >= 1, naming the function and argument."""
    if type(value) is bool or not isinstance(value, (int, float)) or not value >= 1:
        raise UsageError(
            f"{function}({argument}): expected a number at least 1, "
            f"got {type(value).__name__} {value!r}"
        )


@attrs.frozen
class MaxSteps:
    """Stop once the current turn has made ``steps`` model calls.

    Attributes:
        steps: The number of model calls allowed in a turn.

    Raises:
        UsageError: ``steps`` is NaN or infinite (for no limit, leave the
            condition out).
    """

    steps: int = attrs.field(validator=_finite_bound)
    kind: Literal["max_steps"] = "max_steps"

    def __call__(self, state: RunState) -> bool:
        return state.turn_steps >= self.steps


@attrs.frozen
class TokenBudget:
    """Stop once ``tokens`` tokens (input plus output) are used: the run's own, or its tree's.

    Without ``tree`` the run's own model calls count (`RunState.usage`): the
    tokens of agents it uses as tools are in its `RunState.tree_usage` (and
    ``response.usage``) but not counted here. With ``tree=True`` the whole
    tree counts (`RunState.tree_usage`: the run's calls and every sub-run's,
    any depth, failed and dropped attempts included), and the budget goes
    down the tree: each agent the run uses as a tool starts with what is left
    of it when the step that calls it began (`handed_budget`), and a handoff
    target keeps it.

    Attributes:
        tokens: The budget in total tokens.
        tree: Count the sub-runs' tokens too and hand the budget down to them.

    Raises:
        UsageError: ``tokens`` is NaN or infinite (for no budget, leave the
            condition out), or ``tree`` is not a bool.
    """

    tokens: int = attrs.field(validator=_finite_bound)
    kind: Literal["token_budget"] = "token_budget"
    # Last and False by default: a state, agent file or history written before it loads
    # (and reads back) unchanged, and `TokenBudget(n)` is the same condition as ever.
    tree: bool = attrs.field(default=False, validator=_a_bool, kw_only=True)

    def __call__(self, state: RunState) -> bool:
        used = tree_tokens(state) if self.tree else state.usage.total_tokens
        return used >= self.tokens

    def __getstate__(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "kind": self.kind, "tree": self.tree}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # One pickled before ``tree`` existed has none: it counted the run's own calls.
        for name in ("tokens", "kind"):
            object.__setattr__(self, name, state[name])
        object.__setattr__(self, "tree", state.get("tree", False))


@attrs.frozen
class ToolCalled:
    """Stop after the step in which the model called the tool ``name``.

    Attributes:
        name: The tool name.

    Raises:
        UsageError: ``name`` is not text (a saved state would load it back
            as other text: ``None`` as ``'None'``).
    """

    name: str = attrs.field(validator=_a_tool_name)
    kind: Literal["tool_called"] = "tool_called"

    def __call__(self, state: RunState) -> bool:
        return any(c.call.name == self.name for c in state.calls)


StopCondition = Union[MaxSteps, TokenBudget, ToolCalled]  # noqa: UP007
"""A stop condition that is plain data (serializable, checked by the reducer)."""

StopPredicate = Callable[["RunState"], bool]


def max_steps(steps: int) -> MaxSteps:
    """Stop once the current turn has made ``steps`` model calls.

    Args:
        steps: The model calls allowed in a turn, at least 1.

    Raises:
        UsageError: ``steps`` is not a number (text, a bool) or is below 1.
    """
    _at_least_one("max_steps", "steps", steps)
    return MaxSteps(steps)


def token_budget(tokens: int, *, tree: bool = False) -> TokenBudget:
    """Stop once ``tokens`` tokens (input plus output) are used.

    Args:
        tokens: The budget, at least 1.
        tree: False (the default): count the run's own model calls only; the
            tokens of agents it uses as tools are not counted. True: count
            the whole tree (the run and every sub-run, any depth), and hand
            what is left of the budget down to each sub-run it starts, which
            stops there too (see `TokenBudget`).

    Raises:
        UsageError: ``tokens`` is not a number (text, a bool) or is below 1,
            or ``tree`` is not a bool.
    """
    _at_least_one("token_budget", "tokens", tokens)
    return TokenBudget(tokens, tree=tree)


def tool_called(name: str) -> ToolCalled:
    """Stop after the step in which the model called the tool ``name``.

    Args:
        name: The tool name.

    Raises:
        UsageError: ``name`` is not a non-empty str, or a name no tool can
            have (outside 1-64 of ``a-z A-Z 0-9 _ -``: the Python function's
            name ``soumettre_réponse`` of a tool named ``soumettre``, an MCP
            tool's ``files.read``, which the model calls ``files_read``).
    """
    from toolfold.toolkit._options import TOOL_NAME

    if not isinstance(name, str) or not name:
        raise UsageError(
            f"tool_called(name): expected a tool name (a non-empty str), "
            f"got {type(name).__name__} {name!r}"
        )
    if not TOOL_NAME.fullmatch(name):
        # (checked here, not by ToolCalled: a state saved with one still loads)
        raise UsageError(
            f"tool_called({name!r}): no tool can have this name (1-64 characters of "
            "a-z A-Z 0-9 _ -), so the condition would never hold: give the tool's name "
            "as the model calls it (its name=...)"
        )
    return ToolCalled(name)


def stop_reason(state: RunState, conditions: Iterable[StopCondition | StopPredicate]) -> str | None:
    """The reason of the first condition that holds, or None.

    A data condition's reason is its kind (``"max_steps"``,
    ``"token_budget"``, ``"tool_called"``); a callable's is
    ``"stop_condition"``.

    Raises:
        UsageError: ``state`` is no `RunState` (a `Response` holds one: pass
            its ``.state``).
    """
    _check_state("stop_reason", state)
    return holding_reason(state, conditions)


def holding_reason(
    state: RunState, conditions: Iterable[StopCondition | StopPredicate]
) -> str | None:
    """`stop_reason` for the reducer, whose state is a `RunState` (no test per step)."""
    condition = _holding(state, conditions)
    return None if condition is None else _reason(condition)


def stop_event(
    state: RunState, conditions: Iterable[StopCondition | StopPredicate]
) -> StopRequested | None:
    """The `StopRequested` a driver records when one of ``conditions`` holds, else None.

    Its reason is the first holding condition's (as `stop_reason` says); a
    plain-data condition rides along, so the stop names it.
    """
    condition = _holding(state, conditions)
    if condition is None:
        return None
    from toolfold.runtime.core._events import StopRequested  # (it imports this module)

    return StopRequested(_reason(condition), condition if isinstance(condition, _DATA) else None)


def _holding(
    state: RunState, conditions: Iterable[StopCondition | StopPredicate]
) -> StopCondition | StopPredicate | None:
    for condition in conditions:
        if condition(state):
            return condition
    return None


def _check_state(function: str, state: object) -> None:
    """Refuse ``state`` with `not_a_state` unless it is a `RunState`.

    A type test up front, not after a failure: a `Response` has a
    ``finish_reason`` of its own, and a callable condition may hold for
    anything, so the work would not fail on a wrong value.
    """
    from toolfold.runtime.core._state import RunState, not_a_state  # (it imports this module)

    if not isinstance(state, RunState):
        raise not_a_state(function, state)


def _reason(condition: StopCondition | StopPredicate) -> str:
    return condition.kind if isinstance(condition, _DATA) else "stop_condition"


_DATA = (MaxSteps, TokenBudget, ToolCalled)


def stopping_condition(state: RunState) -> StopCondition | None:
    """The plain-data condition that finished ``state``, else None.

    A stop recorded by a driver names its condition (`StopRequested`); the
    reducer stops at the first condition of ``config.stop_when`` that holds,
    which still holds in the finished state. None for a run that did not
    stop at a condition: it answered, failed, reached ``config.max_steps``,
    or a callable stopped it.
    """
    reason = state.finish_reason
    if state.phase != "finished" or reason not in _KINDS:
        return None
    # After a stop only a changed step limit may be reduced and keep it.
    for event in reversed(state.log):
        if event.kind == "stop_requested":
            return event.condition
        if event.kind != "step_limit_changed":
            break
    for condition in state.config.stop_when:
        if condition.kind == reason and condition(state):
            return condition
    return None


_KINDS = ("max_steps", "token_budget", "tool_called")


def stopping_result(state: RunState) -> ToolResultPart | None:
    """The result of the call that stopped a run finished by `tool_called`, else None.

    The call is the last of the step to the condition's tool (the condition
    `stop_reason` names, or the one the stop names when the run does not
    store it: given to `resume` only). A workflow step, or an agent used as a
    tool, stopped this way passes that result on as its output.

    Raises:
        UsageError: ``state`` is no `RunState` (a `Response` holds one: pass
            its ``.state``).
    """
    _check_state("stopping_result", state)
    condition = stopping_condition(state) if state.finish_reason == "tool_called" else None
    if isinstance(condition, ToolCalled):
        for record in reversed(state.calls):
            if record.call.name == condition.name and record.result is not None:
                return record.result
    return None


def stop_answer(
    state: RunState, who: str, stopped_by: str | None = None
) -> ToolResultPart | str | None:
    """What a run that a stop condition finished answers, else None.

    A `tool_called` stop answers with that call's result (`stopping_result`).
    A run stopped at a limit or by a callable did not answer: the text is an
    error that names ``who`` and why it stopped, with the limit's value
    (``Error: agent 'research' stopped at its limit max_steps=3 after 3 model
    calls without answering``), so whoever reads it (a calling model, a
    workflow's ``on_error``) can react. ``stopped_by`` names the ``stop_when``
    callable that stopped it, where the caller knows it (a state does not
    keep callables). None for a run that answered, or that did not finish.
    """
    reason = state.finish_reason
    if state.phase != "finished" or reason not in STOP_REASONS:
        return None
    if reason == "tool_called":
        result = stopping_result(state)
        if result is not None:
            return result
        return f"Error: {who} was stopped by tool_called, but no result of that tool is found"
    if reason == "stop_condition":
        cause = f"was stopped by a stop_when condition ({stopped_by or 'stop_condition'})"
    else:
        cause = f"stopped at its limit {_limit(state, reason)}"
    steps = state.turn_steps  # (what max_steps counts: this turn's model calls)
    calls = f"{steps} model call" + ("" if steps == 1 else "s")
    return f"Error: {who} {cause} after {calls} without answering"


STOP_REASONS = frozenset((*_KINDS, "stop_condition"))
"""The finish reasons of a run that a stop condition (or its ``max_steps``) ended."""


def _limit(state: RunState, reason: str) -> str:
    condition = stopping_condition(state)
    if isinstance(condition, TokenBudget) and condition.tree:
        tree = tree_tokens(state)
        own = state.usage.total_tokens
        used = f"{tree} tokens used, {tree - own} of them by its sub-runs"
        return f"{describe_condition(condition)} ({used})"
    if isinstance(condition, TokenBudget):
        used = f"{state.usage.total_tokens} tokens used"
        # Dropped answers (`AttemptDropped`: answers the output type rejected, or
        # streams cut after their usage came) were billed and count, but are not
        # among the model calls the message goes on to count: say so.
        dropped = [e.usage for e in state.log if e.kind == "attempt_dropped"]
        dropped = [u for u in dropped if u.total_tokens]
        tokens = sum(u.total_tokens for u in dropped)
        if tokens:
            answers = "an answer" if len(dropped) == 1 else f"{len(dropped)} answers"
            used += f", {tokens} of them by {answers} dropped to ask the model again"
        return f"{describe_condition(condition)} ({used})"
    if condition is not None:
        return describe_condition(condition)
    if reason == "max_steps" and state.turn_steps >= state.config.max_steps:
        return f"max_steps={state.config.max_steps}"  # the run's own limit, not a condition
    return f"({reason})"  # a stop recorded without its condition


def describe_condition(condition: StopCondition) -> str:
    """``condition`` as its builder reads: ``max_steps=3``, ``token_budget=5000``, ``tool_called('final')``."""
    if isinstance(condition, MaxSteps):
        return f"max_steps={condition.steps}"
    if isinstance(condition, TokenBudget):
        return f"token_budget={condition.tokens}" + (", tree=True" if condition.tree else "")
    return f"tool_called({condition.name!r})"


def is_tree_budget(condition: object) -> bool:
    """Whether ``condition`` is a tree budget (``token_budget(n, tree=True)``)."""
    return type(condition) is TokenBudget and condition.tree


def has_tree_budget(conditions: Iterable[StopCondition | StopPredicate]) -> bool:
    """Whether ``conditions`` hold a tree budget (``token_budget(n, tree=True)``)."""
    return any(is_tree_budget(c) for c in conditions)


WORKFLOW_SETTING = "toolfold.workflow"
"""The setting a workflow's run records its kind under (`Workflow.shape`): it marks the
run as a workflow's for the reducer (see `_steps.counts_as_failure`)."""


def workflow_budget(state: RunState) -> bool:
    """Whether ``state`` is a workflow's run with a tree budget (one used as a tool under one).

    Only `Workflow._within` gives a workflow's config stop conditions, so no
    run recorded before the tree budget reached workflows has one: what
    depends on this leaves their replay unchanged.
    """
    config = state.config
    return (
        bool(config.stop_when)
        and WORKFLOW_SETTING in config.settings
        and has_tree_budget(config.stop_when)
    )


def stopped_at_handed(
    state: RunState,
    child: RunState | None,
    conditions: Iterable[StopCondition | StopPredicate] = (),
) -> bool:
    """Whether ``child``, the sub-run of a call of ``state``'s current step, stopped at the
    tree budget the step handed it (`handed_budget`, with ``conditions`` given to a resume).

    That is: it finished with ``token_budget``, that very budget is in its
    configuration, and it holds there.
    """
    if child is None or child.finish_reason != "token_budget":
        return False
    handed = handed_budget(state, conditions)
    return handed is not None and handed in child.config.stop_when and handed(child)


def steps_stop(state: RunState) -> StopRequested | None:
    """The stop a workflow's driver records instead of a decision that would start steps.

    In a workflow's run with a tree budget (`workflow_budget`) the step
    boundary does not stop at that budget after a round whose steps all
    answered (see `_steps.boundary`): the planner's decision costs no
    tokens, and its final answer hands back what the steps gave. A decision
    that starts steps is not recorded once the budget holds: this
    `StopRequested` (reason ``token_budget``, naming the budget) is. None
    when the run is no such workflow's or its budget does not hold.
    """
    if not workflow_budget(state):
        return None
    return stop_event(state, [c for c in state.config.stop_when if is_tree_budget(c)])


def handed_budget(
    state: RunState, conditions: Iterable[StopCondition | StopPredicate] = ()
) -> TokenBudget | None:
    """The budget a sub-run started in ``state``'s current step gets, or None.

    For the run's tree budgets (``token_budget(n, tree=True)`` in its
    config, and any in ``conditions``: those given to a resume only), the
    tightest of what is left of them when the step began: ``n`` minus the
    tree's tokens then (`step_start_tokens`), as ``TokenBudget(left,
    tree=True)``. Every sub-run of one step gets the same, whatever order its
    calls run in, so a replay, a resume or a durable run hands down the same.
    ``left`` may be 0 or less: the step's model call spent the budget.
    """
    budgets = [
        c.tokens
        for c in (*state.config.stop_when, *conditions)
        if type(c) is TokenBudget and c.tree
    ]
    if not budgets:
        return None
    return TokenBudget(min(budgets) - step_start_tokens(state), tree=True)


def spent_reason(state: RunState, conditions: Iterable[StopCondition | StopPredicate] = ()) -> str:
    """Why a sub-run of ``state``'s current step is not started: whose tree budget is spent.

    For a step whose `handed_budget` is 0 or less: the caller (``state``'s
    agent), its tightest tree budget, and the tree's tokens when the step
    began (`step_start_tokens`), as in ``its caller, agent 'lead', has spent
    its token_budget=90, tree=True (100 tokens used when this step began)``.
    """
    budgets = [c for c in (*state.config.stop_when, *conditions) if is_tree_budget(c)]
    tightest = min(budgets, key=lambda c: cast(TokenBudget, c).tokens)
    caller = "its caller" if state.agent is None else f"its caller, agent {state.agent!r},"
    used = step_start_tokens(state)
    return (
        f"{caller} has spent its {describe_condition(cast(TokenBudget, tightest))} "
        f"({used} tokens used when this step began)"
    )


def tree_tokens(state: RunState) -> int:
    """The tokens of ``state``'s whole tree, as a tree budget counts them.

    `RunState.tree_usage`'s total, with the current step's sub-runs read
    from its calls: at the step's boundary, where the reducer checks its
    conditions, the log does not hold the step's last result yet.
    """
    step = 0
    for call in state.calls:
        if call.child is not None:
            step += call.child.tree_usage.total_tokens
    return step_start_tokens(state) + step


def step_start_tokens(state: RunState) -> int:
    """The tree's tokens when ``state``'s current step began: its model call counted, its tools not.

    `RunState.tree_usage` without the sub-runs of the step's own calls (those
    returned since its model answered, and those still open); the sub-runs a
    resume dropped to run again (`AttemptDropped`) count, as they do there.
    """
    from toolfold.runtime.core._state import logged_sub_runs  # (it imports this module)

    return state.usage.total_tokens + logged_sub_runs(state).done
