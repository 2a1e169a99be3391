"""Serving WebSocket clients through a cassette session's WebSocket side: the websockets
library's, and aiohttp's ``ClientSession.ws_connect``.

Three patches, each put on when the library's module is imported (or at once when it is) and
taken off by the undo:

- the sync client: from websockets 17.1 on, the one method every sync connection opens in
  (``reconnect.connect``, which the ``connect`` function, the reconnecting form and the openai
  SDK's own subclass from 3.63 on all go through), replaced on the class; before 17.1, the
  ``connect`` function in ``websockets.sync.client`` (the openai SDK imports it from there when
  it connects, sync);
- the asyncio client's ``connect`` class, whose one method that opens the connection
  (``connect.connect``, which ``await connect(...)``, ``async with connect(...)`` and
  ``async for`` all go through) is replaced on the class, and whose ``__init__`` is wrapped
  to note the ``subprotocols`` offered (the library keeps them only in a closure). Patching
  the method rather than the name serves the code that bound the class at import
  (google-genai's ``from websockets.asyncio.client import connect as ws_connect``) and its
  subclasses (the openai SDK's ``_WebSocketConnect``) alike;
- aiohttp's ``ClientSession._ws_connect``, the coroutine ``ws_connect`` wraps.

A replayed connection opens no socket; a recorded one is opened by the library's own code
with the arguments the client gave, and teed.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from pytest_toolnexus._seam.duplex import DuplexRefused, Handshake

from .imports import when_imported

if TYPE_CHECKING:
    from pytest_toolnexus._realtime.hub import Realtime, SessionLike

__all__ = ["patch_websockets"]

Undo = Callable[[], None]


def _replace_method(cls: Any, name: str, replacement: Callable[..., Any]) -> Undo:
    """Put ``replacement`` as ``cls``'s own ``name``; returns the undo, which puts the class's
    own original back only while the replacement is still there (one put on later stays)."""
    original = cls.__dict__[name]
    setattr(cls, name, replacement)

    def undo() -> None:
        if cls.__dict__.get(name) is replacement:
            setattr(cls, name, original)

    return undo


def _patch_sync(hub: Callable[[], Realtime]) -> Undo:
    # The bridge imports the library: only once the code under test has imported it.
    from websockets.exceptions import InvalidStatus

    from pytest_toolnexus._bridges.websockets import (
        Connection,
        LiveConnection,
        headers_of,
        refused_error,
        seam_refusal,
    )

    module = sys.modules["websockets.sync.client"]
    opener_class = getattr(module, "reconnect", None)
    opener = None if opener_class is None else opener_class.__dict__.get("connect")
    if callable(opener):
        return _patch_sync_opener(hub, opener_class, opener)
    original = getattr(module, "connect")  # noqa: B009 - a module's name, typed as Any

    def connect(uri: str, **kwargs: Any) -> Any:
        if kwargs.get("legacy") is False:
            return original(uri, **kwargs)  # the reconnecting iterator: not served
        handshake = Handshake(
            uri,
            headers_of(kwargs.get("additional_headers")),
            tuple(kwargs.get("subprotocols") or ()),
        )

        def live(_: Handshake) -> Any:
            # Entered as the library asks (websockets 17.1 warns of a connection that is
            # not); the facade's close closes it.
            try:
                return LiveConnection(original(uri, **kwargs).__enter__())
            except InvalidStatus as exc:  # recorded as the answer it was, then raised alike
                raise seam_refusal(uri, exc) from None

        try:
            return Connection(hub().connect(handshake, live))
        except DuplexRefused as refused:
            raise refused_error(refused) from None

    setattr(module, "connect", connect)  # noqa: B010 - a module's name, typed as Any

    def undo() -> None:
        if getattr(module, "connect", None) is connect:
            setattr(module, "connect", original)  # noqa: B010

    return undo


def _patch_sync_opener(
    hub: Callable[[], Realtime], cls: Any, original: Callable[[Any], Any]
) -> Undo:
    """websockets 17.1 and later: every sync connection opens in ``reconnect.connect``, which
    the ``connect`` function, ``with connect(...)``, the reconnecting iterator and its
    subclasses (the openai SDK's ``_SyncWebSocketConnect`` from 3.63 on) all go through, so
    the method is replaced on the class, as the asyncio client's is."""
    from websockets.exceptions import InvalidStatus

    from pytest_toolnexus._bridges.websockets import (
        Connection,
        LiveConnection,
        headers_of,
        refused_error,
        seam_refusal,
    )

    def open_connection(self: Any) -> Any:
        offered = (getattr(self, "protocol_kwargs", None) or {}).get("subprotocols")
        handshake = Handshake(self.uri, headers_of(self.additional_headers), tuple(offered or ()))

        def live(_: Handshake) -> Any:
            # Entered as the library enters what it opens (no legacy warning); the facade's
            # close closes it.
            try:
                return LiveConnection(original(self).__enter__())
            except InvalidStatus as exc:  # recorded as the answer it was, then raised alike
                raise seam_refusal(self.uri, exc) from None

        try:
            return Connection(hub().connect(handshake, live))
        except DuplexRefused as refused:
            raise refused_error(refused) from None

    return _replace_method(cls, "connect", open_connection)


def _patch_async(hub: Callable[[], Realtime]) -> Undo:
    from websockets.exceptions import InvalidStatus

    from pytest_toolnexus._bridges.websockets import (
        AsyncConnection,
        AsyncLiveConnection,
        headers_of,
        refused_error,
        seam_refusal,
    )

    module = sys.modules["websockets.asyncio.client"]
    cls = module.connect
    original = cls.__dict__.get("connect")
    original_init = cls.__dict__.get("__init__")
    if original is None or original_init is None:
        return lambda: None  # a websockets before the methods this patch replaces: not served
    # The library keeps the subprotocols offered only inside its connection factory: each
    # instance made while the patch is on notes them here, for the handshake to say.
    offered: weakref.WeakKeyDictionary[Any, tuple[str, ...]] = weakref.WeakKeyDictionary()

    def init(self: Any, uri: str, *args: Any, **kwargs: Any) -> None:
        original_init(self, uri, *args, **kwargs)
        offered[self] = tuple(kwargs.get("subprotocols") or ())

    async def open_connection(self: Any) -> Any:
        handshake = Handshake(self.uri, headers_of(self.additional_headers), offered.get(self, ()))

        async def live(_: Handshake) -> Any:
            try:
                return AsyncLiveConnection(await original(self))
            except InvalidStatus as exc:  # recorded as the answer it was, then raised alike
                raise seam_refusal(self.uri, exc) from None

        try:
            return AsyncConnection(await hub().aconnect(handshake, live))
        except DuplexRefused as refused:
            raise refused_error(refused) from None

    cls.__init__ = init
    cls.connect = open_connection

    def undo() -> None:
        if cls.__dict__.get("connect") is open_connection:
            cls.connect = original
        if cls.__dict__.get("__init__") is init:
            cls.__init__ = original_init

    return undo


def _patch_aiohttp(hub: Callable[[], Realtime]) -> Undo:
    from aiohttp.client_exceptions import WSServerHandshakeError
    from yarl import URL

    from pytest_toolnexus._bridges.aiohttp_ws import (
        AioConnection,
        AioLiveConnection,
        headers_of,
        refused_error,
        seam_refusal,
    )

    cls = sys.modules["aiohttp.client"].ClientSession
    original = cls.__dict__["_ws_connect"]

    async def ws_connect(self: Any, url: Any, **kwargs: Any) -> Any:
        target = URL(url) if not isinstance(url, URL) else url
        if kwargs.get("params"):
            target = target.update_query(kwargs["params"])
        headers = headers_of(kwargs.get("headers"))
        handshake = Handshake(str(target), headers, tuple(kwargs.get("protocols") or ()))

        async def live(_: Handshake) -> Any:
            try:
                return AioLiveConnection(await original(self, url, **kwargs))
            except WSServerHandshakeError as exc:
                if exc.status == 101:  # accepted, then failed aiohttp's checks: no refusal
                    raise
                raise seam_refusal(str(target), exc) from None  # recorded as the answer it was

        try:
            return AioConnection(await hub().aconnect(handshake, live))
        except DuplexRefused as refused:
            raise refused_error(refused) from None

    return _replace_method(cls, "_ws_connect", ws_connect)


def patch_websockets(session: SessionLike) -> Undo:
    """Serve the websockets clients through ``session`` until the undo runs; the undo also
    warns of the frames replayed connections left unsent or unread."""

    def hub() -> Realtime:
        # The realtime machinery is imported, and the session's WebSocket side made, at the
        # first connection: a test that opens none (most, even with aiohttp or websockets
        # imported, as the openai SDK imports aiohttp) does neither.
        from pytest_toolnexus._realtime.hub import realtime_of

        return realtime_of(session)

    # Each undo runs however an earlier one failed (the stack re-raises once all have run),
    # so no patch stays on for the rest of the process.
    undos = ExitStack()
    undos.callback(when_imported("websockets.sync.client", lambda: _patch_sync(hub)))
    undos.callback(when_imported("websockets.asyncio.client", lambda: _patch_async(hub)))
    # Watched by its module, not "aiohttp", which the HTTP patch's watch already names.
    undos.callback(when_imported("aiohttp.client", lambda: _patch_aiohttp(hub)))

    def undo() -> None:
        try:
            undos.close()
        finally:
            hubs = sys.modules.get("pytest_toolnexus._realtime.hub")
            made = None if hubs is None else hubs.made_for(session)
            left = [] if made is None else made.leftovers()
            if left:
                from pytest_toolnexus._session.session import UnusedInteractionsWarning

                warnings.warn(
                    UnusedInteractionsWarning(f"cassette {session.path}: " + " | ".join(left)),
                    stacklevel=2,
                )

    return undo
