"""The runtime holds its invariants against tools, observers, callers and tampered documents."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest

from toolfold import (
    Agent,
    InvalidEventError,
    Message,
    ModelConfigError,
    RunError,
    RunState,
    SerializationError,
    Tool,
    ToolCallPart,
    ToolfoldError,
    ToolResultPart,
    ToolRetriesExceededError,
    UsageError,
    generate_text,
    resume,
    tool,
)
from toolfold.runtime import (
    ModelResponded,
    ModelResponse,
    RunConfig,
    ToolDefinition,
    ToolResultsProvided,
    ToolReturned,
    ToolSpec,
    UserMessageAdded,
    initial_state,
    reduce,
    replay,
)
from toolfold.testing import ScriptedModel

call = ScriptedModel.call

ASK = Tool("ask", "Ask the user.", {"type": "object", "properties": {}})


@tool
def mutate(opts: dict[str, Any], items: list[int], anything: Any = None) -> str:
    """Change every argument it gets."""
    opts["injected"] = True
    items.append(99)
    if isinstance(anything, dict):
        anything["injected"] = True
    return "ok"


# --- 1. stored calls cannot be changed by tools or observers -------------------


def test_a_tool_mutating_its_arguments_leaves_the_state_untouched() -> None:
    """A tool gets its own copy: nested dicts, lists and Any values it changes stay out of the state."""
    args = {"opts": {"a": 1}, "items": [1], "anything": {"x": 1}}
    response = generate_text(ScriptedModel([call("mutate", args), "done"]), "go", tools=[mutate])
    stored = response.state.messages[1].tool_calls[0]
    assert stored.arguments == {"opts": {"a": 1}, "items": [1], "anything": {"x": 1}}
    assert response.steps[0].tool_results[0].content == "ok"
    assert replay(response.state.events) == response.state


def test_an_observer_cannot_change_the_arguments_a_tool_runs_with() -> None:
    """Stored call arguments are read-only: an on_event observer editing them raises, the tool never sees it."""
    seen: list[str] = []

    @tool
    def read(path: str) -> str:
        """Read a file."""
        seen.append(path)
        return "content"

    def on_event(event: Any) -> None:
        if isinstance(event, ModelResponded):
            for part in event.response.message.tool_calls:
                part.arguments["path"] = "/etc/passwd"

    with pytest.raises(RunError, match="on_event observer raised TypeError") as info:
        generate_text(
            ScriptedModel([call("read", {"path": "a.txt"}), "done"]),
            "go",
            tools=[read],
            on_event=on_event,
        )
    assert seen == []
    assert info.value.state.messages[1].tool_calls[0].arguments == {"path": "a.txt"}


def test_an_observer_that_raises_says_resuming_goes_on_without_it() -> None:
    """A raising on_step observer's error says its state is the run up to that point and
    that resuming calls only the observers given to it; resuming without it goes on."""

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    def on_step(step: Any) -> None:
        raise ValueError("full")

    model = ScriptedModel([call("ping", {}), "done"])
    with pytest.raises(RunError) as caught:
        generate_text(model, "go", tools=[ping], on_step=on_step)
    assert str(caught.value) == (
        "the on_step observer raised ValueError: full; the error's state is the run up to "
        "that point, and resuming it goes on from there, calling only the observers given "
        "to that resume"
    )
    state = caught.value.state
    assert state is not None
    assert resume(state, model=model, tools=[ping]).text == "done"


def test_frozen_arguments_round_trip_and_still_behave_like_json() -> None:
    """Read-only arguments compare equal to dicts, dump as JSON, pickle, copy and survive from_json."""
    part = ToolCallPart("c1", "t", "{}", {"a": {"b": [1, {"c": 2}]}}, {"item": {"id": "x"}})
    with pytest.raises(TypeError):
        part.arguments["a"]["b"].append(3)  # type: ignore[index]
    with pytest.raises(TypeError):
        part.provider_data["item"]["id"] = "y"
    assert part.arguments == {"a": {"b": [1, {"c": 2}]}}
    assert json.loads(json.dumps(part.arguments)) == {"a": {"b": [1, {"c": 2}]}}
    assert pickle.loads(pickle.dumps(part)) == part
    assert copy.deepcopy(part) == part
    from toolfold.runtime import from_json, to_json

    assert from_json(to_json(part, ToolCallPart), ToolCallPart) == part


def test_states_do_not_share_a_mutable_failure_count() -> None:
    """state.failures is read-only, so one state cannot change another's counts."""
    response = generate_text(
        ScriptedModel([call("mutate", '{"opts": 1}'), "done"]), "go", tools=[mutate]
    )
    assert response.state.failures == {"mutate": 1}
    with pytest.raises(TypeError):
        response.state.failures["mutate"] = 0  # type: ignore[index]
    assert RunState.from_json(response.state.to_json()) == response.state


