"""Settings named like a request field an adapter builds, and the provider options' edges.

A setting named like a field toolfold builds (``system``, ``tools``, ``text``,
``messages``, ``stream``...) is merged with what was built where a user adds to
it (server tools, cached system blocks, ``text.verbosity``) and refused, naming
it, where it would replace it. Also: a file without a name, ``data:`` URLs,
Anthropic's ``max_tokens``, OpenAI's regional hosts, options given to
``toolfold.model``. Every request here is only prepared: nothing is sent.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

import toolfold
from toolfold import ModelConfigError
from toolfold.runtime import FilePart, ImagePart, Message, ModelRequest, OutputSpec, ToolDefinition

WEATHER = ToolDefinition(
    "get_weather",
    "Weather.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
INSTRUCTIONS = "You are a travel agent."
MESSAGES = (Message.system(INSTRUCTIONS), Message.user("Weather in Paris?"))
OUTPUT = OutputSpec(
    "Out",
    {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
)
SPECS = (
    "openai:gpt-4o-mini",
    "anthropic:claude-sonnet-4-5",
    "gemini:gemini-2.5-flash",
    "openai-responses:gpt-5-mini",
    "ollama:qwen3",
)
PDF = b"%PDF-1.4 ..."
PNG = b"\x89PNG\r\n\x1a\n"


def body(model: Any, settings: dict[str, Any], **request: Any) -> dict[str, Any]:
    """The body ``model`` would send for the travel request with ``settings``."""
    messages = request.pop("messages", MESSAGES)
    tools = request.pop("tools", (WEATHER,))
    prepared = model.prepare(ModelRequest(messages, tools, settings=settings, **request))
    return dict(prepared.body)


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """The names (or types) of a body's tools, whatever the provider's shape."""
    names = []
    for tool in tools:
        if "functionDeclarations" in tool:
            names += [f["name"] for f in tool["functionDeclarations"]]
        elif "function" in tool:
            names.append(tool["function"]["name"])
        else:
            names.append(tool.get("name") or tool.get("type") or next(iter(tool)))
    return names


# --- 1. Responses: text settings merge with the output type's format --------


def test_a_responses_text_setting_keeps_the_output_schema(made: Any) -> None:
    """Responses: ``text={"verbosity": "low"}`` with an output type sends both the schema and verbosity."""
    sent = body(made("openai-responses:gpt-5-mini"), {"text": {"verbosity": "low"}}, output=OUTPUT)
    assert sent["text"]["verbosity"] == "low"
    assert sent["text"]["format"]["type"] == "json_schema"
    assert sent["text"]["format"]["name"] == "Out"


def test_a_responses_text_format_setting_with_an_output_type_is_refused(made: Any) -> None:
    """Responses: a ``text.format`` setting and an output type both set the format: refused, naming both."""
    model = made("openai-responses:gpt-5-mini")
    with pytest.raises(ModelConfigError, match=r"text=\{'format'.*output type"):
        body(model, {"text": {"format": {"type": "text"}}}, output=OUTPUT)
    alone = body(model, {"text": {"format": {"type": "text"}, "verbosity": "high"}})
    assert alone["text"] == {"format": {"type": "text"}, "verbosity": "high"}


# --- 2. settings named like a built field -----------------------------------


@pytest.mark.parametrize(
    ("spec", "extra", "name"),
    [
        (
            "anthropic:claude-sonnet-4-5",
            {"type": "web_search_20250305", "name": "web_search"},
            "web_search",
        ),
        ("gemini:gemini-2.5-flash", {"googleSearch": {}}, "googleSearch"),
        ("openai-responses:gpt-5-mini", {"type": "web_search"}, "web_search"),
        ("openai:gpt-4o-mini", {"type": "custom", "name": "grammar"}, "grammar"),
        ("ollama:qwen3", {"type": "function", "function": {"name": "extra"}}, "extra"),
    ],
)
def test_a_tools_setting_goes_after_the_function_tools(
    made: Any, spec: str, extra: dict[str, Any], name: str
) -> None:
    """A ``tools`` setting (a provider's built-in tool) is sent after the run's tools, which stay."""
    sent = body(made(spec), {"tools": [extra]})
    assert tool_names(sent["tools"]) == ["get_weather", name]


def test_an_anthropic_system_setting_goes_before_the_instructions(made: Any) -> None:
    """Anthropic: ``system`` blocks (with ``cache_control``) are sent first, the instructions after them."""
    cached = {"type": "text", "text": "Long context", "cache_control": {"type": "ephemeral"}}
    model = made("anthropic:claude-sonnet-4-5")
    assert body(model, {"system": [cached]})["system"] == [
        cached,
        {"type": "text", "text": INSTRUCTIONS},
    ]
    assert body(model, {"system": "Be brief."})["system"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": INSTRUCTIONS},
    ]
    alone = body(model, {"system": [cached]}, messages=MESSAGES[1:])
    assert alone["system"] == [cached]
    with pytest.raises(ModelConfigError, match="'system' must be"):
        body(model, {"system": 3})


@pytest.mark.parametrize("key", ["systemInstruction", "system_instruction"])
def test_a_gemini_system_instruction_setting_keeps_the_instructions(made: Any, key: str) -> None:
    """Gemini: a ``systemInstruction`` setting's parts come before the instructions, which stay."""
    sent = body(made("gemini:gemini-2.5-flash"), {key: {"parts": [{"text": "Answer in French."}]}})
    assert sent["systemInstruction"] == {
        "parts": [{"text": "Answer in French."}, {"text": INSTRUCTIONS}]
    }
    assert "system_instruction" not in sent


def test_a_gemini_tool_config_setting_merges_and_may_not_set_function_calling(
    made: Any,
) -> None:
    """Gemini: ``toolConfig`` merges with the built calling config; setting that config too is refused."""
    model = made("gemini:gemini-2.5-flash")
    retrieval = {"retrievalConfig": {"latLng": {"latitude": 1, "longitude": 2}}}
    sent = body(model, {"toolConfig": retrieval}, tool_choice="required")
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "ANY"}, **retrieval}
    with pytest.raises(ModelConfigError, match="functionCallingConfig"):
        body(
            model, {"tool_config": {"functionCallingConfig": {"mode": "NONE"}}}, tool_choice="auto"
        )


