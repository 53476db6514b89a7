"""A tool declared with an explicit JSON Schema: its function gets the arguments as a dict.

No type hints to read: the schema is written by hand (or comes from elsewhere,
an OpenAPI file, a config), and the function receives one ``dict`` with string
keys, exactly as the model sent it after validation.

    python examples/json_schema_tool.py                       # a scripted model
    MODEL=local:smollm2 python examples/json_schema_tool.py   # a real local model
"""

from __future__ import annotations

import os
import sys
from typing import Any

from toolfold import Agent, ModelConfigError, Tool
from toolfold.testing import ScriptedModel

STOCK = {"apples": 12, "pears": 0, "plums": 31}


def check_stock(arguments: dict[str, Any]) -> str:
    """Receives ``{"item": ...}``: string keys, values already validated."""
    item = arguments["item"].lower()
    return f"{STOCK.get(item, 0)} {item} in stock"


stock_tool = Tool(
    "check_stock",
    "How many of an item the shop has in stock.",
    {
        "type": "object",
        "properties": {"item": {"type": "string", "description": "The item, e.g. apples."}},
        "required": ["item"],
        "additionalProperties": False,
    },
    check_stock,
)


SCRIPTED = ScriptedModel(
    [[ScriptedModel.call("check_stock", {"item": "plums"})], "We have 31 plums."]
)


def main() -> None:
    # MODEL=local:smollm2 (or any provider) for a real model; by default a scripted one
    model = SCRIPTED if os.environ.get("MODEL", "test") == "test" else os.environ["MODEL"]
    agent = Agent(model, instructions="Use the tools.", tools=[stock_tool])
    response = agent.run("How many plums do you have?")
    for step in response.steps:
        for call in step.tool_calls:
            print(f"call:   {call.name}({call.arguments_text})")
        for result in step.tool_results:
            print(f"result: {result.content}")
    print(f"answer: {response.text}")


if __name__ == "__main__":
    try:
        main()
    except ModelConfigError as error:  # e.g. MODEL=openai:gpt-4o-mini without OPENAI_API_KEY
        sys.exit(str(error))  # the message alone (exit status 1), not a traceback
