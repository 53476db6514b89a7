"""The errors a run raises, each carrying the state to resume from.

A failed model call keeps the provider's error type with the state from
before the call; an observer (``on_event``, ``on_step``, a stop condition,
a handoff's input filter) that raises becomes a `RunError`; a run the core
failed (too many tool retries, an output it could not validate) raises the
error its failure names; ``on_tool_error="raise"`` raises a failed call's
`ToolExecutionError` with the state holding the results of the step's calls
that ended and the failed calls still to run (counting the usage of the
sub-runs the failed calls made).
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import attrs

from toolfold._errors import (
    OutputValidationError,
    RunError,
    ToolExecutionError,
    ToolfoldError,
    ToolRetriesExceededError,
    UsageError,
    add_note,
    restored_error,
)
from toolfold.runtime.core._events import AttemptDropped, Event, RunStarted
from toolfold.runtime.core._messages import NO_USAGE, Usage
from toolfold.runtime.core._reducer import countable, reduce
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._steps import FAILING_OUTCOMES, unread_arguments_error
from toolfold.runtime.core._stop import (
    StopCondition,
    StopPredicate,
    handed_budget,
    spent_reason,
    stop_answer,
    stopped_at_handed,
)
from toolfold.runtime.drive._executor import ToolOutcome, agent_run_by
from toolfold.toolkit._results import describe_exception, quoted

if TYPE_CHECKING:
    from toolfold.toolkit._tool import Tool

# What resuming the state of an `observer_failure` does, by what raised. An
# observer is given per call, so a resume calls only the ones given to it; a
# stop condition and a handoff's input filter belong to the agent (or the
# call), and resuming runs them again before anything else.
_RESUMING = {
    "observer": "the run up to that point, and resuming it goes on from there, calling only "
    "the observers given to that resume",
    "stop_when": "the run before its next model call, and resuming it calls this condition "
    "again first: fix the function, or resume without it (an agent's own: resume with "
    "agent.evolve(stop_when=...))",
    "input_filter": "the run before the handoff, and resuming it hands off again, calling "
    "this input_filter again: fix the function, or resume with an agent whose Handoff has "
    "another input_filter",
}


def not_started_text(who: str, reason: str) -> str:
    """The error result of a call whose sub-run was not started: its caller's tree budget is spent.

    ``who`` names the agent (`agent_label`); ``reason`` says whose budget
    and how far it is spent (`spent_reason`).
    """
    return f"Error: {who} was not started: {reason}"


def stopped_content(
    state: RunState,
    who: str,
    stopped_by: str | None = None,
    *,
    names_handed: Callable[[], bool] | None = None,
) -> tuple[str, bool]:
    """What the calling model sees of a sub-run a stop condition (or a limit) ended.

    As (text, is_error). A `tool_called` stop: that call's result (an error
    result when the call failed). A limit (``max_steps``, ``token_budget``)
    or a ``stop_when`` callable: the sub-run did not answer, so an error
    naming ``who`` (``agent 'research'``) and why it stopped, with the
    limit, that the model can react to (a workflow step fails the same way).
    ``stopped_by`` names the ``stop_when`` callable where the caller knows it.

    A sub-run that ``who`` handed to another agent of its handoffs is named
    as that run, with the agent it reached (`handed_run`): ``Error: the run
    of agent 'research' (tool 'ask'), handed to agent 'writer', stopped at
    ...``, unless ``names_handed`` (asked only for such a run) says not to:
    results recorded before named ``who`` alone (a durable run's replay).
    """
    handed = handed_to(state)
    if handed is not None and (names_handed is None or names_handed()):
        who = handed_run(who, handed[0]) + ","
    answer = stop_answer(state, who, stopped_by)
    if isinstance(answer, str):
        return answer, True
    assert answer is not None, f"{state.finish_reason!r} is not a stop condition's reason"
    return answer.content, answer.is_error


def run_started(state: RunState) -> RunStarted | None:
    """The `RunStarted` event ``state``'s log begins with, or None (no such event first)."""
    first = state.log[0] if len(state.log) else None
    return first if isinstance(first, RunStarted) else None


def started_by(state: RunState) -> str | None:
    """The name of the agent (or workflow) that started the run of ``state``, if named."""
    started = run_started(state)
    return None if started is None else started.agent


def handed_to(state: RunState) -> tuple[str, str] | None:
    """(running, started) of a run a handoff gave to another agent: the name of the agent
    running ``state`` and of the one its run started with (`started_by`); None while
    the agent it started with runs it (or when the names are not known)."""
    started = started_by(state)
    running = state.agent
    if running is None or started is None or running == started:
        return None
    return running, started


def handed_run(who: str, running: str) -> str:
    """How an error names a run started by ``who`` (``agent 'research' (tool 'ask')``) that
    a handoff gave to agent ``running``: ``the run of agent 'research' (tool 'ask'), handed
    to agent 'writer'`` (what it did and spent is the run's, not one agent's)."""
    return f"the run of {who}, handed to agent {running!r}"


def observer_failure(
    what: str,
    exc: Exception,
    state: RunState,
    kind: Literal["observer", "stop_when", "input_filter"],
) -> RunError:
    """The error of a run whose ``what`` (of ``kind``) raised ``exc``: it says what resuming does."""
    # Tools may already have run: the error must keep the state they produced.
    return RunError(
        f"the {what} raised {describe_exception(exc)}; the error's state is {_RESUMING[kind]}",
        state,
    )


def input_filter_returned(what: str, problem: str, state: RunState) -> RunError:
    """The error of a run whose ``what`` (a handoff's input filter) returned no messages."""
    return RunError(
        f"the {what} returned no list of messages ({problem}); the error's state is "
        f"{_RESUMING['input_filter']}",
        state,
    )


def input_filter_unfit(what: str, problem: str, state: RunState) -> RunError:
    """The error of a run whose ``what`` (a handoff's input filter) returned a conversation
    no provider takes (``problem``: `handed_conversation_problem`)."""
    return RunError(
        f"the {what} returned a conversation no provider takes: {problem}; keep each "
        f"assistant message that calls tools together with the tool message of its results, "
        f"or drop both (toolfold.drop_tool_calls does); the error's state is "
        f"{_RESUMING['input_filter']}",
        state,
    )


def raise_tool_error(
    state: RunState,
    outcomes: Sequence[ToolOutcome],
    conditions: Iterable[StopCondition | StopPredicate] = (),
    tools: Mapping[str, Tool[..., Any]] | None = None,
    commit: Callable[[RunState, dict[int, ToolOutcome]], RunState] | None = None,
    show: Callable[[Event, RunState], None] | None = None,
) -> None:
    """Raise the `ToolExecutionError` of the round's first failed call, if any.

    Its cause is that call's exception (`outcome_cause`: a `TimeoutError` for a
    call that ran past its timeout); each further failed call of the round adds
    a note (``tool 'b' failed too: Error: ...``), its exception being the one
    the run can raise (the first).

    The error's state is the run before the round (``state``) with the
    results of the round's calls that did not fail committed by ``commit``
    (by index; None commits none), so that resuming it runs only the failed
    calls again, and counting the usage of the sub-runs the failed calls made
    (see `with_dropped_sub_runs`). ``conditions``: those given to a resume
    only; ``tools``: the run's, by name (which of them run agents: `agent_run_by`).
    ``show``: shows the `AttemptDropped` that counts those sub-runs to ``on_event``,
    as the error is raised (an observer that raises: its `RunError` is raised, the
    observer's exception its cause, and this error that exception's context; Ctrl-C
    there is raised with this error's state, see `show_failing`).
    """
    failed = _failed_calls(state, outcomes, conditions, tools)
    if not failed:
        return
    first, error = failed[0]
    for index, _ in failed[1:]:
        also = outcomes[index]
        note = f"tool {also.tool_name!r} failed too: {quoted(also.content)}"
        add_note(error, note)
    dropped = {index for index, _ in failed}
    ended = {i: o for i, o in enumerate(outcomes) if i not in dropped}
    reached = commit(state, ended) if commit is not None and ended else state
    error.state = with_dropped_sub_runs(
        reached, [(outcomes[i].call_id, outcomes[i].child) for i in sorted(dropped)]
    )
    try:
        _raise_showing(error, reached, outcome_cause(outcomes[first]), show)
    finally:  # (the error's traceback holds this frame: no cycle through it, see there)
        del failed, error


def outcome_cause(outcome: ToolOutcome) -> BaseException | None:
    """The exception a failed call's error is chained to: the one its tool raised (a sub-run's
    error for an agent used as a tool), a `TimeoutError` saying so for a call that ran past
    its timeout; None for a call that raised nothing (an unknown tool...)."""
    if outcome.exception is not None:
        return outcome.exception
    if outcome.outcome == "timeout":
        return TimeoutError(outcome.content.removeprefix("Error: "))
    return None


def answered_cause(state: RunState) -> BaseException | None:
    """The error of a call the core answered itself (arguments that did not read) whose tool
    used up its retries and failed ``state``'s run, or None: no executor's outcome holds it
    (`failure_cause`), so it is made again from the call, as the core worded it."""
    error = state.error
    if error is None or error.kind != "tool_retries_exceeded":
        return None
    spec = state.config.tool(error.tool_name) if error.tool_name is not None else None
    if spec is None:
        return None
    for call in reversed(state.calls):
        if (
            call.call.name == error.tool_name
            and call.outcome == "invalid_arguments"
            and call.call.arguments is None
        ):
            return unread_arguments_error(call.call, spec)
    return None


def failure_cause(state: RunState, outcomes: Sequence[ToolOutcome] | None) -> BaseException | None:
    """The exception of the call of ``outcomes`` (the round that ended in ``state``) whose tool
    used up its retries and failed the run (`outcome_cause`), or None.

    ``run_failure``'s error is raised from it, so a caller reaches the tool's
    own exception (a workflow step's: a user's class, a provider's `RateLimitError`)
    through ``__cause__``, not only its text in the state.
    """
    error = state.error
    if error is None or error.kind != "tool_retries_exceeded" or not outcomes:
        return None
    for outcome in outcomes:
        if outcome.tool_name == error.tool_name and outcome.outcome in FAILING_OUTCOMES:
            cause = outcome_cause(outcome)
            if cause is not None:
                return cause
    return None


def _failed_calls(
    state: RunState,
    outcomes: Sequence[ToolOutcome],
    conditions: Iterable[StopCondition | StopPredicate],
    tools: Mapping[str, Tool[..., Any]] | None,
) -> list[tuple[int, ToolExecutionError]]:
    """The round's failed calls, by index, with the `ToolExecutionError` of each (`tool_failure`)."""
    failed: list[tuple[int, ToolExecutionError]] = []
    for index, outcome in enumerate(outcomes):
        error = tool_failure(
            state,
            outcome.tool_name,
            outcome.outcome,
            outcome.content,
            outcome.child,
            conditions,
            who=agent_run_by(tools.get(outcome.tool_name)) if tools else None,
        )
        if error is not None:
            failed.append((index, error))
    return failed


def _raise_showing(
    error: ToolExecutionError | UsageError,
    reached: RunState,
    cause: BaseException | None,
    show: Callable[[Event, RunState], None] | None,
) -> NoReturn:
    """Raise ``error`` (from ``cause``), showing the `AttemptDropped` its state ends with
    (when it is not ``reached``, the state before the dropped sub-runs were counted)."""
    try:
        try:
            if cause is not None:
                raise error from cause
            raise error
        except type(error):
            if show is not None and error.state is not None and error.state is not reached:
                show(error.state.log[-1], error.state)
            raise
    finally:
        # The error's traceback holds this frame: without its own error in it, the
        # error (and the state on it) is freed by reference counting once the caller
        # drops it, not kept in a reference cycle for the cyclic collector.
        del error, cause


_MODEL_MISUSES: weakref.WeakSet[UsageError] = weakref.WeakSet()
"""The `UsageError` instances testing models raised for their misuse (`testing_misuse`), which a
sub-run's caller raises on, its message prefixed with the call's tool (`raise_sub_run_misuse`).
A provider model's `UsageError` (closed while its call was in flight) is none: a sub-run's
caller makes it an error result."""


def testing_misuse(message: str) -> UsageError:
    """A `UsageError` for a testing model's misuse, which a sub-run's caller raises on, prefixed.

    `ScriptedModel`, `TestModel` and `FunctionModel` raise it when they are
    used wrongly (a script out of entries, ``call_tools`` naming no tool of the
    request, a function returning no reply): an error result would hide that
    from the test (`raise_sub_run_misuse`).
    """
    error = UsageError(message)
    _MODEL_MISUSES.add(error)
    return error


def raise_sub_run_misuse(
    state: RunState,
    outcomes: Sequence[ToolOutcome],
    tools: Mapping[str, Tool[..., Any]],
    commit: Callable[[RunState, dict[int, ToolOutcome]], RunState],
    failed_too: bool = False,
    conditions: Iterable[StopCondition | StopPredicate] = (),
    show: Callable[[Event, RunState], None] | None = None,
) -> None:
    """Raise the `UsageError` a sub-run of the round raised, if any, its message beginning with
    the call's tool and the sub-run's agent (`failed_in`), as a tool error's at depth does.

    A sub-run of an agent used as a tool whose testing model raised a
    `UsageError` for its misuse (a `ScriptedModel` out of entries, a
    `TestModel` naming no tool of its request, a `FunctionModel` returning no
    reply; see `testing_misuse`) raises it on (a workflow used as a tool
    does not: its step's agent that raises one fails the step, and the
    workflow's failure is the call's error result): an error result
    would hide it from the test or program, which a top run raises it to. A
    tool's own exceptions stay error results, and so do a sub-run's other
    errors (a `UsageError` its resume raises included: the run made that
    call, not the caller). The error's
    state is that of the `ToolExecutionError` ``on_tool_error="raise"``
    raises: ``state`` with the results of the round's other calls committed
    by ``commit`` (the failed ones too, unless ``failed_too``, with
    ``on_tool_error="raise"``), the misused calls still to run, and the usage
    of their sub-runs counted (see `with_dropped_sub_runs`). ``show``: as
    `raise_tool_error`'s.
    """
    misused = [
        index
        for index, outcome in enumerate(outcomes)
        if isinstance(outcome.exception, UsageError)
        and outcome.exception in _MODEL_MISUSES
        and agent_run_by(tools.get(outcome.tool_name)) is not None
    ]
    if not misused:
        return
    dropped = set(misused)
    if failed_too:
        dropped.update(index for index, _ in _failed_calls(state, outcomes, conditions, tools))
    ended = {i: o for i, o in enumerate(outcomes) if i not in dropped}
    reached = commit(state, ended) if ended else state
    misuse = outcomes[misused[0]]
    error = misuse.exception
    assert isinstance(error, UsageError)
    where = failed_in(misuse.tool_name, agent_run_by(tools.get(misuse.tool_name)), misuse.child)
    error.args = (f"tool {misuse.tool_name!r} failed{where}: {error}", *error.args[1:])
    error.state = with_dropped_sub_runs(
        reached, [(outcomes[i].call_id, outcomes[i].child) for i in sorted(dropped)]
    )
    _raise_showing(error, reached, None, show)


def with_dropped_sub_runs(
    state: RunState, children: Iterable[tuple[str, RunState | None]]
) -> RunState:
    """``state`` counting the usage of the sub-runs a round's failed calls made.

    ``on_tool_error="raise"`` leaves the failed calls' results out of the
    error's state (they stay to run), and with them the sub-runs (agents used
    as tools) those calls made, by call id in ``children``. Their model calls were billed: an
    `AttemptDropped` keeps their `RunState.tree_usage` counted in the state's.
    A sub-run a call went on with (kept on the call, which the state still
    holds) counts only for what it added.
    """
    kept = {call.call.id: call.child for call in state.calls if call.child is not None}
    dropped = NO_USAGE
    for call_id, child in children:
        if child is None:
            continue
        used = child.tree_usage
        before = kept.get(call_id)
        if before is not None:
            used = _less(used, before.tree_usage)
        dropped = dropped + used
    dropped = countable(dropped)  # (a model's negative count is left out as 0)
    if dropped == NO_USAGE:
        return state
    return reduce(state, AttemptDropped(sub_run_usage=dropped))


def _less(usage: Usage, earlier: Usage) -> Usage:
    """What ``usage`` (a sub-run's) added to ``earlier`` (the same sub-run's, before it went on)."""
    counts = {
        a.name: getattr(usage, a.name) - getattr(earlier, a.name) for a in attrs.fields(Usage)
    }
    return Usage(**{name: max(count, 0) for name, count in counts.items()})


def tool_failure(
    state: RunState,
    tool_name: str,
    outcome: str | None,
    content: str,
    child: RunState | None = None,
    conditions: Iterable[StopCondition | StopPredicate] = (),
    *,
    who: str | None = None,
    names_agent: Callable[[], bool] | None = None,
) -> ToolExecutionError | None:
    """The error ``on_tool_error="raise"`` raises for a call's outcome, or None when it succeeded.

    ``state`` is the run before the step's results (the error's state);
    ``child`` the call's sub-run, if it ran one; ``conditions`` the stop
    conditions given to a resume only; ``who`` how errors name the agent (or
    workflow) the tool runs (`agent_label`), None for a tool that runs none.
    A sub-run the run's tree budget ended is no failure (see
    `budget_stopped`): the run stops at that budget instead. The message
    names the agent whose sub-run failed where the tool's name does not say
    it (`failed_in`; not for a timeout: the caller cut the call off, its
    sub-run did not fail), unless ``names_agent`` (asked only then) says not to: a
    durable run recorded before, whose nested error results keep the text.
    """
    if outcome not in ("error", "timeout"):
        return None
    if outcome == "error" and budget_stopped(state, child, content, conditions, who):
        return None
    where = "" if outcome == "timeout" else failed_in(tool_name, who, child)
    if where and names_agent is not None and not names_agent():
        where = ""
    return ToolExecutionError(f"tool {tool_name!r} failed{where}: {content}", state)


def failed_in(tool_name: str, who: str | None, child: RunState | None) -> str:
    """Which agent's run failed, as the error of a call of ``tool_name`` (an agent used as a
    tool, ``who``) whose sub-run ``child`` failed says it: `` in agent 'research'``, or
    `` in the run of agent 'research', handed to agent 'writer'`` after a handoff
    (`handed_run`).

    ``""`` where the tool's name says it (an agent named as its tool, not
    handed on), for a workflow, for a call that ran no sub-run, and for a
    sub-run that finished: the call failed after it (an ``as_tool(output=...)``
    function), or a stop ended it, whose text names the agent already.
    """
    if who is None or child is None or not who.startswith("agent ") or child.phase == "finished":
        return ""
    handed = handed_to(child)
    if handed is not None:
        return f" in {handed_run(f'agent {handed[1]!r}', handed[0])}"
    agent = child.agent
    return "" if agent is None or agent == tool_name else f" in agent {agent!r}"


def budget_stopped(
    state: RunState,
    child: RunState | None,
    content: str,
    conditions: Iterable[StopCondition | StopPredicate] = (),
    who: str | None = None,
) -> bool:
    """Whether a call's error result is the stop of the tree budget ``state``'s step handed down.

    Only a call of an agent (or a workflow) used as a tool, named ``who``
    (`agent_label`), can be: either nothing was left when the step began and
    its sub-agent was not started (no sub-run, and exactly the result
    `not_started_text` gives for it), or its sub-run stopped at that budget
    (``token_budget(left, tree=True)`` from `handed_budget`, in its
    configuration, reached) and the result is what `stopped_content` says of
    it (an ``as_tool(output=...)`` function that failed on it is a failure).
    Either way the run's own tree budget is spent once the step's results are
    in, and the run stops there (``finish_reason == "token_budget"``), as with
    ``on_tool_error="return"``. Read from the state, the tool and the call's
    result only: a replay decides the same. A run without a tree budget has
    none (what it always did).
    """
    if who is None or (not state.config.stop_when and not conditions):
        return False
    handed = handed_budget(state, conditions)
    if handed is None:
        return False
    if child is None:
        return handed.tokens <= 0 and content == not_started_text(
            who, spent_reason(state, conditions)
        )
    if not stopped_at_handed(state, child, conditions):
        return False
    # (a result recorded before named a handed sub-run by the agent it started with: replayed so)
    return content in (
        stopped_content(child, who)[0],
        stopped_content(child, who, names_handed=lambda: False)[0],
    )


_blocking_depth: ContextVar[int] = ContextVar("toolfold_blocking_depth", default=0)
"""How many blocking sub-runs (agents or workflows used as tools) the code running is inside."""


@contextlib.contextmanager
def blocking_sub_run() -> Iterator[None]:
    """Count a blocking sub-run (one level more on the caller's stack) while it runs."""
    token = _blocking_depth.set(_blocking_depth.get() + 1)
    try:
        yield
    finally:
        _blocking_depth.reset(token)


def nested_too_deep() -> bool:
    """Whether the code running is in blocking sub-runs nested deep enough to fill the stack.

    Each level takes about a dozen frames, so from a 25th of the recursion
    limit on (40 levels with the default 1,000) nesting holds half the stack
    or more: a RecursionError there comes from the depth. Shallower, it is
    some other code's recursion (a model adapter's, say), which is not.
    """
    return _blocking_depth.get() >= max(sys.getrecursionlimit() // 25, 1)


def too_deep(where: str, exc: RecursionError) -> str:
    """What an error says of a RecursionError at ``where`` when `nested_too_deep` holds.

    A blocking run (``run``, ``resume``) runs each agent or workflow it uses
    as a tool on its own stack, about a dozen frames a level: Python's
    recursion limit stops such a chain at about 89 levels. ``arun`` and
    ``stream`` take fewer frames a level and go about twice as deep (they
    stop too, near 190). Retrying the same blocking run fails again.
    """
    return (
        f"{where} hit Python's recursion limit ({describe_exception(exc)}): the run is nested "
        f"too deep for a blocking run ({_blocking_depth.get()} agents or workflows used as "
        "tools, each run on the caller's stack; about 89 levels fit with the default limit); "
        "run the outermost one with arun (or stream), which goes about twice as deep, or "
        "nest fewer levels; retrying it as a blocking run fails the same way"
    )


def model_failure(
    exc: Exception, state: RunState, step: int, *, counted: bool = False, own: bool = False
) -> ToolfoldError:
    """The error of a run whose model call of ``step`` failed with ``exc``, ``state`` its state.

    ``counted``: ``state`` counts the usage the call's stream reported before it
    failed (`AttemptDropped`): the message says so. A `ToolfoldError` the model
    raised is raised as a copy carrying ``state`` (`for_this_run`), unless
    ``own``: the run made ``exc`` itself for this call, and it gets ``state``.
    """
    before = "the run before that call" + (
        ", counting the usage its stream reported before it failed" if counted else ""
    )
    if isinstance(exc, RecursionError) and nested_too_deep():  # resuming cannot fix it
        return RunError(
            f"{too_deep(f'the model call of step {step}', exc)}; the error's state is {before}",
            state,
        )
    if isinstance(exc, ToolfoldError):
        # Keep the provider's own error type (RateLimitError...) so callers
        # can catch it; add the state so the run can be resumed.
        if own:
            exc.state = state
            return exc
        return for_this_run(exc, state)
    return RunError(
        f"the model call of step {step} failed: {describe_exception(exc)}; "
        f"the error's state is {before}, resume it to retry",
        state,
    )


def for_this_run(exc: ToolfoldError, state: RunState) -> ToolfoldError:
    """A copy of ``exc``, a model's error, that carries ``state``: the error a run raises for it.

    The model's object is left as it is: a model may raise one object in
    several runs (a circuit breaker's cached error, a failed request or token
    refresh that concurrent calls await), and each run's state written on it
    would give every caller the last run's state, another user's conversation.
    The copy has the same class, args (message) and attributes (``__slots__``
    fields too: `_copy_slots`), and notes of
    its own, and takes ``exc``'s place in the chain: its cause (an adapter's
    ``httpx.ConnectError``, a workflow function's ``KeyError``; its context
    when it has no cause) and its traceback (the adapter's frames), so the
    run's error reads as ``exc`` did, printed once (`raised_from`; ``exc`` is
    only the copy's hidden ``__context__``). It is built as a pickle rebuilds
    it (`restored_error`: no ``__init__`` runs), and a testing model's misuse
    stays one (`testing_misuse`).
    """
    fields = dict(exc.__dict__)
    for name in ("__notes__", "close_errors"):  # lists a run adds to: the copy's own
        if isinstance(fields.get(name), list):
            fields[name] = list(fields[name])
    fields["state"] = state
    try:
        mine: ToolfoldError = restored_error(type(exc), exc.args, fields)
        _copy_slots(exc, mine)
    except Exception:  # (a class of the user's own that cannot be made so: its object)
        exc.state = state
        return exc
    if exc in _MODEL_MISUSES and isinstance(mine, UsageError):
        _MODEL_MISUSES.add(mine)
    mine.__cause__ = exc.__cause__
    if mine.__cause__ is None and not exc.__suppress_context__:
        mine.__cause__ = exc.__context__  # (raised in an except block without "from")
    mine.__traceback__ = exc.__traceback__
    return mine


def _copy_slots(exc: BaseException, mine: BaseException) -> None:
    """Give ``mine`` the values of ``exc``'s ``__slots__`` fields (a user's error class
    may keep its fields there, outside ``__dict__``), each class's of its MRO."""
    for cls in type(exc).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            if name.startswith("__") and not name.endswith("__"):  # (a private name, mangled)
                name = f"_{cls.__name__.lstrip('_')}{name}"
            field = cls.__dict__.get(name)
            if field is None or not hasattr(field, "__set__"):
                continue
            try:
                value = field.__get__(exc, cls)
            except AttributeError:  # (a field never set: the copy's stays unset too)
                continue
            field.__set__(mine, value)


def raised_from(exc: Exception, failure: BaseException) -> BaseException | None:
    """What a run raises ``failure``, its error for the model's ``exc`` (`model_failure`),
    from (``failure is exc`` is raised as it is): ``exc`` for a `RunError` that wraps it;
    for a copy of a `ToolfoldError` (`for_this_run`), ``exc``'s own cause, so that the
    chain reads as ``exc``'s would (None: ``exc`` had none, and is not shown)."""
    if isinstance(exc, ToolfoldError):
        return failure.__cause__
    return exc


def run_failure(state: RunState) -> RunError:
    error = state.error
    assert error is not None
    if error.kind == "tool_retries_exceeded":
        return ToolRetriesExceededError(error.message, state)
    if error.kind == "output_validation":
        return OutputValidationError(error.message, state)
    return RunError(f"the run failed ({error.kind}): {error.message}", state)
