"""Defects a user porting from the AI SDK / LangGraph met (session 40 review)."""

from __future__ import annotations

import asyncio
import functools
import typing
from typing import Any

import attrs
import pytest

from toolfold import (
    Agent,
    OutputInvalidEvent,
    OutputValidationError,
    RunState,
    Tool,
    ToolDefinitionError,
    UsageError,
    agenerate_text,
    generate_text,
    resume,
    tool,
)
from toolfold.testing import FunctionModel, ScriptedModel


@tool
def lookup(order: str) -> str:
    """Look an order up.

    Args:
        order: The order's id.
    """
    return "shipped"


def _calls(n: int) -> ScriptedModel:
    return ScriptedModel([ScriptedModel.call("lookup", {"order": str(i)}) for i in range(n)])


# --- 1. reset_tool_choice reaches the run, never the provider ----------------------


def test_agent_reset_tool_choice_false_forces_every_step() -> None:
    """Agent(reset_tool_choice=False) sends the forcing choice on every step, not as a setting."""
    model = _calls(3)
    agent = Agent(
        model, tools=[lookup], tool_choice="required", reset_tool_choice=False, max_steps=3
    )
    response = agent.run("x")
    assert [r.tool_choice for r in model.requests] == ["required"] * 3
    assert all("reset_tool_choice" not in r.settings for r in model.requests)
    assert response.state.config.reset_tool_choice is False
    assert dict(agent.settings) == {}


def test_generate_text_reset_tool_choice_false_forces_every_step() -> None:
    """generate_text(reset_tool_choice=False) forces every step and sends no such setting."""
    model = _calls(2)
    generate_text(
        model, "x", tools=[lookup], tool_choice="lookup", reset_tool_choice=False, max_steps=2
    )
    assert [r.tool_choice for r in model.requests] == ["lookup", "lookup"]
    assert all("reset_tool_choice" not in r.settings for r in model.requests)


def test_agenerate_text_and_evolve_take_reset_tool_choice() -> None:
    """agenerate_text and evolve take reset_tool_choice; the default still resets to auto."""
    model = _calls(2)
    asyncio.run(
        agenerate_text(
            model, "x", tools=[lookup], tool_choice="required", reset_tool_choice=False, max_steps=2
        )
    )
    assert [r.tool_choice for r in model.requests] == ["required", "required"]
    reset = _calls(2)
    agent = Agent(reset, tools=[lookup], tool_choice="required", max_steps=2)
    agent.run("x")
    assert [r.tool_choice for r in reset.requests] == ["required", "auto"]
    kept = agent.evolve(reset_tool_choice=False, model=_calls(2))
    kept.run("x")
    assert [r.tool_choice for r in kept.model.requests] == ["required", "required"]


def test_reset_tool_choice_survives_a_resume() -> None:
    """A run started with reset_tool_choice=False keeps forcing after a saved state's resume."""
    agent = Agent(
        _calls(3), tools=[lookup], tool_choice="required", reset_tool_choice=False, max_steps=1
    )
    first = agent.run("x")
    state = RunState.from_json(first.state.to_json())
    assert state.config.reset_tool_choice is False
    model = _calls(1)
    agent.evolve(model=model).resume(state, max_steps=2)
    assert [r.tool_choice for r in model.requests] == ["required"]


@pytest.mark.parametrize("name", ["output", "config"])
def test_agent_refuses_a_config_name_as_a_setting(name: str) -> None:
    """Agent() refuses a run configuration's name given as a model setting, naming it."""
    with pytest.raises(UsageError, match=rf"Agent\(\) got {name}=: an option of a run"):
        Agent(ScriptedModel(["hi"]), **{name: 1})
    with pytest.raises(UsageError, match=rf"evolve\(\) got {name}=: an option of a run"):
        Agent(ScriptedModel(["hi"])).evolve(**{name: 1})


@pytest.mark.parametrize("name", ["output", "config", "name", "handoffs"])
def test_generate_text_refuses_a_config_name_as_a_setting(name: str) -> None:
    """generate_text refuses a run configuration's (or Agent's) option given as a setting."""
    model = ScriptedModel(["hi"])
    with pytest.raises(UsageError, match=rf"generate_text\(\) got {name}=: an option of a run"):
        generate_text(model, "x", **{name: 1})
    assert model.requests == []


