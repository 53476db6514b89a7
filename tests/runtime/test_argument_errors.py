"""Arguments of Agent, evolve and generate_text that no run can use are refused when given,
with an error naming the argument: not a bare TypeError or AttributeError later, and not
a model setting sent to the provider."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest

import toolfold
from toolfold import Agent, Message, ToolDefinitionError, UsageError, generate_text, tool
from toolfold.runtime import ModelRequest, ModelResponse
from toolfold.testing import ScriptedModel, TestModel


def _make(kind: str) -> Callable[..., Any]:
    """Agent(model, **given), agent.evolve(**given) or generate_text(model, "x", **given)."""
    if kind == "Agent":
        return lambda **given: Agent(TestModel(), **given)
    if kind == "evolve":
        return lambda **given: Agent(TestModel()).evolve(**given)
    return lambda **given: generate_text(TestModel(), "x", **given)


KINDS = ["Agent", "evolve", "generate_text"]


# --- tools=[None], an agent in tools= ---------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_none_in_tools_is_refused_naming_its_place(kind: str) -> None:
    """tools=[f, None] is a ToolDefinitionError naming tools[1]: it was an AttributeError
    ('function' object has no attribute '_receiver'), tool(None) being a decorator."""

    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    with pytest.raises(ToolDefinitionError, match=r"^cannot make a tool of tools\[1\]") as caught:
        _make(kind)(tools=[lookup, None])
    assert "not None" in str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
def test_a_tool_decorator_never_applied_is_refused_naming_its_place(kind: str) -> None:
    """tools=[f, tool(name="x")] (the function forgotten) made a tool of the decorator
    itself, with only a warning: it is a ToolDefinitionError naming tools[1]."""

    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return key

    with pytest.raises(ToolDefinitionError, match=r"^cannot make a tool of tools\[1\]") as caught:
        _make(kind)(tools=[lookup, tool(name="x")])
    assert "decorator tool(...) returns, not applied to a function" in str(caught.value)


def test_a_tool_decorator_given_to_tool_is_refused() -> None:
    """tool(tool(name="x")) is refused too; the decorator applied still makes the tool."""
    with pytest.raises(ToolDefinitionError, match=r"not applied to a function"):
        tool(tool(name="x"))

    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return key

    assert tool(name="x")(lookup).name == "x"
    assert Agent(TestModel(), tools=[tool(name="x")(lookup)]).tools[0].name == "x"


def test_the_place_named_counts_tool_sources_too() -> None:
    """The index named is the item's place in tools=, a tool source before it included."""

    class Source:  # (a ToolSource: an MCP server is one)
        def open(self) -> None: ...

        def close(self) -> None: ...

        def tools(self) -> list[Any]:
            return []

    with pytest.raises(ToolDefinitionError, match=r"tools\[2\]"):
        Agent(TestModel(), tools=[len, Source(), None])


def test_a_wrapper_passing_its_function_through_still_takes_options() -> None:
    """A user's decorator written the usual way, fn=None and tool(fn, **options), works bare
    and with options: tool(None, name=...) stays a decorator (None in tools= is refused
    where tools= is read)."""

    def audited_tool(fn: Any = None, /, **options: Any) -> Any:
        options.setdefault("max_retries", 1)
        return tool(fn, **options)

    @audited_tool
    def bare(x: int) -> int:
        """Add one."""
        return x + 1

    @audited_tool(name="plus_one")
    def named(x: int) -> int:
        """Add one."""
        return x + 1

    assert (bare.name, named.name) == ("bare", "plus_one")


def test_an_agent_in_tools_is_told_to_use_as_tool() -> None:
    """An agent (or a workflow) in tools= says to pass its .as_tool()."""
    helper = Agent(TestModel(), name="helper")
    with pytest.raises(ToolDefinitionError, match=r"(?s)tools\[0\].*pass helper\.as_tool\(\)"):
        Agent(TestModel(), tools=[helper])
    flow = toolfold.Sequence(helper)
    with pytest.raises(ToolDefinitionError, match=r"\.as_tool\(\)"):
        Agent(TestModel(), tools=[flow])


# --- history= ----------------------------------------------------------------------


