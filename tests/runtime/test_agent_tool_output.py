"""``as_tool(output=...)``: what the calling model sees of a finished sub-run."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from toolfold import Agent, Response, Sequence, UsageError, tool
from toolfold.runtime import RunState, replay
from toolfold.testing import ScriptedModel, TestModel, override_models

call = ScriptedModel.call


@attrs.frozen
class Verdict:
    """A judge's structured answer."""

    ok: bool
    reason: str


def judge() -> Agent:
    """A sub-agent with a structured output."""
    return Agent(
        ScriptedModel(['{"ok": true, "reason": "fine"}']), name="judge", output_type=Verdict
    )


def lead_over(sub_tool: Any, name: str = "judge") -> Agent:
    """A caller that calls ``name`` once, then answers ``done``."""
    return Agent(ScriptedModel([call(name, {"input": "is it fine?"}), "done"]), tools=[sub_tool])


def seen(response: Response) -> Any:
    """The tool result the calling model read."""
    return response.messages[-2].tool_results[0]


def test_output_function_gives_what_the_calling_model_sees() -> None:
    """A function of the sub-run's Response picks what the caller reads; the sub-run stays nested."""
    response = lead_over(judge().as_tool(output=lambda r: r.output.reason)).run("go")
    assert seen(response).content == "fine"
    assert not seen(response).is_error
    ((_, child),) = response.state.sub_runs.items()
    assert child.output == {"ok": True, "reason": "fine"}
    assert replay(response.state.log) == response.state


def test_output_function_returning_data_is_sent_as_json() -> None:
    """JSON-able data (an attrs object too) from the function reaches the caller as JSON."""
    as_tool = judge().as_tool(output=lambda r: {"verdict": r.output, "steps": len(r.steps)})
    response = lead_over(as_tool).run("go")
    assert json.loads(seen(response).content) == {
        "verdict": {"ok": True, "reason": "fine"},
        "steps": 1,
    }


def test_a_failing_output_function_is_a_tool_error_naming_the_tool() -> None:
    """An output function that raises gives the caller an error result that names the tool."""

    def broken(response: Response) -> str:
        raise KeyError("summary")

    response = lead_over(judge().as_tool(output=broken)).run("go")
    result = seen(response)
    assert result.is_error
    assert result.content.startswith("Error: the output= function of tool 'judge' failed: ")
    assert "KeyError" in result.content
    assert response.text == "done"
    assert len(response.state.sub_runs) == 1  # the finished sub-run is still on the record


def test_output_runs_once_when_a_suspended_sub_run_finishes_and_replay_keeps_its_result() -> None:
    """The function runs when the resumed sub-run finishes; the record keeps its result."""

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file.

        Args:
            path: The file.
        """
        return f"deleted {path}"

    calls: list[str] = []

    def shout(response: Response) -> str:
        calls.append(response.text)
        return response.text.upper()

    files = Agent(
        ScriptedModel([call("delete", {"path": "old.log"}), "old.log is gone."]),
        name="files",
        tools=[delete],
    )
    lead = Agent(
        ScriptedModel([call("files", {"input": "remove old.log"}), "Cleaned up."]),
        tools=[files.as_tool(output=shout)],
    )
    suspended = lead.run("clean up")
    assert suspended.finish_reason == "approval_required"
    assert calls == []
    (pending,) = suspended.pending_approvals
    loaded = RunState.from_json(suspended.state.to_json())
    done = lead.resume(loaded, approvals={pending.id: True})
    assert calls == ["old.log is gone."]
    assert seen(done).content == "OLD.LOG IS GONE."
    assert replay(done.state.log) == done.state
    assert RunState.from_json(done.state.to_json()) == done.state
    assert calls == ["old.log is gone."]


def test_workflow_as_tool_takes_an_output_function_too() -> None:
    """``Workflow.as_tool(output=...)`` picks what the caller sees of the workflow's run."""
    pipeline = Sequence(judge(), name="pipeline")
    as_tool = pipeline.as_tool(output=lambda r: f"ok={r.output.ok}")
    response = lead_over(as_tool, "pipeline").run("go")
    assert seen(response).content == "ok=True"


def test_output_must_be_a_function() -> None:
    """A non-callable ``output`` is refused when the tool is made."""
    with pytest.raises(UsageError, match=r"output=\.\.\.\) takes a function .*got str"):
        judge().as_tool(output="reason")  # type: ignore[arg-type]


def test_a_lambda_output_cannot_be_written_to_an_agent_file() -> None:
    """``to_dict`` names the key of an output function that has no import path."""
    with override_models(TestModel()):
        helper = Agent("openai:gpt-4o-mini", name="helper")
        lead = Agent("openai:gpt-4o-mini", name="lead", tools=[helper.as_tool(output=lambda r: 1)])
    with pytest.raises(UsageError, match=r"agents\.lead\.tools\[0\]\.output: .*no import path"):
        lead.to_dict()
