"""The Transport seam: one request-to-response callable, sync and async (ADR 0019).

A request carries its body parsed (a JSON value) or as bytes. A response carries either a parsed
body or a byte stream. Nothing in this module knows about httpx, cassettes or pytest.
"""

from __future__ import annotations

import inspect
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeAlias, cast, final

from pytest_toolnexus._safety.mask import masked_repr

from .cancel import CancelToken
from .errors import ContractError, expected_error
from .headers import Headers

__all__ = [
    "PUSHED",
    "AsyncByteStream",
    "AsyncTransport",
    "ByteStream",
    "DualTransport",
    "JSONValue",
    "Pushed",
    "RequestBody",
    "ResponseBody",
    "Transport",
    "TransportRequest",
    "TransportResponse",
    "acall",
    "async_side",
    "call",
    "check_response",
]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

JSONValue: TypeAlias = dict[str, Any] | list[Any] | str | int | float | bool | None
"""A parsed JSON value, as :func:`json.loads` returns it."""

RequestBody: TypeAlias = JSONValue | bytes
"""A request body: a parsed JSON value, or bytes when the body is not JSON."""


@final
class ByteStream:
    """A pull stream of byte chunks for the sync seam.

    Iterating yields each chunk as the producer yields it; nothing is read ahead. ``close``
    releases the producer (a connection, a file) and may be called at any point, any number of
    times. Use it as a context manager to close it on every path.
    """

    __slots__ = ("_chunks", "_close", "_closed")

    def __init__(self, chunks: Iterable[bytes], *, close: Callable[[], None] | None = None) -> None:
        self._chunks = chunks
        self._close = close
        self._closed = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            if not isinstance(chunk, bytes):
                raise ContractError(
                    f"a ByteStream yielded {type(chunk).__name__}, not bytes; "
                    "encode text before yielding it"
                )
            yield chunk

    def read(self) -> bytes:
        """Every remaining chunk, joined, and then close the stream."""
        try:
            return b"".join(self)
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._close is not None:
            self._close()
        close_gen = getattr(self._chunks, "close", None)
        if callable(close_gen) and inspect.isgenerator(self._chunks):
            close_gen()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> ByteStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ByteStream {'closed' if self._closed else 'open'}>"


