"""`builder`: the core's cheap construction gives the very records the classes give."""

from __future__ import annotations

import copy
import json
import pickle
import weakref
from typing import Any

import attrs
import pytest

import toolfold
from toolfold import RunState
from toolfold.adapters.openai_chat._response import parse_response
from toolfold.runtime.core import _stream as stream
from toolfold.runtime.core._build import builder, evolver, replacer
from toolfold.runtime.core._config import RunConfig
from toolfold.runtime.core._effects import CallModel, ToolInvocation
from toolfold.runtime.core._events import ModelResponded, ToolReturned
from toolfold.runtime.core._log import Log
from toolfold.runtime.core._messages import (
    FrozenDict,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    set_wire_memo,
    wire_memo,
)
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._serialize import structure, to_json, unstructure
from toolfold.runtime.core._state import CallState
from toolfold.testing import ScriptedModel

_CALL = ToolCallPart("c1", "add", '{"a": 1}', {"a": 1})
_RESULT = ToolResultPart("c1", "add", "2")
_MESSAGE = Message("assistant", (TextPart("hi"), _CALL))
_RESPONSE = ModelResponse(_MESSAGE, Usage(3, 4, requests=1), "tool_calls")
_STATE = RunState(
    "r1",
    "awaiting_model",
    RunConfig(max_steps=3),
    Log([Message.user("go"), _MESSAGE]),
    step=1,
    usage=Usage(1, 2),
    calls=(CallState(0, _CALL, "done", _RESULT, "ok"),),
    failures=FrozenDict({"add": 1}),
)

# Each class the core builds cheaply, with the arguments of one value, already
# of the fields' final types (what the builder requires).
CASES: list[tuple[type[Any], tuple[Any, ...]]] = [
    (RunState, tuple(getattr(_STATE, a.name) for a in attrs.fields(RunState))),
    (RunState, ("r2", "new", RunConfig(), Log())),
    (CallState, (0, _CALL, "done", _RESULT, "ok", None)),
    (CallState, (1, _CALL, "to_run")),
    (ToolResultPart, ("c1", "add", "boom", True, ())),
    (Message, ("tool", (_RESULT,))),
    (Usage, (1, 2, 3, 4, 5, 6)),
    (Usage, ()),
    (ModelRequest, ((_MESSAGE,), (), "auto", None, {"temperature": 0})),
    (ModelRequest, ((_MESSAGE,),)),
    (CallModel, (ModelRequest((_MESSAGE,)), 2, "r1:2:model")),
    (ToolInvocation, (_CALL, 0, 1, "r1:1:0", None)),
    (ModelResponded, (_RESPONSE, ("execute",))),
    (ToolReturned, ("c1", "2", False, "ok", 0.5, None, ())),
]


def _hash(value: Any) -> object:
    # A record holding a dict (a config's settings, a request's) is unhashable either way.
    try:
        return hash(value)
    except TypeError as exc:
        return str(exc)


