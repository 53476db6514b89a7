"""The one exception hierarchy of toolfold.

Every error toolfold raises on purpose derives from `ToolfoldError`. Foreign
exceptions (httpx, jsonschema, cattrs) are translated at one boundary each and
chained with ``raise ... from exc``::

    ToolfoldError
    ├── ToolDefinitionError        a tool cannot be built (raised at decoration time)
    ├── WorkflowDefinitionError    a workflow cannot be built (raised when it is defined)
    ├── SchemaCompileError         a tool's schema cannot be sent in the dialect or mode asked
    ├── ToolArgumentError          arguments from a model do not fit a tool
    │   ├── ArgumentJSONError      the argument text is not JSON
    │   └── ArgumentValidationError  valid JSON that breaks the schema or the types
    ├── RunError                   a run cannot go on (carries the state)
    │   ├── InvalidTransitionError an event that the run's phase does not allow
    │   │   └── InvalidEventError  an event that contradicts the state (unknown call id...)
    │   ├── ToolRetriesExceededError  a tool failed more times in a row than allowed
    │   ├── OutputValidationError  the final answer never fitted ``output_type``
    │   └── ToolExecutionError     a tool raised and ``on_tool_error="raise"``
    ├── SourceCloseError           a run ended but a tool source failed to close (carries the response)
    ├── UsageError                 toolfold was called with arguments it cannot use
    ├── AgentFileError             an agent file cannot be loaded (every problem, with lines)
    ├── ModelConfigError           a model string or model options cannot be used
    ├── Unpicklable                a model refuses to be pickled (says why and what to do)
    ├── SerializationError         JSON that does not load as a state, event or effect
    └── ProviderError              a provider call failed (status, body, headers, ``retry_after``)
        ├── AuthenticationError    401 / 403
        ├── RateLimitError         429
        ├── BadRequestError        400 / 422, with the provider's own message
        │   ├── ToolUseFailedError the provider rejected generated tool arguments
        │   └── ContextWindowExceededError  the conversation is longer than the model's window
        ├── NotFoundError          404
        ├── ServerError            5xx
        ├── ProviderConnectionError  the connection could not be made or was lost
        ├── ProviderTimeoutError   connect, read or total timeout
        ├── StreamError            a stream broke or reported an error in-band
        ├── ProviderFinishError    the answer ended abnormally (finish reason ``error``...)
        └── MalformedResponseError a body or stream event toolfold cannot read (with ``path``)

Optional packages add their own, under `ToolfoldError` too: ``toolfold.mcp.MCPError``
(an MCP server could not start, crashed, hung or answered badly; a ``RuntimeError``).

Where an error means what a builtin exception means, it subclasses that builtin
too, so ``except ValueError`` or ``except TimeoutError`` catches it:
`ToolDefinitionError`, `WorkflowDefinitionError` and `Unpicklable` are ``TypeError``; `UsageError`,
`AgentFileError`, `SchemaCompileError`,
`ToolArgumentError`, `ModelConfigError` and `SerializationError` are
``ValueError``; `RunError` and `SourceCloseError` are ``RuntimeError``;
`ProviderConnectionError` is a ``ConnectionError`` and `ProviderTimeoutError` a
``TimeoutError`` (both are ``OSError``).

This module is a leaf: every layer may import it, it imports none of them (the
types its attributes name are imported for type checkers only).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolfold.runtime._response import Response
    from toolfold.runtime.core._messages import Usage
    from toolfold.runtime.core._state import RunState


def _listed(problems: tuple[str, ...], bullet: str = "  - ") -> str:
    """``N problem(s)`` and one indented line per problem."""
    noun = "problem" if len(problems) == 1 else "problems"
    lines = "\n".join(f"{bullet}{p}" for p in problems)
    return f"{len(problems)} {noun}\n{lines}"


def _restored(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """An error rebuilt from its ``args`` and attributes, without calling its ``__init__``."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


