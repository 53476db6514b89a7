"""What the agent files of the tests name by import path (``files_helpers:add``)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from toolfold import Message, ModelRequest, ServerError, Tool, tool
from toolfold.runtime import StreamEvent, StreamFinish, TextDelta
from toolfold.testing import FunctionModel, Reply


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool(requires_approval=True)
def add_approved(a: int, b: int) -> int:
    """Add two numbers, once a person approved.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def echo(text: str) -> str:
    """Say the text back (a plain function: the file makes it a tool).

    Args:
        text: What to say.
    """
    return text


def untyped(x):  # type: ignore[no-untyped-def]
    """A function @tool refuses (no annotations)."""
    return x


NOT_A_TOOL = 42


@attrs.frozen
class Query:
    """A structured input for an agent used as a tool."""

    text: str


@attrs.frozen
class Verdict:
    """A structured answer."""

    ok: bool


class Shelf:
    """A class with a method tool: listed as ``files_helpers:Shelf.lookup``, taken from the
    class, nothing binds its ``self`` (refused when the agent is built)."""

    @tool
    def lookup(self, title: str) -> str:
        """Look a title up.

        Args:
            title: The title.
        """
        return title


def users_only(messages: tuple[Message, ...]) -> list[Message]:
    """A handoff's input filter: only the user's messages."""
    return [m for m in messages if m.role == "user"]


def _reply(request: ModelRequest) -> Reply:
    last = request.messages[-1]
    if last.role == "tool":
        return f"result: {last.tool_results[0].content}"
    adder = next((t.name for t in request.tools if t.name.startswith("add")), None)
    if adder is not None:
        return FunctionModel.call(adder, {"a": 2, "b": 3})
    return "hello"


model = FunctionModel(_reply, name="files:helper")


def shout(text: str) -> str:
    """A function step: the text in capitals."""
    return text.upper()


def pick(text: str) -> str:
    """A router function: 'long' or 'short'."""
    return "long" if len(text) > 20 else "short"


def joined(outputs: dict[str, str]) -> str:
    """A merge: the outputs, one per line, in step order."""
    return "\n".join(f"{name}: {value}" for name, value in outputs.items())


def long_enough(text: str) -> bool:
    """A loop's condition: the text has grown past 12 characters."""
    return len(text) > 12


def grow(text: str) -> str:
    """A loop step: the text, doubled."""
    return text + text


def two_tool_results(state: object) -> bool:
    """A stop condition: the run has made two or more tool calls in its last step."""
    return len(getattr(state, "calls", ())) >= 2


def first_word(response: object) -> str:
    """An ``as_tool(output=...)`` extractor: the sub-run's first word."""
    return str(getattr(response, "text", "")).split()[0]


not_a_function = "not a function"  # an `output =` path that names no function


@tool(blocking=False)
def add_interrupted(a: int, b: int) -> int:
    """Add two numbers; the first time (no ``interrupted`` file here), Ctrl-C comes first.

    Args:
        a: The first.
        b: The second.
    """
    marker = Path("interrupted")
    if not marker.exists():
        marker.write_text("once")
        # What Python's SIGINT handler raises when a person presses Ctrl-C (raised
        # here, as the signal is ignored in a process started in the background).
        raise KeyboardInterrupt
    return a + b


class _ClosingBadly:
    """A tool source whose close fails once the run has ended."""

    name = "flaky-server"

    def open(self) -> None:
        pass

    def close(self) -> None:
        raise OSError("flaky-server would not close")

    def tools(self) -> list[Tool[..., Any]]:
        return [add]


closing_badly = _ClosingBadly()


@tool(requires_approval=True)
def add_logged(a: int, b: int) -> int:
    """Add two numbers once approved; each run of it is a line of ``ran.log`` here.

    Args:
        a: The first.
        b: The second.
    """
    with Path("ran.log").open("a") as log:
        log.write(f"{a}+{b}\n")
    return a + b


def _fails_once_after_a_result(request: ModelRequest) -> Reply:
    """Like `model`, but the first answer after a tool result is a provider error (a 503)."""
    marker = Path("failed")
    if request.messages[-1].role == "tool" and not marker.exists():
        marker.write_text("once")
        raise ServerError("the provider answered 503", provider="openai", status_code=503)
    return _reply(request)


