"""Serving every httpx and httpx2 client from a cassette, with no change to the client.

Two places are patched, in httpx and in httpx2. ``HTTPTransport.handle_request`` and
``AsyncHTTPTransport.handle_async_request`` serve the standard transports. ``Client`` and
``AsyncClient``'s ``_transport_for_url``, which every request of a client passes to pick its
transport, serves any other transport a client was built with (a custom subclass, an httpx
transport over aiohttp): the client gets a bridge in its place. Either way what the cassette
records goes out through that same transport's original method, so proxies, TLS and limits
configured on the client still apply.

Left alone: transports that answer in-process by design and that a user passed in explicitly
(``MockTransport``, ``WSGITransport``, ``ASGITransport``, a bridge of ours), and the session's own
live clients (:class:`DirectLive`), which record for seam transports. A request being sent
live for a served one (:func:`~pytest_toolnexus._seam.served.sending`) passes every patch
untouched.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from pytest_toolnexus._bridges import compat as _compat
from pytest_toolnexus._bridges.httpx import HTTPBridge
from pytest_toolnexus._bridges.live import LiveTransport
from pytest_toolnexus._seam.errors import expected_error
from pytest_toolnexus._seam.served import is_sending, sending
from pytest_toolnexus._seam.transport import TransportRequest, TransportResponse
from pytest_toolnexus._session.session import CassetteSession

__all__ = ["DirectLive", "host_allowed", "patch_http_clients"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error


class DirectLive:
    """The session's own client to the network, sync and async, which the patch lets through.

    Without it, a seam transport recording through a plain client would pass through the
    patched ``HTTPTransport`` and be recorded twice. The clients are made on first use.
    """

    def __init__(self) -> None:
        self._live: LiveTransport | None = None

    def _transport(self) -> LiveTransport:
        if self._live is None:
            self._live = LiveTransport()
        return self._live

    def __call__(self, request: TransportRequest) -> TransportResponse:
        with sending(request.url):
            return self._transport()(request)

    async def acall(self, request: TransportRequest) -> TransportResponse:
        with sending(request.url):
            return await self._transport().acall(request)

    def close(self) -> None:
        if self._live is not None:
            self._live.close()


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """Whether ``host`` is named in ``allowed`` (exact names, or ``*.suffix`` wildcards)."""
    host = host.lower().strip("[]")
    for pattern in allowed:
        pattern = pattern.lower().strip().strip("[]")
        if not pattern:
            continue
        if pattern == host or (pattern.startswith("*.") and host.endswith(pattern[1:])):
            return True
    return False


class _Original:
    """The unpatched send of one transport, shaped like a transport for LiveTransport. What it
    sends is marked as a served request going out live, so that no patch serves it again."""

    def __init__(self, transport: Any, send: Callable[..., Any]) -> None:
        self._transport = transport
        self._send = send

    def handle_request(self, request: Any) -> Any:
        with sending(str(request.url)):
            return self._send(self._transport, request)

    async def handle_async_request(self, request: Any) -> Any:
        with sending(str(request.url)):
            return await self._send(self._transport, request)


def patch_http_clients(
    session: CassetteSession, allow_hosts: Iterable[str] = ()
) -> Callable[[], None]:
    """Route every httpx/httpx2 ``HTTPTransport`` through ``session``; returns the undo.

    Requests to ``allow_hosts`` go straight to the network, neither replayed nor recorded.
    """
    allowed = tuple(allow_hosts)
    with _owner_lock:
        holder = _owner[0]
        if holder is not None:
            raise RuntimeError(
                f"cannot route httpx and httpx2 clients through the cassette {session.path}: "
                f"the cassette {holder} already does, in this process. Cassette sessions do "
                "not nest; finish the test or block that uses the first one."
            )
        _owner[0] = str(session.path)
    saved: list[tuple[type, str, Any]] = []
    bridges: weakref.WeakKeyDictionary[Any, HTTPBridge] = weakref.WeakKeyDictionary()

    def sync_bridge(transport: Any, lib: ModuleType, send: Callable[..., Any]) -> HTTPBridge:
        bridge = bridges.get(transport)
        if bridge is None:
            live = LiveTransport(transport=_Original(transport, send), library=lib, exact=True)
            bridge = HTTPBridge(session.transport_for(live))
            bridges[transport] = bridge
        return bridge

    def async_bridge(transport: Any, lib: ModuleType, send: Callable[..., Any]) -> HTTPBridge:
        bridge = bridges.get(transport)
        if bridge is None:
            live = LiveTransport(transport=_Original(transport, send), library=lib, exact=True)
            bridge = HTTPBridge(async_transport=session.async_transport_for(live))
            bridges[transport] = bridge
        return bridge

    undone = [False]

    def undo() -> None:
        if undone[0]:
            return  # a second call must not release another session's ownership
        undone[0] = True
        while saved:
            cls, name, original = saved.pop()
            type.__setattr__(cls, name, original)
        bridges.clear()
        with _owner_lock:
            _owner[0] = None

    try:
        for lib in _compat.libraries():
            sync_cls: type = lib.HTTPTransport
            async_cls: type = lib.AsyncHTTPTransport
            original_sync = sync_cls.__dict__["handle_request"]
            original_async = async_cls.__dict__["handle_async_request"]

            def handle_request(
                self: Any,
                request: Any,
                _send: Callable[..., Any] = original_sync,
                _lib: ModuleType = lib,
            ) -> Any:
                if is_sending() or (allowed and host_allowed(_host(request), allowed)):
                    return _send(self, request)
                return sync_bridge(self, _lib, _send).handle_request(request)

            async def handle_async_request(
                self: Any,
                request: Any,
                _send: Callable[..., Any] = original_async,
                _lib: ModuleType = lib,
            ) -> Any:
                if is_sending() or (allowed and host_allowed(_host(request), allowed)):
                    return await _send(self, request)
                return await async_bridge(self, _lib, _send).handle_async_request(request)

            saved.append((sync_cls, "handle_request", original_sync))
            saved.append((async_cls, "handle_async_request", original_async))
            type.__setattr__(sync_cls, "handle_request", handle_request)
            type.__setattr__(async_cls, "handle_async_request", handle_async_request)

            client_cls: type = lib.Client
            async_client_cls: type = lib.AsyncClient
            original_pick = client_cls.__dict__["_transport_for_url"]
            original_apick = async_client_cls.__dict__["_transport_for_url"]
            as_is = _left_alone(lib)

            transport_for_url = _picker(
                original_pick, "handle_request", handle_request, sync_bridge, lib, as_is, allowed
            )
            async_transport_for_url = _picker(
                original_apick,
                "handle_async_request",
                handle_async_request,
                async_bridge,
                lib,
                as_is,
                allowed,
            )

            saved.append((client_cls, "_transport_for_url", original_pick))
            saved.append((async_client_cls, "_transport_for_url", original_apick))
            type.__setattr__(client_cls, "_transport_for_url", transport_for_url)
            type.__setattr__(async_client_cls, "_transport_for_url", async_transport_for_url)

    except BaseException:
        undo()
        raise
    return undo


_owner_lock = threading.Lock()
_owner: list[str | None] = [None]
"""The cassette whose session the http clients are routed through, if any: one at a time, so
two undone out of order can never leave one's wrapper on the classes."""