# The name pickles made by every version refer to is `_restored`; other modules call it by this one.
restored_error = _restored


def add_note(error: BaseException, note: str) -> None:
    """Add ``note`` to ``error``'s notes (``__notes__``, printed under its traceback).

    `BaseException.add_note` on Python 3.11+; on 3.10, which has no notes, the
    same list it would keep (read by cattrs, tracebacks from 3.11 on, pickles).
    """
    if sys.version_info >= (3, 11):
        error.add_note(note)
    else:  # (no add_note before 3.11)
        error.__dict__.setdefault("__notes__", []).append(note)


def reduce_error(error: BaseException) -> tuple[Any, ...]:
    """``__reduce__`` for an error whose ``__init__`` takes other arguments than its ``args``.

    Python's own rebuilds an error as ``cls(*error.args)``: that fails (or
    mixes the arguments up) for an error built from fields (``MCPError(server,
    message)``), so it could not cross a process (multiprocessing, Ray, a
    pickled log). This rebuilds it from its args and its attributes as they are.
    """
    return (_restored, (type(error), error.args, dict(error.__dict__)))


class ToolfoldError(Exception):
    """Base class of every error toolfold raises on purpose.

    Every one pickles (its subclasses' ``__init__`` take fields, not the message).

    Attributes:
        state: The run's state when a run raised this error, to inspect, save
            or resume (``agent.resume(error.state)``): a `RunError` always
            carries one, and so does any other toolfold error a run raises (a
            model's `ProviderError` is raised as a copy of its class carrying the
            run's state, chained as the model's own object was: the same
            ``__cause__``, that object its hidden ``__context__``). None for
            an error raised outside a run (``model.request(...)`` called
            directly). `toolfold.state_of` also follows the error's chain.
        close_errors: The errors of the tool sources (MCP servers...) that
            failed to close after the run failed with this error, in the order
            they were raised (each also in ``__notes__``); empty when none did.
    """

    state: RunState | None = None
    close_errors: Sequence[BaseException] = ()

    __reduce__ = reduce_error


class ToolDefinitionError(ToolfoldError, TypeError):
    """A function or schema cannot become a tool.

    Raised once per tool with every problem found, so a user fixes them all in
    one go.

    Attributes:
        qualname: The qualified name of the function (or the tool name).
        problems: One line per problem: the parameter, the type and what to do.
    """

    def __init__(self, qualname: str, problems: list[str] | tuple[str, ...]) -> None:
        self.qualname = qualname
        self.problems = tuple(problems)
        super().__init__(f"cannot make a tool of {qualname}: {_listed(self.problems)}")


class WorkflowDefinitionError(ToolfoldError, TypeError):
    """A workflow (``Sequence``, ``Parallel``, ``Route``, ``Loop``) cannot be built.

    Raised once with every problem found: a step without a name, two steps
    with one name, a step whose input type does not accept the previous
    step's output type, a placeholder naming no earlier step, a bad option.

    Attributes:
        workflow: What the workflow is (its kind and name).
        problems: One line per problem.
    """

    def __init__(self, workflow: str, problems: list[str] | tuple[str, ...]) -> None:
        self.workflow = workflow
        self.problems = tuple(problems)
        super().__init__(f"cannot build {workflow}: {_listed(self.problems)}")


class SchemaCompileError(ToolfoldError, ValueError):
    """A tool's JSON Schema cannot be compiled into a provider's dialect as asked.

    Raised when ``strict=True`` and the dialect cannot express the schema
    without loss, when the dialect has no strict mode, or when the provider
    would reject the tool whatever the mode (a bad tool name, a root that is
    not an object). Every problem is listed at once.

    Attributes:
        tool_name: The tool that could not be compiled.
        dialect: The dialect asked for, e.g. ``"openai-chat"``.
        problems: One line per problem: the JSON pointer into the tool's
            schema, the keyword, and why it cannot be sent.
    """

    def __init__(self, tool_name: str, dialect: str, problems: list[str] | tuple[str, ...]) -> None:
        self.tool_name = tool_name
        self.dialect = dialect
        self.problems = tuple(problems)
        super().__init__(_compile_message(tool_name, dialect, self.problems))


