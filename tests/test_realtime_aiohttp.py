"""aiohttp's ``ClientSession.ws_connect`` against the fake Realtime server (issue 21): recorded
while a cassette records, then replayed with the server stopped: the same messages, at their
recorded offsets on the virtual clock, aiohttp's own CLOSE message when the server closes, and
the credential header redacted."""

import asyncio
import json
import subprocess
import sys

import aiohttp

from pytest_toolnexus import load_cassette, use_cassette
from tests.support import fake_realtime


async def talk(url):
    """A text turn over aiohttp, as an app without an SDK would speak the Realtime API."""
    kinds, text = [], ""
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(url, headers={"Authorization": "Bearer not-a-real-key-0"}) as ws,
    ):
        assert json.loads((await ws.receive()).data)["type"] == "session.created"
        await ws.send_json({"type": "conversation.item.create", "item": {"type": "message"}})
        await ws.send_str(json.dumps({"type": "response.create"}))
        async for message in ws:
            event = json.loads(message.data)
            kinds.append(event["type"])
            text += event.get("delta", "")
            if event["type"] == "response.done":
                break
    return kinds, text


def test_aiohttp_ws_connect_records_then_replays(tmp_path):
    path = tmp_path / "aiohttp.msgpack"
    port, stop = fake_realtime.start()
    url = f"ws://127.0.0.1:{port}/v1/realtime?model=gpt-realtime"
    try:

        async def record():
            async with use_cassette(path, record="all") as session:
                return await talk(url), session.websockets

        (kinds, text), logs = asyncio.run(record())
    finally:
        stop()
    assert text == "Hi there! "
    assert kinds[-1] == "response.done"
    assert not logs[0].replayed
    (recorded,) = load_cassette(path, validate=True).interactions
    assert recorded.request.url == url
    assert recorded.request.headers["authorization"] == "REDACTED"
    server_t = [f["t"] for f in recorded.response.body.frames if f["from"] == "server"]

    async def replay():
        async with use_cassette(path) as session:
            return await talk(url), session.websockets

    (again, again_text), logs = asyncio.run(replay())

    assert (again, again_text) == (kinds, text)
    assert logs[0].replayed
    assert [p.t for p in logs[0].received] == server_t


IMPORTS = """
import sys
from pytest_toolnexus import use_cassette

with use_cassette(sys.argv[1], record="all"):
    import aiohttp  # the HTTP patch watches it too
    import google.genai  # imports the websockets asyncio client, and aiohttp
    import websockets.asyncio.client
    import websockets.sync.client

    def sync_opener():
        # websockets 17.1 and later open every sync connection in reconnect.connect
        sync = websockets.sync.client
        return sync.reconnect.connect if hasattr(sync, "reconnect") else sync.connect

    print(sync_opener().__module__)
    print(websockets.asyncio.client.connect.connect.__module__)
    print(aiohttp.ClientSession._ws_connect.__module__)
print(sync_opener().__module__)
"""


def test_the_patches_go_on_whichever_library_is_imported_first(tmp_path):
    # A fresh process: in this one the libraries are imported already.
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS, str(tmp_path / "c.msgpack")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "pytest_toolnexus._patching.websockets",
        "pytest_toolnexus._patching.websockets",
        "pytest_toolnexus._patching.websockets",
        "websockets.sync.client",
    ]
