"""The agents the Temporal tests run, and a worker process for them.

Run as a script it is the worker the crash tests start and SIGKILL:
``python temporal_app.py ADDRESS TASK_QUEUE LOG_DIR``. It prints ``ready``
once polling, and ``hanging <key>`` when the `slow` tool blocks (while a file
``hang`` exists in LOG_DIR), ``cancelled <key>`` when Temporal cancels it there; every tool appends ``start <key>`` and
``done <key>`` lines to ``LOG_DIR/tools.log`` (a temporary folder when it is not given).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import attrs
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

from toolfold import (
    Agent,
    AuthenticationError,
    Handoff,
    Loop,
    Message,
    ModelResponse,
    Parallel,
    RateLimitError,
    Response,
    Route,
    RunContext,
    Sequence,
    StreamError,
    Task,
    Tool,
    Usage,
    token_budget,
    tool,
    tool_called,
)
from toolfold.integrations.temporal import (
    ActivitySettings,
    StreamContext,
    TemporalAgent,
    ToolfoldPlugin,
)
from toolfold.mcp import MCPServerStdio
from toolfold.runtime import StreamEvent, TextDelta, UsageUpdate
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._request import ModelRequest
from toolfold.runtime.core._state import RunState
from toolfold.testing import FunctionModel, response_events


def _log_dir() -> Path:
    """``TOOLFOLD_TEMPORAL_LOG_DIR``, else a temporary folder removed at exit: never the
    current folder (a test that set neither it nor `LOG_DIR` left tools.log in the checkout)."""
    given = os.environ.get("TOOLFOLD_TEMPORAL_LOG_DIR")
    if given:
        return Path(given)
    folder = tempfile.mkdtemp(prefix="toolfold-temporal-log-")
    atexit.register(shutil.rmtree, folder, True)
    return Path(folder)


LOG_DIR = _log_dir()


def _log(line: str) -> None:
    with (LOG_DIR / "tools.log").open("a", encoding="utf-8") as f:
        f.write(line + "\n")


@tool
def record(ctx: RunContext[Any], text: str) -> str:
    """Record ``text`` once per execution and return it upper-cased.

    Args:
        text: What to record.
    """
    _log(f"start {ctx.idempotency_key}")
    _log(f"done {ctx.idempotency_key}")
    return text.upper()


@tool
async def slow(ctx: RunContext[Any], text: str) -> str:
    """Like `record`, but blocks forever while the file ``hang`` exists (the crash point).

    Args:
        text: What to record.
    """
    _log(f"start {ctx.idempotency_key}")
    if (LOG_DIR / "hang").exists():
        print(f"hanging {ctx.idempotency_key}", flush=True)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:  # the run was cancelled: Temporal told the activity
            print(f"cancelled {ctx.idempotency_key}", flush=True)
            raise
    _log(f"done {ctx.idempotency_key}")
    return text.upper()


@tool(requires_approval=True)
def transfer(amount: int) -> str:
    """Move money (needs a person's approval).

    Args:
        amount: How much.
    """
    _log(f"transfer {amount}")
    return f"moved {amount}"


def _results(request: ModelRequest) -> list[str]:
    return [r.content for m in request.messages for r in m.tool_results]


def _three_steps(request: ModelRequest) -> Any:
    """Two parallel calls, then the slow call, then the answer from the results."""
    done = _results(request)
    if not done:
        return [
            FunctionModel.call("record", {"text": "a"}),
            FunctionModel.call("record", {"text": "b"}),
        ]
    if len(done) == 2:
        return FunctionModel.call("slow", {"text": "c"})
    return "answer: " + ",".join(done)


def _approval(request: ModelRequest) -> Any:
    done = _results(request)
    if not done:
        return FunctionModel.call("transfer", {"amount": 5})
    return "transfer said: " + done[0]


def _flaky(request: ModelRequest) -> Any:
    """Rate-limited on an activity's first attempt (a provider's 429), fine on the next."""
    if activity.info().attempt == 1:
        raise RateLimitError("429 slow down", provider="test", retry_after=0.1)
    return f"answered on attempt {activity.info().attempt}"


PATIENT_DELAY = 2.0
"""The retry-after of `patient`'s 429: ten times its retry policy's initial interval."""


def _patient(request: ModelRequest) -> Any:
    """Rate-limited on the first attempt with a retry-after well above the policy's interval."""
    if activity.info().attempt == 1:
        raise RateLimitError("429 wait", provider="test", retry_after=PATIENT_DELAY)
    return f"answered on attempt {activity.info().attempt}"


def _unauthorized(request: ModelRequest) -> Any:
    raise AuthenticationError("401 bad key", provider="test", status_code=401)


# The heartbeat timeout is how long a killed worker goes unnoticed (the crash tests wait it
# out), and also how long a live worker may be starved before its activity is retried: the
# SDK sends at most every 80% of it, so 2 s left 0.4 s of slack, too little with four test
# runs on two cores (a live tool run twice is a failed test, not a slow one).
SETTINGS = ActivitySettings(
    model_timeout=timedelta(seconds=30),
    tool_timeout=timedelta(seconds=60),
    heartbeat_timeout=timedelta(seconds=4),
    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.0),
)

steps = TemporalAgent(
    Agent(FunctionModel(_three_steps), tools=[record, slow], name="steps"), settings=SETTINGS
)
approval = TemporalAgent(
    Agent(FunctionModel(_approval), tools=[transfer], name="approval"), settings=SETTINGS
)
flaky = TemporalAgent(Agent(FunctionModel(_flaky), name="flaky"), settings=SETTINGS)
patient = TemporalAgent(Agent(FunctionModel(_patient), name="patient"), settings=SETTINGS)
unauthorized = TemporalAgent(
    Agent(FunctionModel(_unauthorized), name="unauthorized"), settings=SETTINGS
)
chained = TemporalAgent(
    Agent(FunctionModel(_three_steps), tools=[record, slow], name="chained"),
    settings=attrs.evolve(SETTINGS, continue_as_new_steps=1),
)


@tool
def big(size: int) -> str:
    """A result of ``size`` bytes.

    Args:
        size: How many bytes.
    """
    return "x" * size


def _big(request: ModelRequest) -> Any:
    done = _results(request)
    return done[0] if done else FunctionModel.call("big", {"size": 101})


def _measure(request: ModelRequest) -> Any:
    done = _results(request)
    return f"got {len(done[0])} bytes" if done else FunctionModel.call("big", {"size": 3_000_000})


# A 3 MB result, over Temporal's 2 MB limit: it needs external storage.
huge = TemporalAgent(
    Agent(FunctionModel(_measure), tools=[big], name="huge"),
    settings=attrs.evolve(SETTINGS, max_result_bytes=None),
)
oversized = TemporalAgent(
    Agent(FunctionModel(_big), tools=[big], name="oversized"),
    settings=attrs.evolve(SETTINGS, max_result_bytes=100),
)