def test_an_anthropic_tool_choice_setting_cannot_skip_the_thinking_check(made: Any) -> None:
    """Anthropic: a forcing ``tool_choice`` setting with thinking on is refused, as the option is."""
    model = made("anthropic:claude-sonnet-4-5")
    thinking = {"type": "enabled", "budget_tokens": 2048}
    with pytest.raises(ModelConfigError, match="extended thinking"):
        body(model, {"tool_choice": {"type": "any"}, "thinking": thinking})
    with pytest.raises(ModelConfigError, match="both set"):
        body(model, {"tool_choice": {"type": "auto"}}, tool_choice="auto")
    assert body(model, {"tool_choice": {"type": "auto"}})["tool_choice"] == {"type": "auto"}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ("openai:gpt-4o-mini", "response_format"),
        ("anthropic:claude-sonnet-4-5", "output_format"),
        ("ollama:qwen3", "format"),
    ],
)
def test_an_output_field_setting_with_an_output_type_is_refused(
    made: Any, spec: str, field: str
) -> None:
    """The setting naming the field an output type fills is refused with one, and sent as given without."""
    model = made(spec)
    with pytest.raises(ModelConfigError, match=f"'{field}'.*output type"):
        body(model, {field: {"type": "json_object"}}, output=OUTPUT)
    assert body(model, {field: {"type": "json_object"}})[field] == {"type": "json_object"}


ANTHROPIC_FORMAT = {"type": "json_schema", "schema": {"type": "object"}}
#: The Anthropic output_format an output type of OUTPUT sends.
OUTPUT_FORMAT = {
    "type": "json_schema",
    "schema": {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "additionalProperties": False,
        "required": ["answer"],
    },
}


