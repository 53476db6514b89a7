"""Testing ergonomics (session 40): sampled arguments the tool takes, overrides, clear errors."""

from __future__ import annotations

import asyncio
import copy
import functools
import gc
import inspect
import itertools
import pickle
import re
import warnings
from decimal import Decimal
from typing import Annotated, Any

import pydantic
import pytest

from toolfold import (
    Agent,
    Field,
    InvalidEventError,
    Message,
    ModelResponse,
    Sequence,
    ToolDefinitionError,
    UsageError,
    agenerate_text,
    tool,
)
from toolfold.runtime import (
    ModelResponded,
    OutputRejected,
    OutputSpec,
    RunConfig,
    ToolSpec,
    _pattern,
    initial_state,
    reduce,
)
from toolfold.runtime._pattern import pattern_samples
from toolfold.testing import (
    ScriptedModel,
    TestModel,
    override_models,
    response_events,
    sample_value,
)
from toolfold.toolkit._tool import is_async_callable


def _takes(tp: Any) -> str:
    """The arguments TestModel makes for a tool of one parameter ``v: tp``, checked by the tool."""

    def f(v: tp) -> str:  # type: ignore[valid-type]
        return repr(v)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (types that warn of their schema, e.g. Json)
        run = Agent(TestModel(), tools=[tool(f)]).run("go")
    result = run.steps[0].tool_results[0]
    assert not result.is_error, result.content
    return run.steps[0].tool_calls[0].arguments_text


@pytest.mark.parametrize(
    "field",
    [
        pydantic.UUID1,
        pydantic.UUID3,
        pydantic.UUID4,
        pydantic.UUID5,
        pydantic.IPvAnyAddress,
        pydantic.IPvAnyInterface,
        pydantic.IPvAnyNetwork,
        pydantic.Base64Str,
        pydantic.Base64Bytes,
        pydantic.Base64UrlStr,
        pydantic.Json[list[int]],
        pydantic.Json[dict[str, pydantic.UUID4]],
    ],
)
def test_pydantic_formats_in_a_model_are_sampled_as_values_the_model_takes(field: Any) -> None:
    """A pydantic model's UUID4, IPvAnyAddress, Base64Str, Json[...] field gets a valid sample, not "aaaaa"."""
    model = pydantic.create_model("Host", v=(field, ...))
    _takes(model)


@pytest.mark.parametrize("pattern", [r"^[A-Z]{3}$", r"^(foo|bar)$", r"^[a-z]{2}\d$", r"^x$|^y$"])
def test_a_set_of_patterned_strings_gets_distinct_items_that_match(pattern: str) -> None:
    """``set[str]`` with a pattern and min_items=2 gets two distinct matching strings, not "uniqueItems needs 2"."""
    tp = Annotated[set[Annotated[str, Field(pattern=pattern)]], Field(min_items=2)]
    _takes(tp)
    value = sample_value(
        {
            "type": "array",
            "uniqueItems": True,
            "minItems": 2,
            "items": {"type": "string", "pattern": pattern},
        }
    )
    assert len(set(value)) == 2


@pytest.mark.parametrize("pattern", [r"^id-", r"ab", r"x+y"])
def test_a_set_of_strings_whose_pattern_has_nothing_to_vary_gets_matching_variants(
    pattern: str,
) -> None:
    """``set[str]`` with a pattern that has no choice point (``^id-``) gets id-, id-1..., not "uniqueItems needs 2"."""
    tp = Annotated[set[Annotated[str, Field(pattern=pattern)]], Field(min_items=2)]
    _takes(tp)
    value = sample_value(
        {
            "type": "array",
            "uniqueItems": True,
            "minItems": 3,
            "items": {"type": "string", "pattern": pattern},
        }
    )
    assert len(set(value)) == 3
    assert all(re.search(pattern, item) for item in value)


def _samples(pattern: str, min_length: int = 0) -> list[str]:
    return list(itertools.islice(pattern_samples(pattern, min_length), 46))


