"""The OpenAI-compatible family: one codec, one row of switches per provider.

Every quirk is a field here with the source that justifies it (see
``docs/providers.md`` §1 and §6 of the shared docs, and the recorded traffic in
``fixtures/provider-traffic``). The codec reads these fields; it never tests a
provider's name.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

ToolChoiceWord = str  # what the wire calls "must call some tool"


@attrs.frozen
class ChatProvider:
    """How one OpenAI-compatible provider differs from OpenAI itself.

    Attributes:
        name: The model-string prefix (``"groq"`` in ``"groq:llama-3.3-70b"``).
        base_url: The API root (``.../v1``); None when the user must give one.
        api_key_env: Environment variables tried in order for the key.
        base_url_env: The environment variable that gives the API root when
            no ``base_url`` is given, if set (a gateway's), as the provider's
            official SDK reads it: ``OPENAI_BASE_URL`` (openai-python's).
        key_required: Refuse to start without a key (hosted APIs); local
            servers (vLLM, llama.cpp, LM Studio, Ollama) need none.
        required_word: The ``tool_choice`` value for "call some tool".
        named_tool_choice: The provider accepts ``{"type":"function",...}``;
            otherwise a named choice is sent as ``required_word`` with only
            that tool listed.
        none_drops_tools: ``tool_choice="none"`` is sent by omitting the tools.
        id_rule: ``"mistral9"`` when call ids sent back must be 9 alphanumerics.
        stream_usage_option: Send ``stream_options.include_usage``.
        max_tokens_key: The body key for the neutral ``max_tokens`` setting.
        renames: Other neutral setting names the provider spells differently.
        reasoning_out: The assistant-message field that carries reasoning back
            on tool turns, or None when reasoning is not sent back.
        reasoning_details: The provider answers with ``reasoning_details`` (an
            array of reasoning blocks, some encrypted: an upstream's signatures)
            and wants them back unchanged on the assistant message (OpenRouter).
        thought_signatures: The provider is Gemini's OpenAI-compatible endpoint:
            a call's ``extra_content`` (``google.thought_signature``) goes back
            with it, a native Gemini call's signature as one.
        keeps_extra_content: A call's ``extra_content`` goes back as it came
            (any ``openai-compatible`` server: Gemini 3 behind a gateway or
            Vertex AI's OpenAI endpoint refuses a call without its signature).
            A named provider is sent none (Mistral refuses the key).
        signature_placeholder: Each assistant turn's first call that has no
            thought signature (history from another provider) is sent with
            Google's placeholder, ``skip_thought_signature_validator``: Gemini 3
            refuses such a turn (`GEMINI_3`).
        json_schema_output: ``response_format`` ``json_schema`` is supported;
            otherwise ``json_object`` plus the schema in a system message.
        dialect: The schema dialect tools compile to (see `compile_tool`).
        parallel_default: ``parallel_tool_calls`` sent when the request leaves
            it unset (None: send nothing, the provider's default applies).
        files: How files travel in user messages: ``"openai"`` (``file`` /
            ``input_audio`` parts, inline only) or ``"mistral"``
            (``document_url`` with a URL or data URL, bare ``input_audio``).
        auto_strict: A tool that leaves ``strict`` unset is sent strict when
            its schema allows it; elsewhere strict mode is used only when the
            tool asks for it (``strict=True``).
        thinking_in_total: ``total_tokens`` counts hidden thinking that
            ``completion_tokens`` leaves out (Gemini's OpenAI endpoint): the
            gap is reported as reasoning output tokens.
        assistant_after_tool: The text of an assistant message sent between a
            tool message and a user message right after it, for a provider
            that refuses that order (None: sent as it is).
    """

    name: str
    base_url: str | None
    api_key_env: tuple[str, ...] = ()
    key_required: bool = True
    required_word: ToolChoiceWord = "required"
    named_tool_choice: bool = True
    none_drops_tools: bool = False
    id_rule: str | None = None
    stream_usage_option: bool = True
    max_tokens_key: str = "max_tokens"
    renames: Mapping[str, str] = attrs.field(factory=dict)
    reasoning_out: str | None = None
    reasoning_details: bool = False
    thought_signatures: bool = False
    keeps_extra_content: bool = False
    signature_placeholder: bool = False
    json_schema_output: bool = True
    dialect: str = "openai-chat"
    files: str = "openai"
    parallel_default: bool | None = None
    auto_strict: bool = False
    thinking_in_total: bool = False
    assistant_after_tool: str | None = None
    base_url_env: str | None = None


#: Neutral settings ``CreateChatCompletionRequest`` has no field for [openai-openapi.yaml]:
#: ``top_k``, which Anthropic, Gemini and Ollama take, and Anthropic's ``stop_sequences``
#: and ``thinking``. OpenAI answers 400 ("Unrecognized request argument supplied") for an
#: unknown parameter, so on OpenAI's own host they are refused before the request, naming
#: the setting; a compatible server (vLLM takes ``top_k``) gets them as given. The
#: Responses adapter refuses ``top_k`` the same way.
OPENAI_UNSUPPORTED_SETTINGS = frozenset({"top_k", "stop_sequences", "thinking"})

#: What to give instead of an `OPENAI_UNSUPPORTED_SETTINGS` one that has an equivalent
#: in ``CreateChatCompletionRequest`` [openai-openapi.yaml ``stop``, ``ReasoningEffort``].
OPENAI_INSTEAD = {
    "stop_sequences": "the setting 'stop' (a string or a list of up to 4 strings)",
    "thinking": "the setting 'reasoning_effort' ('low', 'medium', 'high'...; reasoning models)",
}

#: The most sequences ``stop`` may hold for OpenAI (``StopConfiguration``: a string, or an
#: array of 1 to 4 strings [openai-openapi.yaml]); OpenAI answers 400 for more. Refused on
#: OpenAI's own host only: a compatible server (vLLM, Groq...) may take more.
OPENAI_MAX_STOP = 4

#: The most tools a Chat Completions request may offer OpenAI: ``tools``, "A list of tools
#: the model may call. ... A max of 128 functions are supported." [openai-openapi.yaml
#: ``CreateChatCompletionRequest``]; more is answered 400 ("Invalid 'tools': array too
#: long", ``array_above_max_length``). Refused on OpenAI's own host only: a compatible
#: server (vLLM, a gateway) may take more. (``CreateResponse`` states no limit, so the
#: Responses adapter sends what it is given.)
OPENAI_MAX_TOOLS = 128

# Reasoning text arrives under either name: ``reasoning_content`` (DeepSeek,
# older vLLM, Qwen servers) or ``reasoning`` (Groq, OpenRouter, newer vLLM,
# Hugging Face router); see the groq and deepseek cassettes.
REASONING_FIELDS = ("reasoning_content", "reasoning")

#: Where a `ReasoningPart` keeps OpenRouter's ``reasoning_details`` array (its
#: ``provider_data`` key, the wire's name), sent back as it came.
REASONING_DETAILS = "reasoning_details"

#: Every key of a message or delta that carries reasoning (most carry none: one set test).
REASONING_KEYS = frozenset((*REASONING_FIELDS, REASONING_DETAILS))

PROVIDERS: dict[str, ChatProvider] = {
    # OpenAI: reasoning models reject ``max_tokens`` and accept
    # ``max_completion_tokens`` on every model [O4 completion_create_params.py].
    "openai": ChatProvider(
        "openai",
        "https://api.openai.com/v1",
        ("OPENAI_API_KEY",),
        max_tokens_key="max_completion_tokens",
        auto_strict=True,  # strict mode guarantees schema-valid arguments [O2]
        base_url_env="OPENAI_BASE_URL",  # [O4 _client.py: read when base_url is None]
    ),
    # Groq: OpenAI shape; tool_use_failed errors and ``x_groq.usage`` in
    # streams are handled by the shared codec [C1, C2].
    "groq": ChatProvider("groq", "https://api.groq.com/openai/v1", ("GROQ_API_KEY",)),
    # Mistral: "any" means required; "none" with tools garbles output, so the
    # tools are dropped; ids must be 9 alphanumerics; unknown body keys are
    # refused (``additionalProperties: false``, so no stream_options) and the
    # seed is ``random_seed`` [C3, C4, mistral-openapi.json ChatCompletionRequest].
    # A user message right after a tool message is refused: 400 "Unexpected role
    # 'user' after role 'tool'" (invalid_request_message_order, code 3230, recorded
    # in zed-industries/zed#37021 and avante-corp/avante.nvim#2695); an assistant
    # message goes between, as pydantic-ai's models/mistral.py sends ("OK"). A
    # tool's images travel in such a user message (see `_tool_messages`).
    "mistral": ChatProvider(
        "mistral",
        "https://api.mistral.ai/v1",
        ("MISTRAL_API_KEY",),
        required_word="any",
        none_drops_tools=True,
        id_rule="mistral9",
        stream_usage_option=False,
        renames={"seed": "random_seed"},
        files="mistral",  # DocumentURLChunk, AudioChunk [mistral-openapi.json ContentChunk]
        assistant_after_tool="OK",
    ),
    # DeepSeek: thinking must go back as ``reasoning_content`` on tool turns;
    # ``response_format`` only knows ``json_object`` [C6, C7].
    "deepseek": ChatProvider(
        "deepseek",
        "https://api.deepseek.com",
        ("DEEPSEEK_API_KEY",),
        reasoning_out="reasoning_content",
        json_schema_output=False,
        dialect="deepseek",  # strict mode accepts a narrower keyword set [C6]
    ),
    # OpenRouter: passes parameters to the upstream; usage always sent [C8]. Reasoning
    # comes as ``reasoning`` text and ``reasoning_details`` blocks, which must go back
    # unchanged on the assistant message (openrouter.ai/docs "Preserving reasoning
    # blocks": Gemini 3 behind it refuses a tool turn without its signature).
    "openrouter": ChatProvider(
        "openrouter",
        "https://openrouter.ai/api/v1",
        ("OPENROUTER_API_KEY",),
        reasoning_details=True,
    ),
    # Any server speaking /v1/chat/completions (vLLM, llama.cpp, LM Studio,
    # Ollama's /v1): the user gives ``base_url``; keys are optional [C10-C13].
    "openai-compatible": ChatProvider(
        "openai-compatible",
        None,
        ("OPENAI_COMPATIBLE_API_KEY",),
        key_required=False,
        keeps_extra_content=True,
    ),
}

# Presets for ``openai-compatible`` servers whose tool_choice support is narrower:
# llama.cpp has no named choice (``common_chat_tool_choice`` is auto/none/required)
# [C12]; vLLM and LM Studio take the OpenAI shape [C10, C13].
SERVER_PRESETS: dict[str, ChatProvider] = {
    # llama.cpp also makes one call per turn unless asked; ask, like OpenAI's default [C12].
    "llama.cpp": attrs.evolve(
        PROVIDERS["openai-compatible"], named_tool_choice=False, parallel_default=True
    ),
    "vllm": PROVIDERS["openai-compatible"],
    "lmstudio": PROVIDERS["openai-compatible"],
    "ollama": PROVIDERS["openai-compatible"],
    # Chosen by itself for a base URL on generativelanguage.googleapis.com.
    # Its calls carry ``extra_content.google.thought_signature``, sent back with them.
    "gemini": attrs.evolve(
        PROVIDERS["openai-compatible"], thinking_in_total=True, thought_signatures=True
    ),
}

#: The ``gemini`` preset for a model that needs a thought signature on each tool turn
#: (Gemini 3: `toolfold.adapters.gemini._providers.needs_signature`), as the native adapter.
GEMINI_3 = attrs.evolve(SERVER_PRESETS["gemini"], signature_placeholder=True)

#: The host of Gemini's OpenAI-compatible endpoint (``server="gemini"`` by default there).
GEMINI_HOST = "generativelanguage.googleapis.com"


def provider_for(name: str) -> ChatProvider:
    """The family row for a prefix (``KeyError`` names the known ones)."""
    try:
        return PROVIDERS[name]
    except KeyError:
        known = ", ".join(sorted(PROVIDERS))
        raise KeyError(f"unknown OpenAI-compatible provider {name!r}; known: {known}") from None


def register_all() -> None:
    """Register every family prefix with the runtime's provider registry."""
    from toolfold.adapters.openai_chat._model import make_factory
    from toolfold.runtime._model import register_provider

    for prefix in PROVIDERS:
        register_provider(prefix, make_factory(prefix))
