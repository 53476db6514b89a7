"""The fault matrix's tool faults: each x {blocking, async, streamed} x every backend, over 127.0.0.1.

The transport faults are in ``test_fault_matrix.py``. These are the faults of
the tool side of a run, against ``fault_server.py`` in its own process: a call
whose arguments are not JSON, a call of a tool the agent lacks, a tool that
raises, a tool past its timeout (each: the model reads an error result and the
run answers, its state replays and survives JSON), and the run cancelled while
its tool runs, while its model call waits for the answer's first byte, or
mid-stream, once the answer's first text has reached the caller (the
cancellation reaches the caller with the run's state, which resumes to the
answer without running again a tool that had returned). Every cell ends with
the file descriptors and threads the process had before it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from backends import OWNED
from fault_matrix import GENEROUS, KEY, MODES, resources

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
#: What the server does in a cancelled cell's run: its 2nd answer never comes
#: (``read-timeout``) or stops after its first text (``hold-stream``).
CANCEL_FAULTS = {
    "cancel-mid-tool": "none",
    "cancel-mid-call": "read-timeout",
    "cancel-mid-stream": "hold-stream",
}

CELLS = [
    pytest.param(backend, fault, mode, id=f"{backend}-{fault}-{mode}")
    for backend in OWNED
    for fault in [*ANSWERED, *CANCELLED]
    for mode in MODES
    if not (backend == "aiohttp" and mode == "blocking")  # aiohttp is async only
    if not (fault in CANCELLED and mode == "blocking")  # a blocking call is not cancelled
    if not (fault == "cancel-mid-stream" and mode != "streamed")  # only a stream has a middle
]


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


def _answered(url: str, backend: str, fault: str, mode: str) -> tuple[Any, list[str]]:
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


def _cancelled(url: str, backend: str, fault: str, mode: str) -> tuple[list[str], str]:
    """Cancel the run mid-tool, mid-call or mid-stream; then resume it from the cancellation's state.

    Returns what the tool saw and the resumed run's answer.
    """
    runs: list[str] = []
    texts: list[str] = []

    async def go() -> str:
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

        task = asyncio.ensure_future(run())
        waited = {"cancel-mid-tool": started, "cancel-mid-call": second_call}.get(fault, first_text)
        done, _ = await asyncio.wait(
            [task, asyncio.ensure_future(waited.wait())], return_when=asyncio.FIRST_COMPLETED
        )
        assert task not in done, task  # the run waits on the tool or on the server
        # Mid-stream, the text arrived; before, none did.
        assert texts == (["The sum"] if fault == "cancel-mid-stream" else []), texts
        await asyncio.sleep(0)  # let the in-flight call start before the cancel lands
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as cancelled:
            await task
        # The cancellation carries the run's state: resumed (through JSON), it
        # answers, and a tool that had returned does not run again.
        state = toolfold.state_of(cancelled.value)
        assert state is not None
        # The server's run goes on where it was (its next answer is the sum).
        again = _model(url, backend, "none", run=model_run)
        try:
            resumed = await Agent(again, tools=[_tool("none", runs)]).aresume(
                RunState.from_json(state.to_json())
            )
            answer = resumed.text
            assert replay(resumed.state.log) == resumed.state
        finally:
            await model.aclose()
            await again.aclose()
            model.close()
            again.close()
        return answer

    return runs, asyncio.run(go())


@pytest.mark.parametrize(("backend", "fault", "mode"), CELLS)
def test_tool_fault_is_read_by_the_model_or_cancels_cleanly(
    fault_url: str, backend: str, fault: str, mode: str
) -> None:
    """An answered fault is an error result the model reads, the state intact; a cancel reaches the caller; nothing leaks."""
    warm = "async" if mode == "streamed" else mode
    for kind in ("tool-raises", "tool-timeout"):  # a sync tool's worker, a blocking run's loop
        _answered(fault_url, backend, kind, warm)
    before = resources()  # after a warm-up: what lives for the process exists already
    if fault in CANCELLED:
        runs, answer = _cancelled(fault_url, backend, fault, mode)
        # Cancelled mid-tool, the tool runs again when resumed; mid-call, it had
        # returned and does not.
        assert runs == (["started", "cancelled", "ran"] if fault == "cancel-mid-tool" else ["ran"])
        assert answer == "The sum is 5."
    else:
        response, runs = _answered(fault_url, backend, fault, mode)
        _, words, tool_runs = ANSWERED[fault]
        assert response.text == "The sum is 5."
        (result,) = [r for m in response.messages if m.role == "tool" for r in m.tool_results]
        assert result.is_error, result
        assert words in result.content, result.content
        assert len(runs) == tool_runs
        state = response.state
        assert replay(state.log) == state
        assert RunState.from_json(state.to_json()) == state
    assert resources() == before
