"""What a run takes as its prompt: text, messages, role/content dicts; anything else refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolfold import Agent, Message, UsageError, generate_text, resume
from toolfold.runtime import ModelRequest
from toolfold.testing import FunctionModel, TestModel


def _echoing() -> tuple[Agent, list[list[tuple[str, str]]]]:
    seen: list[list[tuple[str, str]]] = []

    def reply(request: ModelRequest) -> str:
        seen.append([(m.role, m.text) for m in request.messages])
        return "ok"

    return Agent(FunctionModel(reply)), seen


def test_one_role_content_dict_is_one_message() -> None:
    """A lone {'role', 'content'} dict is sent as that message, as it would be in a list."""
    agent, seen = _echoing()
    agent.run({"role": "user", "content": "hi"})
    agent.run({"role": "system", "content": "be brief"})
    assert seen == [[("user", "hi")], [("system", "be brief")]]


def test_a_dict_without_content_is_refused_naming_its_keys() -> None:
    """A dict with a mistyped key is refused, not sent as an empty user message."""
    agent, seen = _echoing()
    with pytest.raises(UsageError, match=r"needs a 'content' key .* got keys \['text'\]"):
        agent.run([{"text": "Where is my order A17?"}])
    with pytest.raises(UsageError, match=r"got keys \['role', 'text'\]"):
        agent.run({"role": "user", "text": "hi"})
    assert seen == []


_CALL = {"id": "call_1", "type": "function", "function": {"name": "get", "arguments": "{}"}}


@pytest.mark.parametrize(
    ("prompt", "named"),
    [
        (
            {"role": "user", "content": "hi", "name": "bob"},
            "'name' too: a message holds its role and its parts, nothing else, so it would be lost",
        ),
        (
            [
                Message.user("a"),
                {"role": "assistant", "content": "", "tool_calls": [_CALL], "refusal": None},
            ],
            "'tool_calls' too: a message holds its role and its parts, nothing else, so it "
            "would be lost",
        ),
        (
            {"role": "tool", "content": "42", "tool_call_id": "call_1", "name": "get"},
            "'name', 'tool_call_id' too: a message holds its role and its parts, nothing "
            "else, so they would be lost",
        ),
    ],
)
def test_a_dict_with_keys_besides_role_and_content_is_refused_naming_them(
    prompt: Any, named: str
) -> None:
    """A dict's other keys ('name', 'tool_calls'...) are refused by name, not dropped from what is sent."""
    agent, seen = _echoing()
    with pytest.raises(UsageError) as raised:
        agent.run(prompt)
    # (a list's dict is named by its index: the list's second item here)
    where = "" if isinstance(prompt, dict) else f"{_LIST}: at index 1, "
    assert str(raised.value) == (
        f"{where}a message dict takes only 'role' and 'content', got {named} (for tool calls, "
        "results, images or files, build a Message)"
    )
    assert seen == []


_LIST = "a prompt's list must hold Messages or {'role', 'content'} dicts"


@pytest.mark.parametrize(
    ("item", "says"),
    [
        (
            {"role": "user"},
            "a message dict needs a 'content' key (its text) and may have a "
            "'role', got keys ['role']",
        ),
        ({"content": 1}, "a message dict's 'content' must be a str, got int"),
        (
            {"role": "tool", "content": "x"},
            "a message dict must have role system, user or assistant, got 'tool'",
        ),
    ],
)
@pytest.mark.parametrize("run", ["run", "generate_text"])
def test_a_bad_dict_in_a_prompt_s_list_is_named_by_its_index(
    item: dict[str, Any], says: str, run: str
) -> None:
    """The error for a dict of a prompt's list names the list and the dict's index (it said
    only 'a message dict needs...', whichever of the messages it was)."""
    prompt = [Message.user("a"), item]
    go = Agent(TestModel()).run if run == "run" else lambda p: generate_text(TestModel(), p)
    with pytest.raises(UsageError) as raised:
        go(prompt)
    assert str(raised.value) == f"{_LIST}: at index 1, {says}"


