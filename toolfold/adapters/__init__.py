"""adapters: provider codecs, stream parsers, the HTTP transport, model strings.

Importing this package registers every built-in provider prefix; the facade
imports it lazily, the first time a model string is resolved.
"""

# Importing each adapter registers its prefixes (anthropic; gemini, google; ollama;
# openai, groq, mistral, ...; openai-responses).
import toolfold.adapters.anthropic
import toolfold.adapters.gemini
import toolfold.adapters.ollama
import toolfold.adapters.openai_chat
import toolfold.adapters.openai_responses  # noqa: F401
from toolfold._public import publish as _publish
from toolfold.adapters._dialects import (
    CompiledTool,
    Dialect,
    SchemaRewrite,
    check_arguments,
    compile_tool,
    restore_arguments,
)
from toolfold.adapters._http._keys import RedactingFilter, Secret, redact_logs
from toolfold.adapters._http._retry import HttpLimits, RetryPolicy, Timeouts
from toolfold.adapters._http._sse import SSEDecoder, SSEEvent
from toolfold.adapters._http._transport import Transport

__all__ = [
    "CompiledTool",
    "Dialect",
    "HttpLimits",
    "RedactingFilter",
    "RetryPolicy",
    "SSEDecoder",
    "SSEEvent",
    "SchemaRewrite",
    "Secret",
    "Timeouts",
    "Transport",
    "check_arguments",
    "compile_tool",
    "redact_logs",
    "restore_arguments",
]

_publish(globals(), __all__, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
