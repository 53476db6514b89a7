"""The public surface of toolfold is pinned: adding or removing a name is a decision."""

from __future__ import annotations

import toolfold

EXPECTED = {
    # toolkit: the tool DSL
    "Field",
    "RunContext",
    "SchemaContext",
    "Tool",
    "ToolDefinitionWarning",
    "UndocumentedParameterWarning",
    "register_schema_rule",
    "register_type_hooks",
    "schema_for_type",
    "tool",
    # runtime: messages, models, the loop
    "Agent",
    "Denied",
    "FilePart",
    "ImagePart",
    "Message",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ReasoningPart",
    "Response",
    "RunEndEvent",
    "RunState",
    "RunStream",
    "Step",
    "StepEndEvent",
    "StepStartEvent",
    "TextDelta",
    "TextPart",
    "ToolCallEvent",
    "ToolCallPart",
    "ToolResultEvent",
    "ToolResultPart",
    "Usage",
    "agenerate_text",
    "aresume",
    "generate_text",
    "model",
    "resume",
    "token_budget",
    "tool_called",
    # adapters: schema dialects
    "CompiledTool",
    "Dialect",
    "SchemaRewrite",
    "check_arguments",
    "compile_tool",
    "restore_arguments",
    # errors
    "ArgumentJSONError",
    "ArgumentValidationError",
    "AuthenticationError",
    "BadRequestError",
    "ConnectionError",
    "InvalidEventError",
    "InvalidTransitionError",
    "ModelConfigError",
    "NotFoundError",
    "OutputValidationError",
    "ProviderError",
    "RateLimitError",
    "RunError",
    "SchemaCompileError",
    "SerializationError",
    "ServerError",
    "StreamError",
    "TimeoutError",
    "ToolArgumentError",
    "ToolDefinitionError",
    "ToolExecutionError",
    "ToolRetriesExceededError",
    "ToolUseFailedError",
    "ToolfoldError",
    # metadata
    "__version__",
}


def test_all_is_exactly_the_public_names() -> None:
    """`toolfold.__all__` lists exactly the intended public names, each once."""
    assert len(toolfold.__all__) == len(set(toolfold.__all__))
    assert set(toolfold.__all__) == EXPECTED


def test_every_public_name_resolves() -> None:
    """Every name in __all__ is importable from the facade (lazy ones included)."""
    for name in toolfold.__all__:
        assert getattr(toolfold, name) is not None, name


def test_errors_form_one_tree() -> None:
    """Every public exception class (warnings aside) derives from ToolfoldError."""
    for name in toolfold.__all__:
        value = getattr(toolfold, name)
        is_error = isinstance(value, type) and issubclass(value, BaseException)
        if is_error and not issubclass(value, Warning):
            assert issubclass(value, toolfold.ToolfoldError), name


def test_the_local_namespace_is_pinned() -> None:
    """`toolfold.local.__all__` lists exactly the local provider's public names."""
    import toolfold.local

    assert set(toolfold.local.__all__) == {
        "CACHE_ENV",
        "LLAMA_CPP_PYTHON",
        "LOCAL_PROVIDER",
        "MODELS",
        "SERVER_ENV",
        "LocalModel",
        "LocalServer",
        "LocalSetupError",
        "PackagedModel",
        "built_binary",
        "cache_dir",
        "ensure_model",
        "ensure_server_binary",
        "installed_model",
        "print_progress",
        "running_servers",
        "stop_all",
    }
    assert issubclass(toolfold.local.LocalSetupError, toolfold.ModelConfigError)
