"""google-genai's ``client.aio.live.connect()``, recorded and replayed unmodified (issue 21): the
SDK binds websockets' ``connect`` into its own module at import, and is served all the same. A
pytester project records a text turn and a tool call round trip against a fake Gemini Live
server on loopback (over TLS, as the SDK insists), with the API key in the ``key=`` query and
the ``x-goog-api-key`` header, then replays it with the server stopped and every socket
refused: the same messages at their recorded offsets, and no key in the cassette.
"""

import socket
from pathlib import Path

pytest_plugins = ["pytester"]

SERVER_SOURCE = (Path(__file__).parent / "support" / "fake_live.py").read_text()

CONFTEST = """
import os

import pytest

import fake_live

PORT = {port}
fake_live.THINK = 0.5  # a recording of over 1 s
SERVER_TLS, CLIENT_TLS = fake_live.tls()


@pytest.fixture(scope="session")
def live_options():
    if not os.environ.get("LIVE_REPLAY"):
        port, stop = fake_live.start(PORT, SERVER_TLS)
    key = "AIza" + "Sy" + "B1xZ9" * 6 + "q"  # shaped as a Google API key: it must not be written
    yield {{
        "base_url": f"wss://127.0.0.1:{{PORT}}/live?key={{key}}",
        "headers": {{"x-goog-api-key": key}},
        "async_client_args": {{"ssl": CLIENT_TLS}},
    }}
    if not os.environ.get("LIVE_REPLAY"):
        stop()
"""

TEST = """
import os
import socket

import pytest
from google import genai
from google.genai import types

from pytest_toolnexus import NetworkBlockedError, load_cassette
from pytest_toolnexus._timing.virtual import VirtualClock

REPLAY = bool(os.environ.get("LIVE_REPLAY"))


def said(text):
    return {"role": "user", "parts": [{"text": text}]}


@pytest.mark.asyncio
@pytest.mark.cassette
async def test_live(cassette, live_options):
    client = genai.Client(vertexai=True, http_options=live_options)
    text = ""
    async with client.aio.live.connect(
        model="gemini-live-2.5-flash", config={"response_modalities": ["TEXT"]}
    ) as session:
        await session.send_client_content(turns=said("Say hi"), turn_complete=True)
        async for message in session.receive():
            text += message.text or ""
        await session.send_client_content(turns=said("Weather in Paris?"), turn_complete=True)
        async for message in session.receive():
            if message.tool_call:
                call = message.tool_call.function_calls[0]
                break
        assert (call.name, call.args) == ("weather", {"city": "Paris"})
        answer = types.FunctionResponse(id=call.id, name=call.name, response={"t": 21})
        await session.send_tool_response(function_responses=[answer])
        async for message in session.receive():
            text += message.text or ""
    assert text == "Hi there!It is sunny."
    (log,) = cassette.websockets
    assert log.replayed == REPLAY
    assert "REDACTED" in log.url
    if not REPLAY:
        return
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("127.0.0.1", int(os.environ["LIVE_PORT"])))
    recorded = load_cassette(cassette.path).interactions[0].response.body.frames
    server_t = [f["t"] for f in recorded if f["from"] == "server"]
    assert [p.t for p in log.received] == server_t
    # Waited on the virtual clock, which reached the last event's recorded offset.
    assert isinstance(cassette.clock, VirtualClock)
    assert cassette.elapsed >= server_t[-1] / 1000.0 - 1e-6
    print("EXACT", len(server_t))
"""


def test_google_genai_live_records_then_replays_offline(pytester, monkeypatch):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pytester.makepyfile(fake_live=SERVER_SOURCE)
    pytester.makeconftest(CONFTEST.format(port=port))
    pytester.makepyfile(test_live=TEST)
    monkeypatch.setenv("LIVE_PORT", str(port))
    monkeypatch.delenv("LIVE_REPLAY", raising=False)

    recorded = pytester.runpytest_subprocess("-p", "no:randomly", "--cassette-record=once")
    recorded.assert_outcomes(passed=1)
    (path,) = (pytester.path / "cassettes").rglob("*.msgpack")
    stored = path.read_bytes()
    assert b"B1xZ9" not in stored  # neither the key= query value nor the header
    assert b"key=REDACTED" in stored

    monkeypatch.setenv("LIVE_REPLAY", "1")
    replayed = pytester.runpytest_subprocess("-p", "no:randomly", "-s")

    replayed.assert_outcomes(passed=1)
    assert [line.split("EXACT ", 1)[1] for line in replayed.outlines if "EXACT " in line] == ["9"]
