"""Anthropic Messages (``POST /v1/messages``): request, response, stream, errors.

Importing this package registers the model-string prefix ``anthropic``.
"""

from toolfold.adapters.anthropic._errors import error_from_response, parse_error, stream_error
from toolfold.adapters.anthropic._model import AnthropicModel, anthropic_model
from toolfold.adapters.anthropic._provider import (
    API_VERSION,
    DEFAULT_MAX_TOKENS,
    STOP_REASONS,
    STRICT_BETA,
)
from toolfold.adapters.anthropic._request import (
    anthropic_id,
    build_body,
    encode_messages,
    is_beta,
    prepare,
)
from toolfold.adapters.anthropic._response import parse_response, parse_usage
from toolfold.adapters.anthropic._stream import DecoderState, decode_end, decode_event
from toolfold.runtime._model import register_provider

register_provider("anthropic", anthropic_model)

__all__ = [
    "API_VERSION",
    "DEFAULT_MAX_TOKENS",
    "STOP_REASONS",
    "STRICT_BETA",
    "AnthropicModel",
    "DecoderState",
    "anthropic_id",
    "build_body",
    "decode_end",
    "decode_event",
    "encode_messages",
    "error_from_response",
    "is_beta",
    "parse_error",
    "parse_response",
    "prepare",
    "parse_usage",
    "stream_error",
]
