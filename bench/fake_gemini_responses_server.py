"""The fake OpenAI server of ``fake_openai_server.py``, also speaking Gemini and OpenAI Responses.

    .venv/bin/python bench/fake_gemini_responses_server.py [--port 0]

Same script (call the first tool with ``{"a": n, "b": 1}`` until the model's
step count is reached, then answer in text; ``fake-10`` = 10 tool steps) on
three paths, non-streamed: ``.../chat/completions``, ``.../responses`` and
``/v1beta/models/<model>:generateContent``.
"""

from __future__ import annotations

import json
from typing import Any

import fake_openai_server as chat

_USAGE_GEMINI = {"promptTokenCount": 20, "candidatesTokenCount": 5, "totalTokenCount": 25}
_USAGE_RESPONSES = {"input_tokens": 20, "output_tokens": 5, "total_tokens": 25}


def _steps(model: str) -> int:
    tail = model.rpartition("-")[2]
    return int(tail) if model.startswith("fake-") and tail.isdigit() else 10


def gemini(model: str, request: dict[str, Any]) -> bytes:
    """A ``GenerateContentResponse``: a call while steps remain, then text."""
    done = sum(1 for c in request["contents"] for p in c["parts"] if "functionResponse" in p)
    if done < _steps(model):
        name = request["tools"][0]["functionDeclarations"][0]["name"]
        part: dict[str, Any] = {"functionCall": {"name": name, "args": {"a": done, "b": 1}}}
    else:
        part = {"text": f"Finished after {done} tool calls."}
    body = {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
        "usageMetadata": _USAGE_GEMINI,
        "modelVersion": model,
        "responseId": f"fake-{done}",
    }
    return json.dumps(body).encode()


def responses(request: dict[str, Any]) -> bytes:
    """A Responses ``Response``: a function_call item while steps remain, then a message."""
    done = sum(1 for i in request["input"] if i.get("type") == "function_call_output")
    if done < _steps(str(request.get("model", ""))):
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{done}",
            "call_id": f"call_{done}",
            "name": request["tools"][0]["name"],
            "arguments": json.dumps({"a": done, "b": 1}),
            "status": "completed",
        }
    else:
        text = f"Finished after {done} tool calls."
        item = {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    body = {
        "id": f"resp_{done}",
        "object": "response",
        "status": "completed",
        "model": request.get("model"),
        "output": [item],
        "usage": _USAGE_RESPONSES,
    }
    return json.dumps(body).encode()


class _Connection(chat._Connection):
    def respond(self, path: str, body: bytes) -> None:
        assert self.transport is not None
        path = path.split("?")[0]
        if path.endswith(":generateContent"):
            model = path.rpartition("/")[2].split(":")[0]
            payload = gemini(model, json.loads(body))
        elif path.endswith("/responses"):
            payload = responses(json.loads(body))
        else:
            super().respond(path, body)
            return
        self.transport.write(chat._HEAD_JSON % len(payload) + payload)


if __name__ == "__main__":
    chat.main(_Connection, __doc__)
