"""Public constructors and loaders refuse wrong arguments with a UsageError naming them."""

from __future__ import annotations

from typing import Any

import pytest

from toolfold import RunState, UsageError
from toolfold.runtime import (
    MaxSteps,
    OutputSpec,
    RunConfig,
    TokenBudget,
    ToolCalled,
    ToolDefinition,
    ToolSpec,
    initial_state,
    max_steps,
    token_budget,
    tool_called,
)


@pytest.mark.parametrize("name", [None, 5, b"add", ""])
def test_tool_called_refuses_anything_but_a_tool_name(name: Any) -> None:
    """tool_called(None / 5 / b'add' / '') is a UsageError naming the argument, not a condition that loads back changed."""
    with pytest.raises(UsageError, match=r"tool_called\(name\): expected a tool name"):
        tool_called(name)


@pytest.mark.parametrize("name", ["soumettre_réponse", "files.read", "x" * 65, "a b", "a\n"])
def test_tool_called_refuses_a_name_no_tool_can_have(name: str) -> None:
    """tool_called('soumettre_réponse') (a function's name, not the tool's) is refused: it never held."""
    with pytest.raises(UsageError, match=r"no tool can have this name") as caught:
        tool_called(name)
    assert repr(name) in str(caught.value)
    assert tool_called("x" * 64).name == "x" * 64
    assert ToolCalled(name).name == name  # (a state saved with one still loads)


@pytest.mark.parametrize("name", [None, 5])
def test_a_hand_built_tool_called_refuses_a_name_that_is_not_text(name: Any) -> None:
    """ToolCalled(None) is refused: its saved state would load back as ToolCalled('None')."""
    with pytest.raises(UsageError, match=r"ToolCalled\.name: expected a tool name \(str\)"):
        ToolCalled(name)


@pytest.mark.parametrize("value", ["3", True, None, 0, 0.5])
def test_max_steps_and_token_budget_refuse_non_numbers_and_small_bounds(value: Any) -> None:
    """max_steps('3') / token_budget(True) and bounds below 1 are a UsageError naming the argument."""
    with pytest.raises(UsageError, match=r"max_steps\(steps\): expected a number at least 1"):
        max_steps(value)
    with pytest.raises(UsageError, match=r"token_budget\(tokens\): expected a number at least 1"):
        token_budget(value)


@pytest.mark.parametrize("value", ["3", True, None])
def test_hand_built_bounds_refuse_non_numbers(value: Any) -> None:
    """MaxSteps('3') and TokenBudget(True) are refused when built, not at the first step boundary."""
    with pytest.raises(UsageError, match=r"MaxSteps\.steps: expected a number"):
        MaxSteps(value)
    with pytest.raises(UsageError, match=r"TokenBudget\.tokens: expected a number"):
        TokenBudget(value)


def test_valid_stop_conditions_round_trip_unchanged() -> None:
    """max_steps, token_budget and tool_called with valid arguments save and load equal."""
    conditions = [max_steps(3), token_budget(50, tree=True), tool_called("add")]
    state = initial_state("x", RunConfig(stop_when=conditions), run_id="r")
    assert RunState.from_json(state.to_json()) == state


@pytest.mark.parametrize("text", [None, 5, {"format": "toolfold.run_state/1"}])
def test_loaders_refuse_what_is_not_json_text(text: Any) -> None:
    """RunState.from_json / from_json / events_from_json of None, a number or a dict name the text argument."""
    from toolfold.runtime import Message, events_from_json, from_json

    with pytest.raises(UsageError, match=r"RunState\.from_json\(text\): expected JSON text"):
        RunState.from_json(text)
    with pytest.raises(UsageError, match=r"RunState\.from_json\(text\): expected JSON text"):
        RunState.from_json(text, key="k")
    with pytest.raises(UsageError, match=r"^from_json\(text\): expected JSON text"):
        from_json(text, Message)
    with pytest.raises(UsageError, match=r"events_from_json\(text\): expected JSON text"):
        events_from_json(text)


def test_a_decoded_document_is_named_as_such() -> None:
    """Passing the dict json.loads gave says to pass the text itself."""
    with pytest.raises(UsageError, match="already decoded"):
        RunState.from_json({})  # type: ignore[arg-type]


@pytest.mark.parametrize("messages", [b"x", bytearray(b"x"), memoryview(b"x")])
def test_initial_state_refuses_binary_messages(messages: Any) -> None:
    """initial_state(b'x') is a UsageError about the messages, not 'message 0: expected a Message, got int'."""
    with pytest.raises(UsageError, match=r"initial_state\(\): messages must be a prompt.*decode"):
        initial_state(messages, run_id="r")


def test_text_and_bytes_documents_still_load() -> None:
    """The loaders still take str, bytes and bytearray."""
    text = initial_state("x", run_id="r").to_json()
    state = RunState.from_json(text)
    assert RunState.from_json(text.encode()) == state
    assert RunState.from_json(bytearray(text.encode())) == state