def _swell(request: ModelRequest) -> Any:
    done = _results(request)
    if done:
        return f"got {sum(len(d) for d in done)} bytes"
    return [FunctionModel.call("big", {"size": 700_000}) for _ in range(2)]


# A 0.8 MB prompt and two 0.7 MB results: each fits, the conversation (the
# next model request) does not.
swelling = TemporalAgent(
    Agent(FunctionModel(_swell), tools=[big], name="swelling"), settings=SETTINGS
)


def _bulky(request: ModelRequest) -> Any:
    done = _results(request)
    if done:
        return f"got {len(done[0])} bytes, {done[1]}"
    return [
        FunctionModel.call("big", {"size": 300_000}),
        FunctionModel.call("transfer", {"amount": 5}),
    ]


# With a 0.9 MB prompt, its state outgrows 2 MB once the 0.3 MB result is in
# (the state holds both twice: in the messages and in the log), its model
# requests do not.
bulky = TemporalAgent(
    Agent(FunctionModel(_bulky), tools=[big, transfer], name="bulky"), settings=SETTINGS
)


class Channel:
    """The streaming tests' side channel: (step, attempt, event) per run id, None ends an attempt.

    ``gate``, when set, holds every model stream after its first text piece
    until the test opens it.
    """

    def __init__(self) -> None:
        self.queues: dict[str, asyncio.Queue[tuple[int, int, StreamEvent | None]]] = {}
        self.gate: asyncio.Event | None = None
        self.tagged: list[tuple[str, tuple[str, ...], StreamEvent]] = []

    def queue(self, run_id: str) -> asyncio.Queue[tuple[int, int, StreamEvent | None]]:
        """The events of run ``run_id``, in the order they were sent."""
        return self.queues.setdefault(run_id, asyncio.Queue())


CHANNEL = Channel()


async def publish(context: StreamContext, events: AsyncIterator[StreamEvent]) -> None:
    """The event stream handler: every event of a model request onto the run's queue."""
    queue = CHANNEL.queue(context.run_id)
    async for event in events:
        await queue.put((context.step, context.attempt, event))
    await queue.put((context.step, context.attempt, None))


async def publish_tagged(context: StreamContext, events: AsyncIterator[StreamEvent]) -> None:
    """An event stream handler keeping each event with its activity's agent and run path."""
    async for event in events:
        CHANNEL.tagged.append((context.agent, context.path, event))


class Dripping(FunctionModel):
    """A `FunctionModel` whose stream waits at `CHANNEL.gate` after its first text piece.

    On an activity's first attempt, when the answer starts with ``hiccup``, the
    stream breaks (a provider's 429) after that first piece.
    """

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response in 4-character pieces, held at the gate after the first one."""
        response = await self.request(request)
        first = True
        for event in response_events(response, chunk=4):
            yield event
            if isinstance(event, TextDelta) and first:
                first = False
                if response.text.startswith("hiccup") and activity.info().attempt == 1:
                    raise RateLimitError("429 slow down", provider="test", retry_after=0.1)
                if CHANNEL.gate is not None:
                    await CHANNEL.gate.wait()


def _record_then_greet(request: ModelRequest) -> Any:
    done = _results(request)
    return "Hello, world: " + done[0] if done else FunctionModel.call("record", {"text": "a"})


streamed = TemporalAgent(
    Agent(Dripping(_record_then_greet), tools=[record], name="streamed"),
    settings=SETTINGS,
    event_stream_handler=publish,
)
hiccup = TemporalAgent(
    Agent(Dripping(lambda request: "hiccup, then the whole answer"), name="hiccup"),
    settings=SETTINGS,
    event_stream_handler=publish,
)


def _pay(amount: int) -> str:
    """Pay an amount.

    Args:
        amount: How much.
    """
    _log(f"pay {amount}")
    return f"paid {amount}"


def _two_payments(request: ModelRequest) -> Any:
    """Pay 5 and 50 in one step, then answer with the results."""
    done = _results(request)
    if not done:
        return [FunctionModel.call("pay", {"amount": 5}), FunctionModel.call("pay", {"amount": 50})]
    return "payments: " + ", ".join(done)


def over_ten(call: ToolCallPart, state: RunState) -> bool:
    """Payments over 10 need a person (a pure function of the call: workflow code runs it)."""
    return int(call.arguments["amount"]) > 10


def over_hundred(call: ToolCallPart, state: RunState) -> bool:
    """Version 1 of the payment rule: over 100 needs a person."""
    return int(call.arguments["amount"]) > 100


def over_twenty(call: ToolCallPart, state: RunState) -> bool:
    """Version 2, unguarded: over 20 (breaks the replay of runs decided under version 1)."""
    return int(call.arguments["amount"]) > 20


def over_twenty_patched(call: ToolCallPart, state: RunState) -> bool:
    """Version 2, guarded: runs that started under version 1 keep its rule on replay."""
    if not workflow.in_workflow() or workflow.patched("payment-limit-20"):
        return int(call.arguments["amount"]) > 20
    return int(call.arguments["amount"]) > 100


def payments(rule: Any, name: str) -> TemporalAgent:
    """An agent paying 5 and 50 in one step, its `pay` tool under the approval ``rule``."""
    pay = tool(name="pay", requires_approval=rule)(_pay)
    return TemporalAgent(
        Agent(FunctionModel(_two_payments), tools=[pay], name=name), settings=SETTINGS
    )


def _record_prompt(request: ModelRequest) -> Any:
    """Record the prompt with the tool, then answer with what it returned."""
    done = _results(request)
    if done:
        return "recorded: " + done[0]
    return FunctionModel.call("record", {"text": request.messages[-1].text})


# Nothing is killed in the 200-run test: a heartbeat missed by a worker busy with 200 runs on
# a loaded machine must not retry a live tool (it did once at load 8.5 with 2 s).
many = TemporalAgent(
    Agent(FunctionModel(_record_prompt), tools=[record], name="many"),
    settings=attrs.evolve(SETTINGS, heartbeat_timeout=timedelta(seconds=60)),
)
# The worker's "lopsided" has no tools; a client's may (its calls then fail the run).
lopsided = TemporalAgent(Agent(FunctionModel(_record_prompt), name="lopsided"), settings=SETTINGS)


RELAY = threading.Event()
"""`waits` blocks on it; the test sets it once the server has `opens`' result."""


@tool
def waits(text: str) -> str:
    """Block until `RELAY` is set, then return ``text`` upper-cased (the step's first call).

    Args:
        text: What to return.
    """
    assert RELAY.wait(timeout=60), "RELAY was never set"
    _log(f"waits {text}")
    return text.upper()


@tool
def opens(text: str) -> str:
    """Return ``text`` upper-cased at once (the step's second call).

    Args:
        text: What to return.
    """
    _log(f"opens {text}")
    return text.upper()


def _relay(request: ModelRequest) -> Any:
    done = _results(request)
    if done:
        return "in call order: " + ",".join(done)
    return [
        FunctionModel.call("waits", {"text": "first"}),
        FunctionModel.call("opens", {"text": "second"}),
    ]


