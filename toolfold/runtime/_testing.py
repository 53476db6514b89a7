"""Models for tests and examples: no network, no keys, deterministic.

`ScriptedModel` answers from a script, `FunctionModel` from a function,
`TestModel` calls every tool once with schema-valid arguments and then sums
the results up. All three implement the four `Model` methods and
`ConnectedModel`'s (``close``/``aclose`` are no-ops, ``prepare`` gives an
empty body), and their streams are made of the same neutral events a
provider adapter yields.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import threading
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, Union, cast

import attrs

from toolfold._errors import UsageError
from toolfold.runtime._model import (
    MODEL_OVERRIDE,
    Model,
    ModelOverride,
    Prepared,
    RequestReport,
    generic_check_arguments,
)
from toolfold.runtime._sample import sample_for, sample_value
from toolfold.runtime.core._arguments import parse_arguments
from toolfold.runtime.core._messages import (
    FilePart,
    ImagePart,
    Message,
    NotJSONError,
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    frozen_json,
)
from toolfold.runtime.core._repr import EXCERPT, a_class
from toolfold.runtime.core._request import (
    FinishReason,
    ModelRequest,
    ModelResponse,
    ToolDefinition,
)
from toolfold.runtime.core._stream import (
    MediaOutput,
    ReasoningDelta,
    ResponseInfo,
    StreamEvent,
    StreamFinish,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageUpdate,
)
from toolfold.runtime.drive._failures import testing_misuse
from toolfold.runtime.drive._kept_loop import _await, run_blocking
from toolfold.runtime.drive._output import REJECTION_HEAD, REJECTION_TAIL

Reply = Union[str, Message, ModelResponse, ToolCallPart, Sequence[Union[str, Part]]]  # noqa: UP007
"""What a script entry or a model function may give: text, a tool call, a
message, a full response, or a list of text pieces and tool calls that make up
one response."""

ScriptEntry = Union[Reply, Callable[[ModelRequest], Reply]]  # noqa: UP007


def to_response(
    reply: Reply,
    request: ModelRequest,
    model_name: str,
    count_input: Callable[[Sequence[Message]], int] | None = None,
) -> ModelResponse:
    """Turn a reply into a full response: ids for calls, a finish reason, usage."""
    given: ModelResponse | None = None
    if isinstance(reply, ModelResponse):
        given = reply
        parts = reply.message.parts
    elif isinstance(reply, Message):
        parts = reply.parts
    elif isinstance(reply, (str, ToolCallPart)):
        parts = (_as_part(reply),)
    else:
        parts = tuple(_as_part(item) for item in reply)
    has_calls = False
    if any(isinstance(p, ToolCallPart) for p in parts):
        has_calls = True
        position = len(request.messages)
        parts = tuple(_with_id(p, position, i) for i, p in enumerate(parts))
    message = Message("assistant", parts)
    if given is not None and given.usage != _DEFAULT_USAGE:
        usage = answer_usage(given.usage)
    else:
        counted = (count_input or _count_words)(request.messages)
        usage = Usage(counted, _count_words((message,)), requests=1)
    if given is None:
        finish: FinishReason = "tool_calls" if has_calls else "stop"
        return ModelResponse(message, usage, finish, None, model_name)
    return ModelResponse(
        message,
        usage,
        given.finish_reason,
        given.raw_finish_reason,
        given.model_name or model_name,
        given.response_id,
    )


_DEFAULT_USAGE = Usage(requests=1)


def answer_usage(usage: Usage) -> Usage:
    """The usage of one answer of a test model: ``usage``, one request if it counts none.

    Every answer is one request, as a provider adapter reports it: a usage
    given with its tokens only (``Usage(input_tokens=7)``, ``requests=0``)
    counted no request, so a ``state.usage.requests`` limit undercounted.
    Other counts are kept as given, a negative one too (`Usage` keeps it, and
    tests of how a run takes such a model use these models).
    """
    return usage if usage.requests else attrs.evolve(usage, requests=1)


def _as_part(item: str | Part) -> Part:
    return TextPart(item) if isinstance(item, str) else item


_REPLY_KINDS = (
    "text (a str), a tool call (`.call(name, arguments)`), a list of text pieces and "
    "tool calls, an assistant `Message` or a `ModelResponse`"
)
_ANSWER_PARTS = (TextPart, ToolCallPart, ReasoningPart, ImagePart, FilePart)


def reply_problem(reply: object) -> str | None:
    """Why ``reply`` is no `Reply` (None: it is one), naming what it is.

    A reply is the model's answer: an assistant message's parts. A message of
    another role, or a tool's result, would silently become one (its role
    dropped), and a value that is no list (None, a number, a dict, bytes)
    would fail deep in the run, or be iterated (a dict's keys, bytes' ints).
    """
    if isinstance(reply, str):
        return None
    if isinstance(reply, ToolCallPart):
        return _parts_problem((reply,))
    held_message: object = reply.message if isinstance(reply, ModelResponse) else None
    if isinstance(reply, ModelResponse) and not isinstance(held_message, Message):
        # (ModelResponse takes its message unchecked: ModelResponse("hi") failed
        # later with a bare AttributeError)
        return (
            f"got a ModelResponse whose message is {_kind(held_message)[4:]}: its message is "
            f"the answer as an assistant Message (ModelResponse(Message.assistant(...)))"
        )
    if isinstance(reply, (Message, ModelResponse)):
        message = reply if isinstance(reply, Message) else reply.message
        if message.role != "assistant":
            held = "" if message is reply else "'s message"
            return (
                f"got a {type(reply).__name__}{held} with role {message.role!r}: a reply "
                f"is the model's answer, role 'assistant' (Message.assistant(...))"
            )
        return _parts_problem(message.parts)
    if isinstance(reply, (list, tuple)):
        for index, item in enumerate(reply):
            problem = _parts_problem((item,))
            if problem is None and not isinstance(item, (str, *_ANSWER_PARTS)):
                problem = _kind(item)
            if problem is not None:
                return f"item {index} of the list: {problem}"
        return None
    return _kind(reply)


def _parts_problem(parts: Iterable[object]) -> str | None:
    for part in parts:
        # (its annotation says str, but a hand-made part is not checked)
        name: object = part.name if isinstance(part, ToolCallPart) else ""
        if not isinstance(name, str):
            return f"got a ToolCallPart whose tool name is no str: {_kind(name)[4:]}"
        call_id: object = part.id if isinstance(part, ToolCallPart) else ""
        if not isinstance(call_id, str):
            return f"got a ToolCallPart whose id is no str: {_kind(call_id)[4:]}"
        if isinstance(part, ToolResultPart):
            return (
                f"got a ToolResultPart (for tool {part.tool_name!r}): a tool's result is not "
                f"part of the model's answer; the run adds the results of the calls it makes"
            )
    return None


def _kind(value: object) -> str:
    shown = repr(value)
    if len(shown) > EXCERPT:
        shown = shown[:EXCERPT] + "..."
    return f"got {type(value).__name__} {shown}"


def _with_id(part: Part, position: int, index: int) -> Part:
    # Ids derive from the length of the conversation (which grows with every
    # response), so a model rebuilt in another process (a resumed run) never
    # repeats an earlier id, and making one costs nothing.
    if isinstance(part, ToolCallPart) and not part.id:
        return ToolCallPart(
            f"call_{position}_{index}",
            part.name,
            part.arguments_text,
            part.arguments,
            part.provider_data,
        )
    return part


class _InputCounter:
    """Counts a request's words incrementally: a run resends its conversation
    with one or two new messages each time, so only those are counted.

    The count depends on the request alone: a conversation is counted on from
    an earlier request's only when that request's messages are all its first
    ones (the same objects, or equal), so a model shared by several runs (two
    agents, a handoff, a run given another's history) counts each of them
    right. The last few conversations are kept (runs sharing the model
    interleave), and the last message is compared first: a run's requests
    cost one pass over the kept prefix, at C speed, and the words of the new
    messages only.
    """

    _KEPT = 8

    def __init__(self) -> None:
        self._recent: list[tuple[tuple[Message, ...], int]] = []
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[Any, ...]:
        # A copy (a model sent to a process, Ray's actors) starts with nothing kept: it
        # holds no conversation, and a lock does not pickle.
        return (_InputCounter, ())

    def __setstate__(self, state: Any) -> None:
        # One an older toolfold pickled (its attributes, before `__reduce__`: no lock)
        # starts with nothing kept too, and its lock.
        self._recent = []
        self._lock = threading.Lock()

    def __call__(self, messages: Sequence[Message]) -> int:
        messages = tuple(messages)
        size = len(messages)
        with self._lock:
            best: tuple[tuple[Message, ...], int] | None = None
            for entry in self._recent:
                seen = len(entry[0])
                if (
                    0 < seen <= size
                    and (best is None or seen > len(best[0]))
                    and messages[seen - 1] is entry[0][-1]
                    and messages[:seen] == entry[0]
                ):
                    best = entry
            if best is not None:
                self._recent.remove(best)
        if best is None:
            total = _count_words(messages)
        else:
            total = best[1] + _count_words(messages[len(best[0]) :])
        with self._lock:
            self._recent.append((messages, total))
            del self._recent[: -self._KEPT]
        return total


def _count_words(messages: Iterable[Message]) -> int:
    total = 0
    for message in messages:
        for part in message.parts:
            if isinstance(part, TextPart):
                total += len(part.text.split())
            elif isinstance(part, ToolCallPart):
                total += 1 + len(part.arguments_text.split())
            else:
                total += len(getattr(part, "content", "").split())
    return total


def make_call(name: str, arguments: Any = None, *, id: str | None = "") -> ToolCallPart:
    """A tool call for a script: ``arguments`` is a dict, or raw JSON text.

    ``id`` is the call's id; empty (or None), one is derived when the model answers.

    Raises:
        UsageError: ``name`` is no str, ``id`` neither a str nor None, or ``arguments`` is neither (a list: give
            arguments that are not an object as text, ``'[1, 2]'``, and the model reads
            an argument error), or the dict holds what a model's JSON cannot (a set, a
            tuple key, nesting deeper than 64 levels...); an int or float key is taken
            as its JSON text.
    """
    if not isinstance(name, str):
        raise UsageError(f"call(name, ...): a tool's name is a str, {_kind(name)}")
    if id is None:
        id = ""
    elif not isinstance(id, str):
        raise UsageError(
            f"call({name!r}, ..., id=...): a call's id is a str (or empty, for one derived "
            f"when the model answers), {_kind(id)}"
        )
    if isinstance(arguments, str):
        return ToolCallPart(id, name, arguments, parse_arguments(arguments))
    if arguments is not None and not isinstance(arguments, Mapping):
        raise UsageError(_not_arguments(name, arguments))
    try:
        # Checked before the text is written (json.dumps would raise a bare error).
        args = frozen_json(dict(arguments or {}))
    except NotJSONError as error:
        raise UsageError(
            f"call({name!r}, ...): arguments{error.path}: {error.problem}; arguments are "
            "what a model sends, a JSON object"
        ) from None
    return ToolCallPart(id, name, json.dumps(args), args)


def _not_arguments(name: str, arguments: object) -> str:
    """Why ``arguments`` (no dict, no text) cannot script a call, and what to give instead."""
    head = f"call({name!r}, ...): arguments are a dict or JSON text, got {type(arguments).__name__}"
    if (
        isinstance(arguments, (list, tuple))
        and arguments
        and all(
            isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)
            for pair in arguments
        )
    ):
        return f"{head} of (name, value) pairs: give them as a dict, call({name!r}, dict(pairs))"
    try:
        text = json.dumps(arguments)
    except (TypeError, ValueError):  # (a set, an object: no JSON value at all)
        return f"{head}, which is not JSON: give the arguments as a dict of JSON values"
    advice = repr(text) if len(text) <= EXCERPT else "json.dumps(arguments)"
    return (
        f"{head}; to script arguments that are not an object (the model then reads an "
        f"argument error), give them as text: call({name!r}, {advice})"
    )


def response_events(response: ModelResponse, chunk: int = 8) -> Iterator[StreamEvent]:
    """Neutral stream events that fold back into ``response``.

    Into exactly it when no two of its texts are in a row: a stream has no
    event that ends a text part but a call's start (a call keeps its place
    among the parts) or an image or file (one `MediaOutput`), so texts in a
    row fold into one text (joined in order). Each reasoning part is one piece
    that ends it (``ends=True``), so reasoning parts fold back as they were.

    ``chunk`` is the most characters of one text or arguments piece.

    Raises:
        UsageError: ``chunk`` is no int of at least 1 (-1 dropped every text,
            0 raised a bare ValueError).
    """
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise UsageError(
            f"response_events(response, chunk): chunk is the most characters of one text "
            f"piece, an int of at least 1, {_kind(chunk)}"
        )
    return _response_events(response, chunk)


def _response_events(response: ModelResponse, chunk: int) -> Iterator[StreamEvent]:
    yield ResponseInfo(response.model_name, response.response_id)
    index = 0
    for part in response.message.parts:
        if isinstance(part, TextPart):
            for piece in _chunks(part.text, chunk):
                yield TextDelta(piece)
        elif isinstance(part, ReasoningPart):
            yield ReasoningDelta(
                part.text, part.signature, part.provider, part.provider_data, ends=True
            )
        elif isinstance(part, ToolCallPart):
            yield ToolCallStart(index, part.id, part.name, part.provider_data)
            for piece in _chunks(part.arguments_text, chunk):
                yield ToolCallDelta(index, piece)
            yield ToolCallEnd(index)
            index += 1
        elif isinstance(part, (ImagePart, FilePart)):
            yield MediaOutput(part)
    yield UsageUpdate(response.usage)
    yield StreamFinish(response.finish_reason, response.raw_finish_reason)


def _chunks(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


class _BaseTestModel:
    """Shared plumbing: the four `Model` methods on top of `_reply`."""

    def __init__(self, name: str, keep_requests: bool = True) -> None:
        if not isinstance(name, str):  # (None failed at the run's first request, 5 in its config)
            raise UsageError(
                f"{type(self).__name__}(name=...): the model's name is a str "
                f"('provider:model', e.g. 'test:model'), {_kind(name)}"
            )
        self._name = name
        self.requests: list[ModelRequest] = []
        """Every request received, in order (for assertions); empty with ``keep_requests=False``."""
        self.keep_requests = keep_requests
        self._count_input = _InputCounter()

    def __setstate__(self, state: Any) -> None:
        # As pickle's own: the attributes, or (those, the slots) of a subclass with
        # ``__slots__`` (its copies too). One pickled before ``keep_requests``
        # existed (9b17df2c) kept every request.
        slots: dict[str, Any] | None = None
        if isinstance(state, tuple):
            state, slots = state
        self.__dict__.update({"keep_requests": True, **(state or {})})
        for name, value in (slots or {}).items():
            setattr(self, name, value)

    @property
    def name(self) -> str:
        """``provider:model``."""
        return self._name

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"

    def _reply(self, request: ModelRequest) -> Reply | Awaitable[Reply]:
        raise NotImplementedError

    def _checked(self, reply: object, source: str | None = None) -> Reply:
        """``reply`` once it is one (a function's answer: checked when it comes).

        Raises:
            UsageError: It is none, naming ``source`` (what gave it), what it
                is and what a reply is.
        """
        problem = reply_problem(reply)
        if problem is not None:
            source = source or f"{type(self).__name__}'s reply"
            raise testing_misuse(f"{source} is no reply: {problem}; give {_REPLY_KINDS}")
        return reply  # type: ignore[return-value]

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """One response, blocking."""
        if self.keep_requests:
            self.requests.append(request)
        reply = self._reply(request)
        if inspect.isawaitable(reply):
            pending = reply
            reply = run_blocking(lambda: _await(pending))
        return to_response(self._checked(reply), request, self._name, self._count_input)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One response, asynchronously."""
        if self.keep_requests:
            self.requests.append(request)
        reply = self._reply(request)
        if inspect.isawaitable(reply):
            reply = await reply
        return to_response(self._checked(reply), request, self._name, self._count_input)

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        return response_events(self.request_sync(request))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        for event in response_events(await self.request(request)):
            yield event

    # `ConnectedModel`'s methods, so code written for a provider's model (its
    # ``finally: model.close()``, a ``prepare(request).report`` check) runs
    # unchanged under `override_models`.

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """What a provider's model would send: here nothing, so an empty body.

        A test model sends no request body; the report names the model and
        says so (``report.notes``), so code reading a provider's report runs.
        """
        note = f"{type(self).__name__} {self._name} is a test model: it sends no request body"
        return Prepared({}, RequestReport(self._name.partition(":")[0], (note,)))

    def check_arguments(self, request: ModelRequest, call: ToolCallPart) -> Mapping[str, Any]:
        """Validate a call's arguments against its tool's schema in ``request``.

        A test model sends each tool's own schema, so this is the tool's
        schema check (a provider's model checks against the schema it sent).

        Raises:
            ArgumentJSONError: The argument text is not JSON.
            ArgumentValidationError: The arguments break the tool's schema,
                or name no tool of the request.
        """
        return generic_check_arguments(request, call)

    def close(self) -> None:
        """Nothing to close (a test model holds no HTTP client): a no-op."""

    async def aclose(self) -> None:
        """Nothing to close (a test model holds no HTTP client): a no-op."""


class ScriptedModel(_BaseTestModel):
    """A model that answers from a script, one entry per request.

    Each entry is the text of an answer, a tool call made with
    `ScriptedModel.call`, a list of text pieces and calls that form one
    response (parallel calls), a `Message`, a `ModelResponse`, or a function
    of the `ModelRequest` returning any of these. Calls without an id get a
    deterministic one.

    Example:
        >>> model = ScriptedModel([
        ...     ScriptedModel.call("get_weather", {"city": "Paris"}),
        ...     "It is sunny in Paris.",
        ... ])

    Args:
        script: The entries, in the order requests will consume them.
        name: The model name (``provider:model``) reported to the run.
        keep_requests: Keep every request in ``requests`` (for assertions).
            False for long runs (load tests, benchmarks, demos): the model
            then holds no request, and of the conversations only the last 8
            (to count a request's words from the one before), a bound.

    Raises:
        UsageError: ``script`` is not a list (an iterable) of entries (one
            text, a dict, None: ``ScriptedModel("hi")`` would answer "h",
            then "i"), or an entry is none of these (None, a number, a dict, bytes,
            a message of another role than ``assistant``, a tool result),
            naming its index; at request time, when the script has no entry
            left, or a function entry returns none of these.
    """

    call = staticmethod(make_call)

    def __init__(
        self,
        script: Iterable[ScriptEntry],
        *,
        name: str = "scripted:model",
        keep_requests: bool = True,
    ) -> None:
        super().__init__(name, keep_requests)
        given: object = script
        # One answer is no script: a text would become one answer per letter.
        if isinstance(given, (str, bytes, bytearray, Mapping, Message, ModelResponse)) or not (
            isinstance(given, Iterable)
        ):
            # Wrapping it in a list is the advice only for a value that is an entry.
            advice = (
                f"for one answer, write ScriptedModel([{given!r:.40}])"
                if callable(given) or reply_problem(given) is None
                else f"each entry is {_REPLY_KINDS}"
            )
            raise UsageError(
                "ScriptedModel(script): the script is a list of entries (one per request), "
                f"got {type(given).__name__} {given!r:.60}; {advice}"
            )
        self._script = list(script)
        for index, entry in enumerate(self._script):
            if not callable(entry):
                self._checked(entry, f"ScriptedModel script entry {index}")
        self._position = 0
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        """How many entries have not been used yet."""
        return len(self._script) - self._position

    def _reply(self, request: ModelRequest) -> Reply | Awaitable[Reply]:
        with self._lock:
            if self._position >= len(self._script):
                raise testing_misuse(
                    f"ScriptedModel has no entry left for request {self._position + 1} "
                    f"(the script has {len(self._script)}); add entries to the script"
                )
            index = self._position
            entry = self._script[index]
            self._position += 1
        if not callable(entry):
            return entry
        reply = entry(request)
        source = f"ScriptedModel script entry {index} (a function) returned a value that"
        if inspect.isawaitable(reply):
            return self._checked_later(reply, source)
        return self._checked(reply, source)

    async def _checked_later(self, pending: Awaitable[object], source: str) -> Reply:
        return self._checked(await pending, source)


def _named(function: object) -> str:
    return getattr(function, "__qualname__", None) or type(function).__name__


def _check_function(param: str, function: object) -> None:
    """Refuse a ``FunctionModel`` argument that is no function, naming ``param`` and what it is.

    Raises:
        UsageError: ``function`` is not callable.
    """
    if not callable(function):
        raise UsageError(
            f"FunctionModel({'' if param == 'function' else param + '='}...): expected a "
            f"function of the ModelRequest, {_kind(function)}"
            + (
                f"; to answer with this text, return it: FunctionModel(lambda request: "
                f"{function!r:.40})"
                if isinstance(function, str) and param == "function"
                else ""
            )
        )


class FunctionModel(_BaseTestModel):
    """A model whose answers come from a function of the request.

    Example:
        >>> def reply(request):
        ...     if request.messages[-1].role == "tool":
        ...         return "Done: " + request.messages[-1].tool_results[0].content
        ...     return FunctionModel.call("add", {"a": 1, "b": 2})
        >>> model = FunctionModel(reply)

    Args:
        function: Called with each `ModelRequest`; returns (or, if async,
            resolves to) text, a tool call, a list of text and calls, a
            `Message` or a `ModelResponse`.
        stream_function: Optional; called with the request, returns the
            neutral stream events to yield (to test stream handling exactly).
            Without it, streams are made from ``function``'s response.
        name: The model name (``provider:model``) reported to the run.
        keep_requests: Keep every request in ``requests`` (for assertions).
            False for long runs (load tests, benchmarks, demos): the model
            then holds no request, and of the conversations only the last 8
            (to count a request's words from the one before), a bound.

    Usage a reply or a stream gives with tokens only (``Usage(input_tokens=7,
    output_tokens=3)``) counts one request, as a provider's does.

    Raises:
        UsageError: ``function`` or ``stream_function`` is not callable, or
            ``stream_function`` is async (its events are taken without
            awaiting it); at request time, when ``function`` returns no
            reply or ``stream_function`` no iterable of events (None, an
            async generator).
    """

    call = staticmethod(make_call)

    def __init__(
        self,
        function: Callable[[ModelRequest], Reply | Awaitable[Reply]],
        *,
        stream_function: Callable[[ModelRequest], Iterable[StreamEvent]] | None = None,
        name: str = "function:model",
        keep_requests: bool = True,
    ) -> None:
        super().__init__(name, keep_requests)
        _check_function("function", function)
        if stream_function is not None:
            _check_function("stream_function", stream_function)
            if inspect.isasyncgenfunction(stream_function) or inspect.iscoroutinefunction(
                stream_function
            ):
                raise UsageError(
                    f"FunctionModel(stream_function=...): {_named(stream_function)} is async; "
                    "the stream events are taken without awaiting it: write it as a plain "
                    "function returning them, or a generator yielding them"
                )
        self.function = function
        self.stream_function = stream_function

    def _reply(self, request: ModelRequest) -> Reply | Awaitable[Reply]:
        return self.function(request)

    def _checked(self, reply: object, source: str | None = None) -> Reply:
        return super()._checked(reply, source or "FunctionModel's function returned a value that")

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        if self.stream_function is None:
            return super().stream_sync(request)
        if self.keep_requests:
            self.requests.append(request)
        return _counted(self._stream_events(self.stream_function, request))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        if self.stream_function is None:
            async for event in super().stream(request):
                yield event
            return
        if self.keep_requests:
            self.requests.append(request)
        for event in _counted(self._stream_events(self.stream_function, request)):
            yield event

    @staticmethod
    def _stream_events(
        stream_function: Callable[[ModelRequest], Iterable[StreamEvent]], request: ModelRequest
    ) -> Iterable[StreamEvent]:
        """What ``stream_function`` gave for ``request``, once it is an iterable of events.

        Raises:
            UsageError: It gave None, an async iterable or what is not iterable.
        """
        events: object = stream_function(request)
        if hasattr(events, "__aiter__") or inspect.isawaitable(events):
            if inspect.iscoroutine(events):
                events.close()  # (never awaited: no "was never awaited" warning)
            raise testing_misuse(
                f"FunctionModel's stream_function returned {type(events).__name__}: it is "
                "called without being awaited, and returns (or, as a generator, yields) the "
                "stream events; write it as a plain function or generator"
            )
        if isinstance(events, (str, bytes, Mapping)) or not isinstance(events, Iterable):
            raise testing_misuse(
                f"FunctionModel's stream_function returned {_kind(events)[4:]}: it returns (or, "
                "as a generator, yields) the stream events (TextDelta, ToolCallStart, ..., "
                "StreamFinish)"
            )
        return events


def _counted(events: Iterable[StreamEvent]) -> Iterator[StreamEvent]:
    """``events``, a usage among them counting one request if it counts none (`answer_usage`)."""
    for event in events:
        if isinstance(event, UsageUpdate):
            usage = answer_usage(event.usage)
            if usage is not event.usage:
                event = UsageUpdate(usage)
        yield event


class TestModel(_BaseTestModel):
    """A model that calls each tool once, then summarises the results.

    On the first request of a turn it calls every tool it is offered (or the
    ones named in ``call_tools``), all in one response, with arguments
    generated from each tool's JSON Schema. Once tool results are in the
    conversation it answers: with ``text`` if given, with a JSON value that
    fits the requested output schema when the run asks for structured output,
    or with a summary of the tool results.

    Args:
        call_tools: ``"all"``, or the name of the tool to call, or a list of
            names. Each name must be a tool of every request the model gets
            (a typo would call nothing): give each agent its own `TestModel`
            when their tools differ.
        text: The final answer to give instead of the summary.
        output: The structured answer to give instead of one generated from
            the output schema: a JSON value, or a value of the output type (a
            dataclass, attrs class or pydantic model instance, an enum
            member, a date, a `Decimal`, a set...), written as JSON the way
            toolfold writes a tool's result. None (the default) generates
            one: to script a null answer, use ``ScriptedModel(["null"])``.
        name: The model name (``provider:model``) reported to the run.
        keep_requests: Keep every request in ``requests`` (for assertions).
            False for long runs (load tests, benchmarks, demos): the model
            then holds no request, and of the conversations only the last 8
            (to count a request's words from the one before), a bound.

    Raises:
        UsageError: ``call_tools`` is neither ``"all"``, a name nor a list of
            names (None, a number, an empty name); ``output`` cannot be
            written as JSON (an object of a class toolfold does not know,
            bytes); at request time, when a name is no tool of the request
            (naming it and the tools there are).
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        *,
        call_tools: str | Sequence[str] = "all",
        text: str | None = None,
        output: Any = None,
        name: str = "test:model",
        keep_requests: bool = True,
    ) -> None:
        super().__init__(name, keep_requests)
        self.call_tools: str | tuple[str, ...] = _tool_names(call_tools)
        self.text = text
        if output is not None:
            _output_text(output)  # (refused now, not at the run's last request)
        self.output = output

    def _reply(self, request: ModelRequest) -> Reply:
        results = _results_this_turn(request.messages, request.output is not None)
        tools = self._tools_to_call(request)
        if results is None and tools:
            return [make_call(t.name, _arguments_for(t)) for t in tools]
        if request.output is not None:
            if self.output is not None:
                return _output_text(self.output)
            return json.dumps(_output_for(request.output.schema))
        if self.text is not None:
            return self.text
        if not results:
            return "Hello! I am a test model; I have nothing to call."
        lines = [f"- {r.tool_name}: {r.content}" for r in results]
        return "Here is what the tools returned:\n" + "\n".join(lines)

    def _tools_to_call(self, request: ModelRequest) -> list[Any]:
        if request.tool_choice == "none":
            return []
        tools = list(request.tools)
        if request.tool_choice not in (None, "auto", "required"):
            return [t for t in tools if t.name == request.tool_choice]
        if self.call_tools == "all":
            return tools
        names = {t.name for t in tools}
        unknown = [n for n in self.call_tools if n not in names]
        if unknown:
            raise testing_misuse(
                f"TestModel(call_tools=...) names {', '.join(map(repr, unknown))}, no tool of "
                f"this request (its tools: {', '.join(map(repr, sorted(names))) or 'none'}); "
                "name tools the agent has (a model shared by agents with other tools: give "
                "each its own TestModel)"
            )
        return [t for t in tools if t.name in self.call_tools]


def _tool_names(call_tools: object) -> str | tuple[str, ...]:
    """``TestModel``'s ``call_tools`` as ``"all"`` or a tuple of names (one name: a tuple of it).

    Raises:
        UsageError: It is none of ``"all"``, a name or a list of names.
    """
    if isinstance(call_tools, str):
        names: tuple[object, ...] = (call_tools,)
        if call_tools == "all":
            return "all"
    elif isinstance(call_tools, (bytes, bytearray, Mapping)) or not isinstance(
        call_tools, Iterable
    ):
        raise UsageError(
            f"TestModel(call_tools=...): expected 'all', a tool's name or a list of names, "
            f"{_kind(call_tools)}"
        )
    else:
        names = tuple(call_tools)
    for index, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise UsageError(
                f"TestModel(call_tools=...): item {index} is no tool name: {_kind(name)}"
            )
    return cast("tuple[str, ...]", names)


def _output_text(value: Any) -> str:
    """``TestModel``'s ``output`` as the JSON text of the answer, typed values unstructured.

    Raises:
        UsageError: It holds what has no JSON form (naming it).
    """
    from toolfold.toolkit._converter import get_converter

    try:
        return json.dumps(get_converter().unstructure(value))
    except (TypeError, ValueError, RecursionError) as exc:
        raise UsageError(
            f"TestModel(output=...): {_kind(value)[4:]} cannot be written as JSON "
            f"({exc}); give a JSON value or a value of the output type (a dataclass, attrs "
            "class or pydantic model instance, an enum member, a date...)"
        ) from None


def _output_for(schema: Mapping[str, Any]) -> Any:
    """A final output that fits the run's output ``schema``.

    Raises:
        UsageError: None could be made (naming the keyword and the path).
    """
    hint = "pass `TestModel(output=...)` a value that fits the output schema"
    try:
        return sample_for(schema, hint=hint)
    except UsageError as exc:
        raise testing_misuse(f"TestModel cannot make the run's output: {exc}") from None


def _arguments_for(tool: ToolDefinition) -> Any:
    """Arguments for a call of ``tool`` that fit its schema.

    Raises:
        UsageError: None could be made (naming the tool and the parameter).
    """
    try:
        return sample_value(dict(tool.parameters))
    except UsageError as exc:
        raise testing_misuse(
            f"TestModel cannot make arguments for tool {tool.name!r}: {exc}"
        ) from None


def _results_this_turn(messages: Sequence[Message], has_output: bool) -> list[Any] | None:
    """Tool results since the last user message, or None when there are none.

    The message asking again for a final answer that did not fit the output
    type is no new turn (its tools were called): a `TestModel` answers it
    again instead of calling every tool once more. Only a request with an
    output type can be such a retry: without one a user message starting so is
    a new turn.
    """
    found: list[Any] = []
    for message in reversed(messages):
        if message.role == "user" and not (has_output and _is_rejection(message)):
            break
        found[:0] = message.tool_results
    return found or None


def _is_rejection(message: Message) -> bool:
    """Whether ``message`` (a user message) is the run asking again for its final answer."""
    parts = message.parts
    return (
        len(parts) == 1
        and isinstance(parts[0], TextPart)
        and parts[0].text.startswith(REJECTION_HEAD)
        and parts[0].text.endswith(REJECTION_TAIL)
    )


@contextlib.contextmanager
def override_models(model: Model | Callable[[str], Model]) -> Iterator[list[str]]:
    """Resolve every ``"provider:model"`` string to a test model while the block runs.

    Code written for a real provider (``Agent("openai:gpt-4o-mini", ...)``,
    ``generate_text("groq:...", ...)``, ``toolfold.model("mistral:...")``) runs
    unchanged against a test model: no key, no network. The string must still
    name a known provider (a typo still raises `ModelConfigError`), and a
    ``local:`` one a known model or a ``.gguf`` path (the file need not exist
    here); options
    given with it (``api_key``, ``base_url``...) are ignored. An agent made
    from a string outside any block (a module-level ``Agent("openai:...")``)
    is overridden in the runs that start inside it: its string is resolved
    once per agent and block (under a lock, for threads sharing the block;
    again at the next run if the function raised) and the model reused by
    its later runs, resumes and handoffs there, concurrent ones included.
    An agent made inside a block keeps that block's model, in inner blocks
    too. Such an agent still builds its real model when it is
    made (a missing API key raises then): in a test without real keys, set
    any value for the provider's variable; nothing is sent. Model objects
    passed directly are left alone, one made earlier with
    ``toolfold.model(...)`` included. The override holds in the current
    thread and in the asyncio tasks started inside the block; blocks nest.
    A run begun inside it keeps it after it ends: ``agent.arun(...)`` called
    inside and awaited after, a stream made inside and iterated after (their
    handoffs and sub-agents too).

    Args:
        model: The model every string resolves to, or a function of the model
            string returning one (e.g. a fresh `TestModel` per string). The
            testing models are `ConnectedModel` objects, as
            ``toolfold.model(string)`` is typed; a model of your own needs
            ``close``, ``aclose``, ``prepare`` and ``check_arguments`` too if
            the code under test calls them (it is not checked).

    Raises:
        UsageError: ``model`` is neither (None, a string, a model class: pass
            an instance); when a string is resolved, if the function returned
            no model for it (None for a string it has no model for).

    Yields:
        The model strings resolved inside the block, in order (an agent made
        outside any block: once, at its first run in the block).

    Example:
        >>> from toolfold import generate_text
        >>> from toolfold.testing import TestModel, override_models
        >>> with override_models(TestModel(text="Hi!")) as resolved:
        ...     generate_text("openai:gpt-4o-mini", "Hello").text
        'Hi!'
        >>> resolved
        ['openai:gpt-4o-mini']
    """
    resolved: list[str] = []
    given: object = model
    if isinstance(given, type):  # (a class has a model's attributes: it passed for one)
        raise UsageError(f"override_models(model): expected a model object, got {a_class(given)}")
    if not isinstance(given, Model) and not callable(given):
        raise UsageError(
            f"override_models(model): expected a model object or a function of the model "
            f"string returning one, {_kind(given)}"
        )

    def resolve(spec: str) -> Model:
        found: object = model if isinstance(model, Model) else model(spec)
        if isinstance(found, type) or not isinstance(found, Model):
            raise UsageError(
                f"override_models's function returned {_kind(found)[4:]} for {spec!r}: it "
                "must return a model object (e.g. TestModel()) for every model string "
                "resolved in the block"
            )
        # Recorded once the function has answered: one that raised is called
        # again at the next run, and the string is listed once per agent.
        resolved.append(spec)
        return found

    token = MODEL_OVERRIDE.set(ModelOverride(resolve))
    try:
        yield resolved
    finally:
        MODEL_OVERRIDE.reset(token)
