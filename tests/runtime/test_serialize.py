"""One converter: states, events and effects round-trip through JSON; replay and fork."""

from __future__ import annotations

import json
import math
import pickle
import re
from typing import Any

import attrs
import pytest
from core_helpers import answer, call, responded, spec, start
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold import Agent, SerializationError
from toolfold.runtime import (
    ApprovalGranted,
    Effect,
    Event,
    FilePart,
    ImagePart,
    Log,
    Message,
    ModelResponded,
    ModelResponse,
    OutputSpec,
    ReasoningPart,
    RunState,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolResultsProvided,
    ToolReturned,
    Usage,
    events_from_json,
    events_to_json,
    fork,
    from_json,
    initial_state,
    max_steps,
    next_effect,
    reduce,
    replay,
    to_json,
    token_budget,
    tool_called,
)
from toolfold.testing import ScriptedModel


def _rich_run() -> list[RunState]:
    """Every state of a run that touches every part type and most events."""
    history = (
        Message.system("sys"),
        Message.user(
            "look",
            ImagePart(data=b"\x89PNG\x00\xff", media_type="image/png"),
            ImagePart(url="https://example.com/cat.png"),
            FilePart(data=bytes(range(256)), media_type="application/pdf", filename="a.pdf"),
        ),
    )
    config_tools = (spec("add"), spec("rm", approval="always"), spec("ask", has_function=False))
    states = [
        initial_state(
            history,
            start(
                *config_tools,
                output=OutputSpec(
                    "ans", {"type": "object", "properties": {"x": {"type": "integer"}}}
                ),
                settings={"temperature": 0.2, "stop": ["\n"]},
                stop_when=[max_steps(9), token_budget(10**6), tool_called("zzz")],
                instructions="be nice",
                tool_choice="required",
            ).config,
            run_id="run-1",
        )
    ]
    message = Message(
        "assistant",
        (
            ReasoningPart("thinking…", signature="sig==", provider="anthropic"),
            TextPart("calling"),
            ToolCallPart(
                "c1",
                "add",
                '{"a": 1.5, "b": [1, null]}',
                {"a": 1.5, "b": [1, None]},
                {"item_id": "fc_1"},
            ),
            ToolCallPart("c2", "rm", "{}", {}),
            ToolCallPart("c3", "ask", "{}", {}),
            ToolCallPart("c4", "add", "{not json", None),
        ),
    )
    events: list[Event] = [
        ModelResponded(
            ModelResponse(message, Usage(1, 2, 3, 4, 1, 6), "tool_calls", "tool_use", "m", "r1")
        ),
        ToolReturned("c1", "2.5"),
        ApprovalGranted("c2"),
        ToolReturned("c2", "boom", is_error=True, outcome="timeout"),
        ToolResultsProvided([ToolResultPart("c3", "ask", "über ✓")]),
        answer('{"x": 1}'),
    ]
    for event in events:
        states.append(reduce(states[-1], event))
    return states


def test_states_round_trip_exactly() -> None:
    """Every state of a rich run loads back equal from its JSON."""
    for state in _rich_run():
        assert RunState.from_json(state.to_json()) == state


def test_a_state_saved_before_cache_write_tokens_loads_with_zero() -> None:
    """JSON without ``cache_write_tokens`` (saved by an earlier version) loads, the count 0; a saved count survives."""
    state = _rich_run()[-1]
    data = json.loads(state.to_json())
    assert data["log"][1]["response"]["usage"]["cache_write_tokens"] == 6
    older = re.sub(r', "cache_write_tokens": \d+', "", json.dumps(data))
    assert "cache_write_tokens" not in older
    loaded = RunState.from_json(older)
    assert loaded.log[1].response.usage == Usage(1, 2, 3, 4, 1)
    assert RunState.from_json(state.to_json()).log[1].response.usage.cache_write_tokens == 6


def test_json_is_tagged_and_bytes_are_base64() -> None:
    """The JSON names its format, tags unions by kind and carries bytes as base64 text."""
    data = json.loads(_rich_run()[-1].to_json())
    assert data["format"] == "toolfold.run_state/1"
    parts = data["conversation"][1]["parts"]
    assert [p["kind"] for p in parts] == ["text", "image", "image", "file"]
    assert parts[1]["data"] == "iVBORwD/"
    assert [e["kind"] for e in data["log"]][:2] == ["run_started", "model_responded"]
    assert data["config"]["stop_when"][0] == {"steps": 9, "kind": "max_steps"}
    assert "_by_name" not in data["config"]


