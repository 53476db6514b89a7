"""Every raise docs/errors.md documents happens, with exactly the documented class.

The table "Every documented raise" in docs/errors.md is parsed; each row's
situation has a trigger below. A row without a trigger, or a trigger without a
row, fails; so does a toolfold error class another page names that the table
does not list.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import toolfold
from toolfold import Agent, Denied, RunState, Tool, ToolResultPart, generate_text, resume, tool
from toolfold.runtime import (
    ApprovalGranted,
    ToolDefinition,
    ToolSpec,
    fork,
    initial_state,
    max_steps,
    next_effect,
    reduce,
    token_budget,
)
from toolfold.testing import ScriptedModel, TestModel

ROOT = Path(__file__).resolve().parents[1]
ERRORS_MD = ROOT / "docs" / "errors.md"
_ROW = re.compile(r"^\| (?P<situation>.+?) \| `(?P<error>\w+)` \|$", re.MULTILINE)

call = ScriptedModel.call


def documented() -> dict[str, str]:
    """The table's rows: situation -> error class name."""
    text = ERRORS_MD.read_text(encoding="utf-8")
    table = text.split("## Every documented raise", 1)[1]
    return {m["situation"]: m["error"] for m in _ROW.finditer(table)}


# --- triggers ------------------------------------------------------------------


def _aclose_off_the_sessions_loop() -> None:
    import asyncio

    model = toolfold.model(
        "openai:m", base_url="http://127.0.0.1:9/v1", api_key="sk-x", http="aiohttp"
    )
    owner = asyncio.new_event_loop()
    try:
        owner.run_until_complete(model._transport._sender.clients.get_async())  # no request sent
        try:
            asyncio.run(model.aclose())
        finally:
            owner.run_until_complete(model.aclose())
    finally:
        owner.close()


def _injected_session_off_its_loop() -> None:
    import asyncio

    import aiohttp

    async def make() -> aiohttp.ClientSession:
        return aiohttp.ClientSession()

    owner = asyncio.new_event_loop()
    session = owner.run_until_complete(make())
    try:
        model = toolfold.model(
            "openai:m", base_url="http://127.0.0.1:9/v1", api_key="sk-x", http_client=session
        )
        asyncio.run(_arun(model))
    finally:
        owner.run_until_complete(session.close())
        owner.close()


async def _arun(model: Any) -> None:
    await Agent(model).arun("hi")  # refused before anything is sent


class _NoSchema:
    """A class toolfold has no schema for."""

    def __init__(self, x: int) -> None:
        self.x = x


def _undefinable_parameter() -> None:
    def f(thing: _NoSchema) -> None:
        """F."""

    tool(f)


def _duplicate_names() -> None:
    def a() -> None:
        """A."""

    generate_text(ScriptedModel(["x"]), "go", tools=[tool(a), tool(name="a")(lambda: None)])


def _invalid_explicit_schema() -> None:
    Tool("t", "T.", {"type": "object", "properties": {"x": {"type": "nope"}}})


def _nonblocking_with_timeout() -> None:
    @tool(blocking=False, timeout=1.0)
    def f() -> None:
        """F."""


def _async_approval_predicate() -> None:
    async def check(call: Any, state: Any) -> bool:
        return False

    @tool(requires_approval=check)
    def f() -> None:
        """F."""


def _strict_loss() -> None:
    from toolfold import compile_tool

    schema = {"type": "object", "properties": {"x": {"type": "string", "format": "email"}}}
    compile_tool(Tool("t", "T.", schema), "openai-strict", strict=True)


def _add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _argument_json() -> None:
    tool(_add).validate_arguments("{not json")


def _argument_schema() -> None:
    tool(_add).validate_arguments({"a": "five"})


def _outside_asyncio() -> None:
    # (stepped by hand, with no event loop running: where trio would run it)
    Agent(TestModel()).arun("hi").send(None)


def _zero_steps() -> None:
    for helper in (max_steps, token_budget):
        with pytest.raises(toolfold.ToolfoldError) as info:
            helper(0)
        assert type(info.value) is toolfold.UsageError
    generate_text(ScriptedModel(["x"]), "go", max_steps=0)


def _output_type_value() -> None:
    generate_text(ScriptedModel(["x"]), "go", output_type=5)


def _negative_retries() -> None:
    generate_text(ScriptedModel(["x"]), "go", output_retries=-1)


def _bad_tool_choice() -> None:
    generate_text(ScriptedModel(["x"]), "go", tools=[_add], tool_choice="nope")


def _observer_no_function() -> None:
    Agent(ScriptedModel(["x"])).run("go", on_step=5)  # type: ignore[arg-type]


def _async_observer() -> None:
    async def observe(event: object) -> None:
        return None

    Agent(ScriptedModel(["x"])).run("go", on_event=observe)


def _empty_run_id() -> None:
    Agent(ScriptedModel(["x"])).run("go", run_id="")


def _bad_role() -> None:
    generate_text(ScriptedModel(["x"]), [{"role": "tool", "content": "hi"}])


def _run_option_to_agent() -> None:
    Agent(ScriptedModel(["x"]), deps={"user": "ann"})


def _not_a_prompt() -> None:
    generate_text(ScriptedModel(["x"]), 42)  # type: ignore[arg-type]


@tool(requires_approval=True)
def _delete(path: str) -> str:
    """Delete a file."""
    return path


