"""toolfold: give LLMs tools and compose agents declaratively.

Everything a user imports comes from here. Provider adapters load lazily, the
first time a model string is resolved, so ``import toolfold`` stays cheap.
"""

from typing import TYPE_CHECKING, Any

from toolfold._errors import (
    ArgumentJSONError,
    ArgumentValidationError,
    AuthenticationError,
    BadRequestError,
    ConnectionError,
    InvalidEventError,
    InvalidTransitionError,
    ModelConfigError,
    NotFoundError,
    OutputValidationError,
    ProviderError,
    RateLimitError,
    RunError,
    SchemaCompileError,
    SerializationError,
    ServerError,
    StreamError,
    TimeoutError,
    ToolArgumentError,
    ToolDefinitionError,
    ToolExecutionError,
    ToolfoldError,
    ToolRetriesExceededError,
    ToolUseFailedError,
)
from toolfold.runtime import (
    Agent,
    Denied,
    FilePart,
    ImagePart,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ReasoningPart,
    Response,
    RunEndEvent,
    RunState,
    RunStream,
    Step,
    StepEndEvent,
    StepStartEvent,
    TextDelta,
    TextPart,
    ToolCallEvent,
    ToolCallPart,
    ToolResultEvent,
    ToolResultPart,
    Usage,
    agenerate_text,
    aresume,
    generate_text,
    model,
    resume,
    token_budget,
    tool_called,
)
from toolfold.runtime._model import set_adapter_loader
from toolfold.toolkit import (
    Field,
    RunContext,
    SchemaContext,
    Tool,
    ToolDefinitionWarning,
    UndocumentedParameterWarning,
    register_schema_rule,
    register_type_hooks,
    schema_for_type,
    tool,
)


def _load_adapters() -> None:
    import toolfold.adapters  # (adapters register their providers on import)
    import toolfold.local  # noqa: F401  (registers local:, above the adapters)


# Names served from toolfold.adapters on first access, so `import toolfold` stays light.
_LAZY = {
    "CompiledTool": "toolfold.adapters._dialects",
    "Dialect": "toolfold.adapters._dialects",
    "SchemaRewrite": "toolfold.adapters._dialects",
    "check_arguments": "toolfold.adapters._dialects",
    "compile_tool": "toolfold.adapters._dialects",
    "restore_arguments": "toolfold.adapters._dialects",
}

if TYPE_CHECKING:
    from toolfold.adapters._dialects import (
        CompiledTool,
        Dialect,
        SchemaRewrite,
        check_arguments,
        compile_tool,
        restore_arguments,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'toolfold' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


set_adapter_loader(_load_adapters)

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Denied",
    "Response",
    "RunEndEvent",
    "RunState",
    "RunStream",
    "Step",
    "StepEndEvent",
    "StepStartEvent",
    "TextDelta",
    "ToolCallEvent",
    "ToolResultEvent",
    "agenerate_text",
    "aresume",
    "generate_text",
    "resume",
    "token_budget",
    "tool_called",
    "ArgumentJSONError",
    "ArgumentValidationError",
    "AuthenticationError",
    "BadRequestError",
    "ConnectionError",
    "Field",
    "FilePart",
    "ImagePart",
    "InvalidEventError",
    "InvalidTransitionError",
    "Message",
    "Model",
    "ModelConfigError",
    "ModelRequest",
    "ModelResponse",
    "NotFoundError",
    "OutputValidationError",
    "ProviderError",
    "RateLimitError",
    "ReasoningPart",
    "RunContext",
    "RunError",
    "SerializationError",
    "SchemaCompileError",
    "CompiledTool",
    "Dialect",
    "SchemaRewrite",
    "check_arguments",
    "compile_tool",
    "restore_arguments",
    "SchemaContext",
    "ServerError",
    "StreamError",
    "TextPart",
    "TimeoutError",
    "Tool",
    "ToolArgumentError",
    "ToolCallPart",
    "ToolDefinitionError",
    "ToolDefinitionWarning",
    "ToolExecutionError",
    "ToolResultPart",
    "ToolRetriesExceededError",
    "ToolUseFailedError",
    "ToolfoldError",
    "UndocumentedParameterWarning",
    "Usage",
    "__version__",
    "model",
    "register_schema_rule",
    "register_type_hooks",
    "schema_for_type",
    "tool",
]
