"""Secrets a server writes back into a successful answer: masked before any codec reads it.

An error is scrubbed whole (`scrub_error`). A successful answer goes further:
its strings become a response's text, a call's arguments, a run's state and
its log, which a user serializes and sends to places the key must not go (a
browser, a queue, a shared store). A server that echoes the request's
``Authorization`` header into a message (a debugging proxy, a misconfigured
gateway, a hostile endpoint) would put the key there. `Echoes` masks each
secret in the answer's JSON text as `scrub` masks it in an error, before the
provider's codec reads it: a blocking answer's body, and a stream's events,
lines or array elements one by one (a secret written across a stream's
deltas is joined back by `SplitEchoes`, above the codec).

Only the JSON strings that hold a secret change: each string literal of the
text that may hold one is decoded, masked and written again, and the rest of
the text stays as it came, byte for byte (numbers, order, duplicate keys,
other strings). A string that is JSON text itself (a Chat Completions call's
``arguments``) is masked the same way inside, so ``sk\\u002d...`` written
with an escape there reaches the tool as ``***`` and the rest of the
arguments' text stays as sent.

A text is looked at only when it may hold a secret: when it has a secret as
JSON writes it (as is, with ``\\"`` and ``\\\\`` for a quote or backslash,
``\\/`` for a slash) or a ``\\u`` escape of one of the secrets' characters;
a text without either cannot decode to a string holding one. A key shorter
than `MIN_BARE_PASSWORD` is masked only where it is written as a credential
(``Bearer ab``), and looked for so.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator

from toolfold.adapters._http._keys import (
    MASK,
    Scrubs,
    Secret,
    scrub,
    scrubs,
    written_as_credential,
)
from toolfold.runtime.core._json_text import escape_lone_surrogates

__all__ = ["Echoes"]

# The rest of a JSON string literal after its opening quote, up to its closing one
# (an unescaped control character included: the text is read, not checked).
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


class Echoes:
    """Masks ``secrets`` in a successful answer's JSON text (see the module).

    False when there is no secret to look for: callers skip it at no cost.
    """

    __slots__ = (
        "_escape",
        "_escape_bytes",
        "_named",
        "_needles",
        "_pairs",
        "_short",
        "_shown",
        "_texts",
    )

    def __init__(self, secrets: Iterable[Secret | None]) -> None:
        self._pairs: Scrubs = scrubs(secrets)
        texts: dict[str, None] = {}
        letters: set[str] = set()
        named, short = [], []
        for value, _, _, where in self._pairs:
            letters.update(value)
            if where is not None:  # a short key: only where it is written as one
                named.append((value, where))
                short.append(value)
                continue
            escaped = json.dumps(value, ensure_ascii=False)[1:-1]  # '"' and '\' escaped
            texts[value] = texts[escaped] = None
            if escaped != value:  # and again, in JSON text inside a string (arguments)
                texts[json.dumps(escaped, ensure_ascii=False)[1:-1]] = None
            if "/" in value:
                texts["\\/"] = None  # any of its slashes may be written so
        self._shown = tuple(text for text in texts if text != "\\/")  # the secrets as written
        self._texts = tuple(texts)
        self._needles = tuple(text.encode("utf-8", "surrogatepass") for text in self._texts)
        self._named = tuple(named)
        self._short = tuple(short)
        # A \u escape of any letter of a secret (of its UTF-16 halves, beyond the BMP),
        # or of a backslash or a "u": JSON text inside a string (a call's arguments)
        # may write its own escape of a letter so ("\u005cu002d" is "\u002d" there).
        letters.update("\\u")
        codes = sorted({f"{unit:04x}" for c in letters for unit in _utf16(c)})
        pattern = rf"\\u(?i:{'|'.join(codes)})" if codes else r"(?!)"
        self._escape = re.compile(pattern)
        self._escape_bytes = re.compile(pattern.encode())

    def __bool__(self) -> bool:
        return bool(self._pairs)

    @property
    def pairs(self) -> Scrubs:
        """What is masked (`scrubs`)."""
        return self._pairs

    def may_hold(self, raw: bytes) -> bool:
        """Whether the JSON ``raw`` (UTF-8) may decode to a string holding a secret."""
        # (Loops, not `any()` over a generator: asked of every answer.)
        for needle in self._needles:
            if needle in raw:
                return True
        if self._named and self.may_hold_text(raw.decode("utf-8", "replace")):
            return True
        return b"\\u" in raw and self._escape_bytes.search(raw) is not None

    def may_hold_text(self, text: str) -> bool:
        """`may_hold` for JSON text."""
        for needle in self._texts:
            if needle in text:
                return True
        for value, where in self._named:
            if written_as_credential(text, value, where):
                return True
        if self._short and self._short_in(text):
            return True
        return "\\u" in text and self._escape.search(text) is not None

    def masked_body(self, body: bytes) -> bytes:
        """A JSON answer's ``body`` with every secret masked in its strings (in UTF-8 when
        it came in another encoding and held one); ``body`` itself when none holds one,
        or when it is not text (the codec then refuses it as it is)."""
        try:
            text = body.decode(json.detect_encoding(body), "surrogatepass")
        except UnicodeDecodeError:
            return body
        masked = self.masked_text(text)
        return body if masked is text else masked.encode("utf-8", "surrogatepass")

    def masked_text(self, text: str) -> str:
        """The JSON ``text`` with every secret masked in its strings; ``text`` itself when
        none holds one. Text that is not JSON has the strings it seems to hold masked."""
        pieces: list[str] = []
        shown = 0
        for start, end in _strings(text):
            token = text[start:end]
            if not self.may_hold_text(token):
                continue
            try:
                value = json.loads(token)
            except ValueError:  # not a string JSON reads (a bad escape): masked as text
                masked = scrub(token, self._pairs, starts=False)
            else:
                masked_value = self._string(value)
                if masked_value is not value:
                    masked = _literal(masked_value)
                elif self._shows_secret(token[1:-1]):
                    # Its text shows a secret its value does not, across an escape
                    # ("\u00de" + "adbeef..." for "deadbeef...", "\u2014" for "2014"):
                    # written again from its value, as masking those letters as text
                    # would break the escape; masked whole if it still shows one.
                    masked = _literal(value)
                    if self._shows_secret(masked[1:-1]):
                        masked = f'"{MASK}"'
                else:
                    masked = token
            if masked is not token:
                pieces += [text[shown:start], masked]
                shown = end
        if pieces:
            pieces.append(text[shown:])
            masked_all = "".join(pieces)
        else:
            masked_all = text
        # What shows a secret now is outside the strings or across their quotes: in
        # JSON that is only a number ("1720148123" for a password "2014"), which no
        # value holds as text and masking would break. Text that is not JSON (an
        # event's piece of arguments, a body the codec then refuses and shows) is
        # masked as plain text; so is a short key written as a credential, which
        # spans two strings ('"x-api-key": "ab"').
        for needle in self._texts:
            if needle in masked_all:
                if _is_json(masked_all):
                    break
                return scrub(masked_all, self._pairs, starts=False)
        for value, where in self._named:
            if written_as_credential(masked_all, value, where):
                return scrub(masked_all, self._pairs, starts=False)
        return masked_all

    def _shows_secret(self, text: str) -> bool:
        """Whether a literal's text holds a secret (of 4 characters or more) as JSON writes it."""
        return any(needle in text for needle in self._shown)

    def _short_in(self, token: str) -> bool:
        """Whether a text holds a short key and an escape: JSON text inside a string
        may write the key as a credential with its quotes escaped
        (``{\\"x-api-key\\": \\"ab\\"}``), which only its decoded text shows."""
        if "\\" not in token:
            return False
        return any(value in token for value in self._short)

    def _string(self, text: str) -> str:
        """A decoded string with the secrets masked; ``text`` itself when it holds none."""
        # Text with a quote may be JSON text (a call's arguments): its strings are masked
        # first, as the answer's are, so an escape in them is read before the rest of
        # the text is searched for a secret. The rest is text here, numbers too.
        masked = scrub(self.masked_text(text) if '"' in text else text, self._pairs, starts=False)
        return masked if masked != text else text


def _strings(text: str) -> Iterator[tuple[int, int]]:
    """Where each string literal of the JSON ``text`` starts and ends, found as a JSON
    reader finds them: from the start, each quote outside a string opens one. In time
    linear in the text: a string left open ends the search (nothing after it is outside
    a string), where a search for string literals anywhere would try again from each of
    its quotes (quadratic in a hostile ``"\\"\\"\\"...``)."""
    at = text.find('"')
    while at >= 0:
        rest = _STRING_REST.match(text, at + 1)
        if rest is None:
            return
        yield at, rest.end()
        at = text.find('"', rest.end())


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def _literal(text: str) -> str:
    """``text`` as a JSON string literal written as the answer's others are: its
    characters as they are (not ``\\u`` escapes: inside a call's arguments they are
    what the user sees), but lone surrogates, which UTF-8 cannot carry."""
    return escape_lone_surrogates(json.dumps(text, ensure_ascii=False))


def _utf16(char: str) -> tuple[int, ...]:
    """The UTF-16 code units of ``char`` (two for a character beyond the BMP)."""
    data = char.encode("utf-16-be", "surrogatepass")
    return tuple(int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))