@final
class AsyncByteStream:
    """The async mirror of :class:`ByteStream`, for the async seam."""

    __slots__ = ("_aclose", "_chunks", "_closed")

    def __init__(
        self,
        chunks: AsyncIterable[bytes],
        *,
        aclose: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._chunks = chunks
        self._aclose = aclose
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            if not isinstance(chunk, bytes):
                raise ContractError(
                    f"an AsyncByteStream yielded {type(chunk).__name__}, not bytes; "
                    "encode text before yielding it"
                )
            yield chunk

    async def aread(self) -> bytes:
        """Every remaining chunk, joined, and then close the stream."""
        try:
            return b"".join([chunk async for chunk in self])
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._aclose is not None:
            await self._aclose()
        if inspect.isasyncgen(self._chunks):
            await self._chunks.aclose()

    @property
    def closed(self) -> bool:
        return self._closed

    async def __aenter__(self) -> AsyncByteStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AsyncByteStream {'closed' if self._closed else 'open'}>"


@final
class Pushed:
    """The body of a response whose chunks already went to ``request.on_event``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "PUSHED"


PUSHED: Final = Pushed()
"""The one :class:`Pushed` value."""

# A tuple made once: an ``X | Y`` written in an isinstance call builds a union at every call.
_STREAMS: Final = (ByteStream, AsyncByteStream)
_UNPARSED: Final = (bytes, ByteStream, AsyncByteStream, Pushed)
_JSON_VALUES: Final = (dict, list, str, int, float, bool, type(None))

ResponseBody: TypeAlias = JSONValue | bytes | ByteStream | AsyncByteStream | Pushed
"""A response body: parsed, bytes, a byte stream, or :data:`PUSHED`."""


@masked_repr
@dataclass(frozen=True, slots=True)
class TransportRequest:
    """One request crossing the seam.

    ``body`` is the parsed JSON value, or bytes for a body that is not JSON. ``content``, when
    set, is the exact bytes a client already encoded; a transport that writes to a wire sends
    those bytes instead of encoding ``body`` again. ``stream`` asks for a byte-stream answer.
    ``cancel`` is observed by the transport. ``on_event`` is the push spelling of streaming:
    a transport that honours it calls it with each chunk and answers with
    :meth:`TransportResponse.pushed`.
    ``timeout`` is the read timeout in seconds, for transports that touch a network.
    """

    method: str
    url: str
    headers: Headers = field(default_factory=Headers)
    body: RequestBody = None
    stream: bool = False
    cancel: CancelToken | None = None
    on_event: Callable[[bytes], None] | None = None
    content: bytes | None = None
    timeout: float | None = None
    # How a request made by from_wire parses its body on first read.
    _parse: Callable[[Headers, bytes], RequestBody] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        headers: object = self.headers
        if not isinstance(headers, Headers):
            object.__setattr__(self, "headers", Headers(headers))  # type: ignore[arg-type]
        object.__setattr__(self, "method", self.method.upper())
        if self.content is not None and not isinstance(self.content, bytes):
            raise TypeError(f"TransportRequest.content must be bytes, got {type(self.content)}")

    @classmethod
    def from_wire(
        cls,
        method: str,
        url: str,
        headers: Headers,
        content: bytes,
        *,
        parse: Callable[[Headers, bytes], RequestBody],
        stream: bool,
        timeout: float | None = None,
    ) -> TransportRequest:
        """A request as a bridge reads it off a client: the bytes the client encoded, with
        ``body`` made from them by ``parse`` (the bridges' ``decode_body``) on its first read,
        once, and kept (DESIGN.md section 9, D1). A transport that matches or answers by the
        bytes never pays for the parse.

        ``stream`` is the caller's reading of the request (``wants_stream``), which must not
        depend on a body it has not parsed."""
        request = object.__new__(cls)
        setattr_ = object.__setattr__
        setattr_(request, "method", method.upper())
        setattr_(request, "url", url)
        setattr_(request, "headers", headers)
        # ``body`` is left unset: reading it reaches __getattr__, which parses it.
        setattr_(request, "stream", stream)
        setattr_(request, "cancel", None)
        setattr_(request, "on_event", None)
        setattr_(request, "content", content)
        setattr_(request, "timeout", timeout)
        setattr_(request, "_parse", parse)
        return request

    def __getattr__(self, name: str) -> Any:
        # Called only for an attribute that is not set: the body of a request made by
        # from_wire, on its first read.
        parse = object.__getattribute__(self, "_parse")
        if name != "body" or parse is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        content = object.__getattribute__(self, "content")
        body = parse(object.__getattribute__(self, "headers"), content)
        object.__setattr__(self, "body", body)
        return body


@masked_repr
@dataclass(frozen=True, slots=True)
class TransportResponse:
    """One response crossing the seam. A status is a value: 429 and 500 are responses.

    ``content``, when set beside a parsed ``body``, is that body already encoded as JSON: the
    bytes a live transport parsed it from, or the encoding a replay has from checking the
    recording; a bridge hands those bytes to the client instead of encoding ``body`` again.
    """

    status: int
    headers: Headers = field(default_factory=Headers)
    body: ResponseBody = None
    content: bytes | None = None

    def __post_init__(self) -> None:
        headers: object = self.headers
        if not isinstance(headers, Headers):
            object.__setattr__(self, "headers", Headers(headers))  # type: ignore[arg-type]
        if self.content is not None and not isinstance(self.content, bytes):
            raise TypeError(f"TransportResponse.content must be bytes, got {type(self.content)}")

    @property
    def is_stream(self) -> bool:
        """True when the body is a byte stream (sync or async)."""
        return isinstance(self.body, _STREAMS)

    @property
    def is_parsed(self) -> bool:
        """True when the body is a parsed JSON value."""
        return not isinstance(self.body, _UNPARSED)

    @property
    def is_pushed(self) -> bool:
        """True when the body already went, chunk by chunk, to ``request.on_event``."""
        return isinstance(self.body, Pushed)

    @classmethod
    def pushed(
        cls,
        status: int,
        headers: Headers | Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
    ) -> TransportResponse:
        """The answer of a transport that pushed every chunk to ``request.on_event``."""
        return cls(status, Headers(headers), PUSHED)


class Transport(Protocol):
    """The sync seam: any callable from :class:`TransportRequest` to :class:`TransportResponse`."""

    def __call__(self, request: TransportRequest, /) -> TransportResponse: ...


class AsyncTransport(Protocol):
    """The async seam: an async callable from request to response."""

    def __call__(self, request: TransportRequest, /) -> Awaitable[TransportResponse]: ...


class DualTransport(Protocol):
    """One object that serves both seams, as httpx's ``MockTransport`` serves both clients:
    calling it is the sync seam, and ``await transport.acall(request)`` the async one.

    :class:`~pytest_toolnexus.HTTPBridge` and the recorder use ``acall`` for async callers, so
    one such object serves a sync and an async client alike.
    """

    def __call__(self, request: TransportRequest, /) -> TransportResponse: ...

    async def acall(self, request: TransportRequest, /) -> TransportResponse: ...


def async_side(transport: object) -> AsyncTransport | None:
    """The async entry of a :class:`DualTransport` (its ``acall``), or None for any other
    object."""
    entry = getattr(transport, "acall", None)
    if entry is not None and inspect.iscoroutinefunction(entry):
        return cast(AsyncTransport, entry)
    return None


def _describe(request: TransportRequest) -> str:
    return f"{request.method} {request.url}"


def check_response(
    request: TransportRequest, response: object, *, asynchronous: bool
) -> TransportResponse:
    """Enforce the seam's rules on what a transport returned, and return it.

    Raises :class:`ContractError` with the request and the fix when a rule is broken: a
    ``stream=True`` request answered with a parsed body, a stream of the wrong flavour,
    a push answer to a request without ``on_event``, or a status that is not an HTTP status.
    """
    if not isinstance(response, TransportResponse):
        raise ContractError(
            f"the transport answered {_describe(request)} with {type(response).__name__}; "
            "a Transport must return a TransportResponse"
        )
    if isinstance(response.status, bool) or not isinstance(response.status, int):
        raise ContractError(
            f"the transport answered {_describe(request)} with status {response.status!r}; "
            "a status must be an int"
        )
    if not 100 <= response.status <= 599:
        raise ContractError(
            f"the transport answered {_describe(request)} with status {response.status}, "
            "which is not an HTTP status (100-599)"
        )
    body = response.body
    if isinstance(body, Pushed):
        if request.on_event is None:
            raise ContractError(
                f"the transport answered {_describe(request)} with PUSHED, but the request has "
                "no on_event callback to push to; return a byte stream instead"
            )
        return response
    if response.is_parsed and not isinstance(body, _JSON_VALUES):
        raise ContractError(
            f"the transport answered {_describe(request)} with a {type(body).__name__} body; "
            "a body is a parsed JSON value (dict, list, str, int, float, bool, None), bytes, "
            "or a byte stream"
        )
    if request.stream and response.is_parsed:
        raise ContractError(
            f"{_describe(request)} asked for a stream (stream=True) and the transport answered "
            f"with a parsed {type(body).__name__} body. A streaming answer must be a "
            f"{'AsyncByteStream' if asynchronous else 'ByteStream'} (or bytes, or chunks pushed "
            "to request.on_event); a parsed body here would read as an empty stream"
        )
    if asynchronous and isinstance(body, ByteStream):
        raise ContractError(
            f"an async transport answered {_describe(request)} with a sync ByteStream; "
            "wrap the chunks in an AsyncByteStream"
        )
    if not asynchronous and isinstance(body, AsyncByteStream):
        raise ContractError(
            f"a sync transport answered {_describe(request)} with an AsyncByteStream; "
            "use a ByteStream, or call the transport from async code"
        )
    return response


def call(transport: Transport, request: TransportRequest) -> TransportResponse:
    """Send ``request`` through a sync transport and check the answer against the seam rules."""
    if request.cancel is not None:
        request.cancel.raise_if_cancelled()
    return check_response(request, transport(request), asynchronous=False)


async def acall(
    transport: AsyncTransport | DualTransport, request: TransportRequest
) -> TransportResponse:
    """Send ``request`` through an async transport (or the async side of a
    :class:`DualTransport`) and check the answer against the seam rules."""
    if request.cancel is not None:
        request.cancel.raise_if_cancelled()
    entry = async_side(transport) or cast(AsyncTransport, transport)
    return check_response(request, await entry(request), asynchronous=True)
