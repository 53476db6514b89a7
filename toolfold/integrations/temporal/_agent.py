"""`TemporalAgent`, the plugin that makes a worker run it, and the client's `AgentHandle`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, NoReturn

import attrs
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.converter import CompositePayloadConverter, ExternalStorage
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.plugin import SimplePlugin
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from toolfold import _errors as errors
from toolfold._errors import RunError, ToolfoldError, UsageError
from toolfold.integrations.temporal._activities import (
    PAYLOAD_LIMIT,
    PAYLOAD_TOO_LARGE,
    EventStreamHandler,
    SourceHost,
    durable_model,
    make_activities,
    nested_models,
    payloads_size,
    rebuilt_error,
    source_call_activity,
)
from toolfold.integrations.temporal._converter import (
    ToolfoldJSONPayloadConverter,
    ToolfoldPayloadConverter,
    data_converter,
)
from toolfold.integrations.temporal._nested import ListedSource, node, response_of, walk
from toolfold.integrations.temporal._workflow import (
    RUN_ERROR,
    WORKFLOW_NAME,
    ActivitySettings,
    AgentInput,
    AgentWorkflow,
    Answers,
    Registered,
    register,
)
from toolfold.runtime._agent import Agent
from toolfold.runtime._model import Model
from toolfold.runtime._response import Response
from toolfold.runtime._run import MessagesInput
from toolfold.runtime._workflow import Workflow, _step_errors
from toolfold.runtime.core._events import (
    EVENT_TYPES,
    ApprovalDenied,
    ApprovalGranted,
    Event,
    ToolResultsProvided,
)
from toolfold.runtime.core._messages import Message, ToolResultPart, wrong_argument
from toolfold.runtime.core._serialize import snapshot_from_json
from toolfold.runtime.core._state import WAITING_PHASES, RunState
from toolfold.runtime.drive._failures import run_failure


@attrs.frozen(init=False)
class TemporalAgent:
    """An `Agent`, or a workflow spec, that runs as a durable Temporal workflow.

    Every model request and tool call becomes an activity named
    ``<name>__model_request`` / ``<name>__tool__<tool>``; the workflow drives
    the pure core between them. A workflow spec (`Sequence`, `Parallel`,
    `Route`, `Loop`) runs the same way: its planner's decisions are the
    ``model_request`` activity and each step is the tool activity
    ``<name>__tool__<step>``, running the step's agent, workflow or function
    whole. An agent a handoff reaches runs under ``<name>@<agent>``, and
    an ``as_tool(output=fn)`` function in ``<name>.<tool>__output``
    (docs/durable.md). The same `TemporalAgent` is used on both
    sides: the worker gets its activities through `ToolfoldPlugin`, the
    client starts runs with `start` / `run`.

    Example:
        >>> weather = TemporalAgent(Agent("openai:gpt-4o-mini", tools=[get_weather]), name="weather")
        >>> client = await Client.connect("localhost:7233", plugins=[ToolfoldPlugin([weather])])
        >>> response = await weather.run(client, "Weather in Paris?", id="w-1", task_queue="q")

    Args:
        agent: The agent or workflow spec (its model and tools, or steps, are
            the worker's live objects). An agent's model given as a
            ``provider:model`` string is built with ``retry=0``: Temporal
            retries the activity instead.
        name: The name in activity names; defaults to ``agent.name``.
            Renaming breaks running workflows.
        settings: Timeouts, heartbeat and retry policy of the activities.
        deps: Dependencies handed to the tools in their `RunContext` (on the worker).
        event_stream_handler: The side channel of the model's output: when
            given, the model activity streams the model and hands its events
            to this handler as they arrive (see `EventStreamHandler`); the
            workflow still gets only the final response.

    Raises:
        UsageError: ``agent`` is no `Agent` nor workflow spec, ``name`` is
            not a str, or no name is given for an unnamed agent.
    """

    agent: Agent | Workflow
    name: str
    settings: ActivitySettings
    deps: Any
    event_stream_handler: EventStreamHandler | None
    _models: Mapping[str, Model] = attrs.field(eq=False, repr=False)

    def __init__(
        self,
        agent: Agent | Workflow,
        *,
        name: str | None = None,
        settings: ActivitySettings | None = None,
        deps: Any = None,
        event_stream_handler: EventStreamHandler | None = None,
    ) -> None:
        if not isinstance(agent, (Agent, Workflow)):
            raise wrong_argument(
                "TemporalAgent",
                "agent",
                "an Agent or a workflow spec (Sequence, Parallel, Route, Loop)",
                agent,
            )
        if name is not None and not isinstance(name, str):
            raise wrong_argument("TemporalAgent", "name=", "a str", name)
        name = name if name is not None else agent.name
        if not name:
            raise UsageError("a TemporalAgent needs a name: give the agent one, or pass name=")
        if "__" in name:
            raise UsageError(
                f"agent name {name!r} must not contain '__' (it separates activity names)"
            )
        agent = _durable(agent)
        self.__attrs_init__(
            agent=agent,
            name=name,
            settings=settings or ActivitySettings(),
            deps=deps,
            event_stream_handler=event_stream_handler,
            models=nested_models(name, agent),  # built once, like the agent's own
        )

    @property
    def activities(self) -> list[Callable[..., Any]]:
        """The worker's activities for this agent (the model's and one per tool).

        Each returns its result encoded (a temporalio `RawValue`), made by
        toolfold's payload converter: the activity measures the payload it
        sends. To call one directly in a test, run it in an
        `ActivityEnvironment` with toolfold's converter and decode what it returns::

            env = ActivityEnvironment()
            env.payload_converter = ToolfoldPayloadConverter()
            raw = await env.run(agent.activities[1], ToolCallInput(invocation, run_id="r1"))
            returned = env.payload_converter.from_payload(raw.payload, ToolReturned)

        (temporalio's default converter cannot encode toolfold's values: a
        ``TypeError``; see docs/durable.md, How it works)
        """
        return self._activities(PAYLOAD_LIMIT)

    def _activities(self, payload_limit: int | None) -> list[Callable[..., Any]]:
        """`activities`, returning no result over ``payload_limit`` (None: no limit, with
        external storage): a model's answer over it fails, a tool's is an error result."""
        return make_activities(
            self.name,
            self.agent,
            heartbeat=self.settings.heartbeat_timeout,
            max_result_bytes=self.settings.max_result_bytes,
            deps=self.deps,
            stream=self.event_stream_handler,
            models=self._models,
            payload_limit=payload_limit,
        )

    def _source_hosts(self, payload_limit: int | None = PAYLOAD_LIMIT) -> dict[str, SourceHost]:
        """Where the worker's source call activity finds the tool sources, by node name.

        The top agent's and those of the agents of its sub-runs (any depth);
        ``payload_limit`` as for `_activities`.
        """
        top = node(self.name, self.agent)
        every = self.settings.heartbeat_timeout.total_seconds() / 3
        hosts = {}
        for each in (top, *(sub for sub, _ in walk(top))):
            if each.sources:  # all listed sources (`_durable` refuses others), in order:
                # a call activity names its source by its index (`SourceCallInput.source`)
                hosts[each.name] = SourceHost(
                    each.sources, self.deps, every, self.settings.max_result_bytes, payload_limit
                )
        return hosts

    def _registered(self) -> Registered:
        streams = self.event_stream_handler is not None  # a cancelled request has usage to count
        return Registered(node=node(self.name, self.agent), settings=self.settings, streams=streams)

    async def start(
        self,
        client: Client,
        prompt: MessagesInput,
        *,
        id: str,
        task_queue: str,
        history: Sequence[Message] = (),
    ) -> AgentHandle:
        """Start a run as the workflow ``id`` (also the run's id); returns its handle.

        Raises:
            UsageError: ``client`` is no Temporal client connected with
                `ToolfoldPlugin` (``Client.connect(..., plugins=[ToolfoldPlugin()])``:
                without its data converter no state crosses to the workflow);
                or the run's first state (its prompt and history) is over
                Temporal's payload limit, and the client has no external storage.
        """
        _check_client("TemporalAgent.start", client)
        if isinstance(self.agent, Agent):
            state = self.agent._start(prompt, history, id)
        elif history:
            raise UsageError("a workflow run starts from its input: it takes no history")
        else:
            state = self.agent._start(prompt, id)
        given = AgentInput(self.name, state)
        _check_input(client, given)
        handle: WorkflowHandle[Any, RunState] = await client.start_workflow(
            WORKFLOW_NAME,
            given,
            id=id,
            task_queue=task_queue,
            result_type=RunState,
        )
        return AgentHandle(self, handle)

    async def run(
        self, client: Client, prompt: MessagesInput, *, id: str, task_queue: str
    ) -> Response:
        """Start a run and wait for its `Response` (suspended runs: use `start`)."""
        handle = await self.start(client, prompt, id=id, task_queue=task_queue)
        return await handle.result()

    def handle(self, client: Client, id: str) -> AgentHandle:
        """The handle of the run started as workflow ``id``.

        The handle's own methods need a client connected with `ToolfoldPlugin`
        (they check it before anything is sent); Temporal's raw operations on
        ``.workflow`` (``describe()``, ``cancel()``...) work on any client.

        Raises:
            UsageError: ``client`` is no Temporal client.
        """
        _check_client("TemporalAgent.handle", client, converter=False)
        return AgentHandle(self, client.get_workflow_handle(id, result_type=RunState))


@attrs.frozen
class AgentHandle:
    """A durable run seen from a client: its state, its answers, its result.

    Attributes:
        agent: The agent it runs.
        workflow: Temporal's handle of the workflow.
    """

    agent: TemporalAgent
    workflow: WorkflowHandle[Any, RunState]

    async def state(self) -> RunState:
        """The run's current state (a query; the workflow keeps running).

        A state too large for one query answer (4 MB, without external
        storage) is read in parts.

        A query is answered by a worker: with none polling the run's task
        queue (a finished run's too), Temporal holds it about 30 seconds,
        then gives up.

        Raises:
            UsageError: No workflow has the handle's id (see `result`), or
                the handle's client has no toolfold data converter, or no
                worker answered the query: none polls the run's task queue
                (the error names it), or the worker that polls it fails the
                run's workflow task (lacking its agent or a tool it calls,
                or on code that does not replay the run: the error quotes
                the failure). Temporal's ``RPCError`` is its ``__cause__``.
        """
        self._check("state")
        return await self._state(None)

    async def _state(self, timeout: timedelta | None) -> RunState:
        """`state`, each query waiting at most ``timeout`` for its answer (None: Temporal's)."""
        with self._found("state()"):
            try:
                state: RunState = await self.workflow.query(
                    AgentWorkflow.state, rpc_timeout=timeout
                )
            except WorkflowQueryFailedError as failed:
                try:
                    return await self._state_in_parts(timeout)
                except WorkflowQueryFailedError:
                    raise failed from None
            except RPCError as exc:
                if not (_unanswered(exc) or _refused_while_failing(exc)):
                    raise
                raise UsageError(await self._unanswered_message(exc)) from exc
            return state

    async def _unanswered_message(self, exc: RPCError) -> str:
        """What `state` says when no worker answered its query (`_unanswered`), or Temporal
        refused it while the run's workflow task keeps failing (`_refused_while_failing`)."""
        described = await self._described()
        failing = await self._failing_task(described)
        if failing is None and _refused_while_failing(exc):
            failing = "its workflow task is failing"  # (and succeeded since: read it again)
        if failing is not None:  # a worker polls, and fails the run's task (`NotOnThisWorker`)
            return (
                f"AgentHandle.state(): the run {self.workflow.id!r} did not answer its state "
                f"query: {failing}; the run waits, its state kept, until {_FIXED} (Temporal "
                f"said: {exc.message})"
            )
        queue = f" {described.task_queue!r}" if described is not None else ""
        return (
            "AgentHandle.state(): no worker answered the state query of the run "
            f"{self.workflow.id!r}: no worker polls its task queue{queue} (Temporal said: "
            f"{exc.message}); start one with ToolfoldPlugin and this agent on that queue"
        )

    async def _described(self) -> WorkflowExecutionDescription | None:
        """The run's description (None when Temporal does not give it: the error says less)."""
        try:
            return await self.workflow.describe()
        except RPCError:
            return None

    async def _failing_task(self, described: WorkflowExecutionDescription | None) -> str | None:
        """Why the run's workflow task fails on every attempt (a worker without its agent
        or a tool it calls took it: `NotOnThisWorker`), quoting the failure in its history;
        None when the task is on its first attempt (or ``described`` is None)."""
        if described is None:
            return None
        attempt = described.raw_description.pending_workflow_task.attempt
        if attempt <= 1:
            return None
        message = ""
        with contextlib.suppress(RPCError):  # (then without the failure's message)
            async for event in self.workflow.fetch_history_events():
                if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                    message = event.workflow_task_failed_event_attributes.failure.message
        said = f": {message}" if message else " (no failure in its history: a worker timed out)"
        return f"its workflow task failed {attempt - 1} times, Temporal retrying it{said}"

    def _check(self, method: str) -> None:
        """Refuse a client without toolfold's data converter, before ``method`` sends anything."""
        _check_client(f"AgentHandle.{method}", self.workflow._client)

    @contextlib.contextmanager
    def _found(self, method: str) -> Iterator[None]:
        """Turn Temporal's ``NOT_FOUND`` for the handle's workflow id into a `UsageError`.

        Only around a call whose ``NOT_FOUND`` means that no workflow has the
        id (an update's also means that the workflow is closed: see `answer`).
        A ``NOT_FOUND`` for the client's namespace (it does not exist on the
        server) stays Temporal's ``RPCError``, which names the namespace.
        """
        try:
            yield
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND or _namespace_missing(exc):
                raise
            raise UsageError(
                f"AgentHandle.{method}: no workflow has the id {self.workflow.id!r} on this "
                "client's namespace (no run was started with this id, or its history was "
                "deleted after the namespace's retention period)"
            ) from exc

    async def _state_in_parts(self, timeout: timedelta | None) -> RunState:
        for _ in range(_READS):  # a running workflow may change between two parts
            first = await self.workflow.query(AgentWorkflow.state_part, 0, rpc_timeout=timeout)
            texts = [first.text]
            for index in range(1, first.parts):
                part = await self.workflow.query(
                    AgentWorkflow.state_part, index, rpc_timeout=timeout
                )
                if part.checksum != first.checksum:
                    break
                texts.append(part.text)
            else:
                state = snapshot_from_json("".join(texts))
                return state
        raise ToolfoldError(
            f"the run's state changed while it was read in parts, {_READS} times: try again"
        )

    async def suspended(self) -> RunState:
        """Wait until the run waits for answers (or is over); returns its state.

        Raises:
            UsageError: No workflow has the handle's id (see `result`), or
                Temporal did not take the call because the run's workflow
                task keeps failing (as `answer`'s: the error quotes the
                failure; the run waits).
            temporalio.client.WorkflowFailureError: The run is over, failed
                as a workflow (see `result`).
        """
        self._check("suspended")
        with self._found("suspended()"):
            return await self._suspended()

    async def _suspended(self) -> RunState:
        delays = iter(_BACKOFF)
        not_taken = ("suspended()", "did not answer", "call suspended() again")
        while True:  # a run that continues as new answers early
            try:
                state: RunState = await self.workflow.execute_update(AgentWorkflow.suspended)
            except WorkflowUpdateFailedError as exc:
                if not _too_large(exc.cause):
                    raise
                state = await self.state()
            except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
                await self._raise_not_taken(exc, *not_taken)
            except RPCError as exc:  # it ended (maybe while it handed over): its final state
                if _refused_while_failing(exc):
                    await self._raise_not_taken(exc, *not_taken)
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                state = await self.workflow.result()
            if state.phase in WAITING_PHASES or state.is_done:
                return state
            # It is handing over to its next history: ask again once that has begun
            # (at once, each question would hold the leaving run up, as a handler in flight).
            await _pause(next(delays, _BACKOFF[-1]))

    async def answer(self, *events: Event) -> RunState:
        """Send approvals, denials or tool results to the suspended run.

        Raises:
            UsageError: No event is given (nor a result in them), an
                argument is no event, or a call is answered twice (two
                approvals, two results for one id), or two ways (approved
                and denied at once), checked before anything is sent: the
                error names the call id. Or no workflow has the handle's id
                (see `result`). Or Temporal did not take the answer because
                the run's workflow task keeps failing (the error quotes the
                failure: a worker without the run's agent or a tool it calls
                polls its queue, say, or one on code that does not replay
                the run): send it again once that is fixed and Temporal
                retried the task (its retries back off, up to 10 minutes).
            temporalio.client.WorkflowUpdateFailedError: The run is not
                waiting, or an event does not fit it (nothing is applied).
                A run that is over (completed, failed, canceled...) is not
                waiting either: the error's ``cause`` is an
                ``ApplicationError`` saying so, naming how it ended as
                Temporal spells the status (``"canceled"``).
        """
        for index, event in enumerate(events):
            if not isinstance(event, EVENT_TYPES):
                raise wrong_argument(
                    "answer",
                    f"events[{index}]",
                    "an event (ApprovalGranted, ApprovalDenied, ToolResultsProvided)",
                    event,
                    " (approve() takes call ids, provide() results)",
                )
        if all(isinstance(e, ToolResultsProvided) and not e.results for e in events):
            raise UsageError(
                "answer() got nothing to send: give the answers, "
                "answer(ApprovalGranted('call_1')), or use approve('call_1') or provide([...])"
            )
        _check_answered_once("answer()", events)
        self._check("answer")
        return await self._send("answer()", events)

    async def _send(self, method: str, events: tuple[Event, ...]) -> RunState:
        """`answer` (called as ``method``), once its caller checked ``events``."""
        delays = iter(_BACKOFF)
        not_taken = (method, "did not take the answer", "send the answer again")
        while True:
            try:
                state: RunState = await self.workflow.execute_update(
                    AgentWorkflow.answer, Answers(events)
                )
            except WorkflowUpdateFailedError as exc:
                if not _too_large(exc.cause):  # else the answers are applied, the state too large
                    raise
                return await self.state()
            except WorkflowUpdateRPCTimeoutOrCancelledError as exc:
                await self._raise_not_taken(exc, *not_taken)
            except RPCError as exc:  # "workflow execution already completed": nothing applied
                if _refused_while_failing(exc):
                    await self._raise_not_taken(exc, *not_taken)
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                ended = await self._ended_as(method)
                if ended is None:  # still running: it was handing over to its next history
                    delay = next(delays, None)
                    if delay is None:
                        raise
                    await _pause(delay)
                    continue
                over = ApplicationError(
                    f"the run {self.workflow.id!r} is over (its workflow is {ended}): "
                    "it waits for no answers",
                    non_retryable=True,
                )  # the documented error of a run not waiting; the RPCError is its context
                raise WorkflowUpdateFailedError(over) from over
            return state

    async def _raise_not_taken(
        self, exc: Exception, method: str, did_not: str, again: str
    ) -> NoReturn:
        """Raise the error of an update (`answer`'s, `suspended`'s: ``method``) that Temporal
        did not take (``exc``: its call timed out or was cancelled, or it was refused as the
        run's workflow task failed) while that task keeps failing (`_failing_task`), saying
        what the run ``did_not`` do and to do it ``again``, from ``exc``; ``exc`` itself when
        the task does not fail."""
        failing = await self._failing_task(await self._described())
        if failing is None:
            raise exc
        raise UsageError(
            f"AgentHandle.{method}: the run {self.workflow.id!r} {did_not}: {failing}; the "
            f"run waits, its state kept: {again} once {_FIXED} (Temporal said: {exc})"
        ) from exc

    async def _ended_as(self, method: str) -> str | None:
        """How the run's workflow ended (``"completed"``...), None while it runs.

        Raises:
            UsageError: No workflow has this id.
        """
        with self._found(method):
            status = (await self.workflow.describe()).status
        if status is None or status in (
            WorkflowExecutionStatus.RUNNING,
            WorkflowExecutionStatus.CONTINUED_AS_NEW,
        ):
            return None
        return status.name.lower()

    async def approve(self, *call_ids: str, deny: Mapping[str, str] | None = None) -> RunState:
        """Approve these calls (and deny those in ``deny``: call id -> reason).

        A call is named as `resume` names it: its id, or, when several calls
        wait under that id (of several sub-runs, or the top run's and a
        sub-run's), the key naming it alone, as
        `RunState.keyed_pending_approvals` lists it: its path
        (``"left/call_0"``) or its bound key (``"call_0#<fingerprint>"``).

        Raises:
            UsageError: An id is not a str (a list of ids is passed as
                ``approve(*ids)``), ``deny`` is not a mapping of ids to str
                reasons, no call is named, a call is named twice, or is both
                approved and denied (checked before anything is sent); or no
                workflow has the handle's id (see `result`).
            temporalio.client.WorkflowUpdateFailedError: As `answer`; its
                cause is a ``UsageError`` for an id that several calls wait
                under (listing each call's own key).
        """
        for call_id in call_ids:
            if not isinstance(call_id, str):
                raise UsageError(
                    "approve() takes call ids (str) as separate arguments, approve(*ids); "
                    f"got {type(call_id).__name__} {call_id!r}"
                )
        if deny is not None and not isinstance(deny, Mapping):
            raise UsageError(
                "approve(deny=) takes a mapping of call id to reason, "
                f"deny={{'call_1': 'reason'}}; got {type(deny).__name__} {deny!r}"
            )
        denied = dict(deny or {})
        for call_id, reason in denied.items():
            if not isinstance(call_id, str) or not isinstance(reason, str):
                raise UsageError(
                    "approve(deny=) maps call ids (str) to reasons (str), "
                    f"got {call_id!r}: {reason!r}"
                )
        if not call_ids and not denied:
            raise UsageError(
                "approve() got no call id: name the calls to approve, approve('call_1'), "
                "or to deny, approve(deny={'call_1': 'reason'})"
            )
        events: list[Event] = [ApprovalGranted(call_id) for call_id in call_ids]
        events += [ApprovalDenied(call_id, reason) for call_id, reason in denied.items()]
        _check_answered_once("approve()", events)
        self._check("approve")
        return await self._send("approve()", tuple(events))

    async def provide(self, results: Iterable[ToolResultPart]) -> RunState:
        """Answer calls returned to the caller with their results.

        Each result's ``call_id`` names its call as in `approve`: the id, or,
        when several calls wait under that id, the key naming it alone, as
        `RunState.keyed_tool_calls` lists it.

        Raises:
            UsageError: ``results`` is not an iterable of `ToolResultPart`
                (a str, one part not in a list), is empty, or two results
                name one call (checked before anything is sent); or no
                workflow has the handle's id (see `result`).
            temporalio.client.WorkflowUpdateFailedError: As `answer`.
        """
        example = "provide([ToolResultPart('call_1', 'ask_user', 'Paris')])"
        if isinstance(results, (str, bytes, ToolResultPart)) or not isinstance(results, Iterable):
            raise wrong_argument(
                "provide", "results", "a list of ToolResultPart", results, f" ({example})"
            )
        given = tuple(results)
        for index, result in enumerate(given):
            if not isinstance(result, ToolResultPart):
                raise wrong_argument(
                    "provide", f"results[{index}]", "a ToolResultPart", result, f" ({example})"
                )
        if not given:
            raise UsageError(f"provide() got no result: give one per waiting call, {example}")
        events = (ToolResultsProvided(given),)
        _check_answered_once("provide()", events)
        self._check("provide")
        return await self._send("provide()", events)

    async def result(self) -> Response:
        """Wait for the run to end: the same `Response` a local run gives.

        Raises:
            RunError: The run failed (``.state`` is its final state), or
                raised where a local run raises (`ToolExecutionError` with
                ``on_tool_error="raise"``; ``.state`` is the error's state, as
                locally), or its next activity input, or its own model's
                answer, was over Temporal's payload limit (``.state`` is its
                last state, before that activity; a billed answer counted in
                its usage). ``.state`` is read with `state` (None when no
                worker answers the query within 5 seconds: with no worker
                running, the error comes at once, without its state).
            ProviderError: The run's own model request failed for good (a
                non-retryable provider error, or Temporal's retries used up):
                the provider's error class (`AuthenticationError`,
                `BadRequestError`...) with its message, as locally, its
                ``.state`` the run before that request (read with `state`);
                its ``__cause__`` is Temporal's ``WorkflowFailureError``. The
                status, body and headers stay on the worker. Another toolfold
                error the request or a tool listing raised comes back the same
                way (`ModelConfigError`, `UsageError`, `LocalSetupError`,
                `MCPError`...) when its class is made from its message alone
                (or from str fields, as `MCPError`'s server). An error of
                another library escaping a custom model is no toolfold error,
                whatever its name: Temporal's ``WorkflowFailureError``.
            UsageError: No workflow has the handle's id on the client's
                namespace: no run was started with it, or the run's history
                was deleted after the namespace's retention period (the
                error's ``__cause__`` is Temporal's ``RPCError``,
                ``NOT_FOUND``). `state`, `suspended` and the answers raise
                the same, and a `UsageError` when the handle's client was
                connected without `ToolfoldPlugin` (checked before anything
                is sent).
            temporalio.service.RPCError: The client's namespace does not
                exist on the server (``NOT_FOUND``, its message naming the
                namespace), from `state`, `suspended` and the answers too.
        """
        self._check("result")
        try:
            with self._found("result()"):
                state = await self.workflow.result()
        except WorkflowFailureError as exc:
            cause = exc.cause
            error = _raised(cause) if isinstance(cause, ApplicationError) else None
            # The run's own model request (or listing) failed for good: locally the
            # run raises the provider's error, carrying the state before that request.
            failed = cause.cause if isinstance(cause, ActivityError) else None
            made = rebuilt_error(failed) if isinstance(failed, ApplicationError) else None
            if _too_large(failed):  # its model's answer was over the payload limit
                assert isinstance(failed, ApplicationError)
                cause, error = failed, RunError
            if error is None and made is None:
                raise
            try:
                last: RunState | None = await self._state(_STATE_TIMEOUT)
            except (WorkflowQueryFailedError, RPCError, UsageError, asyncio.TimeoutError):
                last = None  # no worker answers it (in time): the error, at once, without it
            if made is not None:
                made.state = last
                raise made from exc
            assert isinstance(cause, ApplicationError)
            assert error is not None
            raise error(cause.message, last) from exc
        if state.phase == "failed":
            if isinstance(self.agent.agent, Workflow):
                with _step_errors(self.agent.agent):  # names the step, as a local run does
                    raise run_failure(state)
            raise run_failure(state)
        return response_of(self.agent.agent, state)


def _check_answered_once(function: str, events: Iterable[object]) -> None:
    """Refuse ``events`` that answer one call more than once, before anything is sent.

    Only approvals, denials and tool results answer calls (what else
    ``events`` hold is the workflow's to judge). The run would refuse such
    answers too, but with its phase's message about the second one, after a
    round trip. Their shapes are checked first, as the run would: a result
    that is no `ToolResultPart`, or a call id that is no str.

    Raises:
        UsageError: Naming ``function`` and every problem at once, separated
            by "; ": a result that is no `ToolResultPart` or a call id that is
            no str (``provide() result 0: expected a ToolResultPart, got
            dict``; in `answer`, ``event 0 (ApprovalGranted): call_id must be
            a str, got list ['c1']``), the call ids answered twice the same
            way (``approve() got call 'call_1' twice``) and those answered
            two ways (``... got call 'call_1' approved and denied at once``).
    """
    problems: list[str] = []
    answers: dict[str, list[str]] = {}

    def answered(where: str, call_id: object, way: str) -> None:
        if isinstance(call_id, str):
            answers.setdefault(call_id, []).append(way)
        else:
            problems.append(
                f"{where}call_id must be a str, got {type(call_id).__name__} {call_id!r}"
            )

    for number, event in enumerate(events):
        # provide() sends one event of its own: its results are numbered as given
        at = "" if function == "provide()" else f"event {number} ({type(event).__name__}): "
        if isinstance(event, ApprovalGranted):
            answered(at, event.call_id, "approved")
        elif isinstance(event, ApprovalDenied):
            answered(at, event.call_id, "denied")
        elif isinstance(event, ToolResultsProvided):
            results: tuple[object, ...] = event.results  # (typed, but given by the caller)
            for index, result in enumerate(results):
                where = f"{at}result {index}: "
                if isinstance(result, ToolResultPart):
                    answered(where, result.call_id, "given a result")
                else:
                    name = type(result).__name__
                    problems.append(f"{where}expected a ToolResultPart, got {name}")
    twice = sorted(c for c, ways in answers.items() if len(set(ways)) < len(ways))
    if twice:
        problems.append(f"got call {', '.join(map(repr, twice))} twice")
    mixed: dict[tuple[str, ...], list[str]] = {}
    for call_id, ways in answers.items():
        if len(set(ways)) > 1:
            mixed.setdefault(tuple(dict.fromkeys(ways)), []).append(call_id)
    for how, call_ids in mixed.items():
        named = ", ".join(map(repr, sorted(call_ids)))
        problems.append(f"got call {named} {' and '.join(how)} at once")
    if problems:
        raise UsageError(f"{function} {'; '.join(problems)}")


def _raised(cause: ApplicationError) -> type[RunError] | None:
    """The `RunError` class a failed workflow raises on the client, if it failed as a run."""
    if cause.type is None:
        return None
    if cause.type == PAYLOAD_TOO_LARGE:
        return RunError
    if cause.type.startswith(RUN_ERROR):
        raised = getattr(errors, cause.type.removeprefix(RUN_ERROR), None)
        if isinstance(raised, type) and issubclass(raised, RunError):
            # Rebuilt from (message, state): a class built from other parts (an
            # InvalidEventError's phase, event and reason) comes back as a RunError.
            return raised if raised.__init__ is RunError.__init__ else RunError
    return None


_BACKOFF = (0.05, 0.1, 0.2, 0.5, 1.0)
"""Seconds `AgentHandle.suspended` waits before asking a run handing over to its next
history again (the n-th time: the n-th delay, then the last one)."""

# When a run whose workflow task keeps failing moves on (said by `AgentHandle._raise_not_taken`
# and the state read's refusal): the failure may be a missing agent or tool
# (`NotOnThisWorker`) or another one (a change of code that does not replay); once it is
# fixed, Temporal must also have retried the task, and its retries back off.
_FIXED = (
    "the failure quoted is fixed (a worker that registers the run's agent and tools runs, "
    "when one is missing) and Temporal retried the task (its retries back off, up to 10 "
    "minutes apart; until then this is refused again)"
)


async def _pause(seconds: float) -> None:
    """Wait ``seconds`` (client side: `AgentHandle.suspended`'s backoff)."""
    await asyncio.sleep(seconds)


_STATE_TIMEOUT = timedelta(seconds=5)
"""How long `AgentHandle.result` waits for a worker to answer the state query of a run
that failed (its error's ``.state``): with no worker running, the server would hold
the query about 30 s before saying no worker polls the queue."""

_READS = 5
"""How many times `AgentHandle.state` reads a state in parts before giving up."""


def _namespace_missing(exc: RPCError) -> bool:
    """Whether Temporal's ``NOT_FOUND`` is for the client's namespace, not a workflow id.

    Its details say so (``NamespaceNotFoundFailure``; a workflow id's is
    ``NotFoundFailure``); with none, its message does ("Namespace ... is not
    found.", where a workflow's reads "workflow not found for ID: ...").
    """
    details = exc.grpc_status.details
    if details:
        return any(d.type_url.endswith(".NamespaceNotFoundFailure") for d in details)
    return exc.message.lower().startswith("namespace ")


def _unanswered(exc: RPCError) -> bool:
    """Whether Temporal's ``exc`` says no worker answered a query: none polled the task
    queue lately (``FAILED_PRECONDITION``, "no poller seen for task queue recently"), or
    none answered before the query's deadline (a queue no worker ever polled: "Timeout
    expired", or the server's "query timed out before a worker could process it")."""
    message = exc.message.lower()
    if exc.status == RPCStatusCode.FAILED_PRECONDITION:
        return "no poller" in message
    return exc.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED) and any(
        said in message for said in ("timeout", "timed out", "deadline")
    )


def _refused_while_failing(exc: RPCError) -> bool:
    """Whether Temporal's ``exc`` refuses an update or a query because the workflow task
    keeps failing ("Unable to perform workflow execution update due to Workflow Task in
    failed state", "Unable to query workflow due to ...")."""
    return "workflow task in failed state" in exc.message.lower()


def _too_large(failure: BaseException | None) -> bool:
    """Whether ``failure`` is the workflow's refusal of a payload over Temporal's limit."""
    return isinstance(failure, ApplicationError) and failure.type == PAYLOAD_TOO_LARGE


def _check_client(function: str, client: object, *, converter: bool = True) -> None:
    """Refuse a ``client`` that is no Temporal client, or one connected without `ToolfoldPlugin`.

    Without toolfold's JSON payload converter the client cannot encode a
    run's state nor decode one: every call failed with a bare ``TypeError``.
    A converter of the user's own that holds it (a ``CompositePayloadConverter``
    with `ToolfoldJSONPayloadConverter` among its converters) is accepted.
    ``converter=False`` checks only that ``client`` is a client.
    """
    if not isinstance(client, Client):
        raise wrong_argument(
            function,
            "client",
            "a temporalio.client.Client",
            client,
            " (Client.connect(address, plugins=[ToolfoldPlugin()]))",
        )
    converters = client.data_converter
    if (
        not converter
        or issubclass(converters.payload_converter_class, ToolfoldPayloadConverter)
        or _holds_toolfold_json(converters.payload_converter)
    ):
        return
    raise UsageError(
        f"{function}(): the client has no toolfold data converter: connect the client with "
        "plugins=[ToolfoldPlugin(...)] (Client.connect(address, plugins=[ToolfoldPlugin()]))"
    )


def _holds_toolfold_json(converter: object) -> bool:
    """Whether ``converter`` is, or composes (at any depth), toolfold's JSON payload converter.

    Temporal wraps a data converter's payload converter in one of its own (for its
    transfer types, in ``_inner_payload_converter``): it is looked through.
    """
    if isinstance(converter, ToolfoldJSONPayloadConverter):
        return True
    if isinstance(converter, CompositePayloadConverter):
        return any(_holds_toolfold_json(c) for c in converter.converters.values())
    inner = getattr(converter, "_inner_payload_converter", None)
    return inner is not None and _holds_toolfold_json(inner)


def _check_input(client: Client, given: AgentInput) -> None:
    """Refuse a workflow input over Temporal's payload limit before sending it."""
    converter = client.data_converter
    if converter.external_storage is not None:  # it takes large payloads by reference
        return
    size = payloads_size(converter.payload_converter.to_payloads([given]))
    if size > PAYLOAD_LIMIT:
        raise UsageError(
            f"the run's first state (its prompt and history) is {size} bytes, over "
            f"Temporal's {PAYLOAD_LIMIT}-byte payload limit for a workflow's input: give "
            "ToolfoldPlugin an external_storage (on the client and the workers), or start "
            "the run with less (a reference to large data instead of the data)"
        )


def _durable(agent: Agent | Workflow) -> Agent | Workflow:
    """``agent`` as a durable run needs it, or a `UsageError` saying what it cannot have.

    Its sub-runs (workflow steps, agents used as tools, agents a handoff
    reaches; any depth) are checked too: the workflow drives them with the
    same loop.
    """
    for target in [agent, *(target for _, target in walk(node("top", agent)))]:
        if not isinstance(target, Agent) or not target._sources:
            continue
        label = f"agent {target.name!r}" if target.name else "an agent"
        unlisted = [s for s in target._sources if not isinstance(s, ListedSource)]
        if unlisted:
            raise UsageError(
                f"{label}: tool source {unlisted[0]!r} cannot run on Temporal "
                "(a durable run records its listing: it needs listing() and tools_from(), "
                "as toolfold.mcp's servers have)"
            )
    if isinstance(agent, Agent) and isinstance(agent.model, str):
        return agent.evolve(model=durable_model(agent))
    return agent


class ToolfoldPlugin(SimplePlugin):
    """Configures clients and workers for toolfold agents.

    On a client: toolfold's data converter. On a worker: the agent workflow,
    every agent's activities, and a sandbox that passes toolfold through
    (its core is pure; re-importing it per workflow would only cost time).

    Args:
        agents: The agents this worker runs (on a client, any list; only the
            data converter matters there). They are registered by name for
            the whole process: two workers in one process cannot run
            different agents under the same name.
        external_storage: Temporal's external storage for large payloads
            (e.g. ``ExternalStorage(drivers=[FileStorageDriver(path)])``, or
            an S3 / GCS driver from ``temporalio.contrib``): payloads over its
            threshold go to the store and the history keeps a reference, so
            tool results and states may outgrow Temporal's 2 MB limit. Give
            the same to the worker's and the client's plugin.

    Raises:
        UsageError: ``agents`` is no list of `TemporalAgent` (one agent not
            in a list, a plain `Agent`), two share a name or an activity
            name, or one has ``max_result_bytes=None`` without
            ``external_storage``.
    """

    def __init__(
        self,
        agents: Sequence[TemporalAgent] = (),
        *,
        external_storage: ExternalStorage | None = None,
    ) -> None:
        example = " (ToolfoldPlugin([agent]))"
        given: object = agents  # (typed, but given by the caller)
        if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
            expected = "a list of TemporalAgent"
            raise wrong_argument("ToolfoldPlugin", "agents", expected, given, example)
        agents = tuple(agents)
        listed: tuple[object, ...] = agents
        for index, each in enumerate(listed):
            if not isinstance(each, TemporalAgent):
                hint = " (TemporalAgent(agent))" if isinstance(each, (Agent, Workflow)) else example
                raise wrong_argument(
                    "ToolfoldPlugin", f"agents[{index}]", "a TemporalAgent", each, hint
                )
        names = [a.name for a in agents]
        if len(set(names)) != len(names):
            raise UsageError(f"two agents share a name: {names}")
        limit = None if external_storage is not None else PAYLOAD_LIMIT  # (by reference)
        made = {agent.name: agent._activities(limit) for agent in agents}
        _check_activity_names(made)
        unlimited = [a.name for a in agents if a.settings.max_result_bytes is None]
        if unlimited and external_storage is None:
            raise UsageError(
                f"agents {unlimited} have max_result_bytes=None: without external_storage a "
                "result over Temporal's 2 MB payload limit is refused and its activity "
                "retried without end; give ToolfoldPlugin an external_storage"
            )
        for agent in agents:
            registered = agent._registered()
            if external_storage is not None:  # large payloads go by reference
                registered = attrs.evolve(registered, payload_limit=None)
            register(registered)
        activities = [act for acts in made.values() for act in acts]
        hosts = {name: host for a in agents for name, host in a._source_hosts(limit).items()}
        if hosts:  # one dynamic activity calls the tools every source lists
            activities.append(source_call_activity(hosts))
        converter = data_converter
        if external_storage is not None:
            converter = dataclasses.replace(converter, external_storage=external_storage)
        super().__init__(
            "toolfold.TemporalPlugin",
            data_converter=converter,
            activities=lambda given: [*(given or ()), *activities],
            workflows=lambda given: [*(given or ()), AgentWorkflow],
            workflow_runner=_passing_toolfold,
        )


def _check_activity_names(made: Mapping[str, list[Callable[..., Any]]]) -> None:
    """Refuse two agents whose activities share a name (the worker would refuse them).

    ``made``: each agent's activities, by agent name. ``.`` joins a sub-run's
    path and ``@`` names a handoff's agent in activity names, so an agent named
    ``desk.ask`` makes the activities of agent ``desk``'s sub-run ``ask``. Such
    a name is allowed (renaming an agent breaks its running workflows); two
    agents clashing is refused here, naming both.
    """
    owners: dict[str, str] = {}
    for agent, activities in made.items():
        for each in activities:
            name = activity._Definition.must_from_callable(each).name
            if name is None:  # a dynamic activity (none of an agent's)
                continue
            other = owners.setdefault(name, agent)
            if other != agent:
                raise UsageError(
                    f"agents {other!r} and {agent!r} both make the activity {name!r} "
                    "('.' joins a sub-run's path, '@' a handoff's agent, in activity "
                    "names): rename one of them"
                )


def _passing_toolfold(runner: WorkflowRunner | None) -> WorkflowRunner:
    if isinstance(runner, SandboxedWorkflowRunner):
        # jsonschema checks a sub-run's arguments in workflow code (imported lazily), and
        # cattrs and attrs structure its typed input (an as_tool(input_type=...)) there.
        restrictions = runner.restrictions.with_passthrough_modules(
            "toolfold", "jsonschema", "cattrs", "attr", "attrs"
        )
        return dataclasses.replace(runner, restrictions=restrictions)
    return runner if runner is not None else SandboxedWorkflowRunner()
