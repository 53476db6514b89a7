"""Workflows suspend for an approval at any depth, resume from JSON elsewhere, and replay."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolfold import Agent, Loop, Parallel, Route, RunState, Sequence, SubRunEvent, UsageError
from toolfold.runtime import replay
from toolfold.testing import FunctionModel

TREE_MODULE = textwrap.dedent(
    '''
    """A sequence holding a parallel holding an agent that calls an agent with an approval."""
    from toolfold import Agent, Parallel, Sequence, tool
    from toolfold.testing import FunctionModel, ScriptedModel

    LOG = []

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        LOG.append("delete " + path)
        return "deleted " + path

    def answering(name):
        def reply(request):
            LOG.append(name)
            return name + "(" + request.messages[-1].text + ")"
        return FunctionModel(reply)

    def delegating(name, tool_name, arguments):
        def reply(request):
            LOG.append(name)
            last = request.messages[-1]
            if last.role == "tool":
                return name + ": " + last.tool_results[0].content
            return ScriptedModel.call(tool_name, arguments)
        return FunctionModel(reply)

    def make_workflow():
        files = Agent(delegating("files", "delete", {"path": "old.log"}), name="files",
                      tools=[delete])
        lead = Agent(delegating("lead", "files", {"input": "clean"}), name="lead",
                     tools=[files.as_tool()])
        inner = Parallel(Agent(answering("side"), name="side"), lead, name="inner")
        return Sequence(Agent(answering("first"), name="first"), inner,
                        Agent(answering("last"), name="last"))
    '''
)

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from workflow_tree import LOG, make_workflow
    from toolfold.runtime import RunState

    payload = json.loads(sys.stdin.read())
    state = RunState.from_json(payload["state"])
    response = make_workflow().resume(state, approvals={payload["call_id"]: True})
    print(json.dumps({"output": response.output, "log": LOG, "reason": response.finish_reason,
                      "requests": response.usage.requests, "state": response.state.to_json()}))
    """
)


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Any]:
    (tmp_path / "workflow_tree.py").write_text(TREE_MODULE, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    import workflow_tree  # type: ignore[import-not-found]

    yield workflow_tree
    sys.path.remove(str(tmp_path))
    sys.modules.pop("workflow_tree", None)


def test_approval_deep_in_a_workflow_suspends_it(tree: Any) -> None:
    """An approval asked inside an agent-as-tool inside a parallel inside a sequence suspends the top."""
    response = tree.make_workflow().run("disk")
    assert response.finish_reason == "approval_required"
    assert [c.name for c in response.pending_approvals] == ["delete"]
    assert sorted(tree.LOG) == ["files", "first", "lead", "side"]
    assert response.output is None
    assert response.text == ""
    assert RunState.from_json(response.state.to_json()) == response.state
    assert replay(response.state.log) == response.state


def test_deep_approval_resumed_from_json_in_another_process(tree: Any) -> None:
    """Another process approves by the bottom call's id; nothing that ran runs again."""
    response = tree.make_workflow().run("disk")
    call_id = response.pending_approvals[0].id
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(Path(tree.__file__).parent)],
        input=json.dumps({"state": response.state.to_json(), "call_id": call_id}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["log"] == ["delete old.log", "files", "lead", "last"]
    assert out["reason"] == "stop"
    assert out["output"] == (
        'last({"side": "side(first(disk))", "lead": "lead: files: deleted old.log"})'
    )
    assert out["requests"] == 7  # first, side, lead x2, files x2, last
    final = RunState.from_json(out["state"])
    assert replay(final.log) == final
    inner = final.sub_runs["inner"]
    assert inner.sub_runs["lead"].sub_runs["call_1_0"].phase == "finished"


def test_a_workflow_whose_steps_changed_is_refused_before_anything_runs(tree: Any) -> None:
    """A step added or moved, at the top or in a nested workflow, is refused as a changed agent
    is: the run keeps the steps it started with, and the resume runs nothing (an added step's
    call used to be an unknown tool's error, and the run ended 'ok')."""
    workflow = tree.make_workflow()
    suspended = workflow.run("disk")
    approvals = {c.id: True for c in suspended.pending_approvals}
    text = suspended.state.to_json()
    first, inner, last = (task.target for task in workflow.tasks)
    extra = Agent(tree.answering("extra"), name="extra")
    side, lead = (task.target for task in inner.tasks)
    changed = [
        (
            Sequence(first, inner, last, extra, name=workflow.name),
            "the steps of the resuming Sequence 'sequence' (first, inner, last, extra) differ from "
            "the run's (first, inner, last)",
        ),
        (
            Sequence(first, last, inner, name=workflow.name),
            "the steps of the resuming Sequence 'sequence' (first, last, inner) differ",
        ),
        (
            Sequence(first, Parallel(side, lead, extra, name="inner"), last, name=workflow.name),
            "cannot resume the sub-run of call 'inner' (tool 'inner'), so nothing was run: the "
            "steps of the resuming Parallel 'inner' (side, lead, extra) differ from the run's "
            "(side, lead)",
        ),
    ]
    tree.LOG.clear()
    for other, message in changed:
        with pytest.raises(UsageError, match=re.escape(message)):
            other.resume(RunState.from_json(text), approvals=approvals)
    assert tree.LOG == []
    done = workflow.resume(RunState.from_json(text), approvals=approvals)
    assert (done.finish_reason, done.errors) == ("stop", {})
    assert tree.LOG == ["delete old.log", "files", "lead", "last"]


def test_deep_approval_resumed_streaming_tags_events_with_their_path(tree: Any) -> None:
    """Resuming with a stream shows the bottom agent's events under its full path."""
    workflow = tree.make_workflow()
    suspended = workflow.run("disk")
    call_id = suspended.pending_approvals[0].id
    stream = workflow.resume_stream(suspended.state, approvals={call_id: True})
    paths = {e.path for e in stream if isinstance(e, SubRunEvent)}
    assert ("inner", "inner", "lead", "lead", "files", "call_1_0") in paths
    assert ("last", "last") in paths
    assert stream.response.output.startswith("last(")


# --- property: random trees replay and round-trip ------------------------------------

Shape = Any  # "leaf" | ("seq" | "par" | "route", [Shape]) | ("loop", Shape, int)

shapes = st.recursive(
    st.just("leaf"),
    lambda inner: st.one_of(
        st.tuples(
            st.sampled_from(["seq", "par", "route"]), st.lists(inner, min_size=1, max_size=3)
        ),
        st.tuples(st.just("loop"), inner, st.integers(1, 3)),
    ),
    max_leaves=6,
)


def build(shape: Shape, counter: list[int]) -> Any:
    """A workflow (or a leaf agent) of the given shape, each node named uniquely."""
    counter[0] += 1
    name = f"n{counter[0]}"
    if shape == "leaf":
        return Agent(FunctionModel(lambda r, n=name: f"{n}:{len(r.messages[-1].text)}"), name=name)
    kind = shape[0]
    if kind == "loop":
        return Loop(
            build(shape[1], counter),
            until=lambda out: len(str(out)) % 2 == 0,
            max_iterations=shape[2],
            name=name,
        )
    steps = [build(s, counter) for s in shape[1]]
    if kind == "seq":
        return Sequence(*steps, name=name)
    if kind == "par":
        return Parallel(*steps, name=name)
    labels = {f"l{i}": step for i, step in enumerate(steps)}
    count = len(steps)
    return Route(lambda x: f"l{len(str(x)) % count}", labels, name=name)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes, st.text(max_size=12))
def test_random_workflow_trees_replay_and_round_trip(shape: Shape, prompt: str) -> None:
    """Any tree of Sequence/Parallel/Route/Loop reaches a state its log replays to, and JSON keeps it exactly."""
    workflow = build(("seq", [shape]), [0])
    response = workflow.run(prompt)
    state = response.state
    assert state.phase == "finished"
    assert replay(state.log) == state
    loaded = RunState.from_json(state.to_json())
    assert loaded == state
    assert loaded.to_json() == state.to_json()
    for child in state.sub_runs.values():
        assert replay(child.log) == child