def test_loaded_state_continues_like_the_original() -> None:
    """A loaded state gives the same next effect and accepts the same events."""
    states = _rich_run()
    middle = states[3]
    loaded = RunState.from_json(middle.to_json())
    assert next_effect(loaded) == next_effect(middle)
    event = ToolReturned("c2", "ok")
    assert reduce(loaded, event) == reduce(middle, event)


def test_events_round_trip() -> None:
    """An event log round-trips as a JSON array."""
    events = _rich_run()[-1].events
    assert events_from_json(events_to_json(events)) == events


def test_effects_round_trip() -> None:
    """Every effect of the run round-trips through the union type."""
    for state in _rich_run():
        effect = next_effect(state)
        assert from_json(to_json(effect, Effect), Effect) == effect


def test_replay_equals_the_fold() -> None:
    """replay(state.events) rebuilds every state exactly."""
    for state in _rich_run():
        assert replay(state.events) == state


def test_replay_from_an_initial_state() -> None:
    """replay continues from a given state."""
    states = _rich_run()
    tail = states[-1].events[len(states[2].events) :]
    assert replay(tail, states[2]) == states[-1]


def test_fork_at_a_step_continues_differently() -> None:
    """fork(step=n) is the run just before step n+1's response, ready for another one."""
    state = start(spec("t"))
    state = reduce(reduce(state, responded(call("c1", "t"))), ToolReturned("c1", "x"))
    before_second = state
    state = reduce(state, answer("first ending"))
    forked = fork(state, step=1)
    assert forked == before_second
    assert reduce(forked, answer("second ending")).output == "second ending"
    assert fork(state, step=0) == start(spec("t"))


def test_fork_after_n_events() -> None:
    """fork(events=n) is the state after the first n events."""
    states = _rich_run()
    for n, expected in enumerate(states, start=1):
        assert fork(states[-1], events=n) == expected


def test_fork_with_a_new_run_id_replays_to_itself() -> None:
    """A fork under a new run id has new idempotency keys and still replays exactly."""
    states = _rich_run()
    forked = fork(states[-1], events=2, run_id="run-2")
    assert forked.run_id == "run-2"
    assert replay(forked.events) == forked
    effect = next_effect(forked)
    assert effect.kind == "run_tools"
    assert effect.calls[0].key.startswith("run-2:1:")  # type: ignore[union-attr]


def test_fork_refuses_points_outside_the_run() -> None:
    """A fork point beyond the run, or an ambiguous one, is an error."""
    state = _rich_run()[-1]
    with pytest.raises(ValueError, match="step=5"):
        fork(state, step=5)
    with pytest.raises(ValueError, match="events=0"):
        fork(state, events=0)
    with pytest.raises(ValueError, match="exactly one"):
        fork(state)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not json", "not JSON"),
        ('{"format": "other/1"}', "expected format"),
        ('{"format": []}', "expected format"),
        ('{"format": {"a": 1}}', "expected format"),
        ("[]", "expected format"),
    ],
)
def test_loading_garbage_names_the_problem(text: str, problem: str) -> None:
    """Text that is not a serialized state raises SerializationError saying why."""
    with pytest.raises(SerializationError, match=problem):
        RunState.from_json(text)


def test_loading_a_damaged_state_gives_paths() -> None:
    """A state with a wrong field reports the path of the problem."""
    data = json.loads(start().to_json())
    data["step"] = "three"
    data["conversation"][0]["parts"][0]["kind"] = "mystery"
    with pytest.raises(SerializationError) as info:
        RunState.from_json(json.dumps(data))
    text = str(info.value)
    assert "$.step" in text
    assert "mystery" in text


def test_a_value_outside_a_literal_names_the_allowed_ones() -> None:
    """A phase edited to a value the state does not know lists the phases (not cattrs' 'unknown error')."""
    data = json.loads(start().to_json())
    data["phase"] = "to_run"
    with pytest.raises(SerializationError) as info:
        RunState.from_json(json.dumps(data))
    text = str(info.value)
    assert "$.phase" in text
    assert "expected one of 'new', 'awaiting_model'" in text
    assert "got to_run" in text
    assert "unknown error" not in text