def test_a_document_with_a_byte_order_mark_loads_as_text_and_as_bytes() -> None:
    """A leading byte order mark is dropped from str as from bytes: a file Notepad saved, read
    with encoding="utf-8", said "not JSON: Expecting value" without naming the mark."""
    from toolfold.runtime import events_from_json, events_to_json

    text = initial_state("x", run_id="r").to_json()
    state = RunState.from_json(text)
    assert RunState.from_json("\ufeff" + text) == state
    assert RunState.from_json(b"\xef\xbb\xbf" + text.encode()) == state
    log = events_to_json(state.log)
    assert events_from_json("\ufeff" + log) == events_from_json(log)


@pytest.mark.parametrize("script", ["hello", b"hi", None, 5, {"text": "hi"}])
def test_scripted_model_refuses_a_script_that_is_no_list_of_entries(script: Any) -> None:
    """ScriptedModel('hello') / (None) is a UsageError saying the script is a list of entries."""
    from toolfold.testing import ScriptedModel

    with pytest.raises(
        UsageError, match=r"ScriptedModel\(script\): the script is a list of entries"
    ):
        ScriptedModel(script)


@pytest.mark.parametrize(
    ("script", "advice"),
    [
        ("hello", "for one answer, write ScriptedModel(['hello'])"),
        (None, "each entry is text (a str), a tool call"),
        ({"a": 1}, "each entry is text (a str), a tool call"),
        (5, "each entry is text (a str), a tool call"),
    ],
)
def test_scripted_model_suggests_a_list_only_of_a_valid_entry(script: Any, advice: str) -> None:
    """Only a value that is an entry is told to be wrapped in a list (ScriptedModel(None)
    suggested ScriptedModel([None]), which is refused in its turn); any other is told
    what an entry is."""
    from toolfold.testing import ScriptedModel

    with pytest.raises(UsageError) as raised:
        ScriptedModel(script)
    assert advice in str(raised.value)
    if "for one answer" in str(raised.value):
        ScriptedModel([script])  # (the advice works)


def test_scripted_model_takes_lists_tuples_and_iterators() -> None:
    """Any iterable of entries (not text) is still a script."""
    from toolfold.testing import ScriptedModel

    assert ScriptedModel(["a", "b"]).remaining == 2
    assert ScriptedModel(("a",)).remaining == 1
    assert ScriptedModel(iter(["a", "b", "c"])).remaining == 3


def _tool_spec(**changes: Any) -> Any:
    return ToolSpec(ToolDefinition("a"), **changes)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: _tool_spec(approval="sometimes"), r"ToolSpec 'a': approval: expected one of"),
        (lambda: _tool_spec(has_function="yes"), r"ToolSpec 'a': has_function: expected True"),
        (
            lambda: ToolDefinition("a", parameters=[1]),
            r"ToolDefinition 'a': parameters: expected a JSON Schema object \(a mapping\), got list",
        ),
        (
            lambda: ToolDefinition(5),
            r"ToolDefinition 5: name: expected a str, got int 5",
        ),
        (
            lambda: ToolDefinition("a", strict="yes"),
            r"ToolDefinition 'a': strict: expected True, False or None",
        ),
        (
            lambda: OutputSpec("o", [1]),
            r"OutputSpec 'o': schema: expected a JSON Schema object",
        ),
        (
            lambda: RunConfig(tool_choice=5),
            r"RunConfig\.tool_choice: expected a str or None, got int 5",
        ),
        (lambda: RunConfig(model=5), r"RunConfig\.model: expected a str or None"),
        (
            lambda: RunConfig(auto_execute_tools="no"),
            r"RunConfig\.auto_execute_tools: expected True or False",
        ),
        (
            lambda: RunConfig(reset_tool_choice=None),
            r"RunConfig\.reset_tool_choice: expected True or False",
        ),
        (
            lambda: RunConfig(output={"type": "object"}),
            r"RunConfig\.output: expected an OutputSpec",
        ),
        (lambda: RunConfig(tools=["a"]), r"RunConfig\.tools\[0\]: expected a ToolSpec"),
        (
            lambda: RunConfig(settings={1: "a"}),
            r"RunConfig\.settings: a setting's name must be a str",
        ),
        (
            lambda: RunConfig(stop_when=[lambda s: True]),
            r"RunConfig\.stop_when\[0\]: expected a MaxSteps",
        ),
    ],
)
def test_hand_built_config_parts_refuse_what_would_not_load_back(build: Any, message: str) -> None:
    """A RunConfig part whose JSON would not load back (or load back different) is a UsageError naming the field."""
    with pytest.raises(UsageError, match=message):
        build()


