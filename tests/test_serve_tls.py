"""``serve --tls-cert --tls-key``: cassettes over HTTPS and WSS, for the clients that will not
speak plain ``ws://``: google-genai's Live client (it always hands ``connect`` an SSL
context) and the openai npm package's Realtime client (it opens ``wss://`` only). Each trusts
a self-signed certificate for 127.0.0.1 made by the test (docs/serve.md, "TLS")."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from pytest_toolnexus import build
from tests.support import realtime_cassette as rc
from tests.support.fake_live import tls_files
from tests.support.node_packages import npm_package
from tests.support.serve_cli import serving

ASKED = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
GEMINI_KEY = "AIza" + "Sy" + "Q7wT4" * 6 + "z"  # shaped as a Google key: redacted where shown


@pytest.fixture
def tls(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "tls"
    folder.mkdir()
    return tls_files(folder)


@pytest.fixture
def cassettes(tmp_path: Path) -> Path:
    folder = tmp_path / "cassettes"
    build.build_cassette(folder / "chat.msgpack", [build.openai_chat("Hello there.", stream=False)])
    build.build_cassette(
        folder / "live.msgpack",
        [
            build.gemini_live(
                [build.RealtimeTurn(text="Hi there!")], url="wss://gateway.example.test/live"
            )
        ],
    )
    rc.write(folder / "realtime.msgpack")
    return folder


def test_serve_answers_https_with_the_given_certificate(cassettes: Path, tls: tuple[Path, Path]):
    cert, key = tls
    with serving([cassettes], "--tls-cert", str(cert), "--tls-key", str(key)) as served:
        assert served.url.startswith("https://127.0.0.1:")
        trusted = ssl.create_default_context(cafile=str(cert))
        with httpx.Client(verify=trusted) as client:
            answer = client.post(f"{served.url}/c/chat/v1/chat/completions", json=ASKED)

    assert answer.status_code == 200
    assert answer.json()["choices"][0]["message"]["content"] == "Hello there."


def test_a_key_without_its_certificate_is_a_usage_error(cassettes: Path, tls: tuple[Path, Path]):
    done = _serve(cassettes, "--tls-key", str(tls[1]))

    assert done.returncode == 2
    assert "--tls-cert and --tls-key go together" in done.stderr


def test_files_that_do_not_load_are_named_with_the_fix(cassettes: Path, tmp_path: Path):
    bogus = tmp_path / "not-a-cert.pem"
    bogus.write_text("nothing here\n")
    done = _serve(cassettes, "--tls-cert", str(bogus), "--tls-key", str(bogus))

    assert done.returncode == 2
    assert f"cannot load --tls-cert {bogus}" in done.stderr
    assert "PEM certificate" in done.stderr


def test_an_encrypted_key_is_a_usage_error_not_a_passphrase_prompt(
    cassettes: Path, tls: tuple[Path, Path], tmp_path: Path
):
    from cryptography.hazmat.primitives import serialization

    cert, key = tls
    plain = serialization.load_pem_private_key(key.read_bytes(), password=None)
    locked = tmp_path / "locked.pem"
    locked.write_bytes(
        plain.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"hunter2"),
        )
    )
    done = _serve(cassettes, "--tls-cert", str(cert), "--tls-key", str(locked))

    assert done.returncode == 2
    assert f"--tls-key {locked} is encrypted with a passphrase" in done.stderr


def test_a_missing_file_is_named(cassettes: Path, tls: tuple[Path, Path], tmp_path: Path):
    gone = tmp_path / "gone.pem"
    done = _serve(cassettes, "--tls-cert", str(tls[0]), "--tls-key", str(gone))

    assert done.returncode == 2
    assert f"--tls-key {gone}: no such file" in done.stderr


def _serve(cassettes: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``serve`` run on ``cassettes`` with ``args``, to its exit (no terminal to prompt on)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", "serve", str(cassettes), *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_google_genai_live_talks_to_a_session_served_over_wss(
    cassettes: Path, tls: tuple[Path, Path]
):
    from google import genai

    cert, key = tls
    trusted = ssl.create_default_context(cafile=str(cert))

    async def talk(base: str) -> str:
        # A custom base URL with the key in a header: google-genai then opens that URL as it is.
        client = genai.Client(
            vertexai=True,
            http_options={
                "base_url": base,
                "headers": {"x-goog-api-key": GEMINI_KEY},
                "async_client_args": {"ssl": trusted},
            },
        )
        text = ""
        async with client.aio.live.connect(
            model="gemini-live-2.5-flash", config={"response_modalities": ["TEXT"]}
        ) as session:
            said = {"role": "user", "parts": [{"text": "Say hi"}]}
            await session.send_client_content(turns=said, turn_complete=True)
            async for message in session.receive():
                text += message.text or ""
        return text

    with serving([cassettes], "--tls-cert", str(cert), "--tls-key", str(key)) as served:
        base = served.url.replace("https://", "wss://", 1) + "/c/live/live"
        text = asyncio.run(talk(base))
        report = httpx.get(
            f"{served.url}/_toolnexus/report",
            params={"cassette": "live"},
            verify=trusted,
        ).json()

    assert text == "Hi there!"
    assert report["misses"] == []
    assert report["websocket_leftovers"] == []
    assert GEMINI_KEY not in json.dumps(report)


_NODE_REALTIME = """
const { OpenAI } = require("openai");
const { OpenAIRealtimeWS } = require("openai/realtime/ws");

