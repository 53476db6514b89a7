"""Signed states: a state that travelled through an untrusted place loads only if nobody changed it."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from toolfold import Agent, RunState, SerializationError, UsageError, tool
from toolfold.runtime import ApprovalGranted, reduce
from toolfold.testing import ScriptedModel

call = ScriptedModel.call
KEY = "state-signing-key-0123456789"
RAN: list[str] = []


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    RAN.append(path)
    return "deleted"


def _waiting() -> tuple[Agent, RunState]:
    RAN.clear()
    agent = Agent(ScriptedModel([call("delete", {"path": "/"}), "done"]), tools=[delete])
    first = agent.run("go")
    assert first.finish_reason == "approval_required"
    return agent, first.state


def _forged(state: RunState) -> RunState:
    """A consistent forgery: the approval event appended and the state replayed from it."""
    return reduce(state, ApprovalGranted(state.calls[0].call.id))


def test_a_signed_state_round_trips_without_the_key_in_it() -> None:
    """to_json(key=...) loads back equal with the key; the key itself is nowhere in the text."""
    _, state = _waiting()
    text = state.to_json(key=KEY)
    assert KEY not in text
    assert KEY.encode().hex() not in text
    assert json.loads(text)["signature"].startswith("hmac-sha256-v2:")
    assert RunState.from_json(text, key=KEY) == state
    assert RunState.from_json(text) == state  # without a key, the signature is not checked
    assert RunState.from_json(state.to_json(key=KEY.encode()), key=KEY) == state


def test_a_consistent_forgery_loads_unsigned_and_is_refused_signed() -> None:
    """An appended approval_granted passes the log check, but not the signature: the tool never runs."""
    agent, state = _waiting()
    forged = _forged(state)
    assert RunState.from_json(forged.to_json()) == forged  # the threat: consistent, so it loads
    signed = json.loads(state.to_json(key=KEY))
    transplanted = json.loads(forged.to_json()) | {"signature": signed["signature"]}
    with pytest.raises(
        SerializationError, match=r"signature does not match the key.*\$\.signature"
    ):
        RunState.from_json(json.dumps(transplanted), key=KEY)
    with pytest.raises(SerializationError, match=r"not signed, but a key was given"):
        RunState.from_json(forged.to_json(), key=KEY)
    assert RAN == []
    loaded = RunState.from_json(json.dumps(signed), key=KEY)
    assert agent.resume(loaded).finish_reason == "approval_required"
    assert RAN == []


def test_any_edit_of_a_signed_state_is_refused() -> None:
    """Changing the arguments everywhere, or one character of the signature, breaks the signature."""
    _, state = _waiting()
    text = state.to_json(key=KEY)
    edited = text.replace('\\"path\\":\\"/\\"', '\\"path\\":\\"/etc\\"').replace(
        '"path":"/"', '"path":"/etc"'
    )
    assert edited != text
    with pytest.raises(SerializationError, match="signature does not match"):
        RunState.from_json(edited, key=KEY)
    data = json.loads(text)
    last = data["signature"][-1]
    data["signature"] = data["signature"][:-1] + ("0" if last != "0" else "1")
    with pytest.raises(SerializationError, match="signature does not match"):
        RunState.from_json(json.dumps(data), key=KEY)
    bad_ones = (
        12,
        "hmac-sha256:\u00e9",
        "hmac-sha256:" + "0" * 63 + "\u00e9",
        "hmac-sha256:",
        "hmac-sha256-v2:" + "0" * 63,
        "hmac-sha256-v3:" + "0" * 64,
    )
    for bad in bad_ones:
        data["signature"] = bad
        with pytest.raises(
            SerializationError,
            match=r"not 'hmac-sha256-v2:<hex digest>' \(nor 'hmac-sha256:<hex digest>'",
        ):
            RunState.from_json(json.dumps(data), key=KEY)


def test_signatures_do_not_depend_on_the_text_layout() -> None:
    """Re-indented JSON with reordered keys still verifies: the signature covers the canonical form."""
    _, state = _waiting()
    data = json.loads(state.to_json(key=KEY))
    relaid = json.dumps(dict(reversed(list(data.items()))), indent=2, ensure_ascii=True)
    assert RunState.from_json(relaid, key=KEY) == state


def test_key_rotation_signs_with_the_first_and_accepts_any() -> None:
    """A list of keys signs with the first and accepts a state signed with any of them."""
    _, state = _waiting()
    old = state.to_json(key="old-key-123456")
    new = state.to_json(key=["new-key-123456", "old-key-123456"])
    assert new == state.to_json(key="new-key-123456")
    for text in (old, new):
        assert RunState.from_json(text, key=["new-key-123456", "old-key-123456"]) == state
    with pytest.raises(SerializationError, match="any of the 2 keys"):
        RunState.from_json(old, key=["new-key-123456", "other-key-123456"])


def test_a_wrong_key_argument_is_a_clear_error() -> None:
    """An empty key or an empty key list is refused before anything is signed or loaded."""
    _, state = _waiting()
    with pytest.raises(UsageError, match="must not be empty"):
        state.to_json(key="")
    with pytest.raises(UsageError, match="no key"):
        RunState.from_json(state.to_json(key=KEY), key=[])
    with pytest.raises(UsageError, match="str or bytes"):
        state.to_json(key=[3])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="str or bytes"):
        state.to_json(key=3)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="UTF-8"):
        RunState.from_json(state.to_json(key=KEY), key="\ud800")


def _in_stack(frames: int, call: Callable[[], str]) -> str:
    """``call()`` made ``frames`` calls deep (as from deep in a program)."""
    return call() if frames == 0 else _in_stack(frames - 1, call)


def _deep_settings(levels: int) -> RunState:
    """A finished state whose model settings hold an array nested ``levels`` deep."""
    data = json.loads(Agent(ScriptedModel(["hi"])).run("go").state.to_json())
    deep = json.loads("[" * levels + "]" * levels)
    for config in (data["config"], data["log"][0]["config"]):
        config["settings"] = {"extra_body": {"x": deep}}
    return RunState.from_json(json.dumps(data))


def test_a_state_nested_deeper_than_the_stack_left_still_signs_and_verifies() -> None:
    """A 400-level state signed from 350 calls deep (JSON writes it there) signs, and its
    signature is checked, rather than a bare RecursionError of the signing's own walk."""
    state = _deep_settings(400)
    text = _in_stack(350, lambda: state.to_json(key=KEY))
    assert RunState.from_json(text, key=KEY) == state
    assert _in_stack(350, lambda: state.to_json(key=KEY)) == text


def test_a_signed_state_given_a_deeply_nested_field_is_refused_not_a_recursion_error() -> None:
    """from_json(key=) of a signed document given a 700-level array says the signature
    does not match (a 990-level one may be too deep to check), never a bare RecursionError."""
    signed = _waiting()[1].to_json(key=KEY)
    for levels in (700, 990):
        text = signed[:-1] + ', "zz": ' + "[" * levels + "]" * levels + "}"
        with pytest.raises(SerializationError) as caught:
            RunState.from_json(text, key=KEY)
        (problem,) = caught.value.problems
        if levels == 700 or "nested too deeply" not in problem:
            assert problem.startswith("the signature does not match the key"), problem


def test_the_deep_walk_of_signing_gives_what_the_recursive_one_does() -> None:
    """`_by_value_deep` (the loop for deep documents) gives `_by_value`'s document."""
    from toolfold.runtime.core._serialize import _by_value, _by_value_deep

    data = {"a": [1.0, -0.0, 2.0**60, 0.5, {"b": [3.0, "x", None, True, [[]], {}]}], "c": 1e300}
    assert json.dumps(_by_value_deep(data)) == json.dumps(_by_value(data))
    assert json.dumps(_by_value_deep(data)) != json.dumps(data)
