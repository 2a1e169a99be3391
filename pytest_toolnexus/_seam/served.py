"""Which network traffic a cassette is already accounting for.

When a served request goes out for real (a recording, or the session's own live client), the
bridge that sends it marks the send with :func:`sending`. Two things read the mark: the client
patches, which let a marked request through untouched so that it is not served twice (an httpx
client over an aiohttp transport passes both bridges), and the network tripwire, which lets
the connections a marked send opens through while it fails every other one.

The mark is a context variable, so it follows the send into the tasks and threads that copy
their context. A lookup that runs where the context does not follow (asyncio's
``getaddrinfo`` runs in an executor thread) is matched by host name instead: the hosts of the
sends in flight are counted here.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import urlsplit

__all__ = ["host_in_flight", "is_sending", "sending"]

_SENDING: ContextVar[bool] = ContextVar("pytest_toolnexus_sending", default=False)
_lock = threading.Lock()
_in_flight: Counter[str] = Counter()


@contextmanager
def sending(url: str | None = None) -> Iterator[None]:
    """Mark what runs inside as a served request going out live (to ``url``'s host)."""
    host = (urlsplit(url).hostname or "").lower() if url else ""
    token = _SENDING.set(True)
    if host:
        with _lock:
            _in_flight[host] += 1
    try:
        yield
    finally:
        _SENDING.reset(token)
        if host:
            with _lock:
                _in_flight[host] -= 1
                if _in_flight[host] <= 0:
                    del _in_flight[host]


def is_sending() -> bool:
    """True inside :func:`sending`, in this context."""
    return _SENDING.get()


def host_in_flight(host: str) -> bool:
    """True while a served send to ``host`` is in progress, in any context."""
    with _lock:
        return _in_flight.get(host.lower().strip("[]"), 0) > 0
