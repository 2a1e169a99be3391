"""A cancellation token that a client puts on a request and a transport observes."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import final

from .errors import TransportCancelled, expected_error

__all__ = ["CancelToken"]

# pytest leaves this module's frames out of a failure's traceback when the error is one the
# plugin raises on purpose (a miss, a usage error, a replayed transport failure).
__tracebackhide__ = expected_error


@final
class CancelToken:
    """Thread-safe, one-shot cancellation.

    A client calls :meth:`cancel`; a transport checks :attr:`cancelled` between steps and
    registers :meth:`on_cancel` callbacks to interrupt a blocked read at once. A callback
    registered after cancellation runs immediately.
    """

    __slots__ = ("_callbacks", "_event", "_lock", "_reason")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []
        self._reason = ""

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` has been called."""
        return self._event.is_set()

    @property
    def reason(self) -> str:
        """The reason given to :meth:`cancel`, or an empty string."""
        return self._reason

    def cancel(self, reason: str = "cancelled by the client") -> None:
        """Cancel the request. Safe to call from any thread, and more than once."""
        with self._lock:
            if self._event.is_set():
                return
            self._reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` when the token is cancelled; returns a function that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def unregister() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return unregister
        callback()
        return lambda: None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until cancelled or ``timeout`` seconds pass; True if cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`TransportCancelled` if the token has been cancelled."""
        if self._event.is_set():
            raise TransportCancelled(f"request cancelled: {self._reason}")

    def __repr__(self) -> str:
        state = f"cancelled ({self._reason})" if self.cancelled else "active"
        return f"<CancelToken {state}>"
