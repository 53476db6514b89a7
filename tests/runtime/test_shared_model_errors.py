"""A model's error object shared by several runs: each run raises its own copy with its state."""

from __future__ import annotations

import asyncio
import concurrent.futures
import pickle
import threading
import traceback

import pytest

import toolfold
from toolfold import Agent, Loop, ProviderConnectionError, RateLimitError, ServerError, UsageError
from toolfold._errors import add_note
from toolfold.runtime import ModelRequest as Request
from toolfold.testing import FunctionModel, ScriptedModel


def _asked(error: BaseException) -> str:
    state = toolfold.state_of(error)
    assert state is not None
    return state.messages[-1].text


def test_runs_awaiting_one_failed_future_each_get_their_own_state() -> None:
    """Runs awaiting one shared failed request each raise an error holding their own state."""
    shared: asyncio.Future[str] | None = None

    async def refresh() -> str:
        await asyncio.sleep(0)
        raise toolfold.AuthenticationError("refresh refused", provider="openai", status_code=401)

    async def model(request: Request) -> str:
        nonlocal shared
        if shared is None:
            shared = asyncio.ensure_future(refresh())
        return await shared

    agent = Agent(FunctionModel(model))
    prompts = ["question of alice", "question of bob", "question of carol"]

    async def batch() -> list[BaseException]:
        return await asyncio.gather(*(agent.arun(p) for p in prompts), return_exceptions=True)

    raised = asyncio.run(batch())
    assert [_asked(e) for e in raised] == prompts
    assert [e.state.messages[-1].text for e in raised] == prompts  # type: ignore[union-attr]
    assert all(type(e) is toolfold.AuthenticationError for e in raised)
    assert len({id(e) for e in raised}) == 3


def test_a_cached_error_raised_in_threads_is_left_alone() -> None:
    """Blocking runs on threads re-raising one cached error: each caller's error holds its run's
    state, and the cached object gets none."""
    cached = ServerError("circuit open", provider="openai", status_code=503, body="b")
    barrier = threading.Barrier(3)

    def breaker(request: Request) -> str:
        barrier.wait(timeout=10)  # the three runs are in their model call at once
        raise cached

    agent = Agent(FunctionModel(breaker))

    def handle(user: str) -> BaseException:
        with pytest.raises(ServerError) as caught:
            agent.run(f"question of {user}")
        return caught.value

    users = ["alice", "bob", "carol"]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        raised = list(pool.map(handle, users))
    assert [_asked(e) for e in raised] == [f"question of {u}" for u in users]
    assert cached.state is None
    for error in raised:
        assert error is not cached
        assert error.__cause__ is None  # the cached error had none: the copy takes its place
        assert error.__context__ is cached
        assert type(error) is ServerError
        assert str(error) == str(cached) == error.args[0]
        assert (error.status_code, error.provider, error.body) == (503, "openai", "b")


def test_the_copy_keeps_attributes_and_notes_of_its_own_and_pickles() -> None:
    """The error raised keeps the model's error's attributes and notes (a list of its own),
    pickles, and its state resumes."""
    cached = RateLimitError("slow down", provider="openai", status_code=429, retry_after=30.0)
    add_note(cached, "from the breaker")  # (3.10 has no BaseException.add_note)
    calls = 0

    def model(request: Request) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise cached
        return "answered"

    agent = Agent(FunctionModel(model))
    with pytest.raises(RateLimitError) as caught:
        agent.run("hi")
    error = caught.value
    assert error.retry_after == 30.0
    assert error.__notes__ == ["from the breaker"]
    add_note(error, "mine")
    assert cached.__notes__ == ["from the breaker"]
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is RateLimitError
    assert back.retry_after == 30.0
    assert back.state is not None
    assert agent.resume(back.state).text == "answered"


def test_a_scripted_model_out_of_entries_in_a_sub_run_is_still_raised_as_it_is() -> None:
    """A testing model's misuse in a sub-run still reaches the caller as a UsageError with the
    calling run's state (its copy stays a misuse)."""
    inner = Agent(ScriptedModel([]), name="inner")
    outer = Agent(
        ScriptedModel([ScriptedModel.call("inner", {"input": "x"}), "done"]),
        tools=[inner.as_tool()],
    )
    with pytest.raises(UsageError) as caught:
        outer.run("go")
    assert caught.value.state is not None
    assert caught.value.state.messages[0].text == "go"


