"""The contract between the loop and the providers.

The runtime asks a `Model` for one response to a `ModelRequest`; adapters turn
that into HTTP and back. Streams arrive as neutral `StreamEvent` values and are
folded by the pure `fold_stream` reducer into the same `ModelResponse` that a
non-streaming call gives.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import inspect
import re
import sys
import threading
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, ParamSpec, Protocol, TypeVar, cast, overload, runtime_checkable

import attrs

from toolfold._errors import (
    ModelConfigError,
    UsageError,
)
from toolfold.runtime.core._messages import ToolCallPart
from toolfold.runtime.core._repr import a_class, value_or_type
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._stream import StreamEvent
from toolfold.toolkit._tool import mark_coroutine_function


@runtime_checkable
class Model(Protocol):
    """What the loop needs of a model. Adapters and test models implement it."""

    @property
    def name(self) -> str:
        """``provider:model``, e.g. ``openai:gpt-4o-mini``."""
        ...

    async def request(self, request: ModelRequest) -> ModelResponse:
        """One response, asynchronously."""
        ...

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """One response, blocking."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The response as neutral stream events, asynchronously."""
        ...

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """The response as neutral stream events, blocking."""
        ...


@attrs.frozen
class RequestReport:
    """What encoding a neutral request for one API changed or left out.

    Attributes:
        provider: The provider the request was encoded for.
        notes: One sentence per change, in message order (empty: sent as given).
    """

    provider: str
    notes: tuple[str, ...] = ()


@attrs.frozen
class Prepared:
    """A request body ready to send, with the report of how it was made.

    Attributes:
        body: The JSON body.
        report: What was dropped or rewritten on the way.
        headers: Extra headers this request needs (e.g. a beta flag), if any.
    """

    body: dict[str, Any]
    report: RequestReport
    headers: Mapping[str, str] | None = None


@runtime_checkable
class ConnectedModel(Model, Protocol):
    """A `Model` that can be closed and asked what it sends: what `model` builds from a string.

    Every model a ``provider:model`` string gives has these methods: the
    built-in providers' models (``openai:``, ``anthropic:``, ``gemini:``,
    ``ollama:``, ``openai-responses:``, the OpenAI-compatible family and
    ``local:``), the testing models `override_models` substitutes (their
    ``close``/``aclose`` do nothing, ``prepare`` gives an empty body and a
    report saying it is a test model), and a provider's model registered with
    `register_provider` (whose factory must return one). Implement `Model` for
    a model you pass as an object.
    """

    def prepare(self, request: ModelRequest, *, stream: bool = False) -> Prepared:
        """The body this model sends for ``request``, and what encoding changed.

        Nothing is sent. ``prepare(request).report.notes`` says, one sentence per
        change, what could not be sent as given (another provider's reasoning
        left out, a placeholder signature added...).
        """
        ...

    def check_arguments(self, request: ModelRequest, call: ToolCallPart) -> Mapping[str, Any]:
        """Validate a call's arguments against the schema this model sent for its tool.

        Raises:
            ArgumentJSONError: The argument text is not JSON.
            ArgumentValidationError: The arguments break the schema sent, or
                name no tool of the request.
        """
        ...

    def close(self) -> None:
        """Close the blocking HTTP client this model made (an injected one stays open)."""
        ...

    async def aclose(self) -> None:
        """Close the HTTP clients this model made, async ones included (injected ones stay open)."""
        ...


def generic_check_arguments(request: ModelRequest, call: ToolCallPart) -> Mapping[str, Any]:
    """Validate a call's arguments against its tool's own schema in ``request``.

    The check of a model that sends each tool's schema as given (the testing
    models). It words a problem as a provider's model does (same ``$.path``
    form, same order, arguments that are not an object refused), and where
    the schemas agree gives the same verdict, with two differences: it also
    checks ``format`` (``"email"``, ``"date"``...) and a decimal
    ``multipleOf`` as the tool itself does, and a provider's model checks
    against the schema it sent (which strict mode changes) instead.

    Raises:
        ArgumentJSONError: The argument text is not JSON.
        ArgumentValidationError: The arguments break the tool's schema (each
            error with its ``$.path``), are not an object, or name no tool of
            the request.
    """
    from toolfold.runtime.core._arguments import call_arguments, validate_arguments
    from toolfold.toolkit._arguments import compile_validator

    tool, arguments = call_arguments(request, call)
    return validate_arguments(call.name, compile_validator(tool.parameters), arguments)


