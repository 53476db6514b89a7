"""`reduce_all`: plain rounds reduced in one pass give the state and log of reducing each event."""

from __future__ import annotations

from typing import Any

import pytest
from core_helpers import call, config, spec

from toolfold import InvalidEventError
from toolfold.runtime import RunState, ToolReturned, initial_state, replay
from toolfold.runtime.core import _rounds
from toolfold.runtime.core._events import Event, ModelResponded, OutputAccepted, ToolSuspended
from toolfold.runtime.core._messages import NO_USAGE, Message, Usage
from toolfold.runtime.core._reducer import reduce
from toolfold.runtime.core._request import ModelResponse, OutputSpec
from toolfold.runtime.core._rounds import reduce_all
from toolfold.runtime.core._stop import tool_called

_OUTPUT = OutputSpec("out", {})


def _start(**options: Any) -> RunState:
    tools = [spec("add"), spec("gated", approval="always"), spec("flaky", max_retries=0)]
    options.setdefault("output", _OUTPUT)
    return initial_state("hi", config(*tools, **options), run_id="run")


def _round(n: int, *names: str, usage: Usage = NO_USAGE, execute: bool = True) -> list[Event]:
    """A response calling ``names`` (ids r<n>c<i>) with an ok result for each, in call order."""
    calls = [call(f"r{n}c{i}", name, {"i": i}) for i, name in enumerate(names)]
    response = ModelResponse(Message.assistant("", calls), usage, "tool_calls")
    decided = ("execute",) * len(calls) if execute else ()
    return [ModelResponded(response, decided)] + [ToolReturned(c.id, f"{c.id} ok") for c in calls]


def _answer(text: str = '"done"', usage: Usage = NO_USAGE) -> list[Event]:
    response = ModelResponse(Message.assistant(text), usage, "stop")
    return [ModelResponded(response), OutputAccepted("done")]


def _sequential(state: RunState, events: list[Event]) -> RunState:
    for event in events:
        state = reduce(state, event)
    return state


def _same(state: RunState, events: list[Event]) -> RunState:
    want = _sequential(state, events)
    got = reduce_all(state, events)
    assert got == want
    assert got.events == want.events
    assert got.calls == want.calls
    assert replay(got.events) == got
    assert RunState.from_json(got.to_json()) == got
    return got


CASES: dict[str, tuple[dict[str, Any], list[Event]]] = {
    "rounds, then the answer": ({}, [*_round(1, "add"), *_round(2, "add", "add"), *_answer()]),
    "rounds ending at a boundary": ({}, [*_round(1, "add"), *_round(2, "add", "add")]),
    "a failing result": (
        {},
        [*_round(1, "add"), *_round(2, "add")[:1], ToolReturned("r2c0", "no", is_error=True)],
    ),
    "retries exceeded": (
        {},
        [*_round(1, "add"), *_round(2, "flaky")[:1], ToolReturned("r2c0", "x", is_error=True)],
    ),
    "the step limit": ({"max_steps": 2}, [*_round(1, "add"), *_round(2, "add")]),
    "a stop condition": ({"stop_when": (tool_called("add"),)}, [*_round(1, "add")]),
    "usage": ({}, [*_round(1, "add", usage=Usage(3, 4, requests=1)), *_answer()]),
    "dispositions derived": ({}, [*_round(1, "add", execute=False), *_round(2, "add")]),
    "an unknown tool": ({}, [*_round(1, "add"), *_round(2, "nope")[:1]]),
    "a round still running": ({}, [*_round(1, "add"), *_round(2, "add", "add")[:2]]),
    "results out of order": (
        {},
        [
            *_round(1, "add"),
            *_round(2, "add", "add")[:1],
            ToolReturned("r2c1", "b"),
            ToolReturned("r2c0", "a"),
        ],
    ),
    "an answer without an output schema": ({"output": None}, [*_round(1, "add"), _answer()[0]]),
    "an answer not yet accepted": ({}, [*_round(1, "add"), _answer()[0]]),
    "nothing": ({}, []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_reduce_all_equals_reducing_each_event(case: str) -> None:
    """Whatever the events, `reduce_all` reaches the state, log and calls that reducing each one reaches."""
    options, events = CASES[case]
    _same(_start(**options), events)


def test_plain_rounds_are_reduced_in_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain rounds and the accepted answer need no `reduce` of their own events."""
    state = _start()
    events = [*_round(1, "add"), *_round(2, "add", "add"), *_answer()]
    want = _sequential(state, events)

    def refused(*args: Any) -> RunState:
        raise AssertionError("reduced one event at a time")

    monkeypatch.setattr(_rounds, "reduce", refused)
    assert reduce_all(state, events) == want


def test_a_sub_run_that_waits_is_reduced_one_event_at_a_time() -> None:
    """A suspended sub-run, or a result whose sub-run did not finish, is reduced as `reduce` does."""
    child = _start()
    child = reduce(child, _round(1, "gated", execute=False)[0])
    assert child.phase == "awaiting_approval"
    first = _round(2, "add")[0]
    _same(_start(), [*_round(1, "add"), first, ToolSuspended("r2c0", child)])
    _same(_start(), [*_round(1, "add"), first, ToolReturned("r2c0", "x", child=child)])


def test_failures_before_are_reduced_one_event_at_a_time() -> None:
    """A run with failures on record: an ok result clears the tool's count, as `reduce` does."""
    state = _sequential(_start(), [*_round(1, "add")[:1], ToolReturned("r1c0", "x", is_error=True)])
    assert state.failures
    _same(state, [*_round(2, "add"), *_answer()])


@pytest.mark.parametrize(
    "events",
    [
        [*_round(1, "gated")],  # executing a tool that needs approval
        [*_round(1, "add"), ToolReturned("r1c0", "again")],  # a second result
        [*_round(1, "add"), OutputAccepted("early")],
    ],
)
def test_a_refused_event_raises_as_reduce_does(events: list[Event]) -> None:
    """An event the state refuses raises the error `reduce` raises, with the same state."""
    state = _start()
    with pytest.raises(InvalidEventError) as want:
        _sequential(state, events)
    with pytest.raises(InvalidEventError) as got:
        reduce_all(state, events)
    assert str(got.value) == str(want.value)
    assert got.value.state == want.value.state


def test_a_repeated_call_id_raises_as_reduce_does() -> None:
    """Two calls with one id in a response are refused, as `reduce` refuses them."""
    state = _start()
    calls = [call("same", "add"), call("same", "add")]
    response = ModelResponse(Message.assistant("", calls), NO_USAGE, "tool_calls")
    events: list[Event] = [
        ModelResponded(response, ("execute", "execute")),
        ToolReturned("same", "a"),
        ToolReturned("same", "b"),
    ]
    with pytest.raises(InvalidEventError, match="repeats a tool call id"):
        reduce_all(state, events)
