"""A durable run's payloads carry a lone surrogate a tool returned (``os.listdir()`` of a non-UTF-8 name)."""

from __future__ import annotations

from toolfold.integrations.temporal._activities import _within
from toolfold.integrations.temporal._converter import ToolfoldJSONPayloadConverter
from toolfold.runtime.core._events import ToolReturned


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
    assert _within(returned, "listing", 100) is returned
    assert _within(returned, "listing", 5).is_error