def _answered() -> tuple[Agent, toolfold.Response[Any]]:
    agent = Agent(ScriptedModel(["a", "b", "c", "d"]))
    return agent, agent.run("x")


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("response", r"got a Response: pass its messages, history=response\.messages"),
        ("state", r"got a RunState: pass its messages, history=state\.messages"),
        ("text", r"got a str: the prompt is the first argument"),
        ("dict", r"got one dict: pass a list"),
        ("number", r"got int$"),
        ("bytearray", r"got bytearray$"),
        ("memoryview", r"got memoryview$"),
        ("texts", r"got str at index 1$"),
    ],
)
@pytest.mark.parametrize("mode", ["run", "stream"])
def test_a_history_that_is_no_list_of_messages_names_history(
    given: str, says: str, mode: str
) -> None:
    """history=response / state / "hi" / {...} / 5 is a UsageError naming history=: it was
    'Value after * must be an iterable' or a message about "a prompt's list" (for a
    bytearray or memoryview too)."""
    agent, response = _answered()
    value = {
        "response": response,
        "state": response.state,
        "text": "hello",
        "dict": {"role": "user", "content": "hi"},
        "number": 5,
        "bytearray": bytearray(b"hi"),
        "memoryview": memoryview(b"hi"),
        "texts": [{"role": "user", "content": "hi"}, "hello"],
    }[given]
    go = agent.run if mode == "run" else lambda *a, **k: list(agent.stream(*a, **k))
    with pytest.raises(UsageError, match=r"^history= takes a list of messages.*" + says):
        go("y", history=value)


@pytest.mark.parametrize(
    ("history", "index"),
    [([{"role": "user"}], 0), ([Message.user("hi"), {"role": "user"}], 1)],
    ids=["first", "second"],
)
@pytest.mark.parametrize("mode", ["run", "stream"])
def test_a_history_dict_without_content_names_history_and_its_index(
    history: list[Any], index: int, mode: str
) -> None:
    """history=[{"role": "user"}] said only "a message dict needs a 'content' key", as if
    the prompt were wrong: it names history= and the dict's index."""
    agent, _ = _answered()
    go = agent.run if mode == "run" else lambda *a, **k: list(agent.stream(*a, **k))
    with pytest.raises(UsageError) as raised:
        go("y", history=history)
    assert str(raised.value) == (
        "history= takes a list of messages (Messages or {'role', 'content'} dicts): at index "
        f"{index}, a message dict needs a 'content' key (its text) and may have a 'role', "
        "got keys ['role']"
    )


def test_a_history_of_messages_or_dicts_still_runs() -> None:
    """A list of messages, of dicts, or a generator of them is a history as before."""
    agent, response = _answered()
    assert agent.run("y", history=response.messages).text == "b"
    dicts = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    second = agent.run("y", history=dicts)
    assert len(second.messages) == 4
    third = agent.run("y", history=(m for m in response.messages))
    assert len(third.messages) == 4


# --- max_steps, settings -----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("steps", ["3", None, 2.5, True, 0])
def test_max_steps_that_is_no_positive_integer_is_a_usage_error(kind: str, steps: Any) -> None:
    """max_steps="3" / None was a bare TypeError from a comparison; like 2.5, it is a
    UsageError naming max_steps."""
    with pytest.raises(UsageError, match=r"^max_steps must be an integer >= 1, got "):
        _make(kind)(max_steps=steps)


@pytest.mark.parametrize("kind", ["Agent", "evolve"])
@pytest.mark.parametrize("settings", [5, "temperature=0", ["temperature"]])
def test_settings_that_is_no_mapping_is_a_usage_error(kind: str, settings: Any) -> None:
    """settings=5 was "'int' object is not iterable" from checking its keys."""
    with pytest.raises(UsageError, match=r"settings= takes a mapping of model settings"):
        _make(kind)(settings=settings)


_KEY = "sk-proj-SECRET1234567890abcdef"


class _Config:
    """A user's object whose repr shows a key."""

    def __repr__(self) -> str:
        return f"Config(api_key={_KEY!r})"


@pytest.mark.parametrize(
    "given",
    [
        {"model": "openai:gpt-4o", "api_key": _KEY},
        ("openai:gpt-4o", {"api_key": _KEY}),
        _KEY.encode(),
        _Config(),
    ],
    ids=["dict", "tuple", "bytes", "object"],
)
def test_a_model_error_shows_the_type_not_the_value(given: Any) -> None:
    """A value given for a model may hold a key: the error names its type only."""
    with pytest.raises(
        UsageError, match=r"Model object, got (dict|tuple|bytes|_Config)\b"
    ) as caught:
        Agent(given)
    assert "SECRET" not in str(caught.value)


