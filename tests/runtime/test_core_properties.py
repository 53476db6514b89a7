"""Hypothesis drives random runs through the core: invariants, purity, JSON and replay hold."""

from __future__ import annotations

import threading
from typing import Any

from core_helpers import call, responded, spec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolfold import InvalidTransitionError
from toolfold.runtime import (
    ApprovalDenied,
    ApprovalGranted,
    AttemptDropped,
    AwaitApproval,
    AwaitToolResults,
    CallModel,
    Event,
    Finish,
    Log,
    Message,
    ModelResponded,
    OutputAccepted,
    OutputRejected,
    OutputSpec,
    RunConfig,
    RunFailed,
    RunStarted,
    RunState,
    RunTools,
    StopRequested,
    ToolResultPart,
    ToolResultsProvided,
    ToolReturned,
    Usage,
    UserMessageAdded,
    ValidateOutput,
    fork,
    initial_state,
    next_effect,
    reduce,
    replay,
    tool_called,
)
from toolfold.runtime.core._state import Disposition

TOOLS = {
    "add": spec("add", max_retries=2),
    "rm": spec("rm", approval="always", max_retries=1),
    "pay": spec("pay", approval="predicate"),
    "ask": spec("ask", has_function=False),
}
NAMES = [*TOOLS, "ghost"]
OUTCOMES = ["ok", "error", "invalid_arguments", "timeout"]
EFFECT_FOR_PHASE = {
    "awaiting_model": CallModel,
    "running_tools": RunTools,
    "awaiting_approval": AwaitApproval,
    "awaiting_tool_results": AwaitToolResults,
    "validating_output": ValidateOutput,
    "finished": Finish,
    "failed": Finish,
}


@st.composite
def configs(draw: Any) -> RunConfig:
    return RunConfig(
        tools=tuple(TOOLS.values()),
        auto_execute_tools=draw(st.booleans()),
        output=draw(st.sampled_from([None, OutputSpec("out", {"type": "object"})])),
        output_retries=draw(st.integers(0, 2)),
        max_steps=draw(st.integers(1, 6)),
        stop_when=draw(st.sampled_from([(), (tool_called("add"),)])),
        tool_choice=draw(st.sampled_from([None, "auto", "required"])),
    )


def _model_event(draw: Any, state: RunState) -> Event:
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return UserMessageAdded(Message.user(draw(st.text(max_size=5))))
    if choice == 1:
        return StopRequested()
    if choice < 4:
        usage = Usage(draw(st.integers(0, 50)), draw(st.integers(0, 50)), requests=1)
        return responded(text=draw(st.text(max_size=8)), usage=usage)
    count = draw(st.integers(1, 3))
    calls = []
    for index in range(count):
        name = draw(st.sampled_from(NAMES))
        broken = draw(st.integers(0, 7)) == 0
        call_id = f"s{state.step + 1}c{index}"
        calls.append(call(call_id, name, text="{oops" if broken else None))
    dispositions: tuple[Disposition, ...] = ()
    if state.config.auto_execute_tools and any(c.name == "pay" for c in calls):
        dispositions = tuple(
            draw(st.sampled_from(["approve", "execute"])) if c.name == "pay" else _default(c.name)
            for c in calls
        )
    usage = Usage(draw(st.integers(0, 50)), draw(st.integers(0, 50)), requests=1)
    return responded(*calls, usage=usage, dispositions=dispositions)


def _default(name: str) -> Disposition:
    tool = TOOLS.get(name)
    if tool is None:
        return "execute"
    if not tool.has_function:
        return "return"
    return "approve" if tool.approval == "always" else "execute"


def _result(draw: Any, call_id: str) -> ToolResultPart:
    return ToolResultPart(call_id, "x", draw(st.text(max_size=5)), draw(st.booleans()))


@st.composite
def next_events(draw: Any, state: RunState) -> Event:
    """A plausible next event for ``state``, or now and then a random one."""
    if draw(st.integers(0, 7)) == 0:
        return draw(noise())
    effect = next_effect(state)
    if isinstance(effect, CallModel):
        if draw(st.integers(0, 30)) == 0:
            return RunFailed("model_error", "down")
        if draw(st.integers(0, 30)) == 0:  # a resume dropped a rejected answer
            return AttemptDropped(Usage(2, 3, requests=1))
        return _model_event(draw, state)
    if isinstance(effect, RunTools):
        approvals = state.pending_approvals
        if approvals and draw(st.booleans()):
            target = draw(st.sampled_from(approvals)).id
            return ApprovalGranted(target) if draw(st.booleans()) else ApprovalDenied(target)
        if draw(st.integers(0, 30)) == 0:  # a resume dropped failed sub-runs
            return AttemptDropped(sub_run_usage=Usage(4, 5, requests=2))
        invocation = draw(st.sampled_from(effect.calls))
        outcome = draw(st.sampled_from(OUTCOMES))
        return ToolReturned(invocation.call.id, "r", outcome != "ok", outcome)
    if isinstance(effect, AwaitApproval):
        if effect.tool_calls and draw(st.booleans()):
            return ToolResultsProvided([_result(draw, effect.tool_calls[0].id)])
        target = draw(st.sampled_from(effect.calls)).id
        return ApprovalGranted(target) if draw(st.booleans()) else ApprovalDenied(target, "no")
    if isinstance(effect, AwaitToolResults):
        ids = [c.id for c in effect.calls]
        chosen = draw(st.lists(st.sampled_from(ids), min_size=1, unique=True))
        return ToolResultsProvided([_result(draw, call_id) for call_id in chosen])
    if isinstance(effect, ValidateOutput):
        return OutputAccepted({"v": 1}) if draw(st.booleans()) else OutputRejected("bad")
    return UserMessageAdded(Message.user("more"))