def test_loading_bad_base64_is_reported() -> None:
    """Invalid base64 in a bytes field is a SerializationError."""
    text = to_json(ImagePart(data=b"abc"))
    damaged = text.replace("YWJj", "@@@")
    with pytest.raises(SerializationError, match="base64"):
        from_json(damaged, ImagePart)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_parts = st.one_of(
    st.builds(TextPart, st.text()),
    st.builds(
        ToolCallPart,
        st.text(max_size=5),
        st.text(max_size=5),
        st.text(max_size=10),
        st.none() | st.dictionaries(st.text(max_size=3), _json_values, max_size=3),
        st.dictionaries(st.text(max_size=3), _json_values, max_size=2),
    ),
    st.builds(ToolResultPart, st.text(max_size=5), st.text(max_size=5), st.text(), st.booleans()),
    st.builds(ImagePart, st.none() | st.binary(max_size=20), st.none() | st.text(max_size=8)),
    st.builds(FilePart, st.none() | st.binary(max_size=20), st.none() | st.text(max_size=8)),
    st.builds(ReasoningPart, st.text(max_size=8), st.none() | st.text(max_size=8)),
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.builds(
            Message, st.sampled_from(["user", "assistant", "tool"]), st.lists(_parts, max_size=4)
        ),
        max_size=4,
    )
)
def test_any_conversation_round_trips(messages: list[Message]) -> None:
    """Arbitrary parts (bytes, unicode, JSON arguments) survive the state's JSON exactly."""
    from toolfold.runtime.core._serialize import structure, unstructure

    # Built directly: arbitrary histories may leave calls unanswered, which a run
    # refuses (and RunState.from_json checks a state against its events), so
    # this checks the converter itself.
    state = attrs.evolve(initial_state("x", run_id="r"), conversation=Log(messages))
    data = json.loads(json.dumps(unstructure(state, RunState)))
    assert structure(data, RunState) == state


def test_a_difference_names_no_codec_memo() -> None:
    """Where a stored state differs from its log, a message's codec memo (no part of its value)
    is not reported as a difference: only the text that differs is."""
    from toolfold.runtime.core._messages import set_wire_memo
    from toolfold.runtime.core._serialize import _differences

    stored, replayed = Message.user("edited"), Message.user("original")
    set_wire_memo(stored, object(), '{"role":"user","content":"edited"}')
    problems: list[str] = []
    _differences("$.messages[0]", stored, replayed, problems)
    assert problems == [
        "text is 'edited' but the event log gives 'original' @ $.messages[0].parts[0].text"
    ]


def test_a_difference_in_a_long_text_shows_where_the_texts_part() -> None:
    """Two texts alike in their first 80 characters are shown from a little before their
    first difference, each with where it is cut, and with that position and their lengths.

    Before, both were cut at 80 characters, before the difference: they read the same.
    """
    from toolfold.runtime.core._serialize import _differences

    same = "Invalid arguments for tool 'add': the arguments are not valid JSON\n- Expecting "
    stored = same + "property name: line 1 column 9 (char 8)\nCall the tool again."
    replayed = same + "property name at line 1, column 9 (char 8)\nCall the tool again."
    problems: list[str] = []
    _differences("$.conversation[2].parts[0].content", stored, replayed, problems)
    assert problems == [
        "content is …' Expecting property name: line 1 column 9 (char 8)\\nCall the tool "
        "again.' but the event log gives …' Expecting property name at line 1, column 9 "
        "(char 8)\\nCall the tool again.' (first difference at character 92; 139 and 142 "
        "characters) @ $.conversation[2].parts[0].content"
    ]
    problems.clear()
    _differences("$.x", stored + "." * 500, replayed + "." * 500, problems)
    (shown,) = problems
    assert shown.startswith("x is …' Expecting property name: line 1 column 9 (char 8)")
    assert shown.count("'…") == 2
    assert "(first difference at character 92; 639 and 642 characters)" in shown


def test_a_state_that_differs_from_its_log_says_where_it_may_come_from() -> None:
    """The refusal of a state whose fields differ from its log says it was changed, or written
    by an older or a newer toolfold, and to load it with that one: in its first line and its
    ``hint``, not as one of its problems (each a line with its path)."""
    state = Agent(ScriptedModel(["done"])).run("hi").state
    document = json.loads(state.to_json())
    document["output"] = "edited"
    with pytest.raises(SerializationError) as caught:
        RunState.from_json(json.dumps(document))
    hint = (
        "the document was changed after it was saved, or written by an older or a newer "
        "toolfold whose runs replay otherwise; load it with the toolfold that wrote it"
    )
    assert caught.value.hint == hint
    assert str(caught.value).splitlines()[0] == f"cannot load RunState ({hint}):"
    # (a problem is a line with its path: the hint is none)
    assert caught.value.problems == (
        "output is 'edited' but the event log gives 'done' @ $.output",
    )
    assert pickle.loads(pickle.dumps(caught.value)).hint == hint


