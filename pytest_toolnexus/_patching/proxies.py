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
time, as httpx's is. Where the environment's own store cannot be read (not CPython), the
clients read it as before. (Where urllib falls back on the system's proxy settings, on macOS
and Windows with no proxy variable set, a change to those made while the run goes on is not
seen: no connection can open in a replay-only test anyway.)
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Hashable
from types import ModuleType
from typing import Any

from pytest_toolnexus._bridges import compat as _compat

__all__ = ["remember_env_proxies"]

_lock = threading.Lock()
# library -> (the environment it was read in, what was read): the last reading only, so a
# suite that changes its environment test by test keeps one entry per library.
_last: dict[str, tuple[Hashable, dict[str, str | None]]] = {}


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
        with _lock:
            kept = _last.get(library)
            if kept is not None and kept[0] == environment:
                return dict(kept[1])
        read = original()
        with _lock:
            _last[library] = (environment, dict(read))
        return read

    get_environment_proxies.__wrapped__ = original  # type: ignore[attr-defined]
    return get_environment_proxies


def _client_module(lib: ModuleType) -> ModuleType | None:
    try:
        return importlib.import_module(f"{lib.__name__}._client")
    except ImportError:
        return None


def remember_env_proxies() -> Callable[[], None]:
    """Have new httpx and httpx2 clients read the proxy settings once per environment; returns
    the undo."""
    saved: list[tuple[ModuleType, Any]] = []

    def undo() -> None:
        while saved:
            module, original = saved.pop()
            module.get_environment_proxies = original  # type: ignore[attr-defined]

    try:
        for lib in _compat.libraries():
            module = _client_module(lib)
            original = None if module is None else module.__dict__.get("get_environment_proxies")
            if module is None or not callable(original):
                continue  # a layout this does not know: clients read the environment, as before
            module.get_environment_proxies = _remembering(lib.__name__, original)  # type: ignore[attr-defined]
            saved.append((module, original))
    except BaseException:
        undo()
        raise
    return undo