@pytest.mark.parametrize(
    ("settings", "output", "sent"),
    [
        (
            {"output_config": {"format": ANTHROPIC_FORMAT}},
            OUTPUT,
            {"output_format": OUTPUT_FORMAT, "output_config": {"format": ANTHROPIC_FORMAT}},
        ),
        (
            {"output_config": {"format": ANTHROPIC_FORMAT, "effort": "low"}},
            OUTPUT,
            {
                "output_format": OUTPUT_FORMAT,
                "output_config": {"format": ANTHROPIC_FORMAT, "effort": "low"},
            },
        ),
        (
            {"output_format": ANTHROPIC_FORMAT, "output_config": {"format": ANTHROPIC_FORMAT}},
            None,
            {"output_format": ANTHROPIC_FORMAT, "output_config": {"format": ANTHROPIC_FORMAT}},
        ),
        (
            {"output_config": {"format": ANTHROPIC_FORMAT}, "output_format": ANTHROPIC_FORMAT},
            None,
            {"output_config": {"format": ANTHROPIC_FORMAT}, "output_format": ANTHROPIC_FORMAT},
        ),
    ],
    ids=["with-output-type", "with-output-type-and-effort", "after-format", "before-format"],
)
def test_an_anthropic_output_config_format_goes_as_before(
    made: Any, settings: dict[str, Any], output: OutputSpec | None, sent: dict[str, Any]
) -> None:
    """Anthropic ``output_config={"format": ...}`` beside an output type or an ``output_format`` setting goes as c17b8818 sent it (both formats, no refusal), so runs saved with it resume."""
    model = made("anthropic:claude-sonnet-4-5")
    made_body = model.prepare(ModelRequest([Message.user("hi")], settings=settings, output=output))
    assert made_body.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hi"}],
        **sent,
    }
    assert list(made_body.body) == ["model", "max_tokens", "messages", *sent]


OWNED = {
    "openai": ("model", "messages"),
    "anthropic": ("model", "messages"),
    "gemini": ("model", "contents"),
    "openai-responses": ("model", "input"),
    "ollama": ("model", "messages"),
}


@pytest.mark.parametrize("spec", SPECS)
def test_a_setting_replacing_the_conversation_or_model_is_refused(made: Any, spec: str) -> None:
    """``model`` and the conversation's field (``messages``, ``contents``, ``input``) as settings are refused by name."""
    model = made(spec)
    for key in OWNED[spec.partition(":")[0]]:
        with pytest.raises(ModelConfigError, match=f"the setting '{key}' names a field"):
            body(model, {key: []})


# --- 4. a stream setting -----------------------------------------------------


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("stream", [False, True])
def test_a_stream_setting_is_refused_pointing_at_the_stream_api(
    made: Any, spec: str, stream: bool
) -> None:
    """``stream=True`` as a setting is refused before sending (a blocking call cannot read a stream)."""
    model = made(spec)
    request = ModelRequest(MESSAGES, (WEATHER,), settings={"stream": True})
    with pytest.raises(ModelConfigError, match=r"'stream'.*agent\.stream"):
        model.prepare(request, stream=stream)


# --- 3. a file without a name to OpenAI --------------------------------------


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "openai-responses:gpt-5-mini"])
def test_an_inline_file_without_a_name_gets_one_from_its_type(made: Any, spec: str) -> None:
    """OpenAI Chat and Responses: an inline file with no filename is sent as ``file.pdf`` (OpenAI wants one)."""
    model = made(spec)
    for part, name in (
        (FilePart(data=PDF, media_type="application/pdf"), "file.pdf"),
        (FilePart(data=PDF, media_type="application/x-odd"), "file"),
        (FilePart(data=PDF, media_type="application/pdf", filename="a.pdf"), "a.pdf"),
    ):
        sent = body(model, {}, messages=(Message.user("Read", part),), tools=())
        item = sent["messages" if spec.startswith("openai:") else "input"][0]["content"][1]
        assert item.get("file", item)["filename"] == name


# --- 7. data: URLs ------------------------------------------------------------


