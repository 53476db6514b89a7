"""A step of many tool calls: each result costs the same, whatever the number of calls."""

from __future__ import annotations

import pytest
from core_helpers import call, responded, spec, start

from toolfold import InvalidEventError
from toolfold.runtime import ToolReturned, reduce


class _CountedId(str):
    """A call id that counts how often it is compared."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountedId.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def test_each_result_of_a_step_of_many_calls_is_found_without_a_scan() -> None:
    """Reducing k results of one step compares O(k) call ids, not k per result."""
    k = 300
    ids = [_CountedId(f"c{i}") for i in range(k)]
    state = reduce(start(spec("t")), responded(*[call(i, "t") for i in ids]))
    assert state.phase == "running_tools"
    _CountedId.compared = 0
    for i in ids:
        state = reduce(state, ToolReturned(i, f"result of {i}"))
    assert state.phase == "awaiting_model"
    assert [r.content for r in state.messages[-1].tool_results] == [
        f"result of c{i}" for i in range(k)
    ]
    assert _CountedId.compared <= 4 * k  # (a scan per result: about k * k / 2 = 45,000)


class _HashedId(str):
    """A call id that counts how often it is hashed (an index of call ids hashes each)."""

    hashed = 0

    def __hash__(self) -> int:
        _HashedId.hashed += 1
        return str.__hash__(self)

    __eq__ = str.__eq__


def test_results_of_two_steps_of_many_calls_reduced_in_turns_index_each_step_once() -> None:
    """Results of two runs' steps reduced alternately find calls through one index per step,
    not one rebuilt at each result."""
    k = 100
    states = []
    for run in ("a", "b"):
        ids = [_HashedId(f"c{i}") for i in range(k)]
        states.append(reduce(start(spec("t"), run_id=run), responded(*[call(i, "t") for i in ids])))
    _HashedId.hashed = 0
    for i in range(k):
        for n, state in enumerate(states):
            states[n] = reduce(state, ToolReturned(f"c{i}", f"{n}:{i}"))
    assert [s.phase for s in states] == ["awaiting_model", "awaiting_model"]
    assert [r.content for r in states[1].messages[-1].tool_results] == [f"1:{i}" for i in range(k)]
    assert _HashedId.hashed <= 8 * k  # (an index rebuilt per result: 2 * k * k = 20,000)


def test_results_of_many_calls_in_any_order_settle_as_one_by_one() -> None:
    """Results out of call order, and a result for an unknown id, are handled as before."""
    k = 40
    ids = [f"c{i}" for i in range(k)]
    state = reduce(start(spec("t")), responded(*[call(i, "t") for i in ids]))
    for i in reversed(ids[1:]):
        state = reduce(state, ToolReturned(i, i))
        assert state.phase == "running_tools"
    with pytest.raises(InvalidEventError, match="no tool call 'nope'"):
        reduce(state, ToolReturned("nope", "x"))
    state = reduce(state, ToolReturned("c0", "c0"))
    assert state.phase == "awaiting_model"
    assert [r.call_id for r in state.messages[-1].tool_results] == ids
