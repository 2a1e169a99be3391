"""Every process-wide patch a cassette in use needs to serve the clients the code under test
builds itself: the httpx and httpx2 transports, the libraries served once imported (aiohttp,
urllib3, websockets), what a replay that opens no connection lets clients share (one TLS
context, the proxy settings read once), and the network tripwire. The pytest plugin's
``cassette`` fixture and ``use_cassette`` both put them on through this one function, into the
installation that takes them off again."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pytest_toolnexus._safety.tripwire import Unserved, arm_tripwire
from pytest_toolnexus._session.session import CassetteSession

from .httpx import patch_http_clients
from .install import Installation
from .libraries import patch_libraries
from .proxies import remember_env_proxies
from .tls import share_default_tls
from .websockets import patch_websockets

__all__ = ["serve_clients"]


def serve_clients(
    installation: Installation,
    session: CassetteSession,
    *,
    cassette: str,
    allow_hosts: Iterable[str] = (),
    on_unserved: Literal["fail", "warn"] = "fail",
    unserved: Unserved | None = None,
) -> None:
    """Route every client through ``session`` and arm the tripwire, each patch's undo in
    ``installation`` the moment it is in. ``cassette`` names the file in the tripwire's
    errors; ``unserved`` collects what a recording let around the recorder."""
    hosts = tuple(allow_hosts)
    installation.add(patch_http_clients, session, hosts)
    installation.add(patch_libraries, session, hosts)
    installation.add(patch_websockets, session)
    if session.replay_only and not hosts:
        # No connection can open while the cassette is in use, so the clients made meanwhile
        # need no TLS context of their own (making one costs more than the rest of a test),
        # and read the proxy settings once, not once each.
        installation.add(share_default_tls)
        installation.add(remember_env_proxies)
    installation.add(
        arm_tripwire,
        cassette=cassette,
        mode=session.record_mode,
        allow_hosts=hosts,
        recording=not session.replay_only,
        on_unserved=on_unserved,
        unserved=unserved,
    )
