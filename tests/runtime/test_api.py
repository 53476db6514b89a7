"""generate_text / agenerate_text: the loop's semantics through the public API."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import toolfold
from toolfold import (
    Message,
    ModelRequest,
    ModelResponse,
    RunContext,
    RunError,
    Tool,
    ToolExecutionError,
    ToolRetriesExceededError,
    Usage,
    agenerate_text,
    generate_text,
    resume,
    tool,
)
from toolfold.testing import FunctionModel, ScriptedModel

call = ScriptedModel.call


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


ASK = Tool(
    "ask_user",
    "Ask the user a question (answered by the caller).",
    {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
)


def _tool_results(request: ModelRequest) -> list[Any]:
    return [r for m in request.messages for r in m.tool_results]


def test_tools_run_and_results_go_back_to_the_model() -> None:
    """A call to a tool with a function runs; its result is in the next request."""
    model = ScriptedModel([call("add", {"a": 2, "b": 3}), "The sum is 5."])
    response = generate_text(model, "2+3?", tools=[add])
    assert response.text == "The sum is 5."
    assert response.output == "The sum is 5."
    assert response.finish_reason == "stop"
    assert response.tool_calls == ()
    (result,) = _tool_results(model.requests[1])
    assert (result.content, result.is_error) == ("5", False)
    assert [m.role for m in response.messages] == ["user", "assistant", "tool", "assistant"]


def test_steps_and_summed_usage() -> None:
    """Each step records its response, calls, results and usage; usage is summed."""
    model = ScriptedModel(
        [
            ModelResponse(
                Message.assistant("", [call("add", {"a": 1, "b": 1}, id="x")]),
                Usage(10, 2, requests=1),
            ),
            ModelResponse(Message.assistant("2"), Usage(20, 1, requests=1)),
        ]
    )
    response = generate_text(model, "1+1", tools=[add])
    first, second = response.steps
    assert [c.id for c in first.tool_calls] == ["x"]
    assert [r.content for r in first.tool_results] == ["2"]
    assert first.usage == Usage(10, 2, requests=1)
    assert second.text == "2"
    assert response.usage == Usage(30, 3, requests=2)


def test_max_steps_returns_result_so_far() -> None:
    """Reaching max_steps stops with finish_reason max_steps, no exception."""
    model = ScriptedModel([call("add", {"a": i, "b": 1}) for i in range(5)])
    response = generate_text(model, "loop", tools=[add], max_steps=3)
    assert response.finish_reason == "max_steps"
    assert len(response.steps) == 3
    assert model.remaining == 2


def test_manual_tool_calls_come_back_mixed_with_automatic_ones() -> None:
    """In one step, automatic tools run and calls to tools without a function come back."""
    model = ScriptedModel(
        [
            [call("add", {"a": 1, "b": 2}), call("ask_user", {"question": "Which city?"})],
            "Paris it is, and 1+2=3.",
        ]
    )
    first = generate_text(model, "go", tools=[add, ASK])
    assert first.finish_reason == "tool_calls"
    (pending,) = first.tool_calls
    assert (pending.name, pending.arguments) == ("ask_user", {"question": "Which city?"})
    assert model.remaining == 1  # the model was not called with a half-answered step
    done = resume(first.state, model=model, tools=[add, ASK], tool_results={pending.id: "Paris"})
    assert done.text == "Paris it is, and 1+2=3."
    results = {r.tool_name: r.content for r in _tool_results(model.requests[1])}
    assert results == {"add": "3", "ask_user": "Paris"}


def test_media_a_caller_provides_as_a_result_reaches_the_model() -> None:
    """An image given with ``tool_results`` on resume goes to the model as a part, not only as text."""
    model = ScriptedModel([call("snap", {}, id="c1"), "I see it."])
    snap = Tool("snap", "Take a picture.", None)
    first = generate_text(model, "look", tools=[snap])
    image = toolfold.ImagePart(data=b"\x89PNG", media_type="image/png")
    done = resume(first.state, model=model, tools=[snap], tool_results={"c1": ["see", image]})
    assert done.text == "I see it."
    (result,) = _tool_results(model.requests[1])
    assert image in result.parts
    assert toolfold.RunState.from_json(done.state.to_json()) == done.state


def test_auto_execute_false_returns_every_call() -> None:
    """With auto_execute_tools=False no function runs; every call comes back."""
    ran: list[int] = []
    spy = Tool("spy", "", None, lambda args: ran.append(1))
    model = ScriptedModel([[call("spy"), call("add", {"a": 1, "b": 1})]])
    response = generate_text(model, "go", tools=[spy, add], auto_execute_tools=False)
    assert response.finish_reason == "tool_calls"
    assert [c.name for c in response.tool_calls] == ["spy", "add"]
    assert ran == []


@pytest.mark.parametrize(
    ("bad_call", "expected"),
    [
        (call("add", '{"a": 1,'), "not valid JSON"),
        (call("add", {"a": "one", "b": 2}), "$.a"),
        (call("sub", {"a": 1}), "Available tools: add, boom"),
        (call("boom", {}), "Error: ValueError: kaboom"),
    ],
    ids=["malformed-json", "schema-invalid", "unknown-tool", "exception"],
)
def test_bad_calls_become_error_results_the_model_sees(bad_call: Any, expected: str) -> None:
    """Malformed JSON, invalid arguments, unknown tools and exceptions reach the model as errors."""

    @tool
    def boom() -> str:
        """Always fails."""
        raise ValueError("kaboom")

    model = ScriptedModel([bad_call, call("add", {"a": 1, "b": 1}), "fixed"])
    response = generate_text(model, "go", tools=[add, boom])
    assert response.text == "fixed"
    (error,) = _tool_results(model.requests[1])
    assert error.is_error
    assert expected in error.content
    assert "Traceback" not in error.content


def test_tool_timeout_becomes_error_result() -> None:
    """A tool exceeding its timeout gives the model a timeout error."""
    release = threading.Event()

    @tool(timeout=0.01)
    def slow() -> str:
        """Hangs."""
        release.wait(5)
        return "late"

    model = ScriptedModel([call("slow"), "gave up"])
    try:
        generate_text(model, "go", tools=[slow])
    finally:
        release.set()
    (error,) = _tool_results(model.requests[1])
    assert "timed out after 0.01 s" in error.content


def test_retries_exceeded_raises_with_state() -> None:
    """More consecutive failures than max_retries fail the run with the state attached."""

    @tool(max_retries=1)
    def flaky() -> str:
        """Always fails."""
        raise RuntimeError("down")

    model = ScriptedModel([call("flaky"), call("flaky"), "unreachable"])
    with pytest.raises(ToolRetriesExceededError, match="'flaky' failed 2 times") as info:
        generate_text(model, "go", tools=[flaky])
    assert info.value.state.phase == "failed"
    assert info.value.state.step == 2
    assert model.remaining == 1


def test_success_resets_the_failure_count() -> None:
    """A success between failures resets the consecutive count."""
    outcomes = iter([RuntimeError("a"), "ok", RuntimeError("b"), "ok"])

    def fn(args: dict[str, Any]) -> str:
        value = next(outcomes)
        if isinstance(value, Exception):
            raise value
        return value

    flaky = Tool("flaky", "", None, fn, max_retries=1)
    model = ScriptedModel([call("flaky")] * 4 + ["done"])
    assert generate_text(model, "go", tools=[flaky]).text == "done"


def test_on_tool_error_raise() -> None:
    """on_tool_error='raise' raises ToolExecutionError chained to the tool's exception."""

    @tool
    def boom() -> str:
        """Fails."""
        raise KeyError("missing")

    model = ScriptedModel([call("boom"), "never"])
    with pytest.raises(ToolExecutionError, match="'boom' failed") as info:
        generate_text(model, "go", tools=[boom], on_tool_error="raise")
    assert isinstance(info.value.__cause__, KeyError)
    assert info.value.state.phase == "running_tools"


