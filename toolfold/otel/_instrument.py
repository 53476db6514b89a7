"""The OpenTelemetry tracer behind `toolfold.otel.instrument` (see the package docstring)."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import inspect
import json
import re
import threading
import time
from collections.abc import Awaitable, Sequence
from typing import Any

from toolfold._errors import ProviderError
from toolfold._extras import raise_missing_extra

try:
    from opentelemetry import context as otel_context
    from opentelemetry import metrics, trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError as exc:  # the otel extra is not installed, or fails to import
    raise_missing_extra(exc, "otel", "toolfold.otel", ("opentelemetry",))

from toolfold.runtime._planner import Planner
from toolfold.runtime.core._messages import (
    Message,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._state import CallState, RunState
from toolfold.runtime.drive._executor import ToolJob, ToolOutcome, with_tool
from toolfold.runtime.drive._loop import Live
from toolfold.runtime.drive._trace import set_tracer
from toolfold.toolkit._results import exception_text
from toolfold.toolkit._tool import Tool

_SCOPE = "toolfold"

#: The phases of a sub-run an interruption stopped midway (kept to resume from), as
#: against one that ended or waits for its caller.
_CUT_PHASES = frozenset(("new", "awaiting_model", "running_tools", "validating_output"))


def instrument(
    tracer_provider: Any = None, meter_provider: Any = None, *, capture_content: bool = False
) -> None:
    """Trace every run started from now on.

    Args:
        tracer_provider: An OpenTelemetry ``TracerProvider`` (default: the global one).
        meter_provider: A ``MeterProvider`` (default: the global one).
        capture_content: Also record messages, tool arguments and results
            (they may hold personal data; off by default).
    """
    set_tracer(_OTelTracer(tracer_provider, meter_provider, capture_content))


def uninstrument() -> None:
    """Stop tracing runs started from now on."""
    set_tracer(None)


def is_instrumented() -> bool:
    """Whether runs are traced now."""
    from toolfold.runtime.drive._trace import _TRACER

    return isinstance(_TRACER[0], _OTelTracer)


def _provider(model_name: str) -> str:
    return model_name.partition(":")[0] if ":" in model_name else model_name


class _OTelTracer:
    def __init__(self, tracer_provider: Any, meter_provider: Any, capture: bool) -> None:
        self.tracer = trace.get_tracer(_SCOPE, tracer_provider=tracer_provider)
        meter = metrics.get_meter(_SCOPE, meter_provider=meter_provider)
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Tokens used per request"
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="Model request duration"
        )
        self.capture = capture
        # The open execute_tool spans by the id a sub-run they make gets
        # ("<run id>/<call id>", see `Agent.as_tool`; "@<step>" follows a call id a model
        # reused, and only the current step's calls are here): the sub-run nests under its
        # call's span, whatever thread or loop runs it. Two live runs may share a run id
        # (a caller's own id, one saved state resumed twice at once): a key then holds
        # the spans of each, and the one current where the sub-run starts is its parent.
        self.calls: dict[str, list[Any]] = {}
        self.lock = threading.Lock()

    def retrying(self, retry: int, wait: float, cause: BaseException | None) -> None:
        """A ``toolfold.retry`` event on the span current where the request is sent again
        (the chat span of the model call): which retry, the wait, and the failed attempt's
        error type and status (no text: a provider's message may quote the content)."""
        span = trace.get_current_span()
        if not span.is_recording():
            return
        attributes: dict[str, Any] = {"toolfold.retry.number": retry, "toolfold.retry.wait": wait}
        if cause is not None:
            attributes["error.type"] = type(cause).__qualname__
            status = getattr(cause, "status_code", None)
            if isinstance(status, int):
                attributes["http.response.status_code"] = status
        span.add_event("toolfold.retry", attributes)

    def start_run(self, live: Live, state: RunState) -> _RunTrace:
        run_id = state.run_id
        parent = self._call_span(run_id)
        if parent is None and "@" in run_id:
            parent = self._call_span(run_id.rpartition("@")[0])
        return _RunTrace(self, live, state, parent)

    def _call_span(self, key: str) -> Any:
        """The open execute_tool span whose call's sub-run has id ``key``; None when there
        is none, or when several runs have one and none is current here (the sub-run's
        span then nests under what is current, as any run's)."""
        with self.lock:
            spans = tuple(self.calls.get(key, ()))
        if len(spans) == 1:
            return spans[0]
        current = trace.get_current_span()
        return next((span for span in spans if span is current), None)

    def opened(self, key: str, span: Any) -> None:
        """``span`` is the open execute_tool span of the call whose sub-run has id ``key``."""
        with self.lock:
            self.calls.setdefault(key, []).append(span)

    def closed(self, key: str, span: Any) -> None:
        """``span`` (see `opened`) ended."""
        with self.lock:
            spans = self.calls.get(key)
            if spans is None:
                return
            with contextlib.suppress(ValueError):
                spans.remove(span)
            if not spans:
                del self.calls[key]


#: The step whose call runs the code here (set while a traced tool runs): a sub-run
#: started in it learns from it whether the caller left its stream (`_ToolsTrace.abandon`).
_CALLER: contextvars.ContextVar[_ToolsTrace | None] = contextvars.ContextVar(
    "toolfold_otel_caller", default=None
)


class _RunTrace:
    def __init__(self, owner: _OTelTracer, live: Live, state: RunState, parent: Any) -> None:
        self.owner = owner
        self.caller = _CALLER.get()
        self.run_id = state.run_id
        self.root = self.span = self._agent_span(
            live, None if parent is None else trace.set_span_in_context(parent)
        )
        self.context = trace.set_span_in_context(self.span)
        self.open: set[_ToolsTrace] = set()
        # What the state had used before this invocation: a resumption's span counts its own.
        self.usage_before = state.usage

    def _agent_span(self, live: Live, context: Any) -> Any:
        # A workflow's run has its planner in the model's seat: no model calls to trace.
        self.workflow = isinstance(live.model, Planner)
        self.model = live.model.name
        self.provider = _provider(self.model)
        self.request_model = self.model.partition(":")[2] or self.model
        name = live.name or "agent"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.conversation.id": self.run_id,
        }
        if self.workflow:
            attributes["toolfold.workflow"] = True
        else:
            attributes["gen_ai.provider.name"] = self.provider
            attributes["gen_ai.request.model"] = self.request_model
        return self.owner.tracer.start_span(
            f"invoke_agent {name}", context=context, kind=SpanKind.INTERNAL, attributes=attributes
        )

    def model_call(self, request: ModelRequest) -> _CallTrace | _NoCall:
        return _NO_CALL if self.workflow else _CallTrace(self, request)

    def tools(self, jobs: Sequence[ToolJob]) -> _ToolsTrace:
        return _ToolsTrace(self, jobs)

    def settled(self, calls: Sequence[CallState]) -> None:
        """Calls settled without running (an unknown tool, bad arguments, a denial):
        each an execute_tool span of no length, under the agent span as the others."""
        tracer, capture, now = self.owner.tracer, self.owner.capture, time.time_ns()
        for settled in calls:
            result = settled.result
            if result is None:
                continue
            call = settled.call
            attributes = _tool_attributes(call, capture)
            if capture:
                attributes["gen_ai.tool.call.result"] = result.content
            span = tracer.start_span(
                f"execute_tool {call.name}",
                context=self.context,
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=now,
            )
            if result.is_error:
                outcome = settled.outcome or "error"
                span.set_attribute("error.type", outcome)
                span.set_status(
                    Status(StatusCode.ERROR, result.content[:200] if capture else outcome)
                )
            span.end(end_time=now)

    def handoff(self, live: Live) -> None:
        """The run goes on with ``live``'s agent: its spans nest under a new agent span."""
        name = live.name or "agent"
        self.root.add_event("gen_ai.handoff", {"gen_ai.agent.name": name})
        if self.span is not self.root:
            self.span.end()
        self.span = self._agent_span(live, trace.set_span_in_context(self.root))
        self.span.set_attribute("toolfold.handoff", True)
        self.context = trace.set_span_in_context(self.span)

    def abandoned(self) -> bool:
        """Whether the caller of a run above this one left its stream (this run stops
        because of it: not Ctrl-C, not a cancellation of its own, not its error)."""
        caller = self.caller
        return caller is not None and caller.is_abandoned()

    def end(self, state: RunState | None, error: BaseException | None) -> None:
        if error is not None and _is_interrupt(error) and self.abandoned():
            error = None  # (as the stopped stream's own run: the caller chose to stop)
        for tools in list(self.open):  # a tool raised out of the step (on_tool_error="raise")
            tools.end(())
        if self.span is not self.root:
            self.span.end()
        span = self.root
        if state is not None:
            span.set_attribute("toolfold.run.phase", state.phase)
            if state.finish_reason:
                span.set_attribute("toolfold.run.finish_reason", state.finish_reason)
            # this invocation's (a resumption's state holds the earlier turns' usage too)
            used, before = state.usage, self.usage_before
            span.set_attribute(
                "gen_ai.usage.input_tokens", max(0, used.input_tokens - before.input_tokens)
            )
            span.set_attribute(
                "gen_ai.usage.output_tokens", max(0, used.output_tokens - before.output_tokens)
            )
        if error is not None:
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, _describe(error, self.owner.capture)))
        span.end()


