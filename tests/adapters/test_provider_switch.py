"""One conversation, any provider: a run whose steps go to Anthropic, Anthropic, Gemini, then Responses.

The conversation holds an image, parallel-free tool calls, a tool error and
each provider's reasoning. Every request the run sends is checked against
that API's official description (Anthropic's ``CreateMessageParams``,
Gemini's ``GenerateContentRequest``, OpenAI's ``CreateResponse``); reasoning a
provider cannot take is left out of its request, and each drop is a note in
that request's report, never silent. The same final conversation also
compiles for Ollama and Chat Completions.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import attrs
import httpx
import jsonschema
import pytest
from anthropic_cassettes import spec_problems as anthropic_problems
from cassettes import SPECS
from openai_spec import _nullable
from openai_spec import problems as openai_problems
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import toolfold
from toolfold import ImagePart, Message
from toolfold.adapters.anthropic import is_beta
from toolfold.runtime import ModelRequest, ModelResponse, StreamEvent

PNG = b"\x89PNG\r\n\x1a\n" + b"0" * 16
WEATHER = {"Paris": "sunny, 22C", "Oslo": "snow, -3C"}


@toolfold.tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name.
    """
    if city not in WEATHER:
        raise ValueError(f"no weather station in {city}")
    return WEATHER[city]


def _anthropic_answer(number: int, city: str) -> dict[str, Any]:
    return {
        "id": f"msg_{number}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {
                "type": "thinking",
                "thinking": f"Step {number}: check {city}.",
                "signature": f"sig{number}",
            },
            {
                "type": "tool_use",
                "id": f"toolu_{number}",
                "name": "get_weather",
                "input": {"city": city},
            },
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 50, "output_tokens": 10},
    }


GEMINI_ANSWER = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "Checking Oslo.", "thought": True, "thoughtSignature": "Z3NpZw=="},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}},
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {"promptTokenCount": 80, "candidatesTokenCount": 9, "totalTokenCount": 89},
    "modelVersion": "gemini-2.5-flash",
}
RESPONSES_ANSWER = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "gpt-5-mini",
    "output": [
        {
            "type": "message",
            "id": "msg_r",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": "Paris sunny, Tokyo unknown, Oslo snowing.",
                    "annotations": [],
                }
            ],
        }
    ],
    "usage": {"input_tokens": 120, "output_tokens": 12, "total_tokens": 132},
}


@attrs.define
class Served:
    """A provider answering from a list over ``httpx.MockTransport``, keeping the bodies it got."""

    answers: list[dict[str, Any]]
    bodies: list[dict[str, Any]] = attrs.field(factory=list)
    paths: list[str] = attrs.field(factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        self.paths.append(request.url.path)
        return httpx.Response(200, json=self.answers[len(self.bodies) - 1])


@attrs.define
class Switching:
    """A `Model` that sends step N to ``models[N]``: the run switches provider between steps."""

    models: list[Any]
    requests: list[ModelRequest] = attrs.field(factory=list)

    @property
    def name(self) -> str:
        return "switching:" + ",".join(m.name for m in self.models)

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        response: ModelResponse = self.models[len(self.requests) - 1].request_sync(request)
        return response

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise NotImplementedError

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        raise NotImplementedError


@functools.cache
def _gemini_validator() -> jsonschema.protocols.Validator:
    document = json.loads(
        (SPECS / "gemini-generativelanguage-v1beta-openapi.json").read_text(encoding="utf-8")
    )
    uri = "urn:gemini-openapi"
    registry: Registry = Registry().with_resource(
        uri, Resource(contents=_nullable(document), specification=DRAFT202012)
    )
    schema = {"$ref": f"{uri}#/components/schemas/GenerateContentRequest"}
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _any_of(node: Any) -> Any:
    if isinstance(node, dict):
        return {("anyOf" if k == "oneOf" else k): _any_of(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_any_of(v) for v in node]
    return node


@functools.cache
def _responses_validator() -> jsonschema.protocols.Validator:
    # The document's input-item unions overlap (a user message is both an
    # EasyInputMessage and an InputMessage), so under ``oneOf`` every message
    # is refused, recorded ones included; ``anyOf`` keeps every other check.
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    document = yaml.load((SPECS / "openai-openapi.yaml").read_text(encoding="utf-8"), Loader=loader)
    uri = "urn:openai-openapi-any-of"
    resource = Resource(contents=_any_of(_nullable(document)), specification=DRAFT202012)
    schema = {"$ref": f"{uri}#/components/schemas/CreateResponse"}
    return jsonschema.Draft202012Validator(schema, registry=Registry().with_resource(uri, resource))


def responses_problems(body: Any) -> list[str]:
    """Every error of ``body`` against ``CreateResponse`` (with its unions read as ``anyOf``)."""
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:200]}"
        for e in _responses_validator().iter_errors(body)
    ]


