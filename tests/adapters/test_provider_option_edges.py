"""Provider options' edges: data: URLs in tool results, stream=False, include, errors' words.

A ``data:`` URL is decoded once, before any codec encodes a message, so a
tool's screenshot given as one is sent and described as if given as
``data=``; a ``stream=False`` setting (harmless, and in states saved before it
was refused) is dropped; a Responses ``include`` setting adds to the
encrypted reasoning toolfold asks for; errors name what was wrong without a
URL's password or a wrong suggestion. Requests are only prepared, except the
resume, which runs against a local fake server.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold import ModelConfigError, RunState
from toolfold.adapters import _codec as codec
from toolfold.adapters._codec import url_excerpt
from toolfold.adapters.openai_chat import _request as chat_request
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
from toolfold.runtime._model import _OPTION_ALIASES, CONNECTION_OPTIONS, _factory, _keywords
from toolfold.runtime.core._messages import describe_media

SHOT = ToolDefinition("shot", "Screenshot.", {"type": "object", "properties": {}})
SPECS = (
    "openai:gpt-4o-mini",
    "mistral:mistral-large-latest",
    "anthropic:claude-sonnet-4-5",
    "gemini:gemini-2.5-flash",
    "openai-responses:gpt-5-mini",
    "ollama:qwen3",
)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
WAV = b"RIFF" + bytes(range(256)) * 10


def data_url(media_type: str, data: bytes) -> str:
    """``data`` as a base64 ``data:`` URL."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def tool_loop(*parts: ImagePart | FilePart | TextPart) -> tuple[Message, ...]:
    """A conversation whose tool call returned ``parts``."""
    call = ToolCallPart("call_1", "shot", "{}")
    result = ToolResultPart("call_1", "shot", "screenshot", parts=parts)
    return (Message.user("Look"), Message("assistant", [call]), Message("tool", [result]))


def sent(model: Any, messages: tuple[Message, ...], **settings: Any) -> str:
    """The JSON text of the body ``model`` would send for ``messages``."""
    request = ModelRequest(messages, (SHOT,), settings=settings)
    return json.dumps(model.prepare(request).body)


# --- 1. a data: URL is decoded once, before encoding, tool results included ----


@pytest.mark.parametrize("spec", SPECS)
def test_a_data_url_in_a_tool_result_is_sent_as_if_given_as_data(made: Any, spec: str) -> None:
    """A tool's image and audio given as data: URLs give the very body data= gives (no base64 in a description)."""
    model = made(spec)
    by_url = tool_loop(
        ImagePart(url=data_url("image/png", PNG)), FilePart(url=data_url("audio/wav", WAV))
    )
    by_data = tool_loop(
        ImagePart(data=PNG, media_type="image/png"), FilePart(data=WAV, media_type="audio/wav")
    )
    text = sent(model, by_url)
    assert text == sent(model, by_data)
    assert "data: URL" not in text  # described (where described) by its size, as data= is
    assert text.count(base64.b64encode(PNG).decode()) <= 1  # sent once, or only described


def test_ollama_attaches_a_tool_image_given_as_a_data_url(made: Any) -> None:
    """Ollama: a tool's image given as a data: URL goes in the images of the message after the results."""
    body = made("ollama:qwen3").prepare(
        ModelRequest(tool_loop(ImagePart(url=data_url("image/png", PNG))), (SHOT,))
    )
    images = [m["images"] for m in body.body["messages"] if "images" in m]
    assert images == [[base64.b64encode(PNG).decode()]]


@pytest.mark.parametrize("spec", SPECS)
def test_a_data_url_in_a_user_message_is_sent_as_if_given_as_data(made: Any, spec: str) -> None:
    """A user's image given as a data: URL gives the very body data= gives, on every provider."""
    model = made(spec)
    by_url = (Message.user("Look", ImagePart(url=data_url("image/png", PNG))),)
    by_data = (Message.user("Look", ImagePart(data=PNG, media_type="image/png")),)
    assert sent(model, by_url) == sent(model, by_data)


