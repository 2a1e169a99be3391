"""The subprotocols a websockets client offers are part of its recorded handshake, sync and
asyncio alike (issue 21): stored as the request's ``Sec-WebSocket-Protocol`` header, redacted
as any header is (a bearer token offered as a subprotocol never reaches the file), compared
when ``match_headers`` names the header, and the one the server chose replays as the
connection's ``subprotocol`` with the server stopped.
"""

import asyncio
import threading

import pytest
import websockets.sync.client
from websockets.asyncio.client import connect as async_connect
from websockets.asyncio.server import serve

from pytest_toolnexus import (
    CassetteMissError,
    UnusedInteractionsWarning,
    load_cassette,
    use_cassette,
)

TOKEN = "c2VjcmV0LXRva2VuLWZvci10aGUtY2x1c3Rlci0xMjM0NTY3ODkw"
OFFERED = ["chat.v1", "chat.v2", f"base64url.bearer.authorization.k8s.io.{TOKEN}"]


@pytest.fixture
def anyio_backend():
    return "asyncio"


class EchoServer:
    """A websockets server on loopback, in a thread, that speaks ``chat.v2`` and echoes."""

    def __enter__(self):
        ready = threading.Event()
        self._box = {}

        async def echo(ws):
            async for message in ws:
                await ws.send(f"echo {message}")

        async def main():
            self._box["stop"] = asyncio.Event()
            async with serve(echo, "127.0.0.1", 0, subprotocols=["chat.v2"]) as server:
                self.url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/chat"
                ready.set()
                await self._box["stop"].wait()

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(main(),))
        self._thread.start()
        assert ready.wait(10)
        return self

    def __exit__(self, *exc_info):
        self._loop.call_soon_threadsafe(self._box["stop"].set)
        self._thread.join(10)


def talk_sync(url, offered):
    # Looked up on the module when called, as the openai SDK does: the patch replaces it there.
    with websockets.sync.client.connect(url, subprotocols=offered) as ws:
        ws.send("hi")
        return ws.subprotocol, ws.recv()


async def talk_async(url, offered):
    async with async_connect(url, subprotocols=offered) as ws:
        await ws.send("hi")
        return ws.subprotocol, await ws.recv()


async def run(client, url, offered):
    if client == "sync":
        return await asyncio.to_thread(talk_sync, url, offered)
    return await talk_async(url, offered)


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["sync", "async"])
async def test_the_offered_subprotocols_are_recorded_redacted_and_replayed(tmp_path, client):
    path = tmp_path / "chat.msgpack"
    with EchoServer() as server:
        url = server.url
        with use_cassette(path, record="once"):
            assert await run(client, url, OFFERED) == ("chat.v2", "echo hi")

    stored = path.read_bytes()
    assert TOKEN.encode() not in stored
    (interaction,) = load_cassette(path).interactions
    offered = interaction.request.headers["sec-websocket-protocol"]
    assert offered == "chat.v1, chat.v2, base64url.bearer.authorization.k8s.io.REDACTED"
    assert interaction.response.headers["sec-websocket-protocol"] == "chat.v2"

    # The server is gone: the cassette answers, with the subprotocol the server chose.
    with use_cassette(path, match_headers=["sec-websocket-protocol"]) as cassette:
        assert await run(client, url, OFFERED) == ("chat.v2", "echo hi")
    assert [sent.replayed for sent in cassette.requests] == [True]


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["sync", "async"])
async def test_other_subprotocols_miss_when_the_header_is_matched(tmp_path, client):
    path = tmp_path / "chat.msgpack"
    with EchoServer() as server:
        url = server.url
        with use_cassette(path, record="once"):
            await run(client, url, ["chat.v1", "chat.v2"])

    # Headers are not compared by default: another offer replays the same session...
    with use_cassette(path):
        assert await run(client, url, ["chat.v3"]) == ("chat.v2", "echo hi")
    # ...and misses once match_headers names the header.
    with (
        pytest.warns(UnusedInteractionsWarning, match="never played"),
        pytest.raises(CassetteMissError, match=r"(?i)sec-websocket-protocol"),
    ):
        async with use_cassette(path, match_headers=["sec-websocket-protocol"]):
            await run(client, url, ["chat.v3"])
