"""A loopback HTTP server that misbehaves on purpose, for the HTTP backend's fault tests.

``HostileServer`` listens on 127.0.0.1 only and picks a behaviour by the first
path segment (``/<behaviour>/v1/chat/completions``): wrong statuses, broken
bodies, resets, trickled bytes, endless bodies, echoed credentials.  It speaks
raw sockets so that it can break HTTP in ways a real server library will not.

Every loop in it is bounded: the accept loop by ``max_connections``, each
trickle by the length of what it sends, each endless body by ``endless_bytes``.
Pacing waits on the ``stop`` event, so closing the server ends every handler at
once; ``close()`` joins them and reports any that did not end.

``Backlog`` is a listener that never accepts: the first connection completes and
nothing it sends is read (the client's send blocks once the buffers fill);
further connections never complete on Linux, whose accept queue holds
``backlog + 1`` connections.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import quote

CHUNK = b"x" * 65536


@dataclass
class Seen:
    """One request as the server read it."""

    behaviour: str
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


def completion(content: str, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    }


def completion_bytes(content: str) -> bytes:
    return json.dumps(completion(content)).encode()


@dataclass
class HostileServer:
    """Misbehaves by path; ``interval`` paces every trickle (seconds per byte)."""

    interval: float = 0.1
    max_connections: int = 1000
    endless_bytes: int = 64 * 1024 * 1024
    requests: list[Seen] = field(default_factory=list)
    sent: dict[str, int] = field(default_factory=dict)  # body bytes sent per behaviour
    problems: list[str] = field(default_factory=list)  # handler errors other than a client hanging up

    def __post_init__(self) -> None:
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._wake_read, self._wake_write = socket.socketpair()
        self._handlers: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, name="hostile-accept", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def base(self, behaviour: str) -> str:
        return f"{self.url}/{behaviour}/v1"

    def seen(self, behaviour: str) -> list[Seen]:
        with self.lock:
            return [r for r in self.requests if r.behaviour == behaviour]

    def start(self) -> HostileServer:
        self._acceptor.start()
        return self

    def close(self) -> list[str]:
        """Stop, join every thread; returns the names of threads that did not end within 5 s."""
        self.stop.set()
        self._wake_write.send(b"x")
        self._acceptor.join(5)
        stuck = [self._acceptor.name] if self._acceptor.is_alive() else []
        for handler in list(self._handlers):
            handler.join(5)
            if handler.is_alive():
                stuck.append(handler.name)
        for sock in (self._listener, self._wake_read, self._wake_write):
            sock.close()
        return stuck

    # -- plumbing ---------------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        for number in range(self.max_connections):
            ready, _, _ = select.select([self._listener, self._wake_read], [], [])
            if self._wake_read in ready or self.stop.is_set():
                return
            conn, _ = self._listener.accept()
            handler = threading.Thread(target=self._handle, args=(conn,), name=f"hostile-{number}", daemon=True)
            self._handlers.append(handler)
            handler.start()

    def _handle(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)  # a backstop: no handler outlives a silent client by long
            request = self._read_request(conn)
            if request is None:
                return
            with self.lock:
                self.requests.append(request)
            getattr(self, f"do_{request.behaviour}", self.do_unknown)(conn, request)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # the client gave up (deadline passed, size limit reached): expected
        except Exception as exc:  # noqa: BLE001 -- reported to the test through `problems`
            with self.lock:
                self.problems.append(f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    @staticmethod
    def _read_request(conn: socket.socket) -> Seen | None:
        data = b""
        while b"\r\n\r\n" not in data:
            if len(data) > 65536:
                return None
            piece = conn.recv(65536)
            if not piece:
                return None
            data += piece
        head, _, body = data.partition(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _version = request_line.split(" ", 2)
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip()] = value.strip()
        length = min(int(headers.get("Content-Length", "0")), 1 << 20)
        while len(body) < length:
            piece = conn.recv(65536)
            if not piece:
                break
            body += piece
        behaviour = path.strip("/").partition("/")[0]
        return Seen(behaviour, method, path, headers, body)

    def _count(self, behaviour: str, count: int) -> None:
        with self.lock:
            self.sent[behaviour] = self.sent.get(behaviour, 0) + count

    @staticmethod
    def head(status: str, headers: dict[str, str] | None = None, length: int | None = None) -> bytes:
        lines = [f"HTTP/1.1 {status}", "Content-Type: application/json", "Connection: close"]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def answer(self, conn: socket.socket, status: str, body: bytes, headers: dict[str, str] | None = None) -> None:
        conn.sendall(self.head(status, headers, len(body)) + body)

    def trickle(self, conn: socket.socket, behaviour: str, data: bytes) -> None:
        for index in range(len(data)):
            if self.stop.wait(self.interval):
                return
            conn.sendall(data[index:index + 1])
            self._count(behaviour, 1)

    def endless(self, conn: socket.socket, behaviour: str, framing: Callable[[bytes], bytes] = bytes) -> None:
        sent = 0
        while sent < self.endless_bytes and not self.stop.is_set():
            conn.sendall(framing(CHUNK))
            sent += len(CHUNK)
            self._count(behaviour, len(CHUNK))

    @staticmethod
    def key_of(request: Seen) -> str:
        return request.headers.get("Authorization", "").removeprefix("Bearer ")

    # -- behaviours -------------------------------------------------------------------------------

    def do_unknown(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "404 Not Found", b'{"detail": "no such behaviour"}')

    def do_ok(self, conn: socket.socket, request: Seen) -> None:
        if request.method == "GET":
            listing = {"object": "list", "data": [{"id": "served-model", "object": "model", "owned_by": "test"}]}
            self.answer(conn, "200 OK", json.dumps(listing).encode())
            return
        content = json.loads(request.body)["messages"][-1]["content"]
        self.answer(conn, "200 OK", completion_bytes(f"echo: {content[:100]}"))

    def do_status500(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "500 Internal Server Error", b"upstream model crashed", {"Content-Type": "text/plain"})

    def do_status429(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "429 Too Many Requests", b'{"error": {"message": "rate limited"}}', {"Retry-After": "30"})

    def do_garbage(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "200 OK", b"<html>\x00\x01 not json at all")

    def do_badutf8(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "200 OK", b'{"choices": [{"message": {"content": "caf\xc3 \xff"}}]}')

    def do_encodedsurrogate(self, conn: socket.socket, request: Seen) -> None:
        # UTF-8 bytes of U+D800: Python's json.loads(bytes) would accept them ('surrogatepass').
        self.answer(conn, "200 OK", b'{"choices": [{"message": {"content": "\xed\xa0\x80"}}]}')

    def do_escapedsurrogate(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "200 OK", b'{"choices": [{"message": {"content": "lone \\ud800 surrogate"}}]}')

    def do_nochoices(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "200 OK", b'{"object": "chat.completion", "id": "x"}')

    def do_empty(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "200 OK", b"")

    def do_nested(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "200 OK", b"[" * 200_000)

    def do_redirect(self, conn: socket.socket, request: Seen) -> None:
        # /redirect<status>/...: a redirect to the well-behaved endpoint, which must never be asked.
        status = {"301": "301 Moved Permanently", "302": "302 Found", "307": "307 Temporary Redirect",
                  "308": "308 Permanent Redirect"}[request.path.strip("/").split("/")[1]]
        self.answer(conn, status, b"", {"Location": f"{self.url}/target/v1/chat/completions"})

    def do_target(self, conn: socket.socket, request: Seen) -> None:
        self.do_ok(conn, request)

    def do_reset(self, conn: socket.socket, request: Seen) -> None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST

    def do_resetbody(self, conn: socket.socket, request: Seen) -> None:
        body = completion_bytes("cut short")
        conn.sendall(self.head("200 OK", length=len(body)) + body[:10])
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def do_hangup(self, conn: socket.socket, request: Seen) -> None:
        pass  # closes without a word

    def do_nothttp(self, conn: socket.socket, request: Seen) -> None:
        conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    def do_manyheaders(self, conn: socket.socket, request: Seen) -> None:
        body = completion_bytes("fine")
        headers = {f"X-Filler-{i}": "y" for i in range(150)}
        self.answer(conn, "200 OK", body, headers)

    def do_slowheaders(self, conn: socket.socket, request: Seen) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        self.stop.wait(30)

    def do_tricklehead(self, conn: socket.socket, request: Seen) -> None:
        body = completion_bytes("slow")
        self.trickle(conn, "tricklehead", self.head("200 OK", length=len(body)))
        if not self.stop.is_set():
            conn.sendall(body)

    def do_tricklebody(self, conn: socket.socket, request: Seen) -> None:
        # A valid answer in the end: a client that waits long enough would accept it.
        body = completion_bytes("a trickled answer that would be accepted if the client waited for all of it")
        conn.sendall(self.head("200 OK", length=len(body)))
        self.trickle(conn, "tricklebody", body)

    def do_keepopen(self, conn: socket.socket, request: Seen) -> None:
        # No Content-Length: the body ends when the connection closes, which it never does.
        conn.sendall(self.head("200 OK") + completion_bytes("held open"))
        self.stop.wait(30)

    def do_hugelength(self, conn: socket.socket, request: Seen) -> None:
        conn.sendall(self.head("200 OK", length=50 * 1024 * 1024))
        self.endless(conn, "hugelength")

    def do_hugestream(self, conn: socket.socket, request: Seen) -> None:
        conn.sendall(self.head("200 OK"))
        self.endless(conn, "hugestream")

    def do_hugechunked(self, conn: socket.socket, request: Seen) -> None:
        conn.sendall(self.head("200 OK", {"Transfer-Encoding": "chunked"}))
        self.endless(conn, "hugechunked", lambda data: b"%x\r\n%s\r\n" % (len(data), data))

    def do_truncated(self, conn: socket.socket, request: Seen) -> None:
        body = completion_bytes("valid JSON, but not all of the declared body")
        conn.sendall(self.head("200 OK", length=len(body) + 100) + body)

    def do_truncchunked(self, conn: socket.socket, request: Seen) -> None:
        body = completion_bytes("chunked, closed mid-chunk")
        conn.sendall(self.head("200 OK", {"Transfer-Encoding": "chunked"}) + b"%x\r\n" % (len(body) + 50) + body)

    def do_chunked(self, conn: socket.socket, request: Seen) -> None:
        body = completion_bytes("in two chunks")
        half = len(body) // 2
        frames = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, body[:half], len(body) - half, body[half:])
        conn.sendall(self.head("200 OK", {"Transfer-Encoding": "chunked"}) + frames)

    def do_badlength(self, conn: socket.socket, request: Seen) -> None:
        body = completion_bytes("length header is not a number")
        conn.sendall(self.head("200 OK", {"Content-Length": "12abc"}) + body)

    def do_twolengths(self, conn: socket.socket, request: Seen) -> None:
        body = completion_bytes("two different lengths")
        conn.sendall(self.head("200 OK", {"Content-Length": f"{len(body)}"}, length=len(body) - 5) + body)

    # -- behaviours that echo the credentials they were sent --------------------------------------

    def do_echomodels(self, conn: socket.socket, request: Seen) -> None:
        key = self.key_of(request)
        if request.method == "GET":
            entry = {"id": "served-model", "object": "model", "owned_by": "test",
                     "seen_headers": {"Authorization": request.headers.get("Authorization", "")},
                     "note": f"called with {key}", key: "a key named after the secret",
                     "url": f"https://proxy.example/v1?token={quote(key, safe='')}"}
            self.answer(conn, "200 OK", json.dumps({"object": "list", "data": [entry]}).encode())
        else:
            self.do_ok(conn, request)

    def do_echoerror(self, conn: socket.socket, request: Seen) -> None:
        # The key starts 10 characters before the 300-character cut of an error excerpt and straddles it.
        key = self.key_of(request)
        body = ("e" * 290 + key + " trailing words after the key").encode()
        self.answer(conn, "500 Internal Server Error", body, {"Content-Type": "text/plain"})

    def do_echopercent(self, conn: socket.socket, request: Seen) -> None:
        key = self.key_of(request)
        self.answer(conn, "502 Bad Gateway", f"upstream refused token={quote(key, safe='')}".encode())

    def do_echotext(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "200 OK", completion_bytes(f"Sure! Your key is {self.key_of(request)}, keep it safe."))

    def do_echoredirect(self, conn: socket.socket, request: Seen) -> None:
        key = self.key_of(request)
        self.answer(conn, "302 Found", b"", {"Location": f"{self.url}/target/v1?key={key}"})

    def do_echoreason(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, f"403 Forbidden for {self.key_of(request)}", b"{}")

    def do_echostatusline(self, conn: socket.socket, request: Seen) -> None:
        conn.sendall(f"NOT-HTTP {self.key_of(request)}\r\n\r\n".encode())

    def do_echomalformed(self, conn: socket.socket, request: Seen) -> None:
        self.answer(conn, "200 OK", ("x" * 295 + self.key_of(request)).encode())


class Backlog:
    """A loopback listener that never accepts (see the module docstring); ``fill()`` takes its one queue slot."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # inherited by queued connections
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(0)
        self._fillers: list[socket.socket] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def fill(self) -> None:
        filler = socket.create_connection(self._listener.getsockname(), timeout=5)
        self._fillers.append(filler)

    def close(self) -> None:
        for sock in self._fillers:
            sock.close()
        self._listener.close()