def test_parallel_sync_tools_run_concurrently_results_in_call_order() -> None:
    """Sync calls of one step overlap (a barrier of 3) and are committed in call order."""
    barrier = threading.Barrier(3, timeout=5)

    @tool
    def wait(n: int) -> int:
        """Waits for the others."""
        barrier.wait()
        return n

    model = ScriptedModel([[call("wait", {"n": i}) for i in range(3)], "done"])
    generate_text(model, "go", tools=[wait])
    assert [r.content for r in _tool_results(model.requests[1])] == ["0", "1", "2"]


def test_parallel_async_tools_run_concurrently() -> None:
    """Async calls of one step run concurrently on the loop."""

    async def main() -> list[str]:
        gate = asyncio.Event()
        started: list[int] = []

        @tool
        async def meet(n: int) -> int:
            """Waits for the other."""
            started.append(n)
            if len(started) == 2:
                gate.set()
            await asyncio.wait_for(gate.wait(), 5)
            return n

        model = ScriptedModel([[call("meet", {"n": 1}), call("meet", {"n": 2})], "done"])
        await agenerate_text(model, "go", tools=[meet])
        return [r.content for r in _tool_results(model.requests[1])]

    assert asyncio.run(main()) == ["1", "2"]


def test_cancelling_the_run_cancels_tools() -> None:
    """Cancelling agenerate_text cancels the running async tools."""
    cancelled: list[bool] = []

    async def main() -> None:
        started = asyncio.Event()

        @tool
        async def forever() -> str:
            """Never ends."""
            started.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
            return "never"

        model = ScriptedModel([call("forever"), "x"])
        task = asyncio.ensure_future(agenerate_text(model, "go", tools=[forever]))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cancelled == [True]


