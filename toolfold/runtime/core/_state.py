"""`RunState`: everything a run knows, as one immutable value.

The conversation and the event log are `Log` values, so an event costs the
same with ten messages as with ten thousand. Only `reduce` makes new states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, NoReturn

import attrs

from toolfold._errors import UsageError
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._log import Log
from toolfold.runtime.core._messages import (
    NO_USAGE,
    FrozenDict,
    Message,
    ToolCallPart,
    ToolResultPart,
    Usage,
    as_item,
    freeze,
    frozen_dict,
    held,
    wrong_argument,
)
from toolfold.runtime.core._repr import fields, short

if TYPE_CHECKING:
    from toolfold.runtime.core._events import Event

Phase = Literal[
    "new",
    "awaiting_model",
    "running_tools",
    "awaiting_approval",
    "awaiting_tool_results",
    "validating_output",
    "finished",
    "failed",
]
"""Where a run is; `TRANSITIONS` says which events each phase accepts."""

PHASES: tuple[Phase, ...] = (
    "new",
    "awaiting_model",
    "running_tools",
    "awaiting_approval",
    "awaiting_tool_results",
    "validating_output",
    "finished",
    "failed",
)

CallStatus = Literal["to_run", "awaiting_approval", "to_return", "suspended", "done"]
"""What a tool call of the current step waits for.

