"""OpenTelemetry traces and metrics for toolfold runs, after the GenAI semantic conventions.

    import toolfold.otel
    toolfold.otel.instrument()            # the global tracer and meter providers
    ...
    toolfold.otel.uninstrument()

Spans: ``invoke_agent {name}`` for each run (and each resumption of it, with the
same ``gen_ai.conversation.id``), ``chat {model}`` for each model request and
``execute_tool {tool}`` for each tool call, both children of the run's span.
Metrics: ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``.
Prompts, arguments and results are recorded only with ``capture_content=True``;
API keys never are. It attaches to the drivers, so the pure core is untouched and
replaying a log emits nothing. Install with ``pip install 'toolfold[otel]'``.
"""

from toolfold.otel._instrument import instrument, is_instrumented, uninstrument

__all__ = ["instrument", "is_instrumented", "uninstrument"]

for _name in __all__:
    globals()[_name].__module__ = __name__
