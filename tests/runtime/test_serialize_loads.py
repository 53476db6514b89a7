"""Saved states load as they were saved: bare NaN outputs, the generic loader, signatures, usage."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import math
import random
import struct
from pathlib import Path
from typing import Any

import attrs
import pytest
from core_helpers import answer, call, responded, spec, start

import toolfold
from toolfold import (
    Agent,
    InvalidEventError,
    MalformedResponseError,
    Route,
    RunState,
    Sequence,
    SerializationError,
    UsageError,
    tool,
)
from toolfold.runtime import (
    AttemptDropped,
    Finish,
    Message,
    ModelResponse,
    OutputAccepted,
    OutputSpec,
    ToolReturned,
    Usage,
    UserMessageAdded,
    events_from_json,
    events_to_json,
    from_json,
    next_effect,
    reduce,
    replay,
    to_json,
)
from toolfold.runtime.core._serialize import unstructure
from toolfold.testing import FunctionModel, ScriptedModel


def _nan_output_state() -> RunState:
    state = start(output=OutputSpec("out", schema={"type": "number"}))
    state = reduce(state, answer("NaN"))
    return reduce(state, OutputAccepted(math.nan))


def test_a_bare_nan_output_equals_its_replay_and_its_load() -> None:
    """A state whose output is math.nan equals its replay and its own saved and loaded copy."""
    state = _nan_output_state()
    assert state.output is math.nan
    assert OutputAccepted(math.nan) == OutputAccepted(math.nan)
    assert replay(state.events) == state
    loaded = RunState.from_json(state.to_json())
    assert loaded == state
    assert math.isnan(loaded.output)
    assert next_effect(loaded) == Finish("stop", math.nan)


def test_a_nan_held_bare_equals_any_nan_and_other_values_compare_by_eq() -> None:
    """A bare NaN output equals any NaN (a model's, numpy's); other values compare with == as before."""
    assert OutputAccepted(float("nan")) == OutputAccepted(math.nan)
    assert hash(OutputAccepted(float("nan"))) == hash(OutputAccepted(math.nan))
    assert OutputAccepted(math.nan) != OutputAccepted(None)
    assert OutputAccepted(1) == OutputAccepted(1.0)
    assert OutputAccepted({"a": [1]}) == OutputAccepted({"a": [1]})
    assert OutputAccepted(1) != OutputAccepted(2)
    assert Finish("stop", float("nan")) == Finish("stop", math.nan)


def _produce(text: str) -> float:
    """Return NaN."""
    return math.nan


@tool(requires_approval=True)
def _publish(text: str) -> str:
    """Publish.

    Args:
        text: The text.
    """
    return "published"


def test_a_workflow_suspended_after_a_nan_step_loads_and_resumes() -> None:
    """A workflow whose sub-run ended in math.nan, suspended for an approval, loads from its saved text and resumes."""
    inner = Sequence(_produce, name="inner")
    model = ScriptedModel([ScriptedModel.call("_publish", {"text": "x"}), "done"])
    flow = Sequence(inner, Agent(model, name="publisher", tools=[_publish]), name="flow")
    suspended = flow.run("go").state
    assert suspended.phase == "awaiting_approval"
    loaded = RunState.from_json(suspended.to_json())
    assert loaded == suspended
    approvals = {key: True for key, _ in loaded.keyed_pending_approvals}
    assert flow.resume(loaded, approvals=approvals).text == "done"


def test_a_finished_workflow_with_a_nan_output_replays_and_loads() -> None:
    """Sequence(step returning math.nan): replay(state.events) == state, and the saved state loads equal."""
    state = Sequence(_produce, name="wf").run("go").state
    assert math.isnan(state.output)
    assert replay(state.events) == state
    assert RunState.from_json(state.to_json()) == state


def _produce_in_a_dict(text: str) -> dict[str, float]:
    """Return NaN in an object."""
    return {"mean": math.nan}


def test_a_workflow_output_holding_nan_in_an_object_loads_equal() -> None:
    """A step's {"mean": math.nan} is kept as math.nan itself, so the saved state loads equal."""
    state = Sequence(_produce_in_a_dict, name="wf").run("go").state
    assert state.output["mean"] is math.nan
    assert RunState.from_json(state.to_json()) == state


