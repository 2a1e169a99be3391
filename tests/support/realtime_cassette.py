"""A recorded OpenAI Realtime session, written as a cassette without a server: the frames the
fake Realtime server (``fake_realtime.py``) sends for a session update and an audio turn, at
fixed times, so that a test can name each frame's recorded offset exactly.

The client's side is what the openai SDK sends for :func:`talk` (the JSON compared by value).
"""

from __future__ import annotations

import base64
import json

from pytest_toolnexus import Cassette, Headers, Interaction, RecordedRequest, RecordedResponse
from pytest_toolnexus._store.bodies import EmptyBody, WebSocketBody
from pytest_toolnexus._store.ws_frames import frame_doc

BASE_URL = "http://127.0.0.1:9/v1"
"""What the SDK is given: nothing listens there, the cassette answers."""
URL = "ws://127.0.0.1:9/v1/realtime?model=gpt-realtime"
"""The handshake the SDK sends for ``client.realtime.connect(model="gpt-realtime")``."""
T_HANDSHAKE = 180.0
SESSION = {"type": "realtime", "output_modalities": ["audio"]}
ITEM = {
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "Say hello"}],
}
AUDIO = [bytes([n]) * 48 for n in range(3)]
AUDIO_DELTAS = ("response.output_audio.delta", "response.audio.delta")
TRANSCRIPT = "response.output_audio_transcript.delta"


def _server(t, kind, **fields):
    return frame_doc(t, "server", json.dumps({"type": kind, **fields}, separators=(",", ":")))


def _client(t, event):
    return frame_doc(t, "client", json.dumps(event, separators=(",", ":")))


def _delta(t, kind, delta):
    return _server(t, kind, response_id="resp_1", item_id="item_1", delta=delta)


FRAMES = [
    _server(181.0, "session.created", session={"type": "realtime", "model": "gpt-realtime"}),
    _client(200.0, {"type": "session.update", "session": SESSION}),
    _server(230.0, "session.updated", session=SESSION),
    _client(240.0, {"type": "conversation.item.create", "item": ITEM}),
    _client(241.0, {"type": "response.create"}),
    _server(260.0, "conversation.item.added", item={"id": "item_0", **ITEM}),
    _server(790.0, "response.created", response={"id": "resp_1", "status": "in_progress"}),
    *(
        _delta(t, "response.output_audio.delta", base64.b64encode(chunk).decode())
        for t, chunk in zip((800.0, 815.0, 830.0), AUDIO, strict=True)
    ),
    _delta(835.0, TRANSCRIPT, "Hello "),
    _delta(850.0, TRANSCRIPT, "there"),
    _server(860.0, "response.output_audio.done", response_id="resp_1", item_id="item_1"),
    _server(900.0, "response.done", response={"id": "resp_1", "status": "completed"}),
    frame_doc(1000.0, "client", None, code=1000),
    frame_doc(1001.0, "server", None, code=1000),
]
"""Server frames 0 to 10 (session.created is frame 0, the first audio delta frame 4, the
transcript deltas 7 and 8, response.done frame 10), and the client's four."""

SERVER_T = [f["t"] for f in FRAMES if f["from"] == "server" and f["kind"] != "close"]


def write(path, frames=FRAMES, url=URL):
    """The cassette at ``path``: one Realtime session with ``frames``."""
    request = RecordedRequest("GET", url, Headers([("Authorization", "REDACTED")]), EmptyBody())
    response = RecordedResponse(
        101,
        Headers([("Upgrade", "websocket"), ("Connection", "Upgrade")]),
        WebSocketBody(frames),
        T_HANDSHAKE,
        frames[-1]["t"],
    )
    Cassette(path, [Interaction(request, response)]).save()
    return path


def talk(connection, until="response.done"):
    """The audio turn through the openai SDK's sync connection: every event it yields, up to
    ``until``."""
    connection.session.update(session=SESSION)
    events = []
    for event in connection:
        events.append(event)
        if event.type == "session.updated":
            connection.conversation.item.create(item=ITEM)
            connection.response.create()
        if event.type == until:
            break
    return events


async def atalk(connection, until="response.done"):
    """:func:`talk` through the SDK's async connection."""
    await connection.session.update(session=SESSION)
    events = []
    async for event in connection:
        events.append(event)
        if event.type == "session.updated":
            await connection.conversation.item.create(item=ITEM)
            await connection.response.create()
        if event.type == until:
            break
    return events