# --- NaN and the infinities: standard JSON, exact round trip ---------------------------


def _strict(text: str) -> dict[str, Any]:
    """``text`` read as JSON is defined (RFC 8259): no bare NaN or Infinity."""

    def refuse(constant: str) -> None:
        raise ValueError(f"bare {constant}")

    data: dict[str, Any] = json.loads(text, parse_constant=refuse)
    return data


def _suspended_with_non_finite_arguments(
    got: list[Any], arguments: dict[Any, Any] | None = None
) -> Any:
    from toolfold import Agent, tool
    from toolfold.testing import ScriptedModel

    @tool(requires_approval=True)
    def scale(x: float, limits: list[float]) -> str:
        """Scale a value.

        Args:
            x: The value.
            limits: The bounds.
        """
        got.append((x, limits))
        return "scaled"

    if arguments is None:
        arguments = {"x": math.nan, "limits": [-math.inf, 1.5, math.inf]}
    model = ScriptedModel([ScriptedModel.call("scale", arguments), "done"])
    agent = Agent(model, tools=[scale])
    return agent, agent.run("go")


@pytest.mark.parametrize("key", [None, "server-side secret"])
def test_non_finite_numbers_are_written_as_standard_json_and_come_back(key: str | None) -> None:
    """A call's NaN and infinities are written as text with their paths listed, so the state
    is JSON a browser or PostgreSQL reads; the loaded state holds the numbers again, and a
    resume from it gives the tool what the model sent."""
    got: list[Any] = []
    agent, suspended = _suspended_with_non_finite_arguments(got)
    state = suspended.state
    text = state.to_json(key=key)
    data = _strict(text)
    assert ["calls", 0, "call", "arguments", "x"] in data["non_finite"]
    assert ["calls", 0, "call", "arguments", "limits", 2] in data["non_finite"]
    assert data["calls"][0]["call"]["arguments"] == {
        "x": "NaN",
        "limits": ["-Infinity", 1.5, "Infinity"],
    }
    loaded = RunState.from_json(text, key=key)
    assert loaded.to_json(key=key) == text
    arguments = loaded.calls[0].call.arguments
    assert math.isnan(arguments["x"])
    assert arguments["limits"] == [-math.inf, 1.5, math.inf]
    assert math.isnan(state.calls[0].call.arguments["x"])  # the state written is unchanged
    resumed = agent.resume(loaded, approvals={loaded.calls[0].call.id: True})
    assert resumed.text == "done"
    [(x, limits)] = got
    assert math.isnan(x)
    assert limits == [-math.inf, 1.5, math.inf]


def test_a_workflow_steps_nan_output_is_stored_as_standard_json() -> None:
    """A step's NaN output passed on as the next step's input (``Sequence(avg, writer)``)."""
    from toolfold import Sequence

    def average(values: list[float]) -> float:
        """The mean of nothing."""
        return math.nan

    def writer(value: float) -> str:
        """Write the value."""
        return f"mean={value}"

    response = Sequence(average, writer, name="report").run([])
    assert response.text == "mean=nan"
    text = response.state.to_json()
    assert _strict(text)["non_finite"]
    assert RunState.from_json(text).to_json() == text


def test_a_state_with_only_finite_numbers_has_no_non_finite_field() -> None:
    state = initial_state("x", run_id="r")
    assert "non_finite" not in _strict(state.to_json())


def test_a_document_with_bare_nan_from_before_still_loads_and_verifies() -> None:
    """States written before the field (bare NaN, as Python's json writes it) load as they
    did, signed ones included: their signature was made over the bare numbers."""
    from toolfold.runtime.core._serialize import (
        SIGNATURE_FIELD,
        _restore_non_finite,
        _signature_before,
    )

    _, suspended = _suspended_with_non_finite_arguments([])
    data = _strict(suspended.state.to_json())
    _restore_non_finite(data, data.pop("non_finite"))
    data["format"] = "toolfold.run_state/1"
    old = json.dumps(data)
    assert "NaN" in old
    assert "non_finite" not in old
    assert math.isnan(RunState.from_json(old).calls[0].call.arguments["x"])
    signed = json.dumps({**data, SIGNATURE_FIELD: _signature_before(data, b"k")})
    assert math.isnan(RunState.from_json(signed, key="k").calls[0].call.arguments["x"])