def _unchanged(value: Any) -> Any:
    """Return the input."""
    return value


def _fresh_nan_in_a_dict(text: str) -> dict[str, Any]:
    """Return a NaN made by float() (another object than math.nan) in an object."""
    return {"a": float("nan"), "b": [float("nan")]}


@pytest.mark.parametrize(
    "given", [{"x": float("nan")}, math.nan, [float("nan")]], ids=["dict", "bare", "list"]
)
def test_a_nan_in_a_workflows_input_loads_equal(given: Any) -> None:
    """Sequence(step).run({"x": nan}): the input, in the step's call, is math.nan itself, so the state loads equal."""
    state = Sequence(_unchanged, name="wf").run(given).state
    assert state.phase == "finished"
    assert RunState.from_json(state.to_json()) == state


def test_a_nan_object_passed_on_to_the_next_step_loads_equal() -> None:
    """A step's {"a": float("nan")} goes to the next step as math.nan itself: the saved state loads equal."""
    state = Sequence(_fresh_nan_in_a_dict, _unchanged, name="wf").run("go").state
    assert state.output["a"] is math.nan
    assert RunState.from_json(state.to_json()) == state


def test_a_routes_branch_chosen_after_a_load_gets_the_input_as_a_load_gives_it() -> None:
    """A router that awaited approval, loaded and resumed: its branch's call holds the input's NaN as math.nan, so the state loads equal."""

    def route(resumed: bool) -> Route:
        script = [ScriptedModel.call("_delete", {"path": "x"}), "a"][resumed:]
        router = Agent(ScriptedModel(script), name="router", tools=[_delete])
        return Route(router, {"a": _unchanged}, name="route")

    suspended = route(False).run({"x": math.nan}).state
    assert suspended.phase == "awaiting_approval"
    loaded = RunState.from_json(suspended.to_json())
    approvals = {key: True for key, _ in loaded.keyed_pending_approvals}
    state = route(True).resume(loaded, approvals=approvals).state
    assert state.phase == "finished"
    assert state.output["x"] is math.nan
    assert RunState.from_json(state.to_json()) == state


@tool(requires_approval=True)
def _delete(path: str) -> str:
    """Delete a file.

    Args:
        path: The file to delete.
    """
    return "deleted " + path


def _awaiting_delete() -> RunState:
    model = ScriptedModel([ScriptedModel.call("_delete", {"path": "/tmp/x"}), "ok"])
    return Agent(model, tools=[_delete]).run("go").state


def test_the_generic_from_json_refuses_a_state_edited_apart_from_its_log() -> None:
    """from_json(text, RunState) checks the event log as RunState.from_json does: an edited call is refused."""
    data = json.loads(_awaiting_delete().to_json())
    data["calls"][0]["call"]["arguments"] = {"path": "/"}
    data["calls"][0]["call"]["arguments_text"] = '{"path": "/"}'
    with pytest.raises(SerializationError, match=r"the event log gives .*@ \$\.calls\[0\]\.call"):
        from_json(json.dumps(data), RunState)


def test_the_generic_to_json_of_a_state_is_what_run_state_from_json_reads() -> None:
    """to_json(state) writes RunState.to_json's document (format tag, non_finite), and both loaders read it."""
    state = _nan_output_state()
    text = to_json(state)
    assert text == state.to_json()
    assert json.loads(text)["format"] == "toolfold.run_state/2"
    assert RunState.from_json(text) == state
    assert from_json(text, RunState) == state
    assert to_json(state, RunState) == text


def test_a_state_the_generic_to_json_wrote_without_a_format_still_loads() -> None:
    """A document from the old to_json(state) (no format tag, bare NaN) loads through from_json(text, RunState)."""
    state = _nan_output_state()
    old = json.dumps(unstructure(state, RunState), ensure_ascii=False, separators=(",", ":"))
    assert "format" not in json.loads(old)
    assert "NaN" in old
    loaded = from_json(old, RunState)
    assert loaded == state
    assert loaded.output is math.nan


def test_a_type_given_by_name_is_a_serialization_error_saying_so() -> None:
    """from_json('"x"', "Message") names the problem (a name, not the class), not a bare cattrs error."""
    with pytest.raises(SerializationError, match="pass the class itself, not its name"):
        from_json('"x"', "Message")


