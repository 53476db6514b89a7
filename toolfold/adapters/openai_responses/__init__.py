"""OpenAI's Responses API (``POST /v1/responses``).

Importing this package registers the model-string prefix ``openai-responses``
(``"openai-responses:gpt-5-mini"``).
"""

from toolfold.adapters.openai_responses._model import OpenAIResponsesModel, responses_model
from toolfold.adapters.openai_responses._providers import PREFIX
from toolfold.adapters.openai_responses._request import build_body, encode_input, reasoning_item
from toolfold.adapters.openai_responses._response import parse_response, parse_usage
from toolfold.adapters.openai_responses._stream import DecoderState, decode_end, decode_event
from toolfold.runtime._model import register_provider

register_provider(PREFIX, responses_model)

__all__ = [
    "DecoderState",
    "OpenAIResponsesModel",
    "build_body",
    "decode_end",
    "decode_event",
    "encode_input",
    "parse_response",
    "parse_usage",
    "reasoning_item",
]
