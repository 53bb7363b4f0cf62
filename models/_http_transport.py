"""The HTTP transport of the served-model backend: one request and its answer within one deadline and one size limit.

Only the standard library is used: a socket per request (``Connection:
close``), TLS from ``ssl`` for https, and ``http.client`` to parse the answer
from a reader whose every receive waits only for the time left.

- ``timeout`` is one wall-clock deadline for the whole exchange: connecting,
  the TLS handshake, sending, the status line and headers, and the body.
  Name resolution is the system resolver's and is not bounded by it.
- Only failures to *establish* a connection are retried (``connect_retries``
  times, backoff ``retry_backoff * 2**k`` seconds, never past the deadline).
- The body may hold at most ``max_response_bytes`` bytes; the status line,
  headers and chunk framing may add at most 64 KiB more.  A declared larger
  ``Content-Length`` is refused before the body is read, any other body as
  soon as the limit is passed.  Of a non-2xx answer only the first 16 KiB are
  read.  A redirect is returned with its target, never followed.

Every failure is raised as a coded :class:`~models._http_failure._Failure`.
"""

from __future__ import annotations

import dataclasses
import http.client
import io
import json
import socket
import ssl
import time
from typing import Any

from ._http_failure import _Failure

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "Answer", "Endpoint", "connect", "request"]

DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # a body larger than this is ``response_too_large``
_HEAD_ALLOWANCE = 64 * 1024  # bytes of status line, headers and chunk framing allowed beyond the body
_READ_STEP = 64 * 1024  # bytes asked of the answer per read
_ERROR_BODY_BYTES = 16 * 1024  # bytes of a non-2xx body read for its excerpt


@dataclasses.dataclass(frozen=True)
class Answer:
    """One HTTP answer as the backend keeps it: never its headers, only what the caller needs."""

    status: int
    reason: str
    body: bytes
    location: str | None = None  # the Location header of a redirect


class _Wire(io.RawIOBase):
    """The socket as a raw stream: every receive waits at most until the deadline, and the total is bounded.

    ``http.client`` parses the answer from a buffered reader over this stream, so no read of its own
    (status line, headers, body, chunk sizes) can outlast the deadline or pull more than ``limit`` bytes.
    """

    def __init__(self, sock: socket.socket, deadline: float, limit: int, timed_out: Any) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self._limit = limit
        self._timed_out = timed_out  # () -> _Failure
        self.received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise self._timed_out()
        self._sock.settimeout(left)
        count = self._sock.recv_into(buffer)
        self.received += count
        if self.received > self._limit:
            raise _Failure("response_too_large", f"the answer exceeds {self._limit} bytes with its headers "
                           "and framing (max_response_bytes plus 64 KiB)")
        return count


class _Source:
    """What ``http.client.HTTPResponse`` reads from: a buffered reader over a :class:`_Wire`."""

    def __init__(self, wire: _Wire) -> None:
        self._wire = wire

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(self._wire)


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """Where requests go: the parts of a checked ``http(s)`` base URL."""

    scheme: str  # "http" or "https"
    host: str
    port: int
    netloc: str  # the Host header
    path: str  # the base URL's path without its trailing slash; request paths are appended to it


def connect(endpoint: Endpoint, deadline: float, timed_out: Any, connect_retries: int, retry_backoff: float) -> socket.socket:
    """A connected (and, for https, TLS-wrapped) socket; refused connections are retried within the deadline."""
    attempt = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise timed_out("connecting")
        try:
            sock = socket.create_connection((endpoint.host, endpoint.port), timeout=left)
        except TimeoutError:  # socket.timeout is TimeoutError
            raise timed_out("connecting") from None
        except OSError as exc:  # refused, unreachable, name not resolved: nothing was sent
            wait = retry_backoff * 2 ** attempt
            if attempt >= connect_retries or time.monotonic() + wait >= deadline:
                spare = "" if attempt >= connect_retries else " (no time left for another within timeout)"
                raise _Failure("connection_error", f"cannot connect to {endpoint.host}:{endpoint.port} after "
                               f"{attempt + 1} attempt(s){spare}: {type(exc).__name__}: {exc}") from None
            time.sleep(wait)
            attempt += 1
            continue
        if endpoint.scheme != "https":
            return sock
        try:
            sock.settimeout(max(deadline - time.monotonic(), 1e-3))
            return ssl.create_default_context().wrap_socket(sock, server_hostname=endpoint.host)
        except TimeoutError:
            sock.close()
            raise timed_out("in the TLS handshake") from None
        except (ssl.SSLError, OSError) as exc:  # a TLS failure does not go away on retry
            sock.close()
            raise _Failure("connection_error", f"TLS handshake with {endpoint.host}:{endpoint.port} failed: "
                           f"{type(exc).__name__}: {exc}") from None


