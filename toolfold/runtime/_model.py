"""The contract between the loop and the providers.

The runtime asks a `Model` for one response to a `ModelRequest`; adapters turn
that into HTTP and back. Streams arrive as neutral `StreamEvent` values and are
folded by the pure `fold_stream` reducer into the same `ModelResponse` that a
non-streaming call gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol, runtime_checkable

from toolfold._errors import ModelConfigError
from toolfold.runtime.core._request import ModelRequest, ModelResponse
from toolfold.runtime.core._stream import StreamEvent


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


ModelFactory = Callable[..., Model]
_PROVIDERS: dict[str, ModelFactory] = {}


def register_provider(prefix: str, factory: ModelFactory) -> None:
    """Make ``prefix:model-name`` strings resolve through ``factory``.

    Args:
        prefix: The provider prefix, e.g. ``"openai"``.
        factory: Called as ``factory(model_name, **options)``; returns a `Model`.
    """
    _PROVIDERS[prefix] = factory


def model(spec: str | Model, **options: Any) -> Model:
    """Build a model from a ``provider:model`` string, or pass a model through.

    Args:
        spec: ``"openai:gpt-4o-mini"``, ``"openai-compatible:my-model"`` (with
            ``base_url=``), ... or a `Model` object.
        **options: ``base_url``, ``api_key``, ``http_client``, timeouts,
            retries: whatever the provider accepts.

    Raises:
        ModelConfigError: The string has no known provider prefix.
    """
    if not isinstance(spec, str):
        if options:
            raise ModelConfigError("options can only be given with a model string")
        return spec
    factory, name = _factory(spec)
    override = MODEL_OVERRIDE.get()
    if override is not None:
        return override(spec)
    return factory(name, **options)


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
        known = ", ".join(sorted(_PROVIDERS)) or "none"
        raise ModelConfigError(f"unknown provider {prefix!r} in {spec!r}; known providers: {known}")
    return factory, name


def agent_model(spec: str | Model) -> tuple[Model, str | None]:
    """The model of an agent's ``model=``, and the string a run may resolve again.

    A model object is used as it is (None: nothing to resolve again). A string
    inside an `override_models` block resolves to the override's model, as
    `model` does, for good (None). Outside one, it is built by its provider
    and returned with the string: a run that starts inside a block later
    resolves the string to the override's model instead (`in_force`), so an
    agent made at import time (a module-level ``Agent("openai:...")``) is
    overridden too.

    A provider that cannot be built from what the environment holds (no API
    key set: a bare string has no options of its own) gives an `Unbuilt`
    model: the agent can be made, and imported, in a test that overrides it;
    a run outside a block raises the same `ModelConfigError` before anything
    is sent. A malformed string or an unknown provider is still refused here.

    Raises:
        ModelConfigError: The string is not ``provider:model``, or names no
            known provider.
    """
    if not isinstance(spec, str) or MODEL_OVERRIDE.get() is not None:
        return model(spec), None
    factory, name = _factory(spec)
    try:
        return factory(name), spec
    except ModelConfigError as exc:
        return Unbuilt(spec, str(exc)), spec


def in_force(built: Model, spec: str | None) -> Model:
    """The model a run starting now calls: the override's for ``spec`` inside a block.

    Raises:
        ModelConfigError: ``built`` is `Unbuilt` and no block overrides it
            (the provider's own error, such as a missing API key).
    """
    if spec is None:
        return built
    override = MODEL_OVERRIDE.get()
    if override is not None:
        return override(spec)
    check_built(built)
    return built


def check_built(built: Model) -> None:
    """Raise the provider's error of an `Unbuilt` model (where it must be reported at once).

    Raises:
        ModelConfigError: ``built`` is `Unbuilt`.
    """
    if isinstance(built, Unbuilt):
        raise ModelConfigError(built.problem)


class Unbuilt:
    """The model of a string its provider could not build from the environment (see `agent_model`).

    Calling it raises the provider's `ModelConfigError`; a run never gets to
    call it (`in_force` raises first), but a caller of the model itself may.
    """

    def __init__(self, spec: str, problem: str) -> None:
        self._name = spec
        self.problem = problem

    @property
    def name(self) -> str:
        """The model string."""
        return self._name

    def __repr__(self) -> str:
        return f"Unbuilt({self._name!r}, {self.problem!r})"

    def _refuse(self) -> ModelConfigError:
        return ModelConfigError(self.problem)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Raises the provider's error."""
        raise self._refuse()

    def request_sync(self, request: ModelRequest) -> ModelResponse:
        """Raises the provider's error."""
        raise self._refuse()

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Raises the provider's error."""
        raise self._refuse()

    def stream_sync(self, request: ModelRequest) -> Iterator[StreamEvent]:
        """Raises the provider's error."""
        raise self._refuse()


MODEL_OVERRIDE: ContextVar[Callable[[str], Model] | None] = ContextVar(
    "toolfold_model_override", default=None
)
"""What model strings resolve to instead of a provider (`toolfold.testing.override_models`)."""


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