def _waiting() -> tuple[Agent[Any, Any], Any]:
    agent = Agent(ScriptedModel([call("_delete", {"path": "a"}), "done"]), tools=[_delete])
    return agent, agent.run("go")


def _bad_approval() -> None:
    agent, first = _waiting()
    agent.resume(first.state, approvals={first.pending_approvals[0].id: "yes"})


def _denied_without_text() -> None:
    agent, first = _waiting()
    agent.resume(first.state, approvals={first.pending_approvals[0].id: Denied(5)})  # type: ignore[arg-type]


def _stop_condition_argument() -> None:
    max_steps("3")  # type: ignore[arg-type]


def _bad_config_part() -> None:
    ToolSpec(ToolDefinition("a"), approval="sometimes")  # type: ignore[arg-type]


def _load_no_text() -> None:
    RunState.from_json(None)  # type: ignore[arg-type]


def _dict_signing_key() -> None:
    initial_state("x", run_id="r").to_json(key={"a": 1})  # type: ignore[arg-type]


def _one_text_script() -> None:
    ScriptedModel("hello")


def _model_class() -> None:
    Agent(TestModel)  # type: ignore[arg-type]


def _none_tool() -> None:
    Agent(TestModel(), tools=[None])


def _unapplied_decorator() -> None:
    Agent(TestModel(), tools=[tool(name="x")])  # type: ignore[list-item]


def _output_type_without_schema() -> None:
    import socket

    Agent(TestModel(), output_type=socket.socket)


def _history_response() -> None:
    agent = Agent(ScriptedModel(["a", "b"]))
    agent.run("y", history=agent.run("x"))  # type: ignore[arg-type]


def _misspelt_keyword() -> None:
    Agent(TestModel(), instruction="Answer in French.")


def _other_library_keyword() -> None:
    generate_text(TestModel(), "x", system_prompt="Answer in French.")


def _settings_not_a_mapping() -> None:
    Agent(TestModel(), settings=5)  # type: ignore[arg-type]


def _model_option_as_setting() -> None:
    Agent(TestModel(), api_key="sk-not-a-key")


def _call_tools_none() -> None:
    TestModel(call_tools=None)  # type: ignore[arg-type]


def _one_handoff() -> None:
    Agent(TestModel(), handoffs="billing")


def _ambiguous_call_id() -> None:
    @tool(requires_approval=True)
    def charge(amount: int) -> str:
        """Charge a card.

        Args:
            amount: How much.
        """
        return "charged"

    def cashier(name: str, call_id: str = "call_0") -> Agent:
        script = [ScriptedModel.call("charge", {"amount": 1}, id=call_id), "paid"]
        return Agent(ScriptedModel(script), name=name, tools=[charge])

    # The top run's call and a sub-run's call under one id, then one call's id
    # that is another call's path (top-run "a/b", call "b" in the sub-run of "a").
    for top_id, sub_id, key in (("call_0", "call_0", "call_0"), ("a/b", "b", "a/b")):
        mixed = [
            ScriptedModel.call("charge", {"amount": 5}, id=top_id),
            ScriptedModel.call("one", {"input": "pay"}, id="a" if key == "a/b" else "sub"),
        ]
        lead = Agent(
            ScriptedModel([mixed, "done"]), tools=[charge, cashier("one", sub_id).as_tool()]
        )
        waiting = lead.run("pay")
        with pytest.raises(toolfold.UsageError, match="names 2 calls"):
            lead.resume(waiting.state, approvals={key: True})
    # Calls of two sub-runs under one id.
    both = [
        ScriptedModel.call("one", {"input": "pay"}, id="a"),
        ScriptedModel.call("two", {"input": "pay"}, id="b"),
    ]
    lead = Agent(
        ScriptedModel([both, "done"]), tools=[cashier("one").as_tool(), cashier("two").as_tool()]
    )
    waiting = lead.run("pay")
    lead.resume(waiting.state, approvals={"call_0": True})


def _unknown_handoff_name() -> None:
    Agent(ScriptedModel(["hi"]), name="billing", handoffs=["triage"]).run("hello")


def _workflow_handoff() -> None:
    from toolfold import Sequence

    flow = Sequence(Agent(ScriptedModel(["x"]), name="a"))
    Agent(ScriptedModel(["x"]), name="b", handoffs=[flow])  # type: ignore[list-item]


def _resume_without_tools() -> None:
    _, first = _waiting()
    resume(first.state, model=ScriptedModel(["done"]), tools=[])


def _resume_at_max_steps() -> None:
    model = ScriptedModel([call("_add", {"a": 1, "b": 2})] * 3)
    first = generate_text(model, "go", tools=[_add], max_steps=2)
    with pytest.raises(toolfold.UsageError):
        resume(first.state, model=model, tools=[_add], max_steps=1)
    resume(first.state, model=model, tools=[_add])


def _resume_with_other_options() -> None:
    agent, first = _waiting()
    agent.evolve(instructions="Be terse.").resume(first.state)


def _resume_a_changed_sub_agent() -> None:
    def lead(instructions: str) -> Agent[Any, Any]:
        model = ScriptedModel([call("_delete", {"path": "a"}), "done"])
        sub = Agent(model, name="sub", instructions=instructions, tools=[_delete])
        return Agent(ScriptedModel([call("sub", {"input": "go"})]), tools=[sub.as_tool()])

    first = lead("Delete.").run("go")
    lead("Be terse.").resume(first.state)