class _ToolsTrace:
    """One step's execute_tool spans: opened when the calls start, ended with their outcomes."""

    def __init__(self, run: _RunTrace, jobs: Sequence[ToolJob]) -> None:
        self.run = run
        self.left = False  # (`abandon`)
        self.started = time.time_ns()
        tracer, capture, owner = run.owner.tracer, run.owner.capture, run.owner
        self.spans: dict[str, Any] = {}
        for job in jobs:
            call = job.invocation.call
            attributes = _tool_attributes(call, capture)
            span = tracer.start_span(
                f"execute_tool {call.name}",
                context=run.context,
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=self.started,
            )
            self.spans[call.id] = span
            owner.opened(f"{run.run_id}/{call.id}", span)
        # Each call runs with its span current, so spans the tool makes (a database
        # client's, an HTTP client's) nest under it.
        self.jobs = tuple(
            [with_tool(job, _current(self.spans[job.invocation.call.id], self)) for job in jobs]
        )
        run.open.add(self)

    def abandon(self) -> None:
        self.left = True

    def is_abandoned(self) -> bool:
        """Whether the caller left the stream of this step's run, or of a run above it."""
        return self.left or self.run.abandoned()

    def end(self, outcomes: Sequence[ToolOutcome]) -> None:
        self.run.open.discard(self)
        owner, prefix = self.run.owner, f"{self.run.run_id}/"
        for call_id, span in self.spans.items():
            owner.closed(prefix + call_id, span)
        now, clock = time.time_ns(), time.monotonic()
        for outcome in outcomes:
            child = outcome.child
            if child is not None and child.phase in _CUT_PHASES:
                continue  # a sub-run kept where an interruption stopped it: not ended
            span = self.spans.pop(outcome.call_id, None)
            if span is None:
                continue
            if self.run.owner.capture:
                span.set_attribute("gen_ai.tool.call.result", outcome.content)
            if outcome.is_error:
                span.set_attribute("error.type", outcome.outcome)
                shown = outcome.content[:200] if self.run.owner.capture else outcome.outcome
                span.set_status(Status(StatusCode.ERROR, shown))
            # when the call ended, on the wall clock spans use
            ended = now - int((clock - outcome.ended) * 1e9) if outcome.ended else now
            span.end(end_time=max(self.started, ended))
        for span in self.spans.values():  # no outcome: the step was cut short
            span.set_attribute("error.type", "interrupted")
            span.set_status(Status(StatusCode.ERROR, "the step ended before this call"))
            span.end(end_time=now)
        self.spans = {}


