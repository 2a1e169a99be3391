"""Faults for WebSocket sessions: a recorded session replayed with a failure nobody can record
on demand (docs/faults.md, "WebSocket sessions").

Each is a :class:`~pytest_toolnexus._session.faults.Fault` that counts only WebSocket
handshakes (``ws://`` and ``wss://`` URLs), so it sits in a session's faults beside the HTTP
ones, on the marker or through ``cassette.inject``, and never touches an HTTP request. A
refused handshake is a substitute (it answers in place of the recording, which a reconnect
still finds); the others reshape the session's :class:`~.script.Script` before it plays:
they cut it (a drop, a close), hold its server frames back (a stall, a slow handshake), or
add a frame (an error event). "Server frame k" counts the server's messages from 0, as the
HTTP faults count events: ``after_frame=k`` lets frames ``0 … k-1`` through.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal
from urllib.parse import urlsplit

from pytest_toolnexus._seam.duplex import ABNORMAL
from pytest_toolnexus._seam.errors import ReplayError
from pytest_toolnexus._seam.transport import TransportRequest
from pytest_toolnexus._session.faults import Fault, PrependFault, is_websocket
from pytest_toolnexus._store.cassette import RecordedError
from pytest_toolnexus._store.ws_frames import Frame

from .playback import WAIT, Due, Playback
from .script import HANDSHAKE, Script, ServerFrame

__all__ = [
    "CloseFault",
    "DropFault",
    "ErrorFault",
    "RefuseFault",
    "SlowHandshakeFault",
    "StallFault",
    "StalledPlayback",
    "WebSocketFault",
    "Where",
    "reshaped",
    "stalled",
]

RESERVED_CODES: Final = (1004, 1005, 1006, 1015)
"""Close codes no close frame may carry (RFC 6455, 7.4.1)."""


@dataclass(frozen=True, slots=True)
class Where:
    """The connection a fault is applied to, as its error names it."""

    path: Path
    url: str
    position: int

    def refuse(self, fault: WebSocketFault, why: str, fix: str) -> ReplayError:
        return ReplayError(
            f"fault {fault.describe()} cannot apply to the WebSocket {self.url} "
            f"(interaction #{self.position} of cassette {self.path}): {why}. {fix}"
        )


@dataclass(frozen=True, slots=True)
class WebSocketFault(Fault):
    """A fault that counts only WebSocket handshakes and reshapes the session's script."""

    def targets(self, request: TransportRequest) -> bool:
        return is_websocket(request) and self.matches(request)

    def reshape(self, script: Script, where: Where) -> Script:
        raise NotImplementedError


def _messages(script: Script) -> list[int]:
    """The positions in ``script.server`` of the server's messages (not a close, nor the drop)."""
    return [
        i for i, s in enumerate(script.server) if s.frame is not None and s.frame.kind != "close"
    ]


def _split(script: Script, k: int, fault: WebSocketFault, where: Where) -> int:
    """Where server frame ``k`` sits in ``script.server`` (just after the last message when
    ``k`` is their count, before a recorded close): refuses a ``k`` the recording does not
    reach."""
    messages = _messages(script)
    if k > len(messages):
        raise where.refuse(
            fault,
            f"its recording has {len(messages)} server frame(s)",
            f"Give after_frame a number from 0 to {len(messages)}.",
        )
    if k < len(messages):
        return messages[k]
    return messages[-1] + 1 if messages else 0


def _after(script: Script, position: int) -> tuple[int, float, float]:
    """The anchor, the offset and the recorded time of the server frame before ``position``
    (the handshake's answer when there is none): when a frame put there is due."""
    if position == 0:
        return HANDSHAKE, script.t_handshake, script.t_handshake
    before = script.server[position - 1]
    return before.anchor, before.offset, before.t


def _numbered(frames: Sequence[ServerFrame]) -> tuple[ServerFrame, ...]:
    return tuple(dataclasses.replace(f, index=i) for i, f in enumerate(frames))


@dataclass(frozen=True, slots=True)
class DropFault(WebSocketFault):
    """The connection drops without a close frame after ``after_frame`` server frames: the
    client's next read fails with close code 1006."""

    after_frame: int = 0

    def describe(self) -> str:
        return f"ws_drop(after_frame={self.after_frame})"

    def reshape(self, script: Script, where: Where) -> Script:
        position = _split(script, self.after_frame, self, where)
        anchor, offset, t = _after(script, position)
        error = RecordedError(
            "RemoteProtocolError",
            f"the WebSocket connection dropped without a close frame (code {ABNORMAL})",
            t,
        )
        drop = ServerFrame(position, None, anchor, offset, error)
        server = (*script.server[:position], drop)
        return dataclasses.replace(script, server=server, cut=self.describe())


@dataclass(frozen=True, slots=True)
class CloseFault(WebSocketFault):
    """The server closes the connection with ``code`` and ``reason`` after ``after_frame``
    server frames."""

    code: int = 1011
    reason: str = ""
    after_frame: int = 0

    def describe(self) -> str:
        reason = f", {self.reason!r}" if self.reason else ""
        return f"ws_close({self.code}{reason}, after_frame={self.after_frame})"

    def reshape(self, script: Script, where: Where) -> Script:
        position = _split(script, self.after_frame, self, where)
        anchor, offset, t = _after(script, position)
        frame = Frame(t, "server", "close", None, code=self.code, reason=self.reason)
        server = (*script.server[:position], ServerFrame(position, frame, anchor, offset))
        return dataclasses.replace(script, server=server, cut=self.describe())


