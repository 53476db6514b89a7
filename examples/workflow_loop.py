"""A Loop: revise a draft until its structured output says it is done.

Each iteration gets the previous output as its input. ``until`` is a
predicate on the output, or the name of a field of a structured output
(``"done"``); ``max_iterations`` bounds it. A flaky step can be retried.

    python examples/workflow_loop.py
"""

from __future__ import annotations

import json

import attrs

from toolfold import Agent, Loop, ModelRequest, Task
from toolfold.testing import FunctionModel


@attrs.frozen
class Draft:
    """A draft and whether it is good enough."""

    text: str
    done: bool


def revise(request: ModelRequest) -> str:
    prompt = request.messages[-1].text
    text = json.loads(prompt)["text"] if prompt.startswith("{") else prompt
    better = text + "!"
    return json.dumps({"text": better, "done": better.count("!") >= 3})


reviser = Agent(FunctionModel(revise), name="reviser", output_type=Draft)
polish = Loop(Task(reviser, on_error="retry", retries=2), until="done", max_iterations=5)


def main() -> None:
    response = polish.run("Tea is good")
    print("output:", response.output)
    print("iterations:", len(response.state.sub_runs))
    assert response.output == Draft("Tea is good!!!", True)


if __name__ == "__main__":
    main()
