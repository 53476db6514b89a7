"""The four thin shells that perform `run_loop`'s ops: blocking, async, and streaming of each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator
from contextlib import AsyncExitStack, ExitStack
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
from toolfold.runtime.drive._loop import (
    Ended,
    Live,
    Loop,
    _NoticeOp,
    _OpenOp,
    _RunToolsOp,
    _SwitchOp,
)
from toolfold.runtime.drive._open import aopened, opened
from toolfold.runtime.drive._trace import RunTrace, end_run, start_run


def drive_sync(live: Live, loop: Loop, state: RunState) -> Ended:
    """Perform the loop's ops with blocking calls (no event loop for sync tools)."""
    trace = start_run(live, state)
    try:
        with ExitStack() as held:  # tool sources the run opened on its way
            ended = _drive_sync(live, loop, trace, held)
    except BaseException as exc:
        end_run(trace, getattr(exc, "state", None), exc)
        raise
    end_run(trace, ended.state, None)
    return ended


def _drive_sync(live: Live, loop: Loop, trace: RunTrace | None, held: ExitStack) -> Ended:
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, failure = None, None
        if isinstance(op, _SwitchOp):
            live = _switched(op, trace)
        elif isinstance(op, _OpenOp):
            try:
                value = held.enter_context(opened(op.sources))
            except Exception as exc:
                failure = exc
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


async def drive_async(live: Live, loop: Loop, state: RunState) -> Ended:
    """Perform the loop's ops on the running event loop."""
    trace = start_run(live, state)
    try:
        async with AsyncExitStack() as held:  # tool sources the run opened on its way
            ended = await _drive_async(live, loop, trace, held)
    except BaseException as exc:
        end_run(trace, getattr(exc, "state", None), exc)
        raise
    end_run(trace, ended.state, None)
    return ended


async def _drive_async(
    live: Live, loop: Loop, trace: RunTrace | None, held: AsyncExitStack
) -> Ended:
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, failure = None, None
        if isinstance(op, _SwitchOp):
            live = _switched(op, trace)
        elif isinstance(op, _OpenOp):
            try:
                value = await held.enter_async_context(aopened(op.sources))
            except Exception as exc:
                failure = exc
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


def stream_sync(live: Live, loop: Loop, state: RunState) -> Generator[RunStreamEvent, None, Ended]:
    """Like `drive_sync`, streaming the model and yielding events as they happen."""
    trace = start_run(live, state)
    try:
        with ExitStack() as held:  # closed too when the caller stops iterating
            ended = yield from _stream_sync(live, loop, trace, held)
    except BaseException as exc:
        end_run(trace, getattr(exc, "state", None), _failure(exc))
        raise
    end_run(trace, ended.state, None)
    return ended


def _failure(exc: BaseException) -> BaseException | None:
    # A caller that stops iterating abandons the run: not an error of the run.
    return None if isinstance(exc, GeneratorExit) else exc


def _stream_sync(
    live: Live, loop: Loop, trace: RunTrace | None, held: ExitStack
) -> Generator[RunStreamEvent, None, Ended]:
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, failure = None, None
        if isinstance(op, _SwitchOp):
            live = _switched(op, trace)
        elif isinstance(op, _OpenOp):
            try:
                value = held.enter_context(opened(op.sources))
            except Exception as exc:
                failure = exc
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
) -> AsyncIterator[RunStreamEvent | Ended]:
    """Like `drive_async`, streaming; the last item yielded is how the loop ended."""
    trace = start_run(live, state)
    try:
        async with AsyncExitStack() as held:  # closed too when the caller stops iterating
            async for item in _stream_async(live, loop, trace, held):
                if isinstance(item, Ended):
                    end_run(trace, item.state, None)
                    trace = None
                yield item
    except BaseException as exc:
        end_run(trace, getattr(exc, "state", None), _failure(exc))
        raise


async def _stream_async(
    live: Live, loop: Loop, trace: RunTrace | None, held: AsyncExitStack
) -> AsyncIterator[RunStreamEvent | Ended]:
    value: Any = None
    failure: Exception | None = None
    while True:
        try:
            op = loop.send(value) if failure is None else loop.throw(failure)
        except StopIteration as stop:
            yield stop.value
            return
        value, failure = None, None
        if isinstance(op, _SwitchOp):
            live = _switched(op, trace)
        elif isinstance(op, _OpenOp):
            try:
                value = await held.enter_async_context(aopened(op.sources))
            except Exception as exc:
                failure = exc
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


def _switched(op: _SwitchOp, trace: RunTrace | None) -> Live:
    """A handoff: the next agent's model and limits, with the trace told."""
    if trace is not None:
        trace.handoff(op.live)
    return op.live
