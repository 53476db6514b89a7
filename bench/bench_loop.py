"""Framework CPU per loop step: the tool loop with no HTTP.

A step is one model response carrying one tool call, plus running that tool
(a trivial sync function) and committing its result. Three figures:

- ``prebuilt``: a model that hands back ready-made responses, so the time is
  toolfold's own (next_effect, request building, reduce, dispositions,
  argument checking, the executor, result formatting, observers off);
- ``ScriptedModel``: the shipped test model, which also builds responses,
  assigns call ids and estimates usage;
- ``async``: the same prebuilt run through ``agenerate_text``, the sync tool
  handed to a worker thread (the default), and again with the tool declared
  ``blocking=False`` (called inline on the event loop).

Also: per-step cost with a long conversation (history of 2,000 messages), to
show the cost does not grow with the history.

Run: ``.venv/bin/python bench/bench_loop.py``. Target: <= 50 us per step.
Peers measured on this machine spend 3,800-5,500 us per step over raw HTTP.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Iterator

from toolfold import (
    Message,
    ModelRequest,
    ModelResponse,
    Tool,
    agenerate_text,
    generate_text,
    tool,
)
from toolfold.runtime import StreamEvent
from toolfold.testing import ScriptedModel

STEPS = 200
REPEAT = 7


@tool
def lookup(key: str, limit: int = 3) -> str:
    """Look something up.

    Args:
        key: What to look up.
        limit: How many results.
    """
    return key


class Prebuilt:
    """Returns prebuilt responses in order (the cheapest possible model)."""

    name = "bench:prebuilt"

    def __init__(self, responses: list[ModelResponse]) -> None:
        self.responses = responses
        self.position = 0

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        response = self.responses[self.position]
        self.position += 1
        return response

    async def request(self, request: ModelRequest) -> ModelResponse:
        return self.request_sync(request)

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        raise NotImplementedError

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError


def _responses(steps: int) -> list[ModelResponse]:
    call = ScriptedModel.call
    out = [
        ModelResponse(
            Message.assistant("", [call("lookup", {"key": f"k{i}"}, id=f"c{i}")]),
            finish_reason="tool_calls",
        )
        for i in range(steps - 1)
    ]
    out.append(ModelResponse(Message.assistant("done")))
    return out


def _history(n: int) -> list[Message]:
    return [Message.user(f"m{i}") if i % 2 == 0 else Message.assistant(f"a{i}") for i in range(n)]


def _measure(run: object, steps: int) -> tuple[float, float]:
    """(best, median) CPU microseconds per step over REPEAT runs.

    The machine is shared, so the best run is the truest figure of the code's
    own cost; the median shows the noise.
    """
    samples = []
    for _ in range(REPEAT):
        start = time.process_time()
        run()  # type: ignore[operator]
        samples.append((time.process_time() - start) / steps * 1e6)
    return min(samples), statistics.median(samples)


def _core_only(steps: int) -> None:
    """The pure core alone: next_effect and reduce for the same steps."""
    from toolfold.runtime import ModelResponded, ToolReturned, initial_state, next_effect, reduce
    from toolfold.runtime._run import make_options

    config = make_options(Prebuilt([]), tools=[lookup], max_steps=steps).config
    responses = _responses(steps)
    state = initial_state("go", config, run_id="r")
    for i in range(steps - 1):
        next_effect(state)
        state = reduce(state, ModelResponded(responses[i], ("execute",)))
        next_effect(state)
        state = reduce(state, ToolReturned(f"c{i}", "k", False, "ok"))


def _validation_only(steps: int) -> None:
    """The toolkit's argument check alone, once per step."""
    for i in range(steps):
        lookup.validate_arguments({"key": f"k{i}"})


def main() -> None:
    prebuilt = _responses(STEPS)
    generate_text(Prebuilt(prebuilt), "warm up", tools=[lookup], max_steps=STEPS)

    def run_prebuilt(history: list[Message] | None = None) -> None:
        messages = [*(history or []), Message.user("go")]
        response = generate_text(Prebuilt(prebuilt), messages, tools=[lookup], max_steps=STEPS)
        assert response.text == "done", response.finish_reason

    script = [ScriptedModel.call("lookup", {"key": f"k{i}"}) for i in range(STEPS - 1)] + ["done"]

    def run_scripted() -> None:
        response = generate_text(ScriptedModel(script), "go", tools=[lookup], max_steps=STEPS)
        assert response.text == "done"

    def run_async(tool: Tool[..., str] = lookup) -> None:
        async def main() -> None:
            response = await agenerate_text(Prebuilt(prebuilt), "go", tools=[tool], max_steps=STEPS)
            assert response.text == "done"

        asyncio.run(main())

    lookup_inline = lookup.replace(blocking=False)

    long_history = _history(2000)
    figures = {
        "  of which: pure core (next_effect + reduce)": _measure(lambda: _core_only(STEPS), STEPS),
        "  of which: toolkit argument validation": _measure(lambda: _validation_only(STEPS), STEPS),
        "prebuilt model, sync": _measure(run_prebuilt, STEPS),
        "prebuilt model, sync, 2,000-message history": _measure(
            lambda: run_prebuilt(long_history), STEPS
        ),
        "ScriptedModel, sync": _measure(run_scripted, STEPS),
        "prebuilt model, async": _measure(run_async, STEPS),
        "prebuilt model, async, tool blocking=False": _measure(
            lambda: run_async(lookup_inline), STEPS
        ),
    }
    order = [
        "prebuilt model, sync",
        "  of which: pure core (next_effect + reduce)",
        "  of which: toolkit argument validation",
        "prebuilt model, sync, 2,000-message history",
        "ScriptedModel, sync",
        "prebuilt model, async",
        "prebuilt model, async, tool blocking=False",
    ]
    print(f"framework CPU per loop step ({STEPS} steps per run; best and median of {REPEAT} runs)")
    for label in order:
        best, median = figures[label]
        print(f"  {label:<46} {best:8.1f} us/step  (median {median:.1f})")
    print("  target: <= 50 us/step; peers over raw HTTP: 3,800-5,500 us/step")


if __name__ == "__main__":
    main()
