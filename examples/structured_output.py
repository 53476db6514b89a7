"""Structured output: the final answer validated and turned into your type.

python examples/structured_output.py
MODEL=local:smollm2 python examples/structured_output.py
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from toolfold import Agent, ModelConfigError, tool
from toolfold.testing import ScriptedModel


@dataclass
class Forecast:
    """A forecast.

    Attributes:
        city: The city.
        celsius: The temperature in degrees Celsius.
    """

    city: str
    celsius: float


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city.

    Args:
        city: The city name, e.g. "Lima".
    """
    return f'{{"city": "{city}", "celsius": 24}}'


SCRIPTED = ScriptedModel(
    [
        [ScriptedModel.call("get_weather", {"city": "Lima"})],
        '{"city": "Lima", "celsius": 24}',
    ]
)


def main() -> None:
    # MODEL=local:smollm2 (or any provider) for a real model; by default a scripted one
    model = SCRIPTED if os.environ.get("MODEL", "test") == "test" else os.environ["MODEL"]
    agent = Agent(model, instructions="Use the tools.", tools=[get_weather], output_type=Forecast)
    response = agent.run("What is the weather in Lima?")
    forecast = response.output
    print(f"output: {forecast!r}")
    print(f"type:   {type(forecast).__name__}")


if __name__ == "__main__":
    try:
        main()
    except ModelConfigError as error:  # e.g. MODEL=openai:gpt-4o-mini without OPENAI_API_KEY
        sys.exit(str(error))  # the message alone (exit status 1), not a traceback