def test_a_data_url_is_sent_inline_to_every_provider(made: Any) -> None:
    """An image or PDF given as a ``data:`` URL is sent as inline data, never as a remote URL."""
    image = ImagePart(url="data:image/jpeg;base64," + base64.b64encode(PNG).decode())
    pdf = FilePart(url="data:application/pdf;base64," + base64.b64encode(PDF).decode())
    png64, pdf64 = base64.b64encode(PNG).decode(), base64.b64encode(PDF).decode()
    anthropic = body(
        made("anthropic:claude-sonnet-4-5"), {}, messages=(Message.user("x", image, pdf),)
    )
    blocks = anthropic["messages"][0]["content"]
    assert blocks[1]["source"] == {"type": "base64", "media_type": "image/jpeg", "data": png64}
    assert blocks[2]["source"] == {"type": "base64", "media_type": "application/pdf", "data": pdf64}
    gemini = body(made("gemini:gemini-2.5-flash"), {}, messages=(Message.user("x", image, pdf),))
    parts = gemini["contents"][0]["parts"]
    assert parts[1] == {"inlineData": {"mimeType": "image/jpeg", "data": png64}}
    assert parts[2] == {"inlineData": {"mimeType": "application/pdf", "data": pdf64}}
    responses = body(made("openai-responses:gpt-5-mini"), {}, messages=(Message.user("x", pdf),))
    assert (
        responses["input"][0]["content"][1]["file_data"] == f"data:application/pdf;base64,{pdf64}"
    )
    chat = body(made("openai:gpt-4o-mini"), {}, messages=(Message.user("x", pdf),))
    assert chat["messages"][0]["content"][1]["file"]["file_data"].endswith(pdf64)
    ollama = body(made("ollama:qwen3"), {}, messages=(Message.user("x", image),))
    assert ollama["messages"][0]["images"] == [png64]


def test_a_refused_url_is_quoted_short_and_without_its_query(made: Any) -> None:
    """An image URL Ollama refuses is quoted cut short, without a presigned URL's query string."""
    url = "https://bucket.example/" + "a" * 5000 + ".png?X-Amz-Signature=secret"
    with pytest.raises(ModelConfigError) as caught:
        body(made("ollama:qwen3"), {}, messages=(Message.user("x", ImagePart(url=url)),))
    assert len(str(caught.value)) < 400
    assert "secret" not in str(caught.value)
    bad = ImagePart(url="data:image/png;base64,***")
    with pytest.raises(ModelConfigError, match="cannot be decoded"):
        body(made("anthropic:claude-sonnet-4-5"), {}, messages=(Message.user("x", bad),))


# --- 5. Anthropic max_tokens ---------------------------------------------------


def test_anthropic_max_tokens_zero_is_refused_and_a_float_budget_raises_the_default(
    made: Any,
) -> None:
    """Anthropic: ``max_tokens=0`` is refused (minimum 1), and a 5000.0 thinking budget gets max_tokens above it."""
    model = made("anthropic:claude-sonnet-4-5")
    with pytest.raises(ModelConfigError, match=r"max_tokens=0.*at least 1"):
        body(model, {"max_tokens": 0})
    thinking = {"type": "enabled", "budget_tokens": 5000.0}
    assert body(model, {"thinking": thinking}, tools=())["max_tokens"] > 5000


# --- 6. settings given to toolfold.model --------------------------------------


@pytest.mark.parametrize("spec", SPECS)
def test_a_setting_given_to_model_is_a_config_error_naming_where_it_goes(spec: str) -> None:
    """``toolfold.model(spec, temperature=...)`` is a ModelConfigError pointing at Agent/generate_text."""
    with pytest.raises(ModelConfigError, match=r"'temperature'.*Agent\(model, temperature="):
        toolfold.model(spec, api_key="k", temperature=0.2)


# --- 8. OpenAI's regional hosts ---------------------------------------------


@pytest.mark.parametrize("host", ["eu.api.openai.com", "us.api.openai.com", "EU.API.OPENAI.COM"])
def test_openai_regional_hosts_get_the_early_checks(made: Any, host: str) -> None:
    """Responses: a regional OpenAI host refuses ``seed`` and a too small ``max_tokens`` before sending."""
    model = made("openai-responses:gpt-5-mini", base_url=f"https://{host}/v1")
    with pytest.raises(ModelConfigError, match="'seed'"):
        body(model, {"seed": 1})
    with pytest.raises(ModelConfigError, match="at least 16"):
        body(model, {"max_tokens": 8})
    other = made("openai-responses:m", base_url="https://api.openai.com.example/v1")
    assert body(other, {"seed": 1})["seed"] == 1


# --- 9. Gemini parallel_tool_calls=False without tools -------------------------


def test_gemini_takes_parallel_tool_calls_false_when_no_tools_are_offered(made: Any) -> None:
    """Gemini: ``parallel_tool_calls=False`` is refused only with tools (as it is sent only with tools)."""
    model = made("gemini:gemini-2.5-flash")
    assert "tools" not in body(model, {"parallel_tool_calls": False}, tools=())
    with pytest.raises(ModelConfigError, match="parallel_tool_calls"):
        body(model, {"parallel_tool_calls": False})
