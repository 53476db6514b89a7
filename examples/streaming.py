"""Streaming: text as it is generated, tool calls and results as they happen.

python examples/streaming.py
MODEL=local:smollm2 python examples/streaming.py
"""

from __future__ import annotations

import os
import sys

from toolfold import (
    Agent,
    ModelConfigError,
    RunEndEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
    tool,
)
from toolfold.testing import ScriptedModel


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city name, e.g. "Oslo".
    """
    return f"-3 degrees Celsius and snowing in {city}"


SCRIPTED = ScriptedModel(
    [[ScriptedModel.call("get_weather", {"city": "Oslo"})], "It is -3°C and snowing."]
)


def main() -> None:
    # MODEL=local:smollm2 (or any provider) for a real model; by default a scripted one
    model = SCRIPTED if os.environ.get("MODEL", "test") == "test" else os.environ["MODEL"]
    agent = Agent(model, instructions="Use the tools.", tools=[get_weather])
    for event in agent.stream("What is the weather in Oslo?"):
        if isinstance(event, ToolCallEvent):
            print(f"[call]   {event.call.name}({event.call.arguments_text})")
        elif isinstance(event, ToolResultEvent):
            print(f"[result] {event.result.content}")
        elif isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
        elif isinstance(event, RunEndEvent):
            usage = event.response.usage
            print(f"\n[done]   {usage.total_tokens} tokens in {usage.requests} requests")


if __name__ == "__main__":
    try:
        main()
    except ModelConfigError as error:  # e.g. MODEL=openai:gpt-4o-mini without OPENAI_API_KEY
        sys.exit(str(error))  # the message alone (exit status 1), not a traceback