def _cleared_call_now_needs_approval() -> None:
    def wipe(path: str) -> str:
        """Wipe (v1)."""
        raise ValueError("disk busy")

    with pytest.raises(toolfold.ToolExecutionError) as info:
        generate_text(
            ScriptedModel([call("wipe", {"path": "/"})]),
            "go",
            tools=[wipe],
            on_tool_error="raise",
        )
    state = info.value.state

    @tool(name="wipe", requires_approval=True)
    def wipe_v2(path: str) -> str:
        """Wipe (v2)."""
        return path

    resume(state, model=ScriptedModel(["done"]), tools=[wipe_v2])


def _result_under_another_key() -> None:
    model = ScriptedModel([[call("a", {}, id="c1"), call("b", {}, id="c2")], "done"])
    manual = [Tool(n, "Manual.", {"type": "object", "properties": {}}) for n in "ab"]
    first = generate_text(model, "go", tools=manual)
    swapped = {"c1": ToolResultPart("c2", "b", "x"), "c2": ToolResultPart("c1", "a", "y")}
    resume(first.state, model=model, tools=manual, tool_results=swapped)


def _stream_out_of_order() -> None:
    stream = Agent(ScriptedModel(["hi"])).stream("go")
    with pytest.raises(toolfold.UsageError):
        _ = stream.response
    list(stream)
    from toolfold.testing import FunctionModel

    def fail(request: Any) -> Any:
        raise RuntimeError("down")

    failed = Agent(FunctionModel(fail)).stream("go")
    with pytest.raises(toolfold.RunError):
        list(failed)
    with pytest.raises(toolfold.UsageError, match=r"failed with RunError.*`\.state`"):
        _ = failed.response
    with pytest.raises(toolfold.UsageError, match=r"failed with RunError.*`\.state`"):
        list(failed)
    list(stream)


def _script_exhausted() -> None:
    generate_text(ScriptedModel([]), "go")


def _no_state() -> None:
    reduce(None, ApprovalGranted("c1"))  # type: ignore[arg-type]


def _resume_a_response() -> None:
    Agent(ScriptedModel(["x"])).resume(generate_text(ScriptedModel(["x"]), "go"))  # type: ignore[arg-type]


def _fork_without_point() -> None:
    fork(generate_text(ScriptedModel(["x"]), "go").state)


class _Stubborn:
    """A tool source whose close fails."""

    name = "stubborn"

    def open(self) -> None: ...

    def close(self) -> None:
        raise OSError("could not stop the server")

    def tools(self) -> list[Tool[..., Any]]:
        return []


def _source_close_fails() -> None:
    Agent(ScriptedModel(["done"]), tools=[_Stubborn()]).run("hi")


def _retries_exceeded() -> None:
    @tool(max_retries=1)
    def flaky() -> None:
        """Fail."""
        raise ValueError("no")

    generate_text(ScriptedModel([call("flaky", {})] * 3), "go", tools=[flaky])


def _output_never_fits() -> None:
    generate_text(ScriptedModel(["not a number"] * 4), "go", output_type=int)


def _stored_output_refused() -> None:
    import attrs

    def odd(_: object, __: object, value: int) -> None:
        if value % 2 == 0:
            raise ValueError("even")

    @attrs.define
    class Out:
        n: int = attrs.field(validator=odd)

    state = RunState.from_json(
        Agent(ScriptedModel(['{"n": 3}']), output_type=Out).run("go").state.to_json()
    )
    state = attrs.evolve(state, output={"n": 4})  # (what a validator changed since would refuse)
    Agent(ScriptedModel([]), output_type=Out).resume(state)


@dataclasses.dataclass
class _Node:
    kids: list[_Node]


def _output_cannot_compile() -> None:
    from toolfold.adapters.anthropic import AnthropicModel

    model = AnthropicModel("claude-test", api_key="k" * 20, base_url="http://127.0.0.1:9")
    generate_text(model, "go", output_type=_Node)


def _tool_raises() -> None:
    def boom() -> None:
        """Boom."""
        raise ValueError("boom")

    generate_text(ScriptedModel([call("boom", {})]), "go", tools=[boom], on_tool_error="raise")


def _model_raises() -> None:
    def reply(request: Any) -> str:
        raise OSError("socket gone")

    from toolfold.testing import FunctionModel

    generate_text(FunctionModel(reply), "go")


def _observer_raises() -> None:
    def observer(event: Any) -> None:
        raise KeyError(event.kind)

    generate_text(ScriptedModel(["x"]), "go", on_event=observer)


def _workflow_function_raises() -> None:
    def until(value: Any) -> bool:
        raise ValueError(value)

    toolfold.Loop(Agent(ScriptedModel(["x"]), name="a"), until=until).run("go")


def _unknown_answer() -> None:
    waiting = Agent(ScriptedModel([ScriptedModel.call("_asked", {})]), tools=[_asked])
    waiting.resume(waiting.run("go").state, approvals={"nope": True})


def _answered_again() -> None:
    agent = Agent(ScriptedModel([ScriptedModel.call("_asked", {}), "done"]), tools=[_asked])
    waiting = agent.run("go").state
    done = agent.resume(waiting, approvals={"call_1_0": True})
    agent.resume(done.state, approvals={"call_1_0": True})


def _foreign_key() -> None:
    agent = Agent(ScriptedModel([ScriptedModel.call("_asked", {}), "done"]), tools=[_asked])
    other = agent.run("go", run_id="another").state
    foreign = toolfold.approval_key(other, "call_1_0")
    agent = Agent(ScriptedModel([ScriptedModel.call("_asked", {}), "done"]), tools=[_asked])
    done = agent.resume(agent.run("go").state, approvals={"call_1_0": True})
    agent.resume(done.state, approvals={foreign: True})


