"""Loopback HTTP/1.1 servers for tests: raw sockets on 127.0.0.1, an ephemeral port, threads.

Nothing here leaves the machine. Each server is a context manager: entering binds port 0 and
starts the accept thread, leaving stops every thread it started and closes every socket. The
servers speak HTTP with plain sockets, not ``http.server``, so a test controls every byte that
goes out and sees every byte that comes in (``RawRequest.raw``).

A handler is a callable ``handler(request, conn)`` that writes the response to ``conn`` itself;
``Fixed``, ``Drip`` and the ``write_*`` helpers cover what the suite needs.

Times (``received_at``, ``Drip.sent_at``) are :func:`tests.support.realtime.wall` readings: real
time even when a virtual clock is installed while a server thread runs.
"""

from __future__ import annotations

import contextlib
import http
import socket
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tests.support.realtime import wall

__all__ = [
    "Drip",
    "Fixed",
    "LoopbackServer",
    "RawRequest",
    "write_chunk",
    "write_chunked_head",
    "write_response",
]

Handler = Callable[["RawRequest", socket.socket], None]

_IO_TIMEOUT = 10.0


@dataclass(frozen=True)
class RawRequest:
    """One request exactly as it arrived: ``raw`` is the request line, headers and body bytes."""

    raw: bytes
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    received_at: float

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None


class _Reader:
    """Buffered reads from one connection, keeping a copy of every byte it consumed."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._buffer = b""
        self.consumed = bytearray()

    def _fill(self) -> bool:
        data = self._conn.recv(65536)
        if not data:
            return False
        self._buffer += data
        return True

    def until(self, marker: bytes) -> bytes | None:
        while marker not in self._buffer:
            if not self._fill():
                return None
        head, _, self._buffer = self._buffer.partition(marker)
        self.consumed += head + marker
        return head + marker

    def exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if not self._fill():
                raise ConnectionError("the client closed the connection inside a body")
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        self.consumed += data
        return data

    def take_consumed(self) -> bytes:
        data = bytes(self.consumed)
        self.consumed.clear()
        return data


def _read_request(reader: _Reader) -> RawRequest | None:
    head = reader.until(b"\r\n\r\n")
    if head is None:
        return None
    request_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
    method, target, _ = request_line.split(" ", 2)
    headers = [
        (name.strip(), value.strip())
        for name, _, value in (line.partition(":") for line in header_lines)
    ]
    lowered = {k.lower(): v for k, v in headers}
    body = b""
    if "chunked" in lowered.get("transfer-encoding", "").lower():
        while True:
            size_line = reader.until(b"\r\n")
            if size_line is None:
                raise ConnectionError("the client closed the connection inside a chunked body")
            size = int(size_line.split(b";", 1)[0], 16)
            chunk = reader.exactly(size + 2)[:size]
            body += chunk
            if size == 0:
                break
    elif "content-length" in lowered:
        body = reader.exactly(int(lowered["content-length"]))
    return RawRequest(
        raw=reader.take_consumed(),
        method=method,
        target=target,
        headers=headers,
        body=body,
        received_at=wall(),
    )


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Status"
    return f"HTTP/1.1 {status} {phrase}\r\n".encode("latin-1")


def _header_block(headers: Iterable[tuple[str, str]]) -> bytes:
    return b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in headers)


def write_response(
    conn: socket.socket, status: int, headers: Sequence[tuple[str, str]], body: bytes
) -> None:
    """Send one complete response with a ``Content-Length`` (added unless given)."""
    given = {k.lower() for k, _ in headers}
    extra = [] if "content-length" in given else [("Content-Length", str(len(body)))]
    conn.sendall(_status_line(status) + _header_block([*headers, *extra]) + b"\r\n" + body)


def write_chunked_head(
    conn: socket.socket, status: int, headers: Sequence[tuple[str, str]]
) -> None:
    """Send a status line and headers that announce a chunked body."""
    block = _header_block([*headers, ("Transfer-Encoding", "chunked")])
    conn.sendall(_status_line(status) + block + b"\r\n")


def write_chunk(conn: socket.socket, data: bytes) -> None:
    """Send one chunk of a chunked body; ``b""`` ends the body."""
    conn.sendall(f"{len(data):x}\r\n".encode() + data + b"\r\n")


class Fixed:
    """A handler that answers every request with the same complete response."""

    def __init__(
        self,
        status: int = 200,
        headers: Sequence[tuple[str, str]] = (),
        body: bytes = b"",
    ) -> None:
        self.status = status
        self.headers = list(headers)
        self.body = body

    def __call__(self, request: RawRequest, conn: socket.socket) -> None:
        write_response(conn, self.status, self.headers, self.body)


class Drip:
    """A handler that streams ``chunks`` as a chunked body, one every ``interval`` seconds.

    The first chunk goes out with the headers. ``sent_at`` holds the real time just before
    each chunk was written, so no client can have it earlier. ``client_gone`` is set when a
    write fails because the client went away, and ``done`` when the handler returns.
    """

    def __init__(
        self,
        chunks: Sequence[bytes],
        *,
        interval: float,
        headers: Sequence[tuple[str, str]] = (("Content-Type", "text/event-stream"),),
        status: int = 200,
    ) -> None:
        self.chunks = list(chunks)
        self.interval = interval
        self.headers = list(headers)
        self.status = status
        self.sent_at: list[float] = []
        self.client_gone = threading.Event()
        self.done = threading.Event()
        self._stop = threading.Event()

    def stop(self) -> None:
        self._stop.set()

    def __call__(self, request: RawRequest, conn: socket.socket) -> None:
        try:
            write_chunked_head(conn, self.status, self.headers)
            for index, chunk in enumerate(self.chunks):
                if index and self._stop.wait(self.interval):
                    return
                self.sent_at.append(wall())
                write_chunk(conn, chunk)
            write_chunk(conn, b"")
        except OSError:
            self.client_gone.set()
            raise
        finally:
            self.done.set()


class LoopbackServer:
    """An HTTP/1.1 server on ``127.0.0.1`` and a free port, serving ``handler`` in threads.

    Connections are kept alive: after the handler answers, the next request on the same
    connection is read. ``requests`` lists every request received, in arrival order.
    """

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[RawRequest] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._port: int | None = None
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []

    @property
    def port(self) -> int:
        assert self._port is not None, "the server has not been started"
        return self._port

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.origin + path

    def __enter__(self) -> LoopbackServer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._spawn(self._accept_loop)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop accepting, stop every handler, close every socket and join every thread."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._port is not None:
            # Wake the accept() the accept thread is blocked in; it then sees the stop flag.
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self._port), timeout=1).close()
        stop_handler = getattr(self.handler, "stop", None)
        if callable(stop_handler):
            stop_handler()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in list(self._threads):
            thread.join(timeout=5)
        if self._listener is not None:
            self._listener.close()

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            if self._stop.is_set():
                conn.close()
                return
            conn.settimeout(_IO_TIMEOUT)
            with self._lock:
                self._conns.append(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        reader = _Reader(conn)
        try:
            while not self._stop.is_set():
                request = _read_request(reader)
                if request is None:
                    return
                with self._lock:
                    self.requests.append(request)
                self.handler(request, conn)
        except OSError:
            return
        except Exception as exc:  # surfaced through ``errors`` for the test to assert on
            self.errors.append(exc)
        finally:
            conn.close()