# --- 2. a resumed run follows the live tools' approval policy ------------------


def test_resume_asks_approval_for_a_tool_that_now_requires_it() -> None:
    """A run saved when a tool needed no approval asks for it once the live tool requires it."""
    ran: list[int] = []

    @tool
    def transfer(amount: int) -> str:
        """Transfer money (v1: no approval)."""
        ran.append(amount)
        return "sent"

    first = Agent(ScriptedModel([call("ask", {})]), tools=[transfer, ASK]).run("go")
    saved = first.state.to_json()

    @tool(requires_approval=True)
    def transfer(amount: int) -> str:  # type: ignore[no-redef]
        """Transfer money (v2: approval required)."""
        ran.append(amount)
        return "sent"

    agent = Agent(ScriptedModel([call("transfer", {"amount": 10}), "done"]), tools=[transfer, ASK])
    second = agent.resume(RunState.from_json(saved), tool_results={first.tool_calls[0].id: "yes"})
    assert second.finish_reason == "approval_required"
    assert ran == []
    third = agent.resume(second.state, approvals={second.pending_approvals[0].id: True})
    assert third.finish_reason == "stop"
    assert ran == [10]


def test_resume_refuses_a_cleared_call_whose_tool_now_requires_approval() -> None:
    """A call already cleared to run under the old tool does not run unapproved under the new one."""

    @tool
    def wipe(path: str) -> str:
        """Wipe (v1)."""
        raise ValueError("disk busy")

    with pytest.raises(ToolfoldError) as info:
        generate_text(
            ScriptedModel([call("wipe", {"path": "/"})]),
            "go",
            tools=[wipe],
            on_tool_error="raise",
        )
    state = info.value.state  # type: ignore[attr-defined]
    assert state.phase == "running_tools"
    ran: list[str] = []

    @tool(requires_approval=True)
    def wipe(path: str) -> str:  # type: ignore[no-redef]
        """Wipe (v2)."""
        ran.append(path)
        return "wiped"

    with pytest.raises(UsageError, match=r"now require approval"):
        resume(state, model=ScriptedModel(["done"]), tools=[wipe])
    assert ran == []


# --- 3. from_json checks the state against its event log -----------------------