``to_run``: the executor must run it; ``awaiting_approval``: an approval
event; ``to_return``: a result from the caller (a tool without a function, or
``auto_execute_tools=False``); ``suspended``: it ran a sub-run (an agent used
as a tool) that waits for the caller, kept in `CallState.child`; ``done``: it
has its result.
"""

Outcome = Literal["ok", "error", "invalid_arguments", "timeout", "denied", "unknown_tool"]
"""How a tool call ended. Every outcome but ``ok`` is an error result."""

Disposition = Literal["execute", "approve", "return"]
"""How the driver says a call must be handled (see `ModelResponded`)."""


@attrs.frozen
class CallState:
    """One tool call of the current step and what it waits for.

    Attributes:
        index: Its position among the step's calls.
        call: The call as the model made it.
        status: What it waits for.
        result: Its result once ``status`` is ``done``.
        outcome: How it ended once ``status`` is ``done``.
        child: The state of the sub-run the call made (an agent used as a
            tool): where it waits while ``suspended``, how it ended once
            ``done``; None for other tools.
    """

    index: int
    call: ToolCallPart
    status: CallStatus
    result: ToolResultPart | None = None
    outcome: Outcome | None = None
    child: RunState | None = None


@attrs.frozen
class RunFailure:
    """Why a run failed.

    Attributes:
        kind: ``tool_retries_exceeded``, ``output_validation``, or what the
            driver reported (``model_error``, ``tool_error``, ``cancelled``...).
        message: A sentence saying what went wrong.
        tool_name: The tool involved, if any.
    """

    kind: str
    message: str
    tool_name: str | None = None


_NO_FAILURES: Mapping[str, int] = frozen_dict()


def _counts(value: Mapping[str, int]) -> Mapping[str, int]:
    # Read-only, and never the caller's dict: states share it safely.
    return value if type(value) is FrozenDict else frozen_dict(value)


#: The phases of a run that has ended (`RunState.is_done`).
DONE_PHASES = ("finished", "failed")


class SubRunTotals(NamedTuple):
    """What a run's log says its sub-runs used (`logged_sub_runs`).

    Attributes:
        total: Every sub-run the log holds (`ToolReturned` children, any
            depth) and those dropped to run again (`AttemptDropped`: by a resume,
            or with a round's failed calls under ``on_tool_error="raise"``; a cut
            stream's usage is the run's own, not here).
        done: The tokens of those before the current step's own (the
            sub-runs of earlier steps, and those a resume dropped), summed
            step by step in log order (`step_start_tokens`).
        step: The tokens of the sub-runs returned since the last model
            answer or handoff: the current step's own.
    """

    total: Usage
    done: int
    step: int


_NO_SUB_RUNS = SubRunTotals(NO_USAGE, 0, 0)


def _add_sub_run(totals: SubRunTotals, event: Any) -> SubRunTotals:
    # Token counts are summed in the order a scan of the log sums them: float counts (a
    # custom model's) give `step_start_tokens` the same value, bit for bit.
    kind = event.kind
    if kind == "tool_returned":
        child = event.child
        if child is None:
            return totals
        used = child.tree_usage
        return SubRunTotals(totals.total + used, totals.done, totals.step + used.total_tokens)
    if kind == "attempt_dropped":
        dropped = event.sub_run_usage
        return SubRunTotals(totals.total + dropped, totals.done + dropped.total_tokens, totals.step)
    if (kind == "model_responded" or kind == "handed_off") and totals.step != 0:
        return SubRunTotals(totals.total, totals.done + totals.step, 0)  # (a handoff: no calls)
    return totals


def logged_sub_runs(state: RunState) -> SubRunTotals:
    """The usage of the sub-runs ``state``'s log holds (`RunState.tree_usage`, a tree budget).

    A fold over the log that each new state resumes from its previous one's
    (`Log.folded`; sub-runs are immutable): reading it at every step costs
    the step's new events, not the whole log again.
    """
    return state.log.folded(_add_sub_run, _NO_SUB_RUNS)


#: The phases of a run that waits for its caller's answers (approvals, tool results).
WAITING_PHASES = ("awaiting_approval", "awaiting_tool_results")


# Not hashable (``unsafe_hash=False``; attrs would make a frozen class hashable): a
# hash would walk the run's whole log at each call, and the `Log` is no hashable
# value (``hash(state)`` raised "unhashable type: 'Log'").
@attrs.frozen(eq=True, unsafe_hash=False)
class RunState:
    """Everything a run knows, as one immutable value.

    Build one with `initial_state`; only `reduce` makes the next one. States
    compare with ``==`` but are not hashable (``hash(state)`` raises
    ``TypeError: unhashable type: 'RunState'``): key them by ``run_id`` (with
    ``len(state.log)`` for one version of a run), or by their `to_json` text.

    Attributes:
        run_id: The run's id (given by the driver; stable across resumes).
        phase: Where the run is.
        config: The run's configuration (plain data).
        conversation: The messages so far (system messages included), as a
            `Log`; `messages` gives a tuple.
        step: Model responses received so far in the run.
        turn_start: The value of ``step`` when the current turn began.
        usage: Usage summed over every model call of this run, dropped answers
            included (`AttemptDropped`: one the output type rejected, which a
            resume dropped, and a streamed one cut after its usage came).
        calls: The tool calls of the current (or last) step, in call order.
        failures: Consecutive failing steps per tool name (read-only).
        output_retries: Final answers rejected in the current turn.
        finish_reason: Why the run finished (set in ``finished`` and ``failed``).
        output: The final output as plain data (the text, or the accepted
            structured value), or None; read-only (objects `FrozenDict`s,
            arrays `FrozenList`s). A response's ``output`` is the caller's copy.
        error: Why the run failed, when it did.
        log: Every event reduced so far, in order.
        agent: The name of the agent running now (the last one handed to),
            or None for an unnamed agent.
    """

    # What a tool returning one is told (`toolfold.toolkit._results.run_kind`).
    _no_tool_result: ClassVar[str] = (
        "return its answer (state.last_text) or output, not the state (or run the agent "
        "as a tool: agent.as_tool())"
    )

    run_id: str
    phase: Phase
    config: RunConfig
    conversation: Log[Message]
    step: int = 0
    turn_start: int = 0
    usage: Usage = NO_USAGE  # the shared zero: the first response's usage is taken as it is
    calls: tuple[CallState, ...] = ()
    failures: Mapping[str, int] = attrs.field(default=_NO_FAILURES, converter=_counts)
    output_retries: int = 0
    finish_reason: str | None = None
    output: Any = attrs.field(default=None, converter=freeze, eq=as_item)
    error: RunFailure | None = None
    log: Log[Event] = attrs.field(factory=Log)
    agent: str | None = None

    def __repr__(self) -> str:
        # The whole config and log are one attribute away (`config`, `log`).
        pending = len(self.pending_calls) or None
        return fields(
            type(self).__name__,
            [
                ("run_id", repr(self.run_id)),
                ("phase", repr(self.phase)),
                ("step", self.step),
                ("messages", len(self.conversation)),
                ("events", len(self.log)),
                ("pending_calls", pending),
                ("finish_reason", None if self.finish_reason is None else repr(self.finish_reason)),
                ("error", None if self.error is None else short(self.error)),
                ("usage", repr(self.usage)),
            ],
        )

    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation as a tuple."""
        return self.conversation.as_tuple()

    @property
    def events(self) -> tuple[Event, ...]:
        """The event log as a tuple."""
        return self.log.as_tuple()

    @property
    def sub_runs(self) -> Mapping[str, RunState]:
        """The sub-runs of this run's calls (agents used as tools) by call id, latest state.

        Finished ones come from the event log; those of the current step's open
        calls (suspended, or interrupted midway and to run again) from its calls.
        """
        found: dict[str, RunState] = {}
        for event in self.log:
            if event.kind == "tool_returned" and event.child is not None:
                found[event.call_id] = event.child
        for call in self.calls:
            if call.child is not None and call.status != "done":
                found[call.call.id] = call.child
        return found

    @property
    def tree_usage(self) -> Usage:
        """Usage of this run and of every sub-run it made (agents used as tools), any depth.

        Sub-runs dropped to run again when a failed run was resumed count too
        (`AttemptDropped`): their model calls were billed.
        """
        total = self.usage
        logged = logged_sub_runs(self).total
        if logged is not NO_USAGE:
            total = total + logged
        for call in self.calls:  # open calls' sub-runs (a finished one is in the log)
            if call.child is not None and call.status != "done":
                total = total + call.child.tree_usage
        return total

    @property
    def turn_steps(self) -> int:
        """Model responses received in the current turn."""
        return self.step - self.turn_start

    @property
    def pending_calls(self) -> tuple[CallState, ...]:
        """The current step's calls that have no result yet."""
        # A loop, not a generator: the driver reads it as every run (re)starts.
        pending = []
        for call in self.calls:
            if call.status != "done":
                pending.append(call)
        return tuple(pending)

    @property
    def calls_to_run(self) -> tuple[ToolCallPart, ...]:
        """Calls the executor must run now."""
        return tuple(c.call for c in self.calls if c.status == "to_run")

    @property
    def pending_approvals(self) -> tuple[ToolCallPart, ...]:
        """Calls waiting for an approval, those of suspended sub-runs included (any depth)."""
        found: list[ToolCallPart] = []
        for c in self.calls:
            if c.status == "awaiting_approval":
                found.append(c.call)
            elif c.status == "suspended" and c.child is not None:
                found.extend(c.child.pending_approvals)
        return tuple(found)

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """Calls waiting for a result from the caller, those of suspended sub-runs included."""
        found: list[ToolCallPart] = []
        for c in self.calls:
            if c.status == "to_return":
                found.append(c.call)
            elif c.status == "suspended" and c.child is not None:
                found.extend(c.child.tool_calls)
        return tuple(found)

    @property
    def keyed_pending_approvals(self) -> tuple[tuple[str, ToolCallPart], ...]:
        """`pending_approvals`, each with the key ``resume(approvals=...)`` answers it by.

        The key is the call's id, or its path when other calls wait under the
        same id (their models made the ids): the ids of the suspended calls
        down to it and its own, joined by ``/`` (``"call_1_1/call_1_0"``); or,
        when that path names another call too (the top run's own call, whose
        path is its id), its bound key (``id#<fingerprint>``, as
        `toolfold.runtime.approval_key` makes). Each key names one call, so
        the keys approve every waiting call:

        Example:
            >>> approvals = {key: True for key, call in state.keyed_pending_approvals}
            >>> done = agent.resume(state, approvals=approvals)  # doctest: +SKIP
        """
        return self._keyed("awaiting_approval")

    @property
    def keyed_tool_calls(self) -> tuple[tuple[str, ToolCallPart], ...]:
        """`tool_calls`, each with the key ``resume(tool_results=...)`` answers it by.

        Keys as in `keyed_pending_approvals`.
        """
        return self._keyed("to_return")

    def _keyed(self, status: CallStatus) -> tuple[tuple[str, ToolCallPart], ...]:
        from toolfold.runtime.core._keys import keyed  # (it reads RunState: imported late)

        return keyed(self, status)

    def path_to(self, call_id: str, status: CallStatus | None = None) -> tuple[str, ...] | None:
        """The ids of the suspended calls leading to the sub-run that holds ``call_id``.

        ``()`` when the call is one of this run's own, None when no run of the
        tree (this one and its suspended sub-runs, any depth) has it. With
        ``status``, only a call in that status matches (ids made by different
        models may repeat across the tree; the call that waits is the one meant).
        """
        for c in self.calls:
            if c.call.id == call_id and (status is None or c.status == status):
                return ()
        for c in self.calls:
            if c.status == "suspended" and c.child is not None:
                inner = c.child.path_to(call_id, status)
                if inner is not None:
                    return (c.call.id, *inner)
        return None

    def paths_to(self, call_id: str, status: CallStatus | None = None) -> list[tuple[str, ...]]:
        """Every path (see `path_to`) to a current call ``call_id`` in the tree, shallowest first."""
        found: list[tuple[str, ...]] = []
        if any(c.call.id == call_id and (status is None or c.status == status) for c in self.calls):
            found.append(())
        for c in self.calls:
            if c.status == "suspended" and c.child is not None:
                found.extend((c.call.id, *inner) for inner in c.child.paths_to(call_id, status))
        return found

    def find_call(self, call_id: str, status: CallStatus | None = None) -> CallState | None:
        """The current call ``call_id`` of this run or of a suspended sub-run (any depth)."""
        path = self.path_to(call_id, status)
        if path is None:
            return None
        state: RunState = self
        for step in path:
            state = next(c.child for c in state.calls if c.call.id == step and c.child)
        return next(
            c
            for c in state.calls
            if c.call.id == call_id and (status is None or c.status == status)
        )

    @property
    def last_text(self) -> str:
        """The text of the last assistant message ("" if none)."""
        for message in reversed(self.conversation):
            if message.role == "assistant":
                return message.text
        return ""

    @property
    def is_done(self) -> bool:
        """True once the run finished or failed."""
        return self.phase in DONE_PHASES

    def to_json(self, *, key: str | bytes | Sequence[str | bytes] | None = None) -> str:
        """The state as JSON text (see `RunState.from_json`).

        Args:
            key: Sign the text with HMAC-SHA256 under this key (the first of a
                list), for a state that travels through a place you do not
                control; load it with ``RunState.from_json(text, key=...)``.
                The key is not stored in the text. A key is str (UTF-8),
                bytes, bytearray or memoryview.

        Raises:
            UsageError: ``key`` is no key (an int, None, a dict) or empty.
        """
        from toolfold.runtime.core._serialize import state_to_json

        return state_to_json(self, key)

    @classmethod
    def from_json(
        cls, text: str | bytes, *, key: str | bytes | Sequence[str | bytes] | None = None
    ) -> RunState:
        """Load a state written by `to_json`.

        Args:
            text: The JSON text (a leading byte order mark is dropped).
            key: Require a valid signature made with this key, or with any key
                of a list (key rotation). Without it a signature is ignored.

        Raises:
            SerializationError: The text is not a state, or (with ``key``) it
                is unsigned or its signature does not match (it was edited).
            UsageError: ``text`` is not str or bytes (None, a dict already
                decoded), or ``key`` is no signing key.
        """
        from toolfold.runtime.core._serialize import state_from_json

        return state_from_json(text, key)


