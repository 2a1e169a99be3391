"""``serve`` answers a WebSocket upgrade with the session the cassette recorded: the frames both
ways checked and released as in pytest, on real time (docs/serve.md, "WebSocket sessions").

The clients are what another language's test would run: a plain WebSocket client (websockets,
and Node's ``ws`` where node and npm are present) and the openai SDK pointed at the server by
its ``websocket_base_url``. The cassette is ``tests/support/realtime_cassette.py``'s Realtime
session, whose every frame has a known time, so each arrival is checked against its recorded
offset: none early, in order, none later than this machine's own sleep lateness allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets.asyncio.client as ws_client
from websockets.exceptions import ConnectionClosed, InvalidStatus

from pytest_toolnexus import load_cassette, use_cassette
from pytest_toolnexus._serve.websocket import MISS_CLOSE_CODE
from tests.support import fake_realtime
from tests.support import realtime_cassette as rc
from tests.support.node_packages import npm_package
from tests.support.realtime import apaced, paced, wall
from tests.support.serve_cli import Served, serving, start_record

NAME = "realtime/talk"
PATH = "/v1/realtime?model=gpt-realtime"
# The recorded server frames (close frames aside), parsed, and when each arrived: seconds since
# the client sent its handshake, as the cassette's times count.
SERVER_EVENTS = [f["data"] for f in rc.FRAMES if f["from"] == "server" and f["kind"] != "close"]
SERVER_AT = [t / 1000.0 for t in rc.SERVER_T]
GAPS = (0.015, 0.03, 0.05)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    folder = tmp_path / "cassettes"
    (folder / "realtime").mkdir(parents=True)
    rc.write(folder / "realtime" / "talk.msgpack")
    with serving([folder]) as server:
        yield server


def _ws_url(served: Served, name: str = NAME, path: str = PATH) -> str:
    return served.url.replace("http://", "ws://", 1) + f"/c/{name}{path}"


def _report(served: Served) -> dict[str, Any]:
    answer = httpx.get(f"{served.url}/_toolnexus/report", params={"cassette": NAME})
    assert answer.status_code == 200, answer.text
    report: dict[str, Any] = answer.json()
    return report


def _ask_faults(served: Served, *faults: dict[str, Any]) -> None:
    answer = httpx.post(
        f"{served.url}/_toolnexus/faults", json={"cassette": NAME, "faults": list(faults)}
    )
    assert answer.status_code == 200, answer.text


def _reset(served: Served) -> None:
    answer = httpx.post(f"{served.url}/_toolnexus/reset", json={"cassette": NAME})
    assert answer.status_code == 200, answer.text


async def _talk(
    url: str, *, late: float = 0.0, first: dict[str, Any] | None = None
) -> tuple[list[float], list[dict[str, Any]], list[float], int | None]:
    """The recorded conversation as a plain client holds it: the session update once the
    session is created (``late`` seconds later), the turn once it is updated, closing after
    ``response.done``. Returns each server event's arrival (seconds since the handshake was
    sent), the events, when each client frame went out, and the close code it saw."""
    arrivals: list[float] = []
    events: list[dict[str, Any]] = []
    sent: list[float] = []
    began = wall()
    async with ws_client.connect(url, additional_headers={"Authorization": "Bearer sk-x"}) as ws:

        async def send(event: dict[str, Any]) -> None:
            sent.append(wall() - began)
            await ws.send(json.dumps(event, separators=(",", ":")))

        with contextlib.suppress(ConnectionClosed):  # a close other than 1000 ends it
            async for message in ws:
                arrivals.append(wall() - began)
                event = json.loads(message)
                events.append(event)
                if event["type"] == "session.created":
                    if late:
                        await asyncio.sleep(late)
                    await send(first or {"type": "session.update", "session": rc.SESSION})
                elif event["type"] == "session.updated":
                    await send({"type": "conversation.item.create", "item": rc.ITEM})
                    await send({"type": "response.create"})
                elif event["type"] == "response.done":
                    await ws.close()
        code = ws.close_code
    return arrivals, events, sent, code


@pytest.mark.asyncio
async def test_a_websocket_client_gets_the_recorded_session_at_its_recorded_offsets(
    served: Served,
):
    async def run() -> tuple[list[float], tuple[list[dict[str, Any]], int | None]]:
        _reset(served)
        arrivals, events, _, code = await _talk(_ws_url(served))
        return arrivals, (events, code)

    events, code = await apaced(run, SERVER_AT, gaps=GAPS, what="server frame")

    assert events == SERVER_EVENTS
    assert code == 1000
    report = _report(served)
    assert report["misses"] == []
    assert report["unused"] == []
    assert report["websocket_leftovers"] == []
    assert [(r["method"], r["replayed"]) for r in report["requests"]] == [("GET", True)]
    assert report["requests"][0]["url"] == rc.URL  # the recorded session's own URL


@pytest.mark.asyncio
async def test_a_client_that_answers_late_moves_the_answers_with_it(served: Served):
    late = 0.4
    arrivals, events, sent, _ = await _talk(_ws_url(served), late=late)

    types = [e["type"] for e in events]
    assert types == [e["type"] for e in SERVER_EVENTS]
    created, updated = arrivals[0], arrivals[types.index("session.updated")]
    # The update went out late; its answer came its recorded 30 ms after it, not at its
    # recorded time since the handshake (which had long passed).
    assert sent[0] >= created + late
    assert updated - sent[0] >= 0.030 - 0.001
    assert updated >= created + late + 0.030 - 0.001
    # ...and so did everything after it: response.done is 659 ms after response.create.
    assert arrivals[-1] - sent[2] >= 0.659 - 0.001


@pytest.mark.asyncio
async def test_a_frame_the_recording_does_not_expect_closes_with_the_miss_code_and_is_reported(
    served: Served,
):
    wrong = {"type": "session.update", "session": {"type": "realtime", "voice": "ballad"}}

    _, events, _, code = await _talk(_ws_url(served), first=wrong)

    assert [e["type"] for e in events] == ["session.created"]  # nothing answers the miss
    assert code == MISS_CLOSE_CODE
    report = _report(served)
    assert len(report["misses"]) == 1
    miss = report["misses"][0]
    assert "voice" in miss
    assert "ws://127.0.0.1:9/v1/realtime" in miss
    err = served.stop()[1]
    assert "voice" in err  # logged as well


@pytest.mark.asyncio
async def test_a_path_that_names_no_cassette_refuses_the_handshake_with_the_miss_status(
    served: Served,
):
    with pytest.raises(InvalidStatus) as refused:
        async with ws_client.connect(_ws_url(served, name="nope")):
            pass

    assert refused.value.response.status_code == 490
    assert "names no served cassette" in refused.value.response.body.decode()


@pytest.mark.asyncio
async def test_a_drop_asked_over_the_control_api_cuts_the_connection_after_that_frame(
    served: Served,
):
    _ask_faults(served, {"kind": "ws_drop", "after_frame": 3})

    got: list[str] = []

    async def read_on() -> None:
        async with ws_client.connect(_ws_url(served)) as ws:
            async for message in ws:
                event = json.loads(message)
                got.append(event["type"])
                if event["type"] == "session.created":
                    await ws.send(json.dumps({"type": "session.update", "session": rc.SESSION}))
                elif event["type"] == "session.updated":
                    await ws.send(json.dumps({"type": "conversation.item.create", "item": rc.ITEM}))
                    await ws.send(json.dumps({"type": "response.create"}))

    with pytest.raises(ConnectionClosed) as closed:
        await read_on()

    assert got == [e["type"] for e in SERVER_EVENTS[:3]]
    assert closed.value.rcvd is None  # no close frame: 1006, as a dropped connection
    assert _report(served)["requests"][0]["faults"] == ["ws_drop(after_frame=3)"]


@pytest.mark.asyncio
async def test_a_refusal_asked_over_the_control_api_answers_the_handshake_with_its_status(
    served: Served,
):
    _ask_faults(served, {"kind": "ws_refuse", "status": 503})

    with pytest.raises(InvalidStatus) as refused:
        async with ws_client.connect(_ws_url(served)):
            pass
    assert refused.value.response.status_code == 503
    # The refusal took the attempt; the recorded session answers the next one.
    _, events, _, code = await _talk(_ws_url(served))
    assert events == SERVER_EVENTS
    assert code == 1000


@pytest.mark.asyncio
async def test_a_client_that_leaves_early_is_reported_with_what_it_left(served: Served):
    async with ws_client.connect(_ws_url(served)) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"

    await asyncio.sleep(0.05)  # the server notes the close
    leftovers = _report(served)["websocket_leftovers"]
    assert len(leftovers) == 2, leftovers
    assert "3 recorded client frame(s) were never sent" in leftovers[0]
    assert "10 recorded server frame(s) were never read" in leftovers[1]


@pytest.mark.asyncio
async def test_the_openai_sdk_pointed_at_serve_talks_to_the_recorded_session(served: Served):
    openai = pytest.importorskip("openai")

    async def run() -> tuple[list[float], list[str]]:
        _reset(served)
        base = served.url.replace("http://", "ws://", 1) + f"/c/{NAME}/v1"
        client = openai.AsyncOpenAI(api_key="sk-test", websocket_base_url=base)
        began = wall()
        arrivals: list[float] = []
        async with client.realtime.connect(model="gpt-realtime") as connection:
            await connection.session.update(session=rc.SESSION)
            types = []
            async for event in connection:
                arrivals.append(wall() - began)
                types.append(event.type)
                if event.type == "session.updated":
                    await connection.conversation.item.create(item=rc.ITEM)
                    await connection.response.create()
                if event.type == "response.done":
                    break
        return arrivals, types

    types = await apaced(run, SERVER_AT, gaps=GAPS, what="server event")

    assert types == [e["type"] for e in SERVER_EVENTS]
    assert _report(served)["misses"] == []


def _doc_snippet(language: str) -> str:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "serve.md").read_text()
    [found] = re.findall(rf"```{language}\n(.*?)```", doc, flags=re.DOTALL)
    return found


def test_docs_node_ws_snippet_gets_the_recorded_session_at_its_recorded_offsets(
    served: Served, tmp_path: Path
):
    # docs/serve.md's Node client, run as written: node and npm where present, else skipped.
    folder = npm_package("ws", "8")
    script = tmp_path / "talk.cjs"
    script.write_text(_doc_snippet("javascript"))

    def run() -> tuple[list[float], list[str]]:
        _reset(served)
        done = subprocess.run(
            ["node", str(script)],
            capture_output=True,
            text=True,
            timeout=60,
            env={
                **os.environ,
                "NODE_PATH": str(folder / "node_modules"),
                "TOOLNEXUS_BASE": f"{served.url}/c/{NAME}",
            },
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr  # it saw a clean close (1000)
        said = [json.loads(line) for line in done.stdout.splitlines()]
        return [line["at"] / 1000.0 for line in said], [line["type"] for line in said]

    # The snippet's clock starts as it opens the socket, before the server's: nothing reads
    # early, and Date.now()'s whole milliseconds are within the 1 ms the check allows.
    types = paced(run, SERVER_AT, gaps=GAPS, what="server frame")

    assert types == [e["type"] for e in SERVER_EVENTS]
    assert _report(served)["misses"] == []


# -- recording through the proxy ------------------------------------------------------------


@pytest.fixture
def upstream() -> Iterator[int]:
    port, stop = fake_realtime.start()
    try:
        yield port
    finally:
        stop()


@pytest.mark.asyncio
async def test_record_tees_a_websocket_session_and_it_replays_alike_in_pytest_and_in_serve(
    upstream: int, tmp_path: Path
):
    out = tmp_path / "cassettes" / "talk.msgpack"
    proxy = start_record(f"http://127.0.0.1:{upstream}", out)
    try:
        through = proxy.url.replace("http://", "ws://", 1) + PATH
        arrivals, recorded_events, _, code = await _talk(through)
    finally:
        assert proxy.stop()[0] == 0

    assert code == 1000
    types = [e["type"] for e in recorded_events]
    assert types[-1] == "response.done"
    # Teed, not buffered: the audio deltas reached the client as the server spaced them.
    audio = [at for at, kind in zip(arrivals, types, strict=True) if kind.endswith("audio.delta")]
    assert len(audio) == len(fake_realtime.AUDIO)
    assert audio[-1] - audio[0] >= (len(audio) - 1) * fake_realtime.GAP * 0.5
    (interaction,) = load_cassette(out).interactions
    assert interaction.request.url == f"ws://127.0.0.1:{upstream}{PATH}"
    assert interaction.request.headers.get("authorization") != "Bearer sk-x"  # redacted
    assert interaction.response is not None
    assert interaction.response.status == 101

    # Replayed by the plugin, with the upstream still up but out of reach of a replay...
    with use_cassette(out, record="none"):
        _, in_pytest, _, _ = await _talk(f"ws://127.0.0.1:{upstream}{PATH}")
    # ...and by serve.
    with serving([out.parent]) as served:
        _, in_serve, _, _ = await _talk(_ws_url(served, name="talk"))

    assert in_pytest == in_serve == recorded_events


@pytest.mark.asyncio
async def test_record_keeps_a_refused_handshake_and_serve_refuses_it_alike(tmp_path: Path):
    port, stop = fake_realtime.start_refusing(403)
    out = tmp_path / "cassettes" / "refused.msgpack"
    try:
        proxy = start_record(f"http://127.0.0.1:{port}", out)
        try:
            with pytest.raises(InvalidStatus) as live:
                await _talk(proxy.url.replace("http://", "ws://", 1) + PATH)
        finally:
            assert proxy.stop()[0] == 0
    finally:
        stop()

    assert live.value.response.status_code == 403
    (interaction,) = load_cassette(out).interactions
    assert interaction.response is not None
    assert interaction.response.status == 403
    with serving([out.parent]) as served, pytest.raises(InvalidStatus) as replayed:
        await _talk(_ws_url(served, name="refused"))
    assert replayed.value.response.status_code == 403


@pytest.mark.asyncio
async def test_record_answers_502_when_the_upstream_cannot_be_reached(tmp_path: Path):
    proxy = start_record("http://127.0.0.1:9", tmp_path / "down.msgpack")
    try:
        with pytest.raises(InvalidStatus) as failed:
            await _talk(proxy.url.replace("http://", "ws://", 1) + PATH)
    finally:
        code, err = proxy.stop()

    assert code == 0
    assert failed.value.response.status_code == 502
    assert b"toolnexus_upstream" in failed.value.response.body
    assert "127.0.0.1:9" in err


# -- the edges: clients that leave, servers that stop, closes without a code ----------------


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err, err
    assert "Error handling request" not in err, err


@pytest.mark.asyncio
async def test_a_client_that_gives_up_during_the_handshake_leaves_no_traceback(served: Served):
    _ask_faults(served, {"kind": "ws_slow_handshake", "seconds": 1.0})

    with pytest.raises(TimeoutError):
        async with ws_client.connect(_ws_url(served), open_timeout=0.3):
            pass
    await asyncio.sleep(1.2)  # the handshake's answer comes, to nobody

    _reset(served)
    _, events, _, code = await _talk(_ws_url(served))  # the server serves on
    assert events == SERVER_EVENTS
    assert code == 1000
    _no_traceback(served.stop()[1])


@pytest.mark.asyncio
async def test_a_client_that_closes_in_a_long_gap_ends_its_connection_at_once(tmp_path: Path):
    # The answer to the turn comes 30 s after it was asked for; the client leaves before.
    late = [
        {**f, "t": f["t"] + 30_000.0} if f["from"] == "server" and f["t"] > 700 else f
        for f in rc.FRAMES
    ]
    folder = tmp_path / "cassettes"
    rc.write(folder / "slow.msgpack", frames=late)
    with serving([folder]) as served:
        async with ws_client.connect(_ws_url(served, name="slow")) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            await ws.send(json.dumps({"type": "session.update", "session": rc.SESSION}))
            assert json.loads(await ws.recv())["type"] == "session.updated"
            await ws.send(json.dumps({"type": "conversation.item.create", "item": rc.ITEM}))
            await ws.send(json.dumps({"type": "response.create"}))
            assert json.loads(await ws.recv())["type"] == "conversation.item.added"
        began = wall()
        # What the client left is reported once the connection's handler is done: at once,
        # not after the 30 s the next frame would have waited.
        report: dict[str, Any] = {}
        while not report.get("websocket_leftovers"):
            assert wall() - began < 5, "the connection's handler outlived its client"
            await asyncio.sleep(0.05)
            answer = httpx.get(f"{served.url}/_toolnexus/report", params={"cassette": "slow"})
            report = answer.json()

    assert "8 recorded server frame(s) were never read" in report["websocket_leftovers"][0]


@pytest.mark.asyncio
async def test_a_reset_while_a_connection_is_open_keeps_its_miss_out_of_the_new_state(
    served: Served,
):
    async with ws_client.connect(_ws_url(served)) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        _reset(served)
        await ws.send(json.dumps({"type": "session.update", "session": {"voice": "ballad"}}))
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()

    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == MISS_CLOSE_CODE
    assert _report(served)["misses"] == []  # the reset's state: played from the start


def test_a_plain_get_to_a_websocket_session_says_to_connect_with_a_websocket_client(
    served: Served,
):
    answer = httpx.get(f"{served.url}/c/{NAME}{PATH}")

    assert answer.status_code == 490
    error = answer.json()["error"]
    assert error["type"] == "toolnexus_websocket_session"
    assert "Connect to the ws:// form of this URL" in error["message"]


@pytest.mark.asyncio
async def test_serve_stopping_closes_an_open_websocket_with_going_away(served: Served):
    async with ws_client.connect(_ws_url(served)) as ws:
        assert json.loads(await ws.recv())["type"] == "session.created"
        code, err = await asyncio.to_thread(served.stop)
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()

    assert code == 0
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1001
    _no_traceback(err)


@pytest.mark.asyncio
async def test_a_recorded_close_without_a_code_reaches_the_client_as_a_normal_close(
    tmp_path: Path,
):
    frames = [*rc.FRAMES[:-1], {"t": 1001.0, "from": "server", "kind": "close"}]
    folder = tmp_path / "cassettes"
    rc.write(folder / "bare.msgpack", frames=frames)
    with serving([folder]) as served:
        _, events, _, code = await _talk(_ws_url(served, name="bare"))

    assert events == SERVER_EVENTS
    assert code == 1000  # not a protocol error: a close frame may not carry 1005


@pytest.mark.asyncio
async def test_record_hands_the_client_s_close_on_with_its_reason_and_a_drop_as_going_away(
    upstream: int, tmp_path: Path
):
    out = tmp_path / "closes.msgpack"
    proxy = start_record(f"http://127.0.0.1:{upstream}", out)
    through = proxy.url.replace("http://", "ws://", 1) + PATH
    try:
        async with ws_client.connect(through) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            await ws.close(4001, "user hung up")
        async with ws_client.connect(through) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
            ws.transport.abort()  # gone without a close frame
        await asyncio.sleep(0.2)
    finally:
        code, err = proxy.stop()

    assert code == 0
    _no_traceback(err)
    closes = [
        [
            (f.get("code"), f.get("reason", ""))
            for f in i.response.body.frames
            if f["kind"] == "close"
        ]
        for i in load_cassette(out).interactions
        if i.response is not None
    ]
    assert closes[0][0] == (4001, "user hung up")
    assert closes[1][0] == (1001, "")  # the upstream was told the client went away


@pytest.mark.asyncio
async def test_record_redacts_the_realtime_key_offered_as_a_subprotocol(
    upstream: int, tmp_path: Path
):
    key = "sk-proj-" + "Zq8" * 16
    offered = ["realtime", f"openai-insecure-api-key.{key}", "openai-beta.realtime-v1"]
    out = tmp_path / "offered.msgpack"
    proxy = start_record(f"http://127.0.0.1:{upstream}", out)
    try:
        async with ws_client.connect(
            proxy.url.replace("http://", "ws://", 1) + PATH, subprotocols=offered
        ) as ws:
            assert json.loads(await ws.recv())["type"] == "session.created"
    finally:
        code, err = proxy.stop()

    assert code == 0, err  # written, not refused by the secret scan
    assert key.encode() not in out.read_bytes()
    (interaction,) = load_cassette(out).interactions
    assert "openai-insecure-api-key.REDACTED" in interaction.request.headers.get(
        "sec-websocket-protocol", ""
    )


@pytest.mark.asyncio
async def test_record_answers_502_for_an_upstream_whose_101_is_broken(tmp_path: Path):
    broken = (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: not-the-right-digest\r\n\r\n"
    )
    port, stop = fake_realtime.start_raw(broken)
    out = tmp_path / "broken.msgpack"
    try:
        proxy = start_record(f"http://127.0.0.1:{port}", out)
        try:
            with pytest.raises(InvalidStatus) as failed:
                await _talk(proxy.url.replace("http://", "ws://", 1) + PATH)
        finally:
            code, err = proxy.stop()
    finally:
        stop()

    assert failed.value.response.status_code == 502
    assert code == 0
    _no_traceback(err)
    (interaction,) = load_cassette(out).interactions
    assert interaction.response is None  # recorded as the failure it was, not as a session
    assert interaction.error is not None


@pytest.mark.asyncio
async def test_record_closes_the_upstream_of_a_client_that_gave_up_during_the_handshake(
    tmp_path: Path,
):
    port, stop = fake_realtime.start_slow(1.0)
    out = tmp_path / "gave-up.msgpack"
    try:
        proxy = start_record(f"http://127.0.0.1:{port}", out)
        try:
            with pytest.raises(TimeoutError):
                async with ws_client.connect(
                    proxy.url.replace("http://", "ws://", 1) + PATH, open_timeout=0.3
                ):
                    pass
            await asyncio.sleep(1.5)  # the upstream's answer comes, to nobody
        finally:
            code, err = proxy.stop()
    finally:
        stop()

    assert code == 0
    _no_traceback(err)
    (interaction,) = load_cassette(out).interactions
    assert interaction.response is not None
    closes = [f for f in interaction.response.body.frames if f["kind"] == "close"]
    assert (closes[0]["from"], closes[0]["code"]) == ("client", 1001)  # closed, not left open
