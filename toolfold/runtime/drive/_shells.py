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
from toolfold.runtime.drive._trace import RunTrace, end_run, start_run


def drive_sync(live: Live, loop: Loop, state: RunState) -> RunState:
    """Perform the loop's ops with blocking calls (no event loop for sync tools)."""
    trace = start_run(live, state)
    try:
        final = _drive_sync(live, loop, trace)
    except BaseException as exc:
        end_run(trace, getattr(exc, "state", None), exc)
        raise
    end_run(trace, final, None)
    return final


def _drive_sync(live: Live, loop: Loop, trace: RunTrace | None) -> RunState:
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
            if trace is not None:
                trace.handoff(live)
        elif isinstance(op, CallModel):
            call = None if trace is None else trace.model_call(op.request)
            try:
                value = live.model.request_sync(op.request)
            except Exception as exc:
                failure = exc
            if call is not None:
                call.end(value, failure)
        elif isinstance(op, _RunToolsOp):
            tools = None if trace is None else trace.tools(op.jobs)
            value = run_calls_sync(op.jobs, max_concurrency=live.max_concurrency)
            if tools is not None:
                tools.end(value)


async def drive_async(live: Live, loop: Loop, state: RunState) -> RunState:
    """Perform the loop's ops on the running event loop."""
    trace = start_run(live, state)
    try:
        final = await _drive_async(live, loop, trace)
    except BaseException as exc:
        end_run(trace, getattr(exc, "state", None), exc)
        raise
    end_run(trace, final, None)
    return final


async def _drive_async(live: Live, loop: Loop, trace: RunTrace | None) -> RunState:
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
            if trace is not None:
                trace.handoff(live)
        elif isinstance(op, CallModel):
            call = None if trace is None else trace.model_call(op.request)
            try:
                value = await live.model.request(op.request)
            except Exception as exc:
                failure = exc
            if call is not None:
                call.end(value, failure)
        elif isinstance(op, _RunToolsOp):
            tools = None if trace is None else trace.tools(op.jobs)
            value = await run_calls(op.jobs, max_concurrency=live.max_concurrency)
            if tools is not None:
                tools.end(value)


def stream_sync(
    live: Live, loop: Loop, state: RunState
) -> Generator[RunStreamEvent, None, RunState]:
    """Like `drive_sync`, streaming the model and yielding events as they happen."""
    trace = start_run(live, state)
    try:
        final = yield from _stream_sync(live, loop, trace)
    except BaseException as exc:
        end_run(trace, getattr(exc, "state", None), _failure(exc))
        raise
    end_run(trace, final, None)
    return final


def _failure(exc: BaseException) -> BaseException | None:
    # A caller that stops iterating abandons the run: not an error of the run.
    return None if isinstance(exc, GeneratorExit) else exc


def _stream_sync(
    live: Live, loop: Loop, trace: RunTrace | None
) -> Generator[RunStreamEvent, None, RunState]:
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
            if trace is not None:
                trace.handoff(live)
        elif isinstance(op, _NoticeOp):
            yield op.event
        elif isinstance(op, CallModel):
            call = None if trace is None else trace.model_call(op.request)
            folded = StreamState()
            try:
                for event in live.model.stream_sync(op.request):
                    folded = fold_stream(folded, event)
                    yield event
                value = finish_stream(folded, call_id_maker(op.step))
            except Exception as exc:
                failure = exc
            if call is not None:
                call.end(value, failure)
        elif isinstance(op, _RunToolsOp):
            tools = None if trace is None else trace.tools(op.jobs)
            value = run_calls_sync(op.jobs, max_concurrency=live.max_concurrency)
            if tools is not None:
                tools.end(value)


async def stream_async(
    live: Live, loop: Loop, state: RunState
) -> AsyncIterator[RunStreamEvent | RunState]:
    """Like `drive_async`, streaming; the last item yielded is the final state."""
    trace = start_run(live, state)
    try:
        async for item in _stream_async(live, loop, trace):
            if isinstance(item, RunState):
                end_run(trace, item, None)
                trace = None
            yield item
    except BaseException as exc:
        end_run(trace, getattr(exc, "state", None), _failure(exc))
        raise


async def _stream_async(
    live: Live, loop: Loop, trace: RunTrace | None
) -> AsyncIterator[RunStreamEvent | RunState]:
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
            if trace is not None:
                trace.handoff(live)
        elif isinstance(op, _NoticeOp):
            yield op.event
        elif isinstance(op, CallModel):
            call = None if trace is None else trace.model_call(op.request)
            folded = StreamState()
            try:
                events: AsyncIterator[StreamEvent] = live.model.stream(op.request)
                async for event in events:
                    folded = fold_stream(folded, event)
                    yield event
                value = finish_stream(folded, call_id_maker(op.step))
            except Exception as exc:
                failure = exc
            if call is not None:
                call.end(value, failure)
        elif isinstance(op, _RunToolsOp):
            tools = None if trace is None else trace.tools(op.jobs)
            value = await run_calls(op.jobs, max_concurrency=live.max_concurrency)
            if tools is not None:
                tools.end(value)


def call_id_maker(step: int) -> Callable[[int], str]:
    """Ids for the calls of ``step`` a streamed response left without one (by position)."""
    return lambda index: f"call_{step}_{index}"
