"""Hostile servers through the public API over 127.0.0.1: every parser a server's bytes reach.

A local server answers each run's first request with a fuzzed body or stream
(and later requests with a plain answer); the run goes through ``generate_text``
or ``Agent.stream`` like a user's. Every input must end with a response, a
`ProviderError` (a `MalformedResponseError` names the field), or an argument
error the model reads - never a bare exception, never an internal crash
wrapped in `RunError`.

Families and budgets (`BUDGET`, fixed seeds: CI tries the same inputs every run):
random bytes as bodies and streams, recordings from
``provider-traffic/{openai-chat-completions,groq,mistral,openai-compatible}``
mutated by structure (a field given another type, NaN, deep nesting, a lone
surrogate, a key dropped) and by bytes, hostile argument texts, error bodies
under every error status, and the native providers' recordings (Anthropic,
Gemini, Responses) mutated the same way.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cassettes import TRAFFIC, load
from scripted_http import Recorded, Reply, ScriptedServer, sse
from test_hostile_arguments import echo

import toolfold
from toolfold import (
    Agent,
    MalformedResponseError,
    ProviderError,
    RunError,
)

BUDGET = {
    "random-bytes": 400,
    "mutated-recordings": 1600,
    "hostile-arguments": 400,
    "error-bodies": 400,
    "native-recordings": 600,
}
FAMILIES = (
    "openai-chat-completions",
    "groq-chat-completions",
    "mistral-chat-completions",
    "openai-compatible",
)
# --- the server ------------------------------------------------------------------


class Fuzzer:
    """Answers a run's first request with ``current``; requests that carry tool results with text."""

    def __init__(self) -> None:
        self.current = Reply(status=200)
        self.later: list[dict[str, Any]] = []

    def __call__(self, request: Recorded) -> Reply:
        body = request.json()
        if any(m.get("role") == "tool" for m in body.get("messages", ())):
            self.later.append(body)
            return _final(stream=bool(body.get("stream")))
        return self.current


def _final(*, stream: bool) -> Reply:
    if stream:
        chunk = {"id": "f", "choices": [{"index": 0, "delta": {"content": "done"}}]}
        end = {"id": "f", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        chunks = sse(chunk, end, "[DONE]")
        return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)
    message = {"role": "assistant", "content": "done"}
    return Reply(json={"id": "f", "choices": [{"message": message, "finish_reason": "stop"}]})


def _reply(status: int, body: bytes, *, stream: bool) -> Reply:
    if stream and status == 200:
        return Reply(headers={"content-type": "text/event-stream"}, chunks=[body] if body else [])
    return Reply(status=status, body=body, headers={"content-type": "application/json"})


def _run_once(agent: Agent, stream: bool) -> ProviderError | None:
    """One run through the public API: None for an answer, else the ProviderError it ended with."""
    try:
        if stream:
            for _ in agent.stream("go"):
                pass
        else:
            agent.run("go")
    except RunError as exc:  # an internal crash wrapped for the caller
        raise AssertionError(f"internal crash: {exc!r}") from exc
    except ProviderError as exc:
        return exc
    return None


@pytest.fixture
def fuzz(http_server: ScriptedServer) -> Iterator[Callable[[Reply, bool], str]]:
    """Runs one input (a reply for the first request) through the public API; gives the outcome."""
    fuzzer = Fuzzer()
    http_server.handler = fuzzer
    model = toolfold.model(
        "openai-compatible:m", base_url=f"{http_server.url}/v1", api_key="k" * 20, retry=0
    )
    agent = Agent(model=model, tools=[echo], max_steps=3)

    def run(reply: Reply, stream: bool) -> str:
        fuzzer.current = reply
        fuzzer.later.clear()
        failed = _run_once(agent, stream)
        if isinstance(failed, MalformedResponseError):
            assert failed.path.startswith("$"), failed
            assert failed.provider == "openai-compatible"
        if failed is not None:
            return type(failed).__name__
        for later in fuzzer.later:
            for message in later["messages"]:
                if message["role"] == "tool":
                    assert isinstance(message["content"], str)
        return "response"

    yield run
    model.close()


# --- mutations ---------------------------------------------------------------------

_NAN = "__fuzz_nan__"
_DEEP = "__fuzz_deep__"
HOSTILE_VALUES: list[Any] = [
    8,
    -1,
    2**70,
    9.5,
    True,
    None,
    "",
    "x",
    "\ud800",
    [],
    [None],
    {},
    {"a": {}},
    _NAN,
    _DEEP,
]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*at, index))


def _mutate_json(rng: random.Random, value: Any) -> Any:
    """``value`` with one node replaced by a hostile value, dropped, or its array grown."""
    paths = list(_paths(value))
    target = rng.choice(paths)
    if not target:
        return rng.choice(HOSTILE_VALUES)
    parent = value
    for key in target[:-1]:
        parent = parent[key]
    last = target[-1]
    action = rng.randrange(6)
    if action == 0 and isinstance(parent, dict):
        del parent[last]
    elif action == 1 and isinstance(parent, list):
        parent.append(rng.choice(HOSTILE_VALUES))
    else:
        parent[last] = rng.choice(HOSTILE_VALUES)
    return value