def test_a_temporal_snapshot_with_a_sub_run_in_flight_reads_back_as_it_is() -> None:
    """A snapshot (a sub-run in flight in its call, which the log does not hold) is written untagged and read back unchecked."""
    from toolfold.runtime.core._serialize import snapshot_from_json, snapshot_to_json

    state = _awaiting_delete()
    view = attrs.evolve(state, calls=(attrs.evolve(state.calls[0], child=_nan_output_state()),))
    text = snapshot_to_json(view)
    assert "format" not in json.loads(text)
    assert snapshot_from_json(text) == view
    with pytest.raises(SerializationError, match=r"@ \$\.calls\[0\]\.child"):
        from_json(text, RunState)


_SAVED = Path(__file__).parent / "saved"


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file (the saved states' tool).

    Args:
        path: The file to delete.
    """
    return "deleted " + path


def _js_number(value: float) -> str:
    """Number::toString (ECMA-262), written from the spec, not from toolfold's code: the
    fewest digits k that read back as the value, laid out by the exponent n."""
    if value == 0:
        return "0"
    if value < 0:
        return "-" + _js_number(-value)
    k, text = next((k, t) for k in range(1, 18) if float(t := f"{value:.{k - 1}e}") == value)
    mantissa, exponent = text.split("e")
    digits, n = mantissa.replace(".", ""), int(exponent) + 1
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    return digits[0] + ("." + digits[1:] if k > 1 else "") + f"e{n - 1:+d}"


# What node writes (`String(v)`, which JSON.stringify uses), v22: values around 2**53,
# integral floats past it up to 1e21 written without an exponent, and the smallest double.
_NODE_WRITES = [
    (2.0**53, "9007199254740992"),
    (2.0**53 + 2, "9007199254740994"),
    (2.0**53 - 1, "9007199254740991"),
    (2.0**60, "1152921504606847000"),
    (-(2.0**60), "-1152921504606847000"),
    (1e20, "100000000000000000000"),
    (1.2345678901234567e20, "123456789012345670000"),
    (1e21, "1e+21"),
    (9.999999999999999e20, "999999999999999900000"),
    (1.2345678901234567e21, "1.2345678901234568e+21"),
    (5e-324, "5e-324"),
    (-0.0, "0"),
    (1.0, "1"),
    (0.1, "0.1"),
    (1 / 3, "0.3333333333333333"),
    (1e-6, "0.000001"),
    (1.5e-7, "1.5e-7"),
    (1e-7, "1e-7"),
    (123.456, "123.456"),
    (1e16, "10000000000000000"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (2.2250738585072014e-308, "2.2250738585072014e-308"),
    (0.000001234, "0.000001234"),
]


@pytest.mark.parametrize(("value", "written"), _NODE_WRITES, ids=[w for _, w in _NODE_WRITES])
def test_numbers_are_written_as_javascript_writes_them(value: float, written: str) -> None:
    """number_text gives node's String(value); so does the test's own Number::toString."""
    from toolfold.runtime.core._json_numbers import number_text

    assert number_text(value) == written
    assert _js_number(value) == written


def test_number_text_agrees_with_number_to_string_on_random_doubles() -> None:
    """number_text and the spec's Number::toString agree on 3000 random finite doubles."""
    from toolfold.runtime.core._json_numbers import number_text

    randomly = random.Random(37)
    values = []
    while len(values) < 3000:
        value = struct.unpack("<d", randomly.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(value):
            values.append(value)
    values += [float(2**e) for e in range(40, 80)] + [10.0**e for e in range(-10, 25)]
    assert [number_text(v) for v in values] == [_js_number(v) for v in values]


def _as_a_browser_writes(text: str) -> str:
    """``JSON.stringify(JSON.parse(text), null, 1)``, keys reordered: each number a double,
    written as JavaScript writes it (1.0 as 1, -0.0 as 0, 2.0**60 as 1152921504606847000)."""

    def js(value: Any) -> str:
        if value is None or type(value) is bool:
            return json.dumps(value)
        if type(value) in (int, float):
            return _js_number(float(value))
        if type(value) is dict:
            items = [f"{json.dumps(k)}: {js(v)}" for k, v in reversed(value.items())]
            return "{\n" + ",\n".join(items) + "\n}"
        if type(value) is list:
            return "[\n" + ",\n".join(js(v) for v in value) + "\n]"
        return json.dumps(value)

    return js(json.loads(text))


def _with_numbers(arguments: dict[str, Any]) -> RunState:
    state = start(spec("f"))
    return reduce(state, responded(call("c1", "f", arguments)))


def test_a_signed_state_with_integral_floats_verifies_after_a_browser_round_trip() -> None:
    """1.0, -0.0 and 1e308 written as a browser writes them (1, 0, digits) keep the signature valid."""
    state = _with_numbers({"ratio": 1.0, "zero": -0.0, "big": 1e308, "third": 1 / 3})
    text = state.to_json(key="k")
    browsed = _as_a_browser_writes(text)
    assert '"ratio": 1,' in browsed or '"ratio": 1\n' in browsed
    loaded = RunState.from_json(browsed, key="k")
    assert loaded == state
    assert loaded.calls[0].call.arguments["third"] == 1 / 3


@pytest.mark.parametrize(
    "number",
    [2.0**60, 1.2345678901234567e20, -(2.0**60), 2.0**53 + 2, 1e20, 1e21, 5e-324, -0.0],
    ids=str,
)
def test_a_big_integral_float_verifies_after_a_browser_round_trip(number: float) -> None:
    """2.0**60 (which JavaScript writes 1152921504606847000) and other doubles keep the signature."""
    text = _with_numbers({"n": number}).to_json(key="k")
    browsed = _as_a_browser_writes(text)
    loaded = RunState.from_json(browsed, key="k")
    assert float(loaded.calls[0].call.arguments["n"]) == number


def _verifies_as_1709bfb6_did(text: str, key: bytes) -> str:
    """What toolfold 1709bfb6's check of a signed state said (its code, as it was)."""
    data = json.loads(text)
    signature = data.pop("signature")
    if not signature.startswith("hmac-sha256:") or len(signature) != len("hmac-sha256:") + 64:
        return "the signature is not 'hmac-sha256:<hex digest>'"
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    digest = hmac.new(key, canonical.encode("ascii"), hashlib.sha256).hexdigest()
    if hmac.compare_digest("hmac-sha256:" + digest, signature):
        return "verified"
    return "the signature does not match the key: the state was changed after it was signed"


def test_a_reader_from_before_refuses_a_new_signature_as_an_unknown_scheme_not_a_change() -> None:
    """A state signed now (temperature 1.0) is refused by 1709bfb6's check for its scheme, never
    as changed after signing (a rolling deploy or rollback)."""
    state = _with_numbers({"ratio": 1.0, "big": 1e308})
    state = attrs.evolve(state, config=attrs.evolve(state.config, settings={"temperature": 1.0}))
    text = state.to_json(key="k")
    assert _verifies_as_1709bfb6_did(text, b"k") == (
        "the signature is not 'hmac-sha256:<hex digest>'"
    )


def test_a_number_a_browser_rounds_is_a_change_the_signature_refuses() -> None:
    """An integer past 2**53 that JavaScript rounds (2**53 + 1 -> 2**53) no longer verifies; one it holds exactly does."""
    kept = _with_numbers({"id": 2**53}).to_json(key="k")
    assert RunState.from_json(kept, key="k").calls[0].call.arguments["id"] == 2**53
    text = _with_numbers({"id": 2**53 + 1}).to_json(key="k")
    rounded = text.replace(str(2**53 + 1), str(2**53))
    with pytest.raises(SerializationError, match="the signature does not match"):
        RunState.from_json(rounded, key="k")


def test_a_state_signed_before_numbers_were_signed_by_value_still_verifies() -> None:
    """A state signed by toolfold 1709bfb6 (temperature 1.0, arguments 1.0, -0.0, 1e308) loads with its key and resumes."""
    text = (_SAVED / "signed_before_numbers_by_value.json").read_text()
    assert '"temperature":1.0' in text
    loaded = RunState.from_json(text, key="old secret")
    assert loaded.config.settings["temperature"] == 1.0
    with pytest.raises(SerializationError, match="the signature does not match"):
        RunState.from_json(text, key="another secret")
    tampered = text.replace('"temperature":1.0', '"temperature":2.0')
    with pytest.raises(SerializationError, match="the signature does not match"):
        RunState.from_json(tampered, key="old secret")
    # signed again, it is signed by value
    resigned = loaded.to_json(key="old secret")
    assert RunState.from_json(_as_a_browser_writes(resigned), key="old secret") == loaded


@tool
def measure(values: dict[str, Any]) -> str:
    """Measure the values.

    Args:
        values: The values.
    """
    return "measured"


@tool(requires_approval=True)
def delete_numbered(path: str, numbers: dict[str, Any]) -> str:
    """Delete a file.

    Args:
        path: The file.
        numbers: Numbers.
    """
    return "deleted"


def test_a_state_with_a_nan_and_a_sub_run_signed_before_still_verifies() -> None:
    """A state toolfold 1709bfb6 signed (1.0, -0.0, 2.0**60, NaN, an agent-as-tool sub-run) verifies with its key, not another, nor edited.

    Made by tests/runtime/saved/signed_before_nested_nan.md: it catches a change in
    what the old scheme signs (`_canonical_before`), which a signature made by
    today's code in the test could not.
    """
    text = (_SAVED / "signed_before_nested_nan.json").read_text()
    assert '"signature":"hmac-sha256:' in text
    loaded = RunState.from_json(text, key="old secret")
    numbers = loaded.calls[0].call.arguments["numbers"]
    assert numbers["ratio"] == 1.0
    assert type(numbers["ratio"]) is float
    assert math.copysign(1.0, numbers["zero"]) == -1.0
    assert numbers["big"] == 2.0**60
    assert math.isnan(numbers["nan"])
    child = loaded.log[2].child  # type: ignore[attr-defined]
    assert child.phase == "finished"
    assert math.isnan(child.conversation[1].parts[0].arguments["values"]["nan"])
    with pytest.raises(SerializationError, match="the signature does not match"):
        RunState.from_json(text, key="another secret")
    tampered = text.replace('"tenth":0.1', '"tenth":0.2', 1)
    assert tampered != text
    with pytest.raises(SerializationError, match="the signature does not match"):
        RunState.from_json(tampered, key="old secret")
    worker = Agent(ScriptedModel([]), name="worker", tools=[measure])
    agent = Agent(
        ScriptedModel(["done"]),
        tools=[worker.as_tool(description="Measures."), delete_numbered],
        settings={"temperature": 1.0},
    )
    approvals = {key: True for key, _ in loaded.keyed_pending_approvals}
    assert agent.resume(loaded, approvals=approvals).text == "done"


def _numbered_waiting(numbers: dict[str, Any]) -> tuple[Agent, RunState]:
    call_numbers = ScriptedModel.call("delete_numbered", {"path": "/x", "numbers": numbers})
    first = Agent(ScriptedModel([call_numbers]), tools=[delete_numbered]).run("go")
    assert first.finish_reason == "approval_required"
    return Agent(ScriptedModel(["done"]), tools=[delete_numbered]), first.state


def test_an_approval_key_still_matches_its_call_after_a_browser_round_trip() -> None:
    """A key made for a call with 100.0 in its arguments approves the signed state after a
    browser's JSON.parse/JSON.stringify (which writes 100): its fingerprint counts numbers
    by value, as the signature does; it was refused as "made for another call"."""
    agent, state = _numbered_waiting({"amount": 100.0, "zero": -0.0, "tenth": 0.1})
    call_id = state.pending_approvals[0].id
    key = toolfold.approval_key(state, call_id)
    back = RunState.from_json(_as_a_browser_writes(state.to_json(key="k")), key="k")
    assert type(back.pending_approvals[0].arguments["numbers"]["amount"]) is int
    assert toolfold.approval_key(back, call_id) == key
    assert [k for k, _ in back.keyed_pending_approvals] == [call_id]
    done = agent.resume(back, approvals={key: True})
    assert done.text == "done"
    assert done.steps[0].tool_results[0].content == "deleted"


def test_an_approval_key_made_before_numbers_counted_by_value_still_approves() -> None:
    """The key toolfold a408348e made for a call with 100.0 and -0.0 in its arguments (its
    fingerprint over the numbers as written) approves the state it saved, loaded as saved.

    Made by tests/runtime/saved/signed_approval_key_a408348e.md: users hold such keys
    (in a page, a queue) across an upgrade; today's key for the call is another one.
    """
    old_key = "call_1#5aade631a3611fa4211e6f0676f1912d"
    text = (_SAVED / "signed_approval_key_a408348e.json").read_text()
    loaded = RunState.from_json(text, key="old secret")
    assert loaded.pending_approvals[0].arguments["numbers"]["amount"] == 100.0
    assert toolfold.approval_key(loaded, "call_1") != old_key
    assert toolfold.approval_key(loaded, old_key) == old_key  # (bound to its call: as it is)
    agent = Agent(ScriptedModel(["done"]), tools=[delete_numbered])
    assert agent.resume(loaded, approvals={old_key: True}).text == "done"
    # Still bound: another run's call of the same id and arguments refuses it.
    _, other = _numbered_waiting({"amount": 100.0, "zero": -0.0, "tenth": 0.1, "n": 3})
    with pytest.raises(UsageError, match="was made for another call"):
        agent.resume(
            other, approvals={old_key.replace("call_1", other.pending_approvals[0].id): True}
        )


def test_a_workflow_suspended_after_a_nan_step_saved_before_loads_and_resumes() -> None:
    """The state toolfold 1709bfb6 saved (a NaN step, then an approval) loads and resumes now."""
    inner = Sequence(_produce, name="inner")
    model = ScriptedModel(["done"])  # (the call it answered before was saved)
    flow = Sequence(inner, Agent(model, name="publisher", tools=[delete]), name="flow")
    loaded = RunState.from_json((_SAVED / "nan_step_suspended.json").read_text())
    assert loaded.phase == "awaiting_approval"
    approvals = {key: True for key, _ in loaded.keyed_pending_approvals}
    assert flow.resume(loaded, approvals=approvals).text == "done"


def test_a_stored_config_value_out_of_range_is_named_with_its_message_and_path() -> None:
    """max_steps 0 in a stored state gives RunConfig's own message at $.config.max_steps, not 'invalid value'."""
    data = json.loads(start().to_json())
    data["config"]["max_steps"] = 0
    data["log"][0]["config"]["max_steps"] = 0
    with pytest.raises(SerializationError) as caught:
        RunState.from_json(json.dumps(data))
    assert caught.value.problems == (
        "RunConfig.max_steps must be an integer >= 1, got 0 @ $.config.max_steps",
        "RunConfig.max_steps must be an integer >= 1, got 0 @ $.log[0].config.max_steps",
    )


_LONGEST = 10**4300 - 1  # (the longest int a Usage takes: two of them sum to a longer one)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (Usage(input_tokens=1e308, requests=1), Usage(input_tokens=1e308, requests=1)),
        (Usage(output_tokens=1.5, requests=1), Usage(output_tokens=10**400, requests=1)),
        (Usage(output_tokens=_LONGEST, requests=1), Usage(output_tokens=_LONGEST, requests=1)),
    ],
    ids=["float-sum-to-inf", "int-too-large-for-float", "int-over-4300-digits"],
)
def test_usage_that_would_overflow_is_refused_where_it_enters(first: Usage, second: Usage) -> None:
    """A response whose usage sums past a finite count is an InvalidEventError; the state before it saves and loads."""
    state = reduce(start(), responded(text="a", usage=first))
    state = reduce(state, UserMessageAdded(Message.user("more")))
    with pytest.raises(InvalidEventError, match="overflows: a count is no finite number") as caught:
        reduce(state, responded(text="b", usage=second))
    assert caught.value.state == state
    assert RunState.from_json(state.to_json()) == state


