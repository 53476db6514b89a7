"""The testing models and override_models refuse what they cannot use, by name, when given it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from toolfold import Agent, Message, ModelResponse, Usage, UsageError, generate_text, tool
from toolfold.runtime import StreamEvent, StreamFinish, TextDelta, ToolCallPart, UsageUpdate
from toolfold.testing import FunctionModel, ScriptedModel, TestModel, override_models


@tool
def get_weather(city: str) -> str:
    """The weather.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


@tool
def get_weather_forecast(city: str) -> str:
    """The forecast.

    Args:
        city: The city.
    """
    return f"rain in {city}"


TOOLS = [get_weather, get_weather_forecast]


def _called(model: TestModel) -> list[str]:
    response = Agent(model, tools=TOOLS).run("go")
    return [call.name for call in response.steps[0].tool_calls]


# call_tools


def test_call_tools_given_one_name_calls_that_tool_only() -> None:
    """call_tools="get_weather_forecast" is one name, not a substring test (get_weather too)."""
    assert _called(TestModel(call_tools="get_weather_forecast")) == ["get_weather_forecast"]
    assert _called(TestModel(call_tools="get_weather")) == ["get_weather"]
    assert _called(TestModel(call_tools=("get_weather", "get_weather_forecast"))) == [
        "get_weather",
        "get_weather_forecast",
    ]


def test_call_tools_naming_no_tool_of_the_request_is_refused() -> None:
    """A typo in call_tools is a UsageError naming it and the tools there are, not a silent no-call."""
    with pytest.raises(UsageError) as raised:
        Agent(TestModel(call_tools=["get_weather", "get_wether"]), tools=TOOLS).run("go")
    message = str(raised.value)
    assert "names 'get_wether', no tool of this request" in message
    assert "(its tools: 'get_weather', 'get_weather_forecast')" in message


@pytest.mark.parametrize("value", [None, 5, b"get_weather", {"get_weather": 1}, ["ok", 3], [""]])
def test_call_tools_of_the_wrong_type_is_refused_when_the_model_is_made(value: Any) -> None:
    """call_tools=None (or a number, bytes, a dict, a list with a non-name) fails at TestModel()."""
    with pytest.raises(UsageError, match=r"^TestModel\(call_tools=\.\.\.\): "):
        TestModel(call_tools=value)


# override_models


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "got NoneType None"),
        ("test", "got str 'test'"),
        (5, "got int 5"),
        (TestModel, "got the class TestModel; pass an instance (TestModel(...))"),
    ],
)
def test_override_models_refuses_what_is_no_model_nor_function(value: Any, shown: str) -> None:
    """override_models(None / "test" / TestModel) is a UsageError when the block starts."""
    refused = pytest.raises(UsageError, match=r"^override_models\(model\): expected a model")
    with refused as raised, override_models(value):
        pass
    assert shown in str(raised.value)


def test_override_models_function_returning_no_model_is_named() -> None:
    """A function returning None for a string is a UsageError naming the string."""
    scripts = {"openai:other": TestModel()}
    with override_models(lambda name: scripts.get(name)), pytest.raises(UsageError) as raised:  # type: ignore[arg-type,return-value]
        generate_text("openai:gpt-4o-mini", "hi")
    assert str(raised.value).startswith(
        "override_models's function returned NoneType None for 'openai:gpt-4o-mini'"
    )


# requests counted


def test_a_scripted_usage_with_tokens_only_counts_one_request() -> None:
    """ModelResponse(usage=Usage(input_tokens=7, output_tokens=3)) counts a request per answer."""
    reply = ModelResponse(Message.assistant("hi"), usage=Usage(input_tokens=7, output_tokens=3))
    scripted = Agent(ScriptedModel([reply, reply])).run("go")
    assert scripted.state.usage == Usage(input_tokens=7, output_tokens=3, requests=1)
    function = Agent(FunctionModel(lambda request: reply)).run("go")
    assert function.usage.requests == 1
    explicit = ModelResponse(Message.assistant("hi"), usage=Usage(input_tokens=7, requests=2))
    assert Agent(ScriptedModel([explicit])).run("go").usage.requests == 2  # as given


def test_a_stream_functions_usage_with_tokens_only_counts_one_request() -> None:
    """A UsageUpdate without requests from stream_function counts one, blocking and async."""

    def events(request: Any) -> list[StreamEvent]:
        return [
            TextDelta("hi"),
            UsageUpdate(Usage(input_tokens=7, output_tokens=3)),
            StreamFinish("stop"),
        ]

    agent = Agent(FunctionModel(lambda request: "unused", stream_function=events))
    stream = agent.stream("go")
    list(stream)
    assert stream.response.usage == Usage(input_tokens=7, output_tokens=3, requests=1)

    async def main() -> Usage:
        live = agent.stream("go")
        async for _ in live:
            pass
        return live.response.usage

    assert asyncio.run(main()).requests == 1


# ScriptedModel.call and script entries


def test_call_with_arguments_that_are_not_json_is_a_usage_error() -> None:
    """call("f", {"a": object()}) is a UsageError, as a set is, not json's bare TypeError."""
    with pytest.raises(UsageError, match=r"^call\('f', \.\.\.\): arguments\['a'\]: object"):
        ScriptedModel.call("f", {"a": object()})
    with pytest.raises(UsageError, match=r"^call\('f', \.\.\.\): arguments: .*tuple"):
        ScriptedModel.call("f", {(1, 2): "tuple key"})


def test_a_call_whose_name_is_no_str_is_refused_when_the_script_is_made() -> None:
    """call(5, {}) is refused at once; a hand-made ToolCallPart named 5 names its script entry."""
    with pytest.raises(UsageError, match=r"a tool's name is a str, got int 5"):
        ScriptedModel.call(5, {})  # type: ignore[arg-type]
    part = ToolCallPart("", 5, "{}", {})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"^ScriptedModel script entry 1 is no reply: .*int 5"):
        ScriptedModel(["first", part])
    with pytest.raises(UsageError, match=r"^ScriptedModel script entry 0 is no reply: item 1 "):
        ScriptedModel([["text", part]])


# FunctionModel


@pytest.mark.parametrize("value", ["x", None, 5])
def test_function_model_refuses_what_is_no_function(value: Any) -> None:
    """FunctionModel("x") is a UsageError when made, not a RunError at the first request."""
    with pytest.raises(UsageError, match=r"^FunctionModel\(\.\.\.\): expected a function"):
        FunctionModel(value)
    with pytest.raises(UsageError, match=r"^FunctionModel\(stream_function=\.\.\.\): expected"):
        FunctionModel(lambda request: "x", stream_function=value or "x")


def test_an_async_stream_function_is_refused_when_the_model_is_made() -> None:
    """An async generator (or coroutine function) as stream_function is refused by name."""

    async def events(request: Any) -> AsyncIterator[StreamEvent]:
        yield TextDelta("a")

    async def coroutine(request: Any) -> list[StreamEvent]:
        return [TextDelta("a")]

    for function in (events, coroutine):
        with pytest.raises(UsageError, match=r"stream_function=\.\.\.\): .* is async"):
            FunctionModel(lambda request: "x", stream_function=function)  # type: ignore[arg-type]


def test_a_stream_function_returning_none_is_a_usage_error() -> None:
    """A stream_function that returns None fails the stream with a UsageError saying so."""

    def events(request: Any) -> Iterator[StreamEvent]:
        return None  # type: ignore[return-value]

    stream = Agent(FunctionModel(lambda request: "x", stream_function=events)).stream("go")
    with pytest.raises(UsageError, match=r"stream_function returned NoneType None"):
        list(stream)
