"""The WebSocket side of one cassette session: each connection opened while it is in use is
recorded or replayed through the session's own request path.

The handshake goes through the session's seam transport as a ``GET`` to the ``ws(s)://`` URL,
so it is matched by the session's rules (method, URL and query, in order, each recording
played once), counted in ``cassette.requests``, refused with the session's miss when the
cassette has no such session, and recorded with its credentials redacted. When it is recorded,
the live connection's frames are teed into the recorder as the body of the 101 answer
(:mod:`.record`); when it is replayed, the recorded frames become a :class:`~.script.Script`
played on the session's clock (:mod:`.playback`, :mod:`.replay`). The session is reached only
through its public methods (:class:`SessionLike`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

import anyio

from pytest_toolnexus._safety.redact import redact_url
from pytest_toolnexus._safety.secrets import SecretScanner
from pytest_toolnexus._seam.duplex import (
    Accepted,
    AsyncDuplexConnection,
    AsyncDuplexTransport,
    DuplexConnection,
    DuplexRefused,
    DuplexTransport,
    Handshake,
)
from pytest_toolnexus._seam.errors import CassetteFormatError, CassetteMissError, ReplayError
from pytest_toolnexus._seam.headers import Headers
from pytest_toolnexus._seam.transport import (
    AsyncByteStream,
    AsyncTransport,
    ByteStream,
    Transport,
    TransportRequest,
    TransportResponse,
)
from pytest_toolnexus._session.body_part import BodyPart
from pytest_toolnexus._session.match import MatchRules
from pytest_toolnexus._session.sent import SentRequest
from pytest_toolnexus._store.cassette import Interaction, MalformedCassette, damage_reason
from pytest_toolnexus._store.records import corrupt_at
from pytest_toolnexus._timing.clock import Clock

from .expect import VOLATILE, FrameMatcher
from .faults import StalledPlayback, Where, reshaped, stalled
from .log import FrameLog, WebSocketLog
from .playback import Playback
from .record import AsyncRecordingConnection, RecordingConnection, Tee
from .replay import AsyncReplayedConnection, ReplayedConnection
from .script import Script

__all__ = ["Realtime", "SessionLike", "made_for", "realtime_of"]


class SessionLike(Protocol):
    """What the WebSocket side uses of a cassette session: its public surface only."""

    path: Path
    rules: MatchRules
    clock: Clock

    @property
    def misses(self) -> list[CassetteMissError]: ...

    @property
    def damaged(self) -> list[CassetteFormatError]: ...

    @property
    def requests(self) -> list[SentRequest]: ...

    @property
    def record_mode(self) -> str: ...

    @property
    def interactions(self) -> list[Interaction]: ...

    @property
    def websockets(self) -> list[WebSocketLog]: ...

    def transport_for(self, live: Transport | None) -> Transport: ...

    def async_transport_for(self, live: AsyncTransport | None) -> AsyncTransport: ...


def _request(handshake: Handshake) -> TransportRequest:
    headers = handshake.headers
    if handshake.subprotocols and "sec-websocket-protocol" not in headers:
        headers = headers.with_value("Sec-WebSocket-Protocol", ", ".join(handshake.subprotocols))
    return TransportRequest("GET", handshake.url, headers, stream=True)


def _upgrade(accepted: Accepted) -> Headers:
    """The 101's headers, saying what follows is a WebSocket (the recorder reads it so)."""
    headers = accepted.headers
    if headers.get("upgrade", "").lower() != "websocket":
        headers = headers.with_value("Upgrade", "websocket")
    if accepted.subprotocol and "sec-websocket-protocol" not in headers:
        headers = headers.with_value("Sec-WebSocket-Protocol", accepted.subprotocol)
    return headers


async def _once(content: bytes) -> AsyncIterator[bytes]:
    yield content


def _refused(handshake: Handshake, response: TransportResponse, content: bytes) -> DuplexRefused:
    """The error for a handshake answered with another status than 101 (a fault that refuses
    it, or a recorded refusal)."""
    return DuplexRefused(redact_url(handshake.url), response.status, response.headers, content)