ModelFactory = Callable[..., ConnectedModel]
_M = TypeVar("_M", bound=Model)
_PROVIDERS: dict[str, ModelFactory] = {}
#: A built-in provider's check of a model name, by prefix (``toolfold.local`` fills
#: its own): called by `model` with the name and whether `override_models` is on
#: (``toolfold check`` resolves strings so), before the factory or the override;
#: raises for a name the provider cannot serve.
_NAME_CHECKS: dict[str, Callable[[str, bool], object]] = {}
#: Set by ``toolfold check``: its `override_models` only spares it API keys, so
#: model names are checked as a run would check them (a missing ``.gguf`` file
#: fails there, not under a user's `override_models`).
_FULL_NAME_CHECK: ContextVar[bool] = ContextVar("toolfold_full_name_check", default=False)

#: The options `model` passes to a provider's model class: how to reach the
#: model (key, URL, clients, limits, timeout, retry, headers...), none of them
#: a setting sent with a request. `Agent` and `generate_text` refuse these
#: names as model settings (``Agent(..., api_key=...)`` sent the key in every
#: request body and stored it in the run's state). The runtime cannot import
#: the adapters that define them; a test checks this is exactly the keyword
#: parameters of the built-in model classes (their ``provider=`` aside, which
#: a model string's prefix sets).
MODEL_OPTIONS = frozenset(
    {
        "api_key",
        "async_http_client",
        "base_url",
        "headers",
        "http",
        "http_client",
        "limits",
        "progress",
        "retry",
        "schema_form",
        "server",
        "stream_format",
        "timeout",
        "trust_env",
    }
)

#: The options of `MODEL_OPTIONS` that are a credential or a client object
#: (how to reach the provider): refused as a model setting however given,
#: ``Agent(m, api_key=...)`` or ``settings={"api_key": ...}``. The others
#: (``timeout``, ``retry``, ``headers``, ``server``...) are ordinary names a
#: provider's request body may have (orq.ai takes ``timeout`` and ``retry``
#: objects), or a user's own model may read: refused only as a bare keyword,
#: taken in ``settings={...}``.
CLIENT_OPTIONS = frozenset(
    {"api_key", "async_http_client", "base_url", "http", "http_client", "limits", "trust_env"}
)


def register_provider(prefix: str, factory: ModelFactory) -> None:
    """Make ``prefix:model-name`` strings resolve through ``factory``.

    ``toolfold.model("prefix:...")`` is typed as a `ConnectedModel`, so the
    factory's model must have its methods besides `Model`'s: ``prepare``
    (the body it would send, and a `RequestReport`), ``check_arguments``,
    ``close`` and ``aclose`` (no-ops if it holds nothing to close). The
    registration is not checked: a model without them fails only when
    code calls a missing method.

    Args:
        prefix: The provider prefix, e.g. ``"openai"``.
        factory: Called as ``factory(model_name, **options)``; returns a
            `ConnectedModel`.
    """
    _PROVIDERS[prefix] = factory


@overload
def model(spec: str, **options: Any) -> ConnectedModel: ...


@overload
def model(spec: _M) -> _M: ...


