"""``pytest-toolnexus record``: a recording proxy in front of a fake upstream (the loopback
emulator), whose cassette then replays the same in pytest and in ``serve``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from pytest_toolnexus import CassetteSession, load_cassette
from pytest_toolnexus._serve.upstream import environment_proxy
from tests.support.emulator import Emulator
from tests.support.node_packages import npm_package
from tests.support.realtime import wall
from tests.support.serve_cli import serving, start_record

CLIENTS = Path(__file__).parent / "support" / "clients"
STREAM = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Hi"}],
    "stream": True,
}
CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hello"}]}


def _stream_lines(url: str, body: object) -> tuple[list[tuple[float, bytes]], bytes]:
    """Each chunk of a streamed answer with the real time it came, and the whole body."""
    chunks = []
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST", url, json=body, headers={"authorization": "Bearer sk-test-fake"}
        ) as response,
    ):
        assert response.status_code == 200
        for chunk in response.iter_raw():
            chunks.append((wall(), chunk))
    return chunks, b"".join(chunk for _, chunk in chunks)


def test_record_tees_without_buffering_and_the_cassette_replays_identically(tmp_path: Path):
    out = tmp_path / "recorded.msgpack"
    with Emulator(events=4, delay=0.4, first_event_delay=0.1) as emulator:
        proxy = start_record(emulator.base_url, out)
        chunks, through_proxy = _stream_lines(f"{proxy.url}/v1/chat/completions", STREAM)
        with httpx.Client() as client:
            chat = client.post(f"{proxy.url}/v1/chat/completions", json=CHAT)
        sent = emulator.responses[0].snapshot()
        code, err = proxy.stop()

    assert code == 0, err
    assert "recorded 2 interaction(s) into" in err
    # Teed, not buffered: the client had the first delta while the upstream still held the
    # last one back (1.2 s later); a proxy that buffered would hand over nothing until the end.
    # Each delta's own lead is not judged: a busy machine may hold one back for a while.
    deltas = sent.delta_times
    first_seen = next(t for t, _ in chunks if t >= deltas[0])
    assert first_seen < deltas[-1], (first_seen, deltas)
    assert len(chunks) > 1
    assert through_proxy == sent.body

    cassette = load_cassette(out)
    assert len(cassette.interactions) == 2
    assert b"sk-test-fake" not in out.read_bytes()
    check = subprocess.run(
        [sys.executable, "-m", "pytest_toolnexus", "check", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr

    # In serve: the same bytes.
    with serving([out], "--timing", "instant") as served:
        _, from_serve = _stream_lines(f"{served.url}/c/recorded/v1/chat/completions", STREAM)
        chat_from_serve = httpx.post(f"{served.url}/c/recorded/v1/chat/completions", json=CHAT)
    assert from_serve == through_proxy
    assert chat_from_serve.json() == chat.json()

    # In pytest's session, the upstream gone: the same bytes.
    session = CassetteSession(out, timing="instant")
    with session, httpx.Client(transport=session.http_transport()) as client:
        replayed = client.post(f"{emulator.base_url}/v1/chat/completions", json=STREAM)
        replayed_chat = client.post(f"{emulator.base_url}/v1/chat/completions", json=CHAT)
    assert replayed.content == through_proxy
    assert replayed_chat.json() == chat.json()


def test_a_secret_in_a_recording_refuses_the_write_without_printing_it(tmp_path: Path):
    out = tmp_path / "secret.msgpack"
    key = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6lMn9o"
    leaky = {**CHAT, "messages": [{"role": "user", "content": f"my key is {key}"}]}
    with Emulator() as emulator:
        proxy = start_record(emulator.base_url, out)
        httpx.post(f"{proxy.url}/v1/chat/completions", json=leaky).raise_for_status()
        code, err = proxy.stop(signal.SIGINT)

    assert code == 1
    assert f"error: {out} was not written" in err
    assert key not in err
    assert not out.exists()


def test_an_upstream_that_fails_is_told_of_with_a_key_in_the_query_redacted(tmp_path: Path):
    with socket.socket() as closed:  # a port nothing listens on once this block ends
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    key = "sk-query-0123456789abcdef"
    proxy = start_record(f"http://127.0.0.1:{port}", tmp_path / "failed.msgpack")
    answer = httpx.post(f"{proxy.url}/v1/chat/completions?key={key}", json=CHAT)
    code, err = proxy.stop()

    assert answer.status_code == 502
    message = answer.json()["error"]["message"]
    assert message.startswith(f"http://127.0.0.1:{port}/v1/chat/completions?key=REDACTED: ")
    assert "POST http://127.0.0.1:" in err
    assert code == 0, err
    assert key not in answer.text
    assert key not in err


def test_the_node_openai_client_records_through_the_proxy_and_replays_in_serve(tmp_path: Path):
    folder = npm_package("openai", "7")
    out = tmp_path / "node.msgpack"
    env = {**os.environ, "NODE_OPENAI": str(folder)}

    def node(mode: str, url: str) -> list[dict[str, object]]:
        done = subprocess.run(
            ["node", str(CLIENTS / "openai_client.cjs"), mode, url],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return [json.loads(line) for line in done.stdout.splitlines()]

    with Emulator(events=3, delay=0.05) as emulator:
        proxy = start_record(emulator.base_url, out)
        live_chat = node("chat", f"{proxy.url}/v1")
        live_stream = node("stream", f"{proxy.url}/v1")
        code, err = proxy.stop()
    assert code == 0, err

    with serving([out], "--timing", "instant") as served:
        replay_chat = node("chat", f"{served.url}/c/node/v1")
        replay_stream = node("stream", f"{served.url}/c/node/v1")

    assert [c["content"] for c in replay_chat] == [c["content"] for c in live_chat]
    assert [c["content"] for c in replay_stream] == [c["content"] for c in live_stream]
    assert len(live_stream) == 3


def test_the_proxy_forwards_the_client_s_own_headers_and_hands_on_a_gzip_stream_decoded(
    tmp_path: Path,
):
    out = tmp_path / "gzip.msgpack"
    sent_headers = {
        "authorization": "Bearer sk-test-fake",
        "content-type": "application/json",
        "user-agent": "node-client/1.0",
        "x-stainless-lang": "js",
    }
    with Emulator(events=3, delay=0.01, gzip=True) as emulator:
        proxy = start_record(emulator.base_url, out)
        with httpx.Client(timeout=30) as client:
            request = client.build_request(
                "POST",
                f"{proxy.url}/v1/chat/completions?api-version=1",
                content=json.dumps(STREAM).encode(),
                headers=sent_headers,
            )
            del request.headers["accept-encoding"]  # only what the client itself sends
            del request.headers["accept"]
            answer = client.send(request)
        upstream_sent = emulator.requests[0]
        upstream_body = emulator.responses[0].snapshot().body
        code, err = proxy.stop()

    assert code == 0, err
    # The upstream saw the client's headers, and none a client library of the proxy's adds.
    assert (upstream_sent.path, upstream_sent.query) == ("/v1/chat/completions", "api-version=1")
    for name, value in sent_headers.items():
        assert upstream_sent.header(name) == value
    assert upstream_sent.header("accept-encoding") is None
    assert upstream_sent.header("accept") is None
    assert upstream_sent.header("user-agent") == "node-client/1.0"
    # The answer came gzip-encoded and went to the client decoded, as it is stored.
    assert answer.status_code == 200
    assert "content-encoding" not in answer.headers
    assert answer.content == upstream_body
    [interaction] = load_cassette(out).interactions
    assert interaction.response is not None
    assert "content-encoding" not in {k.lower() for k in interaction.response.headers}


def test_the_proxy_reads_the_environment_s_proxy_for_its_upstream_once(
    monkeypatch: pytest.MonkeyPatch,
):
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")

    assert environment_proxy("https://api.openai.com") == "http://proxy.internal:3128"
    assert environment_proxy("http://127.0.0.1:8080") is None  # no HTTP_PROXY
    monkeypatch.setenv("NO_PROXY", "api.openai.com")
    assert environment_proxy("https://api.openai.com") is None
