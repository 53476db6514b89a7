"""Callables that are not plain functions as tools: callable objects, classes, partials.

The cases follow the peers' own suites (pydantic-ai, the OpenAI Agents SDK,
LangChain): callable instances with and without docstrings, async ``__call__``,
partials with and without ``functools.update_wrapper``, and classes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import warnings

import attrs
import pytest

from toolfold import (
    Agent,
    ArgumentValidationError,
    RunContext,
    ToolDefinitionError,
    ToolDefinitionWarning,
    UndocumentedParameterWarning,
    agenerate_text,
    tool,
)
from toolfold.testing import TestModel

CONTEXT = RunContext(run_id="r1", step=1, call_id="c1", tool_name="t")


class Multiply:
    def __init__(self, factor: int) -> None:
        self.factor = factor

    def __call__(self, x: int, offset: int = 0) -> int:
        """Multiply a number by the configured factor.

        Args:
            x: The number to multiply.
            offset: Added after multiplying.
        """
        return x * self.factor + offset


class Documented:
    """Look a word up in the dictionary.

    Args:
        language: The dictionary's language (a constructor argument).
    """

    def __init__(self, language: str) -> None:
        self.language = language

    def __call__(self, word: str) -> str:
        """Not the description: the class has a docstring.

        Args:
            word: The word to look up.
        """
        return f"{self.language}:{word}"


class AsyncSearch:
    async def __call__(self, query: str) -> str:
        """Search the web.

        Args:
            query: What to search for.
        """
        await asyncio.sleep(0)
        return f"results for {query}"


def power(base: int, exp: int) -> int:
    """Raise a number to a power.

    Args:
        base: The base.
        exp: The exponent.
    """
    return int(base**exp)


def test_callable_instance_is_named_after_its_class() -> None:
    """tool(obj) on a callable instance needs no name=: the class name, verbatim."""
    made = tool(Multiply(3))
    assert made.name == "Multiply"
    assert made.invoke({"x": 2, "offset": 1}) == 7
    assert made(2) == 6
    assert tool(name="times3")(Multiply(3)).name == "times3"


def test_call_docstring_describes_an_undocumented_class() -> None:
    """Without a class docstring, __call__'s gives the description and the parameter descriptions."""
    made = tool(Multiply(3))
    assert made.description == "Multiply a number by the configured factor."
    assert made.parameters["properties"] == {
        "x": {"type": "integer", "description": "The number to multiply."},
        "offset": {"type": "integer", "description": "Added after multiplying.", "default": 0},
    }


def test_class_docstring_describes_and_call_docstring_documents_parameters() -> None:
    """With a class docstring, it is the description; __call__'s still documents the parameters."""
    made = tool(Documented("en"))
    assert made.description == "Look a word up in the dictionary."
    assert made.parameters["properties"] == {
        "word": {"type": "string", "description": "The word to look up."}
    }
    assert made.invoke({"word": "hi"}) == "en:hi"


def test_async_call_method_makes_an_async_tool() -> None:
    """An async __call__ makes an async tool, awaited by runs like an async function."""
    made = tool(AsyncSearch())
    assert made.is_async
    assert inspect.iscoroutinefunction(made)
    assert asyncio.run(made.invoke({"query": "x"})) == "results for x"
    response = asyncio.run(agenerate_text(TestModel(), "go", tools=[made]))
    assert "AsyncSearch: results for a" in response.text


def test_callable_instance_runs_in_an_agent_without_wrapping() -> None:
    """A callable object passed straight into tools=[...] is a tool named after its class."""
    response = Agent(TestModel(), tools=[Multiply(2)]).run("go")
    assert "Multiply: 2" in response.text  # x=1 (the sample integer) times 2


def test_callable_instance_gets_the_run_context() -> None:
    """A RunContext parameter of __call__ is left out of the schema and filled at call time."""

    class WhoAmI:
        def __call__(self, ctx: RunContext[str], greeting: str) -> str:
            """Greet the user.

            Args:
                greeting: How to greet.
            """
            return f"{greeting}, {ctx.run_id}"

    made = tool(WhoAmI())
    assert list(made.parameters["properties"]) == ["greeting"]
    assert made.invoke({"greeting": "hi"}, CONTEXT) == "hi, r1"


