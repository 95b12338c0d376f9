"""A small OpenAI-compatible HTTP server on 127.0.0.1 that the tests control: the server
under test conditions (slow replies, HTTP 400 for an over-long context, 429 with
``Retry-After``, redirects), spoken to by the library's real HTTP client over a real socket.

``ChatServer(script)``: ``script(index, body)`` returns what request ``index`` (0-based, in
arrival order) gets: a reply text, or a ``Behaviour``. Every request is recorded with its
headers, arrival and end times, and the most requests seen in flight at once.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Behaviour:
    """What one request gets: ``text`` after ``delay_s``, or an HTTP ``status`` (or a 200 with a
    ``body`` of its own) with ``body`` and ``headers`` (``Retry-After``, ``Location``)."""

    text: str = "ANSWER: 0"
    delay_s: float = 0.0
    status: int = 200
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    choices: tuple[str, ...] = ()  #: the texts of a request with ``n`` (default: ``text`` each time)


#: llama.cpp's wording of an over-long prompt.
OVERFLOW = Behaviour(status=400, body=json.dumps({"error": {"code": 400, "type": "exceed_context_size_error",
                                                            "message": "the request exceeds the available context "
                                                                       "size, try increasing it"}}))


class ChatServer:
    def __init__(self, script: Callable[[int, dict], str | Behaviour] | None = None, model_id: str = "served-v1",
                 honours_n: bool = True):
        self.script = script or (lambda index, body: "ANSWER: 0")
        self.model_id = model_id
        self.honours_n = honours_n  #: False: one choice whatever ``n`` asks, as transformers serve does
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [
                        {"id": server.model_id, "object": "model", "created": int(time.time()), "owned_by": "test"}]})
                else:
                    self._json(404, {"error": "no such path"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    index = len(server.requests)
                    record = self._record = {"path": self.path, "auth": self.headers.get("Authorization"),
                                             "headers": dict(self.headers), "body": body,
                                             "arrived": time.monotonic()}
                    server.requests.append(record)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    behaviour = server.script(index, body)
                    if isinstance(behaviour, str):
                        behaviour = Behaviour(text=behaviour)
                    time.sleep(behaviour.delay_s)
                    if behaviour.status != 200 or behaviour.body:
                        self._raw(behaviour.status, behaviour.body.encode(), behaviour.headers)
                        return
                    prompt = sum(len(m["content"].split()) for m in body["messages"])
                    count = int(body.get("n") or 1) if server.honours_n else 1
                    texts = [(behaviour.choices[i] if i < len(behaviour.choices) else behaviour.text)
                             for i in range(count)]
                    completion = sum(len(text.split()) for text in texts)
                    self._json(200, {
                        "id": f"chatcmpl-{index}", "object": "chat.completion", "model": server.model_id,
                        "choices": [{"index": i, "finish_reason": behaviour.finish_reason,
                                     "message": {"role": "assistant", "content": text}}
                                    for i, text in enumerate(texts)],
                        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                  "total_tokens": prompt + completion}})
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout)
                    pass
                finally:
                    self._done()

            def _done(self) -> None:
                """Count the request finished before its reply is sent: the client may send the
                next one as soon as it has the reply."""
                record = getattr(self, "_record", None)
                if record is not None and "ended" not in record:
                    with server._lock:
                        server.in_flight -= 1
                        record["ended"] = time.monotonic()

            def _json(self, status: int, payload: dict) -> None:
                self._raw(status, json.dumps(payload).encode(), {"Content-Type": "application/json"})

            def _raw(self, status: int, data: bytes, headers: dict[str, str]) -> None:
                self._done()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
