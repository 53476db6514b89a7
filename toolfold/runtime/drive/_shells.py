"""The four thin shells that perform `run_loop`'s ops: blocking, async, and streaming of each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

from toolfold.runtime._response import (
    RunStreamEvent,
)
from toolfold.runtime.core._effects import (
    CallModel,
)
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._stream import StreamEvent, StreamState, finish_stream, fold_stream
from toolfold.runtime.drive._executor import (
    run_calls,
    run_calls_sync,
)
from toolfold.runtime.drive._loop import Live, Loop, _NoticeOp, _RunToolsOp, _SwitchOp


def drive_sync(live: Live, loop: Loop) -> RunState:
    """Perform the loop's ops with blocking calls (no event loop for sync tools)."""
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, failure = None, None
        if isinstance(op, _SwitchOp):  # a handoff: the next agent's model and limits
            live = op.live
        elif isinstance(op, CallModel):
            try:
                value = live.model.request_sync(op.request)
            except Exception as exc:
                failure = exc
        elif isinstance(op, _RunToolsOp):
            value = run_calls_sync(op.jobs, max_concurrency=live.max_concurrency)


async def drive_async(live: Live, loop: Loop) -> RunState:
    """Perform the loop's ops on the running event loop."""
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, failure = None, None
        if isinstance(op, _SwitchOp):  # a handoff: the next agent's model and limits
            live = op.live
        elif isinstance(op, CallModel):
            try:
                value = await live.model.request(op.request)
            except Exception as exc:
                failure = exc
        elif isinstance(op, _RunToolsOp):
            value = await run_calls(op.jobs, max_concurrency=live.max_concurrency)


def stream_sync(live: Live, loop: Loop) -> Generator[RunStreamEvent, None, RunState]:
    """Like `drive_sync`, streaming the model and yielding events as they happen."""
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, failure = None, None
        if isinstance(op, _SwitchOp):  # a handoff: the next agent's model and limits
            live = op.live
        elif isinstance(op, _NoticeOp):
            yield op.event
        elif isinstance(op, CallModel):
            folded = StreamState()
            try:
                for event in live.model.stream_sync(op.request):
                    folded = fold_stream(folded, event)
                    yield event
                value = finish_stream(folded, _id_maker(op.step))
            except Exception as exc:
                failure = exc
        elif isinstance(op, _RunToolsOp):
            value = run_calls_sync(op.jobs, max_concurrency=live.max_concurrency)


async def stream_async(live: Live, loop: Loop) -> AsyncIterator[RunStreamEvent | RunState]:
    """Like `drive_async`, streaming; the last item yielded is the final state."""
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            yield stop.value
            return
        value, failure = None, None
        if isinstance(op, _SwitchOp):  # a handoff: the next agent's model and limits
            live = op.live
        elif isinstance(op, _NoticeOp):
            yield op.event
        elif isinstance(op, CallModel):
            folded = StreamState()
            try:
                events: AsyncIterator[StreamEvent] = live.model.stream(op.request)
                async for event in events:
                    folded = fold_stream(folded, event)
                    yield event
                value = finish_stream(folded, _id_maker(op.step))
            except Exception as exc:
                failure = exc
        elif isinstance(op, _RunToolsOp):
            value = await run_calls(op.jobs, max_concurrency=live.max_concurrency)


def _id_maker(step: int) -> Callable[[int], str]:
    return lambda index: f"call_{step}_{index}"
