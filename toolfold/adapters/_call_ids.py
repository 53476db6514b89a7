"""Call ids unique in a conversation, whatever the server sends.

A server may give a call an id the conversation already holds: an
OpenAI-compatible server that numbers the calls of each response (``call_0``
at every step, as vLLM and llama.cpp builds do), a model that writes its own
9-character ids (Mistral's form) and repeats one, or an id toolfold made for a
provider that sent none (`synthetic_id`: Ollama, and Gemini without a
``responseId``, derive it from the message, so the same call made twice gets
the same id). A conversation with a repeated id cannot go on: Anthropic
answers 400 ("tool_use ids must be unique"), OpenAI pairs each result with the
one call of its id, and approvals and tool results name calls by id, so an
answer meant for the earlier call could apply to the later one.

So every `ProviderModel` renames a call whose id the request's conversation
already holds (a call or a tool result), or that an earlier call of the same
response took, before the response leaves the model, streamed or whole:

- the same conversation and the same answer give the same id, so replays of
  recorded traffic and Temporal histories stay deterministic and a stream
  agrees with the whole response;
- the id keeps its form: 9 letters and digits stay 9 letters and digits
  (Mistral's rule, also enforced by Mistral chat templates on llama.cpp and
  vLLM); any other id gets ``_2`` (``_3``... if that is taken too);
- an id counts as taken in the form the provider saw it as well: Mistral is
  sent every other id as its 9-character hash (`mistral_id`), and a model
  that says that hash again for a new call is renamed (the model passes its
  codec's id rewrite, `ProviderModel._sent_id`).

The renamed id is the call's id from then on: the conversation holds it and it
goes back to every provider, the one that sent the original included. Nothing
needs the original: each request sends the whole conversation (no adapter uses
a server-kept one such as ``previous_response_id``), so an id only pairs a call
with its result within one request.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable

import attrs

from toolfold.runtime.core._messages import Message, ToolCallPart, ToolResultPart, tool_calls_of
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._stream import StreamEvent, ToolCallStart

_NINE = re.compile(r"[A-Za-z0-9]{9}")
_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def hashed(text: str) -> bytes:
    """``text``'s UTF-8 bytes, to hash. A lone surrogate, which UTF-8 cannot encode (a
    seed made of a body that held a ``"\\ud800"`` escape), goes as its own 3 bytes
    (``surrogatepass``): only then, so every other text hashes as it always did, and
    the ids made from it stay those that stored states and recorded replays hold."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def nine_alphanumerics(text: str) -> str:
    """9 letters and digits made from ``text`` (a hash: the same text, the same id)."""
    number = int.from_bytes(hashlib.sha256(hashed(text)).digest()[:8], "big")
    chars = []
    for _ in range(9):
        number, digit = divmod(number, 62)
        chars.append(_BASE62[digit])
    return "".join(chars)


@functools.lru_cache(maxsize=4096)
def mistral_id(call_id: str) -> str:
    """A 9-alphanumeric id for Mistral, the same for the same input [C4].

    Ids that already fit pass unchanged, so Mistral's own ids round-trip; any
    other id maps through a hash, so a call and its result still match.
    """
    if _NINE.fullmatch(call_id):
        return call_id
    return nine_alphanumerics(call_id)


def taken_ids(messages: Iterable[Message], sent_id: Callable[[str], str] | None = None) -> set[str]:
    """The call ids ``messages`` hold: of their tool calls and of their tool results.

    With ``sent_id`` (how the codec rewrites an id it sends, e.g. `mistral_id`),
    the ids as sent too: the model saw those and may say one again.
    """
    taken: set[str] = set()
    for message in messages:
        for part in message.parts:
            if type(part) is ToolCallPart:
                taken.add(part.id)
            elif type(part) is ToolResultPart:
                taken.add(part.call_id)
    if sent_id is not None:
        taken.update([sent_id(call_id) for call_id in taken])
    return taken


def _take(taken: set[str], call_id: str, sent_id: Callable[[str], str] | None) -> None:
    taken.add(call_id)
    if sent_id is not None:
        taken.add(sent_id(call_id))


def fresh_id(call_id: str, taken: set[str]) -> str:
    """An id for a call that came as ``call_id``, in none of ``taken`` and of the same form.

    The same ``call_id`` and ``taken`` give the same id.
    """
    nine = _NINE.fullmatch(call_id) is not None
    number = 2
    while True:
        candidate = f"{call_id}_{number}"
        if nine:
            candidate = nine_alphanumerics(candidate)
        if candidate not in taken:
            return candidate
        number += 1


def unique_calls(
    request: ModelRequest,
    response: ModelResponse,
    sent_id: Callable[[str], str] | None = None,
) -> ModelResponse:
    """``response`` with each call id the conversation (or an earlier call) holds renamed.

    ``sent_id``: how the codec rewrites the ids it sends (see `taken_ids`).
    """
    message = response.message
    calls = tool_calls_of(message)
    if not calls:
        return response
    taken = taken_ids(request.messages, sent_id)
    if len(calls) == 1 and calls[0].id not in taken:
        return response  # the commonest answer: one call, with a new id
    parts = list(message.parts)
    renamed = False
    for position, part in enumerate(parts):
        if type(part) is not ToolCallPart or not part.id:
            continue
        if part.id in taken:
            part = parts[position] = attrs.evolve(part, id=fresh_id(part.id, taken))
            renamed = True
        _take(taken, part.id, sent_id)
    if not renamed:
        return response
    return attrs.evolve(response, message=Message(message.role, tuple(parts)))


class UniqueStreamCalls:
    """`unique_calls` for a stream: renames the ids of its `ToolCallStart` events.

    The calls start in the order the whole response lists them, so a stream
    and the whole response get the same ids. Only `ToolCallStart` events need
    it: a caller may pass the others by (``unique(e) if type(e) is ToolCallStart
    else e``), which saves a call per text delta.
    """

    __slots__ = ("_messages", "_sent_id", "_taken")

    def __init__(self, request: ModelRequest, sent_id: Callable[[str], str] | None = None) -> None:
        self._messages = request.messages
        self._sent_id = sent_id
        self._taken: set[str] | None = None  # read from the conversation at the first call

    def __call__(self, event: StreamEvent) -> StreamEvent:
        """``event``, with its call id renamed if it is taken."""
        if type(event) is not ToolCallStart:
            return event
        call_id = event.id
        if not call_id:
            return event
        taken = self._taken
        if taken is None:
            taken = self._taken = taken_ids(self._messages, self._sent_id)
        if call_id in taken:
            call_id = fresh_id(call_id, taken)
            event = attrs.evolve(event, id=call_id)
        _take(taken, call_id, self._sent_id)
        return event
