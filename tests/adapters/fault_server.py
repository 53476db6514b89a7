"""A Chat Completions server on 127.0.0.1 that fails on request, run as its own process.

    python tests/adapters/fault_server.py      # prints "READY <port>", serves until killed

It answers ``POST .../chat/completions`` (JSON, or SSE when the body asks for
``"stream": true``). A run is the requests carrying the same ``x-run`` header:
its 1st request gets a call of the tool ``add(2, 3)``, its 2nd the fault named
by ``x-fault``, the later ones the answer ``The sum is 5.``. Without ``x-run``
every request gets the fault. A request marked ``x-phase: resume`` (a user
resuming the failed run) never gets the fault and is not counted: a call of the
tool when it carries the first message only, else the answer. So a request
the client abandoned (a timeout on a loaded machine) and the server reads late
cannot take the fault away from, or hand it to, the resume. Faults:

``429-seconds`` / ``429-ms`` / ``429-date``: 429 with ``retry-after: 0.01``,
``retry-after-ms: 10`` or an HTTP date in the past; ``500``; ``reset-after``:
the connection is reset after the request is read; ``read-timeout``: nothing
for 3 s; ``total-timeout``: a 200 whose body drips a byte every 20 ms;
``cut-stream``: the body stops halfway and the connection closes;
``inband-error``: an error object inside a 200 (an SSE event when streaming);
``malformed-json``: a 200 whose body is not JSON; ``big``: a 200 with a 1 MiB
body; ``br``: a 200 in an encoding not asked for; ``bomb``: a gzip body that
inflates to 4 MiB; ``bad-status``, ``bad-length`` (``content-length: -5``),
``bad-chunk`` (a ``0x2`` chunk size), ``unasked-101``: answers no HTTP/1.1
client may accept; ``endless-header``, ``endless-chunk-size``,
``endless-trailer``: an answer whose header line, chunk-size line or trailer line
never ends (written until the client hangs up, at most 64 MiB: a client must
refuse a line long before that); ``barrier-<n>`` with ``x-barrier: <id>``: held
until ``n`` requests of that id are held at once, then each gets the answer (only
a client with ``n`` free connections gets through; after 10 s a 503);
``hold-stream``: a 200 stream whose first event (the text ``The sum``) is sent,
the rest held until the client hangs up; ``bad-args`` and ``unknown-tool``: the
1st answer calls ``add`` with arguments that are not JSON, or a tool
``subtract`` the agent lacks (the later answers are normal); ``none``: no fault.

A run may also have a listener of its own, a *door* (``POST .../faults/door``
answers ``{"port": ...}``), whose connections the client can have closed while
they are idle, before its next request is written: ``POST
.../faults/door/<port>/shut`` resets them and stops the door listening (the
port stays held, so connecting to it is refused); ``.../reset`` resets them
only. Each answers once the connections are reset, so a client that waits for
the answer finds them closed (``reset-before`` and ``reset-idle`` in
``fault_matrix``). ``POST .../faults/count`` answers ``{"requests": n}``: how
many requests of the run in ``x-run`` the server read (the resume's not counted).

Running in a process of its own keeps the test process's file descriptors and
threads those of the client alone, so leak checks can count them.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import struct
import sys
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_COUNTS: defaultdict[str, int] = defaultdict(int)
_LOCK = threading.Lock()


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }


CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
}
TOOL_CALL = _completion({"role": "assistant", "content": None, "tool_calls": [CALL]}, "tool_calls")
ANSWER = _completion({"role": "assistant", "content": "The sum is 5."}, "stop")


def chunks(completion: dict[str, Any]) -> list[bytes]:
    """The completion as SSE chunks, as OpenAI streams it."""
    choice = completion["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": 0, **message["tool_calls"][0]}]
    events = [
        {"id": "c", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"id": "c", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
    ]  # fmt: skip
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def _call_of(name: str, arguments: str) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return _completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")


#: Faults in the model's first answer (the tool call): the later answers are normal.
_FIRST = {
    "bad-args": _call_of("add", '{"a": 2, "b": '),
    "unknown-tool": _call_of("subtract", '{"a": 2, "b": 3}'),
}


#: Faults no answer carries: none, those of the 1st answer, and those a door's
#: connection meets between two requests (see the module).
_NOT_IN_ANSWERS = {"none", *_FIRST, "reset-before", "reset-idle"}

_BOMB = gzip.compress(b"\0" * 4 * 2**20, compresslevel=9)  # 4 MiB of zeros in ~4 KiB

#: Faults written as raw bytes, the connection closed after them.
_RAW = {
    "bad-status": b"HTTP/1.1 2OO OK\r\ncontent-length: 2\r\n\r\n{}",
    "bad-length": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"content-length: -5\r\n\r\n{}",
    "bad-chunk": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n",
    "unasked-101": b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n"
    b"connection: upgrade\r\n\r\n",
}


#: Faults whose last line never ends: the head, then the filler until the client hangs up.
_ENDLESS = {
    "endless-header": (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-pad: ", b"a"),
    "endless-chunk-size": (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", b"f"),
    "endless-trailer": (
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nx-pad: ",
        b"a",
    ),
}
_ENDLESS_MAX = 64 * 2**20

_BARRIERS: dict[str, threading.Barrier] = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        fault = self.headers.get("x-fault", "none")
        run = self.headers.get("x-run")
        if "/faults/" in self.path:
            self._control(self.path.partition("/faults/")[2], run)
            return
        if self.headers.get("x-phase") == "resume":
            self._resume()
            return
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        stream = bool(body.get("stream"))
        if run is None:
            number = 2
        else:
            with _LOCK:
                _COUNTS[run] += 1
                number = _COUNTS[run]
        if number == 1:
            self._answer(_FIRST.get(fault, TOOL_CALL), stream)
        elif number == 2 and fault not in _NOT_IN_ANSWERS:
            self._fault(fault, stream)
        else:
            self._answer(ANSWER, stream)

    def _resume(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
        answer = TOOL_CALL if len(body["messages"]) == 1 else ANSWER
        self._answer(answer, bool(body.get("stream")))

    def _control(self, what: str, run: str | None) -> None:
        """Open a door, reset or shut one, or count a run's requests (see the module)."""
        if what == "door":
            door = Door()
            _DOORS[door.port] = door
            answer = {"port": door.port}
        elif what.startswith("door/"):
            _, port, action = what.split("/")
            answer = {"reset": _DOORS[int(port)].reset(refuse=action == "shut")}
        else:
            with _LOCK:
                answer = {"requests": _COUNTS[run or ""]}
        self._send(200, json.dumps(answer).encode())

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()
        self.close_connection = True

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {"content-type": "application/json"}).items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self, completion: dict[str, Any], stream: bool) -> None:
        if not stream:
            self._send(200, json.dumps(completion).encode())
            return
        self._send(200, b"".join(chunks(completion)), {"content-type": "text/event-stream"})

    def _fault(self, fault: str, stream: bool) -> None:
        error = {"error": {"message": f"injected {fault}", "type": "server_error"}}
        if fault.startswith("429"):
            headers = {
                "429-seconds": {"retry-after": "0.01"},
                "429-ms": {"retry-after-ms": "10"},
                "429-date": {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"},
            }[fault]
            self._send(
                429, json.dumps(error).encode(), {"content-type": "application/json", **headers}
            )
        elif fault == "500":
            self._send(500, json.dumps(error).encode())
        elif fault == "reset-after":
            self._reset()
        elif fault == "read-timeout":
            time.sleep(3)
            self.close_connection = True
        elif fault == "total-timeout":
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "100000")
            self.end_headers()
            for _ in range(500):
                time.sleep(0.02)
                self.wfile.write(b" ")
                self.wfile.flush()
            self.close_connection = True
        elif fault == "cut-stream":
            whole = b"".join(chunks(ANSWER)) if stream else json.dumps(ANSWER).encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream" if stream else "application/json")
            self.send_header("content-length", str(len(whole)))
            self.end_headers()
            self.wfile.write(whole[: len(whole) // 2])
            self.wfile.flush()
            self.close_connection = True
        elif fault == "hold-stream":
            self._hold_stream()
        elif fault == "inband-error":
            if stream:
                self._send(
                    200,
                    f"data: {json.dumps(error)}\n\n".encode(),
                    {"content-type": "text/event-stream"},
                )
            else:
                self._send(200, json.dumps(error).encode())
        elif fault == "malformed-json":
            if stream:
                self._send(200, b'data: {"choices": [\n\n', {"content-type": "text/event-stream"})
            else:
                self._send(200, b'{"choices": [')
        elif fault == "big":
            self._send(200, b" " * 2**20)
        elif fault == "br":
            body = json.dumps(ANSWER).encode()
            self._send(200, body, {"content-type": "application/json", "content-encoding": "br"})
        elif fault == "bomb":
            self._send(200, _BOMB, {"content-type": "application/json", "content-encoding": "gzip"})
        elif fault in _RAW:
            self.wfile.write(_RAW[fault])
            self.wfile.flush()
            self.close_connection = True
        elif fault in _ENDLESS:
            self._endless(*_ENDLESS[fault])
        elif fault.startswith("barrier-"):
            if self._barrier(int(fault.removeprefix("barrier-")), self.headers["x-barrier"]):
                self._answer(ANSWER, stream)
            else:
                self._send(503, json.dumps(error).encode())
        else:
            self._send(400, json.dumps({"error": {"message": f"unknown fault {fault}"}}).encode())

    def _hold_stream(self) -> None:
        """The answer streamed up to its first text; then nothing until the client hangs up."""
        first = {"id": "c", "object": "chat.completion.chunk", "model": "m",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "The sum"},
                              "finish_reason": None}]}  # fmt: skip
        head = f"data: {json.dumps(first)}\n\n".encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(head) + 10_000))
        self.end_headers()
        self.wfile.write(head)
        self.wfile.flush()
        while self.connection.recv(1024):  # b"" (or a reset) once the client has hung up
            pass
        self.close_connection = True

    def _endless(self, head: bytes, filler: bytes) -> None:
        # The connection is abandoned to the client, who must hang up: a write
        # then fails at once, and this thread ends.
        self.close_connection = True
        block = filler * 8192
        try:
            self.wfile.write(head)
            for _ in range(_ENDLESS_MAX // len(block)):
                self.wfile.write(block)
        except OSError:
            pass

    def _barrier(self, size: int, key: str) -> bool:
        with _LOCK:
            barrier = _BARRIERS.setdefault(key, threading.Barrier(size, timeout=10.0))
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return False
        return True


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up on a dripping or cut answer is the point of the fault


class Door(Server):
    """A run's own listener, whose idle connections a control request resets (see the module)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.port: int = self.server_address[1]
        self.accepted: list[socket.socket] = []
        self.holder: socket.socket | None = None
        self._lock = threading.Lock()
        threading.Thread(target=self.serve_forever, args=(0.01,), daemon=True).start()

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        self.accepted.append(connection)
        return connection, address

    def reset(self, *, refuse: bool) -> int:
        """Reset every connection accepted so far; with ``refuse``, stop listening too.

        Returns how many were reset. Once it returns, each has sent its peer
        the end of the connection (a FIN at once, an RST as its handler closes it).
        """
        with self._lock:
            if refuse and self.holder is None:
                # Linux: a listener shut down refuses connections at once (and
                # frees the port, which a socket bound and not listening holds).
                self.socket.shutdown(socket.SHUT_RDWR)
                self.shutdown()
                self.holder = socket.socket()
                # Beside the connections accepted on it (not listening: allowed).
                self.holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                self.holder.bind(("127.0.0.1", self.port))
            reset = self.accepted[:]
            self.accepted.clear()
        for connection in reset:
            with contextlib.suppress(OSError):  # closed already
                linger = struct.pack("ii", 1, 0)
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
                connection.shutdown(socket.SHUT_RDWR)  # wakes its handler, which closes it
        return len(reset)


_DOORS: dict[int, Door] = {}


def main() -> None:
    server = Server(("127.0.0.1", 0), Handler)
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
