"""A testing model misused inside a sub-run (an agent used as a tool) reaches the caller."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated, Any

import pytest

from toolfold import Agent, Field, RunError, Sequence, UsageError, state_of, tool
from toolfold.runtime import ToolReturned
from toolfold.testing import FunctionModel, ScriptedModel, TestModel

call = ScriptedModel.call


def _lead(sub: Agent[None, str], *, on_tool_error: str = "return") -> Agent[None, str]:
    script = ScriptedModel([call("sub", {"input": "x"}), "lead done"])
    return Agent(script, tools=[sub.as_tool()], on_tool_error=on_tool_error)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "says"),
    [
        (ScriptedModel([]), "ScriptedModel has no entry left"),
        (TestModel(call_tools=["typo"]), "names 'typo'"),
    ],
    ids=["script-out", "call-tools-typo"],
)
def test_a_sub_agents_test_model_misuse_is_raised_as_it_is(model: object, says: str) -> None:
    """The sub-run's UsageError reaches the top run's caller, not the lead model as a result."""
    lead = _lead(Agent(model, name="sub"))  # type: ignore[call-overload]
    with pytest.raises(UsageError, match=says):
        lead.run("go")


async def _a_coroutine(request: object) -> list[object]:
    return []


@dataclasses.dataclass
class _NoSample:
    code: Annotated[str, Field(pattern=r"^(?=a)b$")]  # no string matches


@pytest.mark.parametrize(
    ("sub", "says"),
    [
        (
            lambda: Agent(
                FunctionModel(lambda r: "x", stream_function=lambda r: _a_coroutine(r)), name="sub"
            ),
            "stream_function returned coroutine",
        ),
        (
            lambda: Agent(FunctionModel(lambda r: "x", stream_function=lambda r: 5), name="sub"),
            "stream_function returned int",
        ),
        (
            lambda: Agent(TestModel(), name="sub", output_type=_NoSample),
            "TestModel cannot make the run's output",
        ),
        (
            lambda: Agent(TestModel(), name="sub", tools=[tool(_no_sample_tool)]),
            "TestModel cannot make arguments",
        ),
    ],
    ids=["stream-coroutine", "stream-int", "no-output", "no-arguments"],
)
def test_every_testing_model_misuse_in_a_sub_run_is_raised(sub: Any, says: str) -> None:
    """Each way a testing model says it is misused reaches a streamed lead's caller."""
    with pytest.raises(UsageError, match=says):
        for _ in _lead(sub()).stream("go"):
            pass


def _no_sample_tool(code: Annotated[str, Field(pattern=r"^(?=a)b$")]) -> str:
    """T.

    Args:
        code: C.
    """
    return code


def test_the_misuse_is_raised_from_a_stream_and_an_async_run_too() -> None:
    """arun and stream raise the sub-run's UsageError as run does."""
    with pytest.raises(UsageError, match="no entry left"):
        asyncio.run(_lead(Agent(ScriptedModel([]), name="sub")).arun("go"))
    with pytest.raises(UsageError, match="no entry left"):
        for _ in _lead(Agent(ScriptedModel([]), name="sub")).stream("go"):
            pass


def test_on_tool_error_raise_raises_the_misuse_itself() -> None:
    """With on_tool_error="raise" the error is the UsageError, not a ToolExecutionError."""
    lead = _lead(Agent(ScriptedModel([]), name="sub"), on_tool_error="raise")
    with pytest.raises(UsageError, match="no entry left"):
        lead.run("go")


def test_the_errors_state_resumes_the_sub_agents_call() -> None:
    """The error's state is the top run with the sub-agent's call still to run: resumed
    once the script is fixed, the call runs and the run ends, its first answer not asked again."""
    lead = _lead(Agent(ScriptedModel([]), name="sub"))
    with pytest.raises(UsageError) as raised:
        lead.run("go")
    state = raised.value.state
    assert state is not None
    assert [c.status for c in state.calls] == ["to_run"]
    fixed = Agent(ScriptedModel(["sub done"]), name="sub")
    answer = ScriptedModel(["lead done"])
    response = Agent(answer, tools=[fixed.as_tool()]).resume(state)
    assert response.text == "lead done"
    assert len(answer.requests) == 1
    assert response.messages[-2].tool_results[0].content == "sub done"


def test_a_tools_own_usage_error_stays_an_error_result() -> None:
    """A plain tool raising UsageError is the tool's failure: the model reads it."""

    @tool
    def broken(x: int) -> int:
        """Break.

        Args:
            x: X.
        """
        raise UsageError("misuse inside the tool")

    model = ScriptedModel([call("broken", {"x": 1}), "done"])
    response = Agent(model, tools=[broken]).run("go")
    assert response.text == "done"
    result = response.messages[-2].tool_results[0]
    assert result.is_error
    assert "misuse inside the tool" in result.content


def test_a_sub_agents_model_failure_stays_an_error_result() -> None:
    """A sub-agent whose model raises an ordinary error is a failed call the model reads."""

    def fails(request: object) -> str:
        raise RuntimeError("the fake broke")

    from toolfold.testing import FunctionModel

    response = _lead(Agent(FunctionModel(fails), name="sub")).run("go")
    assert response.text == "lead done"
    assert "the fake broke" in response.messages[-2].tool_results[0].content


