"""`@tool` and `Tool`: callability, methods, context injection, options and explicit schemas."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import functools
from collections.abc import Callable
from typing import Any

import pytest

from toolfold import RunContext, Tool, ToolArgumentError, ToolDefinitionError, tool
from toolfold.toolkit import check_tool_names

CONTEXT = RunContext(run_id="r1", step=1, call_id="c1", tool_name="t")


def test_bare_tool_is_still_the_function() -> None:
    """A decorated function keeps its behaviour, name and docstring."""

    @tool
    def add(a: int, b: int = 2) -> int:
        """Add two numbers."""
        return a + b

    assert isinstance(add, Tool)
    assert add(1) == 3
    assert add(1, b=5) == 6
    assert (add.name, add.description, add.__name__, add.__doc__) == (
        "add",
        "Add two numbers.",
        "add",
        "Add two numbers.",
    )
    assert add.function is add.__wrapped__
    assert add.parameters == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 2}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert not add.is_async


def test_options_are_kept() -> None:
    """Every decorator option ends up on the tool."""

    def approve(call: Any, state: Any) -> bool:
        return True

    @tool(
        name="sum_up",
        description="Sums.",
        strict=True,
        requires_approval=approve,
        timeout=2.5,
        max_retries=0,
    )
    def add(a: int) -> int:
        return a

    assert (add.name, add.description, add.strict, add.requires_approval) == (
        "sum_up",
        "Sums.",
        True,
        approve,
    )
    assert (add.timeout, add.max_retries) == (2.5, 0)


def test_async_tool_is_awaitable() -> None:
    """An async function gives an async tool whose call and invoke return coroutines."""

    @tool
    async def fetch(url: str) -> str:
        return url.upper()

    assert fetch.is_async
    assert asyncio.run(fetch("a")) == "A"
    assert asyncio.run(fetch.invoke({"url": "b"})) == "B"


def test_run_context_is_injected_not_exposed() -> None:
    """A RunContext parameter is left out of the schema and filled by invoke."""

    @tool
    def whoami(ctx: RunContext[Any], prefix: str) -> str:
        return f"{prefix}{ctx.run_id}"

    assert whoami.parameters["properties"] == {"prefix": {"type": "string"}}
    assert whoami.parameters["required"] == ["prefix"]
    assert whoami.invoke({"prefix": "run "}, CONTEXT) == "run r1"


def test_optional_run_context_is_injected_too() -> None:
    """RunContext | None (so the function can be called without a run) is injected as well."""

    @tool
    def step(query: str, ctx: RunContext[Any] | None = None) -> str:
        return f"{query}@{ctx.step if ctx else 0}"

    assert step.parameters["properties"] == {"query": {"type": "string"}}
    assert step("q") == "q@0"
    assert step.invoke({"query": "q"}, CONTEXT) == "q@1"


def test_two_run_context_parameters_are_refused_at_decoration() -> None:
    """A tool with two RunContext parameters is a ToolDefinitionError naming both, not a failing call."""

    def both(first: RunContext[Any], query: str, second: RunContext[Any] | None = None) -> str:
        """Both."""
        return query

    with pytest.raises(ToolDefinitionError, match=r"tool of \S*both: 1 problem") as raised:
        tool(both)
    assert "parameters 'first' and 'second' both take the RunContext" in str(raised.value)


def test_positional_only_parameters_are_passed_positionally() -> None:
    """invoke passes positional-only parameters by position."""

    @tool
    def power(base: int, /, exp: int = 2) -> int:
        return int(base**exp)

    assert power.invoke({"base": 3}) == 9
    assert power.invoke({"base": 2, "exp": 3}) == 8


@tool
def scale(value: float = 1.0, factor: float = 2.0, /) -> str:
    """Scale a value.

    Args:
        value: The value.
        factor: The factor.
    """
    return f"value={value} factor={factor}"


@tool
async def ascale(value: float = 1.0, factor: float = 2.0, /, *, unit: str = "") -> str:
    """Scale a value.

    Args:
        value: The value.
        factor: The factor.
        unit: The unit.
    """
    return f"value={value} factor={factor}{unit}"


def test_a_left_out_positional_only_parameter_before_a_given_one_takes_its_default() -> None:
    """{"factor": 10} reaches factor, value keeps its default: nothing shifts left."""
    assert scale.invoke(scale.validate_arguments('{"factor": 10}')) == "value=1.0 factor=10.0"
    assert scale.invoke(scale.validate_arguments('{"value": 3}')) == "value=3.0 factor=2.0"
    assert scale.invoke(scale.validate_arguments("{}")) == "value=1.0 factor=2.0"
    arguments = ascale.validate_arguments({"factor": 10, "unit": "m"})
    assert asyncio.run(ascale.invoke(arguments)) == "value=1.0 factor=10.0m"


def test_a_left_out_positional_only_parameter_in_an_agent_run() -> None:
    """Through a run: the model's {"factor": 10} is the factor, for a sync and an async tool."""
    from toolfold import Agent
    from toolfold.testing import ScriptedModel

    call = ScriptedModel.call
    model = ScriptedModel([[call("scale", {"factor": 10}), call("ascale", {"factor": 4})], "done"])
    response = Agent(model=model, tools=[scale, ascale]).run("go")
    results = [r.content for r in response.steps[0].tool_results]
    assert results == ["value=1.0 factor=10.0", "value=1.0 factor=4.0"]


