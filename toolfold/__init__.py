"""toolfold: give LLMs tools and compose agents declaratively.

Everything a user imports comes from here. Provider adapters load lazily, the
first time a model string is resolved, so ``import toolfold`` stays cheap.
"""

from toolfold._errors import (
    ArgumentJSONError,
    ArgumentValidationError,
    AuthenticationError,
    BadRequestError,
    ConnectionError,
    InvalidTransitionError,
    ModelConfigError,
    NotFoundError,
    OutputValidationError,
    ProviderError,
    RateLimitError,
    RunError,
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
    FilePart,
    ImagePart,
    Message,
    Model,
    ModelRequest,
    ModelResponse,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    model,
)
from toolfold.runtime._model import set_adapter_loader
from toolfold.toolkit import (
    Field,
    RunContext,
    SchemaContext,
    Tool,
    ToolDefinitionWarning,
    register_schema_rule,
    schema_for_type,
    tool,
)


def _load_adapters() -> None:
    import toolfold.adapters  # noqa: F401  (adapters register their providers on import)


set_adapter_loader(_load_adapters)

__version__ = "0.1.0"

__all__ = [
    "ArgumentJSONError",
    "ArgumentValidationError",
    "AuthenticationError",
    "BadRequestError",
    "ConnectionError",
    "Field",
    "FilePart",
    "ImagePart",
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
    "Usage",
    "__version__",
    "model",
    "register_schema_rule",
    "schema_for_type",
    "tool",
]