const [session, item] = process.argv.slice(2);
const client = new OpenAI({ apiKey: "sk-test", baseURL: process.env.TOOLNEXUS_BASE + "/v1" });
const rt = new OpenAIRealtimeWS({ model: "gpt-realtime" }, client);
const seen = [];
rt.on("error", (error) => { console.error(String(error)); process.exit(1); });
rt.on("event", (event) => {
  seen.push(event.type);
  if (event.type === "session.created") {
    rt.send({ type: "session.update", session: JSON.parse(session) });
  } else if (event.type === "session.updated") {
    rt.send({ type: "conversation.item.create", item: JSON.parse(item) });
    rt.send({ type: "response.create" });
  } else if (event.type === "response.done") {
    rt.close();
  }
});
rt.socket.on("close", () => console.log(JSON.stringify(seen)));
"""


def test_the_openai_npm_realtime_client_talks_to_a_session_served_over_wss(
    cassettes: Path, tls: tuple[Path, Path], tmp_path: Path
):
    openai = npm_package("openai", "7")
    ws = npm_package("ws", "8")
    script = tmp_path / "realtime.cjs"
    script.write_text(_NODE_REALTIME)
    cert, key = tls
    with serving([cassettes], "--tls-cert", str(cert), "--tls-key", str(key)) as served:
        done = subprocess.run(
            ["node", str(script), json.dumps(rc.SESSION), json.dumps(rc.ITEM)],
            capture_output=True,
            text=True,
            timeout=60,
            env={
                **os.environ,
                "NODE_PATH": os.pathsep.join(str(p / "node_modules") for p in (openai, ws)),
                "NODE_EXTRA_CA_CERTS": str(cert),  # the SDK's own TLS, trusting the test's
                "TOOLNEXUS_BASE": f"{served.url}/c/realtime",
            },
            check=False,
        )
        trusted = ssl.create_default_context(cafile=str(cert))
        report = httpx.get(
            f"{served.url}/_toolnexus/report", params={"cassette": "realtime"}, verify=trusted
        ).json()

    assert done.returncode == 0, done.stdout + done.stderr
    server_events = [f["data"]["type"] for f in rc.FRAMES if f["from"] == "server" and "data" in f]
    assert json.loads(done.stdout) == server_events
    assert report["misses"] == []


def test_record_answers_its_clients_over_wss_too(tls: tuple[Path, Path], tmp_path: Path):
    import websockets.sync.client as ws_client

    from pytest_toolnexus import load_cassette
    from tests.support import fake_realtime
    from tests.support.serve_cli import start_record

    cert, key = tls
    port, stop = fake_realtime.start()
    out = tmp_path / "over-tls.msgpack"
    try:
        proxy = start_record(
            f"http://127.0.0.1:{port}", out, "--tls-cert", str(cert), "--tls-key", str(key)
        )
        try:
            assert proxy.url.startswith("https://")
            trusted = ssl.create_default_context(cafile=str(cert))
            url = proxy.url.replace("https://", "wss://", 1) + "/v1/realtime?model=gpt-realtime"
            with ws_client.connect(url, ssl=trusted) as ws:
                first = json.loads(ws.recv())
        finally:
            code, err = proxy.stop()
    finally:
        stop()

    assert first["type"] == "session.created"
    assert code == 0, err
    (interaction,) = load_cassette(out).interactions
    assert interaction.request.url == f"ws://127.0.0.1:{port}/v1/realtime?model=gpt-realtime"