def model(spec: str | Model, **options: Any) -> Model:
    """Build a model from a ``provider:model`` string, or pass a model through.

    A string gives a `ConnectedModel` (``close``, ``aclose``, ``prepare``,
    ``check_arguments``); a model object comes back as given.

    Args:
        spec: ``"openai:gpt-4o-mini"``, ``"openai-compatible:my-model"`` (with
            ``base_url=``), ... or a `Model` object.
        **options: ``base_url``, ``api_key``, ``http_client``, timeouts,
            retries: whatever the provider accepts.

    Raises:
        ModelConfigError: The string has no known provider prefix, or an
            option is no option of its provider (a model setting such as
            ``temperature`` given here: it goes to ``Agent``/``generate_text``).
        UsageError: ``spec`` is a model class, not a model object.
    """
    if not isinstance(spec, str):
        if isinstance(spec, type):
            # (A class has a model's attributes, so it passed for one: its runs
            # failed at the first call, its name being a property object.)
            raise UsageError(
                f"model: expected a provider:model string or a Model object, got {a_class(spec)}"
            )
        missing = _not_a_model(spec)
        if missing:
            # (passed through, it failed later and far away: 'int' has no attribute 'name')
            got = value_or_type(spec)  # (not its repr: a dict or a user's object may hold a key)
            if type(spec).__module__ != "builtins":  # (a user's object: what it lacks)
                got += f": {missing}"
            raise UsageError(
                f"model: expected a provider:model string or a Model object, got {got}"
            )
        if options:
            raise ModelConfigError("options can only be given with a model string")
        return spec
    factory, name = _factory(spec)
    override = MODEL_OVERRIDE.get()
    check = _NAME_CHECKS.get(spec.partition(":")[0])
    if check is not None:
        # (overridden too: a typo fails any run)
        check(name, override is not None and not _FULL_NAME_CHECK.get())
    if override is not None:
        return override(spec)
    try:
        return factory(name, **options)
    except TypeError as error:
        unknown = _unexpected_keyword(error, options)
        if unknown is None:
            raise
        raise ModelConfigError(_unknown_option(spec, unknown, factory)) from None


#: The connection options a built-in provider's model may take (``model()``'s
#: ``**options``), for `_unknown_option`'s suggestion: it names only those the
#: chosen provider's model takes (`_keywords`).
CONNECTION_OPTIONS = (
    "base_url",
    "api_key",
    "timeout",
    "retry",
    "headers",
    "http_client",
    "async_http_client",
    "http",
    "limits",
    "trust_env",
    "server",
)
# Options of other libraries' clients that are a header here (the OpenAI SDK's
# ``organization=`` and ``project=`` send these): as a model setting, the hint given
# for an unknown option, they would be request body fields the API does not take.
_HEADER_OPTIONS = {"organization": "OpenAI-Organization", "project": "OpenAI-Project"}
_OPENAI_PREFIXES = ("openai", "openai-responses")  # (OpenAI's API, whose headers they are)
# Names other libraries give a connection option, and toolfold's name for it.
_OPTION_ALIASES = {
    "max_retries": "retry",
    "retries": "retry",
    "api_base": "base_url",
    "base": "base_url",
    "url": "base_url",
    "endpoint": "base_url",
    "key": "api_key",
    "default_headers": "headers",
    "extra_headers": "headers",
    "client": "http_client",
    # (the OpenAI SDK's AzureOpenAI: its Entra ID token is sent as the bearer key)
    "azure_endpoint": "base_url",
    "azure_ad_token": "api_key",
}
# Options of other libraries' clients that add a query parameter to each request's URL
# (the OpenAI SDK's ``extra_query=``, ``default_query=``; AzureOpenAI's ``api_version=``
# sends ``?api-version=``): toolfold adds none of its own (`QUERY_HINT` says what to do).
_QUERY_OPTIONS = frozenset({"api_version", "extra_query", "default_query"})
#: What to do for a query parameter a server needs in each request's URL: toolfold's
#: models add none, and refuse a ``?query`` in ``base_url`` (each request's path is
#: added after it).
QUERY_HINT = (
    "a query parameter a server reads goes in an httpx client given to the model, "
    "e.g. toolfold.model(..., base_url=..., http_client=httpx.Client(params={'api-version': "
    "...})); for Azure OpenAI, use its v1 API (base_url='https://<resource>.openai.azure.com"
    "/openai/v1'), which needs no api-version"
)
#: Other libraries' names for an option of `model` (the OpenAI SDK's ``max_retries=``,
#: ``extra_headers=``, ``organization=``, ``api_version=``...; `other_clients_option`
#: says which): `Agent` and `generate_text` refuse them as model settings given as
#: keywords, as `MODEL_OPTIONS` (they were sent in every request body and stored in the
#: run's state, a token given so included). ``endpoint`` is left out: it is a field of
#: OpenAI's batch requests (a test checks none of these is a request body field of the
#: providers' specs); so are the generic ``url``, ``key`` and ``base``, which a user's
#: own model may read as settings.
OTHER_CLIENTS_OPTIONS = frozenset(
    {*_OPTION_ALIASES, *_HEADER_OPTIONS, *_QUERY_OPTIONS} - {"endpoint", "url", "key", "base"}
)