def _compile_message(tool_name: str, dialect: str, problems: tuple[str, ...]) -> str:
    return f"cannot compile tool {tool_name!r} for {dialect}: {_listed(problems)}"


#: How a `SchemaCompileError` says to fix a parameter name the provider refuses: the
#: compiler sees only the schema. `advise_renaming` words it for the tool it is about
#: (an MCP server's tool has parameters no one here can rename).
RENAME_PARAMETER = "(rename the parameter)"

#: How a `SchemaCompileError`'s problem about a tool name the provider refuses starts:
#: `advise_renaming` adds how to rename a tool not named here (an MCP server's).
TOOL_NAME_PROBLEM = "the tool name must be"


def advise_renaming(error: BaseException, advice: str, name_advice: str | None = None) -> None:
    """Replace `RENAME_PARAMETER` in ``error``'s problems (a `SchemaCompileError`) by
    ``advice``, and end its `TOOL_NAME_PROBLEM` with ``(name_advice)`` if given."""
    if not isinstance(error, SchemaCompileError):
        return
    problems = tuple(
        f"{p} ({name_advice})"
        if name_advice is not None and p.startswith(TOOL_NAME_PROBLEM) and name_advice not in p
        else p.replace(RENAME_PARAMETER, advice)
        for p in error.problems
    )
    if problems != error.problems:  # (an output type's never has it: no key rule for output)
        error.problems = problems
        error.args = (_compile_message(error.tool_name, error.dialect, problems),)


def output_compile_error(error: SchemaCompileError, output: object, hint: str = "") -> None:
    """Word ``error`` (made by compiling ``output``, an `OutputSpec`, as a tool) as about
    the output type, named by the spec's name until `name_output` names it by its type.

    The spec and ``hint`` stay on the error (private attributes, pickled with it) so that
    the run whose output it is, and only that run, can name the type: the adapter sees
    the spec's name alone, ``'final_result'`` for ``int | None`` or ``dict[str, Any]``.
    """
    error._output_spec = output  # type: ignore[attr-defined]
    error._output_hint = hint  # type: ignore[attr-defined]
    error.args = (_output_message(error, str(getattr(output, "name", "")), hint),)


def name_output(error: BaseException, output: object, type_name: str) -> None:
    """Name the output type ``type_name`` in ``error`` if it is `output_compile_error`'s
    error about ``output`` (an equal spec: a resumed or pickled run's is a copy) and no
    run named it yet; an error about another run's output (a model that runs an agent)
    is left as it is, named by that run."""
    if not isinstance(error, SchemaCompileError):
        return
    spec = error.__dict__.get("_output_spec")
    if spec is None or spec != output:
        return
    hint = error.__dict__.pop("_output_hint", "")
    del error.__dict__["_output_spec"]  # named once, by the innermost run
    error.args = (_output_message(error, type_name, str(hint)),)


def _output_message(error: SchemaCompileError, name: str, hint: str) -> str:
    return (
        f"cannot send the output type {name!r} as {error.dialect} structured output: "
        f"{_listed(error.problems)}{hint}"
    )


class ToolArgumentError(ToolfoldError, ValueError):
    """Arguments from a model do not fit a tool.

    Attributes:
        tool_name: The tool whose arguments were rejected.
        errors: One line per problem, each with a JSON path (``$.a.b``).
        message_for_model: A short text for the model: what was wrong and what
            was expected, without a traceback (at most 15 problem lines, then
            "... and N more problems"; ``errors`` keeps them all).
    """

    def __init__(self, tool_name: str, errors: list[str] | tuple[str, ...], summary: str) -> None:
        self.tool_name = tool_name
        self.errors = tuple(errors)
        self.message_for_model = _message_for_model(tool_name, summary, self.errors)
        detail = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"invalid arguments for tool {tool_name!r}: {summary}\n{detail}".rstrip())