@pytest.mark.parametrize(("cls", "args"), CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_a_built_record_is_the_class_s_own_value(cls: type[Any], args: tuple[Any, ...]) -> None:
    """Type, equality, hash, repr, fields, copies, pickling and weak references match the class's."""
    built = builder(cls)(*args)
    made = cls(*args)
    assert type(built) is cls
    assert built == made
    assert made == built
    assert _hash(built) == _hash(made)
    assert repr(built) == repr(made)
    assert attrs.asdict(built, recurse=False) == attrs.asdict(made, recurse=False)
    assert pickle.loads(pickle.dumps(built)) == made
    assert copy.copy(built) == made
    assert copy.deepcopy(built) == made
    assert attrs.evolve(built) == made
    assert weakref.ref(built)() is built


@pytest.mark.parametrize(("cls", "args"), CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_a_built_record_stays_frozen(cls: type[Any], args: tuple[Any, ...]) -> None:
    """Assigning or deleting a field of a built record raises FrozenInstanceError, as for the class."""
    built = builder(cls)(*args)
    name = attrs.fields(cls)[0].name
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        setattr(built, name, None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        delattr(built, name)
    assert getattr(built, name) == getattr(cls(*args), name)


def test_built_records_serialize_as_the_class_s() -> None:
    """The one converter writes a built state exactly as the class's, and reads it back equal."""
    built = builder(RunState)(*CASES[0][1])
    assert unstructure(built) == unstructure(_STATE)
    assert to_json(built) == to_json(_STATE)
    # (the converter itself: from_json checks a state against its log, which this one has not)
    assert structure(unstructure(built), RunState) == _STATE


def test_fields_left_out_of_init_get_their_defaults() -> None:
    """A built Message has its codec memo unset, as a constructed one has."""
    built = builder(Message)("user", (TextPart("x"),))
    assert built._wire is None


def test_builder_refuses_classes_it_cannot_build() -> None:
    """Only slotted attrs classes without init hooks: anything else is a TypeError naming why (kw_only fields are taken by keyword)."""

    class Plain:
        pass

    @attrs.frozen(slots=False)
    class Dicted:
        a: int

    @attrs.frozen
    class Hooked:
        a: int

        def __attrs_post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="slotted attrs class"):
        builder(Plain)
    with pytest.raises(TypeError, match="slotted attrs class"):
        builder(Dicted)
    with pytest.raises(TypeError, match="post-init"):
        builder(Hooked)

    @attrs.frozen(cache_hash=True)
    class Hashed:
        a: int

    @attrs.frozen
    class Keyworded:
        a: int = attrs.field(kw_only=True)
        b: int = 0

    with pytest.raises(TypeError, match="cached hash"):
        builder(Hashed)
    # kw_only fields are taken by keyword only, as the class takes them
    build = builder(Keyworded)
    assert build(2, a=1) == Keyworded(2, a=1)
    assert build(a=1) == Keyworded(a=1)
    with pytest.raises(TypeError):
        build(1, 2)


def test_a_class_with_its_own_new_is_built_without_calling_it() -> None:
    """A record class with a __new__ of its own is built, replaced and evolved without running it."""
    made: list[object] = []

    @attrs.frozen
    class Counted:
        a: int
        b: int = 0

        def __new__(cls, *args: object, **kwargs: object) -> Any:
            made.append(cls)
            return super().__new__(cls)

    one = Counted(1)
    made.clear()
    built = [
        builder(Counted)(1, 2),
        replacer(Counted, "b")(one, 2),
        evolver(Counted)(one, {"b": 2}),
    ]
    assert made == []
    assert built == [Counted(1, 2)] * 3
    assert all(type(record) is Counted for record in built)


def test_a_class_with_a_metaclass_call_is_built_without_calling_it() -> None:
    """A record class whose metaclass has a __call__ of its own is built without running it."""
    called: list[object] = []

    class Counting(type):
        def __call__(cls, *args: Any, **kwargs: Any) -> Any:
            called.append(cls)
            return super().__call__(*args, **kwargs)

    @attrs.frozen
    class Metered(metaclass=Counting):
        a: int

    assert builder(Metered)(1) == Metered(1)
    called.clear()
    assert type(builder(Metered)(2)) is Metered
    assert called == []


def test_a_failing_step_keeps_failures_frozen() -> None:
    """The one writer of ``failures`` (built without the class's converter) writes a FrozenDict."""

    @toolfold.tool
    def boom() -> int:
        """Fail."""
        raise ValueError("no")

    model = ScriptedModel([ScriptedModel.call("boom", {}), "done"])
    state = toolfold.generate_text(model, "go", tools=[boom]).state
    assert type(state.failures) is FrozenDict
    assert dict(state.failures) == {"boom": 1}
    assert RunState.from_json(state.to_json()) == state


def test_failures_of_one_step_are_counted_in_call_order() -> None:
    """Several tools failing in one step are counted in the order of their calls, so the
    state (its ``failures`` and its JSON) is the same whatever the process's hash seed."""
    names = ["kilo", "alpha", "tango", "echo", "bravo", "zulu", "mike", "oscar"]

    def failing(name: str) -> toolfold.Tool[..., Any]:
        def fails(args: dict[str, Any]) -> str:
            raise ValueError("no")

        return toolfold.Tool(name, "Fails.", {"type": "object", "properties": {}}, fails)

    calls = [ScriptedModel.call(name, {}) for name in names]
    model = ScriptedModel([calls, "done"])
    state = toolfold.generate_text(model, "go", tools=[failing(n) for n in names]).state
    assert list(state.failures.items()) == [(name, 1) for name in names]
    assert list(json.loads(state.to_json())["failures"]) == names
    assert RunState.from_json(state.to_json()) == state


def test_a_run_s_records_are_the_public_classes() -> None:
    """Every record of a tool run's state is of its public class and the state round-trips exactly."""

    @toolfold.tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    model = ScriptedModel([ScriptedModel.call("add", {"a": 1, "b": 2}, id="c1"), "done"])
    state = toolfold.generate_text(model, "go", tools=[add], run_id="r1").state
    assert type(state) is RunState
    assert type(state.usage) is Usage
    assert [type(e).__name__ for e in state.events] == [
        "RunStarted",
        "ModelResponded",
        "ToolReturned",
        "ModelResponded",
    ]
    assert {type(m) for m in state.messages} == {Message}
    assert all(type(c) is CallState for c in state.calls)
    tool_message = state.messages[2]
    assert [type(p) for p in tool_message.parts] == [ToolResultPart]
    assert RunState.from_json(state.to_json()) == state
    assert to_json(RunState.from_json(state.to_json())) == to_json(state)


def test_a_parsed_chat_answer_equals_the_records_the_classes_make() -> None:
    """The Chat codec's cheaply built call, message and usage equal (and freeze) what the classes give."""
    body = {
        "id": "r1",
        "model": "m",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "hi",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": [1, 2]}'},
                            "extra_content": {"google": {"thought_signature": "s"}},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    response = parse_response(body, "openai")
    call = ToolCallPart(
        "c1",
        "add",
        '{"a": [1, 2]}',
        {"a": [1, 2]},
        {"extra_content": {"google": {"thought_signature": "s"}}},
    )
    expected = ModelResponse(
        Message("assistant", [TextPart("hi"), call]),
        Usage(3, 4, requests=1),
        "tool_calls",
        "tool_calls",
        "m",
        "r1",
    )
    assert response == expected
    assert repr(response) == repr(expected)
    (parsed,) = response.tool_calls
    assert type(parsed.arguments) is FrozenDict
    assert type(parsed.provider_data["extra_content"]) is FrozenDict
    with pytest.raises(TypeError, match="read-only"):
        parsed.arguments["a"].append(3)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        parsed.name = "other"  # type: ignore[misc]


def test_a_replaced_record_equals_attrs_evolve_s() -> None:
    """replacer() copies the other fields and sets the named ones, as attrs.evolve does."""
    with_phase_and_step = replacer(RunState, "phase", "step")
    replaced = with_phase_and_step(_STATE, "finished", 7)
    expected = attrs.evolve(_STATE, phase="finished", step=7)
    assert type(replaced) is RunState
    assert replaced == expected
    assert repr(replaced) == repr(expected)
    assert to_json(replaced) == to_json(expected)
    assert _STATE.phase == "awaiting_model"  # the original is untouched
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        replaced.step = 8  # type: ignore[misc]


def test_a_replaced_message_drops_the_codec_memo() -> None:
    """Fields without init (a message's codec memo) get their defaults, not the original's."""
    key = object()
    original = Message.user("a")
    set_wire_memo(original, key, "encoded")
    replaced = replacer(Message, "parts")(original, (TextPart("b"),))
    assert wire_memo(replaced, key) is None
    assert replaced == Message.user("b")


def test_replacer_refuses_unknown_fields() -> None:
    """Naming a field the class does not take is a TypeError naming it."""
    with pytest.raises(TypeError, match="nope"):
        replacer(Usage, "nope")


def test_an_evolved_record_equals_attrs_evolve_s() -> None:
    """evolver() copies the other fields and sets those the changes name, as attrs.evolve does."""
    changes = {"phase": "finished", "step": 7, "finish_reason": "stop"}
    evolved = evolver(RunState)(_STATE, changes)
    expected = attrs.evolve(_STATE, **changes)
    assert type(evolved) is RunState
    assert evolved == expected
    assert repr(evolved) == repr(expected)
    assert to_json(evolved) == to_json(expected)
    assert evolver(RunState)(_STATE, {}) == _STATE
    assert _STATE.phase == "awaiting_model"  # the original is untouched
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        evolved.step = 8  # type: ignore[misc]


def test_an_evolver_refuses_a_class_with_fields_outside_init() -> None:
    """A class with a field init does not take (a message's codec memo) is refused when made."""
    with pytest.raises(TypeError, match="Message"):
        evolver(Message)


def test_folding_a_stream_gives_what_the_classes_give() -> None:
    """fold_stream's cheap copies reach the response attrs.evolve-built states reached."""
    events = [
        stream.ResponseInfo("m", "r1"),
        stream.ReasoningDelta("think"),
        stream.ReasoningDelta(" more", signature="sig"),
        stream.TextDelta("Hel"),
        stream.TextDelta("lo"),
        stream.ToolCallStart(0, "c1", "add"),
        stream.ToolCallDelta(0, '{"a": '),
        stream.ToolCallDelta(0, "1}"),
        stream.ToolCallEnd(0),
        stream.UsageUpdate(Usage(3, 4, requests=1)),
        stream.StreamFinish("tool_calls", "tool_calls"),
    ]
    state = stream.StreamState()
    for event in events:
        state = stream.fold_stream(state, event)
    assert type(state) is stream.StreamState
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        state.parts = ()  # type: ignore[misc]
    response = stream.finish_stream(state, lambda n: f"made{n}")
    assert response == ModelResponse(
        Message(
            "assistant",
            [
                ReasoningPart("think more", "sig"),
                TextPart("Hello"),
                ToolCallPart("c1", "add", '{"a": 1}', {"a": 1}),
            ],
        ),
        Usage(3, 4, requests=1),
        "tool_calls",
        "tool_calls",
        "m",
        "r1",
    )


def test_a_factory_that_takes_self_fills_a_built_field_as_the_class_does() -> None:
    """A ToolCallPart built without arguments decodes them from its text, by class or builder."""
    from toolfold import ToolCallPart
    from toolfold.runtime.core._build import builder

    build = builder(ToolCallPart)
    for text, expected in (('{"a": [1]}', {"a": [1]}), ("[1]", None), ("{bad", None), ("", {})):
        made, built = ToolCallPart("c1", "add", text), build("c1", "add", text)
        assert (made.arguments, built.arguments) == (expected, expected)
        assert made == built
        assert type(built) is ToolCallPart
    assert ToolCallPart("c1", "add", '{"a": 1}', None).arguments is None  # given, kept
