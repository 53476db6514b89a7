"""A typed user's program passes ``mypy --strict`` against toolfold, as the docs write it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.once
def test_a_typed_user_program_passes_mypy_strict(tmp_path: Path) -> None:
    """A user's program written as the docs show passes mypy --strict, with the types pinned."""
    program = tmp_path / "user_program.py"
    program.write_text(PROGRAM, encoding="utf-8")
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
            str(program),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=110,
    )
    assert done.returncode == 0, done.stdout + done.stderr