# A model fixes a few problems at a time; 500 lines would only fill its context.
_MODEL_PROBLEM_LINES = 15


def _message_for_model(tool_name: str, summary: str, errors: tuple[str, ...]) -> str:
    shown = errors[:_MODEL_PROBLEM_LINES]  # as documented: 15 lines, then how many more
    lines = [f"Invalid arguments for tool {tool_name!r}: {summary}", *(f"- {e}" for e in shown)]
    if len(shown) < len(errors):
        rest = len(errors) - len(shown)
        lines.append(f"... and {rest} more problem{'s' if rest > 1 else ''}")
    lines.append("Call the tool again with corrected arguments.")
    return "\n".join(lines)


class ArgumentJSONError(ToolArgumentError):
    """The argument text a model sent is not valid JSON.

    Attributes:
        position: The character offset where parsing failed.
    """

    def __init__(self, tool_name: str, error: str, position: int) -> None:
        self.position = position
        super().__init__(tool_name, [error], "the arguments are not valid JSON")


class ArgumentValidationError(ToolArgumentError):
    """Valid JSON that breaks the tool's schema or cannot become its types.

    Each entry of ``errors`` reads ``<path>: <problem>``, e.g.
    ``$.filters.category: 'D' is not one of ['A', 'B', 'C']``, sorted by path.
    """

    def __init__(self, tool_name: str, errors: list[str] | tuple[str, ...]) -> None:
        count = len(errors)
        noun = "problem" if count == 1 else "problems"
        super().__init__(
            tool_name, errors, f"the arguments do not match the parameters ({count} {noun})"
        )


class RunError(ToolfoldError, RuntimeError):
    """A run cannot go on.

    Attributes:
        state: The last consistent state of the run (a ``RunState``), so that
            nothing is lost: it can be inspected, serialized or resumed. Every
            run sets it; None only for an error built without one.
    """

    def __init__(self, message: str, state: RunState | None = None) -> None:
        self.state = state
        super().__init__(message)


class InvalidTransitionError(RunError):
    """An event arrived that the run's current phase does not allow."""

    def __init__(self, phase: str, event: str, state: RunState | None = None) -> None:
        self.phase = phase
        self.event = event
        super().__init__(f"event {event!r} is not allowed in phase {phase!r}", state)


class InvalidEventError(InvalidTransitionError):
    """An event the phase allows but the state contradicts, or any event after a failure.

    E.g. a result for an unknown call id, a second result for a call, a result
    for a call still awaiting approval, or dispositions the tools forbid.

    Attributes:
        reason: Why the event was refused.
    """

    def __init__(self, phase: str, event: str, reason: str, state: RunState | None = None) -> None:
        super().__init__(phase, event, state)
        self.reason = reason
        self.args = (f"event {event!r} refused in phase {phase!r}: {reason}",)


class ToolRetriesExceededError(RunError):
    """A tool failed more times in a row than its ``max_retries`` allows."""


class OutputValidationError(RunError):
    """The model's final answer never fitted ``output_type`` within the retries."""


class ToolExecutionError(RunError):
    """A tool raised and the run was configured with ``on_tool_error="raise"``."""


class SourceCloseError(ToolfoldError, RuntimeError):
    """A run ended (finished, or waiting for the caller) but a tool source failed to close.

    Nothing of the run is lost: ``response`` is what the run returned, and
    ``state`` resumes it (a run suspended for an approval, say). The first
    close error is the cause (``__cause__``); ``close_errors`` lists them all.
    (A run that failed raises its own error instead, the close errors
    attached to it.)

    Attributes:
        response: The run's `Response` (a `WorkflowResponse` for a workflow);
            None only when a workflow's stream was closed early (no response).
        state: ``response.state`` (None with no response).
        close_errors: Every close error, in the order they were raised.
    """

    response: Response | None
    close_errors: list[BaseException]

    def __init__(
        self,
        message: str,
        response: Response | None = None,
        close_errors: list[BaseException] | None = None,
    ) -> None:
        self.response = response
        self.state = None if response is None else response.state
        self.close_errors = list(close_errors or ())
        super().__init__(message)