@st.composite
def noise(draw: Any) -> Event:
    call_id = draw(st.sampled_from(["s1c0", "s1c1", "s2c0", "zz"]))
    return draw(
        st.sampled_from(
            [
                ToolReturned(call_id, "n"),
                ApprovalGranted(call_id),
                ApprovalDenied(call_id),
                ToolResultsProvided([ToolResultPart(call_id, "ask", "n")]),
                OutputAccepted(None),
                OutputRejected("n"),
                responded(text="noise"),
                RunStarted("again", RunConfig()),
                StopRequested(),
                AttemptDropped(Usage(2, 3, requests=1)),
                AttemptDropped(sub_run_usage=Usage(4, 5, requests=2)),
                AttemptDropped(Usage(1), Usage(1)),
                AttemptDropped(),
            ]
        )
    )


def _check_invariants(state: RunState) -> None:
    messages = state.messages
    for position, message in enumerate(messages):
        if message.role == "tool":
            previous = messages[position - 1]
            assert previous.role == "assistant"
            assert [r.call_id for r in message.tool_results] == [c.id for c in previous.tool_calls]
        if message.role == "assistant" and message.tool_calls:
            if position + 1 < len(messages):
                assert messages[position + 1].role == "tool"
            else:
                assert state.phase in (
                    "running_tools",
                    "awaiting_approval",
                    "awaiting_tool_results",
                    "failed",
                )
    for c in state.calls:
        assert (c.result is not None) == (c.status == "done")
    statuses = {c.status for c in state.calls}
    expected = {
        "awaiting_model": lambda: statuses <= {"done"},
        "running_tools": lambda: "to_run" in statuses,
        "awaiting_approval": lambda: "to_run" not in statuses and "awaiting_approval" in statuses,
        "awaiting_tool_results": lambda: (
            statuses & {"to_run", "awaiting_approval"} == set() and "to_return" in statuses
        ),
    }.get(state.phase, lambda: True)
    assert expected(), (state.phase, statuses)
    events = state.events
    responses = [e for e in events if isinstance(e, ModelResponded)]
    assert state.step == len(responses)
    total = Usage()
    for e in responses:
        total = total + e.response.usage
    dropped = [e for e in events if isinstance(e, AttemptDropped)]
    for e in dropped:
        total = total + e.usage
    assert state.usage == total
    for e in dropped:  # (these runs make no sub-runs of their own)
        total = total + e.sub_run_usage
    assert state.tree_usage == total
    # A call to a tool that always needs approval never has a result of its own
    # without an ApprovalGranted for it earlier in the log.
    granted: set[str] = set()
    for e in events:
        if isinstance(e, ApprovalGranted):
            granted.add(e.call_id)
        if isinstance(e, ToolReturned) and any(
            c.call.id == e.call_id and c.call.name == "rm" for c in _calls_of(events, e.call_id)
        ):
            assert e.call_id in granted
    if state.phase != "failed":
        for name, count in state.failures.items():
            limit = TOOLS[name].max_retries if name in TOOLS else 3
            assert count <= limit
    effect = next_effect(state)
    assert isinstance(effect, EFFECT_FOR_PHASE[state.phase])