def _dump(rng: random.Random, value: Any) -> bytes:
    text = json.dumps(value)  # ensure_ascii: a lone surrogate travels as "\ud800"
    text = text.replace(f'"{_NAN}"', rng.choice(["NaN", "Infinity", "-Infinity", "1e999"]))
    depth = rng.choice([50, 900, 5000])
    return text.replace(f'"{_DEEP}"', "[" * depth + "]" * depth).encode()


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    buffer = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not buffer:
            break
        action = rng.randrange(5)
        at = rng.randrange(len(buffer))
        if action == 0:
            buffer[at] = rng.randrange(256)
        elif action == 1:
            buffer.insert(at, rng.choice(b'{}[]",:\\\x00\xff\xed'))
        elif action == 2:
            del buffer[at : at + rng.randint(1, 20)]
        elif action == 3:
            del buffer[at:]
        else:
            buffer[at:at] = buffer[at : at + rng.randint(1, 40)]
    return bytes(buffer)


def _split_sse(text: str) -> list[str]:
    return [block for block in re.split(r"\r?\n\r?\n", text) if block.strip()]


def _mutate_stream(rng: random.Random, text: str) -> bytes:
    blocks = _split_sse(text)
    action = rng.randrange(4)
    if action == 0 and blocks:  # one event's JSON mutated
        candidates = [i for i, b in enumerate(blocks) if "\ndata: {" in f"\n{b}"]
        if candidates:
            i = rng.choice(candidates)
            head, _, data = f"\n{blocks[i]}".partition("\ndata: ")
            value = json.loads(data.strip())
            mutated = _dump(rng, _mutate_json(rng, value)).decode()
            blocks[i] = f"{head}\ndata: {mutated}".lstrip("\n")
    elif action == 1 and blocks:  # an event dropped or repeated
        i = rng.randrange(len(blocks))
        if rng.random() < 0.5:
            del blocks[i]
        else:
            blocks.insert(i, blocks[i])
    body = ("\n\n".join(blocks) + "\n\n").encode()
    if action >= 2:
        body = _mutate_bytes(rng, body)
    return body


def _mutated(rng: random.Random, text: str, *, stream: bool) -> bytes:
    """A recorded body or SSE stream mutated by structure (mostly) or by bytes."""
    if stream:
        return _mutate_stream(rng, text)
    if rng.random() < 0.7 and text.lstrip()[:1] in "{[":
        return _dump(rng, _mutate_json(rng, json.loads(text)))
    return _mutate_bytes(rng, text.encode())


def _recordings() -> list[tuple[int, str, bool]]:
    """(status, response text, is_stream) of every recorded chat exchange."""
    found = []
    for family in FAMILIES:
        for path in sorted((TRAFFIC / family).glob("*.yaml")):
            for exchange in load(f"{family}/{path.name}"):
                found.append((exchange.status, exchange.response_text, exchange.is_stream))
    return found


# --- the families ------------------------------------------------------------------


def _summary(outcomes: Counter[str], family: str) -> None:
    print(f"{family}: {sum(outcomes.values())} inputs -> {dict(outcomes.most_common())}")
    assert sum(outcomes.values()) == BUDGET[family]


def test_random_bytes(fuzz: Callable[[Reply, bool], str]) -> None:
    """Random bytes as a body or a stream: a ProviderError or (rarely) a response, never a crash."""
    rng = random.Random(8001)
    outcomes: Counter[str] = Counter()
    for n in range(BUDGET["random-bytes"]):
        stream = n % 2 == 1
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        if stream and rng.random() < 0.5:
            data = b"data: " + data + b"\n\n"
        outcomes[fuzz(_reply(200, data, stream=stream), stream)] += 1
    _summary(outcomes, "random-bytes")
    assert set(outcomes) - {"response"}  # errors were met


def test_mutated_recordings(fuzz: Callable[[Reply, bool], str]) -> None:
    """Recorded responses and streams mutated by structure and by bytes end cleanly."""
    rng = random.Random(8002)
    recordings = [r for r in _recordings() if r[0] == 200]
    outcomes: Counter[str] = Counter()
    for _ in range(BUDGET["mutated-recordings"]):
        _, text, stream = rng.choice(recordings)
        body = _mutated(rng, text, stream=stream)
        outcomes[fuzz(_reply(200, body, stream=stream), stream)] += 1
    _summary(outcomes, "mutated-recordings")
    assert outcomes["response"] > 0
    assert outcomes["MalformedResponseError"] > 0


