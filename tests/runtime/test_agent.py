"""Agent: a frozen spec with run / arun / stream / resume."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
from typing import Any

import attrs
import pytest

from toolfold import (
    Agent,
    Message,
    RateLimitError,
    Response,
    RunEndEvent,
    RunError,
    StepEndEvent,
    StepStartEvent,
    TextDelta,
    ToolCallEvent,
    ToolfoldError,
    ToolResultEvent,
    UsageError,
    generate_text,
    tool,
)
from toolfold.runtime import ToolCallDelta
from toolfold.testing import FunctionModel, ScriptedModel, TestModel

call = ScriptedModel.call


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city name.
    """
    return f"sunny in {city}"


def max_steps_reached(state: Any) -> bool:
    return False


def _agent(script: list[Any], **kw: Any) -> Agent:
    return Agent(ScriptedModel(script), tools=[get_weather], instructions="Be brief.", **kw)


def test_agent_is_frozen_and_evolves() -> None:
    """An Agent cannot be mutated; evolve gives a changed copy."""
    agent = _agent(["hi"], temperature=0.1)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        agent.max_steps = 3  # type: ignore[misc]
    other = agent.evolve(max_steps=3, settings={"seed": 1})
    assert (other.max_steps, agent.max_steps) == (3, 10)
    assert other.settings == {"temperature": 0.1, "seed": 1}
    assert other.tools == agent.tools


def test_run_arun_and_history() -> None:
    """run and arun give the same answer; history is prepended to the prompt."""
    script = [call("get_weather", {"city": "Rome"}), "Sunny."]
    sync = _agent(script).run("weather?", run_id="r")
    async_ = asyncio.run(_agent(script).arun("weather?", run_id="r"))
    assert sync.text == async_.text == "Sunny."
    assert sync.messages == async_.messages
    agent = _agent(["again"])
    follow = agent.run("and tomorrow?", history=sync.messages)
    model = agent.model
    assert isinstance(model, ScriptedModel)
    sent = model.requests[0].messages
    assert sent[0] == Message.system("Be brief.")
    assert sent[1:] == (*sync.messages, Message.user("and tomorrow?"))
    assert follow.text == "again"


def test_new_turn_on_a_finished_run() -> None:
    """resume(message=...) continues a finished run with a new user turn."""
    agent = _agent(["first", "second"])
    first = agent.run("one")
    second = agent.resume(first.state, message="two")
    assert second.text == "second"
    assert [m.role for m in second.messages] == ["user", "assistant", "user", "assistant"]


def test_settings_reach_the_model() -> None:
    """Keyword settings and the settings mapping both go into the request."""
    agent = _agent(["ok"], settings={"max_tokens": 5}, temperature=0)
    agent.run("go")
    model = agent.model
    assert isinstance(model, ScriptedModel)
    assert model.requests[0].settings == {"max_tokens": 5, "temperature": 0}


def test_stream_sync_events() -> None:
    """stream() yields step boundaries, deltas, tool calls and results, then the response."""
    agent = _agent([call("get_weather", {"city": "Lisbon"}), "It is sunny in Lisbon today."])
    stream = agent.stream("weather?")
    events = list(stream)
    kinds = [e.kind for e in events]
    assert kinds[0] == "step_start"
    assert kinds[-1] == "run_end"
    assert kinds.count("step_start") == kinds.count("step_end") == 2
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("step_end")
    assert any(isinstance(e, ToolCallDelta) for e in events)
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "It is sunny in Lisbon today."
    (result,) = [e for e in events if isinstance(e, ToolResultEvent)]
    assert result.result.content == "sunny in Lisbon"
    (tool_call,) = [e for e in events if isinstance(e, ToolCallEvent)]
    assert tool_call.disposition == "execute"
    end = events[-1]
    assert isinstance(end, RunEndEvent)
    assert isinstance(stream.response, Response)
    assert stream.response.text == text
    steps = [e.step for e in events if isinstance(e, StepEndEvent)]
    assert [s.index for s in steps] == [1, 2]
    assert [e.step for e in events if isinstance(e, StepStartEvent)] == [1, 2]


def test_stream_async_matches_sync() -> None:
    """async for over stream() yields the same events as the blocking iteration."""
    script = [call("get_weather", {"city": "Lisbon"}), "Sunny."]

    async def collect() -> list[Any]:
        return [e async for e in _agent(script).stream("weather?", run_id="r")]

    async_events = asyncio.run(collect())
    sync_events = list(_agent(script).stream("weather?", run_id="r"))
    assert [e.kind for e in async_events] == [e.kind for e in sync_events]
    assert async_events[-1].response.messages == sync_events[-1].response.messages