def _calls_of(events: tuple[Event, ...], call_id: str) -> list[Any]:
    from toolfold.runtime import CallState

    return [
        CallState(0, c, "done")
        for e in events
        if isinstance(e, ModelResponded)
        for c in e.response.message.tool_calls
        if c.id == call_id
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), configs(), st.integers(1, 30))
def test_random_runs_keep_the_invariants(data: Any, config: RunConfig, length: int) -> None:
    """Random event sequences never mutate inputs, keep the invariants, and replay exactly."""
    state = initial_state("go", config, run_id="r")
    states = [state]
    for _ in range(length):
        event = data.draw(next_events(state))
        snapshot = state.to_json()
        refused: InvalidTransitionError | None = None
        try:
            new = reduce(state, event)
        except InvalidTransitionError as exc:
            refused = exc
        if refused is not None:
            assert refused.state is state
            assert state.to_json() == snapshot
            continue
        assert state.to_json() == snapshot
        _check_invariants(new)
        states.append(new)
        state = new
    loaded = RunState.from_json(state.to_json())
    assert loaded == state
    assert next_effect(loaded) == next_effect(state)
    assert replay(state.events) == state
    for count, earlier in enumerate(states, start=1):
        assert fork(state, events=count) == earlier
    for step in range(state.step + 1):
        assert fork(state, step=step) == [s for s in states if s.step == step][-1]
    keys: dict[str, str] = {}
    for earlier in states:
        effect = next_effect(earlier)
        if isinstance(effect, RunTools):
            for invocation in effect.calls:
                assert keys.setdefault(invocation.key, invocation.call.id) == invocation.call.id


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers()), max_size=60))
def test_log_behaves_like_tuples_under_forks(operations: list[tuple[int, int]]) -> None:
    """Appending to any version (newest or older) never changes another version."""
    versions: list[tuple[Log[int], tuple[int, ...]]] = [(Log(), ())]
    for pick, item in operations:
        log, expected = versions[pick % len(versions)]
        versions.append((log.append(item), (*expected, item)))
    for log, expected in versions:
        assert tuple(log) == expected
        assert log.as_tuple() == expected
        assert len(log) == len(expected)
        assert log == Log(expected)
        if expected:
            assert log[-1] == expected[-1]
            assert log[0] == expected[0]
            assert log.last() == expected[-1]
            assert log[1:] == expected[1:]
            assert list(reversed(log)) == list(reversed(expected))


def test_log_prefix_shares_and_forks_copy() -> None:
    """A prefix is a view; appending to it copies instead of overwriting the longer log."""
    full = Log([1, 2, 3])
    head = full.prefix(2)
    assert tuple(head) == (1, 2)
    forked = head.append(9)
    assert tuple(forked) == (1, 2, 9)
    assert tuple(full) == (1, 2, 3)
    assert full != forked
    assert Log([1]) != Log([1, 2])


def test_log_appends_from_threads_stay_correct() -> None:
    """Racing appends to one version each get their own item."""
    base = Log(range(10))
    results: list[Log[int]] = []
    lock = threading.Lock()

    def worker(item: int) -> None:
        for _ in range(200):
            log = base.append(item)
            with lock:
                results.append(log)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(100, 104)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert {tuple(log)[-1] for log in results} == {100, 101, 102, 103}
    assert all(tuple(log)[:10] == tuple(range(10)) and len(log) == 11 for log in results)
    assert all(log[-1] == tuple(log)[-1] for log in results)


def test_reduce_and_next_effect_read_no_clock_uuid_random_or_env(monkeypatch: Any) -> None:
    """A whole run reduces with the clock, uuid, random and the environment booby-trapped."""
    import os
    import random
    import time
    import uuid

    state = initial_state("go", RunConfig(tools=tuple(TOOLS.values())), run_id="r")
    events: list[Event] = [
        responded(call("c1", "add"), call("c2", "rm"), call("c3", "ask"), call("c4", "ghost")),
        ToolReturned("c1", "1"),
        ApprovalGranted("c2"),
        ToolReturned("c2", "2"),
        ToolResultsProvided([ToolResultPart("c3", "ask", "3")]),
        responded(text="done"),
    ]

    def trap(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the core must not read this")

    for module, name in [
        (time, "time"),
        (time, "monotonic"),
        (time, "perf_counter"),
        (time, "time_ns"),
        (uuid, "uuid4"),
        (uuid, "uuid1"),
        (random, "random"),
        (random, "getrandbits"),
        (os, "getenv"),
        (os, "urandom"),
    ]:
        monkeypatch.setattr(module, name, trap)
    monkeypatch.setattr(os, "environ", {})
    for event in events:
        next_effect(state)
        state = reduce(state, event)
    assert (state.phase, state.output) == ("finished", "done")


def test_log_extend_shares_its_buffer_only_with_its_own_items() -> None:
    """Another extend landing first at the same place (two threads) is not taken for this one's."""
    x, y, z = object(), object(), object()

    class Racing(list):  # type: ignore[type-arg]
        """A buffer on which another thread's extend lands just before this one's."""

        def extend(self, items: Any) -> None:
            if len(self) == 1:
                super().extend([x, y])  # the other thread's, sharing the first item
            super().extend(items)

    base: Log[object] = Log([None])
    base._items = Racing(base._items)  # type: ignore[attr-defined]
    assert tuple(base.extend([x, z])) == (None, x, z)
