"""One conversation, two native APIs: Gemini calls the tool, OpenAI Responses answers.

    GEMINI_API_KEY=... OPENAI_API_KEY=sk-... python examples/switch_provider.py

The run's state holds neutral messages only, so the step after a Gemini call
can go to any provider: here the tool result goes to OpenAI's Responses API,
with Gemini's signed call in the history. Without both keys, the example starts
a tiny local server on 127.0.0.1 that speaks both APIs, so it runs anywhere.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import toolfold
from toolfold import generate_text, resume, tool
from toolfold.runtime import ModelRequest


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city, e.g. "Paris".
    """
    return f"{city}: sunny, 22C"


class _Fake(BaseHTTPRequestHandler):
    """Gemini asks for the weather; Responses answers from the tool result."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if ":generateContent" in self.path:
            call = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
            answer: dict[str, Any] = {
                "candidates": [
                    {
                        "content": {
                            "role": "model",
                            "parts": [{**call, "thoughtSignature": "c2ln"}],
                        },
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": {"promptTokenCount": 12, "candidatesTokenCount": 5},
                "responseId": "local-1",
            }
        else:
            result = next(
                i["output"] for i in body["input"] if i.get("type") == "function_call_output"
            )
            text = {
                "type": "output_text",
                "text": f"It is {result.split(': ')[1]}.",
                "annotations": [],
            }
            answer = {
                "id": "resp_local",
                "status": "completed",
                "model": body["model"],
                "output": [{"type": "message", "role": "assistant", "content": [text]}],
                "usage": {"input_tokens": 30, "output_tokens": 6},
            }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    server = None
    if os.environ.get("GEMINI_API_KEY") and os.environ.get("OPENAI_API_KEY"):
        gemini = toolfold.model("gemini:gemini-2.5-flash")
        responses = toolfold.model("openai-responses:gpt-5-mini")
    else:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}"
        gemini = toolfold.model("gemini:gemini-2.5-flash", base_url=url, api_key="local-key")
        responses = toolfold.model(
            "openai-responses:gpt-5-mini", base_url=f"{url}/v1", api_key="local-key"
        )
    try:
        # Step 1 on Gemini; the call comes back to us (we run the tool ourselves).
        first = generate_text(
            gemini, "Weather in Paris?", tools=[get_weather], auto_execute_tools=False
        )
        (call,) = first.tool_calls
        print(
            "Gemini called",
            call.name,
            dict(call.arguments or {}),
            "signed:",
            "thought_signature" in call.provider_data,
        )
        # Step 2 on Responses, from the same (JSON-serializable) state.
        results = {call.id: get_weather(**(call.arguments or {}))}
        done = resume(first.state, model=responses, tools=[get_weather], tool_results=results)
        print("Responses answered:", done.text)
        report = responses.prepare(ModelRequest(done.state.messages)).report
        print("dropped on the way:", list(report.notes) or "nothing")
    finally:
        gemini.close()
        responses.close()
        if server is not None:
            server.shutdown()


if __name__ == "__main__":
    main()