def test_a_sub_agents_provider_usage_error_stays_an_error_result() -> None:
    """A real adapter closed while a sub-agent's call is in flight (its UsageError) is an
    error result the lead model reads, not a misuse the run raises."""
    import http.server
    import threading

    from toolfold.adapters.openai_chat import OpenAIChatModel

    holder: list[OpenAIChatModel] = []

    class ClosesTheModel(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            holder[0].close()  # (the app shuts the model down under its call)
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ClosesTheModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        real = OpenAIChatModel(
            "m",
            provider="openai-compatible",
            base_url=f"http://127.0.0.1:{server.server_port}/v1",
            api_key="sk-test",
            retry=None,
        )
        holder.append(real)
        response = _lead(Agent(real, name="sub")).run("go")
    finally:
        server.shutdown()
        server.server_close()
    assert response.text == "lead done"
    result = response.messages[-2].tool_results[0]
    assert result.is_error
    assert "UsageError: the model was closed" in result.content


def test_a_function_models_own_usage_error_stays_an_error_result() -> None:
    """A FunctionModel function that raises UsageError itself (as a model it wraps would) is
    the sub-run's failure, an error result; a function returning no reply is a misuse raised."""
    from toolfold.testing import FunctionModel

    def raises(request: object) -> str:
        raise UsageError("a wrapped model was closed")

    response = _lead(Agent(FunctionModel(raises), name="sub")).run("go")
    assert response.text == "lead done"
    assert "a wrapped model was closed" in response.messages[-2].tool_results[0].content
    with pytest.raises(UsageError, match="no reply"):
        _lead(Agent(FunctionModel(lambda request: None), name="sub")).run("go")


def _noop() -> str:
    """No-op."""
    return "ok"


@pytest.mark.parametrize("on_tool_error", ["return", "raise"])
def test_the_misuse_shows_on_event_the_usage_it_keeps(on_tool_error: str) -> None:
    """The attempt_dropped that counts the misused sub-run's usage reaches on_event, as the
    one a failed call's ToolExecutionError keeps does: on_event sees every event of the state."""
    sub = Agent(ScriptedModel([call("_noop", {})]), name="sub", tools=[tool(_noop)])
    lead = _lead(sub, on_tool_error=on_tool_error)
    seen: list[str] = []
    with pytest.raises(UsageError) as raised:
        lead.run("go", on_event=lambda event: seen.append(event.kind))
    assert raised.value.state is not None
    assert [event.kind for event in raised.value.state.log] == seen
    assert seen[-1] == "attempt_dropped"


@tool(requires_approval=True)
def _refund(order: str) -> str:
    """Refund an order.

    Args:
        order: The order.
    """
    return f"refunded {order}"


def test_the_misuse_names_the_agent_whose_model_it_was_and_its_path() -> None:
    """A script run out in the agent a sub-run handed to (lead -> tool 'support' -> handoff ->
    refunds) says so as a tool's error at depth does: tool, first agent, agent handed to; one
    tool deeper, each caller adds its tool (it used to be the script's text alone)."""
    script = ScriptedModel([call("_refund", {"order": "A"})])
    refunds = Agent(script, name="refunds", tools=[_refund])
    handing = ScriptedModel([call("transfer_to_refunds", {})])
    support = Agent(handing, name="support", handoffs=[refunds])
    lead = Agent(
        ScriptedModel([call("support", {"input": "x"}), "done"]), tools=[support.as_tool()]
    )
    waiting = lead.run("go")
    with pytest.raises(UsageError) as raised:
        lead.resume(waiting.state, approvals={"call_3_0": True})
    assert str(raised.value) == (
        "tool 'support' failed in the run of agent 'support', handed to agent 'refunds': "
        "ScriptedModel has no entry left for request 2 (the script has 1); add entries to the "
        "script"
    )
    inner = Agent(ScriptedModel([]), name="helper")
    middle = Agent(ScriptedModel([call("ask", {"input": "x"})]), tools=[inner.as_tool("ask")])
    outer = Agent(ScriptedModel([call("mid", {"input": "x"})]), tools=[middle.as_tool("mid")])
    with pytest.raises(UsageError) as raised:
        outer.run("go")
    assert str(raised.value) == (
        "tool 'mid' failed: tool 'ask' failed in agent 'helper': ScriptedModel has no entry "
        "left for request 1 (the script has 0); add entries to the script"
    )


def test_a_workflow_step_failed_by_the_misuse_records_its_prefixed_text() -> None:
    """A workflow step's agent raising a sub-run's misuse fails the step, and the workflow's
    state records the text with the tool and agent: the step's error result and the failure's
    message (docs/composition.md says so; on main they held the script's text alone)."""
    helper = Agent(ScriptedModel([]), name="helper")
    top = Agent(
        ScriptedModel([call("ask", {"input": "x"})]), name="top", tools=[helper.as_tool("ask")]
    )
    with pytest.raises(RunError) as raised:
        Sequence(top, name="flow").run("go")
    state = state_of(raised.value)
    said = (
        "Error: UsageError: tool 'ask' failed in agent 'helper': ScriptedModel has no entry left "
        "for request 1 (the script has 0); add entries to the script"
    )
    returned = [event for event in state.log if isinstance(event, ToolReturned)]
    assert [(event.call_id, event.content) for event in returned] == [("top", said)]
    assert state.error is not None
    assert state.error.message == f"tool 'top' failed once (max_retries=0); last error: {said}"