@pytest.mark.parametrize("given", ["response", "state"])
@pytest.mark.parametrize("run", ["run", "arun", "stream", "history", "generate_text"])
def test_a_response_or_state_as_the_prompt_is_told_to_pass_its_messages(
    given: str, run: str
) -> None:
    """generate_text(model, response) and agent.run(response) (a state too) say to pass its
    .messages, as history=response does (they named the type alone), and how to go on with
    the run: an agent's run by agent.resume (it said resume(...), the module's function,
    which needs the model and tools again), generate_text's by that function."""
    response = Agent(TestModel()).run("hi")
    value = response if given == "response" else response.state
    state = "response.state" if given == "response" else "state"
    go: Any = {
        "run": Agent(TestModel()).run,
        "arun": lambda p: asyncio.run(Agent(TestModel()).arun(p)),
        "stream": lambda p: list(Agent(TestModel()).stream(p)),
        "history": lambda p: Agent(TestModel()).run(p, history=[Message.user("a")]),
        "generate_text": lambda p: generate_text(TestModel(), p),
    }[run]
    with pytest.raises(UsageError) as raised:
        go(value)
    resume = (
        f"resume({state}, model=..., tools=...)"
        if run == "generate_text"
        else (f"agent.resume({state})")
    )
    assert str(raised.value).endswith(
        f", got a {type(value).__name__}: pass its messages, {given}.messages (to go on with "
        f"the run itself: {resume})"
    )


@pytest.mark.parametrize("given", ["response", "state"])
@pytest.mark.parametrize("run", ["resume", "aresume", "resume_stream", "module_resume"])
def test_a_response_or_state_as_a_resumes_message_is_told_how_to_go_on_with_its_run(
    given: str, run: str
) -> None:
    """agent.resume(state, message=response) says to go on by agent.resume (it said
    resume(...), the module's function, which needs the model and tools again), the module's
    resume(message=...) by that function."""
    agent = Agent(TestModel())
    response = agent.run("hi")
    value = response if given == "response" else response.state
    state = "response.state" if given == "response" else "state"
    go: Any = {
        "resume": lambda m: agent.resume(response.state, message=m),
        "aresume": lambda m: asyncio.run(agent.aresume(response.state, message=m)),
        "resume_stream": lambda m: list(agent.resume_stream(response.state, message=m)),
        "module_resume": lambda m: resume(response.state, model=TestModel(), message=m),
    }[run]
    with pytest.raises(UsageError) as raised:
        go(value)
    again = (
        f"resume({state}, model=..., tools=...)"
        if run == "module_resume"
        else (f"agent.resume({state})")
    )
    assert str(raised.value).endswith(
        f", got a {type(value).__name__}: pass its messages, {given}.messages (to go on with "
        f"the run itself: {again})"
    )


def test_a_dicts_other_keys_that_are_none_or_empty_are_ignored() -> None:
    """An OpenAI SDK model_dump() (refusal, tool_calls... None) or tool_calls=[] loses nothing: it is sent."""
    agent, seen = _echoing()
    dumped = {
        "content": "hello",
        "role": "assistant",
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": None,
    }
    agent.run([{"role": "user", "content": "hi"}, dumped, {"role": "user", "content": "again"}])
    agent.run(
        [{"role": "assistant", "content": "x", "tool_calls": [], "name": ""}, Message.user("y")]
    )
    assert seen == [
        [("user", "hi"), ("assistant", "hello"), ("user", "again")],
        [("assistant", "x"), ("user", "y")],
    ]


def test_a_dict_whose_content_is_not_text_is_refused_naming_its_type() -> None:
    """A dict whose content is not a str says so, naming the type it got."""
    agent, _ = _echoing()
    with pytest.raises(UsageError, match="'content' must be a str, got list"):
        agent.run([{"role": "user", "content": ["hi"]}])


@pytest.mark.parametrize(
    ("prompt", "named"),
    [
        (42, "int"),
        (None, "NoneType"),
        (b"hi", "bytes"),
        (bytearray(b"hi"), "bytearray"),
        (memoryview(b"hi"), "memoryview"),
    ],
)
def test_a_prompt_of_another_type_is_a_usage_error_naming_it(prompt: Any, named: str) -> None:
    """A prompt that is no text, message or dict (binary data too) is a UsageError naming its type."""
    agent, seen = _echoing()
    with pytest.raises(UsageError) as raised:
        agent.run(prompt)
    assert str(raised.value) == (
        "a prompt must be a str, a Message, a {'role', 'content'} dict or a list of "
        f"Messages or dicts, got {named}"
    )
    assert seen == []


def test_a_list_of_str_is_refused_naming_the_item_and_its_index() -> None:
    """A list of str is no prompt: the error says what the list must hold and which item is not."""
    agent, seen = _echoing()
    with pytest.raises(UsageError) as raised:
        agent.run([Message.user("a"), "hi", "there"])  # type: ignore[list-item]
    assert str(raised.value) == (
        "a prompt's list must hold Messages or {'role', 'content'} dicts, got str at index 1"
    )
    assert seen == []


def test_texts_messages_and_dicts_mix_in_a_list() -> None:
    """A list may mix Messages and role/content dicts; a role defaults to user."""
    agent, seen = _echoing()
    agent.run([Message.system("sys"), {"content": "q"}, {"role": "assistant", "content": "a"}])
    assert seen == [[("system", "sys"), ("user", "q"), ("assistant", "a")]]
