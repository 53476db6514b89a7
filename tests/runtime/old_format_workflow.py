"""The workflow whose states `states/*_v1.json` hold, saved by toolfold before `StepEnded`.

`python tests/runtime/old_format_workflow.py DIR` writes them again with the
toolfold it imports (it made the stored ones with the code of main at
1aee4c2, whose workflow runs recorded every step as a planner's decision
and a tool result).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from toolfold import Agent, Loop, Parallel, Route, Sequence, Task, Workflow, tool
from toolfold.testing import FunctionModel, ScriptedModel


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    return "deleted " + path


def echo(name: str) -> Agent:
    """An agent that answers ``name(<its prompt>)``."""
    return Agent(FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name)


def gated(name: str) -> Agent:
    """An agent that calls `delete` (which needs approval), then answers with its result."""

    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return f"{name}: {last.tool_results[0].content}"
        return ScriptedModel.call("delete", {"path": "old.log"})

    return Agent(FunctionModel(reply), name=name, tools=[delete])


def pick(value: Any) -> str:
    """Route everything to ``b``."""
    return "b"


def long_enough(out: str) -> bool:
    """Stop the loop once the text is long."""
    return len(out) > 40


def workflow() -> Workflow:
    """Every kind: a sequence, a parallel, a route, a loop, a retried step, an approval inside."""
    return Sequence(
        echo("a"),
        Parallel(echo("b1"), echo("b2"), name="both"),
        Route(pick, {"b": echo("routed")}, name="pick"),
        Loop(echo("e"), until=long_enough, max_iterations=3, name="again"),
        Task(gated("g"), on_error="retry"),
        echo("z"),
        name="old",
    )


def write(directory: Path) -> None:
    """Write the suspended state (an approval inside step ``g``) and the finished one."""
    flow = workflow()
    waiting = flow.run("x", run_id="old")
    (directory / "workflow_suspended_v1.json").write_text(waiting.state.to_json())
    (call,) = waiting.pending_approvals
    done = flow.resume(waiting.state, approvals={call.id: True})
    (directory / "workflow_finished_v1.json").write_text(done.state.to_json())


if __name__ == "__main__":
    write(Path(sys.argv[1]))
