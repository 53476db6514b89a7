"""One conversation, any provider: a run moves between providers step by step over HTTP.

Two steps on Anthropic (with signed thinking), the third on Gemini, the fourth
on OpenAI Responses; the same run with Chat Completions' reasoning in place of
Anthropic's. Each request is checked against its API's spec, and the reasoning
a provider cannot take is dropped with a note in its request report (logged at
INFO on ``toolfold.adapters``), never silently.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import attrs
import pytest
from anthropic_cassettes import spec_problems as anthropic_problems
from fake_gemini_responses import FakeGemini, FakeResponses
from fake_native import FakeAnthropic
from fake_openai import Calls, FakeChat, Text
from openai_spec import problems as chat_problems
from scripted_http import Recorded, Reply, ScriptedServer
from test_native_request_specs import gemini_problems
from test_native_request_specs import problems as responses_problems

import toolfold
from toolfold import Tool, resume
from toolfold.runtime import ModelRequest, RunState

LOOKUP = Tool(
    "lookup",
    "Look a word up.",
    {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
)  # no function: each call comes back to the caller, who answers it on the next step


@attrs.define
class ThinkingChat(FakeChat):
    """Chat Completions answers that also carry ``reasoning_content`` (as DeepSeek, vLLM... do)."""

    def __call__(self, request: Recorded) -> Reply:
        reply = super().__call__(request)
        body = dict(reply.json)
        body["choices"][0]["message"]["reasoning_content"] = f"chat thinking {len(self.bodies)}"
        return attrs.evolve(reply, json=body)


class Router:
    """Sends each path to its fake: the first provider's, /v1beta/models/..., /v1/responses."""

    def __init__(self, first: Any, gemini: Any, responses: Any) -> None:
        self.fakes = {
            "/v1/chat/completions": first,
            "/v1/messages": first,
            "/v1beta/": gemini,
            "/v1/responses": responses,
        }

    def __call__(self, request: Recorded) -> Reply:
        for prefix, fake in self.fakes.items():
            if request.path.startswith(prefix):
                reply: Reply = fake(request)
                return reply
        raise AssertionError(request.path)


@pytest.mark.parametrize("first", ["anthropic", "openai"])
def test_two_steps_then_gemini_then_responses(
    first: str, http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Four steps on three APIs: each request valid for its API, foreign reasoning dropped visibly."""
    turns = (Calls((("lookup", {"word": "a"}),)), Calls((("lookup", {"word": "b"}),)))
    opener: Any = (
        FakeAnthropic(turns, thinking="Let me think about a.")
        if first == "anthropic"
        else ThinkingChat(turns)
    )
    gemini = FakeGemini((Calls((("lookup", {"word": "c"}),)),), foreign_turns=2)
    responses = FakeResponses((Text("a, b and c looked up."),))
    http_server.handler = Router(opener, gemini, responses)
    url = http_server.url
    first_model = (
        toolfold.model("anthropic:claude-sonnet-4-5", base_url=url, api_key="sk-ant-" + "a" * 20)
        if first == "anthropic"
        else toolfold.model("openai:gpt-4o-mini", base_url=f"{url}/v1", api_key="sk-" + "c" * 20)
    )
    models = [
        first_model,
        toolfold.model("gemini:gemini-3-flash-preview", base_url=url, api_key="AIza" + "g" * 20),
        toolfold.model(
            "openai-responses:gpt-5-mini", base_url=f"{url}/v1", api_key="sk-" + "r" * 20
        ),
    ]
    caplog.set_level(logging.INFO, logger="toolfold.adapters")
    try:
        step = toolfold.generate_text(models[0], "Look up a, b, c.", tools=[LOOKUP])
        for model in models:
            assert step.finish_reason == "tool_calls"
            answers = {c.id: f"meaning of {c.arguments['word']}" for c in step.tool_calls}
            state = RunState.from_json(step.state.to_json())  # any process could take the next step
            step = resume(state, model=model, tools=[LOOKUP], tool_results=answers)
    finally:
        for model in models:
            model.close()
    assert step.text == "a, b and c looked up."
    assert (len(opener.bodies), len(gemini.bodies), len(responses.bodies)) == (2, 1, 1)
    assert opener.problems == gemini.problems == responses.problems == []

    for body in opener.bodies:
        if first == "anthropic":
            assert anthropic_problems(body, beta=False) == []
        else:
            assert chat_problems("CreateChatCompletionRequest", body) == []
    (gemini_body,) = gemini.bodies
    assert gemini_problems({"model": "models/gemini-3-flash-preview", **gemini_body}) == []
    (responses_body,) = responses.bodies
    assert responses_problems("CreateResponse", responses_body) == []

    # Every call and result of the earlier steps reached the later providers, linked.
    results = [
        i["output"] for i in responses_body["input"] if i.get("type") == "function_call_output"
    ]
    assert results == ["meaning of a", "meaning of b", "meaning of c"]
    # The first provider's reasoning went nowhere it cannot be read, and each drop is reported.
    thought = "Let me think" if first == "anthropic" else "chat thinking"
    assert thought not in json.dumps(gemini_body) + json.dumps(responses_body)
    notes = [r.getMessage() for r in caplog.records if r.name == "toolfold.adapters"]
    gemini_notes = [n for n in notes if n.startswith("gemini:")]
    responses_notes = [n for n in notes if n.startswith("openai-responses:")]
    dropped = f"from {first} dropped"
    assert sum(dropped in n for n in gemini_notes) == 2
    assert sum("documented placeholder" in n for n in gemini_notes) == 2
    assert sum(dropped in n for n in responses_notes) == 2
    # The same report, asked for directly.
    report = models[2].prepare(ModelRequest(step.state.messages)).report
    assert report.provider == "openai-responses"
    assert len([n for n in report.notes if dropped in n]) == 2
