"""Argument text a model sends can never fail the run: it becomes an argument error the model reads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from scripted_http import Recorded, Reply, ScriptedServer

import toolfold
from toolfold import RunState, generate_text, resume
from toolfold.runtime.core._arguments import MAX_DEPTH, decode_arguments, parse_arguments

SEEN: list[Any] = []


@toolfold.tool
def echo(value: Any = None) -> str:
    """Echo a value back.

    Args:
        value: Anything.
    """
    SEEN.append(value)
    return f"got {value}"


def _call_body(arguments_json: str) -> bytes:
    """A chat.completion calling ``echo`` with ``arguments_json`` spliced in verbatim as JSON text."""
    head = '{"id":"r1","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":'
    call = '{"id":"c1","type":"function","function":{"name":"echo","arguments":' + arguments_json
    return (head + '{"role":"assistant","content":null,"tool_calls":[' + call + "}}]}}]}").encode()


def _text_body(text: str) -> bytes:
    message = {"role": "assistant", "content": text}
    return json.dumps(
        {"id": "r2", "choices": [{"message": message, "finish_reason": "stop"}]}
    ).encode()


class Server:
    """Answers the first request with a hostile call, then with text; keeps every body as bytes."""

    def __init__(self, first: bytes) -> None:
        self.first = first
        self.bodies: list[bytes] = []

    def __call__(self, request: Recorded) -> Reply:
        self.bodies.append(request.body)
        body = self.first if len(self.bodies) == 1 else _text_body("done")
        return Reply(body=body, headers={"content-type": "application/json"})


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    """Each test starts with no tool call seen."""
    SEEN.clear()
    yield
    SEEN.clear()


def _model(server: ScriptedServer, opened: list[Any]) -> Any:
    made = toolfold.model("openai-compatible:m", base_url=f"{server.url}/v1", api_key="k" * 20)
    opened.append(made)
    return made


def _tool_messages(body: bytes) -> list[str]:
    sent = json.loads(body.decode("utf-8"))  # strict UTF-8: a lone surrogate would fail here
    return [m["content"] for m in sent["messages"] if m["role"] == "tool"]


DEEP_TEXT = '{"value": ' + "[" * 1000 + "]" * 1000 + "}"


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (json.dumps(DEEP_TEXT), f"nested more than {MAX_DEPTH} levels"),
        (json.dumps('{"value": ' + "[" * 100_000 + "}"), f"nested more than {MAX_DEPTH} levels"),
        (json.dumps('{"value": NaN}'), "not a finite JSON number"),
        (json.dumps('{"value": 1e999}'), "$.value: the number 1e999 is too large for float"),
        (json.dumps('{"value": [1, 2'), "not valid JSON"),
        (json.dumps("[1, 2]"), "takes a JSON object of arguments, got array [1, 2]"),
    ],
)
def test_unreadable_arguments_are_an_error_the_model_reads(
    http_server: ScriptedServer, opened: list[Any], arguments: str, says: str
) -> None:
    """Arguments nested ~1,000 deep, NaN or broken JSON: the tool never runs, the model reads why."""
    server = Server(_call_body(arguments))
    http_server.handler = server
    response = generate_text(_model(http_server, opened), "go", tools=[echo])
    assert response.text == "done"
    assert SEEN == []
    (told,) = _tool_messages(server.bodies[1])
    assert "Invalid arguments for tool 'echo'" in told
    assert says in told


def test_a_lone_surrogate_never_poisons_the_run(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A lone surrogate in argument text (raw and escaped) is made encodable: the run goes on and resumes."""
    # "\ud800" at the body's level puts a raw surrogate in the text; "\\ud800" an escaped one.
    arguments = '"{\\"value\\": \\"a\\ud800\\\\ud800b\\"}"'
    server = Server(_call_body(arguments))
    http_server.handler = server
    model = _model(http_server, opened)
    response = generate_text(model, "go", tools=[echo])
    assert response.text == "done"
    assert SEEN == ["a\ufffd\ufffdb"]
    assert _tool_messages(server.bodies[1]) == ["got a\ufffd\ufffdb"]
    text = response.state.to_json()
    text.encode("utf-8")
    again = resume(RunState.from_json(text), model=model, tools=[echo], message="more")
    assert again.text == "done"
    json.loads(server.bodies[2].decode("utf-8"))


@toolfold.tool
def listing(folder: str) -> list[str]:
    """List a folder.

    Args:
        folder: The folder.
    """
    return ["caf\udce9.txt", "ok.txt"]  # os.listdir() of a file name that is not UTF-8


def test_a_tool_result_holding_a_lone_surrogate_is_sent_as_a_replacement(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A lone surrogate in a tool's result goes out as U+FFFD, never as the escape strict parsers refuse."""
    call = _call_body('"{\\"folder\\": \\"d\\"}"').replace(b'"echo"', b'"listing"')
    server = Server(call)
    http_server.handler = server
    model = _model(http_server, opened)
    response = generate_text(model, "go", tools=[listing])
    assert response.text == "done"
    assert b"\\ud" not in server.bodies[1]
    assert "caf\ufffd.txt" in _tool_messages(server.bodies[1])[0]
    kept = next(m for m in response.state.messages if m.role == "tool")
    assert "caf\udce9.txt" in kept.parts[0].content  # the state keeps what the tool returned
    again = resume(
        RunState.from_json(response.state.to_json()), model=model, tools=[listing], message="more"
    )
    assert again.text == "done"
    assert b"\\ud" not in server.bodies[2]


def test_decode_arguments_reports_every_reason() -> None:
    """The core decoder refuses NaN, deep nesting and bad JSON with a ValueError; parse gives None."""
    for text in ("{", '{"a": NaN}', '{"a": Infinity}', DEEP_TEXT, "[" * 100_000):
        with pytest.raises(ValueError):  # noqa: PT011 - the reasons are checked above
            decode_arguments(text)
        assert parse_arguments(text) is None
    assert decode_arguments("  ") == {}
    ok = '{"a": ' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
    assert parse_arguments(ok) is not None


def test_a_state_holding_a_lone_surrogate_still_serializes_to_utf8() -> None:
    """A lone surrogate that reached a state (a custom model's text) is escaped in its JSON."""
    from toolfold.testing import ScriptedModel

    state = generate_text(ScriptedModel(["bad \ud800 text"]), "go").state
    text = state.to_json()
    text.encode("utf-8")
    assert RunState.from_json(text) == state