def test_partial_needs_a_name_and_is_described_by_its_function() -> None:
    """A partial has no name of its own (ask for name=, suggesting its function's only when
    that is a valid tool name); its function's docstring describes it."""
    with pytest.raises(ToolDefinitionError) as info:
        tool(functools.partial(power, exp=2))
    assert info.value.problems == (
        "a functools.partial has no name of its own: pass name=...,"
        ' e.g. tool(name="power")(partial) for its function\'s',
    )
    lambda_power = lambda base, exp: base**exp  # noqa: E731
    lambda_power.__annotations__ = {"base": int, "exp": int}
    with pytest.raises(ToolDefinitionError) as info:  # "<lambda>" is no tool name to suggest
        tool(functools.partial(lambda_power, exp=2))
    assert info.value.problems == ("a functools.partial has no name of its own: pass name=...",)
    square = tool(name="square")(functools.partial(power, exp=2))
    assert square.description == "Raise a number to a power."
    assert square.parameters["properties"]["exp"] == {
        "type": "integer",
        "description": "The exponent.",
        "default": 2,
    }
    assert square.parameters["required"] == ["base"]
    assert square.invoke({"base": 4}) == 16


def fetch(token: str, url: str) -> str:
    """Fetch a URL.

    Args:
        token: The API token.
        url: The URL to fetch.
    """
    return url


SECRET = "sk-live-SECRET-TOKEN-123"