def _host(request: Any) -> str:
    return _host_of(request.url)


def _picker(
    pick: Callable[..., Any],
    name: str,
    served: Callable[..., Any],
    bridge: Callable[..., Any],
    lib: ModuleType,
    as_is: tuple[type, ...],
    allowed: tuple[str, ...],
) -> Callable[..., Any]:
    """A client's ``_transport_for_url`` (sync or async, by ``name``): the transport ``pick``
    chose, behind a bridge, unless it is served already, has no ``name`` method, is left alone
    (``as_is``), is our own live client sending, or goes to an allowed host."""

    def transport_for_url(self: Any, url: Any) -> Any:
        transport = pick(self, url)
        method = getattr(type(transport), name, None)
        if (
            method is served
            or method is None
            or isinstance(transport, as_is)
            or is_sending()
            or (allowed and host_allowed(_host_of(url), allowed))
        ):
            return transport
        return bridge(transport, lib, method)

    return transport_for_url


def _host_of(url: Any) -> str:
    return urlsplit(str(url)).hostname or ""


def _left_alone(lib: ModuleType) -> tuple[type, ...]:
    """The transports a client keeps when a cassette serves it: those that answer in-process
    by design, which a user passes in on purpose, and the bridges that already serve one."""
    names = ("MockTransport", "WSGITransport", "ASGITransport")
    found: tuple[type, ...] = tuple(getattr(lib, n) for n in names if hasattr(lib, n))
    return (*found, HTTPBridge)
