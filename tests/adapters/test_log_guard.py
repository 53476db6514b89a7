"""The transports' log guard scrubs the keys of the models alive, and lets a dropped one's go."""

from __future__ import annotations

import gc
import logging
import pickle

import pytest
from scripted_http import Reply, ScriptedServer

import toolfold
from toolfold.adapters._http import _logs
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