def test_a_real_setting_still_goes_to_the_provider() -> None:
    """A model setting with no option's name is still sent (the guard refuses only options)."""
    model = ScriptedModel(["hi"])
    generate_text(model, "x", temperature=0, settings_note="a")
    assert dict(model.requests[0].settings) == {"temperature": 0, "settings_note": "a"}


# --- 2. generate_text and resume check their list arguments as Agent does -----------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"tools": lookup}, r"tools takes a list, got one Tool \('lookup'\): .*tools=\[lookup\]"),
        ({"tools": {"weather": lookup}}, r"tools takes a list, got a dict \(keys 'weather'\)"),
        ({"stop_when": lambda state: False}, r"stop_when takes a list, got one function"),
        ({"stop_when": 5}, r"stop_when takes a list, got one int"),
    ],
)
def test_generate_text_refuses_one_item_for_a_list(given: dict[str, object], expected: str) -> None:
    """generate_text names itself and the parameter when given one item (or a dict) for a list."""
    model = ScriptedModel(["hi"])
    with pytest.raises(UsageError, match=r"^generate_text\(\): " + expected):
        generate_text(model, "x", **given)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^agenerate_text\(\): " + expected):
        asyncio.run(agenerate_text(model, "x", **given))  # type: ignore[arg-type]
    assert model.requests == []


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order's id.
    """
    return "refunded"


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"tools": refund}, r"tools takes a list, got one Tool \('refund'\)"),
        ({"tools": {"refund": refund}}, r"tools takes a list, got a dict .*tools=\[refund\]"),
        ({"tools": [refund], "stop_when": lambda state: False}, r"stop_when takes a list"),
    ],
)
def test_resume_names_itself_for_one_item_for_a_list(
    given: dict[str, object], expected: str
) -> None:
    """The functional resume() refuses one item for a list naming resume(), not Agent()."""
    script = [ScriptedModel.call("refund", {"order": "1"}), "done"]
    waiting = Agent(ScriptedModel(script), tools=[refund]).run("x")
    approvals = {waiting.pending_approvals[0].id: True}
    with pytest.raises(UsageError, match=r"^resume\(\): " + expected):
        resume(waiting.state, model=ScriptedModel(["done"]), approvals=approvals, **given)  # type: ignore[arg-type]


# --- 3. a tool_choice that is no text ------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda choice: Agent(ScriptedModel(["hi"]), tools=[lookup], tool_choice=choice),
        lambda choice: generate_text(
            ScriptedModel(["hi"]), "x", tools=[lookup], tool_choice=choice
        ),
        lambda choice: Agent(ScriptedModel(["hi"]), tools=[lookup]).evolve(tool_choice=choice),
    ],
    ids=["Agent", "generate_text", "evolve"],
)
def test_a_tool_choice_that_is_no_text_is_a_usage_error(make: Any) -> None:
    """A dict or list tool_choice is a UsageError naming tool_choice and what it takes."""
    with pytest.raises(UsageError, match=r"^tool_choice must be a str: .*\('lookup'\).*got dict"):
        make({"type": "tool", "toolName": "lookup"})
    with pytest.raises(UsageError, match=r"^tool_choice must be a str: .*got list \['lookup'\]"):
        make(["lookup"])


def test_a_tool_choice_dict_naming_a_tool_shows_its_name() -> None:
    """An AI SDK / OpenAI tool_choice dict naming a tool is answered with that tool's name."""
    with pytest.raises(UsageError, match=r"to force that tool, tool_choice='lookup'$"):
        Agent(
            ScriptedModel(["hi"]),
            tools=[lookup],
            tool_choice={"type": "tool", "toolName": "lookup"},
        )
    openai = {"type": "function", "function": {"name": "lookup"}}
    with pytest.raises(UsageError, match=r"tool_choice='lookup'$"):
        Agent(ScriptedModel(["hi"]), tools=[lookup], tool_choice=openai)  # type: ignore[arg-type]


# --- 4. a handoff target's forcing tool_choice -------------------------------------


def _desk(model: ScriptedModel, max_steps: int = 10, **refunds_options: Any) -> Agent:
    refunds = Agent(model, name="refunds", tools=[lookup], tool_choice="lookup", **refunds_options)
    return Agent(
        model,
        name="triage",
        handoffs=[refunds],
        tool_choice="transfer_to_refunds",
        max_steps=max_steps,
    )


