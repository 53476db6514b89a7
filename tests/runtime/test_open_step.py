"""`open_step` / `OpenStep.close`: one fused step gives the states and log of reducing each event."""

from __future__ import annotations

from typing import Any

import pytest
from core_helpers import answer, call, responded, spec, start

from toolfold import InvalidEventError
from toolfold.runtime import RunState, ToolReturned, replay
from toolfold.runtime.core._events import Event, ToolSuspended
from toolfold.runtime.core._reducer import OpenStep, open_step, reduce
from toolfold.runtime.core._stop import token_budget, tool_called


def _sequential(state: RunState, events: list[Event]) -> RunState:
    for event in events:
        state = reduce(state, event)
    return state


def _fused(state: RunState, first: Any, rest: list[Event]) -> RunState:
    opened = open_step(state, first)
    if isinstance(opened, OpenStep):
        assert opened.state == reduce(state, first)
        return opened.close(rest)
    assert not rest
    return opened


def _same(state: RunState, first: Any, rest: list[Event]) -> RunState:
    want = _sequential(state, [first, *rest])
    got = _fused(state, first, rest)
    assert got == want
    assert got.events == want.events
    assert replay(got.events) == got
    assert RunState.from_json(got.to_json()) == got
    return got


CASES: dict[str, tuple[dict[str, Any], list[Any]]] = {
    "one call, then more steps": (
        {},
        [
            responded(call("c1", "add", {"a": 1})),
            ToolReturned("c1", "2"),
        ],
    ),
    "two calls, results out of order": (
        {},
        [
            responded(call("c1", "add"), call("c2", "add")),
            ToolReturned("c2", "b"),
            ToolReturned("c1", "a", is_error=True),
        ],
    ),
    "an unknown tool beside a known one": (
        {},
        [responded(call("c1", "nope"), call("c2", "add")), ToolReturned("c2", "ok")],
    ),
    "the step limit ends the run": (
        {"max_steps": 1},
        [responded(call("c1", "add")), ToolReturned("c1", "ok")],
    ),
    "a stop condition reads the state at the boundary": (
        {"stop_when": (tool_called("add"), token_budget(1))},
        [responded(call("c1", "add")), ToolReturned("c1", "ok")],
    ),
    "retries exceeded fail the run": (
        {"tools_retries": 0},
        [responded(call("c1", "add")), ToolReturned("c1", "boom", is_error=True)],
    ),
    "an approval leaves the step waiting": (
        {"approve": True},
        [responded(call("c1", "add"), call("c2", "gated")), ToolReturned("c1", "ok")],
    ),
    "a final answer": ({}, [answer("done")]),
    "three calls at once, a stop condition at the boundary": (
        {"stop_when": (tool_called("add"),)},
        [
            responded(call("c1", "add"), call("c2", "add"), call("c3", "add")),
            ToolReturned("c3", "c"),
            ToolReturned("c1", "a", is_error=True),
            ToolReturned("c2", "b"),
        ],
    ),
    "two of three results: the step still runs": (
        {},
        [
            responded(call("c1", "add"), call("c2", "add"), call("c3", "add")),
            ToolReturned("c2", "b"),
            ToolReturned("c1", "a"),
        ],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_step_equals_reducing_each_event(case: str) -> None:
    """An opened and closed step gives the state and log that reducing each event gives."""
    options, events = CASES[case]
    tools = [spec("add", max_retries=options.pop("tools_retries", 3))]
    if options.pop("approve", False):
        tools.append(spec("gated", approval="always"))
    state = start(*tools, **options)
    _same(state, events[0], events[1:])


def test_fused_steps_chain_like_reducing() -> None:
    """Step after step, the fused states stay equal to the reduced ones."""
    state = start(spec("add"), max_steps=5)
    for n in range(4):
        state = _same(state, responded(call(f"c{n}", "add")), [ToolReturned(f"c{n}", str(n))])
    assert state.step == 4
    assert state.phase == "awaiting_model"


@pytest.mark.parametrize(
    "results",
    [
        [ToolReturned("c1", "a"), ToolReturned("c1", "again")],
        [ToolReturned("zz", "a")],
        [ToolReturned("c1", 3)],  # type: ignore[arg-type]
    ],
)
@pytest.mark.parametrize("calls", [1, 2])
def test_a_refused_result_raises_as_reduce_does(results: list[Event], calls: int) -> None:
    """A result the step refuses raises the error `reduce` raises, with the same state."""
    state = start(spec("add"))
    first = responded(*[call(f"c{n}", "add") for n in range(1, calls + 1)])
    with pytest.raises(InvalidEventError) as want:
        _sequential(state, [first, *results])
    opened = open_step(state, first)
    assert isinstance(opened, OpenStep)
    with pytest.raises(InvalidEventError) as got:
        opened.close(results)
    assert str(got.value) == str(want.value)
    assert got.value.state == want.value.state


def test_other_events_are_reduced_one_by_one() -> None:
    """A suspended call (not a plain result) still gives what reducing each event gives."""
    state = start(spec("add"))
    child = start(spec("inner", approval="always"))
    child = reduce(child, responded(call("i1", "inner")))
    _same(state, responded(call("c1", "add")), [ToolSuspended("c1", child)])
    _same(
        state,
        responded(call("c1", "add"), call("c2", "add")),
        [ToolReturned("c2", "b"), ToolSuspended("c1", child)],
    )


def test_a_refused_response_raises_as_reduce_does() -> None:
    """`open_step` refuses what `reduce` refuses (a repeated call id)."""
    state = start(spec("add"))
    event = responded(call("c1", "add"), call("c1", "add"))
    with pytest.raises(InvalidEventError, match="repeats a tool call id"):
        open_step(state, event)