def test_a_positional_only_run_context_is_passed_by_position() -> None:
    """def f(ctx: RunContext, /, x: int): the context goes in by position, not as ctx=..."""

    @tool
    def where(ctx: RunContext[Any], /, x: int) -> str:
        return f"{ctx.call_id}:{x}"

    @tool
    def later(n: int = 1, ctx: RunContext[Any] | None = None, /) -> str:
        return f"{n}@{ctx.step if ctx else 0}"

    assert where.parameters["properties"] == {"x": {"type": "integer"}}
    assert where.invoke(where.validate_arguments({"x": 2}), CONTEXT) == "c1:2"
    assert later.invoke(later.validate_arguments({}), CONTEXT) == "1@1"
    assert later.invoke(later.validate_arguments({"n": 5}), CONTEXT) == "5@1"


class Shop:
    """A shop whose methods are tools."""

    def __init__(self, city: str) -> None:
        self.city = city

    @tool
    def search(self, query: str) -> str:
        """Search this shop."""
        return f"{self.city}:{query}"

    @tool
    async def stock(self, sku: str) -> int:
        return len(sku)

    @tool
    @staticmethod
    def currency(amount: float) -> str:
        return f"{amount:.2f} EUR"

    @tool
    @classmethod
    def kind(cls, upper: bool = False) -> str:
        return cls.__name__.upper() if upper else cls.__name__


def test_method_tool_binds_to_the_instance() -> None:
    """obj.method is a tool bound to obj, with no self in its schema, cached per instance."""
    paris, rome = Shop("paris"), Shop("rome")
    assert paris.search.parameters == {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    }
    assert paris.search("shoes") == "paris:shoes"
    assert paris.search.invoke({"query": "hats"}) == "paris:hats"
    assert rome.search.invoke({"query": "hats"}) == "rome:hats"
    assert paris.search is paris.search
    assert isinstance(Shop.search, Tool)
    assert Shop.search(paris, "x") == "paris:x"
    assert asyncio.run(rome.stock.invoke({"sku": "abc"})) == 3
    assert rome.stock.is_async


def test_a_method_tool_reached_through_super_leaves_the_override_in_place() -> None:
    """A base's method tool called through super() is not cached as the object's tool:
    the subclass's override stays what the object's attribute finds (the second call
    reached the base's tool alone), and the tool that is the object's attribute still is."""

    class Base:
        @tool
        def search(self, query: str) -> str:
            """Base's search."""
            return "base:" + query

    class Refined(Base):
        @tool
        def search(self, query: str) -> str:
            """Refined's search."""
            return "refined+" + super().search(query)

    class Plain(Base):
        pass

    refined = Refined()
    assert refined.search("x") == "refined+base:x"
    assert refined.search("y") == "refined+base:y"
    assert refined.search is refined.search  # (its own tool, cached)
    plain = Plain()
    assert plain.search is plain.search  # (the base's tool is its own: cached)
    assert plain.search("z") == "base:z"