@tool
def _noop() -> str:
    """Do nothing."""
    return "ok"


def _absurd_usage_model(second: Usage) -> FunctionModel:
    answers = [
        ModelResponse(
            Message.assistant("", [ScriptedModel.call("_noop", {})]),
            usage=Usage(
                input_tokens=1e308, output_tokens=1.5, reasoning_tokens=-_LONGEST, requests=1
            ),
        ),
        ModelResponse(Message.assistant("b"), usage=second),
    ]
    return FunctionModel(lambda messages, info=None: answers.pop(0))


@pytest.mark.parametrize(
    ("second", "field"),
    [
        (Usage(input_tokens=1e308, requests=1), "input_tokens"),
        (Usage(output_tokens=10**400, requests=1), "output_tokens"),
        # (summed with the first answer's -_LONGEST: more than 4300 digits, which JSON text
        # cannot hold, so the state could not be saved)
        (Usage(reasoning_tokens=-_LONGEST, requests=1), "reasoning_tokens"),
    ],
    ids=["float-sum-to-inf", "int-too-large-for-float", "int-over-4300-digits"],
)
@pytest.mark.parametrize("how", ["run", "arun", "observed"])
def test_a_models_usage_the_run_cannot_add_up_is_a_malformed_response(
    second: Usage, field: str, how: str
) -> None:
    """Agent.run with a model whose second usage overflows the sum: MalformedResponseError naming the count, state before the answer."""
    agent = Agent(_absurd_usage_model(second), tools=[_noop])

    def go() -> object:
        if how == "observed":  # (each event reduced and shown, not an open step)
            return agent.run("go", on_event=lambda event: None)
        return agent.run("go") if how == "run" else asyncio.run(agent.arun("go"))

    with pytest.raises(MalformedResponseError) as caught:
        go()
    error = caught.value
    assert error.path == f"$.usage.{field}"
    assert f"step 2 reports a usage the run cannot add up: Usage.{field}" in str(error)
    state = error.state  # type: ignore[attr-defined]
    assert state.phase == "awaiting_model"
    assert state.usage.input_tokens == 1e308
    assert RunState.from_json(state.to_json()) == state


