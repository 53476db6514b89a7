"""The fault matrix's tool faults: each x {blocking, async, streamed} x each backend, through the public API.

Shared by ``test_tool_fault_matrix.py`` (which asserts every cell) and
``bench/bench_faults.py`` (which prints the table). The transport faults are
in ``fault_matrix``. These are the faults of the tool side of a run, against
``fault_server.py`` in its own process: a call whose arguments are not JSON, a
call of a tool the agent lacks, a tool that raises, a tool past its timeout
(each: the model reads an error result and the run answers, its state replays
and survives JSON), and the run cancelled while its tool runs, while its model
call waits for the answer's first byte, or mid-stream, once the answer's
first text has reached the caller (the cancellation reaches the caller with
the run's state, which resumes to the answer without running again a tool
that had returned).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import attrs
from backends import OWNED
from fault_matrix import GENEROUS, KEY, MODES

import toolfold
from toolfold import Agent, RunState, StepStartEvent, TextDelta
from toolfold.runtime import replay

#: fault -> (what the server does, words of the error result the model reads, what the tool saw)
ANSWERED = {
    "bad-args": (
        "bad-args",
        "Invalid arguments for tool 'add': the arguments are not valid JSON",
        0,
    ),
    "unknown-tool": ("unknown-tool", "Unknown tool 'subtract'", 0),
    "tool-raises": ("none", "ValueError: the adder is broken", 1),
    "tool-timeout": ("none", "timed out", 2),  # started, then cancelled at its timeout
}
CANCELLED = ("cancel-mid-tool", "cancel-mid-call", "cancel-mid-stream")
FAULTS = (*ANSWERED, *CANCELLED)
#: What the server does in a cancelled cell's run: its 2nd answer never comes
#: (``read-timeout``) or stops after its first text (``hold-stream``).
CANCEL_FAULTS = {
    "cancel-mid-tool": "none",
    "cancel-mid-call": "read-timeout",
    "cancel-mid-stream": "hold-stream",
}
#: What the tool saw in a cancelled cell: mid-tool it is cancelled and runs
#: again when the run resumes; mid-call and mid-stream it had returned and does not.
CANCELLED_RUNS = {
    "cancel-mid-tool": ("started", "cancelled", "ran"),
    "cancel-mid-call": ("ran",),
    "cancel-mid-stream": ("ran",),
}


def tool_cells() -> list[tuple[str, str, str]]:
    """Every cell: ``(backend, fault, mode)``."""
    return [
        (backend, fault, mode)
        for backend in OWNED
        for fault in FAULTS
        for mode in MODES
        if not (backend == "aiohttp" and mode == "blocking")  # aiohttp is async only
        if not (fault in CANCELLED and mode == "blocking")  # a blocking call is not cancelled
        if not (fault == "cancel-mid-stream" and mode != "streamed")  # only a stream has a middle
    ]


@attrs.frozen
class ToolOutcome:
    """What one cell gave.

    Attributes:
        answer: The run's answer; cancelled, the resumed run's.
        runs: What the tool saw (``ran``, ``raised``, ``started``, ``cancelled``).
        result: Answered: the tool result the model read, when it was an error.
        replays: The state replays from its log (answered: and survives JSON).
        cancelled: The cancellation reached the caller carrying the run's state.
        texts: Cancelled: the answer's text that had reached the caller.
        waited: Cancelled: the run was still going when the cancel came.
    """

    answer: str | None
    runs: tuple[str, ...]
    result: str | None = None
    replays: bool = False
    cancelled: bool = False
    texts: tuple[str, ...] = ()
    waited: bool = True

    def ok(self, fault: str) -> bool:
        """Whether this is what the docs promise for the cell."""
        if self.answer != "The sum is 5." or not self.replays:
            return False
        if fault in CANCELLED:
            texts = ("The sum",) if fault == "cancel-mid-stream" else ()
            return (
                self.waited
                and self.cancelled
                and self.texts == texts
                and self.runs == CANCELLED_RUNS[fault]
            )
        _, words, tool_runs = ANSWERED[fault]
        return self.result is not None and words in self.result and len(self.runs) == tool_runs

    def cell(self) -> str:
        """A short text for the printed table."""
        if self.cancelled:
            return (
                "cancelled, resumed" if self.answer == "The sum is 5." else "cancelled, NOT resumed"
            )
        read = "error result read" if self.result is not None else "no error result"
        return f"{read}, answered" if self.answer == "The sum is 5." else f"{read}, NOT answered"


def run_tool_cell(url: str, backend: str, fault: str, mode: str) -> ToolOutcome:
    """Run one cell (see the module docstring)."""
    if fault in CANCELLED:
        return _cancelled(url, backend, fault, mode)
    response, runs = run_answered(url, backend, fault, mode)
    results = [r for m in response.messages if m.role == "tool" for r in m.tool_results]
    state = response.state
    return ToolOutcome(
        answer=response.text,
        runs=tuple(runs),
        result=results[0].content if len(results) == 1 and results[0].is_error else None,
        replays=replay(state.log) == state and RunState.from_json(state.to_json()) == state,
    )


def _model(url: str, backend: str, fault: str, run: str | None = None) -> Any:
    """A model whose requests make one run of the server's (``run``: go on with that one)."""
    headers = {"x-fault": fault, "x-run": run or uuid.uuid4().hex}
    return toolfold.model(
        "openai:m", base_url=url, api_key=KEY, http=backend, retry=0, timeout=GENEROUS,
        headers=headers,
    )  # fmt: skip