def test_a_parameter_a_partial_binds_by_position_may_be_documented() -> None:
    """The function's docstring documenting what a partial binds by position is no
    mismatch: no warning, and no error with require_parameter_descriptions."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made = tool(name="fetch")(functools.partial(fetch, SECRET))
        strict = tool(name="fetch", require_parameter_descriptions=True)(
            functools.partial(fetch, SECRET)
        )
    assert list(made.parameters["properties"]) == ["url"] == list(strict.parameters["properties"])
    assert made.invoke({"url": "u"}) == "u"


class Client:
    """A client holding a secret in its repr."""

    def __repr__(self) -> str:
        return f"Client({SECRET!r})"


def fetch_with(client: Client, url: str, retries: int) -> str:
    """Fetch a URL.

    Args:
        client: The client.
        url: The URL to fetch.
        retries: How often to retry.
        colour: Not a parameter.
    """
    return url


def test_messages_about_a_partial_name_its_function_never_what_it_binds() -> None:
    """Errors and warnings about a partial name functools.partial(<function>, ...), never
    its repr with the bound values (a token, a client's repr), also when the partial
    binds arguments its function does not take."""
    with pytest.warns(ToolDefinitionWarning) as caught:
        tool(name="fetch")(functools.partial(fetch_with, Client(), retries=SECRET))
    with pytest.raises(ToolDefinitionError) as info:
        tool(name="fetch")(functools.partial(fetch_with, url=SECRET, client=Client()))
    texts = [str(w.message) for w in caught] + [str(info.value)]
    bad_bindings = {
        "keywords it has no parameter for: 'tokn'": functools.partial(fetch, tokn=SECRET),
        "3 positional arguments, where it takes 2": functools.partial(fetch, SECRET, "u", "x"),
        "bound both by position and by keyword: 'token'": functools.partial(
            fetch, Client(), token=SECRET
        ),
    }
    for misfit, partial in bad_bindings.items():  # inspect's refusal quotes the partial's repr
        with pytest.raises(ToolDefinitionError) as refused:
            tool(name="fetch")(partial)
        assert refused.value.problems == (
            f"the functools.partial binds arguments fetch does not take ({misfit});"
            " bind only parameters of fetch, each once",
        )
        texts.append(str(refused.value))
    assert texts[0] == (
        "functools.partial(fetch_with, ...): the docstring documents parameter 'colour',"
        " which functools.partial(fetch_with, ...) does not have"
    )
    assert str(info.value).startswith("cannot make a tool of functools.partial(fetch_with, ...)")
    assert "parameter 'client': the value the functools.partial binds it to (a Client)" in str(
        info.value
    )
    assert not any(SECRET in text or "0x" in text for text in texts)


def test_partial_with_update_wrapper_keeps_what_it_bound() -> None:
    """update_wrapper gives a partial its function's name, but the schema is still the partial's."""
    square = functools.partial(power, exp=2)
    functools.update_wrapper(square, power)
    made = tool(square)
    assert made.name == "power"
    assert made.parameters["required"] == ["base"]
    assert made.parameters["properties"]["exp"]["default"] == 2
    assert made.invoke({"base": 3}) == 9


def test_partial_of_an_async_function_or_object_is_async() -> None:
    """A partial over an async function or an async callable object makes an async tool."""

    async def fetch(url: str, retries: int) -> str:
        """Fetch a page.

        Args:
            url: The address.
            retries: How often to retry.
        """
        return f"{url}/{retries}"

    made = tool(name="fetch")(functools.partial(fetch, retries=2))
    assert made.is_async
    assert asyncio.run(made.invoke({"url": "a"})) == "a/2"
    assert tool(name="search")(functools.partial(AsyncSearch())).is_async


def test_class_as_tool_takes_its_constructor_parameters() -> None:
    """A class is a tool that builds an instance: __init__'s parameters, the class docstring."""

    class Reminder:
        """Create a reminder.

        Args:
            text: What to remind of.
            minutes: In how many minutes.
        """

        def __init__(self, text: str, minutes: int = 5) -> None:
            self.text, self.minutes = text, minutes

    made = tool(Reminder)
    assert (made.name, made.description) == ("Reminder", "Create a reminder.")
    assert made.parameters["properties"] == {
        "text": {"type": "string", "description": "What to remind of."},
        "minutes": {"type": "integer", "description": "In how many minutes.", "default": 5},
    }
    built = made.invoke({"text": "tea"})
    assert (built.text, built.minutes) == ("tea", 5)


def test_dataclass_as_tool_takes_its_fields() -> None:
    """A dataclass is a tool whose parameters are its fields."""

    @dataclasses.dataclass
    class Point:
        """A point on the plane.

        Attributes:
            x: Horizontal.
            y: Vertical.
        """

        x: int
        y: int = 0

    made = tool(Point)
    assert made.name == "Point"
    assert made.parameters["required"] == ["x"]
    assert made.invoke({"x": 1}) == Point(1, 0)


@attrs.define
class Basket:
    """A basket.

    Attributes:
        items: What is in it.
    """

    items: list[str] = attrs.Factory(list)
    _owner: str = attrs.field(factory=str, metadata={"description": "Whose it is."})
    size: int = 3


@dataclasses.dataclass
class Crate:
    """A crate.

    Attributes:
        items: What is in it.
    """

    items: list[str] = dataclasses.field(default_factory=list)
    label: str = dataclasses.field(default="", metadata={"description": "Its label."})


@pytest.mark.parametrize("cls", [Basket, Crate])
def test_a_class_tools_fields_read_as_a_nested_class_fields_do(cls: type) -> None:
    """A default factory makes a field optional with no default (not attrs.NOTHING's 1, not a
    refused <factory>); the Attributes section and metadata describe the fields."""
    made = tool(cls)
    properties = made.parameters["properties"]
    assert "required" not in made.parameters
    assert properties["items"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "What is in it.",
    }
    if cls is Basket:
        assert properties["owner"] == {"type": "string", "description": "Whose it is."}
        assert properties["size"] == {"type": "integer", "default": 3}
        assert made.invoke(made.validate_arguments({"owner": "ann"})) == Basket([], "ann")
    else:
        assert properties["label"] == {"type": "string", "description": "Its label.", "default": ""}
        assert made.invoke(made.validate_arguments({"items": ["a"]})) == Crate(["a"])


@dataclasses.dataclass
class _OwnInit:
    width: float = 1.0
    height: float = dataclasses.field(default_factory=lambda: 2.0)

    def __init__(self, width: float, height: float) -> None:
        self.width, self.height = width, height


@dataclasses.dataclass
class _Base:
    a: int


class _PlainSub(_Base):
    def __init__(self, a: int = 5, b: str = "x") -> None:
        self.a, self.b = a, b


def test_a_class_tool_with_its_own_init_is_read_from_that_init() -> None:
    """The fields only fill in what a generated __init__ shows as a placeholder: a class's
    own __init__ (or a plain subclass's) says what is required and what defaults run."""
    with pytest.warns(UndocumentedParameterWarning):
        own = tool(_OwnInit)
    assert own.parameters["required"] == ["width", "height"]
    assert "default" not in own.parameters["properties"]["width"]
    with pytest.raises(ArgumentValidationError, match="'height' is a required property"):
        own.validate_arguments({"width": 3})
    with pytest.warns(UndocumentedParameterWarning):
        sub = tool(_PlainSub)
    assert "required" not in sub.parameters
    made = sub.invoke(sub.validate_arguments({}))
    assert (made.a, made.b) == (5, "x")


def test_uncallable_object_is_refused() -> None:
    """An object without __call__ is not a tool, and the error says so."""
    with pytest.raises(ToolDefinitionError, match="@tool needs a function"):
        tool(object())


def test_a_named_tuple_default_is_an_object_as_its_schema() -> None:
    """A NamedTuple parameter's default is written as the object its schema describes."""
    from typing import NamedTuple

    class Point(NamedTuple):
        x: int
        y: int

    @tool
    def move(to: Point = Point(1, 2)) -> str:  # noqa: B008 (an immutable default)
        """Move.

        Args:
            to: Where to.
        """
        return f"{to.x},{to.y}"

    schema = move.parameters["properties"]["to"]
    assert schema["default"] == {"x": 1, "y": 2}
    import jsonschema

    jsonschema.validate(schema["default"], schema)
    assert move.invoke(move.validate_arguments({})) == "1,2"

    @tool
    def jump(to: tuple[int, int] = Point(3, 4)) -> str:
        """Jump.

        Args:
            to: Where to.
        """
        return f"{to[0]},{to[1]}"

    array = jump.parameters["properties"]["to"]
    assert array["default"] == [3, 4]  # the schema wants an array: the tuple's items
    jsonschema.validate(array["default"], array)