def test_a_dropped_attempts_usage_that_would_overflow_is_refused() -> None:
    """AttemptDropped adding usage past a finite count is refused, not kept as infinity."""
    state = reduce(start(), responded(text="a", usage=Usage(input_tokens=1e308, requests=1)))
    state = reduce(state, UserMessageAdded(Message.user("more")))
    with pytest.raises(InvalidEventError, match="overflows"):
        reduce(state, AttemptDropped(usage=Usage(input_tokens=1e308, requests=1)))


def _done_with_a_call() -> RunState:
    state = reduce(start(spec("f")), responded(call("c1", "f", {"a": 1})))
    return reduce(state, ToolReturned("c1", "x"))


@pytest.mark.parametrize(
    ("where", "path"),
    [
        (lambda d: d, "$"),
        (lambda d: d["log"][2], "$.log[2]"),
        (lambda d: d["log"][1]["response"], "$.log[1].response"),
        (
            lambda d: d["log"][1]["response"]["message"]["parts"][0],
            "$.log[1].response.message.parts[0]",
        ),
        (lambda d: d["config"], "$.config"),
    ],
    ids=["state", "event", "response", "part", "config"],
)
def test_a_saved_state_with_an_unknown_field_is_refused_naming_it(where: Any, path: str) -> None:
    """A key that is no field (a newer toolfold's) is refused with its path, not dropped on load and lost on save."""
    data = json.loads(_done_with_a_call().to_json())
    where(data)["priority"] = 1
    with pytest.raises(SerializationError) as caught:
        RunState.from_json(json.dumps(data))
    expected = (
        "unknown field 'priority' (the document may be from a newer toolfold: "
        f"load it with that version) @ {path}"
    )
    assert expected in caught.value.problems