def _tool(fault: str, runs: list[str], started: asyncio.Event | None = None) -> Any:
    """``add`` as the fault needs it: normal, raising, hanging (async) past a timeout."""
    if fault == "tool-raises":

        @toolfold.tool
        def add(a: int, b: int) -> int:
            """Add two integers.

            Args:
                a: The first number.
                b: The second number.
            """
            runs.append("raised")
            raise ValueError("the adder is broken")

        return add

    if fault in ("tool-timeout", "cancel-mid-tool"):

        @toolfold.tool(timeout=0.05 if fault == "tool-timeout" else None)
        async def add(a: int, b: int) -> int:  # type: ignore[no-redef]
            """Add two integers.

            Args:
                a: The first number.
                b: The second number.
            """
            runs.append("started")
            if started is not None:
                started.set()
            try:
                await asyncio.Event().wait()  # never set: only the timeout or a cancel ends it
            except asyncio.CancelledError:
                runs.append("cancelled")
                raise
            return a + b

        return add

    @toolfold.tool
    def add(a: int, b: int) -> int:  # type: ignore[no-redef]
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        runs.append("ran")
        return a + b

    return add


def run_answered(url: str, backend: str, fault: str, mode: str) -> tuple[Any, list[str]]:
    """The run of an answered fault's cell, and the tool's runs."""
    runs: list[str] = []
    model = _model(url, backend, ANSWERED[fault][0])
    agent = Agent(model, tools=[_tool(fault, runs)])
    try:
        if mode == "blocking":
            return agent.run("add 2 and 3"), runs

        async def go() -> Any:
            try:
                if mode == "streamed":
                    stream = agent.stream("add 2 and 3")
                    async for _ in stream:
                        pass
                    return stream.response
                return await agent.arun("add 2 and 3")
            finally:
                await model.aclose()

        return asyncio.run(go()), runs
    finally:
        model.close()


def _cancelled(url: str, backend: str, fault: str, mode: str) -> ToolOutcome:
    """Cancel the run mid-tool, mid-call or mid-stream; then resume it from the cancellation's state."""
    runs: list[str] = []
    texts: list[str] = []

    async def go() -> ToolOutcome:
        started = asyncio.Event()
        model_run = uuid.uuid4().hex
        model = _model(url, backend, CANCEL_FAULTS[fault], run=model_run)
        agent = Agent(model, tools=[_tool(fault, runs, started)])
        second_call = asyncio.Event()
        first_text = asyncio.Event()

        async def run() -> None:
            if mode == "streamed":
                async for event in agent.stream("add 2 and 3"):
                    if isinstance(event, StepStartEvent) and event.step == 2:
                        second_call.set()  # the model call of step 2 goes out next
                    if isinstance(event, TextDelta):
                        texts.append(event.text)
                        first_text.set()  # the answer's first bytes have reached the caller
            else:
                await agent.arun(
                    "add 2 and 3",
                    on_event=lambda e: second_call.set() if e.kind == "tool_returned" else None,
                )

        again = _model(url, backend, "none", run=model_run)
        try:
            task = asyncio.ensure_future(run())
            waited = {"cancel-mid-tool": started, "cancel-mid-call": second_call}.get(
                fault, first_text
            )
            waiting = asyncio.ensure_future(waited.wait())
            done, _ = await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if task in done:  # the run did not wait on the tool or on the server
                task.exception()  # retrieved: the outcome says what went wrong
                return ToolOutcome(None, tuple(runs), waited=False)
            seen = tuple(texts)
            await asyncio.sleep(0)  # let the in-flight call start before the cancel lands
            task.cancel()
            try:
                await task
            except asyncio.CancelledError as exc:
                state = toolfold.state_of(exc)
            else:
                state = None
            if state is None:
                return ToolOutcome(None, tuple(runs), texts=seen)
            # The server's run goes on where it was (its next answer is the sum);
            # the state resumed through JSON.
            resumed = await Agent(again, tools=[_tool("none", runs)]).aresume(
                RunState.from_json(state.to_json())
            )
            return ToolOutcome(
                answer=resumed.text,
                runs=tuple(runs),
                replays=replay(resumed.state.log) == resumed.state,
                cancelled=True,
                texts=seen,
            )
        finally:
            await model.aclose()
            await again.aclose()
            model.close()
            again.close()

    return asyncio.run(go())
