"""A recorded WebSocket session read as a script: the client frames replay expects, in order,
and the server frames it releases, each tied to the client frame it answers.

Causal release (DESIGN §9, D3): a server frame is due at its recorded offset from the client
frame that preceded it in the recording (its *anchor*), or from the handshake when no client
frame did. On replay the anchor is the moment the client actually sent that frame (never
earlier than it was sent in the recording, moved by the client's lateness so far: see
:meth:`~.playback.Playback.send`), so a client that sends late sees the answer move with it,
and a client that has not sent it yet gets nothing. A server frame is never released before
the server frame recorded before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pytest_toolnexus._seam.duplex import ABNORMAL
from pytest_toolnexus._store.cassette import Interaction, RecordedError, WebSocketBody
from pytest_toolnexus._store.ws_frames import Frame, frames_of

__all__ = ["HANDSHAKE", "Script", "ServerFrame"]

HANDSHAKE: Final = -1
"""The anchor of a server frame no client frame preceded: the handshake."""


@dataclass(frozen=True, slots=True)
class ServerFrame:
    """A server frame (or the recorded drop of the connection, ``frame`` None) with its
    anchor (the index of the client frame it follows, or :data:`HANDSHAKE`) and its offset
    in ms from that anchor."""

    index: int
    frame: Frame | None
    anchor: int
    offset: float
    error: RecordedError | None = None

    @property
    def t(self) -> float:
        """Its recorded time, in ms since the handshake was sent."""
        if self.frame is not None:
            return self.frame.t
        assert self.error is not None
        return self.error.t

    @property
    def close_code(self) -> int | None:
        """The close code this frame ends the session with (None: it ends nothing)."""
        if self.frame is None:
            return ABNORMAL
        if self.frame.kind == "close":
            return self.frame.code or 1005
        return None


@dataclass(frozen=True, slots=True)
class Script:
    """What the recording expects of the client (``client``, in order) and what it answers
    (``server``, in order, each anchored). ``t_handshake`` is when the handshake's answer
    arrived, in ms since it was sent. ``cut`` names the fault that cut the session short or
    stalled it for ever, if one did."""

    client: Sequence[Frame]
    server: Sequence[ServerFrame]
    t_handshake: float
    cut: str | None = None

    @classmethod
    def of(cls, interaction: Interaction) -> Script:
        """The script of a recorded session. Raises ``MalformedCassette`` for a damaged
        frame, ``ValueError`` for an interaction that is no WebSocket session."""
        response = interaction.response
        if response is None or not isinstance(response.body, WebSocketBody):
            raise ValueError("this interaction is not a recorded WebSocket session")
        client: list[Frame] = []
        server: list[ServerFrame] = []
        anchor, anchor_t = HANDSHAKE, 0.0
        for frame in frames_of(response.body.frames):
            if frame.sender == "client":
                client.append(frame)
                anchor, anchor_t = len(client) - 1, frame.t
            else:
                server.append(ServerFrame(len(server), frame, anchor, frame.t - anchor_t))
        error = response.error
        if error is not None:
            offset = max(error.t - anchor_t, 0.0)
            server.append(ServerFrame(len(server), None, anchor, offset, error))
        return cls(tuple(client), tuple(server), response.t_headers)
