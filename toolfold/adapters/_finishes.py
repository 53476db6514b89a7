"""The error for an answer a provider ended abnormally (`ProviderFinishError`).

A finish that says the answer failed (OpenRouter ``finish_reason: "error"``,
Gemini's ``MALFORMED_FUNCTION_CALL``) or is not over (Anthropic's
``pause_turn``) leaves partial or empty text: read as an answer, the run
finished ``stop`` as if the model had answered. Each adapter raises this from
its whole-body parser and its stream decoder alike, so both modes agree.
"""

from __future__ import annotations

from toolfold._errors import ProviderFinishError
from toolfold.runtime.core._messages import Usage

__all__ = ["abnormal_finish"]


def abnormal_finish(
    provider: str,
    raw: str,
    said: str | None,
    *,
    body: str = "",
    why: str = "",
    usage: Usage | None = None,
) -> ProviderFinishError:
    """The error for an answer ``provider`` ended with finish reason ``raw``.

    Args:
        provider: The provider's name.
        raw: The provider's own finish reason.
        said: What the provider said of it (an error message, a ``finishMessage``).
        body: The body or stream event (key-free), for the error's ``body``.
        why: What that finish means, when the provider said nothing.
        usage: The usage the provider reported for the answer (billed: a
            run's state counts it), or None.
    """
    detail = said or why or "the provider said nothing more"
    return ProviderFinishError(
        f"{provider} ended its answer with finish reason {raw!r}: {detail}",
        provider=provider,
        status_code=200,
        body=body[:5000],
        provider_message=said or None,
        code=raw,
        finish_reason=raw,
        usage=usage,
    )