def _tool_attributes(call: ToolCallPart, capture: bool) -> dict[str, Any]:
    """An execute_tool span's attributes for ``call`` (its arguments with ``capture``)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
    }
    if capture:
        attributes["gen_ai.tool.call.arguments"] = call.arguments_text
    return attributes


def _current(span: Any, step: _ToolsTrace) -> Any:
    """What makes a copy of a tool whose calls run with ``span`` current (and ``step``,
    the step of the call, as the caller of the sub-runs it starts: `_CALLER`).

    Attached where the call runs (a worker thread, the call's task, the
    caller's thread), in the context the executor gives the call: what the
    tool's function sees, as the tool's own copy of the caller's context.
    """

    def wrap(tool: Tool[..., Any]) -> Tool[..., Any]:
        invoke = tool.invoke  # (a subclass's own, too)
        traced = copy.copy(tool)  # its class and marks kept

        def current(arguments: Any, context: Any = None) -> Any:
            token = otel_context.attach(trace.set_span_in_context(span))
            caller = _CALLER.set(step)
            try:
                value = invoke(arguments, context)
            finally:
                _CALLER.reset(caller)
                otel_context.detach(token)
            # A sync function may return an awaitable (a coroutine of its own): the
            # executor awaits it after this returns, wherever it runs: under the span too.
            return _under(span, step, value) if inspect.isawaitable(value) else value

        async def current_async(arguments: Any, context: Any = None) -> Any:
            token = otel_context.attach(trace.set_span_in_context(span))
            caller = _CALLER.set(step)
            try:
                return await invoke(arguments, context)
            finally:
                _CALLER.reset(caller)
                otel_context.detach(token)

        traced.__dict__["invoke"] = current_async if tool.is_async else current
        return traced

    return wrap


async def _under(span: Any, step: _ToolsTrace, awaitable: Awaitable[Any]) -> Any:
    """``await awaitable`` with ``span`` current (``step`` the caller, as in `_current`)."""
    token = otel_context.attach(trace.set_span_in_context(span))
    caller = _CALLER.set(step)
    try:
        return await awaitable
    finally:
        _CALLER.reset(caller)
        otel_context.detach(token)


class _NoCall:
    """A workflow planner's decision: not a model call, so no span and no metrics."""

    def attach(self) -> object:
        return None

    def detach(self, token: object) -> None:
        pass

    def end(
        self,
        response: ModelResponse | None,
        error: BaseException | None,
        usage: Usage | None = None,
    ) -> None:
        pass


_NO_CALL = _NoCall()


class _CallTrace:
    def __init__(self, run: _RunTrace, request: ModelRequest) -> None:
        self.run = run
        self.started = time.monotonic()
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": run.provider,
            "gen_ai.request.model": run.request_model,
        }
        if run.owner.capture:
            attributes["gen_ai.input.messages"] = _messages_json(request.messages)
        self.span = run.owner.tracer.start_span(
            f"chat {run.request_model}",
            context=run.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )

    def attach(self) -> object:
        return otel_context.attach(trace.set_span_in_context(self.span))

    def detach(self, token: object) -> None:
        otel_context.detach(token)  # type: ignore[arg-type]

    def end(
        self,
        response: ModelResponse | None,
        error: BaseException | None,
        usage: Usage | None = None,
    ) -> None:
        span, run = self.span, self.run
        common = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": run.provider,
            "gen_ai.request.model": run.request_model,
        }
        if response is not None:
            usage = response.usage
            span.set_attribute("gen_ai.response.model", response.model_name or run.request_model)
            if response.response_id:
                span.set_attribute("gen_ai.response.id", response.response_id)
            span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
            if run.owner.capture:
                span.set_attribute(
                    "gen_ai.output.messages",
                    _messages_json((response.message,), response.finish_reason),
                )
        if usage is not None:  # (a failed stream's: what the provider had reported, billed)
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            run.owner.tokens.record(usage.input_tokens, {**common, "gen_ai.token.type": "input"})
            run.owner.tokens.record(usage.output_tokens, {**common, "gen_ai.token.type": "output"})
        if error is not None and _is_interrupt(error) and run.abandoned():
            error = GeneratorExit()  # (the caller of a run above left its stream)
        if error is not None:
            common = {**common, "error.type": type(error).__qualname__}
            span.set_attribute("error.type", type(error).__qualname__)
            if isinstance(error, ProviderError) and error.status_code is not None:
                span.set_attribute("http.response.status_code", error.status_code)
            span.set_status(Status(StatusCode.ERROR, _describe(error, run.owner.capture)))
        run.owner.duration.record(time.monotonic() - self.started, common)
        span.end()


