"""Serving every aiohttp ``ClientSession`` from a cassette, with no change to the client.

One method is replaced: ``ClientSession._request``, which every ``session.get``/``post``/
``request`` (awaited, or used as an async context manager) goes through. The replacement adds
the :class:`~._bridge_aiohttp.AiohttpBridge` middleware at the end of the session's middlewares
and calls the original, so aiohttp still builds each request itself; the middleware answers it
from the cassette, and what the cassette records goes out through aiohttp's own handler.

This module imports aiohttp: the plugin loads it only once aiohttp is imported.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from pytest_toolnexus._bridges.aiohttp import AiohttpBridge, AiohttpLive
from pytest_toolnexus._seam.errors import expected_error
from pytest_toolnexus._session.session import CassetteSession

from .httpx import host_allowed

__all__ = ["patch_aiohttp"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

_owner_lock = threading.Lock()
_owner: list[str | None] = [None]


@functools.lru_cache(maxsize=4)
def _takes_middlewares(request: Callable[..., Any]) -> bool:
    """Whether ``ClientSession._request`` takes ``middlewares=``, read once per function:
    ``inspect.signature`` costs more than the rest of the patch together. Given the library's
    own function (unwrapped), so the cache never holds a patch, nor the session behind it."""
    return "middlewares" in inspect.signature(request).parameters


def patch_aiohttp(session: CassetteSession, allow_hosts: Iterable[str] = ()) -> Callable[[], None]:
    """Route every aiohttp ``ClientSession`` request through ``session``; returns the undo.

    Requests to ``allow_hosts`` go straight to the network, neither replayed nor recorded.
    """
    allowed = tuple(allow_hosts)
    cls = aiohttp.ClientSession
    original = cls.__dict__["_request"]
    if not _takes_middlewares(inspect.unwrap(original)):
        warnings.warn(
            f"aiohttp {aiohttp.__version__} has no client middlewares (3.12 added them), so "
            f"pytest-toolnexus cannot serve aiohttp sessions from {session.path}: upgrade "
            "aiohttp to 3.12 or later.",
            stacklevel=2,
        )
        return lambda: None
    with _owner_lock:
        if _owner[0] is not None:
            raise RuntimeError(
                f"cannot route aiohttp sessions through the cassette {session.path}: the "
                f"cassette {_owner[0]} already does, in this process. Cassette sessions do "
                "not nest; finish the test or block that uses the first one."
            )
        _owner[0] = str(session.path)

    def passes(url: str) -> bool:
        return bool(allowed) and host_allowed(urlsplit(url).hostname or "", allowed)

    bridge = AiohttpBridge(session.async_transport_for(AiohttpLive()), passes=passes)

    @functools.wraps(original)
    def _request(self: Any, method: str, str_or_url: Any, **kwargs: Any) -> Any:
        given = kwargs.get("middlewares")
        chain = tuple(self._middlewares if given is None else given)
        kwargs["middlewares"] = (*chain, bridge)
        return original(self, method, str_or_url, **kwargs)

    type.__setattr__(cls, "_request", _request)
    undone = [False]

    def undo() -> None:
        if undone[0]:
            return
        undone[0] = True
        type.__setattr__(cls, "_request", original)
        with _owner_lock:
            _owner[0] = None

    return undo
