"""Ollama's native API (``POST /api/chat``): request, response, NDJSON stream.

Importing this package registers the model-string prefix ``ollama``. (Ollama's
OpenAI-compatible ``/v1`` stays reachable as ``openai-compatible`` with
``server="ollama"``.)
"""

from toolfold.adapters.ollama._model import OllamaModel, ollama_model
from toolfold.adapters.ollama._provider import host_from_env
from toolfold.adapters.ollama._request import build_body, encode_messages, prepare
from toolfold.adapters.ollama._response import parse_response, parse_usage
from toolfold.adapters.ollama._stream import DecoderState, decode_end, decode_line
from toolfold.runtime._model import register_provider

register_provider("ollama", ollama_model)

__all__ = [
    "DecoderState",
    "OllamaModel",
    "build_body",
    "decode_end",
    "decode_line",
    "encode_messages",
    "host_from_env",
    "parse_response",
    "prepare",
    "parse_usage",
]
