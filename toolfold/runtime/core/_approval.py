"""Whether a tool call executes, waits for an approval, or goes back to the caller.

The one place this is decided. The core derives a call's `Disposition` from
the stored `ToolSpec` and checks the dispositions a driver sends; a driver
asks the live tool's policy through the same `dispositions` (its
``live_says`` argument); a resume checks, with `unapproved`, that no call
cleared to run under an older tool skips the approval its live tool now
requires. A tool's policy is the bool or predicate ``(call, state) -> bool``
of ``requires_approval``; only drivers evaluate predicates (`policy_says`),
never `reduce`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolfold.runtime.core._config import RunConfig, ToolSpec
from toolfold.runtime.core._events import ApprovalGranted
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._state import CallState, Disposition, RunState

if TYPE_CHECKING:
    from toolfold.toolkit._tool import Tool


def dispositions(
    config: RunConfig,
    calls: Sequence[ToolCallPart],
    live_says: Callable[[ToolCallPart], bool] | None,
) -> list[Disposition | None]:
    """How each call is handled: ``return``, ``execute`` or ``approve`` (None: ask the live tool).

    A call goes back to the caller when tools are not run automatically or
    its tool has no function; it executes when the tool is unknown (the core
    answers it with an error); it waits for approval when the tool always
    requires one. Otherwise ``live_says(call)`` (the live tool's policy,
    asked by a driver) decides, even when the stored spec says "never": a
    run resumed with a tool that now requires approval must ask. Without
    ``live_says`` (the core alone), a "never" tool executes and a predicate
    tool's call gets None.
    """
    auto = config.auto_execute_tools
    out: list[Disposition | None] = []
    for call in calls:
        spec = config.tool(call.name)
        if not auto or (spec is not None and not spec.has_function):
            out.append("return")
        elif spec is None:
            out.append("execute")
        elif spec.approval == "always":
            out.append("approve")
        elif live_says is not None:
            out.append("approve" if live_says(call) else "execute")
        else:
            out.append("execute" if spec.approval == "never" else None)
    return out


def disposition_problem(spec: ToolSpec, disposition: Disposition) -> str:
    """Why the core refuses ``disposition`` for a call to ``spec`` ("" if it does not)."""
    if disposition == "return":
        return "" if not spec.has_function else "a tool with a function is not returned"
    if not spec.has_function:
        return f"a tool without a function cannot be {disposition!r}, only 'return'"
    if disposition == "execute" and spec.approval == "always":
        return "the tool requires approval and cannot execute without one"
    # "approve" is always allowed: asking is never less safe, and a tool resumed
    # with a stricter live policy than the stored one must be able to ask.
    return ""


def policy_says(
    tool: Tool[..., Any] | None, call: ToolCallPart, state: RunState, *, unknown: bool
) -> bool:
    """Whether the live ``tool`` requires an approval for ``call`` (``unknown``: no tool).

    A predicate that raises cannot vouch for the call: it requires approval.
    """
    if tool is None:
        return unknown
    policy = tool.requires_approval
    if not callable(policy):
        return bool(policy)
    try:
        return bool(policy(call, state))
    except Exception:
        return True


def unapproved(state: RunState, tools: Mapping[str, Tool[..., Any]]) -> list[CallState]:
    """Calls cleared to run without an approval that their live tools now require.

    A state saved under an older tool (no approval then) may hold calls
    already cleared to run; resuming with a tool that requires approval must
    not run them unasked. Calls approved in this step are fine.
    """
    if state.phase != "running_tools":
        return []
    granted = _granted_this_step(state)
    return [
        c
        for c in state.calls
        if c.status == "to_run"
        and c.call.id not in granted
        and policy_says(tools.get(c.call.name), c.call, state, unknown=False)
    ]


def _granted_this_step(state: RunState) -> set[str]:
    granted: set[str] = set()
    for event in reversed(state.log):
        if isinstance(event, ApprovalGranted):
            granted.add(event.call_id)
        elif event.kind == "model_responded":
            break
    return granted