def _is_interrupt(error: BaseException) -> bool:
    """Whether ``error`` is what stops a sub-run from outside: Ctrl-C (`check_interrupt`
    raises one in a blocking sub-run whose caller left) or a cancellation."""
    return isinstance(error, KeyboardInterrupt) or type(error).__name__ == "CancelledError"


def _describe(error: BaseException, capture: bool) -> str:
    """A span status's description of ``error`` (an interruption has no message of its own).

    Its message only with ``capture`` (content capture): a tool's exception
    text may hold its arguments; without, the exception's class names it, and
    a provider's error what is no content (`_provider_summary`).
    """
    if isinstance(error, GeneratorExit):
        return "abandoned: the caller stopped the stream before the response ended"
    if type(error).__name__ == "CancelledError":  # asyncio's, or anyio's
        return "cancelled before the response ended"
    if isinstance(error, KeyboardInterrupt):
        return "interrupted before the response ended"
    if capture:
        return exception_text(error)[:200]
    if isinstance(error, ProviderError):
        return _provider_summary(error)
    return type(error).__qualname__


#: A provider's error code shown without capture: an identifier, not a message.
_CODE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def _provider_summary(error: ProviderError) -> str:
    """``error`` without its message (the provider's text may echo the request's content):
    the provider, the HTTP status, the class and the provider's error code, e.g.
    ``openai: HTTP 429 RateLimitError (rate_limit_exceeded)``."""
    parts = [f"{error.provider}:"] if error.provider else []
    if error.status_code is not None:
        parts.append(f"HTTP {error.status_code}")
    parts.append(type(error).__qualname__)
    if error.code and _CODE.fullmatch(error.code):
        parts.append(f"({error.code})")
    return " ".join(parts)