def other_clients_option(name: str, spec: str | None) -> str | None:
    """What `model` takes for ``name``, another library's name for one of its options.

    Args:
        name: A keyword (``"max_retries"``).
        spec: The model's ``provider:model`` (None: not known). The OpenAI
            SDK's ``organization=`` and ``project=`` are OpenAI's headers, for
            OpenAI's models only (`_OPENAI_PREFIXES`).

    Returns:
        The option as given to `model`: ``"retry=..."``,
        ``"headers={'OpenAI-Organization': ...}"``; ``""`` for an option that
        adds a query parameter (`model` has none: `QUERY_HINT`); None if
        ``name`` is no other library's option for this model.
    """
    header = _HEADER_OPTIONS.get(name)
    if header is not None:
        return f"headers={{{header!r}: ...}}" if _is_openai(spec) else None
    alias = _OPTION_ALIASES.get(name)
    if alias is not None:
        return f"{alias}=..."
    return "" if name in _QUERY_OPTIONS else None


def _is_openai(spec: str | None) -> bool:
    """Whether ``spec`` (``provider:model``, or None) names a model of OpenAI's API."""
    return spec is not None and spec.partition(":")[0] in _OPENAI_PREFIXES


def _keywords(factory: ModelFactory) -> frozenset[str] | None:
    """The keywords ``factory`` takes after the model's name, or None if unknown.

    A factory that hands its ``**options`` on (``anthropic_model(name,
    **options)``) takes those of the model class its return annotation names
    (``provider=``, which some factories set themselves, is in no suggestion:
    it is not in `CONNECTION_OPTIONS`).
    """
    try:
        signature = inspect.signature(factory, eval_str=True)
    except (TypeError, ValueError, NameError):
        return None
    params = list(signature.parameters.values())[1:]
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        return frozenset(names)
    made = signature.return_annotation
    if isinstance(factory, type) or not isinstance(made, type):
        return None
    try:
        passed = inspect.signature(made).parameters
    except (TypeError, ValueError):
        return None
    return frozenset(names | set(list(passed)[1:]))


def _unknown_option(spec: str, unknown: str, factory: ModelFactory | None = None) -> str:
    """What `model` says of ``unknown``, an option its provider does not take.

    A near miss of a connection option the provider's model takes
    (``base_ulr=``, ``max_retries=``) is told the option's name; ``settings=``
    where settings go; any other name where a model setting goes, if it is one
    (said so: advice taken for a misspelt option would send its name to the
    provider as a setting). An option of another provider (``server=`` given to
    Anthropic) is not suggested back.
    """
    taken = _keywords(factory) if factory is not None else None
    known = tuple(o for o in CONNECTION_OPTIONS if o != unknown and (taken is None or o in taken))
    head = f"model({spec!r}, {unknown}=...): {unknown!r} is no option of the model"
    if unknown in _QUERY_OPTIONS:
        return f"{head}: other clients' {unknown}= adds a query parameter to the URL; {QUERY_HINT}"
    alias = _OPTION_ALIASES.get(unknown)
    close = alias if alias in known else None
    close = close or next(iter(difflib.get_close_matches(unknown, known, n=1, cutoff=0.6)), None)
    if close is not None:
        return f"{head}; did you mean {close}=? (its options are the connection's)"
    options = ", ".join(known[:5])
    header = _HEADER_OPTIONS.get(unknown)
    if header is not None and _is_openai(spec):
        return (
            f"{head}; other clients' {unknown}= is the {header} header here: "
            f"toolfold.model({spec!r}, headers={{{header!r}: ...}})"
        )
    if unknown == "settings":
        return (
            f"{head} (its options are the connection's: {options}...); model settings go to "
            "the run: Agent(model, settings={...}) or generate_text(model, ..., settings={...})"
        )
    return (
        f"{head} (its options are the connection's: {options}...); if it is a model setting "
        f"(temperature, max_tokens...), it goes to the run and is sent to the provider as given: "
        f"Agent(model, {unknown}=...) or generate_text(model, ..., {unknown}=...)"
    )


_UNEXPECTED = re.compile(r"got an unexpected keyword argument '(\w+)'")


