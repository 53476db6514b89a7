"""Reducer cost per event with 10 against 10,000 messages in the conversation.

Run: ``.venv/bin/python bench/bench_reducer.py``

Each sample folds a chain of tool steps (a model response with one call, then
its result, which commits a tool message) into a fresh state whose
conversation starts with 10 or 10,000 messages, and reports the best
per-event time over the samples. The target is a ratio <= 1.5: an event must
not copy the history. `next_effect` is timed too: `RunTools` is O(calls);
`CallModel` materializes the conversation as a tuple for the request (once per
state, cached), so it is O(messages) by nature and reported separately.
"""

from __future__ import annotations

import statistics
import time

from toolfold.runtime import (
    Message,
    ModelResponded,
    ModelResponse,
    RunConfig,
    RunState,
    ToolCallPart,
    ToolDefinition,
    ToolReturned,
    ToolSpec,
    Usage,
    initial_state,
    next_effect,
    reduce,
    replay,
)

CYCLES = 100  # tool steps per sample (2 events each)
SAMPLES = 40
CONFIG = RunConfig(tools=[ToolSpec(ToolDefinition("add"))], max_steps=10**9)


def _history(size: int) -> list[Message]:
    messages = [Message.system("You are a calculator.")]
    while len(messages) < size:
        messages.append(Message.user(f"question {len(messages)}"))
        messages.append(Message.assistant(f"answer {len(messages)}"))
    return messages[:size]


def _events(cycles: int) -> list[ModelResponded | ToolReturned]:
    events: list[ModelResponded | ToolReturned] = []
    for n in range(cycles):
        call = ToolCallPart(f"c{n}", "add", '{"a": 1, "b": 2}', {"a": 1, "b": 2})
        message = Message.assistant("", [call])
        events.append(
            ModelResponded(ModelResponse(message, Usage(10, 5, requests=1), "tool_calls"))
        )
        events.append(ToolReturned(f"c{n}", "3"))
    return events


def _reduce_per_event(size: int) -> float:
    events = _events(CYCLES)
    best = float("inf")
    for _ in range(SAMPLES):
        state = initial_state(_history(size), CONFIG, run_id="bench")
        start = time.perf_counter_ns()
        for event in events:
            state = reduce(state, event)
        elapsed = time.perf_counter_ns() - start
        best = min(best, elapsed / len(events))
    return best / 1000


def _loop_step(size: int) -> tuple[float, float, float]:
    """(µs per full tool step, µs per next_effect RunTools, µs per next_effect CallModel)."""
    events = _events(CYCLES)
    steps, run_tools, call_model = [], [], []
    for _ in range(SAMPLES // 4):
        state: RunState = initial_state(_history(size), CONFIG, run_id="bench")
        t_tools = t_model = 0
        start = time.perf_counter_ns()
        for index in range(0, len(events), 2):
            t0 = time.perf_counter_ns()
            next_effect(state)  # CallModel
            t1 = time.perf_counter_ns()
            state = reduce(state, events[index])
            t2 = time.perf_counter_ns()
            next_effect(state)  # RunTools
            t3 = time.perf_counter_ns()
            state = reduce(state, events[index + 1])
            t_model += t1 - t0
            t_tools += t3 - t2
        elapsed = time.perf_counter_ns() - start
        steps.append(elapsed / CYCLES / 1000)
        run_tools.append(t_tools / CYCLES / 1000)
        call_model.append(t_model / CYCLES / 1000)
    return min(steps), min(run_tools), min(call_model)


def _serialize(size: int) -> tuple[float, float, int]:
    state = initial_state(_history(size), CONFIG, run_id="bench")
    for event in _events(10):
        state = reduce(state, event)
    RunState.from_json(state.to_json())  # warm: cattrs builds its functions on first use
    dumps, loads = [], []
    for _ in range(5):
        start = time.perf_counter()
        text = state.to_json()
        dumped = time.perf_counter()
        RunState.from_json(text)
        loaded = time.perf_counter()
        dumps.append(dumped - start)
        loads.append(loaded - dumped)
    return min(dumps) * 1000, min(loads) * 1000, len(text)


def _replay(cycles: int) -> float:
    """ms to replay a log of ``cycles`` tool steps (2 events each) from scratch."""
    state = initial_state(_history(10), CONFIG, run_id="bench")
    for event in _events(cycles):
        state = reduce(state, event)
    events = state.events
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        replay(events)
        best = min(best, time.perf_counter() - start)
    return best * 1000


def main() -> None:
    small = _reduce_per_event(10)
    large = _reduce_per_event(10_000)
    print(f"reduce, per event, 10 messages:      {small:7.2f} µs")
    print(f"reduce, per event, 10,000 messages:  {large:7.2f} µs")
    print(f"ratio (target <= 1.5):               {large / small:7.2f}")
    for size in (10, 10_000):
        step, tools, model = _loop_step(size)
        print(
            f"{size:>6} messages: full tool step (2 reduce + 2 next_effect) {step:8.2f} µs;"
            f" next_effect RunTools {tools:6.2f} µs; CallModel {model:8.2f} µs"
        )
    for size in (10, 10_000):
        dump, load, length = _serialize(size)
        print(
            f"{size:>6} messages: to_json {dump:7.2f} ms, from_json {load:7.2f} ms,"
            f" {length / 1024:8.1f} KiB"
        )
    print(f"replay of 10,000 events (5,000 tool steps): {_replay(5000):7.2f} ms")
    print(f"(best of {SAMPLES} samples of {CYCLES * 2} events; median noise check:", end=" ")
    print(f"{statistics.median([_reduce_per_event(10) for _ in range(3)]):.2f} µs)")


if __name__ == "__main__":
    main()
