"""The transports' log guard scrubs the keys of the models alive, and lets a dropped one's go."""

from __future__ import annotations

import gc
import logging
import pickle
import threading

import httpx
import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold.adapters._http import _keys, _logs
from toolfold.adapters._http._keys import Secret
from toolfold.adapters._http._transport import Transport


def _guarded(key: str) -> bool:
    """Whether the log guard holds ``key`` now (after a collection)."""
    gc.collect()
    return Secret(key) in _logs._FILTER.keys


def _logged(key: str, caplog: pytest.LogCaptureFixture) -> str:
    """What one httpcore DEBUG line echoing ``key`` in a response header reads as."""
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="httpcore.http11"):
        logging.getLogger("httpcore.http11").debug(
            "receive_response_headers.complete return_value=%r", [(b"x-echo", key.encode())]
        )
    return caplog.text


def _model(server: ScriptedServer, key: str) -> toolfold.Model:
    return toolfold.model(
        "openai:gpt-4o-mini", base_url=f"{server.url}/v1", api_key=key, trust_env=False
    )


def test_the_keys_of_models_run_closed_and_dropped_leave_the_guard(
    http_server: ScriptedServer,
) -> None:
    """A service making a model per tenant's key, running it, closing and dropping it, leaves
    the guard with the keys it had: each dropped model's key is let go (the guard kept every
    key a process ever used, and each log record cost more as they piled up)."""
    http_server.handler = lambda request: Reply(
        json={"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
    )
    gc.collect()
    before = len(_logs._FILTER.keys)
    for tenant in range(5):
        key = f"sk-tenant-{tenant:04d}-dropped-abcdefghij"
        model = _model(http_server, key)
        assert toolfold.Agent(model).run("hello").text == "hi"
        assert _guarded(key)
        model.close()
        del model
        assert not _guarded(key)
    assert len(_logs._FILTER.keys) == before
    assert not any(value.startswith("sk-tenant-") for value, *_ in _logs._FILTER.scrubs)


def test_a_key_stays_scrubbed_while_a_model_sending_it_lives(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Two models on one key: dropping one leaves the key scrubbed for the other, closed or
    not (a closed model opens a client again on its next call); it goes with the last."""
    key = "sk-shared-key-abcdefghij0123456789"
    first, second = _model(http_server, key), _model(http_server, key)
    del first
    second.close()
    assert _guarded(key)
    assert key not in _logged(key, caplog)
    assert "(b'x-echo', b'***')" in caplog.text
    del second
    assert not _guarded(key)


def test_a_pickled_copy_keeps_the_key_scrubbed_after_the_original_goes(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model built again from a pickle (its key from the environment) guards the key
    itself: dropping the model it was pickled from leaves the key scrubbed."""
    key = "sk-pickled-key-abcdefghij0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    model = toolfold.model("openai:gpt-4o-mini", base_url=f"{http_server.url}/v1")
    twin = pickle.loads(pickle.dumps(model))
    del model
    assert _guarded(key)
    assert key not in _logged(key, caplog)
    del twin
    assert not _guarded(key)


def test_a_transport_s_key_is_guarded_while_its_sender_lives() -> None:
    """What sends the key (the transport's sender, held by each call and stream being
    read) keeps it guarded after the transport itself is gone."""
    key = "sk-sender-key-abcdefghij0123456789"
    transport = Transport("openai", "http://127.0.0.1:9/v1", key)
    sender = transport._sender
    del transport
    assert _guarded(key)
    del sender
    assert not _guarded(key)


def test_a_key_guarded_for_good_stays_when_a_transport_with_it_goes() -> None:
    """A key added with no holder (a proxy's password) stays guarded when a transport
    sending the same key is dropped; the filter counts each holder."""
    guard = _logs._KeyFilter()
    key = Secret("proxy-password-0123")

    class Holder:
        pass

    holder = Holder()
    guard.add(key)
    guard.add(key, holder=holder)
    del holder
    gc.collect()
    assert guard.keys == {key}
    assert [value for value, *_ in guard.scrubs] == ["proxy-password-0123"]


def test_a_holder_collected_while_the_guard_is_busy_is_taken_off_after() -> None:
    """A holder the collector frees while the guard holds its lock (a collection inside
    `add`, on the same thread) neither deadlocks nor is lost: its key goes next time."""
    guard = _logs._KeyFilter()
    kept, dropped = Secret("kept-key-0123"), Secret("dropped-key-0123")

    class Holder:
        pass

    holder, other = Holder(), Holder()
    guard.add(dropped, holder=holder)
    with guard._lock:  # as inside `add`, when an allocation starts a collection
        del holder
        gc.collect()
    guard.add(kept, holder=other)
    assert guard.keys == {kept}
    assert [value for value, *_ in guard.scrubs] == ["kept-key-0123"]


def test_a_guard_without_keys_leaves_records_as_they_are() -> None:
    """Once every key is gone the guard passes records untouched (nothing to scrub)."""
    guard = _logs._KeyFilter()

    class Holder:
        pass

    holder = Holder()
    guard.add(Secret("gone-key-0123"), holder=holder)
    del holder
    gc.collect()
    record = logging.LogRecord("httpx", logging.DEBUG, __file__, 1, "%s", ("gone-key-0123",), None)
    assert guard.filter(record)
    assert (record.msg, record.args) == ("%s", ("gone-key-0123",))
    assert guard.scrubs == ()


class _Holder:
    """What holds a key in the guard (a transport's sender), here a bare object."""


class _Blocking(Secret):
    """A key whose value, once ``armed``, another thread reads only after ``go`` is set:
    it stops the thread adding it inside the guard, there to be forked."""

    __slots__ = ()
    armed = threading.Event()
    inside = threading.Event()
    go = threading.Event()

    def reveal(self) -> str:
        if self.armed.is_set() and threading.current_thread() is not threading.main_thread():
            self.inside.set()
            self.go.wait()
        return super().reveal()


def test_a_key_being_added_when_the_process_forks_is_scrubbed_in_the_child() -> None:
    """A fork while another thread is inside `add` (a model being made for a tenant), then
    a model on that key made in the child: the key is scrubbed there. (The child had it
    counted but not in the scrubs; the new model only counted it up, so the child's DEBUG
    lines showed it.)"""
    guard = _logs._KeyFilter()
    key = "sk-forked-tenant-abcdefghij0123456789"
    holder, again = _Holder(), _Holder()
    _Blocking.armed.set()
    adding = threading.Thread(target=guard.add, args=(_Blocking(key),), kwargs={"holder": holder})
    adding.start()
    try:
        assert _Blocking.inside.wait(timeout=60)  # (a bound on a hang, not a timing)
        guard._after_fork()  # what os.register_at_fork runs in the child, the thread gone
        guard.add(Secret(key), holder=again)  # the child makes a model on that key
        in_child = [value for value, *_ in guard.scrubs]
    finally:
        _Blocking.armed.clear()
        _Blocking.go.set()
        adding.join()
    assert in_child == [key]


def test_a_key_counted_but_left_out_of_the_scrubs_goes_in() -> None:
    """A key counted whose scrubs were not made again (the process forked, or
    KeyboardInterrupt came, in between) goes in in the forked child at once, and when
    another holder adds it, though its count does not start at 0."""
    key = Secret("sk-left-out-abcdefghij0123456789")
    for then in ("fork", "add"):
        guard = _logs._KeyFilter()
        holder, again = _Holder(), _Holder()
        guard.add(key, holder=holder)
        guard.scrubs, guard._scrubbed = (), {}  # as between counting it and making them
        if then == "fork":
            guard._after_fork()
        else:
            guard.add(key, holder=again)
        assert [value for value, *_ in guard.scrubs] == [key.reveal()], then


def test_a_user_s_client_keeps_its_key_scrubbed_for_good(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A client of the user's own given to a model keeps the model's key scrubbed after
    the model and the client are dropped (round 1 let it go with the model, and the
    client's own requests logged it; a review found ways a client sends a key that no
    check sees: headers set later, hooks, params, a transport), as main kept every key."""
    key = "sk-user-client-abcdefghij0123456789"
    client = httpx.Client(headers={"authorization": f"Bearer {key}"})
    model = toolfold.model(
        "openai:gpt-4o-mini",
        base_url=f"{http_server.url}/v1",
        api_key=key,
        http_client=client,
        trust_env=False,
    )
    del model
    assert _guarded(key)
    assert key not in _logged(key, caplog)
    client.close()
    del client
    gc.collect()
    assert _guarded(key)


def test_a_model_toolfold_makes_the_client_of_lets_its_key_go(
    http_server: ScriptedServer,
) -> None:
    """Without a client of the user's, the key goes with the last model that may send it."""
    key = "sk-own-client-abcdefghij0123456789"
    model = toolfold.model(
        "openai:gpt-4o-mini", base_url=f"{http_server.url}/v1", api_key=key, trust_env=False
    )
    assert _guarded(key)
    del model
    gc.collect()
    assert not _guarded(key)


def test_a_holder_without_weak_references_keeps_its_keys_for_good() -> None:
    """A holder that takes no weak reference (a client class with ``__slots__``) keeps its
    keys guarded for good rather than failing the model it is given to."""
    guard = _logs._KeyFilter()
    guard.add(Secret("sk-slotted-client-0123456789"), holder=object())
    gc.collect()
    assert [value for value, *_ in guard.scrubs] == ["sk-slotted-client-0123456789"]


def test_a_key_coming_or_going_works_out_only_its_own_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adding or dropping a key with many alive works out what to scrub for that key only
    (each key's part was worked out again each time: making and dropping a model took
    4-6 ms with 5,000 alive)."""
    guard = _logs._KeyFilter()
    alive = [_Holder() for _ in range(300)]
    for n, holder in enumerate(alive):
        guard.add(Secret(f"sk-alive-{n:04d}-abcdefghij"), holder=holder)
    worked_out: list[int] = []

    def counted(secrets: object) -> object:
        found = _keys.scrubs(secrets)  # type: ignore[arg-type]
        worked_out.append(len(found))
        return found

    monkeypatch.setattr(_logs, "scrubs", counted)
    tenant = _Holder()
    guard.add(Secret("sk-tenant-abcdefghij0123"), holder=tenant)
    assert len(guard.scrubs) == 301
    del tenant
    gc.collect()
    assert len(guard.scrubs) == 300
    assert sum(worked_out) <= 1