def test_static_and_class_method_tools() -> None:
    """staticmethod and classmethod under @tool work from the class and from instances."""
    shop = Shop("oslo")
    assert Shop.currency(2) == "2.00 EUR"
    assert shop.currency.invoke({"amount": 1.5}) == "1.50 EUR"
    assert Shop.currency.parameters["required"] == ["amount"]
    assert Shop.kind() == "Shop"
    assert shop.kind.invoke({"upper": True}) == "SHOP"
    assert Shop.kind.parameters["properties"] == {"upper": {"type": "boolean", "default": False}}


class Branch:
    """A class whose tools' return annotations name the class itself (a string here)."""

    def __init__(self, city: str) -> None:
        self.city = city

    @tool
    def moved(self, city: str) -> Branch:
        return Branch(city)

    @tool
    @staticmethod
    def opened(city: str) -> Branch:
        return Branch(city)


def test_a_method_tool_may_return_its_own_class() -> None:
    """A return annotation naming the class being defined makes no problem: it is not read."""
    assert Branch("oslo").moved("rome").city == "rome"
    assert Branch.opened.parameters["required"] == ["city"]
    assert Branch.opened.invoke({"city": "oslo"}).city == "oslo"


def test_a_parameter_naming_the_class_being_defined_says_so() -> None:
    """The error says the name is the class being defined, not a missing import."""
    with pytest.raises(ToolDefinitionError) as caught:

        class Depot:
            @tool
            def merge(self, other: Depot) -> str:
                return ""

    message = str(caught.value)
    assert "name 'Depot' is not defined yet: it is the class being defined" in message
    assert "import the names" not in message


class Namespace:
    """A class used only to group functions."""

    @tool
    def lookup(query: str) -> str:  # type: ignore[misc]  # not a method on purpose
        return query.upper()


def test_function_in_a_namespace_class_keeps_its_first_parameter() -> None:
    """An annotated first parameter not named self is a parameter, not a receiver."""
    assert Namespace.lookup.parameters["required"] == ["query"]
    assert Namespace.lookup.invoke({"query": "a"}) == "A"


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


@dataclasses.dataclass
class Task:
    title: str
    due: datetime.date


def test_arguments_are_validated_and_structured() -> None:
    """validate_arguments turns model JSON into the declared types for invoke."""

    @tool
    def plan(task: Task, priority: Priority = Priority.LOW) -> str:
        return f"{task.title} {task.due.isoformat()} {priority.value}"

    arguments = plan.validate_arguments(
        '{"task": {"title": "ship", "due": "2025-01-31"}, "priority": "high"}'
    )
    assert arguments == {
        "task": Task("ship", datetime.date(2025, 1, 31)),
        "priority": Priority.HIGH,
    }
    assert plan.invoke(arguments) == "ship 2025-01-31 high"
    with pytest.raises(ToolArgumentError):
        plan.validate_arguments('{"task": {"title": "ship"}}')


def test_explicit_schema_tool_receives_one_dict() -> None:
    """A Tool built with a JSON Schema validates against it and passes the dict."""
    schema = {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "required": ["x"],
    }
    double = Tool(
        name="double", description="Double x.", parameters=schema, function=lambda a: a["x"] * 2
    )
    assert double.parameters == schema
    assert double.invoke(double.validate_arguments('{"x": 4}')) == 8
    assert double({"x": 1}) == 2
    with pytest.raises(ToolArgumentError):
        double.validate_arguments('{"x": "four"}')


def test_schema_only_tool_has_no_function() -> None:
    """A Tool without a function describes calls that are handed back to the caller."""
    lookup = Tool(name="lookup", description="Look up.")
    assert lookup.function is None
    assert lookup.parameters == {"type": "object", "properties": {}, "additionalProperties": False}
    with pytest.raises(TypeError, match="tool 'lookup' has no function to call"):
        lookup()


