"""A durable run's payloads carry a lone surrogate a tool returned (``os.listdir()`` of a non-UTF-8 name)."""

from __future__ import annotations

from temporal_runs import _activity_environment, _decoded

from toolfold import Agent, RunState, tool
from toolfold.integrations.temporal._activities import _within
from toolfold.integrations.temporal._converter import ToolfoldJSONPayloadConverter
from toolfold.runtime.core._events import ToolReturned
from toolfold.testing import ScriptedModel

EMOJI = "\U0001f600" * 1000  # 4 bytes each in UTF-8, 12 as JSON escapes


def _checked(returned: ToolReturned, limit: int) -> ToolReturned:
    """What a tool activity sends for ``returned`` under a result limit of ``limit`` bytes."""
    sent = _activity_environment().run(_within, returned, "listing", limit)
    checked: ToolReturned = _decoded(sent, ToolReturned)
    return checked


def test_a_tool_result_holding_a_lone_surrogate_makes_a_payload_that_reads_back() -> None:
    """The activity's result is written with a JSON escape and read back exactly (it failed to encode)."""
    converter = ToolfoldJSONPayloadConverter()
    returned = ToolReturned("c1", "caf\udce9.txt, ok.txt")
    payload = converter.to_payload(returned)
    assert payload is not None
    assert converter.from_payload(payload, ToolReturned) == returned
    plain = ToolReturned("c1", "café")
    assert "café".encode() in converter.to_payload(plain).data  # (others stay UTF-8)


def test_the_size_limit_counts_a_result_holding_a_lone_surrogate() -> None:
    """The result-size check measures such a result instead of failing on it."""
    returned = ToolReturned("c1", "caf\udce9.txt")
    assert _checked(returned, 100) == returned
    assert _checked(returned, 5).is_error


def test_a_lone_surrogate_leaves_the_rest_of_the_payload_utf8_the_size_the_check_counted() -> None:
    """Only the lone surrogate is escaped: 1000 emoji stay 4 bytes each (they were 12, the
    payload 3x what the size check counted), and the payload is what `_within` measured."""
    converter = ToolfoldJSONPayloadConverter()
    returned = ToolReturned("c1", EMOJI + " caf\udce9.txt")
    payload = converter.to_payload(returned)
    assert payload is not None
    assert EMOJI.encode() + b" caf\\udce9.txt" in payload.data
    assert converter.from_payload(payload, ToolReturned) == returned
    without = converter.to_payload(ToolReturned("c1", EMOJI + " cafe.txt"))
    assert len(payload.data) == len(without.data) + len("\\udce9") - len("e")


def test_the_size_check_counts_a_lone_surrogate_as_the_escape_the_payload_writes() -> None:
    """'caf\\udce9' is 9 bytes in the payload: within a limit of 9, over one of 8."""
    returned = ToolReturned("c1", "caf\udce9")
    assert _checked(returned, 9) == returned
    assert _checked(returned, 8).is_error
    big = ToolReturned("c1", EMOJI + "\udce9")
    assert _checked(big, 4006) == big
    assert _checked(big, 4005).is_error


@tool
def listing(folder: str) -> list[str]:
    """List a folder.

    Args:
        folder: The folder.
    """
    return ["caf\udce9.txt", "\u00e9t\u00e9.txt"]  # os.listdir() of a name that is not UTF-8


def test_a_state_holding_a_lone_surrogate_escapes_it_alone_and_reads_back() -> None:
    """RunState.to_json escapes the lone surrogate (it failed to encode) but keeps 'été' as
    it is, not every non-ASCII character; the text reads back to the same state."""
    script = [ScriptedModel.call("listing", {"folder": "été"}), "Listed."]
    state = Agent(ScriptedModel(script), tools=[listing]).run("go").state
    text = state.to_json()
    text.encode("utf-8")
    assert "caf\\udce9.txt" in text
    assert "\u00e9t\u00e9.txt" in text
    assert '"folder":"\u00e9t\u00e9"' in text
    assert RunState.from_json(text) == state
