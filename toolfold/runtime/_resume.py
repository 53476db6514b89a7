"""Continuing a run: the caller's answers, and which options a resume applies.

A run's state carries its configuration (instructions, settings, tool
choice...), so resuming it needs only the live parts again. What the
resuming `Agent` says about the rest is applied when the run can take it
(``max_steps``, extra stop conditions, the live parts) and refused when it
cannot (the stored configuration): never silently ignored.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

import attrs

from toolfold._errors import InvalidEventError, UsageError
from toolfold.runtime._model import CLIENT_OPTIONS, in_force
from toolfold.runtime._response import Step
from toolfold.runtime._run import (
    RESUME,
    Approval,
    Denied,
    MessagesInput,
    RunOptions,
    to_messages,
)
from toolfold.runtime.core._approval import unapproved
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._events import (
    ApprovalDenied,
    ApprovalGranted,
    CallResumed,
    Event,
    StepLimitChanged,
    ToolResultsProvided,
    UserMessageAdded,
)
from toolfold.runtime.core._keys import (
    BOUND_KEY,
    call_at,
    fingerprint_matches,
    keyed,
    made_for_earlier,
)
from toolfold.runtime.core._keys import fingerprint as _fingerprint
from toolfold.runtime.core._keys import named as _named
from toolfold.runtime.core._keys import own_key as _own_key
from toolfold.runtime.core._messages import (
    Message,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    content_problem,
    describe_content,
    part_problem,
    result_content,
)
from toolfold.runtime.core._reducer import reduce
from toolfold.runtime.core._request import ToolDefinition
from toolfold.runtime.core._same_json import same_json, typed_leaves
from toolfold.runtime.core._state import (
    WAITING_PHASES,
    CallState,
    CallStatus,
    RunState,
    not_a_state,
)
from toolfold.runtime.drive._executor import resume_check
from toolfold.runtime.drive._failures import started_by
from toolfold.runtime.drive._loop import (
    FROM_WAITING,
    Live,
    answered,
    apply_event,
    mask_of,
    masked_result,
    show_event,
)
from toolfold.toolkit._results import (
    NoResultError,
    describe_exception,
    iterator_kind,
    stream_kind,
)
from toolfold.toolkit._tool import Tool

# The stored configuration a resume cannot change, by the name the user gave it.
_STORED = {
    "instructions": "instructions",
    "tool_choice": "tool_choice",
    "reset_tool_choice": "reset_tool_choice",
    "settings": "settings",
    "output_retries": "output_retries",
    "auto_execute_tools": "auto_execute_tools",
    "output": "output_type",
}

_PLURAL = frozenset({"instructions", "settings"})
"""The names of `_STORED` that a verb agrees with as plurals."""

# The suspended sub-run a call continues now (see `continuing`), by identity.
_CONTINUING: ContextVar[RunState | None] = ContextVar("toolfold_continuing", default=None)


@contextmanager
def continuing(sub_run: RunState) -> Iterator[None]:
    """Mark ``sub_run`` as the sub-run its caller's answers reached, while its resume begins.

    A tool that runs sub-runs (an agent or a workflow used as a tool, a
    workflow step) resumes ``sub_run`` inside this: its resume then shows
    the calls its caller's answers settled (`caller_answered`), as a
    resume shows the calls its own answers settled.
    """
    token = _CONTINUING.set(sub_run)
    try:
        yield
    finally:
        _CONTINUING.reset(token)


class Continued(NamedTuple):
    """How a sub-run a call continues goes on (see `caller_answered`).

    Attributes:
        unshown: The ids of its calls that its caller's answers settled and
            no run of it has shown.
        from_waiting: The tree's resume began from a run that waited for
            answers (its own tool rounds say so to the sub-runs they continue).
    """

    unshown: frozenset[str]
    from_waiting: bool


def caller_answered(state: RunState) -> Continued | None:
    """The calls of ``state`` that its caller's answers settled and no run of it has shown,
    if ``state`` is the sub-run a call continues now (see `continuing`); else None.

    Those answers reach a sub-run as events reduced into its state
    (`CallResumed`), each resume's after its log. When the top run's resume
    began from a run that waited for answers, no run of the tree has run
    since the answers its logs end with (a sub-run that ran after them has
    made progress, or ended): those are the ones to show. When it began from
    a run that did not wait (a failed resume's error state, an interrupted
    run), a sub-run whose log ends with answers ran with them and showed
    them before it stopped: none are shown again. (One that never ran
    there, its caller having failed first, does not show them either.)
    """
    if _CONTINUING.get() is not state:
        return None
    # (read in the caller's tool round: `resumed_round` sets the note there)
    if FROM_WAITING.get():
        return Continued(_unshown(state), True)
    return Continued(frozenset(), False)


_ANSWERS = frozenset(
    {"approval_granted", "approval_denied", "tool_results_provided", "call_resumed"}
)


def _unshown(state: RunState) -> frozenset[str]:
    """The ids of the calls of ``state`` (a sub-run) answered by the answer events its log
    ends with (see `caller_answered`)."""
    ids: set[str] = set()
    log = state.log
    for index in range(len(log) - 1, -1, -1):
        event = log[index]
        if isinstance(event, ToolResultsProvided):
            ids.update(part.call_id for part in event.results)
        elif isinstance(event, ApprovalGranted | ApprovalDenied):
            ids.add(event.call_id)
        elif not isinstance(event, CallResumed):  # (a deeper sub-run's: its resume shows it)
            break
    return frozenset(ids)


def resumed(
    state: RunState,
    options: RunOptions,
    *,
    tool_results: Mapping[str, Any] | None,
    approvals: Mapping[str, Approval] | None,
    message: MessagesInput | None,
    max_steps: int | None,
    deps: Any,
    on_event: Callable[[Event], object] | None,
    on_step: Callable[[Step], object] | None,
    continued: Continued | None = None,
    failed: bool = False,
    retrying: Retrying | None = None,
    resume: str = RESUME,
) -> tuple[Live, RunState]:
    """The live half and the state to drive: the caller's answers applied to ``state``.

    ``max_steps`` (else the options') becomes the run's per-turn limit; stop
    conditions of the options that the run does not store are checked for
    this resume; a difference in the stored configuration is refused.
    ``continued``: ``state`` is a sub-run a call continues (see `continuing`),
    and how (`caller_answered`): the calls its caller's answers settled and
    no run of it has shown are shown as this resume's own. The live half
    notes whether the tree's resume began from a run that waited (a top
    run's own phase; a continued sub-run's caller's note), for the sub-runs
    its tool rounds continue (`Live.from_waiting`). ``failed``: ``state`` is a
    failed run made ready to retry (`retry_state`), for the refusals' advice;
    ``retrying``: that failed run, whose refusal of an answer to a call held in
    what failed (`held_in_failure`) says to resume first. ``resume``: how the error
    for a ``message`` that is a `Response` or a `RunState` says to go on with its run
    (see `to_messages`).

    Raises:
        UsageError: The options contradict the run's stored configuration,
            the run stopped at ``max_steps`` and nothing continues it, the
            answers or tools do not fit the state, or the run cannot take
            ``message`` once the answers are applied (checked before any
            event is made).
        InvalidEventError: An answer the run cannot take (with ``retrying``:
            one to a call held in what failed, in phase 'failed').
    """
    _check_attached(state, options)
    _check_stored(state.config, options.config, failed=failed or state.phase == "failed")
    _check_sub_runs(state, options.tools)
    extra = tuple(c for c in options.config.stop_when if c not in state.config.stop_when)
    live = options.live(deps=deps, on_event=on_event, on_step=on_step, stop_when=extra)
    sent = live_definitions(state, options.config)
    if sent is not None:
        live = attrs.evolve(live, definitions=sent)
    if state.phase in WAITING_PHASES if continued is None else continued.from_waiting:
        live = attrs.evolve(live, from_waiting=True)
    messages = None if message is None else to_messages(message, resume=resume)
    if continued is not None and not tool_results and not approvals:
        waiting = continued.unshown
    else:
        waiting = frozenset(c.call.id for c in state.calls if c.status != "done")
    # The answers are made into events once (a result is converted once), reduced
    # unobserved so that a message the run cannot take is refused before any is shown.
    after, made = _answered(live, state, tool_results, approvals, retrying)
    added = _added_messages(after, messages) if messages else []
    for event, reached in made:
        show_event(live, event, reached)
    settled = answered(after, waiting) if waiting else None
    if settled is not None:  # the run's loop shows them first, as a step's results
        live = attrs.evolve(live, answered=settled)
    for event, reached in added:
        show_event(live, event, reached)
    state = added[-1][1] if added else after
    limit = max_steps if max_steps is not None else options.config.max_steps
    # (answers that settle the step's last calls at the limit are progress: the run then
    # ends at max_steps with them, as it does when the answer is an approval)
    at_limit = settled is None and _stopped_at_limit(state)
    if limit != state.config.max_steps or at_limit:
        _check_limit(state, limit, given=max_steps is not None)
        state = apply_event(live, state, StepLimitChanged(limit))
    if at_limit and _stopped_at_limit(state):
        raise UsageError(
            "the run stopped at a max_steps(n) stop condition that still holds; a larger "
            "max_steps does not lift it: start a new turn with message=..."
        )
    return live, state


class ExtraToolsWarning(UserWarning):
    """A resume was given tools the run did not start with: the model is not offered them.

    A run's tool set is fixed when it starts (its state stores it, and a
    call to a tool outside it reads "Unknown tool"). To give the model more
    tools, start a new run from the run's messages:
    ``agent.run(prompt, history=response.messages)``.
    """


def live_definitions(state: RunState, given: RunConfig) -> tuple[ToolDefinition, ...] | None:
    """The definitions a resume of ``state`` sends the model, if not the stored ones (else None).

    A run stores its tools' definitions, but the live tools given to the
    resume check the model's calls: a tool that changed its description or
    schema under the same name since the run started (a new version
    deployed while the run waited) would refuse every call the model makes
    from the stored schema. So each request of the resumed run carries the
    live tool's definition for each tool of the run that was given again
    (a tool without a function that was not given keeps its stored one).
    Compared once here: a resume whose tools did not change (and every run
    that is no resume) sends the stored tuple, with no work per step.

    Tools given that the run does not have are not offered (the run's tool
    set is fixed at its start): an `ExtraToolsWarning` names them, as an
    MCP server whose listing changed warns.
    """
    stored = state.config.definitions
    by_name = {spec.name: spec.definition for spec in given.tools}
    sent = tuple(_newer(definition, by_name.get(definition.name)) for definition in stored)
    known = {definition.name for definition in stored}
    extra = [name for name in by_name if name not in known]
    if extra:
        agent = state.agent or started_by(state)
        whose = f"agent {agent!r}'s run" if agent else "the run"
        names = ", ".join(repr(n) for n in extra)
        warnings.warn(
            f"resume: {'tool' if len(extra) == 1 else 'tools'} {names} "
            f"{'is' if len(extra) == 1 else 'are'} not offered to the model: "
            f"{whose} {state.run_id!r} started without them, and a run's tool set is fixed at "
            "its start (stored in its state; a call to them would read 'Unknown tool'); to "
            "give them, start a new run from its messages: "
            "agent.run(prompt, history=state.messages)",
            ExtraToolsWarning,
            stacklevel=_user_stacklevel(),
        )
    if all(a is b for a, b in zip(sent, stored, strict=True)):
        return None
    return sent


def _user_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside toolfold, for `live_definitions`'
    ``warnings.warn``: the user's call of ``resume``/``aresume``/``Agent.resume``...
    however deep the resume's own calls go (2, the caller, when none is found: a
    resume run in a worker thread has no user frame). asyncio's frames are passed
    over too: ``asyncio.run(agent.aresume(...))`` points at the line of that call."""
    ours: tuple[str, ...] = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,)
    loop_package = sys.modules.get("asyncio")  # (not imported: no frame of its own to pass)
    if loop_package is not None and loop_package.__file__ is not None:
        ours += (os.path.dirname(os.path.abspath(loop_package.__file__)) + os.sep,)
    frame: types.FrameType | None = sys._getframe(1)  # live_definitions: level 1
    level = 1
    while frame is not None:
        if not frame.f_code.co_filename.startswith(ours):
            return level
        frame = frame.f_back
        level += 1
    return 2


