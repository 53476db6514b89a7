"""A key a server writes into a successful answer never reaches a response, a tool or a state.

Each provider's fake server answers with the model's own key in a call's
arguments and in the answer text: blocking and streamed (where the fakes
cut the text and the arguments into small deltas, so the key arrives in
pieces), sync and async, written as is and with JSON escapes. The tool gets
``***`` where the key was, the answer says ``***``, and the state's JSON
holds no part of the key.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import attrs
import pytest
from backends import OWNED
from fake_gemini_responses import FakeGemini, FakeResponses
from fake_native import FakeAnthropic, FakeOllama, _anthropic_events
from fake_openai import Calls, FakeChat, Text
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_http import Recorded, Reply, ScriptedServer, sse

import toolfold
from toolfold import Agent, RunState
from toolfold.adapters import Transport
from toolfold.adapters._http._echoes import Echoes
from toolfold.adapters._http._keys import Secret, api_key_secrets, scrubs, url_secrets
from toolfold.adapters._split_echoes import SplitEchoes, whole_split_echoes
from toolfold.runtime import (
    ImagePart,
    MediaOutput,
    Message,
    ModelResponse,
    ReasoningDelta,
    ReasoningPart,
    StreamState,
    TextDelta,
    TextPart,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallPart,
    ToolCallStart,
    finish_stream,
    fold_stream,
)

KEY = "sk-echo-0123456789abcdefghijXYZ"
INNER = "0123456789abcdefghij"  # no part of the key shows: not even its middle
#: The key as a JSON string may write it: each "-" as an escape.
ESCAPED = KEY.replace("-", "\\u002d")
PROVIDERS = ["chat", "responses", "anthropic", "gemini-sse", "gemini-json", "ollama"]
MODES = ["blocking-sync", "blocking-async", "stream-sync", "stream-async"]


def _fake(provider: str, script: Any) -> Any:
    if provider == "chat":
        return FakeChat(script)
    if provider == "responses":
        return FakeResponses(script)
    if provider == "anthropic":
        return FakeAnthropic(script)
    if provider == "ollama":
        return FakeOllama(script)
    return FakeGemini(script)


def _model(provider: str, url: str, **options: Any) -> Any:
    if provider == "chat":
        return toolfold.model("openai-compatible:m", base_url=f"{url}/v1", api_key=KEY, **options)
    if provider == "responses":
        return toolfold.model("openai-responses:m", base_url=f"{url}/v1", api_key=KEY, **options)
    if provider == "anthropic":
        return toolfold.model("anthropic:m", base_url=url, api_key=KEY, **options)
    if provider == "ollama":
        return toolfold.model("ollama:m", base_url=url, api_key=KEY, **options)
    form = "json" if provider == "gemini-json" else "sse"
    return toolfold.model("gemini:m", base_url=url, api_key=KEY, stream_format=form, **options)


def _escaping(fake: Any) -> Any:
    """``fake``'s answers with the key, wherever it is whole in a piece, JSON-escaped."""

    def handler(request: Recorded) -> Reply:
        reply: Reply = fake(request)
        if reply.json is not None:
            body = json.dumps(reply.json).encode()
            headers = {**reply.headers, "content-type": "application/json"}
            reply = attrs.evolve(reply, json=None, body=body, headers=headers)
        swap = (KEY.encode(), ESCAPED.encode())
        chunks = reply.chunks
        if chunks is not None:
            chunks = [c.replace(*swap) if isinstance(c, bytes) else c for c in chunks]
        return attrs.evolve(reply, body=reply.body.replace(*swap), chunks=chunks)

    return handler


got: list[str] = []