def test_stream_is_single_use_and_response_needs_the_end() -> None:
    """A stream's response is available only after iteration; it cannot be iterated twice."""
    stream = _agent(["hi"]).stream("go")
    with pytest.raises(ToolfoldError, match="not finished"):
        _ = stream.response
    list(stream)
    with pytest.raises(ToolfoldError, match="only once"):
        list(stream)


def test_a_stream_stopped_by_break_says_the_caller_stopped_it() -> None:
    """After `break`, `response` and a second iteration say the run was abandoned, not unfinished."""
    stream = _agent(["hello world"]).stream("go")
    for event in stream:
        if event.kind == "text_delta":
            break
    with pytest.raises(ToolfoldError, match="caller stopped iterating it") as raised:
        _ = stream.response
    assert "not finished" not in str(raised.value)
    assert "state was not kept" in str(raised.value)
    with pytest.raises(ToolfoldError, match="only once: the caller stopped iterating it"):
        list(stream)


def _failing() -> Agent:
    def fail(request: Any) -> Any:
        raise RateLimitError("slow down")

    return Agent(FunctionModel(fail))


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_stream_whose_run_failed_says_so_and_where_its_state_is(how: str) -> None:
    """After a stream raised, `response` and a second iteration name the failure and its
    `.state`, not an unfinished stream."""
    stream = _failing().stream("go")

    async def drain() -> None:
        async for _ in stream:
            pass

    with pytest.raises(RateLimitError) as failed:
        list(stream) if how == "sync" else asyncio.run(drain())
    assert failed.value.state is not None
    said = r"its run failed with RateLimitError .*`\.state`"
    with pytest.raises(UsageError, match=said) as raised:
        _ = stream.response
    assert "not finished" not in str(raised.value)
    with pytest.raises(UsageError, match="only once: " + said):
        list(stream)


def test_an_async_stream_closed_early_says_the_caller_stopped_it() -> None:
    """An async stream closed before its end says the caller stopped it, in `response`."""
    stream = _agent(["hello world"]).stream("go")

    async def stop_early() -> None:
        events = stream.__aiter__()
        await anext(events)
        await events.aclose()

    asyncio.run(stop_early())
    with pytest.raises(ToolfoldError, match="caller stopped iterating it"):
        _ = stream.response


class _ClosingModel(ScriptedModel):
    """A scripted model whose stream records when it is closed (as an HTTP stream's
    connection is released then)."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__(script)
        self.stream_closed = False

    async def stream(self, request: Any) -> Any:
        try:
            async for event in super().stream(request):
                yield event
        finally:
            self.stream_closed = True


def test_closing_an_async_stream_closes_the_model_stream_at_once() -> None:
    """aclosing a run's async stream after a break closes the model's stream before the
    next line, not turns of the event loop later when asyncio closes the dropped one."""
    model = _ClosingModel(["hello world"])
    agent = Agent(model)
    closed_at_exit: list[bool] = []

    async def stop_early() -> None:
        async with contextlib.aclosing(aiter(agent.stream("go"))) as events:
            async for event in events:
                if event.kind == "text_delta":
                    break
        closed_at_exit.append(model.stream_closed)  # (no await since: the loop has not run)

    asyncio.run(stop_early())
    assert closed_at_exit == [True]


class _BadCloseEvents:
    """A model stream that is an async iterator class (not a generator) whose ``aclose``
    fails; ``broken_at`` makes its n-th event a ConnectionError instead."""

    def __init__(self, events: Any, broken_at: int | None = None) -> None:
        self.events = aiter(events)
        self.broken_at = broken_at
        self.served = 0

    def __aiter__(self) -> _BadCloseEvents:
        return self

    async def __anext__(self) -> Any:
        self.served += 1
        if self.served == self.broken_at:
            raise ConnectionError("model stream broke")
        return await anext(self.events)

    async def aclose(self) -> None:
        raise RuntimeError("aclose failed")


class _BadCloseModel(ScriptedModel):
    """A scripted model whose stream is a `_BadCloseEvents`."""

    def __init__(self, script: list[Any], broken_at: int | None = None) -> None:
        super().__init__(script)
        self.broken_at = broken_at

    def stream(self, request: Any) -> Any:
        return _BadCloseEvents(super().stream(request), self.broken_at)


def test_a_model_stream_whose_aclose_fails_does_not_fail_a_finished_run() -> None:
    """An async stream whose model stream ended normally answers even if its aclose fails."""
    stream = Agent(_BadCloseModel(["hello"])).stream("go")

    async def read_all() -> None:
        async for _event in stream:
            pass

    asyncio.run(read_all())
    assert stream.response.text == "hello"


def test_a_model_stream_whose_aclose_fails_keeps_the_model_error() -> None:
    """A model stream that breaks mid-way fails the run with its own error (a RunError with
    the state to resume), not its failing aclose's."""
    stream = Agent(_BadCloseModel(["hello"], broken_at=2)).stream("go")

    async def read_all() -> None:
        async for _event in stream:
            pass

    with pytest.raises(RunError, match="ConnectionError: model stream broke") as caught:
        asyncio.run(read_all())
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert caught.value.state is not None