def _newer(stored: ToolDefinition, live: ToolDefinition | None) -> ToolDefinition:
    """``stored``, or ``live`` when it differs (as JSON: ``1`` and ``True`` differ)."""
    if live is None or live is stored:
        return stored
    if (
        live.description == stored.description
        and live.strict is stored.strict
        and same_json(live.parameters, stored.parameters, typed_leaves(stored.parameters))
    ):
        return stored
    return live


def _added_messages(after: RunState, messages: tuple[Message, ...]) -> list[tuple[Event, RunState]]:
    """``message=`` as events reduced into ``after``, each with the state it led to.

    A message follows the step's results: it can be added to a run that
    finished or awaits the model once the answers are applied (``after``),
    not to one whose calls still wait for an answer or still have to run (a
    provider takes no message between calls and their results). The events
    are reduced here, unobserved, so that a refusal leaves nothing shown;
    the caller shows them (`show_event`) once every check has passed.

    Raises:
        UsageError: ``message=`` names what it cannot be added to, and what to do.
    """
    if after.phase in _MID_STEP:
        raise UsageError(f"resume(message=...) cannot add the message now: {_no_message(after)}")
    added: list[tuple[Event, RunState]] = []
    for item in messages:  # a message the run refuses (tool calls in it...) is refused as before
        event = UserMessageAdded(item)
        after = reduce(after, event)
        added.append((event, after))
    return added