@toolfold.tool
def look_up(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    got.append(city)
    return f"found {city}"


def _chat_answers(server: ScriptedServer, opened: list[Any], answers: list[Any]) -> Any:
    """The response of a Chat Completions agent with `look_up`, the server giving
    ``answers`` (JSON data, or a body's bytes as they are) one per request."""

    def reply(request: Recorded) -> Reply:
        answer = answers[len(server.requests) - 1]
        return Reply(body=answer) if isinstance(answer, bytes) else Reply(json=answer)

    server.handler = reply
    model = _model("chat", server.url)
    opened.append(model)
    got.clear()
    return Agent(model=model, tools=[look_up]).run("Look Paris up.")


def _run(model: Any, mode: str) -> Any:
    agent = Agent(model=model, tools=[look_up])
    prompt = "Look Paris up."
    if mode == "blocking-sync":
        return agent.run(prompt)
    if mode == "blocking-async":
        return asyncio.run(agent.arun(prompt))
    if mode == "stream-sync":
        run = agent.stream(prompt)
        deltas = [e.text for e in run if isinstance(e, TextDelta)]
        assert "".join(deltas) == run.response.text
        return run.response

    async def streamed() -> Any:
        run = agent.stream(prompt)
        deltas = [e.text async for e in run if isinstance(e, TextDelta)]
        assert "".join(deltas) == run.response.text
        return run.response

    return asyncio.run(streamed())


@pytest.mark.parametrize("escaped", [False, True], ids=["as-is", "escaped"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_key_in_a_successful_answer_is_masked_before_anything_keeps_it(
    http_server: ScriptedServer, opened: list[Any], provider: str, mode: str, escaped: bool
) -> None:
    """The key in a call's arguments and the answer text: the tool, the answer and the state see ``***``."""
    script = (Calls((("look_up", {"city": f"Paris {KEY}"}),)), Text(f"Paris, as {KEY} says."))
    fake = _fake(provider, script)
    http_server.handler = _escaping(fake) if escaped else fake
    model = _model(provider, http_server.url)
    opened.append(model)
    got.clear()
    response = _run(model, mode)
    assert fake.problems == []
    assert got == ["Paris ***"]
    assert response.text == "Paris, as *** says."
    stored = response.state.to_json()
    assert INNER not in stored
    assert "Paris ***" in stored
    assert RunState.from_json(stored) == response.state


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("backend", OWNED)
def test_every_backend_masks_the_key_in_an_answer(
    http_server: ScriptedServer, opened: list[Any], backend: str, mode: str
) -> None:
    """Each client a model owns hands its answers on masked (the mask is above the clients)."""
    if mode == "sync" and backend == "aiohttp":
        backend = "httpx"  # aiohttp is async only: the sync cell is httpx's again
    http_server.handler = FakeChat((Text(f"the key is {KEY}"),))
    model = _model("chat", http_server.url, http=backend)
    opened.append(model)
    if mode == "sync":
        response = toolfold.generate_text(model, "hi")
    else:

        async def main() -> Any:
            try:
                return await toolfold.agenerate_text(model, "hi")
            finally:
                await model.aclose()

        response = asyncio.run(main())
    assert response.text == "the key is ***"
    assert INNER not in response.state.to_json()


def test_arguments_that_write_the_key_with_escapes_inside_their_json_text(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Chat Completions sends arguments as JSON text in a string: ``sk\\u002d...`` in that text
    decodes to the key only when the arguments are read; the tool still gets ``***``."""
    inner = json.dumps({"city": f"Paris {ESCAPED}"}).replace(
        "\\\\", "\\"
    )  # '{"city": "Paris sk\u002d..."}'
    assert "\\u002d" in inner
    assert json.loads(inner) == {"city": f"Paris {KEY}"}
    call = {"id": "c1", "type": "function", "function": {"name": "look_up", "arguments": inner}}
    answers = [
        {"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]},
        {"choices": [{"message": {"role": "assistant", "content": "done"}}]},
    ]
    response = _chat_answers(http_server, opened, answers)
    assert got == ["Paris ***"]
    stored = response.state.to_json()
    assert INNER not in stored
    assert "\\u002d" not in stored  # the arguments' text was written again from what they hold
    assert RunState.from_json(stored) == response.state


def test_the_key_in_ids_names_and_keys_of_an_answer_is_masked(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Not only text: a call's id, the model's name, the response id and an object's key."""
    call = {
        "id": f"id-{KEY}",
        "type": "function",
        "function": {"name": "look_up", "arguments": json.dumps({"city": "Paris", KEY: 1})},
    }
    answers = [
        {
            "id": f"r-{KEY}",
            "model": f"m-{KEY}",
            "choices": [{"message": {"role": "assistant", "tool_calls": [call]}}],
        },
        {"choices": [{"message": {"role": "assistant", "content": "done"}}]},
    ]
    response = _chat_answers(http_server, opened, answers)
    stored = response.state.to_json()
    assert INNER not in stored
    assert "id-***" in stored
    assert "m-***" in stored
    # The unknown argument went back to the model as an argument error, masked too.
    sent = json.dumps(http_server.requests[1].json())
    assert INNER not in sent
    assert "unexpected property '***'" in sent


def test_a_transport_hands_on_masked_events_and_lines(http_server: ScriptedServer) -> None:
    """`Transport.stream` and `stream_lines` are masked too: what a codec reads is."""
    http_server.handler = lambda request: Reply(
        headers={"content-type": "text/event-stream"},
        chunks=sse({"text": KEY}, f'{{"text": "x{ESCAPED}"}}', "[DONE]", f"{KEY} is not JSON"),
    )
    with Transport("openai", http_server.url, KEY) as transport:
        events = [e.data for e in transport.stream_sync("x", {})]
    assert [json.loads(d) for d in events[:2]] == [{"text": "***"}, {"text": "x***"}]
    assert events[2:] == ["[DONE]", "*** is not JSON"]
    http_server.handler = lambda request: Reply(
        chunks=[json.dumps({"message": KEY}).encode() + b"\n"]
    )
    with Transport("ollama", http_server.url, KEY) as transport:
        lines = list(transport.stream_lines_sync("x", {}))
    assert [json.loads(line) for line in lines] == [{"message": "***"}]


def test_an_answer_in_utf16_is_masked(http_server: ScriptedServer) -> None:
    """JSON's other encodings: the key is looked for in what the body decodes to."""
    body = json.dumps({"text": KEY}).encode("utf-16")
    http_server.handler = lambda request: Reply(body=body)
    with Transport("openai", http_server.url, KEY) as transport:
        assert transport.post_json_sync("x", {}) == {"text": "***"}


def test_a_key_shown_only_across_an_escape_is_read_as_the_string_holds_it(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """The text of a string may show a key its value does not hold: a hex key whose first
    letters end a ``\\u00`` escape (``"\\u00de" + "adbeef..."``), a 4-digit password
    that is an escape's code (``\\u2014``, a dash). Such a string is written again from
    its value, which holds no key; masking the letters would break the escape and make
    the answer a MalformedResponseError, and masking the string whole would lose an
    answer that holds no key. In a call's arguments (JSON text in a string) too."""
    key = "deadbeef0123456789abcdef"
    body = '{"text": "x\\u00' + key + '", "other": "\\u00de"}'
    http_server.handler = lambda request: Reply(body=body.encode())
    with Transport("openai", http_server.url, key) as transport:
        assert transport.post_json_sync("x", {}) == json.loads(body)
    echoes = Echoes([Secret("2014")])
    assert json.loads(echoes.masked_text('{"content": "It\\u2014s done"}')) == {
        "content": "It\u2014s done"
    }
    slashed = "team/prod/0123456789"  # its slashes may be written escaped, others' too
    answer = '{"url": "https:\\/\\/example.com", "key": "team\\/prod\\/0123456789"}'
    masked = Echoes([Secret(slashed)]).masked_text(answer)
    assert json.loads(masked) == {"url": "https://example.com", "key": "***"}
    quoted = 'word"'  # a secret that ends as a string's text does: not found in one
    assert Echoes([Secret(quoted)]).masked_text('{"c": "a password"}') == '{"c": "a password"}'
    # In a call's arguments: the fake writes them with json.dumps, "Þ" as "\\u00de" (so the
    # arguments' text shows the key), and the tool gets them as they were sent.
    city = "Paris \u00de" + key[2:]
    fake = FakeChat([Calls((("look_up", {"city": city}),)), Text("done")])
    http_server.handler = fake
    model = toolfold.model("openai-compatible:m", base_url=f"{http_server.url}/v1", api_key=key)
    opened.append(model)
    got.clear()
    response = Agent(model=model, tools=[look_up]).run("Look Paris up.")
    assert response.text == "done"
    assert got == [city]
    assert key in json.dumps({"city": city})  # what the fake sent showed the key


def test_a_key_in_a_number_is_left_and_text_that_is_not_json_is_masked(
    http_server: ScriptedServer,
) -> None:
    """Outside the strings of JSON a key can show only in a number (a password of
    digits): no value holds it as text, and masking it would break the answer, so it is
    left. Text that is not JSON is masked as plain text, a key across a quote too."""
    answer = '{"created": 1720148123, "choices": [{"text": "It\\u2014s done"}]}'
    http_server.handler = lambda request: Reply(body=answer.encode())
    with Transport("openai", http_server.url, "2014") as transport:
        assert transport.post_json_sync("x", {}) == json.loads(answer)
    quoted = 'sk-ab"cd-0123456789'
    http_server.handler = lambda request: Reply(
        headers={"content-type": "text/event-stream"},
        chunks=sse(f'not JSON: "x {quoted} y', "[DONE]"),
    )
    with Transport("openai", http_server.url, quoted) as transport:
        assert [e.data for e in transport.stream_sync("x", {})] == ['not JSON: "x *** y', "[DONE]"]


@pytest.mark.parametrize("key", ['pa"ss-0123456789', "pa\\ss-0123456789"])
def test_a_key_with_a_quote_or_backslash_is_masked_in_a_calls_arguments(key: str) -> None:
    """JSON text inside a string writes such a key escaped twice (``pa\\\\\\"ss``):
    looked for so, and masked where the arguments hold it."""
    arguments = json.dumps({"city": key})
    answer = json.dumps({"arguments": arguments})
    masked = Echoes([Secret(key)]).masked_text(answer)
    assert json.loads(json.loads(masked)["arguments"]) == {"city": "***"}


def test_a_key_in_a_number_of_a_calls_arguments_is_masked() -> None:
    """A call's arguments are text, numbers too: a password of digits written as a number
    there is masked, whatever else the arguments hold (the arguments then fail to parse,
    which the model reads as for any arguments it gets wrong)."""
    echoes = Echoes([Secret("2014")])
    for inner in ('{"note": "pin 2014", "year": 2014}', '{"note": "It\\u2014s", "year": 2014}'):
        arguments = json.loads(echoes.masked_text(json.dumps({"arguments": inner})))["arguments"]
        assert "2014" not in arguments
        assert arguments.endswith('"year": ***}')


def test_without_the_key_an_answer_is_the_decoded_body_itself(http_server: ScriptedServer) -> None:
    """Nothing is masked that is not the key: a body without it decodes as it is."""
    answer = {"text": "sk-echo-0123 is not the key, nor is \\u002d", "n": [1, -2.5, None]}
    http_server.handler = lambda request: Reply(json=answer)
    with Transport("openai", http_server.url, KEY) as transport:
        assert transport.post_json_sync("x", {}) == answer


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "x", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


def _streamed(server: ScriptedServer, opened: list[Any], chunks: list[bytes]) -> Any:
    """The response a model folds from the Chat Completions stream ``chunks``."""
    server.handler = lambda request: Reply(
        headers={"content-type": "text/event-stream"}, chunks=chunks
    )
    model = _model("chat", server.url)
    opened.append(model)
    run = Agent(model=model, tools=[look_up], max_steps=1).stream("hi")
    for _ in run:
        pass
    return run.response


@pytest.mark.parametrize("mode", MODES)
def test_a_key_written_around_a_call_is_masked_streamed_and_whole(
    http_server: ScriptedServer, opened: list[Any], mode: str
) -> None:
    """Anthropic's text block, tool_use, text block with the key split between the two texts:
    the answer, its deltas, the state and the request that sends it back hold ``***`` and no
    half of the key, streamed or whole alike."""
    content = [
        {"type": "text", "text": f"The key is {KEY[:12]}"},
        {"type": "tool_use", "id": "toolu_1", "name": "look_up", "input": {"city": "Paris"}},
        {"type": "text", "text": f"{KEY[12:]} done"},
    ]
    answers = [(content, "tool_use"), ([{"type": "text", "text": "ok"}], "end_turn")]

    def reply(request: Recorded) -> Reply:
        blocks, stop = answers[len(http_server.requests) - 1]
        message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m"}
        message |= {"content": blocks, "stop_reason": stop, "stop_sequence": None}
        message["usage"] = {"input_tokens": 1, "output_tokens": 1}
        if not request.json().get("stream"):
            return Reply(json=message)
        return Reply(
            headers={"content-type": "text/event-stream"}, chunks=_anthropic_events(message)
        )

    http_server.handler = reply
    model = _model("anthropic", http_server.url)
    opened.append(model)
    agent = Agent(model=model, tools=[look_up])
    deltas: list[str] = []
    if mode.startswith("blocking"):
        run = agent.run if mode == "blocking-sync" else lambda p: asyncio.run(agent.arun(p))
        response = run("Look Paris up.")
    else:
        stream = agent.stream("Look Paris up.")
        if mode == "stream-sync":
            _deltas_into(deltas, stream)
        else:

            async def read() -> None:
                deltas.extend([e.text async for e in stream if isinstance(e, TextDelta)])

            asyncio.run(read())
        response = stream.response
    sent = http_server.requests[1].json()["messages"][1]["content"]
    assert [b.get("text", b["type"]) for b in sent] == ["The key is ", "tool_use", "*** done"]
    assert "".join(deltas) == ("" if mode.startswith("blocking") else "The key is *** doneok")
    stored = response.state.to_json()
    for half in (KEY[:12], KEY[12:]):
        assert half not in stored
        assert half not in json.dumps(sent)


def test_a_key_split_around_another_runs_events_is_joined(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """Text and a call in the same chunks (some compatible servers send them so): the
    text's halves of the key have a call's events between them, and the call's halves
    the text's; each run is joined apart."""
    call = {"index": 0, "id": "c1", "type": "function"}
    call["function"] = {"name": "look_up", "arguments": '{"city": "sk-ec'}
    rest = {"index": 0, "function": {"arguments": 'ho-0123456789abcdefghijXYZ"}'}}
    chunks = sse(
        _chunk({"role": "assistant", "content": "The key is sk-ec", "tool_calls": [call]}),
        _chunk({"content": "ho-0123456789abcdefghijXYZ.", "tool_calls": [rest]}),
        _chunk({}, "tool_calls"),
        "[DONE]",
    )
    got.clear()
    state = _streamed(http_server, opened, chunks).state  # one step: the call runs
    assert got == ["***"]
    stored = state.to_json()
    assert INNER not in stored
    assert "The key is ***." in stored


def test_only_the_strings_that_hold_the_key_change(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """An event holding the key keeps its other bytes: a number JSON reads as infinite
    stays the literal the codec reads (it would refuse ``Infinity``); arguments keep their
    text but for the key (number forms, duplicate keys, spacing)."""
    head = '{"id":"x","object":"chat.completion.chunk","created":1e400,"model":"m",'
    body = f'"choices":[{{"index":0,"delta":{{"content":"key {KEY}"}},"finish_reason":null}}]}}'
    chunks = sse(head + body, _chunk({}, "stop"), "[DONE]")
    assert _streamed(http_server, opened, chunks).text == "key ***"
    arguments = '{"city":  "x\\u002d",  "n": 1.000, "city": "' + ESCAPED + '"}'
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    http_server.handler = lambda request: Reply(
        json={"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]}
    )
    model = _model("chat", http_server.url)
    opened.append(model)
    from toolfold import Message, ModelRequest

    (part,) = model.request_sync(ModelRequest((Message.user("hi"),))).message.tool_calls
    assert part.arguments_text == '{"city":  "x\\u002d",  "n": 1.000, "city": "***"}'


def test_a_stream_cut_gives_back_what_it_held_when_it_shows_no_key(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A stream that fails after text that could start the key: the held end is shown
    when it is too short to give the key away, and masked when it is longer."""
    from scripted_http import Cut

    for ending, shown in (("it is yes", "it is yes"), ("it is sk-ech", "it is ***")):
        chunks = [*sse(_chunk({"role": "assistant", "content": ending})), Cut()]
        assert _text_before_the_failure(http_server, opened, chunks) == shown


def _text_before_the_failure(server: ScriptedServer, opened: list[Any], chunks: list[Any]) -> str:
    """The text a streamed run shows before the stream ``chunks`` fails it."""
    server.handler = lambda request: Reply(
        headers={"content-type": "text/event-stream"}, chunks=chunks
    )
    model = _model("chat", server.url, retry=0)
    opened.append(model)
    seen: list[str] = []
    with pytest.raises(toolfold.StreamError):
        _deltas_into(seen, Agent(model=model).stream("hi"))
    return "".join(seen)


def _deltas_into(seen: list[str], run: Any) -> None:
    for event in run:
        if isinstance(event, TextDelta):
            seen.append(event.text)


# --- the pieces, on their own ----------------------------------------------


def test_echoes_masks_only_the_strings_that_hold_a_secret() -> None:
    echoes = Echoes([Secret(KEY)])
    text = '{"a": [1e400, {"b": "x' + KEY + 'y", "' + KEY + '": true}], "c": "\\u00e9"}'
    assert echoes.may_hold_text(text)
    assert echoes.masked_text(text) == '{"a": [1e400, {"b": "x***y", "***": true}], "c": "\\u00e9"}'
    untouched = '{"b": "no key, \\u002d only"}'
    assert echoes.masked_text(untouched) is untouched


def test_echoes_reads_string_literals_in_linear_time() -> None:
    """A hostile text of quotes and backslashes never closed: found in one pass (a search
    for literals anywhere would start again at each quote: quadratic)."""
    echoes = Echoes([Secret(KEY)])
    hostile = '"\\"' * 300_000
    assert echoes.masked_text(KEY + hostile) == "***" + hostile
    assert echoes.masked_text(f'"{KEY}"' + hostile) == '"***"' + hostile
    left_open = '"' + "\\" + '"\\' * 300_000  # a string never closed: the search ends there
    assert echoes.masked_text(f'"{KEY}"' + left_open) == '"***"' + left_open


def test_echoes_looks_for_a_secret_as_json_writes_it() -> None:
    """A quote, a backslash or a slash in a secret is written escaped in JSON: looked for so,
    each slash escaped or not."""
    odd = 'team/prod/"q"\\0123456789'
    echoes = Echoes([Secret(odd)])
    for raw in (
        json.dumps({"t": odd}),
        json.dumps({"t": odd}).replace("/", "\\/"),
        json.dumps({"t": odd}).replace("/", "\\/", 1),
    ):
        assert echoes.may_hold(raw.encode())
        assert json.loads(echoes.masked_text(raw)) == {"t": "***"}
    assert not echoes.may_hold(b'{"t": "nothing here, \\u00e9"}')
    assert echoes.may_hold(b'{"t": "\\u0074"}')  # an escape of one of its letters ("t")
    assert not Echoes([])
    assert not Echoes([None])


def test_a_short_key_is_masked_only_where_it_is_written_as_one() -> None:
    (short,) = api_key_secrets(Secret("ab"), "authorization", "Bearer")
    echoes = Echoes([short])
    assert not echoes.may_hold(b'{"t": "about a cab"}')
    text = '{"t": "Bearer ab, about a cab"}'
    assert json.loads(echoes.masked_text(text)) == {"t": "Bearer ***, about a cab"}


def _split(events: list[Any], *secrets: str) -> list[Any]:
    split = SplitEchoes(scrubs([Secret(s) for s in secrets]))
    out = [e for event in events for e in split.feed(event)]
    return out + list(split.end())


def _texts(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def test_split_echoes_joins_a_key_written_across_deltas() -> None:
    pieces = ["The key ", "is sk", "-echo-01234", "56789abcdefghijXY", "Z, ok"]
    out = _split([TextDelta(p) for p in pieces], KEY)
    assert _texts(out) == "The key is ***, ok"
    # What cannot start the key goes on at once: only "sk" was held, then the key.
    assert [e.text for e in out][:2] == ["The key ", "is "]


def test_split_echoes_gives_back_what_turned_out_not_to_be_the_key() -> None:
    out = _split([TextDelta("ask"), TextDelta("-echo-0"), TextDelta("ne")], KEY)
    assert _texts(out) == "ask-echo-0ne"
    # Each run is held apart: the text's end waits across the fragments of a call that
    # started before it, the call's end is given back before the call ends.
    events = [ToolCallStart(0, "c", "f"), TextDelta("say sk-ec"), ToolCallDelta(0, '{"a": "sk-')]
    events += [ToolCallDelta(0, 'echo-0123456789abcdefghijXYZ"}'), ToolCallEnd(0)]
    events += [TextDelta("ho-0123456789abcdefghijXYZ")]
    out = _split(events, KEY)
    assert _texts(out) == "say ***"
    arguments = "".join(e.arguments for e in out if isinstance(e, ToolCallDelta))
    assert arguments == '{"a": "***"}'
    ended = [type(e).__name__ for e in out].index("ToolCallEnd")
    assert not any(isinstance(e, ToolCallDelta) for e in out[ended:])


def test_split_echoes_keeps_held_text_before_a_call_that_starts() -> None:
    """The text (or reasoning) a call follows ends where the call starts: held reasoning is given
    back before the call's start; held text of MIN_CUT_PREFIX characters or more waits past the
    call (a key may go on after it) and, no key, goes on as text before the call; the fold keeps
    either before the call."""
    for first in (TextDelta("Checking sk-e"), ReasoningDelta("Checking sk-e", provider="p")):
        events = [first, ToolCallStart(0, "c", "f"), ToolCallDelta(0, "{}"), ToolCallEnd(0)]
        out = _split([*events, TextDelta("done")], KEY)
        started = next(at for at, e in enumerate(out) if isinstance(e, ToolCallStart))
        if isinstance(first, ReasoningDelta):
            assert "".join(e.text for e in out[:started]) == "Checking sk-e"
            assert _texts(out[started:]) == "done"
        else:
            assert _texts(out[:started]) == "Checking "
            after = [e for e in out[started:] if isinstance(e, TextDelta)]
            assert [(e.text, e.before_call) for e in after] == [("sk-e", True), ("done", False)]
        folded = StreamState()
        for event in out:
            folded = fold_stream(folded, event)
        parts = finish_stream(folded, str).message.parts
        assert [getattr(p, "text", "call") for p in parts] == ["Checking sk-e", "call", "done"]


def test_split_echoes_gives_a_short_held_end_back_before_the_call() -> None:
    """Text ending in fewer than MIN_CUT_PREFIX characters that could start the key ("cities"
    with an "sk-..." key) goes on before the call starts, as the model sent it: an answer with
    no key streams its events in their order, no piece sent ``before_call``."""
    for ending, after in [("s", ["done"]), ("sk", ["done"]), ("s", []), ("sk", ["", "k"])]:
        events = _around_a_call(["In both citie", ending], after)
        out = _split(events, KEY)
        started = next(at for at, e in enumerate(out) if isinstance(e, ToolCallStart))
        assert _texts(out[:started]) == "In both citie" + ending
        assert _texts(out[started:]) == "".join(after)
        assert not any(getattr(e, "before_call", False) for e in out)
        assert _folded(out) == _folded(events)


def test_split_echoes_gives_text_after_a_call_that_starts_no_key_back_before_the_next() -> None:
    """Text after a call that may still finish a key begun before it, when a second call starts:
    what of it cannot start a key goes on before the second call, not held past it."""
    first = _around_a_call(["say sk-ec"], ["ho-0", "1"])
    events = [*first, ToolCallStart(1, "d", "f"), ToolCallEnd(1), TextDelta("23 ok")]
    out = _split(events, KEY)
    second = next(at for at, e in enumerate(out) if getattr(e, "index", None) == 1)
    assert _texts(out[:second]) == "say sk-echo-01"
    assert [(e.text, e.before_call) for e in out[second:] if isinstance(e, TextDelta)] == [
        ("23 ok", False)
    ]
    assert _folded(out) == ["say sk-ec", "call", "ho-01", "call", "23 ok"]


def test_a_split_stream_cut_masks_a_key_start_held_across_a_call_as_one() -> None:
    """A stream that fails while the text after a call may still finish a key begun before it:
    the pieces on either side (each shorter than MIN_CUT_PREFIX) are judged together, and the
    one not shown yet is masked, so no more than MIN_CUT_PREFIX - 1 of the key shows."""
    for before, after in [("sk", "-e"), ("s", "k-")]:
        split = SplitEchoes(scrubs([Secret(KEY)]))
        out = [e for event in _around_a_call([before], [after]) for e in split.feed(event)]
        out += split.cut()
        assert _texts(out) == before + "***"


def test_split_echoes_masks_a_key_whose_first_characters_went_on_before_the_call() -> None:
    """A key whose first one or two characters end the text before a call (given back before
    it) and whose rest opens the text after it, in any pieces: the rest is masked, the text after
    the call begins with ``***``; stream and whole answer alike."""
    pairs = scrubs([Secret(KEY)])
    for cut in (1, 2):
        for after in (
            [KEY[cut:] + " done"],
            [KEY[cut : cut + 2], KEY[cut + 2 : 9], KEY[9:], " ok"],
        ):
            out = _split(_around_a_call(["The key is " + KEY[:cut]], after), KEY)
            started = next(at for at, e in enumerate(out) if isinstance(e, ToolCallStart))
            assert _texts(out[:started]) == "The key is " + KEY[:cut]
            assert _texts(out[started:]).startswith("***")
            assert KEY[cut : cut + 4] not in _texts(out)
            rest = "*** done" if len(after) == 1 else "*** ok"
            assert _folded(out) == ["The key is " + KEY[:cut], "call", rest]
            call = ToolCallPart("c", "f", "{}", {})
            parts = (TextPart("The key is " + KEY[:cut]), call, TextPart("".join(after)))
            whole = whole_split_echoes(ModelResponse(Message("assistant", parts)), pairs)
            assert [getattr(p, "text", "call") for p in whole.message.parts] == _folded(out)
    # A short URL password: its user shows before the mask, and what of it went on is not repeated.
    pairs = scrubs(url_secrets("http://bob:pw@host/"))
    for cut in (1, 2):
        events = _around_a_call(["login as " + "bob"[:cut]], ["bob:pw@"[cut:] + "host"])
        split = SplitEchoes(pairs)
        out = [e for event in events for e in split.feed(event)] + list(split.end())
        assert _folded(out) == ["login as " + "bob"[:cut], "call", "bob:***@host"[cut:]]


def _folded(events: list[Any]) -> list[str]:
    """The parts ``events`` fold to: each text's text, ``call`` for a call."""
    state = StreamState()
    for event in events:
        state = fold_stream(state, event)
    return [getattr(p, "text", "call") for p in finish_stream(state, str).message.parts]


def _around_a_call(before: list[str], after: list[str]) -> list[Any]:
    """Text pieces ``before``, an in-order call, then text pieces ``after``."""
    call = [ToolCallStart(0, "c", "f"), ToolCallDelta(0, "{}"), ToolCallEnd(0)]
    return [*map(TextDelta, before), *call, *map(TextDelta, after)]


def test_split_echoes_masks_a_key_written_around_a_call() -> None:
    """A key whose start ends the text before a call and whose rest starts the text after it
    (Anthropic: text block, tool_use, text block): the held start waits past the call and the
    key is masked in the text after it; no part of the key goes on, in any piece."""
    for before, after in [
        (["The key is sk-echo-0123"], ["456789abcdefghijXYZ done"]),
        (["The key ", "is sk-e", "cho-0123"], ["4567", "89abcdef", "ghijXYZ", " done"]),
        (["sk-echo-0123"], ["456789abcdefghijXYZ done"]),
    ]:
        out = _split(_around_a_call(before, after), KEY)
        assert not any(half in _texts(out) for half in ("sk-echo-0123", "456789abcdefghij"))
        start = "" if before == ["sk-echo-0123"] else "The key is "
        assert _folded(out) == [start, "call", "*** done"]


def test_split_echoes_gives_held_text_that_is_no_key_back_before_the_call() -> None:
    """Held text past a call that turns out no key (the text after the call does not go on with
    it, or reasoning or the stream's end comes next) folds before the call, as sent; so does
    the text after a second call."""
    cases = [
        (_around_a_call(["say sk-ec"], ["ho-0", "ne"]), ["say sk-ec", "call", "ho-0ne"]),
        (_around_a_call(["say sk-ec"], []), ["say sk-ec", "call"]),
        (
            [*_around_a_call(["say sk-ec"], []), ReasoningDelta("r", provider="p")],
            ["say sk-ec", "call", "r"],
        ),
        (
            [
                *_around_a_call(["say sk-ec"], ["ho-0", "1"]),
                ToolCallStart(1, "d", "f"),
                ToolCallEnd(1),
                TextDelta("23 ok"),
            ],
            ["say sk-ec", "call", "ho-01", "call", "23 ok"],
        ),
    ]
    for events, parts in cases:
        assert _folded(_split(events, KEY)) == parts
        assert _folded(events) == parts


def test_whole_split_echoes_masks_a_key_written_across_texts_as_a_stream_does() -> None:
    """A whole answer: a key across two texts with calls (or nothing) between them is masked as
    a stream's is; reasoning between the texts separates them; texts without one stay as sent."""
    call = ToolCallPart("c", "f", "{}", {})
    pairs = scrubs([Secret(KEY)])

    def masked(*parts: Any) -> list[Any]:
        response = ModelResponse(Message("assistant", parts))
        return [
            getattr(p, "text", p.kind) for p in whole_split_echoes(response, pairs).message.parts
        ]

    first, rest = TextPart("The key is sk-echo-0123"), TextPart("456789abcdefghijXYZ done")
    assert masked(first, call, rest) == ["The key is ", "tool_call", "*** done"]
    assert masked(first, call, call, rest) == ["The key is ", "tool_call", "tool_call", "*** done"]
    assert masked(first, rest) == ["The key is ", "*** done"]
    streamed = _split(_around_a_call([first.text], [rest.text]), KEY)
    assert _folded(streamed) == ["The key is ", "call", "*** done"]
    thought = ReasoningPart("r")
    assert masked(first, thought, rest) == [first.text, "r", rest.text]
    response = ModelResponse(Message("assistant", [TextPart("a"), call, TextPart("b")]))
    assert whole_split_echoes(response, pairs) is response


_PIECES = ["a", " ", "sk", "sk-e", "sk-echo-01", "ho-0", "done", ""]


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(_PIECES), max_size=4), min_size=1, max_size=4),
    calls=st.lists(st.integers(1, 2), min_size=3, max_size=3),
    split=st.tuples(st.integers(0, 2), st.integers(1, len(KEY) - 1)),
)
def test_any_answer_of_texts_and_calls_streams_as_it_is_masked_whole(
    texts: list[list[str]], calls: list[int], split: tuple[int, int]
) -> None:
    """Texts (in pieces) with calls between them, a key maybe split across two of them: the
    stream through `SplitEchoes` folds to the whole answer `whole_split_echoes` gives, and no
    piece shows the key's halves."""
    pieces = [list(p) for p in texts]
    at, cut = split
    if at + 1 < len(pieces):
        pieces[at].append(KEY[:cut])
        pieces[at + 1].insert(0, KEY[cut:])
    parts: list[Any] = []
    events: list[Any] = []
    for n, text in enumerate(pieces):
        parts.append(TextPart("".join(text)))
        events += [TextDelta(piece) for piece in text or [""]]
        for m in range(calls[n] if n + 1 < len(pieces) else 0):
            parts.append(ToolCallPart(f"c{n}{m}", "f", "{}", {}))
            events += [ToolCallStart(10 * n + m, f"c{n}{m}", "f"), ToolCallEnd(10 * n + m)]
    pairs = scrubs([Secret(KEY)])
    whole = whole_split_echoes(ModelResponse(Message("assistant", parts)), pairs).message.parts
    out = _split(events, KEY)
    assert _folded(out) == [getattr(p, "text", "call") for p in whole]
    assert not any(
        KEY[:12] in e.text or KEY[-12:] in e.text for e in out if isinstance(e, TextDelta)
    )


def test_split_echoes_passes_every_event_on() -> None:
    """Nothing is dropped, so the parts a stream folds to are the same with a key or without:
    an empty reasoning delta between two texts still splits them."""
    events = [TextDelta("a"), ReasoningDelta("", provider="gemini"), TextDelta("b")]
    assert _split(events, KEY) == events


def test_split_echoes_gives_back_the_text_it_held_before_an_image() -> None:
    """Text held back (what may begin a key) goes on before a MediaOutput, so the image
    stays after the text it followed, as in the whole answer."""
    image = MediaOutput(ImagePart(b"\x89PNG"))
    out = _split([TextDelta("Here sk-ec"), image, TextDelta("after")], KEY)
    assert [e.text if isinstance(e, TextDelta) else "<image>" for e in out] == [
        "Here ",
        "sk-ec",
        "<image>",
        "after",
    ]


def test_split_echoes_keeps_reasoning_apart_and_its_provider() -> None:
    events = [ReasoningDelta("think sk-echo", provider="p"), ReasoningDelta(KEY[7:], provider="p")]
    events.append(ReasoningDelta("", signature="sig", provider="p"))
    out = _split(events, KEY)
    assert "".join(e.text for e in out) == "think ***"
    assert all(e.provider == "p" for e in out)
    assert out[-1].signature == "sig"


def test_split_echoes_releases_held_reasoning_with_the_piece_that_ends_its_part() -> None:
    """A reasoning piece that ends its part (ends=True) takes the text held back with it (what
    may begin a key), so the next part gets none of it."""
    events = [ReasoningDelta("think sk-echo", provider="p"), ReasoningDelta(KEY[7:], provider="p")]
    events += [ReasoningDelta(" then sk-ec", provider="p"), ReasoningDelta("", ends=True)]
    out = _split([*events, ReasoningDelta("next", provider="p")], KEY)
    ending = next(at for at, e in enumerate(out) if e.ends)
    assert "".join(e.text for e in out[: ending + 1]) == "think *** then sk-ec"
    assert "".join(e.text for e in out[ending + 1 :]) == "next"


def test_split_echoes_drops_held_reasoning_a_replacing_piece_takes_the_place_of() -> None:
    """A reasoning piece that replaces its part's text (replaces=True) has a key it begins
    masked, and the text held back of the pieces it replaces is not released after it."""
    events = [ReasoningDelta("summary sk-ec", provider="p")]
    events += [ReasoningDelta("raw sk-echo", provider="p", replaces=True)]
    events += [ReasoningDelta(KEY[7:], provider="p"), TextDelta("ok")]
    out = _split(events, KEY)
    replacing = next(at for at, e in enumerate(out) if getattr(e, "replaces", False))
    after = "".join(e.text for e in out[replacing:] if isinstance(e, ReasoningDelta))
    assert after == "raw ***"
    assert "sk-ec" not in "".join(e.text for e in out)


def test_arguments_whose_escape_is_itself_escaped(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """The arguments' own escape of a "-" (``\\u002d``), its backslash written ``\\u005c`` in
    the answer: found, and masked where it decodes to the key; the rest stays as written."""
    inner = '{"city": "café, ' + ESCAPED + '"}'
    raw = json.dumps(inner, ensure_ascii=False).replace("\\\\", "\\u005c")
    call = '{"id": "c1", "type": "function", "function": {"name": "look_up", "arguments": %s}}'
    body = '{"choices": [{"message": {"role": "assistant", "tool_calls": [%s]}}]}' % (call % raw)
    answers = [body.encode(), json.dumps({"choices": [{"message": {"content": "ok"}}]}).encode()]
    response = _chat_answers(http_server, opened, answers)
    assert got == ["café, ***"]
    (call_part,) = response.state.messages[1].tool_calls
    assert call_part.arguments_text == '{"city": "café, ***"}'
    assert INNER not in response.state.to_json()


def test_a_short_key_echoed_as_a_json_header_in_an_answer_is_masked(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A debugging proxy answering with the request's headers as JSON text: a short key
    shows as ``"x-api-key": "ab"`` there, with its quotes escaped in the answer."""
    echoed = json.dumps({"headers": {"x-api-key": "ab", "accept": "application/json"}})
    http_server.handler = lambda request: Reply(
        json={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": echoed}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    model = toolfold.model("anthropic:m", base_url=http_server.url, api_key="ab")
    opened.append(model)
    response = toolfold.generate_text(model, "hi")
    assert json.loads(response.text) == {
        "headers": {"x-api-key": "***", "accept": "application/json"}
    }


def test_a_stream_that_stops_short_gives_back_what_it_held(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A stream whose body ends without its finish (the codec's own error, at the end): the
    held end that could start the key is shown, being too short to give it away."""
    chunks = sse(_chunk({"role": "assistant", "content": "It is"}))
    assert _text_before_the_failure(http_server, opened, chunks) == "It is"


def test_split_echoes_gives_held_reasoning_to_its_own_part_only() -> None:
    """Whose a held end of reasoning is does not carry over to a later part of nobody's."""
    events = [ReasoningDelta("think s", provider="a"), TextDelta("x"), ReasoningDelta("later s")]
    out = _split(events, KEY)
    assert [(e.text, getattr(e, "provider", None)) for e in out] == [
        ("think ", "a"),
        ("s", "a"),
        ("x", None),
        ("later ", None),
        ("s", None),
    ]


def test_split_echoes_sends_no_empty_piece_while_a_key_start_waits_past_a_call() -> None:
    """A key's start of MIN_CUT_PREFIX or more characters waiting past a call, and text after
    the call that neither finishes nor rules out the key (empty, or more of a possible key):
    no empty ``before_call`` delta is sent meanwhile."""
    key = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    for after in ([""], ["r"], ["o", "j"]):
        split = SplitEchoes(scrubs(api_key_secrets(Secret(key), "authorization", "Bearer")))
        events = _around_a_call(["see sk-p"], after)
        out = [e for event in events for e in split.feed(event)] + split.end()
        assert all(e.text for e in out if isinstance(e, TextDelta) and e.before_call)
        assert _texts(out) == "see sk-p" + "".join(after)


def test_split_echoes_gives_text_held_past_a_call_back_before_an_image() -> None:
    """Text held past a call (a possible key start) when an image follows: the held text goes
    where the model wrote it, before the call, and the stream folds to the whole answer's parts
    with its keys masked as `whole_split_echoes` masks them."""
    pairs = scrubs([Secret(KEY)])
    image = MediaOutput(ImagePart(b"\x89PNG"))
    call = [ToolCallStart(0, "c", "f"), ToolCallDelta(0, "{}"), ToolCallEnd(0)]
    cases = [
        [TextDelta("x sk-ec"), *call, image],
        [TextDelta("x sk-ec"), *call, image, TextDelta("ho-0123456789 y")],
        [TextDelta("x sk-ec"), *call, TextDelta("ho-01"), image, TextDelta("z")],
        [TextDelta("x sk-ec"), *call, TextDelta(KEY[5:] + " y"), image],
    ]
    for events in cases:
        split = SplitEchoes(pairs)
        out = [e for event in events for e in split.feed(event)] + split.end()
        streamed, raw = StreamState(), StreamState()
        for event in out:
            streamed = fold_stream(streamed, event)
        for event in events:
            raw = fold_stream(raw, event)
        whole = whole_split_echoes(finish_stream(raw, str), pairs)
        assert finish_stream(streamed, str).message.parts == whole.message.parts
