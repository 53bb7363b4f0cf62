"""A stand-in of an OpenAI-compatible server for the benchmark scripts: stdlib only, on 127.0.0.1.

Every ``GET`` answers with the ``/models`` listing given, every ``POST`` with the completion body given, after
sleeping ``latency`` seconds (a simulated model's time to answer).  ``serving(...)`` starts servers on free ports
in threads and stops them on leaving.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator


def completion(text: str, model: str) -> bytes:
    """The body of a chat completion whose one choice says ``text``."""
    return json.dumps({"id": "c", "object": "chat.completion", "model": model,
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": text}}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


def listing(model: str) -> bytes:
    return json.dumps({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "bench"}]}).encode()


class StandIn(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512

    def __init__(self, body: bytes, models: bytes, latency: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.body, self.models, self.latency = body, models, latency

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._send(self.server.models)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.server.latency:
            time.sleep(self.server.latency)  # the simulated model's time to answer
        self._send(self.server.body)


@contextlib.contextmanager
def serving(count: int, body: bytes, models: bytes, latency: float = 0.0) -> Iterator[list[StandIn]]:
    """``count`` stand-ins answering ``body``, serving from threads until the block ends."""
    servers = [StandIn(body, models, latency) for _ in range(count)]
    for server in servers:
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield servers
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