def test_an_event_log_with_an_unknown_field_is_refused() -> None:
    """events_from_json refuses an event carrying a key that is no field."""
    events = json.loads(events_to_json(_done_with_a_call().events))
    events[2]["priority"] = 1
    with pytest.raises(SerializationError, match=r"unknown field 'priority' .* @ \$\[2\]"):
        events_from_json(json.dumps(events))


def test_every_saved_state_in_the_tests_loads_under_the_unknown_field_check() -> None:
    """Every saved state in tests/runtime/saved (written by earlier toolfolds) has no unknown field: each loads."""
    names = sorted(p.name for p in _SAVED.glob("*.json"))
    assert len(names) >= 5
    for name in names:
        text = (_SAVED / name).read_text()
        key = "old secret" if name.startswith("signed") else None
        assert RunState.from_json(text, key=key).log


@pytest.mark.parametrize(
    ("label", "reason"),
    [
        ("length_str", "length"),
        ("content_filter_str", "content_filter"),
        ("other_none", "other"),
        ("other_str", "other"),
        ("length_int", "stop"),
    ],
)
def test_a_state_saved_before_runs_carried_their_finish_loads_and_resumes(
    label: str, reason: str
) -> None:
    """A finished state toolfold 8cb3e648 saved with ``stop``, where its log now gives
    ``length`` / ``content_filter`` / ``other``, loads with the log's reason and resumes.

    Made by tests/runtime/saved/finished_before_carried.md: before, such a
    state failed to load ("finish_reason is 'stop' but the event log gives ...").
    """
    text = (_SAVED / f"finished_before_carried_{label}.json").read_text()
    assert '"finish_reason":"stop"' in text
    loaded = RunState.from_json(text)
    assert (loaded.phase, loaded.finish_reason) == ("finished", reason)
    assert RunState.from_json(loaded.to_json()) == loaded
    output_type: Any = {"str": str, "int": int, "none": None}[label.rsplit("_", 1)[1]]
    kw = {} if output_type is None else {"output_type": output_type}
    went_on = Agent(ScriptedModel(["7"]), **kw).resume(loaded, message="again")
    assert (went_on.finish_reason, went_on.text) == ("stop", "7")