def test_a_description_never_quotes_a_data_url() -> None:
    """describe_media gives a data: URL's length, not the URL (which would put all its bytes in the text)."""
    url = data_url("image/png", PNG)
    described = describe_media(ImagePart(url=url))
    assert described == f"[image: image/png, a data: URL of {len(url):,} chars]"
    link = describe_media(ImagePart(url="https://example.com/a.png"))
    assert link == "[image: image/png, https://example.com/a.png]"


@pytest.mark.parametrize("spec", SPECS)
def test_a_tool_data_url_that_cannot_be_decoded_is_described_not_sent(made: Any, spec: str) -> None:
    """A tool's undecodable data: URL is described without its data, not sent nor failing the request."""
    bad = "data:image/png;base64," + "@" * 5000
    text = sent(made(spec), tool_loop(ImagePart(url=bad)))
    assert "@@@@" not in text
    assert "a data: URL of 5,022 chars" in text


def test_inline_media_looks_at_a_messages_parts_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resent message's parts are looked at the first time only; a data URL is still decoded every time."""
    looked: list[object] = []
    carries = codec._part_needs_inline
    monkeypatch.setattr(
        codec, "_part_needs_inline", lambda part: looked.append(part) or carries(part)
    )
    linked = Message.user("Look", ImagePart(url="https://example.com/a.png"))
    conversation = (linked, Message.assistant("A cat."))
    assert codec.inline_media(conversation) is conversation
    assert len(looked) == 1
    assert codec.inline_media(conversation) is conversation
    assert len(looked) == 1
    assert linked == Message.user("Look", ImagePart(url="https://example.com/a.png"))
    given = Message.user("Look", ImagePart(url=data_url("image/png", PNG)))
    for _ in range(2):
        inlined = codec.inline_media((*conversation, given))
        assert inlined[2].parts[1] == ImagePart(data=PNG, media_type="image/png")


# --- 1b. media types, local paths, empty and missing data ---------------------


@pytest.mark.parametrize("spec", SPECS)
def test_a_media_type_in_upper_case_is_sent_lower_cased(made: Any, spec: str) -> None:
    """media_type='image/PNG' is image/png, in a user message and a tool's result, on every provider."""
    model = made(spec)
    upper, lower = ImagePart(PNG, media_type="image/PNG"), ImagePart(PNG, media_type="image/png")
    assert sent(model, (Message.user("Look", upper),)) == sent(
        model, (Message.user("Look", lower),)
    )
    assert sent(model, tool_loop(upper)) == sent(model, tool_loop(lower))


LOCAL = ["/tmp/chart.png", "file:///tmp/chart.png", "cat.png", "C:\\charts\\chart.png"]


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("url", LOCAL)
def test_a_local_path_as_url_is_refused_in_a_user_message(made: Any, spec: str, url: str) -> None:
    """A url that is a local path or a file: URL is a ModelConfigError naming the part, on every provider."""
    where = r"messages\[0\] \(user\) part 1: the ImagePart's url"
    with pytest.raises(ModelConfigError, match=f"{where} .* a provider cannot read"):
        sent(made(spec), (Message.user("Look", ImagePart(url=url)),))


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("url", LOCAL)
def test_a_local_path_as_url_in_a_tool_result_is_described(made: Any, spec: str, url: str) -> None:
    """A tool's image whose url is a local path is only described, never sent as a URL."""
    text = sent(made(spec), tool_loop(TextPart("chart:"), ImagePart(url=url)))
    described = json.dumps(f"[image: image/png, {url}]")[1:-1]
    assert described in text
    assert text.count(json.dumps(url)[1:-1]) == text.count(described)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("part", [ImagePart(b"", media_type="image/png"), FilePart(b"")])
def test_empty_data_is_refused_in_a_user_message(made: Any, spec: str, part: Any) -> None:
    """An image or file of 0 bytes is a ModelConfigError on every provider, not sent as empty base64."""
    with pytest.raises(ModelConfigError, match=r"part 1: the \w+Part's data is empty"):
        sent(made(spec), (Message.user("Look", part),))