def _raising_model(make: object) -> FunctionModel:
    def model(request: Request) -> str:
        raise make()  # type: ignore[operator]

    return FunctionModel(model)


def test_a_provider_error_is_chained_to_its_own_cause_and_printed_once() -> None:
    """A run's copy of the model's error takes its place in the chain: its __cause__ is the
    original's cause (the client's connection error), its traceback the model's frames, and
    the traceback prints the error once."""
    refused = ConnectionRefusedError("connection refused by 127.0.0.1:1")

    def connect() -> ProviderConnectionError:
        try:
            raise refused
        except ConnectionRefusedError as exc:
            try:
                raise ProviderConnectionError("cannot reach openai", provider="openai") from exc
            except ProviderConnectionError as error:
                return error

    with pytest.raises(ProviderConnectionError) as caught:
        Agent(_raising_model(connect)).run("hi")
    error = caught.value
    assert error.__cause__ is refused
    assert error.state is not None
    printed = "".join(traceback.format_exception(error))
    assert printed.count("ProviderConnectionError: cannot reach openai") == 1
    assert "in connect" in printed  # the frames that raised the model's error are kept


def test_a_model_error_raised_while_handling_another_is_chained_to_that_one() -> None:
    """A model's error raised in an except block without "from": the run's error is caused by
    the exception being handled, shown once."""

    def model(request: Request) -> str:
        try:
            {}["token"]
        except KeyError:
            raise ServerError("upstream broke", provider="openai", status_code=500) from None
        return "unreached"

    def model_implicit(request: Request) -> str:
        try:
            {}["token"]
        except KeyError:
            raise ServerError("upstream broke", provider="openai", status_code=500)  # noqa: B904
        return "unreached"

    with pytest.raises(ServerError) as caught:
        Agent(FunctionModel(model_implicit)).run("hi")
    assert isinstance(caught.value.__cause__, KeyError)
    assert (
        "".join(traceback.format_exception(caught.value)).count("ServerError: upstream broke") == 1
    )
    with pytest.raises(ServerError) as suppressed:
        Agent(FunctionModel(model)).run("hi")
    assert suppressed.value.__cause__ is None
    assert "KeyError" not in "".join(traceback.format_exception(suppressed.value))


def test_a_loop_until_function_raising_is_the_run_error_cause() -> None:
    """A workflow's own function raising (Loop until=): the RunError's __cause__ is the user's
    KeyError, not a stateless RunError between them, and its message is printed once."""

    def until(text: str) -> bool:
        raise KeyError("until broke")

    echo = Agent(FunctionModel(lambda request: "out"), name="echo")
    with pytest.raises(toolfold.RunError) as caught:
        Loop(echo, until=until, max_iterations=3).run("go")
    error = caught.value
    assert isinstance(error.__cause__, KeyError)
    assert error.state is not None
    printed = "".join(traceback.format_exception(error))
    assert printed.count(str(error).splitlines()[0]) == 1


class _QuotaError(toolfold.ToolfoldError):
    __slots__ = ("__secret", "tenant")

    def __init__(self, message: str, tenant: str) -> None:
        super().__init__(message)
        self.tenant = tenant
        self.__secret = "kept"

    def secret(self) -> str:
        return self.__secret


def test_a_user_error_s_slots_fields_are_copied() -> None:
    """A model's ToolfoldError subclass keeping its fields in __slots__: the run's copy has
    them (a private one too), with the run's state."""
    shared = _QuotaError("quota spent", tenant="acme")

    def model(request: Request) -> str:
        raise shared

    with pytest.raises(_QuotaError) as caught:
        Agent(FunctionModel(model)).run("hi")
    error = caught.value
    assert error is not shared
    assert (error.tenant, error.secret()) == ("acme", "kept")
    assert error.state is not None
    assert shared.state is None
