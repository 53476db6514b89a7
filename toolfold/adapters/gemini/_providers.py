"""Gemini's quirks as tables, each with the source that justifies it.

Source tags are those of the shared ``providers.md`` §4 ([G1] function calling
guide, [G2] thought signatures, [G3] REST reference, [G4] python-genai types,
[G5] pydantic-ai's Gemini profile and model, [G6] troubleshooting/rate limits).
"""

from __future__ import annotations

from collections.abc import Mapping

from toolfold.runtime.core._request import FinishReason

#: The model-string prefixes served by this adapter (``google`` is an alias).
PREFIXES = ("gemini", "google")
BASE_URL = "https://generativelanguage.googleapis.com"
API_VERSION = "v1beta"
#: Tried in order; the key travels in the ``x-goog-api-key`` header, never the URL [G4 _api_client.py].
API_KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
KEY_HEADER = "x-goog-api-key"

# Models before the 2.5 generation take only the OpenAPI ``parameters`` form and
# no VALIDATED mode [G5 profiles/google.py]; the recordings agree: gemini-2.0-flash
# is sent ``parameters``, gemini-2.5/3 ``parameters_json_schema``.
OPENAPI_ONLY_PREFIXES = ("gemini-1", "gemini-2.0", "gemini-pro", "gemini-exp")

# Gemini 3 rejects a model turn whose first functionCall has no thoughtSignature;
# this documented placeholder is accepted for history made elsewhere [G2, G5].
SKIP_SIGNATURE = "skip_thought_signature_validator"
SIGNATURE_REQUIRED_PREFIXES = ("gemini-3",)

# There is no tool-specific finish reason: a tool turn ends with STOP and is
# recognised by its functionCall parts [G4 FinishReason]. Every value of the
# REST reference's Candidate.finishReason enum is listed [G3]; a newer one is
# "other". "error": the answer is no answer (`FAILED_FINISHES` says why).
FINISH_REASONS: Mapping[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
    "TOO_MANY_TOOL_CALLS": "error",
    "MISSING_THOUGHT_SIGNATURE": "error",
    "LANGUAGE": "other",
    "OTHER": "other",
    "FINISH_REASON_UNSPECIFIED": "other",
    # Image generation ended for a miscellaneous issue, or made no image it
    # was expected to: whatever came is not known to be the whole answer.
    "IMAGE_OTHER": "other",
    "NO_IMAGE": "other",
}

# What an "error" finish means, for its `ProviderFinishError` [G3 FinishReason]:
# any function call the answer carries must not run.
FAILED_FINISHES: Mapping[str, str] = {
    "MALFORMED_FUNCTION_CALL": "the model's function call could not be used",
    "UNEXPECTED_TOOL_CALL": "the model's function call could not be used",
    "TOO_MANY_TOOL_CALLS": "the model's function call could not be used",
    "MISSING_THOUGHT_SIGNATURE": (
        "the request lacks a thought signature of an earlier model turn: Gemini wants "
        "each one back on its part (see 'Thought signatures' in docs/gemini.md)"
    ),
}

# Neutral settings -> GenerationConfig fields [G3 GenerationConfig]; other
# settings go to the body as given (``safetySettings``, ``cachedContent``...).
GENERATION_SETTINGS: Mapping[str, str] = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "max_tokens": "maxOutputTokens",
    "stop": "stopSequences",
    "seed": "seed",
    "presence_penalty": "presencePenalty",
    "frequency_penalty": "frequencyPenalty",
    "candidate_count": "candidateCount",
}

#: Other providers' reasoning settings, which ``GenerateContentRequest`` has no field for
#: (Gemini answers 400 "Unknown name"): refused before the request, naming Gemini's own,
#: ``generationConfig.thinkingConfig`` [gemini-generativelanguage-v1beta-openapi.json
#: ThinkingConfig: ``thinkingBudget``, ``thinkingLevel``, ``includeThoughts``].
REFUSED_SETTINGS: Mapping[str, str] = dict.fromkeys(
    ("thinking", "reasoning_effort"),
    "the setting 'generation_config' (generation_config={'thinking_config': "
    "{'thinking_budget': 2048}}; Gemini 3: {'thinking_level': 'high'})",
)

#: The error ``reason`` that means a bad key, which Gemini sends as HTTP 400
#: INVALID_ARGUMENT (error-400-invalid-key cassette).
BAD_KEY_REASONS = frozenset({"API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED"})


def takes_json_schema(model_name: str) -> bool:
    """Whether the model takes ``parametersJsonSchema`` (else the OpenAPI ``parameters``)."""
    return not model_name.removeprefix("models/").startswith(OPENAPI_ONLY_PREFIXES)


def needs_signature(model_name: str) -> bool:
    """Whether the model refuses a function-call turn without a thought signature.

    Named as the Gemini API names it (``gemini-3-pro``, ``models/gemini-3-pro``) or as
    Vertex AI's OpenAI-compatible endpoint does (``google/gemini-3-pro``).
    """
    bare = model_name.removeprefix("models/").removeprefix("google/")
    return bare.startswith(SIGNATURE_REQUIRED_PREFIXES)
