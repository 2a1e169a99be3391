"""A small project for the run report's tests: four tests that replay a stream, retry a 429
after sleeping, miss, and record from the emulator, with the cassettes they replay built here
with known times, so each timeline can be checked against the numbers written below."""

from __future__ import annotations

from pathlib import Path

from pytest_toolnexus import (
    Cassette,
    Headers,
    Interaction,
    RecordedError,
    RecordedRequest,
    RecordedResponse,
)
from pytest_toolnexus._store.cassette import JsonBody, SseBody

URL = "https://api.example.invalid/v1/chat/completions"
FAKE_KEY = "sk-proj-" + "Qz7_" * 6  # built at run time: no secret-shaped literal in the source
EVENT_TIMES = [120.0, 480.5, 900.0]
HEADERS_AT, END_AT = 80.0, 910.0

TESTS = """
import os
import time

import httpx
import pytest

URL = "https://api.example.invalid/v1/chat/completions"


def ask(text, url=URL):
    with httpx.Client() as client:
        body = {"model": "m", "stream": True, "q": text}
        with client.stream("POST", url, json=body) as response:
            return response.status_code, [line for line in response.iter_lines() if line]


@pytest.mark.cassette
def test_stream():
    status, lines = ask("hello")
    assert status == 200
    assert sum(line.startswith("data:") for line in lines) == 3


@pytest.mark.cassette
def test_retry_then_stream():
    assert ask("hello")[0] == 429
    time.sleep(1.0)
    assert ask("hello")[0] == 200


@pytest.mark.cassette
def test_miss():
    ask("something else entirely")


@pytest.mark.cassette(record="once")
def test_recorded():
    with httpx.Client() as client:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        response = client.post(os.environ["EMULATOR_URL"] + "/v1/chat/completions", json=body)
    assert response.status_code == 200
"""


def _request(text: str) -> RecordedRequest:
    return RecordedRequest(
        "POST",
        URL,
        Headers([("content-type", "application/json")]),
        JsonBody({"model": "m", "stream": True, "q": text}),
    )


def stream_interaction() -> Interaction:
    events = [
        {"t": EVENT_TIMES[0], "data": {"choices": [{"delta": {"content": "Hel"}}]}},
        {
            "t": EVENT_TIMES[1],
            "event": "delta",
            "data": {"choices": [{"delta": {"content": "lo"}}]},
        },
        {"t": EVENT_TIMES[2], "text": "[DONE]"},
    ]
    return Interaction(
        _request("hello"),
        RecordedResponse(
            200,
            Headers([("content-type", "text/event-stream"), ("x-debug", FAKE_KEY)]),
            SseBody(events),
            t_headers=HEADERS_AT,
            t_end=END_AT,
        ),
    )


def too_many() -> Interaction:
    return Interaction(
        _request("hello"),
        RecordedResponse(
            429,
            Headers([("content-type", "application/json"), ("retry-after", "1")]),
            JsonBody({"error": {"message": "slow down"}}),
            t_headers=30.0,
            t_end=40.0,
        ),
    )


def timed_out() -> Interaction:
    """A request whose connection timed out after 5 s: no response, an error at its time."""
    return Interaction(
        _request("hello"), error=RecordedError("ConnectTimeout", "timed out", 5000.0)
    )


def make_project(root: Path) -> None:
    """The test file and the cassettes its replaying tests read, under ``root``."""
    (root / "test_app.py").write_text(TESTS)
    folder = root / "cassettes" / "test_app"
    for name, interactions in (
        ("test_stream", [stream_interaction()]),
        ("test_retry_then_stream", [too_many(), stream_interaction()]),
        ("test_miss", [stream_interaction()]),
    ):
        # Written unscanned: the report must mask the fake key a cassette may hold.
        Cassette(folder / f"{name}.msgpack", interactions, {}).save(unsafe_verbatim=True)
