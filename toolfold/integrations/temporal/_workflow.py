"""The workflow: `reduce` / `next_effect` driven in workflow code, every I/O an activity.

A workflow step or an agent used as a tool runs a nested run, driven here by
the same loop (see `_nested`): its state nests in the top run's, as locally.
A handoff switches the node that drives a run (top-level or nested) to the
agent it hands to, with the core's `HandedOff` (see `Node.hand_off`).

Workflow code must be deterministic: it only asks the pure core what to do,
calls activities by their stable names, and reduces what they return. No
clock, random, thread or I/O here (tests/test_temporal.py scans for them).
"""

from __future__ import annotations

import asyncio
import dataclasses
import zlib
from collections.abc import Callable, Coroutine, Iterable, Sequence
from datetime import timedelta
from typing import Any

import attrs
from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from toolfold._errors import RunError, ToolDefinitionError, ToolExecutionError, UsageError
    from toolfold.integrations.temporal._activities import (
        PAYLOAD_LIMIT,
        PAYLOAD_TOO_LARGE,
        ModelCallInput,
        OutputInput,
        SourceCallInput,
        ToolCallInput,
        counted_request,
        dropped_in,
        list_activity_name,
        model_activity_name,
        model_answer,
        output_activity_name,
        payloads_size,
        tool_activity_name,
    )
    from toolfold.integrations.temporal._nested import Listing, Node, SubRunTool, listed, restarted
    from toolfold.runtime._resume import address, bound_address, nest_answers
    from toolfold.runtime.core._approval import dispositions, policy_says
    from toolfold.runtime.core._effects import (
        CallModel,
        RunTools,
        ToolInvocation,
        ValidateOutput,
    )
    from toolfold.runtime.core._events import (
        ApprovalDenied,
        ApprovalGranted,
        Event,
        ModelResponded,
        OutputAccepted,
        OutputRejected,
        StopRequested,
        ToolResultsProvided,
        ToolReturned,
        ToolSuspended,
    )
    from toolfold.runtime.core._keys import BOUND_KEY
    from toolfold.runtime.core._messages import ToolCallPart, Usage
    from toolfold.runtime.core._next import next_effect
    from toolfold.runtime.core._reducer import reduce
    from toolfold.runtime.core._request import ModelResponse
    from toolfold.runtime.core._serialize import snapshot_to_json
    from toolfold.runtime.core._state import (
        WAITING_PHASES,
        CallStatus,
        Disposition,
        RunState,
    )
    from toolfold.runtime.core._stop import handed_budget, stop_event
    from toolfold.runtime.drive._executor import failed_sub_run, timed_out_message
    from toolfold.runtime.drive._failures import tool_failure, with_dropped_sub_runs
    from toolfold.runtime.drive._handoff import at_limit, settle_events
    from toolfold.runtime.drive._loop import unique_call_ids, with_cut_usage
    from toolfold.runtime.drive._output import OutputRejected as _Rejected
    from toolfold.runtime.drive._output import rejection
    from toolfold.runtime.drive._workers import carried as carried_exception
    from toolfold.toolkit._results import describe_exception

WORKFLOW_NAME = "toolfold_agent"
NESTED_RUNS = "toolfold-nested-runs"
"""The `workflow.patched` id of nested runs driven in the workflow (runs recorded
before it ran a workflow step or an agent used as a tool as one activity)."""
NESTED_TIMEOUTS = "toolfold-nested-timeouts"
"""The `workflow.patched` id of the timeouts of nested runs (a workflow timer per sub-run):
a run that started a sub-run before its step or tool had a timeout goes on without it."""
NESTED_CONTINUE_AS_NEW = "toolfold-nested-continue-as-new"
"""The `workflow.patched` id of continuing as new inside nested runs (runs recorded
before it continued as new only between the top run's model calls)."""
TIMED_OUT_SUB_RUNS = "toolfold-timed-out-sub-runs"
"""The `workflow.patched` id of keeping a timed-out sub-run on its call's result (runs
recorded before it dropped it: their states, and so what they carry, stay as they were)."""
WORKFLOW_TOOLS = "toolfold-workflow-tools"
"""The `workflow.patched` id of a workflow used as a tool (`Workflow.as_tool`) running
as a nested run (runs recorded before it gave that call the error result
``Error: AssertionError``: they replay so)."""
HANDOFF_AT_STOP = "toolfold-handoff-at-stop"
"""The `workflow.patched` id of handing a run over when the step that reached its
``max_steps`` called a transfer tool (runs recorded before it stopped with the agent
that called the transfer: their states stay as they were)."""
RAISED_SUB_RUN_USAGE = "toolfold-raised-sub-run-usage"
"""The `workflow.patched` id of counting, in the state of an ``on_tool_error="raise"``
error, the usage of the sub-runs its round made (`AttemptDropped`; runs recorded before
it left them out: their states stay as they were)."""
RAISED_KEEPS_ENDED = "toolfold-raised-keeps-ended-calls"
"""The `workflow.patched` id of keeping, in the state of an ``on_tool_error="raise"`` error,
the results of the round's calls that did not fail, as a local run does (runs recorded
before it gave the state before the round's results: their states stay as they were)."""
EXACT_COUNTS = "toolfold-exact-counts"
"""The `workflow.patched` id of a model response's float counts kept exact (runs recorded
before read them truncated to ints, as the data converter did: a budget or stop condition
reading the usage decides on replay as it did)."""
UNFIT_OUTPUT_FAILS = "toolfold-unfit-output-fails"
"""The `workflow.patched` id of failing a run at once when its answer did not fit the output
type and the provider ended it with a refusal or at the token limit (`_output.rejection`;
runs recorded before sent it back to the model up to ``output_retries`` times: they replay so)."""
HANDOFF_KEEPS_STOPS = "toolfold-handoff-keeps-stops"
"""The `workflow.patched` id of a handoff keeping the stop conditions of the run's first
agent, as a local run does: its stored ones (`started_config`) go into the target's
configuration beside the target's own, and its live predicates go on being checked beside
the running agent's (runs recorded before kept only the tree budgets of the run's
configuration and checked the running agent's predicates: they replay so)."""
FILTERED_CONVERSATION_CHECKED = "toolfold-filtered-conversation-checked"
"""The `workflow.patched` id of refusing a handoff whose input filter returned a conversation
no provider takes (a tool result answering no call...), as a local run does, with a
`RunError` naming the filter (runs recorded before sent it to the model, or refused only
calls without results, in the reducer: they replay so)."""
DURABLE_BOUND_KEYS = "toolfold-durable-bound-keys"
"""The `workflow.patched` id of an update's bound approval keys (`approval_key`) read as a
local resume reads them, the one call each was made for (runs recorded before refused them
in the validator; the handler read one as a call's own id: they replay so)."""
STOP_NAMES_HANDED = "toolfold-stop-names-handed-agent"
"""The `workflow.patched` id of naming, in the error result of a sub-run that a stop ended
after a handoff, as the run of the agent the call started handed to the agent that stopped
(`stopped_content`), as a local run does (runs recorded before named the agent the call
started alone: they replay so)."""
STEP_STOP_NAMES_HANDED = "toolfold-step-stop-names-handed-agent"
"""The `workflow.patched` id of naming, in the error result of a workflow step whose run a stop
ended after a handoff, the run of the step's agent handed to the agent that stopped
(`step_result`), as a local run does (runs recorded before said "the step's run": they
replay so)."""
FAILURE_NAMES_AGENT = "toolfold-failure-names-agent"
"""The `workflow.patched` id of naming, in the error ``on_tool_error="raise"`` raises for a
failed sub-run, the agent that ran it where the tool's name does not say it (`failed_in`),
as a local run does; inside a sub-run that error's text is its caller's error result (runs
recorded before said ``tool 'ask' failed: ...``: they replay so)."""
DROPPED_ATTEMPTS = "toolfold-dropped-attempts-counted"
"""The `workflow.patched` id of counting the usage of a model request's attempts whose stream
failed after the provider reported it (billed), as a local run counts a cut stream
(`AttemptDropped`): the activity carries them to the response or to its final failure (runs
recorded before counted only the attempt that answered: their states stay as they were)."""
STREAMED_CANCEL_WAITS = "toolfold-streamed-cancel-waits"
"""The `workflow.patched` id marking a run whose top model requests stream (its agent has an
``event_stream_handler`` on the worker that ran them): cancelled, it waits for such a request's
activity to stop, to count the usage it reports; unstreamed, it ends at once. Set only by a
worker whose agent streams, and read from the history on replay (`_waits_on_cancel`), so a
cancelled run replays as it ran whatever handler the replaying worker has."""
TOOL_FAILURES_RETURNED = "toolfold-tool-failures-returned"
"""The `workflow.patched` id of a tool activity that failed for good (it ran past
``tool_timeout``, or Temporal's retries were used up) giving its call an error result, as a
local tool that times out or fails does (`_failed_tool`; runs recorded before failed with
Temporal's ``ActivityError``: they replay so)."""
MISSING_WAITS = "toolfold-missing-waits"
"""The `workflow.patched` id of a worker that lacks the run's agent or a tool it calls
failing the workflow task (`NotOnThisWorker`: Temporal retries it until a worker that has
them takes it), where runs recorded before failed for good. Asked only where something is
missing (a history that lacks its marker replays with the old failure): so runs started
before the change wait too, and a rollback replays every run that lacked nothing. A worker
without a tool replaying a run that called it (no marker there) fails its task with
Temporal's nondeterminism error instead of naming the tool: the run waits all the same."""
NOT_RETRIED = "TemporalTimeout:StartToClose"
"""The retry policy's ``non_retryable_error_types`` entry that has Temporal not retry an
activity that ran past its start-to-close timeout (the server's ``TemporalTimeout:`` prefix
and timeout type): a heartbeat timeout, a worker that died, is still retried."""
RUN_ERROR = "toolfold."
"""The prefix of the failure type of a run that raised a `RunError` where a local
run raises it (``toolfold.ToolExecutionError`` for ``on_tool_error="raise"``)."""
QUERY_LIMIT = 4_000_000
"""The largest state a query answers with: Temporal's gRPC messages are limited to
4 MiB (4,194,304 bytes), the rest of the message included."""
PART_CHARS = 500_000
"""Characters of the state's JSON per `AgentWorkflow.state_part` answer (at most 4 bytes
each in UTF-8, twice that escaped: well under `QUERY_LIMIT`)."""
# How an activity is cancelled (an SDK setting, not in the history): in a timed
# sub-run once it stopped; elsewhere as soon as the workflow asked (Temporal's default).
_WAIT = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
_ASK = ActivityCancellationType.TRY_CANCEL


