"""How a workflow runs on the agent loop: a planner in the model's seat.

A workflow's run is an ordinary run (`RunState`, events, reducers): its
"model" is a `Planner` that reads the run's conversation (the workflow's
input, then each step's call and result) and answers with the next step
calls, or with the final output. Each step is a tool of the run (see
`_task`), so its result, its nested sub-run, an approval inside it, the
idempotency key, the commit in call order and the step count all come from
the loop that agents use. The planner is deterministic: its decisions are
recorded in the log as model responses, so a replay needs no planner at all,
and a resumed run asks it only about what comes next.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from collections.abc import Sequence as SequenceABC
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any, ClassVar, Literal, NamedTuple, overload

import attrs

from toolfold._errors import RunError
from toolfold.runtime.core._approval import dispositions
from toolfold.runtime.core._build import builder
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._json_numbers import json_value
from toolfold.runtime.core._messages import (
    NO_USAGE,
    FrozenDict,
    Message,
    TextPart,
    ToolCallPart,
    freeze,
    frozen_dict,
    thaw,
)
from toolfold.runtime.core._request import FinishReason, ModelRequest, ModelResponse, OutputSpec
from toolfold.runtime.core._stream import StreamEvent
from toolfold.runtime.drive._loop import unique_call_ids
from toolfold.runtime.drive._output import OutputRejected, OutputSchema
from toolfold.toolkit._results import describe_exception

if TYPE_CHECKING:
    from toolfold.runtime._task import Task
    from toolfold.runtime._workflow import Workflow
    from toolfold.runtime.core._state import CallState, RunState

PLANNER_MODEL = "toolfold:workflow"
"""The model name a workflow's run records (no provider is involved)."""


# The planner's records are made from values of the fields' final types (see `builder`).
_call_part = builder(ToolCallPart)
_message = builder(Message)
_text = builder(TextPart)
_response = builder(ModelResponse)


_NO_KNOWN: Mapping[str, Any] = {}


class Attempt(NamedTuple):
    """One finished attempt at a step, read back from the conversation.

    Attributes:
        call_id: The call's id: the step's base id, ``#n`` for attempt n > 1.
        name: The step's name.
        ok: False when the step failed.
        value: Its output as plain data, or its error text.
    """

    call_id: str
    name: str
    ok: bool
    value: Any

    @property
    def base(self) -> str:
        """The id shared by every attempt at the same step (and loop iteration)."""
        return self.call_id.partition("#")[0]


class Call(NamedTuple):
    """A step call the planner asks for."""

    task: Task
    call_id: str
    input: Any
    values: Mapping[str, Any]


class InPlace(NamedTuple):
    """A step call a driver runs in place: the step, the call, its sub-run so far (if resumed)."""

    task: Task
    call: Call
    child: RunState | None


class Done(NamedTuple):
    """The step's output (plain data); ``skipped``: it failed and was skipped."""

    value: Any
    skipped: bool = False
    error: str | None = None


def _by_base_of(plan: Plan) -> Mapping[str, tuple[Attempt, ...]]:
    by_base: dict[str, tuple[Attempt, ...]] = {}
    _add(by_base, plan.attempts)
    return by_base


class _Chain:
    """The attempts of a chain of plans, each extending the one before (`Plan.extended`).

    One list and one index by step, appended to in place while the plan
    extended is the chain's last: a step's plan update costs its own
    attempts, not a copy of every attempt before them. ``memos``: what a
    workflow keeps for its next decision on this chain (a `Loop`'s reading,
    by the Loop's id), so it lives as long as the run's plans do.
    """

    __slots__ = ("by_base", "items", "memos")

    def __init__(self, items: list[Attempt], by_base: dict[str, tuple[Attempt, ...]]) -> None:
        self.items = items
        self.by_base = by_base
        self.memos: dict[int, tuple[Any, ...]] = {}


class _Prefix(SequenceABC[Attempt]):
    """The first ``n`` attempts of a chain: a plan's ``attempts`` (read-only, like a tuple)."""

    __slots__ = ("_chain", "_n")

    def __init__(self, chain: _Chain, n: int) -> None:
        self._chain = chain
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Attempt: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Attempt, ...]: ...

    def __getitem__(self, index: int | slice) -> Attempt | tuple[Attempt, ...]:
        items = self._chain.items
        if isinstance(index, slice):
            return tuple([items[i] for i in range(*index.indices(self._n))])
        at = index + self._n if index < 0 else index
        if not 0 <= at < self._n:
            raise IndexError("attempt index out of range")
        return items[at]

    def __iter__(self) -> Iterator[Attempt]:
        return itertools.islice(self._chain.items, self._n)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, _Prefix)):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


