"""Everything that touches httpx or httpx2 beyond their public surface lives here.

httpx2 is a fork of httpx under another import name, with the same transport API. Its classes
are not the httpx classes, so a type that must satisfy both libraries' ``isinstance`` checks
is built here from both bases, when httpx2 is installed.
"""

from __future__ import annotations

import contextlib
import importlib
import socket
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import httpx

from pytest_toolnexus._seam.errors import ERROR_KINDS, TransportError

__all__ = [
    "AsyncStreamBase",
    "AsyncTransportBase",
    "SyncStreamBase",
    "SyncTransportBase",
    "abort_connection",
    "libraries",
    "library_of",
    "read_response",
    "replace_in_libraries",
    "to_library_error",
    "to_seam_error",
]


def _load_httpx2() -> ModuleType | None:
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return None


HTTPX2: ModuleType | None = _load_httpx2()


def libraries() -> tuple[ModuleType, ...]:
    """The http libraries installed here: httpx, then httpx2 when present."""
    return (httpx,) if HTTPX2 is None else (httpx, HTTPX2)


def library_of(obj: object) -> ModuleType:
    """The module (httpx or httpx2) whose Request, Response or exception ``obj`` is."""
    if HTTPX2 is not None and type(obj).__module__.split(".")[0] == "httpx2":
        return HTTPX2
    return httpx


def replace_in_libraries(
    submodule: str, name: str, wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]]
) -> Callable[[], None]:
    """Put ``wrap(library name, original)`` in place of the function ``name`` of each library's
    ``submodule`` (``"_client"`` for ``httpx._client``); returns the undo, which puts every
    original back. A library laid out otherwise (no such module, or no such function there) is
    left as it is. If a step fails, what was already replaced is put back before the error
    goes on."""
    saved: list[tuple[ModuleType, Callable[..., Any]]] = []

    def undo() -> None:
        while saved:
            module, original = saved.pop()
            setattr(module, name, original)

    try:
        for lib in libraries():
            try:
                module = importlib.import_module(f"{lib.__name__}.{submodule}")
            except ImportError:
                continue
            original = module.__dict__.get(name)
            if not callable(original):
                continue
            setattr(module, name, wrap(lib.__name__, original))
            saved.append((module, original))
    except BaseException:
        undo()
        raise
    return undo


def _combined(name: str) -> type:
    bases = tuple(getattr(lib, name) for lib in libraries())
    if len(bases) == 1:
        base: type = bases[0]
        return base
    return type(f"_{name}", bases, {"__module__": __name__})


if TYPE_CHECKING:
    SyncTransportBase = httpx.BaseTransport
    AsyncTransportBase = httpx.AsyncBaseTransport
    SyncStreamBase = httpx.SyncByteStream
    AsyncStreamBase = httpx.AsyncByteStream
else:
    SyncTransportBase = _combined("BaseTransport")
    AsyncTransportBase = _combined("AsyncBaseTransport")
    SyncStreamBase = _combined("SyncByteStream")
    AsyncStreamBase = _combined("AsyncByteStream")


def read_response(lib: ModuleType, status: int, headers: Any, content: bytes, request: Any) -> Any:
    """A library response holding ``content``, already read: what
    ``lib.Response(status, headers=headers, content=content, request=request)`` makes (for
    ``headers`` the library's Headers, or byte pairs), without
    its pass of the bytes through the decoders and chunkers (a third of a replayed request's
    cost in the client). Only for headers that name no ``content-encoding`` (no decoder would
    change the bytes) and that carry the ``content-length`` of ``content``.

    The attributes set are those the ``content=`` path leaves once its read is done: the body,
    the stream consumed and closed (tests/test_bridge_compat.py compares the two, attribute by
    attribute, for httpx and httpx2).
    """
    response = lib.Response(
        status, headers=headers, stream=lib.ByteStream(content), request=request
    )
    response._content = content
    response.is_stream_consumed = True
    response.is_closed = True
    return response


def abort_connection(response: Any) -> None:
    """Shut the socket under an open httpx/httpx2 response, from any thread.

    A read blocked on that socket returns at once. Used to make cancellation prompt: closing
    the response object from another thread is not safe, but shutting the socket down is.
    """
    stream = response.extensions.get("network_stream")
    if stream is None:
        return
    sock = stream.get_extra_info("socket")
    # Under asyncio this is an asyncio.TransportSocket, which is not a socket.socket but has
    # shutdown(); the event loop then sees end-of-file on the read it is waiting for.
    shutdown = getattr(sock, "shutdown", None)
    if callable(shutdown):
        with contextlib.suppress(OSError):
            shutdown(socket.SHUT_RDWR)


def to_seam_error(exc: BaseException) -> TransportError:
    """The seam error for an httpx/httpx2 transport exception, matched by class name."""
    for cls in type(exc).__mro__:
        seam = ERROR_KINDS.get(cls.__name__)
        if seam is not None:
            return seam(str(exc) or cls.__name__)
    return TransportError(f"{type(exc).__name__}: {exc}")


def to_library_error(lib: ModuleType, exc: TransportError, request: Any) -> Exception:
    """The httpx/httpx2 exception an SDK expects for a seam error."""
    cls = getattr(lib, exc.kind, None)
    if cls is None or not (isinstance(cls, type) and issubclass(cls, lib.TransportError)):
        cls = lib.ReadError if exc.kind == "TransportCancelled" else lib.TransportError
    error: Exception = cls(str(exc), request=request)
    return error