def _messages_json(messages: Sequence[Message], finish_reason: str | None = None) -> str:
    """Messages as the GenAI conventions' ``gen_ai.input.messages`` / ``output.messages``
    JSON (an output message carries its ``finish_reason``)."""
    finish = {} if finish_reason is None else {"finish_reason": finish_reason}
    return json.dumps(
        [
            {"role": m.role, "parts": [_part(p) for p in m.parts if _shown(p)], **finish}
            for m in messages
        ],
        ensure_ascii=False,
    )


def _shown(part: Part) -> bool:
    """Whether a part is recorded: a reasoning part with neither text nor
    signature only marks provider data (an audio id, an output item)."""
    return not isinstance(part, ReasoningPart) or bool(part.text or part.signature)


def _part(part: Part) -> dict[str, Any]:
    """One message part as the conventions' schema spells it."""
    if isinstance(part, ToolCallPart):
        arguments = part.arguments if part.arguments is not None else part.arguments_text
        return {"type": "tool_call", "id": part.id, "name": part.name, "arguments": arguments}
    if isinstance(part, ToolResultPart):
        return {"type": "tool_call_response", "id": part.call_id, "response": part.content}
    if isinstance(part, (TextPart, ReasoningPart)):
        return {"type": part.kind, "content": part.text}
    # an image or a file: what it is, not its bytes
    return {"type": part.kind, "mime_type": part.media_type}
