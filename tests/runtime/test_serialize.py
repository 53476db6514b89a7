"""One converter: states, events and effects round-trip through JSON; replay and fork."""

from __future__ import annotations

import json
import re

import attrs
import pytest
from core_helpers import answer, call, responded, spec, start
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold import SerializationError
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