_DESK_SCRIPT = [
    ScriptedModel.call("transfer_to_refunds", {}),
    ScriptedModel.call("lookup", {"order": "A1"}),
    ScriptedModel.call("lookup", {"order": "A2"}),
    "done",
]


def test_a_handoff_target_forces_its_tool_choice_on_its_first_step() -> None:
    """The agent handed the run sends its own forcing tool_choice once, then auto."""
    model = ScriptedModel(_DESK_SCRIPT)
    response = _desk(model).run("refund A1")
    assert response.agent == "refunds"
    assert [r.tool_choice for r in model.requests] == [
        "transfer_to_refunds",
        "lookup",
        "auto",
        "auto",
    ]


def test_a_handoff_target_forces_on_resume_from_a_saved_state() -> None:
    """A state saved right after a handoff forces the target's choice when it is resumed."""
    model = ScriptedModel(_DESK_SCRIPT[:1])
    first = _desk(model, max_steps=1).run("refund A1")  # handed over at the step limit
    state = RunState.from_json(first.state.to_json())
    assert (state.agent, state.finish_reason) == ("refunds", "max_steps")
    later = ScriptedModel(_DESK_SCRIPT[1:])
    _desk(later).resume(state, max_steps=10)
    assert [r.tool_choice for r in later.requests] == ["lookup", "auto", "auto"]


def test_a_handoff_target_with_reset_off_forces_every_step() -> None:
    """A target with reset_tool_choice=False forces every one of its steps."""
    model = ScriptedModel(_DESK_SCRIPT[:3])
    _desk(model, reset_tool_choice=False, max_steps=3).run("refund A1")
    assert [r.tool_choice for r in model.requests] == ["transfer_to_refunds", "lookup", "lookup"]


def _router_desk(seen: list[tuple[str, str | None]]) -> Agent[Any, str]:
    """triage forces a call (its only tools: transfers); billing hands every question back."""

    def triage_model(request: Any) -> Any:
        seen.append(("triage", request.tool_choice))
        if request.tool_choice == "required":
            return FunctionModel.call("transfer_to_billing", {})
        return "triage answered"

    def billing_model(request: Any) -> Any:
        seen.append(("billing", request.tool_choice))
        if [m for m in request.messages if m.role == "user"][-1].text == "my bill":
            return "billing answered"
        return FunctionModel.call("transfer_to_triage", {})

    billing = Agent(FunctionModel(billing_model), name="billing", handoffs=["triage"])
    return Agent(
        FunctionModel(triage_model),
        name="triage",
        handoffs=[billing],
        tool_choice="required",
        max_steps=10,
    )


def test_a_run_handed_back_to_a_forcing_router_is_not_forced_again() -> None:
    """A router that answered in this turn is not forced again when the run comes back: no ping-pong."""
    seen: list[tuple[str, str | None]] = []
    response = _router_desk(seen).run("what's the weather?")
    assert (response.finish_reason, response.text) == ("stop", "triage answered")
    assert seen == [("triage", "required"), ("billing", None), ("triage", "auto")]


def test_a_router_handed_the_run_in_a_later_turn_is_forced_once_in_it() -> None:
    """In a turn begun by another agent, the router handed the run is forced once, then not again."""
    seen: list[tuple[str, str | None]] = []
    triage = _router_desk(seen)
    first = triage.run("my bill")
    assert (first.agent, first.text) == ("billing", "billing answered")
    seen.clear()
    second = triage.resume(first.state, message="what's the weather?")
    assert (second.finish_reason, second.text) == ("stop", "triage answered")
    assert seen == [
        ("billing", None),
        ("triage", "required"),
        ("billing", None),
        ("triage", "auto"),
    ]


def test_a_router_that_began_the_turn_is_not_forced_when_handed_it_back() -> None:
    """The turn's first agent answered at its start: handed the run back, it is not forced again."""
    seen: list[tuple[str, str | None]] = []
    triage = _router_desk(seen)
    first = triage.run("what's the weather?")
    assert first.agent == "triage"
    seen.clear()
    triage.resume(first.state, message="and tomorrow?")
    assert seen == [("triage", "required"), ("billing", None), ("triage", "auto")]