def test_invalid_explicit_schema_names_the_tool() -> None:
    """A schema that breaks the JSON Schema meta-schema is refused with the tool's name."""
    with pytest.raises(ToolDefinitionError) as info:
        Tool(
            name="broken",
            parameters={"type": "object", "properties": {"a": {"type": "integr"}}},
        )
    assert str(info.value) == (
        "cannot make a tool of 'broken': 1 problem\n"
        "  - parameters is not a valid JSON Schema: 'integr' is not valid under any of the"
        " given schemas (at ['properties']['a']['type'])"
    )


def test_explicit_schema_must_be_an_object() -> None:
    """A non-object root schema is refused, whatever else is wrong, all at once."""
    with pytest.raises(ToolDefinitionError) as info:
        Tool(name="auto", parameters={"type": "string"}, timeout=0, max_retries=-1)
    assert info.value.problems == (
        "tool name 'auto' is reserved (a tool_choice value); pass another name=...",
        "timeout must be a positive number of seconds or None, not 0",
        "max_retries must be an int >= 0, not -1",
        "parameters must be an object schema ({'type': 'object', 'properties': {...}}),"
        " not type 'string'",
    )


def test_replace_changes_options() -> None:
    """replace() gives a copy with new options, validated like the originals."""

    @tool
    def add(a: int) -> int:
        return a

    renamed = add.replace(name="plus", timeout=1.0)
    assert (renamed.name, renamed.timeout, add.name, add.timeout) == ("plus", 1.0, "add", None)
    assert renamed.invoke(renamed.validate_arguments({"a": 2})) == 2
    with pytest.raises(ToolDefinitionError):
        add.replace(name="has space")


def test_check_tool_names_refuses_duplicates() -> None:
    """Gathering tools with the same name is an error naming the name and the functions."""

    @tool
    def ping() -> str:
        return "a"

    other = Tool(name="ping")
    assert check_tool_names([ping]) == {"ping": ping}
    with pytest.raises(ToolDefinitionError) as info:
        check_tool_names([ping, other])
    (problem,) = info.value.problems
    assert problem.startswith("tool name 'ping' is used by 2 tools (made from ")
    assert problem.endswith(
        "test_check_tool_names_refuses_duplicates.<locals>.ping, a schema-only tool);"
        " give each a distinct name=..."
    )
    assert str(info.value).startswith("duplicate tool names: every tool of a list needs its own")
    with pytest.raises(ToolDefinitionError, match=r"the same tool, made from .*ping, is listed 2"):
        check_tool_names([ping, ping])


def _lambda_tool(reply: str) -> Tool[..., Any]:
    return Tool(name="a", function=lambda args: reply)


def _closure(reply: str) -> Callable[[], str]:
    def answer() -> str:
        return reply

    return answer


def _fetch(token: str, url: str) -> str:
    """Fetch a URL.

    Args:
        token: The API token.
        url: The URL to fetch.
    """
    return url


