"""Schema dialects: one neutral JSON Schema per tool, compiled for each provider.

``compile_tool(tool, dialect)`` returns a `CompiledTool`: the provider's tool
object, the exact schema sent, whether strict mode is used, and every rewrite
made on the way (`SchemaRewrite`), so nothing changes silently.
"""

from toolfold.adapters._dialects._compile import ToolLike, clear_cache, compile_tool
from toolfold.adapters._dialects._model import (
    DIALECTS,
    CompiledTool,
    Dialect,
    RewriteAction,
    SchemaRewrite,
)
from toolfold.adapters._dialects._names import sent_name
from toolfold.adapters._dialects._restore import check_arguments, restore_arguments

__all__ = [
    "DIALECTS",
    "CompiledTool",
    "Dialect",
    "RewriteAction",
    "SchemaRewrite",
    "ToolLike",
    "check_arguments",
    "clear_cache",
    "compile_tool",
    "restore_arguments",
    "sent_name",
]