# --- 5. an observer that is no function is refused before the model is called --------


@pytest.mark.parametrize("option", ["on_step", "on_event"])
def test_an_observer_that_is_no_function_is_refused_before_any_model_call(option: str) -> None:
    """on_step=5 / on_event="print" is a UsageError naming the option, before any model call."""
    model = ScriptedModel([ScriptedModel.call("lookup", {"order": "1"}), "done"])
    agent = Agent(model, tools=[lookup])
    calls: list[Any] = [
        lambda: agent.run("x", **{option: 5}),
        lambda: list(agent.stream("x", **{option: 5})),
        lambda: generate_text(model, "x", tools=[lookup], **{option: "print"}),
        lambda: asyncio.run(agenerate_text(model, "x", **{option: 5})),
    ]
    for call in calls:
        with pytest.raises(UsageError, match=rf"^{option} must be a function called with each"):
            call()
    assert model.requests == []


def test_resume_refuses_an_observer_that_is_no_function_before_running_tools() -> None:
    """A resume with on_step=5 is refused before the approved tool runs or the model is called."""
    ran: list[str] = []

    @tool(requires_approval=True)
    def pay(order: str) -> str:
        """Pay an order.

        Args:
            order: The order's id.
        """
        ran.append(order)
        return "paid"

    waiting = Agent(ScriptedModel([ScriptedModel.call("pay", {"order": "1"})]), tools=[pay]).run(
        "x"
    )
    approvals = {waiting.pending_approvals[0].id: True}
    model = ScriptedModel(["done"])
    with pytest.raises(UsageError, match=r"^on_step must be a function"):
        Agent(model, tools=[pay]).resume(waiting.state, approvals=approvals, on_step=5)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^on_event must be a function"):
        resume(waiting.state, model=model, tools=[pay], approvals=approvals, on_event=5)  # type: ignore[arg-type]
    assert (ran, model.requests) == ([], [])


# --- 7. an explicit-schema tool's function must take the arguments as one dict -------


_SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def _two(arguments: dict[str, Any], extra: object) -> str:
    return "x"


def _keywords(**arguments: Any) -> str:
    return "x"


@pytest.mark.parametrize("function", [_two, _keywords, lambda: "x"], ids=["two", "kw", "none"])
def test_an_explicit_tool_refuses_a_function_that_cannot_take_one_dict(function: Any) -> None:
    """Tool(name, ..., schema, fn) checks fn takes the arguments as one dict, naming the tool."""
    with pytest.raises(
        ToolDefinitionError,
        match=r"(?s)tool of 'two'.*cannot be called with the arguments as one dict",
    ):
        Tool("two", "d", _SCHEMA, function)


def test_an_explicit_tool_takes_functions_of_one_dict() -> None:
    """A function of one dict (with optional extras, async, a builtin) is still taken."""

    def with_default(arguments: dict[str, Any], extra: object = None) -> str:
        return "x"

    async def awaited(arguments: dict[str, Any]) -> str:
        return "x"

    for function in (with_default, awaited, dict, len):
        assert Tool("ok", "d", _SCHEMA, function).function is function


def _from_dict(function: Any) -> Any:
    """A dict-taking adapter over ``function``, made with functools.wraps (which sets __wrapped__)."""

    @functools.wraps(function)
    def adapter(arguments: dict[str, Any]) -> Any:
        return function(**arguments)

    return adapter


def _weather(city: str, units: str) -> str:
    return f"{city} in {units}"


def test_an_explicit_tool_takes_a_wraps_adapter_of_one_dict() -> None:
    """Tool(...) and replace(function=) take a functools.wraps adapter by its own (dict) signature."""
    schema = {"type": "object", "properties": {"city": {}, "units": {}}}
    made = Tool("weather", "d", schema, _from_dict(_weather))
    assert made.invoke({"city": "Paris", "units": "C"}) == "Paris in C"
    swapped = Tool("weather", "d", schema, lambda a: a).replace(function=_from_dict(_weather))
    assert swapped.invoke({"city": "Oslo", "units": "F"}) == "Oslo in F"


