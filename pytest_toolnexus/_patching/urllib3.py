"""Serving every urllib3 request from a cassette (and so requests and botocore), with no
change to the client.

One method is replaced: ``HTTPConnectionPool._make_request``, which ``urlopen`` calls once
for each exchange (each retry and each redirect hop included) of every pool, HTTPS pools and
botocore's own pool subclasses too. The replacement hands the exchange to the
:class:`~._bridge_urllib3.Urllib3Bridge`; what the cassette records goes out through the
original method, so proxies, TLS and pool settings still apply.

This module imports urllib3: the plugin loads it only once urllib3 is imported.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import urllib3
from urllib3.connectionpool import HTTPConnectionPool

from pytest_toolnexus._bridges.urllib3 import Urllib3Bridge, Urllib3Live, bind
from pytest_toolnexus._seam.errors import expected_error
from pytest_toolnexus._seam.served import is_sending
from pytest_toolnexus._session.session import CassetteSession

from .httpx import host_allowed

__all__ = ["patch_urllib3"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

_owner_lock = threading.Lock()
_owner: list[str | None] = [None]


def patch_urllib3(session: CassetteSession, allow_hosts: Iterable[str] = ()) -> Callable[[], None]:
    """Route every urllib3 connection pool's requests through ``session``; returns the undo.

    Requests to ``allow_hosts`` go straight to the network, neither replayed nor recorded.
    """
    allowed = tuple(allow_hosts)
    cls = HTTPConnectionPool
    original = cls.__dict__["_make_request"]
    version = str(getattr(urllib3, "__version__", "0"))
    major = version.split(".", 1)[0]
    if not major.isdigit() or int(major) < 2:
        warnings.warn(
            f"urllib3 {version} is older than 2.0, so pytest-toolnexus cannot "
            f"serve urllib3, requests or botocore from {session.path}: upgrade urllib3 to 2.0 "
            "or later.",
            stacklevel=2,
        )
        return lambda: None
    with _owner_lock:
        if _owner[0] is not None:
            raise RuntimeError(
                f"cannot route urllib3 requests through the cassette {session.path}: the "
                f"cassette {_owner[0]} already does, in this process. Cassette sessions do "
                "not nest; finish the test or block that uses the first one."
            )
        _owner[0] = str(session.path)

    bridge = Urllib3Bridge(session.transport_for(Urllib3Live()))

    @functools.wraps(original)
    def _make_request(self: Any, *args: Any, **kwargs: Any) -> Any:
        if is_sending() or (allowed and host_allowed(self.host or "", allowed)):
            return original(self, *args, **kwargs)
        return bridge(bind(original, self, args, kwargs))

    type.__setattr__(cls, "_make_request", _make_request)
    undone = [False]

    def undo() -> None:
        if undone[0]:
            return
        undone[0] = True
        type.__setattr__(cls, "_make_request", original)
        with _owner_lock:
            _owner[0] = None

    return undo