def test_run_context_reaches_the_tool() -> None:
    """A RunContext parameter gets run id, step, call id, messages and deps."""
    seen: list[RunContext[Any]] = []

    @tool
    def whoami(ctx: RunContext[dict[str, str]]) -> str:
        """Reports its context."""
        seen.append(ctx)
        return ctx.deps["user"]

    model = ScriptedModel([call("whoami", id="c9"), "ok"])
    generate_text(model, "go", tools=[whoami], deps={"user": "ada"}, run_id="run-1")
    (ctx,) = seen
    assert (ctx.run_id, ctx.step, ctx.call_id, ctx.tool_name) == ("run-1", 1, "c9", "whoami")
    assert ctx.deps == {"user": "ada"}
    assert [m.role for m in ctx.messages] == ["user", "assistant"]


def test_observers_see_every_event_and_cannot_change_state() -> None:
    """on_event sees each reduced event in order, on_step each step; both are read-only."""
    events: list[str] = []
    steps: list[int] = []

    def on_event(event: Any) -> Any:
        events.append(event.kind)
        with pytest.raises(AttributeError):
            event.kind = "tampered"
        return "ignored"

    model = ScriptedModel([call("add", {"a": 1, "b": 2}), "3"])
    response = generate_text(
        model, "go", tools=[add], on_event=on_event, on_step=lambda s: steps.append(s.index)
    )
    assert events == ["run_started", "model_responded", "tool_returned", "model_responded"]
    assert [e.kind for e in response.state.events] == events
    assert steps == [1, 2]


def test_model_failure_raises_with_state_and_resume_retries() -> None:
    """A model exception raises RunError with the pre-call state; resume retries the call."""
    attempts = [0]

    def flaky(request: ModelRequest) -> Any:
        attempts[0] += 1
        if attempts[0] == 2:
            raise OSError("connection reset")
        return "3" if request.messages[-1].role == "tool" else call("add", {"a": 1, "b": 2})

    model = FunctionModel(flaky)
    with pytest.raises(RunError, match="model call of step 2 failed: OSError") as info:
        generate_text(model, "go", tools=[add])
    state = info.value.state
    assert state.phase == "awaiting_model"
    assert state.step == 1
    assert resume(state, model=model, tools=[add]).text == "3"


def test_provider_error_keeps_its_type_and_gets_the_state() -> None:
    """A ProviderError from the model propagates as itself, carrying the state."""

    def limited(request: ModelRequest) -> Any:
        raise toolfold.RateLimitError("slow down", retry_after=2.0, provider="x")

    with pytest.raises(toolfold.RateLimitError) as info:
        generate_text(FunctionModel(limited), "go")
    assert info.value.state.phase == "awaiting_model"  # type: ignore[attr-defined]


def test_instructions_settings_and_tool_choice_reach_the_request() -> None:
    """Instructions come first as a system message; settings and tool_choice pass through."""
    model = ScriptedModel([call("add", {"a": 1, "b": 1}), "2"])
    generate_text(
        model,
        [{"role": "user", "content": "hi"}],
        tools=[add],
        instructions="Be brief.",
        tool_choice="add",
        temperature=0,
    )
    first, second = model.requests
    assert first.messages[0] == Message.system("Be brief.")
    assert first.messages[1] == Message.user("hi")
    assert first.settings == {"temperature": 0}
    assert (first.tool_choice, second.tool_choice) == ("add", "auto")
    assert [t.name for t in first.tools] == ["add"]


def test_bad_tool_choice_is_refused_up_front() -> None:
    """A tool_choice naming no tool of the run is an error before any model call."""
    model = ScriptedModel(["x"])
    with pytest.raises(toolfold.ToolfoldError, match="tool_choice 'nope'"):
        generate_text(model, "go", tools=[add], tool_choice="nope")
    assert model.requests == []


def test_a_misspelt_tool_choice_is_refused_naming_the_tool_it_is_near() -> None:
    """Without tool sources, a tool_choice near a tool's name is refused when the agent is
    made, naming the run's tools and the one it is near."""
    with pytest.raises(toolfold.UsageError) as raised:
        toolfold.Agent(ScriptedModel(["x"]), tools=[add], tool_choice="Add")
    assert str(raised.value) == (
        "tool_choice 'Add' is not a tool of this run (tools: add); did you mean 'add'?"
    )


def test_stop_when_predicate() -> None:
    """A live stop predicate ends the run at a step boundary with its reason."""
    model = ScriptedModel([call("add", {"a": 1, "b": 1})] * 3)
    response = generate_text(model, "go", tools=[add], stop_when=[lambda s: s.step >= 2])
    assert response.finish_reason == "stop_condition"
    assert len(response.steps) == 2