def _unexpected_keyword(error: TypeError, options: dict[str, Any]) -> str | None:
    """The option of ``options`` that ``error`` says the factory does not take, or None
    (another TypeError, raised for another reason, goes on as it is)."""
    match = _UNEXPECTED.search(str(error))
    return match[1] if match is not None and match[1] in options else None


def _factory(spec: str) -> tuple[ModelFactory, str]:
    """The provider factory of a model string, and the model's name after the prefix.

    Raises:
        ModelConfigError: The string is not ``provider:model``, or names no
            known provider.
    """
    prefix, sep, name = spec.partition(":")
    if not sep or not name:
        raise ModelConfigError(
            f"model string {spec!r} must look like 'provider:model', e.g. 'openai:gpt-4o-mini'"
        )
    if prefix not in _PROVIDERS:
        _load_builtin_adapters()
    factory = _PROVIDERS.get(prefix)
    if factory is None:
        raise ModelConfigError(unknown_provider(spec))
    return factory, name


def unknown_provider(spec: str) -> str:
    """The error for ``spec``, a model string whose prefix names no registered provider."""
    prefix = spec.partition(":")[0]
    if prefix not in _PROVIDERS:
        _load_builtin_adapters()
    close = difflib.get_close_matches(prefix.lower(), _PROVIDERS, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    known = ", ".join(sorted(_PROVIDERS)) or "none"
    return f"unknown provider {prefix!r} in {spec!r}{hint}; known providers: {known}"


# What the loop calls on a model: one of them at least (a model may serve only
# blocking runs, or only async ones), with its ``name``.
_REQUESTS = ("request", "request_sync", "stream", "stream_sync")


def _not_a_model(value: object) -> str:
    """What ``value``, given for a model, lacks of one ("" if nothing): its ``name`` or a
    request method. Lenient on purpose: a user's model need not have every `Model` method."""
    if not hasattr(value, "name"):
        return "it has no name"
    if not any(callable(getattr(value, method, None)) for method in _REQUESTS):
        return "it has no request method: " + ", ".join(_REQUESTS)
    return ""


def agent_model(spec: str | Model) -> tuple[Model, str | None]:
    """The model of an agent's ``model=``, and the string a run may resolve again.

    A model object is used as it is (None: nothing to resolve again). A string
    inside an `override_models` block resolves to the override's model, as
    `model` does, for good (None). Outside one, it is built by its provider at
    once, as `model` builds it (a missing API key or a bad setting raises
    here), and returned with the string: a run that starts inside a block
    later resolves the string to the override's model instead (`in_force`),
    so an agent made at import time (a module-level ``Agent("openai:...")``)
    is overridden too.

    Raises:
        ModelConfigError: The string is not ``provider:model``, names no known
            provider, or its provider cannot be built (no API key, a bad
            setting such as ``OLLAMA_HOST``).
    """
    again = spec if isinstance(spec, str) and MODEL_OVERRIDE.get() is None else None
    return model(spec), again


def in_force(built: Model, spec: str | None) -> Model:
    """The model a run starting now calls: the override's for ``spec`` inside a block.

    Inside a block, an agent made before it resolves its string once, and its
    later runs, resumes and handoffs in that block reuse that model
    (`ModelOverride.again`), as an agent made inside the block keeps the model
    it resolved then. ``built`` (the model the agent built when it was made,
    which its per-run copies share) tells one agent from another: two agents
    on the same string get a model each.
    """
    if spec is None:
        return built
    override = MODEL_OVERRIDE.get()
    if override is None:
        return built
    return override.again(built, spec)


class ModelOverride:
    """What model strings resolve to in an `override_models` block.

    Args:
        resolve: The model of a string (the override's model, or its function
            called); it records the string as resolved.
    """

    def __init__(self, resolve: Callable[[str], Model]) -> None:
        self._resolve = resolve
        # (id of the agent's built model, its string) -> (that model, kept so
        # the id stays its own while the block lasts; the override's model)
        self._again: dict[tuple[int, str], tuple[Model, Model]] = {}
        # Threads started with copy_context share the block: one resolve each.
        self._lock = threading.RLock()

    def __call__(self, spec: str) -> Model:
        """The model of ``spec`` for something made inside the block."""
        return self._resolve(spec)

    def again(self, built: Model, spec: str) -> Model:
        """The model of ``spec`` for a run of the agent that built ``built`` before the block.

        Resolved once per agent and block (a resolve that raises is tried
        again by the next run), under a lock: threads sharing the block call
        the override's function once.
        """
        key = (id(built), spec)
        with self._lock:
            found = self._again.get(key)
            if found is None:
                found = self._again[key] = (built, self._resolve(spec))
            return found[1]


MODEL_OVERRIDE: ContextVar[ModelOverride | None] = ContextVar(
    "toolfold_model_override", default=None
)
"""What model strings resolve to instead of a provider (`toolfold.testing.override_models`)."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def keeps_override(
    function: Callable[_P, Coroutine[Any, Any, _R]],
) -> Callable[_P, Coroutine[Any, Any, _R]]:
    """``function`` (an ``async def``), whose coroutine runs under the `override_models`
    block in force when it is called, not when it is awaited.

    ``coro = agent.arun(...)`` made inside a block and awaited after it ended
    would otherwise resolve its model strings (the agent's, a handoff's, a
    sub-agent's) to real providers, while ``agent.stream(...)`` made there keeps
    the test model: a test that sends real requests. Outside any block the
    coroutine is ``function``'s own (one inside a block when awaited sees it).
    The result is a coroutine function to ``inspect`` and asyncio on every
    Python version, as ``function`` is.
    """

    @functools.wraps(function)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> Coroutine[Any, Any, _R]:
        override = MODEL_OVERRIDE.get()
        if override is None:
            return function(*args, **kwargs)
        # wrong arguments raise here, at the call, as outside a block; the
        # coroutine that runs is made when the wrapper is awaited, so that one
        # never awaited warns once, under ``function``'s name
        function(*args, **kwargs).close()
        wrapper = cast(
            "types.CoroutineType[Any, Any, _R]", _under(override, function, args, kwargs)
        )
        wrapper.__name__ = function.__name__
        wrapper.__qualname__ = function.__qualname__
        return wrapper

    if sys.version_info >= (3, 12):
        inspect.markcoroutinefunction(call)
        return call
    return cast("Callable[_P, Coroutine[Any, Any, _R]]", _KeepsOverride(call, function))


class _KeepsOverride:
    """A `keeps_override` function before Python 3.12, where inspect reads the code
    flags of anything function-like: it has ``function``'s code and defaults
    (`mark_coroutine_function`, as a tool of an async function has) and binds as
    a method does."""

    def __init__(self, call: Callable[..., Any], function: Callable[..., Any]) -> None:
        functools.update_wrapper(self, function)
        self._call = call
        self._qualname: str = function.__qualname__
        mark_coroutine_function(self, function, function.__name__)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return self if instance is None else types.MethodType(self, instance)

    def __repr__(self) -> str:
        return f"<function {self._qualname} at {id(self):#x}>"

    # Pickled by its name, copied as itself: as the function it stands for is.
    def __reduce__(self) -> str:
        return self._qualname

    def __copy__(self) -> _KeepsOverride:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _KeepsOverride:
        return self


async def _under(
    override: ModelOverride,
    function: Callable[..., Coroutine[Any, Any, _R]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> _R:
    token = MODEL_OVERRIDE.set(override)
    try:
        return await function(*args, **kwargs)
    finally:
        MODEL_OVERRIDE.reset(token)


@contextlib.contextmanager
def overriding(override: ModelOverride | None) -> Iterator[None]:
    """``override`` (one captured earlier, `MODEL_OVERRIDE`'s value) in force while the block runs."""
    if override is None:
        yield
        return
    token = MODEL_OVERRIDE.set(override)
    try:
        yield
    finally:
        MODEL_OVERRIDE.reset(token)


def _load_builtin_adapters() -> None:
    # runtime must not import adapters at module level (import direction); the
    # facade wires this hook so a model string resolves on first use.
    if _ADAPTER_LOADER is not None:
        _ADAPTER_LOADER()


_ADAPTER_LOADER: Callable[[], None] | None = None


def set_adapter_loader(loader: Callable[[], None]) -> None:
    """Install the hook that imports the built-in adapters (used by the facade)."""
    global _ADAPTER_LOADER
    _ADAPTER_LOADER = loader
