"""OpenAI Chat Completions and the compatible family (Groq, Mistral, DeepSeek, OpenRouter,
vLLM, llama.cpp, LM Studio, Ollama's ``/v1``): one codec, a table of quirks.

Importing this package registers the model-string prefixes ``openai``, ``groq``,
``mistral``, ``deepseek``, ``openrouter`` and ``openai-compatible``.
"""

from toolfold.adapters.openai_chat._errors import error_from_response, inband_error, parse_error
from toolfold.adapters.openai_chat._model import OpenAIChatModel
from toolfold.adapters.openai_chat._providers import (
    PROVIDERS,
    SERVER_PRESETS,
    ChatProvider,
    register_all,
)
from toolfold.adapters.openai_chat._request import build_body, encode_messages, mistral_id
from toolfold.adapters.openai_chat._response import parse_response, parse_usage
from toolfold.adapters.openai_chat._stream import DecoderState, decode_chunk, decode_end

register_all()

__all__ = [
    "PROVIDERS",
    "SERVER_PRESETS",
    "ChatProvider",
    "DecoderState",
    "OpenAIChatModel",
    "build_body",
    "decode_chunk",
    "decode_end",
    "encode_messages",
    "error_from_response",
    "inband_error",
    "mistral_id",
    "parse_error",
    "parse_response",
    "parse_usage",
]