class _ByStep(Mapping[str, tuple[Attempt, ...]]):
    """The first ``n`` attempts of a chain by step: a plan's ``by_step``.

    The chain's own index while the chain holds just those ``n``; once a
    later plan extends it, an index of its own, made when first read.
    """

    __slots__ = ("_chain", "_n", "_own")

    def __init__(self, chain: _Chain, n: int) -> None:
        self._chain = chain
        self._n = n
        self._own: dict[str, tuple[Attempt, ...]] | None = None

    def _index(self) -> dict[str, tuple[Attempt, ...]]:
        chain = self._chain
        if len(chain.items) == self._n:
            return chain.by_base
        own = self._own
        if own is None:
            own = {}
            _add(own, itertools.islice(chain.items, self._n))
            self._own = own
        return own

    def get(self, key: str, default: Any = None) -> Any:
        return self._index().get(key, default)

    def __getitem__(self, key: str) -> tuple[Attempt, ...]:
        return self._index()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._index()

    def __iter__(self) -> Iterator[str]:
        return iter(self._index())

    def __len__(self) -> int:
        return len(self._index())


@attrs.frozen
class Plan:
    """What the planner reads: the workflow's input, inherited values, finished attempts.

    Attributes:
        input: The workflow's input.
        values: The values it inherits.
        attempts: The finished attempts, in order (read-only).
        by_step: The finished attempts by step (base id), in order (read it,
            never change it).
    """

    input: Any
    values: Mapping[str, Any]
    attempts: SequenceABC[Attempt]
    # Made from ``attempts`` unless given (`read_plan` extends the previous
    # plan's instead of reading every attempt again). A field, not a property:
    # a workflow's plan reads it once a decision.
    by_step: Mapping[str, tuple[Attempt, ...]] = attrs.field(
        default=attrs.Factory(_by_base_of, takes_self=True), repr=False, eq=False
    )

    def status(self, task: Task, base: str) -> Done | str:
        """The step's outcome, or the call id of its next attempt."""
        attempts = self.by_step.get(base)
        if not attempts:
            return base
        last = attempts[-1]
        if last.ok:
            return Done(last.value)
        if task.on_error == "retry":
            # The run itself fails once the retries are used up (the tool's max_retries).
            return f"{base}#{len(attempts) + 1}"
        return Done(None, skipped=True, error=last.value)

    def started(self, base: str) -> bool:
        """Whether any attempt at ``base`` exists."""
        return base in self.by_step

    def extended(self, attempts: Iterable[Attempt]) -> Plan:
        """This plan with ``attempts`` finished after its own.

        The new plan shares this one's attempts (see `_Chain`): extending the
        last plan of a chain costs only the new attempts; extending an earlier
        one (a fork) copies its attempts into a chain of its own.
        """
        added = list(attempts)
        mine = self.attempts
        if type(mine) is _Prefix and len(mine._chain.items) == mine._n:
            chain = mine._chain  # the chain's last plan: extended in place
        else:
            chain = _Chain(list(mine), dict(self.by_step))
        chain.items.extend(added)
        _add(chain.by_base, added)
        n = len(chain.items)
        return _plan(self.input, self.values, _Prefix(chain, n), _ByStep(chain, n))

    def call(self, task: Task, call_id: str, input: Any, values: Mapping[str, Any]) -> Call:
        """A call of ``task`` with the values its templates need."""
        if not task.free_names:
            return Call(task, call_id, input, _NO_VALUES)
        needed = {n: values[n] for n in sorted(task.free_names) if n in values}
        return Call(task, call_id, input, needed)


def memos(plan: Plan) -> dict[int, tuple[Any, ...]] | None:
    """What workflows keep on ``plan``'s chain for their next decision (see `_Chain`).

    None when ``plan`` is no chain's (a plan read whole, not extended): there
    is nothing to keep it on, and a decision reads its attempts from the first.
    """
    attempts = plan.attempts
    if type(attempts) is _Prefix:
        return attempts._chain.memos
    return None


def envelope(input: Any, values: Mapping[str, Any]) -> str:
    """The first message of a workflow run: its input and the values it inherits."""
    if type(input) is str and not values:  # the usual input: text, no values
        return _text_envelope(input)
    return json.dumps({"input": input, "values": dict(values)}, default=str)