def test_a_stream_the_caller_stops_drops_the_model_streams_failing_aclose() -> None:
    """Closing a run's async stream mid-answer closes quietly though the model stream's
    aclose fails."""
    stream = Agent(_BadCloseModel(["hello world"])).stream("go")

    async def stop_early() -> str:
        events = aiter(stream)
        event = await anext(events)
        while event.kind != "text_delta":
            event = await anext(events)
        await events.aclose()  # type: ignore[attr-defined]
        return str(event.kind)

    assert asyncio.run(stop_early()) == "text_delta"
    with pytest.raises(UsageError, match="caller stopped iterating it"):
        _ = stream.response


class _Source:
    """A tool source (as an MCP server is) that gives `get_weather` when opened."""

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def tools(self) -> list[Any]:
        return [get_weather]


def _sourced(model: Any) -> Agent:
    return Agent(model, tools=[_Source()])


def _counting(asked: list[Any]) -> FunctionModel:
    """A model that answers a long text and notes each request it is asked."""

    def answer(request: Any) -> str:
        asked.append(request)
        return "first run " * 10

    return FunctionModel(answer)


def test_a_sourced_stream_response_before_iterating_says_it_has_not_finished() -> None:
    """An agent with a tool source: `stream.response` before iterating is the usual UsageError."""
    stream = _sourced(ScriptedModel(["hi"])).stream("go")
    with pytest.raises(UsageError, match="the stream has not finished"):
        _ = stream.response


def test_a_sourced_stream_stopped_by_break_is_not_run_again() -> None:
    """A tool-source stream iterated again after `break` raises, as documented, and calls no model."""
    asked: list[Any] = []
    stream = _sourced(_counting(asked)).stream("go")
    for _event in stream:
        break
    with pytest.raises(UsageError, match="only once: the caller stopped iterating it"):
        list(stream)
    with pytest.raises(UsageError, match="caller stopped iterating it"):
        _ = stream.response
    assert asked == []  # the break came before the first model call; no second run asked it


def test_a_sourced_stream_iterated_to_its_end_cannot_be_iterated_again() -> None:
    """A finished tool-source stream keeps its response and refuses a second iteration."""
    stream = _sourced(ScriptedModel(["hi"])).stream("go")
    list(stream)
    assert stream.response.text == "hi"
    with pytest.raises(UsageError, match="only once: this one ended"):
        list(stream)


def test_an_async_sourced_stream_closed_early_is_not_run_again() -> None:
    """An async tool-source stream closed early says so in `response` and refuses a new iteration."""
    asked: list[Any] = []
    stream = _sourced(_counting(asked)).stream("go")

    async def stop_early_then_again() -> None:
        events = stream.__aiter__()
        await anext(events)
        await events.aclose()
        with pytest.raises(UsageError, match="only once: the caller stopped iterating it"):
            async for _event in stream:
                pass

    asyncio.run(stop_early_then_again())
    with pytest.raises(UsageError, match="caller stopped iterating it"):
        _ = stream.response
    assert asked == []  # the break came before the first model call; no second run asked it


def test_a_sourced_stream_left_on_its_last_event_keeps_its_response() -> None:
    """A tool-source stream the caller breaks out of on its `RunEndEvent`, sync or async and
    closed, keeps the run's response (the run ended) and says so to a second iteration."""
    stream = _sourced(ScriptedModel(["hi"])).stream("go")
    for event in stream:
        if isinstance(event, RunEndEvent):
            break
    assert stream.response.text == "hi"
    with pytest.raises(UsageError, match="only once: this one ended"):
        list(stream)

    later = _sourced(ScriptedModel(["hi"])).stream("go")

    async def break_on_the_end() -> None:
        events = later.__aiter__()
        async for event in events:
            if isinstance(event, RunEndEvent):
                break
        await events.aclose()

    asyncio.run(break_on_the_end())
    assert later.response.text == "hi"