class UsageError(ToolfoldError, ValueError):
    """toolfold was called with arguments it cannot use.

    A bad option (``max_steps=0``, a ``tool_choice`` that names no tool), a
    message that is not one, an approval that is not ``True``, ``False`` or
    ``Denied``, resuming a run without the tools it was started with, or an
    object used out of order (a stream's response before the stream ended).
    The message names the argument and what would be accepted. Nothing ran:
    a state the caller holds is unchanged.
    """


class AgentFileError(ToolfoldError, ValueError):
    """An agent file (TOML or YAML) cannot be loaded.

    Raised once per file with every problem found, so a user fixes them all in
    one go: unknown keys, values of the wrong type, import paths that do not
    resolve, things that are not tools, references to agents the file does not
    define, cycles, and agents that cannot be built.

    Attributes:
        file: The file's path (``"<string>"`` for text loaded from memory).
        problems: One line per problem: ``FILE:LINE: key.path: what is wrong``
            (no ``LINE`` where neither the parser nor the document gives one).
    """

    def __init__(self, file: str, problems: list[str] | tuple[str, ...]) -> None:
        self.file = file
        self.problems = tuple(problems)
        # each problem starts with its file and line, as compilers print them: no bullet
        super().__init__(f"cannot load agent file {file}: {_listed(self.problems, '  ')}")


class ModelConfigError(ToolfoldError, ValueError):
    """A model string, provider name or model option cannot be used."""


class Unpicklable(ToolfoldError, TypeError):
    """A model's refusal to be pickled: its message names the model, why, and what to do instead.

    A model given a credential or a client in code, a subclass that could not
    be built again from its options, or a local model whose server runs in
    this process; and, as it is unpickled, a model an older toolfold pickled
    (its attributes, not its options), to be built again. A ``TypeError``, as pickle's own refusals are; Ray's batch
    shows it alone (`toolfold.integrations.ray`), its advice being the model's own.
    """


class SerializationError(ToolfoldError, ValueError):
    """Data that cannot be loaded as a state, an event or an effect.

    Attributes:
        type_name: What was being loaded.
        problems: One line per problem, each with its path.
        hint: What may explain the problems, said in the message's first line
            (of a state that differs from its event log: the document was
            changed, or written by an older or a newer toolfold); ``""`` when
            there is none.
    """

    def __init__(
        self, type_name: str, problems: list[str] | tuple[str, ...], hint: str = ""
    ) -> None:
        self.type_name = type_name
        self.problems = tuple(problems)
        self.hint = hint
        lines = "\n".join(f"  - {p}" for p in self.problems)
        why = f" ({hint})" if hint else ""
        super().__init__(f"cannot load {type_name}{why}:\n{lines}")