def test_a_signed_state_saved_before_runs_carried_their_finish_loads() -> None:
    """A signed state 8cb3e648 saved (``stop`` where its log now gives ``length``) verifies with
    its key and loads with the log's reason."""
    text = (_SAVED / "signed_finished_before_carried_length_str.json").read_text()
    assert RunState.from_json(text, key="old secret").finish_reason == "length"


def test_a_sub_run_saved_before_runs_carried_their_finish_loads_with_its_log_s_reason() -> None:
    """An agent-as-tool sub-run 8cb3e648 saved finished ``stop`` (its answer said ``length``)
    carries ``length`` inside its loaded parent too, as it does loaded alone.

    Before, the parent's replay copied the sub-run as stored: ``stop`` inside the parent,
    ``length`` once the same sub-run was saved and loaded by itself.
    """
    text = (_SAVED / "finished_before_carried_child.json").read_text()
    loaded = RunState.from_json(text)
    (child,) = [e.child for e in loaded.log if getattr(e, "child", None) is not None]
    assert (loaded.finish_reason, child.finish_reason) == ("stop", "length")
    assert RunState.from_json(child.to_json()) == child
    assert RunState.from_json(loaded.to_json()) == loaded
    worker = Agent(ScriptedModel(["part"]), output_type=str, name="worker")
    agent = Agent(ScriptedModel(["7"]), tools=[worker.as_tool(description="Works.")])
    went_on = agent.resume(loaded, message="again")
    assert (went_on.finish_reason, went_on.text) == ("stop", "7")