def _positive_duration(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise UsageError(
            f"ActivitySettings.{attribute.name} must be a datetime.timedelta greater than "
            f"zero, got {value!r}"
        )


def _positive_or_none(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise UsageError(
            f"ActivitySettings.{attribute.name} must be an integer >= 1, or None, got {value!r}"
        )


def _retry_policy(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, RetryPolicy):
        raise UsageError(
            f"ActivitySettings.{attribute.name} must be a temporalio.common.RetryPolicy, "
            f"got {value!r}"
        )


@attrs.frozen(kw_only=True)
class ActivitySettings:
    """How the workflow calls an agent's activities (Temporal owns the retries).

    Attributes:
        model_timeout: Start-to-close timeout of one model request.
        tool_timeout: Start-to-close timeout of one tool call. A call past it
            is not tried again (its effect may be done): the model reads that
            it timed out, as a local tool's timeout says.
        heartbeat_timeout: A worker silent this long is taken for dead and
            its activity retried (activities heartbeat at a third of it).
            Keep it well below ``tool_timeout``, or a tool call whose worker
            died reads as timed out (and is not retried).
        retry_policy: Temporal's retry policy for both kinds of activity
            (a tool's with ``TemporalTimeout:StartToClose`` added to its
            ``non_retryable_error_types``).
        continue_as_new_steps: Continue as new (a fresh history, carrying
            the state) after this many model calls in one history, counted
            at any depth (nested runs continue in the middle of their step);
            None: only when Temporal suggests it (its history is getting large).
        max_result_bytes: A tool result larger than this (its text and parts
            as its payload carries them: UTF-8 with JSON's escapes, bytes as
            base64) reaches the model as an error result saying so, an
            ``as_tool(output=...)`` function's too: Temporal's payloads are
            limited to 2 MB, and the state carries every result. None: no
            limit (with external storage for large payloads, see
            `ToolfoldPlugin`).

    Raises:
        UsageError: A timeout that is not a `datetime.timedelta` greater than
            zero, ``continue_as_new_steps`` or ``max_result_bytes`` that is not
            None or an integer >= 1, or a ``retry_policy`` that is not a
            `temporalio.common.RetryPolicy` (each would make every workflow
            task of its runs fail and retry without end).
    """

    model_timeout: timedelta = attrs.field(
        default=timedelta(minutes=5), validator=_positive_duration
    )
    tool_timeout: timedelta = attrs.field(
        default=timedelta(minutes=5), validator=_positive_duration
    )
    heartbeat_timeout: timedelta = attrs.field(
        default=timedelta(seconds=10), validator=_positive_duration
    )
    retry_policy: RetryPolicy = attrs.field(
        factory=lambda: RetryPolicy(maximum_interval=timedelta(minutes=1)),
        validator=_retry_policy,
    )
    continue_as_new_steps: int | None = attrs.field(default=None, validator=_positive_or_none)
    max_result_bytes: int | None = attrs.field(default=1_000_000, validator=_positive_or_none)


@attrs.frozen(kw_only=True)
class Registered:
    """An agent as the workflow knows it on a worker: its tree of nodes and its settings.

    ``payload_limit``: the largest activity input the workflow schedules
    (None with external storage, which takes larger payloads by reference).
    ``streams``: the agent has an ``event_stream_handler``, so its model
    activities stream and can report a cancelled attempt's usage (the
    workflow then waits for a cancelled top request's activity to stop).
    """

    node: Node
    settings: ActivitySettings
    payload_limit: int | None = PAYLOAD_LIMIT
    streams: bool = False

    @property
    def name(self) -> str:
        """The agent's name (as in activity names)."""
        return self.node.name


# Filled by `ToolfoldPlugin` on the worker: the agents its workflows can run.
_AGENTS: dict[str, Registered] = {}


def register(entry: Registered) -> None:
    """Make an agent runnable by this process's workflows."""
    _AGENTS[entry.name] = entry


class NotOnThisWorker(RuntimeError):
    """A run needs an agent, or a tool of its agent, that this worker does not register.

    Raised in workflow code, it fails the workflow task, not the run:
    Temporal retries the task until a worker that registers them takes it
    (the run waits meanwhile, its state and its pending approvals kept).
    """


def _registered(names: Iterable[str]) -> str:
    """``names`` sorted, as an error lists what a worker registers."""
    return ", ".join(sorted(names)) or "none"


@attrs.frozen
class CarriedCall:
    """A call of a step in flight when its run continued as new (at any depth).

    The sub-runs in flight travel in the state itself, as the ``child`` of
    their calls; what the state cannot hold travels here.

    Attributes:
        path: Tool name and call id per level from the top run, the call's own last.
        event: What the call ended with, when it had ended but its step had
            not committed it yet (another call of the step was still running).
        deadline: When its sub-run times out (workflow time, in seconds).
        listing: What the tool sources of its sub-run's agent listed when
            the sub-run started (the sub-run goes on with the same tools).
            A path that ends with ``"@<agent>"`` carries only this: what
            that handoff target listed when the run at the rest of the path
            reached it.
    """

    path: tuple[str, ...]
    event: Event | None = None
    deadline: float | None = None
    listing: Listing | None = None


@attrs.frozen
class AgentInput:
    """A workflow's input: which agent, and its state (built by the client, or carried).

    ``calls``: what a run that continued as new in the middle of a step
    carries besides its state (see `CarriedCall`). ``listing``: what the
    agent's tool sources listed, recorded when the run started; None for a
    new run (or an agent without sources). Carried when the run continues as
    new, so the new history has the same tools.
    """

    agent: str
    state: RunState
    calls: tuple[CarriedCall, ...] = ()
    listing: Listing | None = None


@attrs.frozen
class StatePart:
    """One part of a run's state as JSON text, for a state too large for one query answer.

    Attributes:
        text: Characters ``index * PART_CHARS`` onwards of the state's JSON.
        parts: How many parts the whole text has.
        checksum: The whole text's CRC-32: parts of one state share it (a
            running workflow may change between two queries).
    """

    text: str
    parts: int
    checksum: int


@attrs.frozen
class Answers:
    """The events an update brings to a suspended run (approvals, denials, tool results)."""

    events: tuple[Event, ...]


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    """One agent run as a Temporal workflow; its result is the final (or failed) state."""

    def __init__(self) -> None:
        self._state: RunState | None = None
        self._agent: Registered | None = None
        self._first_step = 0  # the top run's step when this history began
        self._listing: Listing | None = None  # what the top agent's tool sources listed
        # What the sources of the sub-runs' agents listed, by the call's path, while they
        # run; and those of the handoff targets a run reached, by its path and "@<agent>".
        self._listings: dict[tuple[str, ...], Listing] = {}
        # The states of sub-runs in flight, by their path (tool name and call id per level).
        self._nested: dict[tuple[str, ...], RunState] = {}
        # Continuing as new: every part of the run stops at its next boundary (a
        # model request or a step's tool calls to start); once no activity is in
        # flight, the whole tree goes into a new history.
        self._in_flight = 0  # activities running
        self._model_calls = 0  # model requests made in this history, at any depth
        self._continuing = False
        self._leaving = False  # one part of the run is carrying it into a new history
        self._cannot_carry = False  # the tree is too large to carry (in this history)
        # By the call's path: calls that ended but are not committed yet (their
        # step's other calls still run), and the deadlines of timed sub-runs.
        self._ended: dict[tuple[str, ...], Event] = {}
        self._deadlines: dict[tuple[str, ...], float] = {}
        self._carried: dict[tuple[str, ...], CarriedCall] = {}  # from the previous history
        # The rounds of tool calls in flight, by the path of the run making them: its
        # calls and those that ended (by index), for the state a timeout stops it at.
        self._rounds: dict[
            tuple[str, ...], tuple[Node, tuple[ToolInvocation, ...], dict[int, Any]]
        ] = {}

    @workflow.run
    async def run(self, given: AgentInput) -> RunState:
        """Drive the run until it finishes; suspend (and wait for `answer`) when it must."""
        agent = _AGENTS.get(given.agent)
        if agent is None:
            message = (
                f"agent {given.agent!r} is not registered on this worker "
                f"(registered: {_registered(_AGENTS)})"
            )
            raise _not_on_this_worker(message)
        self._state = given.state
        self._agent = agent
        self._first_step = given.state.step
        self._carried = {call.path: call for call in given.calls}
        self._listing = given.listing
        self._listings = {c.path: c.listing for c in given.calls if c.listing is not None}
        if agent.node.sources:
            await self._sourced(agent, given)
        while True:
            try:
                state = await self._drive(agent, agent.node, self._state, ())
            except RunError as exc:  # raised where a local run raises it: the run fails
                if exc.state is not None:
                    self._state = exc.state  # the error's state, as the `state` query says
                raise ApplicationError(
                    str(exc), type=RUN_ERROR + type(exc).__name__, non_retryable=True
                ) from None
            if state.phase not in WAITING_PHASES:  # a failed run is a result, not an exception
                _check_size(agent, "the run's result", state)
                return state
            await workflow.wait_condition(lambda: self._phase() not in WAITING_PHASES)

    async def _sourced(self, agent: Registered, given: AgentInput) -> None:
        """List the top agent's sources' tools now (a new run), or check the carried listing.

        A new run lists them in the ``<agent>__list_tools`` activity and its
        first state is remade with them, as a local run lists them before its
        first state; the listing, recorded, gives the same tools on replay.
        """
        if self._listing is None:
            self._listing = await self._list_tools(agent, agent.node)
            fresh = True
        else:
            fresh = False
        try:
            top = listed(agent.node, self._listing)
        except (ToolDefinitionError, UsageError) as exc:  # a listed tool clashes with another,
            # or tool_choice names none of them: as locally
            raise ApplicationError(str(exc), type=type(exc).__name__, non_retryable=True) from None
        if fresh:
            self._state = restarted(top, given.state)

    async def _list_tools(self, agent: Registered, node: Node) -> Listing:
        """What ``node``'s tool sources list, from its ``<node>__list_tools`` activity (recorded)."""
        self._in_flight += 1
        try:
            listing: Listing = await workflow.execute_activity(
                list_activity_name(node.name),
                result_type=Listing,
                start_to_close_timeout=agent.settings.tool_timeout,
                heartbeat_timeout=agent.settings.heartbeat_timeout,
                retry_policy=agent.settings.retry_policy,
            )
        finally:
            self._in_flight -= 1
        return listing

    async def _drive(
        self, agent: Registered, node: Node, state: RunState, path: tuple[str, ...]
    ) -> RunState:
        """Drive ``state`` (of the run at ``path``, () for the top) until it waits or ends.

        Raises:
            RunError: Where a local run raises it (a tool failed with
                ``on_tool_error="raise"``, a handoff's input filter raised).
        """
        first = node  # the first agent's node, as registered (its sources unlisted)
        node = self._listed(first, path).running(state)  # a run handed off before it waited
        while True:
            self._publish(path, state)
            effect = next_effect(state)
            if isinstance(effect, CallModel):
                switched = await self._hand_off(agent, first, node, state, path)
                if switched is not None:  # the step asked for a handoff: the next agent goes on
                    node, state = switched
                    continue
                stop = _stop(node, state, first)
                if stop is not None:
                    state = reduce(state, stop)
                    continue
                if self._should_continue_as_new(agent, state, path):
                    self._continuing = True
                if self._continuing:
                    await self._pause(agent)
                state = await self._call_model(agent, node, state, effect, path)
            elif isinstance(effect, RunTools):
                if self._continuing:
                    await self._pause(agent)
                state = await self._run_tools(agent, node, state, effect, path)
            elif isinstance(effect, ValidateOutput):
                state = reduce(state, _validate(node, state, effect))
            else:  # waiting for answers, or over
                if (
                    at_limit(state)
                    and node.handing_to(state) is not None
                    and workflow.patched(HANDOFF_AT_STOP)
                ):  # the step that reached max_steps called a transfer tool: as locally
                    switched = await self._hand_off(agent, first, node, state, path)
                    if switched is not None:
                        node, state = switched
                        continue
                return state

    async def _hand_off(
        self, agent: Registered, first: Node, node: Node, state: RunState, path: tuple[str, ...]
    ) -> tuple[Node, RunState] | None:
        """The node and state after the handoff the last step asked for, if it asked
        (the target's tool sources listed first, once per run)."""
        target = node.handing_to(state)
        if target is not None and target.sources and target.agent != first.agent:
            key = (*path, f"@{target.agent}")
            if key not in self._listings:  # listed once per run, as locally opened once
                self._listings[key] = await self._list_tools(agent, target)
                try:
                    node = self._listed(first, path).running(state)
                except (ToolDefinitionError, UsageError) as exc:  # as locally: the run raises it
                    if path:  # (a sub-run's: the calling tool's error result)
                        if isinstance(exc, UsageError):
                            raise _UnusableListing(exc) from exc
                        raise
                    raise ApplicationError(
                        str(exc), type=type(exc).__name__, non_retryable=True
                    ) from None
        return node.hand_off(state, _keeps_stops, _refuses_unfit)

    def _listed(self, first: Node, path: tuple[str, ...]) -> Node:
        """``first`` with the tools its sources, and those of the handoff targets reached, listed."""
        listing = self._listing if not path else self._listings.get(path)
        targets = {
            key[-1][1:]: listed_
            for key, listed_ in self._listings.items()
            if key[:-1] == path and key[-1].startswith("@")
        }
        if listing is None and not targets:
            return first
        return listed(first, listing if first.sources else None, targets)

    def _publish(self, path: tuple[str, ...], state: RunState) -> None:
        if path:
            self._nested[path] = state
        else:
            self._state = state

    def _should_continue_as_new(
        self, agent: Registered, state: RunState, path: tuple[str, ...]
    ) -> bool:
        """Whether the run should continue as new before this model request (at ``path``)."""
        if self._cannot_carry:
            return False
        every = agent.settings.continue_as_new_steps
        suggested = workflow.info().is_continue_as_new_suggested()
        if not path and (
            suggested or (every is not None and state.step - self._first_step >= every)
        ):
            return True  # as runs did before nested runs could continue as new
        counted = every is not None and self._model_calls >= every
        return (suggested or counted) and workflow.patched(NESTED_CONTINUE_AS_NEW)

    async def _pause(self, agent: Registered) -> None:
        """Wait at this boundary while the run makes ready to continue as new.

        Every part of the run (the top run, each sub-run in flight) stops at
        its next boundary. Once no activity is in flight, all of them are
        stopped (a workflow's condition is checked when nothing else can
        run), and the first to wake carries the whole tree into a new
        history; or, when it is too large to carry, lets them all go on.
        """
        while True:
            await workflow.wait_condition(
                lambda: not self._continuing or (self._in_flight == 0 and not self._leaving)
            )
            if not self._continuing:
                return
            if not self._leaving:
                break
        self._leaving = True
        try:
            await self._carry(agent)  # continues as new, or returns: too large to carry
        except asyncio.CancelledError:  # its sub-run timed out: another part carries it
            self._leaving = False
            raise
        self._continuing = self._leaving = False

    async def _carry(self, agent: Registered) -> None:
        """Continue as new with the whole tree: the state, its sub-runs in flight, their calls."""
        assert self._state is not None
        calls = {path: CarriedCall(path, event=event) for path, event in self._ended.items()}
        for path, at in self._deadlines.items():
            calls[path] = attrs.evolve(calls.get(path, CarriedCall(path)), deadline=at)
        for path, listing in self._listings.items():
            calls[path] = attrs.evolve(calls.get(path, CarriedCall(path)), listing=listing)
        state = self._view(self._state, ())
        carried = AgentInput(agent.name, state, tuple(calls.values()), self._listing)
        if _size_over(agent, carried) is not None:  # it goes on in this history
            self._cannot_carry = True
            return
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(carried)

    async def _call_model(
        self,
        agent: Registered,
        node: Node,
        state: RunState,
        effect: CallModel,
        path: tuple[str, ...],
    ) -> RunState:
        s = agent.settings
        self._model_calls += 1
        name = model_activity_name(node.name)
        if workflow.patched(DROPPED_ATTEMPTS):
            # Every node's request says where its run is, and asks for the usage of the
            # attempts that failed after their stream reported it (`ModelAnswer`).
            # A streamed top request waits for its activity to stop when the workflow is
            # cancelled: the attempts it cut before come back in its failure
            # (`_cancelled_failure`). Unstreamed, it has none to count: cancelled at once.
            # The first agent's request is a `CallModel` with the flag beside its fields, and
            # the answer may be a bare response: both as an activity worker from before
            # reads and writes them (a rolling deploy).
            given: Any = (
                counted_request(effect)
                if node.name == agent.name
                else ModelCallInput(effect, path, counted=True)
            )
            try:
                raw = await self._activity(
                    agent,
                    path,
                    name,
                    given,
                    RawValue,
                    s.model_timeout,
                    wait=not path and _waits_on_cancel(agent),
                )
            except ActivityError as exc:  # failed for good: its error's state counts them
                dropped = _failure_dropped(exc)
                if dropped:  # (the state the `state` query, or the calling tool, keeps)
                    self._publish(path, _with_dropped(state, dropped))
                if not path and workflow.cancellation_reason() is not None:
                    raise asyncio.CancelledError() from exc  # cancelled, whatever stopped it
                raise
            answer = model_answer(workflow.payload_converter().from_payload(raw.payload))
            if not path and workflow.cancellation_reason() is not None:
                # Answered before it heard of the cancel: dropped, as an answer a local
                # run is cancelled on before it takes it, and counted (it was billed).
                billed = (*answer.dropped, answer.response.usage)
                self._publish(path, _with_dropped(state, billed))
                raise asyncio.CancelledError()
            state = _with_dropped(state, answer.dropped)
            response = answer.response
        else:
            # The first agent's model request takes the effect; every other node's
            # (sub-runs, handoff targets) says where its run is.
            old: Any = effect if node.name == agent.name else ModelCallInput(effect, path)
            response = await self._activity(agent, path, name, old, ModelResponse, s.model_timeout)
        response = unique_call_ids(response)
        if _has_float_counts(response.usage) and not workflow.patched(EXACT_COUNTS):
            response = attrs.evolve(response, usage=_truncated(response.usage))

        # The worker's tools decide, as in a local run: an approval predicate
        # runs here, in workflow code, so it must be deterministic (a pure
        # function of the call and the state; see docs/durable.md).
        # A tool the worker lacks executes: `_run_tools` fails the run naming it.
        def live_says(call: ToolCallPart) -> bool:
            return policy_says(node.tools.get(call.name), call, state, unknown=False)

        decided = dispositions(state.config, response.tool_calls, live_says)
        chosen: tuple[Disposition, ...] = tuple(d or "approve" for d in decided)
        return reduce(state, ModelResponded(response, chosen))

    async def _run_tools(
        self,
        agent: Registered,
        node: Node,
        state: RunState,
        effect: RunTools,
        path: tuple[str, ...],
    ) -> RunState:
        messages = tuple(state.conversation)
        budget = handed_budget(state)  # the step's, for every call (`RunContext.token_budget`)
        for invocation in effect.calls:
            if invocation.tool_name not in node.tools:
                message = (
                    f"tool {invocation.tool_name!r} of agent {node.name!r} is not registered "
                    f"on this worker (its tools: {_registered(node.tools)})"
                )
                raise _not_on_this_worker(message)
        # As many in flight as a local run allows (the workflow's event loop is
        # deterministic: the semaphore lets calls in, in call order).
        limit = asyncio.Semaphore(node.max_concurrency)

        def where(invocation: ToolInvocation) -> tuple[str, ...]:
            return (*path, invocation.tool_name, invocation.call.id)

        # Set once the step is over (committed, raised, or cancelled): a call
        # that ends after (a sibling of a call that raised) is no longer the
        # step's, and must not be carried as the result of a later call that
        # reuses its path (a model may reuse a call id in a later step).
        over = False

        ended: dict[int, Any] = {}  # (by index) for `_stopped_at`

        async def run(index: int, invocation: ToolInvocation) -> Any:
            carried = self._carried.get(where(invocation))
            if carried is not None and carried.event is not None:
                del self._carried[where(invocation)]
                ended[index] = carried.event
                return carried.event  # it ended before the run continued as new
            async with limit:
                event = await run_call(invocation)
            if not over:
                self._ended[where(invocation)] = event
                ended[index] = event
            return event

        async def run_call(invocation: ToolInvocation) -> Any:
            sub = node.nested.get(invocation.tool_name)
            # Runs recorded before nested runs were driven here ran the
            # whole sub-run as one tool activity: their replay still does.
            if sub is not None and (path or workflow.patched(NESTED_RUNS)):
                return await self._sub_run(agent, node, sub, state, invocation, path)
            name = tool_activity_name(node.name, invocation.tool_name)
            given: Any = ToolCallInput(invocation, state.run_id, messages, budget)
            sourced = node.sourced.get(invocation.tool_name)
            if sourced is not None:  # a tool source's: the worker's dynamic activity
                given = SourceCallInput(node.name, sourced.source, sourced.spec, given)
            return await self._tool_activity(
                agent, path, name, given, invocation.call.id, invocation.tool_name
            )

        self._rounds[path] = (node, effect.calls, ended)
        try:
            results: Sequence[Any] = await asyncio.gather(
                *(run(index, c) for index, c in enumerate(effect.calls))
            )
        finally:  # (continuing as new: the calls that ended are carried already)
            over = True
            del self._rounds[path]
            for invocation in effect.calls:
                self._ended.pop(where(invocation), None)
        if node.on_tool_error == "raise":  # the state before the step's results, as locally
            failures = [
                self._failure(node, state, invocation, event)
                for invocation, event in zip(effect.calls, results, strict=True)
            ]
            error = next((f for f in failures if f is not None), None)  # the first, in call order
            if error is not None:
                if workflow.patched(RAISED_KEEPS_ENDED):  # the other calls' results kept
                    error.state = self._raised_state(node, state, results, failures)
                elif workflow.patched(RAISED_SUB_RUN_USAGE):  # the sub-runs' usage kept
                    ran = (ToolReturned, ToolSuspended)
                    made = [(e.call_id, e.child) for e in results if isinstance(e, ran)]
                    error.state = with_dropped_sub_runs(state, made)
                raise error
        if node.transfers:  # the step's transfer calls that do not hand over say so, as locally
            results = settle_events(state.calls, results, node.transfers)
        for event in results:  # gather keeps call order: results commit in call order
            state = reduce(state, event)
        return state

    @staticmethod
    def _failure(
        node: Any, state: RunState, invocation: ToolInvocation, event: Any
    ) -> ToolExecutionError | None:
        """The error ``on_tool_error="raise"`` raises for a call's result ``event`` (`tool_failure`), or None."""
        if not isinstance(event, ToolReturned):
            return None
        return tool_failure(
            state,
            invocation.tool_name,
            event.outcome,
            event.content,
            event.child,
            who=node.agent_run_by(invocation.tool_name),
            names_agent=lambda: workflow.patched(FAILURE_NAMES_AGENT),
        )

    @staticmethod
    def _raised_state(
        node: Any,
        state: RunState,
        results: Sequence[Any],
        failures: Sequence[ToolExecutionError | None],
    ) -> RunState:
        """An ``on_tool_error="raise"`` error's state, as a local run's (`raise_tool_error`).

        The results of the round's calls that did not fail (``failures``, by
        result, from `_failure`) committed (settled for transfers), the failed
        calls still to run, their sub-runs' usage counted (`with_dropped_sub_runs`).
        """
        failed: list[Any] = []
        ended: list[Any] = []
        for event, failure in zip(results, failures, strict=True):
            (ended if failure is None else failed).append(event)
        if node.transfers:
            ended = settle_events(state.calls, ended, node.transfers)
        reached = state
        for event in ended:
            reached = reduce(reached, event)
        return with_dropped_sub_runs(reached, [(e.call_id, e.child) for e in failed])

    async def _tool_activity(
        self,
        agent: Registered,
        path: tuple[str, ...],
        name: str,
        given: Any,
        call_id: str,
        tool: str,
    ) -> ToolReturned:
        """The tool activity (or output activity) ``name`` for call ``call_id`` of ``tool``,
        with the agent's tool settings.

        As a local tool's timeout, ``tool_timeout`` ends the call (its activity
        is not tried again: `NOT_RETRIED`) and the model reads that it timed
        out; an activity that failed for good otherwise (Temporal's retries
        used up) gives the call an error result too (`_failed_tool`). The run
        goes on, or raises under ``on_tool_error="raise"`` (`_failure`).
        """
        timeout = agent.settings.tool_timeout
        try:
            returned: ToolReturned = await self._activity(
                agent,
                path,
                name,
                given,
                ToolReturned,
                timeout,
                retry_policy=_tool_retries(agent.settings.retry_policy),
            )
        except ActivityError as exc:
            if (
                isinstance(exc.cause, CancelledError)  # cancelled: the run or its sub-run stops
                or workflow.cancellation_reason() is not None
                or not workflow.patched(TOOL_FAILURES_RETURNED)
            ):
                raise
            return _failed_tool(call_id, tool, exc, timeout)
        return returned

    async def _activity(
        self,
        agent: Registered,
        path: tuple[str, ...],
        name: str,
        given: Any,
        result: type[Any],
        timeout: timedelta,
        *,
        wait: bool = False,
        retry_policy: RetryPolicy | None = None,
    ) -> Any:
        """Activity ``name``'s result for ``given`` (its size checked first), counted in flight.

        Inside a timed sub-run (the run at ``path`` or one above it), or when
        ``wait``, a cancelled activity is over only once it has stopped (as a
        timed-out call is locally; or with what it says as it stops);
        elsewhere the run goes on once it asked. ``retry_policy``: the agent's
        when None.
        """
        _check_size(agent, name, given)
        timed = wait or any(path[:end] in self._deadlines for end in range(2, len(path) + 1, 2))
        self._in_flight += 1
        try:
            return await workflow.execute_activity(
                name,
                given,
                result_type=result,
                start_to_close_timeout=timeout,
                heartbeat_timeout=agent.settings.heartbeat_timeout,
                retry_policy=retry_policy or agent.settings.retry_policy,
                cancellation_type=_WAIT if timed else _ASK,
            )
        finally:
            self._in_flight -= 1

    async def _sub_run(
        self,
        agent: Registered,
        node: Node,
        sub: SubRunTool,
        state: RunState,
        invocation: ToolInvocation,
        path: tuple[str, ...],
    ) -> Event:
        """Drive the sub-run a call makes (or resumes) here; the event that reports its end."""
        call = invocation.call
        child = invocation.child  # a suspended sub-run the caller answered
        fresh = child is None
        if child is None:
            try:
                started = sub.start(
                    invocation,
                    node.tools[call.name],
                    state,
                    lambda: workflow.patched(WORKFLOW_TOOLS),
                )
            except Exception as exc:  # (a step's prompt naming a skipped step's value...)
                # as locally, where the tool's function raises it: the call's error result
                # (escaping, it would fail the workflow task again and again: a hung run)
                # (a check's StopIteration as itself, as locally and as main recorded it)
                text = describe_exception(carried_exception(exc))
                return ToolReturned(call.id, f"Error: {text}", True, "error")
            if isinstance(started, ToolReturned):  # arguments that do not fit
                return started
            child = started
        here = (*path, call.name, call.id)
        timeout = node.tools[call.name].timeout
        runs = sub.node
        suspended = False  # the sub-run waits for answers: it keeps its listing
        try:
            if runs.sources:  # its agent's tool sources: listed as it starts, as locally
                if fresh:
                    self._listings[here] = await self._list_tools(agent, runs)
                listing = self._listings.get(here)
                if listing is None:
                    raise ApplicationError(
                        f"the sub-run of call {call.id!r} ({runs.name}) has no recorded listing "
                        "of its tool sources",
                        non_retryable=True,
                    )
                if fresh:  # (a listing the run cannot use raises here, as locally)
                    try:
                        with_tools = listed(runs, listing)
                    except UsageError as exc:
                        raise _UnusableListing(exc) from exc
                    child = restarted(with_tools, child)
            if timeout is None or not workflow.patched(NESTED_TIMEOUTS):
                child = await self._drive(agent, runs, child, here)
            else:
                carried = self._carried.pop(here, None)  # a deadline from the last history
                deadline = workflow.time() + timeout
                if carried is not None and carried.deadline is not None:
                    deadline = carried.deadline
                self._deadlines[here] = deadline
                stopped: RunState | None = None

                def stop() -> None:  # (at the deadline, before anything of it is cancelled)
                    nonlocal stopped
                    stopped = self._stopped_at(here, child)

                try:
                    timed = await _within(deadline, self._drive(agent, runs, child, here), stop)
                finally:
                    del self._deadlines[here]
                if timed is None:  # as locally: the sub-run is cancelled, the call an error
                    message = timed_out_message(call.name, timeout)
                    kept = stopped if workflow.patched(TIMED_OUT_SUB_RUNS) else None
                    return ToolReturned(call.id, message, True, "timeout", child=kept)
                child = timed
            suspended = child.phase in WAITING_PHASES
        except ActivityError as exc:
            if not isinstance(exc.cause, ApplicationError):  # cancelled, or timed out
                raise
            # A model request that failed for good: locally the sub-run raises the
            # provider's error and the calling tool reports it (its run goes on).
            # Its state before that request is kept, as locally (the error carries it).
            failure = exc.cause
            content = f"Error: {failure.type}: {failure.message}"
            return ToolReturned(call.id, content, True, "error", child=self._nested.get(here))
        except (RunError, ToolDefinitionError, _UnusableListing) as exc:  # locally the
            # sub-run raises it: the calling tool reports it (a listed tool that clashes with
            # another, or a tool_choice naming none of them, too: another UsageError fails the
            # workflow task), and keeps the sub-run's state it carries (see `failed_sub_run`)
            error = exc.error if isinstance(exc, _UnusableListing) else exc
            kept = failed_sub_run(error, call.id, state.run_id)
            content = f"Error: {describe_exception(error)}"
            return ToolReturned(call.id, content, True, "error", child=kept)
        finally:
            self._nested.pop(here, None)
            # What a sub-run cut short (timed out, or raised) left of its calls: a later
            # call at the same path (a reused call id) starts afresh, as locally.
            for left in (self._ended, self._carried):
                for key in [k for k in left if k[: len(here)] == here]:
                    del left[key]
            if not suspended:  # its listings and those of the handoff targets it reached
                for key in [k for k in self._listings if k[: len(here)] == here]:
                    del self._listings[key]
        if sub.output is not None and child.phase == "finished":
            # as_tool(output=...): the user's function, run once in its activity
            # and recorded, as a local run records what it gave.
            given = OutputInput(call.id, child)
            made = await self._tool_activity(
                agent, path, output_activity_name(sub.node.name), given, call.id, call.name
            )
            return attrs.evolve(made, child=child)
        return sub.ended(
            call,
            child,
            lambda: workflow.patched(STOP_NAMES_HANDED),
            lambda: workflow.patched(STEP_STOP_NAMES_HANDED),
        )

    def _stopped_at(self, path: tuple[str, ...], started: RunState | None) -> RunState | None:
        """The state the sub-run at ``path`` stops at when cancelled now, as a local run keeps it.

        Locally a cancelled run keeps the state where its I/O in flight began,
        with the calls of its round that had ended and the sub-runs it was
        running (stopped the same way, see `kept_sub_run`) committed (see
        `interrupted`). Here that is the state it published, and its round's
        record. ``started``: its state when it has published none (it had not
        begun: cancelled while continuing as new). None when it has no state
        (cancelled before it began), as locally.

        It runs at the deadline whether or not the history has the patch
        `TIMED_OUT_SUB_RUNS` (asking for the patch there would record its
        marker at another point than the histories recorded with it), so it
        must not fail the workflow task of a history that never uses it: any
        error (none is expected: it only reads and reduces what the workflow
        holds) keeps no state, as an unpatched history does.
        """
        try:
            return self._stopped_state(path, started)
        except Exception:
            return None

    def _stopped_state(self, path: tuple[str, ...], started: RunState | None) -> RunState | None:
        """`_stopped_at`, raising what it meets."""
        state = self._nested.get(path, started)
        if state is None or state.phase == "new":
            return None
        round = self._rounds.get(path)
        if round is None:
            return state
        node, calls, ended = round
        events: list[Event] = []
        for index, invocation in enumerate(calls):
            event = ended.get(index)
            call = invocation.call
            if event is None:  # a sub-run still running is kept where it stops
                child = self._stopped_at((*path, call.name, call.id), None)
                if child is None or child.is_done:
                    continue
                event = ToolSuspended(call.id, child)
            elif (  # a failed call of on_tool_error="raise": it runs again, as locally
                node.on_tool_error == "raise"
                and self._failure(node, state, invocation, event) is not None
            ):
                continue
            events.append(event)
        if node.transfers:  # as a local run settles them (`settle_finished`)
            events = settle_events(state.calls, events, node.transfers)
        base = state
        try:
            for event in events:
                state = reduce(state, event)
        except Exception:  # (as `interrupted`: not expected, keeps what it published)
            return base
        return state

    def _phase(self) -> str:
        assert self._state is not None
        return self._state.phase

    @workflow.query
    def state(self) -> RunState:
        """The run's current state (a snapshot).

        A state over `QUERY_LIMIT` (without external storage) is refused with
        an error saying so: `state_part` answers it in parts.
        """
        view = self._snapshot()
        size = _size_over(self._agent, view, QUERY_LIMIT)
        if size is not None:
            raise _too_large(
                f"the run's state is {size} bytes, over the {QUERY_LIMIT}-byte limit of a "
                "query answer: AgentHandle.state() reads it in parts (the state_part query), "
                "or give ToolfoldPlugin an external_storage"
            )
        return view

    @workflow.query
    def state_part(self, index: int) -> StatePart:
        """Part ``index`` (from 0) of the run's current state as JSON text (see `StatePart`)."""
        text = snapshot_to_json(self._snapshot())
        start = index * PART_CHARS
        parts = max(1, -(-len(text) // PART_CHARS))
        return StatePart(text[start : start + PART_CHARS], parts, zlib.crc32(text.encode()))

    def _snapshot(self) -> RunState:
        if self._state is None:
            raise ApplicationError("the run has not started yet")
        return self._view(self._state, ())

    def _answering(self, state: RunState, what: str) -> RunState:
        """``state`` as an update's answer, unless it is over Temporal's payload limit."""
        size = _size_over(self._agent, state, PAYLOAD_LIMIT)
        if size is not None:
            raise _too_large(
                f"the state {what} is {size} bytes, over Temporal's {PAYLOAD_LIMIT}-byte "
                "payload limit for an update's answer: AgentHandle.state() reads it in parts, "
                "or give ToolfoldPlugin an external_storage"
            )
        return state

    def _view(self, state: RunState, path: tuple[str, ...]) -> RunState:
        """``state`` with the sub-runs in flight below it in its calls (a snapshot)."""
        if not self._nested:
            return state
        calls = []
        for c in state.calls:
            here = (*path, c.call.name, c.call.id)
            child = self._nested.get(here)
            calls.append(c if child is None else attrs.evolve(c, child=self._view(child, here)))
        return attrs.evolve(state, calls=tuple(calls))

    @workflow.update
    async def answer(self, answers: Answers) -> RunState:
        """Apply approvals, denials or tool results to the suspended run; returns its state."""
        assert self._state is not None
        self._state = _applied(self._state, answers)
        return self._answering(self._state, "the answers led to (they are applied)")

    @answer.validator
    def _check_answer(self, answers: Answers) -> None:
        if self._state is None or self._state.phase not in WAITING_PHASES:
            phase = "not started" if self._state is None else self._state.phase
            raise ApplicationError(f"the run is not waiting for answers (phase: {phase})")
        # raises InvalidEventError for a wrong answer, UsageError for an ambiguous id
        _applied(self._state, answers, checked=True)

    @workflow.update
    async def suspended(self) -> RunState:
        """Wait until the run waits for answers or is over; returns its state."""
        # (or continues as new: the client asks the next run, see `AgentHandle.suspended`)
        await workflow.wait_condition(
            lambda: (
                self._leaving
                or (
                    self._state is not None
                    and (self._state.phase in WAITING_PHASES or self._state.is_done)
                )
            )
        )
        assert self._state is not None
        return self._answering(self._state, "of the run")


async def _within(
    deadline: float, driving: Coroutine[Any, Any, RunState], stop: Callable[[], None]
) -> RunState | None:
    """The sub-run's state once ``driving`` is done, or None when it is not by ``deadline``.

    The deadline is in workflow time, waited for with a workflow timer
    (deterministic: the history records it); at the deadline ``stop()`` is
    called, then the sub-run is cancelled, which cancels its activities in
    flight (each learns it through its heartbeat), and None comes once they
    stopped (see `_activity`).
    """
    left = deadline - workflow.time()
    if left <= 0:  # it ran out while the run continued as new
        stop()
        driving.close()
        return None
    task = asyncio.ensure_future(driving)
    try:
        done, _ = await workflow.wait([task], timeout=left)
    except asyncio.CancelledError:  # the caller is cancelled: so is the sub-run
        task.cancel()
        raise
    if done:
        return task.result()
    stop()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return None


class _UnusableListing(Exception):
    """A sub-run's recorded listing its agent cannot use: the `UsageError` `listed` raised
    (a ``tool_choice`` naming none of the listed tools), which the calling tool reports,
    as locally; any other `UsageError` of a sub-run fails the workflow task."""

    def __init__(self, error: UsageError) -> None:
        super().__init__(str(error))
        self.error = error


def _tool_retries(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` for a tool activity: one that ran past ``tool_timeout`` is not tried again.

    A tool may have done its effect when its time ran out (a payment sent,
    its answer late): trying it again, by default every ``tool_timeout``
    without end, would do it again. A local tool's timeout ends its call the
    same way. A worker that died mid-call is still retried: its activity's
    heartbeats stop, and the heartbeat timeout (not `NOT_RETRIED`) fails
    that attempt.
    """
    kept = list(policy.non_retryable_error_types or ())
    if NOT_RETRIED in kept:
        return policy
    return dataclasses.replace(policy, non_retryable_error_types=[*kept, NOT_RETRIED])


def _failed_tool(call_id: str, tool: str, exc: ActivityError, timeout: timedelta) -> ToolReturned:
    """The error result of a call whose tool activity failed for good (``exc``), as the
    model reads it: timed out as a local tool times out, or why Temporal gave up."""
    cause = exc.cause
    if isinstance(cause, ActivityTimeout) and cause.type == TimeoutType.START_TO_CLOSE:
        message = timed_out_message(tool, timeout.total_seconds())
        return ToolReturned(call_id, message, True, "timeout")
    if isinstance(cause, ActivityTimeout) and cause.type == TimeoutType.HEARTBEAT:
        why = "its worker stopped heartbeating (it died, or its event loop was blocked)"
    elif isinstance(cause, ApplicationError):
        why = f"{cause.type}: {cause.message}" if cause.type else cause.message
    else:
        why = describe_exception(cause if cause is not None else exc)
    message = f"Error: tool {tool!r} could not be run: {why} (its activity failed for good)"
    return ToolReturned(call_id, message, True, "error")


def _check_size(agent: Registered, activity: str, given: Any) -> None:
    """Fail the run when ``given`` is over the payload limit, rather than schedule it.

    Temporal refuses an activity input over its limit and retries the
    workflow task without end; measured here (deterministically: the same
    state encodes to the same bytes), the run fails at once, naming the
    activity. The state before this call stays the run's state (`state` query).
    """
    size = _size_over(agent, given)
    if size is None:
        return
    what = activity if activity.startswith("the ") else f"the input of activity {activity!r}"
    raise _too_large(
        f"{what} (the conversation so far) is {size} bytes, "
        f"over Temporal's {agent.payload_limit}-byte payload limit: give ToolfoldPlugin an "
        "external_storage, or keep the conversation smaller "
        "(docs/durable.md, Payloads and long runs)"
    )


def _too_large(message: str) -> ApplicationError:
    """The failure of a payload over its limit (a run's, a query's or an update's)."""
    return ApplicationError(message, type=PAYLOAD_TOO_LARGE, non_retryable=True)


def _waits_on_cancel(agent: Registered) -> bool:
    """Whether a cancelled top model request is waited for: its agent streams (`Registered`).

    Recorded in the history (`STREAMED_CANCEL_WAITS`): a worker whose agent
    streams marks the run, and a replay reads the mark whatever the
    replaying worker's handler (a worker given a handler since, or no longer
    given one, replays a run cancelled mid-request as it ran).
    """
    if agent.streams or workflow.unsafe.is_replaying():
        return workflow.patched(STREAMED_CANCEL_WAITS)
    return False


def _size_over(agent: Registered | None, given: Any, limit: int | None = None) -> int | None:
    """The encoded size of ``given`` when it is over ``limit`` (default: the agent's payload
    limit), else None; None too with external storage (it takes large payloads by reference)."""
    if agent is None or agent.payload_limit is None:
        return None
    limit = agent.payload_limit if limit is None else limit
    size = _encoded_size(given)
    return size if size > limit else None


def _not_on_this_worker(message: str) -> Exception:
    """The error of a worker that lacks the run's agent or a tool it calls (``message``
    names it): `NotOnThisWorker`, failing the workflow task so that the run waits for a
    worker that has it, or, for a run recorded before (no `MISSING_WAITS` marker), the
    non-retryable failure it ran into then."""
    if workflow.patched(MISSING_WAITS):
        return NotOnThisWorker(
            f"{message}: the run waits until a worker that registers it takes it"
        )
    return ApplicationError(message, non_retryable=True)


def _encoded_size(value: Any) -> int:
    """The size of ``value`` as Temporal's payload (the same value, the same bytes)."""
    return payloads_size(workflow.payload_converter().to_payloads([value]))


def _keeps_stops() -> bool:
    return workflow.patched(HANDOFF_KEEPS_STOPS)


def _refuses_unfit() -> bool:
    return workflow.patched(FILTERED_CONVERSATION_CHECKED)


def _stop(node: Node, state: RunState, first: Node) -> StopRequested | None:
    """The stop recorded when a live stop predicate ends the run before this model call.

    As a local run checks: the running agent's predicates, and after a handoff
    those of the run's ``first`` agent too. The predicates run in workflow code:
    they must be deterministic.
    """
    if state.turn_steps == 0:
        return None
    predicates = node.stop_when
    if first.agent != node.agent:
        extra = tuple(p for p in first.stop_when if p not in predicates)
        if extra and _keeps_stops():
            predicates = (*predicates, *extra)
    if not predicates:
        return None
    try:
        return stop_event(state, predicates)
    except Exception as exc:
        raise ApplicationError(
            f"a stop_when condition of agent {node.name!r} raised {describe_exception(exc)}",
            type=type(exc).__name__,
            non_retryable=True,
        ) from exc


def _applied(state: RunState, answers: Answers, *, checked: bool = False) -> RunState:
    """``state`` with the answers applied; those for calls of suspended sub-runs
    (any depth) travel down to them as `CallResumed` events, as in a local resume.

    Each answer's call id is read as a local `resume` reads its keys
    (`address`): the one call of the tree that has it, else a path
    (``"left/call_0"``) to a sub-run's call. ``checked``: the update's
    validator asks, and an id that several calls of the tree wait under (of
    two sub-runs, or of the top run and a sub-run) is refused (`UsageError`),
    as locally. The handler does not refuse it: the validator refused it
    before the handler ran, except in histories recorded before it did,
    where the handler applied it to the first such call (`RunState.path_to`:
    the top run's own, if it has one, as `address` once chose); it does so
    again when they replay (a validator does not run on replay). An approval key bound to
    its call (`approval_key`, ``"call_0#<fingerprint>"``; the key
    `RunState.keyed_pending_approvals` lists for a call whose path is
    another call's id) is read as a local resume reads it (`_resume.bound_address`):
    the one call it was made for, refused when made for another. The handler
    reads it so behind `DURABLE_BOUND_KEYS`: the validator refused such keys
    before, so only a call whose own id has that form got one, read as its id;
    it replays so.
    """
    nested: list[tuple[tuple[str, ...], Event]] = []

    def target(call_id: str, status: CallStatus) -> tuple[tuple[str, ...], str]:
        if BOUND_KEY.fullmatch(call_id) is not None and (
            checked or workflow.patched(DURABLE_BOUND_KEYS)
        ):
            return bound_address(state, call_id, status)  # (as a local resume reads it)
        try:
            return address(state, call_id, status)
        except UsageError:
            if checked:
                raise
            return state.path_to(call_id, status) or (), call_id

    for event in answers.events:
        if isinstance(event, (ApprovalGranted, ApprovalDenied)):
            path, call_id = target(event.call_id, "awaiting_approval")
            event = attrs.evolve(event, call_id=call_id)
            if path:
                nested.append((path, event))
                continue
        elif isinstance(event, ToolResultsProvided):
            own = []
            for result in event.results:
                path, call_id = target(result.call_id, "to_return")
                result = attrs.evolve(result, call_id=call_id)
                if path:
                    nested.append((path, ToolResultsProvided((result,))))
                else:
                    own.append(result)
            if not own:
                continue
            event = ToolResultsProvided(tuple(own))
        state = reduce(state, event)
    for event in nest_answers(nested):
        state = reduce(state, event)
    return state


def _validate(node: Node, state: RunState, effect: ValidateOutput) -> Event:
    assert node.output is not None, "a run with an output spec needs its output type"
    try:
        _, plain = node.output.parse(effect.text)
    except _Rejected as rejected:
        event = rejection(state, rejected.message)
        if type(event) is OutputRejected or workflow.patched(UNFIT_OUTPUT_FAILS):
            return event
        return OutputRejected(rejected.message)  # as a run recorded before decided
    return OutputAccepted(plain)


def _with_dropped(state: RunState, dropped: Sequence[Usage]) -> RunState:
    """``state`` counting each dropped attempt's usage, as a local run counts a cut stream."""
    for usage in dropped:
        state = with_cut_usage(state, usage)
    return state


def _failure_dropped(exc: ActivityError) -> tuple[Usage, ...]:
    """The dropped attempts' usages a model activity's final failure carries: in its details,
    or in its last heartbeat's when the last attempt timed out."""
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return dropped_in(cause.details)
    if isinstance(cause, ActivityTimeout):
        return dropped_in(cause.last_heartbeat_details)
    return ()


def _has_float_counts(usage: Usage) -> bool:
    """Whether a count of ``usage`` is a float (a custom model's; providers' are ints)."""
    return any(type(getattr(usage, a.name)) is not int for a in attrs.fields(Usage))


def _truncated(usage: Usage) -> Usage:
    """``usage`` with each float count truncated to an int, as the data converter read
    it before counts loaded exactly (runs recorded then replay as they decided)."""
    return Usage(*(int(getattr(usage, a.name)) for a in attrs.fields(Usage)))
