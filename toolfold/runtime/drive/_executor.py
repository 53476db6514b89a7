"""Running one step's tool calls: validate, invoke, time out, format.

This module and the blocking path built on it (`_sync_calls`) are the only
places a tool's function is called. Every failure a model can correct (bad
JSON, schema-invalid arguments, an exception, a timeout) becomes a
`ToolOutcome` with an error text for the model; nothing here raises for a
tool's sake. Results come back in call order whatever the completion order.

Sync tools run on shared worker threads (`_workers`), async tools on the
running loop; a sync tool marked ``blocking=False`` (quick, never blocks) is
called inline on the loop, skipping the hand-off. The blocking path
(`_sync_calls.run_calls_sync`) needs no event loop at all when the step has
only sync tools, and runs a lone call without a timeout in the caller's
thread. A tool's timeout counts from when it starts running, not from when it
was queued; a sync tool that times out cannot be stopped (its thread runs on,
its result is dropped) but hands its worker slot over.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import inspect
import logging
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, NoReturn, TypeVar

from toolfold._errors import ToolArgumentError, UsageError
from toolfold.runtime.core._build import builder, new_tuple
from toolfold.runtime.core._effects import ToolInvocation
from toolfold.runtime.core._events import ToolReturned, ToolSuspended
from toolfold.runtime.core._messages import (
    ResultContent,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    content_problem,
    describe_content,
    result_content,
    thaw,
)
from toolfold.runtime.core._state import RunState
from toolfold.runtime.drive._cancels import (
    COUNTS_CANCELS,
    awaited_apart,
    cancels_of,
    check_swallowed,
)
from toolfold.runtime.drive._join import gather_or_cancel
from toolfold.runtime.drive._workers import (
    ESCAPING,
    NOT_RUN,
    CancelCarrier,
    Escaped,
    StopIterationCarrier,
    SyncInbox,
    Ticket,
    abandon,
    carried,
    close_unstarted,
    hand_off,
    hand_off_timed,
)
from toolfold.toolkit._context import RunContext
from toolfold.toolkit._results import describe_exception
from toolfold.toolkit._tool import Tool, quick_arguments, reads_context

if TYPE_CHECKING:
    import asyncio

    from toolfold.runtime.drive._sync_calls import SyncWaits

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)

Outcome = Literal["ok", "error", "invalid_arguments", "timeout", "unknown_tool", "denied"]

DEFAULT_MAX_CONCURRENCY = 8


# Tuples, not attrs classes: these are made for every call of every step, and
# a NamedTuple is as immutable and several times cheaper to build.


class ToolJob(NamedTuple):
    """One call to execute: the core's effect and its live half.

    Attributes:
        invocation: The effect: the call, its index, step and idempotency key.
        tool: The tool to run, or None when the model named an unknown tool.
        context: The run context handed to the tool (it carries the key);
            None when the tool reads none (see `reads_context`).
    """

    invocation: ToolInvocation
    tool: Tool[..., Any] | None
    context: RunContext[Any] | None

    @property
    def call(self) -> ToolCallPart:
        """The call as the model made it."""
        return self.invocation.call


class ToolOutcome(NamedTuple):
    """What one call produced.

    Attributes:
        call_id: The id of the call.
        tool_name: The tool the call named.
        content: The text the model will see.
        is_error: True unless the tool returned normally.
        outcome: ``ok``, ``error``, ``invalid_arguments``, ``timeout``,
            ``unknown_tool`` or ``denied``.
        exception: The exception a tool raised (for ``on_tool_error="raise"``).
        ended: When the call ended (``time.monotonic()``).
        duration: Seconds from the step's calls starting to this one ending
            (waiting for a concurrency slot included); set by `run_calls`.
        child: The sub-run the call made (an agent used as a tool), or None.
        parts: The result's content when it holds images or files.
    """

    call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    outcome: Outcome = "ok"
    exception: BaseException | None = None
    ended: float = 0.0
    duration: float | None = None
    child: RunState | None = None
    parts: tuple[ResultContent, ...] = ()

    @property
    def part(self) -> ToolResultPart:
        """The result as a message part."""
        return ToolResultPart(self.call_id, self.tool_name, self.content, self.is_error, self.parts)


_AT = ToolOutcome._fields.index("duration")
_monotonic = time.monotonic

_log = logging.getLogger("toolfold.runtime")

# How far past its timeout a timed async call may end before `_blocked_past_timeout`
# warns: asyncio's default bound for a slow callback, fixed (a loop's own
# ``slow_callback_duration`` is raised to quiet asyncio's debug mode, and is no part of
# `asyncio.AbstractEventLoop`: a custom loop need not have it).
_HELD_MARGIN = 0.1


class SubRun(NamedTuple):
    """What a tool that runs a sub-run returns (an agent used as a tool).

    Attributes:
        state: The sub-run's state, finished or waiting for the caller; None
            for one that was not started (``content`` says why: an error).
        content: The text the calling model sees once it finished.
        is_error: Whether ``content`` is an error result (the sub-run
            finished, but what the model sees of it could not be made).
    """

    state: RunState | None
    content: str
    is_error: bool = False


_TWIN = "_toolfold_blocking_twin"


def with_blocking_twin(tool: Tool[..., Any], twin: Tool[..., Any]) -> Tool[..., Any]:
    """``tool`` (async) with ``twin``, the same tool as a blocking function for blocking runs.

    Blocking runs then call ``twin`` where they would start an event loop for
    ``tool``; async runs call ``tool`` on their own loop. A job gets a run
    context when its tool reads one (see `reads_context`), and a twin runs with
    its tool's job: so ``tool`` must read it when ``twin`` does. (Asking the
    twin too would cost every call of every tool a look-up, and build contexts
    no async run reads, for pairs no caller makes: both halves of an agent or
    a task used as a tool read one.)

    Raises:
        ValueError: ``twin`` reads a run context and ``tool`` does not.
    """
    if reads_context(twin) and not reads_context(tool):
        raise ValueError(
            f"the blocking twin of tool {tool.name!r} reads a run context, and the tool "
            "reads no run context: a call gets a context only when its tool reads one, so "
            "the twin would be called with None; give the tool a RunContext parameter too"
        )
    tool.__dict__[_TWIN] = twin
    return tool


def with_tool(job: ToolJob, wrap: Callable[[Tool[..., Any]], Tool[..., Any]]) -> ToolJob:
    """``job`` with its tool, and the tool's blocking twin, replaced by what ``wrap`` makes of them.

    ``wrap`` must return a copy (the job's tool is the agent's, shared by its
    runs) that keeps the tool's marks (its ``__dict__``).
    """
    tool = job.tool
    if tool is None:
        return job
    wrapped = wrap(tool)
    twin = _twin_of(tool)  # renamed on ``tool``, shared, not on each step's copy
    if twin is not None:
        wrapped.__dict__[_TWIN] = wrap(twin)
    return job._replace(tool=wrapped)


_SUB_RUN = "_toolfold_sub_run"


_AGENT = "_toolfold_agent_label"


def runs_sub_runs(tool: Tool[..., Any], who: str | None = None) -> Tool[..., Any]:
    """Mark ``tool`` as one that runs a sub-run and streams its events (``ctx.forward``).

    A streaming run performs a step with such a tool apart from its own
    thread or task, so it can show the sub-run's events while the step runs.
    ``who``: how errors name the agent (or workflow) it runs, for an agent
    used as a tool (``agent 'research'``, see `agent_label`): its results are
    the ones a tree budget can stop (see `agent_run_by`).
    """
    tool.__dict__[_SUB_RUN] = True
    if who is not None:
        tool.__dict__[_AGENT] = who
    return tool


def agent_run_by(tool: Tool[..., Any] | None) -> str | None:
    """How errors name the agent (or workflow) ``tool`` runs as a tool, or None for any other tool.

    The ``who`` `runs_sub_runs` was given: only such a call's result can be
    the stop of its caller's tree budget (see `budget_stopped`).
    """
    if tool is None:
        return None
    who = tool.__dict__.get(_AGENT)
    return who if isinstance(who, str) else None


_RESUME_CHECK = "_toolfold_resume_check"

ResumeCheck = Callable[[ToolCallPart, RunState], None]
"""Refuses (with `UsageError`) to resume a call's suspended sub-run, running nothing."""


