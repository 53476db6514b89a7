"""A typed user's program passes ``mypy --strict`` against toolfold, as the docs write it."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from toolfold import Agent, Response, RunStream
from toolfold.testing import TestModel

ROOT = Path(__file__).resolve().parents[1]

# What the docs show, written as a user running mypy --strict would: errors that
# carry a run's state, a model built from a string, a tool without a function, a
# RunContext made by hand, approval predicates, narrowing what a union returns.
# assert_type pins the types, so a regression to Any fails too.
PROGRAM = '''
from __future__ import annotations

from collections.abc import Mapping, Sequence as Seq
from typing import Any

from typing_extensions import assert_type

import toolfold
from toolfold import (
    Agent,
    ConnectedModel,
    Message,
    ModelRequest,
    ProviderError,
    RateLimitError,
    Response,
    RunContext,
    RunError,
    RunState,
    Sequence,
    SourceCloseError,
    Tool,
    ToolCallPart,
    ToolResultPart,
    tool,
)
from toolfold.files import loads
from toolfold.runtime import CallModel, next_effect
from toolfold.local import LocalModel
from toolfold.runtime import Prepared, RequestReport, register_provider
from toolfold.testing import FunctionModel, Reply, ScriptedModel, TestModel

agent = Agent(TestModel())


def recover() -> Response | None:
    try:
        return agent.run("Delete b.txt")
    except RateLimitError as exc:
        assert_type(exc.state, RunState | None)
        if exc.state is not None:
            return agent.resume(exc.state)
    except SourceCloseError as exc:
        assert_type(exc.response, Response | None)
        assert_type(exc.close_errors, list[BaseException])
        if exc.state is not None:
            print(exc.state.phase)
    except RunError as exc:
        assert_type(exc.close_errors, Seq[BaseException])
        if exc.state is not None:
            print(exc.state.phase, exc.close_errors[:1])
    except ProviderError as exc:
        assert_type(exc.state, RunState | None)
    return None


model = toolfold.model("openai:gpt-4o-mini", api_key="sk-test")
assert_type(model, ConnectedModel)
report = model.prepare(ModelRequest([Message.user("hi")])).report
assert_type(report, RequestReport)
arguments: Mapping[str, Any] = model.check_arguments(
    ModelRequest([Message.user("hi")]), ToolCallPart("c1", "t", "{}")
)
model.close()


async def close_async() -> None:
    await model.aclose()


assert_type(toolfold.model(TestModel()), TestModel)

ask_user = Tool(
    "ask_user",
    "Ask the user a question.",
    {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
)
assert_type(ask_user, Tool[..., Any])
ctx = RunContext(run_id="run-1", step=1, call_id="call-1", tool_name="send_email")
assert_type(ctx, RunContext[Any])


def over_limit(call: ToolCallPart, state: RunState) -> bool:
    arguments = call.arguments or {}
    return bool(arguments.get("amount", 0) > 100)


@tool(requires_approval=over_limit)
def pay(amount: int) -> str:
    """Pay.

    Args:
        amount: How much.
    """
    return f"paid {amount}"


def answer(request: ModelRequest) -> Reply:
    return [FunctionModel.call("pay", {"amount": 5})]


# What a model string may give besides a provider's model: each is a ConnectedModel.
connected: list[ConnectedModel] = [
    TestModel(),
    ScriptedModel(["hi"]),
    FunctionModel(answer),
    LocalModel("smollm2"),
]
assert_type(LocalModel().prepare(ModelRequest([]), stream=True), Prepared)
register_provider("mine", lambda name, **options: TestModel())

script: list[Reply] = ["done"]
done = Agent(FunctionModel(answer), tools=[pay]).run("pay")
Agent(ScriptedModel(script)).run("hi")
answers: dict[str, str | ToolResultPart] = {}
for c in done.tool_calls:
    answers[c.id] = ToolResultPart(c.id, c.name, "no", is_error=True)
    answers[c.id] = "yes"

target = agent.handoffs[0]
print(target if isinstance(target, str) else target.name)
pipeline = loads("").get()
if isinstance(pipeline, Sequence):
    print([step.name for step in pipeline.steps])
effect = next_effect(done.state)
if isinstance(effect, CallModel):
    print(effect.request.messages)
'''


# What a run's output is typed as: the class given as ``output_type`` (and
# ``str`` without one), through Agent, its runs, streams and copies, and the
# one-call functions; Any where mypy cannot read a class (a union, a Literal, an
# abstract class). `.output` is typed as the output, not Optional, although it
# is None when the run stops without an answer; a bare annotation's is Any.
OUTPUT_PROGRAM = """
from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from typing import Any, Literal, TypedDict