class ProviderError(ToolfoldError):
    """A call to a model provider failed.

    Attributes:
        provider: The provider name, e.g. ``"openai"``.
        status_code: The HTTP status, or None when no response arrived.
        body: The response body as text (never the request, never the key).
        headers: The response headers, their names lower-case whatever the HTTP
            client (``error.headers.get("x-request-id")``).
        provider_message: The provider's own error message, when it sent one.
        code: The provider's error code, when it sent one.
        retry_after: Seconds the provider asked to wait before asking again
            (``retry-after-ms``, ``retry-after``, Gemini's ``RetryInfo``), on
            any status (a 429, a 503, Anthropic's 529), when it said so;
            ``inf`` for a number of seconds past what a float holds, the
            longest of a header sent twice. None when it asked for no wait,
            and when ``retryable`` is False (a per-day quota's ``retryDelay``
            is no time after which asking again helps).
        retryable: The provider's own word on asking again, when it gave one:
            False for an error that asking again soon fails the same way (a
            Gemini per-day quota, ``x-should-retry: false``), True for
            ``x-should-retry: true``; None when it said nothing, and the
            error's class decides (see `gives_up`). The transport,
            Temporal's activities and a workflow's ``on_error="retry"``
            follow it.
        usage: The usage a failed answer reported, billed; None when none was
            read. The provider ended an answer it had begun (a
            `ProviderFinishError`, an OpenAI Responses ``response.failed``)
            or sent one toolfold cannot read (a `MalformedResponseError`):
            a run's state on the error counts it (an ``AttemptDropped``).
    """

    # (class defaults: an error pickled before these attributes existed loads with None)
    retry_after: float | None = None
    retryable: bool | None = None
    usage: Usage | None = None

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status_code: int | None = None,
        body: str = "",
        headers: Mapping[str, str] | None = None,
        provider_message: str | None = None,
        code: str | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
    ) -> None:
        self.retry_after = retry_after
        self.retryable = retryable
        self.provider = provider
        self.status_code = status_code
        self.body = body
        # (lower-case whatever the HTTP client gave: httpx lower-cases, aiohttp keeps the case)
        # (pairs as ``dict`` takes them too: ``[("X-Request-Id", "r1")]``)
        pairs = dict(headers or {}).items()
        self.headers = {str(key).lower(): value for key, value in pairs}
        self.provider_message = provider_message
        self.code = code
        super().__init__(message)


class AuthenticationError(ProviderError):
    """The provider refused the credentials (401) or the permission (403)."""


class RateLimitError(ProviderError):
    """The provider is rate limiting (429).

    ``retry_after`` (on every `ProviderError`) is the wait it asked for; a
    quota that will not clear soon (Gemini's per-day quota) has ``retryable``
    False and no ``retry_after``: waiting a second and asking again fails the
    same way, until the quota resets.
    """


class BadRequestError(ProviderError):
    """The provider rejected the request (400 / 422); see ``provider_message``."""


class ContextWindowExceededError(BadRequestError):
    """The request is longer than the model's context window (a 400 each provider words
    its own way: OpenAI ``context_length_exceeded``, Anthropic "prompt is too long",
    Gemini "input token count ... exceeds the maximum", OpenRouter "This endpoint's
    maximum context length", llama.cpp ``exceed_context_size_error``...).

    The window holds the prompt plus the ``max_tokens`` asked for the answer, so a
    large ``max_tokens`` can overflow it too (Anthropic's "input length and
    `max_tokens` exceed context limit"). A `BadRequestError`, so
    ``except BadRequestError`` still catches it. Asking again with the same
    conversation fails the same way: shorten the history (drop or summarise earlier
    turns, trim large tool results), lower ``max_tokens``, or use a model with a
    larger window. A run's ``.state`` is the run before the request.
    """


class ToolUseFailedError(BadRequestError):
    """The provider rejected the tool call the model generated (Groq ``tool_use_failed``).

    Attributes:
        failed_generation: The raw model output the provider refused.
    """

    def __init__(self, message: str, *, failed_generation: str = "", **kwargs: Any) -> None:
        self.failed_generation = failed_generation
        super().__init__(message, **kwargs)


class NotFoundError(ProviderError):
    """The provider does not know the model or the endpoint (404)."""


class ServerError(ProviderError):
    """The provider failed on its side (5xx)."""


class ProviderConnectionError(ProviderError, ConnectionError):
    """The connection to the provider could not be made or was lost.

    Also a builtin ``ConnectionError``, so ``except ConnectionError`` catches it.
    """


class ProviderTimeoutError(ProviderError, TimeoutError):
    """The provider did not answer within a timeout (connect, read or total).

    Also a builtin ``TimeoutError``, so ``except TimeoutError`` catches it.
    """


class StreamError(ProviderError):
    """A stream was cut short or reported an error in-band after HTTP 200."""


