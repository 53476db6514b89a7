"""Arguments sent as a JSON object (Anthropic, Gemini, Ollama) nested too deep: an argument error.

Argument text nested too deep (OpenAI, Anthropic's stream) is an argument error
the model reads and can correct; the same arguments sent as an object failed
the whole model call as a malformed response. Both now read the same.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from scripted_http import Reply, ScriptedServer, sse

import toolfold
from toolfold import Agent, tool
from toolfold.adapters import _wire as wire
from toolfold.adapters._http._json import (
    _STRING_OR_BRACKET,
    SHALLOW_DEPTH,
    SHALLOW_LIMIT,
    shallow,
)
from toolfold.adapters.anthropic import DecoderState as AnthropicState
from toolfold.adapters.anthropic import decode_end as anthropic_end
from toolfold.adapters.anthropic import decode_event as anthropic_event
from toolfold.adapters.anthropic import parse_response as parse_anthropic
from toolfold.adapters.gemini import DecoderState as GeminiState
from toolfold.adapters.gemini import decode_chunk
from toolfold.adapters.gemini import decode_end as gemini_end
from toolfold.adapters.gemini import parse_response as parse_gemini
from toolfold.adapters.ollama import DecoderState as OllamaState
from toolfold.adapters.ollama import decode_end as ollama_end
from toolfold.adapters.ollama import decode_line
from toolfold.adapters.ollama import parse_response as parse_ollama
from toolfold.runtime import ModelResponse, StreamState, finish_stream, fold_stream
from toolfold.runtime.core._arguments import argument_problem
from toolfold.testing import FunctionModel


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


TOO_DEEP = nested(wire.MAX_DEPTH + 6)
DEEPEST = nested(wire.MAX_DEPTH)


def anthropic(arguments: Any) -> ModelResponse:
    return parse_anthropic(
        {
            "content": [
                {"type": "text", "text": "Calling."},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": arguments},
            ],
            "stop_reason": "tool_use",
        }
    )


def anthropic_stream(arguments: Any) -> ModelResponse:
    """A stream whose tool block starts with its input filled in (as some gateways send it)."""
    state, events = AnthropicState(), []
    for payload in (
        {"type": "message_start", "message": {"id": "m1", "model": "claude", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "Calling."},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": arguments},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ):
        state, new = anthropic_event(state, json.dumps(payload))
        events.extend(new)
    return _folded([*events, *anthropic_end(state)])


def gemini_body(arguments: Any) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Calling."},
                        {"functionCall": {"name": "f", "args": arguments}},
                    ],
                },
                "finishReason": "STOP",
            }
        ],
        "responseId": "r1",
    }


def gemini_stream(arguments: Any) -> ModelResponse:
    state, events = decode_chunk(GeminiState(), gemini_body(arguments))
    return _folded([*events, *gemini_end(state)])


def ollama_body(arguments: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "message": {
            "role": "assistant",
            "content": "Calling.",
            "tool_calls": [{"function": {"name": "f", "arguments": arguments}}],
        },
        "done": True,
        "done_reason": "stop",
    }


def ollama_stream(arguments: Any) -> ModelResponse:
    state, events = decode_line(OllamaState(), json.dumps(ollama_body(arguments)))
    return _folded([*events, *ollama_end(state)])


def _folded(events: list[Any]) -> ModelResponse:
    folded = StreamState()
    for event in events:
        folded = fold_stream(folded, event)
    return finish_stream(folded, lambda n: f"made{n}")


PARSERS = {
    "anthropic": anthropic,
    "anthropic-stream": anthropic_stream,
    "gemini": lambda a: parse_gemini(gemini_body(a)),
    "gemini-stream": gemini_stream,
    "ollama": lambda a: parse_ollama(ollama_body(a)),
    "ollama-stream": ollama_stream,
}


@pytest.mark.parametrize("wire_format", sorted(PARSERS))
def test_too_deep_object_arguments_are_an_argument_problem(wire_format: str) -> None:
    response = PARSERS[wire_format](TOO_DEEP)
    [call] = response.message.tool_calls
    assert call.arguments is None
    assert response.message.text == "Calling."  # the rest of the answer stands
    assert argument_problem(call.arguments_text) == (
        f"nested more than {wire.MAX_DEPTH} levels deep",
        0,
    )
    assert call.arguments_text.isascii()


@pytest.mark.parametrize("wire_format", sorted(PARSERS))
def test_object_arguments_within_the_limit_are_kept(wire_format: str) -> None:
    response = PARSERS[wire_format](DEEPEST)
    [call] = response.message.tool_calls
    assert call.arguments == DEEPEST
    assert json.loads(call.arguments_text) == DEEPEST


def test_the_model_reads_the_argument_error_and_corrects_itself() -> None:
    """Through the loop: the call gets an argument error, the next answer is used."""
    seen: list[str] = []

    @tool
    def f(a: Any) -> str:
        """Take a value."""
        seen.append(json.dumps(a))
        return "ok"

    answers = iter([anthropic(TOO_DEEP), anthropic({"a": 1})])

    def reply(request: Any) -> Any:
        return next(answers, "done")

    response = Agent(FunctionModel(reply), tools=[f]).run("go")
    assert response.text == "done"
    assert seen == ["1"]
    results = [r for m in response.messages if m.role == "tool" for r in m.tool_results]
    assert results[0].is_error
    assert f"nested more than {wire.MAX_DEPTH} levels deep" in results[0].content


# Nested far deeper than the interpreter decodes (its recursion limit is about 1,000):
# such an answer is built as text, as a hostile server sends it.
ABSURD = 5_000
ABSURD_ARGUMENTS = '{"a":' * ABSURD + "1" + "}" * ABSURD
_ANTHROPIC_CALL = '{"type":"tool_use","id":"toolu_1","name":"f","input":ARGS}'.replace(
    "ARGS", ABSURD_ARGUMENTS
)
_GEMINI_BODY = (
    '{"candidates":[{"content":{"role":"model","parts":[{"text":"Calling."},'
    '{"functionCall":{"name":"f","args":ARGS}}]},"finishReason":"STOP"}],'
    '"responseId":"r1"}'
).replace("ARGS", ABSURD_ARGUMENTS)
_OLLAMA_LINE = (
    '{"model":"m","message":{"role":"assistant","content":"Calling.","tool_calls":'
    '[{"function":{"name":"f","arguments":ARGS}}]},"done":true,"done_reason":"stop"}'
).replace("ARGS", ABSURD_ARGUMENTS)


def _absurd_answer(provider: str, streamed: bool) -> Reply:
    if provider == "anthropic":
        if not streamed:
            body = (
                '{"id":"m1","type":"message","role":"assistant","model":"c","content":'
                '[{"type":"text","text":"Calling."},CALL],"stop_reason":"tool_use",'
                '"usage":{"input_tokens":1,"output_tokens":1}}'
            ).replace("CALL", _ANTHROPIC_CALL)
            return Reply(body=body.encode(), headers={"content-type": "application/json"})
        start = '{"type":"content_block_start","index":0,"content_block":CALL}'.replace(
            "CALL", _ANTHROPIC_CALL
        )
        return Reply(
            chunks=[
                *sse({"type": "message_start", "message": {"id": "m1", "model": "c", "usage": {}}}),
                f"event: content_block_start\ndata: {start}\n\n".encode(),
                *sse(
                    {"type": "content_block_stop", "index": 0},
                    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
                    {"type": "message_stop"},
                ),
            ],
            headers={"content-type": "text/event-stream"},
        )
    if provider == "gemini":
        if not streamed:
            return Reply(body=_GEMINI_BODY.encode(), headers={"content-type": "application/json"})
        return Reply(
            chunks=[f"data: {_GEMINI_BODY}\n\n".encode()],
            headers={"content-type": "text/event-stream"},
        )
    if not streamed:
        return Reply(body=_OLLAMA_LINE.encode(), headers={"content-type": "application/json"})
    return Reply(
        chunks=[_OLLAMA_LINE.encode() + b"\n"], headers={"content-type": "application/x-ndjson"}
    )


def _final_answer(provider: str, streamed: bool) -> Reply:
    if provider == "anthropic":
        body = {
            "id": "m2",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": [{"type": "text", "text": "done"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        if not streamed:
            return Reply(json=body)
        return Reply(
            chunks=sse(
                {"type": "message_start", "message": {"id": "m2", "model": "c", "usage": {}}},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}},
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "done"},
                },
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
                {"type": "message_stop"},
            ),
            headers={"content-type": "text/event-stream"},
        )
    if provider == "gemini":
        body = {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": "done"}]}, "finishReason": "STOP"}
            ]
        }
        if not streamed:
            return Reply(json=body)
        return Reply(chunks=sse(body), headers={"content-type": "text/event-stream"})
    line = {"model": "m", "message": {"role": "assistant", "content": "done"}, "done": True}
    if not streamed:
        return Reply(json=line)
    return Reply(
        chunks=[json.dumps(line).encode() + b"\n"], headers={"content-type": "application/x-ndjson"}
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["blocking", "streamed"])
@pytest.mark.parametrize("provider", ["anthropic", "gemini", "ollama"])
def test_arguments_nested_deeper_than_json_decodes_are_an_argument_error_over_http(
    http_server: ScriptedServer, provider: str, streamed: bool
) -> None:
    """An answer whose object arguments nest 5,000 levels deep (deeper than the interpreter
    decodes: it failed the whole model call as a malformed response) is read with those
    arguments cut short: the call gets an argument error the model reads, the tool never
    runs, and the run goes on to the model's next answer."""
    ran: list[Any] = []

    @tool
    def f(a: Any) -> str:
        """Take a value."""
        ran.append(a)
        return "ok"

    http_server.add(_absurd_answer(provider, streamed), _final_answer(provider, streamed))
    spec = {"anthropic": "anthropic:c", "gemini": "gemini:g", "ollama": "ollama:m"}[provider]
    model = toolfold.model(spec, base_url=http_server.url, api_key="k" * 20, retry=0)
    agent = Agent(model, tools=[f])
    try:
        if streamed:
            run = agent.stream("go")
            for _ in run:
                pass
            response = run.response
        else:
            response = agent.run("go")
    finally:
        model.close()  # type: ignore[attr-defined]
    assert response.text == "done"
    assert ran == []
    [result] = [r for m in response.messages if m.role == "tool" for r in m.tool_results]
    assert result.is_error
    assert "nested more than" in result.content
    [call] = response.state.log[1].response.tool_calls  # type: ignore[attr-defined]
    assert call.arguments is None