relay = TemporalAgent(
    Agent(FunctionModel(_relay), tools=[waits, opens], name="relay"), settings=SETTINGS
)
relayed_chain = TemporalAgent(
    Agent(FunctionModel(_relay), tools=[waits, opens], name="relay_chain"),
    settings=attrs.evolve(SETTINGS, continue_as_new_steps=1),
)


def after_first_step(state: RunState) -> bool:
    """A live stop predicate: stop once one step is done (pure: workflow code runs it)."""
    return state.step >= 1


stopper = TemporalAgent(
    Agent(
        FunctionModel(_three_steps),
        tools=[record, slow],
        name="stopper",
        stop_when=[after_first_step],
    ),
    settings=SETTINGS,
)
one_at_a_time = TemporalAgent(
    Agent(FunctionModel(_three_steps), tools=[record, slow], name="single", max_concurrency=1),
    settings=SETTINGS,
)


def first(text: str) -> str:
    """A workflow's function step: logs once per execution, appends "1"."""
    _log(f"first {text}")
    return text + "1"


def last(text: str) -> str:
    """A workflow's last function step: logs once per execution, wraps its input."""
    _log(f"last {text}")
    return f"last({text})"


def _slow_echo(request: ModelRequest) -> Any:
    """An agent step that calls the `slow` tool on its prompt, then answers with the result."""
    done = _results(request)
    if done:
        return f"middle({done[0]})"
    return FunctionModel.call("slow", {"text": request.messages[-1].text})


middle = Agent(FunctionModel(_slow_echo), tools=[slow], name="middle")
pipeline = TemporalAgent(Sequence(first, middle, last, name="pipeline"), settings=SETTINGS)


def _echo(name: str) -> Agent:
    """An agent that answers ``name(<its prompt>)``."""
    return Agent(FunctionModel(lambda request: f"{name}({request.messages[-1].text})"), name=name)


def _pick(text: str) -> str:
    """A Route's router: "short" or "long" by the input's length."""
    return "short" if len(text) < 40 else "long"


tree = TemporalAgent(
    Sequence(
        first,
        Route(_pick, {"short": _echo("brief"), "long": _echo("digest")}, name="desk"),
        Loop(_echo("louder"), until=lambda text: text.count("louder(") >= 2, name="again"),
        Parallel(_echo("pros"), _echo("cons"), name="views"),
        name="tree",
    ),
    settings=SETTINGS,
)


# A loop whose until never holds: it ends at its max_iterations, and says so.
hoarse = TemporalAgent(
    Loop(_echo("louder"), until=lambda text: False, max_iterations=2, name="hoarse"),
    settings=SETTINGS,
)


def explode(text: str) -> str:
    """A step that always fails."""
    raise ValueError(f"cannot take {text!r}")


broken = TemporalAgent(Sequence(first, explode, name="broken"), settings=SETTINGS)


# A sub-agent whose answer never fits its output type: it fails inside its own run
# (its output retries used up), and stays in the tree on the call's error result.
def _never_fits(request: ModelRequest) -> str:
    return "not one of a, b"


def _unfit() -> Agent:
    return Agent(
        FunctionModel(_never_fits), name="unfit", output_type=Literal["a", "b"], output_retries=1
    )


# An agent whose model refuses under an output type: the run fails at once, durably as
# locally, naming the refusal (not asked again up to its output_retries).
def _refuses(request: ModelRequest) -> ModelResponse:
    return ModelResponse(
        Message.assistant("I can't help with that."),
        finish_reason="content_filter",
        raw_finish_reason="refusal",
    )


refusing = TemporalAgent(
    Agent(FunctionModel(_refuses), name="refusing", output_type=Literal["a", "b"]),
    settings=SETTINGS,
)


def _asks_unfit(request: ModelRequest) -> Any:
    last = request.messages[-1]
    if last.role == "tool":
        return f"lead: {last.tool_results[0].content}"
    return FunctionModel.call("unfit", {"input": "go"})


misfit = TemporalAgent(
    Agent(FunctionModel(_asks_unfit), name="misfit", tools=[_unfit().as_tool()]), settings=SETTINGS
)
misfit_step = TemporalAgent(
    Sequence(Task(_unfit(), on_error="skip"), name="misfit_step"), settings=SETTINGS
)

# The side channel of a workflow: its agent step streams, its planner does not.
voiced = TemporalAgent(
    Sequence(first, Agent(Dripping(lambda request: "Hello from the step"), name="voice")),
    name="voiced",
    settings=SETTINGS,
    event_stream_handler=publish_tagged,
)
# A step whose agent's model fails for good (a bad key), skipped as locally.
skipping = TemporalAgent(
    Sequence(
        first,
        Task(Agent(FunctionModel(_unauthorized), name="denied"), on_error="skip"),
        last,
        name="skipping",
    ),
    settings=SETTINGS,
)
# Nested runs: a step's agent with two quick tools, then the slow one (the crash point).
inner = Agent(FunctionModel(_three_steps), tools=[record, slow], name="inner")
nested = TemporalAgent(Sequence(first, inner, last, name="nested"), settings=SETTINGS)
# An approval deep inside: a workflow step's agent, and an agent used as a tool.
signer = Agent(FunctionModel(_approval), tools=[transfer], name="signer")
signed = TemporalAgent(Sequence(first, signer, name="signed"), settings=SETTINGS)


def _delegate(request: ModelRequest) -> Any:
    """Ask the signer (an agent used as a tool), then answer with what it said."""
    done = _results(request)
    return "boss: " + done[0] if done else FunctionModel.call("signer", {"input": "pay"})


boss = TemporalAgent(
    Agent(FunctionModel(_delegate), tools=[signer.as_tool()], name="boss"), settings=SETTINGS
)
STUCK = threading.Event()
"""Set by `stuck` when it is cancelled (the in-process worker's tests wait for it)."""


@tool
async def stuck(ctx: RunContext[Any], text: str) -> str:
    """Never return: wait until cancelled (a timed-out sub-run's call in flight).

    Args:
        text: Ignored.
    """
    _log(f"stuck {ctx.idempotency_key}")
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        _log(f"cancelled {ctx.idempotency_key}")
        STUCK.set()
        raise
    return text


def _get_stuck(request: ModelRequest) -> Any:
    """Call `stuck` (it never returns); answer with its result if it ever does."""
    done = _results(request)
    return done[0] if done else FunctionModel.call("stuck", {"text": "x"})


TIMEOUT = 2.0
"""The timeout of the timed sub-runs below (seconds): room for a model request and a tool to start, under load."""
dawdler = Agent(FunctionModel(_get_stuck), tools=[stuck], name="dawdler")
# A step that cannot finish in time, skipped as locally; and the same agent as a tool.
deadline = TemporalAgent(
    Sequence(first, Task(dawdler, timeout=TIMEOUT, on_error="skip"), last, name="deadline"),
    settings=SETTINGS,
)


def _ask_dawdler(request: ModelRequest) -> Any:
    done = _results(request)
    return "impatient: " + done[0] if done else FunctionModel.call("dawdler", {"input": "go"})


