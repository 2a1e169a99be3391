"""The network tripwire: a connection that no cassette accounts for is stopped, and named.

``socket.socket.connect``, ``connect_ex`` and ``socket.getaddrinfo`` are replaced for the whole
process, so every library (``requests``, ``urllib``, ``aiohttp``, asyncio streams, a C extension
that calls back into ``socket``) and every thread is covered. The check runs before the name is
looked up, so nothing hangs on a network that CI does not have. Allowed hosts are matched by
name, and the addresses they resolve to are then allowed too; Unix sockets are never blocked.

It has two uses, one implementation:

- While a replay-only cassette is active, every connection fails (loopback only when allowed).
- While a cassette records, a connection that does not come from a served request
  (:mod:`._served`) fails the test, or is reported as a warning: that traffic would not be
  recorded, and the replay would fail without it. Loopback is let through.

The error names the library that opened the connection (the outermost frame's package, or "a
raw socket" for code calling ``socket`` itself), the host and the fix.
"""

from __future__ import annotations

import _socket
import contextlib
import ipaddress
import socket
import sys
import sysconfig
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final, Literal

from pytest_toolnexus._seam.errors import NetworkBlockedError, expected_error
from pytest_toolnexus._seam.served import host_in_flight, is_sending

__all__ = ["Unserved", "arm_tripwire", "who_connects"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error

_LOOPBACK_NAMES: Final = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
# Frames that are the socket machinery itself, never "the library" that connects.
_PLUMBING: Final = frozenset({"socket", "ssl", "selectors", "pytest_toolnexus", "_socket"})
# Frames that run code rather than connect: a thread or executor around the real caller.
_RUNNERS: Final = frozenset({"threading", "concurrent", "contextvars", "functools", "runpy"})
_LIBRARY_DIRS: Final = tuple(
    str(Path(p).resolve())
    for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
)

# The clients a cassette serves, as the errors name them.
SERVED: Final = "httpx, httpx2, aiohttp, urllib3, requests, botocore"

_lock = threading.Lock()
_armed = False


def _is_loopback(host: str) -> bool:
    # A fully qualified name may end in a dot (``localhost.``); it names the same host.
    if host.lower().rstrip(".") in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _library_of(frame: FrameType) -> str | None:
    """The package ``frame`` runs in when it is library code (installed or standard), else
    None for the project's own code."""
    module = str(frame.f_globals.get("__name__", ""))
    top = module.split(".", 1)[0]
    if top in sys.stdlib_module_names:
        return module if top in ("http", "urllib", "xmlrpc", "ftplib", "smtplib") else top
    filename = frame.f_code.co_filename
    if any(filename.startswith(d) for d in _LIBRARY_DIRS) or "site-packages" in filename:
        return top or None
    return None


def who_connects(frame: FrameType | None) -> str:
    """Who opened a connection, from the frame that called into ``socket``: the innermost
    library and the outermost one it was called through, or "a raw socket"."""
    libraries: list[str] = []
    while frame is not None:
        top = str(frame.f_globals.get("__name__", "")).split(".", 1)[0]
        if top not in _PLUMBING and top not in _RUNNERS:
            library = _library_of(frame)
            if library is None:
                break  # the project's own code: whatever is inside it is the library
            if library not in libraries and top not in ("_pytest", "pluggy", "pytest"):
                libraries.append(library)
        frame = frame.f_back
    if not libraries:
        return "a raw socket"
    inner, outer = libraries[0], libraries[-1]
    return inner if inner == outer else f"{inner} (called from {outer})"


@dataclass
class Unserved:
    """What a recording session's tripwire saw go around the recorder: one entry per host."""

    messages: dict[str, str] = field(default_factory=dict)


# The check of the tripwire armed now, which the guarded socket types read (None while none is).
_guard: list[Callable[[socket.socket, Any], None] | None] = [None]
# The C socket type a guarded one stands in for -> that guarded type, made once: a type made
# at every arming (every test) is a garbage cycle left to each full collection.
_guarded_types: dict[type[_socket.socket], type[_socket.socket]] = {}


def _guarded(real_c_socket: type[_socket.socket]) -> type[_socket.socket]:
    """``_socket.socket`` while armed: a socket made from the C type directly, and the C type's
    own ``connect`` called on any socket (``_socket.socket.connect(sock, addr)``), are checked
    too, by the tripwire armed at the time of the call."""
    made = _guarded_types.get(real_c_socket)
    if made is not None:
        return made

    class GuardedSocket(real_c_socket):  # type: ignore[misc,valid-type]
        __slots__ = ()

        def connect(self, address: Any) -> None:
            check = _guard[0]
            if check is not None:
                check(self, address)
            real_c_socket.connect(self, address)

        def connect_ex(self, address: Any) -> int:
            check = _guard[0]
            if check is not None:
                check(self, address)
            result: int = real_c_socket.connect_ex(self, address)
            return result

    GuardedSocket.__doc__ = _guarded.__doc__
    _guarded_types[real_c_socket] = GuardedSocket
    return GuardedSocket


def arm_tripwire(
    *,
    cassette: str,
    mode: str,
    allow_hosts: Iterable[str] = (),
    allow_loopback: bool = False,
    recording: bool = False,
    on_unserved: Literal["fail", "warn"] = "fail",
    unserved: Unserved | None = None,
) -> Callable[[], None]:
    """Block every outgoing connection except to ``allow_hosts``; returns the function that
    disarms it. ``allow_loopback`` also lets 127.0.0.0/8, ::1 and localhost through.

    With ``recording``, loopback and the connections of served requests are let through, and
    ``on_unserved="warn"`` lets the others through too, noting each in ``unserved``.
    """
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
    real_c_socket = _socket.socket
    real_c_socket_type = _socket.SocketType
    names = {h.lower().strip().strip("[]") for h in allow_hosts if h.strip()}
    addresses: set[str] = set()
    for name in names:
        with contextlib.suppress(ValueError):
            addresses.add(str(ipaddress.ip_address(name)))
    loopback = allow_loopback or recording
    seen = unserved if unserved is not None else Unserved()

    def allowed(host: str) -> bool:
        host = host.lower().strip("[]")
        if loopback and _is_loopback(host):
            return True
        if recording and (is_sending() or host_in_flight(host)):
            return True
        if host in names or host in addresses:
            return True
        return any(n.startswith("*.") and host.endswith(n[1:]) for n in names)

    def message(host: str, port: object, who: str) -> str:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        let_through = (
            f"let the host through with --cassette-allow-hosts={host} "
            f"(allow_hosts=[{host!r}] on the marker)"
        )
        if not recording:
            return (
                f"pytest-toolnexus blocked a connection to {where}: cassette {cassette} "
                f"is replay-only (record mode {mode!r}), so nothing may reach the network. "
                f"It came from {who}, not from a client the cassette serves ({SERVED}): "
                "serve the request through one of them, or " + let_through + "."
            )
        return (
            f"pytest-toolnexus: {who} opened a connection to {where} that cassette "
            f"{cassette} does not serve, while it records (record mode {mode!r}): the traffic "
            "would not be recorded, and the replay would fail without it. Send the request "
            f"through a client the cassette serves ({SERVED}), or "
            + let_through
            + ", or make this a warning with unserved='warn' on the marker "
            "(ini: cassette_unserved = warn)."
        )

    def stop(host: str, port: object) -> None:
        text = message(host, port, who_connects(sys._getframe(2)))
        if recording:
            seen.messages.setdefault(host, text)
            if on_unserved == "warn":
                return
        raise NetworkBlockedError(text)

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if host is not None and not allowed(name):
            stop(name, port)
        results = real_getaddrinfo(host, port, *args, **kwargs)
        if host is not None and (not recording or name.lower() in names):
            for *_, sockaddr in results:
                addresses.add(str(sockaddr[0]).split("%", 1)[0])
        return results

    def check(sock: socket.socket, address: Any) -> None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        host, port = str(address[0]), address[1]
        if not allowed(host):
            stop(host, port)

    def connect(self: socket.socket, address: Any) -> None:
        check(self, address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        check(self, address)
        result: int = real_connect_ex(self, address)
        return result

    guarded_socket = _guarded(real_c_socket)
    _guard[0] = check

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = getaddrinfo
    _socket.socket = guarded_socket  # type: ignore[misc]
    _socket.SocketType = guarded_socket

    disarmed = False

    def disarm() -> None:
        # Once only: a second call must not put back what was current at arming over a
        # change made since.
        global _armed
        nonlocal disarmed
        if disarmed:
            return
        disarmed = True
        if _guard[0] is check:
            _guard[0] = None
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = real_getaddrinfo
        _socket.socket = real_c_socket  # type: ignore[misc]
        _socket.SocketType = real_c_socket_type
        with _lock:
            _armed = False

    return disarm
