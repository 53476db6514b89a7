"""`with_dropped_sub_runs`: an on_tool_error="raise" error's state counts the round's sub-runs."""

from __future__ import annotations

from core_helpers import answer, call, responded, spec, start

from toolfold.runtime import ToolReturned, Usage, replay
from toolfold.runtime.core._events import ToolSuspended
from toolfold.runtime.core._reducer import reduce
from toolfold.runtime.drive._failures import with_dropped_sub_runs


def test_a_kept_sub_run_that_went_on_counts_only_what_it_added() -> None:
    """A call holding a kept sub-run (ToolSuspended) that went on in the failed round adds
    only the sub-run's new usage; a fresh sub-run beside it adds all of its own."""
    outer = reduce(start(spec("inner")), responded(call("c1", "inner"), call("c2", "inner")))
    kept = reduce(start(spec("t")), responded(call("i1", "t"), usage=Usage(100, 1, requests=1)))
    outer = reduce(outer, ToolSuspended("c1", kept))
    assert outer.tree_usage == Usage(110, 6, requests=2)
    went_on = reduce(kept, ToolReturned("i1", "x"))
    went_on = reduce(went_on, answer(usage=Usage(1000, 1, requests=1)))
    fresh = reduce(start(), answer(usage=Usage(10000, 1, requests=1)))

    state = with_dropped_sub_runs(outer, [("c1", went_on), ("c2", fresh)])
    assert state.tree_usage == Usage(11110, 8, requests=4)
    assert state.usage == outer.usage
    assert state.calls == outer.calls  # the calls run again, c1 from its kept sub-run
    assert [e.kind for e in state.events][-1] == "attempt_dropped"
    assert replay(state.events) == state


def test_a_round_without_sub_runs_leaves_the_state_as_it_was() -> None:
    """Calls that made no sub-run add no AttemptDropped: the state is the one given."""
    outer = reduce(start(spec("t")), responded(call("c1", "t")))
    assert with_dropped_sub_runs(outer, [("c1", None)]) is outer
