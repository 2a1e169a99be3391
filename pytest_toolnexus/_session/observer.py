"""What the request path tells whoever sent a request: one small Protocol of five calls.

Replay (:func:`~pytest_toolnexus._session.replay.play`) and recording
(:class:`~pytest_toolnexus._session.record.RecordingTransport`) report each request's progress to an
:class:`Observer`: each piece of the body as it reaches the client, the end of a body read
whole, the interaction a recording made, a stored piece that turned out broken, and a stream
the recorder could not parse. A session implements it for each request it routes; a user of
the transports on their own passes none and gets :data:`NO_OBSERVER`, which notes nothing.
"""

from __future__ import annotations

from typing import Final, Protocol

from pytest_toolnexus._store.cassette import Interaction, MalformedCassette

__all__ = ["NO_OBSERVER", "NoObserver", "Observer"]


class Observer(Protocol):
    """Told what happens to one request on its way through replay or recording."""

    def delivered(self, number: int, at: float) -> None:
        """Piece ``number`` (0-based) of the body reached the client at clock time ``at``
        (the replay clock's ``now()``, or the real monotonic time while recording)."""

    def ended(self) -> None:
        """The client has read the whole body (to its end, or to its end-of-stream marker)."""

    def recorded(self, interaction: Interaction) -> None:
        """The interaction a recording made; called exactly once per recorded request."""

    def malformed(self, problem: MalformedCassette) -> Exception | None:
        """The error to raise for a broken stored piece met while streaming (None: raise the
        original error as it is)."""

    def problem(self, text: str) -> None:
        """The recorder could not parse a stream; the client read it as sent, and ``text``
        (a sentence naming the request) says what the cassette keeps instead."""


class NoObserver:
    """An :class:`Observer` that notes nothing: broken pieces raise as they are."""

    def delivered(self, number: int, at: float) -> None:
        pass

    def ended(self) -> None:
        pass

    def recorded(self, interaction: Interaction) -> None:
        pass

    def malformed(self, problem: MalformedCassette) -> Exception | None:
        return None

    def problem(self, text: str) -> None:
        pass


NO_OBSERVER: Final[Observer] = NoObserver()
"""The observer of a request nobody watches."""