import attrs
from typing_extensions import assert_type

from toolfold import (
    Agent,
    Response,
    RunStream,
    agenerate_text,
    aresume,
    generate_text,
    resume,
)
from toolfold.testing import TestModel


@attrs.frozen
class Weather:
    city: str


@dataclasses.dataclass
class Point:
    x: int


class Row(TypedDict):
    a: int


class Shape(ABC):
    @abstractmethod
    def area(self) -> float: ...


class MyDeps:
    pass


plain = Agent(TestModel())
assert_type(plain, Agent[Any, str])
assert_type(plain.run("hi"), Response[str])
assert_type(plain.run("hi").output, str)

weather = Agent(TestModel(), output_type=Weather)
assert_type(weather, Agent[Any, Weather])
response = weather.run("Weather in Oslo?")
assert_type(response, Response[Weather])
assert_type(response.output, Weather)
assert_type(response.output.city, str)
if response.output is not None:  # what the docs advise where a run can stop early
    assert_type(response.output.city, str)
weather.as_tool(output=lambda r: r.output.city)

assert_type(Agent(TestModel(), output_type=str).run("hi").output, str)
assert_type(Agent(TestModel(), output_type=Point).run("hi").output, Point)
assert_type(Agent(TestModel(), output_type=Row).run("hi").output, Row)
assert_type(Agent(TestModel(), output_type=list[int]).run("hi").output, list[int])
assert_type(Agent(TestModel(), output_type=dict[str, Any]).run("hi").output, dict[str, Any])
assert_type(Agent(TestModel(), output_type=int | None), Agent[Any, Any])
assert_type(Agent(TestModel(), output_type=Literal["yes", "no"]), Agent[Any, Any])
assert_type(Agent(TestModel(), output_type=Shape), Agent[Any, Any])

assert_type(weather.evolve(max_steps=3), Agent[Any, Weather])
assert_type(weather.evolve(output_type=Point), Agent[Any, Point])
assert_type(weather.evolve(output_type=None), Agent[Any, str])
assert_type(weather.resume(response.state), Response[Weather])
stream = weather.stream("hi")
assert_type(stream, RunStream[Weather])
assert_type(stream.response.output, Weather)
assert_type(weather.resume_stream(response.state), RunStream[Weather])

typed: Agent[MyDeps, Weather] = Agent(TestModel(), output_type=Weather)
typed.run("hi", deps=MyDeps())
assert_type(typed.evolve(name="w"), Agent[MyDeps, Weather])
built = Agent[MyDeps, Weather](TestModel(), output_type=Weather)
assert_type(built, Agent[MyDeps, Weather])
assert_type(Agent[MyDeps, str](TestModel()), Agent[MyDeps, str])
untyped: Agent = weather  # a bare annotation is Agent[Any, Any]
untyped.run("hi", deps=3)
assert_type(untyped.run("hi").output, Any)
answers: list[Response] = [response, plain.run("hi")]
broader: Agent[Any, object] = weather


def shout(response: Response) -> None:
    assert_type(response.output, Any)  # as before Response was generic
    response.output.upper()

assert_type(generate_text(TestModel(), "hi"), Response[str])
assert_type(generate_text(TestModel(), "hi", output_type=Weather), Response[Weather])
assert_type(generate_text(TestModel(), "hi", output_type=int | str), Response[Any])
assert_type(resume(response.state, model=TestModel(), output_type=Weather), Response[Weather])


async def in_a_loop() -> None:
    assert_type(await weather.arun("hi"), Response[Weather])
    assert_type(await weather.aresume(response.state), Response[Weather])
    done = await agenerate_text(TestModel(), "hi", output_type=Point)
    assert_type(done, Response[Point])
    assert_type(await aresume(done.state, model=TestModel()), Response[str])
