"""OpenAI Chat Completions (and every compatible server) with a tool, blocking and streamed.

    OPENAI_API_KEY=sk-... python examples/openai_chat.py

talks to OpenAI (``openai:gpt-4o-mini``). Any compatible server works the same
way: ``groq:...``, ``mistral:...``, ``deepseek:...``, ``openrouter:...``, or
``openai-compatible:<model>`` with ``base_url=`` (vLLM, llama.cpp, LM Studio,
Ollama's ``/v1``). Without a key, the example starts a tiny local server that
speaks the Chat Completions protocol on 127.0.0.1, so it runs anywhere.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import toolfold
from toolfold import Agent, generate_text, tool
from toolfold.runtime import TextDelta


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city, e.g. "Paris".
    """
    return {"paris": "sunny, 18C", "oslo": "snowing, -3C"}.get(city.lower(), "unknown")


class _LocalServer(BaseHTTPRequestHandler):
    """Answers like a model: first call the tool, then use its result."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        if results:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": f"In Paris it is {results[-1]}.",
            }
            finish = "stop"
        else:
            call = {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
            message, finish = (
                {"role": "assistant", "content": None, "tool_calls": [call]},
                "tool_calls",
            )
        usage = {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}
        if body.get("stream"):
            delta = dict(message)
            if "tool_calls" in delta:  # streamed calls carry their index
                delta["tool_calls"] = [{"index": 0, **delta["tool_calls"][0]}]
            chunks = [
                {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
                {"choices": [], "usage": usage},
            ]
            payload = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            self._send(payload.encode(), "text/event-stream")
        else:
            answer = {
                "id": "local",
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
            self._send(json.dumps(answer).encode(), "application/json")

    def _send(self, data: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # keep the example's output clean
        pass


def main() -> None:
    server = None
    if os.environ.get("OPENAI_API_KEY"):
        model = toolfold.model("openai:gpt-4o-mini")
    else:
        print("OPENAI_API_KEY is not set: using a local Chat Completions server instead.")
        print("(Set OPENAI_API_KEY=sk-... to talk to OpenAI.)\n")
        server = ThreadingHTTPServer(("127.0.0.1", 0), _LocalServer)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        model = toolfold.model("openai-compatible:local-model", base_url=base_url)
    try:
        response = generate_text(model, "What's the weather in Paris?", tools=[get_weather])
        print("blocking:", response.text)
        print("  usage:", response.usage.input_tokens, "in /", response.usage.output_tokens, "out")

        print("streamed: ", end="")
        run = Agent(model=model, tools=[get_weather]).stream("What's the weather in Paris?")
        for event in run:
            if isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
        print()
    finally:
        model.close()
        if server is not None:
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    main()
