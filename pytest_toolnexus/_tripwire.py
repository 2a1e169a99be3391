"""The network tripwire: while a replay-only cassette is active, any connection attempt raises.

``socket.socket.connect``, ``connect_ex`` and ``socket.getaddrinfo`` are replaced for the whole
process, so every library (``requests``, ``urllib``, ``aiohttp``, asyncio streams) and every
thread is covered. The error names the host and port, so nothing hangs on a network that CI
does not have. Allowed hosts are matched by name, and the addresses they resolve to are then
allowed too; Unix sockets are never blocked.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final

from ._errors import NetworkBlockedError

__all__ = ["arm_tripwire"]

_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})

_lock = threading.Lock()
_armed = False


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def arm_tripwire(
    *,
    cassette: str,
    mode: str,
    allow_hosts: Iterable[str] = (),
    allow_loopback: bool = False,
) -> Callable[[], None]:
    """Block every outgoing connection except to ``allow_hosts``; returns the function that
    disarms it. ``allow_loopback`` also lets 127.0.0.0/8, ::1 and localhost through."""
    global _armed
    with _lock:
        if _armed:
            raise RuntimeError("the network tripwire is already armed")
        _armed = True
    # What is installed now, which the tripwire calls through and disarm puts back: another
    # tool's wrapper installed before arming survives arming and disarming.
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo
    names = {h.lower().strip().strip("[]") for h in allow_hosts if h.strip()}
    addresses: set[str] = set()
    for name in names:
        with contextlib.suppress(ValueError):
            addresses.add(str(ipaddress.ip_address(name)))

    def allowed(host: str) -> bool:
        host = host.lower().strip("[]")
        if allow_loopback and _is_loopback(host):
            return True
        if host in names or host in addresses:
            return True
        return any(n.startswith("*.") and host.endswith(n[1:]) for n in names)

    def blocked(host: str, port: object) -> NetworkBlockedError:
        return NetworkBlockedError(
            f"pytest-toolnexus blocked a connection to {host}:{port}: cassette {cassette} is "
            f"replay-only (record mode {mode!r}), so nothing may reach the network. This "
            "request did not go through an httpx/httpx2 client the cassette serves (it came "
            "from a library such as requests, urllib or aiohttp, or from a socket). Serve it "
            "some other way, or let the host through with --cassette-allow-hosts="
            f"{host} (allow_hosts=[{host!r}] on the marker)."
        )

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if host is not None and not allowed(name):
            raise blocked(name, port)
        results = real_getaddrinfo(host, port, *args, **kwargs)
        if host is not None:
            for *_, sockaddr in results:
                addresses.add(str(sockaddr[0]).split("%", 1)[0])
        return results

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        host, port = str(address[0]), address[1]
        if not allowed(host):
            raise blocked(host, port)

    def connect(self: socket.socket, address: Any) -> None:
        check(self, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(self, address)
        result: int = real_connect_ex(self, address)
        return result

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = getaddrinfo

    disarmed = False

    def disarm() -> None:
        # Once only: a second call must not put back what was current at arming over a
        # change made since.
        global _armed
        nonlocal disarmed
        if disarmed:
            return
        disarmed = True
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = real_getaddrinfo
        with _lock:
            _armed = False

    return disarm