def checks_resume(tool: Tool[..., Any], check: ResumeCheck) -> Tool[..., Any]:
    """Give ``tool`` (one that runs sub-runs) the check its sub-runs' resume makes first.

    ``check(call, sub_run)`` raises `UsageError` where resuming ``sub_run``
    (the suspended sub-run of ``call``) with this tool's spec would be
    refused: a resume asks it of every suspended sub-run of the tree before
    anything runs (see `resumed`), so a changed sub-agent is refused like a
    changed agent, and the run waits as it was.
    """
    tool.__dict__[_RESUME_CHECK] = check
    return tool


def resume_check(tool: Tool[..., Any] | None) -> ResumeCheck | None:
    """The check ``tool``'s suspended sub-runs' resume makes first (see `checks_resume`), or None."""
    return None if tool is None else tool.__dict__.get(_RESUME_CHECK)


def forwards(job: ToolJob) -> bool:
    """Whether ``job``'s tool streams a sub-run's events (see `runs_sub_runs`)."""
    tool = job.tool
    return tool is not None and _SUB_RUN in tool.__dict__


def _blocking(job: ToolJob) -> ToolJob:
    """``job`` as a blocking run performs it (a tool's blocking twin, when it has one)."""
    tool = job.tool
    if tool is None or _TWIN not in tool.__dict__:  # the usual tool: no look-up more
        return job
    twin = _twin_of(tool)
    return new_tuple(ToolJob, (job.invocation, twin, job.context))  # `_replace`, spelled out


def _twin_of(tool: Tool[..., Any]) -> Tool[..., Any] | None:
    """``tool``'s blocking twin (None: it has none), under the tool's name and timeout.

    A tool `replace`d keeps its original's twin: renamed on first use, and
    kept on the tool, so that its argument checker is built once.
    """
    twin: Tool[..., Any] | None = tool.__dict__.get(_TWIN)
    if twin is not None and (twin.name, twin.timeout) != (tool.name, tool.timeout):
        twin = twin.replace(name=tool.name, timeout=tool.timeout)
        tool.__dict__[_TWIN] = twin
    return twin


def kept_sub_run(
    finished: dict[int, ToolOutcome] | None,
    index: int,
    call_id: str,
    name: str,
    exc: BaseException,
    run_id: str | None,
) -> None:
    """Keep, in ``finished``, the sub-run a call ran when an interruption stopped it.

    A cancellation (or Ctrl-C) leaves a sub-run (an agent used as a tool, a
    workflow step) with its state on the exception (see `interrupted`). Kept
    as the call's outcome, its state is committed with the round's ended
    calls (a `ToolSuspended` whose sub-run does not wait): resuming the run
    continues the sub-run, and nothing it finished runs again. Only the
    call's own sub-run is kept (its id is ``<run_id>/<call id>``, see
    `sub_run_id`): a state that is not (a layer below that did not set its
    own) is not, and the call runs again from its beginning.
    """
    if finished is None or isinstance(exc, Exception):
        return
    child = getattr(exc, "state", None)
    if not isinstance(child, RunState) or child.phase in ("new", "finished", "failed"):
        return
    if run_id is not None and not _own_sub_run(child, call_id, run_id):
        return
    finished[index] = ToolOutcome(call_id, name, "", ended=time.monotonic(), child=child)


class Stand(NamedTuple):
    """Where a sub-run stands (see `Standing`): what its loop would give an interruption."""

    live: Any  # (the run's `Live`: the loop's, which imports this module)
    state: RunState  # the run where its model call or round of calls began
    finished: dict[int, ToolOutcome] | None  # that round's record (see `_round_record`)


class Standing:
    """Where the sub-run of one call stands, for a caller that cannot wait for it to stop.

    A blocking stream runs its round of calls on a thread of its own; a lone
    sub-run there runs blocking, and Ctrl-C stops it only at its next model
    call or round of calls (see `RoundInterrupt`). A second Ctrl-C stops the
    wait for that: the caller's thread builds the interrupted state while
    the sub-run's thread is still in its blocking call. So the sub-run's
    loop notes here, before each model call and round of calls, the state
    it would give an interruption there (`at`; one assignment, read whole
    from the other thread), and the shell running its round notes the
    standings of that round's own sub-runs (`calls`, with the record of the
    round they belong to and what that round's thread kept so far: the calls
    that ended, and the sub-runs an interruption of it had stopped). `kept_standing` builds from it what Ctrl-C landing
    in the sub-run would have kept (`kept_sub_run`).
    """

    __slots__ = ("at", "call_id", "calls", "name", "run_id")

    def __init__(self, call_id: str, name: str, run_id: str | None) -> None:
        self.call_id = call_id
        self.name = name
        self.run_id = run_id
        self.at: Stand | None = None
        # (the round's record, its sub-runs' standings, and what its thread kept so far)
        self.calls: (
            tuple[dict[int, ToolOutcome] | None, dict[int, Standing], dict[int, ToolOutcome]] | None
        ) = None

    def is_of(self, state: RunState) -> bool:
        """Whether ``state`` is the call's own sub-run (a layer below notes nothing here)."""
        return self.run_id is not None and _own_sub_run(state, self.call_id, self.run_id)


# The standing of the call whose sub-run this context runs (set by the round that runs it).
STANDING: contextvars.ContextVar[Standing | None] = contextvars.ContextVar(
    "toolfold_standing", default=None
)


def _own_sub_run(child: RunState, call_id: str, run_id: str) -> bool:
    """Whether ``child`` is the sub-run of call ``call_id`` of run ``run_id`` (see `sub_run_id`)."""
    own = f"{run_id}/{call_id}"
    return child.run_id == own or child.run_id.startswith(own + "@")


def failed_sub_run(exc: BaseException, call_id: str, run_id: str | None) -> RunState | None:
    """The state of the call's own sub-run that ``exc``, the error it raised, carries, or None.

    A sub-run that fails (its model's error, its output that never fit, a
    tool error it raises) leaves its state on the error (``exc.state``). Kept
    on the call's error result, it stays in the tree: its model calls count
    in ``tree_usage``, and ``sub_runs`` shows how far it got. A state that is
    not the call's own sub-run (a layer below that did not set its own) is
    not kept, nor one without the run id to tell (``run_id`` None).
    """
    child = getattr(exc, "state", None)
    if not isinstance(child, RunState) or child.phase == "new" or run_id is None:
        return None
    return child if _own_sub_run(child, call_id, run_id) else None


def made_outcome(value: SubRun) -> Outcome:
    """The outcome of a call whose tool ran a sub-run: an error when its result could not be made."""
    return "error" if value.is_error else "ok"


# An outcome's fields already have the event's types (``parts`` is a tuple).
_returned = builder(ToolReturned)


def returned(outcome: ToolOutcome) -> ToolReturned | ToolSuspended:
    """The event that reports ``outcome`` to the core."""
    child = outcome.child
    # A sub-run that waits (or was interrupted); one that failed or timed out is a result.
    if child is not None and not child.is_done and outcome.outcome == "ok":
        return ToolSuspended(outcome.call_id, child)
    return _returned(
        outcome.call_id,
        outcome.content,
        outcome.is_error,
        outcome.outcome,
        outcome.duration,
        child,
        outcome.parts,
    )


