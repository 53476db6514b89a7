"""Google Gemini's native ``generateContent`` API.

Importing this package registers the model-string prefixes ``gemini`` and
``google`` (``"gemini:gemini-2.5-flash"``).
"""

from toolfold.adapters._json_array import JSONArrayDecoder
from toolfold.adapters.gemini._errors import parse_error, refine
from toolfold.adapters.gemini._model import GeminiModel, make_factory
from toolfold.adapters.gemini._providers import PREFIXES
from toolfold.adapters.gemini._request import build_body, encode_messages
from toolfold.adapters.gemini._response import parse_response, parse_usage
from toolfold.adapters.gemini._stream import (
    DecoderState,
    decode_chunk,
    decode_end,
)
from toolfold.runtime._model import register_provider

for _prefix in PREFIXES:
    register_provider(_prefix, make_factory(_prefix))

__all__ = [
    "DecoderState",
    "GeminiModel",
    "JSONArrayDecoder",
    "build_body",
    "decode_chunk",
    "decode_end",
    "encode_messages",
    "parse_error",
    "parse_response",
    "parse_usage",
    "refine",
]