def json_text(value: Any) -> str:
    """What ``json.dumps(value, default=str)`` writes.

    Written by json's shared encoder (``default`` makes a new one per call)
    unless a value needs the default: text, and the plain data steps give,
    never do.
    """
    if type(value) is str:
        return encode_basestring_ascii(value)
    try:
        return json.dumps(value)
    except TypeError:  # a value only the default writes (a key it cannot write raises again)
        return json.dumps(value, default=str)


def _text_envelope(input: str) -> str:
    """The very text json.dumps writes for text with no values, without building an encoder."""
    return f'{{"input": {encode_basestring_ascii(input)}, "values": {{}}}}'


def read_plan(
    messages: Iterable[Message], since: Plan | None = None, known: Mapping[str, Any] = _NO_KNOWN
) -> Plan:
    """The workflow's input, inherited values and finished attempts, from its conversation.

    With ``since`` (the plan of an earlier prefix of the same conversation),
    ``messages`` holds only what came after it. ``known``: the decoded value
    of successful results by call id, where the caller has it (the output a
    step's result was encoded from), so their text is not decoded again.
    """
    input_: Any = since.input if since is not None else None
    values: Mapping[str, Any] = since.values if since is not None else {}
    attempts: list[Attempt] = []
    read = since is not None
    for message in messages:
        if message.role == "user" and not read:
            data = json_value(message.text)
            input_, values, read = data["input"], data.get("values") or {}, True
        elif message.role == "tool":
            for result in message.tool_results:
                if result.is_error:
                    attempts.append(
                        Attempt(result.call_id, result.tool_name, False, result.content)
                    )
                else:
                    call_id = result.call_id
                    value = known[call_id] if call_id in known else json_value(result.content)
                    attempts.append(Attempt(result.call_id, result.tool_name, True, value))
    if since is None:
        return _plan(input_, values, tuple(attempts))
    return since.extended(attempts)


# Plans are made from values of the fields' types (see `builder`): the attrs
# class's own ``__init__`` is a third of a workflow step's plan update.
_plan = builder(Plan)


def first_plan(input: Any, values: Mapping[str, Any]) -> Plan:
    """The plan of a run's first message, its ``input`` and ``values`` as `read_plan` reads them."""
    return _plan(input, values, (), {})


def _add(by_base: dict[str, tuple[Attempt, ...]], attempts: Iterable[Attempt]) -> None:
    for attempt in attempts:
        base = attempt[0]  # (`Attempt.base`, without its call: most ids are a base)
        if "#" in base:
            base = base.partition("#")[0]
        found = by_base.get(base)
        by_base[base] = (*found, attempt) if found else (attempt,)


class _PlanCache:
    """The last plan read per conversation, so each decision reads only the new messages.

    Keyed by the conversation's first message; a hit needs the very message
    objects read last time (a `Log` shares its prefix), so a fork or a state
    loaded from JSON, whose messages are other objects, is read afresh.
    """

    _SIZE = 64

    def __init__(self) -> None:
        self._plans: dict[int, tuple[Message, Message, int, Plan]] = {}

    def read(self, messages: tuple[Message, ...]) -> Plan:
        if not messages:
            return read_plan(messages)
        first, count = messages[0], len(messages)
        hit = self._plans.get(id(first))
        if (
            hit is not None
            and hit[0] is first
            and hit[2] <= count
            and messages[hit[2] - 1] is hit[1]
        ):
            plan = read_plan(messages[hit[2] :], hit[3])
        else:
            plan = read_plan(messages)
        if len(self._plans) >= self._SIZE:
            self._plans.clear()
        self._plans[id(first)] = (first, messages[-1], count, plan)
        return plan


class Final(NamedTuple):
    """The workflow's output (plain data), and why the workflow ends.

    Attributes:
        value: The output.
        decoded: The value is made only of steps' outputs as their results
            decode (an `Attempt`'s value), so its JSON decodes to an equal
            value: the run accepts it as it is, not decoded again from its JSON.
        reason: ``stop``, or ``max_iterations`` for a `Loop` that ran out of
            iterations (or was stopped by its tree budget: `Loop.spent_answer`)
            before its ``until`` held (its answer's finish reason, which the
            run finishes with).
    """

    value: Any
    decoded: bool = False
    reason: Literal["stop", "max_iterations"] = "stop"


