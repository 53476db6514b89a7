"""The activities: each model request and each tool call of an agent, on the worker.

Activity names are stable (a running workflow finds its activities by name):
``<agent>__model_request`` and ``<agent>__tool__<tool name>``; a sub-run's
``as_tool(output=...)`` function is ``<agent>.<tool name>__output``; an
agent's tool sources (MCP servers) are listed by ``<agent>__list_tools``, and
the calls of their tools, whose names are known only once listed, go to one
dynamic activity that answers every ``<agent>__tool__<tool name>`` without an
activity of its own. The live
objects (the model, the tools, their deps) are the worker's own: its agent
resolves them from the names the workflow's state carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import attrs
from cattrs.gen import make_dict_unstructure_fn, override

from toolfold import _errors as errors
from toolfold._extras import raise_missing_extra

try:
    from temporalio import activity
    from temporalio.api.common.v1 import Payload, Payloads
    from temporalio.common import RawValue
    from temporalio.exceptions import ApplicationError, FailureError
except ImportError as exc:  # the temporal extra is not installed, or fails to import
    raise_missing_extra(exc, "temporal", "toolfold.integrations.temporal", ("temporalio",))

from toolfold._errors import (
    ProviderError,
    RunError,
    ToolDefinitionError,
    ToolfoldError,
    gives_up,
    restored_error,
)
from toolfold.integrations.temporal._nested import (
    ListedSource,
    Listing,
    SubRunTool,
    node,
    response_of,
    walk,
)
from toolfold.runtime._agent import Agent
from toolfold.runtime._agent_tool import _sub_run as sub_run_result
from toolfold.runtime._agent_tool import agent_label
from toolfold.runtime._model import Model
from toolfold.runtime._model import model as model_of
from toolfold.runtime._planner import Planner
from toolfold.runtime._workflow import Workflow
from toolfold.runtime.core._effects import CallModel, ToolInvocation
from toolfold.runtime.core._events import ToolReturned
from toolfold.runtime.core._messages import Message, Usage
from toolfold.runtime.core._request import ModelResponse, without_cut_calls
from toolfold.runtime.core._serialize import converter, structure
from toolfold.runtime.core._state import RunState
from toolfold.runtime.core._stop import TokenBudget
from toolfold.runtime.core._stream import StreamEvent, StreamState, finish_stream, fold_stream
from toolfold.runtime.drive._executor import (
    ToolJob,
    failed_outcome,
    made_outcome,
    returned,
    run_calls,
)
from toolfold.runtime.drive._loop import billed_usage, mask_of, masked_outcomes
from toolfold.runtime.drive._open import listing_off_loop, source_closer
from toolfold.runtime.drive._shells import call_id_maker, reported
from toolfold.toolkit._context import RunContext

T = TypeVar("T")

#: The longest ``retry_after`` given to Temporal as the next retry delay, in
#: seconds: a day, the longest wait a `RetryPolicy.max_retry_after` may honour
#: (the agent's own policy is not known inside the activity). A longer wait (or
#: ``inf``) makes the failure non-retryable, as a local run hands such a wait to
#: the caller: an activity's ``start_to_close_timeout`` bounds each attempt, not
#: the wait between attempts, so a capped delay left the workflow waiting for good.
MAX_RETRY_DELAY = 86_400
PAYLOAD_LIMIT = 2 * 1024 * 1024
"""Temporal's limit on one payload (the server's ``limit.blobSize.error``, 2 MiB by default)."""
PAYLOAD_TOO_LARGE = "PayloadTooLargeError"
"""The failure type of a run whose next activity input is over `PAYLOAD_LIMIT` (and of a
query or an update whose answer would be over its limit, and of a model activity whose
answer is: `_sent_answer`)."""


def payloads_size(payloads: Sequence[Payload]) -> int:
    """The size Temporal counts for ``payloads`` against `PAYLOAD_LIMIT` (as the worker measures).

    Measured as the payload converter made them, before a payload codec: a
    codec that grows payloads (base64, encryption's overhead) is not counted.
    """
    return Payloads(payloads=payloads).ByteSize()


@attrs.frozen
class ToolCallInput:
    """What a tool activity needs: the invocation and the run it belongs to.

    Attributes:
        invocation: The core's effect (call, index, step, idempotency key).
        run_id: The run's id.
        messages: The conversation so far (the tool's `RunContext.messages`).
        token_budget: What is left of the run's tree budget for the call's
            step (the tool's `RunContext.token_budget`, see `handed_budget`);
            None for a run without one. Left out of the payload when None,
            so inputs recorded before it existed read back the same.
    """

    invocation: ToolInvocation
    run_id: str
    messages: tuple[Message, ...] = ()
    token_budget: TokenBudget | None = None


# ``token_budget`` only when set: the payload of a run without a tree budget is what it
# always was (registered before any class holding a `ToolCallInput` gets its hook).
converter.register_unstructure_hook(
    ToolCallInput,
    make_dict_unstructure_fn(ToolCallInput, converter, token_budget=override(omit_if_default=True)),
)


@attrs.frozen
class SourceCallInput:
    """What the call activity of a tool source's tool needs.

    Attributes:
        node: The node whose source listed the tool (its activity prefix).
        source: The source's index among the agent's sources.
        spec: The tool's entry in the recorded listing (the tool is made from it).
        call: The call, as for any tool activity.
    """

    node: str
    source: int
    spec: Mapping[str, Any]
    call: ToolCallInput


@attrs.frozen
class ModelCallInput:
    """What the model activity of an agent other than the run's first (a sub-run's, a handoff
    target's) needs: the request and where its run is.

    Attributes:
        effect: The core's effect (the request, its step and idempotency key).
        path: Tool name and call id per level from the top run, as in
            `SubRunEvent.path`: ``("views", "call_3")``; () for the top run
            (a handoff target's request).
        counted: Whether the activity returns a `ModelAnswer`, with the usage
            of the attempts whose stream failed after their provider reported
            it, and carries them in its final failure (set by workflows that
            took the patch ``toolfold-dropped-attempts-counted``; left out of
            the payload when False, so inputs recorded before read back the
            same; a worker from before ignores it and answers with the bare
            response). The first agent's request, a `CallModel`, carries the
            same flag beside its fields.
    """

    effect: CallModel
    path: tuple[str, ...]
    counted: bool = False


# ``counted`` only when set: the payload of a request recorded without it is what it always was.
converter.register_unstructure_hook(
    ModelCallInput,
    make_dict_unstructure_fn(ModelCallInput, converter, counted=override(omit_if_default=True)),
)


@attrs.frozen
class ModelAnswer:
    """What a model activity asked to count its dropped attempts returns (`ModelCallInput.counted`,
    or a first agent's request with ``"counted": true``: `counted_request`).

    Attributes:
        response: The model's response, as the activity returns it otherwise.
        dropped: The usage each earlier attempt of the request reported before
            its stream failed (the provider billed them), in attempt order:
            the workflow records each as an `AttemptDropped` before the
            response, as a local run records a cut stream it asked again.
    """

    response: ModelResponse
    dropped: tuple[Usage, ...] = ()


DROPPED = "toolfold_dropped_usage"
"""The key of the detail (heartbeat, failure) that carries a model request's dropped usages."""


def dropped_detail(dropped: Sequence[Usage]) -> dict[str, Any]:
    """The heartbeat or failure detail carrying ``dropped`` (see `dropped_in`)."""
    return {DROPPED: [converter.unstructure(usage) for usage in dropped]}


def is_dropped_detail(detail: object) -> bool:
    """Whether ``detail`` (a plain JSON value) is one `dropped_detail` made."""
    return isinstance(detail, dict) and set(detail) == {DROPPED}


def dropped_in(details: Sequence[Any]) -> tuple[Usage, ...]:
    """The dropped usages `dropped_detail` put among ``details`` (plain JSON values), or ().

    A detail that does not read as usages (none is expected) counts nothing.
    """
    for detail in details:
        if is_dropped_detail(detail):
            try:
                return tuple(converter.structure(u, Usage) for u in detail[DROPPED])
            except Exception:
                return ()
    return ()


@attrs.frozen
class OutputInput:
    """What an output activity needs: the call whose sub-run finished, and its final state."""

    call_id: str
    state: RunState


@attrs.frozen
class StreamContext:
    """Which model request an `EventStreamHandler` is streaming.

    Attributes:
        agent: The agent's name (as in activity names).
        run_id: The run's id (the workflow id given to `TemporalAgent.start`).
        step: The step this request will be (1 for the first).
        key: The request's idempotency key, ``<run id>:<step>:model``, unique
            across a conversation continued under one run id: its step counts on
            from the model responses of the run's history (``step`` does not).
        attempt: Temporal's attempt number of the model activity (1 for the
            first). A retried request streams again from the start: a
            consumer drops what an earlier attempt of the same ``key`` sent.
        deps: The `TemporalAgent`'s ``deps`` (the worker's).
        path: Where the request's run is: () for the top run; for a
            workflow step or an agent used as a tool, its tool name and call
            id per level from the top, as `SubRunEvent.path` in a local stream.
    """

    agent: str
    run_id: str
    step: int
    key: str
    attempt: int
    deps: Any = None
    path: tuple[str, ...] = ()


EventStreamHandler = Callable[[StreamContext, AsyncIterator[StreamEvent]], Awaitable[None]]
"""``async def handler(context, events)``: the side channel of a durable run's model output.

Called inside the model activity, on the worker, with the model's stream
events (`TextDelta`, `ToolCallStart`... as `agent.stream` yields them) while
they arrive; it sends them wherever the caller listens (a message queue, a
websocket, a pub/sub topic). The workflow never sees them: it gets the final
response, as without streaming.
"""


def model_activity_name(agent: str) -> str:
    """The model request activity's name for ``agent``."""
    return f"{agent}__model_request"


def tool_activity_name(agent: str, tool: str) -> str:
    """The activity name of ``tool`` for ``agent``."""
    return f"{agent}__tool__{tool}"


def list_activity_name(node: str) -> str:
    """The name of the activity listing the tools of ``node``'s tool sources."""
    return f"{node}__list_tools"


def output_activity_name(sub_run: str) -> str:
    """The name of the activity running the ``as_tool(output=...)`` function of ``sub_run``'s node."""
    return f"{sub_run}__output"


def make_activities(
    name: str,
    agent: Agent | Workflow,
    *,
    heartbeat: timedelta,
    max_result_bytes: int | None = 1_000_000,
    deps: Any = None,
    stream: EventStreamHandler | None = None,
    models: Mapping[str, Model] | None = None,
    payload_limit: int | None = PAYLOAD_LIMIT,
) -> list[Callable[..., Any]]:
    """The activities of ``agent`` and of every sub-run below it.

    For the agent (or workflow) itself: the model activity and one activity
    per tool (per step of a workflow), those that run a sub-run included
    (runs recorded before sub-runs were driven in the workflow call them).
    For each sub-run (``<name>.<tool>...``) and each agent a handoff reaches
    (``<name>@<agent>``): its model activity, and one per tool that does not
    run a sub-run of its own. For each with tool sources: its listing
    activity. For each agent used as a tool with
    ``as_tool(output=...)``: its output activity. ``models``: the sub-runs'
    models by node name (default: `nested_models`). ``payload_limit``: the
    largest result an activity returns (None with external storage): a
    model's answer over it fails, a tool's result is an error result.
    """
    every = heartbeat.total_seconds() / 3
    top = node(name, agent)
    models = nested_models(name, agent) if models is None else models
    limit = payload_limit  # (of the model's answers; the tools' results have both sizes)
    made = [_model_activity(name, agent._options.model, deps, stream, every, limit, nested=False)]
    sizes = (max_result_bytes, limit)
    mask = mask_of(agent._options.model)  # (the node's model's key a tool quotes: `_called`)
    made += [_tool_activity(name, t, deps, every, *sizes, mask) for t in top.tools.values()]
    if top.sources:
        made.append(_list_activity(name, top.sources, every))
    for sub, _ in walk(top):
        model = models[sub.name]
        made.append(_model_activity(sub.name, model, deps, stream, every, limit, nested=True))
        made += [
            _tool_activity(sub.name, t, deps, every, *sizes, mask_of(model))
            for t in sub.tools.values()
            if t.name not in sub.nested
        ]
        if sub.sources:
            made.append(_list_activity(sub.name, sub.sources, every))
    for each in (top, *(sub for sub, _ in walk(top))):
        made += [
            _output_activity(run, tool, every, *sizes)
            for tool, run in each.nested.items()
            if run.output is not None
        ]
    return made


def durable_model(target: Agent | Workflow) -> Model:
    """``target``'s model, built with ``retry=0`` when given as a string.

    Temporal owns the retries: the HTTP transport inside an activity must not
    retry too.
    """
    if isinstance(target, Agent) and isinstance(target.model, str):
        return model_of(target.model, retry=0)
    return target._options.model


def nested_models(name: str, agent: Agent | Workflow) -> dict[str, Model]:
    """The model of every sub-run below ``agent`` (see `durable_model`), by node name."""
    return {sub.name: durable_model(target) for sub, target in walk(node(name, agent))}


def _model_activity(
    name: str,
    model: Model,
    deps: Any,
    stream: EventStreamHandler | None,
    every: float,
    limit: int | None,
    *,
    nested: bool,
) -> Callable[..., Any]:
    if isinstance(model, Planner):
        stream = None  # a workflow's decisions are not a model's output: nothing to stream

    async def request(effect: CallModel, path: tuple[str, ...], counted: bool) -> Any:
        # ``counted``: the workflow records the usage of the attempts whose stream failed
        # after the provider reported it (billed): each such attempt heartbeats the
        # usages so far, which the next attempt reads back (Temporal keeps the last
        # heartbeat's details across retries); the answer or the final failure carries them.
        dropped = list(dropped_in(activity.info().heartbeat_details)) if counted else []
        folded = [StreamState()]  # this attempt's stream so far (`_streamed` keeps it)
        if stream is None:
            work = model.request(effect.request)
        else:
            run_id = effect.key.rsplit(":", 2)[0]  # the key is <run id>:<step>:model
            attempt = activity.info().attempt
            context = StreamContext(name, run_id, effect.step, effect.key, attempt, deps, path)
            work = _streamed(model, effect, stream, context, folded)
        details = (dropped_detail(dropped),) if dropped else ()
        try:
            # A call the provider cut never runs (as in a local run, see the loop):
            # dropped here, so the recorded result already lacks it and a history
            # recorded before replays the result it recorded.
            answer = without_cut_calls(await _heartbeating(work, every, details))
        except BaseException as exc:
            # Read here, not once the stream's task saw the failure: a cancellation
            # reaches this attempt before the task it cancels.
            # (an answer the provider ended abnormally, whole or streamed: what it reported
            # for it, as a local run counts it: `billed_usage`)
            cut = billed_usage(exc) if counted else None
            if cut is None and counted and stream is not None:
                cut = reported(folded[0])
            if cut is not None:  # kept for the next attempt (a failure's last heartbeat is sent)
                dropped.append(cut)
                activity.heartbeat(dropped_detail(dropped))
            if isinstance(exc, asyncio.CancelledError):
                if dropped and not path and _cancel_requested():
                    raise _cancelled_failure(dropped) from exc
                raise
            if not isinstance(exc, Exception):
                raise
            if isinstance(exc, ApplicationError):  # one the model or handler raised: as is
                if not dropped:
                    raise
                raise _with_dropped_detail(exc, dropped) from exc
            if isinstance(exc, FailureError):  # Temporal's own
                raise
            raise _model_failure(exc, dropped) from exc
        result = ModelAnswer(answer, tuple(dropped)) if counted else answer
        return _sent_answer(name, result, answer.usage, limit)

    if nested:

        @activity.defn(name=model_activity_name(name))
        async def nested_request(given: ModelCallInput) -> Any:
            return await request(given.effect, given.path, given.counted)

        return nested_request

    @activity.defn(name=model_activity_name(name))
    async def model_request(given: RawValue) -> Any:
        # A `CallModel`'s payload (as recorded before dropped attempts were counted), with
        # ``"counted": true`` beside its fields when asked to count them (`counted_request`).
        effect, counted = _top_request(given)
        return await request(effect, (), counted)

    return model_request


def _sent_answer(name: str, result: Any, usage: Usage, limit: int | None) -> RawValue:
    """A model activity's ``result``, encoded once (as the worker sends it), checked against ``limit``.

    Temporal refuses a result over its payload limit (``TMPRL1103`` in the
    worker's log) and retries the activity: the request, paid again, until
    the retries run out, then a bare failure. Measured here, it fails at once,
    not retried; a counted request's failure carries the answer's ``usage``
    (billed) with its dropped attempts, which the run's state counts.

    Raises:
        ApplicationError: Of type `PAYLOAD_TOO_LARGE`, non-retryable, naming
            the activity, the size and the limit.
    """
    payload = _encoded(result)
    # Before the worker's payload codec (not run here): one that grows payloads (base64,
    # encryption's overhead) can take an answer that passes over the limit as sent.
    size = payloads_size([payload])
    if limit is None or size <= limit:
        return RawValue(payload)  # (the worker sends it as it is: no second encoding)
    dropped = (*result.dropped, usage) if isinstance(result, ModelAnswer) else ()
    raise ApplicationError(
        f"the answer of activity {model_activity_name(name)!r} is {size} bytes, over "
        f"Temporal's {limit}-byte payload limit: the request is not retried (the answer "
        "was billed); give ToolfoldPlugin an external_storage, or ask the model for "
        "shorter answers (docs/durable.md, Payloads and long runs)",
        *((dropped_detail(dropped),) if dropped else ()),
        type=PAYLOAD_TOO_LARGE,
        non_retryable=True,
    )


def _encoded(value: Any) -> Payload:
    """``value`` as the activity's result payload: made by the worker's payload converter,
    the bytes the worker sends for it (returned as a `RawValue`, it is not encoded again)."""
    (payload,) = activity.payload_converter().to_payloads([value])
    return payload


def _top_request(given: RawValue | CallModel) -> tuple[CallModel, bool]:
    """The request a top run's model activity got, and whether it counts dropped attempts.

    From Temporal, its JSON, read once: a `CallModel`, with ``"counted": true``
    beside its fields when the workflow asks to count them (`counted_request`).
    A `CallModel` itself: the activity called directly (``ActivityEnvironment``).
    """
    if isinstance(given, CallModel):
        return given, False
    data = activity.payload_converter().from_payload(given.payload)
    effect: CallModel = structure(data, CallModel)
    return effect, isinstance(data, dict) and data.get(_COUNTED) is True


_COUNTED = "counted"


def counted_request(effect: CallModel) -> dict[str, Any]:
    """A top run's model request asking to count its dropped attempts: ``effect``'s payload with
    ``"counted": true`` beside its fields.

    An activity worker from before reads it as the `CallModel` (the flag is a
    field it does not know) and answers with the bare response, which the
    workflow takes as an answer without dropped attempts (`model_answer`).
    """
    return {**converter.unstructure(effect, CallModel), _COUNTED: True}


def model_answer(data: Any) -> ModelAnswer:
    """A counted model activity's result (plain JSON data) as a `ModelAnswer`.

    A bare response (from an activity worker from before counting, during a
    rolling deploy) is an answer without dropped attempts.
    """
    if isinstance(data, dict) and "response" in data:
        answer: ModelAnswer = structure(data, ModelAnswer)
        return answer
    return ModelAnswer(structure(data, ModelResponse))


CANCELLED = "ModelRequestCancelled"
"""The type of the failure a top run's model activity cancelled by its workflow raises when it
has dropped attempts to count: a cancelled activity's own result carries no details
(`_cancelled_failure`)."""


def _cancel_requested() -> bool:
    """Whether this activity is cancelled because its workflow asked (not a worker shutting down)."""
    details = activity.cancellation_details()
    return details is not None and details.cancel_requested


def _cancelled_failure(dropped: Sequence[Usage]) -> ApplicationError:
    """What a model activity its workflow cancelled raises to hand over ``dropped``.

    Temporal's SDK reports a cancelled activity with no details, so it fails
    instead (not retried: its cancellation was asked); the workflow, which
    waits for a cancelled top run's model activity to stop, records them and
    ends cancelled.
    """
    return ApplicationError(
        "the model request was cancelled",
        dropped_detail(dropped),
        type=CANCELLED,
        non_retryable=True,
    )


def _with_dropped_detail(exc: ApplicationError, dropped: Sequence[Usage]) -> ApplicationError:
    """``exc`` (an `ApplicationError` a model or its stream handler raised) carrying ``dropped``."""
    return ApplicationError(
        exc.message,
        *exc.details,
        dropped_detail(dropped),
        type=exc.type,
        non_retryable=exc.non_retryable,
        next_retry_delay=exc.next_retry_delay,
        category=exc.category,
    )


def _model_failure(exc: Exception, dropped: Sequence[Usage]) -> ApplicationError:
    """The failure of a model activity that raised ``exc``, carrying ``dropped`` (if any)."""
    extra = (dropped_detail(dropped),) if dropped else ()
    if isinstance(exc, ProviderError):
        return _application_error(exc, extra)
    if isinstance(exc, ToolfoldError):  # a bad request or configuration: retrying cannot help
        return ApplicationError(
            str(exc), *_details(exc), *extra, type=type(exc).__name__, non_retryable=True
        )
    # What Temporal would make of it (retryable, typed by its bare class name),
    # with its full class name, so the client tells a third-party class from a
    # toolfold one of the same name (`rebuilt_error`).
    return ApplicationError(str(exc), _qualified(exc), *extra, type=type(exc).__name__)


async def _streamed(
    model: Model,
    effect: CallModel,
    handler: EventStreamHandler,
    context: StreamContext,
    folded: list[StreamState],
) -> ModelResponse:
    """The model's response, streamed: every event goes to ``handler`` as it arrives.

    ``folded[0]`` is the stream folded so far, kept up to date event by event:
    the caller reads the usage a stream that failed or was cancelled had
    reported (the request was billed) from it when it sees the failure, which
    for a cancellation is before this coroutine does.
    """

    async def events() -> AsyncIterator[StreamEvent]:
        async for event in model.stream(effect.request):
            folded[0] = fold_stream(folded[0], event)
            yield event

    given = events()
    await handler(context, given)
    async for _ in given:  # a handler that stops early: the response still needs it all
        pass
    return finish_stream(folded[0], call_id_maker(effect.step))


def _tool_activity(
    name: str,
    tool: Any,
    deps: Any,
    every: float,
    max_bytes: int | None,
    limit: int | None,
    mask: Callable[[str], str] | None,
) -> Callable[..., Any]:
    @activity.defn(name=tool_activity_name(name, tool.name))
    async def run_tool(given: ToolCallInput) -> RawValue:  # a `ToolReturned`, encoded
        event = await _called(tool, given, deps, every, mask)
        return _within(event, tool.name, max_bytes, limit)

    return run_tool


async def _called(
    tool: Any,
    given: ToolCallInput,
    deps: Any,
    every: float,
    mask: Callable[[str], str] | None = None,
) -> ToolReturned:
    """Run ``tool`` for the call in ``given``, as a local run runs it; the event it makes,
    with its node's model credentials its text quotes masked by ``mask`` (`Live.mask`:
    the recorded result, which the history keeps and a replay reads, holds none)."""
    invocation = given.invocation
    context: RunContext[Any] = RunContext(
        run_id=given.run_id,
        step=invocation.step,
        call_id=invocation.call.id,
        tool_name=invocation.tool_name,
        messages=given.messages,
        deps=deps,
        idempotency_key=invocation.key,
        token_budget=given.token_budget,
    )
    job = ToolJob(invocation, tool, context)
    try:
        (outcome,) = await _heartbeating(run_calls((job,), max_concurrency=1), every)
    except asyncio.CancelledError as exc:
        if activity.is_cancelled():  # Temporal cancelled the activity (every way it does)
            raise
        # The tool raised CancelledError itself (a library's own, no cancellation):
        # failing the activity had Temporal retry it, and the tool run again, without
        # end. It is the tool's error, which the model reads.
        outcome = failed_outcome(job, exc)
    (outcome,) = masked_outcomes(mask, (outcome,))
    event = returned(outcome)
    if not isinstance(event, ToolReturned):
        # Only runs recorded before sub-runs were driven in the workflow
        # run a sub-agent here (whole, in this activity): it cannot suspend.
        message = (
            f"tool {tool.name!r} is an agent that waits for an approval or a result; "
            "durable runs do not support suspending inside a sub-agent"
        )
        return ToolReturned(outcome.call_id, message, True, "error", outcome.duration)
    return event


def _list_activity(name: str, sources: Sequence[ListedSource], every: float) -> Callable[..., Any]:
    @activity.defn(name=list_activity_name(name))
    async def list_tools() -> Listing:
        made = []
        for source in sources:
            try:
                listing = await _heartbeating(listing_off_loop(source.listing), every)
                source.tools_from(listing)  # a listing the workflow cannot use fails here
            except ToolDefinitionError as exc:  # the server's tools are wrong: retrying cannot help
                raise ApplicationError(
                    str(exc), *_details(exc), type=type(exc).__name__, non_retryable=True
                ) from exc
            except ToolfoldError as exc:  # the server is down or slow: Temporal retries
                raise ApplicationError(str(exc), *_details(exc), type=type(exc).__name__) from exc
            made.append(tuple(listing))
        return tuple(made)

    return list_tools


SOURCE_NOT_HERE = "ToolSourceNotOnThisWorker"
"""The error type of a source call on a worker that lacks the source: Temporal retries the
call (as an activity no worker registers) until a worker that registers it takes it."""


@attrs.frozen
class SourceHost:
    """The tool sources of a node, as its call activity finds them on the worker.

    ``payload_limit``: the largest result the activity returns (None with
    external storage), as `make_activities` takes it.
    """

    sources: tuple[ListedSource, ...]
    deps: Any
    every: float
    max_bytes: int | None
    payload_limit: int | None = PAYLOAD_LIMIT


def source_call_activity(hosts: Mapping[str, SourceHost]) -> Callable[..., Any]:
    """The one dynamic activity calling the tools of every tool source of a worker's agents.

    Stateless: each call opens its source (an MCP session) for the call and
    closes it after, unless it is open already (another call in flight, or
    ``with server:`` around the worker), whose session it shares.
    """

    @activity.defn(dynamic=True)
    async def call_source_tool(args: Sequence[RawValue]) -> RawValue:  # a `ToolReturned`, encoded
        given = activity.payload_converter().from_payload(args[0].payload, SourceCallInput)
        host = hosts.get(given.node)
        if host is None or given.source >= len(host.sources):
            raise ApplicationError(  # retried: a worker that registers it may take it
                f"activity {activity.info().activity_type!r}: no tool source of agent "
                f"{given.node!r} is registered on this worker",
                type=SOURCE_NOT_HERE,
            )
        source = host.sources[given.source]
        await _opened(source, host.every)

        def closing() -> Awaitable[object]:
            return _heartbeating(asyncio.to_thread(source.close), host.every)

        try:
            (tool,) = source.tools_from([given.spec])
            called = given.call.invocation.tool_name
            if tool.name != called:  # named apart by its whole listing (天気 and 時間, "__" alone)
                tool = tool.replace(name=called)
            returned = await _called(tool, given.call, host.deps, host.every)
        except BaseException as exc:
            # A call cancelled (or failing) stays so when the source's close fails too.
            await source_closer(source, closing)(type(exc), exc, exc.__traceback__)
            raise
        try:
            await closing()
        except Exception as failure:
            # The tool has run: failing the activity would have Temporal retry it,
            # and the tool run again. The result stands; the close error is logged.
            activity.logger.warning(
                "closing tool source %r failed after its tool %r returned (the result is "
                "kept: a retry would run the tool again): %s: %s",
                getattr(source, "name", None) or type(source).__name__,
                given.call.invocation.call.name,
                type(failure).__name__,
                failure,
            )
        return _within(returned, tool.name, host.max_bytes, host.payload_limit)

    return call_source_tool


async def _opened(source: ListedSource, every: float) -> None:
    """Open ``source`` on a thread, heartbeating (starting a stdio server may take a while).

    An activity cancelled meanwhile cannot stop the thread: it waits for it,
    and closes what it opened before it stops (else the session would stay
    open, its server process running).
    """
    opening = asyncio.ensure_future(asyncio.to_thread(source.open))
    try:
        await _heartbeating(asyncio.shield(opening), every)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):  # (it failed to open: nothing to close)
            await asyncio.shield(opening)
            await asyncio.shield(asyncio.to_thread(source.close))
        raise


def _output_activity(
    run: SubRunTool, tool: str, every: float, max_bytes: int | None, limit: int | None
) -> Callable[..., Any]:
    extract = run.output
    assert extract is not None

    @activity.defn(name=output_activity_name(run.node.name))
    async def output(given: OutputInput) -> RawValue:  # a `ToolReturned`, encoded
        # What a local run's tool returns once its sub-run finished; the
        # function may block (it is the user's): it runs on a thread.
        response = response_of(run.target, given.state)
        who = agent_label(run.target, tool)
        work = asyncio.to_thread(sub_run_result, response, extract, tool, who)
        made = await _heartbeating(work, every)
        event = ToolReturned(given.call_id, made.content, made.is_error, made_outcome(made))
        return _within(event, tool, max_bytes, limit)  # what it gave is a tool result: alike

    return output


def _within(
    event: ToolReturned, tool: str, max_bytes: int | None, payload_limit: int | None = None
) -> RawValue:
    """``event`` encoded as the activity's result, or an error result's when its result is over
    ``max_bytes``, or its payload over ``payload_limit`` (a ``max_bytes`` above it).

    The result is measured as the payload carries it: its text and its parts
    (an image's or a file's bytes as base64), JSON escapes included (a lone
    surrogate as ``\\udce9``): the payload's bytes less those of the same event
    with neither. The payload is made once: the worker sends it as it is.
    """
    payload = _encoded(event)
    over = None
    if max_bytes is not None:
        bare = _encoded(attrs.evolve(event, content="", parts=()))
        size = len(payload.data) - len(bare.data)
        if size > max_bytes:
            over = (
                f"is {size} bytes, over the {max_bytes}-byte limit for results of durable "
                "runs (Temporal payloads are limited to 2 MB): return a reference to the "
                "data instead, or give ToolfoldPlugin an external_storage and raise "
                "ActivitySettings.max_result_bytes"
            )
    if over is None and payload_limit is not None:
        # Before the payload codec, as `_sent_answer`: a codec's growth is not counted.
        size = payloads_size([payload])
        if size > payload_limit:  # (Temporal would refuse it, and run the tool again)
            over = (
                f"is {size} bytes as its payload, over Temporal's {payload_limit}-byte "
                "payload limit: return a reference to the data instead, or give "
                "ToolfoldPlugin an external_storage"
            )
    if over is None:
        return RawValue(payload)
    message = f"the result of tool {tool!r} {over}"
    return RawValue(_encoded(ToolReturned(event.call_id, message, True, "error", event.duration)))


def _application_error(exc: ProviderError, extra: Sequence[Any] = ()) -> ApplicationError:
    """A provider error as Temporal sees it: retryable or not, with the provider's delay.

    An error asking again cannot fix (`gives_up`: its class, or the provider's
    word, a Gemini per-day quota) fails the workflow at once: under the default
    policy (``maximum_attempts=0``, no limit) it was asked, and paid, without
    end. A ``retry_after`` (a 429's, a 503's) is the next retry delay; one past
    `MAX_RETRY_DELAY` (``inf`` too) is non-retryable with no delay; NaN or a
    negative one is no delay (Temporal's own backoff).
    """
    delay = None
    permanent = gives_up(exc)
    asked = exc.retry_after
    if asked is not None and asked > MAX_RETRY_DELAY:
        permanent = True
    elif asked is not None and asked >= 0:  # not NaN, not negative
        delay = timedelta(seconds=asked)
    return ApplicationError(
        str(exc),
        _qualified(exc),
        *extra,
        type=type(exc).__name__,
        non_retryable=permanent,
        next_retry_delay=delay,
    )


_CLASS = "class:"
"""The prefix of the detail naming the class a model or listing activity failed with."""


def _qualified(exc: BaseException) -> str:
    """The detail naming ``exc``'s class in full: ``class:<module>:<qualname>``.

    A failure's type is the class's bare name (what Temporal gives an exception,
    and what retry policies' ``non_retryable_error_types`` and recorded tool
    errors name): the detail tells ``toolfold.AuthenticationError`` from a
    library's own ``AuthenticationError``. It is no workflow command: a history
    recorded before it replays the same.
    """
    return f"{_CLASS}{type(exc).__module__}:{type(exc).__qualname__}"


def _details(exc: ToolfoldError) -> tuple[Any, ...]:
    """The details of a toolfold error's failure: its full class name, and its fields.

    The fields (its attributes) go along only when every one is a str (an
    `MCPError`'s ``server``): an error made from them comes back whole. A
    provider error's (status, body, headers) stay on the worker.
    """
    fields = vars(exc)
    if isinstance(exc, ProviderError) or not fields:
        return (_qualified(exc),)
    if not all(isinstance(v, str) for v in fields.values()):
        return (_qualified(exc),)
    return (_qualified(exc), dict(fields))


def _named_class(details: Sequence[Any]) -> type | None:
    """The class a failure's first detail names, when it names a toolfold one (imported on demand).

    None when it names no class, or one outside toolfold (never imported), or
    one the client cannot import (an optional extra it lacks).
    """
    named = details[0] if details else None
    if not (isinstance(named, str) and named.startswith(_CLASS)):
        return None
    module, _, qualname = named.removeprefix(_CLASS).partition(":")
    if module != "toolfold" and not module.startswith("toolfold."):
        return None
    try:
        found: object = importlib.import_module(module)
    except Exception:  # an extra the client lacks (toolfold.mcp without mcp...)
        return None
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found if isinstance(found, type) else None


def rebuilt_error(failure: ApplicationError) -> ToolfoldError | None:
    """The toolfold error an activity failed with, rebuilt from its Temporal failure.

    The model and listing activities fail with an ``ApplicationError`` whose
    type is the error's class name and whose first detail names its class in
    full (`_qualified`): a `ProviderError` (any subclass) or another toolfold
    error that is made from its message alone (`ModelConfigError`,
    `UsageError`, `LocalSetupError`), or one made from str fields the
    details carry (`MCPError`), comes back as that class, with the same
    message (the provider's status, body and headers stay on the worker).
    A failure with no details (recorded by a worker before
    they were added) is matched by its type among the classes of
    ``toolfold._errors``, as before. None for any other failure: a class of
    its own (made from more than a message, such as `ToolDefinitionError`),
    or no toolfold error (a library's own ``AuthenticationError`` that a
    custom model raised included).
    """
    by_type = getattr(errors, failure.type or "", None)
    details = [d for d in failure.details if not is_dropped_detail(d)]  # (not the error's)
    raised = _named_class(details) if details else by_type
    if not (isinstance(raised, type) and issubclass(raised, ToolfoldError)):
        return None
    if issubclass(raised, RunError):  # a run's failure carries its own type prefix
        return None
    own = [c for c in raised.__mro__ if issubclass(c, ToolfoldError) and "__init__" in vars(c)]
    if not issubclass(raised, ProviderError) and own:  # made from other parts: its fields
        fields = details[1] if len(details) > 1 else None
        if not (isinstance(fields, dict) and all(isinstance(v, str) for v in fields.values())):
            return None
        restored: ToolfoldError = restored_error(raised, (failure.message,), fields)
        return restored
    made: ToolfoldError = raised(failure.message)
    return made


async def _heartbeating(work: Awaitable[T], every: float, details: Sequence[Any] = ()) -> T:
    """Await ``work`` while telling Temporal the activity is alive, every ``every`` seconds.

    Heartbeats let the server notice a crashed worker within the heartbeat
    timeout instead of the (much longer) start-to-close timeout. Each carries
    ``details``: the server keeps the last heartbeat's for the next attempt.
    """
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            activity.heartbeat(*details)
    finally:
        task.cancel()
