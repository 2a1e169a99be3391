"""What the realtime session builders share: a turn, the frames of a session being built, and
the session's interaction.

A session is a list of :class:`RealtimeTurn`: what the client sends (``asks``, stored as
*patterns*: a client frame matches when it holds what the pattern holds, so
``"response.create"`` matches any ``{"type": "response.create", ...}``) and what the model
answers (text, audio chunks with their transcript, tool calls). Replay releases each answer
on the cadence counted from the client's last frame of its turn (the causal release of
docs/realtime.md): acknowledgements and an answer's opening events at once, its content
events ``ttft`` after, then one every ``gap``, and its closing events with the last content
event. The client's frames are stamped as sent the moment the turn before was over, so a
client that answers at once gets every event at exactly its built time. The sessions
themselves are :mod:`.build_openai_realtime`'s and :mod:`.build_gemini_live`'s.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._store.cassette import (
    EmptyBody,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    WebSocketBody,
)
from pytest_toolnexus._store.ws_frames import frame_doc, message_of

from .build_base import Cadence, ToolCall, split_text

__all__ = ["Frames", "RealtimeTurn", "pattern", "spoken"]


@dataclass(frozen=True, slots=True)
class RealtimeTurn:
    """One answer of a built session and what the client sends to ask for it.

    ``asks`` are the client's frames before the answer, each an event type (OpenAI: a
    ``"type"``; Gemini: the message's one key, such as ``"client_content"``) or a mapping the
    frame must hold; None gives the provider's usual ones. ``audio`` are raw chunks, sent
    base64 encoded, with ``transcript`` their text. ``cadence`` overrides the session's for
    this turn."""

    text: str = ""
    audio: Sequence[bytes] = ()
    transcript: str = ""
    tool_calls: Sequence[ToolCall] = ()
    asks: Sequence[str | Mapping[str, Any]] | None = None
    cadence: Cadence | None = None


def pattern(ask: str | Mapping[str, Any], key: str | None) -> Mapping[str, Any]:
    """The pattern an ask stands for: a mapping as given; an event type as ``{key: ask}``
    (OpenAI's ``{"type": ...}``) or, with no ``key``, as ``{ask: {}}`` (Gemini's)."""
    if isinstance(ask, Mapping):
        return ask
    return {key: ask} if key is not None else {ask: {}}


def spoken(turn: RealtimeTurn) -> list[tuple[str, str]]:
    """A turn's audio chunks (base64) and transcript pieces, interleaved as a server sends
    them: ``("audio", chunk)`` and ``("transcript", piece)``."""
    chunks = [base64.b64encode(bytes(chunk)).decode() for chunk in turn.audio]
    parts: list[tuple[str, str]] = []
    for chunk, text in itertools.zip_longest(chunks, split_text(turn.transcript)):
        if chunk is not None:
            parts.append(("audio", chunk))
        if text is not None:
            parts.append(("transcript", text))
    return parts


class Frames:
    """The frames of a session being built, in order, with the time now (ms since the
    handshake was sent); the handshake's answer comes at ``cadence.headers``."""

    def __init__(self, cadence: Cadence) -> None:
        self.cadence = cadence
        self.docs: list[dict[str, Any]] = []
        self.answered = round(cadence.headers * 1000, 3)
        self.now = self.answered

    def client(self, value: Mapping[str, Any]) -> None:
        """A client frame that is a pattern, sent now."""
        doc = frame_doc(self.now, "client", message_of(dict(value)))
        self.docs.append({**doc, "pattern": True})

    def server(self, value: Mapping[str, Any], t: float | None = None) -> None:
        """A server frame, now or at ``t`` (never before the frame before it)."""
        self.now = self.now if t is None else max(t, self.now)
        self.docs.append(frame_doc(self.now, "server", message_of(dict(value))))

    def times(self, turn: RealtimeTurn, count: int) -> Iterator[float]:
        """When each of a turn's ``count`` content events comes, from now on its cadence."""
        chosen = turn.cadence or self.cadence
        return iter([round(self.now + t, 3) for t in chosen.times(max(count, 1))])

    def session(self, url: str) -> Interaction:
        """The whole session, the client's close ending it, as one interaction."""
        self.docs.append(frame_doc(self.now, "client", None, code=1000))
        request = RecordedRequest("GET", url, Headers(), EmptyBody())
        upgrade = Headers([("Upgrade", "websocket"), ("Connection", "Upgrade")])
        body = WebSocketBody(self.docs)
        return Interaction(request, RecordedResponse(101, upgrade, body, self.answered, self.now))
