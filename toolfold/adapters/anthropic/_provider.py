"""Anthropic Messages: the constants and quirk tables of the API, each with its source.

Source tags are those of the shared ``docs/providers.md`` §3 (``[A1]`` tool use,
``[A4]`` strict tool use, ``[A6]`` the SDK's types, ``[A7]`` the SDK's client);
``spec`` is ``fixtures/specs/anthropic-openapi.json`` (Anthropic's own OpenAPI
document, ``info.version`` 195).
"""

from __future__ import annotations

from toolfold.runtime.core._request import FinishReason

#: The API root; the adapter adds ``/v1/messages`` [A1].
BASE_URL = "https://api.anthropic.com"
API_KEY_ENV = ("ANTHROPIC_API_KEY",)
#: The API root used when no ``base_url`` is given, if set (a gateway's), as the
#: SDK's client reads it [A7].
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
#: The ``anthropic-version`` header every request carries [A1].
API_VERSION = "2023-06-01"
#: ``max_tokens`` is required by the API [spec CreateMessageParams.required]; the
#: neutral ``max_tokens`` setting overrides this default.
DEFAULT_MAX_TOKENS = 4096

#: ``strict`` exists only on ``BetaTool`` in the spec (the plain ``Tool`` has
#: ``additionalProperties: false`` and no ``strict``), so a request with a strict
#: tool or a structured output goes to ``/v1/messages?beta=true`` with this beta
#: (recorded in stream-beta-parallel-2-calls-results-final.yaml; the spec's
#: ``anthropic-beta`` header is an open string list).
STRICT_BETA = "structured-outputs-2025-11-13"

#: Body fields only ``BetaCreateMessageParams`` has [spec]: a request with one
#: of them (or a strict tool) goes to the beta endpoint.
BETA_ONLY_FIELDS = frozenset(
    {"container", "context_management", "mcp_servers", "output_config", "output_format"}
)

#: ``stop_reason`` values [A6 stop_reason.py] -> neutral finish reasons.
STOP_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    # A server tool paused a long turn, to be sent back to continue: no answer, so the
    # codec raises `ProviderFinishError` for it (`_response.paused`); kept for the table.
    "pause_turn": "other",
}

#: Neutral settings the Messages API has no field for: ``CreateMessageParams``
#: has ``additionalProperties: false`` [spec], so they would be a 400; refusing
#: them before the request names the setting instead (and `INSTEAD`'s equivalent).
UNSUPPORTED_SETTINGS = frozenset(
    {
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "logit_bias",
        "n",
        "response_format",
        "reasoning_effort",
    }
)

#: What to give instead of an `UNSUPPORTED_SETTINGS` one that has an equivalent:
#: ``thinking`` (``CreateMessageParams``) or ``output_config.effort``, which only
#: ``BetaCreateMessageParams`` has [spec] (a request setting ``output_config`` goes to
#: the beta endpoint: `BETA_ONLY_FIELDS`).
INSTEAD = {
    "reasoning_effort": "the setting 'thinking' (thinking={'type': 'enabled', "
    "'budget_tokens': 2048}), or 'output_config' (output_config={'effort': 'high'})",
}

#: Neutral names the API spells differently [spec CreateMessageParams].
RENAMED_SETTINGS = {"stop": "stop_sequences"}

#: Media types an ``image`` block takes [spec Base64ImageSource.media_type].
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