# The phases of a run whose step's calls are not all answered: no message can come in.
_MID_STEP = (*WAITING_PHASES, "running_tools")


def _no_message(state: RunState) -> str:
    """Why ``state`` (after the answers) refused a message, and what to do instead."""
    later = (
        "resume without message= (nothing was run), then add it with "
        "resume(response.state, message=...) once that run has finished"
    )
    keyed = answer_keys(state, "awaiting_approval")
    if keyed:
        return (
            f"the run waits for the approval of calls {_listed(keyed)}, and a message can "
            f"only follow the step's results: answer them with approvals= and {later}"
        )
    keyed = answer_keys(state, "to_return")
    if keyed:
        return (
            f"the run waits for the results of calls {_listed(keyed)}, and a message can "
            "only follow the step's results: give them with tool_results= in the same "
            "resume as message= (the message is added after them)"
        )
    # (a call whose sub-run was answered by path runs again: the sub-run goes on)
    sub_runs = [
        (c.call.id, c.call) for c in state.calls if c.status != "done" and c.child is not None
    ]
    if sub_runs:
        return (
            f"the sub-runs of calls {_listed(sub_runs)} go on with the answers given to them "
            "and must finish before their calls have results, and a message can only "
            f"follow those results: {later}"
        )
    to_run = [(c.call.id, c.call) for c in state.calls if c.status in ("to_run", "suspended")]
    if to_run:
        return (
            f"calls {_listed(to_run)} still have to run (approved by this resume, or "
            "interrupted before their results), and a message can only follow their "
            f"results: {later}"
        )
    return f"the run is in the middle of a step ({state.phase}): {later}"


def _listed(keyed: list[tuple[str, ToolCallPart]]) -> str:
    """Calls by key, with their tools: ``'c1' (delete_file), 'c2' (send)``."""
    return ", ".join(f"{key!r} ({call.name})" for key, call in keyed)


def check_sub_run(
    state: RunState, options: RunOptions, max_steps: int | None, *, tools_known: bool = True
) -> None:
    """Refuse what `resumed` would refuse of ``state``, a suspended sub-run, resumed with ``options``.

    A sub-run resumes with no answers of its own (they reached it through its
    caller) and ``max_steps`` (else the options'). The calling run's resume
    asks this of every suspended sub-run of its tree (see `checks_resume`)
    before it applies anything, so a changed sub-agent is refused as the
    agent itself is, and the run still waits as it was. ``tools_known``:
    False when the options lack tools listed only once the agent's tool
    sources open, whose presence cannot be checked yet.

    Raises:
        UsageError: The options contradict the sub-run's stored
            configuration, its tools or its step count, or those of a
            sub-run it waits on.
    """
    if tools_known:
        _check_attached(state, options)
    _check_stored(state.config, options.config)
    limit = max_steps if max_steps is not None else options.config.max_steps
    if limit != state.config.max_steps or _stopped_at_limit(state):
        _check_limit(state, limit, given=max_steps is not None)
    _check_sub_runs(state, options.tools)


def _check_sub_runs(state: RunState, tools: Mapping[str, Tool[..., Any]]) -> None:
    """Refuse the resume when the spec of a call's open sub-run does not fit it (any depth)."""
    for call in state.calls:
        child = call.child
        # (a finished sub-run is not resumed: an interrupted round may hold one on a call
        # still to run, whose answer ended it)
        if child is None or call.status == "done" or child.is_done:
            continue
        check = resume_check(tools.get(call.call.name))
        if check is None:  # (a missing tool is `_check_attached`'s)
            continue
        try:
            check(call.call, child)
        except UsageError as exc:
            # Said once, at the top, with the path to the sub-run (as `resume` keys its calls).
            path, tool, reason = getattr(exc, _REFUSED, ((), call.call.name, str(exc)))
            path = (call.call.id, *path)
            refused = UsageError(
                f"cannot resume the sub-run of call {'/'.join(path)!r} (tool {tool!r}), so "
                f"nothing was run: {reason}"
            )
            setattr(refused, _REFUSED, (path, tool, reason))
            raise refused from None


_REFUSED = "_toolfold_sub_run_refused"


def _stopped_at_limit(state: RunState) -> bool:
    return state.phase == "finished" and state.finish_reason == "max_steps"


