"""The proxy settings of the httpx and httpx2 clients a replay-only test makes, read once per
proxy set-up instead of once per client.

A client made without a ``transport=`` (``httpx.Client()``, and the clients the openai and
anthropic SDKs make) asks ``get_environment_proxies()``, which walks every environment variable
through ``os.environ`` (urllib's ``getproxies``): tens of microseconds in a usual CI
environment, paid again by each client a test makes, more than the rest of a replayed request.
:func:`remember_env_proxies` makes the clients' module answer from the last reading while the
environment holds the same proxy variables with the same values (every name ending in
``_proxy``, in any case, and ``REQUEST_METHOD``: all that urllib reads), so a test that sets
``HTTPS_PROXY`` or ``NO_PROXY`` gets what httpx would have read, and pytest's own
``PYTEST_CURRENT_TEST``, set anew for each test, changes nothing. The answer is a new dict each
time, as httpx's is, and a reading is kept only for the function that made it (a function put
in httpx's place, or a ``getproxies`` patched under it, answers for itself) and only when the
environment did not change while it was read. Where the environment's own store cannot be read
(not CPython), and on macOS and Windows, where urllib also reads the system's own proxy
settings, the clients read them as before.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Hashable
from typing import Any, Final

from pytest_toolnexus._bridges import compat as _compat

__all__ = ["remember_env_proxies"]

# Where urllib's getproxies falls back on the system's own proxy settings when no variable
# names a proxy (System Configuration on macOS, the registry on Windows): no reading is kept.
_SYSTEM_SETTINGS: Final = ("darwin", "win32")
_lock = threading.Lock()
# library -> (the environment it was read in, what was read): the last reading only, so a
# suite that changes its environment test by test keeps one entry per library.
_last: dict[str, tuple[tuple[object, object], Hashable, dict[str, str | None]]] = {}


# The environment's names when last looked at, and the ones among them urllib reads for proxies:
# the names change far less often than the values (pytest sets one anew for each test).
_scanned: list[tuple[object, ...]] = [(), ()]


def _reads(name: object) -> bool:
    """Whether urllib's ``getproxies_environment`` reads the variable ``name`` (bytes on POSIX,
    str on Windows)."""
    if isinstance(name, bytes):
        return name[-6:].lower() == b"_proxy" or name == b"REQUEST_METHOD"
    return isinstance(name, str) and (name[-6:].lower() == "_proxy" or name == "REQUEST_METHOD")


def _environment() -> Hashable | None:
    """The proxy variables of the process environment with their values, in its order, or None
    where its store cannot be read."""
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        return None
    names = tuple(data)
    with _lock:
        if names != _scanned[0]:
            _scanned[:] = [names, tuple(name for name in names if _reads(name))]
        read = _scanned[1]
    return tuple((name, data.get(name)) for name in read)


def _remembering(library: str, original: Callable[[], dict[str, str | None]]) -> Callable[[], Any]:
    def get_environment_proxies() -> dict[str, str | None]:
        environment = _environment()
        if environment is None:
            return original()
        # What answers, as well as what it reads: another function put in its place, or a
        # getproxies patched in its module, answers for itself.
        source = (original, getattr(original, "__globals__", {}).get("getproxies"))
        with _lock:
            kept = _last.get(library)
            if kept is not None and kept[0] == source and kept[1] == environment:
                return dict(kept[2])
        read = original()
        # Kept only when the environment did not change while it was read (another thread):
        # else the reading would stand for an environment it was not read in.
        if _environment() == environment:
            with _lock:
                _last[library] = (source, environment, dict(read))
        return read

    get_environment_proxies.__wrapped__ = original  # type: ignore[attr-defined]
    return get_environment_proxies


def remember_env_proxies() -> Callable[[], None]:
    """Have new httpx and httpx2 clients read the proxy settings once per environment; returns
    the undo. A library laid out otherwise is left alone: its clients read the environment, as
    before."""
    if sys.platform in _SYSTEM_SETTINGS:
        return lambda: None  # urllib reads the system's settings too, which no key can follow
    return _compat.replace_in_libraries("_client", "get_environment_proxies", _remembering)