def test_from_json_refuses_a_state_whose_fields_contradict_its_events() -> None:
    """A document edited to mark an unapproved call 'to_run' fails to load, naming the fields."""

    @tool(requires_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        return "deleted"

    first = Agent(ScriptedModel([call("delete", {"path": "/"})]), tools=[delete]).run("go")
    data = json.loads(first.state.to_json())
    data["phase"] = "running_tools"
    data["calls"][0]["status"] = "to_run"
    with pytest.raises(SerializationError, match=r"phase is 'running_tools'.*\$\.phase") as info:
        RunState.from_json(json.dumps(data))
    assert "@ $.calls[0].status" in str(info.value)
    assert RunState.from_json(first.state.to_json()) == first.state


def test_from_json_refuses_an_event_log_that_does_not_replay() -> None:
    """A log whose events the reducer refuses fails to load with SerializationError."""
    state = generate_text(ScriptedModel(["hi"]), "go").state
    data = json.loads(state.to_json())
    data["log"].append(data["log"][-1])  # a second answer after the run finished
    with pytest.raises(SerializationError, match="does not replay"):
        RunState.from_json(json.dumps(data))


# --- 4. observers that raise, repeated call ids --------------------------------


def test_observer_errors_carry_the_state_after_tools_ran() -> None:
    """on_step, on_event and stop_when errors raise RunError with the latest state, chained."""

    def boom(_: Any) -> bool:
        raise KeyError("observer bug")

    for options in ({"on_step": boom}, {"stop_when": [boom]}):
        with pytest.raises(RunError) as info:
            generate_text(
                ScriptedModel([call("mutate", {"opts": {}, "items": []}), "done"]),
                "go",
                tools=[mutate],
                **options,  # type: ignore[arg-type]
            )
        assert isinstance(info.value.__cause__, KeyError)
        state = info.value.state
        assert state is not None
        assert state.messages[-1].role == "tool"


def test_repeated_call_ids_in_one_response_are_made_unique() -> None:
    """Two calls with the same id both run, the later one under '<id>_<index>'."""
    model = ScriptedModel(
        [
            [
                call("mutate", {"opts": {}, "items": []}, id="dup"),
                call("mutate", {"opts": {}, "items": [2]}, id="dup"),
            ],
            "done",
        ]
    )
    response = generate_text(model, "go", tools=[mutate])
    assert response.finish_reason == "stop"
    assert [r.call_id for r in response.steps[0].tool_results] == ["dup", "dup_1"]
    assert replay(response.state.events) == response.state


# --- 6. max_retries counts failing steps ---------------------------------------


def test_parallel_failures_in_one_step_count_once() -> None:
    """Four failing calls of one tool in one step are one failure, not four."""
    bad = [call("mutate", '{"opts": 1}') for _ in range(4)]
    response = generate_text(ScriptedModel([bad, "fixed"]), "go", tools=[mutate])
    assert response.finish_reason == "stop"
    assert response.state.failures == {"mutate": 1}
    with pytest.raises(ToolRetriesExceededError, match="failed 4 times in a row"):
        generate_text(ScriptedModel([bad] * 5), "go", tools=[mutate], max_steps=10)


def test_retries_exceeded_after_one_failure_reads_once() -> None:
    """With max_retries=0 the message says 'failed once', not '1 times'."""
    strict = mutate.replace(max_retries=0)
    with pytest.raises(ToolRetriesExceededError, match="'mutate' failed once "):
        generate_text(ScriptedModel([call("mutate", '{"opts": 1}')]), "go", tools=[strict])


# --- 7. the reducer refuses events that break its invariants -------------------


def _state() -> RunState:
    config = RunConfig(tools=[ToolSpec(ToolDefinition("add"))])
    return initial_state("hi", config, run_id="r")


def _running() -> RunState:
    part = ToolCallPart("c1", "add", '{"a": 1}', {"a": 1})
    return reduce(_state(), ModelResponded(ModelResponse(Message.assistant("", [part]))))


@pytest.mark.parametrize(
    ("state", "event", "message"),
    [
        (
            _state,
            UserMessageAdded(Message.assistant("", [ToolCallPart("c9", "add", "{}", {})])),
            "cannot carry tool calls",
        ),
        (_state, UserMessageAdded(Message.tool(ToolResultPart("c9", "add", "x"))), "role 'tool'"),
        (_state, ModelResponded(ModelResponse(Message.user("hi"))), "role 'user'"),
        (_running, ToolReturned("c1", 3), "must be text"),  # type: ignore[arg-type]
        (_running, ToolReturned("c1", "3", outcome="bogus"), "unknown outcome 'bogus'"),  # type: ignore[arg-type]
    ],
)
def test_events_breaking_invariants_are_refused(state: Any, event: Any, message: str) -> None:
    """Added messages with calls or results, non-assistant answers, non-text results and bad outcomes are refused."""
    with pytest.raises(InvalidEventError, match=message):
        reduce(state(), event)


def test_resume_with_an_assistant_message_carrying_calls_is_refused() -> None:
    """resume(message=...) cannot slip in a tool call that would never get a result."""
    first = generate_text(ScriptedModel(["hi"]), "go")
    sneaky = Message.assistant("", [ToolCallPart("c9", "add", "{}", {})])
    with pytest.raises(InvalidEventError, match="cannot carry tool calls"):
        resume(first.state, model=ScriptedModel(["x"]), message=[sneaky])


def test_results_with_non_text_content_are_refused() -> None:
    """ToolResultsProvided refuses a result whose content is not text."""
    state = generate_text(ScriptedModel([call("ask", {})]), "go", tools=[ASK]).state
    bad = ToolResultPart(state.tool_calls[0].id, "ask", 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidEventError, match="must be text"):
        reduce(state, ToolResultsProvided((bad,)))


# --- 9. settings are JSON ------------------------------------------------------


def test_settings_round_trip_and_non_json_settings_are_refused_at_start() -> None:
    """A tuple setting is stored as a list (so from_json is exact); a Decimal is refused by name."""
    from decimal import Decimal

    response = generate_text(ScriptedModel(["hi"]), "go", stop=("a", "b"))
    assert response.state.config.settings["stop"] == ["a", "b"]
    assert RunState.from_json(response.state.to_json()) == response.state
    with pytest.raises(ModelConfigError, match="'temperature'"):
        generate_text(ScriptedModel(["hi"]), "go", temperature=Decimal("0.5"))


# --- 10. tool_results keys must match the parts --------------------------------


def test_result_parts_under_another_calls_key_are_refused() -> None:
    """resume refuses a ToolResultPart whose call_id differs from its key, naming both."""
    other = Tool("other", "Other.", {"type": "object", "properties": {}})
    model = ScriptedModel([[call("ask", {}, id="c1"), call("other", {}, id="c2")], "done"])
    first = generate_text(model, "go", tools=[ASK, other])
    swapped = {
        "c1": ToolResultPart("c2", "other", "for other"),
        "c2": ToolResultPart("c1", "ask", "for ask"),
    }
    with pytest.raises(ToolfoldError, match=r"tool_results\['c1'\].*'c2'"):
        resume(first.state, model=model, tools=[ASK, other], tool_results=swapped)


# --- 12. output types read what models actually answer ------------------------


def test_a_str_output_is_the_plain_answer() -> None:
    """With output_type=str a plain-text answer is the output, no JSON wrapper needed."""
    model = ScriptedModel(["plain text answer"])
    response = generate_text(model, "q", output_type=str)
    assert response.output == "plain text answer"
    assert len(model.requests) == 1
    wrapped = generate_text(ScriptedModel(['{"result": "ok"}']), "q", output_type=str)
    assert wrapped.output == "ok"
    assert RunState.from_json(response.state.to_json()) == response.state


def test_wrapped_outputs_accept_the_bare_value_and_objects_say_what_they_expect() -> None:
    """list[str] accepts a bare array; an object type told an array names the JSON types, no tool wording."""
    assert generate_text(ScriptedModel(['["a"]']), "q", output_type=list[str]).output == ["a"]

    @dataclasses.dataclass
    class Forecast:
        celsius: int

    model = ScriptedModel(["[1]", '{"celsius": 3}'])
    assert generate_text(model, "q", output_type=Forecast).output == Forecast(3)
    feedback = model.requests[1].messages[-1].text
    assert "expected a JSON object, got array" in feedback
    assert "tool" not in feedback