def _check_limit(state: RunState, limit: int, *, given: bool) -> None:
    made = state.turn_steps
    if type(limit) is not int or limit < made:
        origin = "given to resume" if given else "the resuming agent's"
        raise UsageError(
            f"max_steps={limit!r} ({origin}) is below the {made} model calls this turn of "
            "the run has already made; max_steps is the total per turn, give more than "
            f"{made} to continue"
        )
    if _stopped_at_limit(state) and limit == made:
        raise _cannot_continue(state, limit)


def _cannot_continue(state: RunState, limit: int) -> UsageError:
    return UsageError(
        f"the run stopped at max_steps ({state.turn_steps} model calls this turn) and "
        f"max_steps={limit} does not continue it: resume with max_steps=N above "
        f"{state.turn_steps} (the new total for the turn) to let the model go on, or with "
        "message=... to start a new turn"
    )


def _settings_kept(stored: RunConfig, given: RunConfig) -> Mapping[str, Any]:
    """The stored settings, less a credential or client option (`CLIENT_OPTIONS`) ``given`` lacks.

    A state saved before ``settings={"api_key": ...}`` was refused keeps that
    setting (the run sends it as it did); no agent can have it now, so the
    resuming agent is not asked to.
    """
    settings = stored.settings
    if CLIENT_OPTIONS.isdisjoint(settings):  # the usual case: one set test
        return settings
    return {k: v for k, v in settings.items() if k not in CLIENT_OPTIONS or k in given.settings}


def _check_stored(stored: RunConfig, given: RunConfig, *, failed: bool = False) -> None:
    """Refuse options whose stored part differs from the run's (``failed``: an error's state)."""
    differ = [
        name
        for field, name in _STORED.items()
        if (_settings_kept(stored, given) if field == "settings" else getattr(stored, field))
        != getattr(given, field)
    ]
    if not differ:
        return
    one = len(differ) == 1 and differ[0] not in _PLURAL  # ("instructions differ")
    head = (
        f"the resuming agent's {', '.join(differ)} {'differs' if one else 'differ'} "
        "from the run's: a run keeps "
        "the configuration it started with (it is stored in its state); "
    )
    if failed:
        raise UsageError(
            head + "resume the error's state (err.state) with the agent that started it to "
            "retry what failed, or start a new run with this agent from the failed run's "
            "messages: agent.run(prompt, history=err.state.messages) (they end with what "
            "failed it, such as the rejected answer; leave out what it should not see)"
        )
    raise UsageError(
        head + "resume with the agent that started it, or start a new run from its "
        "messages: agent.run(prompt, history=response.messages)"
    )


class Retrying(NamedTuple):
    """A failed run that `resume` goes on with from before what failed it (`retry_state`)."""

    failed: RunState
    """The run as it failed: the state an answer's refusal carries, untouched."""
    where: str
    """What the run's own calls are, for the refusal: "step" (a workflow's), "call"."""


def _answered(
    live: Live,
    state: RunState,
    tool_results: Mapping[str, Any] | None,
    approvals: Mapping[str, Approval] | None,
    retrying: Retrying | None = None,
) -> tuple[RunState, list[tuple[Event, RunState]]]:
    """``state`` with the caller's approvals and tool results applied, and the events.

    The events are reduced here, not shown: each comes with the state it led
    to, for the caller to show to ``on_event`` (`show_event`) once it has
    checked the outcome. Each answer is converted once.

    An answer for a call of a suspended sub-run (an agent used as a tool, any
    depth) travels down as `CallResumed` events along the path to it.

    ``retrying``: ``state`` is that failed run made ready to retry; an answer
    to a call held in what failed is refused where the reducer would refuse it
    (each answer checked as any other first), saying to resume first
    (`_refuse_held`).
    """
    for option, given in (("approvals", approvals), ("tool_results", tool_results)):
        if given is not None and not isinstance(given, Mapping):
            raise UsageError(f"{option}= maps call ids to answers, got {type(given).__name__}")
        for key in given or ():
            if not isinstance(key, str):
                raise UsageError(f"{option}= is keyed by call ids (text), got {key!r}")
    _check_known(state, approvals, tool_results)
    nested: list[tuple[tuple[str, ...], Event]] = []
    made: list[tuple[Event, RunState]] = []

    def apply(event: Event) -> RunState:
        made.append((event, reduce(state, event)))
        return made[-1][1]

    named: dict[tuple[tuple[str, ...], str], str] = {}  # the call a key means -> the key
    shown = state  # (keys name calls of the state given: one answer applied first changes none)

    def named_call(option: str, key: str, status: CallStatus) -> tuple[tuple[str, ...], str]:
        path, call_id = bound_address(shown, key, status)
        earlier = named.setdefault((path, call_id), key)
        if earlier != key:  # e.g. a sub-run's only call of an id, by its id and by its path
            raise UsageError(
                f"{option}= answers call {call_id!r} twice: {earlier!r} and {key!r} "
                "name the same call"
            )
        return path, call_id

    for given_key, decision in (approvals or {}).items():
        path, call_id = named_call("approvals", given_key, "awaiting_approval")
        if isinstance(decision, Denied):
            reason: object = decision.reason
            if not isinstance(reason, str):
                # Refused here like any other wrong answer (no state attached), not by
                # the reducer as an event in phase awaiting_approval.
                raise UsageError(
                    f"approval for call {given_key!r}: Denied(reason) takes the reason as "
                    f"text the model reads, got {type(reason).__name__} {reason!r:.60}"
                )
            event: Event = ApprovalDenied(call_id, reason)
        elif decision is True:
            event = ApprovalGranted(call_id)
        elif decision is False:
            event = ApprovalDenied(call_id, "")
        else:
            raise UsageError(
                f"approval for call {given_key!r} must be True, False or Denied(reason), "
                f"got {decision!r}"
            )
        if path:
            nested.append((path, event))
        else:
            if retrying is not None:
                _refuse_held(retrying, shown, given_key, "awaiting_approval")
            state = apply(event)
    if tool_results:
        own: list[ToolResultPart] = []
        own_keys: list[str] = []  # (a held one is refused once every value is checked)
        for key, value in tool_results.items():
            path, call_id = named_call("tool_results", key, "to_return")
            found = call_at(state, path, call_id, "to_return")
            part = _result_part(call_id, found.call if found else None, value, live.tools)
            part = _masked_answer(live.mask if not path else _sub_run_mask(live, state, path), part)
            if path:
                nested.append((path, ToolResultsProvided((part,))))
            else:
                own_keys.append(key)
                own.append(part)
        if retrying is not None:
            for key in own_keys:
                _refuse_held(retrying, shown, key, "to_return")
        if own:
            state = apply(ToolResultsProvided(tuple(own)))
    for event in nest_answers(nested):
        state = apply(event)
    blocked = [f"{c.call.id!r} ({c.call.name})" for c in unapproved(state, live.tools)]
    if blocked:
        raise UsageError(
            f"calls {', '.join(blocked)} were cleared to run without approval, but their "
            "tools now require approval; the stored run cannot ask for it at this point: "
            "fork it before that step (toolfold.runtime.fork) or resume with the tools "
            "it was started with"
        )
    return state, made