def test_replace_refuses_a_function_of_no_dict_as_tool_does() -> None:
    """Tool.replace(function=) refuses a function that cannot take one dict with Tool(...)'s words."""
    with pytest.raises(ToolDefinitionError) as made:
        Tool("two", "d", _SCHEMA, _two)
    with pytest.raises(ToolDefinitionError) as replaced:
        Tool("two", "d", _SCHEMA, lambda a: a).replace(function=_two)
    assert str(replaced.value) == str(made.value)


# --- 8. a stream shows a structured answer sent back ---------------------------------


@attrs.define
class Weather:
    city: str
    celsius: float


def test_a_stream_shows_a_rejected_structured_answer() -> None:
    """A stream yields output_invalid (step, message) after the step whose answer did not fit."""
    model = ScriptedModel(
        ['{"city": "Oslo", "celsius": "cold"}', '{"city": "Oslo", "celsius": -3}']
    )
    stream = Agent(model, output_type=Weather).stream("w")
    kinds = []
    rejected = []
    for event in stream:
        kinds.append(event.kind)
        if isinstance(event, OutputInvalidEvent):
            rejected.append(event)
    assert [(r.step, "$.celsius" in r.message) for r in rejected] == [(1, True)]
    assert kinds.index("output_invalid") == kinds.index("step_end") + 1
    assert stream.response.output == Weather("Oslo", -3.0)
    logged = [e.message for e in stream.response.state.events if e.kind == "output_rejected"]
    assert logged == [rejected[0].message]


def test_a_stream_shows_the_last_rejection_before_the_error() -> None:
    """With retries used up the stream yields the last output_invalid, then raises."""
    bad = '{"city": "Oslo", "celsius": "cold"}'
    stream = Agent(ScriptedModel([bad, bad]), output_type=Weather, output_retries=1).stream("w")
    seen: list[str] = []
    with pytest.raises(OutputValidationError):
        seen.extend(event.kind for event in stream)
    assert seen.count("output_invalid") == 2
    assert seen[-1] == "output_invalid"


def test_no_run_stream_event_kind_is_a_run_event_kind() -> None:
    """Each RunStreamEvent kind differs from every run Event kind, so one table keyed by kind holds both."""
    from toolfold.runtime import RunStreamEvent
    from toolfold.runtime.core._events import Event

    def kinds(union: Any) -> dict[str, str]:
        return {c.__name__: attrs.fields_dict(c)["kind"].default for c in typing.get_args(union)}

    streamed, logged = kinds(RunStreamEvent), kinds(Event)
    assert streamed["OutputInvalidEvent"] == "output_invalid"
    assert set(streamed.values()).isdisjoint(logged.values())


def test_an_agent_file_takes_reset_tool_choice_and_writes_it_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An agent file's reset_tool_choice reaches the agent, and to_dict writes it (not at default)."""
    from toolfold.files import from_dict, loads

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # (a model string is built; none is called)

    text = 'entry = "a"\n[agents.a]\nmodel = "openai:gpt-4o-mini"\nreset_tool_choice = false\n'
    agent = loads(text, model=ScriptedModel(["hi"])).get()
    assert isinstance(agent, Agent)
    assert agent.reset_tool_choice is False
    written = agent.evolve(model="openai:gpt-4o-mini").to_dict()
    assert written["agents"][next(iter(written["agents"]))]["reset_tool_choice"] is False
    again = from_dict(written, model=ScriptedModel(["hi"])).get()
    assert isinstance(again, Agent)
    assert again.reset_tool_choice is False
    plain = Agent("openai:gpt-4o-mini").to_dict()
    assert all("reset_tool_choice" not in entry for entry in plain["agents"].values())


def test_no_run_config_field_falls_into_the_settings() -> None:
    """Each RunConfig field is a parameter of Agent and generate_text, or refused as a setting."""
    import inspect

    from toolfold.runtime import RunConfig

    names = [f.name for f in attrs.fields(RunConfig) if not f.name.startswith("_")]
    for call, own in (
        (lambda **kw: Agent(ScriptedModel(["hi"]), **kw), Agent.__init__),
        (lambda **kw: generate_text(ScriptedModel(["hi"]), "x", **kw), generate_text),
    ):
        taken = set(inspect.signature(own).parameters)
        for name in names:
            if name in taken:
                continue
            with pytest.raises(UsageError, match=rf"got {name}=: an option of a run"):
                call(**{name: 1})