def test_a_model_class_is_refused_naming_the_class() -> None:
    """Agent(TestModel) (the class) is a UsageError asking for an instance, not a run failing at its first call."""
    from toolfold import Agent
    from toolfold.testing import TestModel

    with pytest.raises(UsageError, match=r"got the class TestModel; pass an instance"):
        Agent(TestModel)  # type: ignore[arg-type]


def test_valid_hand_built_config_parts_round_trip() -> None:
    """A config with every field set by hand saves and loads equal."""
    config = RunConfig(
        model="openai:gpt-4o-mini",
        instructions="Be brief.",
        tools=[
            ToolSpec(
                ToolDefinition("a", "A.", strict=True), has_function=False, approval="predicate"
            )
        ],
        tool_choice="a",
        reset_tool_choice=False,
        output=OutputSpec("o", {"type": "object"}, strict=False),
        settings={"temperature": 0.1},
        auto_execute_tools=False,
        stop_when=[max_steps(2)],
    )
    state = initial_state("x", config, run_id="r")
    assert RunState.from_json(state.to_json()) == state


@pytest.mark.parametrize("damaged", [[], [1], "x"])
def test_a_config_that_is_no_mapping_is_refused_with_its_path(damaged: Any) -> None:
    """A document with "config": [] is a SerializationError at $.config, not a state with the default config."""
    import json

    from toolfold import SerializationError

    config = RunConfig(instructions="Be nice", max_steps=3)
    data = json.loads(initial_state("x", config, run_id="r").to_json())
    data["config"] = damaged
    data["log"][0]["config"] = damaged
    with pytest.raises(SerializationError) as caught:
        RunState.from_json(json.dumps(data))
    message = str(caught.value)
    assert f"expected a mapping, got {type(damaged).__name__} @ $.config" in message
    assert "@ $.log[0].config" in message


def test_a_message_or_usage_that_is_no_mapping_is_refused_with_its_path() -> None:
    """Any record of the document given as a list names its path ("expected a mapping")."""
    import json

    from toolfold import SerializationError

    data = json.loads(initial_state("x", run_id="r").to_json())
    data["usage"] = []
    with pytest.raises(SerializationError, match=r"expected a mapping, got list @ \$\.usage"):
        RunState.from_json(json.dumps(data))


def test_a_bytearray_signing_key_is_its_bytes() -> None:
    """A bytearray key signs and checks as the bytes it holds, not as a list of ints."""
    state = initial_state("x", run_id="r")
    text = state.to_json(key=bytearray(b"secret"))
    assert text == state.to_json(key=b"secret")
    assert RunState.from_json(text, key=bytearray(b"secret")) == state
    assert RunState.from_json(text, key=[bytearray(b"old"), bytearray(b"secret")]) == state


def test_a_memoryview_signing_key_is_its_bytes() -> None:
    """A memoryview key signs and checks as the bytes it holds, not as a list of ints."""
    state = initial_state("x", run_id="r")
    text = state.to_json(key=memoryview(b"secret"))
    assert text == state.to_json(key=b"secret")
    assert RunState.from_json(text, key=memoryview(b"secret")) == state
    assert RunState.from_json(text, key=[b"old", memoryview(b"secret")]) == state


def test_a_dict_signing_key_is_refused() -> None:
    """key={'a': 1} is a UsageError naming the dict, not a key list of its keys."""
    state = initial_state("x", run_id="r")
    with pytest.raises(UsageError, match=r"key: a signing key is str or bytes .*got dict"):
        state.to_json(key={"a": 1})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="got dict"):
        RunState.from_json(state.to_json(key="a"), key={"a": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize("reason", [5, None, b"no"])
def test_a_denied_reason_that_is_not_text_is_refused_at_resume(reason: Any) -> None:
    """Denied(5) at resume is a UsageError naming the call (as {cid: 1} is), not an InvalidEventError."""
    from toolfold import Agent, Denied, tool
    from toolfold.testing import ScriptedModel

    ran: list[str] = []

    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file.

        Args:
            path: The file to delete.
        """
        ran.append(path)
        return "deleted"

    agent = Agent(
        ScriptedModel([ScriptedModel.call("delete_file", {"path": "a"}), "ok"]),
        tools=[delete_file],
    )
    first = agent.run("go")
    call_id = first.pending_approvals[0].id
    with pytest.raises(UsageError, match=rf"approval for call '{call_id}': Denied\(reason\) takes"):
        agent.resume(first.state, approvals={call_id: Denied(reason)})
    assert ran == []
    assert agent.resume(first.state, approvals={call_id: Denied("no")}).finish_reason == "stop"


def test_an_agent_file_naming_a_model_class_is_refused() -> None:
    """model = "toolfold.testing:TestModel" (a class) is an AgentFileError naming the path, not an agent that cannot run."""
    from toolfold import AgentFileError
    from toolfold.files import loads

    text = '[agents.main]\nmodel = "toolfold.testing:TestModel"\n'
    with pytest.raises(AgentFileError, match="is not a model string nor a Model object"):
        loads(text)
