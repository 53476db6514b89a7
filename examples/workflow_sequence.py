"""A Sequence: research, then write, then publish, with an approval in the middle of it.

Each step's output is the next step's input; every output is also stored
under its step's name, and later prompts read it with ``{name}``. The
publisher's tool needs an approval: the whole workflow suspends, travels as
JSON, and resumes where it stopped, running nothing twice.

    python examples/workflow_sequence.py
"""

from __future__ import annotations

from toolfold import Agent, ModelRequest, RunState, Sequence, Task, ToolCallPart, tool
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


@tool(requires_approval=True)
def publish(text: str) -> str:
    """Publish a text on the website.

    Args:
        text: The text.
    """
    return "published"


def researcher_model(request: ModelRequest) -> str:
    return "Tea came to Europe in the 17th century."


def writer_model(request: ModelRequest) -> str:
    prompt = request.messages[-1].text
    return f"A short history: {prompt.split('Notes: ')[1]}"


def publisher_model(request: ModelRequest) -> str | ToolCallPart:
    last = request.messages[-1]
    if last.role == "tool":
        return f"Done: {last.tool_results[0].content}."
    return call("publish", {"text": last.text})


researcher = Agent(FunctionModel(researcher_model), name="researcher")
writer = Agent(FunctionModel(writer_model), name="writer")
publisher = Agent(FunctionModel(publisher_model), name="publisher", tools=[publish])

pipeline = Sequence(
    researcher,
    Task(writer, prompt="Topic: {input}. Notes: {researcher}"),
    publisher,
)


def main() -> None:
    response = pipeline.run("tea")
    print("finish:", response.finish_reason)
    print("waiting:", [c.name for c in response.pending_approvals])

    stored = response.state.to_json()  # e.g. in a database, until someone approves
    state = RunState.from_json(stored)
    done = pipeline.resume(state, approvals={c.id: True for c in state.pending_approvals})
    print("output:", done.output)
    for name, value in done.outputs.items():
        print(f"  {name}: {value}")
    assert done.output == "Done: published."


if __name__ == "__main__":
    main()