@pytest.mark.parametrize("kind", ["Agent", "evolve"])
@pytest.mark.parametrize("settings", [[("api_key", _KEY)], _KEY, _Config()])
def test_a_settings_error_shows_the_type_not_the_value(kind: str, settings: Any) -> None:
    """Agent() and evolve() say the same of settings= that is no mapping: its type, never
    what it holds (settings=[("api_key", ...)] printed the key)."""
    with pytest.raises(UsageError) as caught:
        _make(kind)(settings=settings)
    message = str(caught.value)
    assert "SECRET" not in message
    assert message == (
        f"{kind}(): settings= takes a mapping of model settings, e.g. "
        f"settings={{'temperature': 0}}, got {type(settings).__qualname__}"
    )


def test_evolve_takes_settings_none_as_agent_does() -> None:
    """settings=None is no settings added, in evolve() as in Agent()."""
    agent = Agent(TestModel(), settings={"temperature": 0})
    assert agent.evolve(settings=None).settings == {"temperature": 0}


def test_a_max_steps_error_shows_a_str_s_type_only() -> None:
    """max_steps= given a str (a key pasted in the wrong place) is named by type."""
    with pytest.raises(UsageError, match=r"got str$") as caught:
        Agent(TestModel(), max_steps=_KEY)  # type: ignore[arg-type]
    assert "SECRET" not in str(caught.value)


_HUGE_INT = 10**5000  # (past Python's 4,300 digits: no repr)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Agent(_HUGE_INT),
        lambda: Agent(TestModel(), settings=_HUGE_INT),
        lambda: Agent(TestModel(), max_steps=-_HUGE_INT),
        lambda: Agent(TestModel()).evolve(max_concurrency=-_HUGE_INT),
        lambda: generate_text(TestModel(), "x", max_steps=-_HUGE_INT),
    ],
    ids=["model", "settings", "max_steps", "max_concurrency", "generate_text"],
)
def test_an_int_too_long_to_print_is_named_by_its_size(make: Callable[[], Any]) -> None:
    """Agent(10**5000), settings=10**5000 or max_steps=-10**5000 raised Python's bare
    'Exceeds the limit (4300 digits)' ValueError from the error's own repr."""
    with pytest.raises(UsageError, match=r"got an int of about 5001 digits$"):
        make()


def test_value_or_type_is_the_one_http_limits_use() -> None:
    """HttpLimits shows a refused value as every argument error does (one helper)."""
    from toolfold.adapters._http import _retry
    from toolfold.runtime.core import _config, _repr

    assert _retry.value_or_type is _repr.value_or_type
    assert _retry.is_count is _config.is_count


# --- a model that is no model ------------------------------------------------------


@pytest.mark.parametrize("value", [5, None, 2.5, object(), [TestModel()]])
def test_a_value_that_is_no_model_is_refused_where_a_model_goes(value: Any) -> None:
    """Agent(5), Agent(None), generate_text(5, ...) were "'int' object has no attribute
    'name'"; toolfold.model(5) returned 5."""
    says = r"^model: expected a provider:model string or a Model object, got "
    with pytest.raises(UsageError, match=says):
        Agent(value)
    with pytest.raises(UsageError, match=says):
        generate_text(value, "x")
    with pytest.raises(UsageError, match=says):
        toolfold.model(value)


class _OnlySync:
    """A user's model serving blocking runs only: no ``request``, ``stream``, ``stream_sync``."""

    name = "mine:sync"

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        return TestModel().request_sync(request)


def test_a_user_s_model_with_a_name_and_one_request_method_still_runs() -> None:
    """A model need not have every Model method: a name and one way to ask it is enough."""
    assert Agent(_OnlySync()).run("hi").text
    assert toolfold.model(_OnlySync()).name == "mine:sync"


def test_an_object_without_a_request_method_is_told_what_it_lacks() -> None:
    """An object of a user's class with a name but no request method is told so."""

    class Named:
        name = "x:y"

    with pytest.raises(UsageError, match="it has no request method"):
        Agent(Named())


