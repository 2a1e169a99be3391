"""The urllib3 bridge: each HTTP exchange urllib3 makes becomes a call of the sync seam.

requests and botocore send through urllib3, so they are served too. The bridge takes over
``HTTPConnectionPool._make_request``, the one step of ``urlopen`` that writes a request to a
connection and reads the response's head: it runs once per exchange, after the pool has
picked a connection and before any socket is opened, and once more for each retry and
redirect that ``urlopen`` (and the ``Retry`` it was given) decides on, so those keep working
on replay and every hop is recorded.

The answer is handed back the way urllib3 gets one from a socket: a real
``http.client.HTTPResponse`` parses a wire that is written one piece at a time, as the parser
asks for it, from the seam's answer (each seam chunk one HTTP chunk), wrapped in a real
:class:`urllib3.HTTPResponse`. Every way of reading it (``preload_content``, ``read(amt)``,
``read1``, ``stream()``, ``read_chunked``, requests' ``iter_content`` and ``iter_lines``)
is urllib3's own code, and gets each chunk when the seam yields it, with nothing read ahead.

:class:`Urllib3Live` is the other direction, what a recording sends through: the exchange
goes on to urllib3's own ``_make_request``, and the live body is handed to the seam as it
arrives.

urllib3 is imported by this module; import it only once urllib3 is in use.

Why one module of over 400 lines: the wire it writes, the ``http.client`` response that parses
it and the one urllib3 method it takes over only make sense together, and every reading path
urllib3 offers has to be served by the same pieces.
"""

from __future__ import annotations

import http.client
import inspect
import io
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final