HOSTILE_ARGUMENTS = [
    "",
    "{",
    "null",
    "[1]",
    '"text"',
    '{"value": NaN}',
    '{"value": 1e999}',
    '{"value": "\\ud800"}',
    '{"value": "\ud800"}',
    '{"value": ' + "[" * 1000 + "]" * 1000 + "}",
    '{"value": ' + "{" * 5000,
    '{"value": 1' + "0" * 5000 + "}",
    '{"value": "' + "x" * 100_000 + '"}',
    '{"value": 1, "value": 2}',
    '{"other": 1}',
    "\x00\xff",
]


def _hostile_arguments(rng: random.Random) -> str:
    text = rng.choice(HOSTILE_ARGUMENTS)
    if rng.random() < 0.5:
        text = _mutate_bytes(rng, text.encode("utf-8", "surrogatepass")).decode("utf-8", "replace")
    return text


def test_hostile_arguments(fuzz: Callable[[Reply, bool], str]) -> None:
    """Any argument text: the tool runs with valid arguments, else the model reads an argument error."""
    rng = random.Random(8003)
    outcomes: Counter[str] = Counter()
    for n in range(BUDGET["hostile-arguments"]):
        stream = n % 2 == 1
        arguments = _hostile_arguments(rng)
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "echo", "arguments": arguments},
        }
        if stream:
            delta = {"role": "assistant", "tool_calls": [{"index": 0, **call}]}
            chunks = [
                {"id": "s", "choices": [{"index": 0, "delta": delta}]},
                {"id": "s", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            ]
            body = b"".join(_dump(rng, c).join([b"data: ", b"\n\n"]) for c in chunks)
            body += b"data: [DONE]\n\n"
        else:
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            body = _dump(rng, {"id": "r", "choices": [{"message": message}]})
        outcome = fuzz(_reply(200, body, stream=stream), stream)
        assert outcome == "response", arguments[:200]
        outcomes[outcome] += 1
    _summary(outcomes, "hostile-arguments")


ERROR_STATUSES = [400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 502, 503, 529]
ERROR_SEEDS: list[Any] = [
    {"error": {"message": "m", "type": "t", "code": "c", "param": None}},
    {"error": {"message": "m", "code": "²"}},
    {"error": {"code": 429, "message": "m", "metadata": {"raw": "r", "provider_name": "p"}}},
    {"object": "error", "message": "m", "type": "t", "code": 1},
    [{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [{"@type": "x"}]}}],
    {"error": {"code": "tool_use_failed", "failed_generation": "g", "message": "m"}},
]


def test_error_bodies(fuzz: Callable[[Reply, bool], str]) -> None:
    """Error statuses with mutated, recorded or random bodies: always the ProviderError for the status."""
    rng = random.Random(8004)
    recorded = [json.loads(t) for s, t, _ in _recordings() if s >= 400 and t.startswith("{")]
    outcomes: Counter[str] = Counter()
    for n in range(BUDGET["error-bodies"]):
        status = rng.choice(ERROR_STATUSES)
        seed = json.loads(json.dumps(rng.choice(ERROR_SEEDS + recorded)))
        action = rng.randrange(3)
        if action == 0:
            body = _dump(rng, _mutate_json(rng, seed))
        elif action == 1:
            body = _mutate_bytes(rng, json.dumps(seed).encode())
        else:
            body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 100)))
        outcome = fuzz(_reply(status, body, stream=False), n % 2 == 1)
        assert outcome != "response"
        outcomes[outcome] += 1
    _summary(outcomes, "error-bodies")
    assert {"RateLimitError", "ServerError", "BadRequestError"} <= set(outcomes)


NATIVE = {
    "anthropic-messages": ("anthropic:claude-x", ""),
    "gemini-generate-content": ("gemini:gemini-x", ""),
    "openai-responses": ("openai-responses:gpt-x", "/v1"),
}


def test_mutated_native_recordings(http_server: ScriptedServer) -> None:
    """The native providers' recordings, mutated: a response or a ProviderError, never a crash."""
    rng = random.Random(8005)
    current = [Reply()]
    http_server.handler = lambda request: current[0]
    outcomes: Counter[str] = Counter()
    for family, (name, suffix) in NATIVE.items():
        recorded = [
            (exchange.response_text, exchange.is_stream, exchange.response_headers)
            for path in sorted((TRAFFIC / family).glob("*.yaml"))
            for exchange in load(f"{family}/{path.name}")
            if exchange.status == 200
        ]
        model = toolfold.model(name, base_url=http_server.url + suffix, api_key="k" * 20, retry=0)
        agent = Agent(model=model, max_steps=2)
        for _ in range(BUDGET["native-recordings"] // len(NATIVE)):
            text, stream, headers = rng.choice(recorded)
            kind = {"content-type": headers.get("content-type", "application/json")}
            body = _mutated(rng, text, stream="event-stream" in kind["content-type"])
            current[0] = (
                Reply(headers=kind, chunks=[body]) if stream else Reply(headers=kind, body=body)
            )
            failed = _run_once(agent, stream)
            outcomes["response" if failed is None else type(failed).__name__] += 1
        model.close()
    _summary(outcomes, "native-recordings")
    assert outcomes["MalformedResponseError"] > 0