def refreeze_on_unpickle(cls: type, name: str) -> None:
    """Make unpickling ``cls`` freeze its attribute ``name``, as its converter does on construction.

    attrs' ``__setstate__`` of a slotted class sets attributes without their
    converters, so a pickle made before ``name`` was frozen (a Ray checkpoint
    of an older toolfold) would come back with a mutable value. Only
    unpickling goes through this; a value frozen already is kept as it is.
    """
    unpickle = cls.__setstate__  # type: ignore[attr-defined]

    def __setstate__(self: Any, state: Any) -> None:
        unpickle(self, state)
        value = getattr(self, name)
        frozen = freeze(value)
        if frozen is not value:
            object.__setattr__(self, name, frozen)

    __setstate__.__qualname__ = f"{cls.__qualname__}.__setstate__"
    cls.__setstate__ = __setstate__  # type: ignore[attr-defined]


refreeze_on_unpickle(RunState, "output")


def not_a_state(function: str, value: object) -> UsageError:
    """The error for ``function`` given ``value``, no `RunState`, where a state goes.

    The public pure functions raise it only once their work failed on the
    value (an attribute missing), so a state costs no type test (see
    `refuse_non_state`).
    """
    hint = " (pass its .state)" if holds_state(value) else ""
    if isinstance(value, (str, bytes)) and value.lstrip()[:1] in ("{", b"{"):
        hint = " (load JSON text with RunState.from_json)"
    return wrong_argument(function, "the state", "a RunState", value, hint)


def holds_state(value: object) -> bool:
    """Whether ``value`` (no state, given for one) holds a `RunState` as ``.state``, as a
    `Response` or a run's error does: a wrong argument's hint says where it is."""
    return isinstance(held(value, "state"), RunState)


def refuse_non_state(function: str, value: object, error: BaseException) -> NoReturn:
    """Raise `not_a_state` for ``value`` if it is no `RunState`, else ``error`` again.

    Called in the ``except`` block of a public function whose work failed on
    ``value`` with ``error``: the failure was either a wrong argument (named
    for the caller) or a real one (propagated unchanged).
    """
    if not isinstance(value, RunState):
        raise not_a_state(function, value) from None
    raise error