def respond(decision: list[Call] | Final) -> ModelResponse:
    """The planner's decision as a model response."""
    # Built without the records' converters: every value has its final type.
    if isinstance(decision, Final):
        return answer_response(json_text(decision.value), decision.reason)
    parts = step_calls(decision)
    response = calls_response(parts)
    if len(parts) > 1 and len({p.id for p in parts}) < len(parts):
        return unique_call_ids(response)  # a plan names each call once; as the loop would
    return response


def answer_response(text: str, reason: FinishReason = "stop") -> ModelResponse:
    """The planner's response giving the final answer ``text`` (its value as JSON: `json_text`).

    ``reason``: the `Final`'s, which the run finishes with.
    """
    return _response(
        _message("assistant", (_text(text),)), NO_USAGE, reason, None, PLANNER_MODEL, None
    )


def step_calls(decision: list[Call]) -> tuple[ToolCallPart, ...]:
    """The tool calls of the planner's ``decision`` (its response's, unless two share an id)."""
    return tuple([_step_call(c) for c in decision])


def calls_response(parts: tuple[ToolCallPart, ...]) -> ModelResponse:
    """The planner's response making the calls ``parts`` (each id once: see `respond`)."""
    return _response(
        _message("assistant", parts), NO_USAGE, "tool_calls", None, PLANNER_MODEL, None
    )


def _step_call(call: Call) -> ToolCallPart:
    input_ = call.input
    if type(input_) is str and not call.values:  # the usual step call: text, no values
        text = _text_envelope(input_)
        arguments = frozen_dict(input=input_, values=_NO_VALUES)
    else:
        values = dict(call.values)
        text = json.dumps({"input": input_, "values": values})
        # Frozen as it is built (the part's converter would keep it): only the
        # input and the values can nest, and they are frozen once each.
        arguments = frozen_dict(input=freeze(input_), values=freeze(values))
    return _call_part(call.call_id, call.task.name, text, arguments, _NO_VALUES)


_NO_VALUES = frozen_dict()
NO_VALUES: Mapping[str, Any] = _NO_VALUES
"""The values of a call whose step's templates need none (what `Plan.call` gives it)."""