def approval_key(state: RunState, call_id: str) -> str:
    """The key that approves (or denies) one call of ``state`` and no other.

    ``resume(state, approvals={approval_key(state, call.id): True})`` approves
    the call as ``approvals={call.id: True}`` does, but the key also holds a
    fingerprint of the call as it stands in ``state``: the run's id, the
    step (and those of each sub-run down to the call), the call's id, tool
    name and arguments. Given with any other state (another run whose model
    made the same call id, another step, other arguments), `resume` refuses
    it and runs nothing. Use it wherever the approval and the state travel
    apart (a user's click in a browser and the state in a store or a queue),
    so that an approval can only approve what the user was shown. The
    fingerprint binds, it does not authenticate: anyone holding the state
    can make the key, so approvals must still come from the user.

    A plain id that calls of several runs of the tree wait under (the
    models of the run and of its sub-runs made the same id) names no call:
    it is refused, listing the key of each (`resume` lists them too); give
    the key listed for the call the user was shown. A key that is already
    bound to its call in ``state`` comes back as it is.

    Args:
        state: The suspended state whose call it approves.
        call_id: The call's id, or its path for a call of a sub-run (as
            `resume` takes it: ``"call_1/call_0"``).

    Raises:
        UsageError: ``state`` is no `RunState`, ``call_id`` is no str, no
            call of ``state`` awaits approval under it, or several do.
    """
    if not isinstance(state, RunState):
        raise not_a_state("approval_key", state)
    if not isinstance(call_id, str):
        raise UsageError(
            f"approval_key(): call_id must be a call's id (a str), "
            f"got {type(call_id).__name__} {call_id!r}"
        )
    status: CallStatus = "awaiting_approval"
    named = _named(state, call_id, status)
    if len(named) > 1:
        raise _ambiguous(state, call_id, status, named)
    if named:
        path, found = named[0]
        return f"{call_id}#{_fingerprint(state, path, found)}"
    if BOUND_KEY.fullmatch(call_id) and _bound(state, call_id, status) is not None:
        return call_id  # (a key listed for its call: bound to it already)
    raise UsageError(f"no call {call_id!r} awaits approval in this state")


def _check_known(
    state: RunState,
    approvals: Mapping[str, Approval] | None,
    tool_results: Mapping[str, Any] | None,
) -> None:
    """Refuse an answer to a call the waiting run's tree does not hold at all, listing the calls
    that wait, by the keys `resume` answers them by (at any depth: a workflow's steps are not
    what waits). A call that waits for the other kind of answer (an approval given a result,
    or the reverse) is refused saying which it waits for. An answer to a call that was
    answered already (an approval given again, or to a stale state: the call has its result,
    or is cleared to run) is refused saying so, in a run that waits or one that goes on or
    finished. A call the tree holds in another state (a suspended sub-run's) is the reducer's
    to refuse, saying why; an unknown call in a run that does not wait, too.

    Raises:
        InvalidEventError: An answer names no call of the tree, or one answered already
            (the run's state is untouched).
    """
    checks: tuple[tuple[Mapping[str, Any] | None, CallStatus], ...] = (
        (approvals, "awaiting_approval"),
        (tool_results, "to_return"),
    )
    if state.phase not in WAITING_PHASES:
        if state.phase != "failed":  # (a failed run's answers: `_refuse_held`, the reducer)
            for given, status in checks:
                for key, answer in (given or {}).items():
                    _refuse_answered(state, _unbound_later(state, key, status), status, answer)
        return
    known: dict[str, set[CallStatus]] = {}  # a key -> the statuses of the calls it names
    for path, c in _tree_calls(state, ()):
        for key in (c.call.id, "/".join((*path, c.call.id))):
            known.setdefault(key, set()).add(c.status)
    for given, status in checks:
        what, event, _ = _KINDS[status]
        for key, answer in (given or {}).items():
            call_key = _unbound(state, key, status)
            statuses = known.get(call_key)
            if statuses is not None and status not in statuses and statuses <= _NEEDS_NONE:
                _refuse_answered(state, call_key, status, answer)
            if statuses is not None and (status in statuses or not statuses & _ANSWERED):
                continue  # (the reducer says why a call in another state cannot take it)
            if statuses is not None:  # it waits, for the other kind of answer
                waits, where = _wrong_kind(status)
                raise InvalidEventError(
                    state.phase, event, f"call {call_key!r} waits for {waits}: {where}", state
                )
            _refuse_answered(state, call_key, status, answer)  # (one of an earlier step)
            keys = answer_keys(state, status)
            listed = ", ".join(repr(k) for k, _ in keys) or "none"
            raise InvalidEventError(
                state.phase,
                event,
                f"no tool call {call_key!r} waits for {what}; waiting: {listed}",
                state,
            )


_ANSWERED: frozenset[CallStatus] = frozenset({"awaiting_approval", "to_return"})
"""The statuses of calls waiting for the caller's answer: an approval, a result."""