@pytest.mark.parametrize("spec", SPECS)
def test_empty_data_in_a_tool_result_is_described(made: Any, spec: str) -> None:
    """A tool's empty image is described (0 bytes), not sent as empty base64."""
    text = sent(made(spec), tool_loop(TextPart("chart:"), ImagePart(b"", media_type="image/png")))
    assert "[image: image/png, 0 bytes]" in text
    assert "base64," not in text
    assert '"data": ""' not in text


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("part", [ImagePart(), FilePart()])
def test_a_part_with_neither_data_nor_url(made: Any, spec: str, part: Any) -> None:
    """No data and no url: refused as such in a user message, described as such in a tool's result."""
    with pytest.raises(ModelConfigError, match="has neither data nor a url"):
        sent(made(spec), (Message.user("Look", part),))
    text = sent(made(spec), tool_loop(TextPart("chart:"), part))
    assert f"[{part.kind}: {part.media_type}, no data or url]" in text


# --- 8. data: URL parsing ------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS)
def test_a_data_url_is_read_as_browsers_read_it(made: Any, spec: str) -> None:
    """An upper-case media type is lower-cased, and base64 wrapped on lines is decoded."""
    model = made(spec)
    encoded = base64.encodebytes(PNG).decode()  # MIME: 76-character lines
    assert "\n" in encoded
    url = f"data:IMAGE/PNG;base64,{encoded}"
    by_data = (Message.user("Look", ImagePart(data=PNG, media_type="image/png")),)
    assert sent(model, (Message.user("Look", ImagePart(url=url)),)) == sent(model, by_data)


@pytest.mark.parametrize("space", [" ", "\t", "\n", "\r\n", "\f", "\v"])
def test_a_data_urls_base64_skips_whitespace_and_refuses_the_rest(space: str) -> None:
    """Base64 with any ASCII whitespace (as bytes.split() takes it) decodes; a stray other byte is refused."""
    encoded = base64.b64encode(PNG).decode()
    spaced = space.join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    decoded = codec.inline_media((Message.user(ImagePart(url=f"data:image/png;base64,{spaced}")),))
    assert decoded[0].parts[0] == ImagePart(data=PNG, media_type="image/png")
    stray = (Message.user(ImagePart(url=f"data:image/png;base64,{spaced}%00")),)
    with pytest.raises(ModelConfigError, match="cannot be decoded"):
        codec.inline_media(stray)


@pytest.mark.parametrize("spec", SPECS)
def test_a_user_data_url_that_cannot_be_decoded_is_refused_everywhere(made: Any, spec: str) -> None:
    """Bad base64 in a user's data: URL is a ModelConfigError on every provider (Chat and Responses included)."""
    bad = (Message.user("Look", ImagePart(url="data:image/png;base64,@@@@")),)
    with pytest.raises(ModelConfigError, match="cannot be decoded"):
        sent(made(spec), bad)


# --- 2. stream=False ------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("streamed", [False, True])
def test_a_stream_false_setting_is_dropped_not_refused(
    made: Any, spec: str, streamed: bool
) -> None:
    """``stream=False`` as a setting is taken and the body streams as the call asks (True still refused)."""
    model = made(spec)
    request = ModelRequest((Message.user("hi"),), (), settings={"stream": False})
    plain = ModelRequest((Message.user("hi"),), ())
    body = model.prepare(request, stream=streamed).body
    assert body == model.prepare(plain, stream=streamed).body
    with pytest.raises(ModelConfigError, match="'stream'"):
        model.prepare(ModelRequest((Message.user("hi"),), (), settings={"stream": True}))


@toolfold.tool(requires_approval=True)
def pay() -> str:
    """Pay."""
    return "paid"


def _chat_reply(message: dict[str, Any], finish: str) -> Reply:
    """A Chat Completions answer holding ``message``."""
    answer = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
    return Reply(json=answer)


