"""Agents the Ray tests send to actors (importable by the tests, their driver and the actors)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import toolfold
from toolfold.runtime import ModelRequest
from toolfold.testing import FunctionModel, Reply


def make_agent(
    log: str | None = None,
    gate: str | None = None,
    gate_from: int = -1,
    fail_on: int = -1,
    crash_on: int = -1,
    ask_on: int = -1,
) -> toolfold.Agent:
    """An agent that squares the number it is given with its `square` tool, then says so.

    ``log``: a file each execution of the tool appends its number to. ``gate``:
    inputs from ``gate_from`` on wait in the tool until that file exists.
    ``fail_on``: the input whose tool raises (``on_tool_error="raise"``).
    ``crash_on``: the input whose tool kills its process (the Ray actor).
    ``ask_on``: the input whose tool call waits for an approval.
    """

    async def square(n: int) -> int:
        """Square a number.

        Args:
            n: The number.
        """
        if log is not None:
            with open(log, "a", encoding="utf-8") as file:
                file.write(f"{n}\n")
        while gate is not None and n >= gate_from and not Path(gate).exists():
            await asyncio.sleep(0.01)
        if n == crash_on:
            os._exit(1)
        if n == fail_on:
            raise ValueError(f"cannot square {n}")
        return n * n

    def reply(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "tool":
            result = last.tool_results[0]
            return f"{result.content} is the square"
        return FunctionModel.call("square", {"n": int(last.text)})

    tool = toolfold.tool(
        square, requires_approval=lambda call, state: call.arguments["n"] == ask_on
    )
    return toolfold.Agent(FunctionModel(reply), tools=[tool], on_tool_error="raise")


def expected(n: int) -> str:
    """The answer `make_agent`'s agent gives for input ``n``."""
    return f"{n * n} is the square"


default_agent = make_agent()


def paused_agent() -> toolfold.Agent:
    """`make_agent`'s agent whose model, after the tool round, ends its answer abnormally
    (a `ProviderFinishError` that reports the billed usage 40 in / 9 out)."""
    agent = make_agent()

    def reply(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "tool":
            raise toolfold.ProviderFinishError(
                "anthropic ended its answer with finish reason 'pause_turn'",
                provider="anthropic",
                status_code=200,
                finish_reason="pause_turn",
                usage=toolfold.Usage(40, 9, requests=1),
            )
        return FunctionModel.call("square", {"n": int(request.messages[-1].text)})

    return agent.evolve(model=FunctionModel(reply))


def echo(name: str) -> toolfold.Agent:
    """A test-model agent that answers ``name(<its prompt>)``."""
    return toolfold.Agent(
        FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name
    )


def make_workflow(
    log: str | None = None, gate: str | None = None, gate_from: int = -1, fail_on: int = -1
) -> toolfold.Workflow:
    """A Sequence of two test-model agents and a Parallel of two more, over `make_agent`'s tool.

    The first agent squares its input with the tool (``log``, ``gate`` and
    ``fail_on`` as in `make_agent`), the second shouts the answer, and the
    Parallel gives both views of it.
    """
    square = make_agent(log=log, gate=gate, gate_from=gate_from, fail_on=fail_on)
    return toolfold.Sequence(
        square.evolve(name="square"),
        echo("shout"),
        toolfold.Parallel(echo("pros"), echo("cons"), name="views"),
        name="squares",
    )


def workflow_expected(n: int) -> dict[str, str]:
    """The output `make_workflow`'s workflow gives for input ``n``."""
    shout = f"shout({expected(n)})"
    return {"pros": f"pros({shout})", "cons": f"cons({shout})"}


default_workflow = make_workflow()


def make_dict_workflow() -> toolfold.Workflow:
    """A function step that reads a dict input, then a test-model agent (for import paths)."""

    def number(data: dict[str, int]) -> str:
        return str(data["n"])

    return toolfold.Sequence(number, echo("shout"), name="numbers")