@tool(requires_approval=True)
def _asked() -> str:
    """Needs an approval."""
    return "ok"


def _not_started() -> None:
    from toolfold.runtime.core._reducer import blank_state

    next_effect(blank_state())


def _phase_forbids() -> None:
    reduce(initial_state("hi", run_id="r"), ApprovalGranted("c1"))


def _contradicting_event() -> None:
    _, first = _waiting()
    reduce(first.state, ApprovalGranted("unknown"))


def _damaged_document() -> None:
    RunState.from_json('{"phase": 3}')


def _unsigned_document() -> None:
    state = generate_text(ScriptedModel(["hi"]), "go").state
    RunState.from_json(state.to_json(), key="signing-key")


def _empty_signing_key() -> None:
    generate_text(ScriptedModel(["hi"]), "go").state.to_json(key="")


def _agent_file_problems() -> None:
    from toolfold.files import loads

    text = """
[agents.lead]
model = "openai:gpt-4o-mini"
colour = "red"
max_steps = "ten"
tools = ["no_such_module_for_toolfold:f", "math:pi", { agent = "lead" }]
handoffs = ["ghost", "lead"]
"""
    with pytest.raises(toolfold.AgentFileError) as info:
        loads(text, name="lead.toml")
    assert len(info.value.problems) == 6, info.value.problems
    raise info.value


def _unwritable_agent() -> None:
    def shout(text: str) -> str:
        """Shout."""
        return text.upper()

    from toolfold.testing import TestModel, override_models

    with override_models(TestModel()):
        agent = Agent("openai:gpt-4o-mini", tools=[shout])
    agent.to_dict()


def _malformed_body() -> None:
    from toolfold.adapters.openai_chat import parse_response

    parse_response({"choices": 8}, "openai")


def _abnormal_finish() -> None:
    from toolfold.adapters.gemini import parse_response

    candidate = {"content": {"role": "model"}, "finishReason": "MALFORMED_FUNCTION_CALL"}
    parse_response({"candidates": [candidate]})


def _no_choices() -> None:
    from toolfold.adapters.openai_chat import DecoderState, decode_chunk

    decode_chunk(DecoderState("openai"), "[DONE]")


def _unknown_provider() -> None:
    toolfold.model("nope:some-model")


def _pickled_keyed_model() -> None:
    import pickle

    model = toolfold.model("openai:m", base_url="http://127.0.0.1:9/v1", api_key="sk-x")
    try:
        pickle.dumps(model)
    finally:
        model.close()


def _unpickled_older_model() -> None:
    import pickle

    saved = Path(__file__).parent / "adapters" / "saved" / "ollama_model_1711365d.pkl"
    pickle.loads(saved.read_bytes())


def _missing_key() -> None:
    # the test removes OPENAI_API_KEY from the environment first
    generate_text("openai:gpt-4o-mini", "go")


def _bad_model_option() -> None:
    toolfold.model("openai:gpt-4o-mini", api_key="sk-x", retry=-1)


def _status(status: int, body: str = "") -> Callable[[], None]:
    def trigger() -> None:
        from toolfold.adapters._http._http_errors import parse_error_body, status_error

        info = parse_error_body(status, body, {})
        raise status_error("groq", status, body, {}, info, "http://127.0.0.1/v1")

    return trigger


def _failure(exc: BaseException, *, streaming: bool = False) -> Callable[[], None]:
    def trigger() -> None:
        from toolfold.adapters._http._http_errors import transport_error

        raise transport_error("openai", exc, "http://127.0.0.1/v1", streaming=streaming)

    return trigger


def _not_an_event_stream() -> None:
    from toolfold.adapters._http._http_errors import not_an_event_stream
    from toolfold.adapters._http._sse import SSEDecoder

    decoder = SSEDecoder()  # what the transport's stream reads the answer with
    decoder.feed(b"<html>Please log in</html>")
    decoder.close()
    unread = decoder.unread()
    assert unread is not None
    raise not_an_event_stream(
        "openai", "http://127.0.0.1/v1", 200, {"content-type": "text/html"}, unread
    )


_WINDOW_FULL = (
    '{"error": {"message": "This model\'s maximum context length is 128000 tokens.",'
    ' "type": "invalid_request_error", "code": "context_length_exceeded"}}'
)
_TOOL_USE_FAILED = (
    '{"error": {"message": "Failed to call a function", "type": "invalid_request_error",'
    ' "code": "tool_use_failed", "failed_generation": "<function=x>"}}'
)


def _workflow_duplicate_steps() -> None:
    from toolfold import Sequence

    first = Agent(ScriptedModel(["a"]), name="writer")
    Sequence(first, first)