_NEEDS_NONE: frozenset[CallStatus] = frozenset({"to_run", "done"})
"""The statuses of calls that need no answer any more: cleared to run, or with their result."""


def _refuse_answered(state: RunState, call_key: str, status: CallStatus, answer: Any) -> None:
    """Refuse ``answer`` (of ``status``'s kind) to call ``call_key`` of ``state`` if that call
    was answered already: a call of the tree that is cleared to run or has its result (none
    under that key still waiting), or, in a run that goes on or finished, a call of its
    conversation. The error says so, and what waits instead, as an unknown key's does.

    Raises:
        InvalidEventError: The call was answered already (the run's state is untouched).
    """
    found: list[CallState] = [
        c
        for path, c in _tree_calls(state, ())
        if call_key in (c.call.id, "/".join((*path, c.call.id)))
    ]
    if found and not all(c.status in _NEEDS_NONE for c in found):
        return  # (one waits, or holds a sub-run: answered, or refused, elsewhere)
    call = found[0].call if found else _conversation_call(state, call_key)
    if call is None:
        return
    what, event, option = _KINDS[status]
    if status == "awaiting_approval" and (answer is False or isinstance(answer, Denied)):
        event = "approval_denied"
    cleared = (
        ": it is cleared to run when the run goes on"
        if found and found[0].status == "to_run"
        else ""
    )
    keys = answer_keys(state, status) if state.phase in WAITING_PHASES else []
    waiting = f"waiting for {what}: {_listed(keys)}" if keys else f"nothing waits for {what}"
    raise InvalidEventError(
        state.phase,
        event,
        f"{option}: call {call_key!r} ({call.name}) was already answered{cleared}; {waiting}",
        state,
    )


def _conversation_call(state: RunState, call_id: str) -> ToolCallPart | None:
    """The tool call ``call_id`` of the run's conversation that has its result there, or None."""
    answered = False
    for message in reversed(state.messages):
        for part in message.parts:
            if isinstance(part, ToolResultPart) and part.call_id == call_id:
                answered = True
            elif answered and isinstance(part, ToolCallPart) and part.id == call_id:
                return part
    return None


_KINDS: dict[CallStatus, tuple[str, str, str]] = {
    "awaiting_approval": ("an approval", "approval_granted", "approvals="),
    "to_return": ("a result", "tool_results_provided", "tool_results="),
}
"""By the status of the call it answers: what an answer is called, the event it is refused as,
and the option of `resume` that gives it."""

_OTHER: dict[CallStatus, CallStatus] = {
    "awaiting_approval": "to_return",
    "to_return": "awaiting_approval",
}
"""The status of a call waiting for the other kind of answer."""


def _wrong_kind(given: CallStatus) -> tuple[str, str]:
    """What a call waits for, said against an answer of kind ``given`` (the call waits for the
    other kind: ``"a result, not an approval"``), and where to answer it (``"answer it in
    tool_results=, not approvals="``)."""
    (what, _, option), (waits, _, other_option) = _KINDS[given], _KINDS[_OTHER[given]]
    return f"{waits}, not {what}", f"answer it in {other_option}, not {option}"


def _tree_calls(
    run: RunState, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], CallState]]:
    """Each call of ``run``'s tree, whatever its status, with the path to it (the ids of the
    calls down to its run, each holding a sub-run, done or not); a run's calls before those
    of their sub-runs."""
    for c in run.calls:
        yield path, c
        if c.child is not None:
            yield from _tree_calls(c.child, (*path, c.call.id))


def _unbound(state: RunState, key: str, status: CallStatus) -> str:
    """The call key an answer's key names; a bound key (`approval_key`) checked against ``state``.

    A key of the bound form is always read as one, never as a call's own id:
    a model could name its call like a key made for another call (one that
    leaked through a page) to have that key approve it. A call whose id has
    that form is answered by its own `approval_key`.

    Raises:
        UsageError: A bound key made for another call than this state's.
    """
    match = BOUND_KEY.fullmatch(key)
    if match is None:
        return key
    if _bound(state, key, status) is None:  # (none waits under it: one answered, perhaps)
        return _unbound_later(state, key, status)
    return match[1]


def _unbound_later(state: RunState, key: str, status: CallStatus) -> str:
    """`_unbound` for a call that waits for no answer (the run went on, or finished): a bound
    key is checked against the call it names there (answered, at any depth or in the
    conversation),
    at the steps it may have been made at, so that a key made for another run or call is not
    told it was answered already.

    Raises:
        UsageError: A bound key made for another call than this state's.
    """
    match = BOUND_KEY.fullmatch(key)
    if match is None:
        return key
    plain, given = match[1], match[2]
    calls = [
        (path, c.call)
        for path, c in _tree_calls(state, ())
        if plain in (c.call.id, "/".join((*path, c.call.id)))
    ]
    spoken = _conversation_call(state, plain)
    if spoken is not None:
        calls.append(((), spoken))
    if not calls or any(made_for_earlier(state, path, call, given) for path, call in calls):
        return plain  # (unknown here, or this state's call: refused as such)
    option = "approvals" if status == "awaiting_approval" else "tool_results"
    call = calls[0][1]
    what = _KINDS[status][0]
    keys = answer_keys(state, status) if state.phase in WAITING_PHASES else []
    waiting = (
        f"waiting for {what}: {_listed(keys)}" if keys else f"nothing of this run waits for {what}"
    )
    raise UsageError(
        f"{option}={key!r} was made for another call than this state's call {plain!r} "
        f"({call.name} in run {state.run_id!r}): another run or other arguments; nothing "
        f"was run; {waiting}"
    )


