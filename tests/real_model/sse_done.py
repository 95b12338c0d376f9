"""A loopback proxy that ends every server-sent-event stream with ``data: [DONE]``.

``transformers serve`` (5.x) ends a streamed chat completion after its finish chunk, without
the ``data: [DONE]`` line the OpenAI API sends last. verifiers 0.4's chat harness always asks
for a stream (``stream=True`` in its chat program, no setting turns it off), and its
interception server relays the provider's stream and waits for that line
(``Dialect.is_terminal_event``): without it every call fails with "upstream stream ended
before its terminal event", so every ``vf-eval`` rollout fails. This proxy sits between the
two on 127.0.0.1 and passes everything through, adding the line to a stream that ended
without it; a server that sends it (vLLM, SGLang, OpenAI) needs no proxy::

    with done_proxy(server.url) as url:   # server.url: ``http://127.0.0.1:PORT/v1``
        ...  # vf-eval ... --client.base-url URL

``python -m tests.real_model.sse_done http://127.0.0.1:8000/v1 --port 8001`` runs it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

DONE = b"data: [DONE]\n\n"
#: Headers that describe one hop's connection, not the message (RFC 9110 7.6.1).
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
                        "upgrade", "content-length", "host"})


def handler_for(upstream: str) -> type[BaseHTTPRequestHandler]:
    """A handler forwarding every request to ``upstream`` (a URL ending in the API root, ``/v1``)."""
    target = urlsplit(upstream)
    root = target.path.rstrip("/")

    class Forward(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path if not root or self.path.startswith(root) else root + self.path
            headers = {name: value for name, value in self.headers.items() if name.lower() not in HOP_BY_HOP}
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=600)
            try:
                connection.request(self.command, path, body=body or None, headers=headers)
                response = connection.getresponse()
                streamed = response.getheader("Content-Type", "").startswith("text/event-stream")
                self.send_response(response.status)
                for name, value in response.getheaders():
                    if name.lower() not in HOP_BY_HOP:
                        self.send_header(name, value)
                self.send_header("Connection", "close")  # the body ends where the connection does
                self.end_headers()
                tail = b""
                while chunk := (response.read1(65536) if streamed else response.read(65536)):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                    tail = (tail + chunk)[-64:]
                if streamed and DONE.strip() not in tail:
                    self.wfile.write((b"" if tail.endswith(b"\n\n") or not tail else b"\n\n") + DONE)
                    self.wfile.flush()
            finally:
                connection.close()

        do_GET = do_POST = _forward

        def log_message(self, *args: object) -> None:
            pass

    return Forward


@contextlib.contextmanager
def done_proxy(upstream: str, port: int = 0) -> Iterator[str]:
    """The proxy on 127.0.0.1 for as long as the block runs; yields its API root (``.../v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler_for(upstream))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}{urlsplit(upstream).path.rstrip('/')}"
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("upstream", help="the server's API root, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    with done_proxy(args.upstream, args.port) as url:
        print(f"forwarding {url} -> {args.upstream}, adding data: [DONE] where a stream lacks it", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