def test_stream_suspends_for_approval_and_resume_streams() -> None:
    """A streamed run stops at an approval; resume_stream continues it."""

    @tool(requires_approval=True)
    def launch() -> str:
        """Launch."""
        return "launched"

    agent = Agent(ScriptedModel([call("launch"), "Done."]), tools=[launch])
    stream = agent.stream("go")
    events = list(stream)
    assert stream.response.finish_reason == "approval_required"
    assert [e.disposition for e in events if isinstance(e, ToolCallEvent)] == ["approve"]
    pending = stream.response.pending_approvals[0].id
    resumed = agent.resume_stream(stream.response.state, approvals={pending: True})
    kinds = [e.kind for e in resumed]
    assert "tool_result" in kinds
    assert resumed.response.text == "Done."


def test_test_model_drives_an_agent_with_real_tools() -> None:
    """TestModel calls every tool with valid arguments, then sums up the results."""

    @tool
    def convert(amount: float, currency: str = "EUR") -> str:
        """Convert money.

        Args:
            amount: How much.
            currency: Into which currency.
        """
        return f"{amount} {currency}"

    response = Agent(TestModel(), tools=[get_weather, convert]).run("go")
    assert response.finish_reason == "stop"
    assert "get_weather: sunny in" in response.text
    assert "convert: 1.0" in response.text


def test_model_string_resolution_errors_early() -> None:
    """An unknown provider in a model string fails when the agent is made."""
    with pytest.raises(ToolfoldError, match="unknown provider"):
        Agent("nosuchprovider:model")


def test_stream_failure_keeps_state_and_resume_retries() -> None:
    """A stream that breaks mid-way raises with the pre-call state; resume retries the step."""
    from toolfold import RunError
    from toolfold.runtime import TextDelta as Delta
    from toolfold.testing import FunctionModel

    attempts = [0]

    def broken_stream(request: Any) -> Any:
        attempts[0] += 1
        yield Delta("partial ")
        if attempts[0] == 1:
            raise ConnectionResetError("stream cut")
        yield Delta("answer")

    agent = Agent(FunctionModel(lambda r: "unused", stream_function=broken_stream))
    stream = agent.stream("go")
    with pytest.raises(RunError, match="ConnectionResetError") as info:
        list(stream)
    state = info.value.state
    assert state.phase == "awaiting_model"
    retried = agent.resume_stream(state)
    assert [e.text for e in retried if isinstance(e, TextDelta)] == ["partial ", "answer"]
    assert retried.response.text == "partial answer"


def test_an_agent_pickles_as_its_spec_without_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pickled agent carries its model string, not the client or key; loading rebuilds them."""
    import pickle

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-in-env-only")
    agent = Agent("openai:gpt-4o-mini", instructions="Be brief.", name="pickled", temperature=0)
    data = pickle.dumps(agent)
    assert b"sk-secret-in-env-only" not in data
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other-process")
    loaded = pickle.loads(data)
    assert loaded == agent
    assert (loaded.name, loaded.settings) == ("pickled", {"temperature": 0})
    assert loaded._options.model is not agent._options.model


# --- the options a run is made with, kept between calls ------------------------------


def test_runs_of_the_same_tools_and_options_share_one_config() -> None:
    """generate_text's agents of the same Tools and options share the config; any difference, even of type, does not."""
    model = TestModel()
    first = Agent(model, tools=[get_weather], temperature=1, max_steps=2)
    again = Agent(model, tools=[get_weather], temperature=1, max_steps=2)
    assert again._options.config is first._options.config
    assert again._options.tools == {"get_weather": get_weather}
    as_float = Agent(model, tools=[get_weather], temperature=1.0, max_steps=2)
    assert as_float._options.config is not first._options.config
    assert repr(as_float._options.config.settings["temperature"]) == "1.0"
    other = Agent(model, tools=[get_weather], temperature=1, max_steps=3)
    assert other._options.config.max_steps == 3
    Agent(model, tools=[get_weather], max_steps=1)
    with pytest.raises(ToolfoldError, match="max_steps must be an integer"):
        Agent(model, tools=[get_weather], max_steps=True)  # True == 1, made just before


