"""toolfold's own CPU in one run of the aiohttp row, without HTTP.

    .venv/bin/python bench/bench_row_offline.py

The aiohttp row of ``bench_http.py`` (100 concurrent 3-step runs of
``Agent.arun`` against raw aiohttp) times toolfold and the HTTP exchange
together, and its readings move by several points from one run to the next.
This script takes the HTTP away: the same run (the same tool, the same four
answers as the fake server gives, parsed once by the Chat Completions codec
ahead of time) against a model that hands those answers back, so what is
timed is what toolfold itself does in a run above the model call:

- ``core``: the pure core alone (``next_effect`` and ``reduce`` of each
  `ModelResponded` and `ToolReturned`, the tool called directly);
- ``agent``: the whole ``Agent.arun`` (the core, the driver, the tool's
  argument check and call through the executor, the `Response`).

Each is timed one run at a time and 100 runs at once (each model call then
yields to the event loop once, as a real exchange does), with the cyclic
collector off (collected before each round, outside the timing): client
CPU per run, least and median of the rounds. The row's target, 0.85x of raw
aiohttp, leaves toolfold about 15% of a run's CPU; the ratio of these
figures to ``bench_aiohttp_split.py``'s ``raw`` one says how much of it
they take.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_http

import toolfold
from toolfold import ModelRequest, ModelResponse
from toolfold.runtime import (
    CallModel,
    ModelResponded,
    RunConfig,
    RunState,
    ToolReturned,
    ToolSpec,
    initial_state,
    next_effect,
    reduce,
)


def _answer(step: int) -> dict[str, Any]:
    """The fake server's answer at ``step`` (0-2: a call of ``add``; 3: the text)."""
    if step < 3:
        function = {"name": "add", "arguments": json.dumps({"a": step, "b": 1})}
        call = {"id": f"call_{step}", "type": "function", "function": function}
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": "the sum is 4"}, "stop"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return {"id": "x", "object": "chat.completion", "choices": [choice], "usage": usage}


class Answers:
    """A model that hands back the run's four answers, parsed once ahead of time."""

    name = "fake-3"

    def __init__(self, yields: bool) -> None:
        codec = toolfold.model("openai:fake-3", base_url="http://127.0.0.1:9", api_key="sk-x")
        read = codec._read  # type: ignore[attr-defined]  # (the codec's parse, no HTTP)
        self._answers = [read(_answer(step)) for step in range(4)]
        self.yields = yields  # one pass through the event loop a call, as an exchange makes

    async def request(self, request: ModelRequest) -> ModelResponse:
        if self.yields:
            await asyncio.sleep(0)
        return self._answers[(len(request.messages) - 1) // 2]

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        return self._answers[(len(request.messages) - 1) // 2]


def runs(model: Answers) -> dict[str, Callable[[], Awaitable[object]]]:
    """The timed runs over ``model``, by name."""
    agent = toolfold.Agent(model, tools=[bench_http.add_inline], max_steps=4)
    config = RunConfig(tools=[ToolSpec.from_tool(bench_http.add_inline)], max_steps=4)
    add = bench_http.add_inline.function

    async def core() -> RunState:
        state = initial_state("add things", config, run_id="bench")
        while isinstance(effect := next_effect(state), CallModel):
            state = reduce(state, ModelResponded(await model.request(effect.request)))
            for call in state.calls_to_run:
                state = reduce(state, ToolReturned(call.id, str(add(**call.arguments))))
        return state

    async def whole() -> object:
        return await agent.arun("add things")

    return {"core": core, "agent": whole}


async def measure(run: Callable[[], Awaitable[object]], at_once: int, rounds: int) -> list[float]:
    """Client CPU per run (µs) of each of ``rounds`` rounds of 1,000 runs, ``at_once`` at a time."""
    per_round = []
    for _ in range(rounds):
        gc.collect()
        gc.disable()
        try:
            began = time.process_time()
            if at_once == 1:  # (awaited here: a task of its own would cost more than the run)
                for _ in range(1000):
                    await run()
            else:
                for _ in range(1000 // at_once):
                    await asyncio.gather(*[run() for _ in range(at_once)])
            per_round.append((time.process_time() - began) / 1000 * 1e6)
        finally:
            gc.enable()
    return per_round


async def main(rounds: int) -> None:
    for at_once in (1, 100):
        model = Answers(yields=at_once > 1)
        for name, run in runs(model).items():
            await run()  # (warm: imports, the agent's first-run setup)
            times = await measure(run, at_once, rounds)
            print(
                f"  {name:6} {at_once:3} at once   least {min(times):6.1f} us"
                f"   median {statistics.median(times):6.1f} us per run"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    print("toolfold's own CPU per 3-step run, no HTTP, collector off")
    asyncio.run(main(parser.parse_args().rounds))