impatient = TemporalAgent(
    Agent(FunctionModel(_ask_dawdler), tools=[dawdler.as_tool(timeout=TIMEOUT)], name="impatient"),
    settings=SETTINGS,
)
# Continuing as new inside nested runs: after every model request (at any
# depth), in the middle of a Parallel's two agents, one of them a timed step.
relayed = TemporalAgent(
    Sequence(
        first,
        Parallel(
            Task(
                Agent(FunctionModel(_three_steps), tools=[record, slow], name="long"), timeout=600
            ),
            _echo("short"),
            name="both",
        ),
        name="relayed",
    ),
    settings=attrs.evolve(SETTINGS, continue_as_new_steps=1),
)
gated = payments(over_ten, "gated")
limits = payments(over_hundred, "limits")


# Handoffs: triage hands to billing (with an input filter), billing records the
# invoice and hands back to triage by name, triage answers.
def _triage(request: ModelRequest) -> Any:
    done = _results(request)
    if "Transferred to triage." in done:
        return "sorted: " + ",".join(r for r in done if not r.startswith("Transferred"))
    return FunctionModel.call("transfer_to_billing", {})


def _billing(request: ModelRequest) -> Any:
    """Billing calls its one tool (`record`, or `slow`) on the prompt, then hands back."""
    done = _results(request)
    if not done:
        return FunctionModel.call(request.tools[0].name, {"text": request.messages[-1].text})
    return FunctionModel.call("transfer_to_triage", {})


def users_only(messages: tuple[Message, ...]) -> list[Message]:
    """A handoff's input filter: the target sees only what the user said."""
    return [m for m in messages if m.role == "user"]


def _triage_agent(tool: Any = record) -> Agent:
    billing = Agent(FunctionModel(_billing), tools=[tool], name="billing", handoffs=["triage"])
    target = Handoff(billing, input_filter=users_only)
    return Agent(FunctionModel(_triage), name="triage", handoffs=[target])


desk = TemporalAgent(_triage_agent(), name="desk", settings=SETTINGS)
# A cycle with no way out: the run's max_steps (the first agent's) ends it.
pong = Agent(
    FunctionModel(lambda r: FunctionModel.call("transfer_to_ping", {})),
    name="pong",
    handoffs=["ping"],
)
ping = TemporalAgent(
    Agent(
        FunctionModel(lambda r: FunctionModel.call("transfer_to_pong", {})),
        name="ping",
        handoffs=[pong],
        max_steps=3,
    ),
    settings=SETTINGS,
)
# The same handoffs inside a workflow step and inside an agent used as a tool.
handed = TemporalAgent(Sequence(first, _triage_agent(), last, name="handed"), settings=SETTINGS)


def _ask_triage(request: ModelRequest) -> Any:
    done = _results(request)
    return "front: " + done[0] if done else FunctionModel.call("triage", {"input": "bill me"})


front = TemporalAgent(
    Agent(FunctionModel(_ask_triage), tools=[_triage_agent().as_tool()], name="front"),
    settings=SETTINGS,
)


# The same desk whose billing calls the slow tool (the crash point).
slow_desk = TemporalAgent(_triage_agent(slow), name="slow_desk", settings=SETTINGS)
# The same desk, continuing as new after every model call: the new history
# picks up the run with the agent it was handed to.
hopping = TemporalAgent(
    _triage_agent(), name="hopping", settings=attrs.evolve(SETTINGS, continue_as_new_steps=1)
)


# A handoff target whose tool needs an approval: the run waits with billing.
def _pay_five(request: ModelRequest) -> Any:
    done = _results(request)
    if done[-1].startswith("Transferred"):
        return FunctionModel.call("transfer", {"amount": 5})
    return "billing: " + done[-1]


cashier = TemporalAgent(
    Agent(
        FunctionModel(lambda r: FunctionModel.call("transfer_to_till", {})),
        name="cashier",
        handoffs=[Agent(FunctionModel(_pay_five), tools=[transfer], name="till")],
    ),
    settings=SETTINGS,
)


def broken_filter(messages: tuple[Message, ...]) -> list[Message]:
    """An input filter that fails."""
    raise LookupError("no user message")


clumsy = TemporalAgent(
    Agent(
        FunctionModel(lambda r: FunctionModel.call("transfer_to_billing", {})),
        name="clumsy",
        handoffs=[
            Handoff(Agent(FunctionModel(_billing), name="billing"), input_filter=broken_filter)
        ],
    ),
    settings=SETTINGS,
)


# Two transfers in one answer: the first hands over, the second's result says it did not.
def _both_transfers(request: ModelRequest) -> Any:
    return [
        FunctionModel.call("transfer_to_refunds", {}),
        FunctionModel.call("transfer_to_till", {}),
    ]


torn = TemporalAgent(
    Agent(
        FunctionModel(_both_transfers),
        name="torn",
        handoffs=[
            Agent(FunctionModel(lambda r: "refunded"), name="refunds"),
            Agent(FunctionModel(lambda r: "paid"), name="till"),
        ],
    ),
    settings=SETTINGS,
)


# A step whose agent stops at max_steps without answering has failed, as locally.
def _pinging(request: ModelRequest) -> Any:
    return FunctionModel.call("ping_tool", {})


def ping_tool() -> str:
    """Ping."""
    return "pong"


_looper = Agent(FunctionModel(_pinging), tools=[ping_tool], name="looper", max_steps=2)
unanswered = TemporalAgent(
    Sequence(
        Task(_looper, on_error="skip"),
        Agent(FunctionModel(lambda r: f"b({r.messages[-1].text})"), name="b"),
        name="unanswered",
    ),
    settings=SETTINGS,
)


# on_tool_error="raise": a failing tool fails the run, as locally; below a
# caller that returns errors, the sub-agent's failure is that call's error result.
@tool
def crash(text: str) -> str:
    """Always fails.

    Args:
        text: Ignored.
    """
    raise ValueError(f"cannot take {text!r}")


def _crashing(request: ModelRequest) -> Any:
    done = _results(request)
    return "never: " + done[0] if done else FunctionModel.call("crash", {"text": "x"})


strict_agent = Agent(FunctionModel(_crashing), tools=[crash], name="strict", on_tool_error="raise")
strict = TemporalAgent(strict_agent, settings=SETTINGS)


@tool
def note(text: str) -> str:
    """Note ``text`` (a side effect beside a failing call).

    Args:
        text: What to note.
    """
    _log(f"note {text}")
    return f"noted {text}"


def _crashing_beside(request: ModelRequest) -> Any:
    done = _results(request)
    if done:
        return "never: " + done[0]
    return [FunctionModel.call("crash", {"text": "x"}), FunctionModel.call("note", {"text": "y"})]


# on_tool_error="raise" with a call beside the failing one: the error's state keeps
# that call's result, as locally, so a resume runs only the failed call again.
strict_beside = TemporalAgent(
    Agent(
        FunctionModel(_crashing_beside),
        tools=[crash, note],
        name="strict_beside",
        on_tool_error="raise",
    ),
    settings=SETTINGS,
)