def request(endpoint: Endpoint, method: str, path: str, body: dict[str, Any] | None, *, api_key: str | None,
            timeout: float, max_response_bytes: int, connect_retries: int, retry_backoff: float) -> Answer:
    """One exchange within one deadline of ``timeout`` seconds; raises ``_Failure``."""
    deadline = time.monotonic() + timeout
    phase = "connecting"

    def timed_out(where: str | None = None) -> _Failure:
        return _Failure("timeout", f"no complete answer within {timeout:g} s ({where or phase})")

    payload = b""
    lines = [f"{method} {endpoint.path}{path} HTTP/1.1", f"Host: {endpoint.netloc}", "Accept: application/json",
             "User-Agent: preregbench", "Connection: close"]
    if body is not None:
        try:
            payload = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in a prompt: sent as a JSON escape, never as bad UTF-8
            payload = json.dumps(body, ensure_ascii=True, allow_nan=False).encode("ascii")
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    if api_key:
        lines.append(f"Authorization: Bearer {api_key}")
    message = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload

    sock = connect(endpoint, deadline, timed_out, connect_retries, retry_backoff)
    try:
        phase = "sending the request"
        left = deadline - time.monotonic()
        if left <= 0:
            raise timed_out()
        sock.settimeout(left)  # since Python 3.5 the timeout bounds the whole sendall
        sock.sendall(message)
        phase = "waiting for the status line and headers"
        wire = _Wire(sock, deadline, max_response_bytes + _HEAD_ALLOWANCE, timed_out)
        answer = http.client.HTTPResponse(_Source(wire), method=method)  # type: ignore[arg-type]
        answer.begin()
        if 300 <= answer.status < 400:
            return Answer(answer.status, answer.reason, b"", answer.getheader("Location"))
        success = 200 <= answer.status < 300
        limit = max_response_bytes if success else _ERROR_BODY_BYTES  # an error body: its start will do
        declared = _declared_length(answer)
        if success and declared is not None and declared > limit:
            raise _Failure("response_too_large", f"the answer declares Content-Length {declared}, over the "
                           f"limit of {limit} bytes (max_response_bytes); nothing of it was read")
        phase = "reading the body"
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = answer.read(min(_READ_STEP, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if not success:
            return Answer(answer.status, answer.reason, b"".join(chunks)[:limit])
        if total > limit:
            raise _Failure("response_too_large", f"the answer body exceeds the limit of {limit} bytes "
                           "(max_response_bytes); reading stopped there")
        if declared is not None and answer.length:
            raise _Failure("malformed_response", f"the body is truncated: Content-Length {declared}, but the "
                           f"connection closed after {total} bytes")
        return Answer(answer.status, answer.reason, b"".join(chunks))
    except _Failure:
        raise
    except TimeoutError:
        raise timed_out() from None
    except http.client.IncompleteRead as exc:
        raise _Failure("malformed_response", f"the chunked body is truncated: the connection closed after "
                       f"{len(exc.partial)} bytes of a chunk") from None
    except (http.client.RemoteDisconnected, ConnectionError) as exc:
        raise _Failure("connection_error", f"the connection failed while {phase} (not retried): "
                       f"{type(exc).__name__}: {exc}") from None
    except (http.client.HTTPException, ValueError) as exc:  # bad status line, overlong header, bad chunk size
        raise _Failure("malformed_response", f"the answer is not valid HTTP: {type(exc).__name__}: {exc}") from None
    except OSError as exc:
        raise _Failure("connection_error", f"the connection failed while {phase} (not retried): "
                       f"{type(exc).__name__}: {exc}") from None
    finally:
        sock.close()


def _declared_length(answer: http.client.HTTPResponse) -> int | None:
    """The answer's Content-Length (None when chunked or absent); raises ``_Failure`` when it is not one number."""
    if answer.chunked:
        return None
    values = answer.headers.get_all("Content-Length") or []
    if not values:
        return None
    distinct = {value.strip() for value in values}
    if len(distinct) != 1 or not next(iter(distinct)).isdigit() or not next(iter(distinct)).isascii():
        shown = ", ".join(repr(v[:40]) for v in values[:3])
        raise _Failure("malformed_response", f"the answer's Content-Length is not one decimal number: {shown}")
    return int(next(iter(distinct))[:30])  # 30 digits are far beyond any limit; int() never sees thousands