class Planner:
    """The `Model` of a workflow's run: decides the next steps from the conversation."""

    def __init__(self, workflow: Workflow) -> None:
        self._workflow = workflow
        self._plans = _PlanCache()
        self._executes: tuple[RunConfig | None, bool] = (None, False)
        self._lean: tuple[RunConfig | None, Mapping[str, Task] | None] = (None, None)
        # Steps a driver may run in place (see `in_place`).
        self._in_place = {
            t.name: t for t in workflow.tasks if t.kind != "function" and t.timeout is None
        }

    def in_place(self, calls: tuple[CallState, ...]) -> list[InPlace] | None:
        """The calls of a round to run, with their steps, when a driver may run them in place.

        That is when every call to run is an agent or workflow step without a
        timeout (nothing to cancel at a deadline), called with the arguments
        the planner writes; otherwise None (the executor runs the round).
        """
        found: list[InPlace] = []
        for call in calls:
            if call.status != "to_run":
                continue
            task = self.step_of(call.call)
            if task is None:
                return None
            part = call.call
            arguments = part.arguments
            assert arguments is not None  # `step_of` checked them
            found.append(
                InPlace(
                    task, Call(task, part.id, arguments["input"], arguments["values"]), call.child
                )
            )
        return found or None

    def lean_steps(self, config: RunConfig) -> Mapping[str, Task] | None:
        """The steps a fresh run under ``config`` runs in place (by name), or None when it cannot.

        A step runs in place as in `in_place`, and when ``config`` has its
        tool; a run cannot when ``config`` stops it or reviews its calls on
        the way (a stop condition, calls not executed at once, an approval)
        or has no output. Kept for the last config asked about.
        """
        if config is self._lean[0]:
            return self._lean[1]
        steps: Mapping[str, Task] | None = None
        if (
            not config.stop_when
            and config.auto_execute_tools
            and config.output is not None
            and self.executes(config)
        ):
            steps = {n: t for n, t in self._in_place.items() if config.tool(n) is not None}
        self._lean = (config, steps)
        return steps

    def step_of(self, call: ToolCallPart) -> Task | None:
        """The step ``call`` runs when a driver may run it in place (see `in_place`), else None."""
        task = self._in_place.get(call.name)
        arguments = call.arguments
        if (
            task is None
            or arguments is None
            or len(arguments) != 2
            or type(arguments.get("values")) is not FrozenDict
            or "input" not in arguments
        ):
            return None
        return task

    @property
    def name(self) -> str:
        """The model name the run records."""
        return PLANNER_MODEL

    def __repr__(self) -> str:
        return f"Planner({self._workflow.name or type(self._workflow).__name__})"

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """The next decision."""
        return self.decide(request.messages)

    def decide(self, messages: tuple[Message, ...]) -> ModelResponse:
        """The next decision, from the run's conversation (what a request would hold).

        Raises:
            RunError: The workflow's plan raised (its state is to be set by the driver).
        """
        return respond(self.decision(self.read(messages)))

    def read(self, messages: tuple[Message, ...]) -> Plan:
        """The plan of the run's conversation ``messages``."""
        return self._plans.read(messages)

    def decision(self, plan: Plan) -> list[Call] | Final:
        """The workflow's decision on ``plan``.

        Raises:
            RunError: The workflow's plan raised (its state is to be set by the driver).
        """
        workflow = self._workflow
        try:
            return workflow.plan(plan)
        except RunError:
            raise
        except Exception as exc:
            label = workflow.name or type(workflow).__name__
            raise RunError(
                f"workflow {label!r}: {describe_exception(exc)}; the error's state is the "
                "workflow before this decision (resume it to try again)",
                None,
            ) from exc

    def spent_decision(self, plan: Plan) -> Final | None:
        """The workflow's answer on ``plan`` when its tree budget lets it start no step.

        See `Workflow.spent_answer`; None: the run stops at its budget.
        """
        return self._workflow.spent_answer(plan)

    def spent_response(self, messages: tuple[Message, ...]) -> ModelResponse | None:
        """`spent_decision` on the run's conversation ``messages``, as a model response."""
        final = self.spent_decision(self.read(messages))
        return None if final is None else respond(final)

    def executes(self, config: RunConfig) -> bool:
        """Whether every call the planner makes under ``config`` executes (as `dispositions` says).

        True for a workflow's own config: its step tools have functions and
        need no approval. Kept for the last config asked about.
        """
        if config is self._executes[0]:
            return self._executes[1]
        # A call of each tool and of none, as `dispositions` (the one place this is decided) sees it.
        names = [spec.name for spec in config.tools] + [""]
        calls = [ToolCallPart(f"probe_{i}", name, "{}") for i, name in enumerate(names)]
        executes = all(d == "execute" for d in dispositions(config, calls, None))
        self._executes = (config, executes)
        return executes

    async def request(self, request: ModelRequest) -> ModelResponse:
        """The next decision (the planner never waits)."""
        return self.request_sync(request)

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The decision as stream events (one chunk per part)."""
        from toolfold.runtime._testing import response_events

        return response_events(self.request_sync(request), chunk=1 << 30)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The decision as stream events."""
        for event in self.stream_sync(request):
            yield event


@attrs.frozen
class WorkflowOutput(OutputSchema):
    """A workflow's final answer: JSON from the planner, restored by the workflow."""

    _restore: Any = attrs.field(default=None, eq=False, repr=False)

    parse_builds: ClassVar[bool] = False  # (`parse` gives plain data: `finish` types it)

    def parse(self, text: str) -> tuple[Any, Any]:
        """The planner's final answer as plain data, twice: (not yet typed, plain).

        The planner wrote the answer from the steps' outputs, so there is
        nothing to reject, and the run keeps only the plain value: typing it
        here (`restore`: every branch of a `Parallel`, structured types) would
        be thrown away. The response types it once, when it is made.
        """
        try:
            plain = json_value(text)
        except ValueError as exc:  # pragma: no cover - the planner writes JSON
            raise OutputRejected(f"not JSON: {exc}") from exc
        return plain, plain

    def restore(self, plain: Any) -> Any:
        """The workflow's output as its declared type where known.

        Made from a plain deep copy of ``plain``: the run's state keeps
        ``plain`` (read-only), and a type that takes data as it is (``Any``, a
        function without a return annotation, a `Parallel`'s branches) would
        otherwise hand the caller the state's own objects.
        """
        own = thaw(plain)
        return self._restore(own) if self._restore is not None else own


def workflow_output(workflow: Workflow) -> WorkflowOutput:
    """The output schema of ``workflow``'s run."""
    return WorkflowOutput(
        Any, OutputSpec("workflow_output", {}), False, None, restore=workflow.restore
    )
