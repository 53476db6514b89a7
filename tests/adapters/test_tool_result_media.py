"""Tool results with images and files on each provider's wire, checked against the published specs."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from anthropic_cassettes import spec_problems
from cassettes import load
from openai_spec import problems as openai_problems
from test_native_request_specs import gemini_problems
from test_native_request_specs import problems as responses_problems

from toolfold.adapters.anthropic import build_body as anthropic_body
from toolfold.adapters.anthropic import is_beta
from toolfold.adapters.gemini import GeminiModel
from toolfold.adapters.ollama import build_body as ollama_body
from toolfold.adapters.openai_chat import PROVIDERS
from toolfold.adapters.openai_chat import build_body as chat_body
from toolfold.adapters.openai_responses import OpenAIResponsesModel
from toolfold.runtime import (
    FilePart,
    ImagePart,
    Message,
    ModelRequest,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolResultPart,
)
from toolfold.runtime.core._messages import describe_content, describe_media

PNG = b"\x89PNG\r\n\x1a\n-a-tiny-png"
PDF = b"%PDF-1.4 tiny"
B64_PNG = base64.b64encode(PNG).decode()
B64_PDF = base64.b64encode(PDF).decode()
CHART = ToolDefinition("chart", "Draw a chart.", {"type": "object", "properties": {}})
PARTS = (
    TextPart("Sales by month:"),
    ImagePart(PNG, media_type="image/png"),
    FilePart(b"# Notes\nall fine", media_type="text/markdown", filename="file:///README.md"),
    FilePart(PDF, media_type="application/pdf", filename="file:///report.pdf"),
    ImagePart(b"<svg/>", media_type="image/svg+xml"),
)
RESULT = ToolResultPart("call_1", "chart", describe_content(PARTS), parts=PARTS)
PLAIN = ToolResultPart("call_2", "chart", "no chart today")
CONVERSATION = (
    Message.user("Show me sales"),
    Message.assistant(
        "", [ToolCallPart("call_1", "chart", "{}", {}), ToolCallPart("call_2", "chart", "{}", {})]
    ),
    Message.tool(RESULT, PLAIN),
)
REQUEST = ModelRequest(CONVERSATION, (CHART,))


def test_a_result_with_parts_round_trips_through_json() -> None:
    """The parts of a tool result survive the state's JSON round trip (bytes as base64)."""
    from toolfold.runtime.core._serialize import from_json, to_json

    assert from_json(to_json(CONVERSATION[2]), Message) == CONVERSATION[2]


def test_anthropic_puts_images_and_documents_in_the_tool_result() -> None:
    """tool_result content is text, image and document blocks; text files inline, an SVG described."""
    body = anthropic_body(REQUEST, "claude-sonnet-4-5")
    result, plain = body["messages"][2]["content"]
    assert plain == {"type": "tool_result", "tool_use_id": "call_2", "content": "no chart today"}
    assert result["content"] == [
        {"type": "text", "text": "Sales by month:"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64_PNG}},
        {"type": "text", "text": "[file file:///README.md: text/markdown]\n# Notes\nall fine"},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": B64_PDF},
            "title": "file:///report.pdf",
        },
        {"type": "text", "text": "[image: image/svg+xml, 6 bytes]"},
    ]
    assert spec_problems(body, beta=is_beta(body)) == []


def test_responses_sends_an_output_list_of_input_items() -> None:
    """function_call_output.output is input_text / input_image / input_file items."""
    body = OpenAIResponsesModel("gpt-4o", api_key="k" * 20).body(REQUEST)
    outputs = [i for i in body["input"] if i.get("type") == "function_call_output"]
    assert outputs[1]["output"] == "no chart today"
    kinds = [item["type"] for item in outputs[0]["output"]]
    assert kinds == ["input_text", "input_image", "input_text", "input_file", "input_text"]
    assert outputs[0]["output"][1]["image_url"] == f"data:image/png;base64,{B64_PNG}"
    assert outputs[0]["output"][3]["filename"] == "file:///report.pdf"
    assert responses_problems("CreateResponse", body) == []


