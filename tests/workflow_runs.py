"""Comparing workflow runs recorded in either form of events (shared by the runtime and Temporal tests)."""

from __future__ import annotations

from typing import Any

from toolfold.runtime import RunState


def reached(state: RunState) -> Any:
    """What a workflow's run reached, whichever events recorded it.

    A run driven lean records `StepEnded` events, one driven by the agent loop
    (streamed, observed) a planner's decisions and tool results: the two reach
    the same outputs, errors, usage and sub-runs (compared the same way, any
    depth), but not the same log.
    """
    from toolfold.runtime._planner import read_plan

    if not _is_workflow(state):  # an agent's run: the very same state (durations are not compared)
        return state
    attempts = [(a.call_id, a.name, a.ok, a.value) for a in read_plan(state.messages).attempts]
    children = {k: reached(v) for k, v in state.sub_runs.items()}
    error = (state.error.kind, state.error.message) if state.error else None
    return (state.run_id, state.phase, state.output, error, attempts, state.tree_usage, children)


def _is_workflow(state: RunState) -> bool:
    from toolfold.runtime._planner import PLANNER_MODEL

    return state.config.model == PLANNER_MODEL or any(e.kind == "step_ended" for e in state.log)
