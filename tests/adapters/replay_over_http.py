"""Replaying a recorded exchange over 127.0.0.1: the answer as chunked bytes, the model's result.

Shared by the replays that send each recording's bytes from a real local
server through every backend (Chat Completions, Anthropic, Gemini, Responses).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from cassettes import answer, raw_response
from scripted_http import Reply

from toolfold.runtime import ModelRequest, StreamState, finish_stream, fold_stream


def recorded_reply(name: str, index: int, seed: int) -> Reply:
    """The recorded answer as a chunked reply cut into random pieces of 1-300 bytes."""
    status, headers, body = raw_response(name, index)
    rng = random.Random(seed)
    pieces = []
    at = 0
    while at < len(body):
        size = rng.randint(1, 300)
        pieces.append(body[at : at + size])
        at += size
    headers.setdefault("content-type", "application/json")
    return Reply(status=status, headers=headers, chunks=pieces)


def run(model: Any, request: ModelRequest, streamed: bool, mode: str) -> Any:
    """The model's answer (a stream folded) in ``mode`` (sync or async), or the exception raised.

    The model is closed afterwards either way.
    """

    async def run_async() -> Any:
        try:
            if not streamed:
                return await model.request(request)
            state = StreamState()
            async for event in model.stream(request):
                state = fold_stream(state, event)
            return finish_stream(state, lambda i: f"missing-{i}")
        finally:
            await model.aclose()

    try:
        if mode == "async":
            return asyncio.run(run_async())
        try:
            return answer(model, request, streamed)
        finally:
            model.close()
    except Exception as exc:  # the expectation checks it
        return exc
