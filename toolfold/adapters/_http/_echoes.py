"""Secrets a server writes back into a successful answer: masked before any codec reads it.

An error is scrubbed whole (`scrub_error`). A successful answer goes further:
its strings become a response's text, a call's arguments, a run's state and
its log, which a user serializes and sends to places the key must not go (a
browser, a queue, a shared store). A server that echoes the request's
``Authorization`` header into a message (a debugging proxy, a misconfigured
gateway, a hostile endpoint) would put the key there. `Echoes` masks each
secret in every string of the decoded answer (object keys too) as `scrub`
masks it in an error, before the provider's codec reads it: blocking answers
whole, streamed ones event by event (an SSE event's data, a JSON line, an
element of Gemini's streamed array).

Nothing is walked unless the answer's text may hold a secret: it is searched
for each secret as JSON writes it (as is, with ``\\"`` and ``\\\\`` for a
quote or backslash in it, with ``\\/`` for a slash) and for a ``\\u``
escape, the only other way JSON writes a secret's characters; an answer
without either cannot decode to a string holding one.

A string that is JSON text itself (a Chat Completions call's ``arguments``)
is read as JSON when it has an escape: ``sk\\u002d...`` in it decodes to the
key in the arguments a tool gets, so those are masked too and the string is
written again from them.

A secret split between two streamed events (a model writing it token by
token) is not joined back: a model can only write a key it read, which is
then in the conversation the state keeps already.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from toolfold.adapters._http._json import decode_cut
from toolfold.adapters._http._keys import Scrubs, Secret, scrub, scrubs

__all__ = ["Echoes"]


class Echoes:
    """Masks ``secrets`` in a successful answer's decoded JSON (see the module).

    False when there is no secret to look for: callers skip it at no cost.
    """

    __slots__ = ("_needles", "_pairs", "_texts")

    def __init__(self, secrets: Iterable[Secret | None]) -> None:
        self._pairs: Scrubs = scrubs(secrets)
        texts: dict[str, None] = {"\\u": None}
        for value, _, _, _ in self._pairs:
            escaped = json.dumps(value, ensure_ascii=False)[1:-1]  # '"' and '\' escaped
            for text in (value, escaped):
                texts[text] = None
                if "/" in text:
                    texts[text.replace("/", "\\/")] = None
        self._texts = tuple(texts) if self._pairs else ()
        self._needles = tuple(text.encode("utf-8", "surrogatepass") for text in self._texts)

    def __bool__(self) -> bool:
        return bool(self._pairs)

    @property
    def pairs(self) -> Scrubs:
        """What is masked (`scrubs`)."""
        return self._pairs

    def may_hold(self, raw: bytes) -> bool:
        """Whether the JSON ``raw`` may decode to a string holding a secret."""
        # (A loop, not `any()` over a generator: asked of every answer.)
        for needle in self._needles:  # noqa: SIM110
            if needle in raw:
                return True
        return False

    def may_hold_text(self, raw: str) -> bool:
        """`may_hold` for JSON already decoded to text."""
        return any(text in raw for text in self._texts)

    def masked(self, data: Any) -> Any:
        """``data`` (decoded JSON, edited in place) with every secret masked in its strings."""
        if isinstance(data, str):
            return self._string(data)
        self._walk(data)
        return data

    def masked_text(self, raw: str) -> str:
        """The JSON text ``raw`` with every secret masked in its strings: ``raw`` itself when
        it holds none, or when it is not JSON (then masked as plain text)."""
        try:
            data = decode_cut(json.loads, raw)  # as the codec will read it
        except ValueError:
            return scrub(raw, self._pairs)
        if isinstance(data, str):
            masked = self._string(data)
            return raw if masked is data else json.dumps(masked)
        return json.dumps(data) if self._walk(data) else raw

    def _walk(self, root: Any) -> bool:
        """Mask the strings of the objects and arrays under ``root`` in place (a loop, not
        recursion: decoded JSON may nest as deep as the decoder goes); whether any changed."""
        changed = False
        stack = [root]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for key, value in list(node.items()):
                    if isinstance(value, str):
                        masked = self._string(value)
                        if masked is not value:
                            node[key] = value = masked
                            changed = True
                    elif isinstance(value, (dict, list)):
                        stack.append(value)
                    if isinstance(key, str):
                        masked_key = self._string(key)
                        if masked_key is not key:
                            del node[key]
                            node[masked_key] = value
                            changed = True
            elif isinstance(node, list):
                for at, value in enumerate(node):
                    if isinstance(value, str):
                        masked = self._string(value)
                        if masked is not value:
                            node[at] = masked
                            changed = True
                    elif isinstance(value, (dict, list)):
                        stack.append(value)
        return changed

    def _string(self, text: str) -> str:
        """``text`` with the secrets masked; ``text`` itself when it holds none."""
        masked = scrub(text, self._pairs)
        if "\\" in masked and self.may_hold_text(masked):
            # JSON text inside the string (a call's arguments), with an escape that
            # may decode to a secret: mask what it decodes to, and write it again.
            try:
                inner = json.loads(masked)
            except (ValueError, RecursionError):
                return masked
            if isinstance(inner, (dict, list)) and self._walk(inner):
                return json.dumps(inner, ensure_ascii=False)
        return masked
