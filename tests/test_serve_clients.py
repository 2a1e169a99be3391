"""Clients in other languages against ``pytest-toolnexus serve``: curl, the official ``openai``
npm package on Node, and Java's ``java.net.http.HttpClient``.

curl's pieces are timed from the moment the response's headers reached it, against their
recorded offsets less the recorded time of the headers: what a client spends before its
request reaches the server is the client's. Node's and Java's first response costs their
runtime tens of milliseconds of its own (loading and compiling the code that reads it) after
the bytes came, so their pieces are timed from the first word, against the recorded gaps.
Timing is asserted the way a loaded two-core machine allows: never early (the server holds
each piece until its recorded offset), never grossly late, and the typical piece within the
20 ms the issue asks.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from pytest_toolnexus import build
from tests.support.node_packages import npm_package
from tests.support.serve_cli import serving

CLIENTS = Path(__file__).parent / "support" / "clients"
ASKED = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]}
WORDS = ["alpha ", "bravo ", "charlie ", "delta ", "echo"]
CADENCE = build.Cadence(ttft=0.3, gap=0.15, headers=0.05)
# Each word's recorded offset from the recorded arrival of the headers, in seconds.
DUE = [0.25, 0.4, 0.55, 0.7, 0.85]
OPENAI_NPM = "7"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "cassettes"
    build.build_cassette(
        root / "chat.msgpack",
        [build.openai_chat("Hello from the cassette.", stream=False, request_body=ASKED)],
    )
    build.build_cassette(
        root / "stream.msgpack",
        [
            build.openai_chat(
                "".join(WORDS), cadence=CADENCE, request_body={**ASKED, "stream": True}
            )
        ],
    )
    return root


def _on_time(arrivals: list[float], due: list[float] = DUE) -> None:
    late = [got - want for got, want in zip(arrivals, due, strict=True)]
    assert min(late) >= -0.005, f"a piece came before its recorded offset: {late}"
    assert max(late) <= 0.25, f"a piece came far after its recorded offset: {late}"
    assert statistics.median(late) <= 0.02, f"pieces came late: {late}"


def _content(chunk: dict[str, list[dict[str, dict[str, str]]]]) -> str | None:
    """A chat chunk's text delta (the last chunk, with the usage, has no choices)."""
    return chunk["choices"][0]["delta"].get("content") if chunk["choices"] else None


def test_curl_sees_sse_events_at_their_offsets(folder: Path):
    if shutil.which("curl") is None:
        pytest.skip("curl is not on PATH")
    with serving([folder]) as served:
        curl = subprocess.Popen(
            [
                "curl",
                "-sNi",  # -i: the status line shows when the headers came
                "-H",
                "content-type: application/json",
                "-d",
                json.dumps({**ASKED, "stream": True}),
                f"{served.url}/c/stream/v1/chat/completions",
            ],
            stdout=subprocess.PIPE,
        )
        assert curl.stdout is not None
        seen = []
        headers_at = None
        for line in curl.stdout:
            now = time.perf_counter()
            if line.startswith(b"HTTP/1.1 200"):
                headers_at = now
            if line.startswith(b"data: {"):
                content = _content(json.loads(line[6:]))
                if content:
                    assert headers_at is not None
                    seen.append((now - headers_at, content))
        assert curl.wait(timeout=30) == 0

    assert [word for _, word in seen] == WORDS
    _on_time([t for t, _ in seen])


def _node(mode: str, url: str) -> list[dict[str, object]]:
    folder = npm_package("openai", OPENAI_NPM)
    done = subprocess.run(
        ["node", str(CLIENTS / "openai_client.cjs"), mode, url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NODE_OPENAI": str(folder)},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_node_openai_replays_a_chat_completion(folder: Path):
    with serving([folder]) as served:
        [reply] = _node("chat", f"{served.url}/c/chat/v1")

    assert reply["content"] == "Hello from the cassette."


def _from_first(arrivals: list[float]) -> None:
    """Each piece's time from the first's, against the recorded gaps."""
    _on_time([t - arrivals[0] for t in arrivals], [d - DUE[0] for d in DUE])


def test_node_openai_streams_chunks_at_the_recorded_offsets(folder: Path):
    with serving([folder]) as served:
        chunks = _node("stream", f"{served.url}/c/stream/v1")

    assert [c["content"] for c in chunks] == WORDS
    _from_first([float(c["t"]) for c in chunks])  # type: ignore[arg-type]


def test_node_openai_retries_a_429_then_gets_the_recorded_200(folder: Path):
    with serving([folder]) as served:
        httpx.post(
            f"{served.url}/_toolnexus/faults",
            json={
                "cassette": "chat",
                "faults": [{"kind": "prepend", "status": 429, "retry_after": "0.3"}],
            },
        ).raise_for_status()
        [reply] = _node("retry", f"{served.url}/c/chat/v1")
        report = httpx.get(f"{served.url}/_toolnexus/report", params={"cassette": "chat"}).json()

    assert reply["content"] == "Hello from the cassette."
    assert reply["attempts"] == 2
    assert float(reply["t"]) >= 0.3  # type: ignore[arg-type]  # it waited as Retry-After said
    assert [(r["status"], r["faults"]) for r in report["requests"]] == [
        (429, ["prepended 429, Retry-After: 0.3"]),
        (200, []),
    ]


def test_node_openai_sees_a_miss_as_a_490_it_does_not_retry(folder: Path):
    with serving([folder]) as served:
        # The chat cassette's one answer is used up by the first call; the second misses.
        _node("retry", f"{served.url}/c/chat/v1")
        folder_npm = npm_package("openai", OPENAI_NPM)
        done = subprocess.run(
            ["node", str(CLIENTS / "openai_client.cjs"), "retry", f"{served.url}/c/chat/v1"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "NODE_OPENAI": str(folder_npm)},
            check=False,
        )
        report = httpx.get(f"{served.url}/_toolnexus/report", params={"cassette": "chat"}).json()

    [failure] = [json.loads(line) for line in done.stdout.splitlines()]
    assert failure["status"] == 490
    assert "already played" in str(failure["error"])
    assert len(report["requests"]) == 1  # the miss was not retried (maxRetries is 2)
    assert len(report["misses"]) == 1


def test_java_http_client_streams_events_at_their_offsets(folder: Path):
    if shutil.which("java") is None:
        pytest.skip("java is not on PATH: the Java proof of serve needs a JDK 11 or later")
    with serving([folder]) as served:
        done = subprocess.run(
            ["java", str(CLIENTS / "StreamClient.java"), f"{served.url}/c/stream/v1"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "status 200"
    seen = []
    for line in lines[1:]:
        seconds, data = line.split(" ", 1)
        if data.startswith("{"):
            content = _content(json.loads(data))
            if content:
                seen.append((float(seconds), content))
    assert [word for _, word in seen] == WORDS
    _from_first([t for t, _ in seen])