def test_shallow_cuts_only_what_is_too_deep_and_keeps_strings_whole() -> None:
    """`shallow` replaces what nests deeper than its depth by null; brackets inside strings
    (escaped quotes too) are text, an answer with nothing that deep is the same object, and
    text that is not JSON stays not JSON."""
    text = '{"s":"q\\"[[{","x":' + "[" * 10 + "]" * 10 + ',"k":{"v":[1]}}'
    assert shallow(text, depth=4) == '{"s":"q\\"[[{","x":[[[null]]],"k":{"v":[1]}}'
    assert json.loads(shallow(text, depth=4))["s"] == 'q"[[{'
    assert shallow(text, depth=20) is text
    with pytest.raises(json.JSONDecodeError, match="Expecting"):
        json.loads(shallow("[" * 10 + "}", depth=4))


def test_shallow_leaves_a_text_longer_than_its_limit_as_is() -> None:
    """The walk is Python, bracket by bracket: past `SHALLOW_LIMIT` characters the text is
    returned as is (a hostile answer cannot make the client walk 64 MiB of brackets)."""
    long = "[" * (SHALLOW_LIMIT + 1) + "]" * (SHALLOW_LIMIT + 1)
    assert shallow(long) is long
    just = "[" * (SHALLOW_LIMIT // 2) + "]" * (SHALLOW_LIMIT // 2)
    assert len(shallow(just)) == 2 * SHALLOW_DEPTH + len("null")


def test_shallow_walks_a_string_that_never_closes_once() -> None:
    """An unclosed string runs to the end of the text in one match: no quote after it starts a
    second scan of the rest (a hostile answer of escaped quotes made the walk quadratic:
    minutes for a MiB), and a text whose brackets do not pair is left as it is."""
    unclosed = "[" * 300 + '"' + '\\"' * 10_000 + "\\"
    matches = list(_STRING_OR_BRACKET.finditer(unclosed))
    assert len(matches) == 301
    assert matches[-1].span() == (300, len(unclosed))
    assert shallow(unclosed) is unclosed
    for unpaired in ("[" * 300 + "}" * 300, "[" * 300 + "]" * 301, "[" * 300 + "]" * 299):
        assert shallow(unpaired) is unpaired


def test_a_deep_body_with_a_byte_order_mark_is_read_cut_too(http_server: ScriptedServer) -> None:
    """`json.loads` reads a UTF-8 body with a byte order mark: so does the cut's second try."""
    ran: list[Any] = []

    @tool
    def f(a: Any) -> str:
        """Take a value."""
        ran.append(a)
        return "ok"

    first = _absurd_answer("anthropic", streamed=False)
    http_server.add(
        attrs.evolve(first, body=b"\xef\xbb\xbf" + first.body), _final_answer("anthropic", False)
    )
    model = toolfold.model("anthropic:c", base_url=http_server.url, api_key="k" * 20, retry=0)
    try:
        response = Agent(model, tools=[f]).run("go")
    finally:
        model.close()  # type: ignore[attr-defined]
    assert response.text == "done"
    assert ran == []