def test_long_repeats_are_not_built_round_by_round_for_each_sample(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """46 samples of ``^[^abc]{5000}$`` build a few hundred class items, not 5,000 per sample."""
    built = 0
    item = _pattern._Builder.item

    def counted(self: Any, op: Any, av: Any) -> str:
        nonlocal built
        built += 1
        return item(self, op, av)

    monkeypatch.setattr(_pattern._Builder, "item", counted)
    found = _samples(r"^[^abc]{5000}$")
    assert len(set(found)) == 46
    assert all(len(text) == 5000 and re.search(r"^[^abc]{5000}$", text) for text in found)
    assert built < 5000


@pytest.mark.parametrize(
    ("pattern", "min_length"),
    [
        (r"^[^abc]{50}$", 0),
        (r"^(?:ab|c[de]){3,8}x?$", 0),
        (r"^(a|b)\1{4}(?:\1c){3}$", 0),
        (r"^(?:(x)|y){6}$", 0),
        (r"[a-c]+", 40),
        (r"^(?:[01]{2}-){5}\d$", 0),
    ],
)
def test_repeats_built_at_once_give_the_samples_built_round_by_round(
    monkeypatch: pytest.MonkeyPatch, pattern: str, min_length: int
) -> None:
    """Rounds of a repeat taken at once give the same samples, in the same order, as rounds built one by one."""
    fast = _samples(pattern, min_length)
    monkeypatch.setattr(_pattern._Builder, "_same_rounds", lambda *args: 0)
    assert fast == _samples(pattern, min_length)
    assert len(fast) > 1


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real provider call goes to a proxy nobody listens on, never to the internet."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")


def _triage() -> Agent[Any, str]:
    """An agent that hands the run to one made from a provider string."""
    billing = Agent("openai:gpt-4o-mini", name="billing")
    call = ScriptedModel.call("transfer_to_billing", {})
    return Agent(ScriptedModel([call]), name="triage", handoffs=[billing])


@pytest.mark.usefixtures("offline")
def test_coroutines_made_inside_override_models_keep_it_when_awaited_after() -> None:
    """arun, aresume and agenerate_text called in the block and awaited after it call the test model, handoffs too."""
    agent = Agent("openai:gpt-4o-mini")
    waits = Agent("openai:gpt-4o-mini", tools=[lookup], auto_execute_tools=False)
    with override_models(TestModel(text="offline")) as resolved:
        waiting = waits.run("x").state
        run = agent.arun("x")
        resumed = waits.aresume(waiting, tool_results={waiting.pending_calls[0].call.id: "sunny"})
        generated = agenerate_text("openai:gpt-4o-mini", "x")
        handed = _triage().arun("x")

    async def main() -> list[str]:
        return [(await c).text for c in (run, resumed, generated, handed)]

    assert asyncio.run(main()) == ["offline"] * 4
    assert resolved.count("openai:gpt-4o-mini") == 4  # both agents, agenerate_text, billing


def test_the_methods_that_keep_override_models_are_coroutine_functions() -> None:
    """arun, aresume, agenerate_text and a workflow's arun/aresume are coroutine functions to inspect and asyncio."""
    agent = Agent(TestModel())
    workflow = Sequence(Agent(TestModel(), name="writer"))
    for function in (
        agent.arun,
        agent.aresume,
        Agent.arun,
        agenerate_text,
        workflow.arun,
        workflow.aresume,
        functools.partial(agent.arun, "x"),
    ):
        assert inspect.iscoroutinefunction(function), function
        assert asyncio.iscoroutinefunction(function), function
        assert is_async_callable(function), function
    assert next(iter(inspect.signature(agent.arun).parameters)) == "prompt"  # bound: no self


def test_the_methods_that_keep_override_models_pickle_copy_and_print_as_functions() -> None:
    """Agent.arun, agenerate_text and Workflow.arun pickle by name, copy as themselves and
    print as functions, as on every Python version they did before."""
    for function in (Agent.arun, Agent.aresume, agenerate_text, Sequence.arun):
        assert pickle.loads(pickle.dumps(function)) is function
        assert copy.copy(function) is function
        assert copy.deepcopy(function) is function
        assert repr(function).startswith(f"<function {function.__qualname__} at ")