TRIGGERS: dict[str, Callable[[], None]] = {
    "`@tool` on a function with a parameter type that has no schema": _undefinable_parameter,
    "two tools of one run with the same name": _duplicate_names,
    "`None` or another value that is no function, `Tool` or tool source in `tools=` (of "
    "`Agent`, `evolve`, `generate_text`: the error names its place, `tools[1]`; for an agent or "
    "a workflow, it says to pass its `.as_tool()`)": _none_tool,
    "The decorator `tool(name=...)` returns, never applied to a function, in `tools=` "
    '(`tools=[tool(name="x")]`: the error names its place) or given to `tool()`': (
        _unapplied_decorator
    ),
    "an `output_type` with no JSON Schema (`socket.socket`: the error names `output_type=`)": (
        _output_type_without_schema
    ),
    "an explicit JSON Schema that is not valid": _invalid_explicit_schema,
    "`@tool(blocking=False, timeout=...)`": _nonblocking_with_timeout,
    "`@tool(requires_approval=...)` given an `async def` predicate, or one that cannot take "
    "`(call, state)`": _async_approval_predicate,
    "a workflow with two steps of one name, a step whose input type does not accept "
    "the previous step's output, or a step `timeout` that is not a positive number": (
        _workflow_duplicate_steps
    ),
    "`compile_tool(..., strict=True)` for a schema the dialect cannot express": _strict_loss,
    "an `output_type` whose schema the provider's structured output cannot express (a "
    "recursive type for Anthropic or an older Gemini model), named in the message": (
        _output_cannot_compile
    ),
    "argument text that is not JSON": _argument_json,
    "arguments that break the tool's schema": _argument_schema,
    '`max_steps=0`, `max_steps="3"` or `max_steps=None` (or `max_steps(0)`, `token_budget(0)`)': (
        _zero_steps
    ),
    "an async run (`arun`, an async `stream`, `aresume`, `agenerate_text`, a workflow's "
    "`arun`) begun outside an asyncio event loop: under trio (`anyio.run(..., "
    'backend="trio")` too), where the blocking API on a worker thread '
    "(`anyio.to_thread.run_sync`) works": _outside_asyncio,
    '`max_steps("3")`, `token_budget(True)`, `tool_called(None)` (a bound that is no number, '
    "a tool name that is no text: the error names the argument)": _stop_condition_argument,
    "a hand-built `RunConfig`, `ToolSpec`, `ToolDefinition` or `OutputSpec` with a field of the "
    'wrong type (`approval="sometimes"`, `parameters=[1]`, `tool_choice=5`: the error names '
    "the tool and the field)": _bad_config_part,
    "`RunState.from_json(None)` (or a number, or a dict already decoded; `from_json`, "
    "`events_from_json` alike: the error names `text`)": _load_no_text,
    "a signing key that is not str, bytes, bytearray, memoryview or a list of them (an int, None, a dict: "
    "the error names `key`)": _dict_signing_key,
    '`ScriptedModel("hello")` (one text, None, a dict: the script is a list of entries)': (
        _one_text_script
    ),
    "a model class where a model goes (`Agent(TestModel)`: pass an instance), or a value that "
    "is no model (`Agent(5)`, `Agent(None)`, `generate_text(5, ...)`, `toolfold.model(5)`; a "
    "model object needs a `name` and one of `request`, `request_sync`, `stream`, "
    "`stream_sync`)": _model_class,
    "a testing model given what it cannot use (`ScriptedModel.call(5, {})`, arguments that are "
    'not JSON, `FunctionModel("hello")`, an async `stream_function`, `TestModel(call_tools=None)`, '
    "`override_models(None)` or a model class; when it is called: a `stream_function` returning "
    "`None`, a `call_tools` name that is no tool of the request, "
    "an `override_models` function returning no model)": _call_tools_none,
    "a list parameter of `Agent(...)` or `agent.evolve(...)` (`generate_text`'s, `resume`'s "
    "`tools` and `stop_when` too) given one item "
    '(`handoffs="billing"`, which would be one handoff per letter, `handoffs=billing_agent`, '
    "`tools=get_weather`, `stop_when=condition`, or a mapping such as the AI SDK's "
    '`tools={"weather": weather}`: the error names the call, the parameter '
    "and says to pass a list)": _one_handoff,
    'an `on_event` or `on_step` that is no function (`on_step=5`, `on_event="print"`), given '
    "to a run, a stream, a resume or `generate_text`: refused when the run starts, before any "
    "model call or tool": _observer_no_function,
    'an empty `run_id=""` given to a run, a stream, `generate_text`, a workflow or `fork` (an id '
    "built from an empty key: a random one would lose the idempotency keys the caller meant): "
    "the error says to give a non-empty id or leave it out": _empty_run_id,
    "an async function (`async def`, or a partial or object whose `__call__` is one) given as "
    "`on_event`, `on_step` or a `stop_when` condition: a run calls them without awaiting, so "
    "the coroutine would never run (a condition's would stop the run at once); refused when the "
    "run starts (a condition when it is given), the error says to make it a plain def": (
        _async_observer
    ),
    "`output_retries=-1`": _negative_retries,
    'an `output_type` that is a value, not a type (`5`, `"str"`, an instance of a class)': (
        _output_type_value
    ),
    "a `tool_choice` that names no tool of the run (when the agent is made; with tool "
    "sources, when they are listed at the run's start, naming each source and the names its "
    "tools are sent as; the names it is near first), or is no text (the AI SDK's "
    '`{"type": "tool", "toolName": "weather"}`, a list: the error says what `tool_choice` '
    "takes, and for a dict naming a tool, `tool_choice='weather'`)": _bad_tool_choice,
    "a run's option given to `Agent(...)`, `agent.evolve(...)`, `generate_text` or "
    "`agenerate_text` where it would be a model setting (`prompt=`, `deps=`, `history=`, "
    "`run_id=`, `on_event=`, `on_step=`, `approvals=`..., or a name of the run's "
    "configuration the call does not take: `output=`, `config=`, `generate_text`'s "
    "`name=`...: the error names the call and says which method takes the option)": (
        _run_option_to_agent
    ),
    "an option of the model given to `Agent(...)`, `agent.evolve(...)`, `generate_text` or "
    "`agenerate_text` where it would be sent in every request body and stored in the state: a "
    "credential or client option (`api_key`, `base_url`, `http_client`...) as a keyword or in "
    "`settings={...}` (an agent file's `settings` too: its error says to give "
    "`load(..., model=...)` a model), another (`timeout=`, `retry=`, `headers=`...) as a bare "
    "keyword (in `settings={...}` it is a request body field, and taken); so is another "
    "library's name for one as a bare keyword (the OpenAI SDK's `extra_headers=`, "
    "`default_headers=`, `max_retries=`, `extra_query=`, its `organization=` and `project=` for "
    "an `openai:` or `openai-responses:` model only, AzureOpenAI's `api_version=`, "
    "`azure_ad_token=`, LiteLLM's `api_base=`: a header or token given so was sent in the body "
    "and stored in the state; generic names, `url=`, `key=`, `base=`, stay model settings): the "
    "error names the option, never its value, and shows "
    '`toolfold.model("provider:model", api_key=...)` with toolfold\'s option (`headers=`, '
    "`retry=`, `base_url=`, `headers={'OpenAI-Organization': ...}`; for a query parameter, an "
    "httpx client with `params=`), and `settings={...}` for a request body field of that name": (
        _model_option_as_setting
    ),
    "a run's `history=` that is no list of messages: a `Response` or a `RunState` (the error "
    "says to pass its `.messages`), a str, one dict, a number, or a list with an item that is "
    'neither a `Message` nor a `{"role", "content"}` dict (named with its index)': _history_response,
    "a keyword of `Agent(...)`, `agent.evolve(...)`, `generate_text` or `agenerate_text` that is "
    "no parameter of it but close to one (`instruction=`, `max_step=`, `on_tool_errors=`: sent "
    "as a model setting, the provider would get it in the request body while the run went "
    "without it): the error names each and the parameter meant, `did you mean instructions=?`; "
    "a provider's field of such a name goes in `settings={...}`. Provider request fields "
    "(`max_tokens`, `stop`, `top_p`, `seed`...) are not refused": _misspelt_keyword,
    "another library's parameter name given to `Agent(...)`, `agent.evolve(...)`, "
    "`generate_text` or `agenerate_text` (sent as a model setting, it was a request body field "
    "and the run went without it): the error names toolfold's, `system_prompt=` "
    "(`instructions=`), `result_type=` (`output_type=`), `model_settings=` (`settings=`), "
    "`retries=` (`output_retries=`; a tool's: `@tool(max_retries=...)`), `max_turns=` "
    "(`max_steps=`), `deps_type=` (none: deps are passed with each run, `deps=`), the OpenAI "
    "SDK's `extra_body=` (`settings=`: a model setting is sent as it is); so is "
    "`settings=` given to `generate_text`, which takes model settings as keywords": (
        _other_library_keyword
    ),
    "`settings=` that is no mapping (`Agent(model, settings=5)`)": _settings_not_a_mapping,
    "a message dict whose role is not system, user or assistant, that has no `content` key "
    '(the error lists its keys: `[{"text": ...}]` is not sent as an empty message), that has '
    'keys besides `role` and `content` holding something (the error names them: `{"role": '
    '"user", "content": "hi", "name": "bob"}` or a Chat Completions `tool_calls` list with '
    "calls would be lost, since a message holds its role and parts only; build a `Message` for "
    "calls, results, images or files; other keys that are None or empty, as in the OpenAI "
    "SDK's `message.model_dump()` with `refusal`, `tool_calls`, `audio`... None or a "
    "`tool_calls: []`, lose nothing and are ignored) or whose `content` is not a str (a dict of a "
    "list names the list, `history=` or the prompt's, and its index)": _bad_role,
    'a prompt that is not a str, a `Message`, a `{"role", "content"}` dict or a list of '
    "Messages or dicts (`42`, `None`, `bytes`, `memoryview`: the error names its type; one dict "
    "is one message; a list of str names the first item that is neither, and its index; a "
    "`Response` or a `RunState` is told to pass its `.messages`, as `history=` is)": (
        _not_a_prompt
    ),
    "an agent file with unknown keys, wrong types, import paths that do not resolve, "
    "things that are not tools, references to undefined agents or a cycle (all listed at once)": (
        _agent_file_problems
    ),
    "`agent.to_dict()` for an agent holding a lambda or a local function (a tool, a stop "
    "condition, an input filter...)": (_unwritable_agent),
    "an approval that is not `True`, `False` or `Denied(reason)`": _bad_approval,
    "a `Denied(reason)` whose reason is not text (`Denied(5)`: the error names the call)": (
        _denied_without_text
    ),
    "an answer (or `approval_key`) keyed by a call id that names several waiting calls: of "
    "two sub-runs, of the top run and a sub-run, or one call's id and another's path "
    "(key each by the key listed)": _ambiguous_call_id,
    "running an agent whose handoff by name finds no agent of its handoff graph, or whose "
    "graph has two agents of one name": _unknown_handoff_name,
    "a workflow as a handoff target, or `workflow.as_tool(input_type=...)` that the workflow "
    "cannot take": _workflow_handoff,
    "resuming without the tools the state names": _resume_without_tools,
    "`await model.aclose()` while the model's aiohttp session belongs to another event loop "
    "that is alive but not running (the error names that loop; the rest is closed)": (
        _aclose_off_the_sessions_loop
    ),
    "a call through an injected async client on an event loop that is not its own: an "
    "`aiohttp.ClientSession` made on another loop (the error names it), an httpx/httpx2 "
    "`AsyncClient` whose pooled connections another loop opened (a second `asyncio.run`)": (
        _injected_session_off_its_loop
    ),
    "resuming a run stopped at `max_steps` without a larger `max_steps` or a `message`, "
    "or with a `max_steps` below the calls its turn made": _resume_at_max_steps,
    "resuming with an `Agent` whose stored options (instructions, settings...) "
    "differ from the run's": _resume_with_other_options,
    "resuming a run whose suspended sub-run (an agent used as a tool, a workflow step) its "
    "agent can no longer resume: stored options, tools or `max_steps` changed; or a workflow "
    "whose steps were added, removed or moved (refused before anything runs)": (
        _resume_a_changed_sub_agent
    ),
    "resuming a call cleared to run with a tool that now requires approval": (
        _cleared_call_now_needs_approval
    ),
    "a `ToolResultPart` under another call's key in `tool_results`": _result_under_another_key,
    "a stream's `response` before the stream ended, or iterating it twice (after a stream "
    "raised, the error names the run's error, which holds its `.state`)": _stream_out_of_order,
    "a `ScriptedModel` asked for more answers than its script has": _script_exhausted,
    "`fork` without exactly one of `step=` and `events=`": _fork_without_point,
    "`reduce`, `next_effect`, `build_request`, `fork`, `stop_reason`, `stopping_result` or "
    "`approval_key` given a state that is no `RunState` (`None`, a `Response`...), "
    "`replay(None)`, `initial_state(None, ...)`": _no_state,
    "`resume`, `aresume` or `resume_stream` of an agent or a workflow (or `toolfold.resume`) "
    "given no `RunState`: a `Response` (the message says to pass its `.state`), its JSON text "
    "(to load it with `RunState.from_json`) or `None`": _resume_a_response,
    "a run that ended (finished or suspended) whose tool source's `close()` raised": (
        _source_close_fails
    ),
    "a tool that fails more times in a row than its `max_retries`": _retries_exceeded,
    "a final answer that never fits `output_type`": _output_never_fits,
    "resuming a finished state whose stored output the `output_type` no longer accepts (a "
    "validator added since it was saved)": _stored_output_refused,
    'a tool raising with `on_tool_error="raise"`': _tool_raises,
    "a model raising an exception that is not a `ToolfoldError`": _model_raises,
    "an `on_event`, `on_step` or `stop_when` callable raising": _observer_raises,
    "a workflow's `until`, `merge` or router function raising (named in the message)": (
        _workflow_function_raises
    ),
    "`next_effect` on a state no `RunStarted` was reduced into": _not_started,
    "an event the run's phase does not allow": _phase_forbids,
    "an event that contradicts the state (an unknown call id)": _contradicting_event,
    "`resume` with an answer for a call id the waiting run's tree does not hold (the message "
    "lists the ids that wait, at any depth: `no tool call 'nope' waits for an approval; "
    "waiting: 'call_1_0'`)": _unknown_answer,
    "`resume` with an answer for a call that was answered already: an approval given again, "
    "or given to a stale state that went on or finished (by its id or its `approval_key`: "
    "`approvals=: call 'call_2' (transfer) was already answered; nothing waits for an "
    "approval`, or the calls that wait instead)": _answered_again,
    "`resume` with an `approval_key` made for another run's call (or another step's, or other "
    "arguments), whether this state's call waits or was answered already "
    "(`approvals='call_1_0#3f9c...' was made for another call than this state's call "
    "'call_1_0' ...`; nothing runs)": _foreign_key,
    "`RunState.from_json` on a damaged or edited document": _damaged_document,
    "`RunState.from_json(text, key=...)` on an unsigned state or one whose signature does not match": (
        _unsigned_document
    ),
    "`to_json(key=...)` / `from_json(..., key=...)` with an empty key or an empty key list": (
        _empty_signing_key
    ),
    'a model string with an unknown provider (a close one is suggested: `"opneai:gpt-4o"`, '
    "`did you mean 'openai'?`; in an agent file, `load(..., model=...)` and `--model`, a string "
    "whose prefix is a bare name that neither is a provider nor imports gets the same "
    "message)": _unknown_provider,
    "a provider's API key missing from the environment": _missing_key,
    "pickling a model built with a key, a client or a credential header of its own, or a "
    "`LocalModel` (the message says why and what to pass instead)": _pickled_keyed_model,
    "unpickling a model an older toolfold pickled (as its attributes, not its options: the "
    "message says to build it again)": _unpickled_older_model,
    "a model option that cannot be used (`retry=-1` or `2.5`, `timeout=0`, a `RetryPolicy` or "
    "`Timeouts` field out of range), named in the message": _bad_model_option,
    "HTTP 400, 413 or 422": _status(422),
    "Groq's `tool_use_failed`": _status(400, _TOOL_USE_FAILED),
    "a request longer than the model's context window, which holds the prompt plus the "
    "`max_tokens` asked for the answer (HTTP 400 / 413 / 422 with the code "
    "`context_length_exceeded`, as OpenAI Chat and Responses, Groq and vLLM send, or the "
    "type `exceed_context_size_error`, as llama.cpp's `llama-server` sends; else "
    "the provider's own message: Anthropic's `prompt is too long:` or `input length and "
    "max_tokens exceed context limit:`, Gemini's `The input token count (...) exceeds "
    "the maximum number of tokens`, `This model's maximum context length is ... tokens` "
    "from OpenAI-compatible servers (also behind a LiteLLM proxy's `litellm.BadRequestError: "
    "OpenAIException - ` prefix), OpenRouter's `This endpoint's maximum context length is "
    "... tokens`, Mistral's and Ollama's wording; another 400 that "
    "merely mentions a prompt or a context stays a `BadRequestError`); a "
    "`BadRequestError`, so `except BadRequestError` still catches it; the message ends "
    "with what to do: shorten the history, lower `max_tokens`, or use a model with a "
    "larger window (asking again fails the same way)": _status(400, _WINDOW_FULL),
    "HTTP 401 or 403": _status(403),
    "HTTP 404": _status(404),
    "HTTP 408, or a connect, read, write, pool or total timeout": _status(408),
    "HTTP 429": _status(429),
    "HTTP 5xx": _status(503),
    "any other HTTP status (402, 409...)": _status(409),
    "a connection refused or reset, DNS or TLS failure": _failure(ConnectionRefusedError()),
    "a stream cut before its end (its `state` counts the usage the provider had reported, "
    "billed: an `AttemptDropped`, so a resume counts it once; so does the state of a Ctrl-C "
    "or a cancellation that cut the run's own stream, but not a sub-run's stream that a "
    "second Ctrl-C cut: one of the gaps named above)": _failure(
        ConnectionResetError(), streaming=True
    ),
    "a 200 answer to a streamed request that is no event stream (a whole JSON answer, a proxy's "
    "HTML page), quoted with its content type and `body` set": _not_an_event_stream,
    "a 200 body or stream event with a field of the wrong type, NaN or nesting too deep": (
        _malformed_body
    ),
    "an answer, whole or streamed, that the provider ended abnormally: OpenRouter "
    '`finish_reason: "error"`, Gemini `MALFORMED_FUNCTION_CALL` / `UNEXPECTED_TOOL_CALL` / '
    "`TOO_MANY_TOOL_CALLS` / `MISSING_THOUGHT_SIGNATURE` (its `finishMessage` in the message "
    "and `provider_message`), Anthropic `pause_turn`; the message names the provider and its "
    "finish reason, kept in `.finish_reason`; the answer was billed: `.usage` is what the "
    "provider reported for it (None if nothing), and the error's `state` counts it (an "
    "`AttemptDropped`, as a cut stream's `StreamError` does)": _abnormal_finish,
    "an answer with no choice at all, whole or streamed alike: a Chat body with `choices: []`, "
    "or a Chat stream that reached `[DONE]` without a choice; a Gemini body or stream with no "
    "candidate and no `promptFeedback.blockReason` (a blocked prompt is an empty "
    "`content_filter` answer); the message says `returned a response without choices` "
    "(`candidates`): there is no answer to read": _no_choices,
}