class _Client:
    """A client."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __call__(self, url: str) -> str:
        """Fetch a URL.

        Args:
            url: The URL to fetch.
        """
        return url

    def search(self, query: str) -> str:
        """Search.

        Args:
            query: What to look for.
        """
        return query


def test_duplicate_names_tell_different_functions_from_the_same_one_listed_again() -> None:
    """Distinct functions that share a qualname are called different, with where they
    were defined (closures of one definition said to be one, in a mixed list too);
    partials of one function, instances of one class and one method bound to several
    objects are said to be that; only the very same tool or function is listed again."""
    line = _lambda_tool.__code__.co_firstlineno + 1
    inner = _closure.__code__.co_firstlineno + 1
    module = __name__
    cases = [
        (
            [_lambda_tool("one"), _lambda_tool("two")],
            f"2 different functions named {module}:_lambda_tool.<locals>.<lambda>,"
            f" made by one definition, at test_tool.py:{line}, run 2 times",
        ),
        (
            [tool(name="a")(_closure("x")), tool(name="a")(_closure("y")), Tool(name="a")],
            f"made from 2 different functions named {module}:_closure.<locals>.answer,"
            f" made by one definition, at test_tool.py:{inner}, run 2 times; a schema-only tool",
        ),
        ([Tool(name="a"), Tool(name="a")], "2 schema-only tools"),
        (
            [tool(name="a")(functools.partial(_fetch, "k1")), tool(name="a")(_fetch)],
            f"made from {module}:functools.partial(_fetch, ...), {module}:_fetch",
        ),
        (
            [tool(name="a")(functools.partial(_fetch, k)) for k in ("k1", "k2")],
            f"2 partials of {module}:_fetch",
        ),
        ([tool(name="a")(_Client(k)) for k in ("k1", "k2")], f"2 instances of {module}:_Client"),
        (
            [tool(name="a")(_Client(k).search) for k in ("k1", "k2")],
            f"{module}:_Client.search bound to 2 objects",
        ),
    ]
    for tools, where in cases:
        with pytest.raises(ToolDefinitionError) as info:
            check_tool_names(tools)
        assert info.value.problems == (
            f"tool name 'a' is used by {len(tools)} tools ({where}); give each a distinct name=...",
        )
    answer = _closure("z")
    with pytest.raises(ToolDefinitionError) as info:
        check_tool_names([tool(name="a")(answer), tool(name="a")(answer)])
    assert f"(2 tools made from the same function {module}:_closure" in info.value.problems[0]


def test_check_tool_names_names_the_owner_of_the_tools() -> None:
    """Given whose tools they are, the duplicate-name error says so, with the same problems."""
    ping, other = Tool(name="ping"), Tool(name="ping")
    with pytest.raises(ToolDefinitionError) as info:
        check_tool_names([ping, other], owner="agent 'billing'")
    assert info.value.qualname == "the tools of agent 'billing'"
    assert str(info.value).startswith(
        "duplicate tool names in the tools of agent 'billing': every tool of a list needs its own"
    )
    (problem,) = info.value.problems
    assert problem.startswith("tool name 'ping' is used by 2 tools (")


def test_runtime_gathering_refuses_duplicate_names() -> None:
    """Agent and generate_text refuse two tools with one name with a ToolDefinitionError."""
    from toolfold import Agent, generate_text
    from toolfold.testing import TestModel

    @tool
    def search(q: str) -> str:
        """Search.

        Args:
            q: The query.
        """
        return q

    def other(q: str) -> str:
        """Search elsewhere.

        Args:
            q: The query.
        """
        return q

    renamed = tool(name="search")(other)
    with pytest.raises(ToolDefinitionError, match="tool name 'search' is used by 2 tools"):
        Agent(TestModel(), tools=[search, renamed])
    with pytest.raises(ToolDefinitionError, match="tool name 'search' is used by 2 tools"):
        generate_text(TestModel(), "hi", tools=[search, renamed])


def test_bound_methods_partials_and_callable_objects() -> None:
    """Already-bound methods, functools.partial and callable objects become tools too."""

    class Scaler:
        def __init__(self, factor: int) -> None:
            self.factor = factor

        def scale(self, x: int) -> int:
            return x * self.factor

        def __call__(self, x: int, y: int = 0) -> int:
            return x + y

    bound = tool(Scaler(3).scale)
    assert bound.parameters["properties"] == {"x": {"type": "integer"}}
    assert bound.invoke({"x": 2}) == 6

    def power(base: int, exp: int) -> int:
        return int(base**exp)

    square = tool(name="square")(functools.partial(power, exp=2))
    assert square.parameters["required"] == ["base"]
    assert square.invoke({"base": 4}) == 16

    adder = tool(name="adder")(Scaler(1))
    assert adder.parameters["properties"] == {
        "x": {"type": "integer"},
        "y": {"type": "integer", "default": 0},
    }
    assert adder.invoke({"x": 1, "y": 2}) == 3


def test_wrapped_functions_keep_their_signature() -> None:
    """A functools.wraps decorator under @tool exposes the wrapped signature."""

    def logged(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        return wrapper

    @tool
    @logged
    def greet(name: str) -> str:
        return f"hi {name}"

    assert greet.parameters["properties"] == {"name": {"type": "string"}}
    assert greet.invoke({"name": "Ada"}) == "hi Ada"


def test_async_tool_is_a_coroutine_function() -> None:
    """inspect and asyncio see a tool of an async function (and its bound methods) as async."""
    import asyncio
    import inspect

    @tool
    async def fetch(x: int) -> int:
        """Fetch.

        Args:
            x: The key.
        """
        return x

    class Store:
        @tool
        async def get(self, x: int) -> int:
            """Get.

            Args:
                x: The key.
            """
            return x

    assert inspect.iscoroutinefunction(fetch)
    assert asyncio.iscoroutinefunction(fetch)
    assert inspect.iscoroutinefunction(Store().get)
    assert asyncio.run(fetch(2)) == 2

    @tool
    def plain(x: int) -> int:
        """Plain.

        Args:
            x: The key.
        """
        return x

    assert not inspect.iscoroutinefunction(plain)


def test_classmethod_above_tool_gives_a_tool_bound_to_the_class() -> None:
    """@classmethod over @tool: the attribute (a Tool, or a method of it on 3.13) becomes the class's tool."""

    class Shop:
        @classmethod
        @tool
        def find(cls, q: str) -> str:
            """Find.

            Args:
                q: The query.
            """
            return cls.__name__ + q

    found = Shop.find
    made = found if isinstance(found, Tool) else tool(found)
    assert isinstance(made, Tool)
    assert made.name == "find"
    assert made.parameters["properties"] == {"q": {"type": "string", "description": "The query."}}
    assert made.invoke(made.validate_arguments({"q": "1"})) == "Shop1"
    assert Shop.find("2") == "Shop2"
    if not isinstance(found, Tool):  # Python 3.13+: options apply while rebinding
        assert tool(name="lookup")(found).name == "lookup"
        rebound = tool(timeout=5, max_retries=1, blocking=True, requires_approval=True)(found)
        assert (rebound.timeout, rebound.max_retries, rebound.requires_approval) == (5, 1, True)
        assert tool(blocking=False)(found).blocking is False