class Realtime:
    """The WebSocket connections of one session, recorded or replayed."""

    def __init__(self, session: SessionLike) -> None:
        # Weakly: the hub is the value of a weak-keyed table whose key is the session, and a
        # value that held its key would keep every session of the run (and its cassette) alive.
        self._session_ref = weakref.ref(session)
        self._lock = threading.Lock()
        self.connections: list[FrameLog] = session.websockets
        """Every connection opened, in order: what passed both ways, with its times (the
        session's ``websockets``)."""
        self._playbacks: list[Playback] = []

    @property
    def _session(self) -> SessionLike:
        session = self._session_ref()
        if session is None:
            raise RuntimeError(
                "this WebSocket connection outlived its cassette session: open connections "
                "inside the test or block that uses the cassette"
            )
        return session

    # -- opening --------------------------------------------------------------------------

    def connect(self, handshake: Handshake, live: DuplexTransport) -> DuplexConnection:
        """Open a connection for ``handshake``: replayed from the cassette, or, when the
        session records it, opened by ``live`` and teed into the recording."""
        session = self._session
        started = session.clock.now()
        tee = Tee()
        opened: list[DuplexConnection] = []

        def handshake_live(request: TransportRequest) -> TransportResponse:
            try:
                connection = live(handshake)
            except DuplexRefused as refused:  # recorded as the HTTP answer it was
                body = ByteStream(iter((refused.body,)))
                return TransportResponse(refused.status, refused.headers, body)
            opened.append(connection)
            accepted = connection.accepted
            return TransportResponse(accepted.status, _upgrade(accepted), ByteStream(tee.chunks()))

        request = _request(handshake)
        response = session.transport_for(handshake_live)(request)
        if not opened and response.status != 101:
            content = b"".join(response.body) if isinstance(response.body, ByteStream) else b""
            raise _refused(handshake, response, content)
        log = self._log(handshake, replayed=not opened)
        if opened:
            body = response.body
            assert isinstance(body, ByteStream)
            return RecordingConnection(opened[0], tee, iter(body), log, session.clock, started)
        if isinstance(response.body, ByteStream):
            response.body.close()
        playback, accepted = self._playback(handshake, log, started)
        late = self._handshake_due(playback)
        if late is not None:
            session.clock.wait_until(late)
        return ReplayedConnection(playback, accepted)

    async def aconnect(
        self, handshake: Handshake, live: AsyncDuplexTransport
    ) -> AsyncDuplexConnection:
        """The async mirror of :meth:`connect`."""
        session = self._session
        # anyio's backend (its first use imports it, some 15 ms) loaded before the session's
        # time starts, not inside the first frame's wait.
        anyio.Event()
        started = session.clock.now()
        tee = Tee()
        opened: list[AsyncDuplexConnection] = []

        async def handshake_live(request: TransportRequest) -> TransportResponse:
            try:
                connection = await live(handshake)
            except DuplexRefused as refused:  # recorded as the HTTP answer it was
                body = AsyncByteStream(_once(refused.body))
                return TransportResponse(refused.status, refused.headers, body)
            opened.append(connection)
            accepted = connection.accepted
            stream = AsyncByteStream(tee.achunks())
            return TransportResponse(accepted.status, _upgrade(accepted), stream)

        request = _request(handshake)
        response = await session.async_transport_for(handshake_live)(request)
        if not opened and response.status != 101:
            content = b""
            if isinstance(response.body, AsyncByteStream):
                content = b"".join([chunk async for chunk in response.body])
            raise _refused(handshake, response, content)
        log = self._log(handshake, replayed=not opened)
        if opened:
            body = response.body
            assert isinstance(body, AsyncByteStream)
            pull = body.__aiter__()
            return AsyncRecordingConnection(opened[0], tee, pull, log, session.clock, started)
        if isinstance(response.body, AsyncByteStream):
            await response.body.aclose()
        playback, accepted = self._playback(handshake, log, started)
        late = self._handshake_due(playback)
        if late is not None:
            await session.clock.await_until(late)
        return AsyncReplayedConnection(playback, accepted)

    def _sent(self, url: str) -> SentRequest | None:
        """The record of the handshake to ``url`` (redacted) the session just routed."""
        return next(
            (r for r in reversed(self._session.requests) if r.url == url and r.method == "GET"),
            None,
        )

    def _log(self, handshake: Handshake, *, replayed: bool) -> FrameLog:
        url = redact_url(handshake.url)
        sent = self._sent(url)
        log = FrameLog(url, replayed)
        if sent is not None:
            log.opened_at = sent.sent_at
            log.faults = list(sent.faults)
        with self._lock:
            self.connections.append(log)
        return log

    def _handshake_due(self, playback: Playback) -> float | None:
        """When the handshake's answer is due, if a fault made it later than now."""
        clock = self._session.clock
        due = playback.started + playback.script.t_handshake / 1000.0 / clock.speed
        return due if due > clock.now() else None

    def _playback(
        self, handshake: Handshake, log: FrameLog, started: float
    ) -> tuple[Playback, Accepted]:
        """The playback of the recorded session the handshake was just matched to."""
        session = self._session
        url = redact_url(handshake.url)
        sent = self._sent(url)
        if sent is None or not sent.replayed or sent.interaction is None:
            raise ReplayError(
                f"the WebSocket handshake to {url} was answered by an injected fault, "
                "which cannot answer a WebSocket session"
            )
        position = sent.interaction
        interaction = session.interactions[position]
        try:
            script = Script.of(interaction)
        except ValueError as exc:
            if isinstance(exc, MalformedCassette):
                raise self._corrupt(position, exc) from exc
            raise ReplayError(
                f"the WebSocket handshake to {url} matched interaction #{position} of cassette "
                f"{session.path}, which is an HTTP answer, not a recorded WebSocket session. "
                "Record the cassette again (--cassette-record=all)."
            ) from exc
        except (MalformedCassette, TypeError, RecursionError) as exc:
            raise self._corrupt(position, exc) from exc
        script = reshaped(script, sent.applied_faults, Where(session.path, url, position))
        response = interaction.response
        assert response is not None
        body = session.rules.body
        matcher = FrameMatcher(
            BodyPart(True, (*body.ignored, *VOLATILE), body.masked),
            session.path,
            url,
            session.record_mode,
            SecretScanner().mask,
        )
        kind = StalledPlayback if stalled(script) else Playback
        playback = kind(script, session.clock, matcher, started, log, session.misses)
        with self._lock:
            self._playbacks.append(playback)
        subprotocol = response.headers.get("sec-websocket-protocol")
        return playback, Accepted(response.status, response.headers, subprotocol or None)

    def _corrupt(self, position: int, exc: BaseException) -> CassetteFormatError:
        error = corrupt_at(self._session.path, position, damage_reason(exc))
        self._session.damaged.append(error)
        return error

    # -- the end --------------------------------------------------------------------------

    def leftovers(self) -> list[str]:
        """What replayed connections left unsent or unread, one sentence each, naming the
        connection (not for a connection a fault changed, as for an HTTP answer)."""
        with self._lock:
            playbacks = [p for p in self._playbacks if not p.log.faults]
        return [sentence for playback in playbacks for sentence in _left_by(playback)]

    def release(self, playback: Playback) -> list[str]:
        """Forget a replayed connection that has ended (its playback and its log of frames),
        and give what it left, as :meth:`leftovers` would have: a server that replays one
        recording again and again keeps none of them."""
        with self._lock:
            if playback in self._playbacks:
                self._playbacks.remove(playback)
            # By identity: a log is a dataclass, and two may hold equal frames.
            self.connections[:] = [log for log in self.connections if log is not playback.log]
        return [] if playback.log.faults else _left_by(playback)


def _left_by(playback: Playback) -> list[str]:
    return [f"WebSocket {playback.log.url}: {sentence}" for sentence in playback.leftovers()]


_hubs: weakref.WeakKeyDictionary[object, Realtime] = weakref.WeakKeyDictionary()
_hubs_lock = threading.Lock()


def realtime_of(session: SessionLike) -> Realtime:
    """The WebSocket side of ``session``, made on first use."""
    with _hubs_lock:
        hub = _hubs.get(session)
        if hub is None:
            hub = _hubs[session] = Realtime(session)
        return hub


def made_for(session: object) -> Realtime | None:
    """The WebSocket side of ``session`` if one was made, else None (none is made here)."""
    with _hubs_lock:
        return _hubs.get(session)