def test_a_forged_sub_run_saved_before_runs_carried_their_finish_names_only_the_forgery() -> None:
    """A sub-run saved finished ``stop`` (its log gives ``length``) whose output was
    edited is refused naming the output alone.

    Before, the message listed first the finish reason, a difference such a state may
    have, as if it were a problem too.
    """
    document = json.loads((_SAVED / "finished_before_carried_child.json").read_text())
    (event,) = [e for e in document["log"] if e.get("child")]
    assert event["child"]["finish_reason"] == "stop"
    event["child"]["output"] = "FORGED"
    with pytest.raises(SerializationError) as caught:
        RunState.from_json(json.dumps(document))
    problems = str(caught.value).splitlines()[1:]
    assert problems == [
        "  - output is 'FORGED' but the event log gives 'part' @ $.log[2].child.output"
    ]


def test_only_the_finish_a_run_gave_before_loads_in_its_place() -> None:
    """The ``stop`` a run finished with before loads where the log gives ``other``; another
    edited finish reason, or one of an unfinished phase, is still refused."""
    answer_ = ModelResponse(Message.assistant("so far"), finish_reason="other")
    state = Agent(ScriptedModel([answer_])).run("hi").state
    assert state.finish_reason == "other"
    document = json.loads(state.to_json())
    document["finish_reason"] = "stop"
    assert RunState.from_json(json.dumps(document)).finish_reason == "other"
    document["finish_reason"] = "max_steps"
    with pytest.raises(SerializationError, match="but the event log gives 'other'"):
        RunState.from_json(json.dumps(document))
    stopped = Agent(ScriptedModel(["done"])).run("hi").state
    document = json.loads(stopped.to_json())
    document["finish_reason"] = "length"
    with pytest.raises(SerializationError, match="but the event log gives 'stop'"):
        RunState.from_json(json.dumps(document))