def test_a_method_tool_taken_from_its_class_is_refused_when_tools_are_gathered() -> None:
    """`Shop.search` has no shop to bind: refused naming the method, not failing every call."""
    with pytest.raises(ToolDefinitionError, match=r"the method Shop\.search taken from its class"):
        check_tool_names([Shop.search])
    with pytest.raises(ToolDefinitionError, match="from an instance"):
        check_tool_names([Shop.search.replace(name="find")])
    bound = check_tool_names([Shop("Oslo").search, Shop.currency])
    assert bound["search"].invoke({"query": "q"}) == "Oslo:q"


def test_invoke_without_a_context_for_a_tool_that_takes_one_names_the_parameter() -> None:
    """``invoke`` with no context, for a tool whose RunContext parameter has no default, is a TypeError.

    Before, None reached the function, which failed inside with
    ``'NoneType' object has no attribute 'deps'``.
    """

    @tool
    def whoami(ctx: RunContext[str], greeting: str) -> str:
        """Greet.

        Args:
            greeting: The greeting.
        """
        return f"{greeting}, {ctx.deps}"

    with pytest.raises(TypeError) as caught:
        whoami.invoke({"greeting": "hi"})
    assert str(caught.value) == (
        "tool 'whoami' takes a RunContext (parameter 'ctx'): pass context=RunContext(...) "
        "to invoke()"
    )
    context = RunContext(run_id="r", step=1, call_id="c", tool_name="whoami", deps="bob")
    assert whoami.invoke({"greeting": "hi"}, context) == "hi, bob"


def test_invoke_without_a_context_passes_none_where_the_parameter_defaults_to_it() -> None:
    """A RunContext parameter with a default (``ctx: RunContext | None = None``) takes None."""

    @tool
    def maybe(q: str, ctx: RunContext[Any] | None = None) -> str:
        """Maybe use the context.

        Args:
            q: The query.
        """
        return f"{q} {ctx is None}"

    assert maybe.invoke({"q": "x"}) == "x True"
