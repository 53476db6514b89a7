"""Where the sub-runs of a streaming step send their events, tagged with their path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolfold.runtime._response import SubRunEvent
from toolfold.runtime.core._messages import ToolCallPart


class Relay:
    """Where the sub-runs of a streaming step send their events, tagged with their path.

    A streaming shell sets ``target`` before the calls start and yields what
    arrives there while they run, so a sub-agent's text reaches the caller as
    it is written. Events sent with no target are ``held`` and shown after
    the calls. ``send`` may be called from any thread (a sub-run on a worker).
    """

    __slots__ = ("held", "target")

    def __init__(self) -> None:
        self.target: Callable[[SubRunEvent], object] | None = None
        self.held: list[SubRunEvent] = []

    def sender(self, call: ToolCallPart) -> Callable[[Any], None]:
        """The ``forward`` of ``call``'s context: its sub-run's events, tagged with the call."""

        def send(event: Any) -> None:
            tagged = _tagged(call, event)
            target = self.target
            if target is None:
                self.held.append(tagged)
            else:
                target(tagged)

        return send


def _tagged(call: ToolCallPart, event: Any) -> SubRunEvent:
    if isinstance(event, SubRunEvent):
        return SubRunEvent((call.name, call.id, *event.path), event.event)
    return SubRunEvent((call.name, call.id), event)
