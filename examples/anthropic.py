"""Claude through the Anthropic Messages API: a tool, a tool error, and extended thinking kept.

    ANTHROPIC_API_KEY=sk-ant-... python examples/anthropic.py

talks to Anthropic (``anthropic:claude-sonnet-4-5``) with extended thinking on.
The model calls ``get_weather`` for two cities; one has no station, so that
call fails and goes back with Anthropic's ``is_error`` flag. The signed
thinking block of the tool turn stays in the run's state (it survives the JSON
round trip) and is sent back unchanged, as the API requires. Without a key,
the example starts a tiny local server that speaks the Messages protocol on
127.0.0.1, so it runs anywhere.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import toolfold
from toolfold import Agent, RunState, tool
from toolfold.runtime import TextDelta


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city, e.g. "Paris".
    """
    stations = {"paris": "sunny, 18C", "oslo": "snowing, -3C"}
    if city.lower() not in stations:
        raise LookupError(f"no weather station in {city}")
    return stations[city.lower()]


class _LocalServer(BaseHTTPRequestHandler):
    """Answers like Claude: think, call the tool twice, then use the results."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        last = body["messages"][-1]["content"]
        results = [b for b in last if b["type"] == "tool_result"] if isinstance(last, list) else []
        if results:
            said = "; ".join(
                ("failed: " if r.get("is_error") else "") + r["content"] for r in results
            )
            content: list[dict[str, Any]] = [{"type": "text", "text": f"The tools said: {said}."}]
            stop = "end_turn"
        else:
            content = [
                {
                    "type": "thinking",
                    "thinking": "I need the weather of both cities.",
                    "signature": "c2ln",
                },
                *(
                    {
                        "type": "tool_use",
                        "id": f"toolu_{n}",
                        "name": "get_weather",
                        "input": {"city": city},
                    }
                    for n, city in enumerate(("Paris", "Atlantis"))
                ),
            ]
            stop = "tool_use"
        usage = {"input_tokens": 20, "cache_read_input_tokens": 10, "output_tokens": 8}
        message = {
            "id": "msg_local",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
        }
        message |= {"content": content, "stop_reason": stop, "usage": usage}
        if not body.get("stream"):
            self._send(json.dumps(message).encode(), "application/json")
            return
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"message": {**message, "content": [], "stop_reason": None}})
        ]
        for index, block in enumerate(content):
            events.append(("content_block_start", {"index": index, "content_block": block}))
            events.append(("content_block_stop", {"index": index}))
        events.append(
            ("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 8}})
        )
        events.append(("message_stop", {}))
        text = "".join(f"event: {n}\ndata: {json.dumps({'type': n, **d})}\n\n" for n, d in events)
        self._send(text.encode(), "text/event-stream")

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
    if os.environ.get("ANTHROPIC_API_KEY"):
        model = toolfold.model("anthropic:claude-sonnet-4-5")
    else:
        print("ANTHROPIC_API_KEY is not set: using a local Messages server instead.\n")
        server = ThreadingHTTPServer(("127.0.0.1", 0), _LocalServer)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        model = toolfold.model(
            "anthropic:claude-sonnet-4-5",
            base_url=f"http://127.0.0.1:{server.server_address[1]}",
            api_key="local-key-not-used",
        )
    settings = {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 4096}
    agent = Agent(model=model, tools=[get_weather], settings=settings)
    prompt = "What's the weather in Paris and in Atlantis?"
    try:
        response = agent.run(prompt)
        print("blocking:", response.text)
        for result in response.steps[0].tool_results:
            print(f"  {result.tool_name}: {'error' if result.is_error else 'ok'}: {result.content}")
        state = RunState.from_json(response.state.to_json())  # store it, load it elsewhere
        thinking = [p for m in state.messages for p in m.parts if p.kind == "reasoning"]
        print(
            f"  thinking kept in the state: {thinking[0].text!r} (signed: {bool(thinking[0].signature)})"
        )
        usage = response.usage
        print(
            f"  usage: {usage.input_tokens} in ({usage.cached_tokens} from the cache) / {usage.output_tokens} out"
        )

        print("streamed: ", end="")
        for event in agent.stream(prompt):
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