def checked_arguments(job: ToolJob, *, quick: bool = True) -> ToolOutcome | dict[str, Any]:
    """Validated arguments, or the outcome that replaces running the tool.

    Reads no clock (the outcome's ``ended`` is 0.0): durable workflow code
    calls it, and must stay deterministic. ``quick=False``: `quick_arguments`
    already answered None for this call (not asked again).
    """
    tool = job.tool
    call = job.invocation.call
    if tool is None or tool.function is None:
        content = f"Error: tool {call.name!r} cannot be run here."
        return ToolOutcome(call.id, call.name, content, True, "unknown_tool")
    stored = call.arguments
    if quick and stored is not None:
        arguments = quick_arguments(tool, stored)
        if arguments is not None:  # flat arguments already of their types: what the check gives
            return arguments
    # A copy of its own: what the tool does to its arguments never reaches the state.
    raw = thaw(stored) if stored is not None else call.arguments_text
    try:
        return tool.validate_arguments(raw)
    except ToolArgumentError as exc:
        content = exc.message_for_model
        # Its own traceback (the check's frames, called from the driver's, which go on to
        # hold the outcome) taken off; what it was raised from keeps its own, the lines of
        # a validator of the user's that failed.
        exc.__traceback__ = None
        return ToolOutcome(call.id, call.name, content, True, "invalid_arguments", exc)
    except Exception as exc:  # the check's own failure, no answer to the model (`checker_failed`)
        # A run's state it carries is another run's (a checker agent run by the check) or an
        # earlier run's (one instance raised again): this run's is attached (`takes_state`).
        # A ``state`` of the error's own (an order's, say) is no run's, and stays.
        if isinstance(exc.__dict__.get("state"), RunState):
            del exc.__dict__["state"]
        if isinstance(exc, (StopIteration, StopAsyncIteration)):
            # Out of a coroutine or a generator (arun, stream; a StopAsyncIteration out of
            # an async one, `async for` over a stream) Python would make it a bare
            # RuntimeError, unmarked and without the run's state: carried as a tool's is.
            carrier = StopIterationCarrier(exc, f"validate_arguments of tool {call.name!r}")
            carrier.__dict__[_CHECKER_FAILED] = True
            raise carrier from exc
        exc.__dict__[_CHECKER_FAILED] = True
        raise


def _prepare(job: ToolJob, *, quick: bool = True) -> ToolOutcome | dict[str, Any]:
    """Validated arguments, or the outcome that replaces running the tool (ended now)."""
    checked = checked_arguments(job, quick=quick)
    if isinstance(checked, ToolOutcome):
        return checked._replace(ended=time.monotonic())
    return checked


# Return values that are neither awaitable nor a sub-run, image or file: the
# common results skip those checks (`inspect.isawaitable` is an ABC check).
_PLAIN = frozenset({str, int, float, bool, type(None), dict})
# What a tool returns that is surely not awaitable: those, and a sub-run's result.
_NOT_AWAITABLE = _PLAIN | {SubRun}


def _finish(job: ToolJob, value: Any, started: float | None = None) -> ToolOutcome:
    """The outcome of a call that returned ``value``.

    With ``started`` (when a lone call's round began), a plain value's outcome
    has its duration already, as `_timed` would give it; the others get none.
    """
    assert job.tool is not None
    call = job.invocation.call
    if type(value) in _PLAIN:
        try:
            content = job.tool.format_result(value)
        except Exception as exc:
            return failed_outcome(job, _without_tracebacks(exc))
        ended = _monotonic()
        took = None if started is None else (ended - started if ended > started else 0.0)
        # `ToolOutcome(call.id, call.name, content, ended=..., duration=...)` without its keyword pass.
        return new_tuple(
            ToolOutcome, (call.id, call.name, content, False, "ok", None, ended, took, None, ())
        )
    if type(value) is SubRun:
        ended = time.monotonic()
        outcome = made_outcome(value)
        return ToolOutcome(
            call.id,
            call.name,
            value.content,
            value.is_error,
            outcome,
            ended=ended,
            child=value.state,
        )
    if isinstance(value, TextPart):  # a text part alone: its text, not the part as JSON
        value = value.text
    try:
        parts = result_content(value, job.tool.format_result)
    except Exception as exc:  # (an item the tool's formatting refuses)
        return failed_outcome(job, _without_tracebacks(exc))
    if parts is not None:  # images or files: the model gets them as parts
        problem = content_problem(parts)
        if problem:  # (the model reads it, as it reads a returned iterator's error)
            return failed_outcome(
                job,
                TypeError(
                    f"tool {call.name!r} returned a part the model cannot be given: {problem}"
                ),
            )
        text = describe_content(parts)
        return ToolOutcome(call.id, call.name, text, ended=time.monotonic(), parts=parts)
    try:
        content = job.tool.format_result(value)
    except Exception as exc:
        return failed_outcome(job, _without_tracebacks(exc))
    return ToolOutcome(call.id, call.name, content, ended=time.monotonic())


def _error(
    job: ToolJob,
    content: str,
    outcome: Outcome,
    exc: BaseException | None,
    stopped: BaseException | None,
) -> ToolOutcome:
    """An error result; the sub-run ``stopped`` left (`failed_sub_run`) is kept on it."""
    call = job.call
    child = None if stopped is None else failed_sub_run(stopped, call.id, _run_id_of(job))
    ended = time.monotonic()
    return ToolOutcome(call.id, call.name, content, True, outcome, exc, ended, child=child)


def failed_outcome(job: ToolJob, exc: BaseException) -> ToolOutcome:
    # (a sync tool's StopIteration, from its worker thread, or a sub-run's check's, which
    # carries the sub-run's state: `checked_arguments`)
    raised = carried(exc)
    _without_driver_frames(raised)
    stopped = exc if getattr(exc, "state", None) is not None else raised
    return _error(job, f"Error: {describe_exception(raised)}", "error", raised, stopped)