def test_a_state_saved_with_stream_false_resumes(
    http_server: ScriptedServer, opened: list[Any]
) -> None:
    """A run suspended with the setting stream=False, saved and loaded, resumes to its answer."""
    call = {"id": "call_1", "type": "function", "function": {"name": "pay", "arguments": "{}"}}
    http_server.add(
        _chat_reply({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"),
        _chat_reply({"role": "assistant", "content": "Paid."}, "stop"),
    )
    model = toolfold.model("openai:gpt-4o-mini", api_key="k", base_url=f"{http_server.url}/v1")
    opened.append(model)
    first = toolfold.Agent(model, tools=[pay], settings={"stream": False}).run("pay")
    assert first.finish_reason == "approval_required"
    state = RunState.from_json(first.state.to_json())
    assert state.config.settings == {"stream": False}
    done = toolfold.resume(state, model=model, tools=[pay], approvals={"call_1": True})
    assert done.text == "Paid."
    bodies = [http_server.wait_request().json() for _ in range(2)]
    assert [body.get("stream") for body in bodies] == [None, None]


# --- 3. Responses include -------------------------------------------------------


def test_a_responses_include_setting_adds_to_the_encrypted_reasoning(made: Any) -> None:
    """Responses, reasoning model: include=[...] is sent with reasoning.encrypted_content added, [] with none."""
    model = made("openai-responses:gpt-5-mini")
    request = ModelRequest(
        (Message.user("hi"),), (), settings={"include": ["web_search_call.action.sources"]}
    )
    assert model.prepare(request).body["include"] == [
        "web_search_call.action.sources",
        "reasoning.encrypted_content",
    ]
    none = ModelRequest((Message.user("hi"),), (), settings={"include": []})
    assert model.prepare(none).body["include"] == []
    plain = ModelRequest((Message.user("hi"),), ())
    assert model.prepare(plain).body["include"] == ["reasoning.encrypted_content"]


# --- 4. Anthropic thinking budget -------------------------------------------------


@pytest.mark.parametrize("more", [{}, {"max_tokens": 5000}])
@pytest.mark.parametrize("budget", [float("inf"), float("nan")])
def test_an_anthropic_budget_that_is_no_number_is_a_config_error(
    made: Any, budget: float, more: dict[str, Any]
) -> None:
    """Anthropic: a thinking budget of inf or nan is a ModelConfigError naming budget_tokens, max_tokens given or not."""
    model = made("anthropic:claude-sonnet-4-5")
    thinking = {"type": "enabled", "budget_tokens": budget}
    request = ModelRequest((Message.user("hi"),), (), settings={"thinking": thinking, **more})
    with pytest.raises(ModelConfigError, match="budget_tokens"):
        model.prepare(request)


# --- 5. options given to toolfold.model ---------------------------------------------


@pytest.mark.parametrize(
    ("given", "meant"),
    [("base_ulr", "base_url"), ("max_retries", "retry"), ("timout", "timeout")],
)
def test_a_misspelt_model_option_is_told_its_name_not_sent_to_the_run(
    given: str, meant: str
) -> None:
    """``model(spec, base_ulr=...)`` suggests base_url=, and gives no advice to pass it to the run."""
    with pytest.raises(ModelConfigError) as caught:
        toolfold.model("openai:gpt-4o-mini", api_key="k", **{given: 1})
    message = str(caught.value)
    assert f"did you mean {meant}=?" in message
    assert "Agent(" not in message


@pytest.mark.parametrize(
    ("given", "header"), [("organization", "OpenAI-Organization"), ("project", "OpenAI-Project")]
)
@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "openai-responses:gpt-4o-mini"])
def test_the_openai_sdk_s_organization_is_pointed_at_its_header(
    spec: str, given: str, header: str
) -> None:
    """``model(spec, organization=...)`` points at headers={'OpenAI-Organization': ...}, not at
    ``Agent(model, organization=...)``, which would send it in the request body."""
    with pytest.raises(ModelConfigError) as caught:
        toolfold.model(spec, api_key="k", **{given: "org-1"})
    message = str(caught.value)
    assert f"headers={{{header!r}: ...}}" in message
    assert "Agent(" not in message
    assert "org-1" not in message