def _bound(
    state: RunState, key: str, status: CallStatus
) -> tuple[tuple[str, ...], CallState] | None:
    """The call in ``status`` that ``key``, a bound key, was made for, with its path; None when
    its call key names no such call (refused as any unknown key is).

    Its call key may name several calls (ids repeated across sub-runs): the
    fingerprint holds the call's path, so it matches one of them at most.

    Raises:
        UsageError: The call key names calls, but the key was made for none of them.
    """
    match = BOUND_KEY.fullmatch(key)
    assert match is not None  # (callers test the form)
    plain, fingerprint = match[1], match[2]
    named = _named(state, plain, status)
    for path, found in named:
        if fingerprint_matches(state, path, found, fingerprint):
            return path, found
    if not named:
        return None
    option = "approvals" if status == "awaiting_approval" else "tool_results"
    if len(named) == 1:
        call = named[0][1].call
        which = f"this state's call {plain!r} ({call.name} in run {state.run_id!r})"
        again = f"approval_key(state, {plain!r})"
    else:  # (ids repeated across the tree: the key of the call meant, as resume lists them)
        which = f"this state's {len(named)} calls {plain!r} (in run {state.run_id!r})"
        again = f"approval_key(state, KEY), KEY one of {_keys_of(state, status, named)}"
    raise UsageError(
        f"{option}={key!r} was made for another call than {which}: another run, another "
        "step or other arguments; nothing was run. Make the key from the state the user "
        f"approved: {again}"
        if option == "approvals"
        else f"{option}={key!r} was made for another call than {which}: nothing was run; "
        f"key each result by its call's key in this state: {_keys_of(state, status, named)}"
    )


def bound_address(state: RunState, key: str, status: CallStatus) -> tuple[tuple[str, ...], str]:
    """`address`, with a bound key (`approval_key`) read as the one call it was made for."""
    if BOUND_KEY.fullmatch(key) is None:
        return address(state, key, status)
    found = _bound(state, key, status)
    if found is None:
        return (), key
    return found[0], found[1].call.id


def address(state: RunState, key: str, status: CallStatus) -> tuple[tuple[str, ...], str]:
    """The path to the call an answer's key means, and the call's own id.

    A plain id means the one call of the tree in ``status`` that has it.
    Calls of several runs of the tree may wait under one id (their models
    made the ids: the top run's and a sub-run's, two sub-runs'): then the
    key is the path, the ids of the suspended calls down to it and its own,
    joined by ``/`` (``"call_1/call_0"``), and a plain id naming several is
    refused, never read as one of them. So is a key that is one call's id
    and another's path (ids with ``/`` in them). `answer_keys` lists a key
    that names each call alone.

    Raises:
        UsageError: ``key`` names several calls in ``status``, listing their keys.
    """
    named = _named(state, key, status)
    if len(named) > 1:
        raise _ambiguous(state, key, status, named)
    if named:
        path, found = named[0]
        return path, found.call.id
    return (), key


def _ambiguous(
    state: RunState,
    key: str,
    status: CallStatus,
    named: list[tuple[tuple[str, ...], CallState]],
) -> UsageError:
    """The refusal of ``key``, which names each call of ``named``, listing their own keys."""
    what = _KINDS[status][0]
    where = ", ".join(
        f"{found.call.name} in "
        + (f"the sub-run of call {'/'.join(path)!r}" if path else "the top run")
        for path, found in named
    )
    return UsageError(
        f"call key {key!r} names {len(named)} calls waiting for {what} ({where}; models of "
        f"the run and of its sub-runs made these ids), so it answers none; nothing was "
        f"run: answer each by its own key instead: {_keys_of(state, status, named)}"
    )


def _keys_of(
    state: RunState, status: CallStatus, calls: list[tuple[tuple[str, ...], CallState]]
) -> str:
    return ", ".join(repr(_own_key(state, path, found, status)) for path, found in calls)


def answer_keys(state: RunState, status: CallStatus) -> list[tuple[str, ToolCallPart]]:
    """Each call of the tree in ``status``, with the key `resume` answers it by
    (`core._keys.keyed`: its id, its path, or its bound key; no two calls share
    a key), in the order of ``state.pending_approvals`` / ``state.tool_calls``."""
    return list(keyed(state, status))


def waiting_call(state: RunState, key: str, status: CallStatus) -> CallState | None:
    """The call of the tree in ``status`` that `resume` would answer under ``key``, or None.

    Raises:
        UsageError: ``key`` names several calls (listing their keys), or is a
            bound key made for another call.
    """
    return call_at(state, *bound_address(state, key, status), status)


def held_in_failure(state: RunState, key: str, status: CallStatus) -> tuple[str, ...] | None:
    """The path to a call in ``status`` that ``key`` (an id, or a path) names anywhere in the tree
    of ``state``, a failed run (or one made ready to retry), when `resume` cannot answer it there:
    it waits in a sub-run held on a call that failed (a nested workflow's failed `Parallel`, its
    branch waiting), which waits again only once the run is resumed and what failed runs again.
    None when no such call is held, or ``key`` answers a call already (depth 1: it waits).
    """
    try:
        if waiting_call(state, key, status) is not None:
            return None
    except UsageError:  # (several calls under it: the resume says so)
        return None
    match = BOUND_KEY.fullmatch(key)
    key = match[1] if match is not None else key
    for path, c in _tree_calls(state, ()):
        if c.status == status and key in (c.call.id, "/".join((*path, c.call.id))):
            return (*path, c.call.id)
    return None


def held_refusal(
    key: str, what: str, where: str, holder: str, first: str, then: str = "answer it"
) -> str:
    """Why an answer to call ``key`` (waiting for ``what``) in the failed ``where`` ``holder`` of a
    failed run is refused (`held_in_failure`), and what to do: ``first`` (resume the run), and
    ``then``."""
    return (
        f"call {key!r} waits for {what} in {where} {holder!r}, which failed: {first}, which runs "
        f"what failed again and has the run wait for the call again; then {then}"
    )


