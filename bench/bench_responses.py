"""Cost of the OpenAI Responses codec, and the 10-step tool loop over 127.0.0.1 next to Chat Completions.

Request build for 4 and 50 messages (5 tools), a response with a reasoning
item and two calls parsed, the recorded stream-parallel-2-calls #0 (30 events)
folded, then the loop.

Run: ``.venv/bin/python bench/bench_responses.py [--rounds N]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench_openai_chat import TOOLS, _conversation, _per_call
from native_loop import compare, fold_all, rounds

from toolfold.adapters._http._sse import SSEDecoder
from toolfold.adapters.openai_responses import (
    DecoderState,
    build_body,
    decode_end,
    decode_event,
    parse_response,
)
from toolfold.runtime import ModelRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "adapters"))
from cassettes import load

RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "status": "completed",
    "model": "gpt-5-mini",
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA" * 40},
        *(
            {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": f"call_{i}",
                "name": "tool_1",
                "arguments": json.dumps({"city": "Paris", "days": 3}),
                "status": "completed",
            }
            for i in range(2)
        ),
    ],
    "usage": {
        "input_tokens": 500,
        "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 20},
    },
}


def main() -> None:
    repeats = rounds(__doc__.split("\n")[0])
    small = ModelRequest(_conversation(1), TOOLS)
    large = ModelRequest(_conversation(24), TOOLS)  # 50 messages
    build_body(large, "gpt-5-mini")  # warm the schema compile cache
    stream_text = load("openai-responses/stream-parallel-2-calls.yaml")[0].response_text

    def fold() -> None:
        fold_all(
            SSEDecoder().feed(stream_text),
            DecoderState("openai-responses"),
            decode_event,
            decode_end,
        )

    rows = [
        ("build body, 4 messages, 5 tools", lambda: build_body(small, "gpt-5-mini")),
        ("build body, 50 messages, 5 tools", lambda: build_body(large, "gpt-5-mini")),
        (
            "parse response: reasoning + 2 calls",
            lambda: parse_response(RESPONSE, "openai-responses"),
        ),
        ("recorded stream (2 calls): SSE+decode+fold", fold),
    ]
    for label, fn in rows:
        print(f"{label:45s} {_per_call(fn):9.1f} us")
    compare("openai-responses", repeats)


if __name__ == "__main__":
    main()