@pytest.mark.parametrize(
    ("paths", "problem"),
    [
        ({"a": 1}, "expected a list of paths, got dict @ $.non_finite"),
        ([[]], "expected a non-empty list of keys @ $.non_finite[0]"),
        ([["calls", 7, "call"]], "the path does not lead to a value (7) @ $.non_finite[0]"),
        ([["calls", "0"]], "the path does not lead to a value ('0') @ $.non_finite[0]"),
        ([["calls", 0, "call", "name"]], "the value there is 'scale', not 'NaN'"),
        ([["calls", 0, "call"]], "the value there is a dict, not 'NaN'"),
    ],
)
def test_a_bad_non_finite_list_is_refused_naming_it(paths: Any, problem: str) -> None:
    _, suspended = _suspended_with_non_finite_arguments([])
    data = _strict(suspended.state.to_json())
    data["non_finite"] = paths
    with pytest.raises(SerializationError) as caught:
        RunState.from_json(json.dumps(data))
    assert problem in str(caught.value)


def test_a_document_with_non_finite_numbers_has_its_own_format_tag() -> None:
    """A reader that knows only "toolfold.run_state/1" refuses such a document, where it
    would have read "NaN" as text; the tag and the field go together."""
    _, suspended = _suspended_with_non_finite_arguments([])
    data = _strict(suspended.state.to_json())
    assert data["format"] == "toolfold.run_state/2"
    assert _strict(initial_state("x", run_id="r").to_json())["format"] == "toolfold.run_state/1"
    with pytest.raises(
        SerializationError, match=re.escape("is 'toolfold.run_state/1' but lists NaN")
    ):
        RunState.from_json(json.dumps({**data, "format": "toolfold.run_state/1"}))
    without = {k: v for k, v in data.items() if k != "non_finite"}
    with pytest.raises(
        SerializationError,
        match=re.escape("is 'toolfold.run_state/2' but lists no NaN or infinities @ $.non_finite"),
    ):
        RunState.from_json(json.dumps(without))
    with pytest.raises(SerializationError, match=re.escape("or 'toolfold.run_state/2', got 'x/3'")):
        RunState.from_json(json.dumps({**data, "format": "x/3"}))


def test_a_non_finite_list_is_covered_by_the_signature() -> None:
    """Dropping a path (so "NaN" stays text) breaks the signature like any other edit."""
    _, suspended = _suspended_with_non_finite_arguments([])
    data = _strict(suspended.state.to_json(key="k"))
    data["non_finite"] = data["non_finite"][1:]
    with pytest.raises(SerializationError, match="signature does not match"):
        RunState.from_json(json.dumps(data), key="k")


@pytest.mark.parametrize(
    ("x", "written", "listed"),
    [
        ({1: math.nan}, {"1": "NaN"}, [["1"]]),
        ({math.inf: 1.0}, {"Infinity": 1.0}, []),  # a key is text in JSON: nothing to list
        (({"y": -math.inf},), [{"y": "-Infinity"}], [[0, "y"]]),
        ({9: "a", 10: "b"}, {"9": "a", "10": "b"}, []),  # read back, "10" sorts before "9"
        ({1: "a", "b": 2}, {"1": "a", "b": 2}, []),  # int and str keys: no order in Python
    ],
)
def test_keys_that_are_not_text_are_written_as_json_writes_them(
    x: Any, written: Any, listed: list[list[Any]]
) -> None:
    """Each path listed leads where the document has the value, the field is left out when
    there is none, and the round trip of the text is exact, whatever keys the arguments had."""
    _, suspended = _suspended_with_non_finite_arguments([], {"x": x})
    text = suspended.state.to_json()
    data = _strict(text)
    assert data["calls"][0]["call"]["arguments"]["x"] == written
    where = ["calls", 0, "call", "arguments", "x"]
    assert [
        p[len(where) :] for p in data.get("non_finite", []) if p[: len(where)] == where
    ] == listed
    assert ("non_finite" in data) == bool(listed)
    assert RunState.from_json(text).to_json() == text
    signed = suspended.state.to_json(key="k")  # signed as it is read back
    assert RunState.from_json(signed, key="k").to_json(key="k") == signed
