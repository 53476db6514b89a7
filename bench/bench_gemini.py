"""Cost of the Gemini codec, and the 10-step tool loop over 127.0.0.1 next to Chat Completions.

Request build for 4 and 50 messages (5 tools), a response with two calls
parsed, the recorded streams folded (SSE: stream-sse-parallel-2-calls-results-final
#1, 3 chunks; JSON array: the gzip recording #0, 2 elements), then the loop.

Run: ``.venv/bin/python bench/bench_gemini.py [--rounds N]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench_openai_chat import TOOLS, _conversation, _per_call
from native_loop import compare, fold_all, rounds

from toolfold.adapters._http._sse import SSEDecoder
from toolfold.adapters.gemini import (
    JSONArrayDecoder,
    build_body,
    decode_chunk,
    decode_end,
    parse_response,
)
from toolfold.adapters.gemini._stream import DecoderState, decode_event
from toolfold.runtime import ModelRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "adapters"))
from cassettes import load

RESPONSE = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [
                    {
                        "functionCall": {"name": "tool_1", "args": {"city": "Paris", "days": 3}},
                        "thoughtSignature": "c2ln",
                    },
                    {"functionCall": {"name": "tool_1", "args": {"city": "Tokyo", "days": 3}}},
                ],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": {
        "promptTokenCount": 500,
        "candidatesTokenCount": 40,
        "thoughtsTokenCount": 20,
    },
    "modelVersion": "gemini-2.5-flash",
    "responseId": "resp-1",
}


def main() -> None:
    repeats = rounds(__doc__.split("\n")[0])
    small = ModelRequest(_conversation(1), TOOLS)
    large = ModelRequest(_conversation(24), TOOLS)  # 50 messages
    build_body(large, "gemini-2.5-flash")  # warm the schema compile cache
    sse_text = load("gemini-generate-content/stream-sse-parallel-2-calls-results-final.yaml")[
        1
    ].response_text
    array_bytes = load(
        "gemini-generate-content/stream-json-array-sequential-calls-results-final-gzip-body.yaml"
    )[0].response_text.encode()

    def fold_sse() -> None:
        fold_all(SSEDecoder().feed(sse_text), DecoderState(), decode_event, decode_end)

    def fold_array() -> None:
        fold_all(JSONArrayDecoder().feed(array_bytes), DecoderState(), decode_chunk, decode_end)

    rows = [
        ("build body, 4 messages, 5 tools", lambda: build_body(small, "gemini-2.5-flash")),
        ("build body, 50 messages, 5 tools", lambda: build_body(large, "gemini-2.5-flash")),
        ("build body, 50 messages, OpenAPI form", lambda: build_body(large, "gemini-2.0-flash")),
        ("parse response with 2 calls", lambda: parse_response(RESPONSE)),
        ("recorded 3-chunk SSE stream: decode+fold", fold_sse),
        ("recorded 2-element JSON array: decode+fold", fold_array),
    ]
    for label, fn in rows:
        print(f"{label:45s} {_per_call(fn):9.1f} us")
    compare("gemini", repeats)


if __name__ == "__main__":
    main()