class ProviderFinishError(ProviderError):
    """The provider ended its answer abnormally after HTTP 200: what came is no answer.

    OpenRouter's ``finish_reason: "error"`` (an upstream failed mid-answer),
    Gemini's ``MALFORMED_FUNCTION_CALL`` / ``UNEXPECTED_TOOL_CALL`` /
    ``TOO_MANY_TOOL_CALLS`` (with its ``finishMessage``), Anthropic's
    ``pause_turn`` (a server tool paused a long turn, to be sent back, which
    toolfold cannot do). Raised alike for a whole answer and a streamed one,
    where the text already streamed stays shown; a run keeps its state on the
    error (``.state``, as for any provider error).

    The answer was billed: a run's state on the error counts the usage the
    provider reported for it (an `AttemptDropped`, as for a cut stream).

    Attributes:
        finish_reason: The provider's own finish reason
            (``"MALFORMED_FUNCTION_CALL"``); ``provider_message`` holds what
            the provider said of it, when it said something.
        usage: The usage the provider reported for the answer, or None when
            it reported none (`ProviderError.usage`).
    """

    def __init__(
        self,
        message: str,
        *,
        finish_reason: str = "",
        usage: Usage | None = None,
        **kwargs: Any,
    ) -> None:
        self.finish_reason = finish_reason
        self.usage = usage
        super().__init__(message, **kwargs)


class MalformedResponseError(ProviderError):
    """The provider answered with JSON toolfold cannot read: the provider's fault.

    A field of the wrong type (``{"choices": 8}``, a call id that is a list),
    NaN or Infinity, or nesting too deep to be an answer. ``body`` holds the
    raw body (or stream event) with the key scrubbed.

    A whole answer (HTTP 200) was billed all the same: a run's state on the
    error counts the usage it reported (an `AttemptDropped`, as for a cut
    stream), read apart from the bad field.

    Attributes:
        path: The JSON path of the bad field, e.g. ``$.choices[0].message.tool_calls``.
        problem: What is wrong there, e.g. ``expected an array, got object``.

    Its `ProviderError.usage` is None for a stream event, an answer that
    reported none, or a usage that is itself the bad field.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str = "$",
        problem: str = "",
        usage: Usage | None = None,
        **kwargs: Any,
    ) -> None:
        self.path = path
        self.problem = problem
        self.usage = usage
        super().__init__(message, **kwargs)


#: The longest wait, in seconds, a provider may ask for before a request is asked again:
#: `RetryPolicy.max_retry_after`'s default, which a workflow step's retry reads too when
#: its error does not say what its transport honours.
DEFAULT_MAX_RETRY_AFTER = 120.0

#: Provider errors that asking again cannot fix: the same request fails the same
#: way (bad credentials, a bad request, no such model). A `ProviderFinishError` is a
#: paid answer the provider ended abnormally (Anthropic's ``pause_turn``, Gemini's
#: ``MALFORMED_FUNCTION_CALL``): asked again without end, it is paid again without end.
#: Temporal's activities and a workflow's ``on_error="retry"`` both read it (`gives_up`).
PERMANENT_PROVIDER_ERRORS: tuple[type[ProviderError], ...] = (
    AuthenticationError,
    BadRequestError,
    NotFoundError,
    ProviderFinishError,
)


def gives_up(error: BaseException) -> bool:
    """Whether asking again cannot help ``error``, a provider's: never retry it.

    Its class first (`PERMANENT_PROVIDER_ERRORS`: a provider's
    ``x-should-retry: true`` on a 401 or a 400 does not make it pass, and
    Temporal's default policy would ask again without end), then the
    provider's own word (`ProviderError.retryable` False: a Gemini per-day
    quota, ``x-should-retry: false``). An error that is no `ProviderError` is
    not judged here (False).
    """
    if not isinstance(error, ProviderError):
        return False
    return isinstance(error, PERMANENT_PROVIDER_ERRORS) or error.retryable is False
