"""OpenAI Responses quirks as tables, each with the source that justifies it.

Source tags are those of the shared ``providers.md`` §1-2 ([O1] function
calling guide, [O2] structured outputs, [O5] openai-python ``types/responses``,
[O12] the Responses ``FunctionTool.strict`` reference).
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from toolfold.runtime.core._request import FinishReason

PREFIX = "openai-responses"
#: Same key and base URL as ``openai:`` (the Chat Completions adapter).
BASE_URL = "https://api.openai.com/v1"
API_KEY_ENV = ("OPENAI_API_KEY",)
#: The API root used when no ``base_url`` is given, if set (a gateway's), as
#: openai-python's client reads it for every API (``openai:`` too).
BASE_URL_ENV = "OPENAI_BASE_URL"
PATH = "responses"

#: The ``provider`` of the reasoning parts this API makes (and takes back).
REASONING_PROVIDER = "openai-responses"

# Reasoning models return their reasoning as encrypted items only when asked;
# without them a conversation cannot carry reasoning between requests unless it
# is stored server-side (``store``, which an item sent back by its id alone relies
# on; with ``store=False`` such an item is dropped, see `_request.encode_input`)
# [O5 response_includable.py].
REASONING_MODEL_PREFIXES = ("o1", "o3", "o4", "gpt-5", "codex")
#: How a fine-tuned model's name begins: ``ft:<base model>:<org>::<id>``.
FINE_TUNED = "ft:"
ENCRYPTED_REASONING = "reasoning.encrypted_content"

# ``incomplete_details.reason`` [O5 response.py IncompleteDetails].
INCOMPLETE_REASONS: Mapping[str, FinishReason] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}

# The file types ``input_file`` takes in a tool output: OpenAI refused an audio
# file there with "The file type you uploaded is not supported. Please try again
# with a pdf" (error-400-after-tool-result, 2026). Text files go as text anyway;
# any other file goes as its description (see `toolfold.adapters._results`).
RESULT_FILE_TYPES = frozenset({"application/pdf"})

# Neutral settings the API spells differently [openai-openapi.yaml CreateResponse].
RENAMES: Mapping[str, str] = {"max_tokens": "max_output_tokens"}

#: Neutral settings ``CreateResponse`` has no field for [openai-openapi.yaml]
#: (Chat Completions' ``stop``, ``seed``, penalties..., ``reasoning_effort``,
#: ``top_k``, which Anthropic, Gemini and Ollama take, and Anthropic's
#: ``stop_sequences`` and ``thinking``): OpenAI answers 400 for an unknown parameter, so they are
#: refused before the request, naming the setting (and `INSTEAD`'s equivalent).
#: ``response_format`` is ``text.format`` here, which an `OutputSpec` writes.
UNSUPPORTED_SETTINGS = frozenset(
    {
        "stop",
        "stop_sequences",
        "thinking",
        "reasoning_effort",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "n",
        "response_format",
        "top_k",
    }
)

#: What to give instead of an `UNSUPPORTED_SETTINGS` one that has an equivalent in
#: ``CreateResponse`` (``reasoning``: a ``Reasoning`` object, its ``effort`` a
#: ``ReasoningEffort`` [openai-openapi.yaml]). ``stop`` and ``stop_sequences`` have
#: none: ``CreateResponse`` takes no stop sequence.
INSTEAD: Mapping[str, str] = {
    "thinking": "the setting 'reasoning' (reasoning={'effort': 'low'}: 'low', 'medium', "
    "'high'...; reasoning models)",
    "reasoning_effort": "the setting 'reasoning' (reasoning={'effort': 'high'}; reasoning models)",
}

#: The least ``max_output_tokens`` ``CreateResponse`` takes (``minimum: 16``
#: [openai-openapi.yaml]): a smaller ``max_tokens`` is refused before the request.
MIN_OUTPUT_TOKENS = 16

#: The host of OpenAI's own API. Only there are `UNSUPPORTED_SETTINGS` refused:
#: a Responses-compatible server (vLLM, a gateway) given as ``base_url`` may
#: define more fields, so its settings go as given.
OPENAI_HOST = "api.openai.com"
_REGIONAL = "." + OPENAI_HOST


def is_reasoning_model(model_name: str) -> bool:
    """Whether the model reasons (so its encrypted reasoning is asked for): a name
    starting with one of `REASONING_MODEL_PREFIXES`, in any case, or a fine-tune of
    one (``ft:o4-mini-2025-04-16:org::id``)."""
    name = model_name.lower()
    return name.removeprefix(FINE_TUNED).startswith(REASONING_MODEL_PREFIXES)


def is_openai(base_url: str) -> bool:
    """Whether ``base_url`` is OpenAI's own API (whose fields `CreateResponse` lists):
    `OPENAI_HOST`, or a regional host of it (``eu.api.openai.com``, ``us.api.openai.com``:
    OpenAI's data-residency endpoints of the same API)."""
    host = (urlsplit(base_url).hostname or "").removesuffix(".")  # (the DNS root: same host)
    return host == OPENAI_HOST or host.endswith(_REGIONAL)
