"""A WebSocket handshake the live server refuses (a key the API does not take) is recorded as
the HTTP answer it was, and replayed as the same refusal, through each client the plugin
serves: websockets' sync and asyncio clients raise ``InvalidStatus`` with the status, headers
and body; aiohttp's ``ws_connect`` raises ``WSServerHandshakeError`` with the status and headers
(aiohttp keeps no body). The server is stopped before each replay."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets.asyncio.client as async_client
import websockets.sync.client as sync_client
from websockets.exceptions import InvalidStatus

from pytest_toolnexus import load_cassette, use_cassette
from tests.support import fake_realtime

KEY = "Bearer not-a-real-key-0"
BODY = b"refused by the fake Realtime server\n"


def _sync(url: str) -> None:
    with sync_client.connect(url, additional_headers={"Authorization": KEY}):
        pass


def _async(url: str) -> None:
    async def go() -> None:
        async with async_client.connect(url, additional_headers={"Authorization": KEY}):
            pass

    asyncio.run(go())


def _aiohttp(url: str) -> None:
    async def go() -> None:
        async with (
            aiohttp.ClientSession() as http,
            http.ws_connect(url, headers={"Authorization": KEY}),
        ):
            pass

    asyncio.run(go())


def _seen(error: BaseException) -> tuple[int, bytes | None]:
    """The status the client's error carries, and the body where the library keeps one."""
    if isinstance(error, InvalidStatus):
        return error.response.status_code, bytes(error.response.body or b"")
    assert isinstance(error, aiohttp.WSServerHandshakeError)
    return error.status, None


@pytest.mark.parametrize(
    ("client", "error"),
    [
        (_sync, InvalidStatus),
        (_async, InvalidStatus),
        (_aiohttp, aiohttp.WSServerHandshakeError),
    ],
    ids=["websockets-sync", "websockets-asyncio", "aiohttp"],
)
def test_a_refused_handshake_is_recorded_and_replayed_as_the_same_refusal(
    tmp_path: Path, client: Callable[[str], None], error: type[BaseException]
):
    path = tmp_path / "refused.msgpack"
    port, stop = fake_realtime.start_refusing(401)
    url = f"ws://127.0.0.1:{port}/v1/realtime?model=gpt-realtime"
    try:
        with use_cassette(path, record="all"), pytest.raises(error) as live:
            client(url)
    finally:
        stop()

    (recorded,) = load_cassette(path, validate=True).interactions
    assert recorded.request.url == url
    assert recorded.request.headers["authorization"] == "REDACTED"
    assert recorded.response is not None
    assert recorded.response.status == 401
    with use_cassette(path), pytest.raises(error) as replayed:  # the server is gone
        client(url)

    assert _seen(replayed.value) == _seen(live.value)
    assert _seen(live.value)[0] == 401
    if isinstance(live.value, InvalidStatus):
        assert _seen(live.value)[1] == BODY
        headers: Any = replayed.value.response.headers  # type: ignore[attr-defined]
        assert headers["Content-Type"] == "text/plain; charset=utf-8"