def test_settings_given_to_model_are_pointed_at_the_runs_settings() -> None:
    """``model(spec, settings=...)`` points at Agent(model, settings={...}), not at a setting named 'settings'."""
    with pytest.raises(ModelConfigError) as caught:
        toolfold.model("openai:gpt-4o-mini", api_key="k", settings={"temperature": 0})
    message = str(caught.value)
    assert "Agent(model, settings={...})" in message
    assert "'settings': " not in message


@pytest.mark.parametrize(
    ("spec", "given"),
    [
        ("anthropic:claude-x", "server"),
        ("anthropic:claude-x", "servr"),
        ("ollama:llama3", "provider"),
        ("gemini:gemini-2.5-flash", "server"),
        ("openai-responses:gpt-4o", "servr"),
    ],
)
def test_model_suggests_no_option_its_provider_refuses(spec: str, given: str) -> None:
    """model() never suggests the option refused, nor one the chosen provider's model does not take."""
    with pytest.raises(ModelConfigError) as caught:
        toolfold.model(spec, api_key="k", **{given: 1})
    assert "did you mean" not in str(caught.value)


def test_the_options_model_suggests_are_options_of_the_models() -> None:
    """Every option model() may suggest for a built-in provider is a keyword that provider's model takes."""
    assert set(_OPTION_ALIASES.values()) <= set(CONNECTION_OPTIONS)
    for prefix in ("anthropic", "ollama", "gemini", "openai", "groq", "openai-responses"):
        factory, _ = _factory(f"{prefix}:m")
        taken = _keywords(factory)
        assert taken is not None
        for option in set(CONNECTION_OPTIONS) & taken:
            said = _refusal(f"{prefix}:m", option)
            assert "is no option" not in said, (prefix, option)
            assert "keyword argument" not in said, (prefix, option)


def _refusal(spec: str, option: str) -> str:
    """What model(spec, option=<an object>) raises, or '' (a refused value is fine here)."""
    try:
        toolfold.model(spec, **{"api_key": "k", option: object()})
    except Exception as error:
        return str(error)
    return ""


# --- 7. a URL's password in an error ---------------------------------------------


@pytest.mark.parametrize("spec", ["ollama:qwen3", "openai:gpt-4o-mini"])
def test_a_refused_url_is_quoted_without_its_password(made: Any, spec: str) -> None:
    """A URL Ollama or Chat refuses is quoted with its user:password@'s password masked."""
    url = "https://alice:s3cr3tpass@files.example.com/a.pdf"
    part = ImagePart(url=url) if spec.startswith("ollama") else FilePart(url=url)
    with pytest.raises(ModelConfigError) as caught:
        sent(made(spec), (Message.user("x", part),))
    assert "s3cr3tpass" not in str(caught.value)
    assert "files.example.com/a.pdf" in str(caught.value)
    assert url_excerpt("https://h.example/a#frag") == "'https://h.example/a#...' (24 chars)"


def test_a_token_given_as_a_urls_user_is_masked_in_an_error() -> None:
    """url_excerpt masks the whole user:password@: a token as the user (https://ghp_...@host) is not shown."""
    shown = url_excerpt("https://ghp_t0ken1234567890@github.com/o/r/a.png")
    assert "ghp_" not in shown
    assert "github.com/o/r/a.png" in shown
    assert "alice" not in url_excerpt("https://alice:pw@files.example.com/a.pdf")


# --- 9. the Chat fast path and a tools setting ---------------------------------------


def test_the_chat_fast_path_leaves_a_tools_setting_to_build_body(
    made: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chat: with a tools setting the fast path gives up before building a body, and the body has both tools."""
    model = made("openai:gpt-4o-mini")
    search = {"type": "web_search_preview"}
    request = ModelRequest((Message.user("hi"),), (SHOT,), settings={"tools": [search]})

    def no_body(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the fast path built a body")

    with monkeypatch.context() as patched:
        patched.setattr(chat_request, "_body", no_body)
        assert chat_request._frame(request, "gpt-4o-mini", model.provider, False) is None
    tools = model.prepare(request).body["tools"]
    assert [t.get("function", t).get("name", t.get("type")) for t in tools] == [
        "shot",
        "web_search_preview",
    ]