def _without_driver_frames(exc: BaseException) -> None:
    """Take the driver's own frames off the start of ``exc``'s traceback, down to the tool's.

    The frame that caught ``exc`` (a coroutine's, say) goes on to hold the call's
    outcome, which holds ``exc``: kept on the traceback, it would make a reference
    cycle, and a failed run would be freed only by the cyclic collector (a blocking
    call's frames still reach the driver's as their callers: a cycle it frees). What the tool ran
    stays, as the traceback of ``on_tool_error="raise"`` shows it; a traceback of the
    driver's frames alone (its own error) keeps its last.
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and _in_driver(tb.tb_frame):
        tb = tb.tb_next
    if tb is not exc.__traceback__:
        exc.__traceback__ = tb


def _without_tracebacks(exc: E) -> E:
    """``exc``, with the tracebacks of it and of the errors it was raised from taken off.

    For what toolfold raises about a call's result, not from the tool (it cannot be
    given to the model), kept on the call's outcome: the
    frames it went through were called from the driver's, which go on to hold the
    outcome, so it would keep the run's state in a reference cycle, which taking
    frames off its head (`_without_driver_frames`) cannot cut. What it says is all
    the model reads, and what ``on_tool_error="raise"`` shows.
    """
    seen: set[int] = set()
    chain: list[BaseException | None] = [exc]
    while chain:
        link = chain.pop()
        if link is None or id(link) in seen:
            continue
        seen.add(id(link))
        link.__traceback__ = None
        chain += (link.__cause__, link.__context__)
    return exc


def _in_driver(frame: Any) -> bool:
    return str(frame.f_globals.get("__name__", "")).startswith("toolfold.runtime.drive.")


def _stray_cancel(
    work: asyncio.Future[Any], invoked: Any, cancelling: Callable[[], int], before: int
) -> bool:
    """Whether the `CancelledError` a tool's ``work`` ended with is the tool's own (it
    awaited a task it had cancelled, say) and no cancellation of the run: an error the
    model reads, as any other the tool raises, not the run's end.

    The run's task got no cancellation since the call began: its count (``cancelling``,
    from `cancels_of`) is no higher than ``before``, read then. Compared with that, not
    with 0, as a task may start the run with a cancellation it caught and never took back
    (Python 3.11 and later; on 3.10 it cannot be told apart, and the run ends as if cancelled).

    And the tool began: a cancellation of the run's task that came before the call
    (``asyncio.run``'s Ctrl-C handler, landing as the run set the call up) is counted
    before ``before`` is read, and delivered at the run's first wait, the call's: it
    cancels ``work`` before the tool began (an async tool's coroutine, ``invoked``, still
    unstarted; a sync tool's future cancelled: one the tool raised never reaches it, see
    `CancelCarrier`). Taken for the tool's, the call never to run would keep that error.
    """
    return (
        COUNTS_CANCELS
        and work.done()
        and cancelling() <= before
        and not (work.cancelled() if invoked is None else _unstarted(invoked))
    )


def _timed_out(job: ToolJob, timeout: float, stopped: BaseException | None = None) -> ToolOutcome:
    """The outcome of a call that outlived its ``timeout``.

    ``stopped`` is what the cancelled call ended with: a sub-run (an agent or
    a workflow used as a tool, a workflow step) stopped by the timeout leaves
    its state on its cancellation (see `interrupted`). That state is kept on
    the call's error result, as a failed sub-run's is (`failed_outcome`): its model
    calls count in ``tree_usage``, and ``sub_runs`` shows how far it got.
    """
    return _error(job, timed_out_message(job.call.name, timeout), "timeout", None, stopped)


def _blocked_past_timeout(tool: str, took: float, timeout: float) -> None:
    """Log that a call to the async ``tool`` ended ``took`` s after it began, past its ``timeout``.

    A call ends so only when the event loop was held while it ran: by a sync
    call inside an ``async def`` (``time.sleep``, a blocking client), this
    tool's or other code's on the same loop (another tool of the step), which
    the executor cannot tell apart, so the warning blames neither. The
    timeout, a callback of that loop, could not run to cancel the call. The
    call did end, its side effects done, so its outcome is what it returned or
    raised, not a timeout the model would retry; this warning says why the
    timeout did not hold.
    """
    _log.warning(
        "tool %r ended %.3g s after it began, past its timeout of %g s: the event loop was "
        "held while it ran (by it or by other code on the loop: a sync call inside an async "
        "tool?), so the timeout could not stop it, and its result is kept. Await blocking "
        "work in a thread (asyncio.to_thread) or make the blocking tool sync: sync tools run "
        "in threads.",
        tool,
        took,
        timeout,
    )


def timed_out_message(tool: str, timeout: float) -> str:
    """What the model sees of a call to ``tool`` that took longer than its ``timeout``."""
    return f"Error: tool {tool!r} timed out after {timeout:g} s."


# --- the shared thread pool ------------------------------------------------


def _call_sync(job: ToolJob, arguments: dict[str, Any]) -> Any:
    assert job.tool is not None
    handling = sys.exc_info()[1]  # (the caller's: see `own_cancel`)
    try:
        return job.tool.invoke(arguments, job.context)
    except BaseException as exc:
        if own_cancel(job, exc, handling):
            raise CancelCarrier(exc) from None
        raise


def own_cancel(job: ToolJob, exc: BaseException, handling: BaseException | None) -> bool:
    """Whether ``exc``, which a sync tool's call raised on a thread or in a blocking run's
    own (where no cancellation of the run reaches it), is the tool's own `CancelledError`:
    a library's it wraps, to be the call's error as any other (`CancelCarrier`).

    Not a sub-run's (an agent or a workflow step run by its blocking twin): that run's
    cancellation ends the caller's as an async sub-run's does. Nor, on the main thread
    (the only one a Ctrl-C lands in), one raised as the tool handled a Ctrl-C that landed
    in it (a library turning the `KeyboardInterrupt` into its `CancelledError`): that is
    the run's interruption (`interruption_behind`). ``handling`` is what the thread was
    handling as the call began (``sys.exc_info()``, read then): the caller's, a run started
    in its ``except KeyboardInterrupt`` block to resume one, which the tool's exception has
    for context too; no Ctrl-C of the call's.
    """
    asyncio = sys.modules.get("asyncio")  # (none imported: none raised)
    return (
        asyncio is not None
        and isinstance(exc, asyncio.CancelledError)
        and job.tool is not None
        and _SUB_RUN not in job.tool.__dict__
        and (
            threading.current_thread() is not threading.main_thread()
            or interruption_behind(exc, handling) is None
        )
    )


def interruption_behind(
    exc: BaseException, handling: BaseException | None = None
) -> KeyboardInterrupt | None:
    """The Ctrl-C that ``exc`` was raised while handling or from (its context or cause, or
    theirs), if any; none behind ``handling``, which was handled before ``exc`` was raised."""
    seen: set[int] = set()
    behind = [exc.__cause__, exc.__context__]
    while behind:
        found = behind.pop()
        if found is None or found is handling or id(found) in seen:
            continue
        if isinstance(found, KeyboardInterrupt):
            return found
        seen.add(id(found))
        behind += (found.__cause__, found.__context__)
    return None


# --- async -------------------------------------------------------------------


def _timed(outcomes: tuple[ToolOutcome, ...], started: float) -> tuple[ToolOutcome, ...]:
    # `_replace(duration=...)` spelled out: it costs a dict and a keyword pass per call.
    if len(outcomes) == 1:  # the common step: no comprehension to set up
        o = outcomes[0]
        took = o.ended - started
        return (new_tuple(ToolOutcome, (*o[:_AT], took if took > 0.0 else 0.0, *o[_AT + 1 :])),)
    return tuple(
        [
            new_tuple(ToolOutcome, (*o[:_AT], max(0.0, o.ended - started), *o[_AT + 1 :]))
            for o in outcomes
        ]
    )


async def run_calls(
    jobs: Sequence[ToolJob],
    *,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    finished: dict[int, ToolOutcome] | None = None,
) -> tuple[ToolOutcome, ...]:
    """Run the calls concurrently; outcomes in call order, each with its duration.

    When the calls are cancelled, ``finished`` (if given) receives the
    outcomes of those that had ended, by index.
    """
    started = time.monotonic()
    if len(jobs) == 1:
        # The common step, one quick sync call (`_run_calls` would run it on the
        # loop as well): right here, without the two coroutines it awaits there.
        job = jobs[0]
        tool = job.tool
        if tool is not None and not tool.blocking and not tool.is_async:
            stored = job.invocation.call.arguments
            arguments = None if stored is None else quick_arguments(tool, stored)
            if arguments is not None:  # nothing between the call and the function
                ran = _on_loop_now(job, arguments, started, tool.function, finished)
            else:
                prepared = _prepare(job, quick=False)
                if isinstance(prepared, ToolOutcome):
                    return _timed((prepared,), started)
                ran = _on_loop_now(job, prepared, started, None, finished)
            if not isinstance(ran, ToolOutcome):  # the tool returned an awaitable
                try:
                    ran = await ran
                except BaseException:
                    _time_finished(finished, started)
                    raise
            return (ran,) if ran.duration is not None else _timed((ran,), started)
    try:
        return _timed(await _run_calls(jobs, max_concurrency, finished), started)
    except BaseException:
        _time_finished(finished, started)
        raise


def _time_finished(finished: dict[int, ToolOutcome] | None, started: float) -> None:
    """The calls that ended before the round was interrupted, timed as the round's outcomes are."""
    if finished:
        finished.update(zip(finished, _timed(tuple(finished.values()), started), strict=True))


async def _run_calls(
    jobs: Sequence[ToolJob],
    max_concurrency: int,
    finished: dict[int, ToolOutcome] | None = None,
    waits: SyncWaits | None = None,
) -> tuple[ToolOutcome, ...]:
    """Run the calls concurrently; outcomes in call order.

    Cancelling the awaiting task cancels every call still running (a sync tool
    already in a thread cannot be interrupted; its result is dropped). With
    ``waits`` (a blocking round, see `SyncWaits`), the sync calls left running
    are noted there instead, for the round to wait for once Ctrl-C stopped it.
    """
    if len(jobs) == 1:  # one call: no task of its own
        job = jobs[0]
        prepared = _prepare(job)
        if isinstance(prepared, ToolOutcome):
            return (prepared,)
        tool = job.tool
        assert tool is not None
        if not tool.blocking and not tool.is_async:  # inline: one coroutine fewer
            return (await _run_on_loop(job, prepared, finished),)
        return (await _run_one(job, prepared, finished, 0, waits),)  # (kept there)
    # At most ``max_concurrency`` calls run at once: the join makes the next
    # call's task when one ends. Each task is named by its call's id.
    return await gather_or_cancel(
        [_prepared_one(job, finished, index, waits) for index, job in enumerate(jobs)],
        finished,
        max_concurrency,
        [job.call.id for job in jobs],
    )


async def _prepared_one(
    job: ToolJob, finished: dict[int, ToolOutcome] | None, index: int, waits: SyncWaits | None
) -> ToolOutcome:
    prepared = _prepare(job)
    if isinstance(prepared, ToolOutcome):
        return prepared
    return await _run_one(job, prepared, finished, index, waits)


async def _run_one(
    job: ToolJob,
    arguments: dict[str, Any],
    finished: dict[int, ToolOutcome] | None = None,
    index: int = 0,
    waits: SyncWaits | None = None,
) -> ToolOutcome:
    """One call on the running loop; a sub-run it runs that is interrupted is kept in
    ``finished`` under ``index`` (see `kept_sub_run`); a sync call still running when it
    is interrupted is noted in ``waits``, if given (see `SyncWaits`)."""
    import asyncio

    assert job.tool is not None
    if not job.tool.blocking and not job.tool.is_async:
        return await _run_on_loop(job, arguments, finished, index)
    timeout = job.tool.timeout
    if timeout is None and _SUB_RUN in job.tool.__dict__:
        # A sub-run (an agent or a workflow step) changes no context variable
        # of the caller's: awaited right here, it needs no task of its own.
        # One block from the call to its outcome kept in ``finished`` (see `kept_now`):
        # Ctrl-C landing once the sub-run had ended keeps what it ended with (`_keep_ended`).
        value: Any = _NO_VALUE
        error: Exception | None = None
        try:
            try:
                value = await job.tool.invoke(arguments, job.context)
            except Exception as exc:
                error = exc
                outcome = failed_outcome(job, exc)
            except BaseException as exc:
                kept_sub_run(finished, index, job.call.id, job.call.name, exc, _run_id_of(job))
                raise
            else:
                outcome = _finish(job, value)
            if finished is not None:  # kept as it ends: its own tools ran
                finished[index] = outcome
        except BaseException:
            _keep_ended(finished, index, job, value, error)
            raise
        return outcome
    if waits is not None and timeout is None and not job.tool.is_async:
        # A sync call of a blocking round on an event loop (see `SyncWaits`): one block
        # from the hand-off to the outcome kept in ``finished``, so that Ctrl-C landing
        # anywhere in it (the round's loop raises it in the running task), or a
        # cancellation, leaves the call kept in ``finished`` (`_keep_ticketed`), or its
        # ticket, noted in ``waits`` at the hand-off, for the round to read or wait on.
        # Kept as it ends, not once the round returns: Ctrl-C landing on the way (in the
        # join, as the loop stops) would lose it, to run again on resume.
        ticket = waits.tickets[index] = Ticket(index)
        handed: asyncio.Future[Any] | None = None
        try:
            try:
                handed = hand_off(_call_ticketed, job, arguments, ticket, waits.inbox)
                value = await handed
                if type(value) is Escaped:  # (a GeneratorExit: see `Escaped`)
                    raise_escaped(value)
                if inspect.isawaitable(value):
                    value = await await_within(value)
                outcome = _finish(job, value)
            except Exception as exc:
                outcome = failed_outcome(job, exc)
            if finished is not None:
                finished[index] = outcome
        except BaseException:
            _keep_ticketed(finished, index, job, ticket)
            _close_unread(handed)
            raise
        return outcome
    # What stopped a sub-run (a cancellation carrying its state, see `interrupted`):
    # a task's cancellation reaches its awaiter as a new CancelledError, without it.
    stopped: list[BaseException] = []
    # What a sync call returned or raised on its thread (see `_call_noted`), when the
    # round keeps what had ended once interrupted (``finished``).
    noted: list[tuple[bool, Any]] | None = None
    invoked: Any = None  # an async tool's coroutine
    try:
        if job.tool.is_async:
            # A task of its own, so the tool's context changes stay its own.
            invoked = job.tool.invoke(arguments, job.context)
            if _SUB_RUN in job.tool.__dict__:  # (it has a timeout)
                invoked = _keeping(invoked, stopped)
            work: asyncio.Future[Any] = asyncio.ensure_future(contained(invoked))
        elif timeout is None:
            if finished is None:
                work = hand_off(_call_sync, job, arguments)
            else:
                noted = []
                work = hand_off(_call_noted, job, arguments, noted)
        else:
            return await _run_timed_sync(job, arguments, timeout, finished, index, waits)
    except Exception as exc:
        return kept_now(finished, index, failed_outcome(job, exc))
    if timeout is None:
        # Awaiting the future itself cancels it when the caller is cancelled,
        # as asyncio.wait below does by hand: no waiter to build per call.
        # One block from the hand-off to the outcome kept in ``finished`` (see `kept_now`),
        # without a call more: Ctrl-C landing once the call had ended keeps its outcome.
        # A tool that catches the run's cancellation and returns (or raises an error)
        # does not end it: the run ends as cancelled, the call's outcome kept (`_cancels`).
        cancelling = cancels_of(asyncio.current_task())
        before = cancelling()
        try:
            try:
                if not COUNTS_CANCELS and job.tool.is_async:
                    await awaited_apart(work)
                value = await work
                if type(value) is Escaped:  # (see `Escaped`)
                    raise_escaped(value)
                if inspect.isawaitable(value):  # (a sync tool's)
                    value = await await_within(value)
            except Exception as exc:
                outcome = failed_outcome(job, exc)
            except asyncio.CancelledError as exc:
                stray = _stray_cancel(work, invoked, cancelling, before)
                never_began(work, invoked)  # (cancelled before it began: never to run)
                if not stray:
                    raise
                outcome = failed_outcome(job, exc)
            else:
                outcome = _finish(job, value)
            if finished is not None:
                finished[index] = outcome
            check_swallowed(cancelling, before)
        except BaseException:
            note_thrown_exit(work)
            if job.tool.is_async:  # its task may have ended, unread
                _keep_done(finished, index, job, work)
                never_began(work, invoked)
            else:
                _keep_noted(finished, index, job, noted)
                _close_unread(work)
            raise
        return outcome
    # One block from the wait to the outcome kept in ``finished``, as above: whatever
    # interrupts it (a cancellation, Ctrl-C) keeps the call's outcome once it had one.
    done: set[asyncio.Future[Any]] | None = None
    try:
        # asyncio.wait, not wait_for: a TimeoutError the tool raises itself
        # must read as a tool error, not as our timeout.
        began = _monotonic()
        done, _ = await asyncio.wait({work}, timeout=timeout)
        if done:
            try:
                value = work.result()  # (an async tool's: what it returned to await is awaited)
                if type(value) is Escaped:
                    raise_escaped(value)
            except Exception as exc:
                outcome = failed_outcome(job, exc)
            except asyncio.CancelledError as exc:  # (the wait is over: the tool's own)
                never_began(work, invoked)
                outcome = failed_outcome(job, exc)
            else:
                outcome = _finish(job, value)
            took = _monotonic() - began
            # Past the deadline by more than a loop round can take: the loop was held
            # (a call ending in the same round as its deadline is not).
            if took > timeout + _HELD_MARGIN:
                _blocked_past_timeout(job.call.name, took, timeout)
        else:
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            never_began(work, invoked)
            outcome = _timed_out(job, timeout, stopped[0] if stopped else None)
        if finished is not None:
            finished[index] = outcome
    except BaseException as exc:
        timed_out = done is not None and not done
        if not timed_out:
            _keep_done(finished, index, job, work)
        never_began(work, invoked)
        work.cancel()
        # The sub-run stops on a task of its own: wait until it kept its state, but only
        # when cancelled (never with a Ctrl-C on its way out, which must not wait).
        if (
            isinstance(exc, asyncio.CancelledError)
            and finished is not None
            and _SUB_RUN in job.tool.__dict__
        ):
            await asyncio.gather(work, return_exceptions=True)
            if not timed_out:
                for interruption in stopped:
                    kept_sub_run(
                        finished, index, job.call.id, job.call.name, interruption, _run_id_of(job)
                    )
        if timed_out and finished is not None and index not in finished:
            finished[index] = _timed_out(job, timeout, stopped[0] if stopped else None)
        raise
    return outcome


_RAISED_IN_RUN = "_toolfold_raised_in_run"
_CHECKER_FAILED = "_toolfold_checker_failed"


def checker_failed(exc: BaseException) -> bool:
    """Whether a tool's `~toolfold.Tool.validate_arguments` raised ``exc``, an error other than
    the `ToolArgumentError` it answers the model with (`checked_arguments`): a bug of the
    tool's check (a ``ValueError``, a ``RecursionError``), no failure of the call."""
    return exc.__dict__.get(_CHECKER_FAILED, False) is True


def raised_in_run(exc: BaseException) -> None:
    """Mark a `GeneratorExit` the run's own code raised (not a stream's caller): an interruption."""
    if isinstance(exc, GeneratorExit):
        exc.__dict__[_RAISED_IN_RUN] = True


def was_raised_in_run(exc: BaseException) -> bool:
    """Whether `raised_in_run` marked ``exc`` (a GeneratorExit the run's own code raised)."""
    return exc.__dict__.get(_RAISED_IN_RUN, False) is True


# A GeneratorExit a tool raised, by the task whose run awaited it (see `note_thrown_exit`).
_THROWN_EXITS: weakref.WeakKeyDictionary[Any, GeneratorExit] = weakref.WeakKeyDictionary()


def note_thrown_exit(work: Any) -> None:
    """Note the GeneratorExit that ``work`` (a call's future, awaited by the run) ended with.

    asyncio throws a future's exception into the awaiting task's outermost
    coroutine; a GeneratorExit thrown so closes the coroutines under it (the
    run's among them) with a new GeneratorExit each, and is raised in that
    outermost one. `interrupted`, given the run's, gives its state to the
    one noted here, the exception the caller gets.
    """
    if not work.done() or work.cancelled():
        return
    exc = work.exception()
    if isinstance(exc, GeneratorExit):
        raised_in_run(exc)
        task = current_task()
        if task is not None:
            if task not in _THROWN_EXITS:
                task.add_done_callback(_forget_ended)
            _THROWN_EXITS[task] = exc


def _forget_ended(task: Any) -> None:
    """Drop the record of a task that ended: no run reads it any more.

    The record holds the exception, whose traceback holds the frames that
    hold the task, its key: a weak key that never dies. A call run in a
    task of its own (one of a round's several) noted its GeneratorExit by
    that task, which no run forgets (`forget_thrown_exit` drops the run's
    task's): each such run kept its call's task, frames and state for the
    life of the process.
    """
    _THROWN_EXITS.pop(task, None)


def thrown_exit() -> GeneratorExit | None:
    """The GeneratorExit noted for the running task (`note_thrown_exit`), if any."""
    if not _THROWN_EXITS:
        return None
    task = current_task()
    return None if task is None else _THROWN_EXITS.get(task)


def forget_thrown_exit() -> None:
    """Drop the GeneratorExit noted for the running task, once its run has its state.

    The task may outlive the run (a server's worker running one run after
    another): kept, the record would hold the exception, its traceback and
    the run's frames, and a later run's own GeneratorExit would hand its
    state to this earlier run's exception (`interrupted`).
    """
    if _THROWN_EXITS:
        task = current_task()
        if task is not None and _THROWN_EXITS.pop(task, None) is not None:
            # Its `_forget_ended` too: a task running run after run would
            # gather one callback a run, each holding a copy of the context
            # (a request's context variables) until the task ends.
            task.remove_done_callback(_forget_ended)


def current_task() -> Any:
    """The running asyncio task, or None outside a running event loop (never raises)."""
    import asyncio

    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None


def asyncio_task() -> Any:
    """The running asyncio task, where an async run begins: outside asyncio a `UsageError`.

    Raises:
        UsageError: No asyncio event loop runs here (a trio run, say).
    """
    task = current_task()
    if task is None:
        raise outside_asyncio()
    return task


def outside_asyncio() -> UsageError:
    """The error of an async run begun outside an asyncio event loop (trio's, for one)."""
    library = None
    # (sniffio, where installed, names the library running the coroutine)
    with contextlib.suppress(Exception):
        library = importlib.import_module("sniffio").current_async_library()
    where = f"this coroutine runs on {library}" if library else "no asyncio loop is running here"
    return UsageError(
        "toolfold's async API (arun, stream, aresume, agenerate_text, a workflow's arun) "
        f"runs on an asyncio event loop (uvloop included), and {where}. Under trio "
        '(anyio.run(..., backend="trio") included), call the blocking API on a worker '
        "thread: await anyio.to_thread.run_sync(lambda: agent.run(prompt))"
    )


def kept_now(
    finished: dict[int, ToolOutcome] | None, index: int, outcome: ToolOutcome
) -> ToolOutcome:
    """``outcome``, the call's, also kept in ``finished`` under ``index`` as it ends.

    What a round keeps once interrupted is read from ``finished``: an outcome
    kept only once the round returned is lost to Ctrl-C landing on the way (in
    the join, as the loop stops, in `run_kept`'s clean-up), its call to run
    again on resume, perhaps beside what it had done (a sub-run's own tools).
    """
    if finished is not None:
        finished[index] = outcome
    return outcome


def _keep_done(
    finished: dict[int, ToolOutcome] | None,
    index: int,
    job: ToolJob,
    work: asyncio.Future[Any],
) -> None:
    """Keep in ``finished``, under ``index``, the outcome of an async call whose task had
    ended, unread, when its round was interrupted (its awaiter cancelled first)."""
    if finished is None or index in finished or not work.done() or work.cancelled():
        return
    error = work.exception()
    if error is None:
        value = work.result()
        if type(value) is Escaped:
            error = value.exc
    outcome = _ended(job, True, value) if error is None else _ended(job, False, error)
    if outcome is not None:
        finished[index] = outcome


# A call's value not yet in hand (see `_keep_ended`).
_NO_VALUE: Any = object()


def _keep_ended(
    finished: dict[int, ToolOutcome] | None,
    index: int,
    job: ToolJob,
    value: Any,
    error: Exception | None,
) -> None:
    """Keep in ``finished``, under ``index``, the outcome of a call that had returned
    ``value`` (`_NO_VALUE`: not yet) or raised ``error`` when its round was interrupted,
    unless kept there already."""
    if finished is None or index in finished:
        return
    if error is not None:
        outcome = _ended(job, False, error)
    elif value is not _NO_VALUE:
        outcome = _ended(job, True, value)
    else:
        return
    if outcome is not None:
        finished[index] = outcome


def _call_noted(job: ToolJob, arguments: dict[str, Any], noted: list[tuple[bool, Any]]) -> Any:
    """`_call_sync`, what the call returned or raised noted in ``noted`` on its thread.

    A call ends on its thread before the loop learns it (the worker reports
    to the loop, which settles the call's future at its next turn): a round
    interrupted in between (Ctrl-C while the loop is busy, a cancellation)
    cancels the future, and its result would be lost, the call to run again
    on resume. Noted, it is kept (`_keep_noted`).
    """
    try:
        value = _call_sync(job, arguments)
    except BaseException as exc:
        noted.append((False, exc))
        raise
    noted.append((True, value))
    return value


def _close_unread(work: asyncio.Future[Any] | None) -> None:
    """Close the coroutine a sync call returned, if ``work``, its future, holds one unread
    and never started: its round was interrupted before reading it (see `close_unstarted`)."""
    if work is not None and work.done() and not work.cancelled() and work.exception() is None:
        close_unstarted(work.result())


def _keep_noted(
    finished: dict[int, ToolOutcome] | None,
    index: int,
    job: ToolJob,
    noted: list[tuple[bool, Any]] | None,
) -> None:
    """Keep in ``finished``, under ``index``, the outcome of a call that had ended on its
    thread (``noted``, see `_call_noted`) when its round was interrupted, unless kept
    there already."""
    if finished is not None and noted and index not in finished:
        outcome = _ended(job, *noted[0])
        if outcome is not None:
            finished[index] = outcome


def _call_ticketed(
    job: ToolJob, arguments: dict[str, Any], ticket: Ticket, inbox: SyncInbox
) -> Any:
    """`_call_sync` for a blocking round on an event loop (see `SyncWaits`): its start and
    end marked on ``ticket`` on its thread, as `submit_sync` marks them.

    A call whose ticket was cancelled before it started never runs (`NOT_RUN`);
    one cancelled while it ran reports its end to ``inbox``, which the round,
    interrupted, waits on (`_wait_running`). Each side writes its mark before
    it reads the other's: the round that cancelled sees the start or the end,
    or the call sees the cancel.
    """
    ticket.started = _monotonic()
    if ticket._cancelled:
        return NOT_RUN
    try:
        value = _call_sync(job, arguments)
    except BaseException as exc:
        ticket.ended = (False, exc)
        if ticket.cancelled():  # (read again: the round cancels it from another thread)
            inbox.put(ticket, False, exc)
        raise
    ticket.ended = (True, value)
    if ticket.cancelled():  # the round, interrupted, waits for it: wake it
        inbox.put(ticket, True, value)
    return value


def _keep_ticketed(
    finished: dict[int, ToolOutcome] | None, index: int, job: ToolJob, ticket: Ticket
) -> None:
    """A sync call of a blocking round on a loop, interrupted: its outcome kept in ``finished``
    (under ``index``) once it ended on its thread, unless kept there already (its outcome,
    made once, is not made again). One still running is in its round's `SyncWaits`, whose
    round waits for it if Ctrl-C stopped the round."""
    ended = ticket.ended
    if ended is not None and finished is not None and index not in finished:
        outcome = _ended(job, *ended)
        if outcome is not None:
            finished[index] = outcome


def raise_escaped(escaped: Escaped) -> NoReturn:
    """Raise what a call raised, which ``escaped`` carried (see `Escaped`): a GeneratorExit
    marked as the run's own (`raised_in_run`), no caller's that stops iterating a stream."""
    exc = escaped.exc
    raised_in_run(exc)
    raise exc


async def contained(invoked: Awaitable[Any]) -> Any:
    """What ``invoked`` (an async call, in a task of its own) returns, what it returns to
    await awaited too (within the call's timeout, as the task is waited for), and a
    KeyboardInterrupt, SystemExit or GeneratorExit it raises returned as an `Escaped`."""
    try:
        value = await invoked
        if type(value) not in _NOT_AWAITABLE and inspect.isawaitable(value):
            value = await value
    except ESCAPING as exc:
        return Escaped(exc)
    return value


# What `await_within` gives for an awaitable that outlived its time.
TIMED_OUT: Any = object()


async def await_within(awaitable: Awaitable[Any], seconds: float | None = None) -> Any:
    """What ``awaitable`` (what a sync tool returned) gives, awaited as a task (`contained`)
    for at most ``seconds`` (None: with no limit): `TIMED_OUT` when it outlived them (then
    it is cancelled and waited for). What it raises is raised here, a KeyboardInterrupt,
    SystemExit or GeneratorExit too, marked as the run's own (`raise_escaped`).

    Every awaitable a sync tool returns is awaited here: awaited in the run's task, a
    GeneratorExit a future holds would be thrown into the task's outermost coroutine
    (see `Escaped`), one a coroutine raises would not be marked as the run's.

    A wait, not ``asyncio.wait_for``: a TimeoutError the awaitable raises itself must
    read as the tool's error, not as its timeout.
    """
    import asyncio

    work = asyncio.ensure_future(contained(awaitable))
    try:
        if seconds is None:  # (a cancellation of this wait cancels it, and waits for its end)
            value = await work
        else:
            done, _ = await asyncio.wait({work}, timeout=max(0.0, seconds))
            if not done:
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
                never_began(work, awaitable)
                return TIMED_OUT
            value = work.result()
    except BaseException:  # cancelled, or Ctrl-C: it stops too
        never_began(work, awaitable)
        work.cancel()
        raise
    if type(value) is Escaped:
        raise_escaped(value)
    return value


def never_began(work: asyncio.Future[Any], invoked: Any) -> None:
    """Close ``invoked``, what ``work`` (a task of `contained`) awaits, if it never began, and
    cancel ``work``: it never runs (one that Ctrl-C or a cancellation reached before it began
    never begins). A task cancelled before its first step closes its coroutine without
    running it: ``invoked``, left unclosed, would be reported as "never awaited"."""
    if _unstarted(invoked):
        work.cancel()  # (if it had not begun either: it never will)
        invoked.close()


def _unstarted(invoked: Any) -> bool:
    """Whether ``invoked`` is a coroutine never started."""
    return (
        inspect.iscoroutine(invoked) and inspect.getcoroutinestate(invoked) == inspect.CORO_CREATED
    )


async def _keeping(invoked: Awaitable[T], stopped: list[BaseException]) -> T:
    """``invoked`` (a sub-run), what interrupted it kept in ``stopped``."""
    try:
        return await invoked
    except BaseException as exc:
        if not isinstance(exc, Exception):  # (an error is the call's result, see `failed_outcome`)
            stopped.append(exc)
        raise


def _run_id_of(job: ToolJob) -> str | None:
    """The id of the run that makes ``job``'s call (None when the tool reads no context)."""
    return job.context.run_id if job.context is not None else None


async def _run_on_loop(
    job: ToolJob,
    arguments: dict[str, Any],
    finished: dict[int, ToolOutcome] | None = None,
    index: int = 0,
) -> ToolOutcome:
    """A ``blocking=False`` sync tool, called right here on the loop's thread.

    No timeout applies (the definition refuses one: nothing could interrupt
    the call). A copy of the context, as a worker thread would get, keeps the
    context variables the tool sets its own. ``finished`` and ``index`` as for
    `_on_loop_now`.
    """
    ran = _on_loop_now(job, arguments, None, None, finished, index)
    return ran if isinstance(ran, ToolOutcome) else await ran


def _on_loop_now(
    job: ToolJob,
    arguments: dict[str, Any],
    started: float | None,
    function: Callable[..., Any] | None = None,
    finished: dict[int, ToolOutcome] | None = None,
    index: int = 0,
) -> ToolOutcome | Awaitable[ToolOutcome]:
    """`_run_on_loop` without a coroutine of its own: the outcome, or one to await
    when the tool returned an awaitable.

    With ``started``, a plain result's outcome is timed (see `_finish`). With
    ``function`` (the tool's, when `quick_arguments` made ``arguments``), that
    is called with them as keywords: what `Tool.invoke` would do. The outcome of
    an awaitable that ended as the run was cancelled goes in ``finished`` under
    ``index`` (Python 3.10, see `_awaited`).
    """
    context = contextvars.copy_context()
    handling = sys.exc_info()[1]  # (the caller's: see `own_cancel`)
    try:
        if function is None:
            value = context.run(_call_sync, job, arguments)
        else:
            value = context.run(function, **arguments)
        if type(value) not in _NOT_AWAITABLE and inspect.isawaitable(value):
            # Awaited as a task made in the tool's context, so what it sets stays its own.
            return _awaited(job, context.run(_in_task, value), value, finished, index)
    except Exception as exc:  # the tool, or a value whose type cannot be read (a lazy proxy)
        return failed_outcome(job, exc)
    except BaseException as exc:
        # (no await here: a cancellation of the run waits for one)
        if own_cancel(job, exc, handling):
            return failed_outcome(job, exc)
        raised_in_run(exc)  # (a GeneratorExit the tool raised: no stream's caller's)
        raise
    return _finish(job, value, started)


def _in_task(value: Awaitable[Any]) -> asyncio.Future[Any]:
    import asyncio

    return asyncio.ensure_future(contained(value))


async def _awaited(
    job: ToolJob,
    work: asyncio.Future[Any],
    returned: Awaitable[Any],
    finished: dict[int, ToolOutcome] | None = None,
    index: int = 0,
) -> ToolOutcome:
    """The outcome of ``work``, the task of what a ``blocking=False`` sync tool returned
    (``returned``, which it awaits: see `contained`).

    On Python 3.10 it is awaited apart (`awaited_apart`), as a lone async tool is: a
    cancellation of the run cancels it, waits for its end (what it returned on the way
    is kept in ``finished`` under ``index``) and ends the run, even if it swallows the
    cancel (3.11+ finds that from the task's count, see `_cancels`).
    """
    import asyncio

    try:
        if not COUNTS_CANCELS:
            try:
                await awaited_apart(work)
            except asyncio.CancelledError:
                _keep_done(finished, index, job, work)
                raise
        value = await work
        if type(value) is Escaped:  # (see `contained`)
            raise_escaped(value)
    except Exception as exc:
        return failed_outcome(job, exc)
    except BaseException:
        never_began(work, returned)
        raise
    return _finish(job, value)


async def _run_timed_sync(
    job: ToolJob,
    arguments: dict[str, Any],
    timeout: float,
    finished: dict[int, ToolOutcome] | None = None,
    index: int = 0,
    waits: SyncWaits | None = None,
) -> ToolOutcome:
    """A sync tool with a timeout counted from when a worker starts it, not from the queue.

    Cancelled once it had ended on its thread, its outcome is kept in
    ``finished`` under ``index`` (see `_call_noted`); still running, it is
    noted in ``waits``, if given (see `SyncWaits`).
    """
    import asyncio

    noted: list[tuple[bool, Any]] | None = None
    ticket: Ticket | None = None
    work: asyncio.Future[Any] | None = None
    # One block from the hand-off on: Ctrl-C landing anywhere in it (a blocking run's
    # loop raises it in the running task) leaves the call kept or waited for.
    try:
        if waits is not None:
            ticket = waits.tickets[index] = Ticket(index)
            work, started = hand_off_timed(_call_ticketed, job, arguments, ticket, waits.inbox)
        elif finished is None:
            work, started = hand_off_timed(_call_sync, job, arguments)
        else:
            noted = []
            work, started = hand_off_timed(_call_noted, job, arguments, noted)
        await asyncio.wait({work, started}, return_when=asyncio.FIRST_COMPLETED)
        deadline = started.result() + timeout
        if not work.done():
            await asyncio.wait({work}, timeout=max(0.0, deadline - time.monotonic()))
    except Exception:  # (the hand-off's: the call's error, see `_run_one`)
        raise
    except BaseException:  # cancelled, or Ctrl-C
        # A call a worker still runs goes on, stuck perhaps, and its worker's slot goes
        # to another, as on a timeout; `abandon` decides that under the workers' lock
        # (one that has ended on its thread, reported or not, is left alone), and
        # one not taken yet is cancelled first, so it never runs.
        if work is not None and not work.done():
            work.cancel()
            abandon(work)
        if ticket is not None:
            _keep_ticketed(finished, index, job, ticket)
        else:
            _keep_noted(finished, index, job, noted)
        _close_unread(work)
        raise
    if ticket is None:
        return await _timed_outcome(job, work, timeout, deadline)
    # A blocking round's call: kept as it ends (see `_run_one`).
    try:
        outcome = await _timed_outcome(job, work, timeout, deadline)
        if finished is not None:
            finished[index] = outcome
    except BaseException:
        _keep_ticketed(finished, index, job, ticket)
        raise
    return outcome


async def _timed_outcome(
    job: ToolJob, work: asyncio.Future[Any], timeout: float, deadline: float
) -> ToolOutcome:
    """The outcome of a sync call with a timeout once its wait ended (see `_run_timed_sync`);
    what it returned to await is awaited until its ``deadline`` (`time.monotonic`)."""
    if not work.done():
        work.cancel()
        # Its thread cannot be stopped: another worker takes its place (unless the
        # call ended on its thread meanwhile, see `abandon`).
        abandon(work)
        return _timed_out(job, timeout)
    try:
        value = work.result()
        if type(value) is Escaped:  # (a GeneratorExit: see `Escaped`)
            raise_escaped(value)
        if type(value) not in _NOT_AWAITABLE and inspect.isawaitable(value):
            value = await await_within(value, deadline - time.monotonic())
            if value is TIMED_OUT:
                return _timed_out(job, timeout)
    except Exception as exc:
        return failed_outcome(job, exc)
    return _finish(job, value)


def _ended(job: ToolJob, ok: bool, value: Any) -> ToolOutcome | None:
    """The outcome of a call that returned (``ok``) or raised ``value`` before its round was
    interrupted; None when it has none yet without running more (it returned an awaitable),
    must run again (it raised an interruption itself) or never ran (`NOT_RUN`)."""
    if not ok:
        return failed_outcome(job, value) if isinstance(value, Exception) else None
    if value is NOT_RUN or (type(value) not in _NOT_AWAITABLE and inspect.isawaitable(value)):
        return None
    return _finish(job, value)
