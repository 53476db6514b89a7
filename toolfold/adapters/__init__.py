"""adapters: provider codecs, stream parsers, the HTTP transport, model strings.

Importing this package registers every built-in provider prefix; the facade
imports it lazily, the first time a model string is resolved.
"""

import toolfold.adapters.openai_chat  # noqa: F401  (registers openai, groq, mistral, ...)
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

__all__: list[str] = [
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