def test_the_responses_document_refuses_every_message_under_one_of() -> None:
    """Why `responses_problems` reads oneOf as anyOf: the plainest message matches two branches."""
    message = {
        "model": "m",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
    }
    assert openai_problems("CreateResponse", message) != []
    assert responses_problems(message) == []


def gemini_problems(body: Any, model: str) -> list[str]:
    """Every error of ``body`` against Gemini's ``GenerateContentRequest``.

    The document marks ``model`` required (the message's proto field); over REST
    it travels in the URL path instead, so it is put back from there first.
    """
    return [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message[:200]}"
        for e in _gemini_validator().iter_errors({"model": model, **body})
    ]


@pytest.fixture
def run() -> Iterator[tuple[Any, Switching, dict[str, Served]]]:
    """The four-step run, with the switching model and what each provider received."""
    served = {
        "anthropic": Served([_anthropic_answer(1, "Paris"), _anthropic_answer(2, "Tokyo")]),
        "gemini": Served([GEMINI_ANSWER]),
        "responses": Served([RESPONSES_ANSWER]),
    }
    clients = {k: httpx.Client(transport=httpx.MockTransport(v.handler)) for k, v in served.items()}
    claude = toolfold.model(
        "anthropic:claude-sonnet-4-5", api_key="a" * 24, http_client=clients["anthropic"]
    )
    gemini = toolfold.model(
        "gemini:gemini-2.5-flash", api_key="g" * 24, http_client=clients["gemini"]
    )
    gpt = toolfold.model(
        "openai-responses:gpt-5-mini", api_key="o" * 24, http_client=clients["responses"]
    )
    switching = Switching([claude, claude, gemini, gpt])
    prompt = Message.user("Weather in Paris, Tokyo and Oslo? Here is a map.", ImagePart(PNG))
    response = toolfold.generate_text(switching, [prompt], tools=[get_weather])
    yield response, switching, served
    for client in clients.values():
        client.close()


def test_the_run_switches_provider_and_finishes(run: Any) -> None:
    """Four steps on three APIs end with the Responses answer; the Tokyo call failed as a tool error."""
    response, switching, served = run
    assert response.text == "Paris sunny, Tokyo unknown, Oslo snowing."
    assert [len(s.bodies) for s in served.values()] == [2, 1, 1]
    results = [
        p for m in switching.requests[-1].messages for p in m.parts if p.kind == "tool_result"
    ]
    assert [(r.content, r.is_error) for r in results][:2] == [
        ("sunny, 22C", False),
        (results[1].content, True),
    ]
    assert "no weather station in Tokyo" in results[1].content


def test_every_request_is_valid_for_its_api(run: Any) -> None:
    """Each provider's requests validate against its official description."""
    _, _, served = run
    for body in served["anthropic"].bodies:
        assert anthropic_problems(body, beta=is_beta(body)) == []
    path = served["gemini"].paths[0]
    assert path == "/v1beta/models/gemini-2.5-flash:generateContent"
    model = path.removeprefix("/v1beta/").partition(":")[0]
    assert gemini_problems(served["gemini"].bodies[0], model) == []
    assert responses_problems(served["responses"].bodies[0]) == []


def test_anthropic_gets_its_thinking_back_and_the_image(run: Any) -> None:
    """Step 2's request carries step 1's signed thinking unchanged, and the user's image as an image block."""
    _, _, served = run
    second = served["anthropic"].bodies[1]["messages"]
    assert second[1]["content"][0] == {
        "type": "thinking",
        "thinking": "Step 1: check Paris.",
        "signature": "sig1",
    }
    assert second[0]["content"][1]["type"] == "image"