def test_responses_describes_a_file_it_cannot_take_in_a_tool_output() -> None:
    """An audio file goes as its description, not the input_file OpenAI refused with HTTP 400."""
    audio = FilePart(
        url="https://download.samplelib.com/mp3/sample-3s.mp3", media_type="audio/mpeg"
    )
    pdf = FilePart(url="https://example.com/report.pdf", media_type="application/pdf")
    refused = load("openai-responses/error-400-after-tool-result.yaml")[1]
    assert refused.status == 400
    assert refused.request_json["input"][-1]["output"] == [
        {"type": "input_file", "file_url": audio.url}
    ]
    result = ToolResultPart("call_1", "chart", describe_content((audio, pdf)), parts=(audio, pdf))
    conversation = (*CONVERSATION[:2], Message.tool(result, PLAIN))
    body = OpenAIResponsesModel("gpt-5-mini", api_key="k" * 20).body(
        ModelRequest(conversation, (CHART,))
    )
    (output, _) = [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    assert output == [
        {"type": "input_text", "text": describe_media(audio)},
        {"type": "input_file", "file_url": pdf.url},
    ]
    assert responses_problems("CreateResponse", body) == []


def test_gemini_sends_media_as_function_response_parts() -> None:
    """functionResponse.response holds the text; images and PDFs go as functionResponse.parts."""
    body = GeminiModel("gemini-3-flash-preview", api_key="k" * 20).body(REQUEST)
    response = body["contents"][2]["parts"][0]["functionResponse"]
    assert response["response"]["output"].startswith("Sales by month:\n[image: image/png")
    assert "# Notes\nall fine" in response["response"]["output"]
    assert response["parts"] == [
        {"inlineData": {"mimeType": "image/png", "data": B64_PNG}},
        {"inlineData": {"mimeType": "application/pdf", "data": B64_PDF}},
    ]
    assert "parts" not in body["contents"][2]["parts"][1]["functionResponse"]
    assert gemini_problems({"model": "models/gemini-3-flash-preview", **body}) == []


@pytest.mark.parametrize("provider", ["openai", "groq", "openrouter", "openai-compatible"])
def test_chat_completions_adds_a_user_message_after_the_tool_messages(provider: str) -> None:
    """A tool message takes text only: the text goes there, the image and PDF in one user message after."""
    body = chat_body(REQUEST, "gpt-4o-mini", PROVIDERS[provider])
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user"]
    tool = body["messages"][2]
    assert "[image: image/png" in tool["content"]
    assert "# Notes\nall fine" in tool["content"]
    attached: list[dict[str, Any]] = body["messages"][4]["content"]
    assert [p["type"] for p in attached] == ["text", "image_url", "file"]
    assert "call_1" in attached[0]["text"]
    assert attached[1]["image_url"]["url"] == f"data:image/png;base64,{B64_PNG}"
    assert attached[2]["file"]["file_data"] == f"data:application/pdf;base64,{B64_PDF}"
    assert openai_problems("CreateChatCompletionRequest", body) == []


def test_chat_completions_keeps_split_tool_messages_together() -> None:
    """Results split over two tool messages stay adjacent; the attachments follow them both."""
    split = (*CONVERSATION[:2], Message.tool(RESULT), Message.tool(PLAIN), Message.user("thanks"))
    body = chat_body(ModelRequest(split, (CHART,)), "gpt-4o-mini", PROVIDERS["openai"])
    assert [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "user",
        "user",
    ]
    assert body["messages"][5]["content"] == "thanks"


def test_ollama_adds_the_images_in_a_user_message_after_the_tool_messages() -> None:
    """Ollama's tool message takes text; the image follows in a user message's images."""
    body = ollama_body(REQUEST, "qwen3")
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user"]
    assert "[file file:///report.pdf: application/pdf" in body["messages"][2]["content"]
    assert body["messages"][4]["images"] == [B64_PNG]
    assert "call_1" in body["messages"][4]["content"]


def test_a_result_without_parts_is_sent_as_before() -> None:
    """A plain text result is the same string on every wire."""
    plain = ModelRequest(
        (
            Message.user("x"),
            Message.assistant("", [ToolCallPart("c", "chart", "{}", {})]),
            Message.tool(ToolResultPart("c", "chart", "ok")),
        ),
        (CHART,),
    )
    assert anthropic_body(plain, "m")["messages"][2]["content"][0]["content"] == "ok"
    assert chat_body(plain, "m", PROVIDERS["openai"])["messages"][2]["content"] == "ok"
    assert len(ollama_body(plain, "m")["messages"]) == 3
