"""Each request is logged once at DEBUG on ``toolfold.http``: blocking, streamed, failed or
retried alike, with its status or its error's class, never the key nor the body."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest
from scripted_http import Reply, ScriptedServer, sse

import toolfold
from toolfold import Agent, BadRequestError

KEY = "sk-DEBUGLOGKEY1234567890abcdef"
SECRET_TEXT = "the body says SECRET-BODY-TEXT"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}


def _stream() -> Reply:
    chunks = sse(_chunk({"role": "assistant", "content": "hi"}), _chunk({}, "stop"), "[DONE]")
    return Reply(headers={"content-type": "text/event-stream"}, chunks=chunks)


def _answer() -> Reply:
    message = {"role": "assistant", "content": "hi"}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return Reply(json={"id": "c1", "object": "chat.completion", "model": "m", "choices": [choice]})


def _requests(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The request lines logged, the port and path left out."""
    lines = [r.getMessage() for r in caplog.records if r.name == "toolfold.http"]
    return [
        re.sub(r"http://127\.0\.0\.1:\d+/\S*", "URL", line)
        for line in lines
        if line.startswith("POST ")
    ]


@pytest.mark.parametrize("how", ["run", "arun", "stream", "astream"])
def test_each_request_is_logged_at_debug_once(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """A 429 then a 200, blocking or streamed: two lines, each with its status."""
    http_server.add(Reply(status=429, headers={"retry-after": "0"}, body=SECRET_TEXT.encode()))
    http_server.add(_stream() if how.endswith("stream") else _answer())
    model = toolfold.model("openai:m", api_key=KEY, base_url=http_server.url)
    agent = Agent(model)

    async def drain() -> None:
        async for _ in agent.stream("hi"):
            pass

    with caplog.at_level(logging.DEBUG, logger="toolfold.http"):
        if how == "run":
            agent.run("hi")
        elif how == "arun":
            asyncio.run(agent.arun("hi"))
        elif how == "stream":
            for _ in agent.stream("hi"):
                pass
        else:
            asyncio.run(drain())
    model.close()
    assert _requests(caplog) == ["POST URL -> HTTP 429", "POST URL -> HTTP 200"]
    assert KEY not in caplog.text


def test_a_failed_request_is_logged_with_its_status_or_error(
    http_server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A 400 (not retried) and a connection reset: each logged once, the reset by its class."""
    http_server.add(Reply(status=400, json={"error": {"message": SECRET_TEXT}}))
    http_server.add(Reply(reset=True))
    model = toolfold.model("openai:m", api_key=KEY, base_url=http_server.url, retry=0)
    with caplog.at_level(logging.DEBUG, logger="toolfold.http"):
        with pytest.raises(BadRequestError):
            Agent(model).run("hi")
        with pytest.raises(toolfold.ProviderConnectionError):
            Agent(model).run("hi")
    model.close()
    lines = _requests(caplog)
    assert lines[0] == "POST URL -> HTTP 400"
    assert len(lines) == 2
    assert re.fullmatch(r"POST URL -> \w+", lines[1])
    assert KEY not in caplog.text
    assert "SECRET-BODY-TEXT" not in "\n".join(lines)
