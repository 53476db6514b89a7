"""A workflow used as an agent's tool: its run nests in the caller's state like an agent's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import attrs
import pytest

from toolfold import Agent, Parallel, Sequence, SubRunEvent, TextDelta, UsageError, tool
from toolfold.files import from_dict
from toolfold.runtime import RunState, replay
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call
search = str(Path(__file__).resolve().parents[1] / "files")  # files_helpers.py


def echo(name: str) -> Agent:
    """An agent that answers ``name(<its prompt>)``."""
    return Agent(FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name)


def exact(state: RunState) -> None:
    """The state replays from its log and survives JSON exactly."""
    assert replay(state.log) == state
    assert RunState.from_json(state.to_json()) == state


def lead_of(workflow_tool: Any) -> Agent:
    """An agent that calls the tool once with "tea", then reports what it said."""

    def reply(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return f"lead got {last.tool_results[0].content}"
        return call(workflow_tool.name, {"input": "tea"})

    return Agent(FunctionModel(reply), name="lead", tools=[workflow_tool])


def test_the_caller_sees_the_workflow_output_and_its_run_nests() -> None:
    """The workflow's output is the tool result; its state is the call's sub-run."""
    pipeline = Sequence(echo("research"), echo("write"), name="pipeline")
    lead = lead_of(pipeline.as_tool(description="Researches and writes."))
    response = lead.run("go", run_id="top")
    assert response.text == "lead got write(research(tea))"
    ((call_id, child),) = response.state.sub_runs.items()
    assert child.run_id == f"top/{call_id}"
    assert child.output == "write(research(tea))"
    assert child.sub_runs["research"].run_id == f"top/{call_id}/research"
    assert response.usage.requests == 2 + 2  # the lead's two calls and one per step
    exact(response.state)


def test_a_parallel_workflow_answers_json() -> None:
    """A workflow whose output is not text reaches the caller as JSON."""
    views = Parallel(echo("pros"), echo("cons"), name="views")
    response = asyncio.run(lead_of(views.as_tool()).arun("go"))
    assert response.text == 'lead got {"pros": "pros(tea)", "cons": "cons(tea)"}'


def test_an_approval_inside_the_workflow_suspends_the_caller_and_resumes_by_id() -> None:
    """An approval two levels down suspends the lead; resume from JSON runs nothing twice."""
    ran: list[str] = []

    @tool(requires_approval=True)
    def publish(text: str) -> str:
        """Publish a text.

        Args:
            text: The text.
        """
        ran.append(text)
        return "published"

    def publisher_model(request: Any) -> Any:
        last = request.messages[-1]
        if last.role == "tool":
            return f"Done: {last.tool_results[0].content}."
        return call("publish", {"text": last.text})

    counted: list[str] = []
    draft = Agent(
        FunctionModel(lambda r: counted.append("draft") or f"draft({r.messages[-1].text})"),
        name="draft",
    )
    publisher = Agent(FunctionModel(publisher_model), name="publisher", tools=[publish])
    flow = Sequence(draft, publisher, name="newsroom")
    lead = lead_of(flow.as_tool())
    waiting = lead.run("go")
    assert waiting.finish_reason == "approval_required"
    assert [c.name for c in waiting.pending_approvals] == ["publish"]
    state = RunState.from_json(waiting.state.to_json())
    done = lead.resume(state, approvals={c.id: True for c in state.pending_approvals})
    assert done.text == "lead got Done: published."
    assert ran == ["draft(tea)"]
    assert counted == ["draft"]
    exact(done.state)


def test_streaming_tags_the_steps_events_with_their_path() -> None:
    """A streaming caller gets each step's events under (tool, call id, step, step id)."""
    flow = Sequence(echo("write"), name="pipeline")
    lead = lead_of(flow.as_tool())
    paths = {
        event.path
        for event in lead.stream("go")
        if isinstance(event, SubRunEvent) and isinstance(event.event, TextDelta)
    }
    ((path,),) = [paths]
    assert path[0] == "pipeline"
    assert path[2:] == ("write", "write")


@attrs.frozen
class Topic:
    """What to write about."""

    subject: str


def about(topic: Topic) -> str:
    """A function step taking a Topic."""
    return f"about {topic.subject}"


def test_a_typed_input_reaches_the_workflow_as_its_value() -> None:
    """input_type=Topic gives the tool Topic's schema; the workflow's first step gets a Topic."""
    flow = Sequence(about, name="writeup")
    made = flow.as_tool(input_type=Topic)
    assert made.parameters["properties"]["input"]["properties"] == {"subject": {"type": "string"}}
    lead = Agent(
        ScriptedModel([call("writeup", {"input": {"subject": "tea"}}), "ok"]), tools=[made]
    )
    response = lead.run("go")
    assert response.messages[-2].tool_results[0].content == "about tea"


def test_an_input_type_the_workflow_does_not_take_is_refused() -> None:
    """as_tool(input_type=...) that the first step cannot take is a UsageError naming both."""
    with pytest.raises(UsageError, match=r"input_type=int.*takes Topic"):
        Sequence(about, name="writeup").as_tool(input_type=int)


def test_a_workflow_tool_is_drawn_and_written_to_files() -> None:
    """to_mermaid draws the workflow under the agent; to_dict writes {workflow = ...}."""
    document = {
        "entry": "lead",
        "agents": {
            "lead": {
                "model": "files_helpers:model",
                "tools": [{"workflow": "pipeline", "description": "Writes."}],
            },
            "writer": {"model": "files_helpers:model"},
        },
        "workflows": {"pipeline": {"kind": "sequence", "steps": ["writer"]}},
    }
    lead = from_dict(document, search=search).agent()
    assert lead.to_dict() == document
    assert '    lead -->|"as tool pipeline"| pipeline\n' in lead.to_mermaid()


def test_a_tool_entry_naming_both_or_neither_is_a_file_problem() -> None:
    """{agent = ..., workflow = ...} and an empty table are each reported."""
    from toolfold import AgentFileError

    document = {
        "agents": {
            "lead": {
                "model": "files_helpers:model",
                "tools": [{"agent": "lead", "workflow": "pipeline"}, {}, {"workflow": "lead"}],
            }
        },
        "workflows": {"pipeline": {"kind": "sequence", "steps": ["lead"]}},
    }
    with pytest.raises(AgentFileError) as info:
        from_dict(document, search=search)
    problems = "\n".join(info.value.problems)
    assert "agents.lead.tools[0]: give either agent = " in problems
    assert "agents.lead.tools[1]: give either agent = " in problems
    assert "agents.lead.tools[2].workflow: 'lead' is an agent" in problems