# --- output_type with no schema ----------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_an_output_type_with_no_schema_names_output_type(kind: str) -> None:
    """output_type=socket.socket said 'no JSON Schema for socket', never where it came from."""
    with pytest.raises(
        ToolDefinitionError, match=r"^cannot use socket as the output type \(output_type=\)"
    ):
        _make(kind)(output_type=socket.socket)


# --- misspelt keywords -------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_misspelt_parameter_is_refused_not_sent_to_the_provider(kind: str) -> None:
    """instruction=, on_tool_errors=, max_step= were sent as request body fields while the run
    went without them; they are refused together, each with the parameter meant."""
    with pytest.raises(UsageError) as caught:
        _make(kind)(instruction="French only.", on_tool_errors="raise", max_step=2)
    message = str(caught.value)
    assert "got instruction=, on_tool_errors=, max_step=: did you mean instructions=, " in message
    assert "on_tool_error=, max_steps=?" in message


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("system_prompt", "instructions="),
        ("result_type", "output_type="),
        ("max_turns", "max_steps="),
        ("retries", "output_retries= (a tool's retries: @tool(max_retries=...))"),
    ],
)
def test_another_library_s_parameter_is_refused_with_toolfold_s(
    kind: str, name: str, meant: str
) -> None:
    """pydantic-ai's or the Agents SDK's names (system_prompt=, result_type=, max_turns=...)
    were sent to the provider as body fields while the run went without them."""
    with pytest.raises(UsageError, match=r"got \w+=: did you mean ") as caught:
        _make(kind)(**{name: 1})
    assert f"got {name}=: did you mean {meant}?" in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "meant"),
    [
        ("Agent", "settings="),
        ("evolve", "settings="),
        ("generate_text", "the model settings as keywords: temperature=0, or **settings"),
    ],
)
def test_model_settings_is_refused_with_where_settings_go(kind: str, meant: str) -> None:
    """model_settings={...} was one body field named model_settings; generate_text takes
    its settings as keywords."""
    with pytest.raises(UsageError) as caught:
        _make(kind)(model_settings={"temperature": 0})
    assert f"got model_settings=: did you mean {meant}?" in str(caught.value)


def test_generate_text_refuses_settings_as_one_keyword() -> None:
    """generate_text(model, "x", settings={...}) sent a body field named settings; the
    settings were never applied."""
    with pytest.raises(UsageError) as caught:
        generate_text(TestModel(), "x", settings={"temperature": 0})
    assert "got settings=: did you mean the model settings as keywords: temperature=0" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("kind", "where"), [("Agent", "run(..., deps=...)"), ("generate_text", "deps=")]
)
def test_deps_type_says_deps_are_passed_per_run(kind: str, where: str) -> None:
    """deps_type= has no counterpart: deps are given with each run."""
    with pytest.raises(UsageError) as caught:
        _make(kind)(deps_type=dict)
    assert f"got deps_type=: did you mean {where} (deps are passed with each run" in str(
        caught.value
    )


def test_a_misspelt_name_still_goes_in_settings() -> None:
    """A provider field named like a parameter's typo is sent when given in settings={...}."""
    agent = Agent(TestModel(), settings={"instruction": "x"})
    assert agent.settings == {"instruction": "x"}
    assert agent.evolve(max_steps=3).settings == {"instruction": "x"}


COMMON = ["max_tokens", "temperature", "top_p", "stop", "seed", "n", "user", "metadata"]


@pytest.mark.parametrize("kind", KINDS)
def test_common_provider_settings_are_still_sent(kind: str) -> None:
    """max_tokens, temperature, top_p, stop, seed, n, user, metadata, reasoning_effort... stay
    model settings."""
    given = dict.fromkeys(COMMON, 1) | {"reasoning_effort": "low", "mode": "x"}
    made = _make(kind)(**given)
    if kind != "generate_text":
        assert set(made.settings) == set(given)


@pytest.mark.parametrize("spec", ["opneai:gpt-4o", "OpenAI:gpt-4o", "antropic:claude"])
def test_an_unknown_provider_close_to_a_known_one_is_suggested(spec: str) -> None:
    """toolfold.model('opneai:gpt-4o') names the provider meant, and still lists them all."""
    meant = "anthropic" if spec.startswith("antropic") else "openai"
    with pytest.raises(toolfold.ModelConfigError) as caught:
        toolfold.model(spec)
    assert f"(did you mean {meant!r}?); known providers: " in str(caught.value)
