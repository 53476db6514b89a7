"""A secret a stream writes across deltas: joined back and masked before it is passed on.

The transport masks a secret a server echoes inside one streamed event
(`Echoes`). A secret split between events (``"sk-pro"`` then ``"j-abc..."``,
a model writing it token by token) is in no one event; it is whole only in
the text, the reasoning or a call's arguments the deltas add up to, which a
run keeps. `SplitEchoes` sits between a codec's events and the caller. For
each run of deltas `fold_stream` joins (the answer's text, the reasoning, each
call's arguments) it holds back the end of a delta that could be the start of
a secret, until the run's next delta shows whether it is one (then the secret
is masked whole) or the run ends where the fold ends it: text where reasoning
begins, reasoning where text begins or a signature closes it (a piece
that replaces the part's text drops what was held of it), a call's
arguments at its `ToolCallEnd`, all of them at `StreamFinish` and at the
stream's end. Events of other runs in between (a call's fragments between
two pieces of text, fragments of two calls interleaved) go on meanwhile.

Text goes out as soon as it cannot start a secret: only the few characters
that could are held. Every event is passed on, in order, its text cut where
the held part begins (possibly to nothing); the held text follows as a delta
of its own run. A stream that fails gives back what it held when that is too
short to show a secret's start (`MIN_CUT_PREFIX`), else ``***``.

Not looked for across deltas: a key shorter than 4 characters (masked only
where written as a credential), and a secret a call's argument deltas write
with JSON escapes (``sk\\u002d...``, decoded only when the arguments are).
"""

from __future__ import annotations

import attrs

from toolfold.adapters._http._keys import MASK, MIN_CUT_PREFIX, Scrubs, scrub
from toolfold.runtime.core._stream import (
    MediaOutput,
    ReasoningDelta,
    StreamEvent,
    StreamFinish,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
)

__all__ = ["SplitEchoes"]


class SplitEchoes:
    """Masks the secrets of ``pairs`` (`scrubs`) written across a stream's deltas.

    One per stream: `feed` each event in order, then `end` when the stream
    ends, or `cut` when it fails.
    """

    __slots__ = ("_calls", "_pairs", "_reasoning", "_reasoning_by", "_text", "_values")

    def __init__(self, pairs: Scrubs) -> None:
        self._pairs = pairs
        # The secrets looked for across deltas: all but the short keys (a pattern each).
        self._values = tuple(value for value, _, _, where in pairs if where is None)
        self._text = ""  # held: the end of the answer's text
        self._reasoning = ""  # held: the end of the reasoning, by `_reasoning_by`
        self._reasoning_by: str | None = None
        self._calls: dict[int, str] = {}  # held: the end of each call's arguments

    def feed(self, event: StreamEvent) -> list[StreamEvent]:
        """The events to pass on for ``event``, in order."""
        if isinstance(event, TextDelta):
            out = self._release_reasoning()  # reasoning ends where text begins
            text, self._text = self._split(self._text, event.text)
            out.append(event if text is event.text else TextDelta(text))
            return out
        if isinstance(event, ToolCallDelta):
            index, given = event.index, event.arguments
            text, held = self._split(self._calls.get(index, ""), given)
            if held:
                self._calls[index] = held
            else:
                self._calls.pop(index, None)
            return [event if text is given else ToolCallDelta(index, text)]
        if isinstance(event, ReasoningDelta):
            return self._reasoning_delta(event)
        if isinstance(event, ToolCallEnd):
            return [*self._release_call(event.index), event]
        if isinstance(event, StreamFinish):
            return [*self.end(), event]
        if isinstance(event, MediaOutput):  # a part of its own: the held text goes before it
            out = self._release_reasoning()
            if self._text:
                out.append(TextDelta(self._text))
                self._text = ""
            return [*out, event]
        return [event]  # a call's start, the counts, the response's name: no text to hold

    def end(self) -> list[StreamEvent]:
        """The text still held, as the stream ends (or finishes)."""
        out = self._release_reasoning()
        if self._text:
            out.append(TextDelta(self._text))
            self._text = ""
        for index in list(self._calls):
            out += self._release_call(index)
        return out

    def cut(self) -> list[StreamEvent]:
        """The text still held, as the stream fails: each held end shown if it is too
        short to give a secret's start away, else as ``***``."""
        out = self.end()
        for at, event in enumerate(out):
            if isinstance(event, ToolCallDelta):
                if len(event.arguments) >= MIN_CUT_PREFIX:
                    out[at] = attrs.evolve(event, arguments=MASK)
            elif (
                isinstance(event, (TextDelta, ReasoningDelta)) and len(event.text) >= MIN_CUT_PREFIX
            ):
                out[at] = attrs.evolve(event, text=MASK)
        return out

    def _reasoning_delta(self, event: ReasoningDelta) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if self._text:  # text ends where reasoning begins
            out.append(TextDelta(self._text))
            self._text = ""
        if event.replaces:  # the part's whole text: what its earlier pieces held goes with them
            self._reasoning, self._reasoning_by = "", None
        if self._reasoning and event.provider is not None and event.provider != self._reasoning_by:
            out += self._release_reasoning()
        if event.signature is not None or event.ends:  # a complete part: nothing more joins it
            whole = scrub(self._reasoning + event.text, self._pairs)
            self._reasoning, self._reasoning_by = "", None
            out.append(event if whole == event.text else attrs.evolve(event, text=whole))
            return out
        text, self._reasoning = self._split(self._reasoning, event.text)
        # (Whose the held end is: nobody's once nothing is held.)
        self._reasoning_by = (event.provider or self._reasoning_by) if self._reasoning else None
        out.append(event if text is event.text else attrs.evolve(event, text=text))
        return out

    def _release_reasoning(self) -> list[StreamEvent]:
        if not self._reasoning:
            return []
        held, by = self._reasoning, self._reasoning_by
        self._reasoning, self._reasoning_by = "", None
        return [ReasoningDelta(held, provider=by)]

    def _release_call(self, index: int) -> list[StreamEvent]:
        held = self._calls.pop(index, "")
        return [ToolCallDelta(index, held)] if held else []

    def _split(self, held: str, text: str) -> tuple[str, str]:
        """``held`` + ``text`` masked, as what goes on now and what is held back (its end
        that could start a secret); ``text`` itself goes on when nothing changes."""
        whole = scrub(held + text, self._pairs) if held else text
        cut = self._start_of_secret(whole)
        if cut == len(whole):
            return whole, ""
        return whole[:cut], whole[cut:]

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
