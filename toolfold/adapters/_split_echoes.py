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
that replaces the part's text drops what was held of it), reasoning where a
call starts (one not kept apart: the call follows it), a call's
arguments at its `ToolCallEnd`, all of them at `StreamFinish` and at the
stream's end. Events of other runs in between (a call's fragments between
two pieces of text, fragments of two calls interleaved) go on meanwhile.

A model may write a key across a call (Anthropic's text block, tool_use,
text block): the text after the call decides whether the held end of the
text before it starts one. A held end shorter than `MIN_CUT_PREFIX` goes on
before the call, as a stream that fails shows it: too short to give a key's
start away; a key it starts is masked in the text after the call, which
begins with ``***``. A longer one waits past the call: a key it starts is
masked in the text after the call (the text before ends where the key
starts); held text that starts none goes on after the call as
``TextDelta(before_call=True)``, which the fold puts before the call, as
the model wrote it. `whole_split_echoes` does the same to a whole answer.

Text goes out as soon as it cannot start a secret: only the few characters
that could are held. Every event is passed on, in order, its text cut where
the held part begins (possibly to nothing); the held text follows as a delta
of its own run. A stream that fails gives back what it held when that is too
short to show a secret's start (`MIN_CUT_PREFIX`), else ``***``.

Not looked for across deltas: a key shorter than 4 characters (masked only
where written as a credential), a secret a call's argument deltas write
with JSON escapes (``sk\\u002d...``, decoded only when the arguments are),
and a secret across three texts with calls between them.
"""

from __future__ import annotations

import attrs

from toolfold.adapters._http._keys import MASK, MIN_CUT_PREFIX, Scrubs, scrub
from toolfold.runtime.core._messages import TextPart, ToolCallPart
from toolfold.runtime.core._request import ModelResponse
from toolfold.runtime.core._stream import (
    MediaOutput,
    ReasoningDelta,
    StreamEvent,
    StreamFinish,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)

__all__ = ["SplitEchoes", "whole_split_echoes"]


class SplitEchoes:
    """Masks the secrets of ``pairs`` (`scrubs`) written across a stream's deltas.

    One per stream: `feed` each event in order, then `end` when the stream
    ends, or `cut` when it fails.
    """

    __slots__ = (
        "_calls",
        "_pairs",
        "_reasoning",
        "_reasoning_by",
        "_text",
        "_text_after",
        "_text_before",
        "_text_shown",
        "_values",
    )

    def __init__(self, pairs: Scrubs) -> None:
        self._pairs = pairs
        # The secrets looked for across deltas: all but the short keys (a pattern each).
        self._values = _split_values(pairs)
        self._text = ""  # held: the end of the answer's text
        # How much of `_text` is the end of the text before the calls started since (held
        # past them): a secret may go on in the text after them.
        self._text_before = 0
        self._text_after = False  # text came after those calls (all of it held, maybe none)
        # That end went on before the calls (shorter than MIN_CUT_PREFIX): it is kept only
        # to see whether the text after them goes on with a secret it starts.
        self._text_shown = False
        self._reasoning = ""  # held: the end of the reasoning, by `_reasoning_by`
        self._reasoning_by: str | None = None
        self._calls: dict[int, str] = {}  # held: the end of each call's arguments

    def feed(self, event: StreamEvent) -> list[StreamEvent]:
        """The events to pass on for ``event``, in order."""
        if isinstance(event, TextDelta):
            out = self._release_reasoning()  # reasoning ends where text begins
            if self._text_before:
                return out + self._text_past_call(event.text)
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
        if isinstance(event, ToolCallStart) and not event.apart:  # the part before it ends
            return [*self._release_reasoning(), *self._hold_past_call(), event]
        if isinstance(event, StreamFinish):
            return [*self.end(), event]
        if isinstance(event, MediaOutput):  # a part of its own: the held text goes before it
            return [*self._release_reasoning(), *self._release_text(), event]
        return [event]  # the counts, the response's name: no text to hold

    def end(self) -> list[StreamEvent]:
        """The text still held, as the stream ends (or finishes)."""
        out = self._release_reasoning()
        out += self._release_text()
        for index in list(self._calls):
            out += self._release_call(index)
        return out

    def cut(self) -> list[StreamEvent]:
        """The text still held, as the stream fails: each held end shown if it is too
        short to give a secret's start away, else as ``***``. A secret's start held across
        calls is judged whole: its pieces on either side of them (some shown before them
        already) are each too short maybe, not together."""
        across = bool(self._text_before) and len(self._text) >= MIN_CUT_PREFIX
        out = self.end()
        for at, event in enumerate(out):
            if isinstance(event, ToolCallDelta):
                if len(event.arguments) >= MIN_CUT_PREFIX:
                    out[at] = attrs.evolve(event, arguments=MASK)
            elif isinstance(event, (TextDelta, ReasoningDelta)) and (
                len(event.text) >= MIN_CUT_PREFIX or (across and event.text)
            ):
                out[at] = attrs.evolve(event, text=MASK)
        return out

    def _reasoning_delta(self, event: ReasoningDelta) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        out += self._release_text()  # text ends where reasoning begins
        if event.replaces:  # the part's whole text: what its earlier pieces held goes with them
            self._reasoning, self._reasoning_by = "", None
        if self._reasoning and event.provider is not None and event.provider != self._reasoning_by:
            out += self._release_reasoning()
        if event.signature is not None or event.ends:  # a complete part: nothing more joins it
            whole = scrub(self._reasoning + event.text, self._pairs, starts=False)
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

    def _release_text(self) -> list[StreamEvent]:
        if not self._text:
            return []
        held, before, after = self._text, self._text_before, self._text_after
        shown = self._text_shown
        self._text, self._text_before, self._text_after, self._text_shown = "", 0, False, False
        if not before:
            return [TextDelta(held)]
        out: list[StreamEvent] = [] if shown else [TextDelta(held[:before], before_call=True)]
        if after:  # (the text after the calls is a part, even an empty one)
            out.append(TextDelta(held[before:]))
        return out

    def _hold_past_call(self) -> list[StreamEvent]:
        """At a call's start: the text's held end, a secret's start that may go on in the
        text after the call (`_text_past_call`), waits past it; one shorter than
        `MIN_CUT_PREFIX` goes on before it (and is kept to look at that text)."""
        held, before = self._text, self._text_before
        if before and not self._text_after:  # no text since the calls before this one
            return []
        out: list[StreamEvent] = []
        now = ""
        if before:
            # Held across another call, and text after it: a secret written across two calls
            # is not looked for. The text before that call is given back; of the text after
            # it (a part of its own, which this call follows) the end that may start a
            # secret is held past this one.
            if not self._text_shown:
                out.append(TextDelta(held[:before], before_call=True))
            held = held[before:]
            cut = _start_of_secret(held, self._values)
            now, held = held[:cut], held[cut:]
        shown = 0 < len(held) < MIN_CUT_PREFIX
        if shown:
            now += held
        if before or shown:  # (the text after the calls before this one is a part, even empty)
            out.append(TextDelta(now))
        self._text, self._text_before = held, len(held)
        self._text_after, self._text_shown = False, shown
        return out

    def _text_past_call(self, text: str) -> list[StreamEvent]:
        """``text``, after the calls the held text's start waited past: a secret written
        across them is masked in the text after them (the text before them ends where the
        secret starts, unless it went on already); the held end that does not start one
        goes before the calls (`TextDelta.before_call`)."""
        held, before, shown = self._text, self._text_before, self._text_shown
        joined = held + text
        start = _start_across(joined, before, self._values)
        if start is None:
            cut = _start_of_secret(joined, self._values)
            if cut < before:  # still maybe a secret's start before the calls: held on
                self._text, self._text_before = joined[cut:], before - cut
                self._text_after = True
                return [] if shown or not cut else [TextDelta(joined[:cut], before_call=True)]
            start = before
            after = (
                joined[before:]
                if len(held) == before
                else scrub(joined[before:], self._pairs, starts=False)
            )
        else:
            after = _masked_from(joined, start, before if shown else start, self._pairs)
        self._text_before, self._text_after, self._text_shown = 0, False, False
        now, self._text = self._split("", after)
        if shown:
            return [TextDelta(now)]
        return [TextDelta(joined[:start], before_call=True), TextDelta(now)]

    def _release_call(self, index: int) -> list[StreamEvent]:
        held = self._calls.pop(index, "")
        return [ToolCallDelta(index, held)] if held else []

    def _split(self, held: str, text: str) -> tuple[str, str]:
        """``held`` + ``text`` masked, as what goes on now and what is held back (its end
        that could start a secret); ``text`` itself goes on when nothing changes."""
        whole = scrub(held + text, self._pairs, starts=False) if held else text
        cut = _start_of_secret(whole, self._values)
        if cut == len(whole):
            return whole, ""
        return whole[:cut], whole[cut:]


def _split_values(pairs: Scrubs) -> tuple[str, ...]:
    """The secrets of ``pairs`` looked for across deltas and texts: all but the short keys
    (a pattern each)."""
    return tuple(value for value, _, _, where in pairs if where is None)


def _start_of_secret(text: str, values: tuple[str, ...]) -> int:
    """Where the longest end of ``text`` that starts one of ``values`` (and is not all of
    it) begins; ``len(text)`` when none does."""
    start = len(text)
    for value in values:
        first = value[0]
        at = text.find(first, max(0, len(text) - len(value) + 1))
        while 0 <= at < start:
            if value.startswith(text[at:]):
                start = at
                break
            at = text.find(first, at + 1)
    return start


def _masked_from(text: str, start: int, shown: int, pairs: Scrubs) -> str:
    """The end of ``text`` from ``start``, where a secret starts, masked: less what of its
    first ``shown`` characters went on already (the text before the calls, shorter than
    `MIN_CUT_PREFIX`) and the mask leaves (a short URL password's ``user:``)."""
    masked = scrub(text[start:], pairs, starts=False)
    if shown <= start:
        return masked
    # The secrets there: the mask starts after the shortest head among them.
    head = min(
        (h for value, h, _, where in pairs if where is None and text.startswith(value, start)),
        default=0,
    )
    went = text[start : min(shown, start + head)]
    return masked[len(went) :] if masked.startswith(went) else masked


def _start_across(text: str, boundary: int, values: tuple[str, ...]) -> int | None:
    """Where the first of ``values`` written across ``boundary`` of ``text`` starts (None
    when none is)."""
    start = None
    for value in values:
        at = text.find(value, max(0, boundary - len(value) + 1))
        if 0 <= at < boundary and (start is None or at < start):
            start = at
    return start


def whole_split_echoes(response: ModelResponse, pairs: Scrubs) -> ModelResponse:
    """``response`` (a whole answer) with each secret of ``pairs`` that the model wrote
    across two of its texts masked, as a stream's is (`SplitEchoes`).

    The transport masks a secret inside one string of the answer (`Echoes`); a
    model may write one across two texts with only tool calls (or nothing)
    between them (Anthropic's text block, tool_use, text block). The text
    before ends where the secret starts; the text after holds it, masked.
    When the end of the text before that could start a secret is shorter than
    `MIN_CUT_PREFIX` (a stream gives it on before the calls), the text before
    stays whole and the text after begins with the mask. Reasoning between two
    texts separates them; a secret across three texts is not looked for.
    """
    parts = response.message.parts
    if sum(type(p) is TextPart for p in parts) < 2:
        return response
    values = _split_values(pairs)
    if not values:
        return response
    placed = list(parts)
    last: int | None = None  # the text the parts since are calls after
    for at, part in enumerate(placed):
        if isinstance(part, TextPart):
            if last is not None:
                before = placed[last]
                assert isinstance(before, TextPart)  # (only a text is `last`)
                joined = before.text + part.text
                size = len(before.text)
                start = _start_across(joined, size, values)
                if start is not None:
                    if size - _start_of_secret(before.text, values) < MIN_CUT_PREFIX:
                        after = _masked_from(joined, start, size, pairs)  # (before: whole)
                    else:
                        placed[last] = attrs.evolve(before, text=joined[:start])
                        after = scrub(joined[start:], pairs, starts=False)
                    placed[at] = attrs.evolve(part, text=after)
            last = at
        elif not isinstance(part, ToolCallPart):
            last = None
    if placed == list(parts):
        return response
    return attrs.evolve(response, message=attrs.evolve(response.message, parts=tuple(placed)))