@dataclass(frozen=True, slots=True)
class StallFault(WebSocketFault):
    """Server frame ``after_frame`` and the ones after it that answer the same client frame
    come ``seconds`` late; with ``seconds`` infinite, the server sends nothing more."""

    seconds: float = math.inf
    after_frame: int = 0

    def describe(self) -> str:
        held = "for ever" if math.isinf(self.seconds) else f"{self.seconds:g} s"
        return f"ws_stall({held}, after_frame={self.after_frame})"

    def reshape(self, script: Script, where: Where) -> Script:
        position = _split(script, self.after_frame, self, where)
        if position == len(script.server):
            return script  # nothing after it to hold back
        if math.isinf(self.seconds):
            held = [dataclasses.replace(s, offset=math.inf) for s in script.server[position:]]
            server = (*script.server[:position], *held)
            return dataclasses.replace(script, server=server, cut=self.describe())
        # Frames that answer a later client frame move with that frame, which the client
        # sends no earlier than it reads what came before.
        anchor = script.server[position].anchor
        delay = self.seconds * 1000.0
        server = tuple(
            dataclasses.replace(s, offset=s.offset + delay)
            if i >= position and s.anchor == anchor
            else s
            for i, s in enumerate(script.server)
        )
        return dataclasses.replace(script, server=server)


def _error_event(message: str, error_type: str, code: str | None) -> str:
    """OpenAI Realtime's ``error`` server event."""
    return json.dumps(
        {
            "type": "error",
            "event_id": "event_toolnexus_fault",
            "error": {
                "type": error_type,
                "code": code,
                "message": message,
                "param": None,
                "event_id": None,
            },
        },
        separators=(",", ":"),
    )


def _gemini_live(url: str) -> bool:
    return "BidiGenerateContent" in urlsplit(url).path


@dataclass(frozen=True, slots=True)
class ErrorFault(WebSocketFault):
    """An OpenAI Realtime ``error`` event from the server after ``after_frame`` server frames;
    the recorded frames carry on after it, as the API does after an error it survives."""

    message: str = "The server had an error while processing your request."
    error_type: str = "server_error"
    code: str | None = None
    after_frame: int = 0

    def describe(self) -> str:
        return f"ws_error(after_frame={self.after_frame})"

    def reshape(self, script: Script, where: Where) -> Script:
        if _gemini_live(where.url):
            raise where.refuse(
                self,
                "Gemini Live has no error event: it reports an error by closing the connection",
                "Use faults.ws_close(1011, 'the reason', after_frame=k) for it.",
            )
        position = _split(script, self.after_frame, self, where)
        anchor, offset, t = _after(script, position)
        text = _error_event(self.message, self.error_type, self.code)
        event = ServerFrame(position, Frame(t, "server", "text", text), anchor, offset)
        server = _numbered((*script.server[:position], event, *script.server[position:]))
        return dataclasses.replace(script, server=server)


@dataclass(frozen=True, slots=True)
class SlowHandshakeFault(WebSocketFault):
    """The server answers the handshake ``seconds`` late; everything after it moves with it."""

    seconds: float = 1.0

    def describe(self) -> str:
        return f"ws_slow_handshake({self.seconds:g} s)"

    def reshape(self, script: Script, where: Where) -> Script:
        delay = self.seconds * 1000.0
        client = tuple(dataclasses.replace(f, t=f.t + delay) for f in script.client)
        server = tuple(
            dataclasses.replace(s, offset=s.offset + delay) if s.anchor == HANDSHAKE else s
            for s in script.server
        )
        return dataclasses.replace(
            script, client=client, server=server, t_handshake=script.t_handshake + delay
        )


@dataclass(frozen=True, slots=True)
class RefuseFault(PrependFault):
    """The server refuses the handshake with ``status`` (a substitute: the recording stays for
    the client's next attempt)."""

    def targets(self, request: TransportRequest) -> bool:
        return is_websocket(request) and self.matches(request)

    def describe(self) -> str:
        return f"ws_refuse({self.status})"


class StalledPlayback(Playback):
    """The playback of a session a :class:`StallFault` stalled for ever: a frame held back
    without end (its offset infinite) is never due, as one that answers a client frame not
    sent yet is not."""

    def next_due(self) -> Due | Literal["wait", "end"]:
        due = super().next_due()
        if isinstance(due, Due) and due.frame.offset == math.inf:
            return WAIT
        return due


def stalled(script: Script) -> bool:
    """Whether a fault stalled ``script`` for ever (it plays as a :class:`StalledPlayback`)."""
    return any(s.offset == math.inf for s in script.server)


def reshaped(script: Script, faults: Sequence[object], where: Where) -> Script:
    """``script`` with each WebSocket fault among ``faults`` applied, in the order given."""
    for fault in faults:
        if isinstance(fault, WebSocketFault):
            script = fault.reshape(script, where)
    return script
