"""A Route: a triage agent answers a label, and only that branch runs.

The router is an agent whose ``output_type`` is a ``Literal`` of the labels
(checked against the branches when the workflow is built), or a plain
function of the input.

    python examples/workflow_route.py
"""

from __future__ import annotations

from typing import Literal

from toolfold import Agent, ModelRequest, Route
from toolfold.testing import FunctionModel


def classify(request: ModelRequest) -> str:
    text = request.messages[-1].text
    return '"billing"' if "invoice" in text else '"tech"'


triage = Agent(
    FunctionModel(classify),
    name="triage",
    instructions="Answer billing or tech.",
    output_type=Literal["billing", "tech"],
)
billing = Agent(FunctionModel(lambda r: "Your invoice is on its way."), name="billing")
tech = Agent(FunctionModel(lambda r: "Try turning it off and on."), name="tech")
desk = Route(triage, {"billing": billing, "tech": tech})

by_rule = Route(
    lambda text: "billing" if "€" in text else "tech", {"billing": billing, "tech": tech}
)


def main() -> None:
    for question in ("Where is my invoice?", "The app crashes."):
        response = desk.run(question)
        print(f"output: {question} -> {response.outputs['triage']}: {response.output}")
    print("output:", by_rule.run("I paid 20 € twice").output)


if __name__ == "__main__":
    main()