def _billing() -> Agent:
    return Agent(TestModel(), name="billing")


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (
            {"handoffs": "billing"},
            r"handoffs takes a list, got the string 'billing': .*=\['billing'\]",
        ),
        ({"handoffs": _billing()}, r"handoffs takes a list, got one agent \('billing'\)"),
        ({"tools": get_weather}, r"tools takes a list, got one Tool \('get_weather'\)"),
        (
            {"tools": {"get_weather": get_weather}},
            r"tools takes a list, got a dict \(keys 'get_weather'\)",
        ),
        ({"stop_when": max_steps_reached}, "stop_when takes a list, got one function"),
    ],
)
def test_a_list_parameter_given_one_item_is_refused_naming_it(
    options: dict[str, Any], problem: str
) -> None:
    """A lone str/agent/tool for a list parameter is refused: a string made one handoff per
    letter, an agent or tool a bare TypeError."""
    with pytest.raises(UsageError, match=f"^agent 'triage': {problem}"):
        Agent(TestModel(), name="triage", **options)
    with pytest.raises(UsageError, match=problem):
        Agent(TestModel(), name="triage").evolve(**options)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"name": 5}, "an agent's name is a non-empty string"),
        ({"name": ""}, "an agent's name is a non-empty string"),
        ({"stop_when": [5]}, "stop_when takes conditions .* got int: 5"),
        # a typo of "raise" ran as "return": tool errors went to the model, never raised
        (
            {"on_tool_error": "raises"},
            "on_tool_error must be 'return' or 'raise', got another str; did you mean 'raise'",
        ),
        ({"max_concurrency": 0}, "max_concurrency must be an integer >= 1, got 0"),
        ({"max_concurrency": 2.5}, "max_concurrency must be an integer >= 1, got 2.5"),
    ],
)
def test_bad_options_are_refused_when_the_agent_is_built(
    options: dict[str, Any], problem: str
) -> None:
    """They were accepted: a name of 5 ran as Agent(name=5), a stop condition of 5 failed mid-run."""
    with pytest.raises(UsageError, match=problem):
        Agent(TestModel(), **options)


@pytest.mark.parametrize(
    ("bad", "kind"),
    [("sk-proj-SECRET123", "another str (not shown)"), ({"api_key": "sk-proj-SECRET123"}, "dict")],
)
def test_a_bad_on_tool_error_is_named_by_its_type(bad: Any, kind: str) -> None:
    """Agent(on_tool_error=...) and generate_text(on_tool_error=...) showed the value's repr,
    which may hold a key (a value put in the wrong keyword): its type only now."""
    with pytest.raises(UsageError) as built:
        Agent(TestModel(), on_tool_error=bad)
    with pytest.raises(UsageError) as ran:
        generate_text(TestModel(), "go", on_tool_error=bad)
    for raised in (built, ran):
        assert str(raised.value).endswith(f"on_tool_error must be 'return' or 'raise', got {kind}")


@pytest.mark.parametrize(
    ("bad", "meant"),
    [("Raise", "raise"), ("RETURN", "return"), (" raise ", "raise"), ("rase", "raise")],
)
def test_an_on_tool_error_close_to_a_choice_is_told_the_choice(bad: str, meant: str) -> None:
    """on_tool_error="Raise" read "must be 'return' or 'raise', got str", as if a str were
    wrong: a variant or near miss of a choice is told it, the value itself still unshown."""
    with pytest.raises(UsageError) as built:
        Agent(TestModel(), on_tool_error=bad)
    with pytest.raises(UsageError) as ran:
        generate_text(TestModel(), "go", on_tool_error=bad)
    for raised in (built, ran):
        assert str(raised.value).endswith(
            f"on_tool_error must be 'return' or 'raise', got another str; did you mean {meant!r}?"
        )


def test_a_long_on_tool_error_is_sought_no_near_choice_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """A str far longer than any choice is no near miss of one: difflib compared all of it
    (2 s for 10 MB, a file read into the wrong keyword), and now is not asked."""
    sought: list[str] = []
    close_matches = difflib.get_close_matches

    def spy(word: str, *args: Any, **kwargs: Any) -> list[str]:
        sought.append(word)
        return close_matches(word, *args, **kwargs)

    monkeypatch.setattr(difflib, "get_close_matches", spy)
    with pytest.raises(UsageError) as raised:
        Agent(TestModel(), on_tool_error="raise " * 10_000)
    assert str(raised.value).endswith("got another str (not shown)")
    assert sought == []
    with pytest.raises(UsageError, match="did you mean 'return'"):
        Agent(TestModel(), on_tool_error="retrun")
    assert sought == ["retrun"]  # (a near miss is still sought)
