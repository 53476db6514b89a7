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
) -> toolfold.Agent:
    """An agent that squares the number it is given with its `square` tool, then says so.

    ``log``: a file each execution of the tool appends its number to. ``gate``:
    inputs from ``gate_from`` on wait in the tool until that file exists.
    ``fail_on``: the input whose tool raises (``on_tool_error="raise"``).
    ``crash_on``: the input whose tool kills its process (the Ray actor).
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

    return toolfold.Agent(FunctionModel(reply), tools=[square], on_tool_error="raise")


def expected(n: int) -> str:
    """The answer `make_agent`'s agent gives for input ``n``."""
    return f"{n * n} is the square"


default_agent = make_agent()