model_failing_once = FunctionModel(_fails_once_after_a_result, name="files:failing-once")


def _gated_stream(request: ModelRequest) -> Iterator[StreamEvent]:
    """'first ', then 'second' once a line arrives on the FIFO named by TOOLFOLD_TEST_GATE
    (the test sees the first piece on the terminal before it lets the second come)."""
    yield TextDelta("first ")
    with open(os.environ["TOOLFOLD_TEST_GATE"], encoding="utf-8") as gate:
        gate.readline()
    yield TextDelta("second")
    yield StreamFinish("stop", "stop")


gated_model = FunctionModel(lambda request: "first second", stream_function=_gated_stream)


@tool
def note(text: str) -> str:
    """Note the text; each run of it is a line of ``ran.log`` here.

    Args:
        text: What to note.
    """
    with Path("ran.log").open("a") as log:
        log.write(f"note {text}\n")
    return f"noted {text}"


@tool
async def press_ctrl_c(text: str) -> str:
    """The first time (no ``interrupted`` file here), Ctrl-C reaches the process while this
    waits (until cancelled); then it answers at once.

    Args:
        text: What to answer with.
    """
    marker = Path("interrupted")
    if not marker.exists():
        marker.write_text("once")
        # As a terminal's Ctrl-C: SIGINT to the main thread, where Python raises it.
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        await asyncio.Event().wait()  # only the cancel ends it
    return f"pressed {text}"


def _lead_and_worker(request: ModelRequest) -> Reply:
    """The lead calls the ``worker`` agent; the worker calls ``note``, then ``press_ctrl_c``."""
    results = [r.content for m in request.messages for r in m.tool_results]
    if any(t.name == "worker" for t in request.tools):
        return f"lead: {results[0]}" if results else FunctionModel.call("worker", {"input": "go"})
    if len(results) < 2:
        name = "press_ctrl_c" if results else "note"
        return FunctionModel.call(name, {"text": "x"})
    return "worker: " + ", ".join(results)


lead_and_worker = FunctionModel(_lead_and_worker, name="files:lead-and-worker")


# Set once ``wait_for_cancel`` waits to be cancelled (see `hold_at_gate`).
_WAITER_WAITS = threading.Event()


@tool
def hold_at_gate(text: str) -> str:
    """The first time (no ``interrupted`` file here), Ctrl-C reaches the process (once
    ``wait_for_cancel`` waits, when TOOLFOLD_TEST_AFTER_WAITER is set), and this returns only
    once a line arrives on the FIFO named by TOOLFOLD_TEST_GATE; each return is a line of
    ``ran.log`` here.

    Args:
        text: What to answer with.
    """
    marker = Path("interrupted")
    if not marker.exists():
        # Beside ``wait_for_cancel`` (TOOLFOLD_TEST_AFTER_WAITER set), only once it waits:
        # Ctrl-C then cancels it there. Before, its first step could come after the marker
        # (it answered at once) or never (Ctrl-C landed first): either way it was not cancelled.
        if os.environ.get("TOOLFOLD_TEST_AFTER_WAITER") and not _WAITER_WAITS.wait(60):
            raise RuntimeError("hold_at_gate: wait_for_cancel never began to wait")
        marker.write_text("once")
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
        with open(os.environ["TOOLFOLD_TEST_GATE"], encoding="utf-8") as gate:
            gate.readline()
    with Path("ran.log").open("a") as log:
        log.write(f"held {text}\n")
    return f"held {text}"


def _lead_and_holder(request: ModelRequest) -> Reply:
    """The lead calls the ``worker`` agent; the worker calls ``hold_at_gate``, then answers."""
    results = [r.content for m in request.messages for r in m.tool_results]
    if any(t.name == "worker" for t in request.tools):
        return f"lead: {results[0]}" if results else FunctionModel.call("worker", {"input": "go"})
    if not results:
        return FunctionModel.call("hold_at_gate", {"text": "x"})
    return "worker: " + results[0]


lead_and_holder = FunctionModel(_lead_and_holder, name="files:lead-and-holder")


def _holder_beside_note(request: ModelRequest) -> Reply:
    """Calls ``hold_at_gate`` and ``note`` in one step, then answers with their results."""
    results = [r.content for m in request.messages for r in m.tool_results]
    if results:
        return "done: " + ", ".join(results)
    return [
        FunctionModel.call("hold_at_gate", {"text": "x"}),
        FunctionModel.call("note", {"text": "y"}),
    ]


