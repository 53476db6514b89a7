"""A secret a stream writes across deltas: joined back and masked before it is passed on.

The transport masks a secret a server echoes inside one streamed event
(`Echoes`). A secret split between events (``"sk-pro"`` then ``"j-abc..."``,
a model writing it token by token) is in no one event; it is whole only in
the text, the reasoning or a call's arguments the deltas add up to, which a
run keeps. `SplitEchoes` sits between a codec's events and the caller: for a
run of deltas of one kind (answer text, reasoning text, one call's
arguments) it holds back the end of each delta that could be the start of a
secret, until the next delta shows whether it is one (then the secret is
masked whole) or the run ends (then the held text is passed on as it is).
Text goes out as soon as it cannot start a secret: only the few characters
that could are held, for as long as a run of deltas goes on.

A short key (fewer than 4 characters, masked only where it is written as a
credential, ``Bearer ab``) is not looked for across deltas; nor is a secret
whose deltas interleave with another call's, or a call's arguments that
write the secret with JSON escapes (``sk\\u002d...``) across deltas.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import attrs

from toolfold.adapters._http._keys import Scrubs, scrub
from toolfold.runtime.core._stream import (
    ReasoningDelta,
    ResponseInfo,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageUpdate,
)

__all__ = ["SplitEchoes"]


class SplitEchoes:
    """Masks the secrets of ``pairs`` (`scrubs`) written across a stream's deltas.

    One per stream: `feed` each event, in order, and `end` when the stream ends.
    """

    __slots__ = ("_held", "_pairs", "_run", "_values")

    def __init__(self, pairs: Scrubs) -> None:
        self._pairs = pairs
        # The secrets looked for across deltas: all but the short keys (a pattern each).
        self._values = tuple(value for value, _, _, where in pairs if where is None)
        # The run of deltas the held text belongs to: "text", ("reasoning", its
        # provider), or a call's index (its arguments).
        self._run: object = None
        self._held = ""

    def feed(self, event: StreamEvent) -> Iterator[StreamEvent]:
        """The events to pass on for ``event``: held text given back, or ``event`` masked."""
        run, text = _run_of(event)
        if run is None:
            if self._held and not isinstance(event, (UsageUpdate, ResponseInfo)):
                # (The counts and the response's name go by: they are no part of the text.)
                yield from self._release()
            yield event
            return
        if self._held and run != self._run:
            yield from self._release()
        whole = scrub(self._held + text, self._pairs) if self._held else text
        cut = self._start_of_secret(whole)
        self._run, self._held = run, whole[cut:]
        if cut:
            yield _with_text(event, whole[:cut])

    def end(self) -> Iterator[StreamEvent]:
        """The text still held, as the stream ends."""
        yield from self._release()

    def _release(self) -> Iterable[StreamEvent]:
        held, run = self._held, self._run
        self._held, self._run = "", None
        if not held:
            return ()
        if run == "text":
            return (TextDelta(held),)
        if isinstance(run, tuple):
            return (ReasoningDelta(held, provider=run[1]),)
        assert isinstance(run, int)
        return (ToolCallDelta(run, held),)

    def _start_of_secret(self, text: str) -> int:
        """Where the longest end of ``text`` that starts a secret (and is not all of it)
        begins; ``len(text)`` when none does."""
        start = len(text)
        for value in self._values:
            first = value[0]
            at = text.find(first, max(0, len(text) - len(value) + 1))
            while 0 <= at < start:
                if value.startswith(text[at:]):
                    start = at
                    break
                at = text.find(first, at + 1)
        return start


def _run_of(event: StreamEvent) -> tuple[object, str]:
    """The run of deltas ``event`` goes on (None: it is no delta of text), and its text."""
    if isinstance(event, TextDelta):
        return "text", event.text
    if isinstance(event, ToolCallDelta):
        return event.index, event.arguments
    # Reasoning text alone: a signature or the provider's data is passed on as it comes.
    if isinstance(event, ReasoningDelta) and event.signature is None and not event.provider_data:
        return ("reasoning", event.provider), event.text
    return None, ""


def _with_text(event: StreamEvent, text: str) -> StreamEvent:
    """A delta like ``event`` (`_run_of` gave it a run) with ``text`` as its text."""
    if isinstance(event, ToolCallDelta):
        return attrs.evolve(event, arguments=text)
    assert isinstance(event, (TextDelta, ReasoningDelta))
    return attrs.evolve(event, text=text)