def test_the_tool_failure_goes_on_each_wire_in_its_native_form(run: Any) -> None:
    """Tokyo's failure is Gemini's ``functionResponse.response.error`` and a Responses ``function_call_output``; Anthropic's history flags it ``is_error``."""
    response, switching, served = run
    gemini_results = [
        p["functionResponse"]
        for c in served["gemini"].bodies[0]["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert [(r["name"], set(r["response"])) for r in gemini_results] == [
        ("get_weather", {"output"}),
        ("get_weather", {"error"}),
    ]
    assert "no weather station in Tokyo" in gemini_results[1]["response"]["error"]
    assert gemini_results[0]["response"]["output"] == "sunny, 22C"
    outputs = [
        i for i in served["responses"].bodies[0]["input"] if i.get("type") == "function_call_output"
    ]
    calls = [i for i in served["responses"].bodies[0]["input"] if i.get("type") == "function_call"]
    assert [o["call_id"] for o in outputs] == [c["call_id"] for c in calls]
    assert len(outputs) == 3
    assert outputs[0]["output"] == "sunny, 22C"
    assert "no weather station in Tokyo" in outputs[1]["output"]
    assert outputs[2]["output"] == "snow, -3C"
    request = attrs.evolve(switching.requests[-1], messages=response.messages)
    claude = switching.models[0]
    results = [
        b
        for m in claude.body(request)["messages"]
        for b in (m["content"] if isinstance(m["content"], list) else [])
        if b["type"] == "tool_result"
    ]
    assert [b.get("is_error", False) for b in results] == [False, True, False]


def _notes(model: Any, request: ModelRequest) -> tuple[str, ...]:
    notes: tuple[str, ...] = model.prepare(request).report.notes
    return notes


def test_reasoning_other_providers_cannot_take_is_dropped_visibly(run: Any) -> None:
    """Gemini's request has no Claude thinking and says so; Responses' drops both, noted per message."""
    _, switching, served = run
    gemini_body = json.dumps(served["gemini"].bodies[0])
    assert "sig1" not in gemini_body
    assert "Step 1: check Paris." not in gemini_body
    gemini_notes = _notes(switching.models[2], switching.requests[2])
    assert len([n for n in gemini_notes if "anthropic" in n]) == 2
    responses_body = json.dumps(served["responses"].bodies[0])
    assert "sig1" not in responses_body
    assert "Z3NpZw==" not in responses_body
    responses_notes = _notes(switching.models[3], switching.requests[3])
    assert any("anthropic" in n for n in responses_notes)
    assert any("gemini" in n for n in responses_notes)
    anthropic_notes = _notes(switching.models[0], switching.requests[3])
    assert any("gemini" in n for n in anthropic_notes)


@pytest.mark.parametrize(
    ("make", "check"),
    [
        (lambda: toolfold.model("ollama:qwen3", base_url="http://127.0.0.1:9"), None),
        (
            lambda: toolfold.model("openai:gpt-4o-mini", api_key="o" * 24),
            lambda body: openai_problems("CreateChatCompletionRequest", body),
        ),
        (
            lambda: toolfold.model("anthropic:claude-sonnet-4-5", api_key="a" * 24),
            lambda body: anthropic_problems(body, beta=is_beta(body)),
        ),
    ],
    ids=["ollama", "openai-chat", "anthropic"],
)
def test_the_whole_conversation_compiles_for_other_providers(
    run: Any, make: Callable[[], Any], check: Callable[[Any], list[str]] | None
) -> None:
    """The final four-provider conversation (answer included) encodes for Ollama, Chat Completions and Anthropic."""
    response, switching, _ = run
    request = attrs.evolve(switching.requests[-1], messages=response.messages)
    model = make()
    body = model.body(request)
    assert body
    if check is not None:
        assert check(body) == []
    model.close()


def test_ollama_leaves_out_every_providers_reasoning_and_says_so(run: Any) -> None:
    """The final conversation for Ollama carries no reasoning; its report notes each Claude and Gemini turn."""
    response, switching, _ = run
    request = attrs.evolve(switching.requests[-1], messages=response.messages)
    model = toolfold.model("ollama:qwen3", base_url="http://127.0.0.1:9")
    prepared = model.prepare(request)
    model.close()
    sent = json.dumps(prepared.body)
    for secret in ("sig1", "sig2", "Z3NpZw==", "Step 1: check Paris.", "Checking Oslo."):
        assert secret not in sent
    assert all("thinking" not in m for m in prepared.body["messages"])
    turns = [i for i, m in enumerate(response.messages) if m.role == "assistant"][:3]
    assert prepared.report.notes == tuple(
        f"messages[{i}]: reasoning from {who} left out: it was written for another provider"
        for i, who in zip(turns, ["anthropic", "anthropic", "gemini"], strict=True)
    )


_TARGETS = {
    "openai:gpt-4o": ("openai", "messages"),
    "mistral:mistral-large-latest": ("mistral", "messages"),
    "openai-responses:gpt-4o": ("the Responses API", "input"),
    "anthropic:claude-sonnet-4-5": ("Anthropic", "messages"),
    "ollama:qwen3": ("Ollama", "messages"),
}


def _prepared(spec: str, *parts: Any) -> Any:
    model = toolfold.model(spec, api_key="k" * 20, base_url="http://127.0.0.1:9/v1")
    try:
        conversation = (Message.user("go"), Message("assistant", parts), Message.user("more"))
        return model.prepare(ModelRequest(conversation))
    finally:
        getattr(model, "close", lambda: None)()


@pytest.mark.parametrize("spec", list(_TARGETS))
def test_another_providers_answer_media_is_dropped_with_a_note(spec: str) -> None:
    """A provider-made image (its marker after it) another API cannot take back is dropped and noted."""
    from toolfold import ReasoningPart, TextPart

    target, key = _TARGETS[spec]
    prepared = _prepared(spec, TextPart("here"), ImagePart(PNG), ReasoningPart("", "SIG", "gemini"))
    assert prepared.report.notes == (
        f"messages[1]: image from gemini left out: {target} takes no image in an assistant turn",
    )
    assert "SIG" not in json.dumps(prepared.body[key])


@pytest.mark.parametrize("spec", [s for s in _TARGETS if not s.startswith("openai:")])
def test_another_providers_audio_answer_is_dropped_with_its_transcript_kept(spec: str) -> None:
    """A Chat audio answer sent elsewhere: the transcript goes, the audio is dropped and noted."""
    from toolfold import FilePart, ReasoningPart, TextPart

    marker = ReasoningPart("", None, "openai", {"audio": {"id": "audio_1", "expires_at": 1}})
    wav = FilePart(b"RIFF\x00\x00\x00\x00WAVE", media_type="audio/wav")
    prepared = _prepared(spec, TextPart("hello"), wav, marker)
    key = _TARGETS[spec][1]
    assert "hello" in json.dumps(prepared.body[key])
    assert "audio_1" not in json.dumps(prepared.body[key])
    (note,) = prepared.report.notes
    assert note.startswith("messages[1]: audio ")
    assert note.endswith("(its transcript is sent)")


@pytest.mark.parametrize("spec", list(_TARGETS))
def test_media_a_user_put_in_an_assistant_message_is_still_refused(spec: str) -> None:
    """An image in an assistant message with no provider's marker after it is refused, not dropped."""
    from toolfold import ModelConfigError, TextPart

    with pytest.raises(ModelConfigError, match="image"):
        _prepared(spec, TextPart("here"), ImagePart(PNG))


@pytest.mark.parametrize("spec", list(_TARGETS))
@pytest.mark.parametrize("provider_data", [{"type": "redacted_thinking"}, {}])
def test_an_image_before_anthropic_thinking_is_refused_not_dropped(
    spec: str, provider_data: dict[str, Any]
) -> None:
    """Anthropic's redacted or empty signed thinking after a user's image is no media marker."""
    from toolfold import ModelConfigError, ReasoningPart, TextPart

    thinking = ReasoningPart("", "SIG", "anthropic", provider_data)
    with pytest.raises(ModelConfigError, match="image"):
        _prepared(spec, ImagePart(PNG), thinking, TextPart("answer"))


@pytest.mark.parametrize("spec", list(_TARGETS))
def test_a_chat_audio_id_after_an_image_is_no_marker(spec: str) -> None:
    """An audio id marks an audio file only: an image before one is refused, not dropped unsaid."""
    from toolfold import ModelConfigError, ReasoningPart, TextPart

    marker = ReasoningPart("", None, "openai", {"audio": {"id": "audio_1", "expires_at": 1}})
    with pytest.raises(ModelConfigError, match="image"):
        _prepared(spec, TextPart("t"), ImagePart(PNG), marker)


@pytest.mark.parametrize("spec", ["openai:gpt-4o", "mistral:mistral-large-latest"])
def test_a_responses_reasoning_item_without_summary_is_noted_as_reasoning(spec: str) -> None:
    """A Responses reasoning item with no summary (store=true) is noted as reasoning, not by its ids."""
    from toolfold.adapters.openai_responses import parse_response

    answer = parse_response(
        {
            "id": "resp_1",
            "status": "completed",
            "output": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "hi", "annotations": []}],
                },
            ],
        },
        "openai-responses",
    )
    name = spec.partition(":")[0]
    model = toolfold.model(spec, api_key="k" * 20, base_url="http://127.0.0.1:9/v1")
    conversation = (Message.user("go"), answer.message, Message.user("more"))
    prepared = model.prepare(ModelRequest(conversation))
    assert prepared.report.notes == (
        f"messages[1]: reasoning left out: {name} takes no reasoning back",
    )
