"""A transport joins each path's URL once, but never sends to a URL it should not, and a
retried call's error keeps the first attempt's failure in its chain (over 127.0.0.1)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from backends import ASYNC_ONLY, OWNED
from scripted_http import Reply, ScriptedServer

from toolfold import BadRequestError
from toolfold.adapters._http._transport import Transport

KEY = "sk-test-urls-0123456789"
PAIRS = [
    pytest.param(name, mode, id=f"{name}-{mode}")
    for name in OWNED
    for mode in ("sync", "async")
    if not (mode == "sync" and name in ASYNC_ONLY)
]


def _post(transport: Transport, mode: str, path: str = "chat/completions") -> Any:
    if mode == "sync":
        return transport.post_json_sync(path, {"x": 1})
    return asyncio.run(transport.post_json(path, {"x": 1}))


def _close(transport: Transport, mode: str) -> None:
    if mode == "sync":
        transport.close()
    else:
        asyncio.run(transport.aclose())


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_a_base_url_set_anew_is_where_the_next_call_goes(name: str, mode: str) -> None:
    """`base_url` set after calls were made: the next call goes under the new one."""
    first, second = ScriptedServer(), ScriptedServer()
    try:
        first.add(Reply(json={"n": 1}))
        second.add(Reply(json={"n": 2}))
        transport = Transport("openai", f"{first.url}/v1", KEY, http=name)
        try:
            assert _post(transport, mode) == {"n": 1}
            transport.base_url = f"{second.url}/v2"
            assert _post(transport, mode) == {"n": 2}
        finally:
            _close(transport, mode)
        assert [r.path for r in first.requests] == ["/v1/chat/completions"]
        assert [r.path for r in second.requests] == ["/v2/chat/completions"]
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(("name", "mode"), PAIRS)
def test_a_subclass_url_is_asked_on_every_call(
    http_server: ScriptedServer, name: str, mode: str
) -> None:
    """A subclass's `url` may answer differently each time: it is asked for every call."""
    asked: list[str] = []

    class Numbered(Transport):
        def url(self, path: str) -> str:
            asked.append(path)
            return f"{super().url(path)}?n={len(asked)}"

    http_server.add(*[Reply(json={"ok": 1})] * 3)
    transport = Numbered("openai", http_server.url, KEY, http=name)
    try:
        for _ in range(3):
            _post(transport, mode)
    finally:
        _close(transport, mode)
    assert [r.path for r in http_server.requests] == [f"/chat/completions?n={n}" for n in (1, 2, 3)]


@pytest.mark.parametrize("name", OWNED)
def test_a_retried_async_call_chains_the_first_failure(
    http_server: ScriptedServer, name: str
) -> None:
    """A call whose first attempt failed and whose retry was refused: the refusal's error
    has the first failure as its context (shown in the traceback), as a blocking call's has."""
    http_server.add(Reply(reset=True), Reply(status=400, json={"error": {"message": "no"}}))
    transport = Transport("openai", http_server.url, KEY, http=name)
    try:
        with pytest.raises(BadRequestError) as caught:
            _post(transport, "async")
    finally:
        _close(transport, "async")
    assert len(http_server.requests) == 2
    assert caught.value.__context__ is not None
    assert KEY not in repr(caught.value.__context__)