import urllib3
from urllib3.connectionpool import HTTPConnectionPool
from urllib3.exceptions import (
    ConnectTimeoutError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.exceptions import TimeoutError as Urllib3Timeout

from pytest_toolnexus._seam.bodies import (
    decode_body,
    keeps_content_length,
    received,
    wants_stream,
    wire_body,
)
from pytest_toolnexus._seam.errors import (
    ConnectError,
    ConnectTimeout,
    ReadError,
    ReadTimeout,
    RemoteProtocolError,
    TransportError,
    expected_error,
)
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.served import sending
from pytest_toolnexus._seam.stream_kind import hands_on_stream
from pytest_toolnexus._seam.transport import (
    ByteStream,
    Transport,
    TransportRequest,
    TransportResponse,
    call,
)

__all__ = ["Exchange", "Urllib3Bridge", "Urllib3Live", "pool_url", "seam_error"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

MakeRequest = Callable[..., Any]

# Headers describing the wire form of a body the live side has already decoded and reframed.
_WIRE_HEADERS: Final = ("content-encoding", "content-length", "transfer-encoding")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class Exchange:
    """One call of ``_make_request``: the pool, the original method and its arguments."""

    pool: HTTPConnectionPool
    send: MakeRequest
    arguments: dict[str, Any]

    @property
    def url(self) -> str:
        return pool_url(self.pool, str(self.arguments["url"]))


@dataclass(slots=True)
class _Pending:
    """The exchange being served, and whether it went out live."""

    exchange: Exchange
    went_out: bool = False


_PENDING: ContextVar[_Pending | None] = ContextVar("pytest_toolnexus_urllib3_pending", default=None)
_SIGNATURES: dict[MakeRequest, inspect.Signature] = {}


def bind(send: MakeRequest, pool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Exchange:
    """The exchange ``send(pool, *args, **kwargs)`` describes, every argument named."""
    signature = _SIGNATURES.get(send)
    if signature is None:
        signature = inspect.signature(send)
        _SIGNATURES[send] = signature
    bound = signature.bind(pool, *args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    arguments.pop("self", None)
    return Exchange(pool, send, arguments)


def pool_url(pool: HTTPConnectionPool, target: str) -> str:
    """The absolute URL of ``target`` (a path, or already absolute through a proxy), with the
    port left out when it is the scheme's default, as httpx spells it."""
    if not target.startswith("/"):
        return target
    scheme = pool.scheme or "http"
    host = pool.host or ""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    port = pool.port
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    return f"{scheme}://{netloc}{target}"


def _request_content(body: Any) -> tuple[bytes, Any]:
    """The bytes of a request body, and what the live send can still send: a file is read and
    put back where it was, an iterator is kept as the list of its chunks."""
    if body is None:
        return b"", body
    if isinstance(body, bytes | bytearray | memoryview):
        return bytes(body), body
    if isinstance(body, str):
        return body.encode("utf-8"), body
    read = getattr(body, "read", None)
    if callable(read):
        try:
            position = body.tell() if callable(getattr(body, "tell", None)) else None
        except (OSError, ValueError):
            position = None  # a pipe or a socket: read once, and sent as the bytes read
        data = read()
        content = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if position is not None and callable(getattr(body, "seek", None)):
            body.seek(position)
            return content, body
        return content, content
    chunks = [c.encode("utf-8") if isinstance(c, str) else bytes(c) for c in body]
    return b"".join(chunks), chunks


def seam_request(exchange: Exchange) -> tuple[TransportRequest, Any]:
    """The seam request for an exchange, and the body the live send sends."""
    arguments = exchange.arguments
    given = arguments.get("headers")
    if given is None:
        given = exchange.pool.headers
    headers = Headers(list(given.items()))
    content, live_body = _request_content(arguments.get("body"))
    url = exchange.url
    body = decode_body(headers, content)
    timeout = arguments.get("timeout")
    read_timeout = getattr(timeout, "read_timeout", timeout)
    return (
        TransportRequest(
            method=str(arguments["method"]),
            url=url,
            headers=headers,
            body=body,
            stream=wants_stream(url, headers, body),
            content=content,
            timeout=read_timeout if isinstance(read_timeout, int | float) else None,
        ),
        live_body,
    )


# -- errors -------------------------------------------------------------------------------------


def library_error(exc: TransportError, exchange: Exchange, conn: Any) -> Exception:
    """The urllib3 exception ``_make_request`` raises for a seam error before any response, so
    ``urlopen`` retries it, or hands it on, as it would a live failure."""
    message = str(exc) or exc.kind
    url = str(exchange.arguments["url"])
    if isinstance(exc, ConnectError):
        return NewConnectionError(conn, f"Failed to establish a new connection: {message}")
    if isinstance(exc, ConnectTimeout):
        return ConnectTimeoutError(conn, message)
    if isinstance(exc, ReadTimeout):
        return ReadTimeoutError(exchange.pool, url, message)
    if isinstance(exc, RemoteProtocolError):
        return ProtocolError("Connection aborted.", http.client.RemoteDisconnected(message))
    return ProtocolError("Connection aborted.", ConnectionResetError(message))


def body_error(exc: TransportError) -> OSError:
    """What a socket raises for a seam error while a body is read: urllib3 turns a timeout
    into ``ReadTimeoutError`` and any other ``OSError`` into ``ProtocolError``."""
    message = str(exc) or exc.kind
    if isinstance(exc, ReadTimeout):
        return TimeoutError(message)
    return ConnectionResetError(message)


def seam_error(exc: BaseException) -> TransportError:
    """The seam error for what urllib3 (or the socket under it) raised, keeping its kind."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, NewConnectionError | SSLError):
        return ConnectError(message)
    if isinstance(exc, ConnectTimeoutError):
        return ConnectTimeout(message)
    if isinstance(exc, ReadTimeoutError | Urllib3Timeout | TimeoutError):
        return ReadTimeout(message)
    cause = exc.args[1] if isinstance(exc, ProtocolError) and len(exc.args) > 1 else exc
    if isinstance(cause, http.client.RemoteDisconnected | http.client.IncompleteRead):
        return RemoteProtocolError(message)
    if isinstance(exc, ProtocolError | OSError | http.client.HTTPException):
        return ReadError(message)
    return TransportError(f"{type(exc).__name__}: {message}")


# -- the answer, as a wire ----------------------------------------------------------------------


class _Wire(io.RawIOBase):
    """The bytes of a response, made one piece at a time when the reader runs out.

    A seam error met while pulling a piece is raised as the socket error it stands for.
    """

    def __init__(self, pieces: Iterator[bytes], stream: ByteStream | None) -> None:
        super().__init__()
        self._pieces: Iterator[bytes] | None = pieces
        self._stream = stream
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            if self._pieces is None:
                return 0
            try:
                self._pending = memoryview(next(self._pieces))
            except StopIteration:
                self._pieces = None
                return 0
            except TransportError as exc:
                self._pieces = None
                raise body_error(exc) from exc
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def close(self) -> None:
        if not self.closed and self._stream is not None:
            self._stream.close()
        super().close()


class _Socket:
    """What ``http.client.HTTPResponse`` asks of a socket: one file to read from."""

    def __init__(self, wire: _Wire) -> None:
        self._wire = wire

    def makefile(self, mode: str = "rb") -> io.BufferedReader:
        return io.BufferedReader(self._wire)


def _head(status: int, framing: tuple[str, str]) -> bytes:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    return f"HTTP/1.1 {status} {reason}\r\n{framing[0]}: {framing[1]}\r\n\r\n".encode("latin-1")


def _chunked(head: bytes, stream: ByteStream) -> Iterator[bytes]:
    yield head
    for chunk in stream:
        if chunk:
            yield b"%x\r\n%s\r\n" % (len(chunk), chunk)
    yield b"0\r\n\r\n"


def _whole(head: bytes, content: bytes) -> Iterator[bytes]:
    yield head
    if content:
        yield content


_RESPONSE_ARGS: dict[type, frozenset[str]] = {}


def _response_args(cls: type) -> frozenset[str]:
    names = _RESPONSE_ARGS.get(cls)
    if names is None:
        names = frozenset(inspect.signature(cls).parameters)
        _RESPONSE_ARGS[cls] = names
    return names


def library_response(
    exchange: Exchange, response: TransportResponse, *, owns_connection: bool
) -> urllib3.HTTPResponse:
    """A :class:`urllib3.HTTPResponse` over the seam's answer, as ``_make_request`` returns
    one. ``owns_connection`` gives it the pooled connection to release (on replay, where no
    live response holds it)."""
    arguments = exchange.arguments
    method = str(arguments["method"])
    stream: ByteStream | None = None
    if isinstance(response.body, ByteStream):
        stream = response.body
        pairs = response.headers.without(*_WIRE_HEADERS).multi_items()
        pairs.append(("Transfer-Encoding", "chunked"))
        pieces = _chunked(_head(response.status, ("Transfer-Encoding", "chunked")), stream)
    else:
        pairs, content = wire_body(response, method)
        pieces = _whole(_head(response.status, ("Content-Length", str(len(content)))), content)
    raw = http.client.HTTPResponse(_Socket(_Wire(pieces, stream)), method=method)  # type: ignore[arg-type]
    raw.begin()
    kwargs: dict[str, Any] = {
        "body": raw,
        "headers": urllib3.HTTPHeaderDict(pairs),
        "status": response.status,
        "version": 11,
        "reason": raw.reason,
        "preload_content": arguments.get("preload_content", True),
        "decode_content": arguments.get("decode_content", True),
        "original_response": raw,
        "pool": exchange.pool,
        "connection": arguments.get("response_conn") if owns_connection else None,
        "retries": arguments.get("retries"),
        "enforce_content_length": arguments.get("enforce_content_length", True),
        "request_method": method,
        "request_url": str(arguments["url"]),
    }
    names = _response_args(urllib3.HTTPResponse)
    if "version_string" in names:
        kwargs["version_string"] = "HTTP/1.1"
    return urllib3.HTTPResponse(**{k: v for k, v in kwargs.items() if k in names})


# -- the two directions -------------------------------------------------------------------------


class Urllib3Bridge:
    """Serves one urllib3 exchange from a seam transport; what the patched
    ``_make_request`` calls with each exchange it does not let through."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    def __call__(self, exchange: Exchange) -> urllib3.HTTPResponse:
        request, live_body = seam_request(exchange)
        pending = _Pending(
            Exchange(exchange.pool, exchange.send, {**exchange.arguments, "body": live_body})
        )
        token = _PENDING.set(pending)
        try:
            response = call(self._transport, request)
        except TransportError as exc:
            raise library_error(exc, exchange, exchange.arguments.get("conn")) from exc
        finally:
            _PENDING.reset(token)
        # A live response holds the pooled connection while it is read; a replayed one
        # hands it back itself.
        return library_response(exchange, response, owns_connection=not pending.went_out)


class Urllib3Live:
    """The sync seam transport a recording sends through: the pending exchange goes on to
    urllib3's own ``_make_request``, and its answer comes back with the body as a stream when
    it is one (or the request asked for one), read as it arrives."""

    def __call__(self, request: TransportRequest) -> TransportResponse:
        pending = _PENDING.get()
        if pending is None:
            raise RuntimeError(
                f"Urllib3Live sends only what the urllib3 bridge is serving; {request.method} "
                f"{request.url} did not come through it"
            )
        pending.went_out = True
        exchange = pending.exchange
        arguments = {**exchange.arguments, "preload_content": False}
        try:
            with sending(request.url):
                live = exchange.send(exchange.pool, **arguments)
        except Exception as exc:
            raise seam_error(exc) from exc
        headers = Headers(list(live.headers.items()))
        method = request.method
        # A client that asked urllib3 not to preload the body reads it as it comes.
        streams = hands_on_stream(
            headers,
            method=method,
            status=live.status,
            asked=request.stream,
            bridged=True,
            incremental=exchange.arguments.get("preload_content", True) is False,
        )
        if keeps_content_length(method, live.status):
            headers = headers.without("transfer-encoding")
        else:
            headers = headers.without(*_WIRE_HEADERS)
        if streams:

            def close() -> None:
                _let_go(live)

            return TransportResponse(live.status, headers, ByteStream(_chunks(live), close=close))
        try:
            content = b"".join(_chunks(live))
        finally:
            live.release_conn()
        return received(live.status, headers, content)


def _let_go(live: Any) -> None:
    """Give back the connection of a live response the client stopped reading: it is
    closed, since the rest of the body is still on it."""
    if not live.isclosed():
        live.close()
    live.release_conn()


def _chunks(live: Any) -> Iterator[bytes]:
    """The decoded body of a live urllib3 response, each piece as soon as it arrives."""
    try:
        if live.chunked and live.supports_chunked_reads():
            yield from _nonempty(live.read_chunked(None, decode_content=True))
        else:
            read1 = getattr(live, "read1", None)
            while True:
                data = read1(decode_content=True) if read1 else live.read(2**16, True)
                if not data:
                    break
                yield data
    except Exception as exc:
        raise seam_error(exc) from exc
    live.release_conn()


def _nonempty(chunks: Iterable[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        if chunk:
            yield chunk