def test_every_row_has_a_trigger() -> None:
    """The table and the triggers name the same situations."""
    assert set(documented()) == set(TRIGGERS)


@pytest.mark.parametrize("situation", sorted(TRIGGERS))
def test_documented_class_is_raised(situation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The situation raises exactly the class the table names (not a parent, not a child)."""
    expected = getattr(toolfold, documented()[situation])
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(toolfold.ToolfoldError) as info:
        TRIGGERS[situation]()
    assert type(info.value) is expected, info.value


def test_other_pages_name_only_tabled_errors() -> None:
    """Every toolfold error class a doc page names is in the table, so it is tested."""
    tabled = set(documented().values())
    errors = {
        name
        for name in toolfold.__all__
        if isinstance(getattr(toolfold, name), type)
        and issubclass(getattr(toolfold, name), toolfold.ToolfoldError)
    }
    parents = {"ToolfoldError", "RunError", "ToolArgumentError", "InvalidTransitionError"}
    for page in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))):
        named = set(re.findall(r"\b([A-Z]\w+Error)\b", page.read_text(encoding="utf-8")))
        missing = (named & errors) - tabled - parents
        assert not missing, f"{page.name} names {sorted(missing)}"


def test_every_public_error_is_tabled() -> None:
    """Each error class toolfold exports (parents aside) has a row, so its raise is tested."""
    tabled = set(documented().values())
    parents = {"ToolfoldError", "RunError", "ToolArgumentError", "InvalidTransitionError"}
    errors = {
        name
        for name in toolfold.__all__
        if isinstance(getattr(toolfold, name), type)
        and issubclass(getattr(toolfold, name), toolfold.ToolfoldError)
    }
    assert errors - parents - tabled == set()


def test_builtins_catch_their_lookalikes() -> None:
    """`except TimeoutError` / `except ConnectionError` / `except ValueError` catch toolfold's."""
    assert issubclass(toolfold.ProviderTimeoutError, TimeoutError)
    assert issubclass(toolfold.ProviderConnectionError, ConnectionError)
    assert issubclass(toolfold.UsageError, ValueError)
    with pytest.raises(TimeoutError):
        _status(408)()
    with pytest.raises(ConnectionError):
        _failure(ConnectionRefusedError())()


def test_denied_is_accepted_where_usage_error_refuses() -> None:
    """The approval values the UsageError names are the ones accepted."""
    agent, first = _waiting()
    done = agent.resume(first.state, approvals={first.pending_approvals[0].id: Denied("no")})
    assert done.finish_reason == "stop"