def _ask_strict(request: ModelRequest) -> Any:
    done = _results(request)
    return "lenient: " + done[0] if done else FunctionModel.call("strict", {"input": "x"})


lenient = TemporalAgent(
    Agent(FunctionModel(_ask_strict), tools=[strict_agent.as_tool()], name="lenient"),
    settings=SETTINGS,
)
# on_tool_error="raise" above a sub-agent that fails: the error's state (before the
# round) still counts the sub-agent's model call (AttemptDropped), as locally.
stricter = TemporalAgent(
    Agent(
        FunctionModel(_ask_strict),
        tools=[strict_agent.as_tool()],
        name="stricter",
        on_tool_error="raise",
    ),
    settings=SETTINGS,
)


def _ask_check(request: ModelRequest) -> Any:
    done = _results(request)
    return "lenient: " + done[0] if done else FunctionModel.call("check", {"input": "x"})


# ...and with the sub-agent under another tool name: the error names the agent too.
stricter_renamed = TemporalAgent(
    Agent(
        FunctionModel(_ask_check),
        tools=[strict_agent.as_tool(name="check")],
        name="stricter_renamed",
        on_tool_error="raise",
    ),
    settings=SETTINGS,
)
# ...nested: that error is its caller's error result, as locally (its text is in the state).
lenient_renamed = TemporalAgent(
    Agent(
        FunctionModel(_ask_strict),
        tools=[stricter_renamed.agent.as_tool(name="strict")],
        name="lenient_renamed",
    ),
    settings=SETTINGS,
)


# as_tool(output=...): the caller sees what the function makes of the sub-run's
# Response; it runs once (in its activity) and logs each execution.
def shout(response: Response) -> str:
    """What the caller sees of the echo agent: its text, upper-cased."""
    _log(f"shout {response.text}")
    return response.text.upper()


def refuse(response: Response) -> str:
    """An output function that fails."""
    raise KeyError("no summary")


def _ask_both(request: ModelRequest) -> Any:
    done = _results(request)
    if done:
        return " | ".join(done)
    return [
        FunctionModel.call("loud", {"input": "hi"}),
        FunctionModel.call("mute", {"input": "hi"}),
    ]


extracting = TemporalAgent(
    Agent(
        FunctionModel(_ask_both),
        tools=[
            _echo("echo").as_tool("loud", output=shout),
            _echo("echo").as_tool("mute", output=refuse),
        ],
        name="extracting",
    ),
    settings=SETTINGS,
)
ROOT = Path(__file__).resolve().parents[2]


def _large_sums(call: ToolCallPart, state: RunState) -> bool:
    """Sums with a term over 100 need a person (runs in workflow code)."""
    return any(isinstance(v, int) and v > 100 for v in call.arguments.values())


SERVED = MCPServerStdio(
    sys.executable,
    ["-m", "toolfold.mcp", "serve", "tests.ecosystem.served_tools:TOOLS"],
    cwd=str(ROOT),
    name="served",
    prefix="m",
    include=["add", "shout", "fail"],
    requires_approval=_large_sums,
)
"""toolfold's own MCP server of tests/ecosystem/served_tools.py, over stdio: every MCP agent's here."""


def _mcp(request: ModelRequest) -> Any:
    """Three MCP tools (one fails) and an own tool in one step; a large sum on "big"; then the results."""
    done = _results(request)
    if not done:
        if request.messages[0].text == "big":
            return FunctionModel.call("m_add", {"a": 200, "b": 1})
        return [
            FunctionModel.call("m_add", {"a": 2, "b": 3}),
            FunctionModel.call("m_shout", {"text": "hi"}),
            FunctionModel.call("m_fail", {"reason": "nope"}),
            FunctionModel.call("record", {"text": "own"}),
        ]
    return "results: " + " | ".join(done)


served = TemporalAgent(
    Agent(FunctionModel(_mcp), tools=[record, SERVED], name="served"), settings=SETTINGS
)
served_chained = TemporalAgent(
    served.agent, name="served_chained", settings=attrs.evolve(SETTINGS, continue_as_new_steps=1)
)
# Below the top: the same MCP agent as a workflow step, and as an agent used as a tool.
served_step = TemporalAgent(Sequence(served.agent, last, name="served_step"), settings=SETTINGS)
served_step_chained = TemporalAgent(
    served_step.agent,
    name="served_step_chained",
    settings=attrs.evolve(SETTINGS, continue_as_new_steps=1),
)


def _ask_served(request: ModelRequest) -> Any:
    """Hand the prompt to the MCP agent (used as a tool), then answer with what it said."""
    done = _results(request)
    if done:
        return "boss: " + done[0]
    return FunctionModel.call("served", {"input": request.messages[0].text})


served_boss = TemporalAgent(
    Agent(FunctionModel(_ask_served), tools=[served.agent.as_tool()], name="served_boss"),
    settings=SETTINGS,
)


def _served_triage(request: ModelRequest) -> Any:
    """Hand to billing; once handed back, add on the MCP server; then answer."""
    done = _results(request)
    if "Transferred to triage." not in done:
        return FunctionModel.call("transfer_to_billing", {})
    if "5" not in done:
        return FunctionModel.call("m_add", {"a": 2, "b": 3})
    return "sorted: " + ",".join(done)


def _served_triage_agent() -> Agent:
    """A first agent with an MCP server in a handoff graph: billing hands the run back to it."""
    billing = Agent(FunctionModel(_billing), tools=[record], name="billing", handoffs=["triage"])
    tools = [SERVED]
    return Agent(FunctionModel(_served_triage), tools=tools, name="triage", handoffs=[billing])


served_desk = TemporalAgent(_served_triage_agent(), name="served_desk", settings=SETTINGS)


def _served_billing(request: ModelRequest) -> Any:
    """Billing with an MCP server: adds on it, then hands back to triage."""
    if "5" not in _results(request):
        return FunctionModel.call("m_add", {"a": 2, "b": 3})
    return FunctionModel.call("transfer_to_triage", {})


def _served_billing_agent() -> Agent:
    """A handoff target with an MCP server: listed when the run reaches it."""
    billing = Agent(
        FunctionModel(_served_billing), tools=[SERVED], name="billing", handoffs=["triage"]
    )
    return Agent(FunctionModel(_triage), name="triage", handoffs=[billing])


served_billing = TemporalAgent(_served_billing_agent(), name="served_billing", settings=SETTINGS)
served_billing_chained = TemporalAgent(
    served_billing.agent,
    name="served_billing_chained",
    settings=attrs.evolve(SETTINGS, continue_as_new_steps=1),
)
served_billing_step = TemporalAgent(
    Sequence(_served_billing_agent(), name="served_billing_step"), settings=SETTINGS
)
served_handed = TemporalAgent(
    Sequence(_served_triage_agent(), name="served_handed"), settings=SETTINGS
)


