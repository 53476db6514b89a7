"""Handoffs: which transfer call of a step hands the run over, and what the others say.

A step may call several transfer tools (``transfer_to_<name>``); the first
one, in call order, that succeeds hands the run over. The results of the
others are rewritten to ``Not transferred: ...`` when the round that ran
them is committed (`settle_outcomes`, `settle_events`), before any event is
built from them, so a stream, ``on_event``, the log, the conversation and a
replay all read the same thing. Only when a call before them was still
waiting (for an approval) as they were committed is the winner decided
later: the `HandedOff` event then carries the conversation with their
results rewritten (`handed_off`).

Nothing here performs I/O; the loop (`_loop`) drives it.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

import attrs

from toolfold._errors import RunError
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._events import HandedOff, ToolReturned
from toolfold.runtime.core._messages import Message, ToolResultPart
from toolfold.runtime.core._reducer import handed_conversation_problem
from toolfold.runtime.core._state import CallState, RunState
from toolfold.runtime.core._stop import is_tree_budget, stopping_condition
from toolfold.runtime.drive._executor import ToolOutcome
from toolfold.runtime.drive._failures import (
    input_filter_returned,
    input_filter_unfit,
    observer_failure,
    run_started,
)

if TYPE_CHECKING:
    from toolfold.runtime.drive._loop import Live
    from toolfold.runtime.drive._open import ToolSource
    from toolfold.toolkit._tool import Tool


class Handover(NamedTuple):
    """Where a handoff tool sends the run.

    Attributes:
        agent: The name of the agent that takes over.
        take_over: Its configuration (goes into the state with `HandedOff`)
            and its live half, made from the current one (same deps,
            observers) and the tools its sources listed.
        input_filter: Rewrites the conversation it continues with, or None.
        sources: Its tool sources (MCP servers...), opened when the run
            reaches it and closed when the run ends.
    """

    agent: str
    take_over: Callable[[Live, Sequence[Tool[..., Any]]], tuple[RunConfig, Live]]
    input_filter: Callable[[tuple[Message, ...]], Any] | None = None
    sources: tuple[ToolSource, ...] = ()


class _Target(Protocol):
    @property
    def agent(self) -> str: ...


def handover_of(state: RunState, handoffs: Mapping[str, Handover]) -> Handover | None:
    """The handoff the last step asked for (its first successful transfer call), if any."""
    name = transfer_called(state, handoffs)
    return None if name is None else handoffs[name]


def at_limit(state: RunState) -> bool:
    """Whether ``state`` stopped at its own ``max_steps`` right after a step that ran tools.

    Its transfer call, if it made one, hands the run over before it stops
    (the step's tools ran; its result says ``Transferred``). A run a stop
    condition finished stays as it stopped: the condition's call and result
    are what it answers with (`stopping_result`), and it still holds.
    """
    return (
        state.phase == "finished"
        and state.finish_reason == "max_steps"
        and bool(state.calls)
        and stopping_condition(state) is None
    )


def transfer_called(state: RunState, transfers: Container[str]) -> str | None:
    """The name of the last step's first successful call among ``transfers``, if any."""
    for call in state.calls:
        if call.outcome == "ok" and call.call.name in transfers:
            return call.call.name
    return None


def not_transferred(agent: str) -> str:
    """The result of a transfer call that lost to an earlier one handing the run to ``agent``."""
    return (
        f"Not transferred: the conversation went to {agent} (an earlier transfer in the "
        "same answer); one handoff per answer."
    )


def _losers(
    calls: Sequence[CallState], ended: Mapping[str, str], transfers: Mapping[str, _Target]
) -> tuple[str, set[str]] | None:
    """The agent the step hands to and the ids of this round's transfer calls that lose to it.

    ``ended`` maps the round's call ids to their outcomes; the step's other
    calls count with the outcome they were committed with. A transfer call
    before the winner that has none yet (it waits for an approval) may still
    win: nothing is decided, and the handoff answers the losers (`handed_off`).
    """
    winner: str | None = None
    losers: set[str] = set()
    for call in calls:
        name = call.call.name
        if name not in transfers:
            continue
        call_id = call.call.id
        outcome = ended.get(call_id, call.outcome)
        if outcome is None and winner is None:
            return None
        if outcome != "ok":
            continue
        if winner is None:
            winner = transfers[name].agent
        elif call_id in ended:
            losers.add(call_id)
    return None if winner is None or not losers else (winner, losers)


def settle_outcomes(
    calls: Sequence[CallState], outcomes: Sequence[ToolOutcome], handoffs: Mapping[str, Handover]
) -> Sequence[ToolOutcome]:
    """A round's ``outcomes`` with the transfer calls that do not hand over saying so.

    ``calls`` are the step's calls before the round's results.
    """
    if len(outcomes) < 2 and len(calls) < 2:
        return outcomes
    settled = _losers(calls, {o.call_id: o.outcome for o in outcomes}, handoffs)
    if settled is None:
        return outcomes
    text = not_transferred(settled[0])
    return [
        o._replace(content=text, is_error=False, parts=()) if o.call_id in settled[1] else o
        for o in outcomes
    ]


def settle_finished(
    calls: Sequence[CallState], finished: dict[int, ToolOutcome], handoffs: Mapping[str, Handover]
) -> None:
    """`settle_outcomes` for the calls of an interrupted round that had ended (by index), in place."""
    if not handoffs or not finished:
        return
    indexes = sorted(finished)
    settled = settle_outcomes(calls, [finished[i] for i in indexes], handoffs)
    finished.update(zip(indexes, settled, strict=True))


E = TypeVar("E")


def settle_events(
    calls: Sequence[CallState], events: Sequence[E], transfers: Mapping[str, _Target]
) -> list[E]:
    """`settle_outcomes` for a round's results as events (a durable run's `ToolReturned`)."""
    ended = {e.call_id: e.outcome for e in events if isinstance(e, ToolReturned)}
    settled = _losers(calls, ended, transfers)
    if settled is None:
        return list(events)
    text = not_transferred(settled[0])
    return [
        attrs.evolve(e, content=text, is_error=False, parts=())
        if isinstance(e, ToolReturned) and e.call_id in settled[1]
        else e
        for e in events
    ]


def handed_off(
    state: RunState,
    agent: str,
    config: RunConfig,
    input_filter: Callable[[tuple[Message, ...]], Any] | None,
    transfers: Container[str],
    *,
    keep_stops: Callable[[], bool] | None = None,
    refuse_unfit: Callable[[], bool] | None = None,
) -> HandedOff:
    """The event handing ``state`` to ``agent`` (its ``config``), the conversation filtered.

    The stored stop conditions of the run's first agent (`started_config`)
    bound the whole turn, as its step limit does: ``config`` (the target's
    own) gets those it lacks. A condition of an agent handed to since is its
    own and does not follow the run. ``keep_stops`` False (asked only when it
    makes a difference): the tree budgets of the run's configuration instead,
    as a durable run recorded before replays.

    ``agent`` is the target of the last step's first successful call among
    ``transfers`` (see `transfer_called`). The step's other successful
    transfer calls were answered ``Not transferred`` when their round was
    committed, unless a call before them still waited then (an approval
    granted later): the conversation the event carries answers those.

    Raises:
        RunError: ``input_filter`` raised, returned no messages, or returned a
            conversation no provider takes (`handed_conversation_problem`: a
            tool result answering no call, a call without its result), unless
            ``refuse_unfit`` says not to (a durable run recorded before such a
            conversation was refused replays as it ran); ``.state`` is the run
            before the handoff.
    """
    messages = _not_transferred(state, agent, transfers)
    if input_filter is not None:
        try:
            conversation = state.messages if messages is None else messages
            messages = tuple(to_messages_list(input_filter(conversation)))
        except _NotMessages as exc:  # (it returned, but no messages)
            raise input_filter_returned(
                f"input_filter of the handoff to {agent!r}", str(exc), state
            ) from None
        except Exception as exc:
            raise observer_failure(
                f"input_filter of the handoff to {agent!r}", exc, state, "input_filter"
            ) from exc
        if not messages:  # every provider refuses a request with no conversation
            raise RunError(
                f"the input_filter of the handoff to {agent!r} returned no messages: the "
                f"agent would start from an empty conversation (keep at least the user's "
                f"message); the error's state is the run before the handoff",
                state,
            )
        problem = handed_conversation_problem(messages)
        if problem and (refuse_unfit is None or refuse_unfit()):
            raise input_filter_unfit(f"input_filter of the handoff to {agent!r}", problem, state)
    # The run's step limit (its first agent's, or the one given to resume) bounds
    # the whole turn, handoffs included: a cycle cannot reset it.
    if config.max_steps != state.config.max_steps:  # evolving checks the whole config again
        config = attrs.evolve(config, max_steps=state.config.max_steps)
    # So do the stop conditions it started with (its first agent's, tree budgets
    # included, and the tree budget a caller gave a sub-run): a handoff is no way
    # out of them. Those of an agent handed to since, a tree budget too, stay with
    # it when it hands the run on (as on Temporal); a history recorded before
    # (``keep_stops`` False) carried the running agent's tree budgets on instead.
    kept = [c for c in started_config(state).stop_when if c not in config.stop_when]
    if keep_stops is not None:
        before = [c for c in state.config.stop_when if is_tree_budget(c)]
        before = [c for c in before if c not in config.stop_when]
        if kept != before and not keep_stops():
            kept = before
    if kept:
        config = attrs.evolve(config, stop_when=(*config.stop_when, *kept))
    return HandedOff(agent, config, messages)


def started_config(state: RunState) -> RunConfig:
    """The configuration ``state``'s run started with (its first agent's, in `RunStarted`)."""
    started = run_started(state)
    return state.config if started is None else started.config


def _not_transferred(
    state: RunState, agent: str, transfers: Container[str]
) -> tuple[Message, ...] | None:
    """The conversation with the results of the step's other successful transfer calls
    saying the run went to ``agent``, or None when none of them says otherwise already."""
    losers: set[str] = set()
    first = True
    for call in state.calls:
        if call.outcome == "ok" and call.call.name in transfers:
            if not first:
                losers.add(call.call.id)
            first = False
    if not losers:
        return None
    text = not_transferred(agent)
    messages = list(state.messages)
    changed = False
    # The step's results follow its answer (call ids are unique within one answer).
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "assistant":
            break
        if message.role == "tool" and any(
            isinstance(p, ToolResultPart) and p.call_id in losers and p.content != text
            for p in message.parts
        ):
            parts = tuple(
                ToolResultPart(p.call_id, p.tool_name, text)
                if isinstance(p, ToolResultPart) and p.call_id in losers
                else p
                for p in message.parts
            )
            messages[index] = Message("tool", parts)
            changed = True
    return tuple(messages) if changed else None


class _NotMessages(TypeError):
    """An input filter returned what is no list of messages (it did not raise)."""


def to_messages_list(value: Any) -> list[Message]:
    """An input filter's result as messages.

    Raises:
        _NotMessages: ``value`` is not iterable (None: a filter without ``return``),
            a str or a Message alone, or holds what is no `Message`.
    """
    if isinstance(value, str | bytes | Message) or not isinstance(value, Iterable):
        got = "None" if value is None else type(value).__name__
        raise _NotMessages(f"an input filter returns messages, got {got}")
    items = list(value)  # (a generator's code runs here: what it raises is the filter's)
    for item in items:
        if not isinstance(item, Message):
            raise _NotMessages(
                f"an input filter returns messages, got a {type(value).__name__} holding "
                f"{type(item).__name__}"
            )
    return items