def test_length_finish_reason_passes_through() -> None:
    """A response cut by the token limit finishes with finish_reason length."""
    model = ScriptedModel([ModelResponse(Message.assistant("cut o"), finish_reason="length")])
    assert generate_text(model, "go").finish_reason == "length"


def test_sync_api_from_a_worker_thread_and_inside_a_loop() -> None:
    """generate_text works from a thread without a loop and from inside a running loop."""

    @tool
    async def aadd(a: int, b: int) -> int:
        """Adds asynchronously."""
        return a + b

    def run() -> str:
        model = ScriptedModel([call("aadd", {"a": 1, "b": 1}), call("add", {"a": 2, "b": 2}), "ok"])
        return generate_text(model, "go", tools=[aadd, add]).text

    results: list[str] = []
    thread = threading.Thread(target=lambda: results.append(run()))
    thread.start()
    thread.join()

    async def inside() -> str:
        return run()

    assert results == ["ok"]
    assert asyncio.run(inside()) == "ok"


def test_agenerate_text_matches_generate_text() -> None:
    """The async driver produces the same conversation as the blocking one."""
    script = [[call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4})], "done"]
    sync = generate_text(ScriptedModel(script), "go", tools=[add], run_id="r")
    async_ = asyncio.run(agenerate_text(ScriptedModel(script), "go", tools=[add], run_id="r"))
    assert sync.messages == async_.messages
    assert sync.state.events == async_.state.events


def test_data_stop_conditions() -> None:
    """token_budget and tool_called stop the run with their own finish reasons."""
    from toolfold.runtime import token_budget, tool_called

    script = [call("add", {"a": 1, "b": 1})] * 3 + ["done"]
    by_tool = generate_text(
        ScriptedModel(script), "go", tools=[add], stop_when=[tool_called("add")]
    )
    assert (by_tool.finish_reason, len(by_tool.steps)) == ("tool_called", 1)
    by_budget = generate_text(ScriptedModel(script), "go", tools=[add], stop_when=[token_budget(1)])
    assert by_budget.finish_reason == "token_budget"


def test_blocking_run_with_sync_tools_never_imports_asyncio() -> None:
    """The blocking path runs sync tools (parallel ones in threads) without asyncio."""
    import subprocess
    import sys

    code = (
        "import sys, toolfold\n"
        "from toolfold.testing import ScriptedModel\n"
        "@toolfold.tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add.'''\n"
        "    return a + b\n"
        "c = ScriptedModel.call\n"
        "m = ScriptedModel([[c('add', {'a': 1, 'b': 2}), c('add', {'a': 3, 'b': 4})], 'x'])\n"
        "assert toolfold.generate_text(m, 'go', tools=[add]).text == 'x'\n"
        "print('asyncio' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


def test_model_strings_resolve_through_the_provider_registry() -> None:
    """A 'provider:model' string builds the model through its registered factory."""
    import toolfold.runtime._model as model_module
    from toolfold.runtime import register_provider

    built: list[tuple[str, dict[str, Any]]] = []

    def factory(name: str, **options: Any) -> ScriptedModel:
        built.append((name, options))
        return ScriptedModel(["hello from " + name], name=f"fakeprov:{name}")

    register_provider("fakeprov", factory)
    try:
        response = generate_text("fakeprov:tiny", "hi")
        explicit = toolfold.model("fakeprov:big", base_url="http://127.0.0.1:1")
    finally:
        model_module._PROVIDERS.pop("fakeprov", None)
    assert response.text == "hello from tiny"
    assert response.state.config.model == "fakeprov:tiny"
    assert explicit.name == "fakeprov:big"
    assert built == [("tiny", {}), ("big", {"base_url": "http://127.0.0.1:1"})]


def test_resume_rejects_unknown_options() -> None:
    """A misspelled option to resume is an error, not silently ignored."""
    first = generate_text(ScriptedModel([call("ask_user", {"question": "?"})]), "go", tools=[ASK])
    with pytest.raises(TypeError, match="unexpected keyword argument 'tols'"):
        resume(first.state, model=ScriptedModel([]), tols=[ASK])


def test_the_options_generate_text_passes_on_by_name_are_parameters_of_every_side() -> None:
    """``_one_off`` reads the call's options by name: each is a parameter of `generate_text`,
    `agenerate_text`, `Agent` and `make_options`, so a rename fails here, not at a user's call."""
    import inspect

    from toolfold import Agent, agenerate_text, generate_text
    from toolfold.runtime import _api

    for function in (generate_text, agenerate_text, Agent.__init__, _api.make_options):
        parameters = inspect.signature(function).parameters
        missing = [name for name in (*_api._OPTIONS, "model", "tools") if name not in parameters]
        assert missing == [], (function, missing)
