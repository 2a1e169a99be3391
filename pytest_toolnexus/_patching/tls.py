"""One default TLS context for the httpx and httpx2 clients a replay-only test makes.

Every ``httpx.Client()`` builds an ``HTTPTransport``, and every ``HTTPTransport`` builds an
``ssl.SSLContext`` with certifi's bundle loaded: about 20 ms, more than everything else a
replayed test costs together, paid again by each client (and each SDK client) a test makes.
A replay-only test with no allowed hosts opens no connection at all (the tripwire refuses
them), so the context is never used while it runs. :func:`share_default_tls` makes
``create_ssl_context`` hand every client that asks for the default one (``verify=True``, no
client certificate) the same context, made once per process and per certificate source
(``SSL_CERT_FILE``, ``SSL_CERT_DIR`` when the client trusts the environment).

A client made during the test keeps its context afterwards and works as any client does; it
shares that context with the other clients made the same way. Any other ``verify=`` (a
context, a path, ``False``) or a ``cert=`` goes to httpx's own function untouched.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import Callable
from typing import Any

from pytest_toolnexus._bridges import compat as _compat

__all__ = ["share_default_tls"]

_lock = threading.Lock()
# (library, SSL_CERT_FILE, SSL_CERT_DIR) -> the context made for it
_made: dict[tuple[str, str | None, str | None], ssl.SSLContext] = {}


def _sharing(library: str, original: Callable[..., ssl.SSLContext]) -> Callable[..., Any]:
    def create_ssl_context(
        verify: Any = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is not True or cert is not None:
            return original(verify=verify, cert=cert, trust_env=trust_env)
        key = (
            library,
            os.environ.get("SSL_CERT_FILE") or None if trust_env else None,
            os.environ.get("SSL_CERT_DIR") or None if trust_env else None,
        )
        with _lock:
            context = _made.get(key)
            if context is None:
                context = _made[key] = original(verify=True, cert=None, trust_env=trust_env)
        return context

    create_ssl_context.__wrapped__ = original  # type: ignore[attr-defined]
    return create_ssl_context


def share_default_tls() -> Callable[[], None]:
    """Share the default TLS context among new httpx and httpx2 transports; returns the undo.
    A library laid out otherwise is left alone: its clients make their own, as before."""
    return _compat.replace_in_libraries("_transports.default", "create_ssl_context", _sharing)
