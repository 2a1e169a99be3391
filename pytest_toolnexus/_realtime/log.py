"""What passed on one WebSocket connection, both ways, with its times: the record a test
reads back, the same whether the session was recorded or replayed."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from pytest_toolnexus._seam.duplex import Message, Sender

__all__ = ["FrameLog", "Passed"]

_Entry = tuple[Sender, float, Message | None, int | None, str]


@dataclass(frozen=True, slots=True)
class Passed:
    """One frame that passed: who sent it, when (``t``, ms since the handshake was sent, on
    the session's clock: virtual time on replay), the message (None for a close frame), and a
    close frame's code and reason."""

    sender: Sender
    t: float
    message: Message | None
    code: int | None = None
    reason: str = ""


@dataclass
class FrameLog:
    """The frames of one connection, in the order they passed, and its URL (redacted).

    A frame is noted as a plain tuple as it passes (replay and recording note one per frame,
    on the path that hands it over), and becomes a :class:`Passed` when :attr:`frames` is
    read."""

    url: str
    replayed: bool
    _entries: list[_Entry] = field(default_factory=list, repr=False)
    _built: list[Passed] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(
        self,
        sender: Sender,
        t: float,
        message: Message | None,
        *,
        code: int | None = None,
        reason: str = "",
    ) -> None:
        # list.append is atomic: the frames of two threads never tear, and keep their order.
        self._entries.append((sender, t, message, code, reason))

    @property
    def frames(self) -> list[Passed]:
        """Every frame that passed, in order."""
        with self._lock:
            built, entries = self._built, self._entries
            # Kept to the microsecond, as a cassette keeps times: the clock's readings are
            # large numbers, and their difference carries float noise below that.
            built += [
                Passed(sender, round(t, 3), message, code, reason)
                for sender, t, message, code, reason in entries[len(built) : len(entries)]
            ]
            return list(built)

    @property
    def sent(self) -> list[Passed]:
        """The frames the client sent."""
        return [f for f in self.frames if f.sender == "client"]

    @property
    def received(self) -> list[Passed]:
        """The frames delivered to the client."""
        return [f for f in self.frames if f.sender == "server"]