def _stopped_transfer_agent() -> Agent:
    """Triage transfers to billing (an MCP server's tools) on the step that reaches max_steps."""
    billing = Agent(
        FunctionModel(_served_billing), tools=[SERVED], name="billing", handoffs=["triage"]
    )
    return Agent(FunctionModel(_triage), name="triage", handoffs=[billing], max_steps=1)


# The handoff at the stop (`toolfold-handoff-at-stop`): billing's tools are listed first.
stopped_transfer = TemporalAgent(
    _stopped_transfer_agent(), name="stopped_transfer", settings=SETTINGS
)

ASK_USER = Tool(
    "ask_user",
    "Ask the user a question (a manual tool: the caller answers it).",
    {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
)


def _asking(request: ModelRequest) -> Any:
    done = _results(request)
    if not done:
        return [
            FunctionModel.call("record", {"text": "asked"}),
            FunctionModel.call("ask_user", {"question": "which city?"}),
        ]
    return "the user said: " + " / ".join(done)


asking = TemporalAgent(
    Agent(FunctionModel(_asking), tools=[record, ASK_USER], name="asking"), settings=SETTINGS
)


# Two sub-runs waiting on the same call id (their models made it): a Parallel of two
# agents that each ask for an approval (`twins`), or for a manual tool's result
# (`twin_askers`). Answered by path ("left/call_1_0"), as a local resume takes them.
def _pays(amount: int) -> Any:
    def pay(request: ModelRequest) -> Any:
        done = _results(request)
        if not done:
            return FunctionModel.call("transfer", {"amount": amount})
        return "transfer said: " + done[0]

    return pay


def _asks(request: ModelRequest) -> Any:
    done = _results(request)
    if not done:
        return FunctionModel.call("ask_user", {"question": "which city?"})
    return "the user said: " + done[0]


twins = TemporalAgent(
    Parallel(
        Agent(FunctionModel(_pays(5)), tools=[transfer], name="left"),
        Agent(FunctionModel(_pays(7)), tools=[transfer], name="right"),
        name="twins",
    ),
    settings=SETTINGS,
)
twin_askers = TemporalAgent(
    Parallel(
        Agent(FunctionModel(_asks), tools=[ASK_USER], name="left"),
        Agent(FunctionModel(_asks), tools=[ASK_USER], name="right"),
        name="twin_askers",
    ),
    settings=SETTINGS,
)


# A top-run call and a sub-run's call waiting for an approval under one id
# (`call_1_0`): the top run's is keyed by its bound key (`approval_key`), its
# path ("call_1_0") being the sub-run's call's id too.
def _lead_and_helper(request: ModelRequest) -> Any:
    done = _results(request)
    if not done:
        return [
            FunctionModel.call("transfer", {"amount": 1}),
            FunctionModel.call("helper", {"input": "pay"}),
        ]
    return "lead: " + " ".join(done)


lead_and_helper = TemporalAgent(
    Agent(
        FunctionModel(_lead_and_helper),
        tools=[
            transfer,
            Agent(FunctionModel(_pays(2)), tools=[transfer], name="helper").as_tool(
                description="Ask the helper."
            ),
        ],
        name="lead_and_helper",
    ),
    settings=SETTINGS,
)


# The same for a manual tool's result (`keyed_tool_calls`).
def _ask_and_helper(request: ModelRequest) -> Any:
    done = _results(request)
    if not done:
        return [
            FunctionModel.call("ask_user", {"question": "which city?"}),
            FunctionModel.call("helper", {"input": "ask"}),
        ]
    return "lead: " + " | ".join(done)


ask_and_helper = TemporalAgent(
    Agent(
        FunctionModel(_ask_and_helper),
        tools=[
            ASK_USER,
            Agent(FunctionModel(_asks), tools=[ASK_USER], name="helper").as_tool(
                description="Ask the helper."
            ),
        ],
        name="ask_and_helper",
    ),
    settings=SETTINGS,
)


# A workflow used as a tool (`Workflow.as_tool`) by an agent: the workflow's step
# asks for an approval, which suspends the durable run at the top.
def _runs_payflow(request: ModelRequest) -> Any:
    done = _results(request)
    if not done:
        return FunctionModel.call("payflow", {"input": "go"})
    return "outer: " + done[0]


workflow_tool = TemporalAgent(
    Agent(
        FunctionModel(_runs_payflow),
        tools=[
            Sequence(
                Agent(FunctionModel(_pays(3)), tools=[transfer], name="payer"), name="payflow"
            ).as_tool()
        ],
        name="workflow_tool",
    ),
    settings=SETTINGS,
)


# Agents and workflows used as tools with an attrs `input_type`: the sub-run's input is
# structured (cattrs, attrs) in workflow code, as locally.
@attrs.frozen
class Trip:
    """A trip to plan."""

    city: str
    days: int


def _echo(request: ModelRequest) -> Any:
    return "step saw: " + request.messages[-1].text


def _runs_typed(tool_name: str) -> Any:
    def run(request: ModelRequest) -> Any:
        done = _results(request)
        if not done:
            return FunctionModel.call(tool_name, {"input": {"city": "Paris", "days": 3}})
        return "outer: " + done[0]

    return run


typed_agent_tool = TemporalAgent(
    Agent(
        FunctionModel(_runs_typed("techo")),
        tools=[Agent(FunctionModel(_echo), name="techo").as_tool(input_type=Trip)],
        name="typed_agent_tool",
    ),
    settings=SETTINGS,
)
typed_workflow_tool = TemporalAgent(
    Agent(
        FunctionModel(_runs_typed("tflow")),
        tools=[
            Sequence(Agent(FunctionModel(_echo), name="echo"), name="tflow").as_tool(
                input_type=Trip
            )
        ],
        name="typed_workflow_tool",
    ),
    settings=SETTINGS,
)


# stop_when=[tool_called(...)] inside an agent used as a tool: the caller sees
# that call's result (an error result when it failed), as locally; one stopped
# at max_steps gives an error result naming it and the limit.
def _settler(name: str, fails: bool, **options: Any) -> Agent:
    def settle(answer: str) -> str:
        """Give the answer.

        Args:
            answer: The answer.
        """
        if fails:
            raise ValueError("no answer")
        return f"settled {answer}"

    def reply(request: ModelRequest) -> Any:
        return "talked on" if _results(request) else FunctionModel.call("settle", {"answer": "42"})

    options.setdefault("stop_when", [tool_called("settle")])
    return Agent(FunctionModel(reply), tools=[settle], name=name, **options)


def _ask_settlers(request: ModelRequest) -> Any:
    done = _results(request)
    if done:
        return " | ".join(done)
    return [
        FunctionModel.call("sure", {"input": "x"}),
        FunctionModel.call("unsure", {"input": "x"}),
        FunctionModel.call("hasty", {"input": "x"}),
    ]


settling = TemporalAgent(
    Agent(
        FunctionModel(_ask_settlers),
        tools=[
            _settler("sure", False).as_tool(),
            _settler("unsure", True).as_tool(),
            _settler("hasty", False, stop_when=(), max_steps=1).as_tool(),
        ],
        name="settling",
    ),
    settings=SETTINGS,
)

# A tree budget (token_budget(n, tree=True)): two workers called in one step each
# start with what was left, and stop mid-run there; with 90 nothing is left once the
# lead's own first call is made, and no worker starts. Every model call costs 100 tokens.
_HUNDRED = Usage(50, 50, requests=1)


@tool
def tick() -> str:
    """Tick."""
    return "tick"


def _ticking(request: ModelRequest) -> Any:
    done = sum(1 for m in request.messages if m.role == "tool")
    part = ToolCallPart(f"t{done}", "tick", "{}")
    return ModelResponse(Message.assistant("", [part]), _HUNDRED)


def _two_workers(request: ModelRequest) -> Any:
    step = sum(1 for m in request.messages if m.role == "assistant")
    parts = [ToolCallPart(f"w{step}_{i}", "worker", '{"input": "go"}') for i in range(2)]
    return ModelResponse(Message.assistant("", parts), _HUNDRED)


def _budgeted(
    name: str,
    tokens: int,
    on_tool_error: Any = "return",
    output: Callable[[Response], Any] | None = None,
) -> TemporalAgent:
    worker = Agent(FunctionModel(_ticking), name="worker", tools=[tick], max_steps=20)
    lead = Agent(
        FunctionModel(_two_workers),
        name=name,
        tools=[worker.as_tool(output=output)],
        stop_when=[token_budget(tokens, tree=True)],
        on_tool_error=on_tool_error,
    )
    return TemporalAgent(lead, settings=SETTINGS)


def _budgeted_handed(name: str, on_tool_error: Any = "return") -> TemporalAgent:
    """A lead whose worker hands its run to ``scribe``, which ticks until the tree budget stops it."""
    scribe = Agent(FunctionModel(_ticking), name="scribe", tools=[tick])

    def transfer(request: ModelRequest) -> Any:
        part = ToolCallPart("h", "transfer_to_scribe", "{}")
        return ModelResponse(Message.assistant("", [part]), _HUNDRED)

    worker = Agent(FunctionModel(transfer), name="worker", handoffs=[scribe], max_steps=20)
    lead = Agent(
        FunctionModel(_two_workers),
        name=name,
        tools=[worker.as_tool()],
        stop_when=[token_budget(700, tree=True)],
        on_tool_error=on_tool_error,
    )
    return TemporalAgent(lead, settings=SETTINGS)


budgeted = _budgeted("budgeted", 700)
# ...and a worker that handed its run to another agent: the call's error names that agent.
budgeted_handed = _budgeted_handed("budgeted_handed")
budgeted_handed_raising = _budgeted_handed("budgeted_handed_raising", "raise")
broke = _budgeted("broke", 90)
# on_tool_error="raise": the budget's stop is no tool failure, the run stops as above.
budgeted_raising = _budgeted("budgeted_raising", 700, "raise")
broke_raising = _budgeted("broke_raising", 90, "raise")


def _summary(response: Response) -> str:
    """What the caller sees of a worker: its answer's summary (it has none when stopped)."""
    return str(response.output["summary"])


# ...but an as_tool(output=...) function that fails on the stopped worker is a tool failure.
budgeted_summary_raising = _budgeted("budgeted_summary_raising", 700, "raise", _summary)


@tool
def deploy() -> str:
    """Deploy."""
    raise RuntimeError("service 'db' was not started: missing DATABASE_URL")


def _deploy(request: ModelRequest) -> Any:
    return ModelResponse(Message.assistant("", [ToolCallPart("d", "deploy", "{}")]), _HUNDRED)


# ...and so is a plain tool's error, whatever its text says, in a step that spent the budget.
broke_deploy_raising = TemporalAgent(
    Agent(
        FunctionModel(_deploy),
        name="broke_deploy_raising",
        tools=[deploy],
        stop_when=[token_budget(90, tree=True)],
        on_tool_error="raise",
    ),
    settings=SETTINGS,
)


@tool
def peek(ctx: RunContext[None]) -> str:
    """What is left of the run's tree budget, as this tool's context reads it."""
    return "none" if ctx.token_budget is None else str(ctx.token_budget.tokens)


def _peek_once(request: ModelRequest) -> Any:
    if any(m.role == "tool" for m in request.messages):
        return ModelResponse(
            Message.assistant(request.messages[-1].tool_results[0].content), _HUNDRED
        )
    return ModelResponse(Message.assistant("", [ToolCallPart("p", "peek", "{}")]), _HUNDRED)


# A plain tool (a tool activity) reads what is left of the tree budget: 1000 - 100.
peeking = TemporalAgent(
    Agent(
        FunctionModel(_peek_once),
        name="peeking",
        tools=[peek],
        stop_when=[token_budget(1000, tree=True)],
    ),
    settings=SETTINGS,
)


# --- stop conditions across handoffs: the first agent's bound the turn, each agent's own
# only its own part (a cycle or a chain drops those of the agent handed the run on) ---


@tool
def chore() -> str:
    """Do a chore."""
    return "chore done"


def _spent(message: Message) -> ModelResponse:
    return ModelResponse(message, usage=Usage(input_tokens=400, output_tokens=100))


def _call(name: str) -> ModelResponse:
    return _spent(Message.assistant("", [ToolCallPart(f"c_{name}", name, "{}")]))


def _assistants(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def three_requests(state: RunState) -> bool:
    """A stop condition: the run has made three model requests."""
    return state.usage.requests >= 3


def _chores(request: ModelRequest) -> Any:
    """Six chores, then the answer (counted on the conversation the agent sees)."""
    return _call("chore") if _assistants(request) < 7 else _spent(Message.assistant("Done."))


# triage's three_requests stops refunds (as locally) before triage's token_budget(2000)
# would (at four requests), which the state stores. The history
# `handoff_stops_dropped.json` was recorded before (with a callable stopping at four
# requests; a callable is no part of a history): refunds ran its seven requests.
kept_stops = TemporalAgent(
    Agent(
        FunctionModel(lambda r: _call("transfer_to_refunds")),
        name="kept_stops",
        handoffs=[Agent(FunctionModel(_chores), name="refunds", tools=[chore])],
        stop_when=[token_budget(2000), three_requests],
    ),
    settings=SETTINGS,
)


def _looks_up_then_transfers(request: ModelRequest) -> Any:
    return _call("chore" if _assistants(request) == 0 else "transfer_to_refunds")


def without_tool_calls(messages: tuple[Message, ...]) -> list[Message]:
    """An unfit input filter: drops the assistant messages with tool calls, keeps their results."""
    return [m for m in messages if not (m.role == "assistant" and m.tool_calls)]


# The filter leaves refunds a tool result answering no call: the run fails (as locally).
# The history `orphan_filtered.json` was recorded before: refunds answered.
orphaned = TemporalAgent(
    Agent(
        FunctionModel(_looks_up_then_transfers),
        name="orphaned",
        tools=[chore],
        handoffs=[
            Handoff(
                Agent(FunctionModel(lambda r: "refunded"), name="refunds"),
                input_filter=without_tool_calls,
            )
        ],
    ),
    settings=SETTINGS,
)


def pong_enough(state: RunState) -> bool:
    """pong's stop condition: three requests (it would stop pinging, were it kept)."""
    return state.usage.requests >= 3


def _pinger(request: ModelRequest) -> Any:
    return _call("transfer_to_ponger" if _assistants(request) == 0 else "chore")


# pinger -> ponger -> pinger: ponger's budget and callable stop nothing once it handed back;
# pinger's max_steps ends the run.
looped = TemporalAgent(
    Agent(
        FunctionModel(_pinger),
        name="looped",
        tools=[chore],
        handoffs=[
            Agent(
                FunctionModel(lambda r: _call("transfer_to_looped")),
                name="ponger",
                handoffs=["looped"],
                stop_when=[token_budget(1200), pong_enough],
            )
        ],
        max_steps=6,
    ),
    settings=SETTINGS,
)


def in_closer(state: RunState) -> bool:
    """middle's stop condition: true once the run is closer's (it stops it, were it kept)."""
    return state.agent == "closer"


def never(state: RunState) -> bool:
    """The first agent's stop condition, checked to the end: never true."""
    return False


# opener -> middle -> closer: closer runs under opener's conditions and its own, not middle's.
relayed_stops = TemporalAgent(
    Agent(
        FunctionModel(lambda r: _call("transfer_to_middle")),
        name="relayed_stops",
        handoffs=[
            Agent(
                FunctionModel(lambda r: _call("transfer_to_closer")),
                name="middle",
                handoffs=[Agent(FunctionModel(_chores), name="closer", tools=[chore])],
                stop_when=[token_budget(1200), in_closer],
            )
        ],
        stop_when=[token_budget(100000), never],
        max_steps=5,
    ),
    settings=SETTINGS,
)


def _cut_on(attempts: int) -> Callable[[ModelRequest], Any]:
    """A stream function whose stream, on the model activity's first ``attempts`` attempts,
    reports usage (billed) and is cut; later attempts answer "done"."""

    def events(request: ModelRequest) -> Any:
        if activity.info().attempt <= attempts:
            yield UsageUpdate(Usage(input_tokens=5000, output_tokens=1, requests=1))
            yield TextDelta("word ")
            raise StreamError("the stream ended before the message finished", provider="test")
        yield UsageUpdate(Usage(input_tokens=7, output_tokens=3, requests=1))
        yield TextDelta("done")

    return events


async def _drain(context: StreamContext, events: AsyncIterator[StreamEvent]) -> None:
    async for _ in events:
        pass


# A stream cut after its usage on the first attempt, then answered (Temporal retried it).
cut_retried = TemporalAgent(
    Agent(FunctionModel(lambda r: "done", stream_function=_cut_on(1)), name="cut_retried"),
    settings=SETTINGS,
    event_stream_handler=_drain,
)
# Every attempt's stream cut after its usage, until the retry policy's two attempts are used up.
cut_failed = TemporalAgent(
    Agent(FunctionModel(lambda r: "done", stream_function=_cut_on(2)), name="cut_failed"),
    settings=ActivitySettings(
        retry_policy=RetryPolicy(
            initial_interval=timedelta(milliseconds=50), backoff_coefficient=1.0, maximum_attempts=2
        )
    ),
    event_stream_handler=_drain,
)


# A step's agent hands its run to the looper, which stops at the step's max_steps: the step's
# error names both agents (behind `toolfold-step-stop-names-handed-agent`), as locally.
handed_unanswered = TemporalAgent(
    Sequence(
        Task(
            Agent(
                FunctionModel(lambda r: _call("transfer_to_looper")),
                name="desk",
                handoffs=[_looper],
                max_steps=2,
            ),
            on_error="skip",
        ),
        Agent(FunctionModel(lambda r: f"b({r.messages[-1].text})"), name="b"),
        name="handed_unanswered",
    ),
    settings=SETTINGS,
)


def _slow_then_answer(request: ModelRequest) -> Any:
    """Call `slow` once, then answer with what it returned."""
    done = _results(request)
    if not done:
        return FunctionModel.call("slow", {"text": "pay"})
    return "slow said: " + done[0]


def _dawdling(name: str, **options: Any) -> TemporalAgent:
    """An agent whose `slow` call outlives its 1 s ``tool_timeout`` (while ``hang`` exists).

    Two attempts at most: a toolfold from before retried a timed-out tool, and its run
    then failed with Temporal's ActivityError (`histories/tool_timed_out.json`).
    """
    agent = Agent(FunctionModel(_slow_then_answer), tools=[slow], name=name, **options)
    retries = RetryPolicy(
        initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.0, maximum_attempts=2
    )
    settings = attrs.evolve(SETTINGS, tool_timeout=timedelta(seconds=1), retry_policy=retries)
    return TemporalAgent(agent, settings=settings)


dawdling = _dawdling("dawdling")
dawdling_strict = _dawdling("dawdling_strict", on_tool_error="raise")


AGENTS = [
    *(steps, approval, flaky, patient, unauthorized, chained, oversized, relay),
    *(streamed, hiccup, gated, limits, many, lopsided, stopper, one_at_a_time),
    *(pipeline, tree, hoarse, broken, nested, signed, boss, voiced, skipping, swelling),
    *(desk, ping, handed, front, strict, lenient, extracting, hopping, cashier, clumsy),
    *(slow_desk, deadline, impatient, relayed, bulky, relayed_chain, torn, unanswered),
    *(served, served_chained, served_step, served_step_chained, served_boss),
    *(served_desk, served_handed, served_billing, served_billing_step, served_billing_chained),
    stopped_transfer,
    stricter,
    stricter_renamed,
    lenient_renamed,
    strict_beside,
    typed_agent_tool,
    typed_workflow_tool,
    asking,
    settling,
    misfit,
    misfit_step,
    refusing,
    budgeted,
    broke,
    budgeted_raising,
    broke_raising,
    budgeted_handed,
    budgeted_handed_raising,
    budgeted_summary_raising,
    broke_deploy_raising,
    peeking,
    twins,
    twin_askers,
    lead_and_helper,
    ask_and_helper,
    workflow_tool,
    kept_stops,
    orphaned,
    looped,
    relayed_stops,
    cut_retried,
    cut_failed,
    handed_unanswered,
    dawdling,
    dawdling_strict,
]


async def main(address: str, task_queue: str) -> None:
    """Run a worker for `AGENTS` until killed."""
    client = await Client.connect(address, plugins=[ToolfoldPlugin(AGENTS)])
    # A killed worker's sticky queue holds its workflows' next tasks this long
    # before the server hands them to another worker (10 s by default).
    sticky = timedelta(seconds=1)
    async with Worker(client, task_queue=task_queue, sticky_queue_schedule_to_start_timeout=sticky):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