def _refuse_held(retrying: Retrying, state: RunState, key: str, status: CallStatus) -> None:
    """Refuse an answer (in ``status``'s kind) under ``key`` to a call of ``state`` (the failed run
    of ``retrying`` made ready to retry) that waits, for either kind of answer, in a sub-run held
    on a call that failed (`held_in_failure`), saying to resume first and which kind the call
    waits for, instead of the reducer's refusal that names no such call in the retried run's
    phase.

    Raises:
        InvalidEventError: Such an answer, in phase 'failed' (``retrying.failed`` is untouched).
    """
    given, event, _ = _KINDS[status]
    first = "resume(state) with no answers first"
    path = held_in_failure(state, key, status)
    if path is not None:
        reason = held_refusal(key, given, retrying.where, path[0], first)
    else:
        path = held_in_failure(state, key, _OTHER[status])
        if path is None:
            return
        waits, answer = _wrong_kind(status)
        reason = held_refusal(key, f"{waits},", retrying.where, path[0], first, answer)
    failed = retrying.failed
    raise InvalidEventError(failed.phase, event, reason, failed)


def nest_answers(answers: list[tuple[tuple[str, ...], Event]]) -> list[Event]:
    """Answers by path as `CallResumed` events, one per suspended call, nested down the path."""
    own = [event for path, event in answers if not path]
    below: dict[str, list[tuple[tuple[str, ...], Event]]] = {}
    for path, event in answers:
        if path:
            below.setdefault(path[0], []).append((path[1:], event))
    return [*own, *(CallResumed(call_id, nest_answers(inner)) for call_id, inner in below.items())]


def _result_part(
    call_id: str, call: ToolCallPart | None, value: Any, tools: Mapping[str, Tool[..., Any]]
) -> ToolResultPart:
    name = call.name if call is not None else ""
    if isinstance(value, ToolResultPart):
        if value.call_id != call_id:
            raise UsageError(
                f"tool_results[{call_id!r}] is a ToolResultPart for call {value.call_id!r}: "
                "key each result by the id of the call it answers"
            )
        problem = part_problem(value)
        if problem:
            raise UsageError(f"tool_results[{call_id!r}] cannot be given to the model: {problem}")
        return value
    if isinstance(value, BaseException):
        return ToolResultPart(call_id, name, f"Error: {describe_exception(value)}", True)
    if isinstance(value, TextPart):  # a text part alone: its text
        value = value.text
    tool = tools.get(name)
    parts = result_content(value, _text_of(tool))
    if parts is not None:
        problem = content_problem(parts)
        if problem:
            raise UsageError(
                f"tool_results[{call_id!r}] holds a part the model cannot be given: {problem}"
            )
        return ToolResultPart(call_id, name, describe_content(parts), parts=parts)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # never to run: closed, it is not reported as "never awaited"
            kind = "a coroutine"
        else:
            kind = f"an awaitable ({type(value).__name__})"
        raise UsageError(
            f"tool_results[{call_id!r}] is {kind}, not what awaiting it gives (a forgotten "
            "`await`?): await it and give its result"
        )
    kind = stream_kind(value)
    if kind:
        raise UsageError(f"tool_results[{call_id!r}] is {kind}: read it and give its text")
    kind = iterator_kind(value)
    if kind:
        raise UsageError(
            f"tool_results[{call_id!r}] is {kind}, whose values were never produced: "
            "give the result itself (e.g. a list of the values)"
        )
    try:
        content = value if isinstance(value, str) else _text_of(tool)(value)
    except TypeError as exc:  # a run's Response or RunState, there or inside it
        refused = exc if isinstance(exc, NoResultError) else exc.__cause__
        if not isinstance(refused, NoResultError):
            raise
        raise UsageError(f"tool_results[{call_id!r}] is {refused.record}") from None
    return ToolResultPart(call_id, name, content)


def _masked_answer(mask: Callable[[str], str] | None, part: ToolResultPart) -> ToolResultPart:
    """A caller's result ``part`` with ``mask`` applied to its text, as a tool's own result
    is (`Live.mask`): the caller may quote what a tool it ran returned."""
    if mask is None:
        return part
    found = masked_result(mask, part.content, part.parts)
    return part if found is None else attrs.evolve(part, content=found[0], parts=found[1])


def _sub_run_mask(
    live: Live, state: RunState, path: tuple[str, ...]
) -> Callable[[str], str] | None:
    """What masks an answer to a call of the sub-run at ``path`` (suspended call ids from the
    top of ``state``): the credentials of the model of the agent running it, found through
    the agents used as tools along the path, and those of the run's own (`Live.mask`).

    The sub-run holds the answer and sends it to its own model, whose key a tool it
    called may have quoted. Only the run's own are masked where the path leads
    through a tool that is no agent's (a workflow's).
    """
    from toolfold.runtime._agent import Agent
    from toolfold.runtime._agent_tool import as_tool_of

    tools, agent = live.tools, None
    for step in path:
        call = next((c for c in state.calls if c.call.id == step and c.child), None)
        tool = tools.get(call.call.name) if call is not None else None
        made = as_tool_of(tool) if tool is not None else None
        if call is None or call.child is None or made is None or not isinstance(made.agent, Agent):
            return live.mask
        state = call.child
        agent = made.agent._for_state(state)  # (a handoff inside the sub-run: the agent now)
        tools = agent._options.tools
    own = None
    if agent is not None:  # the model its run calls: an override_models block's, if any
        own = mask_of(in_force(agent._options.model, agent._options.spec))
    top = live.mask
    if own is None or top is None:
        return own or top
    return lambda text: own(top(text))


def _text_of(tool: Tool[..., Any] | None) -> Callable[[Any], str]:
    """How a given result (or an item of one with images) is written as text: as
    ``tool`` writes its results, or as JSON for a call to no tool."""
    if tool is not None:
        return tool.format_result
    return _as_json


def _as_json(value: Any) -> str:
    return json.dumps(value, default=str)


def _check_attached(state: RunState, options: RunOptions) -> None:
    missing = [
        spec.name
        for spec in state.config.tools
        if spec.has_function and spec.name not in options.tools
    ]
    if missing:
        raise UsageError(
            f"the run's state names tools that were not given: {', '.join(missing)}; "
            "pass the same tools to resume it"
        )
    if state.config.output is not None and options.output is None:
        raise UsageError(
            "the run asks for structured output: pass the same output_type to resume it"
        )
