"""Manual tools: calls the caller answers, mixed with tools that run by themselves.

A `Tool` without a function is only a schema: when the model calls it, the run
stops with ``finish_reason == "tool_calls"`` and ``response.tool_calls`` lists
the calls. Tools with a function in the same step have already run. Pass the
answers to ``resume(tool_results=...)`` and the loop goes on. (With
``auto_execute_tools=False`` every call comes back this way.)

``max_steps`` bounds the model calls of a turn: the run stops with
``finish_reason == "max_steps"`` rather than loop forever.

    python examples/manual_tools.py                       # a scripted model
    MODEL=local:smollm2 python examples/manual_tools.py   # a real local model
"""

from __future__ import annotations

import os
import sys

from toolfold import ModelConfigError, Tool, generate_text, resume, tool
from toolfold.testing import ScriptedModel

call = ScriptedModel.call


@tool
def search_flights(origin: str, destination: str) -> list[dict[str, object]]:
    """Find flights between two airports.

    Args:
        origin: IATA code of the departure airport.
        destination: IATA code of the arrival airport.
    """
    return [{"flight": "TF101", "price": 129}, {"flight": "TF205", "price": 99}]


# No function: a human (or the UI, or another service) answers these calls.
confirm_with_user = Tool(
    "confirm_with_user",
    "Ask the traveller a yes/no question and wait for the answer.",
    {
        "type": "object",
        "properties": {"question": {"type": "string", "description": "The question."}},
        "required": ["question"],
        "additionalProperties": False,
    },
)

scripted = ScriptedModel(
    [
        [
            call("search_flights", {"origin": "CDG", "destination": "LIS"}),
            call("confirm_with_user", {"question": "Is a 99 EUR flight at 6am fine?"}),
        ],
        "Booked TF205 for 99 EUR, as you agreed.",
    ]
)
tools = [search_flights, confirm_with_user]
model = scripted if os.environ.get("MODEL", "test") == "test" else os.environ["MODEL"]


def main() -> None:
    first = generate_text(
        model, "Find me a cheap flight from Paris to Lisbon.", tools=tools, max_steps=4
    )
    print(f"finish reason: {first.finish_reason}")
    for result in first.steps[0].tool_results:  # the automatic tools of the step ran
        print(f"already ran:   {result.tool_name} -> {result.content}")
    if not first.tool_calls:
        print(f"answer: {first.text}")  # the model needed no answer from us
        return
    answers = {}
    for pending in first.tool_calls:
        print(f"the model asks: {pending.name}({pending.arguments_text})")
        answers[pending.id] = "yes"  # a real app would ask the user here
    done = resume(first.state, model=model, tools=tools, tool_results=answers)
    print(f"answer: {done.text}")
    print(f"results the model saw: {[r.content for r in done.steps[0].tool_results]}")


if __name__ == "__main__":
    try:
        main()
    except ModelConfigError as error:  # e.g. MODEL=openai:gpt-4o-mini without OPENAI_API_KEY
        sys.exit(str(error))  # the message alone (exit status 1), not a traceback