holder_beside_note = FunctionModel(_holder_beside_note, name="files:holder-beside-note")


@tool
async def wait_for_cancel(text: str) -> str:
    """The first time (no ``interrupted`` file here), wait until cancelled, which adds a line
    ``cancelled TEXT`` to ``ran.log`` here; then answer at once.

    Args:
        text: What to answer with.
    """
    if not Path("interrupted").exists():
        try:
            # Told at the loop's next turn, when this task waits below (see `hold_at_gate`).
            asyncio.get_running_loop().call_soon(_WAITER_WAITS.set)
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            with Path("ran.log").open("a") as log:
                log.write(f"cancelled {text}\n")
            raise
    return f"waited {text}"


def _holder_beside_waiter(request: ModelRequest) -> Reply:
    """Calls ``wait_for_cancel`` and ``hold_at_gate`` in one step (run on an event loop, the
    async tool's task started first), then answers with their results."""
    results = [r.content for m in request.messages for r in m.tool_results]
    if results:
        return "done: " + ", ".join(results)
    return [
        FunctionModel.call("wait_for_cancel", {"text": "w"}),
        FunctionModel.call("hold_at_gate", {"text": "x"}),
    ]


holder_beside_waiter = FunctionModel(_holder_beside_waiter, name="files:holder-beside-waiter")


def _lead_beside_holder(request: ModelRequest) -> Reply:
    """The lead calls the ``worker`` agent and ``hold_at_gate`` in one step (run on an event
    loop); the worker calls ``wait_for_cancel``; each answers with its results."""
    results = [r.content for m in request.messages for r in m.tool_results]
    if any(t.name == "worker" for t in request.tools):
        if results:
            return "done: " + ", ".join(results)
        return [
            FunctionModel.call("worker", {"input": "go"}),
            FunctionModel.call("hold_at_gate", {"text": "x"}),
        ]
    return (
        "worker: " + results[0] if results else FunctionModel.call("wait_for_cancel", {"text": "w"})
    )


lead_beside_holder = FunctionModel(_lead_beside_holder, name="files:lead-beside-holder")


@tool(requires_approval=True)
def add_at_gate(a: int, b: int) -> int:
    """Add two numbers once approved, logging each run to ``ran.log`` here; says ``adding`` on
    stderr, then returns only once a line arrives on the FIFO named by TOOLFOLD_TEST_GATE.

    Args:
        a: The first.
        b: The second.
    """
    with Path("ran.log").open("a") as log:
        log.write(f"add {a} {b}\n")
    print("adding", file=sys.stderr, flush=True)
    with open(os.environ["TOOLFOLD_TEST_GATE"], encoding="utf-8") as gate:
        gate.readline()
    return a + b


def _breaks_after_a_result(request: ModelRequest) -> Reply:
    """Like `model`, but every answer after a tool result is a bug in the model (a RunError)."""
    if request.messages[-1].role == "tool":
        raise RuntimeError("the model broke")
    return _reply(request)


model_breaking = FunctionModel(_breaks_after_a_result, name="files:breaking")


def step_fails(text: str) -> str:
    """A function step that always fails."""
    raise ValueError("step kaboom")


def _slash_ids(request: ModelRequest) -> Reply:
    """The lead calls the agents ``h1`` and ``h2`` (call ids ``a`` and ``c``, inputs 2 and 3)
    and ``add_logged(1, 1)`` under the id ``a/b``; each helper calls ``add_logged(n, n)`` (n
    its input) under the id ``b``, so the top run's call's id is h1's call's path."""
    last = request.messages[-1]
    if last.role == "tool":
        return "done: " + ", ".join(r.content for r in last.tool_results)
    if any(t.name == "h1" for t in request.tools):
        return [
            FunctionModel.call("h1", {"input": "2"}, id="a"),
            FunctionModel.call("h2", {"input": "3"}, id="c"),
            FunctionModel.call("add_logged", {"a": 1, "b": 1}, id="a/b"),
        ]
    n = int(request.messages[0].text)
    return FunctionModel.call("add_logged", {"a": n, "b": n}, id="b")


slash_ids = FunctionModel(_slash_ids, name="files:slash-ids")