def test_a_coroutine_made_in_a_block_and_never_awaited_warns_once_under_its_name() -> None:
    """agent.arun(...) called in override_models and dropped gives one "never awaited" warning naming Agent.arun."""
    agent = Agent(TestModel())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with override_models(TestModel()):
            agent.arun("x")  # a forgotten await
        gc.collect()
    messages = [str(w.message) for w in caught if "never awaited" in str(w.message)]
    assert messages == ["coroutine 'Agent.arun' was never awaited"]


def test_wrong_arguments_to_arun_in_a_block_raise_at_the_call() -> None:
    """agent.arun(bad=1) in override_models raises TypeError at the call, as outside a block."""
    agent = Agent(TestModel())
    with override_models(TestModel()), pytest.raises(TypeError, match="bad"):
        agent.arun("x", bad=1)  # type: ignore[call-arg]


@pytest.mark.usefixtures("offline")
def test_a_stream_made_inside_override_models_keeps_it_for_a_handoff_after_the_block() -> None:
    """A stream made in a block and iterated after it hands off to an agent made from a string: the test model answers."""
    triage, atriage = _triage(), _triage()  # made before the block: only the stream is made in it
    with override_models(TestModel(text="offline")):
        stream = triage.stream("x")
        astream = atriage.stream("x")
    assert list(stream)[-1].response.text == "offline"

    async def main() -> str:
        return [e async for e in astream][-1].response.text

    assert asyncio.run(main()) == "offline"


@pytest.mark.usefixtures("offline")
def test_a_coroutine_made_outside_any_block_sees_the_block_it_is_awaited_in() -> None:
    """``agent.arun`` called before a block and awaited inside it calls the block's model (as before)."""
    agent = Agent("openai:gpt-4o-mini")
    run = agent.arun("x")

    async def main() -> str:
        with override_models(TestModel(text="inside")):
            return (await run).text

    assert asyncio.run(main()) == "inside"


@tool
def lookup(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: sunny"


def test_a_scripted_model_response_whose_message_is_no_message_is_a_usage_error() -> None:
    """``ScriptedModel([ModelResponse("hi")])`` names the entry and what a message is, not a bare AttributeError."""
    with pytest.raises(
        UsageError,
        match=r"script entry 0 is no reply: got a ModelResponse whose message is str 'hi'",
    ):
        ScriptedModel([ModelResponse("hi")])  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [lambda x: x, None, "add", Agent(ScriptedModel([]), name="a")])
def test_tool_spec_from_something_that_is_no_tool_is_a_usage_error(value: Any) -> None:
    """``ToolSpec.from_tool`` of a plain function, None, a name or an agent says a Tool is expected."""
    with pytest.raises(UsageError, match=r"ToolSpec.from_tool\(tool\): expected a Tool, got "):
        ToolSpec.from_tool(value)


@pytest.mark.parametrize("chunk", [-1, 0, True, 2.5])
def test_response_events_with_a_chunk_below_one_is_a_usage_error(chunk: Any) -> None:
    """chunk=-1 dropped the text silently and chunk=0 raised a bare ValueError: both name the argument."""
    response = ModelResponse(Message.assistant("hello world"))
    with pytest.raises(UsageError, match=r"chunk is the most characters of one text piece"):
        response_events(response, chunk)


def test_an_enum_default_is_the_sample_when_the_schema_accepts_it() -> None:
    """``{"enum": ["red", "green"], "default": "green"}`` samples "green", as a default of any other schema."""
    color = {"type": "string", "enum": ["red", "green"], "default": "green"}
    assert sample_value({"type": "object", "properties": {"color": color}}) == {"color": "green"}
    refused = {**color, "default": "blue"}  # a default the enum refuses: its first value
    assert sample_value({"type": "object", "properties": {"color": refused}}) == {"color": "red"}


@pytest.mark.parametrize("bad", [5, ["x"]])
def test_a_scripted_call_id_that_is_no_str_is_refused_when_made(bad: Any) -> None:
    """``call("add", {...}, id=5)`` is a UsageError at once, not at the run's first request."""
    with pytest.raises(UsageError, match=r"call\('add', \.\.\., id=\.\.\.\): a call's id is a str"):
        ScriptedModel.call("add", {"a": 1}, id=bad)
    assert ScriptedModel.call("add", {"a": 1}, id=None).id == ""  # None: derived, as before


