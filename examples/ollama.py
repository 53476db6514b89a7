"""A local model through Ollama's native API: a tool loop, blocking and streamed.

    OLLAMA_HOST=localhost:11434 OLLAMA_MODEL=qwen3 python examples/ollama.py

talks to your Ollama server (``ollama:<model>`` reads ``OLLAMA_HOST``). Ollama
has no ``tool_choice``: asking for a required tool is refused before any
request is sent, shown at the end. Without ``OLLAMA_HOST`` the example starts
a tiny local server that speaks ``/api/chat`` (NDJSON streaming included) on
127.0.0.1, so it runs anywhere.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import toolfold
from toolfold import Agent, ModelConfigError, generate_text, tool
from toolfold.runtime import TextDelta


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city, e.g. "Paris".
    """
    return {"paris": "sunny, 18C", "oslo": "snowing, -3C"}.get(city.lower(), "unknown")


class _LocalServer(BaseHTTPRequestHandler):
    """Answers like a local model: call the tool, then use its result."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        message: dict[str, Any] = {"role": "assistant", "content": ""}
        if results:
            message["content"] = f"In Paris it is {results[-1]}."
        else:
            call = {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
            message["tool_calls"] = [call]
        final = {"model": body["model"], "created_at": "2026-01-01T00:00:00Z", "done": True}
        final |= {"done_reason": "stop", "prompt_eval_count": 30, "eval_count": 9}
        if body.get("stream") is False:
            self._send(json.dumps({**final, "message": message}).encode(), "application/json")
            return
        lines = []
        for word in message["content"].split(" ") if message["content"] else []:
            piece = {"role": "assistant", "content": word + " "}
            lines.append({"model": body["model"], "message": piece, "done": False})
        if "tool_calls" in message:
            lines.append({"model": body["model"], "message": message, "done": False})
        lines.append({**final, "message": {"role": "assistant", "content": ""}})
        self._send(
            "".join(json.dumps(line) + "\n" for line in lines).encode(), "application/x-ndjson"
        )

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
    name = os.environ.get("OLLAMA_MODEL", "qwen3")
    if os.environ.get("OLLAMA_HOST"):
        model = toolfold.model(f"ollama:{name}")
    else:
        print("OLLAMA_HOST is not set: using a local /api/chat server instead.\n")
        server = ThreadingHTTPServer(("127.0.0.1", 0), _LocalServer)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        model = toolfold.model(
            f"ollama:{name}", base_url=f"http://127.0.0.1:{server.server_address[1]}"
        )
    try:
        response = generate_text(model, "What's the weather in Paris?", tools=[get_weather])
        print("blocking:", response.text)
        print("  usage:", response.usage.input_tokens, "in /", response.usage.output_tokens, "out")

        print("streamed: ", end="")
        for event in Agent(model=model, tools=[get_weather]).stream("What's the weather in Paris?"):
            if isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
        print()

        try:
            generate_text(model, "Weather?", tools=[get_weather], tool_choice="required")
        except ModelConfigError as error:
            print("refused before sending:", error)
    finally:
        model.close()
        if server is not None:
            server.shutdown()
            server.server_close()


if __name__ == "__main__":
    main()
