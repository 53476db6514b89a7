"""A workflow as an agent's tool, with a step that has a timeout.

``pipeline.as_tool()`` gives the desk agent a tool that runs the whole
workflow; its run nests in the desk's state. The fact-check step may take
at most 0.5 s: the slow source times out, the step is skipped
(``on_error="skip"``), and the writer goes on with what research found.

    python examples/workflow_as_tool.py
"""

from __future__ import annotations

import asyncio

from toolfold import Agent, ModelRequest, Sequence, Task
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


def research(text: str) -> str:
    return f"notes on {text}"


async def fact_check(notes: str) -> str:
    await asyncio.Event().wait()  # a source that never answers: only the timeout ends it
    return notes


def writer_model(request: ModelRequest) -> str:
    return f"An article from {request.messages[-1].text}."


pipeline = Sequence(
    research,
    Task(fact_check, timeout=0.5, on_error="skip"),
    Agent(FunctionModel(writer_model), name="writer"),
    name="pipeline",
)
desk = Agent(
    ScriptedModel([call("pipeline", {"input": "green tea"}), "The article is ready."]),
    name="desk",
    tools=[pipeline.as_tool(description="Researches a topic and writes an article.")],
)


def main() -> None:
    response = desk.run("Write about green tea.")
    (article,) = [r.content for m in response.messages for r in m.tool_results]
    run = response.state.sub_runs[response.steps[0].tool_calls[0].id]
    print("tool result:", article)
    errors = [r.content for m in run.messages for r in m.tool_results if r.is_error]
    print("the workflow's run:", run.run_id, "| skipped:", *errors)
    print("answer:", response.text)
    assert article == "An article from notes on green tea."
    assert errors == ["Error: tool 'fact_check' timed out after 0.5 s."]


if __name__ == "__main__":
    main()