@pytest.mark.parametrize("name", [None, 5, b"x:y"])
def test_a_test_model_name_that_is_no_str_is_refused_when_made(name: Any) -> None:
    """``ScriptedModel(name=None)`` failed with an AttributeError at the first request; now at construction."""
    for make in (lambda: ScriptedModel(["hi"], name=name), lambda: TestModel(name=name)):
        with pytest.raises(UsageError, match=r"\(name=\.\.\.\): the model's name is a str"):
            make()


@pytest.mark.parametrize("message", [5, None, ["bad", "list"]])
def test_output_rejected_with_no_text_is_refused_naming_the_event(message: Any) -> None:
    """``reduce(state, OutputRejected(5))`` is an InvalidEventError naming the event, not a Message.parts error."""
    config = RunConfig(output=OutputSpec("out", {"type": "object"}), max_steps=5)
    answered = ModelResponded(ModelResponse(Message.assistant('{"x": 1}')))
    state = reduce(initial_state("hi", config, run_id="r"), answered)
    with pytest.raises(InvalidEventError, match=r"event 'output_rejected' refused .*must be text"):
        reduce(state, OutputRejected(message))


def test_initial_state_of_a_dict_says_it_is_no_message_list() -> None:
    """``initial_state({"role": "user", ...})`` read the dict's keys as messages; now it says a dict is no list."""
    with pytest.raises(UsageError, match=r"got a dict .* which is no message list"):
        initial_state({"role": "user", "content": "x"}, run_id="r")  # type: ignore[arg-type]


def test_a_schema_nested_too_deeply_is_named_so_not_as_endless_references() -> None:
    """2,000 levels of objects without a $ref: "nested too deeply", not "references recurse without end"."""
    schema: dict[str, Any] = {"type": "integer"}
    for _ in range(2000):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    with pytest.raises(UsageError, match=r"nested too deeply") as info:
        sample_value(schema)
    assert "references" not in str(info.value)


@pytest.mark.parametrize("bound", ["1E+5000", "-1E+5000", "1E+999999999"])
def test_a_decimal_bound_of_more_digits_than_json_carries_is_a_definition_error(
    bound: str,
) -> None:
    """Field(le=Decimal("1E+5000")) is a ToolDefinitionError naming the bound, not a bare ValueError."""

    def f(x: Annotated[float, Field(le=Decimal(bound))]) -> str:
        """F.

        Args:
            x: The value.
        """
        return str(x)

    with pytest.raises(ToolDefinitionError, match=r"le=Decimal.*more than JSON text can carry"):
        tool(f)


def test_bounds_on_a_decimal_say_what_to_do_and_decimal_bounds_on_a_float_work() -> None:
    """Field(gt=0) on a Decimal says it is text and what to do; Field(ge=Decimal("0.5")) on a float is 0.5."""

    def price(x: Annotated[Decimal, Field(ge=Decimal("0.5"))]) -> str:
        """Price.

        Args:
            x: The price.
        """
        return str(x)

    with pytest.raises(
        ToolDefinitionError, match=r"a Decimal is sent as text.*check the bound in the tool"
    ):
        tool(price)

    def ratio(x: Annotated[float, Field(ge=Decimal("0.5"), multiple_of=Decimal("0.1"))]) -> str:
        """Ratio.

        Args:
            x: The ratio.
        """
        return str(x)

    made = tool(ratio).parameters["properties"]["x"]
    assert (made["minimum"], made["multipleOf"]) == (0.5, 0.1)


def test_distinct_objects_vary_a_patterned_field_within_its_pattern() -> None:
    """A set of objects whose one field has a pattern (a frozen dataclass's code) gets distinct codes that match."""
    code = {"type": "string", "pattern": r"^[A-Z]{3}$"}
    item = {
        "type": "object",
        "properties": {"code": code},
        "required": ["code"],
        "additionalProperties": False,
    }
    found = sample_value({"type": "array", "uniqueItems": True, "minItems": 3, "items": item})
    assert found == [{"code": "AAA"}, {"code": "AAB"}, {"code": "AAC"}]