"""

# What mypy refuses about those types: each line ending `# error: <code>` must
# give that error, and no other line any.
WRONG_PROGRAM = """
from __future__ import annotations

import attrs

from toolfold import Agent, generate_text
from toolfold.testing import TestModel


@attrs.frozen
class Weather:
    city: str


class MyDeps:
    pass


weather = Agent(TestModel(), output_type=Weather)
number: int = weather.run("hi").output  # error: assignment
text: str = generate_text(TestModel(), "hi", output_type=Weather).output  # error: assignment
misspelt = weather.run("hi").output.town  # error: attr-defined
Agent[MyDeps, Weather](TestModel(), output_type=Weather).run("hi", deps=3)  # error: arg-type
typed: Agent[MyDeps, Weather] = weather
typed.run("hi", deps=3)  # error: arg-type
"""


#: The three programs above, each its own module in one mypy run: mypy reads toolfold
#: and what it imports once (about a minute of CPU) instead of once per program.
PROGRAMS = {
    "user_program": PROGRAM,
    "output_program": OUTPUT_PROGRAM,
    "wrong_program": WRONG_PROGRAM,
}


@pytest.fixture(scope="module")
def mypy_lines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """mypy --strict run once over ``PROGRAMS`` as a user's modules: each one's lines of output."""
    folder = tmp_path_factory.mktemp("typed_user")
    for name, source in PROGRAMS.items():
        (folder / f"{name}.py").write_text(source, encoding="utf-8")
    # MYPYPATH: mypy finds no editable install made by setuptools' strict finder.
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            "--config-file",
            str(ROOT / "pyproject.toml"),
            *(f"{name}.py" for name in PROGRAMS),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=240,
    )
    # 1 is "found errors" (the wrong program's); anything else is mypy failing to run.
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert f"(checked {len(PROGRAMS)} source files)" in done.stdout, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    return {name: [line for line in lines if line.startswith(f"{name}.py:")] for name in PROGRAMS}


@pytest.mark.once
def test_a_typed_user_program_passes_mypy_strict(mypy_lines: dict[str, list[str]]) -> None:
    """A user's program written as the docs show passes mypy --strict, with the types pinned."""
    assert mypy_lines["user_program"] == []


@pytest.mark.once
def test_a_runs_output_has_the_output_type(mypy_lines: dict[str, list[str]]) -> None:
    """mypy --strict types agent.run(...).output as the output_type's class (str without one)."""
    assert mypy_lines["output_program"] == []


@pytest.mark.once
def test_mypy_refuses_an_output_used_as_another_type(mypy_lines: dict[str, list[str]]) -> None:
    """An output used as another type, a misspelt field, wrong deps (annotated or subscripted) are errors."""
    expected = sorted(
        f"{number}:{line.rpartition('# error: ')[2]}"
        for number, line in enumerate(WRONG_PROGRAM.splitlines(), 1)
        if "# error: " in line
    )
    found = sorted(
        f"{line.split(':')[1]}:{line[line.rindex('[') + 1 : -1]}"
        for line in mypy_lines["wrong_program"]
        if ": error: " in line
    )
    assert len(expected) == 5
    assert found == expected, "\n".join(mypy_lines["wrong_program"])


@attrs.frozen
class Weather:
    """An output type (at module level: a pickled agent names it)."""

    city: str


def test_the_generic_classes_subscript_at_run_time() -> None:
    """Agent[Deps, Output], Response[Output] and RunStream[Output] subscript and build plain objects."""
    assert RunStream[Weather].__origin__ is RunStream  # type: ignore[attr-defined]
    model = TestModel()
    made = Agent[dict[str, int], Weather](model, output_type=Weather, name="w")
    plain = Agent(model, output_type=Weather, name="w")
    assert type(made) is Agent
    assert repr(made) == repr(plain)
    assert pickle.dumps(made) == pickle.dumps(plain)
    response = plain.run("hi")
    assert type(Response[Weather](response.state, response.output)) is Response
    assert Response[Weather](response.state, response.output) == response
